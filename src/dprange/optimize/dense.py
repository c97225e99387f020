"""The dense L1 template: any non-negative strategy with columns of L1 norm 1, optimised by
gradient on the exact loss (epsilon-DP, n <= DENSE_MAX_N).

The p-Identity template of HDMM (McKenna, Miklau, Hay and Machanavajjhala, VLDB 2018) fixes
the strategy's shape to [I; B] D.  This template drops the shape: A = Theta D with Theta >= 0
(k x n, any k >= n) and D = diag(1 / c), c_j = sum_i Theta_ij, so every column of A has L1
norm 1, the L1 sensitivity under add/remove.  With X = Theta^T Theta, Y = X^-1, C = diag(c)
and G = W^T W, (A^T A)^-1 = C Y C and the matrix mechanism's loss (Li, Hay, Rastogi, Miklau
and McGregor, PODS 2010) is

    L(Theta) = trace(G (A^T A)^-1) = sum_jk G_jk c_j c_k Y_jk = sum((C G C) o Y).

Its gradient has two parts: through X (dX = dTheta^T Theta + Theta^T dTheta, dY = -Y dX Y),
-2 Theta Y (C G C) Y; and through c, dL / dc_j = 2 [(G o Y) c]_j with dc_j / dTheta_ij = 1
(|Theta_ij|'s sign for signed entries).  One Cholesky factor of X and three n x n products:
O(k n^2 + n^3) per step.  L-BFGS-B on Theta >= 0, from the p-Identity optimum ([I; B]) and
from seeded uniform starts (k = 2n); the best end point by exact loss is kept.  The signed
template (``dense-signed``) continues from it with Theta = P - N, P, N >= 0 and column norms
1^T (P + N) (:func:`split_loss`: smooth, and equal to |Theta|'s at an optimum).

The p-Identity optimum is nearly a first-order stationary point of this template, so the
template gains little over it (what it reaches: docs/optimized.md, "The dense L1 template").
The SVD bound is an L2 bound (Li and Miklau, ICDT 2013): a column of L1 norm 1 has L2 norm 1
only when it has one non-zero entry, so the bound ignores what pure epsilon-DP charges for
spreading a column over several rows; no constant-factor L1 bound for the matrix mechanism is
known to report beside it (the pure-DP lower bounds of Hardt and Talwar, STOC 2010, and
Nikolov, Talwar and Zhang, STOC 2013, hold up to constant or logarithmic factors).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from dprange._lazy import lazy_module

from ..progress import progress_bar

optimize = lazy_module("scipy.optimize")


#: Largest domain of the dense template: O(n^3) per step.
DENSE_MAX_N = 512


def dense_columns(theta: np.ndarray, signed: bool = False) -> np.ndarray:
    """c_j, the L1 norm of column j of Theta (the sum, for Theta >= 0)."""
    return np.abs(theta).sum(axis=0) if signed else theta.sum(axis=0)


def dense_matrix(theta: np.ndarray, signed: bool = False) -> np.ndarray:
    """The strategy A = Theta D: every column of L1 norm 1."""
    return theta / dense_columns(theta, signed)


def dense_loss(theta: np.ndarray, gram: np.ndarray, signed: bool = False) -> tuple[float, np.ndarray]:
    """trace(G (A^T A)^-1) for A = Theta D (module doc) and its gradient in Theta (k x n).

    ``signed``: Theta of any sign, c = column sums of |Theta| (the gradient is that of
    |Theta_ij| away from 0, its sign).  Raises numpy.linalg.LinAlgError when Theta^T Theta
    is singular (a strategy that does not determine x)."""
    n = theta.shape[1]
    c = dense_columns(theta, signed)
    factor = linalg.cho_factor(theta.T @ theta)  # X = Theta^T Theta          O(k n^2 + n^3)
    y = linalg.cho_solve(factor, np.eye(n))  # Y = X^-1                         O(n^3)
    weighted = gram * np.outer(c, c)  # G' = C G C
    loss = float(np.sum(weighted * y))
    through_x = -2.0 * theta @ (y @ weighted @ y)  # -2 Theta Y G' Y            O(n^3 + k n^2)
    through_c = 2.0 * ((gram * y) @ c)  # dL / dc_j = 2 [(G o Y) c]_j
    direction = np.sign(theta) if signed else 1.0
    return loss, through_x + direction * through_c[None, :]


def split_loss(pn: np.ndarray, gram: np.ndarray) -> tuple[float, np.ndarray]:
    """The signed template's loss in smooth form: Theta = P - N with P, N >= 0 stacked as
    ``pn`` (2k x n) and column norms c = 1^T (P + N), which equal those of |Theta| at an
    optimum (a positive min(P, N) only raises c).  Gradient: (g_X + g_c, -g_X + g_c), g_X and
    g_c the two parts of :func:`dense_loss`'s."""
    k = pn.shape[0] // 2
    positive, negative = pn[:k], pn[k:]
    theta = positive - negative
    n = theta.shape[1]
    c = (positive + negative).sum(axis=0)
    factor = linalg.cho_factor(theta.T @ theta)  #                              O(k n^2 + n^3)
    y = linalg.cho_solve(factor, np.eye(n))  #                                   O(n^3)
    weighted = gram * np.outer(c, c)
    loss = float(np.sum(weighted * y))
    through_x = -2.0 * theta @ (y @ weighted @ y)  #                             O(n^3 + k n^2)
    through_c = 2.0 * ((gram * y) @ c)[None, :]
    return loss, np.vstack([through_x + through_c, through_c - through_x])


def optimize_dense(
    gram: np.ndarray, start: np.ndarray, *, maxiter: int = 500, signed: bool = False, bar=None
) -> tuple[np.ndarray, float]:
    """L-BFGS-B on Theta >= 0 (``signed``: on P, N >= 0 with Theta = P - N, :func:`split_loss`)
    from ``start``: the end point and its loss, or the start when no step lowered it.  The
    loss is divided by trace(G) (the identity strategy's) for scale; a step to a singular
    Theta^T Theta counts as an infinite loss (the line search backs off)."""
    k, n = start.shape
    scale = float(np.trace(gram)) or 1.0
    x0 = np.vstack([np.maximum(start, 0.0), np.maximum(-start, 0.0)]) if signed else start
    rows = x0.shape[0]

    def objective(flat):
        try:
            loss, grad = split_loss(flat.reshape(rows, n), gram) if signed else dense_loss(flat.reshape(k, n), gram)
        except np.linalg.LinAlgError:
            return np.inf, np.zeros(rows * n)
        return loss / scale, grad.ravel() / scale

    start_loss = objective(x0.ravel())[0] * scale
    result = optimize.minimize(
        objective,
        x0.ravel(),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * (rows * n),
        options={"maxiter": maxiter, "gtol": 1e-12, "ftol": 1e-13},
        callback=None if bar is None else (lambda _: bar.update(1)),
    )
    loss = objective(result.x)[0] * scale  # the end point's own loss (result.fun may be a trial's)
    if not loss < start_loss:
        return start, start_loss
    end = result.x.reshape(rows, n)
    return (end[:k] - end[k:] if signed else end), loss


def optimize_signed(gram: np.ndarray, start: np.ndarray, *, maxiter: int = 500) -> tuple[np.ndarray, float]:
    """The signed template from ``start`` (the non-negative optimum): (A with unit L1 columns,
    trace(G (A^T A)^-1)); the start itself when no step lowers the loss."""
    with progress_bar("optimising signed strategy", total=maxiter) as bar:
        theta, loss = optimize_dense(np.asarray(gram, dtype=float), start, maxiter=maxiter, signed=True, bar=bar)
    theta = theta[np.abs(theta).max(axis=1) > 0]  # rows the optimiser emptied measure nothing
    return dense_matrix(theta, signed=True), loss


def optimize_dense_template(
    gram: np.ndarray,
    p_identity_theta: np.ndarray,
    *,
    restarts: int = 1,
    seed: int = 0,
    maxiter: int = 500,
    signed: bool = False,
) -> tuple[np.ndarray, float, str]:
    """The best dense strategy from the p-Identity optimum [I; B] (``p_identity_theta`` = B)
    and ``restarts`` uniform starts on [0, 1] (2n x n, a public seed: the strategy is
    public): (A with unit L1 columns, trace(G (A^T A)^-1), the winning start's name).
    ``signed``: then entries of either sign, from the best non-negative end point."""
    gram = np.asarray(gram, dtype=float)
    n = gram.shape[0]
    rng = np.random.default_rng(seed)
    starts = [("p-identity", np.vstack([np.eye(n), np.atleast_2d(p_identity_theta)]))]
    starts += [(f"uniform-{r}", rng.uniform(0.0, 1.0, (2 * n, n))) for r in range(restarts)]
    best_theta, best_loss, best_name = starts[0][1], np.inf, starts[0][0]
    with progress_bar("optimising dense strategy", total=(len(starts) + signed) * maxiter) as bar:
        for name, start in starts:
            theta, loss = optimize_dense(gram, start, maxiter=maxiter, bar=bar)
            if loss < best_loss:
                best_theta, best_loss, best_name = theta, loss, name
        if signed:
            theta, loss = optimize_dense(gram, best_theta, maxiter=maxiter, signed=True, bar=bar)
            if loss < best_loss:
                best_theta, best_loss, best_name = theta, loss, f"{best_name}+signed"
    theta, loss, name = best_theta, best_loss, best_name
    theta = theta[np.abs(theta).max(axis=1) > 0]  # rows the optimiser emptied measure nothing
    return dense_matrix(theta, signed), loss, name
