"""Modules imported on first use, so that ``import dprange`` and ``dprange --help`` stay cheap.

``optimize = lazy_module("scipy.optimize")`` binds a stand-in whose first attribute access
imports the module (scipy.optimize is slow to import, and most runs never call it: 0.3 s in
docs/optimized.md, "The dense release from the cache").
"""

from __future__ import annotations

import importlib
from types import ModuleType


class _LazyModule:
    """Stands for the module ``name`` until an attribute is read, then imports it."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str):
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        if self._module is None:
            self._module = importlib.import_module(self._name)  # cost: the real import, once
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str):
    """A stand-in for ``importlib.import_module(name)`` that imports on first attribute use."""
    return _LazyModule(name)
