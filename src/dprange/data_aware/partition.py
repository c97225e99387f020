"""DAWA's first step scored by whole partitions: a partition of the bins into aligned dyadic
intervals of near-uniform counts, epsilon_1-DP either as one exponential-mechanism draw over every
dyadic partition (the Gibbs partition) or as the minimiser of noisy L1 deviations calibrated to
their joint sensitivity.  The default, node by node, is :mod:`dprange.data_aware.privtree`.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

from ..privacy.exact_choice import accept_word, selection_gamma_at_most, uniform_words
from ..privacy.noise import NoiseSpec

#: Counts times bins must stay exact in int64 (the partition's integer costs).
_INT_LIMIT = 2**62


def dyadic_levels(n: int, base: int = 1) -> list[int]:
    """The bucket sizes 2^l base (l >= 1) of the dyadic levels above the leaves (blocks of
    ``base`` bins, a power of two), while 2^(l-1) base < n."""
    sizes, s = [], 2 * base
    while s // 2 < n:
        sizes.append(s)
        s *= 2
    return sizes


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


def partition_noise(n: int, epsilon: float, changed: int, base: int = 1) -> list[NoiseSpec]:
    """Discrete-Laplace noise of the integer costs of every dyadic level, calibrated so that
    the whole vector of noisy costs is epsilon-DP.  Changing one count by 1 changes the cost
    s dev(B) of the one bucket of size s holding it by at most 2 (s - 1); a record changes
    ``changed`` counts (1 add/remove, 2 replace).  Level scale s_l D / epsilon with
    D = changed * sum_l 2 (1 - 1/s_l) spends exactly epsilon; rounding is checked exactly."""
    sizes = dyadic_levels(n, base)
    if not sizes:
        return []
    weights = [Fraction(2 * changed * (min(s, n) - 1)) for s in sizes]
    total = sum(Fraction(w, min(s, n)) for w, s in zip(weights, sizes))
    scales = [float(min(s, n) * total / Fraction(epsilon)) for s in sizes]
    while worst_loss(weights, scales) > Fraction(epsilon):
        scales = [math.nextafter(b, math.inf) for b in scales]
    return [NoiseSpec("discrete_laplace", b) for b in scales]


def noisy_level_costs(counts: np.ndarray, specs: list[NoiseSpec], source, base: int = 1) -> list[np.ndarray]:
    """Noisy L1 deviations max(0, (s dev(B) + Z) / s) of every dyadic bucket, level by level (a
    bucket of one bin has deviation 0 whatever the data: it gets no noise).  A deviation is
    never negative, so clamping the noisy one at 0 is post-processing that only removes noise;
    it makes merging the cheaper choice wherever the noise swamps the deviation (Li et al.'s
    code clamps the same way), which is what wins on sparse data at small epsilon x scale."""
    out = []
    for size, spec in zip(dyadic_levels(counts.size, base), specs):
        sizes, costs = scaled_deviations(counts, size)
        noisy = np.maximum((costs + spec.sample(costs.shape, source)) / sizes, 0.0)
        out.append(np.where(sizes > 1, noisy, 0.0))
    return out


def dyadic_partition(level_costs: list[np.ndarray], n: int, penalty: float, base: int = 1) -> np.ndarray:
    """Start bins of the partition into aligned dyadic buckets minimising
    sum_B (cost(B) + penalty), singletons costing 0 + penalty: a bottom-up pass over the
    levels, O(n) given the costs (``level_costs[l]``: the buckets of size 2^(l+1), the last
    one truncated at n; a truncated bucket equal to a lower one keeps the lower one's cost),
    then a top-down pass giving each bin its highest merged bucket.  Vectorised per level.
    Ties go to the merged bucket (post-processing)."""
    best = np.full(-(-n // base), float(penalty))
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
    for size, merged in zip(reversed(dyadic_levels(n, base)), reversed(merged_by_level)):
        node_start = np.arange(0, n, size)
        bin_node = np.arange(n) // size
        take = merged[bin_node] & (owner < 0)
        owner[take] = node_start[bin_node[take]]
    owner = np.where(owner < 0, np.arange(n) // base * base, owner)
    return np.unique(owner)


#: The Gibbs partition's weight per bucket beyond DAWA's penalty, in units of its temperature:
#: P(partition) proportional to exp(-sum_B (dev(B) + penalty) / T - GIBBS_BUCKET_PRIOR |P|).
#: Data-independent, so it leaves the privacy loss unchanged; chosen side by side with the
#: authors' DAWA (docs/data-aware.md, "DAWA's Gibbs partition").
GIBBS_BUCKET_PRIOR = Fraction(1)

#: The float pass's bound on its error in log P(merge), relative to the largest log-weight: far
#: above the few ulps per level that log-sum-exp loses, so a draw is decided in floats unless
#: its uniform falls within the bound of P, where exact Decimal arithmetic decides it.
_FLOAT_SLACK = 2.0**-40


def gibbs_gamma(epsilon: float, changed: int) -> Fraction:
    """1 / T = epsilon / (2 Delta) of the Gibbs partition: one record moves the deviation
    dev(B) of the one bucket holding it (two under replace) by at most 2 (1 - 1/s) < 2, so the
    score sum_B (dev(B) + penalty) of every partition moves by less than Delta = 2 ``changed``
    and the exponential mechanism at 1 / T = epsilon / (2 Delta) is epsilon-DP (McSherry and
    Talwar, FOCS 2007).  Capped like every exact exponential mechanism
    (:data:`dprange.privacy.exact_choice.MAX_SELECTION_GAMMA`; lower only lowers the loss)."""
    return selection_gamma_at_most(Fraction(epsilon) / (4 * changed))


def gibbs_partition(counts: np.ndarray, epsilon: float, penalty: float, changed: int, source) -> np.ndarray:
    """Start bins of a partition into aligned dyadic buckets drawn with probability proportional
    to exp(-sum_B ((dev(B) + penalty) / T + GIBBS_BUCKET_PRIOR)): the exponential mechanism over
    every aligned dyadic partition, epsilon-DP (:func:`gibbs_gamma`).

    The score is a sum over buckets, so the normalising sum factorises over the dyadic tree:
    Z(v) = w(v) + Z(left) Z(right), w(v) = exp(-g(v)) the weight of v as one bucket.  A
    bottom-up pass computes log Z in floats, O(n); a top-down pass merges each node not
    inside a merged ancestor with probability w(v) / Z(v), which draws a partition with exactly
    the Gibbs probability.  Each draw compares a fresh 62-bit uniform with the float P and,
    where the uniform falls within the float error of P, with P in Decimal arithmetic from the
    exact exponents (integer costs, rational 1 / T), as :func:`dprange.privacy.exact_choice`
    does.  Against independent noise on every cost (:func:`partition_noise`, scale D / epsilon
    with D about 2 log2 n), one draw over the whole partition needs only Delta = 2 whatever n.
    """
    n = counts.size
    sizes_of = dyadic_levels(n)
    if not sizes_of:
        return np.zeros(min(n, 1), dtype=np.int64)
    gamma = gibbs_gamma(epsilon, changed)
    offset = Fraction(penalty) * gamma + GIBBS_BUCKET_PRIOR  # the exponent of a bucket with dev 0
    log_z = np.full(n, -float(offset))
    levels = []  # per level: (sizes, integer costs, has two children, log w, log Z)
    for size in sizes_of:
        sizes, costs = scaled_deviations(counts, size)
        two = np.ones(sizes.size, dtype=bool)
        split = np.zeros(sizes.size)
        pairs = log_z.size // 2
        split[:pairs] = log_z[0 : 2 * pairs : 2] + log_z[1 : 2 * pairs : 2]
        if log_z.size % 2:  # the last node has one child: the same bucket, no new candidate
            split[-1], two[-1] = log_z[-1], False
        log_w = -(costs / sizes * float(gamma) + float(offset))
        log_z = np.where(two, np.logaddexp(log_w, split), split)
        levels.append((sizes, costs, two, log_w, log_z))
    largest = max(float(np.max(np.abs(np.concatenate([lw, lz])))) for _, _, _, lw, lz in levels)
    margin = _FLOAT_SLACK * (len(levels) + 2) * (1.0 + largest + float(offset))

    def exact_z(level: int, node: int) -> Decimal:
        if level < 0:
            return (-_decimal(offset)).exp()
        sizes, costs, two = levels[level][:3]
        if not two[node]:
            return exact_z(level - 1, 2 * node)
        exponent = Fraction(int(costs[node]), int(sizes[node])) * gamma + offset
        return (-_decimal(exponent)).exp() + exact_z(level - 1, 2 * node) * exact_z(level - 1, 2 * node + 1)

    def exact_p(level: int, node: int):
        sizes, costs = levels[level][:2]
        exponent = Fraction(int(costs[node]), int(sizes[node])) * gamma + offset

        def p(digits: int) -> Decimal:
            with localcontext() as ctx:
                ctx.prec = digits + 30
                ctx.Emin, ctx.Emax = -(10**15), 10**15
                return (-_decimal(exponent)).exp() / exact_z(level, node)

        return p

    covered = np.zeros(1, dtype=bool)
    owner = np.full(n, -1, dtype=np.int64)
    for level in range(len(levels) - 1, -1, -1):
        size = sizes_of[level]
        _, _, two, log_w, log_z = levels[level]
        nodes = np.flatnonzero(two & ~covered)
        log_p = log_w[nodes] - log_z[nodes]
        words = uniform_words(nodes.size, source)
        uniform_log = np.log(np.maximum(words, 1) / 2.0**62)
        merged = np.zeros(two.size, dtype=bool)
        merged[nodes] = np.log((words + 1) / 2.0**62) <= log_p - margin
        unclear = ~merged[nodes] & ~((words > 0) & (uniform_log >= log_p + margin))
        for k in np.flatnonzero(unclear):
            node = int(nodes[k])
            merged[node] = accept_word(int(words[k]), float(log_p[k]), margin, exact_p(level, node), source)
        bins_node = np.arange(n) // size
        take = merged[bins_node] & (owner < 0)
        owner[take] = bins_node[take] * size
        below = covered | merged
        covered = np.repeat(below, 2)[: levels[level - 1][0].size] if level > 0 else below
    owner = np.where(owner < 0, np.arange(n), owner)
    return np.unique(owner)


def _decimal(value: Fraction) -> Decimal:
    return Decimal(value.numerator) / Decimal(value.denominator)
