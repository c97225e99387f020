"""k-D mechanisms: Kronecker products of 1-D strategies, and k-D hierarchies (quadtrees).

The histogram of a product domain (:mod:`dprange.product_domain`) is a k-D array, flattened
in C order into the x of n_1 ... n_k cells that the operators act on.

* :class:`Kronecker`: on every axis a 1-D strategy (``"identity"``, a tree of branching b, or
  ``"haar"``); measured are the products T_{1,l_1} (x) ... (x) T_{k,l_k} of one level of every
  axis, each a block with budget epsilon * f_{1,l_1} ... f_{k,l_k} (f_{a,l} the 1-D split of
  axis a, uniform or geometric), so the budgets sum to epsilon.  Miklau's tutorial (DIMACS
  2012) lists these product strategies; with trees on every axis this is the multi-dimensional
  hierarchy of Qardaji, Yang and Li (PVLDB 2013, section 5) measured at every combination of
  levels.  With ``"haar"`` on every axis and uniform budgets it is k-D Privelet for ordinal
  axes (Xiao, Wang and Gehrke, ICDE 2010: the tensor-product Haar basis; every product block
  of integer Haar differences gets scale prod_a (h_a + 1) / epsilon under add/remove).
* :class:`KDHierarchy` (and :class:`Quadtree`, branching 2 in 2-D): the grid padded to a
  cube of side b^h; node of depth d is a cube of side b^(h-d), fan-out b^k (Qardaji et al.,
  section 5; Cormode, Procopiuc, Srivastava, Shen and Yu, "Differentially private spatial
  decompositions", ICDE 2012).  In Morton (digit-interleaved) order the cubes are
  contiguous, so it is a 1-D level-uniform tree over b^(hk) leaves: the 1-D strategy, noise
  calibration and exact O(nodes) least squares apply unchanged.  Budgets "uniform" or
  "geometric" (Cormode et al.: the budget grows towards the leaves by b^((k-1)/3) per level,
  2^(1/3) for quadtrees).

Sensitivity.  Every level of these 1-D strategies has one entry +-1 per column (a bin lies
in one node, with a sign for Haar differences), so a product block has one entry +-1 per
cell too.  add/remove: each block changes by 1 in one row, so Delta_p^p = sum_b w_b^p.
replace (a record moves from cell i to cell j): a block changes by +-1 in two rows (2) when
i and j lie in different rows, by 2 in one row (2^p) when they share the row with opposite
signs, and not at all otherwise; a block's case is fixed by the per-axis cases of (i_a, j_a)
(different rows on some axis; else the parity of opposite signs).  The exact maximum over
all pairs runs over the distinct per-axis patterns only (:func:`kron_sensitivity_power`):
every combination of patterns totalled in floats with numpy, then exactly (integers over the
common denominator of the weights) for those within 1e-9 of the largest.  select_grid on
2-way marginals of 10 / 12 binary attributes under replace: 11.3 / 165 CPU s before (every
combination in Fractions), 2.4 / 23.8 s after, the same choice and error (medians of 3).

Least squares without dense matrices (:class:`KronEstimate`).  With block variances
u_b = prod_a u_{a,l_a}, u_{a,l} = 1 / f_{a,l}^2 (the variance of Laplace and Gaussian noise
up to one constant), A^T U^-1 A = G_1 (x) ... (x) G_k with G_a = sum_l T_{a,l}^T T_{a,l} /
u_{a,l}, so x = (G_1^-1 (x) ... (x) G_k^-1) A^T U^-1 y costs a few passes over the grid.
It is the GLS estimate when the noise variances are proportional to u_b (uniform budgets;
Laplace and Gaussian noise), and otherwise (discrete Laplace with unequal budgets) a
linear unbiased estimate whose variance is still exact: Cov = G^-1 (sum_b (v_b / u_b^2)
A_b^T A_b) G^-1.  A rectangle q = q_1 (x) ... (x) q_k has variance
sum_b (v_b / u_b^2) prod_a ||T_{a,l_a} G_a^-1 q_a||^2, each factor read from a per-axis
table of (n_a + 1)^2 entries.  A public total (replace) is used by the best linear
correction x - C 1 (1^T x - t) / (1^T C 1), with variance q^T C q - (q^T C 1)^2 / (1^T C 1).
"""

from __future__ import annotations

import functools
import itertools
import math
import string
from fractions import Fraction
from typing import Any, cast

import numpy as np

from ._bounded_json import ANY, sized
from ._bounded_json import loads as bounded_loads
from ._params import Custom, Flag, Integer, OneOf, Param
from ._validation import check_delta, check_epsilon, fit_budget
from .analysis import Candidate, Selection, noise_variance_floor
from .constrained import constrain
from .errors import DataError, ParameterError
from .grid_release import GridRelease, design_digest
from .inference.tree import tree_gls
from .measurements import LinearMeasurement, Measurements
from .mechanisms import Mechanism, calibrate, is_seeded, noisy_answers, resolve_noise
from .noise import NoiseSpec, resolve_rng
from .operators import Explicit, HaarLevel, Identity, Kron, Operator, TreeLevel, check_norm, check_relation
from .optimal_l2 import check_l2_optimum_bins, l2_optimum
from .product_domain import ProductDomain
from .registry import GRID_MECHANISMS, GRID_WORKLOADS, Citation, Entry
from .strategies import HaarStrategy, Strategy, TreeStrategy
from .workloads import AllRange, Prefix, all_range_singular_values, prefix_singular_values, singular_value_sum
from .workloads_kd import (
    Rectangles,
    all_rectangles,
    check_rectangles,
    check_shape,
    marginals,
    prefix_rectangles,
)

__all__ = [
    "KDHierarchy",
    "KronEstimate",
    "Kronecker",
    "MortonTreeEstimate",
    "Privelet",
    "Quadtree",
    "check_answers_workload",
    "check_grid_counts",
    "check_rectangles",
    "expected_error",
    "grid_candidates",
    "kron_sensitivity_power",
    "load_grid_release",
    "select_grid",
    "svd_bound",
    "l2_optimum_bound",
]

AXIS_KINDS = ("identity", "haar")
#: Largest per-axis table (entries) of :class:`KronEstimate`: 2^27 float64 = 1 GiB.
TABLE_LIMIT = 1 << 27
BUDGET_RULES = ("uniform", "geometric")


def check_grid_counts(counts) -> np.ndarray:
    """A k-D histogram of exact counts: finite non-negative whole numbers, as int64."""
    arr = np.asarray(counts)
    if arr.ndim < 1 or arr.size == 0:
        raise ParameterError("counts must be a non-empty k-D array of cell counts (ProductDomain.histogram)")
    if arr.dtype.kind not in "biuf":
        raise ParameterError("counts must be numeric")
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr))):
        raise ParameterError("counts must be finite whole numbers (bucketize raw values with a ProductDomain)")
    if np.any(arr < 0):
        raise ParameterError("counts must be non-negative")
    if float(np.sum(arr, dtype=float)) > 2.0**53:
        raise ParameterError("counts must total at most 2^53")
    return arr.astype(np.int64)


# ----------------------------------------------------------------------------- sensitivity
def column_entries(op: Operator) -> tuple[np.ndarray, np.ndarray]:
    """(row, sign) of the single +-1 entry of every column of a level operator: from the
    structure of identities, tree levels and Haar levels, else from the dense matrix."""
    bins = np.arange(op.shape[1])
    if isinstance(op, Identity):
        return bins, np.ones(bins.size, dtype=np.int64)
    if isinstance(op, TreeLevel):
        return bins // op.block, np.ones(bins.size, dtype=np.int64)
    if isinstance(op, HaarLevel):
        if op.level == 0:
            return np.zeros(bins.size, dtype=np.int64), np.ones(bins.size, dtype=np.int64)
        return bins // (2 * op.half), np.where((bins // op.half) % 2 == 0, 1, -1)
    dense = op.dense()
    nonzero = dense != 0
    if not np.all(nonzero.sum(axis=0) == 1) or not np.all(np.abs(dense[nonzero]) == 1):
        raise ParameterError(f"a {type(op).__name__} level needs one entry +-1 per column")
    rows = np.argmax(nonzero, axis=0)
    return rows, dense[rows, bins].astype(np.int64)


@functools.lru_cache(maxsize=32)
def axis_patterns(levels: tuple[Operator, ...]) -> np.ndarray:
    """The distinct per-level cases of every pair (i, j) of bins of one axis, as rows:
    0 same row and sign, 1 same row and opposite signs, 2 different rows."""
    entries = [column_entries(op) for op in levels]
    n = levels[0].shape[1]
    place = 3 ** np.arange(len(levels), dtype=np.int64)  # one base-3 digit per level
    codes = []
    for i in range(n):
        code = np.zeros(n, dtype=np.int64)
        for digit, (rows, signs) in zip(place, entries):
            code += digit * np.where(rows != rows[i], 2, np.where(signs != signs[i], 1, 0))
        codes.append(np.unique(code))
    distinct = np.unique(np.concatenate(codes))
    return (distinct[:, None] // place[None, :]) % 3


def kron_sensitivity_power(
    axis_levels: list[list[Operator]], combos: list[tuple[int, ...]], weights, p: int, neighbours: str
):
    """Delta_p^p of the stacked blocks w_b (T_{1,l_1} (x) ... (x) T_{k,l_k}), b = combos[i]
    (module doc); exact for exact (int or Fraction) weights."""
    p = check_norm(p)
    powers = [abs(w) ** p for w in weights]
    if check_relation(neighbours) == "add_remove":
        return sum(powers)
    patterns = [axis_patterns(tuple(levels)) for levels in axis_levels]
    # A float pass over every combination of the axes' patterns (numpy, in blocks), then the
    # exact one on those within a relative 1e-9 of the float maximum: the totals are sums of
    # non-negative terms, whose float error is far below that.  The exact pass sums integers
    # (the powers over their common denominator) per case: on ten binary axes under replace
    # (2^10 combinations of two patterns, 1023 of them tied at the maximum) a call took up to 1 s in Fractions.
    candidates = _kron_replace_candidates(patterns, combos, [float(w) for w in powers], [0.0, 2.0**p, 2.0])
    cases = _kron_cases(patterns, combos, candidates)
    odd, different = (cases == 1).astype(object), (cases == 2).astype(object)
    if all(isinstance(w, (int, Fraction)) for w in powers):
        denominator = math.lcm(*(Fraction(w).denominator for w in powers))
        numerators = np.array([int(Fraction(w) * denominator) for w in powers], dtype=object)
        totals = (odd @ numerators) * 2**p + (different @ numerators) * 2
        best = Fraction(int(max(totals)), denominator)
        return best if any(isinstance(w, Fraction) for w in powers) else int(best)  # ints stay ints
    weights = np.array(powers, dtype=float)
    return float(max(odd.astype(float) @ weights * 2**p + different.astype(float) @ weights * 2))


def _kron_cases(patterns, combos, choices: np.ndarray) -> np.ndarray:
    """(choices x combos) case of every block for every combination of patterns (one index per
    axis in each row of ``choices``): 2 where some axis has different rows, else the parity of
    the axes with opposite signs (1: the block's entries differ by twice the weight, 0: equal)."""
    levels = np.asarray(combos, dtype=np.int64).reshape(len(combos), -1)  # combos x axes
    opposite = np.zeros((len(choices), len(combos)), dtype=np.uint8)  # axes with opposite signs
    different = np.zeros((len(choices), len(combos)), dtype=bool)  # some axis with different rows
    for a, pattern in enumerate(patterns):
        cases = pattern[choices[:, a]][:, levels[:, a]]  # choices x combos, one axis at a time
        opposite += cases == 1
        different |= cases == 2
    return np.where(different, 2, opposite % 2)


#: Largest block of pattern combinations :func:`kron_sensitivity_power` totals at once in floats.
REPLACE_BLOCK = 1 << 20


def _kron_replace_candidates(patterns, combos, powers, change) -> np.ndarray:
    """The combinations (rows: one pattern index per axis) whose float replace total is within
    a relative 1e-9 of the largest (:func:`kron_sensitivity_power`): the cases of
    :func:`_kron_cases` for blocks of combinations, at most REPLACE_BLOCK cases at once."""
    sizes = [len(p) for p in patterns]
    count = math.prod(sizes)
    rows = max(1, REPLACE_BLOCK // len(combos))
    weights, values = np.asarray(powers, dtype=float), np.asarray(change, dtype=float)
    totals = np.empty(count)
    for start in range(0, count, rows):
        stop = min(start + rows, count)
        choices = np.column_stack(np.unravel_index(np.arange(start, stop), sizes))
        totals[start:stop] = values[_kron_cases(patterns, combos, choices)] @ weights
    near = np.flatnonzero(totals >= totals.max() * (1.0 - 1e-9))
    return np.column_stack(np.unravel_index(near, sizes))


class KronStrategy(Strategy):
    """Product blocks of per-axis levels, with the exact sensitivity of
    :func:`kron_sensitivity_power`."""

    def __init__(self, axis_levels, combos, budget, *, shape=None):
        self.axis_levels = axis_levels
        self.combos = combos
        super().__init__(
            [Kron([axis_levels[a][level] for a, level in enumerate(c)]) for c in combos], budget, shape=shape
        )

    def sensitivity_power(self, norm: int, neighbours: str, weights=None):
        weights = [Fraction(e) for e in self.budget] if weights is None else list(weights)
        return kron_sensitivity_power(self.axis_levels, self.combos, weights, norm, neighbours)


# ----------------------------------------------------------------------------- axes
def _check_axis(spec, name: str):
    if spec in AXIS_KINDS:
        return spec
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool) and spec >= 2:
        return int(spec)
    raise ParameterError(f"every axis of {name} must be 'identity', 'haar' or a tree branching >= 2, got {spec!r}")


def check_axes(value, name: str):
    """One axis strategy, or a non-empty list of them (one per axis)."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ParameterError(f"{name} is empty; give one strategy per axis")
        return [_check_axis(v, name) for v in value]
    return _check_axis(value, name)


@functools.lru_cache(maxsize=32)
def axis_strategy(spec, n: int) -> tuple[tuple[Operator, ...], tuple[int, ...]]:
    """The levels of one axis' 1-D strategy and their node counts per level (for budgets);
    equal axes get the same (immutable) levels, which lets them share their factorisation."""
    if spec == "identity":
        return (Identity(n),), (n,)
    if spec == "haar":
        haar = HaarStrategy(n)
        return tuple(haar.blocks()), (1, *(2 ** (k - 1) for k in range(1, haar.height + 1)))
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool) and spec >= 2:
        tree = TreeStrategy(n, int(spec), measure_root=False)
        if not tree.measured_depths:
            return (Identity(n),), (n,)
        full = tree.level_counts_full()
        return tuple(tree.blocks()), tuple(full[d] for d in tree.measured_depths)
    raise ParameterError(f"every axis must be 'identity', 'haar' or a tree branching >= 2, got {spec!r}")


def axis_fractions(nodes, rule: str) -> np.ndarray:
    """1-D budget fractions of one axis: equal, or geometric (nodes^(1/3), like Hierarchical)."""
    weights = np.ones(len(nodes)) if rule == "uniform" else np.array(nodes, dtype=float) ** (1.0 / 3.0)
    return weights / weights.sum()


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


# ----------------------------------------------------------------------------- mechanisms
class GridMechanism(Mechanism):
    """Base of the k-D mechanisms: ``plan(shape, epsilon)``, ``measure`` a k-D histogram,
    ``estimate`` (exact least squares), ``release`` a :class:`~dprange.grid_release.GridRelease`."""

    #: Whether its estimate applies its covariance (``covariance_apply``), which published
    #: marginals need (:func:`dprange.contingency.constrain`).
    constrainable = False
    #: Whether it is made for marginals only (:func:`check_answers_workload` refuses it, named,
    #: for a rectangle workload it does not answer).
    made_for_marginals = False

    def plan(self, shape, epsilon: float) -> Strategy:
        raise NotImplementedError

    def saved_plans(self, shape, epsilon: float) -> list[Strategy]:
        """The designs a saved release of this mechanism may have been measured with, the
        current one (:meth:`plan`) first; :func:`load_grid_release` takes the first whose
        blocks and noise match the saved ones."""
        return [self.plan(shape, epsilon)]

    def describe_strategy(self, shape, epsilon: float) -> dict | None:
        """How an optimised design was obtained, recorded in the release's
        ``parameters["strategy"]`` (not used to rebuild it); None for fixed designs."""
        return None

    def follow_delta(self, delta: float) -> None:
        """Record the delta the release runs at, before :meth:`plan`, for designs chosen by it
        (:class:`~dprange.optimized_kd.OptimizedKronecker` with template auto); others ignore it."""

    def _vector(self, counts: np.ndarray) -> np.ndarray:
        """The x the strategy's blocks act on (C order; k-D trees permute it)."""
        return counts.ravel()

    def _noise(self, plan: Strategy, epsilon: float, delta: float):
        kind = resolve_noise(self.noise, delta)
        return calibrate(plan, self.neighbours, kind, plan.budget, epsilon, delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None) -> Measurements:
        """Noisy answers of every block; noise calibrated before the counts are read."""
        counts = check_grid_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        source = resolve_rng(rng)
        plan = self.plan(counts.shape, epsilon)
        specs = self._noise(plan, epsilon, delta)
        x = self._vector(counts)
        if isinstance(plan, KronStrategy):  # shared partial products instead of one pass per block
            answers = kron_block_answers(plan.axis_levels, plan.combos, counts)
        else:
            answers = [block.answers(x) for block in plan.blocks]  # exact for integer blocks
        measured = []
        for block, spec, answer in zip(plan.blocks, specs, answers):
            # Integer answers stay exact (np.rint would pass them through float64).
            exact = answer if answer.dtype.kind in "iuO" else np.rint(answer).astype(np.int64)
            measured.append(LinearMeasurement(block, noisy_answers(exact, spec, source), spec.variance, spec))
        total = float(counts.sum()) if self.neighbours == "replace" else None
        return Measurements(
            measured, x.size, epsilon, delta, self.neighbours, total, seeded=is_seeded(rng), source="central"
        )

    def estimate(self, shape, measurements: Measurements):
        raise NotImplementedError

    def error_model(self, shape, epsilon, *, delta=0.0):
        """The exact error model before any data: the estimate of the zero design."""
        shape = check_shape(shape)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        plan = self.plan(shape, epsilon)
        specs = self._noise(plan, epsilon, delta)
        zeros = [LinearMeasurement(b, np.zeros(b.shape[0]), s.variance, s) for b, s in zip(plan.blocks, specs)]
        total = 0.0 if self.neighbours == "replace" else None
        n = plan.blocks[0].shape[1]
        return self.estimate(shape, Measurements(zeros, n, epsilon, delta, self.neighbours, total))

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None):
        """Measure the k-D ``counts`` and return a :class:`~dprange.grid_release.GridRelease`."""
        if self.inference != "gls":
            raise ParameterError("k-D mechanisms use exact least squares only; pass inference='gls'")
        counts = check_grid_counts(counts)
        measurements = self.measure(counts, epsilon, delta=delta, rng=rng)
        estimate = self.estimate(counts.shape, measurements)
        parameters = self.parameters()
        described = self.describe_strategy(counts.shape, measurements.epsilon)
        if described is not None:
            parameters["strategy"] = described
        return GridRelease(
            counts.shape, estimate, measurements, mechanism=self.name, parameters=parameters, domain=domain
        )


class Kronecker(GridMechanism):
    """Kronecker products of 1-D strategies, one per axis (module doc).

    Parameters
    ----------
    axes : one entry per axis: "identity", "haar" or a tree branching b >= 2 (the tree's root
        is not measured, as in :class:`~dprange.Hierarchical`); a single entry is used for
        every axis.
    budget : "uniform" or "geometric" split of every axis' levels (products across axes).
    """

    name = "kronecker"
    constrainable = True

    PARAMS = (
        Param(
            "axes",
            Custom(check_axes, "'identity', 'haar' or a branching >= 2, or a list of them (one per axis)"),
            "per-axis 1-D strategies",
            default="identity",
            positional=True,
        ),
        Param("budget", OneOf(BUDGET_RULES), "per-axis budget split: uniform or geometric", default="uniform"),
        *Mechanism.PARAMS,
    )
    axes: Any
    budget: str

    def _axis_specs(self, k: int) -> list:
        specs = list(self.axes) if isinstance(self.axes, (list, tuple)) else [self.axes]
        if len(specs) == 1:
            specs = specs * k
        if len(specs) != k:
            raise ParameterError(f"give one axis strategy, or one per axis ({k}), got {len(specs)}")
        return specs

    def _axes(self, shape):
        shape = check_shape(shape)
        levels, fractions = [], []
        for spec, n in zip(self._axis_specs(len(shape)), shape):
            ops, nodes = axis_strategy(spec, n)
            levels.append(ops)
            fractions.append(axis_fractions(nodes, self.budget))
        combos = list(itertools.product(*(range(len(ops)) for ops in levels)))
        return levels, fractions, combos

    def plan(self, shape, epsilon: float) -> KronStrategy:
        levels, fractions, combos = self._axes(shape)
        raw = [epsilon * math.prod(float(fractions[a][level]) for a, level in enumerate(c)) for c in combos]
        return KronStrategy(levels, combos, fit_budget(raw, epsilon), shape=tuple(shape))

    def estimate(self, shape, measurements: Measurements) -> KronEstimate:
        levels, fractions, combos = self._axes(shape)
        weights = [[1.0 / float(f) ** 2 for f in fr] for fr in fractions]
        values = [m.values for m in measurements.measurements]
        variances = [m.variance for m in measurements.measurements]
        return KronEstimate(shape, levels, weights, combos, values, variances, total=measurements.total)


class KDHierarchy(GridMechanism):
    """The k-D hierarchy with fan-out b^k over the grid padded to a cube of side b^h (module
    doc); padded cells hold no records.  Exact tree least squares in Morton order."""

    name = "kd_hierarchy"

    PARAMS = (
        Param("branching", Integer(minimum=2), "branching per axis (fan-out b^k)", default=2, positional=True),
        Param("budget", OneOf(BUDGET_RULES), "uniform or geometric (Cormode et al. 2012)", default="uniform"),
        Param(
            "measure_root",
            Flag(),
            "add/remove only: measure the root (the total) too; off by default, as in Hierarchical",
            default=False,
        ),
        *Mechanism.PARAMS,
    )
    branching: int
    budget: str
    measure_root: bool

    def _tree(self, shape):
        shape = check_shape(shape)
        b, k = int(self.branching), len(shape)
        side = 1
        while side < max(shape):
            side *= b
        height = round(math.log(side, b)) if side > 1 else 0
        tree = TreeStrategy(
            side**k,
            (b**k,) * height if height else (2,),
            measure_root=self.measure_root,
            known_total=self.neighbours == "replace",
        )
        return shape, side, tree

    def depth_weights(self, tree: TreeStrategy, k: int) -> np.ndarray:
        """uniform, or geometric: depth d gets b^((k - 1) d / 3) (Cormode et al. 2012)."""
        depths = np.array(tree.measured_depths, dtype=float)
        if self.budget == "uniform":
            return np.ones(depths.size)
        return float(self.branching) ** ((k - 1) * depths / 3.0)

    def plan(self, shape, epsilon: float) -> Strategy:
        shape, side, tree = self._tree(shape)
        weights = self.depth_weights(tree, len(shape))
        return Strategy(tree.blocks(), fit_budget(list(epsilon * weights / weights.sum()), epsilon), shape=tree)

    def _vector(self, counts: np.ndarray) -> np.ndarray:
        shape, side, tree = self._tree(counts.shape)
        cube = np.zeros((side,) * len(shape), dtype=np.int64)
        cube[tuple(slice(0, n) for n in shape)] = counts
        x = np.zeros(tree.n, dtype=np.int64)
        x[morton_order(side, int(self.branching), len(shape))] = cube.ravel()
        return x

    def estimate(self, shape, measurements: Measurements) -> MortonTreeEstimate:
        shape, side, tree = self._tree(shape)
        values: list = [None] * (tree.depth + 1)
        variances: list = [None] * (tree.depth + 1)
        for d, m in zip(tree.measured_depths, measurements.measurements):
            values[d], variances[d] = m.values, m.variance
        fitted = tree_gls(tree, values, variances, total=measurements.total)
        return MortonTreeEstimate(shape, side, morton_order(side, int(self.branching), len(shape)), fitted)


class Quadtree(KDHierarchy):
    """The quadtree of Cormode et al. (ICDE 2012): a 2-D hierarchy of branching 2 (fan-out 4)."""

    name = "quadtree"

    PARAMS = tuple(p for p in KDHierarchy.PARAMS if p.name != "branching")

    branching = 2

    def _tree(self, shape):
        if len(check_shape(shape)) != 2:
            raise ParameterError("a quadtree needs a 2-D grid; use KDHierarchy for k dimensions")
        return super()._tree(shape)


def _check_privelet_axes(value, name: str):
    axes = check_axes(value, name)
    for spec in axes if isinstance(axes, list) else [axes]:
        if spec not in AXIS_KINDS:
            raise ParameterError(f"every axis of privelet must be 'haar' or 'identity', got {spec!r}")
    return axes


class Privelet(Kronecker):
    """k-D Privelet (Xiao, Wang and Gehrke, "Differential Privacy via Wavelet Transforms",
    ICDE 2010, section V): the Haar transform applied along every axis (or the identity along
    the axes listed as ``"identity"``, Privelet*'s choice for small axes).

    A k-D coefficient c is a product of one 1-D Haar coefficient per axis; its weight is the
    product of the 1-D weights, W(c) = prod_a W_a(c_a) with W_a = 2 m (m leaves per half) for
    a difference and the axis' padded size for its average, so the generalised sensitivity is
    prod_a (1 + h_a) (h_a = ceil(log2 n_a); 1 for an identity axis) and Privelet adds Laplace
    noise of scale lambda / W(c), lambda = prod_a (1 + h_a) / epsilon.  On the integer
    differences d = W(c) c that is the same scale lambda for every product block, i.e. a
    :class:`Kronecker` of per-axis Haar levels with uniform budgets: every block gets
    epsilon / prod_a (1 + h_a).  Estimate: exact least squares by the per-axis factorisation
    (:class:`KronEstimate`); when every side is a power of two the system is square and this
    is Privelet's inverse transform, otherwise it also uses that the padding cells are empty.
    """

    name = "privelet"

    PARAMS = (
        Param(
            "axes",
            Custom(_check_privelet_axes, "'haar' or 'identity', or a list of them (one per axis)"),
            "per-axis transform: Haar (Privelet) or identity (Privelet*'s untransformed axes)",
            default="haar",
            positional=True,
        ),
        *Mechanism.PARAMS,
    )

    budget = "uniform"


# ----------------------------------------------------------------------------- analysis
#: The k-D workloads by name (hyphens, as on the command line; underscores are accepted too).
WORKLOADS_KD = ("all-rectangles", "prefix-rectangles", "marginals")


def check_grid_workload(workload):
    """A registered k-D workload name (``_`` read as ``-``) or a :class:`Rectangles`."""
    if isinstance(workload, Rectangles):
        return workload
    name = workload.replace("_", "-") if isinstance(workload, str) else workload
    if name not in WORKLOADS_KD:
        raise ParameterError(
            f"workload must be one of {', '.join(WORKLOADS_KD)} or a workloads_kd.Rectangles, got {workload!r}"
        )
    return name


def check_order(order, shape) -> int:
    """The marginal order: 1..k on a k-D grid."""
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= len(shape):
        raise ParameterError(f"order must be 1..{len(shape)} for a {len(shape)}-D grid, got {order!r}")
    return int(order)


def axis_ranges(n: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """One axis' ranges: "all" n(n+1)/2 ranges, "prefix" [0, j], "cells" [i, i], "total" [0, n-1]."""
    if kind == "all":
        return np.triu_indices(n)
    if kind == "prefix":
        return np.zeros(n, dtype=np.int64), np.arange(n)
    if kind == "cells":
        return np.arange(n), np.arange(n)
    return np.zeros(1, dtype=np.int64), np.full(1, n - 1)


def expected_error(mechanism: GridMechanism, shape, workload, epsilon, *, delta=0.0, order: int = 2) -> float:
    """The exact mean squared error per query of ``mechanism`` with least squares on a k-D
    ``workload``: "all-rectangles", "prefix-rectangles", "marginals" (all ``order``-way), or a
    :class:`~dprange.workloads_kd.Rectangles`.  Data-independent (the zero design's error
    model); the product workloads average per-axis terms (no query is enumerated)."""
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        order = check_order(order, shape)
    return workload_error(mechanism.error_model(shape, epsilon, delta=delta), shape, workload, order)


def workload_error(model, shape, workload, order: int = 2) -> float:
    """The mean variance of ``model`` (an error model on ``shape``) over a checked k-D
    ``workload`` (:func:`expected_error`)."""
    if isinstance(workload, Rectangles):
        return float(np.mean(model.rectangle_variance(workload.lows, workload.highs)))
    if workload == "all-rectangles":
        return model.mean_variance([axis_ranges(n, "all") for n in shape])
    if workload == "prefix-rectangles":
        return model.mean_variance([axis_ranges(n, "prefix") for n in shape])
    total, count = 0.0, 0
    for axes in itertools.combinations(range(len(shape)), order):
        families = [axis_ranges(n, "cells" if a in axes else "total") for a, n in enumerate(shape)]
        cells = math.prod(shape[a] for a in axes)
        total += cells * model.mean_variance(families)
        count += cells
    return total / count


#: The k-D mechanisms a refusal of a marginals mechanism on rectangles suggests.
RECTANGLE_MECHANISMS = ("optimized_kronecker", "kronecker", "kd_hierarchy")


def check_answers_workload(mechanism, shape, workload, epsilon, *, delta=0.0, order: int = 2, option=None) -> None:
    """Refuse a mechanism made for marginals (``made_for_marginals``: ``fourier``,
    ``optimized_marginals``) named for a rectangle workload it does not answer: some of its
    rectangles reach what the design does not measure (infinite error, or not estimable),
    so the release would state infinite errors.  Reads the design only (public).  Where every
    rectangle is answered (e.g. ``fourier`` of order 2 on two axes) it is accepted.
    ``option``: the command-line option that named it (``--mechanism``, ``--mechanisms``),
    for a message in its terms; None: Python's names."""
    if not getattr(mechanism, "made_for_marginals", False):
        return
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        return
    model = mechanism.error_model(shape, epsilon, delta=delta)
    try:
        error = workload_error(model, shape, workload, order)
    except ParameterError:  # the Fourier estimate refuses rectangles restricted on more axes than its order
        error = math.inf
    if math.isfinite(error):
        return
    order = int(mechanism.order)
    if option is None:
        named, made_for = f"mechanism={mechanism.name!r}", f"workload='marginals', order={order}"
        asked = f"workload={workload!r}" if isinstance(workload, str) else "the Rectangles given as workload"
        suited = ", ".join(repr(m) for m in RECTANGLE_MECHANISMS) + " or 'auto'"
        suggestion = f"mechanism={suited}"
    else:
        named, made_for = f"{option} {mechanism.name}", "--workload marginals"
        asked = f"--workload {workload}"
        suited = ", ".join(RECTANGLE_MECHANISMS[:-1]) + f" or {RECTANGLE_MECHANISMS[-1]}"
        suggestion = f"{option} {suited}" + (" (or auto)" if option == "--mechanism" else "")
    raise ParameterError(
        f"{named} answers marginals of up to {order} axes ({made_for}), not every query of {asked} on this "
        f"{len(shape)}-axis grid (some would have no finite error); for rectangles use {suggestion}"
    )


def _axis_singular_sum(n: int, kind: str) -> float:
    """Sum of the singular values of one axis' 1-D workload, all ranges or prefixes (closed
    forms, O(n))."""
    return singular_value_sum(all_range_singular_values(n) if kind == "all" else prefix_singular_values(n))


def _marginal_singular_sum(shape, order: int) -> float:
    """Sum of the singular values of all ``order``-way marginals.  Their Gram is a sum of
    Kronecker products of I and J = 1 1^T, diagonal in one basis: on each axis the constant
    vector (J: n_a, I: 1) or its complement (J: 0, I: 1).  The eigenvector that is a complement
    on the axes S has eigenvalue sum over marginal sets M containing S of prod_{a not in M} n_a,
    with multiplicity prod_{a in S} (n_a - 1)."""
    k = len(shape)
    sets = list(itertools.combinations(range(k), order))
    total = 0.0
    for size in range(order + 1):
        for complement in itertools.combinations(range(k), size):
            eig = sum(math.prod(shape[a] for a in range(k) if a not in m) for m in sets if set(complement) <= set(m))
            total += math.prod(shape[a] - 1 for a in complement) * math.sqrt(eig)
    return total


def _axis_kind(workload: str) -> str:
    """The 1-D workload on every axis of all rectangles ("all" ranges) or dominance ("prefix")."""
    return "all" if workload == "all-rectangles" else "prefix"


def _rectangle_queries(shape, kind: str) -> int:
    """The queries of all rectangles (n (n + 1) / 2 ranges per axis) or of dominance counts (n
    prefixes per axis) on ``shape``."""
    return math.prod(n * (n + 1) // 2 if kind == "all" else n for n in shape)


def svd_bound(shape, workload, epsilon, delta=0.0, *, order: int = 2, noise="auto") -> float:
    """Lower bound on the mean squared error per query of any matrix mechanism on a k-D
    workload (Li and Miklau, "Optimal Error of Query Sets under the Differentially-Private
    Matrix Mechanism", ICDT 2013): v (sum of singular values of W)^2 / (cells x queries), v =
    :func:`dprange.analysis.noise_variance_floor` for ``noise`` (the least variance per unit of
    sensitivity of dprange's noise of that kind), as :func:`dprange.analysis.svd_bound` in 1-D.
    The singular values of a Kronecker workload (all or prefix rectangles) are the products of
    the per-axis ones, so their sum is the product of the per-axis sums (closed forms,
    :func:`dprange.workloads.all_range_singular_values` and
    :func:`~dprange.workloads.prefix_singular_values`: O(n) per axis, any side); marginals have
    a closed form too (:func:`_marginal_singular_sum`); explicit rectangles eigendecompose their
    cells x cells Gram matrix (:func:`_rectangles_singular_sum`, grids of at most
    :data:`RECTANGLES_SVD_MAX_CELLS` cells)."""
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if isinstance(workload, Rectangles):
        if tuple(workload.grid) != tuple(shape):
            raise ParameterError(f"the rectangles are on a {list(workload.grid)} grid, not {list(shape)}")
        singular_sum = _rectangles_singular_sum(workload)
        queries = workload.shape[0]
    elif workload == "marginals":
        order = check_order(order, shape)
        singular_sum = _marginal_singular_sum(shape, order)
        queries = sum(math.prod(shape[a] for a in m) for m in itertools.combinations(range(len(shape)), order))
    else:
        kind = _axis_kind(workload)
        singular_sum = math.prod(_axis_singular_sum(n, kind) for n in shape)
        queries = _rectangle_queries(shape, kind)
    return noise_variance_floor(epsilon, delta, noise) * singular_sum**2 / math.prod(shape) / queries


#: Largest grid whose explicit rectangles get an SVD bound (:func:`_rectangles_singular_sum`:
#: an eigendecomposition of the cells x cells Gram, O(cells^3); 1-D workloads without a closed
#: form stop at 4096 bins likewise in ``dprange error``).
RECTANGLES_SVD_MAX_CELLS = 4096


def _rectangles_singular_sum(workload: Rectangles) -> float:
    """Sum of the singular values of explicit rectangles: the square roots of the eigenvalues of
    W^T W, formed a block of columns at a time through the rectangles' summed-area products
    (no m x cells matrix: O(m + cells) a column)."""
    cells = workload.shape[1]
    if cells > RECTANGLES_SVD_MAX_CELLS:
        raise ParameterError(
            f"the SVD bound of explicit rectangles eigendecomposes a cells x cells matrix; use a grid of at most "
            f"{RECTANGLES_SVD_MAX_CELLS} cells (got {cells})"
        )
    gram = np.empty((cells, cells))
    identity = np.eye(cells)
    step = max(1, 4_000_000 // max(workload.shape[0], cells))  # ~32 MB of W X at a time
    for start in range(0, cells, step):
        block = identity[:, start : start + step]
        gram[:, start : start + step] = workload._apply_adjoint(workload._apply(block))  # O((m + cells) b)
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None)).sum())  # O(cells^3)


@functools.lru_cache(maxsize=64)
def _axis_l2_optimum(n: int, kind: str) -> float:
    """The dual value of :func:`dprange.optimal_l2.l2_optimum` for one axis' all ranges or
    prefixes (a lower bound within 1e-6 of that axis' optimum)."""
    return l2_optimum((AllRange(n) if kind == "all" else Prefix(n)).gram()).bound


def l2_optimum_bound(shape, workload, epsilon, delta=0.0, *, order: int = 2, noise="auto") -> float:
    """Lower bound on the mean squared error per query of any matrix mechanism on all or prefix
    rectangles, at least :func:`svd_bound`: v prod_a OPT_a / queries, OPT_a the least
    trace(G_a X_a^-1) over strategies with unit L2 columns on axis a
    (:func:`dprange.analysis.l2_optimum_bound` in 1-D), v the noise floor.

    For a Kronecker workload the L2 program's optimum is the Kronecker product of the axes'
    optima: at each axis' optimal dual weights mu_a, trace((M_a^1/2 G_a M_a^1/2)^1/2) =
    sum mu_a = OPT_a (the dual is stationary in the scale of mu_a), so the product weights give
    the product G_a's dual the value 2 prod OPT_a - prod OPT_a = prod OPT_a, which the product
    of the optimal strategies reaches (its columns have unit norm, its trace is the product).
    Under (epsilon, delta) it is the least error of any matrix mechanism with dprange's Gaussian
    (add/remove); under epsilon-DP a valid bound.  Each axis n <= 1024 (its own O(n^3) steps;
    kept per side and kind for the process).

    Marginals (``order``-way): the SVD bound is their exact L2 optimum.  Permuting the values
    of any axis maps the set of marginal queries onto itself, so the program (convex, and
    invariant under those permutations) has an optimum averaged over them, whose diagonal is
    constant (the permutations reach every cell from every other); with a constant diagonal
    the column constraints are their average, the SVD bound's relaxation, so both agree
    (checked against the dense solve in tests/test_optimal_l2.py)."""
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        return svd_bound(shape, workload, epsilon, delta, order=order, noise=noise)
    if workload not in ("all-rectangles", "prefix-rectangles"):
        raise ParameterError("l2_optimum_bound covers all-rectangles, prefix-rectangles and marginals")
    factor = noise_variance_floor(check_epsilon(epsilon), check_delta(delta), noise)
    kind = _axis_kind(workload)
    for n in shape:
        check_l2_optimum_bins(n)
    optimum = math.prod(_axis_l2_optimum(n, kind) for n in shape)
    return factor * optimum / _rectangle_queries(shape, kind)


#: Largest padded cube (cells) a k-D hierarchy candidate of ``auto`` may have.
AUTO_CUBE_LIMIT = 1 << 24


def kronecker_candidates(shape, *, neighbours="add_remove", noise="auto", fast=False) -> list:
    """Kronecker configurations ``auto`` ranks: flat (identity), Haar, and trees of branching
    2, 4, 8, 16 on every axis, with uniform and geometric budgets."""
    out = [Kronecker("identity", neighbours=neighbours, noise=noise)]
    out.append(Kronecker("haar", neighbours=neighbours, noise=noise))
    for b in (2, 4, 8, 16) if not fast else (4, 16):
        for rule in BUDGET_RULES:
            out.append(Kronecker(b, budget=rule, neighbours=neighbours, noise=noise))
    return out


def hierarchy_candidates_kd(shape, *, neighbours="add_remove", noise="auto", fast=False) -> list:
    """k-D hierarchies ``auto`` ranks: branching 2, 4, 8 with uniform and geometric budgets,
    those whose padded cube has at most :data:`AUTO_CUBE_LIMIT` cells."""
    shape = check_shape(shape)
    out = []
    for b in (2, 4, 8):
        side = 1
        while side < max(shape):  # the padded cube's side, as KDHierarchy._tree pads it
            side *= b
        if side ** len(shape) > AUTO_CUBE_LIMIT:
            continue
        for rule in BUDGET_RULES:
            out.append(KDHierarchy(b, budget=rule, neighbours=neighbours, noise=noise))
    return out


def grid_candidates(
    shape, *, neighbours="add_remove", noise="auto", fast=False, workload=None, delta=0.0, order: int = 2
) -> list:
    """Every configuration ``auto`` ranks on ``shape``, from the registry's auto entries.
    With ``workload`` (as :func:`select_grid` passes it, with ``delta`` and ``order``) also the
    optimised mechanisms for that workload, whose strategies depend on it and not on the shape
    alone (the registry entries' ``workload_candidates``:
    :func:`dprange.optimized_kd.kd_auto_candidates`)."""
    out = []
    for entry in GRID_MECHANISMS.values():
        if entry.auto:
            out.extend(entry.auto_candidates(shape, neighbours=neighbours, noise=noise, fast=fast))
    if workload is not None:
        name = check_grid_workload(workload)  # a name, or the Rectangles themselves
        for entry in GRID_MECHANISMS.values():
            if entry.auto and entry.workload_candidates is not None:
                found = entry.workload_candidates(
                    shape, workload=name, delta=delta, order=order, neighbours=neighbours, noise=noise
                )
                out.extend(found)
    return out


def select_grid(
    shape,
    epsilon,
    *,
    workload="all-rectangles",
    delta=0.0,
    neighbours="add_remove",
    noise="auto",
    order: int = 2,
    candidates=None,
):
    """The k-D mechanism with the least exact expected error (:func:`expected_error`) on
    ``workload`` (default all rectangles), chosen from public parameters only: the shape,
    epsilon, delta, the relation and the noise.  Returns a
    :class:`dprange.analysis.Selection` (ranked table, lowest error first; ties go to the
    first candidate); candidates that cannot run on the shape are listed as excluded."""
    shape = check_shape(shape)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    workload = check_grid_workload(workload)
    if workload == "marginals":
        order = check_order(order, shape)
    if candidates is None:
        pool = grid_candidates(shape, neighbours=neighbours, noise=noise, workload=workload, delta=delta, order=order)
    else:
        pool = list(candidates)
    ranked, excluded = [], []
    for mech in pool:
        try:
            error = expected_error(mech, shape, workload, epsilon, delta=delta, order=order)
        except ParameterError as exc:
            excluded.append((mech, str(exc)))
            continue
        if math.isfinite(error):
            ranked.append(Candidate(mech, error))
        else:
            excluded.append((mech, "the expected error is not finite"))
    if not ranked:
        raise ParameterError(f"no k-D mechanism can release a {list(shape)} grid: {excluded[0][1] if excluded else ''}")
    ranked.sort(key=lambda c: c.error)
    name = workload if isinstance(workload, str) else "rectangles"
    described = {"name": name, "shape": list(shape), **({"order": order} if name == "marginals" else {})}
    return Selection(ranked[0].mechanism, ranked[0].error, ranked, described, excluded)


# ----------------------------------------------------------------------------- saved releases
QARDAJI_2013 = Citation(
    "Qardaji, Yang and Li", "Understanding Hierarchical Methods for Differentially Private Histograms", "PVLDB 2013"
)
GRID_MECHANISMS.add(
    Kronecker,
    summary="Kronecker products of per-axis 1-D strategies (identity = flat, Haar = k-D Privelet, trees) "
    "with exact per-axis least squares",
    citation=Citation(
        "Miklau",
        "Differentially-Private Batch Query Answering: Exploiting the Workload vs. Exploiting the Data",
        "DIMACS 2012",
    ),
    auto=True,
    candidates=kronecker_candidates,
)
GRID_MECHANISMS.add(
    KDHierarchy,
    summary="the k-D hierarchy of fan-out b^k over the padded cube, exact tree least squares in Morton order",
    citation=QARDAJI_2013,
    auto=True,
    candidates=hierarchy_candidates_kd,
)
GRID_MECHANISMS.add(
    Quadtree,
    summary="the 2-D quadtree (kd_hierarchy with branching 2), uniform or geometric budgets",
    citation=Citation(
        "Cormode, Procopiuc, Srivastava, Shen and Yu", "Differentially Private Spatial Decompositions", "ICDE 2012"
    ),
)
GRID_MECHANISMS.add(
    Privelet,
    summary="k-D Privelet: the Haar transform on every axis (or identity on chosen axes), Privelet's "
    "weights, exact least squares per axis",
    citation=Citation("Xiao, Wang and Gehrke", "Differential Privacy via Wavelet Transforms", "ICDE 2010"),
)
for _name, _factory, _summary in (
    ("all-rectangles", all_rectangles, "every rectangle of the grid (products of all ranges per axis)"),
    ("prefix-rectangles", prefix_rectangles, "dominance counts: the k-D CDF, one per cell"),
    ("marginals", marginals, "all k-way marginals (default 2-way): cells of k axes, the others summed"),
):
    GRID_WORKLOADS.register(Entry("k-D workload", _name, _summary, QARDAJI_2013, factory=_factory, auto=True))


def _check_rebuilt_noise(saved: NoiseSpec, rebuilt: NoiseSpec) -> None:
    """Refuse a saved block whose noise differs from its design's calibration as rebuilt here:
    the release was made with another design (e.g. another quantisation of an optimised
    strategy), and its values would be read against the wrong matrix and variance."""
    if saved.kind != rebuilt.kind or not math.isclose(saved.scale, rebuilt.scale, rel_tol=1e-9):
        raise DataError(
            f"the saved release's noise ({saved.kind}, scale {saved.scale:.6g}) does not match its design as "
            f"rebuilt by this version of dprange ({rebuilt.kind}, scale {rebuilt.scale:.6g}): it was made with "
            "another design and cannot be loaded here"
        )


def _check_rebuilt_design(saved, block) -> None:
    """Refuse a saved block whose recorded design digest differs from the block rebuilt here:
    an optimised strategy is rebuilt from the disk cache or optimised again, and another
    strategy (another cache file at the key, another machine's optimisation) can have the
    same noise scale (norm-keeping quantisation gives every such product the same
    sensitivity); its values would be read against the wrong matrix.  Releases saved before
    the digest was recorded have none and are checked by their noise only."""
    if saved is not None and saved != design_digest(block):
        raise DataError(
            "the saved release's measured strategy differs from the one rebuilt here (from the strategy "
            "cache or a new optimisation): its values would be read against the wrong matrix; load it "
            "where its strategy is cached, or with an empty strategy cache (DPRANGE_CACHE_DIR)"
        )


def _measured_with(mech: GridMechanism, plan: Strategy, epsilon: float, delta: float, saved) -> list:
    """The saved blocks as measurements of ``plan``; DataError where they do not fit it."""
    if len(saved) != len(plan.blocks):
        raise DataError(f"the saved release has {len(saved)} measured blocks, its design has {len(plan.blocks)}")
    measured = []
    for block, item, expected in zip(plan.blocks, saved, mech._noise(plan, epsilon, delta)):
        spec = NoiseSpec(item["noise"]["kind"], float(item["noise"]["scale"]))
        _check_rebuilt_noise(spec, expected)
        _check_rebuilt_design(item.get("design"), block)
        rows = block.shape[0]  # in text, counted before they are parsed (_bounded_json)
        values = np.asarray(
            sized(item["values"], rows, f"a saved block has {{size}} values, its design {rows} rows"), dtype=float
        )
        if values.shape != (rows,):
            raise DataError(f"a saved block has {values.size} values, its design {rows} rows")
        measured.append(LinearMeasurement(block, values, spec.variance, spec))
    return measured


def _matching_design(mech: GridMechanism, shape, epsilon: float, delta: float, saved) -> list:
    """The saved blocks measured with the first of :meth:`GridMechanism.saved_plans` they fit
    (blocks, rows, noise and the design digest where saved); the current design's refusal where
    none does."""
    plans = mech.saved_plans(shape, epsilon)
    try:
        return _measured_with(mech, plans[0], epsilon, delta, saved)
    except DataError:
        for plan in plans[1:]:  # an earlier design, where the current one does not fit
            try:
                return _measured_with(mech, plan, epsilon, delta, saved)
            except DataError:
                continue
        raise


def load_grid_release(text) -> GridRelease:
    """A :class:`~dprange.grid_release.GridRelease` from :meth:`GridRelease.to_json` (text or
    dict): the mechanism's design is rebuilt from its parameters, the saved noisy values are
    checked against it (in text, counted against its rows before they are parsed), and the
    estimate and its exact errors are recomputed."""
    data = bounded_loads(text, [("measurements", ANY, "values")]) if isinstance(text, str) else text
    if not isinstance(data, dict) or data.get("kind") != "grid_release":
        raise DataError("not a saved grid release (kind 'grid_release')")
    try:
        cls = cast("type[GridMechanism]", GRID_MECHANISMS[data["mechanism"]].factory)
        parameters = dict(data["parameters"])
        described = parameters.pop("strategy", None)  # how the design was obtained: kept, not rebuilt from
        mech = cls(**parameters)
        shape = check_shape(data["shape"])
        mech.follow_delta(float(data["delta"]))  # a design chosen by delta is rebuilt at the saved one
        saved = data["measurements"]
        measured = _matching_design(mech, shape, float(data["epsilon"]), float(data["delta"]), saved)
        total = None if data["total"] is None else float(data["total"])
        meas = Measurements(
            measured,
            measured[0].block.shape[1],
            float(data["epsilon"]),
            float(data["delta"]),
            data["neighbours"],
            total,
            seeded=bool(data["seeded"]),
        )
        domain = None if data["domain"] is None else ProductDomain.from_dict(data["domain"])
    except (KeyError, TypeError) as exc:
        raise DataError(f"the saved grid release is incomplete or malformed ({exc!r})") from None
    estimate = mech.estimate(shape, meas)
    kept = mech.parameters() | ({} if described is None else {"strategy": described})
    release = GridRelease(shape, estimate, meas, mechanism=cls.name, parameters=kept, domain=domain)
    if data.get("public_marginals"):
        try:
            published = {
                tuple(item["axes"]): np.asarray(item["values"], dtype=float) for item in data["public_marginals"]
            }
        except (KeyError, TypeError) as exc:
            raise DataError(f"the saved public marginals are malformed ({exc!r})") from None
        release = constrain(release, published)
    return release
