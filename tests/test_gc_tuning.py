"""Streamlit's collection after every run walks only what sessions made, not the modules; the
freeze is the server's (tests/test_threads.py checks a fresh app process does it), never this
test process's, where AppTest runs the app (tests/conftest.py switches it off)."""

import gc
import sys
import weakref

import pytest

from attnviz.app.runtime import gc_tuning


class _Node:
    pass


@pytest.fixture
def as_a_server(monkeypatch):
    """The freeze switched on, as in a fresh server process; undone when the test ends."""
    monkeypatch.setattr(gc_tuning, "_modules_frozen", 0)
    previous = gc_tuning.set_enabled(True)
    try:
        yield
    finally:
        gc_tuning.set_enabled(previous)
        gc.unfreeze()


@pytest.mark.slow
def test_the_pages_modules_are_frozen_once_and_later_cycles_are_still_collected(as_a_server):
    gc_tuning.freeze_long_lived()
    assert gc.get_freeze_count() > 0
    assert all(name in sys.modules for name in gc_tuning.PRELOAD)
    frozen = gc.get_freeze_count()
    assert not gc_tuning.freeze_long_lived()             # nothing big imported since: no work
    # nothing frozen again; the count may fall meanwhile: a frozen object another thread of
    # this process lets go of leaves the permanent generation (CI saw 2 fewer under load)
    assert gc.get_freeze_count() <= frozen

    a, b = _Node(), _Node()                              # a cycle made after the freeze:
    a.other, b.other = b, a                              # garbage the collector still finds
    alive = weakref.ref(a)
    del a, b
    gc.collect()
    assert alive() is None


def test_switched_off_an_app_run_freezes_nothing(monkeypatch):
    """As in this test process (conftest): the app's run asks, and nothing is frozen."""
    monkeypatch.setattr(gc_tuning, "_modules_frozen", 0)
    previous = gc_tuning.set_enabled(False)
    try:
        assert not gc_tuning.freeze_long_lived()
    finally:
        gc_tuning.set_enabled(previous)
    assert gc.get_freeze_count() == 0
