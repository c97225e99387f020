"""Workloads: the queries a release is judged on, as linear operators on the histogram.

1-D (:mod:`.ranges`): all ranges, prefixes, the identity, explicit or random ranges, weighted
ranges, an explicit matrix, registered in ``WORKLOADS``.  k-D (:mod:`.rectangles`): all, prefix,
random or explicit rectangles and k-way marginals.
"""

from .ranges import (
    AllRange,
    Explicit,
    Identity,
    Prefix,
    RandomRanges,
    Ranges,
    WeightedRanges,
    Workload,
    check_workload_bins,
    make_workload,
    not_a_workload,
)
from .rectangles import (
    AllRanges,
    Rectangles,
    all_rectangles,
    check_rectangles,
    check_shape,
    explicit,
    marginals,
    prefix_rectangles,
    random_rectangles,
)

__all__ = [
    "AllRange",
    "AllRanges",
    "Explicit",
    "Identity",
    "Prefix",
    "RandomRanges",
    "Ranges",
    "Rectangles",
    "WeightedRanges",
    "Workload",
    "all_rectangles",
    "check_rectangles",
    "check_shape",
    "check_workload_bins",
    "explicit",
    "make_workload",
    "marginals",
    "not_a_workload",
    "prefix_rectangles",
    "random_rectangles",
]
