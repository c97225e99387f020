"""Non-negative (weighted) least squares for any strategy.

    minimise ||D (A x - y)||_2^2  subject to  x >= 0  (and sum x = total, or C x = d)

This is the alpha = 0 case of the ADMM solver of Lee, Wang, Kifer (KDD 2015,
section 4) in :mod:`.l1_admm`: the r-step becomes a linear shrink and everything else,
including the exact O(nodes) tree x-step (:func:`.l1_admm.tree_x_update`, Algorithm 3's
projection), is shared.  Note that clipping the GLS estimate at zero is *not* the
non-negative least-squares solution; this is (it matches ``scipy.optimize.nnls`` to the
stopping tolerance, see tests/inference/test_nnls.py).
"""

from __future__ import annotations

from .l1_admm import ADMMResult, admm


def nnls(
    A,
    y,
    weights=None,
    *,
    total=None,
    equality=None,
    x_update=None,
    tol: float = 1e-8,
    maxiter: int = 20000,
    x0=None,
    rho: float = 2.0,
) -> ADMMResult:
    """Weighted NNLS by ADMM, with an optional public total or equality constraints.

    ``A`` is a dense or sparse matrix or a LinearOperator (p x n), ``y`` the p measurements,
    ``weights`` the per-row 1/b_i (default 1), ``total`` a known sum of x, ``equality`` a
    pair (C, d) for C x = d (dense KKT, n <= 5000), ``x_update`` a custom least-squares step
    (e.g. ``tree_x_update(strategy, level_weights, total=...)`` for trees).  Returns the
    :class:`ADMMResult` (``.x`` >= 0, ``.converged``, residual histories).
    """
    return admm(
        A,
        y,
        weights,
        alpha=0.0,
        nonnegative=True,
        total=total,
        equality=equality,
        x_update=x_update,
        tol=tol,
        maxiter=maxiter,
        x0=x0,
        rho=rho,
    )
