"""Exact least squares for Kronecker-product strategies (k-D): the estimate by per-axis
factorisation, its covariance applied without forming it, and rectangle variances; the Morton
tree estimate of k-D hierarchies and the p-Identity product's estimate.
"""

from __future__ import annotations

import math
import string

import numpy as np

from ..errors import ParameterError
from ..operators.base import Operator
from ..operators.dense import Explicit
from ..operators.structured import Kron
from ..strategies.kron import TABLE_LIMIT
from ..workloads.rectangles import check_rectangles
from .p_identity import DiagonalPlusRows, PIdentityEstimate


def _einsum_product(coefficients: np.ndarray, factors: list[np.ndarray]) -> np.ndarray:
    """sum over level combos of c[l_1..l_k] prod_a F_a[r, l_a], for every r."""
    letters = string.ascii_letters[: len(factors)]
    spec = ",".join(f"z{c}" for c in letters) + f",{letters}->z"
    return np.einsum(spec, *factors, coefficients, optimize=True)


def _along(op: Operator, array: np.ndarray, axis: int, *, adjoint: bool) -> np.ndarray:
    """``op`` (or its adjoint) applied along one axis of a k-D array."""
    moved = np.moveaxis(array, axis, 0)
    flat = moved.reshape(moved.shape[0], -1)
    out = op._apply_adjoint(flat) if adjoint else op._apply(flat)
    return np.moveaxis(out.reshape((out.shape[0],) + moved.shape[1:]), 0, axis)


def kron_block_answers(axis_levels, combos, grid: np.ndarray) -> list[np.ndarray]:
    """The answers of every product block T_{1,l_1} (x) ... (x) T_{k,l_k} (``combos``) on the
    k-D ``grid``, sharing the partial products: axis 0's levels are applied once each to the
    whole grid, then every later axis to the (smaller) partial results."""
    partial: dict[tuple[int, ...], np.ndarray] = {(): np.asarray(grid, dtype=float)}
    for axis in range(len(axis_levels)):
        prefixes = {c[: axis + 1] for c in combos}
        partial = {p: _along(axis_levels[axis][p[-1]], partial[p[:-1]], axis, adjoint=False) for p in sorted(prefixes)}
    return [partial[tuple(c)].ravel() for c in combos]


def kron_adjoint_sum(axis_levels, axis_weights, combos, values, shape) -> np.ndarray:
    """sum over blocks of (T_{1,l_1} / w_{1,l_1} (x) ... (x) T_{k,l_k} / w_{k,l_k})^T y_b, the
    last axis first: blocks that share their first levels are summed before those are applied."""
    k = len(axis_levels)
    partial: dict[tuple[int, ...], np.ndarray] = {}
    for combo, y in zip(combos, values):
        rows = tuple(axis_levels[a][level].shape[0] for a, level in enumerate(combo))
        partial[tuple(combo)] = np.asarray(y, dtype=float).reshape(rows)
    for axis in range(k - 1, -1, -1):
        summed: dict[tuple[int, ...], np.ndarray] = {}
        for combo, array in partial.items():
            level = combo[axis]
            applied = _along(axis_levels[axis][level], array, axis, adjoint=True) / axis_weights[axis][level]
            prefix = combo[:axis]
            summed[prefix] = summed[prefix] + applied if prefix in summed else applied
        partial = summed
    return partial[()].reshape(math.prod(shape))


class KronEstimate:
    """Least squares on product blocks (module doc), with exact variances."""

    def __init__(self, shape, axis_levels, axis_weights, combos, values, variances, total=None):
        self.grid = tuple(shape)
        self.axis_levels = axis_levels
        self.combos = combos
        shared: dict = {}  # equal axes (same levels and weights) share their factorisation
        self._inverse_grams, self._tables = [], []
        for levels, weights in zip(axis_levels, axis_weights):
            key = (id(levels), tuple(weights))
            if key not in shared:
                shared[key] = self._axis_factors(levels, weights)
            self._inverse_grams.append(shared[key][0])
            self._tables.append(shared[key][1])
        unit = [math.prod(axis_weights[a][level] for a, level in enumerate(c)) for c in combos]
        self.coefficients = np.zeros(tuple(len(levels) for levels in axis_levels))
        for c, u, v in zip(combos, unit, variances):
            self.coefficients[c] = float(v) / u**2
        inverse = Kron([Explicit(g) for g in self._inverse_grams])
        rhs = kron_adjoint_sum(axis_levels, axis_weights, combos, values, self.grid)
        leaves = inverse.matvec(rhs)
        self.total_variance = 0.0
        self.known_total = total is not None
        if total is not None:
            ones = np.ones(leaves.size)
            c_ones = self._covariance_apply(ones)
            self.total_variance = float(ones @ c_ones)
            leaves = leaves - c_ones * (leaves.sum() - float(total)) / self.total_variance
        self.leaves = leaves

    @staticmethod
    def _axis_factors(levels, weights) -> tuple[np.ndarray, np.ndarray]:
        """G^-1 of one axis and its table K (n + 1, n + 1, levels): K[., ., l] = Y_l^T Y_l with
        Y_l = T_l G^-1 [0, prefix indicators], so that a range's quadratic form is read from
        three entries."""
        n = levels[0].shape[1]
        if (n + 1) ** 2 * len(levels) > TABLE_LIMIT:
            raise ParameterError(
                f"exact rectangle errors on an axis of {n} bins with {len(levels)} levels need "
                f"{(n + 1) ** 2 * len(levels) * 8 / 2**30:.1f} GiB; use fewer bins or a larger branching on that axis"
            )
        gram = sum(op.gram().dense() / u for op, u in zip(levels, weights))
        inverse_gram = np.linalg.inv(gram)
        solved = np.zeros((n, n + 1))
        solved[:, 1:] = np.cumsum(inverse_gram, axis=1)  # G^-1 times the prefix indicators
        table = np.empty((n + 1, n + 1, len(levels)))
        for position, op in enumerate(levels):
            y = op._apply(solved)
            table[:, :, position] = y.T @ y
        return inverse_gram, table

    def _covariance_apply(self, v) -> np.ndarray:
        """Cov(x) v before the total correction: G^-1 (sum_b c_b A_b^T A_b) G^-1 v (v: one
        vector, or the columns of a matrix)."""
        inverse = Kron([Explicit(g) for g in self._inverse_grams])
        matrix = np.ndim(v) == 2
        z = inverse._apply(np.asarray(v, dtype=float).reshape(inverse.shape[1], -1))
        acc = np.zeros_like(z)
        for c in self.combos:
            block = Kron([self.axis_levels[a][level] for a, level in enumerate(c)])
            acc += self.coefficients[c] * block._apply_adjoint(block._apply(z))
        out = inverse._apply(acc)
        return out if matrix else out[:, 0]

    def _axis_covariance_factors(self, vectors_list) -> list[np.ndarray]:
        """Per axis a, an (m, n_a, levels) array: G_a^-1 T_{a,l}^T T_{a,l} G_a^-1 v_{r,a} for
        every Kronecker vector r and level l (the covariance is sum_b c_b (x)_a of these)."""
        out = []
        for a in range(len(self.grid)):
            V = np.array([vectors[a] for vectors in vectors_list], dtype=float).T  # n_a x m
            g = self._inverse_grams[a]
            Z = g @ V
            levels = [g @ op._apply_adjoint(op._apply(Z)) for op in self.axis_levels[a]]
            out.append(np.stack(levels, axis=2).transpose(1, 0, 2))
        return out

    def _contract(self, factors, kept) -> np.ndarray:
        """sum_b c_b prod_a F_a[r, i_a, l_a], summed over the axes not ``kept``: (m, cells kept)."""
        letters = string.ascii_lowercase[: len(factors)]
        upper = string.ascii_uppercase[: len(factors)]
        operands, specs = [], []
        for a, f in enumerate(factors):
            if a in kept:
                operands.append(f)
                specs.append(f"z{upper[a]}{letters[a]}")
            else:
                operands.append(f.sum(axis=1))
                specs.append(f"z{letters[a]}")
        target = "z" + "".join(upper[a] for a in sorted(kept))
        result = np.einsum(",".join(specs) + f",{letters}->{target}", *operands, self.coefficients, optimize=True)
        return result.reshape(result.shape[0], -1)

    def covariance_kron_gram(self, vectors_list) -> np.ndarray:
        """V^T Cov(x) V for the Kronecker-product vectors (columns of V), public-total
        correction included, from per-axis inner products only (no pass over the cells)."""
        factors = self._axis_covariance_factors(vectors_list)
        letters = string.ascii_lowercase[: len(factors)]
        inner = []
        for a, f in enumerate(factors):
            V = np.array([vectors[a] for vectors in vectors_list], dtype=float)  # m x n_a
            inner.append(np.einsum("ril,si->rsl", f, V))  # v_s . (covariance factor of r), per level
        spec = ",".join(f"rs{letters[a]}" for a in range(len(factors))) + f",{letters}->rs"
        gram = np.einsum(spec, *inner, self.coefficients, optimize=True)
        if self.known_total:
            sums = self._contract(factors, ())[:, 0]  # 1^T S v for every vector
            gram = gram - np.outer(sums, sums) / self.total_variance
        return gram

    def covariance_kron_rows(self, vectors_list, kept=None) -> np.ndarray:
        """Cov(x) applied to Kronecker-product vectors (each a list of per-axis vectors), as
        the rows of an m x cells array, or of their marginals over the ``kept`` axes (sorted,
        C order); the public-total correction included.  The cells are touched once per row
        (cost O(m cells levels)), the per-axis work is small."""
        kept = tuple(range(len(self.grid))) if kept is None else tuple(sorted(kept))
        factors = self._axis_covariance_factors(vectors_list)
        out = self._contract(factors, kept)
        if self.known_total:
            ones = self._axis_covariance_factors([[np.ones(n) for n in self.grid]])
            sums = self._contract(factors, ())[:, 0]  # 1^T S v for every row
            out -= np.outer(sums, self._contract(ones, kept)[0]) / self.total_variance
        return out

    def covariance_apply(self, V) -> np.ndarray:
        """Cov(x) V for the columns of V (cells x m), the public-total correction included."""
        V = np.asarray(V, dtype=float).reshape(len(self.leaves), -1)
        out = self._covariance_apply(V)  # cost: a few passes over cells x m
        if self.known_total:
            c_ones = self._covariance_apply(np.ones(V.shape[0]))
            out = out - np.outer(c_ones, c_ones @ V) / self.total_variance
        return out

    def query_variance(self, weights) -> np.ndarray:
        """Exact variance of q . x for every row q of ``weights`` (cells in C order)."""
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        out = np.array([float(row @ self._covariance_apply(row)) for row in q])
        if self.known_total:
            cross = np.array([float(row @ self._covariance_apply(np.ones(row.size))) for row in q])
            out = out - cross**2 / self.total_variance
        out = np.maximum(out, 0.0)
        return out if np.ndim(weights) > 1 else out[0]

    def rectangle_variance(self, lows, highs) -> np.ndarray:
        """Exact variance of every rectangle's estimate ((R, k) inclusive bounds), vectorised."""
        lows, highs = check_rectangles(self.grid, lows, highs)
        out = np.empty(lows.shape[0])
        for start in range(0, lows.shape[0], 1 << 16):
            sl = slice(start, start + (1 << 16))
            quad, cross = [], []
            for a, table in enumerate(self._tables):
                lo, hi = lows[sl, a], highs[sl, a] + 1
                n = self.grid[a]
                flat = table.reshape(-1, table.shape[2])  # np.take on row numbers: far faster than two index arrays
                form = np.take(flat, hi * (n + 2), axis=0)  # entry (hi, hi) of the (n + 1) x (n + 1) table
                form += np.take(flat, lo * (n + 2), axis=0)
                form -= 2.0 * np.take(flat, hi * (n + 1) + lo, axis=0)
                quad.append(form)
                if self.known_total:
                    cross.append(np.take(flat, hi * (n + 1) + n, axis=0) - np.take(flat, lo * (n + 1) + n, axis=0))
            variance = _einsum_product(self.coefficients, quad)
            if self.known_total:
                variance = variance - _einsum_product(self.coefficients, cross) ** 2 / self.total_variance
            out[sl] = np.maximum(variance, 0.0)
        return out

    def mean_variance(self, families) -> float:
        """The exact mean variance over the product of per-axis range families (every
        combination of one range (lo, hi) per axis, ``families[a] = (lows, highs)``): the
        per-axis quadratic forms are independent across axes, so their means multiply."""
        quad, cross = [], []
        for a, (table, (lo, hi)) in enumerate(zip(self._tables, families)):
            lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64) + 1
            quad.append((table[hi, hi] + table[lo, lo] - 2 * table[hi, lo]).mean(axis=0)[None, :])
            if self.known_total:
                c = table[hi, self.grid[a]] - table[lo, self.grid[a]]
                cross.append(c.T @ c / c.shape[0])
        mean = float(_einsum_product(self.coefficients, quad)[0])
        if self.known_total:
            letters = string.ascii_letters[: len(cross)]
            upper = string.ascii_letters[26 : 26 + len(cross)]
            spec = ",".join(f"{x}{y}" for x, y in zip(letters, upper)) + f",{letters},{upper}->"
            second = float(np.einsum(spec, *cross, self.coefficients, self.coefficients, optimize=True))
            mean -= second / self.total_variance
        return max(mean, 0.0)


# ----------------------------------------------------------------------------- k-D trees
def morton_order(side: int, branching: int, k: int) -> np.ndarray:
    """Position in Morton (base-b digit-interleaved) order of every cell of the padded cube,
    cells in C order: the digits of all axes, most significant first."""
    coords = np.indices((side,) * k).reshape(k, -1)
    height = round(math.log(side, branching)) if side > 1 else 0
    order = np.zeros(coords.shape[1], dtype=np.int64)
    for t in range(height - 1, -1, -1):
        for a in range(k):
            order = order * branching + (coords[a] // branching**t) % branching
    return order


class MortonTreeEstimate:
    """Tree least squares on the Morton-ordered padded cube, read back on the real grid."""

    def __init__(self, grid, side: int, order: np.ndarray, tree_estimate):
        self.grid = tuple(grid)
        self.side = side
        self.order = order
        self.tree = tree_estimate
        cube = tree_estimate.leaves[order].reshape((side,) * len(self.grid))
        self.leaves = cube[tuple(slice(0, n) for n in self.grid)].ravel()

    def _morton_weights(self, q: np.ndarray) -> np.ndarray:
        cube = np.zeros((q.shape[0],) + (self.side,) * len(self.grid))
        cube[(slice(None),) + tuple(slice(0, n) for n in self.grid)] = q.reshape((q.shape[0],) + self.grid)
        out = np.zeros((q.shape[0], self.side ** len(self.grid)))
        out[:, self.order] = cube.reshape(q.shape[0], -1)
        return out

    def query_variance(self, weights) -> np.ndarray:
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        out = np.concatenate(
            [self.tree.query_variance(self._morton_weights(q[s : s + 256])) for s in range(0, q.shape[0], 256)]
        )
        return out if np.ndim(weights) > 1 else out[0]

    def rectangle_variance(self, lows, highs) -> np.ndarray:
        """Exact variance of every rectangle's estimate in O(depth x k) per rectangle.

        The tree is complete (the padded cube) with one noise variance per depth, so every
        node of depth d has the same from-below variance w_d.  Then the recursion of
        :mod:`dprange.inference.tree` has g_u = |R n u| / |u| (children average equally) and
        g^T C_u g = w_{d+1} (sum_c g_c^2 - (sum_c g_c)^2 / B) for fan-out B, so
        Var(R) = sum_d w_{d+1} (S_{d+1} - B S_d) + g_root^2 P_root with
        S_d = sum over depth-d nodes of g_u^2 = prod_a sum_i (overlap of R with the i-th block
        of axis a / block side)^2: two partial blocks and a count of full ones per axis.
        """
        lows, highs = check_rectangles(self.grid, lows, highs)
        out = np.empty(lows.shape[0])
        for start in range(0, lows.shape[0], 1 << 15):  # chunks whose temporaries stay in cache
            sl = slice(start, start + (1 << 15))
            families = [(lows[sl, a], highs[sl, a]) for a in range(len(self.grid))]
            out[sl] = self._combine(
                lambda side, families=families: np.prod(
                    [_block_overlap_squares(lo, hi, side) for lo, hi in families], axis=0
                )
            )
        return np.maximum(out, 0.0)

    def mean_variance(self, families) -> float:
        """The exact mean variance over the product of per-axis range families: S_d is a product
        over axes of per-axis terms, independent across the family's axes, so means multiply."""
        families = [(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)) for lo, hi in families]
        variance = self._combine(
            lambda side: math.prod(float(np.mean(_block_overlap_squares(lo, hi, side))) for lo, hi in families)
        )
        return max(float(variance), 0.0)

    def _combine(self, squares_at):
        """sum_d w_{d+1} (S_{d+1} - B S_d) + S_0 P_root, S_d = ``squares_at(block side at depth d)``."""
        strategy = self.tree.strategy
        fan_out = strategy.branching[0] if strategy.depth else 1
        base = round(fan_out ** (1.0 / len(self.grid)))
        height = strategy.depth
        squares = [squares_at(base ** (height - d)) for d in range(height + 1)]
        variance = squares[0] * self.tree.root_variance  # g_root^2 = S_0 (one root node)
        for d in range(height):
            w_child = float(np.asarray(self.tree.from_below_variance[d + 1]).ravel()[0])
            variance = variance + w_child * (squares[d + 1] - fan_out * squares[d])
        return variance


def _block_overlap_squares(lo: np.ndarray, hi: np.ndarray, side: int) -> np.ndarray:
    """sum_i (|[lo, hi] n block_i| / side)^2 over the blocks [i side, (i + 1) side)."""
    first, last = lo // side, hi // side
    same = first == last
    head = ((first + 1) * side - lo) / side
    tail = (hi - last * side + 1) / side
    inside = np.maximum(last - first - 1, 0)
    return np.where(same, ((hi - lo + 1) / side) ** 2, head**2 + tail**2 + inside)


#: Ranges per pass of :meth:`KronPIdentityEstimate.mean_variance` (memory p_a x MEAN_CHUNK floats).
MEAN_CHUNK = 1 << 15


class KronPIdentityEstimate:
    """Least squares for a Kronecker product of p-Identity factors with one noise variance,
    and its exact error model (module doc)."""

    def __init__(self, shape, factors: list[DiagonalPlusRows], variance: float, values=None, total=None):
        self.shape = tuple(shape)
        self.variance = float(variance)
        self.known_total = total is not None
        # Unit-variance per-axis models: S_a by Woodbury, range variances q_a^T S_a q_a.
        self.axes = [PIdentityEstimate(f.diagonal, f.rows, 1.0, total=0.0) for f in factors]
        self.factors = factors
        self.leaves = np.zeros(int(np.prod(self.shape))) if values is None else self._solve(values, total)

    def _solve(self, values, total) -> np.ndarray:
        y = np.asarray(values, dtype=float).reshape([f.shape[0] for f in self.factors])
        for a, (factor, axis) in enumerate(zip(self.factors, self.axes)):
            moved = np.moveaxis(y, a, 0)
            rest = moved.shape[1:]
            flat = moved.reshape(moved.shape[0], -1)
            solved = axis.apply_inverse_gram(factor._apply_adjoint(flat))  # S_a A_a^T   O(n_a p_a) per fibre
            y = np.moveaxis(solved.reshape((solved.shape[0],) + rest), 0, a)
        x = y.ravel()
        if total is not None:
            w = self._outer([axis._w for axis in self.axes])
            x = x + w * (float(total) - x.sum()) / self._tau()
        return x

    @staticmethod
    def _outer(vectors) -> np.ndarray:
        out = np.ones(1)
        for v in vectors:
            out = np.multiply.outer(out, v).ravel()
        return out

    def _tau(self) -> float:
        return float(np.prod([axis._tau for axis in self.axes]))

    def rectangle_variance(self, lows, highs) -> np.ndarray:
        lows, highs = check_rectangles(self.shape, lows, highs)
        product = np.ones(lows.shape[0])
        weight = np.ones(lows.shape[0])
        for a, axis in enumerate(self.axes):
            lo, hi = lows[:, a], highs[:, a]
            # q_a^T S_a q_a: the unconstrained axis variance, O(p_a) per rectangle.
            plain = axis._ecum[hi + 1] - axis._ecum[lo]
            zq = axis._zcum[:, hi + 1] - axis._zcum[:, lo]
            product *= np.maximum(plain - np.einsum("ij,ij->j", zq, zq), 0.0)
            weight *= axis._wcum[hi + 1] - axis._wcum[lo]
        if self.known_total:
            product -= weight**2 / self._tau()
        return self.variance * np.maximum(product, 0.0)

    def mean_variance(self, families) -> float:
        """The exact mean variance over the product of per-axis range families (every
        combination of one range (lo, hi) per axis, ``families[a] = (lows, highs)``): a
        rectangle's variance is a product of per-axis factors (less a product for a public
        total), so the means multiply (:func:`dprange.analysis.grid.expected_error`)."""
        plain_mean, cross_mean = 1.0, 1.0
        for axis, (lows, highs) in zip(self.axes, families):
            lows, highs = np.asarray(lows, dtype=np.int64), np.asarray(highs, dtype=np.int64) + 1
            plain_sum, cross_sum = 0.0, 0.0
            for start in range(0, lows.size, MEAN_CHUNK):  # O(p_a) per range, MEAN_CHUNK ranges at a time
                lo, hi = lows[start : start + MEAN_CHUNK], highs[start : start + MEAN_CHUNK]
                zq = axis._zcum[:, hi] - axis._zcum[:, lo]
                plain = axis._ecum[hi] - axis._ecum[lo] - np.einsum("ij,ij->j", zq, zq)
                plain_sum += float(np.maximum(plain, 0.0).sum())
                cross_sum += float(((axis._wcum[hi] - axis._wcum[lo]) ** 2).sum())
            plain_mean *= plain_sum / lows.size
            cross_mean *= cross_sum / lows.size
        mean = plain_mean - (cross_mean / self._tau() if self.known_total else 0.0)
        return self.variance * max(mean, 0.0)

    def query_variance(self, weights) -> np.ndarray:
        """Variance of sum_c q_c x_c for each row q of ``weights`` (cells in C order)."""
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        cells = int(np.prod(self.shape))
        if q.shape[-1] != cells:
            raise ParameterError(f"query weights must have {cells} entries per query")
        cq: np.ndarray = q.reshape((q.shape[0], *self.shape))
        for a, axis in enumerate(self.axes):  # S q, one axis at a time
            moved = np.moveaxis(cq, a + 1, 0)
            flat = moved.reshape(self.shape[a], -1)
            cq = np.moveaxis(axis.apply_inverse_gram(flat).reshape(moved.shape), 0, a + 1)
        out = np.einsum("ij,ij->i", q, cq.reshape(q.shape[0], -1))
        if self.known_total:
            out -= (q @ self._outer([axis._w for axis in self.axes])) ** 2 / self._tau()
        out = self.variance * np.maximum(out, 0.0)
        return out if np.ndim(weights) > 1 else out[0]
