"""2-D data-aware mechanisms (dprange.data_aware.grid: kd-tree, hybrid tree, Hilbert noise, DAWA
on the Hilbert order): accounting and honest error fields, per-level steps, reproducibility, the
bootstrap against the noise-only error, registration, refusals before the data, and saved
releases (checked against their shape before parsing)."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import assert_exactly_private_at, grid_neighbours, peak_bytes_raising

import dprange
import dprange.data_aware.grid as grid_module
import dprange.data_aware.steps as steps_module
from dprange import DAWA, DAWAHilbert, HybridTree, KDTree, ProductDomain
from dprange.data_aware.grid import signal_ratio
from dprange.data_aware.hilbert import hilbert_sequence
from dprange.data_aware.steps import spent, step
from dprange.errors import DataError, ParameterError
from dprange.privacy.samplers import resolve_rng
from dprange.registry import GRID_MECHANISMS


class ZeroNoise:
    """A noise spec whose samples are all 0: a step's value as computed, before its noise."""

    def sample(self, shape, rng):
        return np.zeros(shape, dtype=np.int64)


# ------------------------------------------------------------------------- releases
def grid_example(seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros((16, 16), dtype=np.int64)
    x[2:5, 3:9] = rng.integers(20, 40, (3, 6))
    x[10:12, 10:16] = rng.integers(0, 200, (2, 6))
    return x


MECHS = [KDTree(depth=4), HybridTree(kd_levels=2, height=5), DAWAHilbert()]


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_accounting_and_honest_error_fields(mech):
    x = grid_example()
    for epsilon in (0.1, 1.0, 7.0):
        for neighbours in ("add_remove", "replace"):
            m = type(mech)(**{**mech.parameters(), "neighbours": neighbours})
            r = m.release(x, epsilon, rng=1)
            steps = r.parameters["private_steps"]
            assert spent(steps) <= Fraction(epsilon)
            assert spent(steps) >= Fraction(epsilon) * Fraction(999999, 1000000)  # nothing left unspent
            assert Fraction(r.epsilon) >= spent(steps) and r.epsilon <= epsilon
            assert r.provenance.data_dependent and r.exact_error_bars is False
            one = r.rectangle([0, 0], [7, 9])
            assert math.isnan(one.stderr) and all(math.isnan(v) for v in one.confidence_interval())
            assert np.all(np.isnan(r.marginal(0).stderr))
            noise_only = r.noise_only_stderr([[0, 0], [3, 3]], [[7, 9], [15, 15]])
            assert np.all(np.isfinite(noise_only)) and np.all(noise_only > 0)
            assert r.to_dict()["error_bars"].startswith("not available")
            if neighbours == "replace":
                assert r.rectangle([0, 0], [15, 15]).value == pytest.approx(x.sum())


def test_tree_steps_are_declared_per_level():
    r = HybridTree(kd_levels=2, height=4, split_share=0.2).release(grid_example(), 1.0, rng=3)
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["median", "median"] + ["counts"] * 5
    assert sum(s["epsilon"] for s in steps[:2]) == pytest.approx(0.2)
    counts = np.array([s["epsilon"] for s in steps[2:]])
    np.testing.assert_allclose(counts[1:] / counts[:-1], 2 ** (1 / 3))  # geometric, leaves last
    r = KDTree(depth=3, split_share=0.25, neighbours="replace").release(grid_example(), 2.0, rng=3)
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["median"] * 3 + ["counts"]
    assert steps[-1]["epsilon"] == pytest.approx(1.5)
    assert r.parameters["leaves"] == 8 == len(r.parameters["leaf_rectangles"])


def test_leaf_counts_noise_spends_exactly_its_share():
    from dprange.data_aware.steps import laplace_spec

    for eps, sensitivity in ((0.05, 1), (0.7, 2), (1 / 3, 1)):
        spec = laplace_spec(eps, sensitivity)
        assert Fraction(sensitivity) / Fraction(spec.effective_scale) <= Fraction(eps)
        assert sensitivity / spec.effective_scale == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
def test_estimates_are_reproducible_from_a_seed(mech):
    x = grid_example(1)
    a, b = mech.release(x, 0.5, rng=11), mech.release(x, 0.5, rng=11)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.parameters == b.parameters and a.provenance.seeded
    c = mech.release(x, 0.5, rng=12)
    assert not np.array_equal(a.counts, c.counts)
    assert not mech.release(x, 0.5).provenance.seeded


def test_dawa_hilbert_is_the_1_d_dawa_on_the_hilbert_order():
    x = grid_example(2)
    seq = hilbert_sequence(x.shape)
    r = DAWAHilbert(ratio=0.2).release(x, 0.8, rng=5)
    inner = DAWA(ratio=0.2, edge_bins=0).release(x.ravel()[seq], 0.8, rng=5)  # dawa_hilbert's default
    np.testing.assert_allclose(r.counts.ravel()[seq], inner.estimate)
    assert r.parameters["private_steps"] == inner.parameters["private_steps"]
    assert r.parameters["order"] == "hilbert"
    # noise-only errors: the 1-D model's, on the cells of the rectangle read in Hilbert order
    lows, highs = np.array([[1, 2]]), np.array([[9, 12]])
    w = np.zeros(x.shape)
    w[1:10, 2:13] = 1
    expected = np.sqrt(inner.noise_only_error_model.query_variance(w.ravel()[seq][None, :]))
    np.testing.assert_allclose(r.noise_only_stderr(lows, highs), expected)


def test_signal_ratio_follows_the_noisy_total_per_cell(monkeypatch):
    """ratio="signal": a share 0.02 of epsilon buys N-hat (the step "total", recorded first),
    and DAWA runs with the rest at partition share 0.4 where log10(N-hat eps_rest / cells) >=
    -0.5, else 0.25; the steps' exact sum is at most epsilon."""
    monkeypatch.setattr(steps_module, "laplace_spec", lambda epsilon, sensitivity: ZeroNoise())
    x = np.zeros((16, 16), dtype=np.int64)
    epsilon = 0.5
    rest = 0.5 - 0.5 * 0.02
    threshold = 10**-0.5 * 256 / rest  # N at the threshold: 165.5...
    for n, share in ((int(threshold), 0.25), (int(threshold) + 1, 0.4)):
        x[:] = 0
        x[3, 4], x[10, 1] = n - n // 2, n // 2
        r = DAWAHilbert().release(x, epsilon, rng=1)
        p = r.parameters
        assert (p["ratio"], p["chosen_ratio"], p["signal_total"]) == ("signal", share, float(n))
        steps = p["private_steps"]
        assert [s["step"] for s in steps] == ["total", "partition", "measure"]
        assert steps[0]["epsilon"] == pytest.approx(0.01) and steps[1]["epsilon"] == pytest.approx(share * rest)
        assert spent(steps) <= Fraction(epsilon) and r.epsilon == pytest.approx(epsilon, rel=1e-12)


def test_signal_release_is_the_fixed_share_release_given_its_total(monkeypatch):
    """Given N-hat, ratio="signal" releases exactly what DAWAHilbert at the chosen share does
    with the rest of epsilon and the same random stream (so its law is that mechanism's, after
    the total's: sequential composition of two steps each checked from the definition)."""
    x = grid_example(4)
    for fixed in (3.0, 1e6):
        monkeypatch.setattr(grid_module, "noisy_total", lambda counts, eps, source, t=fixed: (t, [step("total", eps)]))
        r = DAWAHilbert().release(x, 0.8, rng=9)
        eps_total, rest = DAWAHilbert().signal_budgets(0.8)
        share = signal_ratio(fixed, rest, x.size)
        same = DAWAHilbert(ratio=share).release(x, rest, rng=9)
        np.testing.assert_array_equal(r.counts, same.counts)
        assert r.parameters["buckets"] == same.parameters["buckets"]
        assert r.parameters["private_steps"][1:] == same.parameters["private_steps"]
        assert eps_total + rest <= 0.8 and eps_total == pytest.approx(0.016)
    assert {signal_ratio(3.0, 0.784, x.size), signal_ratio(1e6, 0.784, x.size)} == {0.25, 0.4}


def test_signal_ratio_and_the_noisy_total_refuse_bad_input():
    for args, message in (
        ((1e4, 0.5, 0), "cells must be an integer >= 1"),
        ((1e4, -1.0, 16), "epsilon must be a positive finite number"),
        ((float("nan"), 1.0, 16), "noisy total must be a finite number"),
    ):
        with pytest.raises(ParameterError, match=message):
            signal_ratio(*args)
    with pytest.raises(ParameterError, match="the total's epsilon"):
        steps_module.noisy_total(np.array([1, 2]), -0.1, np.random.default_rng(0))
    assert steps_module.noisy_total(np.array([1, 2]), 0.0, None) == (3.0, [])


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_signal_total_step_is_private_to_its_share(relation):
    """The step "total" from the definition: P(N-hat = t) on every 2 x 2 grid of up to 3
    records and each neighbour; the worst log-ratio is its recorded share exactly (tight, and
    over it with half the noise); under replace N is public: no step, no noise."""
    mech = DAWAHilbert(neighbours=relation)
    eps_total, rest = mech.signal_budgets(2.0)
    if relation == "replace":
        assert (eps_total, rest) == (0.0, 2.0)
        x = np.array([[2, 0], [1, 0]])
        assert steps_module.noisy_total(x, eps_total, np.random.default_rng(0)) == (3.0, [])
        assert [s["step"] for s in mech.release(x, 2.0, rng=0).parameters["private_steps"]][0] == "partition"
        return
    calls = []
    original = steps_module.laplace_spec

    def recorded(epsilon, sensitivity):
        calls.append((epsilon, sensitivity))
        return original(epsilon, sensitivity)

    with pytest.MonkeyPatch.context() as patch:  # the spec the release draws N-hat from
        patch.setattr(steps_module, "laplace_spec", recorded)
        mech.release(np.array([[2, 0], [1, 0]]), 2.0, rng=0)
    assert calls == [(eps_total, 1)]
    window = np.arange(-30, 34)

    def loss(boost: float) -> float:
        spec = steps_module.laplace_spec(boost * eps_total, 1)
        worst = 0.0
        for cells in itertools.product(range(3), repeat=4):
            x = np.array(cells).reshape(2, 2)
            if x.sum() > 3:
                continue
            for y in grid_neighbours(x, relation):
                p, q = spec.pmf(window - x.sum()), spec.pmf(window - y.sum())
                worst = max(worst, float(np.abs(np.log(p / q)).max()))
        return worst

    assert_exactly_private_at(loss, eps_total)


@pytest.mark.parametrize("mech", MECHS, ids=lambda m: m.name)
@pytest.mark.slow
def test_bootstrap_agrees_with_the_noise_only_stderr(mech):
    """Both measure the noise alone given the private choices: the bootstrap's standard
    deviation matches the closed form within its Monte-Carlo error (fixed seed)."""
    r = mech.release(grid_example(3), 1.0, rng=2)
    lows, highs = np.array([[0, 0], [2, 3], [8, 8]]), np.array([[15, 15], [9, 12], [12, 15]])
    exact = r.noise_only_stderr(lows, highs)
    boot = r.bootstrap(lows, highs, reps=800, rng=3)
    finite = exact > 1e-9
    np.testing.assert_allclose(boot[finite], exact[finite], rtol=0.12)


# ------------------------------------------------------------------------- registry, facade
def test_registered_as_grid_mechanisms_and_released_by_name():
    for name in ("kd_tree", "hybrid_tree", "dawa_hilbert"):
        entry = GRID_MECHANISMS[name]
        assert entry.nameable and not entry.auto and entry.factory.data_aware
    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    rng = np.random.default_rng(0)
    columns = [rng.integers(0, 16, 500), rng.integers(0, 8, 500)]
    for name in ("kd_tree", "hybrid_tree", "dawa_hilbert"):
        r = dprange.release_grid(columns, domain, 1.0, mechanism=name, rng=1)
        assert r.mechanism == name and r.exact_error_bars is False and r.domain is domain
        assert r.rectangle([0, 0], [15, 15]).value == pytest.approx(500, abs=200)
    r = dprange.release_grid(columns, domain, 1.0, mechanism="kd_tree", depth=2, rng=1)
    assert r.parameters["depth"] == 2 and r.parameters["leaves"] == 4


def test_bad_parameters_are_refused_before_the_data():
    with pytest.raises(ParameterError, match="kd_levels"):
        HybridTree(kd_levels=5, height=3)
    with pytest.raises(ParameterError, match="split_share"):
        KDTree(split_share=1.0)
    with pytest.raises(ParameterError, match="2-D"):
        KDTree().plan((4, 4, 4), 1.0)
    with pytest.raises(ParameterError, match="delta=0"):
        KDTree().release(grid_example(), 1.0, delta=1e-6)
    with pytest.raises(ParameterError, match="no data-free design"):
        KDTree().error_model((4, 4), 1.0)
    with pytest.raises(ParameterError, match="noise='auto'"):
        HybridTree(noise="gaussian").plan((4, 4), 1.0)
    r = KDTree(depth=2).release(grid_example(), 1.0, rng=1)
    with pytest.raises(ParameterError, match="reps"):
        r.bootstrap([0, 0], [3, 3], reps=1)
    assert resolve_rng(None) is not None


def test_hybrid_auto_height_reaches_single_cells():
    x = np.random.default_rng(2).integers(0, 9, (12, 20))
    r = HybridTree(kd_levels=3).release(x, 1.0, rng=4)
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps].count("counts") == 3 + 5 + 1  # kd levels, log2(32) halvings, the root
    assert r.parameters["leaves"] == x.size  # every leaf a single cell: no expansion bias
    with pytest.raises(ParameterError, match="height"):
        HybridTree(height=0)


def test_saved_release_answers_the_same_and_says_why_it_has_no_error_bars():
    from dprange.data_aware.grid import DataAwareGridRelease
    from dprange.errors import DataError

    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    r = HybridTree(kd_levels=1, height=4)
    rel = r.release(grid_example(4), 1.0, rng=2, domain=domain)
    loaded = DataAwareGridRelease.from_json(rel.to_json())
    np.testing.assert_array_equal(loaded.counts, rel.counts)
    assert loaded.provenance == rel.provenance and loaded.domain == domain
    assert loaded.exact_error_bars is False and math.isnan(loaded.rectangle([0, 0], [3, 3]).stderr)
    with pytest.raises(ParameterError, match="no measurements"):
        loaded.noise_only_stderr([0, 0], [3, 3])
    with pytest.raises(DataError, match="data_aware_grid_release"):
        DataAwareGridRelease.from_json({"kind": "grid_release"})


MILLION = "[" + ",".join(["0.5"] * 10**6) + "]"


def test_a_data_aware_grid_release_with_more_counts_than_its_shape_is_refused_before_parsing():
    from dprange.data_aware.grid import DataAwareGridRelease, HybridTree

    domain = dprange.ProductDomain([dprange.Domain.integers(0, 7), dprange.Domain.integers(0, 7)])
    rel = HybridTree(kd_levels=1, height=3).release(np.arange(64).reshape(8, 8) % 3, 1.0, rng=2, domain=domain)
    data = rel.to_dict()
    data["counts"] = "MILLION"
    text = json.dumps(data).replace('"MILLION"', MILLION)
    with pytest.raises(DataError, match=r"the saved release has 1000000 cells, its shape \[8, 8\] needs 64"):
        DataAwareGridRelease.from_json(text)
    assert peak_bytes_raising(DataError, lambda: DataAwareGridRelease.from_json(text)) < 1 << 20
    np.testing.assert_array_equal(DataAwareGridRelease.from_json(rel.to_json()).counts, rel.counts)
