"""The Generate page's k-th "Next token" click, two ways (SmolLM2-135M-Instruct, greedy):

    python benchmarks/bench_generate_resume.py [--repeats 5] [--clicks 10 20 39]
                                               [--prompt "1, 2, 3, 4, 5,"]

- rerun: ``generate(prompt, max_new_tokens=k + 1)`` — what the page did before: every step
  from the prompt again;
- continue: ``generate_more(generation_of_k_tokens, 1)`` — what it does now: one prefill of the
  prompt and the k tokens (the KV cache rebuilt), then the new token.
Each pair is run in turns (rerun, continue, rerun, …) after a warm-up, with numpy's BLAS held
to 1 thread (threadpoolctl, as the app runs), the median of --repeats; prints both times and
their ratio, and the load average (the machine is shared). Numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_decoder import interleaved  # noqa: E402

from attnviz.models.decoders.decoder import DecoderModel  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clicks", type=int, nargs="+", default=[10, 20, 39])
    parser.add_argument("--prompt", default="1, 2, 3, 4, 5,",
                        help="counts on past 40 tokens without ending its answer")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    model = DecoderModel.load()
    print(f"prompt {args.prompt!r}: {len(model.encode(args.prompt))} tokens; "
          f"median of {args.repeats}, run in turns")
    with threadpool_limits(1):
        for k in args.clicks:
            made = model.generate(args.prompt, max_new_tokens=k, stop_at_eos=False)
            assert len(made.steps) == k

            def rerun():
                assert len(model.generate(args.prompt, max_new_tokens=k + 1,
                                          stop_at_eos=False).steps) == k + 1

            def resume():
                assert len(model.generate_more(made, 1).steps) == k + 1

            t = interleaved({"rerun": rerun, "continue": resume}, args.repeats)
            print(f"k = {k} (token {k + 1} after {k} made): rerun from the prompt "
                  f"{t['rerun']:.3f} s, continue by 1 {t['continue']:.3f} s, "
                  f"ratio {t['rerun'] / t['continue']:.1f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
