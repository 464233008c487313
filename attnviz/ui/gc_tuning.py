"""Keep Streamlit's garbage collection after every run cheap.

Streamlit runs a full collection (`gc.collect(2)`, `runner.postScriptGC`) after every script
run. With numpy, pandas, plotly and streamlit loaded, that walks about 120,000 long-lived
objects (the modules, their classes and functions) each time: about 0.05–0.08 s of CPU per
page view, a third of what a view costs the server. Those objects live as long as the process,
so after the app has imported something new they are moved out of the collector's sight with
`gc.freeze()`; what a session makes later is collected as before. (Objects frozen are still
freed by reference counting; only garbage in cycles at the moment of freezing would stay, so
freezing follows a collection, and happens only when new modules were imported: a few times
in a server's life.)
"""

from __future__ import annotations

import gc
import sys
import threading

_lock = threading.Lock()
_modules_frozen = 0


def freeze_after_imports() -> bool:
    """Collect, then freeze every object alive, if modules were imported since the last time.
    True when it froze."""
    global _modules_frozen
    with _lock:
        if len(sys.modules) <= _modules_frozen:
            return False
        gc.collect()
        gc.freeze()
        _modules_frozen = len(sys.modules)
        return True
