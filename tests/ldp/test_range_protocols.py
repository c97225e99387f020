"""Local-DP range protocols (dprange.ldp.range_protocols; Cormode, Kulkarni, Srivastava, VLDB 2019):
exact consistency = dense weighted least squares, HaarHRR = dense inversion with its exact
covariance, declared parameters, and bad parameters refused."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from _helpers import _all_ranges

from conftest import dense_gls, range_matrix
from dprange import ParameterError, ReportError, _params
from dprange.ldp import HaarHRR, HierarchicalHistogram, ProtocolReports, expected_error, protocols
from dprange.ldp.range_protocols import Flat
from dprange.ldp.simulate import simulate
from dprange.registry import LDP_PROTOCOLS
from dprange.strategies.trees import HaarStrategy


def test_haar_hrr_release_is_the_dense_inversion_with_exact_covariance():
    D = 16
    proto = HaarHRR(D, epsilon=1.0, level_probabilities=[0.1, 0.2, 0.3, 0.4])
    rng = np.random.default_rng(3)
    values = rng.integers(0, D, 4000)
    agg = proto.aggregator().add(proto.randomize(values, rng))
    rel = agg.release()
    n = agg.n
    haar = HaarStrategy(D, known_total=False)
    A = haar.dense()  # total row, then differences top down
    y = np.concatenate([[n]] + [agg.levels[l].estimate()[: 2 ** (l - 1)] * n for l in range(1, 5)])
    np.testing.assert_allclose(rel.histogram().value, np.linalg.solve(A, y), atol=1e-8 * n)
    # exact covariance A^-1 diag(0, level variances) A^-T, with the plug-in variances used
    users = {l: a.n for l, a in agg.levels.items()}
    plug = proto.node_frequencies(np.clip(rel.histogram().value, 0, None), n)
    var = proto.level_variances(users, n, plug)
    sigma = np.concatenate([[0.0]] + [np.broadcast_to(var[l], (2 ** (l - 1),)) for l in range(1, 5)])
    Ainv = np.linalg.inv(A)
    cov = Ainv @ np.diag(sigma) @ Ainv.T
    lo, hi = _all_ranges(D)
    Q = range_matrix(D, lo, hi)
    np.testing.assert_allclose(rel.range(lo, hi).variance, np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-8, atol=1e-6)


def test_consistency_with_unequal_level_users_equals_dense_wls():
    """Level probabilities 0.6 / 0.3 / 0.1 and D = 20 (an incomplete tree): the release
    equals dense weighted least squares with the realised users per level and the known total."""
    proto = HierarchicalHistogram(20, 3, "grr", epsilon=0.7, level_probabilities=[0.6, 0.3, 0.1])
    rng = np.random.default_rng(8)
    agg = proto.aggregator().add(proto.randomize(rng.integers(0, 20, 3000), rng))
    rel = agg.release()
    tree, n = proto.tree, agg.n
    users = {l: a.n for l, a in agg.levels.items()}
    assert users[1] > users[2] > users[3] > 0
    est = {d: agg.levels[d].estimate()[: tree.level_sizes[d]] for d in tree.measured_depths}
    var = proto.level_variances(users, n, {d: np.clip(e, 0, 1) for d, e in est.items()})
    y = np.concatenate([est[d] * n for d in tree.measured_depths])
    v = np.concatenate([np.broadcast_to(var[d], (tree.level_sizes[d],)) for d in tree.measured_depths])
    reference, cov = dense_gls(tree.dense(), y, v, total=n)
    np.testing.assert_allclose(rel.histogram().value, reference, atol=1e-8 * n)
    lo, hi = _all_ranges(20)
    Q = range_matrix(20, lo, hi)
    np.testing.assert_allclose(rel.range(lo, hi).variance, np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-8, atol=1e-6)
    # the release answers every query type with standard errors
    assert rel.total().value == pytest.approx(n)
    prefix = rel.prefix(np.arange(20))
    assert np.all(prefix.stderr[:-1] > 0) and prefix.stderr[-1] < 1e-6 * prefix.stderr.max()  # public total
    assert np.all(np.diff(rel.cdf(consistent=True).value) >= 0)
    q = rel.quantile([0.25, 0.5, 0.75], consistent=True)
    assert np.all(np.diff(q.value) >= 0)


def test_bad_protocol_parameters():
    for make in (
        lambda: HierarchicalHistogram(1, 2),
        lambda: HierarchicalHistogram(16, 1),
        lambda: HierarchicalHistogram(16, 4, epsilon=0),
        lambda: HaarHRR(16, level_probabilities=[1, 0]),
        lambda: HierarchicalHistogram(16, 4, level_probabilities=[-0.5, 1.5]),
    ):
        with pytest.raises(ParameterError):
            make()
    proto = HierarchicalHistogram(16, 4, epsilon=1.0, level_probabilities=[1.0, 0.0])
    with pytest.raises(ReportError):  # nobody reported the leaves: refuse rather than guess
        simulate(proto, np.ones(16, dtype=int), rng=0).release()
    with pytest.raises(ParameterError):
        simulate(proto, np.ones(16), rng=0)  # counts must be integers


@pytest.mark.parametrize(
    "protocol",
    [
        HierarchicalHistogram(27, 3, "oue", epsilon=1.0),
        HierarchicalHistogram(20, 4, "hrr", epsilon=1.0),
        HierarchicalHistogram(16, 2, "grr", epsilon=1.0),
    ],
    ids=["27-bins-b3-oue", "20-bins-b4-hrr", "16-bins-b2-grr"],
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


# ------------------------------------------------------------------ declared constructor parameters
@pytest.mark.parametrize("cls", [HierarchicalHistogram, HaarHRR, Flat])
def test_protocols_declare_their_parameters(cls):
    names = [p.name for p in cls.PARAMS]
    assert list(inspect.signature(cls).parameters) == names
    assert (
        LDP_PROTOCOLS[{HierarchicalHistogram: "hierarchical", HaarHRR: "haar", Flat: "flat"}[cls]].params == cls.PARAMS
    )
    assert names[0] == "domain_size" and "epsilon" in names


def test_one_bind_call_checks_every_protocol_parameter(monkeypatch):
    calls = []

    def spy(params, args, kwargs, owner):
        calls.append(owner)
        return _params.bind(params, args, kwargs, owner)

    monkeypatch.setattr(protocols, "bind", spy)
    proto = HierarchicalHistogram(16, [2, 8], "olh", epsilon=1, oracle_options={"hash_pool": 8})
    assert calls == ["HierarchicalHistogram"]
    assert tuple(proto.tree.branching) == (2, 8) and proto.epsilon == 1.0 and isinstance(proto.epsilon, float)
    assert proto.oracle(2).hash_pool == 8


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: HierarchicalHistogram(16, 1), r"^branching must be an integer >= 2, got 1$"),
        (lambda: HaarHRR(1), r"^domain_size must be an integer >= 2, got 1$"),
        (lambda: Flat(16, epsilon=-1), r"^epsilon must be a positive finite number, got -1$"),
        (
            lambda: HierarchicalHistogram(16, 4, level_probabilities=[1.0]),
            r"^level_probabilities must be 2 non-negative numbers summing to 1$",
        ),
        # each of these was accepted, or a TypeError / ValueError, before the declarations
        (lambda: Flat(16, "xyz"), r"^unknown oracle 'xyz'; choose grr, oue, olh, hrr$"),
        (lambda: Flat(16, "oue", oracle_options={"g": 3}), r"^oracle_options \['g'\] are not options of the oue"),
        (
            lambda: HierarchicalHistogram(16, 4, "oue", epsilon=1, bogus=1),
            r"^HierarchicalHistogram has no parameter bogus; its parameters are domain_size, branching, oracle",
        ),
        (lambda: HierarchicalHistogram(16, 4, "oue", oracle_options="g"), r"^oracle_options must be a dict"),
        (lambda: HaarHRR(16, "x"), r"^HaarHRR takes at most 1 positional parameters \(domain_size\), got 2"),
        (
            lambda: HierarchicalHistogram(16, 4, level_probabilities="ab"),
            r"^level_probabilities must be a list of non-negative numbers summing to 1, got 'ab'$",
        ),
    ],
)
def test_bad_protocol_parameters_are_parameter_errors(build, message):
    with pytest.raises(ParameterError, match=message):
        build()
