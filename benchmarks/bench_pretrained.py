"""Pretrained model (all-MiniLM-L6-v2) timings: load and trace.

    python benchmarks/bench_pretrained.py [--repeats 7]

Prints the cold load time (a fresh process: importing attnviz, then PretrainedModel.load()),
the cached load time (a second call in one process), and the median time of model.run — every
layer traced by the engine plus the layers around attention — for 16, 128 and 512 tokens.
Numbers only; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attnviz.models.encoder.pretrained import PretrainedModel  # noqa: E402

SIZES = (16, 128, 512)
TEXT = " ".join(f"Sentence {i}: the animal didn't cross the street because it was too tired."
                for i in range(60))               # ≈ 1000 word pieces, cut to each size

COLD_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import attnviz.models.encoder.pretrained
t1 = time.perf_counter()
model = attnviz.models.encoder.pretrained.PretrainedModel.load()
t2 = time.perf_counter()
model.trace("Hello world")
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "load": t2 - t1, "first_trace": t3 - t2}}))
"""


def cold_load() -> dict:
    """Import, load and first-trace times in a fresh Python process (nothing cached in memory)."""
    out = subprocess.run([sys.executable, "-c", COLD_SCRIPT.format(root=str(ROOT))],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def median_time(fn, repeats: int) -> float:
    fn()                                           # warm up (thread pool, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    cold = cold_load()
    print("cold start (fresh process): import attnviz.models.encoder.pretrained "
          f"{cold['import']:.3f} s, "
          f"PretrainedModel.load() {cold['load']:.3f} s, first trace {cold['first_trace']:.3f} s")
    model = PretrainedModel.load()
    cached = median_time(PretrainedModel.load, args.repeats)
    print(f"cached load (second call): {cached * 1e6:.1f} µs")
    print(f"model.run ({model.num_layers} layers × {model.num_heads} heads, "
          f"d_model {model.d_model}, float32), median of {args.repeats}:")
    for n in SIZES:
        assert len(model.tokenize(TEXT, max_tokens=n)) == n
        tokenize = median_time(lambda: model.encode(TEXT, max_tokens=n), args.repeats)
        run = median_time(lambda: model.run(TEXT, max_tokens=n), args.repeats)
        print(f"  {n:4d} tokens: {run * 1e3:8.1f} ms "
              f"(of which tokenising {tokenize * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
