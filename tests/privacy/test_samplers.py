"""The exact samplers (dprange.privacy.samplers; Canonne, Kamath, Steinke, NeurIPS 2020) as
implemented: a scripted random source enumerates every draw sequence (no excess mass anywhere),
samples match the pmf and variance, the secure source feeds every sampler, and large scales use
exact Python integers."""

import math
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from dprange import ParameterError
from dprange._validation import MAX_SCALE
from dprange.privacy import _laplace_table as lt
from dprange.privacy.noise import NoiseSpec, noise_variance, pmf
from dprange.privacy.samplers import (
    SecureRandom,
    _bernoulli_exp,
    _discrete_laplace_exact,
    _gaussian_rational,
    _laplace_rational,
    _open_uniform,
    _uniform_below,
    effective_scale,
    resolve_rng,
    sample_discrete_laplace,
    sample_gaussian,
    sample_laplace_float,
)

# ------------------------------------------------------------------------------------------
# Scripted random sources
# ------------------------------------------------------------------------------------------


class _NeedDraw(Exception):
    def __init__(self, high):
        self.high = high


class _Script:
    """Replays a fixed sequence of integer draws (one value per call of size 1)."""

    def __init__(self, values):
        self.values, self.position = values, 0

    def integers(self, low, high=None, size=None):
        if high is None:
            low, high = 0, low
        count = 1 if size is None else int(np.prod(size))
        assert low == 0 and count <= 1, "the scalar path draws one value at a time"
        if count == 0:
            return np.zeros(0, dtype=np.int64)
        if self.position == len(self.values):
            raise _NeedDraw(int(high))
        value = self.values[self.position]
        assert value < high
        self.position += 1
        return np.array([value], dtype=np.int64)


def _enumerate(run, max_depth, min_probability=0.0):
    """Exact output distribution of ``run(source)``: every draw sequence up to ``max_depth``.

    Returns ({output: probability}, unexplored probability mass).
    """
    found, unexplored = defaultdict(float), 0.0
    stack = [((), 1.0)]
    while stack:
        prefix, probability = stack.pop()
        try:
            output = run(_Script(prefix))
        except _NeedDraw as need:
            if len(prefix) >= max_depth or probability / need.high < min_probability:
                unexplored += probability
            else:
                stack.extend((prefix + (v,), probability / need.high) for v in range(need.high))
            continue
        found[output] += probability
    return found, unexplored


class _Policy:
    """Answers each draw by a rule on its bound (for driving the samplers into their tails)."""

    def __init__(self, rule):
        self.rule = rule

    def integers(self, low, high=None, size=None):
        if high is None:
            low, high = 0, low
        count = 1 if size is None else int(np.prod(size))
        values = np.array([self.rule(int(high)) for _ in range(count)], dtype=np.int64)
        assert np.all((0 <= values) & (values < high))
        return values


def _tail_rule(successes, den):
    """Draw rule: U = 0; the first ``successes`` Bernoulli(exp(-1)) succeed (K = 2: 0, K = 3: 1),
    the next fails (K = 2: 1), then a positive sign, then every Bernoulli(exp(-1)) succeeds and
    every Bernoulli(num/den) fails (draw den - 1)."""
    state = {"successes": 0, "phase": "V"}

    def rule(high):
        if high == den:
            return den - 1
        if state["phase"] == "V":
            if high == 3:
                state["successes"] += 1
                return 1
            if high == 2:
                if state["successes"] < successes:
                    return 0
                state["phase"] = "sign"
                return 1
            return 0
        if state["phase"] == "sign":
            assert high == 2
            state["phase"] = "accept"
            return 0
        return 1 if high == 3 else 0

    return rule


# ------------------------------------------------------------------------------------------
# Exactness by enumeration
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num, den", [(0, 3), (2, 3), (3, 3), (5, 3), (7, 3)])
def test_bernoulli_exp_equals_exp_minus_gamma_exactly(num, den):
    found, unexplored = _enumerate(
        lambda src: bool(_bernoulli_exp(np.array([num]), den, src)[0]), max_depth=11, min_probability=1e-7
    )
    assert unexplored < 2e-4
    assert abs(found[True] - math.exp(-num / den)) <= unexplored + 1e-12
    assert found[True] + found[False] + unexplored == pytest.approx(1.0, abs=1e-12)


def test_discrete_laplace_as_implemented_puts_no_excess_mass_anywhere():
    """Scale 1 (t = s = 1): enumerate the scalar sampler's draw sequences (paths below
    probability 2e-5 unexplored).  The explored mass at each k never exceeds the pmf
    tanh(1/2) e^-|k|, and falls short of it by at most the unexplored mass."""
    found, unexplored = _enumerate(
        lambda src: int(_discrete_laplace_exact(1, 1, 1, src)[0]), max_depth=80, min_probability=2e-5
    )
    assert unexplored < 0.06
    assert set(found) <= set(range(-20, 21))
    for k in range(-5, 6):
        exact = math.tanh(0.5) * math.exp(-abs(k))
        assert found[k] <= exact + 1e-12
        assert exact - found[k] <= unexplored + 1e-12
    assert abs(found[0] - math.tanh(0.5)) < 0.01


# ------------------------------------------------------------------------------------------
# Large seeded samples against the pmf
# ------------------------------------------------------------------------------------------

N = 200_000


def _chi_square(draws, kind, scale, support):
    ks = np.arange(-support, support + 1)
    probabilities = pmf(kind, scale, ks)
    observed = np.array([(draws == k).sum() for k in ks] + [np.sum(np.abs(draws) > support)])
    expected = np.append(probabilities, 1.0 - probabilities.sum()) * draws.size
    return float(np.sum((observed - expected) ** 2 / expected)), ks.size  # dof = cells - 1


@pytest.mark.parametrize("scale", [2.5, 1 / 0.3, 0.4])
def test_discrete_laplace_sample_matches_pmf_and_variance(scale):
    draws = sample_discrete_laplace(scale, N, np.random.default_rng(2))
    assert draws.dtype == np.int64
    statistic, dof = _chi_square(draws, "discrete_laplace", scale, 12)
    assert statistic < stats.chi2.ppf(1 - 1e-4, dof)  # fixed seed: a fixed statistic
    variance = NoiseSpec("discrete_laplace", scale).variance
    b = effective_scale("discrete_laplace", scale)
    assert variance == pytest.approx(2 * math.exp(-1 / b) / (1 - math.exp(-1 / b)) ** 2, rel=1e-12)
    assert abs(draws.mean()) < 5 * math.sqrt(variance / N)
    assert draws.var() == pytest.approx(variance, rel=0.03)


@pytest.mark.parametrize("sigma", [0.5, 3.0, 70.0])
def test_discrete_gaussian_sample_matches_pmf_and_variance(sigma):
    draws = sample_gaussian(sigma, 100_000, np.random.default_rng(3))
    assert draws.dtype == np.int64
    statistic, dof = _chi_square(draws, "gaussian", sigma, int(3 * sigma) + 1)
    assert statistic < stats.chi2.ppf(1 - 1e-4, dof)
    # exact variance of the distribution sampled (sigma^2 = p/q), by a sum over the integers
    p, q, _ = _gaussian_rational(sigma)
    k = np.arange(-int(60 * sigma) - 5, int(60 * sigma) + 6, dtype=float)
    weights = np.exp(-k * k * q / (2.0 * p))
    exact_variance = float(np.sum(k * k * weights) / np.sum(weights))
    assert NoiseSpec("gaussian", sigma).variance == pytest.approx(exact_variance, rel=1e-12)
    if sigma == 0.5:
        assert exact_variance < 0.96 * sigma**2  # the discrete Gaussian is not N(0, sigma^2) here
    assert abs(draws.mean()) < 5 * math.sqrt(exact_variance / draws.size)
    assert draws.var() == pytest.approx(exact_variance, rel=0.03)


def test_secure_source_is_uniform_and_feeds_every_sampler():
    source = SecureRandom()
    for span, low in [(2, 0), (3, 5), (7, -3), (256, 0), (1000, 0), (2**40 + 3, 0)]:
        draws = source.integers(low, low + span, 60_000)
        assert draws.min() >= low and draws.max() < low + span
        cells = min(span, 6)
        counts = np.bincount((draws - low) * cells // span, minlength=cells)
        sizes = np.array(
            [len(range(-(-c * span // cells), -(-(c + 1) * span // cells))) for c in range(cells)], dtype=float
        )  # how many integers v in [0, span) have v * cells // span == c
        assert stats.chisquare(counts, sizes / span * draws.size).pvalue > 1e-6
    assert isinstance(resolve_rng(None), SecureRandom)
    draws = sample_discrete_laplace(2.0, 50_000, source)
    assert draws.dtype == np.int64 and draws.var() == pytest.approx(noise_variance("discrete_laplace", 2.0), rel=0.06)
    draws = sample_gaussian(2.0, 20_000, source)
    assert draws.var() == pytest.approx(noise_variance("gaussian", 2.0), rel=0.08)


def test_large_bounds_and_large_sigma_use_exact_python_integers():
    rng = np.random.default_rng(5)
    bound = 3 * 2**70 + 1
    draws = _uniform_below(bound, 30_000, rng)
    assert all(0 <= int(v) < bound for v in draws)
    thirds = np.bincount(np.array([int(v) // 2**70 for v in draws]), minlength=4)
    assert thirds[3] <= 1 and stats.chisquare(thirds[:3]).pvalue > 1e-6
    sigma = 1e5  # 2 p q t^2 > 2^62: the acceptance test runs on Python integers
    p, q, t = _gaussian_rational(sigma)
    assert 2 * p * q * t * t > 2**62
    draws = sample_gaussian(sigma, 3000, rng)
    assert draws.dtype == np.int64
    assert np.std(draws) == pytest.approx(sigma, rel=0.1)
    huge = sample_gaussian(MAX_SCALE, 20, rng)
    assert np.all(np.abs(huge.astype(float)) < 10 * MAX_SCALE)


def test_seeds_reproduce_and_bad_rng_is_refused():
    first, again = (sample_discrete_laplace(1.0, 5, resolve_rng(7)) for _ in range(2))
    assert np.array_equal(first, again)
    with pytest.raises(ParameterError):
        resolve_rng("seed")
    with pytest.raises(ParameterError):
        resolve_rng(-1)


# ------------------------------------------------------------------------------------------
# Unbounded support (P7): no hard cut in the tails
# ------------------------------------------------------------------------------------------


def test_discrete_laplace_reaches_beyond_40_scales():
    b = 1000.0
    t, s = _laplace_rational(b)
    assert (t, s) == (1000, 1)
    out = sample_discrete_laplace(b, 1, _Policy(_tail_rule(50, den=t)))  # U = t - 1, V = 50
    assert int(out[0]) == (t - 1 + 50 * t) // s == 50_999  # 51 scales out, past the old 37.4 b cut


def test_discrete_laplace_falls_back_to_python_integers_instead_of_overflowing():
    t, s = 2**53 - 1, 2**14  # U + t V passes 2^62 once V > 511
    assert _laplace_rational(t / s) == (t, s)
    out = _discrete_laplace_exact(t, s, 1, _Policy(_tail_rule(600, den=t)))
    assert int(out[0]) == (t - 1 + 600 * t) // s


def test_discrete_gaussian_reaches_beyond_40_sigmas():
    sigma = 10.0
    p, q, t = _gaussian_rational(sigma)
    assert t == 11
    out = sample_gaussian(sigma, 1, _Policy(_tail_rule(50, den=2 * p * q * t * t)))  # U = 0, V = 50
    assert abs(int(out[0])) == 50 * t > 40 * sigma  # the old Box-Muller stopped at 8.65 sigma


def test_open_uniform_and_laplace_float_never_hit_0_or_1():
    class Extreme:
        def __init__(self, top):
            self.top = top

        def integers(self, low, high=None, size=None):
            return np.full(size, high - 1 if self.top else 0, dtype=np.int64)

        def random(self, size=None):  # what the old sampler read: the largest float below 1
            return np.full(size, 1 - 2.0**-53 if self.top else 0.0)

    for top in (True, False):
        u = _open_uniform(Extreme(top), 4)
        assert np.all((0 < u) & (u < 1))
        draws = sample_laplace_float(1.0, 4, Extreme(top))
        assert np.all(np.isfinite(draws)) and np.all(np.abs(draws) < 37)


# ------------------------------------------------------------------------------------------
# The privacy inequality for the scale actually used; scale limits (P1); kind names (P3)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scale", [1e-300, 1e-5, 0.37, 1.0, 1 / 0.3, 1 / 0.7, 10.0 / 3, 123.456, 2.0**27 / 3, 1e9, 0.999 * 2**40]
)
def test_discrete_laplace_privacy_loss_at_most_one_over_the_requested_scale(scale):
    used = effective_scale("discrete_laplace", scale)
    assert used >= scale
    assert used <= scale * (1 + 2.0**-32) or scale > 2**28 or scale < 2**-62
    t, s = _laplace_rational(scale)
    assert used == t / s and t <= 2**60 and s <= 2**62
    step = max(1, round(scale))  # compare k and k + step: the log ratio is step / scale (float-exact)
    k = np.arange(0, 6) * step
    probabilities = pmf("discrete_laplace", scale, k)
    if probabilities[1] > 0:
        log_ratios = np.log(probabilities[:-1] / probabilities[1:])
        assert np.all(log_ratios <= step / scale * (1 + 1e-12))
        assert log_ratios == pytest.approx(np.full(5, step / used), rel=1e-9)


@pytest.mark.parametrize("scale", [0.4, 1.0, 1 / 0.3, 25.0])
def test_keyed_secure_samples_match_the_exact_pmf(scale):
    source = SecureRandom._with_key(bytes(range(32)))
    draws = sample_discrete_laplace(scale, 200_000, source)
    assert draws.dtype == np.int64
    support = int(6 * scale) + 2
    ks = np.arange(-support, support + 1)
    probabilities = pmf("discrete_laplace", scale, ks)
    observed = np.array([(draws == k).sum() for k in ks] + [np.sum(np.abs(draws) > support)])
    expected = np.append(probabilities, 1.0 - probabilities.sum()) * draws.size
    keep = expected > 5
    statistic = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    assert statistic < stats.chi2.ppf(1 - 1e-4, keep.sum())  # fixed key: a fixed statistic
    variance = float(noise_variance("discrete_laplace", scale))
    assert draws.var() == pytest.approx(variance, rel=0.03)


def test_secure_and_seeded_paths_sample_the_same_law():
    """Scale 10/3 (a rational t/s): the table sampler and CKS's algorithm (numpy seed) agree
    in distribution (two-sample chi-square), and the seeded path is unchanged by the table."""
    t, s = _laplace_rational(10 / 3)
    secure = lt.sample(s, t, 100_000, SecureRandom._with_key(bytes(32)).words)
    seeded = _discrete_laplace_exact(t, s, 100_000, np.random.default_rng(5))
    ks = np.arange(-15, 16)
    table = np.array([[np.sum(np.clip(x, -16, 16) == k) for k in np.append(ks, [-16, 16])] for x in (secure, seeded)])
    table = table[:, table.min(axis=0) > 5]
    assert stats.chi2_contingency(table).pvalue > 1e-4
    assert np.array_equal(
        sample_discrete_laplace(10 / 3, 5, np.random.default_rng(0)),
        _discrete_laplace_exact(t, s, 5, np.random.default_rng(0)),
    )


def test_secure_source_feeds_gaussian_and_float_samplers():
    source = SecureRandom._with_key(bytes(range(1, 33)))
    draws = sample_gaussian(3.0, 50_000, source)
    assert draws.var() == pytest.approx(float(noise_variance("gaussian", 3.0)), rel=0.04)
    u = source.random(100_000)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005
    assert math.isclose(source.standard_normal(100_000).std(), 1.0, rel_tol=0.02)
