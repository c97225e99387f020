"""iReduct (dprange.data_aware.ireduct): the discrete noise-down against its generating-function identity
(exact pmfs) and its conditional law (Monte Carlo, fixed seeds), the exact Bernoulli draws, the
privacy of a whole adaptive run from the definition (exact output probabilities on a tiny
histogram), the accounting, and seeded reproducibility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from dprange.data_aware.ireduct import (
    _bernoulli_ratio,
    decay_exponent,
    ireduct,
    marginal_queries,
    noise_up,
    noise_up_pmf,
    unit_levels,
)
from dprange.data_aware.steps import laplace_spec
from dprange.errors import ParameterError

K = np.arange(-120, 121)


def w_pmf_from_definition(fine, coarse, k):
    """P(W = k): 0 with probability pi_0 = (p_f / p_c) ((1 - p_c) / (1 - p_f))^2, else
    discrete Laplace of the coarse scale (p = exp(-1 / b), b the sampled scale)."""
    p_c, p_f = math.exp(-1 / coarse.effective_scale), math.exp(-1 / fine.effective_scale)
    pi0 = (p_f / p_c) * ((1 - p_c) / (1 - p_f)) ** 2
    return pi0 * (k == 0) + (1 - pi0) * coarse.pmf(k)


@pytest.mark.parametrize(("eps_coarse", "eps_fine"), [(0.3, 0.5), (0.5, 2.0), (1.0, 1.1)])
def test_fine_noise_plus_w_has_the_coarse_law_exactly(eps_coarse, eps_fine):
    fine, coarse = laplace_spec(eps_fine, 1), laplace_spec(eps_coarse, 1)
    w = w_pmf_from_definition(fine, coarse, K)
    np.testing.assert_allclose(w, noise_up_pmf(fine, coarse, K), rtol=1e-12, atol=1e-300)
    assert w.min() >= 0 and w.sum() == pytest.approx(1.0, abs=1e-12)
    convolved = np.convolve(fine.pmf(K), w)[K.size // 2 : K.size // 2 + K.size]
    middle = np.abs(K) <= 40  # away from the truncation
    np.testing.assert_allclose(convolved[middle], coarse.pmf(K[middle]), rtol=1e-10)


def test_bernoulli_ratio_draws_its_probability():
    fine, coarse = laplace_spec(1.2, 1), laplace_spec(0.4, 1)
    g_c, g_f = decay_exponent(coarse), decay_exponent(fine)
    assert g_c == Fraction(1) / Fraction(coarse.effective_scale)
    p = (1 - math.exp(-float(g_c))) / (1 - math.exp(-float(g_f)))
    draws = _bernoulli_ratio(g_c, g_f, 40000, np.random.default_rng(1))
    assert abs(draws.mean() - p) <= 4 * math.sqrt(p * (1 - p) / draws.size)


def test_noise_down_chain_has_the_right_marginals_and_conditional_law():
    """V_f ~ fine, V_c = V_f + W: V_c has the coarse law, and the conditional law of the finer
    answer given the published coarser one is P_f(b) P_W(a - b) / P_c(a) (Bayes)."""
    fine, coarse = laplace_spec(1.0, 1), laplace_spec(0.35, 1)
    rng = np.random.default_rng(7)
    n = 60000
    v_f = fine.sample((n,), rng)
    v_c = v_f + noise_up(fine, coarse, n, rng)
    for k in range(-3, 4):
        p = float(coarse.pmf(np.array([k]))[0])
        assert abs(np.mean(v_c == k) - p) <= 4 * math.sqrt(p * (1 - p) / n)
    for a in (0, 2, -4):
        given = v_f[v_c == a]
        bayes = fine.pmf(K) * noise_up_pmf(fine, coarse, a - K) / coarse.pmf(np.array([a]))[0]
        assert bayes.sum() == pytest.approx(1.0, abs=1e-9)
        for b in range(a - 2, a + 3):
            p = float(bayes[K == b][0])
            freq = np.mean(given == b)
            assert abs(freq - p) <= 4 * math.sqrt(p * (1 - p) / given.size) + 1e-9, (a, b)
    with pytest.raises(ParameterError, match="fine scale"):
        noise_up(coarse, fine, 3, rng)


# ------------------------------------------------------------------------- a whole run
EPS = 1.5
SANITY = 1.0


def run_distribution(x):
    """Exact law of iReduct's output on 2 cells with q1 = cell 0, q2 = cells 0 + 1, units 3,
    starting at 1 unit each (eps / 3), levels 1, 2, 3: only one query can be raised (cell 0
    holds both), the one of larger estimated relative error sd / max(|y|, sanity) at level 0
    (ties: the first).  Output: (raised query, answer 1, answer 2) -> probability."""
    coarse, fine = laplace_spec(EPS / 3, 1), laplace_spec(2 * EPS / 3, 1)
    q = (int(x[0]), int(x[0] + x[1]))
    sd = math.sqrt(coarse.variance)
    grid = np.arange(-90, 91)
    p_c = coarse.pmf(grid)
    y = grid[:, None]  # the level-0 noise of the raised query
    out = {}
    for raised in (0, 1):
        other = 1 - raised
        # joint of (level-0 noise y, level-1 noise v) of the raised query: P_f(v) P_W(y - v)
        v = grid[None, :]
        joint = fine.pmf(v) * noise_up_pmf(fine, coarse, y - v)  # (y, v)
        ans_raised0 = q[raised] + y[:, 0]
        for c_index, c in enumerate(grid):
            ans_other = q[other] + c
            s_raised = sd / np.maximum(np.abs(ans_raised0), SANITY)
            s_other = sd / max(abs(ans_other), SANITY)
            picks = s_raised > s_other if raised == 1 else s_raised >= s_other  # ties: the first query
            mass = (joint * picks[:, None]).sum(axis=0) * p_c[c_index]  # over the hidden level-0 value
            for v_index in np.flatnonzero(mass > 1e-14):
                answer_raised = q[raised] + int(grid[v_index])
                answers = (answer_raised, ans_other) if raised == 0 else (ans_other, answer_raised)
                out[(raised, *answers)] = out.get((raised, *answers), 0.0) + float(mass[v_index])
    return out


def test_a_whole_run_is_epsilon_dp_from_the_definition():
    worst = 0.0
    for x in ([0, 0], [3, 1], [1, 5]):
        x = np.array(x)
        p = run_distribution(x)
        assert sum(p.values()) == pytest.approx(1.0, abs=1e-9)
        for y in (x + [1, 0], x + [0, 1]):  # add / remove one record
            q = run_distribution(y)
            for key in set(p) & set(q):
                if min(p[key], q[key]) > 1e-9:
                    worst = max(worst, abs(math.log(p[key] / q[key])))
    assert worst <= EPS + 1e-9
    assert worst > 0.5 * EPS  # sensitive: the outputs do depend on the data


def test_the_implementation_draws_the_run_of_the_definition():
    x = np.array([2, 1])
    queries = np.array([[1, 0], [1, 1]])
    assert unit_levels(1, 3, 2.0) == [1, 2, 3]
    p = run_distribution(x)
    p_first = sum(v for k, v in p.items() if k[0] == 0)
    draws = 800
    first = 0
    for t in range(draws):
        r = ireduct(x, queries, EPS, units=3, initial=1 / 3, growth=2.0, sanity=SANITY, rng=t)
        assert r.raises == 1 and r.epsilon == pytest.approx(EPS)
        first += int(r.epsilons[0] > r.epsilons[1])
    assert abs(first / draws - p_first) <= 4 * math.sqrt(p_first * (1 - p_first) / draws)


# ------------------------------------------------------------------------- accounting
def test_marginal_queries_sum_the_other_axes():
    x = np.arange(24).reshape(2, 3, 4)
    for axes in [(0,), (2,), (0, 2), (2, 0), (1, 2, 0)]:
        got = marginal_queries(x.shape, axes) @ x.ravel()
        expected = np.transpose(x, [*axes, *[a for a in range(3) if a not in axes]])
        expected = expected.reshape(math.prod(x.shape[a] for a in axes), -1).sum(axis=1)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_spend_never_exceeds_epsilon_and_runs_reproduce_from_a_seed(neighbours):
    x = np.random.default_rng(3).integers(0, 30, (6, 5))
    x[0, :] = 0
    queries = sp.vstack([marginal_queries(x.shape, 0), marginal_queries(x.shape, 1), sp.identity(30)]).tocsr()
    for epsilon in (0.1, 1.0):
        r = ireduct(x, queries, epsilon, neighbours=neighbours, units=200, rng=5)
        dense = queries.toarray()
        per_cell = dense.T @ r.epsilons  # what a record in each cell costs
        cost = per_cell.max() * (2 if neighbours == "replace" else 1)
        assert cost <= epsilon * (1 + 1e-12) and r.epsilon <= epsilon
        assert cost == pytest.approx(r.epsilon, rel=1e-9)
        for e, scale in zip(r.epsilons, r.scales):
            assert Fraction(1) / Fraction(scale) <= Fraction(e)  # each answer's noise is calibrated to its share
        assert r.raises > 0 and r.seeded
        again = ireduct(x, queries, epsilon, neighbours=neighbours, units=200, rng=5)
        np.testing.assert_array_equal(r.answers, again.answers)
        # the run ends only when no query can be raised: each is at the top level or would
        # overspend one of its cells
        capacity = 200 if neighbours == "add_remove" else 100
        units = np.rint(r.epsilons * 200 / epsilon).astype(int)
        used = dense.T @ units
        levels = unit_levels(units.min(), capacity, 1.25)
        for i, u in enumerate(units):
            assert u in levels
            if u < capacity:
                step = levels[levels.index(u) + 1] - u
                assert used[dense[i] > 0].max() + step > capacity
        np.testing.assert_allclose(r.estimated_relative_error, r.stderr / np.maximum(np.abs(r.answers), 1.0))


def test_target_stops_early_and_bad_parameters_are_refused():
    x = np.full(8, 500)
    loose = ireduct(x, None, 1.0, target=1.0, rng=1)
    assert loose.raises == 0  # every answer is already within the target
    tight = ireduct(x, None, 1.0, rng=1)
    assert tight.raises > 0 and np.all(tight.epsilons == pytest.approx(1.0))  # disjoint cells: each gets epsilon
    for kwargs, message in [
        ({"sanity": 0}, "sanity"),
        ({"growth": 1.0}, "growth"),
        ({"units": 1}, "units"),
        ({"initial": 1.5}, "initial"),
        ({"neighbours": "swap"}, "neighbours"),
    ]:
        with pytest.raises(ParameterError, match=message):
            ireduct(x, None, 1.0, **kwargs)
    with pytest.raises(ParameterError, match="0/1"):
        ireduct(x, np.full((2, 8), 2), 1.0)
    with pytest.raises(ParameterError, match="starting shares"):
        ireduct(x, np.ones((4, 8)), 1.0, initial=0.5)
    assert list(itertools.islice(unit_levels(10, 100, 1.25), 4)) == [10, 13, 17, 22]
