"""auto_pruned (dprange.data_aware.pruned_grid): auto's non-negative refit set to zero in the
dyadic blocks its least squares finds empty and scaled back to its total, checked as that very
computation on the measurements auto's design draws, the pruning against explicit sums, and its
error by Monte-Carlo beside auto_nonnegative and auto_support on few records heaped in a corner
(its registration, saving and parameter checks are auto_support's test in test_support_grid.py,
parametrized)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _helpers import HEAVY_HIGHS as HIGHS
from _helpers import HEAVY_LOWS as LOWS
from _helpers import HEAVY_SIDE as SIDE
from _helpers import assert_bootstrap_follows_releases, dyadic_marks_by_loops, heaped_grid, heavy_cells_grid

import dprange
from dprange import NonnegativeAuto, PrunedAuto, SupportAuto
from dprange.data_aware.nonnegative_grid import refit
from dprange.data_aware.pruned_grid import pruned
from dprange.data_aware.spatial_trees import box_sums, summed_area
from dprange.data_aware.steps import spent
from dprange.workloads.rectangles import random_rectangles


def test_pruned_sets_the_unsupported_cells_to_zero_and_keeps_the_sum():
    fitted = np.array([[1.0, 2.0, 0.5], [0.0, 4.0, 0.5]])
    support = np.array([[True, True, False], [True, True, False]])
    out = pruned(fitted, support)
    np.testing.assert_allclose(out, np.array([[1.0, 2.0, 0.0], [0.0, 4.0, 0.0]]) * 8.0 / 7.0)
    assert out.sum() == pytest.approx(fitted.sum())
    np.testing.assert_array_equal(pruned(fitted, None), fitted)
    # a support that holds none of the fit's mass: the fit itself
    np.testing.assert_array_equal(pruned(fitted, np.array([[False] * 3, [True, False, False]])), fitted)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("workload", ["all-rectangles", "prefix-rectangles"])
def test_release_is_autos_nonnegative_fit_pruned_by_its_own_marks(neighbours, workload):
    """The cells are auto_nonnegative's fit of the measurements auto's design draws with the same
    seed, set to zero on the cells of the dyadic blocks least squares sums below the threshold
    times their exact standard error (the marks computed here by loops) and multiplied elsewhere
    by the fit's total over what it kept; one recorded step, the measurements'."""
    x = heavy_cells_grid()
    mech = PrunedAuto(workload=workload, neighbours=neighbours, threshold=1.5)
    r = mech.release(x, 0.8, rng=7)
    inner = dprange.select_grid(x.shape, 0.8, workload=workload, neighbours=neighbours).mechanism
    assert r.parameters["design"]["mechanism"] == inner.name
    measurements = inner.measure(x, 0.8, rng=7)
    least_squares = np.asarray(inner.estimate(x.shape, measurements).leaves, dtype=float).reshape(x.shape)
    model = inner.error_model(x.shape, measurements.epsilon)
    marked = dyadic_marks_by_loops(least_squares, model, 1.5)
    assert 6 <= (~marked).sum() < 64 and not marked[x > 0].any()
    fit, total = refit(inner, x.shape, measurements, mech.tol, mech.maxiter)
    fitted = fit.x.reshape(x.shape)
    expected = np.where(marked, 0.0, fitted) * (fitted.sum() / fitted[~marked].sum())
    np.testing.assert_allclose(r.counts, expected, rtol=1e-12, atol=1e-9)
    assert np.all(r.counts[marked] == 0) and r.counts.sum() == pytest.approx(total, rel=1e-9)
    if neighbours == "replace":
        assert total == x.sum()
    assert r.parameters["support_cells"] == (~marked).sum() and r.parameters["threshold"] == 1.5
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["measure"] and spent(steps) <= Fraction(0.8)


def test_where_nothing_stands_out_or_nothing_is_marked_the_release_is_auto_nonnegatives():
    """A dense grid (every block far above its noise) keeps every cell and a grid with too few
    records for any block to stand out marks every cell: both release auto_nonnegative's cells."""
    dense = np.random.default_rng(1).poisson(200, (SIDE, SIDE))
    few = np.zeros((SIDE, SIDE), dtype=np.int64)
    few[3, 4] = 1
    for grid in (dense, few):
        r = PrunedAuto().release(grid, 0.5, rng=5)
        assert r.parameters["support_cells"] == SIDE * SIDE
        np.testing.assert_allclose(r.counts, NonnegativeAuto().release(grid, 0.5, rng=5).counts, rtol=1e-12)


def errors_by_monte_carlo(trials=20):
    """Mean squared error over 200 random rectangles of auto_nonnegative, auto_support and
    auto_pruned on the heaped grid at epsilon 0.1 (0.024 records per cell times epsilon), the same
    seeds (the same measurements)."""
    x = heaped_grid()
    rectangles = random_rectangles(x.shape, 200, rng=1)
    truth = box_sums(summed_area(x.astype(float)), rectangles.lows, rectangles.highs)
    mechs = {"auto_nonnegative": NonnegativeAuto(), "auto_support": SupportAuto(), "auto_pruned": PrunedAuto()}
    out: dict[str, list[float]] = {k: [] for k in mechs}
    for seed in range(trials):
        for key, mech in mechs.items():
            cells = mech.release(x, 0.1, rng=seed).counts
            out[key].append(np.mean((box_sums(summed_area(cells), rectangles.lows, rectangles.highs) - truth) ** 2))
    return {k: np.array(v) for k, v in out.items()}


def test_on_few_records_heaped_in_a_corner_the_pruned_fit_has_a_fraction_of_the_other_fits_error():
    """The heaped grid at epsilon 0.1, 20 releases each: auto_pruned's error on random rectangles
    is under 0.3x auto_nonnegative's and auto_support's (measured: 0.16x and 0.11x)."""
    errors = errors_by_monte_carlo()
    mean = {k: v.mean() for k, v in errors.items()}
    assert mean["auto_pruned"] < 0.3 * mean["auto_nonnegative"]
    assert mean["auto_pruned"] < 0.3 * mean["auto_support"]


def test_the_bootstrap_re_fits_re_marks_and_follows_the_spread_of_releases():
    """The bootstrap re-draws the noise around the released cells and re-runs least squares, the
    fit, the marks and the pruning: on the heavy cells it is within 30% of the spread of 40
    releases; the answers have no exact error bars."""
    assert_bootstrap_follows_releases(PrunedAuto, heavy_cells_grid(), 0.5, LOWS, HIGHS, rtol=0.3)
