"""The quantile intervals' blocked search finds exactly the bins of the full scan (issue 16)."""

import numpy as np
import pytest

from dprange import Domain, Hierarchical, Wavelet
from dprange.answers import interval_search
from dprange.answers.interval_search import bin_sd, crossing_bins


def full_scan(prefix, var_prefix, var_rest, var_total, public, targets, levels, k):
    """The former loop of CumulativeEstimate.quantile_bins: every bin, every level."""
    n = prefix.size
    first, last = [], []
    for target, f in zip(targets, levels):
        d_hat = prefix - target
        half = k * bin_sd(var_prefix, var_rest, var_total, f, public)
        reach = np.nonzero(d_hat + half >= 0)[0]
        short = np.nonzero(d_hat - half < 0)[0]
        first.append(reach[0] if reach.size else n - 1)
        last.append(min(short[-1] + 1, n - 1) if short.size else 0)
    return np.array(first), np.array(last)


@pytest.mark.parametrize("block", [1, 3, 16, interval_search.SEARCH_BLOCK])
@pytest.mark.parametrize("public", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_blocked_search_equals_full_scan(block, public, seed, monkeypatch):
    monkeypatch.setattr(interval_search, "SEARCH_BLOCK", block)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    # noisy, non-monotone cumulative counts, variances growing and shrinking
    prefix = np.cumsum(rng.poisson(3, n) + rng.normal(0, 4 * (seed % 3), n))
    var_prefix = rng.uniform(0, 30, n) * (1 + seed % 2 * np.arange(n) / n)
    var_rest = rng.uniform(0, 30, n)[::-1].copy()
    var_total = float(rng.uniform(10, 60))
    if seed == 5:  # exact crossings, zero variances, a NaN bin
        var_prefix[: n // 2] = 0.0
        prefix[n // 3] = np.nan
    total = prefix[-1] if np.isfinite(prefix[-1]) else float(n)
    levels = np.array([0.0, 0.05, 0.1, 0.5, 0.9, 0.999, 1.0])
    targets = levels * total
    k = float(rng.uniform(0.5, 4.0))
    got = crossing_bins(prefix, var_prefix, var_rest, var_total, public, targets, levels, k)
    want = full_scan(prefix, var_prefix, var_rest, var_total, public, targets, levels, k)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_block_bound_holds_at_equality(monkeypatch):
    """A crossing exactly at the bound (D_j + k sd_j == 0) is found, not skipped."""
    monkeypatch.setattr(interval_search, "SEARCH_BLOCK", 4)
    prefix = np.arange(16, dtype=float)
    var_prefix = np.full(16, 4.0)
    got = crossing_bins(prefix, var_prefix, var_prefix, 0.0, True, [11.0], np.array([0.5]), 1.5)
    want = full_scan(prefix, var_prefix, var_prefix, 0.0, True, [11.0], np.array([0.5]), 1.5)
    assert (got[0][0], got[1][0]) == (want[0][0], want[1][0]) == (8, 14)


@pytest.mark.parametrize("mechanism", [Hierarchical(8), Hierarchical(4, neighbours="replace"), Wavelet()], ids=repr)
def test_release_deciles_equal_full_scan(mechanism, monkeypatch):
    counts = np.random.default_rng(4).poisson(3, 5000)
    release = mechanism.release(counts, 0.3, domain=Domain.interval(0.0, 1.0, 5000), rng=9)
    monkeypatch.setattr(interval_search, "SEARCH_BLOCK", 64)
    levels = np.linspace(0.1, 0.9, 9)
    got = release.quantile_bins(levels, 0.05, simultaneous=True)
    cum = release._cumulative
    var_prefix, var_rest, var_total = cum._prefix_variance_parts
    k = cum.factor(0.05 / levels.size)
    total = cum._total_value()
    targets = [q * total for q in levels]
    if cum.public_total is not None:  # q N is an exact count when it is one (as quantile_bins rounds)
        targets = [float(round(t)) if abs(t - round(t)) < 1e-9 * max(total, 1.0) else t for t in targets]
    want = full_scan(
        cum._prefix_sums[1:], var_prefix, var_rest, var_total, cum.public_total is not None, targets, levels, k
    )
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
