"""Gemma 3 270M's budgets (issue 37), each measured in this one run, one BLAS thread:

    python benchmarks/bench_gemma3.py [--repeats 3] [--skip-convert] [--skip-memory]
                                      [--decode-only]

- first conversion (a fresh process over an empty cache: the GGUF read, dequantised, its
  tokenizer built, the cache written): budget ≤ 90 s;
- load from the cache (a fresh process: import, ``DecoderModel.load(name="gemma3-270m")``):
  budget ≤ 3 s;
- ``run`` of 64 tokens (every layer traced, all attentions and logits) against transformers'
  eager forward with ``output_attentions=True`` on the same ids, interleaved, median: budget
  ratio ≤ 0.5;
- decoding (first, before transformers is loaded: as the app runs it), one new token at a
  time with the KV cache, against the float32 memory-bandwidth ceiling: the bytes a new
  token reads (every layer's matrices and the 262,144 × 640 output matrix) ÷ the bandwidth
  numpy measures copying a 512 MB array here: budget ≥ 80 %;
- the logit lens of 64 tokens (19 rows over the 262,144-token vocabulary) against the bare
  matrix products it needs (19 × (64 × 640) @ (640 × 262,144)), interleaved: budget ≤ 1.5×;
- resident memory of one process holding MiniLM, SmolLM2 and Gemma 3 (VmRSS): budget ≤ 2.5 GB.
Numbers only; nothing is asserted. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

LOAD = """
import json, os, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
from attnviz.models.decoders.decoder import DecoderModel
m = DecoderModel.load(name="gemma3-270m")
print(json.dumps({{"seconds": time.perf_counter() - t0, "outcome": m.cache_report.outcome}}))
"""


def fresh(env: dict | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", LOAD.format(root=str(ROOT))], check=True,
                         capture_output=True, text=True, env={**os.environ, **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def prompt_ids(model, n: int):
    words = ("The animal didn't cross the street because it was too tired, and the river "
             "kept flowing past the quiet town while everyone slept. ") * 8
    return model.encode(words)[:n]


def timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def bandwidth() -> float:
    """Bytes per second numpy copies a 512 MB float32 array (read once, written once: the
    copy moves 2 × 512 MB), best of 3."""
    import numpy as np

    a = np.ones(128 * 1024 * 1024, np.float32)
    b = np.empty_like(a)
    best = min(timed(lambda: np.copyto(b, a)) for _ in range(3))
    read = min(timed(a.sum) for _ in range(3))
    print(f"bandwidth: a copy {2 * a.nbytes / best / 1e9:.1f} GB/s (read and write); a read "
          f"alone (numpy's sum) {a.nbytes / read / 1e9:.1f} GB/s")
    return 2 * a.nbytes / best


def decode(m, text: str, repeats: int) -> None:
    """Tokens per second generating 32 tokens after `text` (the prefill's time taken off)
    against the bandwidth ceiling: the bytes a new token reads ÷ a copy's bandwidth."""
    import numpy as np

    new = 32
    m.generate(text, max_new_tokens=2)             # first use: the pieces' tables built
    made = [timed(lambda: m.generate(text, max_new_tokens=new, stop_at_eos=False))
            for _ in range(repeats)]
    prefill = [timed(lambda: m.next_token_logprobs(text)) for _ in range(repeats)]
    per_token = (statistics.median(made) - statistics.median(prefill)) / (new - 1)
    c = m.config
    weights = sum(np.asarray(getattr(b_, n)).nbytes for b_ in m._blocks
                  for n in ("w_qkv", "gate_up", "down")) + \
        sum(b_.attention.w_o.nbytes for b_ in m._blocks) + c.vocab_size * c.d_model * 4
    ceiling = bandwidth() / weights
    print(f"decode: {1 / per_token:.1f} tokens/s; bytes per token {weights / 1e6:.0f} MB; "
          f"bandwidth ceiling {ceiling:.1f} tokens/s; {100 * (1 / per_token) / ceiling:.0f} % of "
          f"it (budget 80 %)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-convert", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--decode-only", action="store_true",
                        help="only the decoding budget (a quick look; the others skipped)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")

    if not (args.skip_convert or args.decode_only):
        with tempfile.TemporaryDirectory() as cache:
            first = fresh({"ATTNVIZ_CACHE_DIR": cache})
        print(f"first conversion (fresh process, empty cache): {first['seconds']:.1f} s "
              f"({first['outcome']}; budget 90 s)")
    fresh()                                           # the default cache made, if it was not
    if not args.decode_only:
        loads = [fresh()["seconds"] for _ in range(args.repeats)]
        print(f"load from the cache (fresh process): median {statistics.median(loads):.2f} s "
              f"(budget 3 s)")

    import numpy as np
    import torch

    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM

    from attnviz.models.decoders.decoder import DecoderModel

    m = DecoderModel.load(name="gemma3-270m")
    ids = prompt_ids(m, 64)
    text = m.decode(ids[1:])                       # BOS is added again by run
    assert len(m.encode(text)) == 64, len(m.encode(text))
    decode(m, text, args.repeats)                  # as the app runs it: no reference loaded
    if args.decode_only:
        return
    ref = AutoModelForCausalLM.from_pretrained(str(m.path.parent), gguf_file=m.path.name,
                                               attn_implementation="eager",
                                               dtype=torch.float32).eval()
    ours, theirs = [], []
    with torch.no_grad():
        for _ in range(args.repeats):
            ours.append(timed(lambda: m.run(text)))
            theirs.append(timed(lambda: ref(torch.tensor([ids]), output_attentions=True)))
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"run 64 tokens: attnviz {a:.3f} s, transformers eager {b:.3f} s, ratio {a / b:.2f} "
          f"(budget 0.5)")

    c = m.config
    rows = c.num_layers + 1
    h = np.random.default_rng(0).standard_normal((64, c.d_model)).astype(np.float32)
    lens_t, bare_t = [], []
    for _ in range(args.repeats):
        lens_t.append(timed(lambda: m.logit_lens(text)))
        bare_t.append(timed(lambda: [h @ m._embed.T for _ in range(rows)]))
    a, b = statistics.median(lens_t), statistics.median(bare_t)
    print(f"logit lens 64 tokens: {a:.2f} s; the {rows} bare products {b:.2f} s; ratio "
          f"{a / b:.2f} (budget 1.5)")

    if not args.skip_memory:
        script = f"""
import sys; sys.path.insert(0, {str(ROOT)!r})
from attnviz.models.encoder.pretrained import PretrainedModel
from attnviz.models.decoders.decoder import DecoderModel
PretrainedModel.load(); DecoderModel.load(); DecoderModel.load(name="gemma3-270m")
for line in open("/proc/self/status"):
    if line.startswith(("VmRSS", "VmHWM")): print(line.strip())
"""
        out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                             text=True).stdout
        print("one process with MiniLM, SmolLM2 and Gemma 3 loaded: "
              + "; ".join(out.split("\n")).strip("; ") + " (budget VmRSS 2.5 GB)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
