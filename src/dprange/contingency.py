"""Contingency tables with public marginals (Lee, Wang, Kifer 2015, seed 004, Algorithm 2).

A k-way table of counts is released cell by cell with (discrete) Laplace noise; some of its
marginals are public (for instance the sample size M0 or the one-way marginals M1, section
5.1).  Post-processing makes the noisy table consistent with them: least squares (the
orthogonal projection onto {x : C x = d}), non-negative least squares, or maximum likelihood
(L1, alpha = 0.9 elastic net by default, the paper's setting) by ADMM, where each row of C
sums the cells of one marginal cell.

Departure from Algorithm 2: the paper puts C x = d in the augmented Lagrangian (a dual
variable eta and a Cholesky factor of C^T C + 2 I); we impose it exactly in the x-step,
which for the identity strategy is a closed form, :func:`marginal_x_update`.  Every iterate
is then consistent and the returned table satisfies the marginals to rounding error.

Privacy: add/remove neighbours (one record added or removed), one record changes one cell by 1
(L1 and L2 sensitivity 1), so the noise scale is 1/epsilon (rounded up so that the loss never
exceeds epsilon), and the noisy table is epsilon-DP.  The public marginals are *inputs*: the
caller passes the published values, which dprange never computes from the table (computing
them would publish them exactly).  Making the noisy table consistent with them is
post-processing of the noisy table and of public values, so the release is epsilon-DP; the
privacy of the marginals themselves is whatever their publisher guaranteed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ._validation import check_epsilon, check_noise_scale
from .errors import ParameterError
from .inference.l1_admm import ADMMResult, admm
from .noise import NoiseSpec, SecureRandom, resolve_rng


def marginal_matrix(shape: tuple, axes) -> sp.csr_matrix:
    """Sparse 0/1 rows that map the flattened (C-order) table to its marginal over ``axes``
    (the kept axes, in the order of the marginal array ``table.sum(other axes)``).  O(cells)."""
    shape = tuple(int(s) for s in shape)
    kept = tuple(sorted(int(a) for a in axes))
    index = np.indices(shape).reshape(len(shape), -1)
    kept_shape = tuple(shape[a] for a in kept)
    rows = np.ravel_multi_index(tuple(index[a] for a in kept), kept_shape) if kept else np.zeros(index.shape[1], int)
    size = index.shape[1]
    return sp.csr_matrix((np.ones(size), (rows, np.arange(size))), shape=(int(np.prod(kept_shape)), size))


def _gram_pinv(C) -> np.ndarray:
    """Pseudo-inverse of C C^T (k x k, symmetric PSD): marginals sharing their totals make C
    rank-deficient, and d = C x_true is consistent, so the least-norm multiplier is exact."""
    return scipy.linalg.pinvh((C @ C.T).toarray())


def project_onto_marginals(v: np.ndarray, C, d: np.ndarray, gram_pinv: np.ndarray) -> np.ndarray:
    """Orthogonal projection of v onto {x : C x = d}: v - C^T (C C^T)^+ (C v - d)."""
    return v - C.T @ (gram_pinv @ (C @ v - d))


def marginal_x_update(C, d, weight: float, gram_pinv: np.ndarray | None = None):
    """ADMM x-step for the identity strategy under C x = d, O(nnz(C) + k^2) per call.

    argmin_{Cx=d} w^2 ||x - t_r / w||^2 + c ||x - t_x||^2 is the projection of
    (w t_r + c t_x) / (w^2 + c) onto the affine set (equal weights make it orthogonal).
    """
    gram_pinv = _gram_pinv(C) if gram_pinv is None else gram_pinv

    def solve(target_rows, target_x, x_prev, split=1.0):
        v = (weight * target_rows + split * target_x) / (weight**2 + split)
        return project_onto_marginals(v, C, d, gram_pinv)

    return solve


@dataclass
class TableRelease:
    """A released contingency table: the post-processed ``table``, the raw ``noisy`` cells,
    the noise, the inference used, the public marginals (kept axes) and, for NNLS / L1, the
    ADMM record ``result``."""

    table: np.ndarray
    noisy: np.ndarray
    noise: NoiseSpec
    inference: str
    public_marginals: list
    epsilon: float
    result: ADMMResult | None = None
    seeded: bool = False

    def marginal(self, axes) -> np.ndarray:
        """The estimate's marginal over the kept ``axes``."""
        drop = tuple(a for a in range(self.table.ndim) if a not in tuple(axes))
        return self.table.sum(axis=drop)

    def cell_variance(self) -> float | None:
        """Exact per-cell variance of the raw noisy table (the GLS table's variance is this times
        the diagonal of I - C^T (C C^T)^+ C; NNLS / L1 have no closed form)."""
        return self.noise.variance


def cell_noise(epsilon: float, noise: str) -> NoiseSpec:
    """Noise of scale 1/epsilon (sensitivity 1), rounded up until 1/scale <= epsilon exactly."""
    scale = 1.0 / epsilon
    check_noise_scale(scale, epsilon, "every cell")
    while 1 / Fraction(scale) > Fraction(epsilon):
        scale = math.nextafter(scale, math.inf)
    return NoiseSpec(noise, scale)


def published_marginals(public_marginals, shape: tuple) -> tuple[list, list]:
    """Validate ``{kept axes: published values}``: the axes (sorted) and the values, each
    transposed to the order of ``marginal_matrix`` (sorted kept axes)."""
    if not isinstance(public_marginals, dict):
        raise ParameterError(
            "public_marginals must map kept axes to their published values, e.g. {(0,): row_totals}; "
            "dprange never computes them from the table (that would publish them exactly)"
        )
    axes_list, values_list = [], []
    for axes, values in public_marginals.items():
        axes = tuple(int(a) for a in np.atleast_1d(np.asarray(axes, dtype=int)))
        if any(a < 0 or a >= len(shape) for a in axes) or len(set(axes)) != len(axes):
            raise ParameterError(
                f"marginal axes {axes} do not fit a {len(shape)}-way table; use axes 0..{len(shape) - 1}"
            )
        expected = tuple(shape[a] for a in axes)
        values = np.asarray(values, dtype=float)
        if values.shape != expected:
            raise ParameterError(
                f"the published marginal over axes {axes} has shape {values.shape}; it must have shape {expected}"
            )
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ParameterError(f"the published marginal over axes {axes} must be finite and non-negative")
        order = np.argsort(axes)
        axes_list.append(tuple(sorted(axes)))
        values_list.append(np.transpose(values, order) if values.ndim else values)
    return axes_list, values_list


def release_table(
    table,
    epsilon,
    *,
    public_marginals=None,
    inference: str = "gls",
    noise: str = "discrete_laplace",
    alpha: float = 0.9,
    rng=None,
    tol: float = 1e-7,
    maxiter: int = 20000,
) -> TableRelease:
    """Release a k-way table of counts, consistent with published marginals.

    ``public_marginals`` maps tuples of kept axes to their *published* values, e.g.
    ``{(): n}`` for a public sample size M0, ``{(0,): rows, (1,): cols}`` for the one-way
    marginals M1; the values must have the marginal's shape (axes in the order given) and
    agree with one another.  ``inference``: ``"gls"`` (projection), ``"nnls"`` or ``"l1"``
    (ADMM, non-negative, ``alpha`` as in seed 004).  epsilon-DP for add/remove neighbours (see
    the module doc).  Cost: GLS O(cells k + k^3); ADMM O(iterations x (cells k + k^2)),
    k = number of public marginal cells.
    """
    counts = np.asarray(table)
    if counts.ndim < 1 or counts.size == 0 or counts.dtype.kind not in "iuf" or np.any(counts < 0):
        raise ParameterError("the table must be a non-empty array of non-negative counts")
    epsilon = check_epsilon(epsilon)
    if inference not in ("gls", "nnls", "l1"):
        raise ParameterError(f"inference must be gls, nnls or l1, got {inference!r}")
    if noise not in ("discrete_laplace", "laplace_float"):
        raise ParameterError(f"noise must be discrete_laplace or laplace_float, got {noise!r}")
    if noise == "discrete_laplace" and counts.dtype.kind == "f" and np.any(counts != np.round(counts)):
        raise ParameterError(
            "discrete Laplace noise needs integer counts; round the table or use noise='laplace_float'"
        )
    if not 0.0 <= alpha <= 1.0:
        raise ParameterError(f"alpha must be in [0, 1], got {alpha}")
    marginals, published = published_marginals({} if public_marginals is None else public_marginals, counts.shape)
    spec = cell_noise(epsilon, noise)
    C = None
    d: Any = None  # d and gram_pinv are set with C
    gram_pinv: Any = None
    if marginals:
        C = sp.vstack([marginal_matrix(counts.shape, axes) for axes in marginals]).tocsr()
        d = np.concatenate([np.ravel(v) for v in published])
        gram_pinv = _gram_pinv(C)
        residual = C @ (C.T @ (gram_pinv @ d)) - d
        if np.max(np.abs(residual)) > 1e-9 * max(1.0, float(np.max(np.abs(d)))):
            raise ParameterError(
                "the published marginals disagree with one another (e.g. different totals); no table meets them all"
            )
    flat = counts.astype(float).ravel()
    noisy = flat + spec.sample(flat.shape, resolve_rng(rng))
    result = None
    if inference == "gls":
        estimate = noisy if C is None else project_onto_marginals(noisy, C, d, gram_pinv)
    else:
        size = flat.size
        identity = sp.identity(size, format="csr")
        weight = 1.0 / spec.scale  # 1 / (noise scale): the Laplace likelihood weight
        if C is None:
            x_update = marginal_x_update(sp.csr_matrix((0, size)), np.zeros(0), weight, np.zeros((0, 0)))
        else:
            x_update = marginal_x_update(C, d, weight, gram_pinv)
        start = noisy if C is None else project_onto_marginals(noisy, C, d, gram_pinv)
        result = admm(
            identity,
            noisy,
            np.full(size, weight),
            alpha=0.0 if inference == "nnls" else alpha,
            x_update=x_update,
            tol=tol,
            maxiter=maxiter,
            x0=np.maximum(start, 0.0),
        )
        # ADMM returns its non-negative split w; the x iterate meets C x = d exactly and
        # w - x -> 0, so w meets the marginals to the stopping tolerance.
        estimate = result.x
    seeded = rng is not None and not isinstance(rng, SecureRandom)
    return TableRelease(
        estimate.reshape(counts.shape), noisy.reshape(counts.shape), spec, inference, marginals, epsilon, result, seeded
    )
