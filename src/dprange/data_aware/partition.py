"""DAWA's first step: a partition of the bins into intervals chosen by noisy L1 deviations from
uniform over a dyadic family, calibrated to the costs' joint sensitivity (epsilon_1-DP).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..privacy.noise import NoiseSpec

#: Counts times bins must stay exact in int64 (the partition's integer costs).
_INT_LIMIT = 2**62


def dyadic_levels(n: int) -> list[int]:
    """The bucket sizes 2^l (l >= 1) of the dyadic levels above the leaves, while 2^(l-1) < n."""
    sizes, s = [], 2
    while s // 2 < n:
        sizes.append(s)
        s *= 2
    return sizes if n > 1 else []


def scaled_deviations(counts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """For the aligned buckets of ``size`` bins (the last one truncated at n): their sizes s
    and the integer costs s * dev(B) = sum_k |s x_k - S_B|, where dev is the L1 deviation
    from the bucket's mean (Li, Hay, Miklau and Wang, PVLDB 2014, section 3)."""
    n = counts.size
    starts = np.arange(0, n, size)
    sums = np.add.reduceat(counts, starts)
    sizes = np.minimum(starts + size, n) - starts
    deviation = np.abs(np.repeat(sizes, sizes) * counts - np.repeat(sums, sizes))
    return sizes, np.add.reduceat(deviation, starts)


def worst_loss(sensitivities: list[Fraction], scales: list[float]) -> Fraction:
    """Exact privacy loss sum_l sensitivity_l / b_l of discrete-Laplace levels with scales b_l."""
    return sum(
        (w / Fraction(NoiseSpec("discrete_laplace", b).effective_scale) for w, b in zip(sensitivities, scales)),
        Fraction(0),
    )


def partition_noise(n: int, epsilon: float, changed: int) -> list[NoiseSpec]:
    """Discrete-Laplace noise of the integer costs of every dyadic level, calibrated so that
    the whole vector of noisy costs is epsilon-DP.  Changing one count by 1 changes the cost
    s dev(B) of the one bucket of size s holding it by at most 2 (s - 1); a record changes
    ``changed`` counts (1 add/remove, 2 replace).  Level scale s_l D / epsilon with
    D = changed * sum_l 2 (1 - 1/s_l) spends exactly epsilon; rounding is checked exactly."""
    sizes = dyadic_levels(n)
    if not sizes:
        return []
    weights = [Fraction(2 * changed * (min(s, n) - 1)) for s in sizes]
    total = sum(Fraction(w, min(s, n)) for w, s in zip(weights, sizes))
    scales = [float(min(s, n) * total / Fraction(epsilon)) for s in sizes]
    while worst_loss(weights, scales) > Fraction(epsilon):
        scales = [math.nextafter(b, math.inf) for b in scales]
    return [NoiseSpec("discrete_laplace", b) for b in scales]


def noisy_level_costs(counts: np.ndarray, specs: list[NoiseSpec], source) -> list[np.ndarray]:
    """Noisy L1 deviations max(0, (s dev(B) + Z) / s) of every dyadic bucket, level by level (a
    bucket of one bin has deviation 0 whatever the data: it gets no noise).  A deviation is
    never negative, so clamping the noisy one at 0 is post-processing that only removes noise;
    it makes merging the cheaper choice wherever the noise swamps the deviation (Li et al.'s
    code clamps the same way), which is what wins on sparse data at small epsilon x scale."""
    out = []
    for size, spec in zip(dyadic_levels(counts.size), specs):
        sizes, costs = scaled_deviations(counts, size)
        noisy = np.maximum((costs + spec.sample(costs.shape, source)) / sizes, 0.0)
        out.append(np.where(sizes > 1, noisy, 0.0))
    return out


def dyadic_partition(level_costs: list[np.ndarray], n: int, penalty: float) -> np.ndarray:
    """Start bins of the partition into aligned dyadic buckets minimising
    sum_B (cost(B) + penalty), singletons costing 0 + penalty: a bottom-up pass over the
    levels, O(n) given the costs (``level_costs[l]``: the buckets of size 2^(l+1), the last
    one truncated at n; a truncated bucket equal to a lower one keeps the lower one's cost),
    then a top-down pass giving each bin its highest merged bucket.  Vectorised per level.
    Ties go to the merged bucket (post-processing)."""
    best = np.full(n, float(penalty))
    merged_by_level = []
    for costs in level_costs:
        pairs = (best.size + 1) // 2
        split_cost = np.zeros(pairs)
        np.add.at(split_cost, np.arange(best.size) // 2, best)
        merged = costs + penalty <= split_cost
        if best.size % 2:  # the last pair has one child: the same bucket, no new candidate
            merged[-1] = False
        best = np.where(merged, costs + penalty, split_cost)
        merged_by_level.append(merged)
    owner = np.full(n, -1, dtype=np.int64)
    for size, merged in zip(reversed(dyadic_levels(n)), reversed(merged_by_level)):
        node_start = np.arange(0, n, size)
        bin_node = np.arange(n) // size
        take = merged[bin_node] & (owner < 0)
        owner[take] = node_start[bin_node[take]]
    owner = np.where(owner < 0, np.arange(n), owner)
    return np.unique(owner)
