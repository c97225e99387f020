"""Non-negative (weighted) least squares for any strategy.

minimise ||D (A x - y)||_2^2 subject to x >= 0 (and sum x = total): the alpha = 0 case of the
ADMM solver in :mod:`.l1_admm`, with the same fast tree x-step.  A projection of the GLS
estimate would not be the least-squares solution; this is.
"""

from __future__ import annotations

from .l1_admm import ADMMResult, admm


def nnls(A, y, weights=None, *, total=None, x_update=None, tol: float = 1e-8, maxiter: int = 20000, x0=None) -> ADMMResult:
    """Weighted NNLS (optionally with a public total) by ADMM; see :func:`.l1_admm.admm`."""
    return admm(A, y, weights, alpha=0.0, nonnegative=True, total=total, x_update=x_update, tol=tol,
                maxiter=maxiter, x0=x0)
