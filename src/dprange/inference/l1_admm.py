"""Maximum-likelihood (L1) and non-negative post-processing by ADMM.

Lee, Wang, Kifer, "Maximum Likelihood Postprocessing for Differential Privacy under
Consistency Constraints", KDD 2015.  For measurements y = A x + Laplace noise of
scale b_i, the maximum-likelihood estimate minimises sum_i |A_i x - y_i| / b_i; the paper
adds a small quadratic term (elastic net) so that the solution is unique:

    minimise  alpha ||r||_1 + (1 - alpha) ||r||_2^2,   r = D (A x - y),  D = diag(1 / b_i),
    subject to x >= 0 and C x = d  (a public total, known marginals).

alpha = 1 is pure L1 (maximum likelihood); alpha = 0 is non-negative (weighted) least
squares.  ADMM on the splitting (x, r, w = x >= 0), scaled duals u (for r) and s (for w):

    x <- argmin_{C x = d} ||D A x - (D y + r - u)||^2 + c^2 ||x - (w - s / c)||^2   (least squares)
    r <- soft(rho v, alpha) / (rho + 2 (1 - alpha)),   v = D (A x - y) + u   (closed-form prox)
    w <- max(x + s / c, 0)
    u <- u + D (A x - y) - r;   s <- s + c (x - w)

The split x = w is scaled by c (c^2 = the mean diagonal of A^T D^2 A, then balanced by
residuals on that split only), so that deep trees with per-level budgets (row weights
~eps/h) are not slowed by an unbalanced split (docs/inference.md).  Stopping rule (Boyd et al. 2011, section 3.3, as in
the paper): primal residual ||(D(Ax - y) - r, c(x - w))|| <= eps_abs sqrt(p + n) +
eps_rel max(||(DAx, cx)||, ||(r, cw)||, ||Dy||) and dual residual
rho ||A^T D (r - r_old) + c^2 (w - w_old)|| <= eps_abs sqrt(n) + eps_rel rho ||A^T D u + c s||.
rho defaults to the paper's 2.0 (section 5).  Over-relaxation (``relax``) is used with the
tree x-step (1.6) and off otherwise, where it slows small explicit LP-like (alpha = 1) problems
(docs/inference.md, "Figures by module").

The x-step is the paper's "projection": a least-squares problem.  For trees it is exactly
tree GLS (Algorithm 3) — :func:`tree_x_update` does it in O(nodes) with
:func:`dprange.inference.tree.tree_gls`; for explicit matrices, a cached Cholesky / KKT /
sparse LU factorisation (Algorithm 2's "LU <- chol"); for implicit operators, conjugate
gradients on (A^T D^2 A + c^2 I) x = ..., warm-started, with the public total handled by
projection (:func:`generic_x_update`).  Any other x-step can be plugged in (``x_update``).

Cost per iteration on trees: the x-step reuses the variance half of tree
GLS for each split value and hands back A x from its consistent node estimates
(:mod:`dprange.inference.tree_admm`), the updates run in place (about 25 passes over the
p + n numbers), and from :data:`CHECK_EVERY_MIN_N` unknowns the stopping rule (two adjoint
products) is tested every :data:`CHECK_EVERY` iterations and at ``maxiter``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, aslinearoperator, cg

from ..errors import ParameterError
from ..progress import tracked
from .tree import tree_gls
from .tree_admm import TreeLeastSquares, TreeStack

#: ADMM shows a progress bar (on a terminal, after a couple of seconds) from this many unknowns.
PROGRESS_MIN_N = 2**16


#: From this many unknowns ADMM tests its stopping rule every :data:`CHECK_EVERY` iterations
#: (the test costs two adjoint products, a large part of an iteration); below, every iteration.
CHECK_EVERY_MIN_N = 2**14


CHECK_EVERY = 10


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


def _cached(build, size: int = 2):
    """Memoise ``build(split)`` for the last ``size`` split weights (ADMM changes the split a
    few times while balancing; each value needs its own factorisation)."""
    cache: dict = {}

    def get(split):
        if split not in cache:
            if len(cache) >= size:
                cache.pop(next(iter(cache)))
            cache[split] = build(split)
        return cache[split]

    return get


def generic_x_update(A, weights, *, total=None, equality=None, dense_limit: int = 2000):
    """The x-step ``solve(target_rows, target_x, x_prev, split)`` for any operator:

    argmin ||D A x - target_rows||^2 + split ||x - target_x||^2  over {C x = d} or {sum x = total}.

    * explicit (dense or sparse) A with n <= ``dense_limit``, or any equality constraints
      (n <= 5000): a cached dense Cholesky of A^T D^2 A + split I, or LU of its KKT system
      with C; O(n^3) once per split value, O(n^2) per call;
    * explicit sparse A, larger, no constraints: a cached sparse LU (``splu``);
    * otherwise (LinearOperator, or a large explicit A with a public total): conjugate
      gradients on the normal equations restricted to {sum x = 0}, warm-started at the
      previous x, relative tolerance 1e-10.
    """
    op = aslinearoperator(A)
    n = op.shape[1]
    w2 = weights**2
    explicit = isinstance(A, np.ndarray) or sp.issparse(A)
    if equality is None and total is not None and explicit and n <= dense_limit:
        equality = (np.ones((1, n)), np.array([float(total)]))
    if equality is not None or (explicit and n <= dense_limit):
        if n > 5000:
            raise ParameterError("general equality constraints are solved densely; use n <= 5000")
        dense_a = A.toarray() if sp.issparse(A) else op.matmat(np.eye(n)) if not isinstance(A, np.ndarray) else A
        gram = dense_a.T @ (w2[:, None] * dense_a)
        if equality is None:
            factor = _cached(lambda split: sla.cho_factor(gram + split * np.eye(n)))

            def solve(target_rows, target_x, x_prev, split=1.0):
                return sla.cho_solve(factor(split), op.rmatvec(weights * target_rows) + split * target_x)

            return solve
        C = np.atleast_2d(np.asarray(equality[0], dtype=float))
        d = np.atleast_1d(np.asarray(equality[1], dtype=float))
        if C.shape[1] != n or C.shape[0] != d.size:
            raise ParameterError(f"equality (C, d) must have C of shape (k, {n}) and d of length k")
        k = C.shape[0]
        factor = _cached(
            lambda split: sla.lu_factor(np.block([[gram + split * np.eye(n), C.T], [C, np.zeros((k, k))]]))
        )

        def solve(target_rows, target_x, x_prev, split=1.0):
            rhs = op.rmatvec(weights * target_rows) + split * target_x
            return sla.lu_solve(factor(split), np.concatenate([rhs, d]))[:n]

        return solve
    if sp.issparse(A) and total is None:
        from scipy.sparse.linalg import splu  # noqa: PLC0415

        A_csr = sp.csr_matrix(A)
        gram = (A_csr.T @ sp.diags(w2) @ A_csr).tocsc()
        factor = _cached(lambda split: splu((gram + split * sp.identity(n, format="csc")).tocsc()))

        def solve(target_rows, target_x, x_prev, split=1.0):
            return factor(split).solve(op.rmatvec(weights * target_rows) + split * target_x)

        return solve
    project = (lambda v: v - v.mean()) if total is not None else (lambda v: v)
    base = np.full(n, float(total) / n) if total is not None else np.zeros(n)
    a_base = op.rmatvec(w2 * op.matvec(base))

    def solve_by_cg(target_rows, target_x, x_prev, split=1.0):
        normal = LinearOperator(
            (n, n), dtype=float, matvec=lambda v: project(op.rmatvec(w2 * op.matvec(project(v))) + split * project(v))
        )
        rhs = op.rmatvec(weights * target_rows) + split * target_x - a_base - split * base
        delta, _ = cg(normal, project(rhs), x0=project(x_prev - base), rtol=1e-10, atol=0.0, maxiter=10 * n + 100)
        return base + project(delta)

    return solve_by_cg


def tree_x_update(strategy, level_weights, *, total=None):
    """The x-step on a tree: exact tree least squares (Lee et al. Algorithm 3), O(nodes).

    ``level_weights[d]`` is 1/b for the nodes of depth d (None if unmeasured).  Rows of
    depth d become measurements target/weight with variance 1/weight^2, and the identity
    rows of the w-split become a second measurement of the leaves with variance 1/split.
    The variance half of tree GLS is computed once per split value
    (:class:`~dprange.inference.tree_admm.TreeLeastSquares`); a tree of one node runs
    :func:`~dprange.inference.tree.tree_gls` itself.
    """
    if strategy.depth > 0:
        return TreeLeastSquares(strategy, level_weights, total=total)
    depths = [d for d in range(strategy.depth + 1) if level_weights[d] is not None]
    sizes = [strategy.level_sizes[d] for d in depths]
    splits = np.cumsum(sizes)[:-1]
    leaf = strategy.depth

    def solve(target_rows, target_x, x_prev, split=1.0):
        values: list = [None] * (strategy.depth + 1)
        variances: list = [None] * (strategy.depth + 1)
        for d, part in zip(depths, np.split(target_rows, splits)):
            values[d] = part / level_weights[d]
            variances[d] = 1.0 / level_weights[d] ** 2
        if values[leaf] is None:
            values[leaf], variances[leaf] = target_x, 1.0 / split
        else:
            precision = 1.0 / variances[leaf] + split
            values[leaf] = (values[leaf] / variances[leaf] + split * target_x) / precision
            variances[leaf] = 1.0 / precision
        return tree_gls(strategy, values, variances, total=total).leaves

    # over-relaxation preferred with this x-step (read by :func:`admm` when relax=None):
    # 1.6 saves iterations on trees (docs/inference.md, "Figures by module")
    solve.relax = 1.6  # type: ignore[attr-defined]  # a function attribute that admm reads
    return solve


def split_weight(A, weights, *, probes: int = 8) -> float:
    """Automatic c^2 for the x >= 0 split: the mean diagonal of A^T D^2 A, ||DA||_F^2 / n.

    Balancing the two splits' curvature matters: with per-level budgets on deep trees the
    row weights 1/b are ~eps/h while the non-negativity split has weight 1, and ADMM with an
    unbalanced split crawls (docs/inference.md, "Figures by module").  Exact for
    explicit matrices; for a LinearOperator a Hutchinson estimate with ``probes`` fixed
    Rademacher vectors (a step-size heuristic: it never changes the optimum).
    """
    op = aslinearoperator(A)
    n = op.shape[1]
    if isinstance(A, np.ndarray) or sp.issparse(A):
        column_norms = np.asarray((sp.csr_matrix(A).multiply(weights[:, None])).power(2).sum(axis=0)).ravel()
        return float(max(column_norms.mean(), 1e-12))
    z = np.random.default_rng(0).choice([-1.0, 1.0], size=(n, probes))
    return float(max(np.mean(np.sum((weights[:, None] * op.matmat(z)) ** 2, axis=0)) / n, 1e-12))


def admm(
    A,
    y,
    weights=None,
    *,
    alpha: float = 0.9,
    nonnegative: bool = True,
    total=None,
    equality=None,
    x_update=None,
    rho: float = 2.0,
    split="auto",
    relax: float | None = None,
    adapt: int = 10,
    tol: float = 1e-6,
    maxiter: int = 5000,
    x0=None,
    check_every: int | None = None,
) -> ADMMResult:
    """Solve the constrained elastic-net / L1 / NNLS problem of the module doc by ADMM.

    Parameters
    ----------
    A : LinearOperator, sparse or dense matrix (p x n); y : measurements (p,);
    weights : per-row 1/b_i (default 1); alpha in [0, 1];
    nonnegative : impose x >= 0; total : impose sum x = total;
    equality : (C, d) for general constraints C x = d (small explicit problems);
    x_update : a custom x-step ``solve(target_rows, target_x, x_prev, split)`` returning
        argmin ||D A x - target_rows||^2 + split ||x - target_x||^2 over the equality
        constraints (e.g. :func:`tree_x_update`);
    rho : ADMM penalty; split : c^2, the weight of the x = w split ("auto": :func:`split_weight`);
    relax : over-relaxation in [1, 2) (Boyd et al. 2011, section 3.4.3; 1 = plain ADMM);
        None: the x-step's ``relax`` attribute if it has one (tree x-steps: 1.6), else 1;
    adapt : every ``adapt`` iterations (0 = never), during the first half of ``maxiter`` and
        at most 30 times, balance the x = w split: double c^2 when its primal residual
        exceeds 10 times its dual residual, halve it in the opposite case (residual balancing,
        Boyd et al. 2011, section 3.4.1, applied to that split only; the scaled dual is
        rescaled so the multiplier is unchanged);
    tol : eps_abs = eps_rel of the stopping rule; maxiter : iteration cap; x0 : start;
    check_every : test the stopping rule every k iterations and at ``maxiter`` (it costs two
        adjoint products and a dozen passes); default :data:`CHECK_EVERY` from
        :data:`CHECK_EVERY_MIN_N` unknowns, else every iteration.  The residual histories
        hold the tested iterations.

    Cost per iteration: one x-step (tree: O(nodes); CG: a few operator products; KKT: O(n^2))
    plus two operator products.  The objective is convex, so ADMM converges to its minimum
    for any rho > 0 (Boyd et al. 2011, section 3.2); ``converged`` says whether the stopping
    rule was met within ``maxiter``.
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
    if not rho > 0:
        raise ParameterError(f"rho must be positive, got {rho}")
    if relax is None:
        relax = float(getattr(x_update, "relax", 1.0))
    if not 1.0 <= relax < 2.0:
        raise ParameterError(f"relax must be in [1, 2), got {relax}")
    if total is not None and equality is not None:
        raise ParameterError("give either total or equality, not both")
    c2 = split_weight(A, weights) if split == "auto" else float(split)
    if not c2 > 0:
        raise ParameterError(f"split must be positive or 'auto', got {split}")
    c = np.sqrt(c2)
    solve = x_update or generic_x_update(op, weights, total=total, equality=equality)
    x = np.zeros(n) if x0 is None else np.asarray(x0, dtype=float).copy()
    if total is not None and x0 is None:
        x[:] = float(total) / n
    scale_y = weights * y
    y_norm = _norm(scale_y)
    r = weights * op.matvec(x) - scale_y
    w = np.maximum(x, 0.0) if nonnegative else x.copy()
    u = np.zeros(p)  # scaled dual of D A x - r = D y
    s_c = np.zeros(n)  # s / c, s the scaled dual of c (x - w) = 0
    every = check_every if check_every is not None else (CHECK_EVERY if n >= CHECK_EVERY_MIN_N else 1)
    # A consistent tree x-step knows A x already: its node estimates (Lee et al. 2015, Algorithm 3).
    rows_of_x = getattr(solve, "rows_of_last", None) if _same_tree(A, solve) else None
    cut = alpha / rho  # r = soft(rho q, alpha) / (rho + 2 (1 - alpha)) = soft(q, alpha / rho) rho shrink
    scale_r = rho / (rho + 2.0 * (1.0 - alpha))
    history_p, history_d = [], []
    converged = False
    it = changes = 0
    for it in tracked(range(1, maxiter + 1), "ADMM", large=n >= PROGRESS_MIN_N):
        # cost: one x-step and about 25 passes over the p + n numbers (no allocation beyond them)
        target_rows = scale_y + r
        target_rows -= u
        x = solve(target_rows, w - s_c, x, c2)
        residual = rows_of_x() if rows_of_x is not None else op.matvec(x)
        residual *= weights
        residual -= scale_y  # D (A x - y)
        check = it % every == 0 or it == maxiter
        balance = adapt and it % adapt == 0 and it <= maxiter // 2 and changes < 30
        if relax != 1.0:
            q = residual * relax if check else np.multiply(residual, relax, out=residual)
            q += (1.0 - relax) * r
            hat_x = relax * x
            hat_x += (1.0 - relax) * w
        else:
            q = residual.copy() if check else residual
            hat_x = x
        q += u  # hat_res + u
        r_old, w_old = r, w
        r = np.clip(q, -cut, cut)
        np.subtract(q, r, out=r)  # soft threshold: sign(q) max(|q| - cut, 0)
        r *= scale_r
        u = np.subtract(q, r, out=q)  # u + hat_res - r
        w = hat_x + s_c
        s_c = w.copy()
        if nonnegative:
            np.maximum(w, 0.0, out=w)
        s_c -= w  # s / c + hat_x - w
        if not (check or balance):
            continue
        if check:
            # Boyd et al. (2011) section 3.3 for the constraint [DA; cI] x - [r; c w] = [Dy; 0]
            primal = np.sqrt(_sq(residual - r) + c2 * _sq(x - w))
            dual = rho * _norm(op.rmatvec(weights * (r - r_old)) + c2 * (w - w_old))
            history_p.append(float(primal))
            history_d.append(float(dual))
            ax_norm = np.sqrt(_sq(residual + scale_y) + c2 * _sq(x))
            eps_primal = tol * np.sqrt(p + n) + tol * max(ax_norm, np.sqrt(_sq(r) + c2 * _sq(w)), y_norm)
            eps_dual = tol * np.sqrt(n) + tol * rho * _norm(op.rmatvec(weights * u) + c2 * s_c)
            if primal <= eps_primal and dual <= eps_dual:
                converged = True
                break
        if balance:
            split_primal = c * _norm(x - w)
            split_dual = rho * c2 * _norm(w - w_old)
            factor = 2.0 if split_primal > 10 * split_dual else 0.5 if split_dual > 10 * split_primal else 1.0
            if factor != 1.0:
                c2 *= factor
                c_new = np.sqrt(c2)
                s_c *= (c / c_new) ** 2  # the multiplier c s stays: s -> s c / c_new
                c = c_new
                changes += 1
    solution = w if nonnegative else x
    if total is not None and nonnegative:
        solution = _project_capped_simplex(solution, float(total))
    return ADMMResult(solution, it, converged, objective(op, y, weights, solution, alpha), history_p, history_d)


def _same_tree(A, solve) -> bool:
    """Whether ``A`` is the stacked tree whose least squares ``solve`` runs (same depths)."""
    return (
        isinstance(A, TreeStack)
        and isinstance(solve, TreeLeastSquares)
        and A.strategy is solve.strategy
        and list(A.depths) == list(solve.depths)
    )


def _sq(v: np.ndarray) -> float:
    """Sum of squares (see :func:`_norm`)."""
    return float(np.sum(v * v))


def _norm(v: np.ndarray) -> float:
    """Euclidean norm without BLAS, whose thread pool costs more than it saves on these vectors
    on a busy machine (docs/inference.md, "Figures by module")."""
    return float(np.sqrt(np.sum(v * v)))


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
