"""Engine speed and memory against torch.nn.MultiheadAttention, measured in one process.

    python benchmarks/bench_engine.py [--repeats 7]

For each n it interleaves attnviz.trace_attention and torch's forward (need_weights=True,
average_attn_weights=False) on the same float32 data, d_model 768, 12 heads, and prints the
ratio of their median times (≤ 1.3 is the budget at n = 512). Then it measures, in a fresh
process that runs only the trace, the peak memory of the n = 2048 trace (budget: 2 GB).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnviz  # noqa: E402

D_MODEL, HEADS = 768, 12
SIZES = (16, 128, 512, 2048)


def time_pair(n: int, repeats: int) -> tuple[float, float]:
    import torch

    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, D_MODEL)).astype(np.float32)
    w = attnviz.MultiHeadWeights.random(D_MODEL, HEADS, bias=True, dtype=np.float32)
    mha = w.to_torch().eval()
    xt = torch.from_numpy(x)

    def run_torch():
        with torch.no_grad():
            mha(xt, xt, xt, need_weights=True, average_attn_weights=False)

    def run_numpy():
        attnviz.trace_attention(x, w)

    run_torch(), run_numpy()  # warm up
    ours, theirs = [], []
    for _ in range(repeats):
        for fn, bucket in ((run_numpy, ours), (run_torch, theirs)):
            fn()  # untimed: absorbs the other library's worker threads still spinning
            t0 = time.perf_counter()
            fn()
            bucket.append(time.perf_counter() - t0)
    return statistics.median(ours), statistics.median(theirs)


PEAK_SCRIPT = """
import re, sys, numpy as np
sys.path.insert(0, {root!r})
import attnviz

def peak_mb():  # VmHWM: this process's peak resident memory (ru_maxrss survives exec)
    status = open("/proc/self/status").read()
    return int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1)) / 1024

x = np.random.default_rng(0).standard_normal(({n}, {d})).astype(np.float32)
w = attnviz.MultiHeadWeights.random({d}, {h}, dtype=np.float32)
before = peak_mb()
t = attnviz.trace_attention(x, w)
print(before, peak_mb())
"""


def peak_memory_mb(n: int) -> tuple[float, float]:
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", PEAK_SCRIPT.format(root=root, n=n, d=D_MODEL,
                                                                     h=HEADS)],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    import torch

    print(f"d_model {D_MODEL}, {HEADS} heads, float32, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), numpy {np.__version__}")
    print(f"{'n':>6} {'attnviz ms':>11} {'torch ms':>9} {'ratio':>6}")
    for n in SIZES:
        ours, theirs = time_pair(n, args.repeats if n < 2048 else max(3, args.repeats // 2))
        print(f"{n:>6} {ours * 1e3:>11.2f} {theirs * 1e3:>9.2f} {ours / theirs:>6.2f}"
              + ("   (budget ≤ 1.3)" if n == 512 else ""))
    before, after = peak_memory_mb(2048)
    print(f"n = 2048 trace, fresh process without torch: peak RSS {after:.0f} MB "
          f"(before the trace {before:.0f} MB; budget < 2048 MB)")


if __name__ == "__main__":
    main()
