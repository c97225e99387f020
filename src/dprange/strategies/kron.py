"""k-D strategies: Kronecker products of 1-D strategies, and k-D hierarchies (quadtrees), with
their exact sensitivity (the mechanisms: :mod:`dprange.mechanisms.grid`).

The histogram of a product domain (:mod:`dprange.domain`) is a k-D array, flattened
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
common denominator of the weights) for those within 1e-9 of the largest (against every
combination in Fractions: docs/multidim.md, "Figures by module").

Least squares without dense matrices (:class:`~dprange.inference.kron.KronEstimate`).  With block variances
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
import math
from fractions import Fraction

import numpy as np

from ..errors import ParameterError
from ..operators.base import Operator, check_norm, check_relation
from ..operators.dense import exact_integer_dtype
from ..operators.structured import HaarLevel, Identity, Kron, TreeLevel, Weighted
from .matrix import EXACT_PAIRS_LIMIT
from .trees import HaarStrategy, Strategy, TreeStrategy

AXIS_KINDS = ("identity", "haar")


#: Largest per-axis table (entries) of :class:`KronEstimate`: 2^27 float64 = 1 GiB.
TABLE_LIMIT = 1 << 27


BUDGET_RULES = ("uniform", "geometric")


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
    # (the powers over their common denominator) per case: Fractions are slow where many
    # combinations tie at the maximum (docs/multidim.md, "Figures by module").
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


class IntegerKron(Kron):
    """The Kronecker product of integer p-Identity factors (:class:`DiagonalPlusRows`) whose
    answers on integer counts are exact: one axis at a time in int64 where every partial value
    stays below 2^62 (bounded by prod_a max_j ||a_j||_1 x sum x: the factors' columns have L1
    norm >= 1), in Python integers above (the measurement then rounds the noisy answers to
    floats, which is post-processing).  In floating point (``matvec``) the answers would exceed
    2^53 from a few million records on three axes quantised at 2^-12 (a few hundred million on
    two at 2^-16) and be rounded, by an amount the sensitivity does not cover."""

    def answers(self, x) -> np.ndarray:
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.integer) or not all(f.integer for f in self.factors):
            return self.matvec(x)
        bound = math.prod(int(f.sensitivity_power(1, "add_remove")) for f in self.factors) * int(np.abs(x).sum())
        current = x.astype(exact_integer_dtype(bound)).reshape([f.shape[1] for f in self.factors])
        for axis, factor in enumerate(self.factors):
            moved = np.moveaxis(current, axis, 0)
            out = factor.integer_product(moved.reshape(moved.shape[0], -1))
            current = np.moveaxis(out.reshape((out.shape[0],) + moved.shape[1:]), 0, axis)
        return current.reshape(-1)


class OneKronStrategy(Strategy):
    """One Kron block with the whole budget; its sensitivity is the product's (closed form
    for add/remove, :meth:`dprange.operators.Kron.sensitivity_power`), not the dense definition.

    Replace neighbours, L1: the exact pairwise maximum (the dense definition) where cells^2 x
    rows is at most :data:`dprange.strategies.matrix.EXACT_PAIRS_LIMIT`, as for ``Matrix``, else the
    triangle bound ||a - b||_1 <= 2 max ||a||_1, never below the exact value and close to it on
    the grids measured (docs/optimized.md, "k-D auto").  (L2 stays exact, from the factors' Gram
    matrices: its triangle bound would double the variance.)"""

    def sensitivity_power(self, norm: int, neighbours: str, weights=None):
        (w,) = [Fraction(e) for e in self.budget] if weights is None else list(weights)
        block = Weighted(self.blocks[0], w)
        rows, cells = self.blocks[0].shape
        if neighbours == "replace" and norm == 1 and cells >= 2 and cells**2 * rows > EXACT_PAIRS_LIMIT:
            return 2 * block.sensitivity_power(1, "add_remove")
        return block.sensitivity_power(norm, neighbours)
