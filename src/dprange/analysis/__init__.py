"""Before any data: the exact expected error of a mechanism on a workload, lower bounds, and the
choice of mechanism and parameters by that error (data-independent, so free of privacy cost)."""

from .error import (
    expected_error,
    l2_optimum_bound,
    max_error,
    noise_variance_floor,
    query_variances,
    svd_bound,
    workload_error,
)
from .selection import (
    Candidate,
    Selection,
    auto_mechanism,
    default_candidates,
    optimal_hierarchy,
    optimized_budget,
    select,
)

__all__ = [
    "Candidate",
    "Selection",
    "auto_mechanism",
    "default_candidates",
    "expected_error",
    "l2_optimum_bound",
    "max_error",
    "noise_variance_floor",
    "optimal_hierarchy",
    "optimized_budget",
    "query_variances",
    "select",
    "svd_bound",
    "workload_error",
]
