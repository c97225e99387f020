"""Strategies optimised for a workload: the p-Identity template (epsilon-DP), its L2
analogue, the eigen-design and the exact L2 optimum ((epsilon, delta)-DP).

The matrix mechanism's error on a workload W with strategy A is (noise variance)
trace(W^T W (A^T A)^-1) (Li, Hay, Rastogi, Miklau and McGregor, PODS 2010; seed 003,
"optimized observations").  It depends on W only through its Gram matrix G = W^T W, which is
public, so a strategy can be optimised for it at no privacy cost.

* ``p-identity`` (McKenna, Miklau, Hay and Machanavajjhala, "Optimizing error of
  high-dimensional statistical queries under differential privacy", VLDB 2018, the
  p-Identity template of HDMM): A = [I; B] D with B >= 0 (p x n) and D = diag(1 / (1 + 1^T B)),
  so every column of A has L1 norm 1 (the L1 sensitivity under add/remove).  With
  s = 1 + 1^T B (the column scales), X = I + B^T B and M = I_p + B B^T, the loss is

      L(B) = trace(G (A^T A)^-1) = trace(S G S X^-1),  S = diag(s),

  and by the Woodbury identity X^-1 = I - B^T M^-1 B, so L costs one p x n times n x n
  product, O(p n^2), and a p x p inverse; :func:`p_identity_loss` gives the gradient
  analytically (module tests check it against finite differences).  L-BFGS-B with bounds
  B >= 0 from a banded start (:func:`banded_start`: overlapping bands, the shape optima take),
  further starts uniform random (a public seed: the strategy is public).  Under replace
  neighbours the total is public and the least squares use it, so the loss is
  trace(G X^-1) - u^T G u / 1^T u with u = X^-1 1 (``known_total``: O(p n) more by the same
  Woodbury algebra); the replace sensitivity of the unit non-negative columns is 2 for every
  pair of bins that share no row, so it is not in the loss (gains: docs/optimized.md,
  "Replace neighbours under epsilon-DP").
* ``p-identity-l2``: the same template with columns of L2 norm 1 (Gaussian noise):
  s_j = sqrt(1 + ||B_j||^2), B of any sign, the same loss and Woodbury algebra
  (ds_j / dB_rj = B_rj / s_j); under replace B >= 0 and the loss with the public total, as
  above (every pair of columns then moves the answers by at most sqrt(2)).
* ``dense`` (:mod:`dprange.optimize.dense`, epsilon-DP, n <= 512): any non-negative strategy
  with columns of L1 norm 1, from the p-Identity optimum; ``auto`` takes it where its trace is
  1% lower (small domains, or cached).  ``dense-signed``: entries of either sign (not in auto).
* ``eigen`` (Li and Miklau, "An adaptive mechanism for accurate query answering under
  differential privacy", PVLDB 2012): rows = eigenvectors q_i of G weighted by sqrt(u_i),
  where u minimises sum_i sigma_i / u_i subject to every column having L2 norm at most 1,
  sum_i u_i q_ij^2 <= 1.  The program is convex; :func:`eigen_design` solves its dual,
  max over mu >= 0 of 2 sum_i sqrt(sigma_i (C mu)_i) - sum_j mu_j with C_ij = q_ij^2, whose
  solution gives u_i = sqrt(sigma_i / (C mu)_i).  The SVD bound (seed 003) is this program
  with the column constraints replaced by their average, so the eigen-design meets it when
  the relaxed optimum has equal column norms.
* ``l2-optimal`` (:mod:`dprange.optimize.l2_optimum`; Yuan, Yang, Zhang and Hao, KDD 2016): the exact
  optimum over every strategy with columns of L2 norm at most 1, solved through its dual over
  one weight per column (an n x n eigendecomposition a step, n <= 4096), with a certified
  lower bound beside it; it dominates the eigen-design and the L2 template, restrictions of
  its program (how far each lies above the SVD bound: docs/optimized.md, "Measurements").
  ``auto`` takes it when delta > 0 under add/remove (without building the L2 template, a point
  of its program: its trace is never lower).  Under replace neighbours up
  to 256 bins it solves the replace program instead (pairwise sensitivity, public total:
  :func:`dprange.optimize.l2_optimum.l2_replace_optimum`), which auto takes as it is.

:class:`Optimized` measures the optimised strategy like :class:`~dprange.mechanisms.matrix.Matrix`
(quantised to integers, calibrated on the measured matrix, exact GLS and error bars).  The
eigen-design is dense (saved as a dense matrix, dense covariance); p-Identity strategies keep
their shape [diag(d); C] (:mod:`dprange.inference.p_identity`: GLS and O(p) range variances
by Woodbury, no n x n matrix).  Optimised strategies are cached on disk (``DPRANGE_CACHE_DIR``, else
``$XDG_CACHE_HOME/dprange``, else ``~/.cache/dprange``): the key is the workload (its name,
or a hash of its Gram matrix), n, the template and the optimiser's settings.  The strategy
does not depend on epsilon or delta (the error scales by the same factor for every
strategy), only on the norm the template targets.  What is measured does: the optimised
strategy is quantised (K about 2^16, noise per unit of sensitivity about the continuous one)
where the identity is measured at K = 1 with the discrete noise of sensitivity 1 (discrete
Laplace: 1.84 against 2 at epsilon 1), so :class:`Optimized` measures the identity wherever its
exact error as released is lower (:meth:`Optimized.released_strategy`).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

from dprange._lazy import lazy_module

from .._validation import check_positive_int
from ..cholesky import cholesky_inverse
from ..errors import ParameterError
from ..inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from ..operators.base import definition_sensitivity_power
from ..progress import progress_bar
from ..strategies.matrix import QUANTISATION_TOLERANCE, MatrixStrategy, OneBlockStrategy, quantisation_factor
from ..workloads.ranges import AllRange, Prefix, Workload

optimize = lazy_module("scipy.optimize")


TEMPLATES = ("auto", "p-identity", "p-identity-l2", "eigen", "l2-optimal", "dense", "dense-signed")


#: The dense L1 templates (:mod:`dprange.optimize.dense`) and whether their entries take both signs.
DENSE_TEMPLATES = {"dense": False, "dense-signed": True}


#: The column norm each p-Identity template keeps at 1.
P_IDENTITY_NORMS = {"p-identity": 1, "p-identity-l2": 2}


#: The column norm of every strategy kept in the p-Identity shape: the templates above, and the
#: L2 optimum written in that shape for the Kronecker product (:func:`dprange.optimize.l2_optimum.as_p_identity_l2`).
P_IDENTITY_FORM_NORMS = {**P_IDENTITY_NORMS, "l2-optimal": 2}


class Gram:
    """A workload's Gram matrix G = W^T W as the p-Identity loss uses it: its diagonal and
    products X G for p x n matrices X.  All ranges and prefixes have semiseparable Gram
    matrices, (min(i, j) + 1)(n - max(i, j)) and n - max(i, j), so X G costs O(p n) by
    cumulative sums; any other workload uses its dense Gram matrix, O(p n^2)."""

    def __init__(self, workload_or_matrix):
        self.kind = "dense"
        self.matrix: np.ndarray | None = None
        if type(workload_or_matrix) in (AllRange, Prefix):
            self.kind = workload_or_matrix.name
            self.n = workload_or_matrix.n
        else:
            matrix = workload_or_matrix.gram() if isinstance(workload_or_matrix, Workload) else workload_or_matrix
            self.matrix = np.asarray(matrix, dtype=float)
            self.n = self.matrix.shape[0]
        i = np.arange(self.n, dtype=float)
        if self.matrix is not None:
            self.diag = np.diag(self.matrix).copy()
        elif self.kind == "all-range":
            self.diag = (i + 1.0) * (self.n - i)
        else:
            self.diag = self.n - i

    def dense(self) -> np.ndarray:
        if self.matrix is None:
            i = np.arange(self.n)
            if self.kind == "all-range":
                return (np.minimum.outer(i, i) + 1.0) * (self.n - np.maximum.outer(i, i))
            return (self.n - np.maximum.outer(i, i)).astype(float)
        return self.matrix

    def left(self, X: np.ndarray) -> np.ndarray:
        """X G for X (p x n)."""
        if self.matrix is not None:
            return X @ self.matrix
        n = self.n
        i = np.arange(n, dtype=float)
        # G_ij = f(min(i, j)) g(max(i, j)): (X G)_j = g(j) sum_{i<=j} f(i) X_i + f(j) sum_{i>j} g(i) X_i.
        f = i + 1.0 if self.kind == "all-range" else np.ones(n)
        g = n - i
        upto = np.cumsum(X * f, axis=1)
        weighted = X * g
        after = weighted.sum(axis=1, keepdims=True) - np.cumsum(weighted, axis=1)
        return g * upto + f * after


def column_scales(theta: np.ndarray, norm: int = 1) -> np.ndarray:
    """s_j, the ``norm`` of column j of [I; B]: 1 + sum_r B_rj (L1, B >= 0) or
    sqrt(1 + sum_r B_rj^2) (L2); D = diag(1 / s) makes every column of A = [I; B] D a unit vector."""
    if norm == 1:
        return 1.0 + theta.sum(axis=0)
    return np.sqrt(1.0 + (theta**2).sum(axis=0))


def p_identity_loss(theta: np.ndarray, gram, norm: int = 1, *, known_total: bool = False) -> tuple[float, np.ndarray]:
    """trace(G (A^T A)^-1) for A = [I; B] D (module doc) and its gradient in B (p x n).

    ``norm`` 1: columns of L1 norm 1 (Laplace noise, B >= 0); 2: columns of L2 norm 1 (the
    L2 analogue, for Gaussian noise; B of any sign).  ``gram``: a :class:`Gram` or the matrix G.
    With Y = M^-1 B (M = I + B B^T, inverted once: p x p) and Z = Y S G S = M^-1 B G'
    (G' = S G S), the loss is sum_j G_jj s_j^2 - sum(Z o B), and M^-1 H = Z B^T
    (H = B G' B^T); one product Y S G (O(p n^2), or O(p n) for all ranges and prefixes) and
    four p x p by p x n products: O(p^2 n) in all.

    ``known_total``: the loss of replace neighbours, whose least squares use the public total:
    trace(G X^-1) - u^T G u / 1^T u with u = X^-1 1 (:func:`_known_total_correction`, O(p n)
    more)."""
    gram = gram if isinstance(gram, Gram) else Gram(gram)
    p = theta.shape[0]
    s = column_scales(theta, norm)
    m = theta @ theta.T  # B B^T                                     O(p^2 n)
    m[np.diag_indices(p)] += 1.0  # M = I + B B^T: eigenvalues >= 1, the explicit inverse is stable
    m_inv = linalg.cho_solve(linalg.cho_factor(m, overwrite_a=True), np.eye(p))  # O(p^3)
    y = m_inv @ theta  # M^-1 B                                     O(p^2 n)
    z = gram.left(y * s)  # M^-1 B S G                                O(p n) or O(p n^2)
    z *= s  # M^-1 B S G S = M^-1 B G'
    loss = float(gram.diag @ s**2 - np.vdot(z, theta))  # trace(S G S) - trace(M^-1 B G' B^T)
    # d/dB through X = I + B^T B with G' fixed: -2 B X^-1 G' X^-1 = -2 (M^-1 B G' - M^-1 H M^-1 B).
    grad = (z @ theta.T) @ y  # M^-1 H M^-1 B                         O(p^2 n) twice
    grad -= z
    grad *= 2.0
    # d/ds_k = 2 [(G o X^-1) s]_k = 2 (G_kk s_k - sum_r B_rk [M^-1 B S G]_rk);
    # ds_k / dB_rk = 1 (L1) or B_rk / s_k (L2).
    through_s = 2.0 * (gram.diag * s - np.einsum("rk,rk->k", theta, z) / s)
    if known_total:
        correction, through_b, through_scales = _known_total_correction(theta, s, m_inv, gram)
        loss -= correction
        grad -= through_b
        through_s -= through_scales
    if norm == 1:
        grad += through_s
    else:
        grad += theta * (through_s / s)
    return loss, grad


def _known_total_correction(
    theta: np.ndarray, s: np.ndarray, m_inv: np.ndarray, gram: Gram
) -> tuple[float, np.ndarray, np.ndarray]:
    """(c, dc / dB at fixed column scales, dc / ds) for c = t / q, t = u^T G u, q = 1^T u,
    u = X^-1 1 and X = A^T A = D (I + B^T B) D, D = diag(1 / s): what a public total takes off
    trace(G X^-1) (replace neighbours: the constrained least squares' covariance is
    X^-1 - u u^T / q).

    X^-1 = S (I - B^T M^-1 B) S by Woodbury, so u, v = X^-1 G u and G u cost O(p n) (one
    product of a vector by G).  With E = dc / dX = -(v u^T + u v^T) / q + t u u^T / q^2 and
    X = D P^T P D (P = [I; B]): dc / dB = 2 B D E D at fixed D, and
    dc / ds_j = -2 (P^T P D E)_jj / s_j^2 (module tests check both against finite differences)."""

    def inverse_times(vector):  # X^-1 vector = S (I - B^T M^-1 B) S vector       O(p n)
        scaled = s * vector
        return s * (scaled - theta.T @ (m_inv @ (theta @ scaled)))

    u = inverse_times(np.ones(s.size))
    gu = gram.left(u[None, :])[0]  # G u (G symmetric)                          O(n) or O(n^2)
    v = inverse_times(gu)
    q, t = float(u.sum()), float(u @ gu)
    a, b = -1.0 / q, t / q**2  # E = a (v u^T + u v^T) + b u u^T
    u_d, v_d = u / s, v / s  # D u, D v
    bu, bv = theta @ u_d, theta @ v_d
    through_b = 2.0 * (a * (np.outer(bv, u_d) + np.outer(bu, v_d)) + b * np.outer(bu, u_d))
    qu, qv = u_d + theta.T @ bu, v_d + theta.T @ bv  # P^T P D u, P^T P D v
    diagonal = a * (qv * u + qu * v) + b * qu * u  # (P^T P D E)_jj
    return t / q, through_b, -2.0 * diagonal / s**2


def p_identity_matrix(theta: np.ndarray, norm: int = 1) -> np.ndarray:
    """The strategy [I; B] D, every column with ``norm`` 1."""
    n = theta.shape[1]
    return np.vstack([np.eye(n), theta]) / column_scales(theta, norm)


def default_rows(n: int, template: str = "p-identity") -> int:
    """p for the L1 template: n / 16 (HDMM's choice for ranges), at most 128; for the L2
    template n / 4, at most 128 (the rows tried: docs/optimized.md, "Figures by module").  The
    optimisation costs O(p^2 n) per step."""
    return max(1, min(128, n // (16 if template == "p-identity" else 4)))


#: The rows of :func:`banded_start` that span a quarter of the domain each (the rest are bands).
WIDE_ROWS = 4


def tents(n: int, count: int, height: float) -> np.ndarray:
    """``count`` tent rows (count x n) of height ``height``, centred at (k + 1/2) n / count and
    of half-width n / count: neighbours overlap by half, so the column sums equal ``height``
    between the first and the last centre (a partition of unity)."""
    if count == 0:
        return np.zeros((0, n))
    x = np.arange(n) + 0.5
    spacing = n / count
    centres = (np.arange(count) + 0.5) * spacing
    return height * np.clip(1.0 - np.abs(x[None, :] - centres[:, None]) / spacing, 0.0, None)


def banded_start(n: int, p: int) -> np.ndarray:
    """The first start of the L1 optimisation (p x n): p - w tents of half-width n / (p - w)
    and height 0.9, plus w = min(4, p // 4) tents of half-width n / 4 and height 0.5.

    This is the shape the optimiser converges to from random starts (all ranges and prefixes,
    n = 256 and 1024): overlapping bands about 2 n / p wide summing to about 1 per column, a
    few rows spanning a large part of the domain, most entries zero.  Uniform starts put
    column sums near p / 2 and spend their first steps shrinking them; from this start
    L-BFGS-B needs about half the steps (docs/optimized.md, "Figures by module")."""
    wide = min(WIDE_ROWS, p // 4)
    return np.vstack([tents(n, p - wide, 0.9), tents(n, wide, 0.5)])


#: Up to this size p n (n = 256 at the default p) the L1 optimisation runs a uniform start
#: besides the banded one and keeps the better: on very small problems the banded start can
#: stop higher (docs/optimized.md, "Figures by module").
UNIFORM_TOO_MAX_SIZE = 4096


#: An optimised B replaces the identity strategy (B = 0) only if it lowers the loss by more
#: than this fraction (see :func:`optimize_p_identity`).
MIN_RELATIVE_GAIN = 1e-6


#: The largest entry of an optimised L1 B (optimised strategies have entries below 2; the cap
#: keeps every bin's identity weight measurable, see :func:`optimize_p_identity`).
B_MAX = 100.0


#: CPU seconds of one L-BFGS-B step of :func:`optimize_p_identity`, a + b p^2 n + c p n (the loss
#: and gradient, O(p^2 n); L-BFGS-B's own update, O(p n)): fitted to p-identity and
#: p-identity-l2 on prefixes of 256 to 1000 bins on one core of the 2-core development machine
#: (within 30% at 512 to 1000 bins; docs/optimized.md, "Time to optimise").  Only for announcing long work.
STEP_SECONDS = (1e-3, 1.2e-9, 4.7e-8)


def p_identity_seconds(n: int, p: int, *, norm: int = 1, restarts: int = 1) -> float:
    """About how many CPU seconds :func:`optimize_p_identity` takes with its default steps
    (:data:`STEP_SECONDS`, a rough figure: the number of steps L-BFGS-B runs varies)."""
    uniform_too = norm == 1 and p * n <= UNIFORM_TOO_MAX_SIZE
    steps = (restarts + uniform_too) * (200 if norm == 1 else 400)
    a, b, c = STEP_SECONDS
    return steps * (a + b * p * p * n + c * p * n)


def optimize_p_identity(
    gram,
    p: int,
    *,
    restarts: int = 1,
    seed: int = 0,
    maxiter: int | None = None,
    norm: int = 1,
    start: np.ndarray | None = None,
    known_total: bool = False,
) -> tuple[np.ndarray, float]:
    """The B (p x n) with least trace(G (A^T A)^-1) over ``restarts`` starts, and that trace
    (``known_total``: the loss with a public total, :func:`p_identity_loss`, and B >= 0 with
    either norm).

    L-BFGS-B on B >= 0 (L1) or free B (L2); the loss is divided by trace(G) (the identity
    strategy's) for scale.  The first start is ``start`` if given, else for L1
    :func:`banded_start` and at most ``maxiter`` = 200 steps (default); the other starts, and
    every L2 start (default 400 steps), are uniform on [0, 1] (as HDMM's; starts on [0, 0.1]
    can stop at B = 0, the identity strategy, a stationary point: all ranges on 32 bins, p = 2).
    One step costs one loss and gradient, O(p^2 n) (:func:`p_identity_loss`), and L-BFGS-B's
    own update over the p n variables, O(10 p n) with the bounds' breakpoints."""
    gram = gram if isinstance(gram, Gram) else Gram(gram)
    n = gram.n
    scale = float(gram.diag.sum()) or 1.0
    rng = np.random.default_rng(seed)
    if maxiter is None:
        maxiter = 200 if norm == 1 else 400

    def objective(flat):
        loss, grad = p_identity_loss(flat.reshape(p, n), gram, norm, known_total=known_total)
        return loss / scale, grad.ravel() / scale

    uniform_too = start is None and norm == 1 and p * n <= UNIFORM_TOO_MAX_SIZE

    def starts():
        if start is not None:
            yield np.asarray(start, dtype=float).reshape(p * n)
        elif norm == 1:
            yield banded_start(n, p).ravel()
        else:
            yield rng.uniform(0.0, 1.0, p * n)
        for _ in range(restarts - 1 + uniform_too):
            yield rng.uniform(0.0, 1.0, p * n)

    best_theta, best_loss = np.zeros((p, n)), p_identity_loss(np.zeros((p, n)), gram, norm, known_total=known_total)[0]
    # One Bounds object, not p n tuples (converting them cost seconds at n = 4096).
    # B <= B_MAX: on prefixes of 6 bins the optimiser otherwise sent one entry of B to 8.6e5
    # (a row that takes over one bin's count, for a gain of 5e-5), so that the bin's identity
    # weight 1 / s_j rounded to zero when quantised; with the cap every 1 / s_j >= 1 / (1 + p B_MAX).
    # L2: the sign is free, except with a known total (replace neighbours): with B >= 0 every
    # pair of unit columns has a_i^T a_j >= 0, so a replace moves the answers by at most sqrt(2),
    # the value the loss assumes (signed columns could reach 2).
    bounds = optimize.Bounds(0.0, B_MAX) if norm == 1 or known_total else None
    # One BLAS thread: the products of a step are p x n, too small to gain from threads, and
    # OpenBLAS's threads spin on a loaded machine (docs/optimized.md, "Left for later").
    with (
        threadpool_limits(limits=1, user_api="blas"),
        progress_bar("optimising strategy", total=(restarts + uniform_too) * maxiter) as bar,
    ):
        for x0 in starts():
            result = optimize.minimize(
                objective,
                x0,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                # scipy's default gtol (1e-5) stops the L2 template early (docs/optimized.md,
                # "Figures by module"); run to maxiter unless truly converged.
                options={"maxiter": maxiter, "gtol": 1e-10, "ftol": 1e-13},
                callback=lambda _: bar.update(1),
            )
            loss = float(result.fun) * scale
            # A gain below MIN_RELATIVE_GAIN keeps the identity (B = 0): on prefixes of 6 and 8
            # bins the optimiser drifted to 1 - 4e-7 of the identity's loss by a column of B near
            # 1.5e5, whose identity weight then rounds to zero when quantised.
            if loss < best_loss * (1.0 - MIN_RELATIVE_GAIN):
                best_theta, best_loss = result.x.reshape(p, n), loss
    return best_theta, best_loss


def eigen_design(gram: np.ndarray, *, maxiter: int = 500) -> np.ndarray:
    """The eigen-design strategy (module doc): rows sqrt(u_i) q_i, largest column L2 norm 1.

    Eigenvalues below 1e-12 of the largest are raised to it, so that the strategy has full rank."""
    sigma, vectors = np.linalg.eigh(gram)
    sigma = np.maximum(sigma, 1e-12 * max(float(sigma.max()), 1e-300))
    weights_sq = vectors**2  # [j, i] = q_ij^2 (column j of the strategy, eigenvector i)
    n = gram.shape[0]

    def negative_dual(mu):
        c_mu = np.maximum(weights_sq.T @ mu, 1e-300)  # (C mu)_i = sum_j q_ij^2 mu_j
        root = np.sqrt(sigma / c_mu)
        value = 2.0 * np.sum(np.sqrt(sigma * c_mu)) - mu.sum()
        grad = weights_sq @ root - 1.0
        return -value, -grad

    start = np.full(n, float(np.sum(np.sqrt(sigma))) ** 2 / n**2)  # the relaxed (SVD bound) optimum
    result = optimize.minimize(
        negative_dual, start, jac=True, method="L-BFGS-B", bounds=[(0.0, None)] * n, options={"maxiter": maxiter}
    )
    u = np.sqrt(sigma / np.maximum(weights_sq.T @ result.x, 1e-300))
    relaxed = np.sqrt(sigma)
    for candidate in (u, relaxed):  # keep the better of the dual's and the relaxed weights
        candidate /= np.max(weights_sq @ candidate)
    u = min((u, relaxed), key=lambda w: float(np.sum(sigma / w)))
    return np.sqrt(u)[:, None] * vectors.T


def replace_objective(strategy: np.ndarray, gram: np.ndarray) -> float:
    """The epsilon-free error of ``strategy`` (dense, unquantised) under replace neighbours with
    L2 sensitivity: (trace(G X^-1) - u^T G u / 1^T u) max_ij ||a_i - a_j||_2^2, X = A^T A,
    u = X^-1 1 (the least squares with the public total, times the squared replace
    sensitivity, to which the Gaussian's variance is proportional).  O(n^3).  ``strategy``: a
    finite matrix of n >= 2 columns and full column rank; ``gram``: n x n and finite."""
    strategy, gram = np.asarray(strategy, dtype=float), np.asarray(gram, dtype=float)
    if strategy.ndim != 2 or strategy.shape[1] < 2 or not np.all(np.isfinite(strategy)):
        raise ParameterError(f"the strategy must be a finite 2-D matrix of at least 2 columns, not {strategy.shape}")
    if gram.shape != (strategy.shape[1],) * 2 or not np.all(np.isfinite(gram)):
        raise ParameterError(f"the Gram matrix must be finite and {strategy.shape[1]} x {strategy.shape[1]}")
    try:
        terms = _matrix_variance_terms(cholesky_inverse(linalg.cho_factor(strategy.T @ strategy)), gram)  # O(n^3)
    except linalg.LinAlgError:
        raise ParameterError("the strategy must have full column rank (every count estimable)") from None
    distance = float(definition_sensitivity_power(strategy, 2, "replace"))
    return mean_error_as_released(distance, [terms], [1], known_total=True)


def column_norm(strategy: np.ndarray, p: int) -> float:
    """The largest column p-norm of A (its add/remove sensitivity)."""
    return float(np.max(np.linalg.norm(strategy, ord=p, axis=0)))


class VarianceTerms(NamedTuple):
    """What the exact error of an integer strategy A on a workload with Gram matrix G needs,
    with S = (A^T A)^-1 and w = S 1: ``trace`` = trace(G S) (the sum over the queries of
    q^T S q), ``cross`` = w^T G w (the sum of (q^T w)^2) and ``tau`` = 1^T w (both for a public
    total, whose least squares subtract (q^T w)^2 / tau from every query's q^T S q)."""

    trace: float
    cross: float
    tau: float


def strategy_variance_terms(strategy, gram: Gram) -> VarianceTerms:
    """:class:`VarianceTerms` of the measured (integer) strategy: by Woodbury for a p-Identity
    block (O(n p^2), one product of p + 1 rows by G), densely for a matrix (O(n^2) with its
    cached (A^T A)^-1, :meth:`~dprange.operators.Explicit.gram_inverse`, O(n^3) once)."""
    if isinstance(strategy, PIdentityStrategy):
        return block_variance_terms(strategy.block, gram)
    covariance = strategy.block.gram_inverse()
    if covariance is None:  # not certified well conditioned
        covariance = cholesky_inverse(linalg.cho_factor(strategy.block.dense_gram()))  # O(n^3)
    return _matrix_variance_terms(covariance, gram.dense())


def _matrix_variance_terms(covariance: np.ndarray, gram: np.ndarray) -> VarianceTerms:
    """:class:`VarianceTerms` of a dense strategy A given its (A^T A)^-1 ``covariance``, for the
    dense Gram matrix ``gram`` (O(n^2))."""
    w = covariance.sum(axis=1)
    return VarianceTerms(float(np.vdot(gram, covariance)), float(w @ gram @ w), float(w.sum()))


def block_variance_terms(block: DiagonalPlusRows, gram: Gram) -> VarianceTerms:
    """:class:`VarianceTerms` of an integer p-Identity block [diag(d); C] by Woodbury."""
    return VarianceTerms(*PIdentityEstimate(block.diagonal, block.rows, 1.0, total=0.0).workload_sums(gram))


def mean_error_as_released(variance: float, terms, queries, known_total: bool) -> float:
    """The exact mean variance over a workload of one noise ``variance`` on a Kronecker product
    of strategies (one axis: the 1-D case), each axis with its :class:`VarianceTerms` and the
    number of its workload's ``queries``: the means over the axes multiply, so the mean is
    v (prod_a trace_a / m_a - [public total] prod_a (cross_a / m_a) / prod_a tau_a)."""
    terms, queries = list(terms), [check_positive_int(m, "queries") for m in queries]
    if not terms or len(terms) != len(queries):
        raise ParameterError(f"give one number of queries per axis' terms, not {len(queries)} for {len(terms)}")
    if not (math.isfinite(variance) and variance >= 0):
        raise ParameterError(f"the noise variance must be finite and non-negative, not {variance!r}")
    plain = math.prod(t.trace / m for t, m in zip(terms, queries))
    if known_total:
        plain -= math.prod(t.cross / m for t, m in zip(terms, queries)) / math.prod(t.tau for t in terms)
    return variance * max(plain, 0.0)


def identity_strategy(n: int, template: str, seconds: float = 0.0, cached: bool = False) -> PIdentityStrategy:
    """The identity (one count per bin, K = 1) in the p-Identity shape, B with no rows, named
    after the ``template`` it stands in for (its quantisation needs no norm: every column is e_j)."""
    n = check_positive_int(n, "n")
    if template not in TEMPLATES or template == "auto":
        raise ParameterError(
            f"template must be one of {', '.join(t for t in TEMPLATES if t != 'auto')}, not {template!r}"
        )
    identity = PIdentityStrategy(np.zeros((0, n)), "p-identity", seconds, cached, float(n))
    identity.template = template
    return identity


#: Why :class:`Optimized` measured the identity (the strategy's ``describe()["measured"]``).
IDENTITY_CHOICE = "identity"


#: The mode of cache files, whatever the umask, and of the cache folder where dprange creates
#: it: readable and writable by their user only (whoever can write them chooses the strategies
#: of later releases; docs/privacy.md, "### The strategy cache").
CACHE_FILE_MODE, CACHE_FOLDER_MODE = 0o600, 0o700


def _warn_rejected_inverse(path: Path, instead: str) -> None:
    """Warn that the cache file ``path`` holds the strategy asked for with an (A^T A)^-1 that
    fails :meth:`~dprange.operators.Explicit.adopt_gram_inverse`'s check (damaged, or planted:
    see docs/privacy.md, "### The strategy cache"), and what is done ``instead``."""
    warnings.warn(
        f"the strategy cache file {path} holds an (A^T A)^-1 that fails the check on random probes "
        f"(damaged or planted); it is not used: {instead}",
        UserWarning,
        stacklevel=3,
    )


def also_built(strategy) -> dict:
    """``{"also_built": [...]}``: the other strategies built with ``strategy`` for the same
    choice (template auto: the p-Identity and L2-optimum or dense templates it compared; the dense
    templates: their starts), each with its template, optimisation time and whether it was
    read from the cache; {} where there were none.  The time spent is theirs and the chosen
    strategy's together.  Told apart by template (one strategy per template is built for a
    choice): the strategy measured is a copy of the one built, and the identity measured in
    place of an optimised strategy carries that strategy's template and time, so neither is
    listed (nor its time counted) twice."""
    others = [s for s in strategy.built_with if s.template != strategy.template]
    if not others:
        return {}
    described = [{"template": s.template, "optimisation_seconds": s.seconds, "cached": s.cached} for s in others]
    return {"also_built": described}


class OptimizedStrategy(MatrixStrategy):
    """An optimised dense strategy (the eigen-design, the L2 optimum, the dense templates),
    quantised to integers like any matrix strategy, with how it was obtained: the template,
    the optimisation time and whether it came from the cache."""

    def __init__(self, matrix: np.ndarray, template: str, seconds: float, cached: bool, trace: float = np.nan):
        super().__init__(matrix)
        #: The strategy as optimised, before quantisation (largest column norm 1).
        self.unquantised = np.asarray(matrix, dtype=float)
        #: trace(G (A^T A)^-1) of the unquantised strategy (unit largest column norm); for the
        #: replace program's strategy, its loss with the public total (:meth:`Optimized.replace_program`).
        self.trace = trace
        self.template = template
        self.seconds = seconds
        self.cached = cached
        #: Whether this optimisation was written into the disk cache (False when read from it).
        self.stored = False
        #: The relation whose loss it minimises: "add_remove", or "replace" (public total;
        #: :meth:`Optimized.replace_program`).
        self.optimised_for = "add_remove"
        #: What a design at given (epsilon, delta) measured and why (:meth:`Optimized.strategy`).
        self.choice: dict = {}
        #: The strategies built for the same choice, this one included (:func:`also_built`).
        self.built_with: list = []
        #: :class:`VarianceTerms` of the measured strategy on the workload it was optimised
        #: for, where they were computed when it was built or read from the cache.
        self.variance_terms: VarianceTerms | None = None

    def describe(self) -> dict:
        return {
            **super().describe(),
            "template": self.template,
            "optimisation_seconds": self.seconds,
            "cached": self.cached,
            "stored": self.stored,
            "optimised_for": self.optimised_for,
            **self.choice,
            **also_built(self),
        }


def round_keeping_norms(scaled: np.ndarray, factor: float, norm: int) -> np.ndarray:
    """Integers near ``scaled`` (K A, the columns of A of unit ``norm``) whose every column has
    norm at most K = ``factor``: rounding to nearest lets a column's norm pass K (by one unit
    in L1 on the strategies measured), and the sensitivity, the largest column norm, with it.

    L1 (entries >= 0): every entry rounded down, then the units the column lacks to K given
    to its entries with the largest fractional parts (largest remainders): each column sums to
    exactly K.  L2: rounded to nearest, then, while a column's squared norm exceeds K^2, the
    entry rounded furthest away from zero moves one unit towards it (at most one entry per
    column a pass, every column at once)."""
    scaled = np.asarray(scaled, dtype=float)
    cols = np.arange(scaled.shape[1])
    if norm == 1:
        out = np.floor(scaled)
        short = np.rint(factor - out.sum(axis=0)).astype(np.int64)  # < the column's entries
        rank = np.argsort(np.argsort(out - scaled, axis=0, kind="stable"), axis=0, kind="stable")
        return out + (rank < short[None, :])
    out = np.rint(scaled)
    limit = float(factor) ** 2
    over = (out**2).sum(axis=0) > limit
    while np.any(over):
        away = np.where(out != 0, np.abs(out) - np.abs(scaled), -np.inf)
        rows = np.argmax(away, axis=0)[over]
        out[rows, cols[over]] -= np.sign(out[rows, cols[over]])
        over = (out**2).sum(axis=0) > limit
    return out


class PIdentityStrategy(OneBlockStrategy):
    """A p-Identity strategy [I; B] D quantised like a matrix strategy (:mod:`dprange.strategies.matrix`:
    K = 2^k, the smallest making every entry integer or meeting the tolerance) but kept in its
    shape: the measured block is [diag(round(K D)); round(K B D)], a
    :class:`~dprange.inference.p_identity.DiagonalPlusRows`, so measuring, calibrating and the
    exact GLS (Woodbury) cost O(n p^2), with no n x n matrix.  The entries and K are those
    :class:`~dprange.strategies.matrix.MatrixStrategy` gives the dense matrix (same values)."""

    def __init__(self, theta: np.ndarray, template: str, seconds: float, cached: bool, trace: float = np.nan):
        theta = np.atleast_2d(np.asarray(theta, dtype=float))
        #: trace(G (A^T A)^-1) of the unquantised strategy (unit column norms); optimised for
        #: replace neighbours, trace(G (A^T A)^-1) less the public total's term (:func:`p_identity_loss`).
        self.trace = trace
        self.theta = theta
        self.template = template
        self.factor, self.block = self.quantised(QUANTISATION_TOLERANCE)
        self.rows, self.n = self.block.shape
        self.seconds = seconds
        self.cached = cached
        #: Whether this optimisation was written into the disk cache (False when read from it).
        self.stored = False
        #: The relation whose loss it minimises: "add_remove", or "replace" (public total;
        #: :meth:`Optimized.replace_program`).
        self.optimised_for = "add_remove"
        #: What a design at given (epsilon, delta) measured and why (:meth:`Optimized.strategy`).
        self.choice: dict = {}
        #: The strategies built for the same choice, this one included (:func:`also_built`).
        self.built_with: list = []

    def quantised(self, tolerance: float, *, keep_norms: bool = False) -> tuple[float, DiagonalPlusRows]:
        """(K, [diag(round(K D)); round(K B D)]) with K = 2^k the smallest making every entry
        integer, else the one for which rounding moves no entry by more than ``tolerance``
        times the largest (:func:`dprange.strategies.matrix.quantisation_factor`).  The identity (B = 0)
        is the identity at K = 1 whatever the tolerance.  ``keep_norms``: round so that no
        column's norm exceeds K (:func:`round_keeping_norms`; entries then move by less than 1
        unit instead of at most 1/2)."""
        norm = P_IDENTITY_FORM_NORMS[self.template]
        scale = column_scales(self.theta, norm)  # column norms of [I; B]
        diagonal, rows = 1.0 / scale, self.theta / scale
        factor = quantisation_factor(np.concatenate([diagonal, rows.ravel()]), tolerance)
        if not keep_norms:
            return factor, DiagonalPlusRows(np.round(diagonal * factor), np.round(rows * factor))
        rounded = round_keeping_norms(np.vstack([diagonal, rows]) * factor, factor, norm)
        return factor, DiagonalPlusRows(rounded[0], rounded[1:])

    def explicit(self) -> np.ndarray:
        """The measured integer matrix, dense (small n: tests and checks)."""
        return self.block.dense()

    def check_rank(self, known_total: bool) -> None:
        """Full rank when every bin keeps a positive weight after rounding (O(n))."""
        if not np.all(self.block.diagonal > 0):
            raise ParameterError(
                "the optimised strategy gives some bins a weight that rounds to zero; "
                "optimise with fewer rows (rows=...) or use template='eigen'"
            )

    def describe(self) -> dict:
        return {
            "bins": self.n,
            "rows": self.rows,
            "quantisation_factor": self.factor,
            "template": self.template,
            "optimisation_seconds": self.seconds,
            "cached": self.cached,
            "stored": self.stored,
            "optimised_for": self.optimised_for,
            **self.choice,
            **also_built(self),
        }
