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
from .api import quantiles, release, release_grid  # after the submodule dprange.release: the name is the function
from .cdf_trees import best_structure
from .contingency import release_table
from .inference.consistency import consistent_cdf
from .matrix import Matrix
from .multidim import KDHierarchy, Kronecker, Quadtree
from .product_domain import ProductDomain
from .serialisation import load_release

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "ConvergenceWarning",
    "DataError",
    "Domain",
    "DomainError",
    "DPRangeError",
    "Flat",
    "Hierarchical",
    "KDHierarchy",
    "Kronecker",
    "Matrix",
    "Mechanism",
    "ParameterError",
    "ProductDomain",
    "Quadtree",
    "quantiles",
    "Release",
    "ReportError",
    "Wavelet",
    "best_structure",
    "consistent_cdf",
    "expected_error",
    "load_release",
    "max_error",
    "redacted",
    "release",
    "release_grid",
    "release_table",
    "select",
    "set_redaction",
    "workloads",
]
