"""The Fourier strategy for low-order marginals (Barak, Chaudhuri, Dwork, Kale, McSherry and
Talwar, "Privacy, Accuracy, and Consistency Too: A Holistic Solution to Contingency Table
Release", PODS 2007; listed among the fixed strategies in Miklau, DIMACS 2012).

Decomposition.  On every axis a, R^{n_a} = span(1) + V_a (V_a: the vectors summing to 0, the
span of the non-constant characters).  The grid's space is the orthogonal sum of the Fourier
subspaces V_T = (x)_{a in T} V_a (x) (x)_{a not in T} span(1), one per set of axes T, and the
marginal over the axes S depends on the components in V_T for T subset of S only.  So the
``order``-way marginals need exactly the components T with |T| <= order: those are measured,
each once, and nothing else.

Frames.  V_T is measured by the integer block F_T = (x)_{a in T} C_a (x) (x)_{a not in T} 1^T
(1^T: the axis summed).  C_a is the parity character [1, -1] of a binary axis (Barak et al.'s
Fourier coefficients) and the centring frame n I - J of a larger axis (rows n e_i - 1, a
redundant frame of V_a): both satisfy C_a^T C_a = mu_a P_a (P_a = I - J / n_a, mu_a = 2 for
the parity, n_a^2 for the centring).  Per unit of error the centring frame needs less L1
sensitivity than a Walsh-Hadamard basis for n_a > 4 ((2(n - 1))^2 / n^2 against (n - 1)^2 / n
per coefficient space) and the same L2 sensitivity.  Axes of one bin have no V_a.

Least squares.  The row spaces of different blocks are orthogonal, so the GLS estimate is
x = sum_T F_T^+ y_T with F_T^+ = (x)_{a in T} C_a^T / mu_a (x) (x)_{a not in T} 1 / n_a (the
redundant rows of a centring frame are averaged), components outside the measured V_T are
set to 0 (they are not estimable), and the marginals are consistent by construction (one x).
Under replace the total is public and the T = {} component is t / N exactly.  A query q is
estimable iff it has no component outside the measured V_T; a rectangle is iff it is
restricted (not the whole axis) on at most ``order`` axes of two or more bins.  Its variance
is sum_T v_T prod_{a in T} L_a (n_a - L_a) / (n_a mu_a) prod_{a not in T} (L_a / n_a)^2 (L_a:
its length on axis a; v_T the noise variance of block T), for all rectangles in a few passes.

Budget.  The total squared error over all cells of all ``order``-way marginals is
sum_T v_T c_T with c_T = sum_{S superset of T, |S| = order} prod_{a in T} (n_a - 1) / mu_a
prod_{a in S \\ T} 1 / n_a.  Every column of F_T has the same L_p norm
s_T = prod_{a in T} s_a (parity 1; centring 2 (n - 1) for L1, n (n - 1) for L2^2), so with
Laplace-type noise v_T ~ (sum_U eps_U s_U)^2 / eps_T^2 and the split eps_T ~ (c_T / s_T)^(1/3)
minimises the total ("optimal"); with Gaussian noise (``noise="gaussian"``) the weights are
(c_T / s_T)^(1/4).  The split is optimal for add/remove; under replace the calibration uses
the exact replace sensitivity (:func:`replace_change`) with the same split.

Sensitivity under replace: a record moving from cell i to cell j changes F_T by
(x)_a u_a - (x)_a v_a (u_a, v_a the columns of i_a and j_a), zero unless T meets the set D of
axes where i and j differ.  On every axis the rows of (u_a, v_a) fall into at most three
classes (same axis: (n-1, n-1) once and (-1, -1) n - 1 times, or (1, 1) for a parity; moved
axis: (n-1, -1), (-1, n-1) once each and (-1, -1) n - 2 times, or (1, -1)), so
||change_T||_p^p is a sum over at most 3^|T| class products, and the exact sensitivity is
the maximum over the non-empty D.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np

from ..operators.base import check_norm, check_relation
from ..operators.dense import Explicit
from ..operators.structured import Kron, Total
from .trees import Strategy

BUDGET_RULES = ("optimal", "uniform")


def axis_frame(n: int) -> np.ndarray:
    """The integer frame C_a of V_a: the parity [1, -1] for two bins, n I - J otherwise."""
    if n == 2:
        return np.array([[1, -1]], dtype=np.int64)
    return n * np.eye(n, dtype=np.int64) - 1


def axis_mu(n: int) -> int:
    """mu_a with C_a^T C_a = mu_a (I - J / n_a)."""
    return 2 if n == 2 else n * n


def axis_column_power(n: int, p: int) -> int:
    """||C_a e_i||_p^p, the same for every bin i."""
    if n == 2:
        return 1
    return 2 * (n - 1) if p == 1 else n * (n - 1)


def fourier_subsets(shape, order: int, *, with_total: bool = True) -> list[tuple[int, ...]]:
    """The measured sets of axes T: |T| <= order, axes of one bin left out (they have no V_a),
    by size then lexicographically; the empty set (the total) unless ``with_total`` is False."""
    axes = [a for a, n in enumerate(shape) if n >= 2]
    out: list[tuple[int, ...]] = []
    for size in range(0 if with_total else 1, min(order, len(axes)) + 1):
        out.extend(itertools.combinations(axes, size))
    return out


def _classes(n: int, moved: bool) -> list[tuple[int, int, int]]:
    """(u, v, multiplicity) of the rows of one axis' frame for the columns of i and j
    (module doc); u = v on an axis the record does not move along."""
    if n == 2:
        return [(1, -1, 1)] if moved else [(1, 1, 1)]
    if moved:
        return [(n - 1, -1, 1), (-1, n - 1, 1), (-1, -1, n - 2)]
    return [(n - 1, n - 1, 1), (-1, -1, n - 1)]


@functools.lru_cache(maxsize=64)
def replace_change(shape: tuple[int, ...], subsets: tuple[tuple[int, ...], ...], p: int) -> np.ndarray:
    """R[d, t] = ||F_T (e_j - e_i)||_p^p for the t-th set T and the d-th non-empty set D of
    axes (of two or more bins) along which cells i and j differ (module doc): exact integers.

    R[d, t] depends on D only through D n T, so each T's value is computed once per subset of
    T (2^|T| of them) and spread over the moves by their bits on T's axes (against every (D, T)
    pair: docs/multidim.md, "Figures by module")."""
    axes = [a for a, n in enumerate(shape) if n >= 2]
    position = {a: k for k, a in enumerate(axes)}
    moves = [D for size in range(1, len(axes) + 1) for D in itertools.combinations(axes, size)]
    masks = np.array([sum(1 << position[a] for a in D) for D in moves], dtype=np.int64)
    out = np.zeros((len(moves), len(subsets)), dtype=object)
    for t, T in enumerate(subsets):
        values = np.zeros(1 << len(T), dtype=object)  # by the bits of D n T, in T's order
        for key in range(1, 1 << len(T)):
            moved = {a for bit, a in enumerate(T) if key >> bit & 1}
            total = 0
            for rows in itertools.product(*(_classes(shape[a], a in moved) for a in T)):
                u = math.prod(r[0] for r in rows)
                v = math.prod(r[1] for r in rows)
                total += math.prod(r[2] for r in rows) * abs(u - v) ** p
            values[key] = total
        keys = np.zeros(len(moves), dtype=np.int64)
        for bit, a in enumerate(T):
            keys |= ((masks >> position[a]) & 1) << bit
        out[:, t] = values[keys]
    return out


def frame_block(grid, T) -> Kron:
    """F_T = (x)_{a in T} C_a (x) (x)_{a not in T} 1^T."""
    return Kron([Explicit(axis_frame(n)) if a in T else Total(n) for a, n in enumerate(grid)])


class FourierStrategy(Strategy):
    """The blocks F_T with the closed-form sensitivities of the module doc."""

    def __init__(self, grid, subsets, budget):
        self.grid = tuple(grid)
        self.subsets = tuple(subsets)
        blocks = [frame_block(self.grid, T) for T in subsets]
        super().__init__(blocks, budget, shape=self.grid)

    def column_power(self, T, p: int) -> int:
        return math.prod(axis_column_power(self.grid[a], p) for a in T)

    def sensitivity_power(self, norm: int, neighbours: str, weights=None):
        p = check_norm(norm)
        weights = [Fraction(e) for e in self.budget] if weights is None else [Fraction(w) for w in weights]
        powers = [abs(w) ** p for w in weights]
        if check_relation(neighbours) == "add_remove":
            return sum((w * self.column_power(T, p) for w, T in zip(powers, self.subsets)), Fraction(0))
        change = replace_change(self.grid, self.subsets, p)
        if change.shape[0] == 0:
            return Fraction(0)
        approx = change.astype(float) @ np.array([float(w) for w in powers])
        close = np.flatnonzero(approx >= approx.max() * (1 - 1e-9))  # exact sums on the near-maximal moves only
        return max(sum((w * int(c) for w, c in zip(powers, change[d])), Fraction(0)) for d in close)

    def describe(self) -> dict:
        return {"grid": list(self.grid), "fourier_subsets": [list(T) for T in self.subsets]}
