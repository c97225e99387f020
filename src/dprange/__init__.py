"""dprange: range queries, histograms, CDFs and quantiles under differential privacy.

The central pipeline: ``Domain`` (public bins) -> mechanism (``Flat``, ``Hierarchical``,
``Wavelet``, ...) -> ``Release`` (answers with exact error bars).  The package is laid out by
pipeline stage (docs/architecture.md): each layer imports only the layers below it.
"""

from . import workloads
from .analysis import expected_error, max_error, select
from .analysis.cdf_trees import best_structure
from .analysis.grid import select_grid
from .answers.grouped import GroupedRelease
from .answers.release import Release, load_release
from .answers.types import Answer
from .api import quantiles, release, release_files, release_grid
from .data_aware.auto_data import AutoData
from .data_aware.dawa import DAWA
from .data_aware.grid import DAWAHilbert, HybridTree, KDTree
from .data_aware.grids import AdaptiveGrid, UniformGrid
from .data_aware.mwem import MWEM
from .data_aware.structure_first import StructureFirst
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

__all__ = [
    "AdaptiveGrid",
    "Answer",
    "AutoData",
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
    "Optimized",
    "OptimizedKronecker",
    "OptimizedMarginals",
    "ParameterError",
    "Privelet",
    "ProductDomain",
    "Quadtree",
    "quantiles",
    "Release",
    "ReportError",
    "Session",
    "StructureFirst",
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
