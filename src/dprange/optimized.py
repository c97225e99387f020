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
  pair of bins that share no row, so it is not in the loss.  Optimised with that loss the
  strategy gains 1.11-1.30x over the best fixed one under replace (prefixes of 64 to 4096 bins,
  all ranges of 256 to 4096), where the add/remove optimum measured under replace was behind
  it or level (docs/optimized.md).
* ``p-identity-l2``: the same template with columns of L2 norm 1 (Gaussian noise):
  s_j = sqrt(1 + ||B_j||^2), B of any sign, the same loss and Woodbury algebra
  (ds_j / dB_rj = B_rj / s_j); under replace B >= 0 and the loss with the public total, as
  above (every pair of columns then moves the answers by at most sqrt(2)).  On all ranges and
  prefixes at n = 256 its trace is 1.04x and
  1.07x the SVD bound's, where the eigen-design reaches 1.08x and 1.66x.
* ``dense`` (:mod:`dprange.optimized_dense`, epsilon-DP, n <= 512): any non-negative strategy
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
* ``l2-optimal`` (:mod:`dprange.optimal_l2`; Yuan, Yang, Zhang and Hao, KDD 2016): the exact
  optimum over every strategy with columns of L2 norm at most 1, solved through its dual over
  one weight per column (an n x n eigendecomposition a step, n <= 4096), with a certified
  lower bound beside it.  On all ranges and prefixes at n = 256 its trace is 1.0175x and
  1.043x the SVD bound's (the bound is not reachable: this is the optimum), where the L2
  template reaches 1.04x and 1.07x (at 4096: 1.010x and 1.024x against 1.455x and 1.41x).
  ``auto`` takes it when delta > 0 under add/remove (without building the L2 template, a point
  of its program: its trace is never lower).  Under replace neighbours up
  to 256 bins it solves the replace program instead (pairwise sensitivity, public total:
  :func:`dprange.optimal_l2.l2_replace_optimum`), which auto takes as it is.

:class:`Optimized` measures the optimised strategy like :class:`~dprange.matrix.Matrix`
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

import copy
import hashlib
import math
import os
import re
import struct
import time
import warnings
import zipfile
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

from ._lazy import lazy_module
from ._params import Custom, Integer, OneOf, Param
from ._validation import check_delta, check_epsilon, check_positive_int
from .cholesky import cholesky_inverse
from .errors import ParameterError
from .inference.least_squares import DENSE_COVARIANCE_LIMIT
from .inference.p_identity import DiagonalPlusRows, PIdentityEstimate
from .matrix import QUANTISATION_TOLERANCE, MatrixStrategy, OneBlockStrategy, quantisation_factor
from .mechanisms import Mechanism
from .operators import Explicit, check_relation, definition_sensitivity_power
from .optimal_l2 import (
    L2_OPTIMUM_MAX_N,
    L2_REPLACE_MAX_N,
    check_l2_optimum_bins,
    l2_optimum,
    l2_replace_optimum,
    strategy_trace,
)
from .optimized_dense import DENSE_MAX_N, optimize_dense_template, optimize_signed
from .progress import progress_bar
from .registry import MECHANISMS, WORKLOADS, Citation
from .workloads import AllRange, Identity, Prefix, Workload, make_workload, not_a_workload

optimize = lazy_module("scipy.optimize")  # imported on first use: ~0.3 s that `import dprange` skips

__all__ = [
    "Gram",
    "Optimized",
    "OptimizedStrategy",
    "PIdentityStrategy",
    "VarianceTerms",
    "adopt_cached_inverse",
    "auto_candidates",
    "auto_optimise_limit",
    "auto_pool",
    "banded_start",
    "block_variance_terms",
    "cache_dir",
    "cache_files",
    "clear_cache",
    "eigen_design",
    "identity_strategy",
    "mean_error_as_released",
    "optimize_p_identity",
    "p_identity_loss",
    "p_identity_matrix",
    "strategy_trace",
    "strategy_variance_terms",
]

TEMPLATES = ("auto", "p-identity", "p-identity-l2", "eigen", "l2-optimal", "dense", "dense-signed")

#: The dense L1 templates (:mod:`dprange.optimized_dense`) and whether their entries take both signs.
DENSE_TEMPLATES = {"dense": False, "dense-signed": True}

#: The column norm each p-Identity template keeps at 1.
P_IDENTITY_NORMS = {"p-identity": 1, "p-identity-l2": 2}

#: The column norm of every strategy kept in the p-Identity shape: the templates above, and the
#: L2 optimum written in that shape for the Kronecker product (:func:`dprange.optimal_l2.as_p_identity_l2`).
P_IDENTITY_FORM_NORMS = {**P_IDENTITY_NORMS, "l2-optimal": 2}

#: Version of the optimisers: part of the cache key, so that a change recomputes.
CACHE_VERSION = 5


# ----------------------------------------------------------------------------- p-Identity


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
    four p x p by p x n products: O(p^2 n) in all (at n = 4096, p = 128: about 25 ms).

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
    """p for the L1 template: n / 16 (HDMM's choice for ranges), at most 128 (n / 32 at 4096
    bins: 2.49x the SVD bound in RMSE on all ranges; on prefixes, from the banded start after
    100-200 steps, p = 64, 112, 144, 192, 256 gave 2.65x, 2.58x, 2.57x, 2.60x, 2.69x where 128
    gave 2.57x); for the L2 template n / 4 (at n = 256 the trace is 1.04x the bound with p = 64,
    1.29x with p = 16), at most 128.  The optimisation costs O(p^2 n) per step."""
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
    few rows spanning a large part of the domain, most entries zero.  From it L-BFGS-B needs
    100-200 steps where uniform starts need 400 and more (uniform starts put column sums near
    p / 2, and the first ~200 steps only shrink them): at n = 4096 prefixes reach 2.57x the SVD
    bound (RMSE) in 200 steps, against 2.64x after 400 from a uniform start (2.57x after 1000)."""
    wide = min(WIDE_ROWS, p // 4)
    return np.vstack([tents(n, p - wide, 0.9), tents(n, wide, 0.5)])


#: Up to this size p n (n = 256 at the default p) the L1 optimisation runs a uniform start
#: besides the banded one (0.1-0.3 s) and keeps the better: on very small problems the banded
#: start can stop 0.7% higher (all ranges, n = 64, p = 4).
UNIFORM_TOO_MAX_SIZE = 4096


#: An optimised B replaces the identity strategy (B = 0) only if it lowers the loss by more
#: than this fraction (see :func:`optimize_p_identity`).
MIN_RELATIVE_GAIN = 1e-6

#: The largest entry of an optimised L1 B (optimised strategies have entries below 2; the cap
#: keeps every bin's identity weight measurable, see :func:`optimize_p_identity`).
B_MAX = 100.0


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
    own update over the p n variables, O(10 p n) with the bounds' breakpoints: at n = 4096,
    p = 128 (524288 variables) about 25 ms and 40-90 ms on one thread."""
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
    # One Bounds object, not p n tuples (converting 524288 tuples took 1.7 s at n = 4096).
    # B <= B_MAX: on prefixes of 6 bins the optimiser otherwise sent one entry of B to 8.6e5
    # (a row that takes over one bin's count, for a gain of 5e-5), so that the bin's identity
    # weight 1 / s_j rounded to zero when quantised; with the cap every 1 / s_j >= 1 / (1 + p B_MAX).
    # L2: the sign is free, except with a known total (replace neighbours): with B >= 0 every
    # pair of unit columns has a_i^T a_j >= 0, so a replace moves the answers by at most sqrt(2),
    # the value the loss assumes (signed columns could reach 2).
    bounds = optimize.Bounds(0.0, B_MAX) if norm == 1 or known_total else None
    # One BLAS thread: the products of a step are p x n, too small to gain from threads, and
    # OpenBLAS's threads spun on a loaded 2-core box (prefixes, 128 bins, p = 8: 3.3 CPU s with
    # the default threads, 0.3 s with one).
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
                # scipy's default gtol (1e-5) stopped the L2 template at n = 1024 after 69 steps at
                # 1.12x the bound; run to maxiter unless truly converged (1.09x).
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


# ----------------------------------------------------------------------------- eigen-design


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


# ----------------------------------------------------------------------------- error as released


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


# ----------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """Where optimised strategies are kept: $DPRANGE_CACHE_DIR, else $XDG_CACHE_HOME/dprange,
    else ~/.cache/dprange."""
    explicit = os.environ.get("DPRANGE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dprange"


#: The names of the cache's files (:func:`cache_path`, any version) and of the temporary
#: files an interrupted write leaves (:func:`_store`): what :func:`clear_cache` removes.
CACHE_FILE_NAME = re.compile(r"v\d+-[A-Za-z0-9.-]+\.npz")


def cache_files() -> list[Path]:
    """The strategy files in :func:`cache_dir`, largest first ([] where it does not exist);
    other files there are not listed."""
    directory = cache_dir()
    if not directory.is_dir():
        return []
    files = [path for path in directory.iterdir() if CACHE_FILE_NAME.fullmatch(path.name) and path.is_file()]
    return sorted(files, key=lambda path: (-path.stat().st_size, path.name))


def clear_cache() -> tuple[int, int]:
    """Remove the strategy files (:func:`cache_files`): (files removed, bytes freed).  They are
    optimised again when next needed; other files in the directory are left."""
    removed = freed = 0
    for path in cache_files():
        size = path.stat().st_size
        try:
            path.unlink()
        except FileNotFoundError:  # removed meanwhile
            continue
        removed, freed = removed + 1, freed + size
    return removed, freed


def workload_key(workload: Workload) -> str:
    """A name for the workload's Gram matrix: the standard workloads by name, others by hash."""
    if type(workload) in (AllRange, Prefix, Identity):
        return workload.name
    digest = hashlib.sha256(np.ascontiguousarray(workload.gram(), dtype=float).tobytes()).hexdigest()
    return f"gram-{digest[:24]}"


def cache_path(workload: Workload, template: str, p: int, restarts: int) -> Path:
    """The cache file of a strategy: workload, n, template and the optimiser's settings."""
    settings = f"p{p}-r{restarts}" if template in (*P_IDENTITY_NORMS, *DENSE_TEMPLATES) else "dual"
    return cache_dir() / f"v{CACHE_VERSION}-{workload_key(workload)}-n{workload.n}-{template}-{settings}.npz"


def _load(path: Path, matrix: str, n: int, *, nonnegative: bool = False) -> dict | None:
    """The cached arrays, if the file holds ``matrix`` (theta or strategy) over n bins with the
    optimisation time and trace; None when it is absent, unreadable (empty, a corrupt or
    truncated zip) or holds what no optimisation writes: the strategy is then recomputed and
    the file replaced.  ``nonnegative``: the matrix has no negative entry (L1 p-Identity)."""
    try:
        arrays = _read_arrays(path)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    return arrays if _fits(arrays, matrix, n, nonnegative) else None


#: Cached arrays of at least this many bytes are memory-mapped from the file, read-only: the
#: dense strategies and their inverses (134 MB each at 4096 bins).
MAPPED_MIN_BYTES = 8 * 2**20


def _read_arrays(path: Path) -> dict:
    """The arrays of an uncompressed .npz (:func:`_write_arrays`, or np.savez): members of at
    least MAPPED_MIN_BYTES memory-mapped read-only (no copy, the pages read as used: 0.02 s for
    a strategy and its inverse at 4096 bins, where reading them took 0.14-0.46 s, most of it
    filling fresh memory), the others read as np.load reads them (their CRC checked).  A mapped member's
    CRC is not checked; :func:`_fits` and the inverse's own check
    (:meth:`~dprange.operators.Explicit.adopt_gram_inverse`) stand in for it."""
    arrays = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        for info in archive.infolist():
            key = info.filename.removesuffix(".npy")
            if info.compress_type == zipfile.ZIP_STORED and info.file_size >= MAPPED_MIN_BYTES:
                arrays[key] = _mapped_member(path, raw, info)
            else:
                with archive.open(info) as member:  # as np.load reads it
                    arrays[key] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def _mapped_member(path: Path, raw, info: zipfile.ZipInfo) -> np.ndarray:
    """The .npy member ``info`` of the uncompressed zip ``path`` (open as ``raw``) as a
    read-only memory map: its data start after the local file header (30 bytes, then the name
    and the extra field, whose lengths are at bytes 26-29) and the .npy header."""
    raw.seek(info.header_offset)
    local = raw.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise ValueError("not a zip member")
    raw.seek(info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little"))
    version = np.lib.format.read_magic(raw)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"unexpected .npy version {version}")
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(raw)
    if dtype.hasobject:
        raise ValueError("object arrays are not cached")
    mapped = np.memmap(path, dtype=dtype, mode="r", offset=raw.tell(), shape=shape, order="F" if fortran else "C")
    if raw.tell() % dtype.alignment:  # a file written without MEMBER_ALIGNMENT: read into memory
        return np.array(mapped)
    return np.asarray(mapped)


def _fits(arrays: dict, matrix: str, n: int, nonnegative: bool) -> bool:
    """Whether cached arrays are what an optimisation writes: the matrix finite and real with n
    columns (non-negative if asked), the time and the trace one finite number each.  The
    sensitivity is computed from the measured strategy whatever the file holds; this keeps a
    damaged file from failing a release or being used in a lossy conversion."""
    if not {matrix, "seconds", "trace"} <= arrays.keys():
        return False
    values = [arrays[matrix], arrays["seconds"], arrays["trace"]]
    if not all(np.issubdtype(v.dtype, np.integer) or np.issubdtype(v.dtype, np.floating) for v in values):
        return False
    if not all(np.all(np.isfinite(v)) for v in values) or arrays["seconds"].size != 1 or arrays["trace"].size != 1:
        return False
    theta = arrays[matrix]
    return theta.ndim == 2 and theta.shape[1] == n and not (nonnegative and np.any(theta < 0))


#: The .npy members of a cache file start at multiples of this many bytes (their data too: the
#: .npy header pads itself to a multiple of 64), so that memory-mapped arrays are aligned (BLAS
#: skips unaligned ones: a product by an unaligned 4096 x 4096 matrix took 0.18 s, 0.004 s aligned).
MEMBER_ALIGNMENT = 64

#: The id of the zip extra field that pads a member's local header to MEMBER_ALIGNMENT (the
#: one Android's zipalign writes; readers skip fields they do not know).
ALIGNMENT_FIELD = 0xD935


def _write_arrays(path: Path | BinaryIO, arrays: dict) -> None:
    """Write ``arrays`` (to ``path``, or a binary file open for writing) as an uncompressed .npz
    that np.load reads, every member's data aligned (MEMBER_ALIGNMENT) by an extra field in its
    local header: 30 bytes, the name, the field, the zip64 field (20 bytes), then the .npy file."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            start = archive.start_dir + 30 + len(info.filename.encode()) + 4 + 20
            pad = -start % MEMBER_ALIGNMENT
            info.extra = struct.pack("<HH", ALIGNMENT_FIELD, pad) + bytes(pad)
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


#: The mode of cache files, whatever the umask, and of the cache folder where dprange creates
#: it: readable and writable by their user only (whoever can write them chooses the strategies
#: of later releases; docs/privacy.md, "### The strategy cache").
CACHE_FILE_MODE, CACHE_FOLDER_MODE = 0o600, 0o700


def _store(path: Path, arrays: dict) -> bool:
    """Write atomically, with mode CACHE_FILE_MODE; whether it was written (a cache that cannot
    be written is skipped: it only saves time, and the release says so)."""
    try:
        path.parent.mkdir(mode=CACHE_FOLDER_MODE, parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp.npz")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(partial, flags, CACHE_FILE_MODE)
        with open(descriptor, "wb") as fh:
            os.fchmod(descriptor, CACHE_FILE_MODE)  # a file left by an interrupted write keeps its mode otherwise
            _write_arrays(fh, arrays)
        os.replace(partial, path)
    except OSError:
        return False
    return True


def _store_released_form(path: Path, arrays: dict, strategy: OptimizedStrategy, gram: Gram) -> bool:
    """Store ``arrays`` with what releasing the measured dense strategy needs beyond it:
    (A^T A)^-1 (O(n^3) once, 5 CPU s at 4096 bins; :meth:`~dprange.operators.Explicit.gram_inverse`)
    and its :class:`VarianceTerms` on the workload (O(n^2) from it), which are also set on
    ``strategy``; read back (after :meth:`~dprange.operators.Explicit.adopt_gram_inverse`'s
    check), a release costs O(n^2): the rank check, the error as released, least squares and
    its covariance.  The file is twice the strategy (268 MB at 4096 bins).  Without an inverse
    that would be adopted (an uncertified or ill-conditioned strategy,
    :meth:`~dprange.operators.Explicit.gram_inverse_checks_out`) the terms alone (NaN where
    A^T A is singular), which mark the file complete: it is not written again on every read."""
    kept = {k: v for k, v in arrays.items() if k not in ("gram_inverse", "variance_terms")}
    try:
        strategy.variance_terms = strategy_variance_terms(strategy, gram)  # O(n^2) with the inverse
        terms = np.array(strategy.variance_terms)
    except linalg.LinAlgError:
        terms = np.full(3, np.nan)
    if strategy.block.gram_inverse_checks_out():
        kept["gram_inverse"] = strategy.block.gram_inverse()
    return _store(path, {**kept, "variance_terms": terms})


def _saved_terms(saved: dict) -> VarianceTerms | None:
    """The :class:`VarianceTerms` a cache file holds, None where it holds no three finite numbers."""
    terms = np.asarray(saved.get("variance_terms", np.zeros(0)), dtype=float)
    return VarianceTerms(*(float(v) for v in terms)) if terms.shape == (3,) and np.all(np.isfinite(terms)) else None


#: A dense release read back (:func:`adopt_cached_inverse`) looks for its strategy's inverse in
#: the cache from this many bins; below, computing it (O(n^3): 0.1 s at 1024 bins) costs
#: about what finding it does.
CACHED_INVERSE_MIN_BINS = 1024


def adopt_cached_inverse(block) -> bool:
    """Give ``block`` (the integer strategy of a saved dense release, read back: an
    :class:`~dprange.operators.Explicit`) the (A^T A)^-1 the strategy cache keeps beside the
    same strategy, where it is there: loading the release then costs O(n^2), where computing
    the inverse is O(n^3) (5.4 of the 6.3 CPU s that loading the L2 optimum's release on 4096
    bins took).  The candidates are the cache's dense strategies over as many bins
    (:func:`cache_path`'s names, p-Identity files left out); one is used only if, quantised as a
    release quantises it, it equals ``block`` entry for entry, and its inverse passes
    :meth:`~dprange.operators.Explicit.adopt_gram_inverse`'s check (random probes from the
    secure source; one that fails is passed over with a warning).  Nothing is written.
    Whether an inverse was adopted."""
    if not isinstance(block, Explicit):
        raise ParameterError(f"adopt_cached_inverse takes an explicit strategy block, not {type(block).__name__}")
    rows, n = block.shape
    if n < CACHED_INVERSE_MIN_BINS or not isinstance(block.matrix, np.ndarray):
        return False
    marker = f"-n{n}-"
    for path in cache_files():
        name = path.name
        if not name.startswith(f"v{CACHE_VERSION}-") or marker not in name:
            continue
        if name.split(marker, 1)[1].startswith(tuple(P_IDENTITY_NORMS)):
            continue
        saved = _load(path, "strategy", n)
        if saved is None or "gram_inverse" not in saved or saved["strategy"].shape != (rows, n):
            continue
        try:
            measured = MatrixStrategy(saved["strategy"]).block.matrix  # O(rows n): the release's quantisation
        except (ParameterError, ValueError, FloatingPointError):  # a file no optimisation wrote: not this one
            continue
        if not np.array_equal(measured, block.matrix):
            continue
        if block.adopt_gram_inverse(saved["gram_inverse"]):
            return True
        _warn_rejected_inverse(path, "it is computed here instead")
    return False


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


# ----------------------------------------------------------------------------- mechanism


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
    """A p-Identity strategy [I; B] D quantised like a matrix strategy (:mod:`dprange.matrix`:
    K = 2^k, the smallest making every entry integer or meeting the tolerance) but kept in its
    shape: the measured block is [diag(round(K D)); round(K B D)], a
    :class:`~dprange.inference.p_identity.DiagonalPlusRows`, so measuring, calibrating and the
    exact GLS (Woodbury) cost O(n p^2), with no n x n matrix.  The entries and K are those
    :class:`~dprange.matrix.MatrixStrategy` gives the dense matrix (same values)."""

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
        times the largest (:func:`dprange.matrix.quantisation_factor`).  The identity (B = 0)
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


def _workload_or_name(value, name: str):
    if isinstance(value, Workload):
        return value
    if isinstance(value, str):
        WORKLOADS.lookup(value)
        return value
    raise not_a_workload(value, name)


class Optimized(Mechanism):
    """The matrix mechanism with a strategy optimised for ``workload`` (module doc).

    ``template="auto"`` optimises the p-Identity template with L1 columns when delta = 0; when
    delta > 0 it solves the exact L2 optimum (``l2-optimal``, n <= AUTO_CACHED_MAX_N), which
    under replace it compares with the L2 template optimised for replace; ``eigen`` gives the
    eigen-design.  The optimisation reads
    only the workload and n (public); its result is cached on disk and its time is reported in the release's provenance
    (``parameters["strategy"]["optimisation_seconds"]``).  At every template the identity is measured instead
    where its exact error as released at the release's epsilon, delta, relation and noise is at most the
    optimised strategy's (:meth:`released_strategy`; ``parameters["strategy"]["measured"]``).
    """

    name = "optimized"

    PARAMS = (
        Param(
            "workload",
            Custom(_workload_or_name, "a workload name or a dprange.workloads.Workload"),
            "the queries the strategy is optimised for",
            default="all-range",
            positional=True,
        ),
        Param(
            "template",
            OneOf(TEMPLATES),
            "p-identity (L1 columns, Laplace: epsilon-DP, McKenna et al. 2018; under replace optimised with the "
            "public total), p-identity-l2 (its L2 analogue, Gaussian; under replace optimised with the "
            "public total, B >= 0), eigen ((epsilon, delta), Li and Miklau 2012), l2-optimal (the exact "
            "optimum over strategies with L2 columns, (epsilon, delta); n <= 4096; under replace the "
            "optimum for the pairwise sensitivity and the public total up to 256 bins), dense (any non-negative "
            "strategy with L1 columns, from the p-identity optimum; n <= 512), dense-signed (entries of "
            "either sign, from the dense optimum), or auto (p-identity when "
            "delta = 0, dense where its error is 1% lower; when delta > 0 l2-optimal, under replace "
            "p-identity-l2 where its error is lower)",
            default="auto",
        ),
        Param(
            "rows",
            Integer(0),
            "p, the extra rows of p-identity, at most n (0: n/16 for L1, n/4 for L2, at most 128)",
            default=0,
        ),
        Param(
            "restarts",
            Integer(1),
            "starts of the p-identity optimisation: a banded one (L1), then uniform random ones",
            default=1,
        ),
        *Mechanism.PARAMS,
    )
    workload: Workload | str
    template: str
    rows: int
    restarts: int

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._delta = 0.0
        self._epsilon: float | None = None
        self._strategies: dict = {}
        self._released: dict = {}
        self._loaded: dict = {}  # (n, template, replace): (cache file, arrays) read by cache_state, for _build
        self._built: dict = {}  # (n, resolved template): the strategies built for that choice

    # The template "auto" follows delta, and the choice between the optimised strategy and the
    # identity follows epsilon and delta: remember those of the current design / measurement.
    def design(self, n: int, epsilon, *, delta=0.0):
        self._follow(epsilon, delta)
        return super().design(n, epsilon, delta=delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        self._follow(epsilon, delta)
        return super().measure(counts, epsilon, delta=delta, rng=rng)

    def strategy_at(self, n: int, epsilon, delta=0.0):
        """The strategy measured at (epsilon, delta): template auto builds the one for delta
        only (not the epsilon-DP template first, as :meth:`strategy` before any design would)."""
        self._follow(epsilon, delta)
        return self.strategy(n)

    def _follow(self, epsilon, delta) -> None:
        self._epsilon, self._delta = check_epsilon(epsilon), check_delta(delta)

    def resolved_template(self, delta: float | None = None) -> str:
        if self.template != "auto":
            return self.template
        return "p-identity-l2" if (self._delta if delta is None else delta) > 0 else "p-identity"

    def workload_on(self, n: int) -> Workload:
        if isinstance(self.workload, Workload):
            if self.workload.n != n:
                raise ParameterError(f"the strategy is optimised for {self.workload.n} bins but the data have {n}")
            return self.workload
        return make_workload(self.workload, n)

    def strategy(self, n: int) -> OptimizedStrategy | PIdentityStrategy:
        """The strategy measured on n bins: after a design or measurement at (epsilon, delta),
        the optimised strategy or the identity, whichever has the lower exact error as
        released (:meth:`released_strategy`); before any, the optimised strategy."""
        optimised = self.optimised_strategy(n)
        if self._epsilon is None:
            return optimised
        return self.released_strategy(optimised, self._epsilon, self._delta)

    def released_strategy(self, optimised, epsilon: float, delta: float) -> OptimizedStrategy | PIdentityStrategy:
        """``optimised`` or the identity, whichever has the lower exact mean error on the
        workload as released at (epsilon, delta) under this relation and noise; a tie (an
        optimum B = 0) measures the identity without B's empty rows.  The comparison is in the
        strategies as measured: an optimised strategy is quantised with K = 2^k (about 2^16),
        its noise per unit of sensitivity about the continuous one (2 / epsilon^2 for Laplace),
        where the identity is measured at K = 1 with the discrete noise of sensitivity 1
        (discrete Laplace: 1.84 at epsilon 1, 0.0137 at 5); an optimum whose trace is only
        slightly below the identity's then has the higher error.  Each error is
        v (trace(G S) - [public total] w^T G w / 1^T w) / m (:func:`mean_error_as_released`),
        v from the mechanism's own calibration.  Reads only public facts (the workload's Gram
        matrix, epsilon, delta, the relation, the noise); the epsilon-free optimisation and its
        cache are unchanged.  The strategy returned says what was measured in ``describe()``:
        ``measured`` ("optimised" or "identity") and ``mean_error_as_released`` of both."""
        key = (optimised.n, optimised.template, float(epsilon), float(delta))
        if key not in self._released:
            workload = self.workload_on(optimised.n)
            gram = Gram(workload)
            identity = identity_strategy(optimised.n, optimised.template, optimised.seconds, optimised.cached)
            identity.stored = optimised.stored
            identity.built_with = optimised.built_with  # the optimised strategies it was compared with
            identity.optimised_for = optimised.optimised_for
            errors = {
                label: self._error_as_released(strategy, gram, workload.m, epsilon, delta)
                for label, strategy in (("optimised", optimised), (IDENTITY_CHOICE, identity))
            }
            chosen = identity if errors[IDENTITY_CHOICE] <= errors["optimised"] else copy.copy(optimised)
            chosen.choice = {
                "measured": IDENTITY_CHOICE if chosen is identity else "optimised",
                "mean_error_as_released": errors,
            }
            self._released[key] = chosen
        return self._released[key]

    def _error_as_released(self, strategy, gram: Gram, queries: int, epsilon: float, delta: float) -> float:
        (spec,) = self.noise_specs(strategy, epsilon, delta)
        known_total = self.neighbours == "replace"
        terms = getattr(strategy, "variance_terms", None) or strategy_variance_terms(strategy, gram)
        return mean_error_as_released(spec.variance, [terms], [queries], known_total)

    def optimised_strategy(self, n: int) -> OptimizedStrategy | PIdentityStrategy:
        """The strategy optimised for the workload on n bins (epsilon-free; cached in memory
        and on disk), as quantised for measurement."""
        n = check_positive_int(n, "n")
        if n > DENSE_COVARIANCE_LIMIT:
            raise ParameterError(
                f"optimised strategies are built for n <= {DENSE_COVARIANCE_LIMIT} bins, not {n}; "
                "use the hierarchical or wavelet mechanism"
            )
        template = self.resolved_template()
        key = (n, template)
        if key not in self._strategies:
            workload = self.workload_on(n)
            if self._optimum_alone(n, template):
                strategy = self._build(workload, "l2-optimal")
            else:
                strategy = self._build(workload, template)
                if self.template == "auto" and template == "p-identity-l2" and n <= AUTO_CACHED_MAX_N:
                    assert isinstance(strategy, PIdentityStrategy)
                    strategy = self._auto_l2(workload, strategy)
            if self.template == "auto" and template == "p-identity" and self._auto_dense(workload, template):
                dense = self._build(workload, "dense")  # epsilon-DP: the dense template where clearly lower
                strategy = dense if dense.trace < AUTO_DENSE_GAIN * strategy.trace else strategy
            strategy.check_rank(known_total=self.neighbours == "replace")
            self._strategies[key] = strategy
        return self._strategies[key]

    def _optimum_alone(self, n: int, template: str) -> bool:
        """Template auto with delta > 0 up to AUTO_CACHED_MAX_N bins under add/remove: the
        exact L2 optimum alone.  The L2 template is a point of its program, so its trace is
        never below the optimum's by more than the solver's gap (1e-6, 1e-4 above 1024 bins),
        and building it cost more than the optimum for nothing (at 1024 bins 7 of the 9.2 CPU s
        of the cold design, at 4096 34 CPU s for 1.455x and 1.41x the SVD bound on all ranges
        and prefixes against the optimum's 1.010x and 1.024x).  Under replace the template is
        optimised for another loss and both are built and compared (:meth:`_auto_l2`)."""
        return (
            self.template == "auto"
            and template == "p-identity-l2"
            and self.neighbours == "add_remove"
            and n <= AUTO_CACHED_MAX_N
        )

    def _auto_l2(
        self, workload: Workload, template_strategy: PIdentityStrategy
    ) -> OptimizedStrategy | PIdentityStrategy:
        """Template auto with delta > 0 under replace (n <= AUTO_CACHED_MAX_N; add/remove takes
        the optimum alone, :meth:`_optimum_alone`): up to L2_REPLACE_MAX_N the replace program's
        optimum, the least error under replace, as it is.  Above: the
        L2 template is optimised for replace, the optimum for add/remove; compared by
        :func:`replace_objective` (their traces are of different losses: all ranges of 1024 bins
        477.5 against the template's 483.9 per query at (1, 1e-6), prefixes 323.4 against 301.8)."""
        n = workload.n
        optimum = self._build(workload, "l2-optimal")
        if self.replace_program(n, "l2-optimal"):
            return optimum
        assert isinstance(optimum, OptimizedStrategy)
        gram = workload.gram()
        template_matrix = p_identity_matrix(template_strategy.theta, 2)
        lower = replace_objective(optimum.unquantised, gram) < replace_objective(template_matrix, gram)
        return optimum if lower else template_strategy

    def extra_rows(self, n: int, template: str) -> int:
        """p of the p-Identity template (and of the dense template's p-Identity start) on n
        bins: ``rows``, or the default where it is 0.  ``rows`` above n is refused: [I; B] has
        at most n useful extra rows (B B^T of rank <= n), and a step costs O(n p^2) (p = 1000
        on 100 bins: 22 s)."""
        base = "p-identity" if template in DENSE_TEMPLATES else template
        if self.rows > n and base in P_IDENTITY_NORMS:
            raise ParameterError(
                f"rows={self.rows} is more than the {n} bins the strategy is optimised for: the p-Identity "
                f"template has at most {n} useful extra rows, and each optimisation step costs O(n rows^2); "
                f"give rows <= {n}, or rows=0 for the default ({default_rows(n, base)} here: n/16 with L1 "
                "columns, n/4 with L2 columns, at most 128)"
            )
        return self.rows or default_rows(n, base)

    def _cached_arrays(self, workload: Workload, template: str, replace: bool) -> tuple[Path, dict | None]:
        """(the cache file of ``template`` for ``workload`` (this mechanism's on its n bins),
        optimised for replace neighbours or not (:meth:`replace_program`), its arrays if it
        loads and fits, :func:`_load`); a file read by :meth:`cache_state` is not read again,
        nor an explicit workload's Gram matrix hashed again for its name."""
        if (workload.n, template, replace) in self._loaded:
            return self._loaded.pop((workload.n, template, replace))
        key = f"{template}-replace" if replace else template
        path = cache_path(workload, key, self.extra_rows(workload.n, template), self.restarts)
        # B >= 0: the L1 p-Identity template, and both p-Identity templates under replace
        nonnegative = template in P_IDENTITY_NORMS and (P_IDENTITY_NORMS[template] == 1 or replace)
        matrix = "theta" if template in P_IDENTITY_NORMS else "strategy"
        return path, _load(path, matrix, workload.n, nonnegative=nonnegative)

    def replace_program(self, n: int, template: str) -> bool:
        """Whether ``template`` on n bins is optimised for replace neighbours: l2-optimal up to
        L2_REPLACE_MAX_N bins solves the replace program
        (:func:`dprange.optimal_l2.l2_replace_optimum`: the L2 optimum for the pairwise
        sensitivity and the public total), p-identity and p-identity-l2 (any n) minimise the
        loss with the public total (:func:`p_identity_loss` with ``known_total``) over B >= 0:
        the replace sensitivity of non-negative unit columns is 2 - 2 min_ij sum_r min(a_ri,
        a_rj) (L1) or sqrt(2 - 2 min_ij a_i^T a_j) (L2), 2 or sqrt(2) wherever two bins share
        no row, as far-apart bins do, so it is not in the loss.  Above, and for every other
        template, the add/remove loss.  Its own cache key (the strategy depends on the relation)."""
        if self.neighbours != "replace":
            return False
        return template in P_IDENTITY_NORMS or (template == "l2-optimal" and n <= L2_REPLACE_MAX_N)

    def cache_state(self, workload: Workload, template: str) -> str:
        """Whether the strategy of ``template`` for ``workload`` is in the disk cache:
        "cached" (the file loads and fits, :func:`_load`; its arrays are kept, so that building
        the strategy reads it once), "damaged" (a file that does not: it would be optimised
        again) or "absent"."""
        replace = self.replace_program(workload.n, template)
        path, saved = self._cached_arrays(workload, template, replace)
        if saved is None:
            return "damaged" if path.exists() else "absent"
        self._loaded[workload.n, template, replace] = (path, saved)
        return "cached"

    def _build(
        self, workload: Workload, template: str, *, replace: bool | None = None
    ) -> OptimizedStrategy | PIdentityStrategy:
        """The strategy of ``template`` (read from the disk cache or optimised), kept with the
        others built for the same choice (template auto compares two; the dense templates
        start from others), which its ``describe()`` reports (``also_built``).  ``replace``:
        optimised for replace neighbours (default :meth:`replace_program`)."""
        if replace is None:
            replace = self.replace_program(workload.n, template)
        strategy = self._obtain(workload, template, replace)
        strategy.optimised_for = "replace" if replace else "add_remove"
        built = self._built.setdefault((workload.n, self.resolved_template()), [])
        if all(other.template != template for other in built):
            built.append(strategy)
        strategy.built_with = built
        return strategy

    def _obtain(self, workload: Workload, template: str, replace: bool) -> OptimizedStrategy | PIdentityStrategy:
        n = workload.n
        p = self.extra_rows(n, template)
        path, saved = self._cached_arrays(workload, template, replace)
        if saved is not None:
            seconds, trace = float(saved["seconds"]), float(saved["trace"])
            if template in P_IDENTITY_NORMS:
                return PIdentityStrategy(saved["theta"], template, seconds, True, trace)
            dense = OptimizedStrategy(saved["strategy"], template, seconds, True, trace)
            adopted = "gram_inverse" in saved and dense.block.adopt_gram_inverse(saved["gram_inverse"])
            if adopted:
                dense.variance_terms = _saved_terms(saved)
            elif "gram_inverse" in saved:
                _warn_rejected_inverse(path, "it is computed again and the file rewritten")
            # complete: its inverse adopted, or none of this matrix would be (uncertified, or
            # ill-conditioned); else written before they were kept, or holding another's inverse
            if not ("variance_terms" in saved and (adopted or not dense.block.gram_inverse_checks_out())):
                _store_released_form(path, saved, dense, Gram(workload))
            return dense
        start = time.perf_counter()
        strategy: OptimizedStrategy | PIdentityStrategy
        if template in DENSE_TEMPLATES:
            matrix, trace = self._optimize_dense(workload, DENSE_TEMPLATES[template])
            seconds = time.perf_counter() - start
            strategy, arrays = OptimizedStrategy(matrix, template, seconds, False, trace), {"strategy": matrix}
        elif template in P_IDENTITY_NORMS:
            norm = P_IDENTITY_NORMS[template]
            theta, trace = optimize_p_identity(
                Gram(workload), p, restarts=self.restarts, norm=norm, known_total=replace
            )
            seconds = time.perf_counter() - start
            strategy, arrays = PIdentityStrategy(theta, template, seconds, False, trace), {"theta": theta}
        elif template == "l2-optimal":
            check_l2_optimum_bins(n)
            solve = l2_replace_optimum if replace else l2_optimum
            matrix, trace = solve(workload.gram())[:2]  # an n x n eigendecomposition a step, O(n^3)
            seconds = time.perf_counter() - start
            strategy, arrays = OptimizedStrategy(matrix, template, seconds, False, trace), {"strategy": matrix}
        else:
            gram = workload.gram()
            matrix = eigen_design(gram)
            seconds = time.perf_counter() - start
            trace = strategy_trace(matrix, gram)  # columns of L2 norm <= 1, the largest 1     O(n^3)
            strategy, arrays = OptimizedStrategy(matrix, template, seconds, False, trace), {"strategy": matrix}
        arrays = {**arrays, "seconds": np.array(seconds), "trace": np.array(trace)}
        if isinstance(strategy, OptimizedStrategy):
            strategy.stored = _store_released_form(path, arrays, strategy, Gram(workload))
        else:
            strategy.stored = _store(path, arrays)
        return strategy

    def _optimize_dense(self, workload: Workload, signed: bool) -> tuple[np.ndarray, float]:
        """The dense template (:mod:`dprange.optimized_dense`) from the (cached) p-Identity
        optimum, or the signed one from the (cached) dense optimum."""
        if workload.n > DENSE_MAX_N:
            raise ParameterError(
                f"the dense template is built for n <= {DENSE_MAX_N} bins, not {workload.n}; use template='p-identity'"
            )
        gram = workload.gram()
        if signed:  # from the (cached) non-negative optimum
            dense = self._build(workload, "dense")
            assert isinstance(dense, MatrixStrategy)
            return optimize_signed(gram, dense.explicit() / dense.factor)
        start = self._build(workload, "p-identity", replace=False)  # the dense templates' loss is add/remove's
        assert isinstance(start, PIdentityStrategy)
        matrix, trace, _ = optimize_dense_template(gram, start.theta, restarts=self.restarts)
        return matrix, trace

    def _auto_dense(self, workload: Workload, template: str) -> bool:
        """``auto`` (delta = 0) also builds the dense template for n <= AUTO_DENSE_MAX_N, or up
        to DENSE_MAX_N when it is cached (its optimisation is O(n^3) a step); not where the
        p-Identity strategy is optimised for replace neighbours (the dense template's loss is
        add/remove's: their traces are not comparable)."""
        n = workload.n
        if self.replace_program(n, template):
            return False
        return n <= AUTO_DENSE_MAX_N or (n <= DENSE_MAX_N and self.cache_state(workload, "dense") == "cached")

    def budget_fractions(self, strategy, epsilon) -> np.ndarray:
        return np.ones(1)

    def parameters(self) -> dict:
        workload = self.workload
        if isinstance(workload, Workload):  # the standard ones by name, others as described
            workload = workload.name if type(workload) in (AllRange, Prefix, Identity) else repr(workload)
        return {
            "workload": workload,
            "template": self.template,
            "rows": self.rows,
            "restarts": self.restarts,
            **super().parameters(),
        }

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.parameters().items())
        return f"Optimized({args})"


#: Largest n for which ``auto`` optimises a strategy when none is cached (all ranges at
#: n = 128: about a second with the library's default threads on a busy 2-core machine, where
#: n = 256 took 10 s); above it only a cached strategy is ranked.  The templates that became
#: fast since have their own limit (:func:`auto_optimise_limit`).
AUTO_OPTIMIZE_MAX_N = 128

#: Largest n for which ``auto`` optimises the p-Identity template (epsilon-DP, either relation)
#: and the exact L2 optimum ((epsilon, delta), add/remove) when none is cached: wall seconds on
#: the 2-core machine, cold, all ranges / prefixes: p-Identity 0.38 / 0.38 at 256 bins, 0.57 /
#: 0.57 at 512, 1.7 / 1.7 at 1024; the L2 optimum 0.27 / 0.51, 0.80 / 1.2, 2.4 / 2.9 (the L2
#: template, 1.0, 4.0, 8.0, keeps AUTO_OPTIMIZE_MAX_N).  At 1024 bins the best fixed strategy
#: has 1.49x the L2 optimum's variance on all ranges under (1, 1e-6).
AUTO_OPTIMIZE_FAST_MAX_N = 1024


def auto_optimise_limit(template: str, neighbours: str) -> int:
    """The largest n for which ``auto`` optimises ``template`` when it is not cached:
    AUTO_OPTIMIZE_FAST_MAX_N for p-identity and, under add/remove, l2-optimal (the replace
    program is slower), AUTO_OPTIMIZE_MAX_N for the others."""
    if template not in TEMPLATES:
        raise ParameterError(f"template must be one of {', '.join(TEMPLATES)}, not {template!r}")
    check_relation(neighbours)
    fast = template == "p-identity" or (template == "l2-optimal" and neighbours == "add_remove")
    return AUTO_OPTIMIZE_FAST_MAX_N if fast else AUTO_OPTIMIZE_MAX_N


#: ``auto`` (delta = 0) keeps the dense template only where its trace is below this fraction of
#: the p-Identity strategy's: its release goes through the dense covariance (O(n^3)) where
#: p-Identity's is O(n p^2); measured gains: all ranges under 0.1%, prefixes 0-0.5%, the
#: unusual workloads of benchmarks/optimized.py under 0.1% at n = 256.
AUTO_DENSE_GAIN = 0.99

#: Largest n for which ``auto`` (delta = 0) optimises the dense template when it is not cached:
#: 0.1 s CPU at 64 bins (all ranges), where prefixes at 128 take 3 s for a 0.5% lower trace.
AUTO_DENSE_MAX_N = 64

#: Largest n for which ``auto`` ranks a cached L2 optimum ((epsilon, delta)), and for which
#: template auto builds it: every n it is solved for.  Its release goes through the dense
#: covariance (10^6 records at 4096 bins: about 16 s on one thread, where a p-Identity strategy's
#: Woodbury release takes 0.03-0.15 s, benchmarks/optimized.py).
AUTO_CACHED_MAX_N = L2_OPTIMUM_MAX_N


def auto_candidates(workload: Workload, delta: float, *, neighbours: str, noise: str) -> list[Optimized]:
    """The optimised mechanisms ``select`` ranks for ``workload`` (it keeps the one of least
    exact error): p-Identity (L1) when delta = 0; when delta > 0 the exact L2 optimum, and under
    replace its L2 template too (under add/remove the template is a point of the optimum's
    program, as for template auto, :meth:`Optimized._optimum_alone`).  Each for n up to
    :func:`auto_optimise_limit`, or, when its strategy is already in the disk cache, up to
    DENSE_COVARIANCE_LIMIT (p-Identity) or AUTO_CACHED_MAX_N (L2 optimum)."""
    return auto_pool(workload, delta, neighbours=neighbours, noise=noise)[0]


def auto_pool(workload: Workload, delta: float, *, neighbours: str, noise: str):
    """(the candidates of :func:`auto_candidates`, [(mechanism, reason)] for those it leaves out
    only because their strategy is not in the disk cache yet: ``select`` lists them as excluded)."""
    n = workload.n
    if delta == 0:
        templates: tuple[str, ...] = ("p-identity",)
    else:
        templates = ("l2-optimal",) if neighbours == "add_remove" else ("p-identity-l2", "l2-optimal")
    ranked, not_cached = [], []
    for template in templates:
        mech = Optimized(workload, template=template, neighbours=neighbours, noise=noise)
        dense_limit = min(DENSE_COVARIANCE_LIMIT, AUTO_CACHED_MAX_N)
        limit = DENSE_COVARIANCE_LIMIT if template in P_IDENTITY_NORMS else dense_limit
        if n > limit:
            continue
        optimise_limit = auto_optimise_limit(template, neighbours)
        state = mech.cache_state(workload, template) if n > optimise_limit else "cached"
        if state != "cached":  # a damaged file is not cached: ranking it would optimise here
            reason = NOT_CACHED_REASON if state == "absent" else DAMAGED_CACHE_REASON
            not_cached.append((mech, reason.format(n=n, limit=optimise_limit)))
            continue
        ranked.append(mech)
    return ranked, not_cached


#: Why ``auto`` did not rank an optimised strategy (:func:`auto_pool`).
NOT_CACHED_REASON = (
    "no cached strategy for {n} bins (auto optimises only up to {limit} bins; about 16 s at 4096); "
    "name it (mechanism='optimized', --mechanisms optimized) to optimise and cache it, then auto ranks it"
)

#: Why ``auto`` did not rank an optimised strategy whose cache file does not load or fit.
DAMAGED_CACHE_REASON = (
    "the cached strategy for {n} bins is damaged (unreadable, or not what an optimisation writes) and auto "
    "optimises only up to {limit} bins; name it (mechanism='optimized', --mechanisms optimized) to optimise "
    "it again and replace the file, then auto ranks it"
)


def auto_candidate(workload: Workload, delta: float, *, neighbours: str, noise: str) -> Optimized | None:
    """The first of :func:`auto_candidates`, or None."""
    found = auto_candidates(workload, delta, neighbours=neighbours, noise=noise)
    return found[0] if found else None


def _no_candidates(n, *, neighbours, noise, fast) -> list:
    """``auto`` ranks the optimised mechanism with its workload (:func:`auto_candidates`, added
    by :func:`dprange.analysis.select`), not from n alone."""
    return []


MECHANISMS.add(
    Optimized,
    summary="the matrix mechanism with a strategy optimised for the workload (p-Identity with L1 columns "
    "for epsilon-DP, L2 columns or the exact L2 optimum for (epsilon, delta)), cached on disk",
    citation=Citation(
        "McKenna, Miklau, Hay and Machanavajjhala",
        "Optimizing error of high-dimensional statistical queries under differential privacy",
        "VLDB 2018",
    ),
    auto=True,
    candidates=_no_candidates,
)
