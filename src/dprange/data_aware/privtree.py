"""DAWA's PrivTree partition: a top-down split of the dyadic tree, each node split when its
noisy, depth-biased median deviation exceeds a threshold (Zhang, Xiao and Xie, "PrivTree: A
Differentially Private Algorithm for Hierarchical Decompositions", SIGMOD 2016), with the
privacy loss bounded for a score that can move either way under one record.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal, localcontext

import numpy as np

from .._validation import check_epsilon
from ..errors import ParameterError
from ..privacy.noise import NoiseSpec

#: The depth bias per decision level in units of the noise scale (PrivTree's delta = lambda ln
#: beta, ln 2 = 0.69 for fanout 2).  A larger bias shrinks the loss bound's tail (less noise)
#: but stops splits sooner; chosen side by side with the authors' DAWA among 0.15-1.39
#: (docs/data-aware.md, "DAWA's PrivTree partition").
DEPTH_BIAS = 0.35

#: The noise scale is a multiple of 1/64: its discrete-Laplace sampler then runs at exactly
#: that scale (:func:`dprange.privacy.samplers.effective_scale`).
_SCALE_STEP = 64

#: Terms of the loss bound's series summed exactly before the geometric bound on the rest, and
#: a margin far above the 60-digit arithmetic's rounding.
_EXACT_TERMS = 32
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


def privtree_loss(scale: float, bias: int) -> Decimal:
    """An upper bound on the privacy loss of the partition under adding or removing one record,
    for discrete-Laplace noise of ``scale`` t (p = exp(-1/t)) and an integer depth ``bias``
    delta >= 1: 2 / t + sum_{j >= 1} R(j delta), R(z) = ln((1 + p - p^z) / (1 + p - p^(z - 1))).

    Why (docs/data-aware.md, "DAWA's PrivTree partition", writes it out): only the dyadic
    nodes holding the record's bin change score, by at most 1 each.  On that path the visited
    decision nodes are split, but for at most one left whole, the deepest.  With z a node's
    biased score less the threshold, only nodes with z >= -delta cost anything; a split node
    costs at most R(z) (1/t for z <= 1), the whole one at most 1/t.  Median deviations shrink
    down the path while the bias grows by delta per level, so the z fall by at least delta per
    level.  If the whole node costs anything (z >= -delta), the split nodes above it have
    z >= 0, delta, 2 delta, ...: at most 1/t + R(0) + sum_j R(j delta); otherwise the costly
    split nodes have z >= -delta, 0, delta, ...: at most R(-delta) + R(0) + sum_j R(j delta).
    Both are the bound.  The first :data:`_EXACT_TERMS` terms are
    summed in 60-digit Decimal arithmetic, the rest bounded by ln(1 + u) <= u, a geometric sum
    (with ``_EXACT_TERMS`` = 0 that alone: (1 - p) p^(delta - 1) / ((1 - p^delta) (1 + p -
    p^(delta - 1))))."""
    with localcontext() as ctx:
        ctx.prec = 60
        t = Decimal(scale)
        p = (-1 / t).exp()
        exact = sum(
            (((1 + p - p ** (j * bias)) / (1 + p - p ** (j * bias - 1))).ln() for j in range(1, _EXACT_TERMS + 1)),
            Decimal(0),
        )
        before = p ** ((_EXACT_TERMS + 1) * bias - 1)
        tail = (1 - p) * before / ((1 - p**bias) * (1 + p - before))
        return 2 / t + exact + tail + _ROUNDING


@functools.lru_cache(maxsize=256)
def privtree_noise(epsilon: float, changed: int) -> tuple[NoiseSpec, int]:
    """(noise, depth bias) of the least scale on the 1/64 grid whose :func:`privtree_loss` is at
    most epsilon / ``changed`` (a replacement is a removal and an addition: ``changed`` = 2),
    with bias = max(1, round(t DEPTH_BIAS)).  The grid search keeps only scales checked against
    the bound, so a step where the bias jumps cannot let an unchecked scale through.  About
    10 ms (Decimal arithmetic), cached."""
    if changed not in (1, 2):
        raise ParameterError(f"changed must be 1 (add/remove) or 2 (replace), got {changed!r}")
    target = Decimal(check_epsilon(epsilon)) / changed

    def bias_of(k: int) -> int:
        return max(1, round(k / _SCALE_STEP * DEPTH_BIAS))

    def private(k: int) -> bool:
        return privtree_loss(k / _SCALE_STEP, bias_of(k)) <= target

    low, high = 1, 1
    while not private(high):
        low, high = high + 1, 2 * high
    while low < high:  # least passing k on [low, high], assuming the bound falls with t ...
        middle = (low + high) // 2
        low, high = (low, middle) if private(middle) else (middle + 1, high)
    while not private(low):  # ... and checked, where a jump of the bias breaks that
        low += 1
    return NoiseSpec("discrete_laplace", low / _SCALE_STEP), bias_of(low)


def privtree_partition(counts: np.ndarray, epsilon: float, threshold: float, changed: int, source) -> np.ndarray:
    """Start bins of an epsilon-DP partition into aligned dyadic buckets, drawn top-down: a
    decision node v (one with two non-empty children) at decision depth k is split when
    max(d(v) - k delta, theta - delta) + Z > theta, Z discrete Laplace (:func:`privtree_noise`),
    d the median deviation (:func:`median_deviations`), theta = ceil(``threshold``) (DAWA's
    bucket penalty 1 / eps2: split where a bucket's deviation is worth another bucket's noise).
    A node left whole is a bucket; a node of one bin always is.  Unlike costs with
    independent noise, the default on noise is to keep a node whole, so flat and empty regions
    stay whole and only signal above the noise splits.  Integer arithmetic; O(n) per level."""
    n = counts.size
    spec, bias = privtree_noise(epsilon, changed)
    theta = math.ceil(threshold)
    size = 1 << max(0, (n - 1).bit_length())
    open_nodes, depth = np.ones(1, dtype=bool), np.zeros(1, dtype=np.int64)
    starts = []
    while size > 1:
        node_start = np.arange(open_nodes.size, dtype=np.int64) * size
        decides = open_nodes & (node_start + size // 2 < n)
        nodes = np.flatnonzero(decides)
        split = np.zeros(open_nodes.size, dtype=bool)
        if nodes.size:
            biased = np.maximum(median_deviations(counts, size, nodes) - depth[nodes] * bias, theta - bias)
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
