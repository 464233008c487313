"""Nothing in attnviz/app acts when imported (issue 36 item 5): the language source and the
training pool's log are switched on by the app's start-up (attnviz.app.runtime.startup), beside the
threads (tests/test_threads.py checks those in a fresh app process); the memory sweeper is the
server's runtime (attnviz.app.runtime.sweeper), not the core's."""

import ast
import logging
import time
from pathlib import Path

import numpy as np

from attnviz import i18n

APP = Path(__file__).resolve().parents[1] / "attnviz" / "app"
DECLARATIONS = {"keys.py": {"_section", "_check"}}     # keys.py's table declares, then checks


def test_no_module_of_the_app_calls_anything_at_its_top_level():
    """A call standing alone at a module's top level acts when the module is imported (the
    language source and the training log did)."""
    acting = []
    for path in sorted(APP.rglob("*.py")):
        allowed = DECLARATIONS.get(path.name, set())
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                name = ast.unparse(node.value.func)
                if name not in allowed:
                    acting.append(f"{path.relative_to(APP)}:{node.lineno} {name}()")
    assert acting == []


def test_the_start_up_points_the_language_at_the_session_and_logs_the_training_pool(
        monkeypatch):
    import streamlit as st

    from attnviz.app.runtime import startup, threads
    from attnviz.app.shared import language
    from attnviz.models.trainer import training

    # the threads' part would limit this process's BLAS for the tests after it: not here
    monkeypatch.setattr(threads, "start_once", lambda: None)
    monkeypatch.setattr(startup, "_started", False)
    startup.start_once()
    startup.start_once()                                   # once: a second call adds nothing
    previous = i18n.set_language_source(None)
    try:
        assert previous is language._session_language
    finally:
        i18n.set_language_source(previous)
    log = logging.getLogger(training.log.name)
    ours = [h for h in log.handlers if type(h) is logging.StreamHandler]   # not pytest's capture
    assert len(ours) == 1 and not log.propagate
    assert ours[0].formatter._fmt == st.get_option("logger.messageFormat")


def test_the_sweeper_expires_the_idle_entries_of_every_cache():
    """The server's sweeper (attnviz.app.runtime.sweeper, moved out of core.cache) drops an entry
    nobody asked for within its cache's max_idle, and says it freed something."""
    from attnviz.app.runtime import sweeper
    from attnviz.core.cache import SizedCache

    cache = SizedCache(max_bytes=1 << 20, max_entries=4, max_idle=0.0)
    cache.get("k", lambda: np.zeros(1000))
    deadline = time.monotonic() + 1e-3
    while time.monotonic() <= deadline:                # wait until the entry is idle
        pass
    assert sweeper.sweep() is True
    assert "k" not in cache and cache.bytes == 0
