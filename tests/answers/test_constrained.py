"""dprange.answers.constrained: any Kronecker / Privelet / Fourier release constrained to published
marginals equals the dense GLS on the constraint set (null-space parameterisation; issue 10,
item 7)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from _helpers import box_matrix, every_rectangle, stacked

from dprange.answers.constrained import constrain
from dprange.inference.marginal_constraints import marginal_matrix
from dprange.mechanisms.fourier import FourierMarginals
from dprange.mechanisms.grid import Kronecker, load_grid_release


def dense_constrained_gls(meas, C, d):
    """GLS over {x : C x = d} (and 1^T x = total when public) by x = x0 + N z, N a basis of
    the null space of C: z by weighted least squares.  Returns (x, covariance)."""
    A, y, v = stacked(meas)
    cells = A.shape[1]
    if meas.total is not None:
        C, d = np.vstack([C, np.ones((1, cells))]), np.append(d, meas.total)
    x0 = np.linalg.lstsq(C, d, rcond=None)[0]
    N = scipy.linalg.null_space(C)
    H = N.T @ (A.T @ (A / v[:, None])) @ N
    Hinv = np.linalg.pinv(H, hermitian=True)
    z = Hinv @ (N.T @ (A.T @ ((y - A @ x0) / v)))
    return x0 + N @ z, N @ Hinv @ N.T


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize(
    "mech",
    [
        lambda r: Kronecker([2, "haar", 2], budget="geometric", neighbours=r, noise="laplace_float"),
        lambda r: Kronecker("identity", neighbours=r),
        lambda r: FourierMarginals(2, neighbours=r, noise="laplace_float"),
    ],
)
def test_constrained_release_equals_dense_gls_on_the_constraint_set(mech, relation, rng):
    shape = (3, 4, 2)
    counts = rng.integers(0, 9, size=shape)
    release = mech(relation).release(counts, 1.0, rng=5)
    public = {(0,): counts.sum(axis=(1, 2)), (2, 1): counts.sum(axis=0).T}  # published elsewhere
    constrained = constrain(release, public)
    C = np.vstack([marginal_matrix(shape, (0,)).toarray(), marginal_matrix(shape, (1, 2)).toarray()])
    d = np.concatenate([counts.sum(axis=(1, 2)), counts.sum(axis=0).ravel()]).astype(float)
    x, cov = dense_constrained_gls(release.measurements, C, d)
    lows, highs = every_rectangle(shape)
    Q = box_matrix(shape, lows, highs)
    restricted = ((lows > 0) | (highs < np.array(shape) - 1)).sum(axis=1)
    ok = restricted <= 2  # every rectangle is estimable but for order-2 Fourier's 3-way ones
    np.testing.assert_allclose(Q[ok] @ constrained.counts.ravel(), Q[ok] @ x, atol=1e-7)
    np.testing.assert_allclose(
        constrained.rectangle(lows[ok], highs[ok]).variance, np.einsum("ri,ij,rj->r", Q[ok], cov, Q[ok]), atol=1e-8
    )
    np.testing.assert_allclose(constrained.marginal(0).value, counts.sum(axis=(1, 2)), atol=1e-8)
    assert np.all(constrained.marginal((1, 2)).stderr < 1e-6) and np.all(constrained.marginal(1).stderr < 1e-6)
    assert np.all(constrained.marginal((0, 1)).stderr > 0.1)  # not published: still noisy, but less
    assert np.all(constrained.marginal((0, 1)).variance <= release.marginal((0, 1)).variance + 1e-9)
    cells = np.indices((3, 4)).reshape(2, -1).T  # the marginal's one-pass variances equal the rectangles'
    lo = np.column_stack([cells, np.zeros(12, int)])
    hi = np.column_stack([cells, np.ones(12, int)])
    np.testing.assert_allclose(
        constrained.marginal((0, 1)).variance.ravel(),
        constrained.estimate.rectangle_variance(lo, hi),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(
        constrained.marginal((1, 0)).variance, constrained.marginal((0, 1)).variance.T, rtol=1e-12, atol=1e-12
    )
    back = load_grid_release(constrained.to_json())
    np.testing.assert_allclose(back.counts, constrained.counts, atol=1e-9)
    np.testing.assert_allclose(back.marginal((0, 1)).stderr, constrained.marginal((0, 1)).stderr, rtol=1e-9)
