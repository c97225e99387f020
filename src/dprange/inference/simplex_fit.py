"""Weighted least squares over the non-negative vectors of a given sum, by accelerated projected
gradient, for designs too large for a factorisation:

    minimise  sum_i ||A_i x - y_i||^2 / v_i   subject to  x >= 0,  sum(x) = total

(and, given a support, x = 0 off it: the same problem on a face of the simplex) over the
measured blocks ``A_i`` (any :class:`~dprange.operators.Operator`, applied only by products) with
noise variances ``v_i``.  It is :func:`dprange.inference.nnls` with a total, solved
with one product by each block and its adjoint per iteration instead of ADMM's inner least
squares: FISTA (Beck and Teboulle, "A Fast Iterative Shrinkage-Thresholding Algorithm for Linear
Inverse Problems", SIAM Journal on Imaging Sciences 2009) with the gradient restart of
O'Donoghue and Candes ("Adaptive Restart for Accelerated Gradient Schemes", Foundations of
Computational Mathematics 2015), and the projection onto the scaled simplex (Duchi,
Shalev-Shwartz, Singer and Chandra, "Efficient Projections onto the l1-Ball for Learning in
High Dimensions", ICML 2008) with its threshold found by Newton's method from the last
iterate's (no sort).  The step is the inverse of the gradient's Lipschitz constant, the
largest eigenvalue of sum_i A_i^T A_i / v_i: from the factors' Gram matrices for Kronecker
products of p-Identity blocks (the optimised 2-D designs), else by power iteration with a safety
margin.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from .._validation import check_positive_int
from ..errors import ConvergenceWarning, ParameterError
from ..measurements import Measurements
from ..operators.structured import Kron
from .p_identity import DiagonalPlusRows

#: Power iterations for the Lipschitz constant, and the margin it is multiplied by (the power
#: method approaches the largest eigenvalue from below; a step above 2 / L would diverge).
POWER_ITERATIONS = 60
LIPSCHITZ_MARGIN = 1.05
#: Newton steps for the projection's threshold before it is found by sorting instead (each step
#: drops at least one value from the active set, so n steps at worst; a few in a fit).
NEWTON_STEPS = 50


def project_onto_simplex(values, total: float) -> np.ndarray:
    """The Euclidean projection of ``values`` onto {x >= 0, sum(x) = total} (zeros where
    ``total`` is not positive): max(values - tau, 0) with the threshold tau of
    :func:`simplex_threshold`."""
    values = np.asarray(values, dtype=float)
    if not np.isfinite(total):
        raise ParameterError(f"the total must be finite, got {total!r}")
    if total <= 0 or values.size == 0:
        return np.zeros_like(values)
    return np.maximum(values - simplex_threshold(values.ravel(), total), 0.0).reshape(values.shape)


def simplex_threshold(values: np.ndarray, total: float, start: float | None = None) -> float:
    """The tau with sum(max(values - tau, 0)) = ``total`` > 0, by Newton's method on that
    decreasing, convex, piecewise-linear function (Michelot, "A finite algorithm for finding the
    projection of a point onto the canonical simplex of R^n", Journal of Optimization Theory and
    Applications 1986, from below).  From ``start`` (e.g. the threshold of the last iterate of a
    fit, a few steps away) or, if None or above every value, from (sum(values) - total) / n,
    which lies below tau.  A step from above lands below tau (the tangent of a convex function lies
    under it); from below each step moves up and drops at least one value from the active set, so
    it ends after at most n steps, at tau = (sum of the active values - total) / their number:
    the sorting projection's formula (Duchi et al., ICML 2008) on the same set.  Cost O(n) a step;
    after NEWTON_STEPS steps the threshold is found by sorting (:func:`sorted_threshold`)."""
    tau = float(start) if start is not None and np.isfinite(start) else math.inf
    active = values > tau
    count = int(np.count_nonzero(active))
    if count == 0:  # no start, or one above every value: the mean's threshold, below the root
        tau = (float(values.sum()) - total) / values.size
        active = values > tau
        count = int(np.count_nonzero(active))
    for _ in range(NEWTON_STEPS):
        following = (float(np.sum(values, where=active)) - total) / count  # cost: one pass
        now_active = values > following
        now_count = int(np.count_nonzero(now_active))
        if (now_count == count and following >= tau) or now_count == 0:  # the set holds: the root
            return following  # (none active: the total lost in rounding beside the top value)
        tau, active, count = following, now_active, now_count
    return sorted_threshold(values, total)  # a slow approach (O(n) steps at worst): sort instead


def sorted_threshold(values: np.ndarray, total: float) -> float:
    """The threshold of the projection by sorting (Duchi et al., ICML 2008): O(n log n)."""
    ordered = np.sort(values)[::-1]
    excess = np.cumsum(ordered) - total
    ranks = np.arange(1, ordered.size + 1)
    last = np.flatnonzero(ordered - excess / ranks > 0)[-1]  # the first entry always qualifies
    return float(excess[last] / ranks[last])


@dataclasses.dataclass(frozen=True)
class SimplexFit:
    """The solution ``x`` (>= 0, summing to the total), the iterations run and whether the last
    projected-gradient step was within the tolerance (in noise units, :func:`simplex_fit`)."""

    x: np.ndarray
    iterations: int
    converged: bool


class _NormalOperator:
    """x -> sum_i A_i^T A_i x / v_i, and b = sum_i A_i^T y_i / v_i, from the blocks' products.
    A block of one noise variance whose Gram operator is cheaper to apply than a product and an
    adjoint product (:func:`_structured_gram`) is applied as that Gram operator."""

    def __init__(self, measurements: Measurements):
        self.blocks = [m.block for m in measurements.measurements]
        self.inverse_variances = [1.0 / m.row_variances() for m in measurements.measurements]
        if any(not np.all(np.isfinite(w)) or np.any(w <= 0) for w in self.inverse_variances):
            raise ParameterError("every measured row needs a positive, finite noise variance")
        self.rhs = sum(
            A.rmatvec(w * np.asarray(m.values, dtype=float))
            for A, w, m in zip(self.blocks, self.inverse_variances, measurements.measurements)
        )
        self.grams = [
            _structured_gram(A) if w.size and np.all(w == w[0]) else None
            for A, w in zip(self.blocks, self.inverse_variances)
        ]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return sum(
            w[0] * G.matvec(x) if G is not None else A.rmatvec(w * A.matvec(x))
            for A, G, w in zip(self.blocks, self.grams, self.inverse_variances)
        )  # cost: a Gram product or 2 products a block

    def largest_eigenvalue(self, n: int) -> float:
        """An upper bound on the largest eigenvalue, times LIPSCHITZ_MARGIN: sum_i
        lambda_max(A_i^T A_i) / v_i where every block has one noise variance and a known largest
        Gram eigenvalue (:func:`_known_largest`; exact for one block, where the power method
        reaches the same value, so the steps are as before), else the power method from a fixed
        start."""
        known = [_known_largest(A) if G is not None else None for A, G in zip(self.blocks, self.grams)]
        if all(value is not None for value in known):
            return LIPSCHITZ_MARGIN * float(sum(w[0] * value for w, value in zip(self.inverse_variances, known)))
        v = 1.0 + np.cos(np.arange(n))  # a fixed start with a component along every direction in practice
        value = 0.0
        for _ in range(POWER_ITERATIONS):
            w = self(v / np.linalg.norm(v))
            value = float(np.linalg.norm(w))
            if value == 0.0:
                break
            v = w
        return value * LIPSCHITZ_MARGIN


#: A Kronecker factor's Gram matrix is formed (as its class forms it) up to this many columns.
GRAM_FACTOR_COLUMNS = 1024


def _check_support(support, n: int):
    """Every cell (a slice) where ``support`` is None, else the boolean array of n cells checked
    to hold at least one True."""
    if support is None:
        return slice(None)
    on = np.asarray(support)
    if on.dtype != bool or on.shape != (n,):
        raise ParameterError(f"support must be a boolean array of the {n} cells")
    if not on.any():
        raise ParameterError("support must hold at least one cell")
    return on


def _known_largest(block) -> float | None:
    """lambda_max(A^T A) of a p-Identity block (kept on the block), or of a Kronecker product of
    them (the product of the factors': the eigenvalues of a Kronecker product of symmetric positive
    semi-definite matrices are the products of theirs); None for other blocks."""
    if isinstance(block, DiagonalPlusRows):
        return block.largest_gram_eigenvalue()
    if isinstance(block, Kron) and all(isinstance(f, DiagonalPlusRows) for f in block.factors):
        return math.prod(f.largest_gram_eigenvalue() for f in block.factors)
    return None


def _structured_gram(block):
    """A^T A as an operator cheaper to apply than A then A^T, or None: a p-Identity block's
    (diag(d^2) + C^T C, no stacked n + p rows), or a Kronecker product's of such factors or of
    factors of at most GRAM_FACTOR_COLUMNS columns (each factor's Gram, n_j x n_j at most)."""
    if isinstance(block, DiagonalPlusRows):
        return block.gram()
    if isinstance(block, Kron) and all(
        isinstance(f, DiagonalPlusRows) or f.shape[1] <= GRAM_FACTOR_COLUMNS for f in block.factors
    ):
        return block.gram()
    return None


def simplex_fit(
    measurements: Measurements,
    total: float,
    *,
    start=None,
    tol: float = 1e-6,
    maxiter: int = 1000,
    support=None,
) -> SimplexFit:
    """argmin over x >= 0 with sum(x) = ``total`` of sum_i ||A_i x - y_i||^2 / v_i (module doc).

    ``start``: the first iterate, projected (e.g. the least-squares estimate; zeros if None).
    ``support``: None, or a boolean array of the n cells, at least one True: the fit is held at
    zero off it (each step projected onto the face of the simplex the support spans; the step
    size of the whole problem is a valid one for the face).
    Stops when the root mean square of the last projected-gradient step is at most ``tol`` noise
    units, sqrt(1 / L) with L the gradient's Lipschitz constant (at most the noise standard
    deviation of any cell's least-squares estimate), or after ``maxiter`` iterations with a
    ConvergenceWarning."""
    if not isinstance(measurements, Measurements) or not measurements.measurements:
        raise ParameterError("simplex_fit needs a Measurements with at least one measured block")
    try:
        total = float(total)
    except (TypeError, ValueError):
        raise ParameterError(f"the total must be a number, got {total!r}") from None
    if not np.isfinite(total) or total < 0:
        raise ParameterError(f"the total must be finite and non-negative, got {total!r}")
    if not (isinstance(tol, (int, float)) and np.isfinite(tol) and tol > 0):
        raise ParameterError(f"tol must be a positive number, got {tol!r}")
    maxiter = check_positive_int(maxiter, "maxiter")
    n = measurements.n
    normal = _NormalOperator(measurements)
    first = np.zeros(n) if start is None else np.asarray(start, dtype=float).ravel()
    if first.shape != (n,) or not np.all(np.isfinite(first)):
        raise ParameterError(f"start must hold {n} finite values")
    on = _check_support(support, n)
    x = np.zeros(n)
    x[on] = project_onto_simplex(first[on], total)
    if total == 0:
        return SimplexFit(x, 0, True)
    step = 1.0 / normal.largest_eigenvalue(n)
    noise_unit = np.sqrt(step)  # at most the noise standard deviation of any cell's least-squares estimate
    z, t = x.copy(), 1.0
    tau = None
    for iteration in range(1, maxiter + 1):
        pushed = (z - step * (normal(z) - normal.rhs))[on]
        tau = simplex_threshold(pushed, total, tau)  # cost: a few passes, from the last threshold
        following = np.zeros(n)
        following[on] = np.maximum(pushed - tau, 0.0)
        moved = following - z
        if np.sqrt(np.mean(moved * moved)) <= tol * noise_unit:
            return SimplexFit(following, iteration, True)
        if float(np.dot(moved, following - x)) < 0:  # the momentum points uphill: restart it
            t = 1.0
        t_next = (1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0
        z = following + ((t - 1.0) / t_next) * (following - x)
        x, t = following, t_next
    warnings.warn(
        f"the non-negative fit did not reach tol={tol} in {maxiter} iterations; raise maxiter",
        ConvergenceWarning,
        stacklevel=2,
    )
    return SimplexFit(x, maxiter, False)
