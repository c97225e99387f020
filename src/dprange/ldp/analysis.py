"""Exact expected error of local-DP protocols and the optimal branching factor.

Cormode, Kulkarni and Srivastava (PVLDB 2019) bound the error of HH_B (Theorems 4.3-4.5) and
derive optimal branching factors from those bounds (about 4.92 without and 9.18 with
consistency).  Here the error is exact: the variance of every range or prefix answer follows
from the per-level oracle variances (with the expected number of users per level, N p_l)
through the same implicit error models
as the central mechanisms — least-squares consistency (:mod:`dprange.inference.tree`) or,
without consistency, the canonical decomposition of the range into tree nodes
(:func:`dprange.inference.covering.direct_range_variance`).  Errors are reported for fractions
(counts / N), as in the paper.

What the exact curves show (OUE, N = 2^26, eps = 1, all ranges): the bound-based optima are
not the true ones.  With exact least-squares consistency small fan-outs win (D = 2^16:
B = 2 gives RMSE x 1000 = 1.592, B = 4 1.617, B = 16 1.917; D = 2^12: B = 2 1.209, B = 4
1.211, B = 8 1.281), not B ~ 9.18; without consistency B = 4 to 8 (D = 2^12: B = 4 and 8 both
2.198, B = 2 2.567), close to the paper's 4.92.  Integer B that do not divide the domain
evenly pay for their padded leaves, so scan the candidates with :func:`optimal_branching`.
"""

from __future__ import annotations

import numpy as np

from ..analysis.error import workload_error
from ..inference.covering import direct_range_variance
from ..workloads.ranges import AllRange, Workload, make_workload
from .range_protocols import HierarchicalHistogram

MAX_DIRECT_QUERIES = 5_000_000


def _workload(workload, domain_size) -> Workload:
    return make_workload(workload, domain_size) if isinstance(workload, str) else workload


def expected_error(
    protocol, workload, n_users: int, epsilon: float | None = None, *, consistency: bool = True
) -> float:
    """Exact average variance of the protocol's answers (as fractions of N) on ``workload``."""
    if epsilon is not None:
        protocol = protocol.with_epsilon(epsilon)
    wl = _workload(workload, protocol.domain_size)
    model = protocol.error_model(n_users)
    if consistency or not isinstance(protocol, HierarchicalHistogram):
        return workload_error(model, wl) / n_users**2
    users = {l: n_users * protocol.level_probabilities[l - 1] for l in range(1, protocol.levels + 1)}
    variances = protocol.level_variances(users, n_users)
    tree = protocol.tree
    if isinstance(wl, AllRange) and wl.m > MAX_DIRECT_QUERIES:
        rng = np.random.default_rng(0)
        a, b = rng.integers(0, wl.n, (2, 1_000_000))
        lo, hi = np.minimum(a, b), np.maximum(a, b)
    else:
        lo, hi = wl.ranges()
    return float(direct_range_variance(tree, variances, lo, hi).mean()) / n_users**2


def optimal_branching(
    domain_size: int,
    n_users: int,
    epsilon: float,
    *,
    oracle: str = "oue",
    workload="all-range",
    consistency: bool = True,
    branchings=range(2, 65),
) -> dict:
    """The branching factor of HH_B with the least exact error, and the whole curve.

    Returns ``{"best": B, "error": its average variance (fractions), "curve": {B: error}}``;
    each candidate costs one exact error evaluation (O(D) per batch of queries with
    consistency; the direct decomposition without it averages all ranges, or 10^6 sampled
    ranges when there are more than 5 * 10^6)."""
    curve = {}
    for b in branchings:
        if b > domain_size:
            break
        proto = HierarchicalHistogram(domain_size, b, oracle, epsilon=epsilon)
        curve[b] = expected_error(proto, workload, n_users, consistency=consistency)
    best = min(curve, key=curve.__getitem__)
    return {"best": best, "error": curve[best], "curve": curve}
