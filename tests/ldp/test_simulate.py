"""Exact simulation of local-DP collections (dprange.ldp.simulate): the aggregate shortcuts (OUE
sums of binomials, GRR kept-plus-uniform, ideal-hash OLH) have exactly the law of running every
client, the split of users across levels is exact, and simulated collections agree with real
clients."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from dprange import ParameterError
from dprange.ldp import HaarHRR, HierarchicalHistogram
from dprange.ldp.range_protocols import Flat
from dprange.ldp.simulate import SHORTCUT_EXACT, simulate, split_by_level, values_in_chunks


def exact_count_law(report_dists):
    """Exact law of the summed one-hot reports of independent users (tiny cases)."""
    law = Counter()
    for combo in itertools.product(*[range(len(d)) for d in report_dists]):
        prob = math.prod(d[k] for d, k in zip(report_dists, combo))
        law[tuple(np.bincount(combo, minlength=len(report_dists[0])))] += prob
    return law


def assert_law(samples, law, reps):
    """Every outcome's frequency within 5 binomial s.e. of its exact probability, and no
    outcome outside the support."""
    seen = Counter(map(tuple, samples))
    assert set(seen) <= set(law)
    for outcome, prob in law.items():
        assert abs(seen[outcome] / reps - prob) <= 5 * math.sqrt(prob * (1 - prob) / reps) + 1e-12, outcome


def test_grr_shortcut_has_the_exact_law_of_real_clients():
    """Three users with values 0, 0, 2 on D = 3: all 10 outcomes of the count vector."""
    proto = Flat(3, "grr", epsilon=0.9)
    oracle = proto.oracle(1)
    counts = np.array([2, 0, 1])
    law = exact_count_law([oracle.output_distribution(v) for v in (0, 0, 2)])
    reps = 6000
    rng = np.random.default_rng(1)
    sim = [simulate(proto, counts, rng=rng).levels[1].summary for _ in range(reps)]
    assert_law(np.array(sim).astype(int), law, reps)
    real = [oracle.summarize(oracle.randomize([0, 0, 2], rng)) for _ in range(reps)]
    assert_law(np.array(real).astype(int), law, reps)


def test_oue_shortcut_has_the_exact_law():
    """Two users (values 0 and 1) on D = 2: the law of the two bit counts (9 outcomes)."""
    proto = Flat(2, "oue", epsilon=1.2)
    q = proto.oracle(1).q
    law = Counter()
    for bits in itertools.product([0, 1], repeat=4):  # user 0: bits[0:2], user 1: bits[2:4]
        on = [0.5, q, q, 0.5]
        prob = math.prod(o if b else 1 - o for o, b in zip(on, bits))
        law[(bits[0] + bits[2], bits[1] + bits[3])] += prob
    reps = 6000
    rng = np.random.default_rng(2)
    sim = [simulate(proto, np.array([1, 1]), rng=rng).levels[1].summary for _ in range(reps)]
    assert_law(np.array(sim).astype(int), law, reps)


@pytest.mark.parametrize("oracle", ["grr", "oue"])
def test_shortcut_mean_and_covariance_match_the_exact_moments(oracle):
    """D = 6, N = 40: E[C] = sum_v n_v P_v and Cov[C] = sum_v n_v (diag P_v - P_v P_v'),
    P_v the client's per-item report probabilities (GRR: one-hot; OUE: independent bits, so
    no P_v P_v' term).  3000 draws; each entry within 5 of its Monte-Carlo s.e."""
    proto = Flat(6, oracle, epsilon=0.7)
    o = proto.oracle(1)
    counts = np.array([10, 0, 5, 20, 0, 5])
    P = np.array([[o.p if z == v else o.q for z in range(6)] for v in range(6)])
    mean = counts @ P
    if oracle == "grr":
        cov = sum(n * (np.diag(P[v]) - np.outer(P[v], P[v])) for v, n in enumerate(counts))
    else:
        cov = np.diag(counts @ (P * (1 - P)))
    reps = 3000
    rng = np.random.default_rng(3)
    draws = np.array([simulate(proto, counts, rng=rng).levels[1].summary for _ in range(reps)])
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= 5 * np.sqrt(np.diag(cov) / reps))
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / reps)
    assert np.all(np.abs(np.cov(draws.T) - cov) <= 5 * se)


def test_split_by_level_is_exact():
    """Each user picks level l w.p. p_l independently: for value v the level counts are
    Multinomial(n_v, p), independent across values (mean and covariance, 4000 draws, 5 s.e.)."""
    counts = np.array([30, 0, 7, 63])
    probs = np.array([0.2, 0.5, 0.3])
    gen = np.random.default_rng(4)
    reps = 4000
    draws = np.array([np.stack(split_by_level(counts, probs, gen)) for _ in range(reps)])  # reps x levels x values
    assert np.all(draws.sum(axis=1) == counts)
    mean = np.outer(probs, counts)
    var = np.outer(probs * (1 - probs), counts)
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= 5 * np.sqrt(var / reps) + 1e-12)
    sd_var = np.sqrt(2 / reps) * var  # s.d. of a sample variance (normal approximation)
    assert np.all(np.abs(draws.var(axis=0, ddof=1) - var) <= 5 * sd_var + 1e-9)
    # values are independent: the covariance of value 0 and value 3 at level 1 is zero
    c = np.cov(draws[:, 1, 0], draws[:, 1, 3])[0, 1]
    assert abs(c) <= 5 * math.sqrt(var[1, 0] * var[1, 3] / reps)


def test_olh_ideal_hash_shortcut_per_item_law():
    """Binomial(n_z, p) + Binomial(N - n_z, 1/g): each item's support count has the exact
    mean and variance of the real OLH client (5 s.e.; variance ratio s.d. sqrt(2/1999))."""
    proto = Flat(8, "olh", epsilon=1.0)
    o = proto.oracle(1)
    counts = np.array([100, 0, 50, 0, 30, 20, 0, 0])
    N = counts.sum()
    mean = counts * o.p + (N - counts) / o.g
    var = counts * o.p * (1 - o.p) + (N - counts) * (1 / o.g) * (1 - 1 / o.g)
    reps = 2000
    rng = np.random.default_rng(5)
    sim = np.array([simulate(proto, counts, rng=rng, olh_ideal_hash=True).levels[1].summary for _ in range(reps)])
    real = np.array([simulate(proto, counts, rng=rng).levels[1].summary for _ in range(reps)])  # per-user path
    for draws in (sim, real):
        assert np.all(np.abs(draws.mean(axis=0) - mean) <= 5 * np.sqrt(var / reps))
        assert np.all(np.abs(draws.var(axis=0, ddof=1) / var - 1) <= 5 * math.sqrt(2 / (reps - 1)))
    assert SHORTCUT_EXACT == {"oue": True, "grr": True, "olh": False, "hrr": False}


def test_values_in_chunks_and_secure_seeding():
    counts = np.array([0, 3, 0, 0, 5, 1, 0])
    for chunk in (1, 2, 4, 100):
        got = np.concatenate(list(values_in_chunks(counts, chunk)))
        np.testing.assert_array_equal(got, np.repeat(np.arange(7), counts))
    assert list(values_in_chunks(np.zeros(4, dtype=int), 3)) == []
    proto = HierarchicalHistogram(64, 4, "oue", epsilon=1.0)
    counts = np.random.default_rng(0).integers(0, 50, 64)
    agg = simulate(proto, counts)  # rng=None: a numpy Generator seeded from OS entropy
    assert agg.n == counts.sum()
    with pytest.raises(ParameterError):
        simulate(proto, counts[:-1], rng=0)
    with pytest.raises(ParameterError):
        simulate(proto, -counts, rng=0)
    with pytest.raises(ParameterError):
        simulate(proto, counts, epsilon=-1.0, rng=0)


@pytest.mark.parametrize(
    "protocol",
    [
        HierarchicalHistogram(16, 4, "oue", epsilon=1.0),
        HaarHRR(16, epsilon=1.0),
        HierarchicalHistogram(16, 4, "grr", epsilon=1.0),
    ],
    ids=lambda p: p.name + str(p.describe().get("oracle")),
)
def test_simulation_agrees_with_real_clients_and_exact_error(protocol):
    """300 simulated and 300 real collections of the same population: both unbiased, and
    their empirical variances agree with each other and with the exact error model
    (ratio tolerance 0.3: sample-variance s.d. sqrt(2/299) = 0.08, with margin)."""
    counts = np.array([50, 0, 10, 200, 5, 5, 80, 30, 0, 0, 120, 40, 40, 10, 7, 3]) * 3
    values = np.repeat(np.arange(16), counts)
    lo, hi = np.array([0, 3, 5, 10]), np.array([15, 3, 12, 11])
    truth = np.array([counts[a : b + 1].sum() for a, b in zip(lo, hi)])
    rng = np.random.default_rng(7)
    sim = np.array([simulate(protocol, counts, rng=rng).release().range(lo, hi).value for _ in range(300)])
    real = np.array(
        [protocol.aggregator().add(protocol.randomize(values, rng)).release().range(lo, hi).value for _ in range(300)]
    )
    exact = protocol.error_model(counts.sum(), counts).range_variance(lo, hi)
    for draws in (sim, real):
        inner = exact > 1e-6 * exact.max()  # the total is public: variance 0 up to rounding
        assert np.all(np.abs(draws.mean(axis=0) - truth)[inner] <= 4.5 * np.sqrt(exact[inner] / 300))
        ratio = draws.var(axis=0, ddof=1)[inner] / exact[inner]
        assert np.all(np.abs(ratio - 1) < 0.3), ratio


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
