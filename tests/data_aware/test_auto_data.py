"""auto-data (dprange.data_aware.auto_data): the feature step against the definition of differential
privacy (exact probabilities of the noisy features on tiny domains, both relations), the merge
cost against every dyadic partition, the rule, the accounting, the error bars of each branch,
and seeded reproducibility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import assert_feature_step_exactly_private, grid_neighbours

import dprange
from dprange import AutoData, ParameterError
from dprange.api.histogram import check_release
from dprange.data_aware.auto_data import choose, choose_many
from dprange.data_aware.selector import (
    FEATURES,
    Selector,
    feature_matrix,
    merge_cost,
    merge_penalty,
    shipped,
    top_mass,
)
from dprange.data_aware.steps import laplace_spec, spent


def feature_pmf(x, mech: AutoData, epsilon: float, grid: np.ndarray, boost: float = 1.0) -> np.ndarray:
    """P(noisy total = t, noisy merge cost = z, noisy top mass = h) on grid^3 (the total is
    exact under replace), from the definition of each step's noise (the merge cost's
    sensitivity: 1, 2 under replace); ``boost`` multiplies each step's epsilon (2: half the noise)."""
    eps_total, eps_merge, eps_top, rest = mech.shares(epsilon)
    moved = 2 if mech.neighbours == "replace" else 1
    cost = merge_cost(np.asarray(x), merge_penalty(rest))
    merge = laplace_spec(boost * eps_merge, moved).pmf(grid - cost)
    top = laplace_spec(boost * eps_top, 1).pmf(grid - top_mass(np.asarray(x)))
    if mech.neighbours == "replace":
        total = (grid == int(np.sum(x))).astype(float)
    else:
        total = laplace_spec(boost * eps_total, 1).pmf(grid - int(np.sum(x)))
    return total[:, None, None] * merge[None, :, None] * top[None, None, :]


def worst_feature_loss(mech: AutoData, epsilon: float, boost: float = 1.0) -> float:
    """max over every dataset on 3 bins of counts 0..2, its neighbours and every feature output
    on the grid of |log P_x(o) / P_y(o)|."""
    grid = np.arange(-25, 31)
    worst = 0.0
    for x in itertools.product(range(3), repeat=3):
        x = np.array(x)
        p = feature_pmf(x, mech, epsilon, grid, boost)
        for y in grid_neighbours(x, mech.neighbours):
            q = feature_pmf(y, mech, epsilon, grid, boost)
            if mech.neighbours == "replace":  # the public total is the same on both sides
                assert np.array_equal(p > 0, q > 0)
            mask = (p > 1e-250) & (q > 1e-250)
            assert mask.any()
            worst = max(worst, float(np.abs(np.log(p[mask] / q[mask])).max()))
    return worst


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_feature_step_is_private_to_its_declared_share(neighbours):
    assert_feature_step_exactly_private(AutoData(feature_share=0.3, neighbours=neighbours), 2.0, worst_feature_loss)


def test_sampled_features_follow_their_distribution_and_are_reproducible():
    x = np.array([0, 4, 0, 1, 0, 0, 7, 0])
    mech = AutoData(feature_share=0.5)
    a = mech.features(x, 1.0, np.random.default_rng(4))
    b = mech.features(x, 1.0, np.random.default_rng(4))
    assert a == b
    draws = np.array([mech.features(x, 1.0, np.random.default_rng(s))[:3] for s in range(3000)])
    eps_total, eps_merge, eps_top, rest = mech.shares(1.0)
    # the merge cost at penalty ceil(1 / (0.75 * 0.5)) = 3: one bucket, deviation 12 from its
    # median 0, plus 3 -> 15 (its halves: 8 + 9 = 17; every bin alone: 24)
    assert merge_penalty(rest) == 3 and merge_cost(x, 3) == 15
    for column, truth, eps in ((0, 12, eps_total), (1, 15, eps_merge), (2, 7, eps_top)):
        spec = laplace_spec(eps, 1)
        assert abs(draws[:, column].mean() - truth) < 4 * spec.variance**0.5 / math.sqrt(3000)
        assert abs(draws[:, column].var() - spec.variance) < 0.15 * spec.variance
        assert set(np.unique(draws[:, column] - truth)) >= {-1, 0, 1}


def test_choice_is_the_selector_on_the_noisy_features():
    """choose / choose_many are the selector applied to feature_matrix (post-processing)."""
    sel = shipped()
    rng = np.random.default_rng(2)
    total, nonempty, top = 10 ** rng.uniform(1, 7, 50), rng.uniform(-5, 300, 50), rng.uniform(0, 1e5, 50)
    for tuned in ("prefix", "all-range"):
        names = choose_many(total, nonempty, top, 256, 0.3, tuned)
        assert names == sel.choose(feature_matrix(total, nonempty, top, 256, 0.3, tuned == "prefix"))
        assert choose(total[3], nonempty[3], top[3], 256, 0.3, tuned) == names[3]


def forced(choice: str) -> Selector:
    """A selector that names ``choice`` below 2^100 bins (so it buys the features: it is not one leaf)."""
    names = ("auto", "dawa") if choice == "auto" else ("auto", choice)
    nodes = [{"feature": FEATURES.index("log_bins"), "threshold": 100.0, "left": 1, "right": 2}]
    nodes += [{"leaf": names.index(choice)}, {"leaf": 1 - names.index(choice)}]
    return Selector("tree", names, {"nodes": nodes})


def one_leaf(choice: str) -> Selector:
    """A constant selector: one leaf naming ``choice``."""
    return Selector("tree", ("auto", choice), {"nodes": [{"leaf": 1 if choice != "auto" else 0}]})


@pytest.mark.parametrize("choice", ["auto", "dawa", "mwem", "structure-first"])
def test_a_constant_selector_buys_no_features(choice):
    """One leaf: the features could not change the choice, so none are bought; the release is the
    chosen mechanism's at the whole epsilon (the same draws), with only its own private steps."""
    x = np.random.default_rng(1).integers(0, 50, 256)
    x[100:180] = 0
    epsilon = 0.8
    mech = AutoData(tuned_for="prefix")
    mech.selector = one_leaf(choice)
    assert not mech.buys_features() and mech.budget_left(epsilon) == epsilon
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ParameterError):
            mech.budget_left(bad)
    assert forced(choice).constant() is None and one_leaf(choice).constant() == choice
    r = mech.release(x, epsilon, rng=3)
    inner, options = mech.candidate(choice, 256, epsilon)
    alone = inner.release(x, epsilon, rng=3, **options)
    np.testing.assert_array_equal(r.estimate, alone.estimate)
    assert r.parameters["features"] is None and r.parameters["chosen"] == inner.name
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == [
        s["step"] for s in alone.parameters.get("private_steps") or [{"step": "measure"}]
    ]
    assert float(spent(steps)) == pytest.approx(epsilon) and r.epsilon <= epsilon
    if choice == "auto":  # exactly auto's release: its exact error bars at the whole epsilon
        model = mech.independent(256, epsilon).error_model(256, epsilon)
        assert r.exact_error_bars
        assert r.range(0, 99).stderr == pytest.approx(math.sqrt(model.range_variance(0, 99)), rel=1e-9)


@pytest.mark.parametrize("choice", ["auto", "dawa", "mwem", "structure-first"])
def test_every_branch_accounting_and_error_bars(choice):
    """Each candidate the selector can name runs with the epsilon left after the three feature
    steps; the steps sum to epsilon exactly; a data-independent release keeps its exact bars."""
    x = np.random.default_rng(0).integers(0, 50, 256)
    x[100:180] = 0
    epsilon = 0.8
    mech = AutoData(feature_share=0.1, tuned_for="prefix")
    mech.selector = forced(choice)
    r = mech.release(x, epsilon, rng=3)
    f = r.parameters["features"]
    rest = mech.shares(epsilon)[3]
    assert f["epsilon_left"] == rest and r.mechanism == "auto-data"
    expected = mech.independent(256, rest).name if choice == "auto" else choice
    assert r.parameters["chosen"] == expected
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps[:3]] == ["total", "merge", "top"]
    assert spent(steps) <= Fraction(epsilon) and r.epsilon <= epsilon
    assert float(spent(steps)) == pytest.approx(epsilon)
    np.testing.assert_array_equal(r.estimate, mech.release(x, epsilon, rng=3).estimate)
    if choice != "auto":
        assert not r.exact_error_bars and r.provenance.data_dependent
    else:  # given the choice, the data-independent release keeps its exact error bars
        assert r.exact_error_bars
        model = mech.independent(256, rest).error_model(256, rest)
        assert r.range(0, 99).stderr == pytest.approx(math.sqrt(model.range_variance(0, 99)), rel=1e-9)


def test_release_uses_the_shipped_selector_on_its_noisy_features():
    rng = np.random.default_rng(0)
    constant = shipped().constant()
    for x, epsilon in ((np.zeros(512, dtype=np.int64), 0.1), (rng.integers(5000, 6000, 512), 1.0)):
        x[[3, 70]] += 5
        r = AutoData().release(x, epsilon, rng=1)
        f = r.parameters["features"]
        if constant is None:
            name = choose(f["total"], f["merge"], f["top"], 512, f["epsilon_left"], "all-range")
            inner = AutoData().candidate(name, 512, f["epsilon_left"])[0]
        else:  # the shipped single leaf: no features bought, the choice at the whole epsilon
            assert f is None
            inner = AutoData().candidate(constant, 512, epsilon)[0]
        assert r.parameters["chosen"] == inner.name


def test_release_through_the_api_on_a_large_domain():
    """dprange.release(..., mechanism="auto-data") checks its noise at the epsilon left (it used
    to build the data-independent mechanism at epsilon 1 and refuse n >= 2048)."""
    import dprange

    values = np.random.default_rng(0).integers(0, 2048, 3000)
    r = dprange.release(values, dprange.Domain.integers(0, 2047), 0.5, mechanism="auto-data", rng=0)
    assert r.mechanism == "auto-data" and float(spent(r.parameters["private_steps"])) == pytest.approx(0.5)


def test_replace_spends_nothing_on_the_public_total():
    mech = AutoData(neighbours="replace")
    mech.selector = forced("auto")
    r = mech.release(np.arange(16), 1.0, rng=1)
    names = [s["step"] for s in r.parameters["private_steps"]]
    assert names[:2] == ["merge", "top"] and "total" not in names
    assert r.parameters["features"]["total"] == float(np.arange(16).sum())


# ------------------------------------------------- through dprange.release (issue 32)
@pytest.mark.parametrize(("n", "epsilon"), [(2048, 1.0), (4096, 0.1)])
def test_auto_data_releases_through_the_facade_from_2048_bins(n, epsilon):
    values = np.random.default_rng(n).integers(0, n, 3000)
    rel = dprange.release(values, dprange.Domain.integers(0, n - 1), epsilon, mechanism="auto-data", rng=1)
    steps = rel.parameters["private_steps"]
    assert spent(steps) <= Fraction(epsilon) and rel.epsilon <= epsilon
    direct = AutoData().release(np.bincount(values, minlength=n), epsilon, rng=1)
    np.testing.assert_array_equal(rel.estimate, direct.estimate)  # the facade runs the same release
    assert steps == direct.parameters["private_steps"]


@pytest.mark.parametrize("selector", [forced("auto"), one_leaf("auto")], ids=["features", "one-leaf"])
def test_data_free_check_uses_the_branch_chosen_at_the_remaining_epsilon(selector):
    mech = AutoData()
    mech.selector = selector
    rest = mech.budget_left(1.0)  # what is left after the features, if bought
    assert rest == (mech.shares(1.0)[-1] if selector.constant() is None else 1.0)
    chosen = mech.independent(2048, rest)
    assert sum(chosen.budget) == pytest.approx(rest)  # a per-level budget list: absolute, sums to rest
    strategy = mech.strategy_at(2048, 1.0)
    assert mech.noise_specs(strategy, 1.0, 0.0) == chosen.noise_specs(chosen.strategy(2048), rest, 0.0)
    check_release(mech, 2048, 1.0)
