"""The dense L1 template (dprange.optimize.dense): loss and gradient against the dense
formula and finite differences, the optimiser, the Optimized mechanism with template="dense"
(exact error, Monte-Carlo, privacy by the definition, JSON round trip, cache) and auto's rule."""

import json

import numpy as np
import pytest
from _helpers import bounded_ranges

import dprange.mechanisms.optimized as optimized_mechanism
import dprange.optimize.cache as optimized
from dprange.analysis import expected_error
from dprange.answers.release import load_release
from dprange.errors import ParameterError
from dprange.mechanisms.matrix import Matrix
from dprange.mechanisms.optimized import Optimized
from dprange.operators import definition_sensitivity_power
from dprange.optimize.dense import (
    DENSE_MAX_N,
    dense_loss,
    dense_matrix,
    optimize_dense,
    optimize_dense_template,
    split_loss,
)
from dprange.optimize.l2_optimum import strategy_trace
from dprange.optimize.p_identity import OptimizedStrategy, PIdentityStrategy, optimize_p_identity
from dprange.workloads import AllRange, Prefix

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


def numeric_gradient(f, theta, h=1e-6):
    out = np.zeros_like(theta)
    for idx in np.ndindex(*theta.shape):
        step = np.zeros_like(theta)
        step[idx] = h
        out[idx] = (f(theta + step) - f(theta - step)) / (2 * h)
    return out


# ----------------------------------------------------------------------------- the loss


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("workload", [AllRange(8), Prefix(8), bounded_ranges(8, 20, 3)])
def test_loss_is_the_dense_trace_with_unit_l1_columns_and_its_gradient_is_exact(workload, signed):
    gram = workload.gram()
    rng = np.random.default_rng(5)
    theta = rng.normal(size=(11, 8)) if signed else rng.uniform(0.05, 1.0, (11, 8))
    loss, grad = dense_loss(theta, gram, signed)
    A = dense_matrix(theta, signed)
    np.testing.assert_allclose(np.abs(A).sum(axis=0), 1.0, rtol=1e-14)  # the L1 sensitivity
    assert loss == pytest.approx(np.trace(gram @ np.linalg.inv(A.T @ A)), rel=1e-10)
    numeric = numeric_gradient(lambda t: dense_loss(t, gram, signed)[0], theta)
    assert np.max(np.abs(numeric - grad)) <= 1e-6 * np.max(np.abs(grad))


def test_the_split_loss_is_the_signed_loss_and_its_gradient_is_exact():
    """Theta = P - N with disjoint supports: the signed template's loss; the gradient in
    (P, N) matches finite differences (also where both are positive)."""
    gram = Prefix(7).gram()
    rng = np.random.default_rng(2)
    theta = rng.normal(size=(9, 7))
    pn = np.vstack([np.maximum(theta, 0), np.maximum(-theta, 0)])
    assert split_loss(pn, gram)[0] == pytest.approx(dense_loss(theta, gram, signed=True)[0], rel=1e-12)
    pn = pn + rng.uniform(0.0, 0.2, pn.shape)
    loss, grad = split_loss(pn, gram)
    numeric = numeric_gradient(lambda x: split_loss(x, gram)[0], pn)
    assert np.max(np.abs(numeric - grad)) <= 1e-6 * np.max(np.abs(grad))


def test_the_p_identity_loss_is_the_dense_loss_of_its_matrix():
    """[I; B] as a dense Theta gives the p-Identity template's trace."""
    gram = AllRange(16).gram()
    theta, trace = optimize_p_identity(gram, 2)
    assert dense_loss(np.vstack([np.eye(16), theta]), gram)[0] == pytest.approx(trace, rel=1e-9)


def test_a_singular_start_column_is_refused_and_a_singular_step_backs_off():
    gram = AllRange(6).gram()
    with pytest.raises(np.linalg.LinAlgError):
        dense_loss(np.eye(6)[:, [0, 1, 2, 3, 4, 4]] * [1, 1, 1, 1, 1, 0], gram)
    start = np.eye(6) + 0.01
    theta, loss = optimize_dense(gram, start, maxiter=50)
    assert loss <= dense_loss(start, gram)[0] and np.all(theta >= 0)


def test_the_template_ends_at_or_below_the_p_identity_optimum_with_unit_l1_columns():
    """All ranges on 24 bins: the dense strategy's trace is at most the p-Identity optimum it
    starts from (the optimiser keeps its start when no step lowers it).  (Ranges of width at
    most 16 on 32 bins: the identity strategy is stationary for both templates.)"""
    workload = AllRange(24)
    gram = workload.gram()
    theta, p_trace = optimize_p_identity(gram, 2)
    A, trace, start = optimize_dense_template(gram, theta, restarts=1)
    assert start in ("p-identity", "uniform-0")
    assert np.all(A >= 0)
    np.testing.assert_allclose(A.sum(axis=0), 1.0, rtol=1e-12)
    assert trace == pytest.approx(strategy_trace(A, gram), rel=1e-9)
    assert trace <= p_trace * (1 + 1e-12)
    assert trace < 0.97 * np.trace(gram)  # the identity strategy's (measured 0.958)
    A_signed, signed_trace, _ = optimize_dense_template(gram, theta, restarts=1, signed=True)
    np.testing.assert_allclose(np.abs(A_signed).sum(axis=0), 1.0, rtol=1e-12)
    assert signed_trace == pytest.approx(strategy_trace(A_signed, gram), rel=1e-9)
    assert signed_trace <= trace


# ----------------------------------------------------------------------------- the mechanism


def test_exact_error_is_the_matrix_mechanisms_on_the_measured_strategy():
    workload = AllRange(32)  # (on 24 bins the identity has the lower error as released)
    mech = Optimized(workload, template="dense")
    error = expected_error(mech, workload, 1.0)
    strategy = mech.strategy(32)
    assert isinstance(strategy, OptimizedStrategy) and strategy.template == "dense"
    assert error == pytest.approx(expected_error(Matrix(strategy.explicit()), workload, 1.0), rel=1e-9)
    # The quantised strategy's error is the unquantised trace's, to the quantisation tolerance.
    assert error == pytest.approx(2.0 * strategy.trace / workload.m, rel=1e-3)


def test_the_signed_template_starts_from_the_cached_dense_optimum():
    workload = AllRange(32)  # (on 24 bins the identity has the lower error as released)
    dense = Optimized(workload, template="dense").strategy(32)
    mech = Optimized(workload, template="dense-signed")
    signed = mech.strategy(32)
    # It starts from the quantised dense matrix (entries within 2^-16 of the largest).
    assert signed.template == "dense-signed" and signed.trace <= dense.trace * (1 + 1e-9)
    np.testing.assert_allclose(np.abs(signed.explicit()).sum(axis=0) / signed.factor, 1.0, atol=signed.rows * 2.0**-16)
    error = expected_error(mech, workload, 1.0)
    assert error == pytest.approx(expected_error(Matrix(signed.explicit()), workload, 1.0), rel=1e-9)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_worst_case_privacy_loss_by_the_definition_is_at_most_epsilon(neighbours):
    """Prefixes on 9 bins (on 8 the identity is optimal), discrete Laplace: for every pair of
    neighbouring histograms, the largest log ratio of the output pmfs (summed over the measured
    rows, each maximised over the outputs around its shift) is at most epsilon and attains it."""
    n, epsilon = 9, 0.7
    mech = Optimized(Prefix(n), template="dense", neighbours=neighbours, noise="discrete_laplace")
    strategy = mech.strategy(n)
    A = strategy.explicit()
    assert np.count_nonzero(A) > n  # not a diagonal strategy
    assert np.all(A == np.round(A))  # integer queries: integer noise reveals nothing more
    (spec,) = mech.noise_specs(strategy, epsilon, 0.0)
    if neighbours == "add_remove":
        shifts = [A[:, j] for j in range(n)]
    else:
        shifts = [A[:, j] - A[:, k] for j in range(n) for k in range(n) if j != k]

    def row_loss(s):  # max over outputs k of log pmf(k) - log pmf(k - s)
        k = np.arange(-abs(int(s)) - 3, abs(int(s)) + 4)
        return float(np.max(np.log(spec.pmf(k)) - np.log(spec.pmf(k - int(s)))))

    worst = max(max(sum(row_loss(s) for s in sign * shift if s != 0) for sign in (1, -1)) for shift in shifts)
    sensitivity = definition_sensitivity_power(A, 1, neighbours)
    assert strategy.sensitivity(neighbours, 1) == sensitivity
    assert worst <= epsilon * (1 + 1e-12)
    assert worst == pytest.approx(epsilon, rel=1e-6)


def test_monte_carlo_variance_agrees_with_the_exact_error():
    """400 seeded releases of a fixed histogram: the empirical variance of every prefix is
    within 25% of the exact one (sd of a variance estimate: sqrt(2/400) = 7%) and the mean
    error is within 4 standard errors of 0."""
    n, reps = 16, 400
    mech = Optimized(Prefix(n), template="dense", noise="laplace_float")
    assert mech.strategy(n).rows > n  # [I; B], B not 0
    counts = np.random.default_rng(1).integers(0, 40, n)
    lo, hi = np.zeros(n, dtype=int), np.arange(n)
    truth = np.array([counts[a : b + 1].sum() for a, b in zip(lo, hi)])
    answers = np.array([mech.release(counts, 1.0, rng=seed).range(lo, hi).value for seed in range(reps)])
    exact = mech.error_model(n, 1.0).range_variance(lo, hi)
    assert np.var(answers, axis=0) == pytest.approx(exact, rel=0.25)
    assert np.all(np.abs(answers.mean(axis=0) - truth) <= 4 * np.sqrt(exact / reps))


def test_release_round_trips_through_json_and_the_strategy_is_cached(tmp_path):
    workload = AllRange(20)
    first = Optimized(workload, template="dense").strategy(20)
    assert not first.cached
    second = Optimized(workload, template="dense").strategy(20)
    assert second.cached and second.seconds == first.seconds and second.trace == first.trace
    np.testing.assert_array_equal(second.explicit(), first.explicit())
    counts = np.random.default_rng(2).poisson(20, 20)
    release = Optimized(workload, template="dense").release(counts, 0.5, rng=4)
    path = tmp_path / "r.json"
    release.to_json(path)
    loaded = load_release(path)
    np.testing.assert_array_equal(loaded.estimate, release.estimate)
    lo, hi = np.triu_indices(20)
    np.testing.assert_array_equal(loaded.range(lo, hi).stderr, release.range(lo, hi).stderr)
    strategy = json.loads(path.read_text())["parameters"]["strategy"]
    assert strategy["template"] == "dense" and strategy["cached"]


def test_large_domains_are_refused():
    with pytest.raises(ParameterError, match="n <= 512"):
        Optimized("all-range", template="dense").strategy(DENSE_MAX_N + 1)


# ----------------------------------------------------------------------------- auto


@pytest.mark.slow
def test_auto_keeps_p_identity_unless_the_dense_trace_is_clearly_lower(monkeypatch):
    """Prefixes: the p-Identity optimum is a stationary point of the dense template, so auto
    keeps its O(n p^2) shape.  With the margin removed, auto takes the lower trace."""
    strategy = Optimized("prefix").strategy(32)
    assert isinstance(strategy, PIdentityStrategy)
    workload = bounded_ranges(64, 300, 16)
    p_identity = Optimized(workload, template="p-identity").strategy(64)
    dense = Optimized(workload, template="dense").strategy(64)
    assert p_identity.trace * 0.99 < dense.trace < p_identity.trace  # measured 0.06% lower
    assert isinstance(Optimized(workload).strategy(64), PIdentityStrategy)
    monkeypatch.setattr(optimized_mechanism, "AUTO_DENSE_GAIN", 1.0)
    chosen = Optimized(workload).strategy(64)
    assert chosen.template == "dense" and chosen.trace == dense.trace
    # Above AUTO_DENSE_MAX_N, auto ranks the dense template only when it is cached.
    monkeypatch.setattr(optimized_mechanism, "AUTO_DENSE_MAX_N", 16)
    assert Optimized(workload).strategy(64).template == "dense"  # cached above
    other = AllRange(24)
    assert isinstance(Optimized(other).strategy(24), PIdentityStrategy)
    assert not optimized.cache_path(other, "dense", 1, 1).exists()
