"""Measured query sets: which linear queries of the histogram x a mechanism measures.

A strategy knows its structure, its sensitivity, and how to evaluate itself (fast
level-wise evaluation and a ``scipy.sparse.linalg.LinearOperator``).  Noise and budget are
attached by the mechanisms (:mod:`dprange.mechanisms.base`).

Sensitivity is derived from the record-level relation.  With strategy columns a_i (the
change of every measured query when one record with value i is added) and rows of level l
weighted by w_l: add/remove neighbours change the answers by +-a_i, so the L_p sensitivity
is max_i ||W a_i||_p; replace neighbours move one record from bin i to bin j, so it is
max_{i != j} ||W (a_i - a_j)||_p.  :meth:`TreeStrategy.sensitivity_power` and
:meth:`HaarStrategy.sensitivity_power` give closed forms, :func:`dense_sensitivity_power` the
definition on an explicit matrix (tests check the two agree).  ``sensitivity_power`` returns
the p-th power (sum of |.|^p), computed in exact arithmetic when the weights are
``fractions.Fraction``: the mechanisms use that to check their calibration exactly.

Trees (Qardaji, Yang and Li, "Understanding Hierarchical Methods for Differentially Private
Histograms", PVLDB 2013, section 3; Rameshwar and Tandon, "Optimal Tree-Based Mechanisms for
Differentially Private Approximate CDFs", 2024, section IV) are *level-uniform*: the root
(depth 0) has ``branching[0]`` children, every node at depth d-1 has ``branching[d-1]``
children, and the leaves (depth h) are the n bins.  When
n is smaller than prod(branching) the tree is the full tree over prod(branching) leaves with
the padding leaves removed: the last block of every level is incomplete and nodes holding
only padding do not exist.  One record lies in exactly one node per level.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cached_property

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .._validation import check_positive_int
from ..errors import ParameterError
from ..operators.base import Operator, check_norm, definition_sensitivity_power
from ..operators.structured import HaarLevel, TreeLevel, VStack, Weighted, block_answers


def _check_norm(p) -> int:
    return check_norm(p)


def _level_weights(weights, count: int) -> list:
    """One weight per measured level (1 when ``weights`` is None)."""
    if weights is None:
        return [1] * count
    weights = list(weights)
    if len(weights) != count:
        raise ParameterError(f"expected one weight per measured level ({count}), got {len(weights)}")
    return weights


def dense_sensitivity_power(matrix, neighbours: str, p: int):
    """The definition on an explicit matrix A (rows = measured queries, columns = bins):
    add/remove max_i sum_r |A_ri|^p, replace max_{i != j} sum_r |A_ri - A_rj|^p (0 for one
    bin); :func:`dprange.operators.definition_sensitivity_power` with this module's argument
    order.  For tests and small strategies."""
    return definition_sensitivity_power(matrix, _check_norm(p), neighbours)


def _weighted_stack_power(blocks: list[Operator], weights: list, neighbours: str, p: int):
    """Delta_p^p of the blocks with rows of block l weighted by weights[l] (0 with no block)."""
    if not blocks:
        return 0
    return VStack([Weighted(block, w) for block, w in zip(blocks, weights)]).sensitivity_power(p, neighbours)


class Strategy:
    """The measured queries of a mechanism: operator blocks and the budget of each block.

    ``blocks[l]`` is an :class:`~dprange.operators.Operator` over the n bins and
    ``budget[l]`` its share of epsilon (exact sum at most the release's epsilon).  ``shape``
    is the descriptor the blocks come from (a :class:`TreeStrategy`, :class:`HaarStrategy` or
    matrix strategy), which gives fast evaluation and describes the strategy.  The
    sensitivity is that of the weighted operator [w_1 A_1; w_2 A_2; ...] (by default w_l the
    block budgets, as ``Fraction``: exact), from the record-level relation
    (:mod:`dprange.operators`).
    """

    def __init__(self, blocks, budget, *, shape=None):
        self.blocks = list(blocks)
        self.budget = [float(e) for e in budget]
        if len(self.budget) != len(self.blocks):
            raise ParameterError(f"expected one budget per block ({len(self.blocks)}), got {len(self.budget)}")
        self.shape = shape
        self.n = self.blocks[0].shape[1] if self.blocks else getattr(shape, "n", 0)

    def operator(self, weights=None) -> Operator:
        """The stacked blocks, rows of block l weighted by ``weights[l]`` when given."""
        if weights is None:
            return VStack(self.blocks)
        return VStack([Weighted(block, w) for block, w in zip(self.blocks, _level_weights(weights, len(self.blocks)))])

    def sensitivity_power(self, norm: int, neighbours: str, weights=None):
        """Delta_p^p of the weighted operator (weights default to the budgets, exactly)."""
        weights = [Fraction(e) for e in self.budget] if weights is None else _level_weights(weights, len(self.blocks))
        return _weighted_stack_power(self.blocks, weights, neighbours, _check_norm(norm))

    def sensitivity(self, norm: int, neighbours: str, weights=None) -> float:
        p = _check_norm(norm)
        return float(self.sensitivity_power(p, neighbours, weights)) ** (1.0 / p)

    def answers(self, x) -> list[np.ndarray]:
        """Exact answers of every block (one O(n) pass for the levels of a tree or wavelet)."""
        return block_answers(self.blocks, x)

    def describe(self) -> dict:
        if self.shape is not None and hasattr(self.shape, "describe"):
            return self.shape.describe()
        return {"bins": self.n, "blocks": [type(b).__name__ for b in self.blocks]}


def tree_height(n: int, branching: int) -> int:
    """Smallest h with branching**h >= n (0 for n = 1)."""
    height, size = 0, 1
    while size < n:
        size *= branching
        height += 1
    return height


def normalise_branching(n: int, branching) -> tuple[int, ...]:
    """Turn ``branching`` (an int b >= 2, or a list of per-level factors) into a tuple.

    An int b gives the smallest tree with b^h >= n.  A list must have entries >= 2 whose
    product is at least n.
    """
    if isinstance(branching, (list, tuple, np.ndarray)):
        factors = tuple(check_positive_int(b, "every branching factor", minimum=2) for b in branching)
        if math.prod(factors) < n:
            raise ParameterError(
                f"the branching factors {list(factors)} cover {math.prod(factors)} leaves, "
                f"fewer than the {n} bins; add levels or use larger factors"
            )
        return factors
    b = check_positive_int(branching, "branching", minimum=2)
    return (b,) * tree_height(n, b)


class TreeStrategy:
    """A level-uniform tree of range counts over ``n`` bins.

    Parameters
    ----------
    n : number of bins (leaves).
    branching : tuple of per-level fan-outs, root first (see :func:`normalise_branching`).
    measure_root : whether the root count (the total) is measured with noise.
    known_total : whether the total is public (replace neighbours); then the root is known
        exactly and never measured.
    """

    def __init__(self, n: int, branching, *, measure_root: bool = True, known_total: bool = False):
        self.n = check_positive_int(n, "bins")
        self.branching = normalise_branching(self.n, branching)
        self.known_total = bool(known_total)
        self.measure_root = bool(measure_root) and not self.known_total

    @property
    def depth(self) -> int:
        """h: the number of levels below the root."""
        return len(self.branching)

    @cached_property
    def block_sizes(self) -> tuple[int, ...]:
        """m_d: leaves under a (full) node at depth d, for d = 0 (root) .. h (leaves)."""
        sizes = [1]
        for b in reversed(self.branching):
            sizes.append(sizes[-1] * b)
        return tuple(reversed(sizes))

    @cached_property
    def level_sizes(self) -> tuple[int, ...]:
        """Number of real nodes at depth d = ceil(n / m_d)."""
        return tuple(-(-self.n // m) for m in self.block_sizes)

    @property
    def measured_depths(self) -> tuple[int, ...]:
        """Depths whose nodes are measured, from the top down."""
        if self.depth == 0:  # one bin: the root is the leaf, measured unless the total is public
            return () if self.known_total else (0,)
        first = 0 if self.measure_root else 1
        return tuple(range(first, self.depth + 1))

    @property
    def num_rows(self) -> int:
        return sum(self.level_sizes[d] for d in self.measured_depths)

    def sensitivity_power(self, neighbours: str, p: int, weights=None):
        """sum |.|^p of the worst change of the (level-weighted) measured rows.

        A record lies in exactly one node per level.  add/remove: every measured level
        changes one node by 1, so the result is sum_l w_l^p.  replace: a record moving from
        bin i to bin j lowers i's node and raises j's wherever they differ; nodes of a level
        with a single real node never differ, and leaves 0 and n - 1 differ at every other
        level, so the result is 2 sum_{l : level l has >= 2 nodes} w_l^p.
        """
        p = _check_norm(p)
        weights = _level_weights(weights, len(self.measured_depths))
        return _weighted_stack_power(self.blocks(), weights, neighbours, p)

    def sensitivity(self, neighbours: str, p: int, weights=None) -> float:
        """The L_p sensitivity (see :meth:`sensitivity_power`)."""
        return float(self.sensitivity_power(neighbours, p, weights)) ** (1.0 / p)

    def level_operator(self, depth: int) -> TreeLevel:
        """The node counts of one depth as an operator."""
        return TreeLevel(self, depth)

    def blocks(self) -> list[Operator]:
        """One :class:`~dprange.operators.TreeLevel` per measured depth, top down."""
        return list(self._blocks)

    @cached_property
    def _blocks(self) -> tuple[Operator, ...]:
        return tuple(self.level_operator(d) for d in self.measured_depths)

    def level_counts_full(self) -> tuple[int, ...]:
        """Nodes per depth in the full (padded) tree: b_1 * ... * b_d."""
        return tuple(math.prod(self.branching[:d]) for d in range(self.depth + 1))

    def level_sums(self, x) -> list[np.ndarray]:
        """Node counts at every depth 0..h: O(n) by reshaping one level into the next."""
        x = np.asarray(x)
        if x.shape[-1] != self.n:
            raise ParameterError(f"expected {self.n} bin counts, got {x.shape[-1]}")
        levels = [x]
        current = x
        for d in range(self.depth, 0, -1):
            b = self.branching[d - 1]
            size = self.level_sizes[d - 1]
            pad = size * b - current.shape[-1]
            if pad:
                current = np.concatenate([current, np.zeros(current.shape[:-1] + (pad,), dtype=current.dtype)], axis=-1)
            current = current.reshape(current.shape[:-1] + (size, b)).sum(axis=-1)
            levels.append(current)
        return levels[::-1]

    def spread(self, level_values: list) -> np.ndarray:
        """Adjoint of :meth:`level_sums`: leaf i receives the sum of its ancestors' values.

        ``level_values[d]`` is an array over the real nodes at depth d, or None (zero).
        """
        out = np.zeros(self.n)
        for d, values in enumerate(level_values):
            if values is None:
                continue
            out += np.repeat(np.asarray(values, dtype=float), self.block_sizes[d])[: self.n]
        return out

    def operator(self) -> LinearOperator:
        """The measured rows (measured depths, top down) as a LinearOperator n -> num_rows."""
        depths = self.measured_depths
        sizes = [self.level_sizes[d] for d in depths]
        splits = np.cumsum(sizes)[:-1]

        def matvec(x):
            levels = self.level_sums(np.ravel(x))
            return np.concatenate([levels[d] for d in depths]).astype(float)

        def rmatvec(y):
            parts = np.split(np.ravel(y), splits)
            level_values: list = [None] * (self.depth + 1)
            for d, part in zip(depths, parts):
                level_values[d] = part
            return self.spread(level_values)

        return LinearOperator((self.num_rows, self.n), matvec=matvec, rmatvec=rmatvec, dtype=float)

    def dense(self) -> np.ndarray:
        """The explicit strategy matrix (measured rows x n).  For tests on small n."""
        rows = []
        for d in self.measured_depths:
            m = self.block_sizes[d]
            for j in range(self.level_sizes[d]):
                row = np.zeros(self.n)
                row[j * m : min((j + 1) * m, self.n)] = 1.0
                rows.append(row)
        return np.array(rows).reshape(len(rows), self.n)

    def describe(self) -> dict:
        return {
            "bins": self.n,
            "branching": list(self.branching),
            "measure_root": self.measure_root,
            "known_total": self.known_total,
        }

    def __repr__(self) -> str:
        return (
            f"TreeStrategy(n={self.n}, branching={list(self.branching)}, "
            f"measure_root={self.measure_root}, known_total={self.known_total})"
        )


class HaarStrategy:
    """Haar wavelet coefficients of a histogram (Privelet; Xiao, Wang, Gehrke, ICDE 2010).

    The domain is padded with empty bins to N = 2^h.  Measured: the total (unless public) and,
    for every internal node u of the binary tree over the padded domain, the integer
    difference d_u = (count of u's left half) - (count of its right half).  Privelet's
    coefficients are c_u = d_u / (2 m_u) with weight W(c_u) = 2 m_u, so adding Laplace noise of
    scale lambda / W(c) to c is exactly adding scale lambda to d_u: each record changes the
    total and one d_u per level by 1, so every level has sensitivity 1 (add/remove), and in
    the replace model (public total) a moved record changes each level by at most 2.
    The padded bins' counts are not assumed known, which keeps the system square (Privelet's
    own estimator); it is also the GLS estimate for this strategy.

    Every measured query is an integer combination of counts (integer noise added to it leaks
    nothing): Privelet's real coefficients c_u are recovered in inference by rescaling.
    Sensitivities (:meth:`sensitivity_power`): under replace, a record moving between the two
    halves of a node u changes d_u by 2, not 1.
    """

    def __init__(self, n: int, *, known_total: bool = False):
        self.n = check_positive_int(n, "bins")
        self.height = tree_height(self.n, 2)
        self.size = 2**self.height
        self.known_total = bool(known_total)

    @property
    def measured_depths(self) -> tuple[int, ...]:
        """Level 0 is the total; level d >= 1 holds the 2^(d-1) differences at depth d - 1."""
        first = 1 if self.known_total else 0
        return tuple(range(first, self.height + 1))

    def sensitivity_power(self, neighbours: str, p: int, weights=None):
        """sum |.|^p of the worst change of the (level-weighted) measured rows.

        add/remove: the total and one difference per level change by 1: sum_l w_l^p.
        replace: for records i != j whose lowest common ancestor u is at depth k, the levels
        above u do not change, d_u changes by 2 (level k + 1) and each lower level has two
        differences changing by 1.  Every depth k < h has such a pair among the real bins (the
        first node's right half starts at 2^(h-k-1) < n), so the result is
        max_k [2^p w_{k+1}^p + 2 sum_{l > k+1} w_l^p] (the total, level 0, is public).
        """
        p = _check_norm(p)
        weights = _level_weights(weights, len(self.measured_depths))
        return _weighted_stack_power(self.blocks(), weights, neighbours, p)

    def level_operator(self, level: int) -> HaarLevel:
        """One level of differences (level 0: the total) as an operator."""
        return HaarLevel(self, level)

    def blocks(self) -> list[Operator]:
        """One :class:`~dprange.operators.HaarLevel` per measured level, top down."""
        return list(self._blocks)

    @cached_property
    def _blocks(self) -> tuple[Operator, ...]:
        return tuple(self.level_operator(k) for k in self.measured_depths)

    def sensitivity(self, neighbours: str, p: int, weights=None) -> float:
        """The L_p sensitivity (see :meth:`sensitivity_power`)."""
        return float(self.sensitivity_power(neighbours, p, weights)) ** (1.0 / p)

    def coefficients(self, x) -> list[np.ndarray]:
        """[total], then per depth 0..h-1 the left-minus-right differences of the padded x."""
        padded = np.zeros(self.size, dtype=np.asarray(x).dtype)
        padded[: self.n] = x
        diffs = []
        current = padded
        for _ in range(self.height):
            pairs = current.reshape(-1, 2)
            diffs.append(pairs[:, 0] - pairs[:, 1])
            current = pairs.sum(axis=1)
        return [current] + diffs[::-1]

    def reconstruct(self, levels: list[np.ndarray]) -> np.ndarray:
        """Inverse transform of the padded domain: top-down, left = (s + d)/2, right = (s - d)/2."""
        current = np.asarray(levels[0], dtype=float).reshape(1)
        for diffs in levels[1:]:
            current = np.stack([(current + diffs) / 2.0, (current - diffs) / 2.0], axis=1).ravel()
        return current

    def dense(self) -> np.ndarray:
        """Measured rows (total first unless known, then differences top down) over n bins."""
        rows = []
        basis = np.eye(self.n)
        coeffs = [self.coefficients(basis[i]) for i in range(self.n)]
        for level in self.measured_depths:
            for j in range(len(coeffs[0][level])):
                rows.append([coeffs[i][level][j] for i in range(self.n)])
        return np.array(rows, dtype=float)

    def describe(self) -> dict:
        return {"bins": self.n, "padded_bins": self.size, "known_total": self.known_total}

    def operator(self) -> LinearOperator:
        """Measured Haar rows as a LinearOperator (see :func:`_haar_operator`)."""
        return _haar_operator(self)


def _haar_operator(self: HaarStrategy) -> LinearOperator:
    """Measured Haar rows (total unless public, then differences top down) as a LinearOperator."""
    levels = self.measured_depths
    sizes = [1 if k == 0 else 2 ** (k - 1) for k in levels]
    splits = np.cumsum(sizes)[:-1]

    def matvec(x):
        coeffs = self.coefficients(np.ravel(x).astype(float))
        return np.concatenate([coeffs[k] for k in levels])

    def rmatvec(y):
        out = np.zeros(self.size)
        for k, part in zip(levels, np.split(np.ravel(y).astype(float), splits)):
            if k == 0:
                out += part[0]
                continue
            half = self.size // 2**k  # leaves in each half of a node at depth k - 1
            signs = np.concatenate([np.ones(half), -np.ones(half)])
            out += (part[:, None] * signs[None, :]).ravel()
        return out[: self.n]

    return LinearOperator((sum(sizes), self.n), matvec=matvec, rmatvec=rmatvec, dtype=float)
