"""dprange: range queries, histograms, CDFs and quantiles under differential privacy.

The central pipeline: ``Domain`` (public bins) -> mechanism (``Flat``, ``Hierarchical``,
``Wavelet``) -> ``Release`` (answers with exact error bars).
"""

from .domain import Domain
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
from .mechanisms import Flat, Hierarchical, Mechanism, Wavelet
from .release import Answer, Release

# isort: split
from . import workloads
from .analysis import expected_error, max_error, select
from .api import (  # after the submodule dprange.release is loaded: the name is the function
    quantiles,
    release,
    release_files,
    release_grid,
)
from .cdf_trees import best_structure
from .contingency import release_table
from .data_aware import DAWA, MWEM
from .fourier import FourierMarginals

from .structure_first import StructureFirst  # isort: skip (registration order)
from .auto_data import AutoData  # isort: skip
from .inference.consistency import consistent_cdf
from .matrix import Matrix
from .multidim import KDHierarchy, Kronecker, Privelet, Quadtree
from .optimized import Optimized
from .optimized_kd import OptimizedKronecker, OptimizedMarginals

from .data_aware_2d import DAWAHilbert, HybridTree, KDTree  # isort: skip (data-aware grid mechanisms listed last)
from .product_domain import ProductDomain
from .serialisation import load_release
from .session import BudgetError, Session

__version__ = "0.1.0"

__all__ = [
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
    "Wavelet",
    "best_structure",
    "consistent_cdf",
    "expected_error",
    "load_release",
    "max_error",
    "redacted",
    "release",
    "release_files",
    "release_grid",
    "release_table",
    "select",
    "set_redaction",
    "workloads",
]
