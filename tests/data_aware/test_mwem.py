"""MWEM (dprange.data_aware.mwem; Hardt, Ligett, McSherry, NeurIPS 2012): the multiplicative-
weights update against the textbook formula, the selection as the exponential mechanism
(private by the definition), the calibration, the accounting and a declared public total."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from _helpers import counts_example

from dprange.data_aware.mwem import MWEM, mwem_update, range_answers
from dprange.data_aware.steps import select_query, selection_gamma, spent
from dprange.errors import ParameterError


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
