"""The secure source (ChaCha20 keystream) and the one-word inverse-CDF discrete Laplace sampler.

The sampler is a deterministic function of its uniform bits; the tests check that function
against an independent high-precision inverse CDF (``Decimal`` at 120 digits) at the words
that matter: both sides of every bracketed threshold, open brackets that need more bits,
the tail beyond the table; then samples of a keyed stream against the exact pmf.
"""

import math
import os
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dprange.privacy import _laplace_table as lt
from dprange.privacy._keystream import Keystream
from dprange.privacy.noise import noise_variance, pmf
from dprange.privacy.samplers import (
    SecureRandom,
    _discrete_laplace_exact,
    _laplace_rational,
    sample_discrete_laplace,
    sample_gaussian,
)


def _ln(value) -> Decimal:
    return Decimal(value.numerator).ln() - Decimal(value.denominator).ln()


def reference_count(u: Fraction, magnitude: bool, s: int, t: int) -> int:
    """#{m >= 1 : u < c r^m}, r = e^(-s/t), c = 2/(1 + r) (magnitude) or 1: by logarithms at
    120 digits, independently of the library's tables."""
    if u == 0:
        return 2**62  # below every threshold
    with localcontext() as context:
        context.prec = 120
        log_r = -Decimal(s) / Decimal(t)
        log_c = (Decimal(2) / (1 + log_r.exp())).ln() if magnitude else Decimal(0)
        ratio = (_ln(u) - log_c) / log_r  # u < c r^m  <=>  m < ratio
        if ratio <= 0:
            return 0
        whole = int(ratio.to_integral_value(rounding="ROUND_FLOOR"))
        return whole - 1 if whole == ratio else whole


def reference_draw(words: list, s: int, t: int) -> int:
    """The draw the module doc defines for the word sequence ``words`` (with 2 words of U)."""
    tab = lt.table(True, s, t)
    u = Fraction((words[0] >> 1) * 2**64 + words[1], 2**127)
    magnitude = reference_count(u, True, s, t)
    if magnitude >= tab.size:  # the tail: M plus geometrics from the next words (U at mid-grid)
        j = words[0] >> 1  # the next words: after V if j lay inside a bracket (V was drawn)
        opened = bool(np.any((tab.lower[1:-1] <= j) & (j < tab.upper[1:-1])))
        magnitude, geometric, i = tab.size, lt.table(False, s, t), 2 if opened else 1
        while True:
            extra = reference_count(Fraction(2 * (words[i] >> 1) + 1, 2**64), False, s, t)
            magnitude += min(extra, geometric.size)
            if extra < geometric.size:
                break
            i += 1
    return -magnitude if words[0] & 1 else magnitude


class Words:
    """A scripted source of uint64 words."""

    def __init__(self, values):
        self.values = [int(v) for v in values]

    def __call__(self, count):
        out, self.values = self.values[:count], self.values[count:]
        assert len(out) == count, "the sampler drew more words than scripted"
        return np.array(out, dtype=np.uint64)


SCALES = [(2, 5), (3, 10), (1, 1), (5, 2), (1, 37), (1, 3000)]  # (s, t): b = t / s


@pytest.mark.parametrize("s, t", SCALES)
def test_table_brackets_hold_the_exact_thresholds(s, t):
    """A_m <= 2^63 T_m <= B_m for every entry (an independent 120-digit exp), B - A <= 2, and
    the table stops where its thresholds fall below 2^-39."""
    for magnitude in (True, False):
        tab = lt.table(magnitude, s, t)
        m = np.arange(1, tab.size + 1)
        if m.size > 400:
            m = np.unique(np.concatenate([m[:100], m[-100:], np.random.default_rng(0).choice(m, 200)]))
        with localcontext() as context:
            context.prec = 120
            r = (-Decimal(s) / Decimal(t)).exp()
            c = 2 / (1 + r) if magnitude else Decimal(1)
            for k in m.tolist():
                exact = c * (-(Decimal(k * s) / Decimal(t))).exp() * 2**63
                assert int(tab.lower[k]) <= exact <= int(tab.upper[k]), (magnitude, k)
                assert int(tab.upper[k]) - int(tab.lower[k]) <= 2
        # the table ends where the next bracket would fall below 2^24 (or at 2^17 entries)
        assert tab.size == 1 << 17 or int(tab.lower[tab.size]) * math.exp(-s / t) < 2**24 + 2
        assert int(tab.lower[tab.size]) >= 2**24 or tab.size == 1


@pytest.mark.parametrize("s, t", SCALES)
def test_draws_are_the_exact_inverse_cdf_at_and_around_every_bracket(s, t):
    """Words whose U sits just below, inside and just above brackets (open ones need the next
    word), and U tiny (the tail): the sampler returns exactly the reference inverse CDF."""
    tab = lt.table(True, s, t)
    rng = np.random.default_rng(s * 1000 + t)
    ms = sorted({1, 2, tab.size // 2 or 1, tab.size} | set(rng.integers(1, tab.size + 1, 5).tolist()))
    js = []
    for m in ms:
        a, b = int(tab.lower[m]), int(tab.upper[m])
        js += [a - 1, a, b - 1, b, b + 1]
    js += [0, 1, 7, 2**63 - 1] + rng.integers(0, 2**63, 20).tolist()
    tails = 0
    for j in js:
        for low in (0, 1):  # the sign bit
            for v in (0, 2**63, 2**64 - 1, int(rng.integers(0, 2**63))):
                words = [(j << 1) | low, v, int(rng.integers(0, 2**63)) << 1, 0]
                got = int(lt.sample(s, t, 1, Words(words + [0] * 4))[0])
                assert got == reference_draw(words, s, t), (j, low, v)
                tails += abs(got) >= tab.size
    assert tails > 0  # j = 0, 1, 7 reach the tail


def test_open_brackets_draw_more_bits_until_decided():
    """At j = A_m (inside the bracket) the first word cannot decide; the sampler takes more
    words, and U = (j + V) / 2^63 is compared with T_m exactly."""
    s, t = 3, 10
    tab = lt.table(True, s, t)
    m = 2
    j = int(tab.lower[m])
    assert j < int(tab.upper[m])  # open
    lo, hi = lt.threshold_bounds(True, s, t, m, 127)
    v_edge = lo - j * 2**64  # U just below / at the threshold in 2^-127 units
    assert 0 <= v_edge < 2**64 - 1
    below = Words([j << 1, v_edge - 1])
    assert int(lt.sample(s, t, 1, below)[0]) == m  # consumed the second word
    above = Words([j << 1, hi - j * 2**64])
    assert int(lt.sample(s, t, 1, above)[0]) == m - 1


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


def test_keystream_is_chacha20_keyed_from_the_os_and_never_repeats():
    """Two default streams differ; a fixed key reproduces the RFC 8439 keystream of ChaCha20
    (section 2.4.2 test vector's key, counter 0, zero nonce: first block known) and moves to a
    new nonce on rekeying; a forked child rekeys."""
    a, b = Keystream(), Keystream()
    assert a.backend == "chacha20"
    assert not np.array_equal(a.read(64), b.read(64))
    key = bytes(32)
    first = Keystream(key).read(64).tobytes()
    # RFC 8439 appendix A.1, test vector 1: all-zero key and nonce, block counter 0
    assert first.hex().startswith("76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7")
    stream = Keystream(key)
    stream.read(16)
    stream._used = 1 << 36  # as after 64 GiB: the next read rekeys
    assert stream.read(64).tobytes() != first
    if hasattr(os, "fork"):
        parent = Keystream()
        parent.read(8)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.write(write, parent.read(32).tobytes())
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(read, 32) != parent.read(32).tobytes()


def test_secure_source_feeds_gaussian_and_float_samplers():
    source = SecureRandom._with_key(bytes(range(1, 33)))
    draws = sample_gaussian(3.0, 50_000, source)
    assert draws.var() == pytest.approx(float(noise_variance("gaussian", 3.0)), rel=0.04)
    u = source.random(100_000)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005
    assert math.isclose(source.standard_normal(100_000).std(), 1.0, rel_tol=0.02)


def test_without_cryptography_the_stream_reads_os_urandom(monkeypatch):
    from dprange.privacy import _keystream

    monkeypatch.setattr(_keystream, "_cipher_factory", lambda: None)
    stream = Keystream()
    assert stream.backend == "os.urandom"
    assert stream.read(1000).dtype == np.uint8 and not np.array_equal(stream.read(64), stream.read(64))
    source = SecureRandom()
    assert source._stream.backend == "os.urandom"
    draws = sample_discrete_laplace(2.0, 20_000, source)
    assert draws.var() == pytest.approx(float(noise_variance("discrete_laplace", 2.0)), rel=0.08)
