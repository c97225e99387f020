"""dprange.inference.wavelet: the Haar (Privelet) estimate and its variances against the dense
inverse transform, all error bars in one pass over the levels (equal to the per-query path and
the dense covariance, n a power of two and not), and the design's error model on zeros."""

import numpy as np
import pytest

from conftest import dense_gls, range_matrix
from dprange import Wavelet
from dprange.analysis import selection as analysis
from dprange.inference.wavelet import haar_error_model, haar_estimate
from dprange.strategies.trees import HaarStrategy


@pytest.mark.parametrize("n,known_total", [(1, False), (6, False), (8, True), (13, False), (32, True)])
def test_haar_estimate_and_variance_match_dense(n, known_total, rng):
    haar = HaarStrategy(n, known_total=known_total)
    A = haar.dense()
    op = haar.operator()
    z = rng.normal(size=n)
    np.testing.assert_allclose(op.matvec(z), A @ z, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(np.arange(A.shape[0], dtype=float)), A.T @ np.arange(A.shape[0]), atol=1e-12)
    x = rng.integers(0, 20, n).astype(float)
    coeffs = haar.coefficients(x)
    values = [None] * (haar.height + 1)
    variances = [None] * (haar.height + 1)
    for k in haar.measured_depths:
        variances[k] = rng.uniform(0.5, 3.0)
        values[k] = coeffs[k] + rng.normal(size=coeffs[k].size) * np.sqrt(variances[k])
    total = x.sum() if known_total else None
    est = haar_estimate(haar, values, variances, total=total)
    # noise-free measurements reconstruct x exactly
    exact = haar_estimate(haar, coeffs, [1.0] * (haar.height + 1), total=total)
    np.testing.assert_allclose(exact.leaves, x, atol=1e-9)
    # Variance: the estimate is linear in the noise; build its matrix column by column.
    cols, var = [], []
    for k in haar.measured_depths:
        for j in range(values[k].size):
            unit = [None if vv is None else np.zeros_like(vv) for vv in values]
            unit[k][j] = 1.0
            cols.append(haar_estimate(haar, unit, variances, total=0.0 if known_total else None).leaves)
            var.append(variances[k])
    M = np.array(cols).T
    lo, hi = np.triu_indices(n)
    Q = range_matrix(n, lo, hi)
    reference = ((Q @ M) ** 2 * np.array(var)).sum(axis=1)
    np.testing.assert_allclose(est.range_variance(lo, hi), reference, rtol=1e-9, atol=1e-12)
    if not known_total and 2**haar.height == n:
        # square system: the inverse transform is the GLS estimate
        y = np.concatenate([values[k] for k in haar.measured_depths])
        v = np.concatenate([np.full(values[k].size, variances[k]) for k in haar.measured_depths])
        reference_x, _ = dense_gls(A, y, v)
        np.testing.assert_allclose(est.leaves, reference_x, atol=1e-9)


@pytest.mark.parametrize("n,known_total", [(6, False), (8, True), (13, False)])
def test_haar_query_variance_matches_ranges(n, known_total, rng):
    from dprange.inference.wavelet import haar_error_model

    haar = HaarStrategy(n, known_total=known_total)
    variances = [None] * (haar.height + 1)
    for k in haar.measured_depths:
        variances[k] = rng.uniform(0.5, 3.0)
    model = haar_error_model(haar, variances, known_total=known_total)
    lo, hi = np.triu_indices(n)
    np.testing.assert_allclose(
        model.query_variance(range_matrix(n, lo, hi)), model.range_variance(lo, hi), rtol=1e-9, atol=1e-12
    )


SHAPES = [
    # (n, known_total, per_node)
    (1, False, False),
    (2, False, False),
    (2, True, False),
    (16, False, False),
    (16, True, True),
    (13, False, True),
    (13, True, False),
    (37, False, False),
    (64, True, True),
    (100, True, False),
]


def _model(n, known_total, per_node):
    rng = np.random.default_rng(n + 7 * known_total)
    haar = HaarStrategy(n, known_total=known_total)
    variances: list = [None if known_total else float(rng.uniform(0.3, 4.0))]
    for level in range(1, haar.height + 1):
        size = 2 ** (level - 1)
        variances.append(rng.uniform(0.3, 4.0, size) if per_node else float(rng.uniform(0.3, 4.0)))
    return haar, variances, haar_error_model(haar, variances, known_total=known_total)


def _dense_covariance(haar, variances):
    """Cov of the padded estimate: the inverse transform's column for each unit measurement."""
    columns, noise = [], []
    for level in range(haar.height + 1):
        if variances[level] is None:
            continue
        size = 1 if level == 0 else 2 ** (level - 1)
        for i in range(size):
            levels = [np.zeros(1 if k == 0 else 2 ** (k - 1)) for k in range(haar.height + 1)]
            levels[level][i] = 1.0
            columns.append(haar.reconstruct(levels))
            noise.append(np.broadcast_to(variances[level], (size,))[i])
    R = np.array(columns).T[: haar.n]
    return R @ np.diag(noise) @ R.T


def _per_query(model, n):
    idx = np.arange(n)
    prefix = model.range_variance(np.zeros(n, dtype=np.int64), idx)
    rest = np.zeros(n)
    rest[:-1] = model.range_variance(idx[:-1] + 1, np.full(n - 1, n - 1))
    return prefix, rest, model.range_variance(idx, idx), float(model.range_variance(0, n - 1))


@pytest.mark.parametrize("n,known_total,per_node", SHAPES)
def test_haar_one_pass_equals_per_query_and_dense(n, known_total, per_node):
    haar, variances, model = _model(n, known_total, per_node)
    got = model.prefix_variances()
    prefix, rest, bins, total = _per_query(model, n)
    scale = max(1.0, float(prefix.max()))
    np.testing.assert_allclose(got.prefix, prefix, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.rest, rest, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.bins, bins, rtol=1e-12, atol=1e-12 * scale)
    assert got.total == pytest.approx(total, rel=1e-12, abs=1e-12)
    cov = _dense_covariance(haar, variances)
    lower = np.tril(np.ones((n, n)))
    np.testing.assert_allclose(got.prefix, np.einsum("ij,jk,ik->i", lower, cov, lower), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.bins, np.diag(cov), rtol=1e-9, atol=1e-9)
    upper = 1.0 - lower
    np.testing.assert_allclose(got.rest, np.einsum("ij,jk,ik->i", upper, cov, upper), rtol=1e-9, atol=1e-9)


def test_haar_one_pass_closed_form_two_bins():
    """n = 2, total variance t, difference variance v: Var(x_0) = (t + v) / 4, and the
    suffix x_1 has the same variance; the prefix x_0 + x_1 is the total itself."""
    haar = HaarStrategy(2)
    got = haar_error_model(haar, [3.0, 5.0]).prefix_variances()
    np.testing.assert_allclose(got.prefix, [2.0, 3.0], rtol=1e-15)
    np.testing.assert_allclose(got.bins, [2.0, 2.0], rtol=1e-15)
    np.testing.assert_allclose(got.rest, [2.0, 0.0], rtol=1e-15)
    assert got.total == pytest.approx(3.0, rel=1e-15)


def test_haar_one_pass_is_computed_once_per_model():
    model = Wavelet().error_model(100, 1.0)
    assert model.prefix_variances() is model.prefix_variances()


def test_haar_error_model_equals_the_estimate_of_zeros():
    """The design's Haar model skips the inverse transform of zeros; nothing else changes."""
    haar = HaarStrategy(13)
    variances = [2.0, 1.0, 1.5, 0.5, 3.0]
    model = haar_error_model(haar, variances)
    assert model.padded.shape == (16,) and not model.padded.any()
    lo, hi = np.triu_indices(13)
    reference = Wavelet().error_model(13, 1.0)
    assert type(reference) is type(model)
    np.testing.assert_allclose(
        reference.range_variance(lo, hi),
        haar_error_model(haar, reference.level_variances).range_variance(lo, hi),
        rtol=1e-14,
    )
    with pytest.raises(analysis.ParameterError, match="Haar total"):
        haar_error_model(haar, [None, 1.0, 1.0, 1.0, 1.0])
