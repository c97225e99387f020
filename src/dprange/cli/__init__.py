"""The ``dprange`` command line: one module per command group, all options from the registry."""

from .app import main

__all__ = ["main"]
