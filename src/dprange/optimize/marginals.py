"""HDMM's marginals template (McKenna et al., PVLDB 2018): weights over marginals optimised for a
workload of marginals.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dprange._lazy import lazy_module

from ..inference.marginals import MarginalAlgebra
from ..strategies.trees import Strategy

optimize = lazy_module("scipy.optimize")


def marginal_loss(theta: np.ndarray, algebra: MarginalAlgebra, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """(sum theta)^2 sum_T weights_T / lambda_T(theta^2) and its gradient: the trace of
    G X^-1 with X = sum_S theta_S^2 C_S, L1 sensitivity sum theta (every cell lies in one cell
    of each marginal).  ``weights`` = dim(E_T) g_T."""
    u = theta**2
    lam = algebra.R @ u
    live = weights > 0
    if np.any(lam[live] <= 0):
        return np.inf, np.zeros_like(theta)
    f = float(np.sum(weights[live] / lam[live]))
    df_du = -algebra.R[live].T @ (weights[live] / lam[live] ** 2)
    total = float(theta.sum())
    return total**2 * f, 2.0 * total * f + total**2 * df_du * 2.0 * theta


def optimize_marginals(shape, order: int, *, restarts: int = 3, seed: int = 0) -> tuple[np.ndarray, float]:
    """Weights theta >= 0 (sum 1) on the 2^d marginals minimising the L1 trace for all
    ``order``-way marginals (L-BFGS-B from ``restarts`` uniform starts; 2^d variables).  The
    full table alone (the identity, theta on the set of all axes) is kept where no end point
    is lower: the uniform starts can stop above it (docs/optimized.md, "optimized_marginals")."""
    algebra = MarginalAlgebra(shape)
    weights = algebra.dim * algebra.workload_eigenvalues(order)
    rng = np.random.default_rng(seed)
    best = np.zeros(len(algebra.subsets))
    best[-1] = 1.0  # the full table: every eigenvalue 1, a finite loss
    best_loss = marginal_loss(best, algebra, weights)[0]
    for _ in range(restarts):
        start = rng.uniform(0.5, 1.0, len(algebra.subsets))
        result = optimize.minimize(
            marginal_loss,
            start,
            args=(algebra, weights),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, None)] * start.size,
        )
        if result.fun < best_loss:
            best, best_loss = result.x / result.x.sum(), float(result.fun)
    return best, float(best_loss)


class MarginalStrategy(Strategy):
    """Marginal blocks with their budgets; add/remove: every column has one 1 per block, so
    Delta_p^p = sum_S eps_S^p; replace: a record moving between cells that differ on every
    axis changes every block but the total by 2 in L1 (2 entries of 1), so 2 sum_{S != {}} eps_S
    (L1) and 2 sum eps_S^2 (L2)."""

    def __init__(self, blocks, budget, subsets, *, shape=None):
        super().__init__(blocks, budget, shape=shape)
        self.subsets = subsets

    def sensitivity_power(self, norm: int, neighbours: str, weights=None):
        w = [Fraction(e) for e in self.budget] if weights is None else list(weights)
        if neighbours == "add_remove":
            return sum(abs(x) ** norm for x in w)
        if any(n < 2 for n in self.shape):
            return super().sensitivity_power(norm, neighbours, weights)
        return sum(2 * abs(x) ** norm for x, sub in zip(w, self.subsets) if sub)
