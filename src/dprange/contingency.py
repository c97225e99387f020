"""Contingency tables with public marginals (Lee, Wang, Kifer 2015, seed 004, Algorithm 2).

A k-way table of counts is released cell by cell with (discrete) Laplace noise; some of its
marginals are public (for instance the totals of a census).  Post-processing makes the
noisy table consistent with them: least squares (the orthogonal projection onto
{x : C x = d}), non-negative least squares, or maximum likelihood (L1, alpha = 0.9 elastic
net by default) by ADMM with the equality constraints C x = d, where each row of C sums the
cells of one marginal cell.

Privacy: add/remove neighbours, one record changes one cell by 1 (sensitivity 1).  The
public marginals are public by assumption: they cost no budget and must be published anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ._validation import check_epsilon
from .errors import ParameterError
from .inference.l1_admm import admm
from .noise import NoiseSpec, resolve_rng


def marginal_matrix(shape: tuple, axes: tuple) -> np.ndarray:
    """Rows that sum the flattened table into its marginal over ``axes`` (kept axes)."""
    size = int(np.prod(shape))
    cells = np.arange(size).reshape(shape)
    kept = tuple(sorted(axes))
    dropped = tuple(a for a in range(len(shape)) if a not in kept)
    groups = np.moveaxis(cells, kept + dropped, range(len(shape))).reshape(int(np.prod([shape[a] for a in kept] or [1])), -1)
    C = np.zeros((groups.shape[0], size))
    C[np.repeat(np.arange(groups.shape[0]), groups.shape[1]), groups.ravel()] = 1.0
    return C


@dataclass
class TableRelease:
    """A released contingency table."""

    table: np.ndarray
    noisy: np.ndarray
    noise: NoiseSpec
    inference: str
    public_marginals: list

    def marginal(self, axes) -> np.ndarray:
        drop = tuple(a for a in range(self.table.ndim) if a not in tuple(axes))
        return self.table.sum(axis=drop)


def release_table(table, epsilon, *, public_marginals=(), inference: str = "gls", noise: str = "discrete_laplace",
                  alpha: float = 0.9, rng=None, tol: float = 1e-7) -> TableRelease:
    """Release a k-way table consistent with its public marginals (see module doc)."""
    counts = np.asarray(table)
    if counts.ndim < 1 or counts.size == 0 or counts.dtype.kind not in "iuf" or np.any(counts < 0):
        raise ParameterError("the table must be a non-empty array of non-negative counts")
    epsilon = check_epsilon(epsilon)
    if inference not in ("gls", "nnls", "l1"):
        raise ParameterError(f"inference must be gls, nnls or l1, got {inference!r}")
    if noise not in ("discrete_laplace", "laplace"):
        raise ParameterError("noise must be discrete_laplace or laplace")
    marginals = [tuple(int(a) for a in axes) for axes in public_marginals]
    for axes in marginals:
        if any(a < 0 or a >= counts.ndim for a in axes) or len(set(axes)) != len(axes):
            raise ParameterError(f"marginal axes {axes} do not fit a {counts.ndim}-way table")
    spec = NoiseSpec(noise, 1.0 / epsilon)
    flat = counts.astype(float).ravel()
    noisy = flat + spec.sample(flat.shape, resolve_rng(rng))
    if marginals:
        C = np.vstack([marginal_matrix(counts.shape, axes) for axes in marginals])
        d = C @ flat
        # drop linearly dependent rows (marginals share their totals)
        _, r, piv = scipy.linalg.qr(C.T, mode="economic", pivoting=True)
        rank = int(np.sum(np.abs(np.diag(r)) > 1e-9 * max(1.0, np.abs(r).max())))
        keep = np.sort(piv[:rank])
        C, d = C[keep], d[keep]
    else:
        C = d = None
    if inference == "gls":
        estimate = noisy if C is None else noisy - C.T @ np.linalg.solve(C @ C.T, C @ noisy - d)
    else:
        equality = None if C is None else (C, d)
        result = admm(np.eye(flat.size), noisy, np.full(flat.size, epsilon), alpha=0.0 if inference == "nnls" else alpha,
                      equality=equality, tol=tol, maxiter=20000)
        estimate = result.x
    return TableRelease(estimate.reshape(counts.shape), noisy.reshape(counts.shape), spec, inference, marginals)
