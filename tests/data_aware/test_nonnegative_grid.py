"""auto_nonnegative (dprange.data_aware.nonnegative_grid): auto's measurements refitted over the
non-negative grids of its estimated total, checked as the fit of those very measurements, by
Monte-Carlo against auto's own least squares, and its bootstrap against the spread of releases."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from _helpers import HEAVY_SIDE as SIDE
from _helpers import assert_bootstrap_follows_releases, heavy_cells_grid

import dprange
from dprange import AutoTowardNonnegative, NonnegativeAuto, ParameterError
from dprange.analysis.grid import workload_error, workload_inner
from dprange.data_aware.grid import DataAwareGridRelease
from dprange.data_aware.nonnegative_grid import RefitRisk, refit, refit_risk
from dprange.data_aware.spatial_trees import box_sums, summed_area
from dprange.data_aware.steps import spent
from dprange.inference.simplex_fit import simplex_fit
from dprange.registry import GRID_MECHANISMS
from dprange.workloads import Rectangles

LOWS = np.array([[0, 0], [2, 3], [0, 0]])
HIGHS = np.array([[SIDE - 1, SIDE - 1], [12, 14], [7, 7]])


def dense_grid() -> np.ndarray:
    return np.random.default_rng(1).poisson(200, (SIDE, SIDE))


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("workload", ["all-rectangles", "prefix-rectangles", "marginals"])
def test_release_is_the_fit_of_autos_own_measurements(neighbours, workload):
    """The cells are the non-negative fit, from auto's least-squares estimate, of the
    measurements auto's design draws with the same seed, holding that estimate's total (the
    public total under replace); the one recorded step is those measurements' epsilon."""
    x = heavy_cells_grid()
    mech = NonnegativeAuto(workload=workload, neighbours=neighbours)
    r = mech.release(x, 0.8, rng=7)
    inner = dprange.select_grid(x.shape, 0.8, workload=workload, neighbours=neighbours).mechanism
    assert r.parameters["design"]["mechanism"] == inner.name
    measurements = inner.measure(x, 0.8, rng=7)
    least_squares = inner.estimate(x.shape, measurements).leaves
    total = float(x.sum()) if neighbours == "replace" else float(np.sum(least_squares))
    expected = simplex_fit(measurements, total, start=least_squares, tol=1e-5, maxiter=2000).x
    np.testing.assert_array_equal(r.counts.ravel(), expected)
    assert r.counts.min() >= 0 and r.counts.sum() == pytest.approx(total, rel=1e-9)
    assert r.parameters["fitted_total"] == pytest.approx(total) and r.parameters["converged"]
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["measure"] and spent(steps) <= Fraction(0.8)
    assert r.epsilon == measurements.epsilon <= 0.8
    assert r.total == (float(x.sum()) if neighbours == "replace" else None)
    assert r.provenance.data_dependent and r.provenance.noise == "discrete_laplace"


def monte_carlo(x, trials=60):
    """Per rectangle of LOWS / HIGHS: (refit MSE, auto's least-squares MSE, refit spread, mean
    bootstrap standard error of the first five releases)."""
    mech = NonnegativeAuto()
    inner = mech.least_squares_mechanism(x.shape, 1.0)
    truth = box_sums(summed_area(x.astype(float)), LOWS, HIGHS)
    fits, squares, boots = [], [], []
    for seed in range(trials):
        r = mech.release(x, 1.0, rng=seed)
        fits.append(box_sums(summed_area(r.counts), LOWS, HIGHS))
        squares.append(box_sums(summed_area(inner.release(x, 1.0, rng=seed).counts), LOWS, HIGHS))
        if seed < 5:
            boots.append(r.bootstrap(LOWS, HIGHS, reps=100, rng=seed))
    fits, squares = np.array(fits), np.array(squares)
    return ((fits - truth) ** 2).mean(0), ((squares - truth) ** 2).mean(0), fits.std(0), np.mean(boots, 0)


def test_the_chosen_design_is_kept_for_the_same_settings_and_chosen_again_when_they_change():
    """A second release of the same shape and epsilon reuses the design chosen for the first (the
    same object, the same cells as a fresh mechanism's); a new epsilon, workload or relation
    chooses again, as select_grid does for them."""
    x = heavy_cells_grid()
    mech = NonnegativeAuto(workload="prefix-rectangles")
    first = mech.least_squares_mechanism(x.shape, 0.8)
    assert mech.least_squares_mechanism(x.shape, 0.8) is first
    np.testing.assert_array_equal(
        mech.release(x, 0.8, rng=3).counts, NonnegativeAuto(workload="prefix-rectangles").release(x, 0.8, rng=3).counts
    )
    assert mech.least_squares_mechanism(x.shape, 0.5) is not first
    for attribute, value in (("workload", "all-rectangles"), ("neighbours", "replace")):
        setattr(mech, attribute, value)
        chosen = mech.least_squares_mechanism(x.shape, 0.8)
        expected = dprange.select_grid(x.shape, 0.8, workload=mech.workload, neighbours=mech.neighbours).mechanism
        assert chosen is not first and chosen.parameters() == expected.parameters()
        assert chosen.name == expected.name


def test_on_sparse_data_the_fit_has_a_fraction_of_autos_error():
    """Six heavy cells in 256: the noise of the empty cells is removed, so the rectangles that
    are not the whole grid have a fraction of auto's MSE (about 0.6x and 0.3-0.4x; 60 releases,
    whose MSEs are within about 20% of their means; the whole grid is auto's own total, the same
    error), and the bootstrap's standard error is within 20% of the releases' spread."""
    fit, least_squares, spread, boot = monte_carlo(heavy_cells_grid())
    assert fit[0] == pytest.approx(least_squares[0], rel=1e-6)
    assert fit[1] < 0.8 * least_squares[1] and fit[2] < 0.5 * least_squares[2]
    np.testing.assert_allclose(boot, spread, rtol=0.2)


def test_on_dense_data_the_constraints_do_not_bind_and_the_fit_is_auto():
    """Every cell near 200 records: the least-squares estimate is already non-negative, so the
    fit is it (same MSE to 1e-6) and the bootstrap is within 20% of the releases' spread."""
    fit, least_squares, spread, boot = monte_carlo(dense_grid())
    np.testing.assert_allclose(fit, least_squares, rtol=1e-6)
    np.testing.assert_allclose(boot, spread, rtol=0.2)


def test_noise_only_errors_are_refused_and_the_answers_have_no_exact_error_bars():
    r = NonnegativeAuto().release(heavy_cells_grid(), 1.0, rng=1)
    assert isinstance(r, DataAwareGridRelease) and not r.exact_error_bars
    assert np.isnan(r.rectangle([0, 0], [3, 3]).stderr)
    with pytest.raises(ParameterError, match="bootstrap"):
        r.noise_only_stderr(LOWS, HIGHS)


def test_saved_release_loads_with_its_cells_and_provenance():
    mech = NonnegativeAuto(workload=Rectangles((SIDE, SIDE), LOWS, HIGHS), tol=1e-4, maxiter=500)
    r = mech.release(heavy_cells_grid(), 1.0, rng=2)
    back = DataAwareGridRelease.from_json(r.to_json())
    np.testing.assert_array_equal(back.counts, r.counts)
    assert back.parameters == json.loads(json.dumps(r.parameters))
    assert back.parameters["workload"] == {"shape": [SIDE, SIDE], "lows": LOWS.tolist(), "highs": HIGHS.tolist()}
    assert type(mech)(**{k: back.parameters[k] for k in ("workload", "order", "tol", "maxiter")}).parameters() == (
        mech.parameters()
    )


def test_registered_and_built_by_name_with_the_workload_release_grid_passes():
    assert GRID_MECHANISMS["auto_nonnegative"].factory is NonnegativeAuto
    domain = dprange.ProductDomain([dprange.Domain.integers(0, SIDE - 1)] * 2)
    rows, cols = np.nonzero(heavy_cells_grid())
    weights = heavy_cells_grid()[rows, cols]
    columns = [np.repeat(rows, weights), np.repeat(cols, weights)]
    r = dprange.release_grid(columns, domain, 1.0, mechanism="auto_nonnegative", workload="prefix-rectangles", rng=3)
    assert r.mechanism == "auto_nonnegative" and r.parameters["workload"] == "prefix-rectangles"
    np.testing.assert_array_equal(
        r.counts, NonnegativeAuto(workload="prefix-rectangles").release(heavy_cells_grid(), 1.0, rng=3).counts
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [({"tol": 0.0}, "tol"), ({"maxiter": 0}, "maxiter"), ({"workload": "every-cell"}, "workload")],
)
def test_bad_parameters_are_refused(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        NonnegativeAuto(**kwargs)


def test_bad_releases_are_refused_before_the_counts_are_read():
    mech = NonnegativeAuto()
    with pytest.raises(ParameterError, match="delta=0"):
        mech.release(heavy_cells_grid(), 1.0, delta=1e-6)
    with pytest.raises(ParameterError, match="noise='auto'"):
        NonnegativeAuto(noise="gaussian").release(heavy_cells_grid(), 1.0)
    with pytest.raises(ParameterError):
        mech.release(np.ones(5, dtype=np.int64), 1.0)
    with pytest.raises(ParameterError):
        mech.release(heavy_cells_grid(), -1.0)


# ----------------------------------------------------------------------------- auto_toward_nonnegative
def half_empty_grid() -> np.ndarray:
    """Dense (about 20 records a cell) on ten columns, empty on six: the fit's clipping of the
    empty cells' noise biases every rectangle that crosses them."""
    x = np.random.default_rng(2).poisson(20, (SIDE, SIDE))
    x[:, :6] = 0
    return x


@pytest.mark.parametrize("workload", ["all-rectangles", "rectangles"])
def test_refit_risk_is_unbiased_for_gaussian_noise(workload):
    """Stein's estimate (refit_risk) against Monte Carlo: with Gaussian measurements (a hierarchy on
    each axis, 8 x 8, a sparse grid) its mean over 100 releases is, within 4 standard errors of the
    paired difference (four means are checked), the refit's mean squared error on the workload and
    that of least squares moved half way toward the refit (600 releases of another seed, all
    rectangles: 2.2 +- 1.8 on 35 and -0.3 +- 1.2 on 61; the rectangles: -0.5 +- 9.8 on 119); the
    least squares' part is its exact error, and the refit's error is under 0.6x of it.  The cross
    term matters: without its factor 2 the refit's estimate is off by 0.28x (all rectangles) and
    0.61x (these rectangles) of least squares' error, about 10 standard errors."""
    x = heavy_cells_grid()[:8, :8] + heavy_cells_grid()[8:, 8:]
    shape = x.shape
    if workload == "rectangles":
        workload = Rectangles(shape, LOWS // 2, HIGHS // 2)
    inner = dprange.Kronecker([2, 2], noise="gaussian")
    source = np.random.default_rng(5)
    estimates, errors, risk = [], [], None
    for _ in range(100):
        measurements = inner.measure(x, 1.0, delta=1e-5, rng=source)
        least_squares = np.asarray(inner.estimate(shape, measurements).leaves, dtype=float)
        fit, _ = refit(inner, shape, measurements, 1e-6, 4000, least_squares=least_squares)
        risk = refit_risk(
            inner,
            shape,
            measurements,
            least_squares,
            fit.x,
            workload,
            order=2,
            probes=4,
            source=source,
            tol=1e-6,
            maxiter=4000,
        )
        estimates.append((risk.refit, risk.toward(0.5)))
        moved, half = fit.x.reshape(shape) - x, (least_squares + fit.x).reshape(shape) / 2 - x
        errors.append((workload_inner(moved, moved, workload), workload_inner(half, half, workload)))
    model = inner.error_model(shape, 1.0, delta=1e-5)
    assert risk.exact == pytest.approx(workload_error(model, shape, workload), rel=1e-12)
    assert risk.toward(0.0) == risk.exact and risk.toward(1.0) == risk.refit
    difference = np.array(estimates) - np.array(errors)
    assert np.all(np.abs(difference.mean(axis=0)) <= 4 * difference.std(axis=0, ddof=1) / np.sqrt(len(difference)))
    assert np.mean(errors, axis=0)[0] < 0.6 * risk.exact


@pytest.mark.parametrize("probes", [0, -1, 1.5, True])
def test_refit_risk_refuses_a_count_of_probes_that_is_not_a_whole_number_at_least_1(probes):
    """No probe would leave the trace undefined (a NaN estimate); refit_risk says so itself, not
    only through AutoTowardNonnegative's parameter."""
    x = heavy_cells_grid()[:8, :8]
    inner = dprange.Kronecker([2, 2], noise="gaussian")
    measurements = inner.measure(x, 1.0, delta=1e-5, rng=0)
    least_squares = np.asarray(inner.estimate(x.shape, measurements).leaves, dtype=float)
    with pytest.raises(ParameterError, match="probes"):
        refit_risk(
            inner,
            x.shape,
            measurements,
            least_squares,
            least_squares,
            "all-rectangles",
            order=2,
            probes=probes,
            source=np.random.default_rng(0),
        )


def test_the_weight_minimises_the_estimate():
    """RefitRisk.weight is the minimiser over [0, 1] of the quadratic toward(a), clipped; 0 where
    the refit did not move."""
    for exact, moved, trace in ((100.0, 80.0, 30.0), (100.0, 10.0, 150.0), (100.0, 50.0, -200.0)):
        risk = RefitRisk(exact, moved, trace)
        grid = np.linspace(0, 1, 10001)
        best = grid[np.argmin([risk.toward(a) for a in grid])]
        assert risk.weight == pytest.approx(best, abs=1e-4)
    assert RefitRisk(100.0, 80.0, 30.0).weight == pytest.approx(70 / 80)
    assert RefitRisk(5.0, 0.0, 0.0).weight == 0.0  # the same cells whatever the weight


def weight_monte_carlo(x, trials=30):
    """Mean MSE over LOWS / HIGHS of auto's least squares, the refit and the weighted release (same
    seeds: the same measurements), and the mean weight."""
    toward, refitted = AutoTowardNonnegative(), NonnegativeAuto()
    inner = refitted.least_squares_mechanism(x.shape, 0.5)
    truth = box_sums(summed_area(x.astype(float)), LOWS, HIGHS)
    errors = {"least_squares": [], "refit": [], "toward": []}
    weights = []
    for seed in range(trials):
        released = toward.release(x, 0.5, rng=seed)
        weights.append(released.parameters["weight"])
        for key, cells in (
            ("least_squares", inner.release(x, 0.5, rng=seed).counts),
            ("refit", refitted.release(x, 0.5, rng=seed).counts),
            ("toward", released.counts),
        ):
            errors[key].append(np.mean((box_sums(summed_area(cells), LOWS, HIGHS) - truth) ** 2))
    return {k: float(np.mean(v)) for k, v in errors.items()}, float(np.mean(weights))


def test_the_weight_moves_toward_the_refit_where_it_gains_and_stays_where_it_loses():
    """Six heavy cells: the refit gains (about 0.64x least squares), the weight is near 1 and the
    release's error within 10% of the refit's; half the grid empty, the other half dense: the
    refit loses (about 1.3x), the weight is near 0 and the release's error within 5% of least
    squares'.  The cells are least squares moved by the recorded weight toward the refit of the
    same measurements."""
    errors, weight = weight_monte_carlo(heavy_cells_grid())
    assert errors["refit"] < 0.75 * errors["least_squares"] and weight > 0.8
    assert errors["toward"] <= 1.1 * errors["refit"]
    errors, weight = weight_monte_carlo(half_empty_grid())
    assert errors["refit"] > 1.2 * errors["least_squares"] and weight < 0.3
    assert errors["toward"] <= 1.05 * errors["least_squares"]
    for x in (heavy_cells_grid(), half_empty_grid()):
        r = AutoTowardNonnegative().release(x, 0.5, rng=3)
        inner = NonnegativeAuto().least_squares_mechanism(x.shape, 0.5)
        measurements = inner.measure(x, 0.5, rng=3)
        least_squares = np.asarray(inner.estimate(x.shape, measurements).leaves, dtype=float)
        fit, _ = refit(inner, x.shape, measurements, 1e-5, 2000, least_squares=least_squares)
        weight = r.parameters["weight"]
        np.testing.assert_allclose(r.counts.ravel(), least_squares + weight * (fit.x - least_squares), atol=1e-9)
        estimated = r.parameters["estimated_mse"]
        assert estimated["released"] <= min(estimated["least_squares"], estimated["nonnegative_fit"]) + 1e-9


def test_the_bootstrap_holds_the_weight():
    """The bootstrap re-runs least squares, the refit and the move by the released weight: on the
    half-empty grid (weight near 0) it is within 20% of the spread of 40 releases."""
    assert_bootstrap_follows_releases(AutoTowardNonnegative, half_empty_grid(), 0.5, LOWS, HIGHS, rtol=0.2)


def test_auto_toward_nonnegative_is_registered_saved_and_validated():
    assert GRID_MECHANISMS["auto_toward_nonnegative"].factory is AutoTowardNonnegative
    mech = AutoTowardNonnegative(workload="prefix-rectangles", probes=2)
    r = mech.release(heavy_cells_grid(), 1.0, rng=2)
    back = DataAwareGridRelease.from_json(r.to_json())
    np.testing.assert_array_equal(back.counts, r.counts)
    assert back.parameters["probes"] == 2 and back.parameters["weight"] == r.parameters["weight"]
    assert list(mech.parameters())[:5] == ["workload", "order", "tol", "maxiter", "probes"]
    with pytest.raises(ParameterError, match="probes"):
        AutoTowardNonnegative(probes=0)
    with pytest.raises(ParameterError, match="noise='auto'"):
        AutoTowardNonnegative(noise="gaussian").release(heavy_cells_grid(), 1.0)
