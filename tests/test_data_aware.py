"""DAWA and MWEM (dprange.data_aware): each private step against the definition on tiny
domains (exact output probabilities, neighbour ratios), the partition against a brute-force
minimiser, the multiplicative-weights update against the textbook formula, the accounting,
the noise-only error model against the dense covariance, and seeded reproducibility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import grid_neighbours, output_probabilities

from dprange.answers.provenance import Provenance
from dprange.answers.release import Release
from dprange.data_aware.dawa import DAWA
from dprange.data_aware.mwem import MWEM, mwem_update, range_answers
from dprange.data_aware.partition import dyadic_levels, dyadic_partition, partition_noise, scaled_deviations
from dprange.data_aware.steps import select_query, selection_gamma, spent
from dprange.errors import ParameterError


# ------------------------------------------------------------------------- partition
def dev(x):
    return float(np.abs(x - x.mean()).sum())


def test_scaled_deviations_are_size_times_l1_deviation():
    x = np.array([3, 0, 7, 7, 1, 2, 9, 4, 5, 0, 0], dtype=np.int64)
    for size in (2, 4, 8, 16):
        sizes, costs = scaled_deviations(x, size)
        starts = np.arange(0, x.size, size)
        expected = [s * dev(x[a : a + s]) for a, s in zip(starts, sizes)]
        np.testing.assert_allclose(costs, expected, atol=1e-9)


def interval_costs(level_costs, n):
    """Cost of every candidate bucket [a, b) of two or more bins (its lowest level)."""
    cost_of = {}
    for level, size in zip(level_costs, dyadic_levels(n)):
        for j, c in enumerate(level):
            a, b = j * size, min(j * size + size, n)
            if b - a > 1:
                cost_of.setdefault((a, b), c)
    return cost_of


def partition_cost(cost_of, n, penalty, starts):
    total = 0.0
    for a, b in zip(starts, list(starts[1:]) + [n]):
        if b - a > 1 and (a, b) not in cost_of:
            return math.inf
        total += penalty + (cost_of[(a, b)] if b - a > 1 else 0.0)
    return total


def brute_force(level_costs, n, penalty):
    """Minimum over every partition of 0..n-1 into intervals (2^(n-1) of them)."""
    cost_of = interval_costs(level_costs, n)
    best = (math.inf, None)
    for cuts in itertools.product((0, 1), repeat=n - 1):
        starts = [0] + [i + 1 for i, c in enumerate(cuts) if c]
        total = partition_cost(cost_of, n, penalty, starts)
        if total < best[0] - 1e-12:
            best = (total, starts)
    return best


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9])
def test_partition_equals_brute_force_minimiser_of_the_noisy_cost(n):
    rng = np.random.default_rng(n)
    for _ in range(30):
        x = rng.integers(0, 6, size=n)
        penalty = float(rng.choice([0.5, 2.0, 5.0]))
        costs = [
            c / s + rng.normal(scale=3.0, size=c.size)
            for size in dyadic_levels(n)
            for s, c in [scaled_deviations(x, size)]
        ]
        starts = dyadic_partition(costs, n, penalty)
        best, brute = brute_force(costs, n, penalty)
        assert partition_cost(interval_costs(costs, n), n, penalty, starts.tolist()) == pytest.approx(best, abs=1e-9)
        assert starts.tolist() == brute


@pytest.mark.parametrize(("neighbours", "changed"), [("add_remove", 1), ("replace", 2)])
def test_partition_neighbour_ratio_is_at_most_e_to_its_share(neighbours, changed):
    epsilon, penalty = 2.0, 1.5
    worst = 0.0
    rng = np.random.default_rng(3)
    bases = [np.array(v) for v in ([0, 0, 0, 0], [3, 0, 0, 3], [1, 2, 0, 4])] + [
        rng.integers(0, 5, 4) for _ in range(3)
    ]
    for x in bases:
        p = output_probabilities(x, epsilon, penalty, changed)
        for y in grid_neighbours(x, neighbours):
            q = output_probabilities(y, epsilon, penalty, changed)
            for key in p:
                if min(p[key], q[key]) > 1e-12:
                    worst = max(worst, abs(math.log(p[key] / q[key])))
    assert worst <= epsilon + 1e-9
    assert worst > 0.2 * epsilon  # the test is sensitive: the noise does depend on the data


def test_partition_noise_spends_exactly_its_share():
    for n, changed in [(2, 1), (4, 2), (13, 1), (4096, 1)]:
        specs = partition_noise(n, 0.3, changed)
        sizes = [min(s, n) for s in dyadic_levels(n)]
        loss = sum(Fraction(2 * changed * (s - 1)) / Fraction(sp.effective_scale) for s, sp in zip(sizes, specs))
        assert loss <= Fraction(0.3)
        assert float(loss) == pytest.approx(0.3, rel=1e-9)


# ------------------------------------------------------------------------- DAWA release
def counts_example(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros(n, dtype=np.int64)
    x[n // 10 : n // 10 + 7] = rng.integers(40, 60, 7)
    x[5 * n // 8 : 5 * n // 8 + 4] = rng.integers(0, 300, 4)
    return x


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


def test_saved_data_aware_release_says_why_it_has_no_error_bars():
    for mech in (DAWA(), MWEM(rounds=3)):
        r = mech.release(counts_example(), 1.0, rng=1)
        saved = r.to_dict()
        assert saved["error_bars"].startswith("not available: private data-dependent choices")
        assert saved["total"]["stderr"] is None and saved["deciles"]["lower"] is None
        loaded = Release.from_json(r.to_json())
        assert loaded.exact_error_bars is False and loaded.provenance == r.provenance
        np.testing.assert_allclose(loaded.estimate, r.estimate)


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


def test_dawa_bootstrap_reruns_public_post_processing_only():
    x = counts_example(n=32, seed=4)
    r = DAWA().release(x, 1.0, rng=3)
    lo, hi = np.array([0, 3, 10]), np.array([31, 20, 12])
    boot = r.bootstrap(lo, hi, reps=300, rng=11)
    np.testing.assert_allclose(boot, r.noise_only_stderr(lo, hi), rtol=0.2)


def test_dawa_chooses_the_bucket_hierarchy_by_exact_expected_error():
    """The "best-hierarchy" second stage (GreedyH's: tests/test_data_aware_greedy_h.py)."""
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


# ------------------------------------------------------------------------- MWEM
def test_mwem_update_equals_the_textbook_formula():
    rng = np.random.default_rng(0)
    a = rng.uniform(1, 10, size=9)
    total = a.sum()
    q = np.zeros(9)
    q[2:6] = 1
    measured = 17.5
    textbook = a * np.exp(q * (measured - q @ a) / (2 * total))
    textbook *= total / textbook.sum()
    np.testing.assert_allclose(mwem_update(a, 2, 5, measured, total), textbook, rtol=1e-13)


def selection_probabilities(counts, weights, lo, hi, epsilon):
    scores = np.abs(range_answers(weights, lo, hi) - range_answers(counts, lo, hi))
    logits = float(selection_gamma(epsilon)) * scores  # the gamma MWEM.release uses
    p = np.exp(logits - logits.max())
    return p / p.sum()


def test_mwem_selection_is_the_exponential_mechanism_and_private():
    lo, hi = np.array([0, 0, 0, 1, 2]), np.array([0, 1, 2, 2, 2])
    weights = np.array([1.5, 2.0, 0.5])
    epsilon = 0.8
    worst = 0.0
    for x in itertools.product(range(4), repeat=3):
        x = np.array(x)
        p = selection_probabilities(x, weights, lo, hi, epsilon)
        neighbours = []
        for i in range(3):
            neighbours.append(np.eye(3, dtype=int)[i])  # add / remove
            neighbours += [np.eye(3, dtype=int)[j] - np.eye(3, dtype=int)[i] for j in range(3) if j != i]  # replace
        for change in neighbours:
            y = x + change
            if np.any(y < 0):
                continue
            q = selection_probabilities(y, weights, lo, hi, epsilon)
            worst = max(worst, np.abs(np.log(p / q)).max())
    assert worst <= epsilon + 1e-12
    # the exact sampler draws from these probabilities (fixed seed, 4 standard errors)
    x = np.array([3, 0, 1])
    p = selection_probabilities(x, weights, lo, hi, epsilon)
    approx = range_answers(weights, lo, hi)
    exact = range_answers(x, lo, hi)
    scores = np.abs(approx - exact)
    source = np.random.default_rng(1)
    draws = 8000
    picks = [
        select_query(
            scores, lambda r: abs(Fraction(float(approx[r])) - int(exact[r])), selection_gamma(epsilon), source
        )
        for _ in range(draws)
    ]
    freq = np.bincount(picks, minlength=lo.size) / draws
    assert np.all(np.abs(freq - p) <= 4 * np.sqrt(p * (1 - p) / draws))


def test_mwem_measurement_and_total_noise_are_exactly_calibrated():
    from dprange.data_aware.steps import laplace_spec

    for epsilon in (0.00475, 0.1, 1 / 3, 2.0):
        spec = laplace_spec(epsilon, 1)
        assert Fraction(1) / Fraction(spec.effective_scale) <= Fraction(epsilon)
        assert spec.effective_scale == pytest.approx(1 / epsilon, rel=1e-9)
    for rounds in (1, 7, 100):
        total, select, measure = MWEM(rounds=rounds).shares(0.3)
        assert Fraction(total) + rounds * (Fraction(select) + Fraction(measure)) <= Fraction(0.3)
        assert total == pytest.approx(0.015) and select == pytest.approx(0.285 / rounds / 2)


def test_mwem_accounting_reproducibility_and_error_fields():
    x = counts_example()
    for neighbours in ("add_remove", "replace"):
        r = MWEM(rounds=7, neighbours=neighbours).release(x, 0.9, rng=2)
        s = MWEM(rounds=7, neighbours=neighbours).release(x, 0.9, rng=2)
        np.testing.assert_array_equal(r.estimate, s.estimate)
        steps = r.parameters["private_steps"]
        names = [st["step"] for st in steps]
        assert names == (["total"] if neighbours == "add_remove" else []) + ["select", "measure"]
        assert spent(steps) <= Fraction(0.9)
        assert r.exact_error_bars is False
        assert np.isnan(r.range(0, 10).stderr)
        assert len(r.parameters["selected"]) == 7
        if neighbours == "replace":
            assert r.estimate.sum() == pytest.approx(x.sum())
        with pytest.raises(ParameterError, match="no public post-processing"):
            r.bootstrap(0, 3, reps=5)


def test_mwem_learns_the_workload():
    x = counts_example(n=64)
    r = MWEM(rounds=30).release(x, 5.0, rng=4)
    lo, hi = np.zeros(64, dtype=int), np.arange(64)
    uniform = np.full(64, x.sum() / 64)
    err = np.abs(range_answers(r.estimate, lo, hi) - range_answers(x, lo, hi)).mean()
    base = np.abs(range_answers(uniform, lo, hi) - range_answers(x, lo, hi)).mean()
    assert err < 0.5 * base


def test_mwem_with_a_declared_public_total_spends_nothing_on_it():
    x = counts_example()
    r = MWEM(rounds=5).release(x, 0.5, rng=1, public_total=int(x.sum()) + 10)
    steps = r.parameters["private_steps"]
    assert [s["step"] for s in steps] == ["select", "measure"]
    assert float(spent(steps)) == pytest.approx(0.5) and spent(steps) <= Fraction(0.5)
    assert r.estimate.sum() == pytest.approx(x.sum() + 10)  # every update keeps the declared total
    assert r.provenance.total == x.sum() + 10
    private = MWEM(rounds=5).release(x, 0.5, rng=1)
    assert [s["step"] for s in private.parameters["private_steps"]][0] == "total"
    with pytest.raises(ParameterError, match="public_total must be a positive integer"):
        MWEM(rounds=5).release(x, 0.5, rng=1, public_total=0)


@pytest.mark.parametrize("values", [[3, 0, 0, 3], [0, 0, 0, 0], [1, 0, 0, 0]])
def test_dawa_partition_draws_the_exact_output_probabilities(values):
    """The mechanism's own partition step samples the distribution the privacy test checks."""
    x = np.array(values)
    eps_partition, eps_measure = 2.0, 1 / 1.5  # penalty 1 / eps_measure = 1.5, as in the privacy test
    p = output_probabilities(x, eps_partition, 1 / eps_measure, 1)
    starts_of = {"root": (0,), (True, True): (0, 2), (True, False): (0, 2, 3), (False, True): (0, 1, 2)}
    starts_of[(False, False)] = (0, 1, 2, 3)
    source = np.random.default_rng(5)
    draws = 4000
    seen: dict = {}
    for _ in range(draws):
        key = tuple(int(s) for s in DAWA().partition(x, eps_partition, eps_measure, source))
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(starts_of.values())
    for key, prob in p.items():
        freq = seen.get(starts_of[key], 0) / draws
        assert abs(freq - prob) <= 4 * math.sqrt(prob * (1 - prob) / draws) + 1e-3
