"""Maximum-likelihood (L1) and non-negative post-processing by ADMM.

Lee, Wang, Kifer, "Maximum Likelihood Postprocessing for Differential Privacy under
Consistency Constraints", KDD 2015 (seed 004).  For measurements y = A x + Laplace noise of
scale b_i, the maximum-likelihood estimate minimises sum_i |A_i x - y_i| / b_i; the paper
adds a small quadratic term (elastic net) so that the solution is unique:

    minimise  alpha ||r||_1 + (1 - alpha) ||r||_2^2,   r = D (A x - y),  D = diag(1 / b_i),
    subject to x >= 0 and C x = d  (a public total, known marginals).

alpha = 1 is pure L1 (maximum likelihood); alpha = 0 is non-negative (weighted) least
squares.  ADMM on the splitting (x, r, w = x >= 0), scaled duals u (for r) and s (for w):

    x <- argmin_{C x = d} ||D A x - (D y + r - u)||^2 + ||x - (w - s)||^2    (a least-squares step)
    r <- soft(rho v, alpha) / (rho + 2 (1 - alpha)),   v = D (A x - y) + u   (closed-form prox)
    w <- max(x + s, 0)
    u <- u + D (A x - y) - r;   s <- s + x - w

Stopping rule (Boyd et al. 2011, section 3.3, as in the paper): primal residual
||(D(Ax - y) - r, x - w)|| <= eps_abs sqrt(p) + eps_rel max(...) and dual residual
rho ||(A^T D (r - r_old), w - w_old)|| <= eps_abs sqrt(n) + eps_rel rho ||(A^T D u, s)||.
rho is fixed (default 1): residual balancing made the iterates oscillate on LP-like (alpha = 1)
problems in our tests, while a fixed rho converged in a few hundred iterations.

The x-step is the paper's "projection": a least-squares problem.  For trees it is exactly
tree GLS (Algorithm 3) — :func:`tree_x_update` does it in O(nodes) with
:func:`dprange.inference.tree.tree_gls`; for any other operator, conjugate gradients on
(A^T D^2 A + I) x = ..., warm-started, with the public total handled by projection; for
general equality constraints on small explicit problems, a cached dense KKT factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, aslinearoperator, cg

from ..errors import ParameterError


@dataclass
class ADMMResult:
    """Solution and convergence record of :func:`admm`."""

    x: np.ndarray
    iterations: int
    converged: bool
    objective: float
    primal_residuals: list = field(default_factory=list)
    dual_residuals: list = field(default_factory=list)


def objective(A, y, weights, x, alpha) -> float:
    """alpha ||D(Ax - y)||_1 + (1 - alpha) ||D(Ax - y)||_2^2."""
    r = weights * (aslinearoperator(A).matvec(x) - y)
    return float(alpha * np.abs(r).sum() + (1 - alpha) * (r**2).sum())


def generic_x_update(A, weights, *, total=None, equality=None):
    """The x-step for any operator: CG (implicit) or a cached KKT factorisation (explicit C)."""
    op = aslinearoperator(A)
    n = op.shape[1]
    w2 = weights**2
    if equality is not None:
        C, d = equality
        C = np.atleast_2d(np.asarray(C, dtype=float))
        d = np.atleast_1d(np.asarray(d, dtype=float))
        if n > 5000:
            raise ParameterError("general equality constraints are solved densely; use n <= 5000")
        dense_a = op.matmat(np.eye(n))
        G = dense_a.T @ (w2[:, None] * dense_a) + np.eye(n)
        k = C.shape[0]
        K = np.block([[G, C.T], [C, np.zeros((k, k))]])
        factor = sla.lu_factor(K)

        def solve(target_rows, target_x, x_prev):
            rhs = op.rmatvec(weights * target_rows) + target_x
            return sla.lu_solve(factor, np.concatenate([rhs, d]))[:n]

        return solve

    project = (lambda v: v - v.mean()) if total is not None else (lambda v: v)  # noqa: E731
    base = np.full(n, float(total) / n) if total is not None else np.zeros(n)
    normal = LinearOperator((n, n), matvec=lambda v: project(op.rmatvec(w2 * op.matvec(project(v))) + project(v)),
                            dtype=float)

    def solve(target_rows, target_x, x_prev):
        rhs = op.rmatvec(weights * target_rows) + target_x
        rhs = rhs - op.rmatvec(w2 * op.matvec(base)) - base
        start = project(x_prev - base)
        delta, _ = cg(normal, project(rhs), x0=start, rtol=1e-10, atol=0.0, maxiter=10 * n + 100)
        return base + project(delta)

    return solve


def tree_x_update(strategy, level_weights, *, total=None):
    """The x-step on a tree: exact tree least squares (Lee et al. Algorithm 3), O(nodes).

    ``level_weights[d]`` is 1/b for the nodes of depth d (None if unmeasured).  Rows of
    depth d become measurements target/weight with variance 1/weight^2, and the identity
    rows of the w-split become a second measurement of the leaves with variance 1.
    """
    from .tree import tree_gls  # noqa: PLC0415

    depths = [d for d in range(strategy.depth + 1) if level_weights[d] is not None]
    sizes = [strategy.level_sizes[d] for d in depths]
    splits = np.cumsum(sizes)[:-1]
    leaf = strategy.depth

    def solve(target_rows, target_x, x_prev):
        values: list = [None] * (strategy.depth + 1)
        variances: list = [None] * (strategy.depth + 1)
        for d, part in zip(depths, np.split(target_rows, splits)):
            values[d] = part / level_weights[d]
            variances[d] = 1.0 / level_weights[d] ** 2
        if values[leaf] is None:
            values[leaf], variances[leaf] = target_x, 1.0
        else:
            precision = 1.0 / variances[leaf] + 1.0
            values[leaf] = (values[leaf] / variances[leaf] + target_x) / precision
            variances[leaf] = 1.0 / precision
        return tree_gls(strategy, values, variances, total=total).leaves

    return solve


def admm(A, y, weights=None, *, alpha: float = 0.9, nonnegative: bool = True, total=None, equality=None,
         x_update=None, rho: float = 1.0, tol: float = 1e-6, maxiter: int = 5000, x0=None) -> ADMMResult:
    """Solve the constrained elastic-net / L1 / NNLS problem of the module doc by ADMM.

    Parameters
    ----------
    A : LinearOperator, sparse or dense matrix (p x n); y : measurements (p,);
    weights : per-row 1/b_i (default 1); alpha in [0, 1];
    nonnegative : impose x >= 0; total : impose sum x = total;
    equality : (C, d) for general constraints C x = d (small explicit problems);
    x_update : a custom x-step ``solve(target_rows, target_x, x_prev)`` (e.g. tree_x_update);
    tol : eps_abs = eps_rel of the stopping rule; maxiter : iteration cap.
    """
    op = aslinearoperator(A)
    p, n = op.shape
    y = np.asarray(y, dtype=float)
    if y.shape != (p,):
        raise ParameterError(f"expected {p} measurements, got shape {y.shape}")
    weights = np.ones(p) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), (p,)).copy()
    if np.any(weights <= 0) or not np.all(np.isfinite(weights)):
        raise ParameterError("row weights must be positive and finite")
    if not 0.0 <= alpha <= 1.0:
        raise ParameterError(f"alpha must be in [0, 1], got {alpha}")
    if total is not None and equality is not None:
        raise ParameterError("give either total or equality, not both")
    solve = x_update or generic_x_update(op, weights, total=total, equality=equality)
    x = np.zeros(n) if x0 is None else np.asarray(x0, dtype=float).copy()
    if total is not None and x0 is None:
        x[:] = float(total) / n
    Ax = op.matvec(x)
    r = weights * (Ax - y)
    w = np.maximum(x, 0.0) if nonnegative else x.copy()
    u = np.zeros(p)
    s = np.zeros(n)
    history_p, history_d = [], []
    converged = False
    it = 0
    scale_y = weights * y
    for it in range(1, maxiter + 1):
        x = solve(scale_y + r - u, w - s, x)
        Ax = op.matvec(x)
        residual = weights * (Ax - y)
        v = residual + u
        r_old, w_old = r, w
        shrink = np.sign(rho * v) * np.maximum(np.abs(rho * v) - alpha, 0.0)
        r = shrink / (rho + 2.0 * (1.0 - alpha))
        w = np.maximum(x + s, 0.0) if nonnegative else x + s
        u = u + residual - r
        s = s + x - w
        primal = np.sqrt(np.sum((residual - r) ** 2) + np.sum((x - w) ** 2))
        dual = rho * np.sqrt(np.sum(op.rmatvec(weights * (r - r_old)) ** 2) + np.sum((w - w_old) ** 2))
        history_p.append(float(primal))
        history_d.append(float(dual))
        eps_primal = tol * np.sqrt(p + n) + tol * max(np.sqrt(np.sum(residual**2) + np.sum(x**2)),
                                                      np.sqrt(np.sum(r**2) + np.sum(w**2)))
        eps_dual = tol * np.sqrt(n) + tol * rho * np.sqrt(np.sum(op.rmatvec(weights * u) ** 2) + np.sum(s**2))
        if primal <= eps_primal and dual <= eps_dual:
            converged = True
            break
    solution = w if nonnegative else x
    if total is not None and nonnegative:
        solution = _project_capped_simplex(solution, float(total))
    return ADMMResult(solution, it, converged, objective(op, y, weights, solution, alpha), history_p, history_d)


def _project_capped_simplex(x: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection onto {x >= 0, sum x = total} (sort-based, O(n log n)).

    ADMM's w is non-negative and its x satisfies the total; at convergence they agree to
    tolerance, and this final projection makes the returned estimate satisfy both exactly.
    """
    if total <= 0:
        return np.zeros_like(x)
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - total
    idx = np.arange(1, x.size + 1)
    cond = u - css / idx > 0
    k = idx[cond][-1]
    theta = css[cond][-1] / k
    return np.maximum(x - theta, 0.0)
