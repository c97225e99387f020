"""Error bars on real data: the 95% intervals of ranges over a DPBench histogram
(../shared/data/dpbench, NETTRACE: sparse, with spikes) and of rectangles over the Adult age x
hours-per-week cross-tabulation (../shared/data/adult) hold the true counts at their level, for
every data-independent 2-D mechanism whose error bars are exact and for the exact L2 optimum's
templates."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import dprange
from conftest import SHARED
from dprange import Domain, ProductDomain
from dprange.mechanisms.optimized import Optimized
from dprange.mechanisms.optimized_grid import OptimizedKronecker
from dprange.workloads import random_rectangles

ADULT = SHARED / "data" / "adult" / "adult.csv"
COLUMNS = ["age", "hours-per-week"]


@pytest.mark.skipif(not os.path.exists(ADULT), reason="needs ../shared/data/adult/adult.csv")
@pytest.mark.parametrize(
    ("mechanism", "trials"),
    [("kronecker", 60), ("kd_hierarchy", 60), ("quadtree", 60), ("privelet", 25), ("optimized-for-them", 60)],
)
def test_rectangle_intervals_cover_the_adult_cross_tabulation(mechanism, trials, private_cache):
    frame = pd.read_csv(ADULT, usecols=COLUMNS)
    domain = ProductDomain([Domain.interval(17.0, 91.0, 74), Domain.integers(1, 99)])
    counts = domain.histogram(frame[COLUMNS])
    rects = random_rectangles(counts.shape, 40, rng=5)
    if mechanism == "optimized-for-them":  # the product optimised for these very rectangles
        mechanism = OptimizedKronecker(rects)
        assert not mechanism.measures_identity(counts.shape, 1.0)
    truth = rects.matvec(counts.ravel().astype(float))
    cell = counts[30, 40]  # one cell: a single noise draw's interval, the hardest case for a normal band
    hits, cell_hits = 0, 0
    for seed in range(trials):
        rel = dprange.release_grid(frame[COLUMNS], domain, 1.0, mechanism=mechanism, rng=seed)
        low, high = rel.rectangle(rects.lows, rects.highs).confidence_interval(0.05)
        hits += int(np.sum((low <= truth) & (truth <= high)))
        cell_low, cell_high = rel.rectangle([[30, 40]], [[30, 40]]).confidence_interval(0.05)
        cell_hits += int(cell_low[0] <= cell <= cell_high[0])
    # 40 rectangles x trials pairs (correlated within a release): observed 0.965-0.993 at
    # these seeds; intervals half as wide would cover about 0.68.
    assert hits / (40 * trials) >= 0.95
    assert cell_hits / trials >= 0.85  # binomial floor for a 95% level over 25-60 releases


NETTRACE = SHARED / "data" / "dpbench" / "1D" / "NETTRACE.n4096.npy"


def nettrace_coverage(mech, delta: float, trials: int = 100) -> tuple[float, float]:
    """(rate over the 40 random ranges, rate of the empty bin 7) of the 95% intervals of
    ``trials`` seeded releases of NETTRACE summed into 128 bins of 32 (five non-zero bins, 21332
    in the first) at epsilon 1 and ``delta``."""
    counts = np.load(NETTRACE).astype(np.int64).reshape(128, 32).sum(axis=1)
    assert np.count_nonzero(counts) == 5 and counts[7] == 0  # sparse and spiky
    rng = np.random.default_rng(5)
    lo = rng.integers(0, 128, 40)
    hi = np.minimum(lo + rng.integers(0, 64, 40), 127)
    cumulative = np.concatenate([[0], np.cumsum(counts)])
    truth = cumulative[hi + 1] - cumulative[lo]
    hits, cell_hits = 0, 0
    for seed in range(trials):
        release = mech.release(counts, 1.0, delta=delta, rng=seed)
        low, high = release.range(lo, hi).confidence_interval(0.05)
        hits += int(np.sum((low <= truth) & (truth <= high)))
        cell_low, cell_high = release.range(7, 7).confidence_interval(0.05)
        cell_hits += int(cell_low <= counts[7] <= cell_high)
    return hits / (lo.size * trials), cell_hits / trials


@pytest.mark.skipif(not os.path.exists(NETTRACE), reason="needs ../shared/data/dpbench")
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_range_intervals_cover_a_dpbench_histogram(neighbours):
    """NETTRACE summed into 128 bins of 32 (five non-zero bins, 21332 in the first; the cell checked
    is an empty bin); 40 random
    ranges and one bin, 100 releases at (1, 1e-6) with template l2-optimal (under replace the
    replace program, with the public total).  4000 range pairs (correlated within a release):
    the rate must lie in [0.93, 0.97] (observed 0.950 under both relations; the empty bin 0.96
    and 0.95); intervals
    half as wide would cover about 0.68, twice as wide 0.9999."""
    mech = Optimized("all-range", template="l2-optimal", neighbours=neighbours)
    rate, cell_rate = nettrace_coverage(mech, 1e-6)
    assert mech.strategy(128).template == "l2-optimal"
    assert 0.93 <= rate <= 0.97
    assert cell_rate >= 0.88  # binomial floor for a 95% level over 100 releases


@pytest.mark.skipif(not os.path.exists(NETTRACE), reason="needs ../shared/data/dpbench")
@pytest.mark.parametrize(("template", "delta", "upper"), [("p-identity", 0.0, 0.98), ("p-identity-l2", 1e-6, 0.97)])
def test_replace_optimised_templates_cover_a_dpbench_histogram(template, delta, upper):
    """The p-Identity templates optimised for replace neighbours (the loss with the public
    total) on the same NETTRACE ranges and empty bin, 100 releases.  Gaussian (1, 1e-6): rate in
    [0.93, 0.97] (observed 0.9515; the bin 0.96).  Discrete Laplace (epsilon 1): the factor is
    the larger of the normal and the Laplace one (dprange.answers), 2.12 standard errors where
    the normal's is 1.96, so near-normal range errors cover about 0.966: rate in [0.93, 0.98]
    (observed 0.969; the bin 0.94)."""
    mech = Optimized("all-range", template=template, neighbours="replace")
    rate, cell_rate = nettrace_coverage(mech, delta)
    described = mech.strategy(128).describe()
    assert described["optimised_for"] == "replace" and described["measured"] == "optimised"
    assert 0.93 <= rate <= upper
    assert cell_rate >= 0.88  # binomial floor for a 95% level over 100 releases


@pytest.mark.skipif(not os.path.exists(ADULT), reason="needs ../shared/data/adult/adult.csv")
@pytest.mark.slow
def test_l2_optimum_rectangle_intervals_cover_the_adult_cross_tabulation():
    """The product of the axes' L2 optima (74 x 99 cells) at (1, 1e-6): 40 random rectangles
    and one cell over 60 releases; rate in [0.93, 0.97] (observed 0.950; the cell 0.90)."""
    frame = pd.read_csv(ADULT, usecols=COLUMNS)
    domain = ProductDomain([Domain.interval(17.0, 91.0, 74), Domain.integers(1, 99)])
    counts = domain.histogram(frame[COLUMNS])
    rects = random_rectangles(counts.shape, 40, rng=5)
    truth = rects.matvec(counts.ravel().astype(float))
    mech = OptimizedKronecker("all-rectangles", template="l2-optimal")
    hits, cell_hits, trials = 0, 0, 60
    for seed in range(trials):
        rel = dprange.release_grid(frame[COLUMNS], domain, 1.0, delta=1e-6, mechanism=mech, rng=seed)
        low, high = rel.rectangle(rects.lows, rects.highs).confidence_interval(0.05)
        hits += int(np.sum((low <= truth) & (truth <= high)))
        cell_low, cell_high = rel.rectangle([[30, 40]], [[30, 40]]).confidence_interval(0.05)
        cell_hits += int(cell_low[0] <= counts[30, 40] <= cell_high[0])
    assert 0.93 <= hits / (40 * trials) <= 0.97
    assert cell_hits / trials >= 0.85
