"""auto-data (dprange.data_aware.auto_data): the feature step against the definition of differential
privacy (exact probabilities of the noisy features on tiny domains, both relations), the
rule, the accounting, the error bars of each branch, and seeded reproducibility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import grid_neighbours

import dprange
from dprange import AutoData
from dprange.api.histogram import check_release
from dprange.data_aware.auto_data import HIGH, LOW, choose
from dprange.data_aware.steps import laplace_spec, spent


def feature_pmf(x, mech: AutoData, epsilon: float, grid: np.ndarray) -> np.ndarray:
    """P(noisy total = t, noisy non-empty bins = z) on grid x grid (the total is exact under replace)."""
    eps_total, eps_nonempty, _ = mech.shares(epsilon)
    nonempty = laplace_spec(eps_nonempty, 1).pmf(grid - np.count_nonzero(x))
    if mech.neighbours == "replace":
        total = (grid == int(np.sum(x))).astype(float)
    else:
        total = laplace_spec(eps_total, 1).pmf(grid - int(np.sum(x)))
    return np.outer(total, nonempty)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_feature_step_is_private_to_its_declared_share(neighbours):
    epsilon = 2.0
    mech = AutoData(feature_share=0.3, neighbours=neighbours)
    eps_total, eps_nonempty, _ = mech.shares(epsilon)
    budget = eps_total + eps_nonempty
    grid = np.arange(-60, 70)
    worst = 0.0
    for x in itertools.product(range(3), repeat=3):
        x = np.array(x)
        p = feature_pmf(x, mech, epsilon, grid)
        for y in grid_neighbours(x, neighbours):
            q = feature_pmf(y, mech, epsilon, grid)
            both = (p > 1e-300) | (q > 1e-300)
            assert np.all((p > 1e-300) == (q > 1e-300)) or neighbours == "replace"
            mask = (p > 1e-250) & (q > 1e-250)
            if neighbours == "replace":  # the public total is the same on both sides
                assert np.array_equal(p > 0, q > 0)
            worst = max(worst, float(np.abs(np.log(p[mask] / q[mask])).max()))
            assert both.any()
    assert worst <= budget * (1 + 1e-9)
    assert worst >= 0.99 * budget  # tight: the features do depend on the data


def test_sampled_features_follow_their_distribution_and_are_reproducible():
    x = np.array([0, 4, 0, 1, 0, 0, 7, 0])
    mech = AutoData(feature_share=0.5)
    a = mech.features(x, 1.0, np.random.default_rng(4))
    b = mech.features(x, 1.0, np.random.default_rng(4))
    assert a == b
    draws = [mech.features(x, 1.0, np.random.default_rng(s))[:2] for s in range(3000)]
    totals = np.array([d[0] for d in draws])
    nonempty = np.array([d[1] for d in draws])
    eps_total, eps_nonempty, _ = mech.shares(1.0)
    assert abs(totals.mean() - 12) < 4 * laplace_spec(eps_total, 1).variance ** 0.5 / math.sqrt(3000)
    assert abs(nonempty.mean() - 3) < 4 * laplace_spec(eps_nonempty, 1).variance ** 0.5 / math.sqrt(3000)
    assert set(np.unique(totals - 12)) >= {-1, 0, 1}


def test_rule_thresholds():
    assert choose(1000, 100, 0.1 * LOW * 0.99) == "structure-first"  # signal = 1000 eps / 100
    assert choose(1000, 100, 0.1 * LOW) == "dawa"
    assert choose(1000, 100, 0.1 * HIGH * 0.99) == "dawa"
    assert choose(1000, 100, 0.1 * HIGH) == "data-independent"
    assert choose(10**7, 10, 1.0) == "data-independent"
    assert choose(-5, -3, 1.0) == "dawa"  # noisy features below 1 are read as 1: signal = epsilon


def test_branches_accounting_and_error_bars():
    rng = np.random.default_rng(0)
    sparse = np.zeros(256, dtype=np.int64)
    sparse[[3, 70, 71, 200]] = 1
    middle = np.zeros(256, dtype=np.int64)
    middle[:40] = 1
    dense = rng.integers(5000, 6000, 256)
    # the data-independent branch: the least exact error, an optimised strategy on 256 bins
    names = {"structure-first": "structure-first", "dawa": "dawa", "data-independent": "optimized"}
    seen = set()
    # (data, epsilon, share): signals N eps / Z about 0.25 (< LOW), 2 (in [LOW, HIGH)), 5000
    for x, epsilon, share in ((sparse, 0.5, 0.5), (middle, 4.0, 0.5), (dense, 0.5, 0.05)):
        mech = AutoData(feature_share=share)
        r = mech.release(x, epsilon, rng=3)
        f = r.parameters["features"]
        expected = names[choose(f["total"], f["nonempty"], f["epsilon_left"])]
        assert r.parameters["chosen"] == expected and r.mechanism == "auto-data"
        seen.add(expected)
        steps = r.parameters["private_steps"]
        assert [s["step"] for s in steps[:2]] == ["total", "nonempty"]
        assert spent(steps) <= Fraction(epsilon) and r.epsilon <= epsilon
        assert float(spent(steps)) == pytest.approx(epsilon)
        again = mech.release(x, epsilon, rng=3)
        np.testing.assert_array_equal(r.estimate, again.estimate)
        if expected != "optimized":
            assert not r.exact_error_bars and r.provenance.data_dependent
        else:  # given the choice, the data-independent release keeps its exact error bars
            assert r.exact_error_bars
            rest = f["epsilon_left"]
            model = AutoData().independent(256, rest).error_model(256, rest)
            assert r.range(0, 99).stderr == pytest.approx(math.sqrt(model.range_variance(0, 99)), rel=1e-9)
    assert seen == {"structure-first", "dawa", "optimized"}


def test_replace_spends_nothing_on_the_public_total():
    r = AutoData(neighbours="replace").release(np.arange(16), 1.0, rng=1)
    names = [s["step"] for s in r.parameters["private_steps"]]
    assert names[0] == "nonempty" and "total" not in names
    assert r.parameters["features"]["total"] == float(np.arange(16).sum())


# ------------------------------------------------- through dprange.release (issue 32)
@pytest.mark.parametrize(("n", "epsilon"), [(2048, 1.0), (4096, 0.1)])
def test_auto_data_releases_through_the_facade_from_2048_bins(n, epsilon):
    values = np.random.default_rng(n).integers(0, n, 3000)
    rel = dprange.release(values, dprange.Domain.integers(0, n - 1), epsilon, mechanism="auto-data", rng=1)
    steps = rel.parameters["private_steps"]
    assert spent(steps) <= Fraction(epsilon) and rel.epsilon <= epsilon
    assert [s["step"] for s in steps][:2] == ["total", "nonempty"]
    direct = AutoData().release(np.bincount(values, minlength=n), epsilon, rng=1)
    np.testing.assert_array_equal(rel.estimate, direct.estimate)  # the facade runs the same release


def test_data_free_check_uses_the_branch_chosen_at_the_remaining_epsilon():
    mech = AutoData()
    rest = mech.shares(1.0)[2]
    chosen = mech.independent(2048, rest)
    assert sum(chosen.budget) == pytest.approx(rest)  # a per-level budget list: absolute, sums to rest
    strategy = mech.strategy_at(2048, 1.0)
    assert mech.noise_specs(strategy, 1.0, 0.0) == chosen.noise_specs(chosen.strategy(2048), rest, 0.0)
    check_release(mech, 2048, 1.0)
