"""A module named at a test file's top but imported by the first test that reads it: collection
stays free of what it imports (attnviz.models.trainer.toy brings torch, ~3 s)."""

from __future__ import annotations

import importlib


class LazyModule:
    """``toy = LazyModule("attnviz.models.trainer.toy")``: ``toy.train`` imports the real module the
    first time a test reads a public attribute, then is that module's own attribute (nothing is
    put in sys.modules but the real module). Names starting with ``_`` are not looked up:
    pytest's collector probes every module-level object for some (``__test__``,
    ``_mock_name``…); a test that needs a private name imports it from the module."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazily imported {self._name}>"
