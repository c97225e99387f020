"""auto-data's selector (dprange.data_aware.selector): the concentration feature's sensitivity
against its definition on tiny domains (both relations), the features against explicit
formulas, both model kinds against explicit evaluation, and the shipped selector file."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from _helpers import grid_neighbours, split_selector

from dprange.data_aware.selector import (
    FEATURES,
    SELECTOR_FILE,
    Selector,
    feature_matrix,
    heavy_bins,
    quadratic,
    shipped,
    top_mass,
)
from dprange.registry import MECHANISMS


def brute_top(x: np.ndarray) -> int:
    """The largest sum over every set of heavy_bins(n) bins."""
    m = heavy_bins(x.size)
    return max(int(sum(x[list(s)])) for s in itertools.combinations(range(x.size), m))


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_top_mass_is_the_heaviest_sum_and_moves_by_at_most_one(relation):
    worst = 0
    for n in (3, 5):
        for x in itertools.product(range(3), repeat=n):
            x = np.array(x)
            assert top_mass(x) == brute_top(x)
            for y in grid_neighbours(x, relation):
                worst = max(worst, abs(top_mass(np.asarray(y)) - top_mass(x)))
    assert worst == 1


def test_top_mass_on_larger_domains_sums_n_over_64_bins():
    x = np.zeros(256, dtype=np.int64)
    x[:10] = np.arange(10)
    assert heavy_bins(256) == 4 and top_mass(x) == 9 + 8 + 7 + 6
    assert heavy_bins(20) == 1 and top_mass(np.arange(20)) == 19


def test_feature_matrix_is_the_explicit_formula():
    total, nonempty, top, n, eps = 5000.0, 40.0, 1250.0, 1024, 0.5
    row = feature_matrix(total, nonempty, top, n, eps, True)
    expected = [
        math.log10(total * eps),
        math.log10(total * eps / nonempty),
        math.log10(nonempty / n),
        top / total,
        10.0,
        math.log10(eps),
        1.0,
    ]
    np.testing.assert_allclose(row, expected, rtol=1e-12)
    assert len(expected) == len(FEATURES)
    # noisy values outside their range are read at its edges: N >= 1, 1 <= Z <= n, 0 <= top / N <= 1
    low = feature_matrix(-7.0, -3.0, 9.0, 64, 1.0, False)
    np.testing.assert_allclose(low, [0.0, 0.0, math.log10(1 / 64), 1.0, 6.0, 0.0, 0.0], atol=1e-12)
    assert feature_matrix(10.0, 500.0, -2.0, 64, 1.0, False)[2:4].tolist() == [0.0, 0.0]


def test_ridge_selector_predicts_the_explicit_quadratic():
    rng = np.random.default_rng(0)
    k = len(FEATURES)
    basis_size = 1 + k + k * (k + 1) // 2
    coef = rng.normal(size=(basis_size, 3))
    mean, scale = rng.normal(size=k), rng.uniform(0.5, 2, size=k)
    sel = Selector("ridge", ("auto", "dawa", "mwem", "structure-first"), {"mean": mean, "scale": scale, "coef": coef})
    x = rng.normal(size=(5, k))
    z = (x - mean) / scale
    for r in range(5):
        terms = [1.0, *z[r], *(z[r, i] * z[r, j] for i in range(k) for j in range(i, k))]
        expected = np.concatenate([[0.0], np.array(terms) @ coef])
        np.testing.assert_allclose(sel.predict(x[r : r + 1])[0], expected, rtol=1e-10)
        assert sel.choose_index(x[r : r + 1])[0] == int(np.argmin(expected))
    assert quadratic(x).shape == (5, basis_size)


def tiny_tree() -> Selector:
    """Root: log_signal_per_bin <= 1 -> mwem; else concentration <= 0.5 -> auto, else dawa."""
    return split_selector(("auto", "dawa", "mwem"))


def test_tree_selector_walks_its_nodes():
    sel = tiny_tree()
    x = np.zeros((4, len(FEATURES)))
    x[:, 1] = [0.5, 1.0, 2.0, 2.0]
    x[:, 3] = [0.9, 0.9, 0.5, 0.6]
    assert sel.choose(x) == ["mwem", "mwem", "auto", "dawa"]


def test_constant_names_the_one_choice_of_a_tree_and_nothing_else():
    """A tree whose leaves all name one candidate is constant (its release buys no features); a
    tree with two choices, or any ridge model, is not."""
    assert tiny_tree().constant() is None
    one = Selector("tree", ("auto", "dawa"), {"nodes": [{"leaf": 1}]})
    assert one.constant() == "dawa"
    same = {"feature": 0, "threshold": 1.0, "left": 1, "right": 2}
    assert Selector("tree", ("auto", "dawa"), {"nodes": [same, {"leaf": 0}, {"leaf": 0}]}).constant() == "auto"
    x = np.random.default_rng(0).normal(size=(50, len(FEATURES)))
    assert Selector("tree", ("auto", "dawa"), {"nodes": [same, {"leaf": 0}, {"leaf": 0}]}).choose(x) == ["auto"] * 50
    ridge = {"mean": np.zeros(len(FEATURES)), "scale": np.ones(len(FEATURES)), "coef": [[0.0]] * 36, "margin": 1.0}
    assert Selector("ridge", ("auto", "dawa"), ridge).constant() is None


def test_round_trip_and_layout_check():
    sel = tiny_tree()
    again = Selector.from_dict(json.loads(json.dumps(sel.to_dict())))
    assert again == sel
    bad = sel.to_dict() | {"features": ["log_signal"]}
    with pytest.raises(Exception, match="retrain"):
        Selector.from_dict(bad)


def test_shipped_selector_is_small_versioned_and_names_registered_mechanisms():
    from conftest import REPO

    path = REPO / "src" / "dprange" / "data_aware" / SELECTOR_FILE
    assert path.stat().st_size < 64_000
    sel = shipped()
    assert sel.candidates[0] == "auto" and set(sel.candidates[1:]) <= set(MECHANISMS.names())
    assert sel.training["script"] == "benchmarks/train_auto_data.py"
    assert sel.kind in ("ridge", "tree")
    # every choice is among the candidates on a spread of inputs
    rng = np.random.default_rng(1)
    x = feature_matrix(
        10 ** rng.uniform(0, 8, 200), rng.uniform(1, 1024, 200), rng.uniform(0, 1, 200) * 1e4, 1024, 0.5, False
    )
    assert set(sel.choose(x)) <= set(sel.candidates)


def test_inputs_outside_the_training_range_are_read_at_its_edge():
    sel = tiny_tree()
    k = len(FEATURES)
    sel.model.update(lower=np.full(k, -1.0), upper=np.full(k, 0.4))
    x = np.zeros((2, k))
    x[:, 1] = [5.0, 5.0]  # clipped to 0.4 <= 1: mwem, whatever the concentration
    x[:, 3] = [0.1, 0.9]
    assert sel.choose(x) == ["mwem", "mwem"]
    again = Selector.from_dict(json.loads(json.dumps(sel.to_dict())))
    assert again.choose(x) == ["mwem", "mwem"]
    np.testing.assert_array_equal(again.within_training(np.full((1, k), 3.0)), np.full((1, k), 0.4))
