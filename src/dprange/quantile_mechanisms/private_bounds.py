"""Bounds found privately: a noisy histogram on a signed power-of-two scale.

Users rarely know tight bounds, and reading them from the data (min, max) is not private.
:func:`private_bounds` spends its own epsilon on one noisy histogram of public buckets

    [-2^(k+1), -2^k) for k = hi..lo,   [-2^lo, 2^lo),   [2^k, 2^(k+1)) for k = lo..hi

(``lo`` = -32 and ``hi`` = 62 by default: 191 buckets; values beyond +-2^(hi+1) count in the
outermost buckets), adds exact discrete Laplace noise of scale Delta / epsilon to every count
(Delta = 1 under add/remove, 2 under replace: a moved record changes two counts), and keeps
the buckets whose noisy count reaches the threshold T = ceil(scale ln(buckets / beta)) (an
empty bucket reaches it with probability below beta / buckets, so no empty bucket does with
probability >= 1 - beta, beta = 0.05).  The lower bound is 0 when the first kept bucket is
positive (records below are clipped only if they are negative), else the outer edge of the
first kept bucket; the upper bound likewise.  Integer data round the bounds outward.  The
result is post-processing of the noisy counts: epsilon-DP (tests/quantile_mechanisms/test_private_bounds.py
checks the exact output probabilities and the neighbour ratio).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import DataError, ParameterError
from ..privacy.samplers import resolve_rng, sample_discrete_laplace

MIN_EXPONENT, MAX_EXPONENT = -32, 62


BETA = 0.05


@dataclass(frozen=True)
class PrivateBounds:
    """Bounds found privately, with what they cost."""

    lower: float
    upper: float
    epsilon: float
    neighbours: str
    threshold: int
    method: str = "noisy signed power-of-two histogram"

    def to_dict(self) -> dict:
        return {
            "lower": self.lower,
            "upper": self.upper,
            "epsilon": self.epsilon,
            "neighbours": self.neighbours,
            "threshold": self.threshold,
            "method": self.method,
        }


def bucket_edges(min_exponent: int = MIN_EXPONENT, max_exponent: int = MAX_EXPONENT) -> np.ndarray:
    """The 2 (hi - lo + 1) + 2 edges of the buckets, increasing (the outer ones are +-2^(hi+1))."""
    powers = 2.0 ** np.arange(min_exponent, max_exponent + 2)
    return np.concatenate([-powers[::-1], powers])


def bucket_counts(values, min_exponent: int = MIN_EXPONENT, max_exponent: int = MAX_EXPONENT) -> np.ndarray:
    """Records per bucket (values beyond the outer edges count in the outermost buckets)."""
    edges = bucket_edges(min_exponent, max_exponent)
    index = np.clip(np.searchsorted(edges, np.asarray(values, dtype=float), side="right") - 1, 0, edges.size - 2)
    return np.bincount(index, minlength=edges.size - 1)


def noise_scale(epsilon: float, neighbours: str) -> float:
    """Delta / epsilon rounded up to a float that is at least the exact ratio."""
    sensitivity = 2 if neighbours == "replace" else 1
    scale = sensitivity / epsilon
    if Fraction(scale) < Fraction(sensitivity) / Fraction(epsilon):
        scale = math.nextafter(scale, math.inf)
    return scale


def threshold(scale: float, buckets: int, beta: float = BETA) -> int:
    """ceil(scale ln(buckets / beta)): an empty bucket's noisy count reaches it with
    probability below beta / buckets."""
    return math.ceil(scale * math.log(buckets / beta))


def bounds_from_buckets(first: int, last: int, edges: np.ndarray, *, integer: bool) -> tuple[float, float]:
    """The bounds for the first and last kept buckets (see the module doc)."""
    middle = (edges.size - 2) // 2  # the bucket around zero
    lower = 0.0 if first > middle else float(edges[first])
    upper = 0.0 if last < middle else float(edges[last + 1])
    if first == middle:
        lower = float(edges[middle])
    if last == middle:
        upper = float(edges[middle + 1])
    if integer:
        lower, upper = float(math.floor(lower)), float(math.ceil(upper))
    if upper <= lower:
        upper = lower + 1.0 if integer else float(edges[middle + 1])
    return lower, upper


def private_bounds(
    values,
    epsilon: float,
    *,
    neighbours: str = "add_remove",
    integer: bool = False,
    rng=None,
    min_exponent: int = MIN_EXPONENT,
    max_exponent: int = MAX_EXPONENT,
) -> PrivateBounds:
    """epsilon-DP bounds (lower, upper) for ``values`` (see the module doc).

    Raises DataError when no bucket's noisy count reaches the threshold (too few records for
    this epsilon): pass public bounds instead.
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not (0 < epsilon < math.inf):
        raise ParameterError(f"the bounds' epsilon must be a finite number > 0, got {epsilon!r}")
    if neighbours not in ("add_remove", "replace"):
        raise ParameterError(f"neighbours must be 'add_remove' or 'replace', got {neighbours!r}")
    edges = bucket_edges(min_exponent, max_exponent)
    counts = bucket_counts(values, min_exponent, max_exponent)
    scale = noise_scale(float(epsilon), neighbours)
    cut = threshold(scale, counts.size)
    noisy = counts + sample_discrete_laplace(scale, counts.size, resolve_rng(rng))
    kept = np.flatnonzero(noisy >= cut)
    if kept.size == 0:
        raise DataError(
            f"too few records to find bounds privately with epsilon {epsilon:.3g} (no noisy bucket count "
            f"reached {cut}); pass bounds=(a, b) or a larger epsilon or bounds_share"
        )
    lower, upper = bounds_from_buckets(int(kept[0]), int(kept[-1]), edges, integer=integer)
    return PrivateBounds(lower, upper, float(epsilon), neighbours, cut)
