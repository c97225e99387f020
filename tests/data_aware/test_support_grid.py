"""auto_support (dprange.data_aware.support_grid): auto's measurements refitted over the
non-negative grids held at zero in the dyadic blocks its least squares finds empty, checked as the
fit of those very measurements on the support the marks give, the marks against explicit loops,
the fit on a support against its optimality conditions, and its error by Monte-Carlo beside
auto's least squares and auto_nonnegative."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from _helpers import HEAVY_HIGHS as HIGHS
from _helpers import HEAVY_LOWS as LOWS
from _helpers import HEAVY_SIDE as SIDE
from _helpers import assert_bootstrap_follows_releases, dyadic_marks_by_loops, heavy_cells_grid

import dprange
from dprange import NonnegativeAuto, ParameterError, PrunedAuto, SupportAuto
from dprange.data_aware.grid import DataAwareGridRelease
from dprange.data_aware.spatial_trees import box_sums, summed_area
from dprange.data_aware.steps import spent
from dprange.data_aware.support_grid import dyadic_blocks, empty_cells
from dprange.inference.simplex_fit import _NormalOperator, simplex_fit
from dprange.registry import GRID_MECHANISMS
from dprange.workloads.rectangles import random_rectangles


def test_dyadic_blocks_are_the_aligned_squares_clipped_at_the_edges():
    """On a 5 x 3 grid: sides 1, 2, 4 and 8, each level's squares row by row from the origin,
    clipped to the grid; each level covers every cell once."""
    lows, highs, sides = dyadic_blocks((5, 3))
    expected = []
    for side in (1, 2, 4, 8):
        for i in range(0, 5, side):
            for j in range(0, 3, side):
                expected.append((i, j, min(i + side, 5) - 1, min(j + side, 3) - 1, side))
    got = [(*lo, *hi, s) for lo, hi, s in zip(lows.tolist(), highs.tolist(), sides.tolist())]
    assert got == expected
    for side in (1, 2, 4, 8):
        level = sides == side
        assert np.sum((highs[level] - lows[level] + 1).prod(axis=1)) == 15


def test_empty_cells_are_the_cells_of_the_blocks_below_their_limits():
    """Against a loop over every block: a cell is marked when some block holding it sums (the
    estimate, negatives included) below that block's limit."""
    rng = np.random.default_rng(3)
    estimate = rng.normal(0, 3, (6, 5))
    estimate[1:3, 1:4] += 40
    lows, highs, sides = dyadic_blocks(estimate.shape)
    limits = rng.uniform(-2, 8, lows.shape[0])
    expected = np.zeros(estimate.shape, dtype=bool)
    for lo, hi, limit in zip(lows, highs, limits):
        if estimate[lo[0] : hi[0] + 1, lo[1] : hi[1] + 1].sum() < limit:
            expected[lo[0] : hi[0] + 1, lo[1] : hi[1] + 1] = True
    marked = empty_cells(estimate, lows, highs, sides, limits)
    np.testing.assert_array_equal(marked, expected)
    assert 0 < marked.sum() < marked.size


def kkt_gaps(measurements, total, x, support):
    """The fit's optimality on the face: x >= 0, zero off the support, summing to the total, and
    the gradient equal (to -lambda) on the support's positive cells and at least that on its zero
    cells; returns (the largest spread of the gradient over the positive cells, the most any zero
    cell's gradient is below their level), in units of the gradient's scale."""
    normal = _NormalOperator(measurements)
    gradient = normal(x) - normal.rhs
    scale = np.abs(normal.rhs).max()
    positive = support & (x > 1e-9 * total)
    level = gradient[positive].mean()
    spread = np.abs(gradient[positive] - level).max() / scale
    zero = support & ~positive
    below = max(0.0, float((level - gradient[zero]).max() / scale)) if zero.any() else 0.0
    return spread, below


def test_simplex_fit_on_a_support_is_the_constrained_least_squares_solution():
    """On an 8 x 8 hierarchy's measurements: the fit held to a support is zero off it, non-negative,
    sums to the total and meets the optimality conditions of weighted least squares on that face;
    every cell as the support gives the fit without one, bit for bit."""
    x = heavy_cells_grid()[:8, :8] + heavy_cells_grid()[8:, 8:]
    inner = dprange.Kronecker([2, 2])
    measurements = inner.measure(x, 1.0, rng=4)
    least_squares = np.asarray(inner.estimate(x.shape, measurements).leaves, dtype=float)
    total = float(least_squares.sum())
    support = (x > 0).ravel()
    support[[3, 17, 40]] = True
    fit = simplex_fit(measurements, total, start=least_squares, tol=1e-10, maxiter=20000, support=support)
    assert fit.converged
    assert np.all(fit.x[~support] == 0) and np.all(fit.x >= 0)
    assert fit.x.sum() == pytest.approx(total, rel=1e-12)
    spread, below = kkt_gaps(measurements, total, fit.x, support)
    assert spread < 1e-6 and below == 0.0 and (support & (fit.x == 0)).any()
    whole = simplex_fit(measurements, total, start=least_squares, tol=1e-5, maxiter=2000)
    every = simplex_fit(measurements, total, start=least_squares, tol=1e-5, maxiter=2000, support=np.ones(64, bool))
    np.testing.assert_array_equal(every.x, whole.x)


@pytest.mark.parametrize(
    "support,match",
    [(np.zeros(64, bool), "at least one"), (np.ones(63, bool), "boolean array"), (np.ones(64), "boolean array")],
)
def test_simplex_fit_refuses_a_bad_support(support, match):
    x = heavy_cells_grid()[:8, :8]
    inner = dprange.Kronecker([2, 2])
    measurements = inner.measure(x, 1.0, rng=0)
    with pytest.raises(ParameterError, match=match):
        simplex_fit(measurements, 10.0, support=support)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("workload", ["all-rectangles", "prefix-rectangles"])
def test_release_is_the_fit_of_autos_own_measurements_on_the_unmarked_cells(neighbours, workload):
    """The cells are the fit, from auto's least squares, of the measurements auto's design draws
    with the same seed, over the non-negative grids of least squares' total (the public total
    under replace) held at zero on the cells of the dyadic blocks least squares sums below the
    threshold times their exact standard error; one recorded step, the measurements'."""
    x = heavy_cells_grid()
    mech = SupportAuto(workload=workload, neighbours=neighbours, threshold=1.5)
    r = mech.release(x, 0.8, rng=7)
    inner = dprange.select_grid(x.shape, 0.8, workload=workload, neighbours=neighbours).mechanism
    assert r.parameters["design"]["mechanism"] == inner.name
    measurements = inner.measure(x, 0.8, rng=7)
    least_squares = np.asarray(inner.estimate(x.shape, measurements).leaves, dtype=float)
    total = float(x.sum()) if neighbours == "replace" else float(np.sum(least_squares))
    model = inner.error_model(x.shape, measurements.epsilon)
    marked = dyadic_marks_by_loops(least_squares.reshape(x.shape), model, 1.5)
    support = ~marked.ravel()
    assert 6 <= support.sum() < 64  # the heavy cells are kept and most of the grid is marked
    assert np.all(support[(x > 0).ravel()])
    expected = simplex_fit(measurements, total, start=least_squares, tol=1e-5, maxiter=2000, support=support).x
    np.testing.assert_array_equal(r.counts.ravel(), expected)
    assert r.parameters["support_cells"] == support.sum() and r.parameters["threshold"] == 1.5
    assert r.counts.sum() == pytest.approx(total, rel=1e-9) and r.parameters["converged"]
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["measure"] and spent(steps) <= Fraction(0.8)


def test_a_higher_threshold_marks_more_and_where_nothing_stands_out_the_fit_is_auto_nonnegatives():
    """The supports shrink as the threshold grows; a dense grid (every block far above its noise)
    keeps every cell, and a grid with too few records for any block to stand out marks every cell,
    so both release auto_nonnegative's cells exactly."""
    x = heavy_cells_grid()
    kept = [SupportAuto(threshold=k).release(x, 0.5, rng=2).parameters["support_cells"] for k in (0.0, 1.0, 2.0, 4.0)]
    assert kept == sorted(kept, reverse=True) and kept[0] > kept[-1]
    dense = np.random.default_rng(1).poisson(200, (SIDE, SIDE))
    few = np.zeros((SIDE, SIDE), dtype=np.int64)
    few[3, 4] = 1
    for grid, cells in ((dense, SIDE * SIDE), (few, SIDE * SIDE)):
        r = SupportAuto().release(grid, 0.5, rng=5)
        assert r.parameters["support_cells"] == cells
        np.testing.assert_array_equal(r.counts, NonnegativeAuto().release(grid, 0.5, rng=5).counts)


def errors_by_monte_carlo(trials=20):
    """Mean squared error over 200 random rectangles of auto's least squares, auto_nonnegative and
    auto_support on ten heavy cells (100-1000 records) of an empty 32 x 32 grid at epsilon 0.5, the
    same seeds (the same measurements), with the paired ratios' standard errors."""
    rng = np.random.default_rng(0)
    x = np.zeros((32, 32), dtype=np.int64)
    x.flat[rng.choice(x.size, 10, replace=False)] = rng.integers(100, 1000, 10)
    rectangles = random_rectangles(x.shape, 200, rng=1)
    truth = box_sums(summed_area(x.astype(float)), rectangles.lows, rectangles.highs)
    inner = NonnegativeAuto().least_squares_mechanism(x.shape, 0.5)
    out = {"least_squares": [], "auto_nonnegative": [], "auto_support": []}
    for seed in range(trials):
        for key, cells in (
            ("least_squares", inner.release(x, 0.5, rng=seed).counts),
            ("auto_nonnegative", NonnegativeAuto().release(x, 0.5, rng=seed).counts),
            ("auto_support", SupportAuto().release(x, 0.5, rng=seed).counts),
        ):
            out[key].append(np.mean((box_sums(summed_area(cells), rectangles.lows, rectangles.highs) - truth) ** 2))
    return {k: np.array(v) for k, v in out.items()}


def test_on_heavy_cells_the_support_fit_has_a_fraction_of_the_other_fits_error():
    """Ten heavy cells on 32 x 32, 20 releases each: auto_support's error on random rectangles is
    under 0.35x least squares' and under 0.75x auto_nonnegative's (measured: 0.22x and 0.49x)."""
    errors = errors_by_monte_carlo()
    mean = {k: v.mean() for k, v in errors.items()}
    assert mean["auto_support"] < 0.35 * mean["least_squares"]
    assert mean["auto_support"] < 0.75 * mean["auto_nonnegative"]


def test_the_bootstrap_re_marks_and_refits_and_follows_the_spread_of_releases():
    """The bootstrap re-draws the noise around the released cells and re-runs least squares, the
    marks and the fit: on the heavy cells it is within 30% of the spread of 40 releases; the
    answers have no exact error bars."""
    assert_bootstrap_follows_releases(SupportAuto, heavy_cells_grid(), 0.5, LOWS, HIGHS, rtol=0.3)


@pytest.mark.parametrize("factory", [SupportAuto, PrunedAuto])
def test_auto_support_and_auto_pruned_are_registered_saved_and_validated(factory):
    assert GRID_MECHANISMS[factory.name].factory is factory
    mech = factory(workload="prefix-rectangles", threshold=0.5)
    r = mech.release(heavy_cells_grid(), 1.0, rng=2)
    back = DataAwareGridRelease.from_json(r.to_json())
    np.testing.assert_array_equal(back.counts, r.counts)
    assert back.parameters["threshold"] == 0.5 and back.parameters["support_cells"] == r.parameters["support_cells"]
    assert list(mech.parameters())[:5] == ["workload", "order", "threshold", "tol", "maxiter"]
    assert json.loads(r.to_json())["provenance"]["mechanism"] == factory.name
    for bad in (-1.0, float("nan"), True, "2"):
        with pytest.raises(ParameterError, match="threshold"):
            factory(threshold=bad)
    with pytest.raises(ParameterError, match="noise='auto'"):
        factory(noise="gaussian").release(heavy_cells_grid(), 1.0)
    domain = dprange.ProductDomain([dprange.Domain.integers(0, SIDE - 1)] * 2)
    rows, cols = np.nonzero(heavy_cells_grid())
    weights = heavy_cells_grid()[rows, cols]
    columns = [np.repeat(rows, weights), np.repeat(cols, weights)]
    released = dprange.release_grid(
        columns, domain, 1.0, mechanism=factory.name, workload="prefix-rectangles", threshold=0.5, rng=2
    )
    assert released.mechanism == factory.name and released.parameters["workload"] == "prefix-rectangles"
    np.testing.assert_array_equal(released.counts, r.counts)
