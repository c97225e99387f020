"""Local DP: privacy of every client from its exact output distribution; unbiasedness and
exact variances by Monte-Carlo; consistency = dense weighted least squares; simulation =
real clients in distribution; serialisation and rejection of bad reports."""

import itertools
import math

import numpy as np
import pytest

from conftest import dense_gls, range_matrix
from dprange import DomainError, ParameterError, ReportError
from dprange.ldp import GRR, HRR, OLH, OUE, HaarHRR, HierarchicalHistogram, ProtocolReports, Reports, expected_error
from dprange.ldp.range_protocols import Flat
from dprange.ldp.simulate import simulate

EPS = 0.8


def oue_distribution(oracle, value):
    D = oracle.domain_size
    out = []
    for bits in itertools.product([0, 1], repeat=D):
        prob = 1.0
        for i, b in enumerate(bits):
            on = 0.5 if i == value else oracle.q
            prob *= on if b else 1 - on
        out.append(prob)
    return np.array(out)


@pytest.mark.parametrize(
    "oracle",
    [GRR(4, EPS), OUE(4, EPS, coin_bits=62), OLH(4, EPS, hash_pool=8), HRR(4, EPS)],
    ids=lambda o: o.name,
)
def test_client_privacy_ratio_from_exact_distribution(oracle):
    """(OUE with 62-bit coins: the default 16-bit coins round q up on purpose, realising an
    epsilon a relative <= 2^-10 lower; tests/test_ldp_fast.py checks that ratio exactly.)"""
    dist = {
        v: (oue_distribution(oracle, v) if oracle.name == "oue" else oracle.output_distribution(v)) for v in range(4)
    }
    for v in range(4):
        assert dist[v].sum() == pytest.approx(1.0)
    worst = max(np.max(dist[a] / dist[b]) for a in range(4) for b in range(4))
    assert worst <= math.exp(EPS) * (1 + 1e-12)
    assert worst == pytest.approx(math.exp(EPS))  # the bound is attained: no budget wasted


@pytest.mark.parametrize(
    "make",
    [lambda: GRR(8, 1.0), lambda: OUE(8, 1.0), lambda: OLH(8, 1.0), lambda: HRR(8, 1.0)],
    ids=["grr", "oue", "olh", "hrr"],
)
def test_estimates_unbiased_with_exact_variance(make):
    """400 repetitions of 3000 users.  Mean: each item within 4.5 s.e.  Variance: the ratio
    empirical / exact averaged over the 8 items has s.d. <= sqrt(2/399) = 0.071 (less when
    items are independent); we allow 0.25, and 0.45 per item (6 s.d.) - a wrong p or q
    shifts the variance by far more."""
    oracle = make()
    rng = np.random.default_rng(3)
    values = rng.choice(8, 3000, p=[0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.0])
    f = np.bincount(values, minlength=8) / values.size
    reps = 400
    est = np.array([oracle.aggregator().add(oracle.randomize(values, rng)).estimate() for _ in range(reps)])
    var = oracle.variance(values.size, f)[:8]
    assert np.all(np.abs(est.mean(axis=0) - f) <= 4.5 * np.sqrt(var / reps))
    ratio = est.var(axis=0, ddof=1) / var
    assert abs(ratio.mean() - 1) < 0.25 and np.all(np.abs(ratio - 1) < 0.45)


def test_reports_round_trip_and_mismatches(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 10, 500)
    for oracle in (GRR(10, 1.0), OUE(10, 1.0), OLH(10, 1.0), HRR(10, 1.0)):
        rep = oracle.randomize(values, rng)
        direct = oracle.aggregator().add(rep).estimate()
        back = Reports.from_bytes(rep.to_bytes())
        np.testing.assert_allclose(oracle.aggregator().add(back).estimate(), direct)
        path = tmp_path / f"{oracle.name}.jsonl"
        rep.to_jsonl(path)
        np.testing.assert_allclose(oracle.aggregator().add(Reports.from_jsonl(path)).estimate(), direct)
        with pytest.raises(ReportError):
            type(oracle)(10, 2.0).aggregator().add(rep)
        with pytest.raises(ReportError):
            type(oracle)(12, 1.0).aggregator().add(rep)
        # merging two halves equals aggregating everything
        a = oracle.aggregator().add(oracle.randomize(values[:200], 1))
        b = oracle.aggregator().add(oracle.randomize(values[200:], 2))
        whole = oracle.aggregator().add(oracle.randomize(values[:200], 1)).add(oracle.randomize(values[200:], 2))
        np.testing.assert_allclose(a.merge(b).estimate(), whole.estimate())
    with pytest.raises(ReportError):
        Reports.from_bytes(b"not a report")
    (tmp_path / "bad.jsonl").write_text("{oops\n")
    with pytest.raises(ReportError):
        Reports.from_jsonl(tmp_path / "bad.jsonl")
    with pytest.raises(DomainError):
        OUE(10, 1.0).randomize([3, 10])
    with pytest.raises(DomainError):
        GRR(10, 1.0).randomize([1.5])
    with pytest.raises(ParameterError):
        OUE(10, 0.0)
    with pytest.raises(ParameterError):
        GRR(1, 1.0)


def test_olh_hash_pool_variant_and_secure_default():
    oracle = OLH(32, 1.0, hash_pool=16384)
    values = np.random.default_rng(0).integers(0, 4, 20000)
    est = oracle.aggregator().add(oracle.randomize(values)).estimate()  # secure default randomness
    assert abs(est[:4].sum() - 1) < 0.2 and abs(est[4:].sum()) < 0.3


@pytest.mark.parametrize(
    "protocol",
    [
        HierarchicalHistogram(27, 3, "oue", epsilon=1.0),
        HierarchicalHistogram(20, 4, "hrr", epsilon=1.0),
        HierarchicalHistogram(16, 2, "grr", epsilon=1.0),
    ],
    ids=repr,
)
def test_consistent_estimate_equals_dense_weighted_least_squares(protocol):
    rng = np.random.default_rng(1)
    values = rng.integers(0, protocol.domain_size, 5000)
    agg = protocol.aggregator().add(protocol.randomize(values, rng))
    rel = agg.release()
    tree, n = protocol.tree, agg.n
    users = {l: a.n for l, a in agg.levels.items()}
    plug_in = {d: np.clip(agg.levels[d].estimate()[: tree.level_sizes[d]], 0, 1) for d in tree.measured_depths}
    variances = protocol.level_variances(users, n, plug_in)
    rows = np.concatenate([agg.levels[d].estimate()[: tree.level_sizes[d]] * n for d in tree.measured_depths])
    v = np.concatenate([np.broadcast_to(variances[d], (tree.level_sizes[d],)) for d in tree.measured_depths])
    reference, cov = dense_gls(tree.dense(), rows, v, total=n)
    np.testing.assert_allclose(rel.histogram().value, reference, atol=1e-6 * n)
    lo, hi = np.triu_indices(protocol.domain_size)
    Q = range_matrix(protocol.domain_size, lo, hi)
    np.testing.assert_allclose(rel.range(lo, hi).variance, np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-8, atol=1e-6)
    assert rel.total().value == n


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


def test_expected_error_and_bad_protocol_input():
    hh = HierarchicalHistogram(256, 4, "oue", epsilon=1.0)
    with_ci = expected_error(hh, "all-range", 2**26)
    without = expected_error(hh, "all-range", 2**26, consistency=False)
    assert with_ci < without
    # seed 002 Figure 5 (D = 2^8, eps = 1, HH_4 with consistency): RMSE x 1000 = 0.744
    assert 1000 * math.sqrt(with_ci) == pytest.approx(0.744, rel=0.15)
    with pytest.raises(ParameterError):
        HierarchicalHistogram(16, 4, "xyz")
    with pytest.raises(ParameterError):
        HierarchicalHistogram(16, 4, level_probabilities=[0.5, 0.6])
    with pytest.raises(ParameterError):
        HierarchicalHistogram(16, 4).randomize([1, 2])  # no epsilon
    with pytest.raises(ParameterError):
        simulate(HaarHRR(16), np.ones(8, dtype=int), 1.0)
    rep = HierarchicalHistogram(16, 4, epsilon=1.0).randomize(np.arange(16), 0)
    with pytest.raises(ReportError):
        HierarchicalHistogram(16, 2, epsilon=1.0).aggregator().add(rep)
    with pytest.raises(ReportError):
        ProtocolReports.from_bytes(b"garbage")
    back = ProtocolReports.from_bytes(rep.to_bytes())
    assert back.n == 16
    flat = Flat(16, "oue", epsilon=1.0)
    assert flat.aggregator().add(flat.randomize(np.arange(16), 0)).release().total().value == 16
