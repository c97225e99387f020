"""DAWA (dprange.data_aware.dawa; Li, Hay, Miklau, Wang, PVLDB 2014): accounting, the noise-only
error model against the dense covariance and, given the partition, the estimate's mean and
squared error against Monte-Carlo, the bootstrap of public post-processing, the bucket
hierarchy chosen by exact expected error (GreedyH, or the best hierarchy above its limit) and
the partition step sampling its exact output probabilities."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import counts_example, partition_law

import dprange
from dprange.answers.provenance import Provenance
from dprange.data_aware import dawa as data_aware
from dprange.data_aware.dawa import DAWA
from dprange.data_aware.greedy_h import greedy_weights, hierarchy_of
from dprange.data_aware.steps import spent
from dprange.errors import ParameterError
from dprange.mechanisms.basic import Hierarchical


def test_dawa_accounting_and_honest_error_fields():
    for epsilon in (0.1, 0.3, 1.0, 7.0):
        for neighbours in ("add_remove", "replace"):
            r = DAWA(ratio=0.3, neighbours=neighbours).release(counts_example(), epsilon, rng=1)
            steps = r.parameters["private_steps"]
            assert [s["step"] for s in steps] == ["partition", "measure"]
            assert spent(steps) <= Fraction(epsilon)
            assert steps[0]["epsilon"] == pytest.approx(0.3 * epsilon)
            assert Fraction(r.epsilon) >= spent(steps) and r.epsilon <= epsilon
            assert r.exact_error_bars is False
            assert r.provenance.data_dependent is True
            # no answer claims a coverage: standard errors and intervals are NaN
            assert np.isnan(r.range(0, 10).stderr) and np.all(np.isnan(r.range(0, 10).confidence_interval()))
            assert np.isfinite(r.noise_only_stderr(0, 10)) and r.noise_only_stderr(0, 10) > 0
            assert Provenance.from_dict(r.provenance.to_dict()) == r.provenance


def test_dawa_is_reproducible_from_a_seed_and_expands_uniformly():
    x = counts_example()
    a = DAWA().release(x, 0.5, rng=7)
    b = DAWA().release(x, 0.5, rng=7)
    np.testing.assert_array_equal(a.estimate, b.estimate)
    starts = np.array(a.parameters["buckets"])
    sizes = np.append(starts[1:], x.size) - starts
    for s, size in zip(starts, sizes):
        assert np.all(a.estimate[s : s + size] == a.estimate[s])
    assert a.provenance.seeded


def test_dawa_noise_only_error_model_equals_the_dense_covariance():
    x = counts_example(n=24, seed=2)
    r = DAWA(bucket_branching=3).release(x, 0.4, rng=5)
    model = r.noise_only_error_model
    reduced, starts = model.reduced, model.starts
    k = starts.size
    eye = np.eye(k)
    single = reduced.query_variance(eye)
    cov = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            cov[i, j] = single[i] if i == j else (reduced.query_variance(eye[i] + eye[j]) - single[i] - single[j]) / 2
    expand = np.zeros((x.size, k))
    sizes = np.append(starts[1:], x.size) - starts
    for b, (s, size) in enumerate(zip(starts, sizes)):
        expand[s : s + size, b] = 1 / size
    full = expand @ cov @ expand.T
    lo, hi = np.triu_indices(x.size)
    dense = np.array([full[a : b + 1, a : b + 1].sum() for a, b in zip(lo, hi)])
    np.testing.assert_allclose(model.range_variance(lo, hi), dense, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(r.noise_only_stderr(lo, hi), np.sqrt(dense), rtol=1e-9)
    w = np.random.default_rng(0).normal(size=(5, x.size))
    np.testing.assert_allclose(model.query_variance(w), np.einsum("qi,ij,qj->q", w, full, w), rtol=1e-9)


@pytest.mark.slow
def test_dawa_given_its_partition_is_unbiased_and_its_mse_is_bias_plus_noise_variance(monkeypatch):
    """Given the partition, the estimate's mean is every bucket's true total spread evenly, and a
    range's expected squared error is that spread's bias squared plus the noise-only variance
    (what benchmarks/train_auto_data.py measures DAWA by): Monte-Carlo over 3000 releases with the
    partition held fixed (GreedyH and the best hierarchy)."""
    x = counts_example(n=16, seed=3)
    starts = np.array([0, 3, 4, 8, 9, 15])
    monkeypatch.setattr(DAWA, "partition", lambda self, counts, e1, e2, rng=None: starts)
    sizes = np.diff(np.append(starts, x.size))
    spread = np.repeat(np.add.reduceat(x, starts) / sizes, sizes)
    lo, hi = np.triu_indices(x.size)
    prefix = np.concatenate([[0.0], np.cumsum(x)])
    truth = prefix[hi + 1] - prefix[lo]
    for mech in (DAWA(), DAWA(second_stage="best-hierarchy", bucket_branching=2)):
        rng = np.random.default_rng(8)
        draws = np.array([mech.release(x, 0.5, rng=rng).estimate for _ in range(3000)])
        variance = mech.release(x, 0.5, rng=0).noise_only_stderr(lo, hi) ** 2
        se = draws.std(axis=0) / math.sqrt(draws.shape[0])
        assert np.all(np.abs(draws.mean(axis=0) - spread) <= 4.5 * se)
        cumulative = np.concatenate([np.zeros((draws.shape[0], 1)), np.cumsum(draws, axis=1)], axis=1)
        squared = (cumulative[:, hi + 1] - cumulative[:, lo] - truth) ** 2
        bias = np.concatenate([[0.0], np.cumsum(spread)])
        expected = (bias[hi + 1] - bias[lo] - truth) ** 2 + variance
        assert squared.mean() == pytest.approx(expected.mean(), rel=0.06)
        np.testing.assert_allclose(squared.mean(axis=0), expected, rtol=0.2)


def test_dawa_bootstrap_reruns_public_post_processing_only():
    x = counts_example(n=32, seed=4)
    r = DAWA().release(x, 1.0, rng=3)
    lo, hi = np.array([0, 3, 10]), np.array([31, 20, 12])
    boot = r.bootstrap(lo, hi, reps=300, rng=11)
    np.testing.assert_allclose(boot, r.noise_only_stderr(lo, hi), rtol=0.2)


def test_dawa_chooses_the_bucket_hierarchy_by_exact_expected_error():
    """The "best-hierarchy" second stage (GreedyH's: tests/data_aware/test_greedy_h.py)."""
    from dprange.analysis import expected_error
    from dprange.mechanisms.basic import auto_hierarchies

    x = counts_example(n=256, seed=1)
    r = DAWA(ratio=0.2, second_stage="best-hierarchy").release(x, 0.5, rng=2)
    k = len(r.parameters["buckets"])
    eps2 = r.parameters["private_steps"][1]["epsilon"]
    errors = {m.branching: expected_error(m, "all-range", eps2, n=k) for m in auto_hierarchies(k, fast=True)}
    assert r.parameters["bucket_hierarchy"] == min(errors, key=errors.get)
    fixed = DAWA(ratio=0.2, second_stage="best-hierarchy", bucket_branching=3).release(x, 0.5, rng=2)
    assert fixed.parameters["bucket_hierarchy"] == 3


def test_dawa_has_no_data_free_design_and_checks_its_share():
    with pytest.raises(ParameterError):
        DAWA().design(8, 1.0)
    with pytest.raises(ParameterError, match="strictly between 0 and 1"):
        DAWA(ratio=1.5)


@pytest.mark.parametrize("step,edge_bins", [("privtree", 0), ("privtree", 2), ("gibbs", 0), ("noisy-costs", 0)])
@pytest.mark.parametrize("values", [[3, 0, 0, 3], [0, 0, 0, 0], [1, 0, 0, 0]])
@pytest.mark.slow
def test_dawa_partition_draws_the_exact_output_probabilities(values, step, edge_bins):
    """The mechanism's own partition step samples the distribution the privacy test checks
    (with ``edge_bins`` 2 on 4 bins, both halves split whenever the root does)."""
    x = np.array(values)
    eps_partition, eps_measure = 2.0, 1 / 1.5  # penalty 1 / eps_measure = 1.5, as in the privacy test
    p = partition_law(step, edge_bins)(x, eps_partition, 1 / eps_measure, 1)
    starts_of = {"root": (0,), (True, True): (0, 2), (True, False): (0, 2, 3), (False, True): (0, 1, 2)}
    starts_of[(False, False)] = (0, 1, 2, 3)
    source = np.random.default_rng(5)
    draws = 4000
    seen: dict = {}
    for _ in range(draws):
        key = tuple(
            int(s) for s in DAWA(partition=step, edge_bins=edge_bins).partition(x, eps_partition, eps_measure, source)
        )
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(starts_of.values())
    for key, prob in p.items():
        freq = seen.get(starts_of[key], 0) / draws
        assert abs(freq - prob) <= 4 * math.sqrt(prob * (1 - prob) / draws) + 1e-3


def test_dawa_release_measures_the_greedy_h_strategy():
    x = np.zeros(96, dtype=np.int64)
    x[10:17] = [50, 41, 47, 58, 44, 52, 49]
    x[60:64] = [3, 280, 17, 140]
    r = DAWA(ratio=0.25).release(x, 1.0, rng=4)
    k = len(r.parameters["buckets"])
    eps2 = r.parameters["private_steps"][1]["epsilon"]
    tree, root, budget = hierarchy_of(greedy_weights(k, "all-range"), eps2)
    assert r.parameters["second_stage"] == "greedy_h"
    assert r.parameters["bucket_hierarchy"] == tree
    assert r.parameters["bucket_budget"] == budget and r.parameters["measure_root"] == root
    assert sum(budget) <= eps2
    again = DAWA(ratio=0.25).release(x, 1.0, rng=4)
    np.testing.assert_array_equal(r.estimate, again.estimate)
    # the noise-only error of the buckets is the measured hierarchy's exact GLS error
    mech = Hierarchical(tree, budget, measure_root=root)
    lo, hi = np.triu_indices(k)
    np.testing.assert_allclose(
        r.noise_only_error_model.reduced.range_variance(lo, hi),
        mech.error_model(k, eps2).range_variance(lo, hi),
        rtol=1e-12,
    )


def test_dawa_greedy_h_falls_back_to_best_hierarchy_above_the_limit(monkeypatch):
    x = np.arange(40, dtype=np.int64) % 7 * 30
    monkeypatch.setattr(data_aware, "GREEDY_LIMIT", 2)
    r = DAWA().release(x, 1.0, rng=1)
    old = DAWA(second_stage="best-hierarchy").release(x, 1.0, rng=1)
    assert len(r.parameters["buckets"]) > 2
    assert r.parameters["bucket_hierarchy"] == old.parameters["bucket_hierarchy"]
    np.testing.assert_array_equal(r.estimate, old.estimate)


def test_release_tunes_dawa_to_its_named_workload():
    """dprange.release(..., mechanism="dawa", workload="prefix") measures the buckets with the
    second stage tuned for prefixes, as DAWA(bucket_workload="prefix") does (issue 32)."""
    n = 64
    values = np.random.default_rng(5).integers(0, n, 800)
    domain = dprange.Domain.integers(0, n - 1)
    rel = dprange.release(values, domain, 1.0, mechanism="dawa", workload="prefix", rng=2)
    assert rel.parameters["bucket_workload"] == "prefix"
    direct = DAWA(bucket_workload="prefix").release(np.bincount(values, minlength=n), 1.0, rng=2)
    np.testing.assert_array_equal(rel.estimate, direct.estimate)
    assert rel.parameters["bucket_budget"] == direct.parameters["bucket_budget"]
    other = dprange.release(values, domain, 1.0, mechanism="dawa", workload="identity", rng=2)
    assert other.parameters["bucket_workload"] == "all-range"  # a workload DAWA has no tuning for
