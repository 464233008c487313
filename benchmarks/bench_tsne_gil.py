"""Whether a 10,000-point t-SNE on the server holds up the other learners (issue 39: "never
blocking other learners"): ``atlas_map.tsne`` of 10,000 random 64-d points runs in a thread, as
the Head atlas page's t-SNE runs on a thread of the server's heavy-work queue, while the main
thread does what a page's script does between its numpy calls (a 5 ms sleep, then a little pure
Python) and records how late each wake-up came. scikit-learn's Barnes-Hut loops release the
GIL; a long stall would show here as a large delay.

    python benchmarks/bench_tsne_gil.py

Numbers only; nothing is asserted. One BLAS thread. ``bench_load.py --tsne`` measures the
page's own t-SNE (768 points) against a real observer.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_k] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from attnviz.models.readers import atlas_map  # noqa: E402


def main() -> None:
    points = np.random.default_rng(0).standard_normal((10_000, 64))
    done, took = threading.Event(), {}

    def work() -> None:
        start = time.perf_counter()
        atlas_map.tsne(points)
        took["tsne"] = time.perf_counter() - start
        done.set()

    late = []
    thread = threading.Thread(target=work)
    thread.start()
    while not done.is_set():
        start = time.perf_counter()
        time.sleep(0.005)
        sum(i * i for i in range(2000))                # a little pure Python, as a page does
        late.append(time.perf_counter() - start - 0.005)
    thread.join()
    ms = np.array(late) * 1000
    print(f"t-SNE of 10,000 points in a thread: {took['tsne']:.1f} s; a Python thread beside "
          f"it: {len(ms)} wake-ups, delay p50 {np.percentile(ms, 50):.2f} ms, p95 "
          f"{np.percentile(ms, 95):.2f} ms, p99 {np.percentile(ms, 99):.2f} ms, max "
          f"{ms.max():.1f} ms; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
