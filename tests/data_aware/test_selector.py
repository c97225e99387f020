"""auto-data's selector (dprange.data_aware.selector): the concentration and merge-cost features'
sensitivity against their definitions on tiny domains (both relations), the merge cost against
every dyadic partition, the features against explicit
formulas, both model kinds against explicit evaluation, and the shipped selector file."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from _helpers import grid_neighbours, recorded_rules, rule_test_rows, split_selector

from dprange.data_aware.dawa import DAWA
from dprange.data_aware.privtree import median_deviations
from dprange.data_aware.selector import (
    FEATURES,
    MERGE_MEASURE_SHARE,
    SELECTOR_FILE,
    Selector,
    feature_matrix,
    heavy_bins,
    merge_cost,
    merge_penalty,
    quadratic,
    shipped,
    top_mass,
)
from dprange.errors import ParameterError
from dprange.registry import MECHANISMS


def brute_top(x: np.ndarray, heavy: int | None = None) -> int:
    """The largest sum over every set of ``heavy`` (default heavy_bins(n)) bins."""
    m = heavy_bins(x.size) if heavy is None else heavy
    return max(int(sum(x[list(s)])) for s in itertools.combinations(range(x.size), m))


def test_top_mass_on_sparse_and_dense_grids_is_the_sorted_sum():
    """Fewer non-empty bins than heavy_bins(n) (all of them count), as many, and more (a
    selection among them), with ties, against the sum of the largest counts after a full sort."""
    rng = np.random.default_rng(4)
    for n, occupied in ((640, 3), (640, 10), (640, 11), (4096, 64), (4096, 65), (4096, 4096), (1000, 500)):
        for _ in range(5):
            x = np.zeros(n, dtype=np.int64)
            x[rng.choice(n, occupied, replace=False)] = rng.integers(1, 4, occupied)  # many ties
            expected = int(np.sort(x)[::-1][: heavy_bins(n)].sum())
            assert top_mass(x) == expected
            assert top_mass(x.reshape(-1, 8 if n % 8 == 0 else 1)) == expected  # a grid, read as one list
            for heavy in (1, 16, occupied, occupied + 1):  # a fixed number of bins (the 2-D feature's 16)
                assert top_mass(x, heavy) == int(np.sort(x)[::-1][:heavy].sum())


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("heavy", [None, 2, 3])
def test_top_mass_is_the_heaviest_sum_and_moves_by_at_most_one(relation, heavy):
    worst = 0
    for n in (3, 5):
        for x in itertools.product(range(3), repeat=n):
            x = np.array(x)
            assert top_mass(x, heavy) == brute_top(x, heavy)
            for y in grid_neighbours(x, relation):
                worst = max(worst, abs(top_mass(np.asarray(y), heavy) - top_mass(x, heavy)))
    assert worst == 1


def test_top_mass_on_larger_domains_sums_n_over_64_bins():
    x = np.zeros(256, dtype=np.int64)
    x[:10] = np.arange(10)
    assert heavy_bins(256) == 4 and top_mass(x) == 9 + 8 + 7 + 6
    assert heavy_bins(20) == 1 and top_mass(np.arange(20)) == 19


def test_feature_matrix_is_the_explicit_formula():
    total, merge, top, n, eps = 5000.0, 400.0, 1250.0, 1024, 0.5
    penalty = 3  # ceil(1 / (0.75 * 0.5))
    assert merge_penalty(eps) == penalty and merge_penalty(1.0) == 2 and merge_penalty(100.0) == 1
    assert MERGE_MEASURE_SHARE == 1 - DAWA().ratio  # priced as DAWA's default measurement share
    row = feature_matrix(total, merge, top, n, eps, True)
    share = merge / (penalty * n)
    expected = [math.log10(total * eps), share, math.log10(share), top / total, 10.0, math.log10(eps), 1.0]
    np.testing.assert_allclose(row, expected, rtol=1e-12)
    assert len(expected) == len(FEATURES)
    # noisy values outside their range are read at its edges: N >= 1, 0.001 <= share <= 1.5, 0 <= top / N <= 1
    low = feature_matrix(-7.0, -3.0, 9.0, 64, 1.0, False)
    np.testing.assert_allclose(low, [0.0, 0.001, -3.0, 1.0, 6.0, 0.0, 0.0], atol=1e-12)
    high = feature_matrix(10.0, 1e6, -2.0, 64, 1.0, False)
    assert high[1:4].tolist() == [1.5, math.log10(1.5), 0.0]


def brute_merge_cost(x: np.ndarray, penalty: int) -> int:
    """The least sum_B (d(B) + penalty) over every aligned dyadic partition, by recursion over the
    dyadic tree (the last node of a level truncated at n), d the L1 deviation from the median."""
    n = x.size

    def deviation(block):
        return int(min(np.abs(block - c).sum() for c in block))

    def best(lo: int, size: int) -> int:
        whole = deviation(x[lo : min(lo + size, n)]) + penalty
        if size == 1:
            return whole
        half = size // 2
        split = best(lo, half) + (best(lo + half, half) if lo + half < n else 0)
        return min(whole, split)

    return best(0, 1 << max(0, (n - 1).bit_length()))


def selection_merge_cost(x: np.ndarray, penalty: int) -> int:
    """The bottom-up pass with each node's deviation by a selection (median_deviations), the way
    merge_cost computed it before it kept the nodes sorted."""
    cost = np.full(x.size, penalty, dtype=np.int64)
    size = 1
    while size < x.size:
        size *= 2
        if cost.size % 2:
            cost = np.append(cost, 0)
        cost = np.minimum(median_deviations(x, size) + penalty, cost.reshape(-1, 2).sum(axis=1))
    return int(cost.sum())


def test_merge_cost_by_sorted_runs_equals_the_selection_and_leaves_counts_alone():
    """Large and odd sizes (truncated last nodes at several levels), sparse and dense counts: the
    sorted runs give the same integer as a selection per node, and the caller's array is unchanged."""
    rng = np.random.default_rng(3)
    for n in (2, 3, 255, 1000, 1024, 4097, 65_537):
        for density in (0.01, 0.3, 1.0):
            x = rng.poisson(3.0, n) * (rng.random(n) < density)
            before = x.copy()
            for penalty in (1, 4, 40):
                assert merge_cost(x, penalty) == selection_merge_cost(x, penalty)
            assert np.array_equal(x, before)


def test_merge_cost_is_the_least_dyadic_partition_cost():
    rng = np.random.default_rng(0)
    for n in range(1, 14):
        for _ in range(20):
            x = rng.integers(0, 6, n) * (rng.random(n) < 0.5)
            penalty = int(rng.integers(1, 5))
            assert merge_cost(x, penalty) == brute_merge_cost(x, penalty)
    assert merge_cost(np.zeros(1000, dtype=np.int64), 7) == 7  # all flat: one bucket
    assert merge_cost(np.arange(8) * 100, 1) == 8  # every bin alone
    assert merge_cost(np.array([0, 4, 0, 1, 0, 0, 7, 0]), 3) == 15
    for counts, penalty in (([1, -2], 1), ([1.5, 2], 1), ([], 1), ([1, 2], 0), ([1, 2], 1.5)):
        with pytest.raises(ParameterError):
            merge_cost(np.array(counts), penalty)
    for epsilon in (0.0, -1.0, float("nan")):
        with pytest.raises(ParameterError):
            merge_penalty(epsilon)


@pytest.mark.parametrize(("relation", "bound"), [("add_remove", 1), ("replace", 2)])
def test_merge_cost_moves_by_its_sensitivity(relation, bound):
    """Exhaustive on 3 and 5 bins of counts 0..2 and every neighbour: the merge cost moves by at
    most 1 under add/remove and 2 under replace, and both bounds are reached."""
    worst = 0
    for n in (3, 5):
        for x in itertools.product(range(3), repeat=n):
            x = np.array(x)
            for penalty in (1, 2):
                for y in grid_neighbours(x, relation):
                    worst = max(worst, abs(merge_cost(np.asarray(y), penalty) - merge_cost(x, penalty)))
    assert worst == bound


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
    """Root: merge_share <= 0.5 -> mwem; else concentration <= 0.5 -> auto, else dawa."""
    return split_selector(("auto", "dawa", "mwem"))


def test_tree_selector_walks_its_nodes():
    sel = tiny_tree()
    x = np.zeros((4, len(FEATURES)))
    x[:, 1] = [0.2, 0.5, 0.9, 0.9]
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


def test_shipped_rules_tree_chooses_as_its_rules_read():
    """A rules fit (benchmarks/train_auto_data.py, fit_rules) ships as a tree; it must choose, on
    every input, what its recorded rule says: per workload, DAWA iff merge_share <= a, or
    merge_share <= b and concentration <= c, or log_signal <= s and merge_share <= d."""
    sel = shipped()
    rules = recorded_rules(sel)
    # log_signal, share, _, concentration: drawn about the thresholds, so every term decides some rows
    columns = [(2.5, 4), (0.1, 0.3), (0, 0), (0.4, 1), [8.0, 10.0], (-1, 0), [0.0, 1.0]]
    columns_of = {"a": 1, "b": 1, "c": 3, "s": 0, "d": 1}  # share, concentration, signal
    placements = [(r[k], (columns_of[k],)) for r in rules.values() for k in "abcsd"]  # inputs on every threshold
    rows = 10_000
    x = rule_test_rows(sel, np.random.default_rng(5), rows, columns, placements)
    x[:, 2] = np.log10(x[:, 1])
    signal, share, concentration = x[:, 0], x[:, 1], x[:, 3]
    expected = []
    for i in range(rows):
        r = rules["prefix" if x[i, 6] > 0 else "all-range"]
        dawa = (
            share[i] <= r["a"]
            or (share[i] <= r["b"] and concentration[i] <= r["c"])
            or (signal[i] <= r["s"] and share[i] <= r["d"])
        )
        expected.append("dawa" if dawa else "auto")
    chosen = sel.choose(x)
    assert chosen == expected
    assert {"auto", "dawa"} <= set(chosen)


def test_inputs_outside_the_training_range_are_read_at_its_edge():
    sel = tiny_tree()
    k = len(FEATURES)
    sel.model.update(lower=np.full(k, -1.0), upper=np.full(k, 0.4))
    x = np.zeros((2, k))
    x[:, 1] = [5.0, 5.0]  # clipped to 0.4 <= 0.5: mwem, whatever the concentration
    x[:, 3] = [0.1, 0.9]
    assert sel.choose(x) == ["mwem", "mwem"]
    again = Selector.from_dict(json.loads(json.dumps(sel.to_dict())))
    assert again.choose(x) == ["mwem", "mwem"]
    np.testing.assert_array_equal(again.within_training(np.full((1, k), 3.0)), np.full((1, k), 0.4))
