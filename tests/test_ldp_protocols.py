"""Local-DP range protocols (seed 002 section 4): exact consistency = dense weighted least
squares, HaarHRR = dense inversion with its exact covariance, the paper's two-stage
consistency (= GLS only with equal users per level, never better), the exact analysis
against dense matrices, serialisation, the CLI, and rejection of mismatched reports."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import dense_gls, range_matrix
from dprange import ParameterError, ReportError
from dprange.cli.ldp import ldp
from dprange.ldp import HaarHRR, HierarchicalHistogram, ProtocolReports, expected_error, optimal_branching
from dprange.ldp.consistency import two_stage_consistency
from dprange.ldp.simulate import simulate
from dprange.strategies.trees import HaarStrategy, TreeStrategy


def _all_ranges(n):
    return np.triu_indices(n)


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


def _two_stage_matrix(b, h, n_leaves):
    """The two-stage estimator is linear in (level values, total): its leaf matrix."""
    sizes = [b**d for d in range(1, h + 1)]
    cols = []
    for k in range(sum(sizes) + 1):
        e = np.zeros(sum(sizes) + 1)
        e[k] = 1.0
        parts = np.split(e[:-1], np.cumsum(sizes)[:-1])
        cols.append(two_stage_consistency(b, [None] + parts, e[-1])[-1])
    return np.array(cols).T  # (leaves, measurements + total)


def test_two_stage_is_gls_for_equal_users_and_never_beats_exact_wls():
    b, h = 3, 3
    tree = TreeStrategy(27, b, measure_root=False, known_total=True)
    A = tree.dense()
    M = _two_stage_matrix(b, h, 27)
    lo, hi = _all_ranges(27)
    Q = range_matrix(27, lo, hi)
    for level_var in ([1.0, 1.0, 1.0], [0.5, 2.0, 1.0]):
        v = np.concatenate([np.full(b**d, level_var[d - 1]) for d in range(1, h + 1)])
        gls = np.linalg.solve(
            np.block([[A.T @ np.diag(1 / v) @ A, np.ones((27, 1))], [np.ones((1, 27)), np.zeros((1, 1))]]),
            np.block([[A.T @ np.diag(1 / v), np.zeros((27, 1))], [np.zeros((1, A.shape[0])), np.ones((1, 1))]]),
        )[:27]
        # both estimators are unbiased: M [A x; 1'x] = x
        x = np.random.default_rng(0).normal(size=27)
        np.testing.assert_allclose(M @ np.concatenate([A @ x, [x.sum()]]), x, atol=1e-9)
        cov_two = M[:, :-1] @ np.diag(v) @ M[:, :-1].T
        cov_gls = gls[:, :-1] @ np.diag(v) @ gls[:, :-1].T
        var_two = np.einsum("ij,jk,ik->i", Q, cov_two, Q)
        var_gls = np.einsum("ij,jk,ik->i", Q, cov_gls, Q)
        assert np.all(var_gls <= var_two * (1 + 1e-10) + 1e-12)
        if level_var[0] == level_var[1]:  # equal users per level: the paper's procedure is GLS
            np.testing.assert_allclose(M, gls, atol=1e-10)
        else:
            assert var_gls.mean() < 0.97 * var_two.mean()


def test_expected_error_equals_dense_average_variance():
    """expected_error (fractions, all ranges) = mean of Q Cov Q' / N^2 from dense GLS with
    N p_l users per level (consistency) or from the canonical range decomposition (without)."""
    D, N, eps = 16, 10**6, 1.0
    proto = HierarchicalHistogram(  # 62-bit coins realise q = 1/(e^eps + 1) to 2^-62
        D, 4, "oue", epsilon=eps, level_probabilities=[0.3, 0.7], oracle_options={"coin_bits": 62}
    )
    tree = proto.tree
    q = 1 / (np.exp(eps) + 1)
    per_user = q * (1 - q) / (0.5 - q) ** 2  # OUE V_F times users
    var = {1: per_user / (0.3 * N) * N**2, 2: per_user / (0.7 * N) * N**2}
    A = tree.dense()
    v = np.concatenate([np.full(tree.level_sizes[d], var[d]) for d in (1, 2)])
    _, cov = dense_gls(A, np.zeros(A.shape[0]), v, total=0.0)
    lo, hi = _all_ranges(D)
    Q = range_matrix(D, lo, hi)
    exact = np.einsum("ij,jk,ik->i", Q, cov, Q).mean() / N**2
    assert expected_error(proto, "all-range", N) == pytest.approx(exact, rel=1e-9)
    # without consistency: ranges of whole level-1 blocks use one node, others leaves
    lengths = hi - lo + 1
    nodes1 = np.array([sum(1 for k in range(4) if a <= 4 * k and 4 * k + 3 <= c) for a, c in zip(lo, hi)])
    direct = ((nodes1 * var[1] + (lengths - 4 * nodes1) * var[2]) / N**2).mean()
    assert expected_error(proto, "all-range", N, consistency=False) == pytest.approx(direct, rel=1e-9)
    # optimal branching: the argmin of the exact curve
    best = optimal_branching(64, N, eps, branchings=[2, 4, 8, 64])
    assert best["best"] == min(best["curve"], key=best["curve"].get)
    assert best["curve"][64] > best["curve"][best["best"]]


def test_protocol_reports_round_trip_and_mismatches(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.integers(0, 32, 400)
    for proto in (
        HierarchicalHistogram(32, 4, "oue", epsilon=1.0),
        HierarchicalHistogram(32, 2, "olh", epsilon=1.0),
        HaarHRR(32, epsilon=1.0),
    ):
        rep = proto.randomize(values, rng)
        want = proto.aggregator().add(rep).release().histogram().value
        for name in ("r.npz", "r.jsonl"):
            rep.save(tmp_path / name)
            got = proto.aggregator().add(ProtocolReports.load(tmp_path / name)).release().histogram().value
            np.testing.assert_allclose(got, want)
        # parallel aggregation: merge of two halves = both batches in one aggregator
        a = proto.aggregator().add(proto.randomize(values[:100], 5))
        b = proto.aggregator().add(proto.randomize(values[100:], 6))
        whole = proto.aggregator().add(proto.randomize(values[:100], 5)).add(proto.randomize(values[100:], 6))
        np.testing.assert_allclose(a.merge(b).release().histogram().value, whole.release().histogram().value)
    rep = HierarchicalHistogram(32, 4, "oue", epsilon=1.0).randomize(values, 0)
    for other in (
        HierarchicalHistogram(32, 4, "oue", epsilon=0.5),
        HierarchicalHistogram(64, 4, "oue", epsilon=1.0),
        HierarchicalHistogram(32, 4, "grr", epsilon=1.0),
        HaarHRR(32, epsilon=1.0),
    ):
        with pytest.raises(ReportError):
            other.aggregator().add(rep)
    (tmp_path / "bad.jsonl").write_text('{"protocol": {}, "levels": {"1": {}}, "fields": {"1": ["value"]}}\n[1]\n')
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 broken")
    for name in ("bad.jsonl", "bad.npz", "absent.npz"):
        with pytest.raises(ReportError):
            ProtocolReports.load(tmp_path / name)


def test_cli_encode_aggregate_simulate(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "a.csv").write_text("age\n" + "\n".join(str(v) for v in rng.integers(0, 64, 300)) + "\n")
    (tmp_path / "b.csv").write_text("age\n" + "\n".join(str(v) for v in rng.integers(0, 64, 200)) + "\n")
    run = CliRunner().invoke
    common = ["--column", "age", "--lo", "0", "--hi", "63", "--epsilon", "1.0", "--branching", "4"]
    assert run(ldp, ["encode", str(tmp_path / "a.csv"), *common, "-o", str(tmp_path / "a.npz")]).exit_code == 0
    assert run(ldp, ["encode", str(tmp_path / "b.csv"), *common, "-o", str(tmp_path / "b.jsonl")]).exit_code == 0
    res = run(
        ldp,
        [
            "aggregate",
            str(tmp_path / "a.npz"),
            str(tmp_path / "b.jsonl"),
            "--lo",
            "0",
            "--hi",
            "63",
            "-o",
            str(tmp_path / "rel.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "rel.json").read_text())
    assert out["total"]["value"] == pytest.approx(500) and out["total"]["public"]
    assert out["mechanism"] == "ldp-hierarchical" and out["privacy"]["epsilon"] == 1.0
    assert len(out["histogram"]["value"]) == 64 and all(s > 0 for s in out["histogram"]["stderr"])
    # a file made with another epsilon is rejected, naming the file
    other = ["--column", "age", "--lo", "0", "--hi", "63", "--epsilon", "2.0", "--branching", "4"]
    assert run(ldp, ["encode", str(tmp_path / "b.csv"), *other, "-o", str(tmp_path / "c.npz")]).exit_code == 0
    res = run(ldp, ["aggregate", str(tmp_path / "a.npz"), str(tmp_path / "c.npz")])
    assert res.exit_code != 0 and isinstance(res.exception, ReportError) and "c.npz" in str(res.exception)
    # values outside the public bounds are an error, not clipped
    res = run(ldp, ["encode", str(tmp_path / "a.csv"), "--column", "age", "--lo", "0", "--hi", "10", "-e", "1"])
    assert res.exit_code != 0
    np.save(tmp_path / "h.npy", rng.integers(0, 1000, 64))
    res = run(ldp, ["simulate", str(tmp_path / "h.npy"), "-e", "1.0", "--protocol", "haar", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["rmse_x1000_ranges"] > 0


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
