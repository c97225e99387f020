"""Published marginals as equality constraints C x = d on a flattened (C-order) k-D table:
the rows of C, their validation and the orthogonal projection onto {x : C x = d}, shared by
table releases (:mod:`dprange.mechanisms.tables`) and constrained k-D releases
(:mod:`dprange.answers.constrained`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..errors import ParameterError


def marginal_rows(shape: tuple, axes) -> np.ndarray:
    """For every cell of the flattened (C-order) table, the index of the marginal cell over
    the kept ``axes`` (sorted) that contains it.  O(cells)."""
    shape = tuple(int(s) for s in shape)
    kept = tuple(sorted(int(a) for a in axes))
    index = np.indices(shape).reshape(len(shape), -1)
    if not kept:
        return np.zeros(index.shape[1], dtype=np.int64)
    return np.ravel_multi_index(tuple(index[a] for a in kept), tuple(shape[a] for a in kept)).astype(np.int64)


def marginal_matrix(shape: tuple, axes) -> sp.csr_matrix:
    """Sparse 0/1 rows that map the flattened (C-order) table to its marginal over ``axes``
    (the kept axes, in the order of the marginal array ``table.sum(other axes)``).  O(cells)."""
    shape = tuple(int(s) for s in shape)
    kept_size = math.prod(shape[int(a)] for a in axes)
    rows = marginal_rows(shape, axes)
    size = rows.size
    return sp.csr_matrix((np.ones(size), (rows, np.arange(size))), shape=(kept_size, size))


def _gram_pinv(C) -> np.ndarray:
    """Pseudo-inverse of C C^T (k x k, symmetric PSD): marginals sharing their totals make C
    rank-deficient, and d = C x_true is consistent, so the least-norm multiplier is exact."""
    return scipy.linalg.pinvh((C @ C.T).toarray())


def project_onto_marginals(v: np.ndarray, C, d: np.ndarray, gram_pinv: np.ndarray) -> np.ndarray:
    """Orthogonal projection of v onto {x : C x = d}: v - C^T (C C^T)^+ (C v - d)."""
    return v - C.T @ (gram_pinv @ (C @ v - d))


@dataclass(frozen=True)
class MarginalConstraints:
    """Published marginals as equality constraints C x = d on the flattened table.

    ``axes``: the kept axes of each published marginal (sorted); ``matrix``: C, their
    stacked :func:`marginal_matrix` rows; ``values``: d; ``gram_pinv``: (C C^T)^+.  No
    published marginal: C has no rows and every method is unconstrained.
    """

    shape: tuple
    axes: list
    matrix: sp.csr_matrix
    values: np.ndarray
    gram_pinv: np.ndarray

    @classmethod
    def build(cls, shape: tuple, axes: list, published: list) -> MarginalConstraints:
        """C, d and (C C^T)^+ for the published marginals; ParameterError when they disagree."""
        cells = math.prod(shape)
        if not axes:
            return cls(tuple(shape), [], sp.csr_matrix((0, cells)), np.zeros(0), np.zeros((0, 0)))
        C = sp.vstack([marginal_matrix(shape, a) for a in axes]).tocsr()
        d = np.concatenate([np.ravel(v) for v in published]).astype(float)
        gram_pinv = _gram_pinv(C)
        residual = C @ (C.T @ (gram_pinv @ d)) - d
        if np.max(np.abs(residual)) > 1e-9 * max(1.0, float(np.max(np.abs(d)))):
            raise ParameterError(
                "the published marginals disagree with one another (e.g. different totals); no table meets them all"
            )
        return cls(tuple(shape), list(axes), C, d, gram_pinv)

    def project(self, v: np.ndarray) -> np.ndarray:
        """The orthogonal projection of the flattened table ``v`` onto {x : C x = d}."""
        if not self.axes:
            return np.array(v, dtype=float)
        return project_onto_marginals(v, self.matrix, self.values, self.gram_pinv)

    def residual_norms(self, weights: np.ndarray) -> np.ndarray:
        """||P w||^2 for every row w of ``weights`` (q x cells), P = I - C^T (C C^T)^+ C."""
        w = np.atleast_2d(np.asarray(weights, dtype=float))
        if self.axes:
            cw = self.matrix @ w.T  # k x q
            w = w - (self.matrix.T @ (self.gram_pinv @ cw)).T
        return np.sum(w * w, axis=1)

    def determines(self, axes) -> bool:
        """Whether the marginal over ``axes`` is fixed by a published one (its axes contain them)."""
        return any(set(axes) <= set(published) for published in self.axes)


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
