"""The fast LDP paths of issue 16: OLH's exactly balanced linear hash pool, OUE's 16-bit coins
with their realised epsilon, batched collection, and the one-multinomial level split."""

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from dprange import ParameterError
from dprange.ldp import OLH, OUE
from dprange.ldp.oracles import ONE, best_prime_g, exp_lower_bound, linear_pool_size, linear_support_counts
from dprange.ldp.simulate import split_by_level
from dprange.privacy.samplers import SecureRandom

# ------------------------------------------------------------------ OLH, linear pool


def test_default_olh_uses_the_linear_pool_where_it_fits():
    olh = OLH(1024, 1.0)
    assert (olh.g, olh.hash_family, olh.hash_pool, olh.digits) == (3, "linear", 3**7, 7)
    assert olh.params() == {"g": 3, "hash": "linear"}
    assert OLH(16, 2.0).g == 7 and OLH(16, 5.0).g == 149  # primes next to e^eps + 1
    big = OLH(1024, 8.0)  # g = 2982 is not prime-friendly here: the per-user mod-P family
    assert (big.hash_family, big.g, big.hash_pool) == ("mod-p", round(math.exp(8.0)) + 1, None)
    assert OLH(1024, 1.0, hash_pool=64).hash_family == "mod-p"
    assert OLH(1024, 1.0, g=5).hash_family == "linear" and OLH(1024, 1.0, g=4).hash_family == "mod-p"
    with pytest.raises(ParameterError, match="hash='mod-p'"):
        OLH(65536, 8.0, hash="linear")
    with pytest.raises(ParameterError, match="own pool"):
        OLH(64, 1.0, hash="linear", hash_pool=8)
    with pytest.raises(ParameterError, match="'linear' or 'mod-p'"):
        OLH(64, 1.0, hash="md5")


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 3.0, 6.0])
def test_best_prime_g_minimises_the_variance_factor_among_nearby_primes(eps):
    e1 = math.expm1(eps)
    primes = [n for n in range(2, 3 * int(math.exp(eps)) + 8) if all(n % d for d in range(2, n))]
    factor = {g: (e1 + g) ** 2 / (g - 1) for g in primes}
    assert best_prime_g(eps) == min(factor, key=factor.get)


@pytest.mark.parametrize("D, eps", [(5, 1.0), (30, 1.0), (50, 2.0), (20, 3.0)])
def test_linear_pool_collides_every_pair_exactly_one_gth_of_the_time(D, eps):
    """Over the whole pool, h_a(x) = h_a(y) for exactly pool / g hashes, for every pair x != y:
    the estimator's q = 1/g is exact, not an expectation over a random pool."""
    olh = OLH(D, eps)
    assert olh.hash_family == "linear"
    table = olh.hash_table(np.arange(olh.hash_pool), np.arange(D)).astype(np.int64)  # pool x D
    for x, y in itertools.combinations(range(D), 2):
        assert np.count_nonzero(table[:, x] == table[:, y]) * olh.g == olh.hash_pool


def _linear_law(olh, hashed, step):
    """{v: {(a, y): P}} of the client from its threshold (moved ``step`` units) and the pool."""
    t = Fraction(olh.keep_threshold + step, ONE)
    pool, g = olh.hash_pool, olh.g
    return {
        v: {(a, y): (t * (y == hashed[a, v]) + (1 - t) / g) / pool for a in range(pool) for y in range(g)}
        for v in range(olh.domain_size)
    }


@pytest.mark.parametrize("eps", [2.0**-40, 0.3, 1.0, 1.7, 3.0])  # g = 3, 3, 3, 7, 23
def test_linear_olh_exact_privacy_ratio_on_tiny_domains(eps):
    """From the threshold and the pool, in exact rationals: every input's law over (hash, y)
    sums to 1 and the worst ratio is the oracle's privacy_ratio, <= the lower bound of
    e^eps, while one more unit of threshold would exceed it."""
    for D in (2, 3, 5):
        olh = OLH(D, eps)
        assert olh.hash_family == "linear"
        pool, g = olh.hash_pool, olh.g
        hashed = olh.hash_table(np.arange(pool), np.arange(D)).astype(int)

        exact = _linear_law(olh, hashed, 0)
        assert all(sum(dist.values()) == 1 for dist in exact.values())
        worst = max(exact[u][o] / exact[v][o] for u in range(D) for v in range(D) for o in exact[u])
        assert worst == olh.privacy_ratio() <= exp_lower_bound(eps)
        looser = _linear_law(olh, hashed, 1)
        assert max(looser[u][o] / looser[v][o] for u in range(D) for v in range(D) for o in looser[u]) > (
            exp_lower_bound(eps)
        )
        assert olh.exact_q == Fraction(1, g)


@pytest.mark.parametrize("D, eps", [(1024, 1.0), (100, 3.0), (2000, 2.0), (9, 1.0)])
def test_linear_pool_aggregation_equals_the_dense_count(D, eps):
    """C_z = #{u : h_u(z) = y_u} on the dense users x items matrix equals the fast aggregate
    (digit-wise transform where g^2 <= D, direct table lookup otherwise)."""
    olh = OLH(D, eps)
    rng = np.random.default_rng(7)
    reports = olh.randomize(rng.integers(0, D, 3000), rng)
    dense = olh.hash_table(reports.data["seed"], np.arange(D)) == reports.data["value"][:, None]
    np.testing.assert_array_equal(olh.summarize(reports), dense.sum(axis=0))
    table = np.bincount(reports.data["seed"] * olh.g + reports.data["value"], minlength=olh.hash_pool * olh.g)
    np.testing.assert_array_equal(
        linear_support_counts(table.reshape(olh.hash_pool, olh.g), olh.g, olh.digits)[:D], dense.sum(axis=0)
    )


def test_linear_olh_estimates_are_unbiased_with_the_stated_variance():
    """Monte-Carlo (300 batches of 2000 users, fixed seed) at D = 40 (pool 81, transform path):
    means within 4.5 s.e., variances within 30% of variance(n, f), every item."""
    olh = OLH(40, 1.0)
    assert olh.g**2 <= olh.domain_size
    f = np.zeros(40)
    f[[0, 3, 17, 39]] = [0.4, 0.3, 0.2, 0.1]
    values = np.repeat(np.arange(40), (f * 2000).astype(int))
    rng = np.random.default_rng(11)
    est = np.array([olh.aggregator().add(olh.randomize(values, rng)).estimate() for _ in range(300)])
    var = olh.variance(2000, f)
    assert np.all(np.abs(est.mean(axis=0) - f) <= 4.5 * np.sqrt(var / 300))
    assert np.all(np.abs(est.var(axis=0, ddof=1) / var - 1) < 0.3)


def test_linear_pool_size_limits():
    assert linear_pool_size(1024, 3) == 2187 and linear_pool_size(1024, 4) is None
    assert linear_pool_size(3, 5) == 5 and linear_pool_size(2**20, 3) == 3**13
    assert linear_pool_size(2**22, 3) is None  # 3^14 * 3 > 2^23


# ------------------------------------------------------------------ OUE, 16-bit coins


@pytest.mark.parametrize("eps", [1e-7, 0.05, 0.5, 1.0, 2.5, 4.1, 4.2, 9.0, 16.0, 22.0])
def test_oue_coins_round_so_epsilon_is_never_exceeded(eps):
    """q' = Q / 2^bits with Q = ceil(2^bits / (1 + L)): the exact ratio (1 - q')/q' is <= L
    <= e^eps, one unit less would exceed it, and realised_epsilon is its exact logarithm."""
    oue = OUE(8, eps)
    bits = oue.coin_bits
    assert oue.params() == {"coin_bits": bits}
    for narrower in (16, 32):  # every narrower width would lose more than a relative 2^-10
        if narrower < bits:
            lie = math.ceil(Fraction(1 << narrower) / (1 + exp_lower_bound(eps)))
            assert lie >= 1 << (narrower - 1) or math.log(((1 << narrower) - lie) / lie) < eps * (1 - 2.0**-10)
    unit = Fraction(1, 1 << bits)
    q = oue.lie_threshold * unit
    assert oue.exact_q == q and oue.exact_p == Fraction(1, 2)
    assert oue.privacy_ratio() == (1 - q) / q <= exp_lower_bound(eps)
    assert (1 - (q - unit)) / (q - unit) > exp_lower_bound(eps)
    assert oue.realised_epsilon == pytest.approx(math.log((1 - q) / q), rel=1e-15)
    assert oue.realised_epsilon <= eps and eps - oue.realised_epsilon <= eps * 2.0**-10


class Scripted(SecureRandom):
    """Answers ``integers(0, high, size)`` from per-bound scripts (no keystream)."""

    def __init__(self, scripts):
        self.scripts = {bound: list(answers) for bound, answers in scripts.items()}

    def integers(self, low, high=None, size=None):
        answer = np.asarray(self.scripts[int(high)].pop(0), dtype=np.int64)
        assert answer.shape == np.empty(size).shape
        return answer


def test_oue_sets_a_bit_exactly_when_its_16_bit_coin_is_below_the_threshold():
    oue = OUE(3, 1.0)
    q = oue.lie_threshold
    source = Scripted({1 << 16: [[[q - 1, q, q + 1], [q, q - 1, 0]], [2**15 - 1, 2**15]]})
    bits = np.unpackbits(oue.randomize([0, 2], source).data["bits"], axis=1, count=3)
    assert bits.tolist() == [[1, 0, 0], [0, 1, 0]]  # own bits: coin 2^15 - 1 sets, 2^15 clears
    assert not any(source.scripts.values())


@pytest.mark.parametrize("make", [lambda: SecureRandom(), lambda: np.random.default_rng(3)], ids=["secure", "seeded"])
def test_oue_16_bit_client_bits_follow_the_exact_law(make):
    oue = OUE(12, 0.9)
    n = 30000
    bits = np.unpackbits(oue.randomize(np.full(n, 4), make()).data["bits"], axis=1, count=12).astype(float)
    expect = np.where(np.arange(12) == 4, 0.5, oue.q)
    assert np.all(np.abs(bits.mean(axis=0) - expect) <= 5 * np.sqrt(expect * (1 - expect) / n))
    assert abs(np.corrcoef(bits[:, 0], bits[:, 1])[0, 1]) < 5 / math.sqrt(n)


def test_collect_in_batches_equals_one_batch_and_bounds_memory():
    """collect() = randomise + add per batch: the same aggregate as one big batch from the same
    stream when the batch is a multiple of the encoder's block, and it never holds more than a
    batch of reports."""
    oue = OUE(4096, 1.0)  # encoder block: 2^22 / 4096 = 1024 users
    values = np.random.default_rng(0).integers(0, 4096, 4096)
    whole = oue.aggregator().add(oue.randomize(values, np.random.default_rng(1)))
    batched = oue.collect(values, np.random.default_rng(1), batch_users=1024)
    assert batched.n == whole.n == 4096
    np.testing.assert_array_equal(batched.summary, whole.summary)
    seen = []
    original = oue.randomize
    oue.randomize = lambda v, rng=None: seen.append(v.size) or original(v, rng)
    many = np.random.default_rng(0).integers(0, 4096, 40000)
    assert oue.collect(many, 2).n == 40000
    assert seen == [32768, 40000 - 32768]  # 16 MB of 512-byte reports per batch


# ------------------------------------------------------------------ level split


def test_split_by_level_has_the_exact_law_on_a_tiny_case():
    """Bins of 2 and 1 users, levels with p = (0.3, 0.7): the 6 outcomes of (level-1 counts of
    bin 0 and bin 1) have binomial probabilities; 20000 draws within 5 s.e. of each."""
    counts = np.array([2, 1])
    probs = np.array([0.3, 0.7])
    gen = np.random.default_rng(9)
    reps = 20000
    seen = Counter()
    for _ in range(reps):
        groups = split_by_level(counts, probs, gen)
        assert np.array_equal(groups[0] + groups[1], counts)
        seen[tuple(groups[0].tolist())] += 1
    for a, b in itertools.product(range(3), range(2)):
        prob = math.comb(2, a) * 0.3**a * 0.7 ** (2 - a) * (0.3 if b else 0.7)
        assert abs(seen[(a, b)] / reps - prob) <= 5 * math.sqrt(prob * (1 - prob) / reps)


def test_oue_summary_unpacks_blocks_of_bounded_size(monkeypatch):
    """At D = 2^16 the server unpacks 128 users (8 MB) at a time; it used to unpack 2^15 users
    at once (2 GB) whatever D was.  The counts equal the plain bit sums."""
    oue = OUE(1 << 16, 1.0)
    reports = oue.randomize(np.random.default_rng(0).integers(0, 1 << 16, 300), np.random.default_rng(1))
    rows = []
    unpack = np.unpackbits
    monkeypatch.setattr(np, "unpackbits", lambda a, **kw: rows.append(a.shape[0]) or unpack(a, **kw))
    counts = oue.summarize(reports)
    assert rows == [128, 128, 44]
    monkeypatch.undo()
    np.testing.assert_array_equal(counts, np.unpackbits(reports.data["bits"], axis=1).sum(axis=0))
