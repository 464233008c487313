"""Streamlit's collection after every run walks only what sessions made, not the modules."""

import gc
import importlib
import sys
import weakref

from attnviz.ui import gc_tuning


class _Node:
    pass


def test_freezing_happens_when_modules_were_imported_and_later_cycles_are_still_collected():
    gc_tuning.freeze_after_imports()
    assert gc.get_freeze_count() > 0
    assert not gc_tuning.freeze_after_imports()          # nothing new imported: no work
    name = next(m for m in ("colorsys", "sndhdr", "this_is_not", "wave", "netrc")
                if m not in sys.modules and importlib.util.find_spec(m))
    importlib.import_module(name)
    frozen = gc.get_freeze_count()
    assert gc_tuning.freeze_after_imports() and gc.get_freeze_count() >= frozen

    a, b = _Node(), _Node()                              # a cycle made after the freeze:
    a.other, b.other = b, a                              # garbage the collector still finds
    alive = weakref.ref(a)
    del a, b
    gc.collect()
    assert alive() is None
