"""Modules imported on first use, so that ``import dprange`` and ``dprange --help`` stay cheap.

``optimize = lazy_module("scipy.optimize")`` binds a stand-in whose first attribute access
imports the module (scipy.optimize is slow to import, and most runs never call it: 0.3 s in
docs/optimized.md, "The dense release from the cache").

The package's public names are imported on first use the same way (``dprange/__init__.py``),
and the modules that fill the registries when the first registry is read
(:func:`import_before_registry_reads`).
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


#: The modules whose import registers entries in dprange.registry (the package's public
#: surface, named by dprange/__init__.py), not yet imported.
_registering_modules: list[str] = []


def import_before_registry_reads(modules) -> None:
    """Name the modules that register mechanisms, workloads and methods on import: they are
    imported at the first read of any registry (:func:`import_registering_modules`).  The
    package's ``__init__`` is lazy (``import dprange`` and ``dprange --help`` load no numpy), so
    the registries fill only when read, whatever was imported before: ``auto``, the command's
    choices and the docs see every entry, as when ``__init__`` imported everything."""
    _registering_modules[:] = list(modules)


def import_registering_modules() -> None:
    """Import the modules named by :func:`import_before_registry_reads`, once (a read during
    that import, by a module that reads a registry as it loads, sees the entries so far)."""
    pending, _registering_modules[:] = list(_registering_modules), []
    for name in pending:
        importlib.import_module(name)
