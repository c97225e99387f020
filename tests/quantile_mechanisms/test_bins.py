"""The histogram route's resolution from n x epsilon and the record count it reads
(dprange.quantile_mechanisms.bins): the rule, where n comes from, what the noisy count costs,
its exact law and privacy, and that nothing reads n unpaid."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dprange
from dprange.errors import ParameterError
from dprange.privacy import noise
from dprange.quantile_mechanisms import bins as qb
from dprange.quantile_mechanisms.private_bounds import noise_scale

LEVELS_19 = np.arange(1, 20) / 20


def test_histogram_bins_follow_the_signal():
    """2^round(log2(n epsilon / 32)) clipped to [8, 2^16]."""
    signals = (0.0, -3.0, 100.0, 1000.0, 3256.1, 10_000.0, 32_561.0, 1e9, math.inf)
    assert [qb.histogram_bins(s) for s in signals] == [8, 8, 8, 32, 128, 256, 1024, 2**16, 2**16]
    assert qb.histogram_bins(32 * 2**10.49) == 1024 and qb.histogram_bins(32 * 2**10.51) == 2048
    assert [qb.epsilon_only_bins(e) for e in (0.01, 0.1, 0.29, 1.0)] == [64, 256, 1024, 1024]


def test_quantiles_bins_use_public_n_or_n_max_and_spend_nothing():
    """Under replace n is public; under add/remove a declared n_max is the count: no budget
    goes to a count, the release runs at all of epsilon, the bins are those of n x epsilon."""
    values = np.random.default_rng(1).normal(0, 1, 1000)
    for kwargs, n, source in (({"neighbours": "replace"}, 1000, "public"), ({"n_max": 10_000}, 10_000, "n_max")):
        result = dprange.quantiles(values, LEVELS_19, 1.0, bounds=(-5, 5), method="histogram", rng=2, **kwargs)
        assert result.count == qb.RecordCount(n, source, 0.0)
        assert result.bins == qb.histogram_bins(n * 1.0) == result.release.domain.size
        assert result.release.provenance.epsilon == 1.0
        assert result.to_dict()["record_count"] == {"value": n, "source": source, "epsilon": 0.0}


def _spy_laplace(monkeypatch):
    seen = []
    real = qb.sample_discrete_laplace

    def spy(scale, size, rng):
        seen.append(scale)
        return real(scale, size, rng)

    monkeypatch.setattr(qb, "sample_discrete_laplace", spy)
    return seen


def test_noisy_count_spends_its_share_and_the_total_is_epsilon(monkeypatch):
    """Composition: bounds + count + histogram release <= epsilon exactly (Fractions), the
    count's noise has scale 1 / (count share x epsilon) and the result records every part."""
    seen = _spy_laplace(monkeypatch)
    values = np.random.default_rng(3).normal(30, 5, 600)  # about 8 bins: a cheap prefix design
    epsilon = 0.7
    result = dprange.quantiles(
        values, LEVELS_19, epsilon, bounds="private", bounds_share=0.1, count_share=0.05, method="histogram", rng=4
    )
    count_eps = epsilon * 0.05
    assert result.count.source == "noisy count" and result.count_epsilon == count_eps
    assert seen == [noise_scale(count_eps, "add_remove")] and seen[0] >= 1 / count_eps
    parts = (result.bounds_epsilon, result.count_epsilon, result.release.provenance.epsilon)
    assert sum(Fraction(p) for p in parts) <= Fraction(epsilon)
    assert sum(parts) == pytest.approx(epsilon)
    assert result.bins == qb.histogram_bins(result.count.value * result.release.provenance.epsilon)
    assert result.to_dict()["record_count"]["epsilon"] == count_eps


def test_noisy_count_law_is_exact_and_private():
    """P(count = k | n) = pmf(k - n) for k > 1 and the mass of noise <= 1 - n at k = 1; the
    ratio over neighbours n, n + 1 is at most e^epsilon_count for every output, and so for
    the bins (post-processing): checked over outputs covering all but 1e-12 of the mass."""
    epsilon = 0.5
    scale = noise_scale(epsilon, "add_remove")
    ks = np.arange(1, 400)

    def law(n):
        p = noise.pmf("discrete_laplace", scale, ks - n)
        below = noise.pmf("discrete_laplace", scale, np.arange(-2000, 1 - n + 1)).sum()  # noise <= 1 - n
        p[0] = below
        return p

    for n in (0, 1, 2, 5, 40):
        a, b = law(n), law(n + 1)
        assert a.sum() == pytest.approx(1.0, abs=1e-12) and b.sum() == pytest.approx(1.0, abs=1e-12)
        ratio = np.maximum(a / b, b / a)
        assert ratio.max() <= math.exp(epsilon) * (1 + 1e-12)
        bins = np.array([qb.histogram_bins(k * 3.0) for k in ks])
        for value in np.unique(bins):
            pa, pb = a[bins == value].sum(), b[bins == value].sum()
            assert max(pa / pb, pb / pa) <= math.exp(epsilon) * (1 + 1e-12)
    # the sampler follows that law (fixed seed; each frequency within 5 binomial sd)
    rng = np.random.default_rng(5)
    draws = np.array([qb.noisy_count(5, epsilon, rng) for _ in range(4000)])
    exact = law(5)
    for k in (1, 3, 5, 6, 8, 12):
        p = exact[k - 1]
        assert abs(np.mean(draws == k) - p) <= 5 * math.sqrt(p * (1 - p) / draws.size) + 1e-9


def test_auto_never_reads_n_without_a_paid_or_public_count(monkeypatch):
    """count_share=0 under add/remove without n_max: no count is drawn, auto and the bins use
    public facts only (two datasets of very different sizes get the same choice and bins)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a record count was drawn")

    monkeypatch.setattr(qb, "noisy_count", refuse)
    rng = np.random.default_rng(6)
    results = [
        dprange.quantiles(rng.normal(0, 1, n), LEVELS_19, 1.0, bounds=(-5, 5), count_share=0, rng=7)
        for n in (200, 20_000)
    ]
    assert {(r.method, r.reason, r.bins, r.count) for r in results} == {
        (results[0].method, results[0].reason, results[0].bins, None)
    }
    assert results[0].method == "histogram" and results[0].bins == qb.epsilon_only_bins(1.0)  # m = 19 >= 10


def test_no_count_is_drawn_where_nothing_needs_it(monkeypatch):
    """One level (auto picks the exponential mechanism), a named method without bins, integer
    bounds with one bin per value, or bins given: no budget goes to a count."""
    seen = _spy_laplace(monkeypatch)
    values = np.random.default_rng(8).integers(0, 100, 3000)
    runs = [
        dict(q=[0.5], bounds=(0, 100), method="auto"),
        dict(q=LEVELS_19, bounds=(0, 100), method="approximate"),
        dict(q=LEVELS_19, bounds=(0, 100), method="histogram", integer=True),
        dict(q=LEVELS_19, bounds=(0, 100), method="histogram", bins=64),
    ]
    for run in runs:
        result = dprange.quantiles(values, run.pop("q"), 1.0, rng=9, **run)
        assert result.count is None and result.count_epsilon == 0.0
    assert seen == []


def test_count_share_is_checked_and_named():
    values = np.zeros(10)
    for bad in (-0.1, 1.0, "5%", True):
        with pytest.raises(ParameterError, match="count_share .*--count-share"):
            dprange.quantiles(values, [0.5], 1.0, bounds=(0, 1), count_share=bad)
    with pytest.raises(ParameterError, match="bounds_share \\+ count_share"):
        dprange.quantiles(values, [0.5], 1.0, bounds="private", bounds_share=0.96, count_share=0.05)


def test_auto_compares_the_histogram_bins_with_m_squared():
    """Binned bounds with n known: the histogram route while histogram_bins(n epsilon) <= m^2,
    else JointExp (2..11 levels; the split without a record bound) or the split (>= 12); one
    bin per integer, or n unknown: by m alone; one level: the exponential mechanism."""
    from dprange.quantile_mechanisms.methods import auto_method

    def pick(m, n, epsilon=1.0, binned=True, joint_ok=True):
        return auto_method(m, epsilon, integer=False, width=10.0, n=n, binned=binned, joint_ok=joint_ok)[0]

    assert pick(4, 1000, 0.1) == "histogram"  # 8 bins <= 16
    assert pick(4, 10_000, 0.1) == "joint_exp"  # 32 bins > 16
    assert pick(4, 10_000, 0.1, joint_ok=False) == "approximate"
    assert pick(9, 1000) == "histogram" and pick(9, 10_000) == "joint_exp"  # 32 <= 81 < 256
    assert pick(19, 10_000) == "histogram" and pick(19, 32_561) == "approximate"  # 256 <= 361 < 1024
    assert pick(99, 32_561) == "histogram" and pick(99, 10**7) == "approximate"  # 1024 <= 9801 < 2^16
    assert pick(1, 10) == "approximate" and pick(1, 10**7) == "approximate"
    for n in (None, 10, 10**7):
        assert pick(4, n, binned=n is None) == "joint_exp" and pick(19, n, binned=n is None) == "histogram"
    # end to end: n public under replace, four levels, n epsilon = 100
    values = np.random.default_rng(11).uniform(-5, 5, 1000)
    result = dprange.quantiles(values, [0.2, 0.4, 0.6, 0.8], 0.1, bounds=(-5, 5), neighbours="replace", rng=12)
    assert result.method == "histogram" and result.bins == 8 and "<= m^2" in result.reason


def test_histogram_route_bins_follow_n_times_epsilon():
    """The default bins on real bounds are histogram_bins(n x epsilon) with n public (replace)
    or declared (n_max); bins= overrides them."""
    from dprange.quantile_mechanisms.bins import histogram_bins

    values = np.random.default_rng(4).normal(0, 1, 400)
    for epsilon, n_max, bins in ((0.1, 10**5, 256), (1.0, 10**5, 4096), (1.0, 400, 16)):
        result = dprange.quantiles(values, [0.5], epsilon, bounds=(-5, 5), method="histogram", rng=5, n_max=n_max)
        assert result.release.domain.size == bins == histogram_bins(n_max * epsilon) == result.bins
    result = dprange.quantiles(values, [0.5], 0.1, bounds=(-5, 5), method="histogram", bins=32, rng=5)
    assert result.release.domain.size == 32
