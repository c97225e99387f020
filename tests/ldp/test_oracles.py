"""Local-DP frequency oracles (dprange.ldp.oracles; Wang et al., USENIX Security 2017): privacy of
each client randomiser from its exact output distribution (integer coins, exact rationals), the
client's draws against that distribution, unbiased estimates with the stated variance, the fast
aggregations against the dense count, the epsilon limits, and bad reports never aggregated."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import ScriptedSource, exp_bounds, monte_carlo_estimates

from dprange import DomainError, ParameterError, ReportError
from dprange.cli.ldp import build_protocol
from dprange.ldp import GRR, HRR, OLH, OUE, Reports, make_oracle
from dprange.ldp.oracles import ONE, exp_lower_bound
from dprange.privacy.samplers import SecureRandom
from dprange.registry import FREQUENCY_ORACLES


def oue_distribution(oracle, value):
    """P(bit vector) for every one of the 2^D bit vectors."""
    out = []
    for bits in itertools.product([0, 1], repeat=oracle.domain_size):
        on = np.where(np.arange(oracle.domain_size) == value, 0.5, oracle.q)
        out.append(np.prod(np.where(np.array(bits) == 1, on, 1 - on)))
    return np.array(out)


def signed_hrr_distribution(oracle, node, sign):
    """P(row j, reported sign) for HaarHRR's signed HRR input (node, sign)."""
    out = np.zeros((oracle.size, 2))
    for j in range(oracle.size):
        true = sign * (1 - 2 * (bin(j & node).count("1") % 2))
        out[j, 0 if true == 1 else 1] = oracle.p / oracle.size
        out[j, 1 if true == 1 else 0] = oracle.q / oracle.size
    return out.ravel()


@pytest.mark.parametrize("D", [2, 3, 4, 5])
@pytest.mark.parametrize("eps", [0.3, 1.7])
def test_privacy_ratio_is_exactly_e_to_the_epsilon(D, eps):
    """max over inputs a, b and outputs o of P(o | a) / P(o | b) = e^eps (never more; and
    exactly e^eps, so no budget is wasted) for every client, from its exact distribution."""
    oracles = [GRR(D, eps), OUE(D, eps), OLH(D, eps, hash_pool=12), HRR(D, eps)]
    for oracle in oracles:
        dist = [
            oue_distribution(oracle, v) if oracle.name == "oue" else oracle.output_distribution(v) for v in range(D)
        ]
        for d in dist:
            assert d.sum() == pytest.approx(1.0) and np.all(d > 0)
        worst = max(np.max(a / b) for a in dist for b in dist)
        assert worst <= math.exp(eps) * (1 + 1e-12), oracle.name
        # OUE's 16-bit coins round q up: its realised epsilon is below eps by <= 2^-9 (test_ldp_fast)
        target = oracle.realised_epsilon if oracle.name == "oue" else eps
        assert worst == pytest.approx(math.exp(target)), oracle.name
    # HaarHRR's client sends a signed one-hot vector through HRR: inputs are (node, sign)
    hrr = HRR(D, eps)
    inputs = [signed_hrr_distribution(hrr, node, s) for node in range(D) for s in (1, -1)]
    worst = max(np.max(a / b) for a in inputs for b in inputs)
    assert worst == pytest.approx(math.exp(eps)) and worst <= math.exp(eps) * (1 + 1e-12)


def _empirical(oracle, value, n, rng):
    rep = oracle.randomize(np.full(n, value), rng)
    if oracle.name == "grr":
        index = rep.data["value"]
        size = oracle.domain_size
    elif oracle.name == "olh":
        index = rep.data["seed"] * oracle.g + rep.data["value"]
        size = oracle.hash_pool * oracle.g
    else:  # hrr: (row, sign) with sign +1 -> column 0
        index = rep.data["row"] * 2 + (rep.data["sign"] == -1)
        size = 2 * oracle.size
    return np.bincount(index, minlength=size) / n


@pytest.mark.parametrize("oracle", [GRR(5, 1.0), OLH(5, 1.0, hash_pool=6), HRR(5, 1.0)], ids=lambda o: o.name)
def test_client_draws_follow_the_exact_distribution(oracle):
    """The real client's report frequencies (40000 draws) match output_distribution within
    5 binomial standard errors per cell (a wrong p, q or hash would be off by many)."""
    rng = np.random.default_rng(11)
    n = 40000
    for value in (0, 3):
        exact = oracle.output_distribution(value)
        freq = _empirical(oracle, value, n, rng)
        assert np.all(np.abs(freq - exact) <= 5 * np.sqrt(exact * (1 - exact) / n) + 1e-12)


def test_oue_client_bits_follow_the_exact_distribution():
    """Each OUE bit is on w.p. 1/2 (own value) or q, independently: per-bit frequencies
    within 5 s.e. and the pairwise correlation of two other bits within 5/sqrt(n) of 0."""
    oracle = OUE(12, 0.9)
    n = 30000
    rep = oracle.randomize(np.full(n, 4), np.random.default_rng(5))
    bits = np.unpackbits(rep.data["bits"], axis=1, count=12).astype(float)
    expect = np.where(np.arange(12) == 4, 0.5, oracle.q)
    assert np.all(np.abs(bits.mean(axis=0) - expect) <= 5 * np.sqrt(expect * (1 - expect) / n))
    corr = np.corrcoef(bits[:, 0], bits[:, 1])[0, 1]
    assert abs(corr) < 5 / math.sqrt(n)


@pytest.mark.parametrize("pool", [None, 23])
def test_olh_fast_aggregation_equals_dense_count(pool):
    """The blocked, threaded (or pooled) support counts equal the literal definition
    C_z = #{u : h_u(z) = y_u} computed on the dense users x items matrix."""
    oracle = OLH(157, 1.4, hash_pool=pool)
    rng = np.random.default_rng(2)
    rep = oracle.randomize(rng.integers(0, 157, 30000), rng)
    dense = oracle.hash(rep.data["seed"][:, None], np.arange(157)[None, :]) == rep.data["value"][:, None]
    np.testing.assert_array_equal(oracle.summarize(rep), dense.sum(axis=0))


def test_secure_default_randomness_on_every_client():
    """rng=None uses SecureRandom, which has only random/integers/standard_normal: every
    client must run on it (an AttributeError here means a release path uses numpy-only draws)."""
    values = np.array([0, 1, 2, 3, 3, 3])
    for oracle in (GRR(4, 1.0), OUE(4, 1.0), OLH(4, 1.0), OLH(4, 1.0, hash_pool=8), HRR(4, 1.0)):
        rep = oracle.randomize(values)
        assert rep.n == 6
        assert oracle.aggregator().add(rep).estimate().shape == (4,)


def test_bad_reports_are_rejected_never_aggregated(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 10, 50)
    grr, oue, olh, hrr = GRR(10, 1.0), OUE(10, 1.0), OLH(10, 1.0), HRR(10, 1.0)

    def tampered(oracle, **changes):
        rep = oracle.randomize(values, rng)
        data = dict(rep.data)
        for key, value in changes.items():
            if value is None:
                data.pop(key)
            else:
                data[key] = value
        return Reports(rep.oracle, rep.epsilon, rep.domain_size, data, rep.params)

    cases = [
        (grr, tampered(grr, value=np.full(50, 10))),  # value outside the domain
        (grr, tampered(grr, value=np.full(50, 1.5))),  # not integers
        (grr, tampered(grr, value=np.zeros(49, dtype=np.int64))),  # fewer rows than users
        (grr, tampered(grr, n=np.array([60]))),  # user count does not match
        (grr, tampered(grr, value=None)),  # missing field
        (oue, tampered(oue, bits=np.zeros((50, 1), dtype=np.uint8))),  # wrong width for D = 10
        (olh, tampered(olh, value=np.full(50, olh.g))),  # hashed value outside [g]
        (olh, tampered(olh, seed=np.full(50, -1))),  # negative hash seed
        (OLH(10, 1.0, hash_pool=4), tampered(OLH(10, 1.0, hash_pool=4), seed=np.full(50, 4))),  # outside the pool
        (hrr, tampered(hrr, sign=np.zeros(50, dtype=np.int8))),  # sign not +-1
        (hrr, tampered(hrr, row=np.full(50, 16))),  # row outside the padded domain
    ]
    for oracle, rep in cases:
        with pytest.raises(ReportError):
            oracle.aggregator().add(rep)
    # reports from another epsilon, domain, oracle kind or hash setting
    rep = olh.randomize(values, rng)
    for other in (OLH(10, 1.1), OLH(11, 1.0), OLH(10, 1.0, g=5), OLH(10, 1.0, hash_pool=8), GRR(10, 1.0)):
        with pytest.raises(ReportError):
            other.aggregator().add(rep)
    with pytest.raises(ReportError):
        grr.aggregator().merge(GRR(10, 2.0).aggregator())
    with pytest.raises(ReportError):
        grr.aggregator().estimate()  # nothing aggregated
    # malformed files
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "rows.jsonl").write_text(
        '{"header": {"oracle": "grr", "epsilon": 1, "domain_size": 10}, "fields": ["value"]}\n[1, 2]\n'
    )
    for name in ("empty.jsonl", "rows.jsonl", "missing.jsonl"):
        with pytest.raises(ReportError):
            Reports.from_jsonl(tmp_path / name)
    # bad client input
    for bad in ([-1], [10], [np.nan], ["a"]):
        with pytest.raises(DomainError):
            grr.randomize(bad)
    for make in (
        lambda: OUE(10, -1.0),
        lambda: HRR(10, float("inf")),
        lambda: OLH(10, 1.0, g=1),
        lambda: OLH(10, 1.0, hash_pool=0),
        lambda: OLH(2**31, 1.0),
        lambda: GRR(1, 1.0),
        lambda: OUE(10, 0),
    ):
        with pytest.raises(ParameterError):
            make()


@pytest.mark.parametrize("D, k", [(256, 1024), (1024, 256)])
def test_olh_hash_pool_behaves_like_independent_hashes(D, k):
    """With a fixed pool of k hashes, E[estimate of z] - f_z = g/(g-1) sum_{v != z} f_v
    (c_vz - 1/g), c_vz the pool's collision rate of v and z (module doc).  For uniform f the
    biases sum to S = g/(g-1) mean_j X_j / D, X_j = sum_{v != z} (1[h_j(v) = h_j(z)] - 1/g),
    which we check against the exact expected estimates.  For k independent draws of a
    2-universal family the ordered pairs are pairwise uncorrelated (each unordered pair
    counted twice), so Var(S) ~= (g/(g-1))^2 2 D (D-1) (1/g)(1 - 1/g) / (k D^2); we require
    |S| <= 4.5 s.d. (the pool is fixed by the code, so this is deterministic).  The old
    multiplicative mix of pool indices gave S = -0.90 at (1024, 256), 16 s.d. off."""
    oracle = OLH(D, 1.0, hash_pool=k)
    g, p = oracle.g, oracle.p
    table = oracle.hash_table(np.arange(k), np.arange(D)).astype(np.int64)
    sizes = np.stack([np.bincount(row, minlength=g) for row in table])  # bucket sizes per hash
    x = (sizes * (sizes - 1)).sum(axis=1) - D * (D - 1) / g
    S = g / (g - 1) * x.mean() / D
    # the same from the exact report distribution: E[C_z / N] = p m_z + q' (1 - m_z), m_z the
    # data mass in z's bucket, q' = (1 - p) / (g - 1), averaged over the pool
    f = np.full(D, 1.0 / D)
    q_other = (1 - p) / (g - 1)
    mass = np.stack([np.bincount(row, weights=f, minlength=g)[row] for row in table])
    expected = ((p * mass + q_other * (1 - mass)).mean(axis=0) - 1 / g) / (p - 1 / g)
    assert expected.sum() - 1 == pytest.approx(S, abs=1e-9)
    sd = g / (g - 1) * math.sqrt(2 * D * (D - 1) * (1 / g) * (1 - 1 / g) / (k * D**2))
    assert abs(S) <= 4.5 * sd, (S, sd)


# ------------------------------------------------------------------ largest epsilon (C3)
LIE = 2.0**-32


@pytest.mark.parametrize(
    "make, limit",
    [
        (lambda eps: OUE(10, eps), math.log(2**32 - 1)),
        (lambda eps: HRR(10, eps), math.log(2**32 - 1)),
        (lambda eps: GRR(10, eps), math.log(9 * (2**32 - 1))),
        (lambda eps: GRR(1000, eps), math.log(999 * (2**32 - 1))),
        (lambda eps: OLH(10, eps), math.log(65535)),
        (lambda eps: OLH(10, eps, g=8), math.log(7 * (2**32 - 1))),
    ],
    ids=["oue", "hrr", "grr10", "grr1000", "olh", "olh-g8"],
)
def test_each_oracle_refuses_epsilon_beyond_its_limit(make, limit):
    """Up to the limit the probability of a lie is >= 2^-32 (OLH: g <= 2^16); beyond it,
    and up to the float overflow that used to crash every oracle, a ParameterError."""
    at_limit = make(limit * (1 - 1e-12))
    assert at_limit.max_epsilon() == pytest.approx(limit, rel=1e-12)
    if isinstance(at_limit, OLH) and at_limit.g != 8:
        assert at_limit.g == 65536  # round(e^eps) + 1 = 2^16
    else:
        lie = at_limit.q if isinstance(at_limit, (OUE, HRR)) else 1 - at_limit.p
        assert lie == pytest.approx(LIE, rel=1e-6)
    for eps in (limit * (1 + 1e-9), 30.0, 709.0, 710.0, 1e300):
        with pytest.raises(ParameterError, match="supports epsilon <="):
            make(eps)


def test_olh_at_its_largest_epsilon_still_aggregates():
    """The defect behind the limit: at epsilon >= 22.2 OLH's g passed 2^32 and reports could
    never be aggregated; at the limit (g = 2^16) they round-trip exactly."""
    oracle = OLH(6, math.log(65535))
    values = np.array([0, 1, 2, 3, 4, 5] * 20)
    reports = oracle.randomize(values, 3)
    counts = oracle.summarize(reports)
    hashes = oracle.hash_table(reports.data["seed"], np.arange(6)).astype(np.int64)
    dense = (hashes == reports.data["value"][:, None]).sum(axis=0)
    np.testing.assert_array_equal(counts, dense)
    assert oracle.aggregator().add(reports).estimate().shape == (6,)


@pytest.mark.parametrize("sign", [True, False, 1.0, 0.5, 2, 0])
def test_hrr_signs_must_be_integers_plus_or_minus_one(tmp_path, sign):
    """Boolean signs used to pass (abs(True) == 1) and count as +1."""
    from dprange.ldp.protocols import ProtocolReports
    from dprange.ldp.range_protocols import Flat

    text = Flat(16, "hrr", epsilon=1.0).randomize(np.arange(16), 1).jsonl_text()
    path = tmp_path / "p.jsonl"
    path.write_text(text + json.dumps([1, 3, sign]) + "\n")
    with pytest.raises(ReportError):
        Flat(16, "hrr", epsilon=1.0).aggregator().add(ProtocolReports.load(path))
    oracle = HRR(16, 1.0)
    reports = oracle.randomize(np.arange(16), 2)
    reports.data["sign"] = (
        np.where(reports.data["sign"] > 0, sign, -1) if sign not in (1.0,) else reports.data["sign"].astype(float)
    )
    with pytest.raises(ReportError):
        oracle.aggregator().add(reports)


def test_out_of_domain_count_is_redacted_on_request(monkeypatch):
    """The number of bad values is private: DPRANGE_REDACT=1 (--redact) keeps it out."""
    with pytest.raises(DomainError, match="0..9; 3 do not"):
        GRR(10, 1.0).randomize([1, 10, 11, 12])
    monkeypatch.setenv("DPRANGE_REDACT", "1")
    with pytest.raises(DomainError, match="0..9; <redacted> do not"):
        GRR(10, 1.0).randomize([1, 10, 11, 12])


HIGH = 1 << 32  # a coin on [0, 2^62) is drawn as 32 high bits ...
LOW = 1 << 30  # ... and 30 low bits where the high bits tie with the threshold's


def exact_client_law(oracle, step=0):
    """{input: {output: probability}} of the client as implemented, in Fractions, from its
    integer thresholds and the algorithm (not from the oracle's own formulas).  OLH's outputs
    y outside {h_j(v)} all have the same law: one representative stands for them.  ``step``
    moves the threshold that many units towards less privacy (keep more, lie less)."""
    D = oracle.domain_size
    if oracle.name == "grr":
        t = Fraction(oracle.keep_threshold + step, ONE)
        return {v: {o: t * (o == v) + (1 - t) / D for o in range(D)} for v in range(D)}
    if oracle.name == "oue":  # coins on [0, 2^coin_bits)
        q = Fraction(oracle.lie_threshold - step, 1 << oracle.coin_bits)
        own = Fraction(oracle.own_threshold, 1 << oracle.coin_bits)
        law = {}
        for v in range(D):
            law[v] = {}
            for bits in itertools.product([0, 1], repeat=D):
                prob = Fraction(1)
                for i, b in enumerate(bits):
                    on = own if i == v else q
                    prob *= on if b else 1 - on
                law[v][bits] = prob
        return law
    if oracle.name == "olh":
        t = Fraction(oracle.keep_threshold + step, ONE)
        g, pool = oracle.g, oracle.hash_pool
        law = {v: {} for v in range(D)}
        for j in range(pool):
            hashed = [int(oracle.hash(np.array([j]), np.array([v]))[0]) for v in range(D)]
            outputs = set(hashed) | ({next(y for y in range(g) if y not in hashed)} if g > len(set(hashed)) else set())
            for v in range(D):
                for y in outputs:
                    law[v][(j, y)] = (t * (y == hashed[v]) + (1 - t) / g) / pool
        return law
    # HRR, with HaarHRR's signed inputs (node, sign): row j uniform, sign flipped if the coin < Q
    q = Fraction(oracle.lie_threshold - step, ONE)
    law = {}
    for v in range(D):
        for s in (1, -1):
            law[(v, s)] = {}
            for j in range(oracle.size):
                true = s * (1 - 2 * (bin(j & v).count("1") % 2))
                for out in (1, -1):
                    law[(v, s)][(j, out)] = ((1 - q) if out == true else q) / oracle.size
    return law


def worst_ratio(law):
    outputs = next(iter(law.values())).keys()
    return max(a[o] / b[o] for a in law.values() for b in law.values() for o in outputs)


def _olh(D, eps, **kw):
    return OLH(D, eps, hash_pool=7, **kw)


MAKERS = {
    "grr": GRR,
    "oue": OUE,
    "oue-62": lambda D, eps: OUE(D, eps, coin_bits=62),
    "olh": _olh,
    "olh-g3": lambda D, eps: _olh(D, eps, g=3),
    "hrr": HRR,
}


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("eps", [2.0**-40, 1e-6, 0.3, 1.0, 1.7, 5.0, "max"])
def test_exact_privacy_of_each_client_as_implemented(kind, eps):
    """From the integer thresholds and the algorithm, in exact rationals: every input's law
    sums to 1, and the worst ratio over two inputs and an output is <= e^eps (below a
    rigorous lower bound of e^eps), while one more unit of threshold would exceed it (no
    budget wasted beyond one step of 2^-62); the oracle's float probabilities are the
    realised ones.  Domains 2, 3, 5; the largest
    epsilon each oracle allows included."""
    for D in (2, 3, 5):
        if eps == "max":
            oracle = MAKERS[kind](D, 1.0)
            oracle = MAKERS[kind](D, oracle.max_epsilon())
        else:
            oracle = MAKERS[kind](D, eps)
        law = exact_client_law(oracle)
        if kind != "olh" and kind != "olh-g3":  # OLH: outputs outside {h_j(v)} are lumped
            assert all(sum(dist.values()) == 1 for dist in law.values())
        assert all(p > 0 for dist in law.values() for p in dist.values())
        lo, hi = exp_bounds(oracle.epsilon)
        worst = worst_ratio(law)
        assert worst <= lo, (kind, D, float(worst / lo - 1))
        assert worst_ratio(exact_client_law(oracle, step=1)) > lo, (kind, D)
        if kind == "oue" and oracle.coin_bits < 62:  # q rounded up to a multiple of 2^-16 (2^-32)
            assert 0 <= oracle.epsilon - oracle.realised_epsilon <= 2.0**-9
        else:
            assert float(worst) == pytest.approx(math.exp(oracle.epsilon), rel=1e-8)
        assert float(worst) == pytest.approx(math.exp(oracle.realised_epsilon), rel=1e-12)
        assert oracle.privacy_ratio() == worst
        if kind in ("grr", "hrr"):
            floats = {o: float(p) for o, p in law[0 if kind == "grr" else (0, 1)].items()}
            np.testing.assert_allclose(oracle.output_distribution(0), list(floats.values()), rtol=1e-15)
        assert oracle.slope == float(oracle.exact_p - oracle.exact_q)
        assert (oracle.p, oracle.q) == (float(oracle.exact_p), float(oracle.exact_q))


def test_clients_compare_62_bit_integer_coins_with_their_thresholds():
    """Each client keeps / flips / sets a bit exactly when its coin U = H 2^30 + L is below the
    threshold: coins just below and at the threshold (high part tied, low part deciding; high
    part off by one) give the outputs the exact law assumes.  Fails on the old float clients."""
    grr = GRR(5, 1.0)
    th, tl = divmod(grr.keep_threshold, LOW)
    assert 0 < tl
    source = ScriptedSource({HIGH: [[th - 1, th, th, th + 1]], LOW: [[tl - 1, tl]], 5: [[4, 4, 4, 4]]})
    assert grr.randomize([2, 2, 2, 2], source).data["value"].tolist() == [2, 2, 4, 4]
    assert source.finished()

    olh = OLH(5, 1.0, hash_pool=5)  # g = 4
    th, tl = divmod(olh.keep_threshold, LOW)
    h = int(olh.hash(np.array([0]), np.array([3]))[0])
    other = (h + 1) % olh.g
    source = ScriptedSource({5: [[0, 0, 0]], HIGH: [[th, th - 1, th]], LOW: [[tl - 1, tl]], olh.g: [[other] * 3]})
    reps = olh.randomize([3, 3, 3], source)
    assert reps.data["value"].tolist() == [h, h, other] and source.finished()

    hrr = HRR(5, 1.0)  # row 1, value 3: true sign -1
    qh, ql = divmod(hrr.lie_threshold, LOW)
    assert 0 < ql
    source = ScriptedSource({8: [[1, 1, 1, 1]], HIGH: [[qh - 1, qh, qh, qh + 1]], LOW: [[ql - 1, ql]]})
    assert hrr.randomize([3, 3, 3, 3], source).data["sign"].tolist() == [1, 1, -1, -1]
    assert source.finished()

    oue = OUE(3, 1.0, coin_bits=62)  # every bit with Q, then the own bit afresh with 2^61 (high 2^31, low 0)
    qh, ql = divmod(oue.lie_threshold, LOW)
    assert 0 < ql
    source = ScriptedSource(
        {HIGH: [[[qh + 1, qh - 1, qh], [qh, qh + 1, qh - 1]], [2**31 - 1, 2**31]], LOW: [[ql, ql - 1], [0]]}
    )
    bits = np.unpackbits(oue.randomize([0, 2], source).data["bits"], axis=1, count=3)
    assert bits.tolist() == [[1, 1, 0], [1, 0, 0]] and source.finished()


def test_old_float_clients_overspent_epsilon():
    """The old clients kept the truth (GRR) or lied (OUE, HRR) if random() < p, random() =
    j / 2^53: the realised probability ceil(p 2^53) / 2^53.  At epsilon = 1 (and at most
    epsilons) that made the worst ratio exceed e^epsilon (a rigorous upper bound); the
    integer clients stay at or below it."""
    eps = 1.0
    lo, hi = exp_bounds(eps)
    e = math.exp(eps)

    def realised(p):
        return Fraction(math.ceil(Fraction(p) * 2**53), 2**53)

    p_grr = realised(e / (e + 4))  # GRR(5): keep w.p. p, else one of the 4 others
    q_oue = realised(1.0 / (e + 1.0))
    q_hrr = realised(1.0 - e / (1.0 + e))
    old = {"grr": p_grr * 4 / (1 - p_grr), "oue": (1 - q_oue) / q_oue, "hrr": (1 - q_hrr) / q_hrr}
    new = {"grr": GRR(5, eps), "oue": OUE(5, eps), "hrr": HRR(5, eps)}
    for name in old:
        assert old[name] > hi, name
        assert new[name].privacy_ratio() <= lo, name


@pytest.mark.parametrize(
    "make",
    [
        lambda e: GRR(5, e),
        lambda e: OUE(5, e),
        lambda e: HRR(5, e),
        lambda e: OLH(5, e),
        lambda e: OLH(5, e, g=40),
        lambda e: GRR(2**31 - 1, e),
    ],
    ids=["grr", "oue", "hrr", "olh", "olh-g40", "grr-large-domain"],
)
def test_epsilon_too_small_for_62_bit_coins_is_refused(make):
    """Below about k 2^-62 the thresholds would make every report uniform (estimates divide
    by zero): a ParameterError naming an epsilon that works, and that epsilon is accepted."""
    with pytest.raises(ParameterError, match="too small") as info:
        make(1e-300)
    hint = float(str(info.value).rsplit(">= ", 1)[1])
    oracle = make(hint)
    assert oracle.exact_p > oracle.exact_q


@pytest.mark.parametrize(
    "oracle", [GRR(6, 1.0), OUE(6, 1.0), OLH(6, 1.0), HRR(6, 3.0), GRR(6, 9.0)], ids=lambda o: f"{o.name}-{o.epsilon:g}"
)
def test_estimates_stay_unbiased_with_the_stated_variance(oracle):
    """Monte-Carlo (400 batches of 1500 users, fixed seed): mean estimate within 4.5 s.e. of
    the true fractions, empirical variance within 30% of ``variance(n, f)`` (s.d. of the
    ratio 0.07).  (OLH with a fixed hash pool carries its documented per-item bias; see
    test_olh_hash_pool_behaves_like_independent_hashes.)"""
    reps = 400
    est, f, var = monte_carlo_estimates(oracle, [0.4, 0.25, 0.15, 0.1, 0.1, 0.0], 1500, reps, seed=21)
    assert np.all(np.abs(est.mean(axis=0) - f) <= 4.5 * np.sqrt(var / reps))
    assert np.all(np.abs(est.var(axis=0, ddof=1) / var - 1) < 0.3)


EPS = 0.8


@pytest.mark.parametrize(
    "oracle",
    [GRR(4, EPS), OUE(4, EPS, coin_bits=62), OLH(4, EPS, hash_pool=8), HRR(4, EPS)],
    ids=lambda o: o.name,
)
def test_client_privacy_ratio_from_exact_distribution(oracle):
    """(OUE with 62-bit coins: the default 16-bit coins round q up on purpose, realising an
    epsilon a relative <= 2^-10 lower; test_oue_coins_round_so_epsilon_is_never_exceeded checks that ratio exactly.)"""
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


def test_olh_hash_pool_variant_and_secure_default():
    oracle = OLH(32, 1.0, hash_pool=16384)
    values = np.random.default_rng(0).integers(0, 4, 20000)
    est = oracle.aggregator().add(oracle.randomize(values)).estimate()  # secure default randomness
    assert abs(est[:4].sum() - 1) < 0.2 and abs(est[4:].sum()) < 0.3


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


def test_make_oracle_is_the_oracle_registry():
    for name in FREQUENCY_ORACLES:
        oracle = make_oracle(name, 6, 1.0)
        assert oracle.name == name and type(oracle) is FREQUENCY_ORACLES[name].factory
    with pytest.raises(ParameterError, match=r"^unknown oracle 'xyz'; choose grr, oue, olh, hrr$"):
        make_oracle("xyz", 6, 1.0)
    with pytest.raises(ParameterError, match=r"^unknown protocol 'tree'; choose hierarchical, haar, flat$"):
        build_protocol("tree", 16, 1.0, 2, "oue")
