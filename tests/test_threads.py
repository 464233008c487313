"""What the app switches on in its server process, and what importing attnviz leaves alone.

The app runs numpy's BLAS and the engine's blocks on one thread per server process, starts the
caches' memory sweeper and freezes its modules out of the collector (attnviz.app.runtime.threads,
attnviz.app.runtime.gc_tuning): checked in a fresh process that starts with two BLAS threads, after
one run of the app's script. A notebook that imports attnviz and traces gets none of it: no thread,
no freeze, the collector's thresholds as they were."""

import json
import os
import subprocess
import sys

import pytest

from tests.apptest_helpers import ROOT

pytestmark = pytest.mark.slow        # each test runs pages or processes: see tests/conftest.py

CODE = """
import gc, json, threading, numpy, threadpoolctl
from streamlit.testing.v1 import AppTest
from attnviz.core import engine
def blas():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
before = blas()
at = AppTest.from_file("app.py", default_timeout=300).run()
assert not at.exception, at.exception
print(json.dumps([before, blas(), engine._threads, gc.get_freeze_count() > 0,
                  sorted(t.name for t in threading.enumerate())]))
"""


def test_the_app_runs_blas_on_one_thread_sweeps_its_caches_and_freezes_its_modules():
    done = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    before, after, engine_threads, frozen, names = json.loads(
        done.stdout.strip().splitlines()[-1])
    assert before and all(n == 2 for n in before)        # numpy's own setting, as a notebook has
    assert after == [1] * len(before)
    assert engine_threads == 1
    assert frozen
    assert "attnviz-memory-sweeper" in names


NOTEBOOK = """
import gc, json, os, threading
import numpy as np
def threads():
    return len(os.listdir("/proc/self/task")), sorted(t.name for t in threading.enumerate())
before = threads(), gc.get_threshold(), gc.isenabled()
import attnviz
rng = np.random.default_rng(0)
w = attnviz.MultiHeadWeights.random(64, 4, seed=0)
small = attnviz.trace_attention(rng.standard_normal((5, 64)), w)
large = attnviz.trace_attention(rng.standard_normal((400, 64)), w, causal=True)  # blocked path
assert small.weights.shape == (4, 5, 5) and large.weights.shape == (4, 400, 400)
# a native library's worker may still be ending (seen once in ~5 runs here): a thread that was
# started and kept is still there after 3 s
import time
for _ in range(30):
    if threads() == before[0]:
        break
    time.sleep(0.1)
after = threads(), gc.get_threshold(), gc.isenabled()
print(json.dumps([before, after, gc.get_freeze_count()]))
"""


def test_importing_attnviz_and_tracing_start_no_thread_and_leave_the_collector_alone():
    env = {k: v for k, v in os.environ.items() if k != "ATTNVIZ_BLAS_THREADS"}
    done = subprocess.run([sys.executable, "-c", NOTEBOOK], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after, freeze_count = json.loads(done.stdout.strip().splitlines()[-1])
    assert after == before          # the same threads (OS and Python), thresholds, collector on
    assert freeze_count == 0
