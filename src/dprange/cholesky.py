"""Certified Cholesky factorisations of dense Gram matrices: the rank check, the inverse and
the covariance of the dense release (:mod:`dprange.mechanisms.matrix`, :class:`dprange.operators.Explicit`,
:mod:`dprange.inference.least_squares`) without a singular value decomposition."""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .errors import ParameterError

#: :func:`well_conditioned_cholesky` certifies a least eigenvalue above this fraction of the trace.
CERTIFIED_EIGENVALUE = 1e-10


def well_conditioned_cholesky(gram: np.ndarray, relative: float = CERTIFIED_EIGENVALUE):
    """A Cholesky factor of the symmetric ``gram`` (scipy's ``cho_factor`` form) when its least
    eigenvalue is certified above ``relative`` times its trace, else None.

    The certificate: the Cholesky factorisation of gram - delta I, delta = relative trace,
    succeeds; it is backward stable (the factor is exact for a matrix within about n eps of
    gram's norm, far below delta), so every eigenvalue of gram exceeds delta minus that.  O(n^3)
    (n^3 / 3 flops twice), against an SVD or eigendecomposition for a rank or a pseudo-inverse."""
    delta = relative * float(np.trace(gram))
    if not delta > 0:
        return None
    try:
        linalg.cho_factor(gram - delta * np.eye(gram.shape[0]), check_finite=False)
        return linalg.cho_factor(gram, check_finite=False)
    except linalg.LinAlgError:
        return None


def cholesky_inverse(factor) -> np.ndarray:
    """G^-1 from a Cholesky factor of G (scipy's ``cho_factor`` form) by LAPACK's potri:
    2 n^3 / 3 flops, a third of solving against the identity."""
    c, lower = factor
    inverse, info = linalg.lapack.dpotri(c, lower=lower)
    if info != 0:
        raise ParameterError("the Gram matrix is singular")  # never after a successful factorisation
    triangle = np.tril(inverse) if lower else np.triu(inverse)
    return triangle + triangle.T - np.diag(np.diag(triangle))
