"""The server process's threads: one BLAS thread, the engine's blocks on as many, the caches'
memory sweeper. Switched on by the app when it starts (``start_once``, from
attnviz.app.runtime.startup); importing attnviz starts none of them, so a notebook keeps numpy's
own setting, runs a large trace's blocks on every core and has no thread of ours.

numpy's OpenBLAS starts one thread per core. A class's server runs one Streamlit process per
core (docs/deploy.md), and SmolLM2's forward passes are many small matrix products: under load a
second BLAS thread mostly waits for the scheduler, and generation measured 10–20× slower with
two threads than with one (benchmarks/bench_decoder.py, docs/benchmarks.md). The app
therefore limits BLAS, and the engine's element-wise blocks (attnviz.core.engine.set_threads),
to ``ATTNVIZ_BLAS_THREADS`` threads (default 1) once, when it starts, and starts the sweeper that
gives the shared caches' idle memory back (attnviz.app.runtime.sweeper)."""

from __future__ import annotations

import os

from attnviz.core import engine
from attnviz.app.runtime import sweeper

_limited = False


def blas_threads() -> int:
    """The number of BLAS threads the app runs with: ATTNVIZ_BLAS_THREADS, else 1."""
    try:
        return max(1, int(os.environ.get("ATTNVIZ_BLAS_THREADS", "1")))
    except ValueError:
        return 1


def start_once() -> None:
    """Limit every loaded BLAS library (numpy's OpenBLAS) and the engine's blocks to
    `blas_threads()` and start the caches' sweeper, once per process."""
    global _limited
    if _limited:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=blas_threads(), user_api="blas")
    engine.set_threads(blas_threads())
    sweeper.start_sweeper()
    _limited = True
