"""Contingency tables with public marginals (seed 004, Algorithm 2)."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize

from dprange import ParameterError
from dprange.contingency import marginal_matrix, release_table
from dprange.noise import noise_variance

TABLE = np.random.default_rng(0).poisson(3, (4, 5, 3))


def published(table, marginals):
    """The exact marginals of ``table`` as a publisher would pass them (test data only)."""
    return {axes: table.sum(axis=tuple(a for a in range(table.ndim) if a not in axes)) for axes in marginals}


def test_marginal_matrix_equals_numpy_sums():
    flat = TABLE.ravel()
    for size in range(4):
        for axes in itertools.combinations(range(3), size):
            drop = tuple(a for a in range(3) if a not in axes)
            np.testing.assert_array_equal(marginal_matrix(TABLE.shape, axes) @ flat, TABLE.sum(axis=drop).ravel())


@pytest.mark.parametrize("inference", ["gls", "nnls", "l1"])
def test_release_meets_the_public_marginals(inference):
    # (0,) and (0, 1) overlap and () is implied: C is rank-deficient on purpose
    marginals = [(0,), (1, 2), (0, 1), ()]
    rel = release_table(TABLE, 0.5, public_marginals=published(TABLE, marginals), inference=inference, rng=1)
    for axes in marginals:
        drop = tuple(a for a in range(3) if a not in axes)
        # GLS is an exact projection; ADMM's w meets C x = d to its stopping tolerance 1e-7
        np.testing.assert_allclose(rel.marginal(axes), TABLE.sum(axis=drop), atol=1e-9 if inference == "gls" else 1e-4)
    if inference != "gls":
        assert rel.table.min() >= 0 and rel.result.converged
    assert rel.inference == inference and rel.public_marginals == [tuple(m) for m in marginals]


def test_gls_is_the_orthogonal_projection():
    """Against the KKT system of min ||x - noisy||^2 s.t. C x = d (explicit dense matrices)."""
    rel = release_table(TABLE, 1.0, public_marginals=published(TABLE, [(0,), (2,)]), noise="laplace_float", rng=3)
    C = np.vstack([marginal_matrix(TABLE.shape, (0,)).toarray(), marginal_matrix(TABLE.shape, (2,)).toarray()])
    d = C @ TABLE.ravel()
    n, k = TABLE.size, C.shape[0]
    K = np.block([[np.eye(n), C.T], [C, np.zeros((k, k))]])
    ref = np.linalg.lstsq(K, np.concatenate([rel.noisy.ravel(), d]), rcond=None)[0][:n]
    np.testing.assert_allclose(rel.table.ravel(), ref, atol=1e-9)


def test_l1_with_alpha_1_reaches_the_linear_programme_optimum():
    """Maximum likelihood: min sum |x - noisy| s.t. C x = d, x >= 0, solved by linprog."""
    table = np.random.default_rng(4).poisson(1.0, (3, 4))
    rel = release_table(
        table,
        0.7,
        public_marginals=published(table, [(0,), (1,)]),
        inference="l1",
        alpha=1.0,
        noise="laplace_float",
        rng=5,
        tol=1e-9,
        maxiter=50000,
    )
    C = np.vstack([marginal_matrix(table.shape, (0,)).toarray(), marginal_matrix(table.shape, (1,)).toarray()])
    d = C @ table.ravel()
    n, y = table.size, rel.noisy.ravel()
    res = optimize.linprog(
        np.concatenate([np.zeros(n), np.ones(n)]),
        A_ub=np.block([[np.eye(n), -np.eye(n)], [-np.eye(n), -np.eye(n)]]),
        b_ub=np.concatenate([y, -y]),
        A_eq=np.hstack([C, np.zeros((C.shape[0], n))]),
        b_eq=d,
        bounds=[(0, None)] * n + [(None, None)] * n,
        method="highs",
    )
    assert rel.result.converged
    assert np.abs(rel.table.ravel() - y).sum() == pytest.approx(res.fun, rel=1e-6)


def test_cell_noise_has_the_laplace_variance():
    """600 releases x 60 cells: the noise variance 2/eps^2 = 8 (discrete: 2t/(1-t)^2) is
    estimated with relative s.e. sqrt((kurtosis - 1)/N) = sqrt(5/36000) ~ 0.012; 4 s.e."""
    for noise in ("laplace_float", "discrete_laplace"):
        draws = np.concatenate(
            [(release_table(TABLE, 0.5, noise=noise, rng=s).noisy - TABLE).ravel() for s in range(600)]
        )
        expected = noise_variance(noise, 2.0)
        assert draws.var() == pytest.approx(expected, rel=0.05)
        assert abs(draws.mean()) < 4 * np.sqrt(expected / draws.size)
        if noise == "discrete_laplace":
            assert np.all(draws == np.round(draws))


def test_cell_noise_scale_never_lets_the_loss_exceed_epsilon():
    """One record moves one cell by 1, so the loss of a cell is 1/scale: in exact rational
    arithmetic it must not exceed epsilon (1.0/eps rounded down would, for about half of all
    epsilons), and the scale is within a few ulps of 1/eps."""
    rng = np.random.default_rng(7)
    for eps in np.concatenate([[0.1, 0.3, 0.7, 1.1, 3.0], rng.uniform(0.01, 10, 60)]):
        spec = release_table(TABLE[:1, :1, :1], float(eps), rng=0).noise
        assert 1 / Fraction(spec.scale) <= Fraction(float(eps))
        assert spec.scale == pytest.approx(1 / eps, rel=1e-15)


def test_public_marginals_are_inputs_never_computed_from_the_table():
    """P6: the published values are met, not the table's (a list of axes, which used to make
    dprange publish the table's exact marginals, is refused); shapes and agreement checked."""
    with pytest.raises(ParameterError, match="published values"):
        release_table(TABLE, 1.0, public_marginals=[()])
    stated = float(TABLE.sum() + 7)  # a published total that differs from the table's
    rel = release_table(TABLE, 1.0, public_marginals={(): stated}, rng=2)
    assert rel.table.sum() == pytest.approx(stated, abs=1e-9)
    rows = TABLE.sum(axis=(1, 2))
    swapped = release_table(TABLE, 1.0, public_marginals={(2, 0): TABLE.sum(axis=1).T}, rng=2)
    np.testing.assert_allclose(swapped.table.sum(axis=1), TABLE.sum(axis=1), atol=1e-9)
    with pytest.raises(ParameterError, match="shape"):
        release_table(TABLE, 1.0, public_marginals={(0,): rows[:-1]})
    with pytest.raises(ParameterError, match="disagree"):
        release_table(TABLE, 1.0, public_marginals={(): float(rows.sum() + 1), (0,): rows})
    with pytest.raises(ParameterError, match="non-negative"):
        release_table(TABLE, 1.0, public_marginals={(0,): -rows})


def test_tiny_epsilon_is_refused_before_any_noise():
    """P1: a scale beyond 2^40 is refused with a message about epsilon (at 1e-300 the old
    discrete Laplace noise was exactly 0 and the table was published exactly)."""
    with pytest.raises(ParameterError, match="epsilon is too small"):
        release_table(TABLE, 1e-300, rng=0)
    assert math.isfinite(release_table(TABLE, 2.0**-39, rng=0).noise.scale)


def test_consistency_and_l1_lower_the_error_on_a_sparse_table():
    """Seed 004 section 5.1.  GLS is the orthogonal projection onto an affine set containing
    the true table, so its squared error is at most the raw table's in every release (not
    only on average).  On a sparse table (90% zeros) L1 does much better than GLS, which
    spreads noise over the zero cells: 20 releases, fixed seeds."""
    table = np.zeros((6, 6, 4), dtype=int)
    table[np.random.default_rng(2).random(table.shape) < 0.1] = 20
    marginals = [(0,), (1,), (2,)]
    mse = {"gls": [], "l1": [], "raw": []}
    for s in range(20):
        for inference in ("gls", "l1"):
            rel = release_table(table, 0.5, public_marginals=published(table, marginals), inference=inference, rng=s)
            mse[inference].append(np.mean((rel.table - table) ** 2))
        mse["raw"].append(np.mean((rel.noisy - table) ** 2))
    assert np.all(np.array(mse["gls"]) <= np.array(mse["raw"]) + 1e-9)
    assert np.mean(mse["l1"]) < 0.6 * np.mean(mse["gls"])


def test_bad_inputs():
    with pytest.raises(ParameterError, match="axes"):
        release_table(TABLE, 1.0, public_marginals={(3,): np.zeros(1)})
    with pytest.raises(ParameterError, match="axes"):
        release_table(TABLE, 1.0, public_marginals={(0, 0): np.zeros((4, 4))})
    with pytest.raises(ParameterError):
        release_table(TABLE, 1.0, inference="median")
    with pytest.raises(ParameterError):
        release_table(-TABLE, 1.0)
    with pytest.raises(ParameterError):
        release_table(TABLE + 0.5, 1.0)  # discrete Laplace needs integer counts
    with pytest.raises(ParameterError):
        release_table(TABLE, 0.0)
