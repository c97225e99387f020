"""Coverage of k-D error bars on real data: the 95% intervals of random rectangles over the
Adult age x hours-per-week cross-tabulation (../shared/data/adult) hold the true counts at
their level for every data-independent 2-D mechanism whose error bars are exact (the product
optimised for those rectangles included)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import dprange
from conftest import SHARED
from dprange import Domain, ProductDomain
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
