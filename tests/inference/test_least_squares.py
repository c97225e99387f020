"""dprange.inference.least_squares: least squares by a cached (A^T A)^-1 (inverse_gls) against the
exact solution and covariance, range variances from the unformed covariance, the dense
covariance by Cholesky against the pseudo-inverse, and packed integer strategies."""

import base64
import zlib

import numpy as np
import pytest
from _helpers import integer_strategy

import dprange
from dprange.inference.least_squares import DenseGLSEstimate, dense_covariance, inverse_gls
from dprange.mechanisms.optimized import auto_optimise_limit
from dprange.operators import Explicit
from dprange.optimize import cache as optimized

# ----------------------------------------------------------------------------- least squares by the inverse


def constrained_least_squares(A: np.ndarray, y: np.ndarray, total: float) -> np.ndarray:
    """argmin ||A x - y|| subject to 1^T x = total, from the KKT system."""
    n = A.shape[1]
    kkt = np.block([[A.T @ A, np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
    return np.linalg.solve(kkt, np.concatenate([A.T @ y, [total]]))[:n]


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("total", [None, 123.0])
def test_inverse_gls_is_the_least_squares_solution_and_its_covariance(total):
    rng = np.random.default_rng(3)
    A = integer_strategy(40, 15, 3)
    y = A @ rng.integers(0, 50, 15) + rng.normal(0.0, 4.0, 40)
    x, covariance = inverse_gls(A, np.linalg.inv(A.T @ A), y, 2.5, total=total)
    expected = np.linalg.lstsq(A, y, rcond=None)[0] if total is None else constrained_least_squares(A, y, total)
    np.testing.assert_allclose(x, expected, rtol=1e-11, atol=1e-9)
    if total is not None:
        assert x.sum() == pytest.approx(total, rel=1e-13)
    np.testing.assert_allclose(covariance(), dense_covariance(A, 2.5, total is not None), rtol=1e-9, atol=1e-12)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("total", [None, 123.0])
def test_range_variances_from_the_unformed_covariance_are_those_of_the_covariance(total):
    """The prefix sums the range variances read are taken from S row by row (ScaledInverse),
    without the n x n covariance: they equal the cumulative sums of the covariance itself, and
    every range's variance equals q^T C q; the covariance is not formed by asking for ranges."""
    from dprange.inference.least_squares import ScaledInverse, prefix_sums_2d

    A = integer_strategy(40, 15, 4)
    y = A @ np.arange(15.0)
    x, lazy = inverse_gls(A, np.linalg.inv(A.T @ A), y, 2.5, total=total)
    assert isinstance(lazy, ScaledInverse)
    covariance = lazy()
    reference = np.zeros((16, 16))
    reference[1:, 1:] = covariance.cumsum(axis=0).cumsum(axis=1)
    np.testing.assert_allclose(lazy.prefix_sums(), reference, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(prefix_sums_2d(covariance), reference, rtol=1e-12, atol=1e-12)
    estimate = DenseGLSEstimate(Explicit(A), 2.5, x, total is not None, lazy)
    lo, hi = np.triu_indices(15)
    Q = (np.arange(15)[None, :] >= lo[:, None]) & (np.arange(15)[None, :] <= hi[:, None])
    exact = np.einsum("ij,jk,ik->i", Q, covariance, Q)
    np.testing.assert_allclose(estimate.range_variance(lo, hi), np.maximum(exact, 0), rtol=1e-9, atol=1e-12)
    assert estimate._covariance is lazy  # ranges did not form the covariance
    with pytest.raises(dprange.errors.ParameterError, match="square matrix"):
        prefix_sums_2d(np.ones((3, 4)))
    with pytest.raises(dprange.errors.ParameterError, match="explicit strategy block"):
        optimized.adopt_cached_inverse(np.eye(3))


@pytest.mark.usefixtures("private_cache")
def test_a_damaged_packed_strategy_is_refused():
    from dprange.errors import ParameterError
    from dprange.inference.least_squares import pack_integers, unpack_integers

    A = np.arange(12.0).reshape(3, 4)
    text = pack_integers(A)
    with pytest.raises(ParameterError, match="exactly 3 x 5"):
        unpack_integers(text, (3, 5))  # fewer entries than the shape
    with pytest.raises(ParameterError, match="exactly 2 x 4"):
        unpack_integers(text, (2, 4))  # more: decompression stops past the shape
    with pytest.raises(ParameterError, match="does not decode"):
        unpack_integers("not base64!", (3, 4))
    with pytest.raises(ParameterError, match="does not decode"):
        unpack_integers(base64.b64encode(b"plain bytes").decode(), (3, 4))
    bomb = base64.b64encode(zlib.compress(bytes(10**7))).decode()  # 10 MB of zeros in 10 kB
    with pytest.raises(ParameterError, match="exactly 3 x 4"):
        unpack_integers(bomb, (3, 4))
    with pytest.raises(ParameterError, match="integer"):
        pack_integers(A + 0.5)


@pytest.mark.usefixtures("private_cache")
def test_new_helpers_refuse_bad_input():
    from dprange.errors import ParameterError

    with pytest.raises(ParameterError, match="template must be one of"):
        auto_optimise_limit("p-identty", "add_remove")
    with pytest.raises(ParameterError, match="neighbours"):
        auto_optimise_limit("p-identity", "bounded")
    A = integer_strategy(6, 4, 17)
    inverse = np.linalg.inv(A.T @ A)
    with pytest.raises(ParameterError, match="expected 6 measured values"):
        inverse_gls(A, inverse, np.zeros(5), 1.0)
    with pytest.raises(ParameterError, match="4 x 4 inverse"):
        inverse_gls(A, inverse[:3, :3], np.zeros(6), 1.0)
    with pytest.raises(ParameterError, match="positive and finite"):
        inverse_gls(A, inverse, np.zeros(6), 0.0)


@pytest.mark.parametrize("known_total", [False, True])
def test_dense_covariance_equals_the_pseudo_inverse(known_total):
    """The Cholesky path (S, and S - w w^T / 1^T w with a public total) against the
    pseudo-inverse of A^T V^-1 A, projected onto the sum-zero subspace with a public total; a
    strategy of rank n - 1 that the total completes takes the pseudo-inverse path."""
    rng = np.random.default_rng(1)
    n = 15
    P = np.eye(n) - 1.0 / n
    for A in (rng.integers(0, 4, (40, n)).astype(float), np.eye(n)[:-1] - np.eye(n)[1:]):
        v = rng.uniform(1.0, 3.0, A.shape[0])
        gram = A.T @ (A / v[:, None])
        reference = np.linalg.pinv(P @ gram @ P if known_total else gram, rtol=1e-10, hermitian=True)
        if A.shape[0] < n and not known_total:
            continue  # rank n - 1 without a total: not a release
        np.testing.assert_allclose(dense_covariance(A, v, known_total), reference, atol=1e-10 * np.abs(reference).max())


def test_dense_covariance_from_a_given_gram_matrix_and_the_cached_explicit_gram():
    """The covariance from A^T V^-1 A given (one block, one variance: the block's cached A^T A
    over it) equals the one computed from A; Explicit.dense_gram is A^T A (dense or sparse),
    computed once and read-only."""
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    A = rng.integers(0, 4, (30, 12)).astype(float)
    for matrix in (A, sp.csr_matrix(A)):
        block = Explicit(matrix)
        gram = block.dense_gram()
        np.testing.assert_array_equal(gram, A.T @ A)
        assert block.dense_gram() is gram and not gram.flags.writeable
    for known_total in (False, True):
        np.testing.assert_allclose(
            dense_covariance(None, 2.5, known_total, gram=(A.T @ A) / 2.5),
            dense_covariance(A, 2.5, known_total),
            rtol=1e-12,
        )
