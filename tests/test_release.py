"""Release answers: values, exact standard errors, CDF, quantiles, serialisation."""

import json
import math

import numpy as np
import pytest

import dprange
from conftest import range_matrix
from dprange import Domain, Flat, Hierarchical, ParameterError, Wavelet
from dprange.analysis import expected_error, select
from dprange.api import choose_mechanism
from dprange.registry import MECHANISMS
from dprange.workloads import Explicit, Ranges


def test_ranges_prefix_histogram_are_consistent():
    x = np.arange(20) % 7
    rel = Hierarchical(3).release(x, 1.0, rng=4)
    est = rel.histogram().value
    lo, hi = np.array([0, 3, 19]), np.array([19, 11, 19])
    np.testing.assert_allclose(rel.range(lo, hi).value, [est[a : b + 1].sum() for a, b in zip(lo, hi)])
    np.testing.assert_allclose(rel.prefix([4, 19]).value, [est[:5].sum(), est.sum()])
    assert isinstance(rel.range(2, 5).value, float)
    assert rel.total().value == pytest.approx(est.sum())
    with pytest.raises(ParameterError):
        rel.range(5, 2)
    with pytest.raises(ParameterError):
        rel.range(0, 20)
    with pytest.raises(ParameterError):
        rel.range(0.5, 3)


def test_stderr_matches_dense_covariance_of_estimator():
    mech = Hierarchical(2, neighbours="add_remove")
    x = np.array([3, 1, 4, 1, 5, 9, 2])
    rel = mech.release(x, 0.8, rng=1)
    meas = mech.measure(x, 0.8, rng=1)
    A = mech.strategy(x.size).dense()
    _, v = meas.stacked()
    cov = np.linalg.inv(A.T @ np.diag(1 / v) @ A)
    lo, hi = np.triu_indices(7)
    Q = range_matrix(7, lo, hi)
    np.testing.assert_allclose(rel.range(lo, hi).variance, np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-9)


def test_confidence_interval_normal_quantile():
    rel = Flat(noise="laplace_float").release(np.array([10, 20, 30]), 1.0, rng=0)
    ans = rel.range(0, 1)
    lo, hi = ans.confidence_interval(0.05)
    # continuous Laplace: the larger of the normal and Laplace factors, ln(20)/sqrt(2) = 2.118
    assert hi - lo == pytest.approx(2 * np.log(20) / np.sqrt(2) * ans.stderr)
    g = Flat().release(np.array([10, 20, 30]), 1.0, delta=1e-6, rng=0).range(0, 1)
    lo, hi = g.confidence_interval(0.05)
    assert hi - lo == pytest.approx(2 * 1.959963984540054 * g.stderr)
    with pytest.raises(ParameterError):
        ans.confidence_interval(1.5)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_single_bin_interval_under_discrete_laplace_holds_exactly(epsilon):
    """One bin of Flat is one discrete Laplace draw X (P(|X| >= m) = 2 t^m / (1 + t)).  The
    continuous factor 2.118 sd misses it: at epsilon = 1, 2.118 sd = 2.87, P(|X| >= 3) =
    0.073 > 0.05.  The release's interval uses the lattice-aware factor: exact miss <= alpha."""
    rel = Flat().release(np.array([10, 20, 30]), epsilon, rng=0)
    ans = rel.range(1, 1)
    t = np.exp(-1.0 / rel.noise_scales[0])
    assert ans.variance == pytest.approx(2 * t / (1 - t) ** 2)
    lo, hi = ans.confidence_interval(0.05)
    half = (hi - lo) / 2
    miss = 2 * t ** (np.floor(half) + 1) / (1 + t)  # P(|X| > half)
    assert miss <= 0.05
    old_half = np.log(20) / np.sqrt(2) * ans.stderr
    if epsilon == 1.0:
        assert 2 * t ** (np.floor(old_half) + 1) / (1 + t) > 0.05  # the old factor under-covered


def test_cdf_public_total_and_delta_method_against_monte_carlo():
    """CDF standard errors: exact with a public total, delta method otherwise; both checked
    against 3000 Monte-Carlo releases (variance ratio within 5 relative s.d. of a sample
    variance, sqrt(5/3000) = 0.041, plus the delta method's O(1/N) bias, negligible at N=600)."""
    x = np.array([50, 80, 0, 120, 60, 90, 40, 70, 30, 60])
    for mech in (Hierarchical(2, noise="laplace_float"), Hierarchical(2, neighbours="replace", noise="laplace_float")):
        rng = np.random.default_rng(5)
        draws = np.array([mech.release(x, 0.5, rng=rng).cdf().value for _ in range(3000)])
        rel = mech.release(x, 0.5, rng=rng)
        reported = rel.cdf().variance
        inner = slice(0, 9)  # F at the last bin is exactly 1
        ratio = draws.var(axis=0, ddof=1)[inner] / reported[inner]
        assert np.all(np.abs(ratio - 1) < 5 * math.sqrt(5 / 3000)), ratio
        assert reported[-1] == pytest.approx(0.0, abs=1e-15)
        np.testing.assert_allclose(
            draws.mean(axis=0), np.cumsum(x) / x.sum(), atol=4 * np.sqrt(reported.max() / 3000) + 1e-3
        )


def test_quantile_rule_integer_and_interval():
    # A noise-free-like release: huge epsilon makes the estimate the data.
    x = np.array([0, 10, 0, 30, 60])
    rel = Flat().release(x, 1e6, rng=0, domain=Domain.integers(5, 9))
    assert rel.quantile(0.1) == pytest.approx(6.0)  # first j with F_j >= 0.1 is bin 1 = value 6
    assert rel.quantile(0.1).value == 6.0
    np.testing.assert_allclose(rel.quantile([0.0, 0.4, 1.0]).value, [5.0, 8.0, 9.0])
    rel2 = Flat().release(x, 1e6, rng=0, domain=Domain.interval(0, 50, 5))
    # F = [0, .1, .1, .4, 1]; q = 0.25 lies halfway between F=.1 and F=.4 in bin 3 = [30, 40)
    assert rel2.quantile(0.25).value == pytest.approx(35.0, abs=1e-3)
    lower, upper = rel2.quantile(0.25).confidence_interval()
    assert lower <= 35.0 + 1e-6 <= upper + 1e-3
    with pytest.raises(ParameterError):
        rel2.quantile(1.2)


def test_to_dict_records_privacy_and_is_json():
    rel = Hierarchical(4, "geometric", neighbours="replace").release(
        np.arange(30) % 5, 0.5, rng=2, domain=Domain.interval(0, 3, 30)
    )
    data = json.loads(rel.to_json())
    assert data["mechanism"] == "hierarchical"
    assert data["privacy"] == {
        "epsilon": 0.5,
        "delta": 0.0,
        "neighbours": "replace",
        "noise": "discrete_laplace",
        "seeded": True,
    }
    assert data["parameters"]["branching"] == 4 and data["parameters"]["budget"] == "geometric"
    assert data["domain"] == {"kind": "interval", "lo": 0.0, "hi": 3.0, "bins": 30}
    assert data["total"]["public"] is True and data["total"]["value"] == float((np.arange(30) % 5).sum())
    assert len(data["histogram"]["value"]) == 30 and len(data["deciles"]["value"]) == 9


def test_wavelet_and_flat_release_million_ranges_cheaply():
    n = 4096
    rel = Wavelet().release(np.ones(n, dtype=int), 1.0, rng=0)
    rng = np.random.default_rng(0)
    lo = rng.integers(0, n, 10**5)
    hi = np.minimum(lo + rng.integers(0, 500, lo.size), n - 1)
    ans = rel.range(lo, hi)
    assert ans.value.shape == (10**5,) and np.all(ans.stderr > 0)


def test_answer_workloads_and_confidence_interval_coverage():
    """answer(workload) equals range answers; and 95% intervals of H16 range answers do not
    under-cover: over 2000 releases, coverage >= 0.95 - 3 binomial s.d. (0.0049 each) for
    the total (root noise dominates), a long range and a single bin (its own Laplace draw
    dominates), and is not wildly conservative (<= 0.98).  The normal factor alone gave
    0.933 and 0.936 here."""
    from dprange.workloads import Explicit, Prefix

    x = np.random.default_rng(0).integers(0, 50, 256)
    rel = Hierarchical(16, noise="laplace_float").release(x, 1.0, rng=0)
    np.testing.assert_allclose(rel.answer(Prefix(256)).value, rel.prefix(np.arange(256)).value)
    W = np.random.default_rng(1).normal(size=(3, 256))
    ans = rel.answer(Explicit(W))
    np.testing.assert_allclose(ans.value, W @ rel.histogram().value)
    assert np.all(ans.stderr > 0)
    with pytest.raises(ParameterError):
        rel.answer(Prefix(10))
    lo, hi = np.array([0, 17, 100]), np.array([255, 40, 100])
    truth = np.array([x[a : b + 1].sum() for a, b in zip(lo, hi)])
    mech = Hierarchical(16, noise="laplace_float")
    rng = np.random.default_rng(2)
    hits = np.zeros(3)
    for _ in range(2000):
        a = mech.release(x, 1.0, rng=rng).range(lo, hi)
        low, up = a.confidence_interval(0.05)
        hits += (low <= truth) & (truth <= up)
    coverage = hits / 2000
    assert np.all(coverage >= 0.95 - 3 * 0.0049) and np.all(coverage <= 0.98), coverage


@pytest.mark.parametrize(
    "workload", [Ranges([0, 5], [9, 30], 50), Explicit(np.ones((2, 50)))], ids=["ranges", "explicit"]
)
def test_a_workload_on_another_number_of_bins_is_refused_for_every_mechanism(workload):
    """A named mechanism (or a mechanism object) given a Ranges / Explicit workload defined on
    another number of bins than the domain's was accepted, the workload ignored; auto and
    optimized refused it in their own words.  Every mechanism now refuses it, giving both numbers."""
    counts, domain = np.ones(100, dtype=int), Domain.integers(0, 99)
    message = "the workload is defined on 50 bins but the domain has 100"
    for mechanism in (*MECHANISMS.names(nameable=True), "auto", Hierarchical(4)):
        with pytest.raises(ParameterError, match=message):
            choose_mechanism(mechanism, 100, 1.0, workload=workload)
        with pytest.raises(ParameterError, match=message):
            dprange.release(counts, domain, 1.0, mechanism=mechanism, workload=workload)
    with pytest.raises(ParameterError, match="the workload is defined on 50 bins but n = 100"):
        select(workload, 100, 1.0)
    with pytest.raises(ParameterError, match="the workload is defined on 50 bins but n = 100"):
        expected_error(Hierarchical(4), workload, 1.0, n=100)
    on_domain = Ranges([0, 5], [9, 30], 100)
    release = dprange.release(counts, domain, 1.0, mechanism="hierarchical", workload=on_domain, rng=0)
    assert release.answer(on_domain).value.shape == (2,)
