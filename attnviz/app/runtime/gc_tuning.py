"""Keep Streamlit's garbage collection after every run cheap.

Streamlit runs a full collection (`gc.collect(2)`, `runner.postScriptGC`) after every script
run. With numpy, pandas, plotly and streamlit loaded, that walks about 120,000 long-lived
objects (the modules, their classes and functions) each time: about 0.05–0.08 s of CPU per
page view, a third of what a view costs the server. Those objects live as long as the process,
so they are moved out of the collector's sight with `gc.freeze()`; what sessions make later is
collected as before.

Frozen objects are still freed by reference counting, but garbage in reference cycles at the
moment of freezing would stay for good. So the freeze happens at the start of a run, before
the session builds anything, right after a collection, and only after a big import (the
pages' modules are loaded together at the first run; torch, on the Train page, later): a few
times in a server's life, never once per session. The server's process only: importing attnviz
changes nothing in the collector, and tests that run the app in their own process (AppTest)
switch the freeze off (``set_enabled(False)``, tests/conftest.py), or it would keep every
earlier test's objects for the rest of the session.
"""

from __future__ import annotations

import gc
import importlib
import sys
import threading

# What the pages use, loaded at the first run so that one freeze covers it (torch, for the
# Train page only, is left to its first visit).
PRELOAD = ("pandas", "plotly.graph_objects", "attnviz.plot.figures",
           "attnviz.plot.model_figures", "attnviz.plot.experiment_figures",
           "attnviz.plot.reading_figures", "attnviz.plot.diff_figures", "attnviz.io.report",
           "attnviz.app.shared.baseline", "attnviz.app.shared.compare_view",
           "attnviz.app.inputs.editor", "attnviz.app.experiments.experiments_view",
           "attnviz.app.pretrained.pretrained_view", "attnviz.app.reading.reading_view",
           "attnviz.app.steps.steps_view", "attnviz.app.shared.toy_view")
MIN_NEW_MODULES = 100        # a big import; plotly's lazily loaded validators do not count

_lock = threading.Lock()
_modules_frozen = 0
_enabled = True


def set_enabled(on: bool) -> bool:
    """Whether `freeze_long_lived` freezes (on by default: a server's process); the previous
    setting."""
    global _enabled
    previous, _enabled = _enabled, bool(on)
    return previous


def freeze_long_lived() -> bool:
    """Call at the start of a run: the first time, load the pages' modules, collect, and
    freeze every object alive; later, the same after a big import. True when it froze."""
    global _modules_frozen
    if not _enabled:
        return False
    with _lock:
        if _modules_frozen == 0:
            for name in PRELOAD:
                importlib.import_module(name)
        if len(sys.modules) - _modules_frozen < MIN_NEW_MODULES:
            return False
        gc.collect()
        gc.freeze()
        _modules_frozen = len(sys.modules)
        return True

