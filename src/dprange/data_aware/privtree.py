"""DAWA's PrivTree partition: a top-down split of the dyadic tree, each node split when its
noisy, depth-biased median deviation exceeds a threshold (Zhang, Xiao and Xie, "PrivTree: A
Differentially Private Algorithm for Hierarchical Decompositions", SIGMOD 2016), with the
privacy loss bounded for a score that can move either way under one record, and a depth bias
that grows only as fast as that bound needs on a tree of known height.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal, localcontext

import numpy as np

from .._validation import check_epsilon
from ..errors import ParameterError
from ..privacy.noise import NoiseSpec

#: The noise scale t in units of 1 / eps1 (snapped up to the 1/64 grid).  What the loss bound
#: leaves above 1/t pays for the depth biases: a larger t buys smaller biases with more noise.
#: Chosen side by side with the authors' DAWA (docs/data-aware.md, "DAWA's PrivTree partition").
NOISE_FACTOR = 2.5

#: The floor of the biased score, theta - F, with F = round(FLOOR_FACTOR t): a node whose
#: biased score is below it splits with probability about exp(-F / t) / 2, whatever its data;
#: a lower floor splits empty regions less but lets more decisions on a path cost 1/t.
FLOOR_FACTOR = 0.35

#: DAWA's default ``edge_bins``: the nodes of at most this many bins that hold the first or the
#: last bin split without a decision (:func:`privtree_partition`).  Chosen side by side with the
#: authors' DAWA (docs/data-aware.md, "Forced splits at the ends of the domain").
EDGE_BINS = 16

#: The noise scale is a multiple of 1/64: its discrete-Laplace sampler then runs at exactly
#: that scale (:func:`dprange.privacy.samplers.effective_scale`).
_SCALE_STEP = 64

#: A margin far above the 60-digit arithmetic's rounding.
_ROUNDING = Decimal(10) ** -40


def median_deviations(counts: np.ndarray, size: int, nodes: np.ndarray | None = None) -> np.ndarray:
    """d(B) = min_c sum_{k in B} |x_k - c| (attained at a median; an integer for integer counts)
    of the aligned buckets of ``size`` bins (the last truncated at n), or of those numbered
    ``nodes``.  One record moves d(B) by at most 1, and d(B') <= d(B) for B' inside B: the two
    properties the loss bound (:func:`privtree_loss`) rests on.  O(size) per bucket."""
    n = counts.size
    count = -(-n // size)
    nodes = np.arange(count) if nodes is None else np.asarray(nodes, dtype=np.int64)
    out = np.zeros(nodes.size, dtype=np.int64)
    full = nodes < n // size
    if full.any():
        blocks = counts[: (n // size) * size].reshape(-1, size)[nodes[full]]
        middle = np.partition(blocks, (size - 1) // 2, axis=1)[:, (size - 1) // 2]
        out[full] = np.abs(blocks - middle[:, None]).sum(axis=1)
    if not full.all():  # the truncated last bucket
        rest = counts[(n // size) * size :]
        out[~full] = np.abs(rest - np.partition(rest, (rest.size - 1) // 2)[(rest.size - 1) // 2]).sum()
    return out


def _tail_ratio(t: Decimal, p: Decimal, z: int) -> Decimal:
    """R(z): the largest log-ratio ln f(m + 1) / f(m) of a split decision whose two biased
    scores are m and m + 1 with m + 1 - theta = z, f(b) = P(b + Z > theta), Z discrete Laplace
    of scale t: 1/t for z <= 1 (both in the tail), ln((1 + p - p^z) / (1 + p - p^(z - 1)))
    above, p = exp(-1/t); non-increasing in z."""
    if z <= 1:
        return 1 / t
    return ((1 + p - p**z) / (1 + p - p ** (z - 1))).ln()


def privtree_loss(scale: float, floor: int, biases) -> Decimal:
    """An upper bound on the privacy loss of the partition under adding or removing one record,
    for discrete-Laplace noise of ``scale`` t, the floor offset F (biased scores are at least
    theta - F) and the depth biases b_0 = 0 <= b_1 <= ... of the decision depths 0..L-1:
    1/t + max_K sum_{k < K} R(b_K - b_k - F).

    Why (docs/data-aware.md, "DAWA's PrivTree partition", writes it out): only the decision
    nodes on the record's root-to-leaf path change score, by at most 1 each.  The visited ones
    are split but for at most one left whole, the deepest.  With z_k = d(v_k) - b_k - theta
    (the unfloored biased score less the threshold), a node costs nothing unless z_k >= -F (below
    that both scores sit on the floor), a split node costs at most R(z_k), the whole one at
    most 1/t.  Median deviations shrink down the path, so z_k >= z_K + b_K - b_k above the
    deepest costly node K, whose z_K >= -F: the nodes above it cost at most
    sum_{k < K} R(b_K - b_k - F), node K itself at most 1/t.  Exact in 60-digit Decimal."""
    with localcontext() as ctx:
        ctx.prec = 60
        t = Decimal(scale)
        p = (-1 / t).exp()
        biases = [int(b) for b in biases]
        worst = max((_cost_above(t, p, floor, biases[: deepest + 1]) for deepest in range(len(biases))), default=0)
        return 1 / t + worst + _ROUNDING


def _cost_above(t: Decimal, p: Decimal, floor: int, biases: list[int]) -> Decimal:
    """sum_{k < K} R(b_K - b_k - F) with K the last depth of ``biases``: the most the decisions
    above the deepest costly node K can cost (:func:`privtree_loss`)."""
    *above, deepest = biases
    return sum((_tail_ratio(t, p, deepest - b - floor) for b in above), Decimal(0))


@functools.lru_cache(maxsize=256)
def privtree_noise(epsilon: float, changed: int, levels: int) -> tuple[NoiseSpec, int, tuple[int, ...]]:
    """(noise, floor offset F, depth biases b_0..b_(levels-1)) of an epsilon / ``changed``-DP
    PrivTree on a tree of ``levels`` decision depths (a replacement is a removal and an
    addition: ``changed`` = 2).  The scale t is :data:`NOISE_FACTOR` / eps on the 1/64 grid,
    F = round(:data:`FLOOR_FACTOR` t), and each bias is the least integer, depth by depth,
    that keeps :func:`privtree_loss` within eps: the bias grows slowly near the root, where a
    path has few decisions above it, and by about t / 2 per level below.  Cached."""
    if changed not in (1, 2):
        raise ParameterError(f"changed must be 1 (add/remove) or 2 (replace), got {changed!r}")
    if not isinstance(levels, int) or levels < 0:
        raise ParameterError(f"levels must be a non-negative integer, got {levels!r}")
    target = Decimal(check_epsilon(epsilon)) / changed
    steps = math.ceil(NOISE_FACTOR * changed / epsilon * _SCALE_STEP)
    while Decimal(_SCALE_STEP) / steps >= target:  # 1/t must leave room for the biases
        steps += 1
    scale = steps / _SCALE_STEP
    floor = max(1, round(FLOOR_FACTOR * scale))
    biases: list[int] = []
    with localcontext() as ctx:
        ctx.prec = 60
        t = Decimal(scale)
        p = (-1 / t).exp()
        room = target - 1 / t - _ROUNDING  # what the decisions above the deepest costly node may cost
        for _ in range(levels):  # the depths above K already fit: only K's own sum is new

            def private(b: int) -> bool:
                return _cost_above(t, p, floor, [*biases, b]) <= room

            low = biases[-1] if biases else 0
            step = biases[-1] - biases[-2] if len(biases) > 1 else 1
            high = low
            while not private(high):
                low, high = high + 1, high + max(1, step)
                step *= 2
            while low < high:  # the cost falls as the new bias grows: the least passing one
                middle = (low + high) // 2
                low, high = (low, middle) if private(middle) else (middle + 1, high)
            biases.append(low)
    return NoiseSpec("discrete_laplace", scale), floor, tuple(biases)


def tree_levels(n: int) -> int:
    """The decision depths of the dyadic tree over n bins: ceil(log2 n) (none for one bin)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"the number of bins must be a positive integer, got {n!r}")
    return (int(n) - 1).bit_length()


def privtree_partition(
    counts: np.ndarray, epsilon: float, threshold: float, changed: int, source, edge_bins: int = 0
) -> np.ndarray:
    """Start bins of an epsilon-DP partition into aligned dyadic buckets, drawn top-down: a
    decision node v (one with two non-empty children) at decision depth k is split when
    max(d(v) - b_k, theta - F) + Z > theta, Z discrete Laplace, b_k and F from
    :func:`privtree_noise`, d the median deviation (:func:`median_deviations`), theta =
    ceil(``threshold``) (DAWA's
    bucket penalty 1 / eps2: split where a bucket's deviation is worth another bucket's noise).
    A node left whole is a bucket; a node of one bin always is.  Unlike costs with
    independent noise, the default on noise is to keep a node whole, so flat and empty regions
    stay whole and only signal above the noise splits.  Integer arithmetic; O(n) per level.

    ``edge_bins``: a node of at most that many bins that holds the first or the last bin is
    split once reached, without a decision (a public rule: it reads no data, so it adds no
    loss, and its children take the next depth's bias as if it had been decided).  The ends of
    a bounded domain often hold point masses (values clamped to a bound, zeros), which the
    depth bias would otherwise leave in a bucket of several bins."""
    n = counts.size
    spec, floor, biases = privtree_noise(epsilon, changed, tree_levels(n))
    bias = np.asarray(biases, dtype=np.int64)
    theta = math.ceil(threshold)
    size = 1 << tree_levels(n)
    open_nodes, depth = np.ones(1, dtype=bool), np.zeros(1, dtype=np.int64)
    starts = []
    while size > 1:
        node_start = np.arange(open_nodes.size, dtype=np.int64) * size
        decides = open_nodes & (node_start + size // 2 < n)
        forced = decides & (size <= edge_bins) & ((node_start == 0) | (node_start + size >= n))
        nodes = np.flatnonzero(decides & ~forced)
        split = forced.copy()
        if nodes.size:
            biased = np.maximum(median_deviations(counts, size, nodes) - bias[depth[nodes]], theta - floor)
            split[nodes] = biased + np.asarray(spec.sample(nodes.size, source)) > theta
        starts.append(node_start[decides & ~split])
        # children of split nodes, one level deeper; a node with one child passes it on as is
        through = open_nodes & ~decides
        children = -(-n // (size // 2))
        child_open = np.zeros(children, dtype=bool)
        child_depth = np.zeros(children, dtype=np.int64)
        for offset, parents, deeper in ((0, split, 1), (1, split, 1), (0, through, 0)):
            index = np.flatnonzero(parents)
            child_open[2 * index + offset] = True
            child_depth[2 * index + offset] = depth[index] + deeper
        open_nodes, depth, size = child_open, child_depth, size // 2
    starts.append(np.flatnonzero(open_nodes))
    return np.sort(np.concatenate(starts))
