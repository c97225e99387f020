"""dprange: range queries, histograms, CDFs and quantiles under differential privacy.

The central pipeline: ``Domain`` (public bins) -> mechanism (``Flat``, ``Hierarchical``,
``Wavelet``, ...) -> ``Release`` (answers with exact error bars).  The package is laid out by
pipeline stage (docs/architecture.md): each layer imports only the layers below it.

The names below are imported on first use (PEP 562 ``__getattr__``), so that ``import dprange``
and ``dprange --help`` load neither numpy nor scipy; the modules that fill the registries are
imported at the first read of a registry (:func:`dprange._lazy.import_before_registry_reads`).
A new public name goes in three places: the imports for type checkers, ``_EXPORTS`` and
``__all__`` (tests/test_init.py checks that they agree).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._lazy import import_before_registry_reads

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ imports these
    from . import workloads
    from .analysis import expected_error, max_error, select
    from .analysis.cdf_trees import best_structure
    from .analysis.grid import select_grid
    from .answers.grouped import GroupedRelease
    from .answers.release import Release, load_release
    from .answers.types import Answer
    from .api import quantiles, release, release_files, release_grid
    from .data_aware.auto_data import AutoData
    from .data_aware.auto_grid import AutoDataGrid
    from .data_aware.dawa import DAWA
    from .data_aware.grid import DAWAHilbert, HybridTree, KDTree
    from .data_aware.grids import AdaptiveGrid, UniformGrid
    from .data_aware.mwem import MWEM
    from .data_aware.nonnegative_grid import AutoTowardNonnegative, NonnegativeAuto
    from .data_aware.pruned_grid import PrunedAuto
    from .data_aware.pruned_hilbert import PrunedDAWAHilbert
    from .data_aware.structure_first import StructureFirst
    from .data_aware.support_grid import SupportAuto
    from .domain import Domain, ProductDomain
    from .errors import (
        ConvergenceWarning,
        DataError,
        DomainError,
        DPRangeError,
        ParameterError,
        ReportError,
        redacted,
        set_redaction,
    )
    from .inference.consistency import consistent_cdf
    from .mechanisms.base import Mechanism
    from .mechanisms.basic import Flat, Hierarchical, Wavelet
    from .mechanisms.fourier import FourierMarginals
    from .mechanisms.grid import KDHierarchy, Kronecker, Privelet, Quadtree, load_grid_release
    from .mechanisms.matrix import Matrix
    from .mechanisms.optimized import Optimized
    from .mechanisms.optimized_grid import OptimizedKronecker, OptimizedMarginals
    from .mechanisms.tables import release_table
    from .privacy.session import BudgetError, Session

__version__ = "0.1.0"

#: The module of each public name (relative to dprange): imported when the name is first read.
_EXPORTS = {
    "workloads": ("workloads",),
    "analysis": ("expected_error", "max_error", "select"),
    "analysis.cdf_trees": ("best_structure",),
    "analysis.grid": ("select_grid",),
    "answers.grouped": ("GroupedRelease",),
    "answers.release": ("Release", "load_release"),
    "answers.types": ("Answer",),
    "api": ("quantiles", "release", "release_files", "release_grid"),
    "data_aware.auto_data": ("AutoData",),
    "data_aware.auto_grid": ("AutoDataGrid",),
    "data_aware.dawa": ("DAWA",),
    "data_aware.grid": ("DAWAHilbert", "HybridTree", "KDTree"),
    "data_aware.grids": ("AdaptiveGrid", "UniformGrid"),
    "data_aware.mwem": ("MWEM",),
    "data_aware.nonnegative_grid": ("AutoTowardNonnegative", "NonnegativeAuto"),
    "data_aware.pruned_grid": ("PrunedAuto",),
    "data_aware.pruned_hilbert": ("PrunedDAWAHilbert",),
    "data_aware.structure_first": ("StructureFirst",),
    "data_aware.support_grid": ("SupportAuto",),
    "domain": ("Domain", "ProductDomain"),
    "errors": (
        "ConvergenceWarning",
        "DataError",
        "DomainError",
        "DPRangeError",
        "ParameterError",
        "ReportError",
        "redacted",
        "set_redaction",
    ),
    "inference.consistency": ("consistent_cdf",),
    "mechanisms.base": ("Mechanism",),
    "mechanisms.basic": ("Flat", "Hierarchical", "Wavelet"),
    "mechanisms.fourier": ("FourierMarginals",),
    "mechanisms.grid": ("KDHierarchy", "Kronecker", "Privelet", "Quadtree", "load_grid_release"),
    "mechanisms.matrix": ("Matrix",),
    "mechanisms.optimized": ("Optimized",),
    "mechanisms.optimized_grid": ("OptimizedKronecker", "OptimizedMarginals"),
    "mechanisms.tables": ("release_table",),
    "privacy.session": ("BudgetError", "Session"),
}

__all__ = [
    "AdaptiveGrid",
    "Answer",
    "AutoData",
    "AutoDataGrid",
    "AutoTowardNonnegative",
    "BudgetError",
    "DAWA",
    "DAWAHilbert",
    "ConvergenceWarning",
    "DataError",
    "Domain",
    "DomainError",
    "DPRangeError",
    "Flat",
    "FourierMarginals",
    "GroupedRelease",
    "Hierarchical",
    "HybridTree",
    "KDHierarchy",
    "KDTree",
    "Kronecker",
    "Matrix",
    "MWEM",
    "Mechanism",
    "NonnegativeAuto",
    "Optimized",
    "OptimizedKronecker",
    "OptimizedMarginals",
    "ParameterError",
    "Privelet",
    "ProductDomain",
    "PrunedAuto",
    "PrunedDAWAHilbert",
    "Quadtree",
    "quantiles",
    "Release",
    "ReportError",
    "Session",
    "StructureFirst",
    "SupportAuto",
    "UniformGrid",
    "Wavelet",
    "best_structure",
    "consistent_cdf",
    "expected_error",
    "load_grid_release",
    "load_release",
    "max_error",
    "redacted",
    "release",
    "release_files",
    "release_grid",
    "release_table",
    "select",
    "select_grid",
    "set_redaction",
    "workloads",
]


def __getattr__(name: str):
    """A public name, imported from its module on first use (then kept in the package)."""
    for module, names in _EXPORTS.items():
        if name in names:
            loaded = importlib.import_module(f"{__name__}.{module}")
            value = loaded if module == name else getattr(loaded, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


import_before_registry_reads(f"{__name__}.{module}" for module in _EXPORTS)
