"""MWEM (dprange.data_aware.mwem; Hardt, Ligett, McSherry, NeurIPS 2012): the multiplicative-
weights update against the textbook formula, the selection as the exponential mechanism
(private by the definition), the calibration, the accounting and a declared public total."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from _helpers import counts_example, grid_neighbours

import dprange
from dprange.data_aware.mwem import (
    MWEM,
    TotalEstimate,
    measured_pieces,
    mwem_update,
    range_answers,
    rounds_for,
    update_passes,
)
from dprange.data_aware.steps import laplace_spec, select_query, selection_gamma, spent
from dprange.errors import ParameterError
from dprange.workloads import Ranges


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
        total, select, measure = MWEM(rounds=rounds, total_share=0.05).shares(0.3)
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


# ------------------------------------------------- practical choices (issue 32)
def test_update_passes_equal_repeated_textbook_updates():
    rng = np.random.default_rng(3)
    weights = rng.uniform(1, 10, size=12)
    history = [(2, 5, 40.0), (0, 11, 70.0), (7, 7, 3.0), (0, 3, 20.0)]
    total = 65.0
    expected = weights * (total / weights.sum())
    for _ in range(3):
        for lo, hi, m in history:
            expected = mwem_update(expected, lo, hi, m, total)
    got = weights.copy()
    update_passes(got, history, total, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def pieces_loss(x, y, pieces, spec, grid):
    """max over every output of |log P_x / P_y| of the pieces' noisy counts (independent draws)."""
    loss = 0.0
    for lo, hi in pieces:
        p = spec.pmf(grid - int(x[lo : hi + 1].sum()))
        q = spec.pmf(grid - int(y[lo : hi + 1].sum()))
        mask = (p > 1e-250) & (q > 1e-250)
        loss += float(np.abs(np.log(p[mask] / q[mask])).max())
    return loss


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_measured_pieces_are_private_by_the_definition(relation):
    """The round's measurement (a range and, under add/remove, the parts of its complement, one
    discrete-Laplace draw each at the round's epsilon) against the definition on 3 bins: every
    range, every dataset with counts below 3, every neighbour; the pieces are independent, so
    the worst output's log-ratio is the sum of the pieces' worst.  At most epsilon and attained;
    with half the noise it exceeds epsilon; under replace the complements would cost 2 epsilon,
    so MWEM measures the range alone there."""
    epsilon = 0.7
    spec = laplace_spec(epsilon, 1)
    half = laplace_spec(2 * epsilon, 1)
    grid = np.arange(-80, 90)
    complements = relation == "add_remove"
    worst = worst_half = with_complements = 0.0
    for x in itertools.product(range(3), repeat=3):
        x = np.array(x)
        for y in grid_neighbours(x.reshape(1, -1), relation):
            y = y.ravel()
            for lo, hi in zip(*np.triu_indices(3)):
                pieces = measured_pieces(int(lo), int(hi), 3, complements)
                worst = max(worst, pieces_loss(x, y, pieces, spec, grid))
                worst_half = max(worst_half, pieces_loss(x, y, pieces, half, grid))
                all_pieces = measured_pieces(int(lo), int(hi), 3, True)
                with_complements = max(with_complements, pieces_loss(x, y, all_pieces, spec, grid))
    assert 0.99 * epsilon <= worst <= epsilon * (1 + 1e-9)
    assert worst_half > 1.9 * epsilon
    if relation == "replace":
        assert with_complements > 1.9 * epsilon
        rel = MWEM(rounds=3, neighbours=relation).release(counts_example(), 1.0, rng=1)
        assert rel.parameters["complements_measured"] is False
    else:
        rel = MWEM(rounds=3).release(counts_example(), 1.0, rng=1)
        assert rel.parameters["complements_measured"] is True
        assert [s["step"] for s in rel.parameters["private_steps"]] == ["total", "select", "measure"]


def test_total_estimate_is_the_inverse_variance_mean():
    estimate = TotalEstimate()
    estimate.add(120.0, 4.0)
    estimate.add(100.0, 12.0)
    assert estimate.value == pytest.approx((120 / 4 + 100 / 12) / (1 / 4 + 1 / 12))
    low = TotalEstimate()
    low.add(-30.0, 1.0)
    assert low.value == 1.0  # at least one record
    fixed = TotalEstimate()
    fixed.fix(77.0)
    fixed.add(1000.0, 1.0)
    assert fixed.value == 77.0


def test_auto_rounds_follow_mwem_stars_table():
    assert [rounds_for(t, 1.0) for t in (0, 10, 100, 1000, 10**4, 10**5, 10**6, 10**7, 10**9)] == [
        2, 2, 4, 8, 12, 60, 80, 140, 140,
    ]  # fmt: skip
    assert rounds_for(5 * 10**4, 1.0) == int(12 + 48 * 4 / 9)  # linear between the table's points
    x = counts_example()
    rel = MWEM().release(x, 0.5, rng=1, public_total=10_000)
    assert rel.parameters["rounds_run"] == rounds_for(10_000, 0.5) == 9
    assert len(rel.parameters["selected"]) == 9
    steps = rel.parameters["private_steps"]
    assert [s["times"] for s in steps] == [9, 9] and float(spent(steps)) == pytest.approx(0.5)
    replace = MWEM(neighbours="replace").release(x, 2.0, rng=1)
    assert replace.parameters["rounds_run"] == rounds_for(int(x.sum()), 2.0)


def test_iterate_last_or_average():
    x = counts_example(n=32)
    one = [
        MWEM(rounds=1, iterate=it).release(x, 1.0, rng=5, public_total=int(x.sum())).estimate
        for it in ("last", "average")
    ]
    np.testing.assert_allclose(one[0], one[1], rtol=1e-13)  # one round: one approximation
    last = MWEM(rounds=6, iterate="last").release(x, 1.0, rng=5, public_total=int(x.sum()))
    average = MWEM(rounds=6, iterate="average").release(x, 1.0, rng=5, public_total=int(x.sum()))
    assert last.parameters["selected"] == average.parameters["selected"]  # the same run
    assert not np.allclose(last.estimate, average.estimate)
    assert last.estimate.sum() == pytest.approx(x.sum()) and average.estimate.sum() == pytest.approx(x.sum())


def test_release_hands_its_workload_to_mwem():
    """dprange.release(..., mechanism="mwem", workload=...) selects among the release's ranges,
    as MWEM(workload=...) does; too many ranges are refused before any value is read."""
    n = 64
    values = np.random.default_rng(2).integers(0, n, 500)
    domain = dprange.Domain.integers(0, n - 1)
    ranges = Ranges(np.array([0, 5, 10, 40]), np.array([3, 30, 10, 63]), n)
    rel = dprange.release(values, domain, 1.0, mechanism="mwem", workload=ranges, rng=3)
    assert rel.parameters["queries"] == 4 and set(rel.parameters["selected"]) <= {0, 1, 2, 3}
    direct = MWEM(workload=ranges).release(np.bincount(values, minlength=n), 1.0, rng=3)
    np.testing.assert_array_equal(rel.estimate, direct.estimate)
    every = dprange.release(values, domain, 1.0, mechanism="mwem", rng=3)  # the default: all ranges
    assert every.parameters["queries"] == n * (n + 1) // 2 and every.parameters["workload"] == "all-range"
    prefix = dprange.release(values, domain, 1.0, mechanism="mwem", workload="prefix", rng=3)
    assert prefix.parameters["queries"] == n
    big = dprange.Domain.integers(0, 2**13 - 1)
    with pytest.raises(ParameterError, match="enumerates its workload"):
        dprange.release(values, big, 1.0, mechanism="mwem")
