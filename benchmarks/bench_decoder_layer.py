"""Two checkouts of attnviz side by side on SmolLM2 (issue 29.1: the one Llama layer must not
make the model slower): ``run`` of a 64-token prompt, greedy generation of 32 tokens after it,
and the ranking of the 270 single heads (``single_head_logprobs``) at 12 and 64 tokens.

    python benchmarks/bench_decoder_layer.py --before /path/to/other/checkout
                                             [--rounds 4] [--threads 1] [--tokens 12 64]

Each checkout runs in fresh processes (the package has one name, so two versions cannot share
a process), in turns — before, this one; this one, before; … — so both see the same load on
a shared machine. A process loads the model, warms up (a run, a generation), then times each
piece (run 5 times, generation 3, each ranking once). Printed: each round's fastest times, then
over every round's samples the minimum and median wall-clock seconds and the median CPU seconds
(process time: with one BLAS thread, less moved by other processes than the wall clock; the
minimum, the least disturbed sample), and the ratios this checkout / before. Numbers only;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, statistics, sys, time
root, tokens = sys.argv[1], [int(t) for t in sys.argv[2].split(",")]
sys.path.insert(0, root)
import numpy as np
from attnviz.models.decoders.decoder import DecoderModel
from attnviz.models.decoders.decoder_reading import single_head_logprobs

m = DecoderModel.load()
prompt = {prompt!r}
m.run(prompt)
m.generate(prompt, max_new_tokens=4, stop_at_eos=False)


def timed(compute):
    w, c = time.perf_counter(), time.process_time()
    compute()
    return time.perf_counter() - w, time.process_time() - c


out = {{}}
out["run 64"] = [timed(lambda: m.run(prompt)) for _ in range(5)]
out["generate 32"] = [timed(lambda: m.generate(prompt, max_new_tokens=32, stop_at_eos=False))
                      for _ in range(3)]
words = ("the cat sat on a mat while river stones kept singing about seven old lanterns "
         "because nobody could remember which door opened toward the quiet garden").split()
for n in tokens:
    text = m.decode(m.encode(" ".join(words[i % len(words)] for i in range(4 * n)))[:n])
    run = m.run(text)
    target = int(np.argmax(run.logits[-1]))
    out[f"rank 270 heads, {{n}} tokens"] = [timed(lambda: single_head_logprobs(m, run, [target]))]
print(json.dumps(out))
"""


def worker(root: Path, tokens: list[int], prompt: str) -> dict:
    script = WORKER.format(prompt=prompt)
    done = subprocess.run([sys.executable, "-c", script, str(root),
                           ",".join(map(str, tokens))],
                          check=True, capture_output=True, text=True, cwd=root)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True,
                        help="the other checkout (e.g. `git archive <commit> | tar -x -C DIR`)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads (0: the library's default)")
    parser.add_argument("--tokens", type=int, nargs="+", default=[12, 64],
                        help="prompt lengths of the head ranking")
    args = parser.parse_args()
    if args.threads:                         # the workers inherit it before numpy loads
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
    roots = {"before": args.before.resolve(), "after": ROOT}
    print(f"load average before: {os.getloadavg()}; before = {roots['before']}, "
          f"after = {ROOT}; BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    sys.path.insert(0, str(ROOT))
    from bench_decoder import prompt_of                      # bench_decoder's 64 tokens
    from attnviz.models.decoders.decoder import DecoderModel

    prompt = prompt_of(DecoderModel.load(), 64)
    times = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for name in order:
            times[name].append(worker(roots[name], args.tokens, prompt))
        print(f"round {r + 1} ({order[0]} first), wall-clock s, before → after: " + "; ".join(
            f"{piece} {min(w for w, _ in times['before'][-1][piece]):.2f} → "
            f"{min(w for w, _ in times['after'][-1][piece]):.2f}"
            for piece in times["before"][-1]), flush=True)
    print(f"all {args.rounds} rounds' samples: wall-clock s (min, median) and CPU s (median); "
          f"ratios after / before")
    for piece in times["before"][0]:
        stats = {}
        for name in times:
            samples = [s for t in times[name] for s in t[piece]]
            stats[name] = (min(w for w, _ in samples), statistics.median(w for w, _ in samples),
                           statistics.median(c for _, c in samples), len(samples))
        b, a = stats["before"], stats["after"]
        print(f"  {piece} ({b[3]} each): before {b[0]:.3f}, {b[1]:.3f} | {b[2]:.3f}; after "
              f"{a[0]:.3f}, {a[1]:.3f} | {a[2]:.3f}; ratio min {a[0] / b[0]:.3f}, median "
              f"{a[1] / b[1]:.3f}, CPU {a[2] / b[2]:.3f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
