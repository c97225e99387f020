"""k-D workloads as operators on the flattened (C order) grid of a product domain.

Rectangles (boxes of cells lows[a] <= i_a <= highs[a] on every axis), all rectangles, random
rectangles, prefix (dominance) rectangles and k-way marginals: the workloads of Miklau, "Differentially-private
batch query answering" (DIMACS 2012 tutorial), and of Qardaji, Yang and Li, PVLDB 2013,
section 5.  A rectangle query is the Kronecker product of one 1-D range per axis, so the
workloads built from all ranges (or prefixes, or cells and totals) of every axis are
Kronecker products of 1-D operators, with Kronecker Gram matrices.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._validation import check_positive_int
from ..errors import ParameterError
from ..operators.base import Operator
from ..operators.dense import Explicit
from ..operators.structured import Identity, Kron, Prefix, Total, VStack
from ..privacy.samplers import resolve_rng


def check_shape(shape) -> tuple[int, ...]:
    """A grid shape: a non-empty tuple of positive side lengths."""
    sides = tuple(check_positive_int(s, "every side of the grid") for s in np.atleast_1d(shape).tolist())
    if not sides:
        raise ParameterError("a grid needs at least one axis")
    return sides


def check_rectangles(grid, lows, highs) -> tuple[np.ndarray, np.ndarray]:
    """(R, k) int64 arrays of inclusive rectangle bounds inside the grid."""
    k = len(grid)
    lows = np.asarray(lows, dtype=np.int64).reshape(-1, k)
    highs = np.asarray(highs, dtype=np.int64).reshape(-1, k)
    if lows.shape != highs.shape:
        raise ParameterError("lows and highs must have the same shape")
    if lows.size and (np.any(lows < 0) or np.any(highs >= np.asarray(grid)) or np.any(lows > highs)):
        raise ParameterError(f"rectangles must satisfy 0 <= lows <= highs < {list(grid)} on every axis")
    return lows, highs


def all_range_gram(n: int) -> np.ndarray:
    """W^T W of all n(n+1)/2 ranges of n bins: entry (i, j) counts the ranges holding both,
    (min(i, j) + 1)(n - max(i, j))."""
    i = np.arange(n)
    return ((np.minimum.outer(i, i) + 1) * (n - np.maximum.outer(i, i))).astype(float)


class AllRanges(Operator):
    """All n(n+1)/2 ranges [lo, hi] of n bins, rows ordered by lo then hi; closed-form Gram."""

    def __init__(self, n: int):
        self.n = check_positive_int(n, "n")
        lo, hi = np.triu_indices(self.n)
        self.lows, self.highs = lo.astype(np.int64), hi.astype(np.int64)
        super().__init__((self.lows.size, self.n))

    def _apply(self, X):
        cum = np.concatenate([np.zeros((1,) + X.shape[1:]), np.cumsum(X, axis=0)], axis=0)
        return cum[self.highs + 1] - cum[self.lows]

    def _apply_adjoint(self, Y):
        # Range r adds Y_r to bins lo..hi: a difference array, then a cumulative sum.
        diff = np.zeros((self.n + 1,) + Y.shape[1:])
        np.add.at(diff, self.lows, Y)
        np.add.at(diff, self.highs + 1, -Y)
        return np.cumsum(diff, axis=0)[: self.n]

    def gram(self) -> Operator:
        return Explicit(all_range_gram(self.n))


class Rectangles(Operator):
    """Explicit rectangles: row r sums the cells with lows[r, a] <= i_a <= highs[r, a] on every
    axis.  Products by a k-D summed-area table and 2^k corners (O(cells + 2^k rows))."""

    def __init__(self, shape, lows, highs):
        self.grid = check_shape(shape)
        lows = np.atleast_2d(np.asarray(lows, dtype=np.int64))
        highs = np.atleast_2d(np.asarray(highs, dtype=np.int64))
        k = len(self.grid)
        if lows.shape != highs.shape or lows.shape[1] != k:
            raise ParameterError(f"lows and highs must both be (rectangles x {k}) arrays")
        sides = np.asarray(self.grid)
        if lows.size and (np.any(lows < 0) or np.any(highs >= sides) or np.any(lows > highs)):
            raise ParameterError(f"rectangles must satisfy 0 <= lows <= highs < {list(self.grid)} on every axis")
        self.lows, self.highs = lows, highs
        super().__init__((lows.shape[0], math.prod(self.grid)))

    def __repr__(self) -> str:
        return f"Rectangles(shape={list(self.grid)}, rectangles={self.shape[0]})"

    def to_dict(self) -> dict:
        """The saved form (JSON): shape, lows and highs, which :meth:`from_dict` reads back."""
        return {"shape": [int(n) for n in self.grid], "lows": self.lows.tolist(), "highs": self.highs.tolist()}

    @classmethod
    def from_dict(cls, data: dict, name: str = "workload") -> Rectangles:
        """Rectangles from their saved form; a ParameterError naming ``name`` when it is not one."""
        try:
            return cls(data["shape"], data["lows"], data["highs"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(f"{name}: saved rectangles need shape, lows and highs ({exc!r})") from None

    def _corners(self):
        """(index tuple into the padded summed-area table, sign) of each of the 2^k corners."""
        k = len(self.grid)
        for choice in itertools.product((0, 1), repeat=k):
            index = tuple(self.highs[:, a] + 1 if c == 0 else self.lows[:, a] for a, c in enumerate(choice))
            yield index, (-1) ** sum(choice)

    def _apply(self, X):
        cols = X.shape[1]
        table = X.reshape(self.grid + (cols,))
        for a in range(len(self.grid)):
            table = np.cumsum(table, axis=a)
        table = np.pad(table, [(1, 0)] * len(self.grid) + [(0, 0)])
        out = np.zeros((self.shape[0], cols))
        for index, sign in self._corners():
            out += sign * table[index]
        return out

    def _apply_adjoint(self, Y):
        cols = Y.shape[1]
        table = np.zeros(tuple(s + 1 for s in self.grid) + (cols,))
        for index, sign in self._corners():
            np.add.at(table, index, sign * Y)
        for a in range(len(self.grid)):
            table = np.flip(np.cumsum(np.flip(table, axis=a), axis=a), axis=a)
        inner = tuple(slice(1, None) for _ in self.grid)
        return table[inner].reshape(-1, cols)


def all_rectangles(shape) -> Kron:
    """Every rectangle of the grid: the Kronecker product of all ranges of each axis; its Gram
    is the Kronecker product of the closed-form all-range Grams."""
    return Kron([AllRanges(n) for n in check_shape(shape)])


def random_rectangles(shape, count: int, rng=None) -> Rectangles:
    """``count`` rectangles, on each axis a range from two independent uniform bins (sorted)."""
    grid = check_shape(shape)
    count = check_positive_int(count, "count")
    source = resolve_rng(rng)
    ends = np.stack([source.integers(0, n, size=(count, 2)) for n in grid], axis=1)
    return Rectangles(grid, ends.min(axis=2), ends.max(axis=2))


def prefix_rectangles(shape) -> Kron:
    """Dominance counts: cells with i_a <= j_a on every axis, one per cell j (a k-D CDF)."""
    return Kron([Prefix(n) for n in check_shape(shape)])


def marginals(shape, order: int) -> VStack:
    """All ``order``-way marginals: for each set of ``order`` axes (lexicographic), the counts of
    every combination of their bins, the other axes summed (Kronecker of identities and totals)."""
    grid = check_shape(shape)
    order = check_positive_int(order, "order")
    if order > len(grid):
        raise ParameterError(f"a {order}-way marginal needs at least {order} axes, the grid has {len(grid)}")
    blocks = []
    for axes in itertools.combinations(range(len(grid)), order):
        blocks.append(Kron([Identity(n) if a in axes else Total(n) for a, n in enumerate(grid)]))
    return VStack(blocks)


def explicit(matrix, shape) -> Explicit:
    """An explicit query matrix over the flattened grid (queries x cells)."""
    grid = check_shape(shape)
    op = Explicit(matrix)
    if op.shape[1] != math.prod(grid):
        raise ParameterError(f"an explicit workload on a {list(grid)} grid needs {math.prod(grid)} columns")
    return op
