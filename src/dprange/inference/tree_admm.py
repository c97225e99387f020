"""The tree parts of ADMM for NNLS / L1 inference in O(nodes) per iteration, without
re-deriving anything that does not change between iterations.

Lee, Wang and Kifer, "Maximum likelihood postprocessing for differential privacy under
consistency constraints", KDD 2015, Algorithm 3: on a tree, ADMM's x-step is exact tree
least squares (Hay et al., PVLDB 2010; Qardaji, Yang and Li, PVLDB 2013, section 3.3).

* :class:`TreeStack`: the measured levels of a tree stacked as one operator; ``A x`` sums
  level into level by reshaping, ``A^T r`` spreads every level's values down one level at a
  time (broadcast views): O(nodes) each, where per-level products cost O(n) per level.
* :class:`TreeLeastSquares`: the x-step.  The variances of tree GLS depend on the row
  weights and the split weight only, so the upward pass's variance half and the downward
  pass's shares are computed once per split weight (ADMM changes it at most 30 times);
  every iteration runs the value half only, a few multiply-adds per node, in preallocated
  padded buffers.  Equal to :func:`~dprange.inference.tree.tree_gls` on the same
  measurements up to rounding.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from ..strategies.trees import TreeStrategy
from .tree import _safe_div, family_sums


class TreeStack(LinearOperator):
    """The counts of the tree's measured depths ``depths`` (ascending), stacked, as a
    LinearOperator over the n bins: rows of depth d are its real nodes, left to right."""

    def __init__(self, strategy: TreeStrategy, depths):
        self.strategy = strategy
        self.depths = tuple(depths)
        sizes = [strategy.level_sizes[d] for d in self.depths]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        super().__init__(dtype=float, shape=(int(self.offsets[-1]), strategy.n))

    def _padded(self, depth: int) -> int:
        """Nodes at ``depth`` in whole families of its parents (depth >= 1)."""
        tree = self.strategy
        return tree.level_sizes[depth - 1] * tree.branching[depth - 1]

    def _matvec(self, x):
        tree = self.strategy
        out = np.empty(self.shape[0])
        current = np.asarray(x, dtype=float).ravel()
        by_depth = {d: k for k, d in enumerate(self.depths)}
        for d in range(tree.depth, -1, -1):
            if d in by_depth:
                k = by_depth[d]
                out[self.offsets[k] : self.offsets[k + 1]] = current
            if d == 0 or min(self.depths) >= d:
                break
            padded = self._padded(d)
            if padded != current.size:
                current = np.concatenate([current, np.zeros(padded - current.size)])
            current = family_sums(current, tree.level_sizes[d - 1], tree.branching[d - 1])  # cost: one pass
        return out

    def _rmatvec(self, r):
        tree = self.strategy
        r = np.asarray(r, dtype=float).ravel()
        by_depth = {d: k for k, d in enumerate(self.depths)}
        current = None
        for d in range(tree.depth + 1):
            if current is not None:  # every node's value to each of its children
                current = np.repeat(current, tree.branching[d - 1])[: tree.level_sizes[d]]
            if d in by_depth:
                k = by_depth[d]
                part = r[self.offsets[k] : self.offsets[k + 1]]
                current = part.copy() if current is None else current + part
        return np.zeros(tree.n) if current is None else current

    def _adjoint(self):
        return LinearOperator(
            dtype=float, shape=(self.shape[1], self.shape[0]), matvec=self._rmatvec, rmatvec=self._matvec
        )


class TreeLeastSquares:
    """The tree x-step of ADMM: ``solve(target_rows, target_x, x_prev, split)`` returns

        argmin ||D A x - target_rows||^2 + split ||x - target_x||^2   (and sum x = total)

    for A the measured depths of the tree (ascending), D = diag(level weights), as
    :func:`~dprange.inference.l1_admm.tree_x_update` defines it: depth d's rows are
    measurements target / weight of variance 1 / weight^2, and the split a second
    measurement of the leaves of variance 1 / split, combined with theirs."""

    #: over-relaxation preferred with this x-step (read by admm when relax=None; see tree_x_update)
    relax = 1.6

    def __init__(self, strategy: TreeStrategy, level_weights, *, total=None, cache: int = 2):
        self.strategy = strategy
        self.total = None if total is None else float(total)
        self.depths = [d for d in range(strategy.depth + 1) if level_weights[d] is not None]
        self.weights = {
            d: np.broadcast_to(np.asarray(level_weights[d], dtype=float), (strategy.level_sizes[d],))
            for d in self.depths
        }
        sizes = [strategy.level_sizes[d] for d in self.depths]
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.offsets = dict(zip(self.depths, bounds[:-1].tolist()))
        self._rows = int(bounds[-1])
        self._last_rows: np.ndarray | None = None
        self._cache: dict = {}
        self._cache_size = cache
        h = strategy.depth
        # padded value buffers: depth d >= 1 holds whole families of its parents (zeros beyond)
        self._buffers: list[np.ndarray] = [np.zeros(0)] + [
            np.zeros(strategy.level_sizes[d - 1] * strategy.branching[d - 1]) for d in range(1, h + 1)
        ]

    def _plan(self, split: float):
        """Per-depth coefficients for this split weight: (leaf_rows, leaf_x, row_coef,
        sum_coef, shares); O(nodes) once per split value."""
        if split in self._cache:
            return self._cache[split]
        tree = self.strategy
        h = tree.depth
        up_w: list = [None] * (h + 1)
        row_coef: list = [None] * (h + 1)
        sum_coef: list = [None] * (h + 1)
        shares: list = [None] * h
        leaf_weight = self.weights.get(h)
        leaf_rows: np.ndarray | None
        leaf_x: float | np.ndarray
        if leaf_weight is None:
            leaf_rows = None
            leaf_x = 1.0
            up_w[h] = np.full(tree.level_sizes[h], 1.0 / split)
        else:
            precision = leaf_weight**2 + split
            leaf_rows = leaf_weight / precision  # target_rows of the leaves -> values
            leaf_x = split / precision
            up_w[h] = 1.0 / precision
        for d in range(h - 1, -1, -1):
            size, b = tree.level_sizes[d], tree.branching[d]
            flat = np.zeros(size * b)
            flat[: tree.level_sizes[d + 1]] = up_w[d + 1]
            big_w = family_sums(flat, size, b)
            shares[d] = _safe_div(flat.reshape(size, b), big_w[:, None]).ravel()
            if d in self.weights:
                v = 1.0 / self.weights[d] ** 2
                denom = big_w + v
                row_coef[d] = np.where(denom > 0, _safe_div(big_w, denom), 1.0) * self.weights[d] ** -1.0
                sum_coef[d] = _safe_div(v, denom)
                up_w[d] = _safe_div(big_w * v, denom)
            else:
                up_w[d] = big_w
        plan = (leaf_rows, leaf_x, row_coef, sum_coef, shares)
        if len(self._cache) >= self._cache_size:
            self._cache.pop(next(iter(self._cache)))
        self._cache[split] = plan
        return plan

    def __call__(self, target_rows, target_x, x_prev=None, split: float = 1.0) -> np.ndarray:
        tree = self.strategy
        h = tree.depth
        leaf_rows, leaf_x, row_coef, sum_coef, shares = self._plan(float(split))
        n = tree.n
        leaves = self._buffers[h]
        if leaf_rows is None:
            leaves[:n] = target_x
        else:
            start = self.offsets[h]
            np.multiply(target_rows[start : start + n], leaf_rows, out=leaves[:n])
            leaves[:n] += leaf_x * target_x
        child_sums: list = [None] * h
        estimate = np.zeros(1)  # the root's, set by the upward pass (trees here have h >= 1)
        for d in range(h - 1, -1, -1):  # upward: the value half of weighted averaging
            size, b = tree.level_sizes[d], tree.branching[d]
            sums = family_sums(self._buffers[d + 1], size, b)  # cost: one pass over the level
            child_sums[d] = sums
            if row_coef[d] is not None:
                start = self.offsets[d]
                z = row_coef[d] * target_rows[start : start + size]
                z += sum_coef[d] * sums
            else:
                z = sums
            if d > 0:
                self._buffers[d][:size] = z
            else:
                estimate = z
        if self.total is not None:
            estimate = np.array([self.total])
        rows = np.empty(self._rows)  # the node estimates of the measured depths: A x
        for d in range(h + 1):  # downward: every child gets its share of its parent's residual
            if d in self.offsets:
                start = self.offsets[d]
                rows[start : start + tree.level_sizes[d]] = estimate
            if d == h:
                break
            residual = estimate - child_sums[d]
            family = np.repeat(residual, tree.branching[d])  # cost: three passes over the level below
            family *= shares[d]  # (the same products as a broadcast, faster for small b)
            family += self._buffers[d + 1]
            estimate = family[: tree.level_sizes[d + 1]]
        self._last_rows = rows
        return estimate

    def rows_of_last(self) -> np.ndarray:
        """A x for the x of the last call, from its node estimates: tree least squares is
        consistent (every node's estimate is the sum of its children's), so no product with
        A is needed (Lee et al. 2015, Algorithm 3).  A fresh array each call."""
        rows, self._last_rows = self._last_rows, None
        if rows is None:
            raise RuntimeError("rows_of_last needs a solve first")
        return rows
