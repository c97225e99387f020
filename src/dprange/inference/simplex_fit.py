"""Weighted least squares over the non-negative vectors of a given sum, by accelerated projected
gradient, for designs too large for a factorisation:

    minimise  sum_i ||A_i x - y_i||^2 / v_i   subject to  x >= 0,  sum(x) = total

over the measured blocks ``A_i`` (any :class:`~dprange.operators.Operator`, applied only by
products) with noise variances ``v_i``.  It is :func:`dprange.inference.nnls` with a total, solved
with one product by each block and its adjoint per iteration instead of ADMM's inner least
squares: FISTA (Beck and Teboulle, "A Fast Iterative Shrinkage-Thresholding Algorithm for Linear
Inverse Problems", SIAM Journal on Imaging Sciences 2009) with the gradient restart of
O'Donoghue and Candes ("Adaptive Restart for Accelerated Gradient Schemes", Foundations of
Computational Mathematics 2015), and the projection onto the scaled simplex by sorting (Duchi,
Shalev-Shwartz, Singer and Chandra, "Efficient Projections onto the l1-Ball for Learning in
High Dimensions", ICML 2008).  The step is the inverse of the gradient's Lipschitz constant, the
largest eigenvalue of sum_i A_i^T A_i / v_i, found by power iteration with a safety margin.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from .._validation import check_positive_int
from ..errors import ConvergenceWarning, ParameterError
from ..measurements import Measurements

#: Power iterations for the Lipschitz constant, and the margin it is multiplied by (the power
#: method approaches the largest eigenvalue from below; a step above 2 / L would diverge).
POWER_ITERATIONS = 60
LIPSCHITZ_MARGIN = 1.05


def project_onto_simplex(values, total: float) -> np.ndarray:
    """The Euclidean projection of ``values`` onto {x >= 0, sum(x) = total} (zeros where
    ``total`` is not positive).  Cost: one sort."""
    values = np.asarray(values, dtype=float)
    if not np.isfinite(total):
        raise ParameterError(f"the total must be finite, got {total!r}")
    if total <= 0 or values.size == 0:
        return np.zeros_like(values)
    ordered = np.sort(values.ravel())[::-1]  # cost: one sort of the cells
    excess = np.cumsum(ordered) - total
    ranks = np.arange(1, ordered.size + 1)
    last = np.flatnonzero(ordered - excess / ranks > 0)[-1]  # the first entry always qualifies
    return np.maximum(values - excess[last] / ranks[last], 0.0)


@dataclasses.dataclass(frozen=True)
class SimplexFit:
    """The solution ``x`` (>= 0, summing to the total), the iterations run and whether the last
    projected-gradient step was within the tolerance (in noise units, :func:`simplex_fit`)."""

    x: np.ndarray
    iterations: int
    converged: bool


class _NormalOperator:
    """x -> sum_i A_i^T A_i x / v_i, and b = sum_i A_i^T y_i / v_i, from the blocks' products."""

    def __init__(self, measurements: Measurements):
        self.blocks = [m.block for m in measurements.measurements]
        self.inverse_variances = [1.0 / m.row_variances() for m in measurements.measurements]
        if any(not np.all(np.isfinite(w)) or np.any(w <= 0) for w in self.inverse_variances):
            raise ParameterError("every measured row needs a positive, finite noise variance")
        self.rhs = sum(
            A.rmatvec(w * np.asarray(m.values, dtype=float))
            for A, w, m in zip(self.blocks, self.inverse_variances, measurements.measurements)
        )

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return sum(
            A.rmatvec(w * A.matvec(x)) for A, w in zip(self.blocks, self.inverse_variances)
        )  # cost: 2 products a block

    def largest_eigenvalue(self, n: int) -> float:
        """The power method from a fixed start, times LIPSCHITZ_MARGIN."""
        v = 1.0 + np.cos(np.arange(n))  # a fixed start with a component along every direction in practice
        value = 0.0
        for _ in range(POWER_ITERATIONS):
            w = self(v / np.linalg.norm(v))
            value = float(np.linalg.norm(w))
            if value == 0.0:
                break
            v = w
        return value * LIPSCHITZ_MARGIN


def simplex_fit(
    measurements: Measurements, total: float, *, start=None, tol: float = 1e-6, maxiter: int = 1000
) -> SimplexFit:
    """argmin over x >= 0 with sum(x) = ``total`` of sum_i ||A_i x - y_i||^2 / v_i (module doc).

    ``start``: the first iterate, projected (e.g. the least-squares estimate; zeros if None).
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
    x = project_onto_simplex(first, total)
    if total == 0:
        return SimplexFit(x, 0, True)
    step = 1.0 / normal.largest_eigenvalue(n)
    noise_unit = np.sqrt(step)  # at most the noise standard deviation of any cell's least-squares estimate
    z, t = x.copy(), 1.0
    for iteration in range(1, maxiter + 1):
        following = project_onto_simplex(z - step * (normal(z) - normal.rhs), total)  # cost: one sort
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
