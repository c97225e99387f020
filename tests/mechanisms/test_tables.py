"""Contingency tables with public marginals (dprange.mechanisms.tables; seed 004, Algorithm 2): the
release meets the published marginals, GLS is the orthogonal projection with error bars equal to
the dense formula, L1 reaches the linear programme, the cell noise's calibration, bootstraps,
and the registered noise and inference choices."""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from _helpers import box_matrix, every_rectangle
from scipy import optimize

from dprange import ParameterError
from dprange.answers.types import one_sided_factor
from dprange.errors import ConvergenceWarning
from dprange.inference.marginal_constraints import marginal_matrix
from dprange.measurements import Measurements
from dprange.mechanisms.tables import TABLE_NOISE, infer_table, release_table
from dprange.operators import Identity
from dprange.privacy.noise import noise_variance
from dprange.registry import NOISE
from dprange.strategies.calibration import calibrate
from dprange.strategies.trees import Strategy

TABLE = np.random.default_rng(0).poisson(3, (4, 5, 3))


def published(table, marginals):
    """The exact marginals of ``table`` as a publisher would pass them (test data only)."""
    return {axes: table.sum(axis=tuple(a for a in range(table.ndim) if a not in axes)) for axes in marginals}


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


# ------------------------------------------------------------------ error bars (issue 9)

SMALL = np.array(
    [[[0, 6], [3, 0], [12, 1], [0, 0]], [[2, 0], [0, 9], [1, 4], [7, 0]], [[0, 0], [5, 2], [0, 3], [1, 8]]]
)
MARGINAL_SETS = [[], [()], [(0,)], [(0,), (1,)], [(0, 1), (1, 2)], [(0,), (1, 2), (0, 1), ()]]


def all_axes(ndim):
    return [axes for size in range(ndim + 1) for axes in itertools.combinations(range(ndim), size)]


def dense_covariance(shape, marginals, variance):
    """sigma^2 (I - C^T (C C^T)^+ C), formed densely (the formula of the issue)."""
    size = int(np.prod(shape))
    if not marginals:
        return variance * np.eye(size)
    C = np.vstack([marginal_matrix(shape, axes).toarray() for axes in marginals])
    return variance * (np.eye(size) - C.T @ np.linalg.pinv(C @ C.T) @ C)


@pytest.mark.parametrize("table", [SMALL[:, :3, 0], SMALL], ids=["2-way", "3-way"])
@pytest.mark.parametrize("marginals", MARGINAL_SETS[:5], ids=str)
def test_gls_error_bars_equal_the_dense_formula(table, marginals):
    """Every cell, every marginal and random linear queries: the closed forms (ANOVA for
    marginals, the projection for queries) against the dense covariance sigma^2 P."""
    marginals = [m for m in marginals if max(m, default=-1) < table.ndim]
    rel = release_table(table, 0.8, public_marginals=published(table, marginals), rng=0)
    cov = dense_covariance(table.shape, marginals, rel.noise.variance)
    np.testing.assert_allclose(rel.variance(), np.diag(cov).reshape(table.shape), atol=1e-12)
    np.testing.assert_allclose(rel.stderr() ** 2, rel.variance())
    for axes in all_axes(table.ndim):
        M = marginal_matrix(table.shape, axes).toarray()
        expected = np.diag(M @ cov @ M.T).reshape(rel.marginal(axes).shape)
        answer = rel.marginal_answer(axes)
        np.testing.assert_allclose(answer.variance, expected, atol=1e-9)
        np.testing.assert_allclose(answer.value, rel.marginal(axes))
    weights = np.random.default_rng(1).normal(size=(5,) + table.shape)
    flat = weights.reshape(5, -1)
    np.testing.assert_allclose(rel.query(weights).variance, np.einsum("qi,ij,qj->q", flat, cov, flat), atol=1e-9)
    assert rel.query(weights[0]).value == pytest.approx(float(flat[0] @ rel.table.ravel()))


def test_published_marginals_have_zero_stderr_and_are_met_exactly():
    """A published marginal and every marginal of its axes: standard error exactly 0, interval
    of width 0 at the published values; the other marginals keep a positive error."""
    marginals = [(0, 1), (2,)]
    values = published(SMALL, marginals)
    rel = release_table(SMALL, 1.0, public_marginals=values, rng=4)
    for axes in all_axes(3):
        answer = rel.marginal_answer(axes)
        if any(set(axes) <= set(m) for m in marginals):
            assert np.all(answer.stderr == 0.0)
            lower, upper = answer.confidence_interval(0.05)
            np.testing.assert_array_equal(lower, upper)
            drop = tuple(a for a in range(3) if a not in axes)
            np.testing.assert_allclose(answer.value, SMALL.sum(axis=drop), atol=1e-9)
        else:
            assert np.all(answer.stderr > 0.5)
    total = rel.marginal_answer(())
    assert total.value == pytest.approx(SMALL.sum(), abs=1e-9) and total.stderr == 0.0


@pytest.mark.slow
def test_gls_variances_and_intervals_against_monte_carlo():
    """2000 releases of a 3 x 4 x 2 table under published marginals {(0,), (1, 2)}, discrete
    Laplace at epsilon 2 (a coarse lattice).  The empirical covariance of the cells matches
    sigma^2 P entrywise (Monte-Carlo s.e. of one entry ~ sqrt((kurtosis + 1) / N) sigma^2 /
    ~ 0.03 sigma^2 at most; 0.1 sigma^2 allowed over the 300 entries), marginal variances
    within 10% (s.e. ~ 3.5%), and 95% intervals of every cell and of the (0, 2) marginal
    cover at least 94% of the time (s.e. of the coverage 0.5%; measured 98.9% and 99.6%,
    the lattice-aware factor is conservative)."""
    marginals = [(0,), (1, 2)]
    values = published(SMALL, marginals)
    releases = [release_table(SMALL, 2.0, public_marginals=values, rng=s) for s in range(2000)]
    errors = np.array([(r.table - SMALL).ravel() for r in releases])
    rel = releases[0]
    cov = dense_covariance(SMALL.shape, marginals, rel.noise.variance)
    assert np.max(np.abs(np.cov(errors.T) - cov)) < 0.1 * rel.noise.variance
    for axes in [(0, 2), (0, 1)]:  # the marginals not fixed by the published ones
        empirical = np.var([r.marginal(axes) for r in releases], axis=0, ddof=1)
        np.testing.assert_allclose(empirical, rel.variance(axes), rtol=0.1)
    for axes, truth in ((None, SMALL), ((0, 2), SMALL.sum(axis=1))):
        covered = []
        for r in releases:
            answer = r.cells() if axes is None else r.marginal_answer(axes)
            lower, upper = answer.confidence_interval(0.05)
            covered.append((lower <= truth) & (truth <= upper))
        assert np.mean(covered) >= 0.94


def test_intervals_use_the_lattice_aware_factor():
    """The interval half-width is release.one_sided_factor for the table's noise (discrete
    Laplace: the lattice-aware factor, larger than the continuous one) times the stderr."""
    for noise in ("discrete_laplace", "laplace_float"):
        rel = release_table(SMALL, 3.0, public_marginals={(): float(SMALL.sum())}, noise=noise, rng=0)
        answer = rel.marginal_answer((1,))
        lower, upper = answer.confidence_interval(0.1)
        k = one_sided_factor(0.1, noise, [rel.noise.scale])
        np.testing.assert_allclose((upper - lower) / 2, k * answer.stderr)
    assert one_sided_factor(0.1, "discrete_laplace", [rel.noise.scale]) > one_sided_factor(0.1, "laplace_float")


@pytest.mark.parametrize("inference", ["nnls", "l1"])
def test_nonlinear_tables_refuse_closed_form_errors(inference):
    rel = release_table(SMALL, 1.0, public_marginals=published(SMALL, [(0,)]), inference=inference, rng=0)
    assert not rel.exact_error_bars
    for call in (rel.stderr, rel.cells, lambda: rel.marginal_answer((1,)), lambda: rel.query(np.ones(SMALL.shape))):
        with pytest.raises(ParameterError, match="bootstrap"):
            call()


def test_gls_bootstrap_reproduces_the_exact_stderr():
    """400 replicates: the bootstrap s.d. of each cell estimates the exact stderr with relative
    s.e. ~ sqrt((kurtosis + 2) / (4 N)) ~ 0.045; pooled over the 24 cells, within 8%."""
    rel = release_table(SMALL, 1.0, public_marginals=published(SMALL, [(0,), (1, 2)]), rng=5)
    boot = rel.bootstrap(reps=400, rng=6)
    assert boot.shape == SMALL.shape
    assert np.mean(boot) == pytest.approx(np.mean(rel.stderr()), rel=0.08)
    np.testing.assert_allclose(boot, rel.stderr(), rtol=0.2)
    assert np.all(rel.bootstrap((0,), reps=20, rng=6) < 1e-9)  # a published marginal moves by rounding only


@pytest.mark.slow
def test_nnls_bootstrap_matches_monte_carlo():
    """The bootstrap reruns the release's own noise and inference under its marginals: centred
    at the true table it has the sampling distribution of the real releases.  150 replicates
    against 150 releases (different seeds): the s.d. of the (0, 2) marginal agree within
    Monte-Carlo error (relative s.e. of each ~ 0.06; 25% per cell, 12% pooled); NNLS lowers
    the error below the GLS stderr (zeros are clipped)."""
    marginals = [(0,), (1, 2)]
    values = published(SMALL, marginals)
    rel = release_table(SMALL, 1.0, public_marginals=values, inference="nnls", rng=0)
    at_truth = dataclasses.replace(rel, table=SMALL.astype(float))
    boot = at_truth.bootstrap((0, 2), reps=150, rng=1)
    mc = np.std(
        [
            release_table(SMALL, 1.0, public_marginals=values, inference="nnls", rng=s).marginal((0, 2))
            for s in range(100, 250)
        ],
        axis=0,
        ddof=1,
    )
    np.testing.assert_allclose(boot, mc, rtol=0.25)
    assert np.mean(boot) == pytest.approx(np.mean(mc), rel=0.12)
    gls = release_table(SMALL, 1.0, public_marginals=values, rng=0)
    assert np.mean(boot) < 0.8 * np.mean(gls.stderr((0, 2)))


def test_error_bar_bad_inputs():
    rel = release_table(SMALL, 1.0, rng=0)
    with pytest.raises(ParameterError, match="axes"):
        rel.marginal_answer((3,))
    with pytest.raises(ParameterError, match="axes"):
        rel.stderr((0, 0))
    with pytest.raises(ParameterError, match="axes"):
        rel.marginal("a")
    with pytest.raises(ParameterError, match="shape"):
        rel.query(np.ones((2, 2)))
    with pytest.raises(ParameterError, match="finite"):
        rel.query(np.full(SMALL.shape, np.nan))
    for reps in (1, 2.5, True):
        with pytest.raises(ParameterError, match="reps"):
            rel.bootstrap(reps=reps)


def test_table_measurements_use_the_shared_types_and_calibration():
    """The noisy table is a Measurements of one identity block whose noise is the shared
    calibrate()'s for that block (the same NoiseSpec the mechanisms use)."""
    for noise in ("discrete_laplace", "laplace_float"):
        rel = release_table(SMALL, 0.7, noise=noise, rng=np.random.default_rng(3))
        assert isinstance(rel.measurements, Measurements) and rel.measurements.seeded
        (measured,) = rel.measurements.measurements
        assert isinstance(measured.block, Identity) and measured.block.shape == (SMALL.size, SMALL.size)
        np.testing.assert_array_equal(measured.values, rel.noisy.ravel())
        (expected,) = calibrate(Strategy([Identity(SMALL.size)], [0.7]), "add_remove", noise, [0.7], 0.7, 0.0)
        assert measured.noise == rel.noise == expected and measured.variance == expected.variance
        assert rel.measurements.epsilon == 0.7 and rel.measurements.neighbours == "add_remove"
    with pytest.raises(ParameterError, match="identity block"):
        infer_table(dataclasses.replace(rel.measurements, measurements=[]), rel.constraints, "gls", {})


def test_unconverged_table_admm_warns_and_says_so():
    values = published(SMALL, [(0,)])
    with pytest.warns(ConvergenceWarning, match="maxiter"):
        rel = release_table(SMALL, 1.0, public_marginals=values, inference="l1", maxiter=3, rng=0)
    assert not rel.converged and rel.result.iterations == 3
    assert release_table(SMALL, 1.0, public_marginals=values, rng=0).converged
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rel.bootstrap((1,), reps=3, rng=0)  # one warning for the run, not one per replicate
    assert [str(w.message)[:6] for w in caught] == ["3 of 3"] and caught[0].category is ConvergenceWarning
    assert rel.bootstrap_unconverged == 3


def test_release_table_goes_through_the_product_domain_release(rng):
    table = rng.integers(0, 20, size=(4, 3, 5))
    public = {(0,): table.sum(axis=(1, 2)), (1, 2): table.sum(axis=0)}
    rel = release_table(table, 0.8, public_marginals=public, rng=3)
    noisy = rel.noisy.ravel()
    C = np.vstack([marginal_matrix(table.shape, (0,)).toarray(), marginal_matrix(table.shape, (1, 2)).toarray()])
    d = np.concatenate([table.sum(axis=(1, 2)), table.sum(axis=0).ravel()])
    projection = noisy - C.T @ np.linalg.pinv(C @ C.T) @ (C @ noisy - d)  # the identity design's GLS
    np.testing.assert_allclose(rel.table.ravel(), projection, atol=1e-8)
    grid = rel.grid
    np.testing.assert_allclose(grid.counts, rel.table, atol=1e-12)
    lows, highs = every_rectangle(table.shape)
    pick = np.arange(0, lows.shape[0], 37)
    Q = box_matrix(table.shape, lows[pick], highs[pick])
    np.testing.assert_allclose(
        grid.rectangle(lows[pick], highs[pick]).variance,
        rel.query(Q.reshape((-1, 4, 3, 5))).variance,
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(grid.marginal((0, 2)).stderr, rel.stderr((0, 2)), rtol=1e-9)
    assert math.isclose(grid.rectangle([0, 0, 0], [3, 2, 4]).stderr, 0.0, abs_tol=1e-6)
    assert release_table(table, 0.8, public_marginals=public, inference="nnls", rng=3).grid is None


# ------------------------------------------------------------------ contingency tables
def test_table_noise_is_a_declared_subset_of_the_noise_registry():
    assert TABLE_NOISE == ("discrete_laplace", "laplace_float")
    assert set(TABLE_NOISE) < set(NOISE.names())
    assert NOISE.subset(("gaussian",)) == ("gaussian",)
    with pytest.raises(ParameterError, match=r"^noise kind 'normal' is not registered; register it or leave it out$"):
        NOISE.subset(("discrete_laplace", "normal"))


def test_table_checks_name_the_registered_choices():
    table = np.array([[3, 4], [5, 6]])
    with pytest.raises(ParameterError, match=r"^inference must be one of gls, nnls, l1, got 'lasso'$"):
        release_table(table, 1.0, inference="lasso", rng=1)
    with pytest.raises(ParameterError, match=r"^noise must be one of discrete_laplace, laplace_float for a table"):
        release_table(table, 1.0, noise="gaussian", rng=1)
    with pytest.raises(ParameterError, match="inference must be one of"):
        release_table(table, 1.0, inference=["gls"], rng=1)  # an unhashable value is refused, not a TypeError
