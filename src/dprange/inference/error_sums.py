"""Sums of many exact variances of tree and Haar GLS without listing them.

The average error of a workload of all ranges, all prefixes or all bins needs only sums:
with prefixes P_j = x_0 + ... + x_j,

    sum over all ranges of Var = (n + 1) sum_j Var(P_j) - Var(sum_j (n - j) x_j),

(every two of the n + 1 prefix points; see :mod:`dprange.analysis`).  This module computes
the three sums without any n-vector:

* trees: the top-down pass of :func:`~dprange.inference.tree.one_pass_variances` reduced
  block by block (Hay et al., "Boosting the accuracy of differentially private histograms
  through consistency", PVLDB 2010; Qardaji, Yang and Li, PVLDB 2013, section 3.3), and the
  weighted query's bottom-up recursion of ``TreeErrorModel.query_variance`` streamed over
  the bins in blocks, carrying the partial sums of a node whose children straddle two blocks;
* Haar (Privelet; Xiao, Wang and Gehrke, ICDE 2010): closed forms per level, since every
  node the n bins cover fully contributes the same coefficient (O(height) for one variance
  per level, O(nodes) for per-node variances).

Memory is O(depth x block) for trees, O(1) for Haar beside the model itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tree import TreeErrorModel, _safe_div, descend_to_bins
from .wavelet import HaarEstimate

#: Bins per block of the streamed bottom-up pass (the weights of one block are alive at once).
STREAM_BLOCK = 1 << 16


@dataclass(frozen=True)
class VarianceSums:
    """Sums over the n bins j of Var(P_j) (prefixes) and Var(x_j) (bins), and
    Var(sum_j (n - j) x_j) (the sum of all prefixes)."""

    prefix: float
    bins: float
    prefix_total: float

    def all_ranges(self, n: int) -> float:
        """The sum of Var over all n(n+1)/2 ranges [i, j]."""
        return (n + 1) * self.prefix - self.prefix_total


#: Methods whose replacement on a model instance sends its sums through them (the listed path).
_PER_QUERY = ("prefix_variances", "range_variance", "query_variance")


def variance_sums(model) -> VarianceSums | None:
    """The three sums for a tree or Haar error model, else None (use the listed variances).

    A model whose per-query methods were replaced on the instance is not summed here: its
    answers are those methods' (e.g. a wrapped or patched model)."""
    if any(name in getattr(model, "__dict__", {}) for name in _PER_QUERY):
        return None
    if isinstance(model, TreeErrorModel) and model.strategy.level_sizes[0] == 1:
        return tree_variance_sums(model)
    if isinstance(model, HaarEstimate):
        return haar_variance_sums(model)
    return None


# ----------------------------------------------------------------------------- trees
def tree_variance_sums(model: TreeErrorModel) -> VarianceSums:
    """:class:`VarianceSums` of tree GLS: one reduced top-down pass, one streamed bottom-up pass."""
    prefix_sum, bin_sum = tree_prefix_and_bin_sums(model)
    n = model.strategy.n

    def weights(start: int, stop: int) -> np.ndarray:
        return (n - np.arange(start, stop)).astype(float)

    return VarianceSums(prefix_sum, bin_sum, tree_streamed_query_variance(model, weights))


def tree_prefix_and_bin_sums(model: TreeErrorModel) -> tuple[float, float]:
    """sum_j Var(P_j) and sum_j Var(x_j): the one-pass variances summed block by block
    (clipped at 0 as :func:`~dprange.inference.tree.one_pass_variances` clips them)."""
    sums = [0.0, 0.0]

    def add(first: int, state) -> None:
        prefix = state.before + 2 * state.cross + state.own  # cost: three passes over the block
        sums[0] += float(np.maximum(prefix, 0.0).sum())
        sums[1] += float(np.maximum(state.own, 0.0).sum())

    descend_to_bins(model, add)
    return sums[0], sums[1]


def tree_streamed_query_variance(model: TreeErrorModel, weights, block: int | None = None) -> float:
    """Var of the estimate of sum_i q_i x_i, with q produced by ``weights(start, stop)`` block
    by block: the recursion of ``TreeErrorModel.query_variance`` (g = sum_c g_c w_c / W,
    s += sum_c g_c^2 w_c - (sum_c g_c w_c)^2 / W per node) streamed upward.  A node whose
    children straddle two blocks keeps its partial sums until its last child arrives."""
    tree = model.strategy
    h = tree.depth
    block = STREAM_BLOCK if block is None else block
    carries: list = [None] * h  # per parent depth: (parent index, partial lin, partial sq)
    total_s = 0.0
    root_g = 0.0
    for start in range(0, tree.n, block):
        index, g = start, np.asarray(weights(start, min(tree.n, start + block)), dtype=float)
        for depth in range(h - 1, -1, -1):
            index, g, s = _stream_level(model, depth, index, g, carries)
            total_s += s
            if not g.size:
                break
        else:
            if g.size:
                root_g = float(g[0])
    return max(total_s + root_g**2 * model.root_variance, 0.0)


def _stream_level(model: TreeErrorModel, depth: int, first: int, g: np.ndarray, carries: list):
    """Children first..first+len(g)-1 at depth + 1 with their g: the completed parents'
    (first index, g, sum of s increments); the last parent waits in ``carries`` when its
    children go on in the next block."""
    tree = model.strategy
    b = tree.branching[depth]
    w = np.asarray(model.from_below_variance[depth + 1], dtype=float)[first : first + g.size]
    gw = g * w
    gw2 = gw * g
    lead = (-first) % b  # children before the first that starts a parent
    starts = np.arange(lead, g.size, b)
    if lead:
        starts = np.concatenate([[0], starts])
    lin = np.add.reduceat(gw, starts)  # cost: one pass over the block
    sq = np.add.reduceat(gw2, starts)
    parent = first // b
    if carries[depth] is not None:
        _, partial_lin, partial_sq = carries[depth]
        lin[0] += partial_lin
        sq[0] += partial_sq
        carries[depth] = None
    end = first + g.size
    if end % b and end != tree.level_sizes[depth + 1]:
        carries[depth] = (parent + lin.size - 1, float(lin[-1]), float(sq[-1]))
        lin, sq = lin[:-1], sq[:-1]
    if not lin.size:
        return parent, lin, 0.0
    big_w = np.asarray(model._child_variance_sums[depth], dtype=float)[parent : parent + lin.size]
    g_up = _safe_div(lin, big_w)
    return parent, g_up, float((sq - lin * g_up).sum())


# ----------------------------------------------------------------------------- Haar
def _square_sum(m: int) -> int:
    """1^2 + ... + m^2 (exact)."""
    return m * (m + 1) * (2 * m + 1) // 6 if m > 0 else 0


def _triangle(m: int) -> int:
    """1 + ... + m (exact)."""
    return m * (m + 1) // 2 if m > 0 else 0


def _coefficient_square_sum(half: int, r: int) -> float:
    """Sum of c^2 over the first r offsets of a node of 2 half bins, c the prefix coefficient
    of :func:`~dprange.inference.wavelet._path_coefficients` ((o + 1) / 2 half on the left
    half, (2 half - 1 - o) / 2 half on the right)."""
    left = _square_sum(min(r, half))
    right = _square_sum(half - 1) - _square_sum(2 * half - r - 1) if r > half else 0
    return (left + right) / (4 * half * half)


def haar_variance_sums(model: HaarEstimate) -> VarianceSums:
    """:class:`VarianceSums` of Haar reconstruction in closed form, level by level.

    With Var(P_j) = sum_h c_h(j)^2 Var(e_h[j >> h]) + ((j + 1) / size)^2 Var(total)
    (:func:`~dprange.inference.wavelet.one_pass_haar_variances`), a node of height h whose
    2^h bins are all real contributes its variance times the sum of c^2 over its offsets;
    at most one node per level is cut by the end of the domain.  For the weighted query
    q_j = n - j (0 on the padding), the coefficient (g_l - g_r) / 2 of a fully real node is
    2^(h-2) (its left half's weights exceed the right half's by 2^(h-1)); the cut node's
    follows from the exact sums of q over its halves."""
    haar = model.strategy
    n, size, height = haar.n, haar.size, haar.height
    prefix = bins = weighted = 0.0
    for h in range(1, height + 1):
        half = 1 << (h - 1)
        var_d = np.broadcast_to(np.asarray(model.level_variances[height - h + 1], dtype=float), (size >> h,))
        full, cut = n >> h, n - ((n >> h) << h)
        full_sum = float(var_d[:full].sum()) if var_d.strides[0] else float(var_d[0]) * full
        cut_var = float(var_d[full]) if cut else 0.0
        prefix += _coefficient_square_sum(half, 2 * half) * full_sum + _coefficient_square_sum(half, cut) * cut_var
        bins += (2 * half * full_sum + cut * cut_var) / 4.0**h
        weighted += (half / 2.0) ** 2 * full_sum
        if cut:
            a = full << h
            left = _weight_sum(n, a, a + half) / half
            right = _weight_sum(n, a + half, a + 2 * half) / half
            weighted += ((left - right) / 2.0) ** 2 * cut_var
    var_total = model._total_variance()
    prefix += var_total * _square_sum(n) / size**2
    bins += var_total * n / 4.0**height
    weighted += (_triangle(n) / size) ** 2 * var_total
    return VarianceSums(prefix, bins, max(weighted, 0.0))


def _weight_sum(n: int, a: int, b: int) -> int:
    """Sum of q_i = n - i over bins a <= i < min(b, n) (0 beyond n)."""
    b = min(b, n)
    return _triangle(n - a) - _triangle(n - b) if a < b else 0
