"""dprange.ldp.protocols: protocol reports and headers (round trips, corrupt or foreign reports
refused), level sampling by integer coins, the protocol registry (a toy protocol and oracle
reach the CLI and the lookups), and the Measurements a protocol hands to ``infer`` (GLS, NNLS,
L1 and the bootstrap against Monte-Carlo)."""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pytest
from _helpers import ScriptedSource, _choices, _squeezed
from click.testing import CliRunner

from dprange import ParameterError, ReportError
from dprange.cli.ldp import build_protocol, ldp, protocol_from_header
from dprange.errors import ConvergenceWarning
from dprange.inference.tree import tree_gls
from dprange.inference.wavelet import haar_estimate
from dprange.ldp import GRR, HaarHRR, HierarchicalHistogram, ProtocolReports, make_oracle
from dprange.ldp.oracles import ONE
from dprange.ldp.protocols import protocol_class, register_protocol
from dprange.ldp.range_protocols import Flat
from dprange.ldp.simulate import simulate
from dprange.operators import HaarLevel, TreeLevel
from dprange.registry import FREQUENCY_ORACLES, LDP_PROTOCOLS

PROTOCOLS = {
    "hh-grr": (lambda: HierarchicalHistogram(20, 3, "grr", epsilon=0.7, level_probabilities=[0.6, 0.3, 0.1]), "grr"),
    "hh-oue": (lambda: HierarchicalHistogram(16, 4, "oue", epsilon=1.0), "oue"),
    "haar": (lambda: HaarHRR(16, epsilon=1.0, level_probabilities=[0.1, 0.2, 0.3, 0.4]), "hrr"),
    "haar-padded": (lambda: HaarHRR(12, epsilon=1.0), "hrr"),
    "flat": (lambda: Flat(16, "oue", epsilon=1.0), "oue"),
}


def _aggregate(proto, seed=4, users=3000):
    rng = np.random.default_rng(seed)
    return proto.aggregator().add(proto.randomize(rng.integers(0, proto.domain_size, users), rng))


@pytest.mark.parametrize("name", PROTOCOLS)
def test_measurements_hold_each_reported_level_with_its_realised_users(name):
    make, oracle = PROTOCOLS[name]
    proto = make()
    agg = _aggregate(proto)
    m = agg.measurements()
    n = agg.n
    users = {l: a.n for l, a in agg.levels.items()}
    assert (m.n, m.total, m.neighbours, m.epsilon, m.source) == (
        proto.domain_size,
        n,
        "replace",
        proto.epsilon,
        f"local:{oracle}",
    )
    assert len(m.measurements) == proto.levels
    values = [None] + [agg.levels[l].estimate()[: proto.level_size(l)] * n for l in range(1, proto.levels + 1)]
    expected_var = proto.level_variances(users, n, proto._plug_in_frequencies(values, users, n))
    for level, part in enumerate(m.measurements, start=1):
        kind = HaarLevel if isinstance(proto, HaarHRR) else TreeLevel
        assert isinstance(part.block, kind) and part.noise is None
        assert part.level_index() == level
        np.testing.assert_array_equal(part.values, values[level])
        np.testing.assert_array_equal(part.row_variances(), np.broadcast_to(expected_var[level], part.values.shape))
    # the blocks are the level's linear queries: block @ histogram = the level's true counts
    x = np.arange(proto.domain_size, dtype=float)
    for level, part in enumerate(m.measurements, start=1):
        if isinstance(proto, HaarHRR):
            padded = np.zeros(proto.haar.size)
            padded[: x.size] = x
            halves = padded.reshape(2 ** (level - 1), 2, -1).sum(axis=2)
            want = halves[:, 0] - halves[:, 1]
        else:
            want = proto.tree.level_sums(x)[level]
        np.testing.assert_allclose(part.block @ x, want)


@pytest.mark.parametrize("name", PROTOCOLS)
def test_gls_release_equals_the_protocol_specific_estimate(name):
    """Through ``infer``: bit-for-bit today's tree GLS (HH_B, flat) or inverse Haar transform
    (HaarHRR, with the second pass's plug-in variances), values and range variances."""
    proto = PROTOCOLS[name][0]()
    agg = _aggregate(proto, seed=9)
    rel = agg.release()
    n = agg.n
    users = {l: a.n for l, a in agg.levels.items()}
    values = [None] + [agg.levels[l].estimate()[: proto.level_size(l)] * n for l in range(1, proto.levels + 1)]
    if isinstance(proto, HaarHRR):
        first = haar_estimate(proto.haar, values, proto.level_variances(users, n), total=n)
        plug = proto.node_frequencies(np.clip(first.leaves, 0, None), n)
        want = haar_estimate(proto.haar, values, proto.level_variances(users, n, plug), total=n)
    else:
        plug = {l: np.clip(values[l] / n, 0, 1) for l in range(1, proto.levels + 1)}
        want = tree_gls(proto.tree, values, proto.level_variances(users, n, plug), total=n)
    lo, hi = np.triu_indices(proto.domain_size)
    np.testing.assert_array_equal(rel.histogram().value, want.leaves)
    np.testing.assert_array_equal(rel.range(lo, hi).variance, np.maximum(want.range_variance(lo, hi), 0.0))
    assert rel.inference == "gls" and rel.exact_error_bars


@pytest.mark.parametrize("inference", ["nnls", "l1"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: HierarchicalHistogram(16, 4, "oue", epsilon=1.0),
        lambda: HaarHRR(16, epsilon=1.0),
        lambda: Flat(16, "grr", epsilon=1.0),
    ],
    ids=["hh", "haar", "flat"],
)
def test_nonlinear_releases_are_nonnegative_with_nan_analytic_stderr(make, inference):
    """Skewed data (most bins empty): GLS goes negative, NNLS / L1 do not, and sum to N."""
    proto = make()
    counts = np.zeros(16, dtype=np.int64)
    counts[[3, 4, 12]] = [900, 600, 300]
    agg = simulate(proto, counts, rng=2)
    gls = agg.release()
    assert gls.histogram().value.min() < 0
    rel = agg.release(inference=inference, inference_options={"tol": 1e-4})
    x = rel.histogram().value
    assert x.min() >= 0 and x.sum() == pytest.approx(agg.n, rel=1e-9)
    assert rel.inference == inference and not rel.exact_error_bars
    assert rel.parameters["inference"] == inference
    assert np.isnan(rel.range(0, 5).stderr)
    boot = rel.bootstrap([0, 3], [15, 4], reps=3, rng=0)
    assert boot[0] == pytest.approx(0.0, abs=1e-6 * agg.n)  # the whole domain: the public total
    assert boot[1] > 0


def test_bad_inference_and_options_are_parameter_errors():
    proto = HierarchicalHistogram(16, 4, "oue", epsilon=1.0)
    agg = simulate(proto, np.full(16, 50), rng=0)
    with pytest.raises(ParameterError, match="inference must be one of"):
        agg.release(inference="lasso")
    with pytest.raises(ParameterError, match="unknown inference options"):
        agg.release(inference="l1", inference_options={"lambda": 1})
    with pytest.warns(ConvergenceWarning, match="maxiter"):  # ADMM stopped early: said, not hidden
        rel = agg.release(inference="l1", inference_options={"maxiter": 2})
    assert rel.error_model.converged is False
    assert rel.converged is False  # the release says so too


# ---------------------------------------------------------------- bootstrap vs Monte-Carlo
#: HH_B, B = 4 over D = 16, OUE at eps = 1; N = 2.09e6 users.  Every bin holds >= 20,000
#: users while a bin's standard error is about 3,300, so the non-negativity constraint is
#: never active here and NNLS gives the GLS answers (measured over 400 runs: identical means;
#: L1's means differ from GLS's by < 0.01 standard errors).  Near zero counts the parametric
#: bootstrap is not this accurate, because it resamples around the estimate rather than the
#: truth: with bins 6 and 12 emptied, NNLS over 300 runs is biased by +0.66 standard errors
#: on bin 6, and bootstrap standard errors of bin 6 from three releases were 1.09x, 1.09x
#: and 1.81x its Monte-Carlo standard deviation (other ranges within 0.94-1.08x).
COUNTS = 100 * np.array([3000, 2500, 2000, 1800, 1500, 1300, 1200, 1000, 900, 800, 700, 600, 500, 400, 300, 200])
LO = np.array([3, 5, 1, 0, 0])  # a bin, three bins, fourteen bins, two prefixes
HI = np.array([3, 7, 14, 5, 10])
RUNS = 300  # independent protocol runs (Monte-Carlo)
REPS = 300  # bootstrap replicates of one release
ADMM_OPTIONS = {"tol": 1e-4}  # ADMM tolerance for these runs (the bootstrap reruns the same)


def _sd_tolerance(k1: int, k2: int, sigmas: float = 4.0) -> float:
    """Relative tolerance for comparing two independent standard-deviation estimates from k1
    and k2 normal samples: each has relative standard error 1 / sqrt(2 (k - 1)), so their
    ratio has about sqrt(1 / (2 (k1 - 1)) + 1 / (2 (k2 - 1))); allow ``sigmas`` of it."""
    return sigmas * math.sqrt(1.0 / (2 * (k1 - 1)) + 1.0 / (2 * (k2 - 1)))


@pytest.mark.parametrize("inference", ["gls", "nnls", "l1"])
def test_bootstrap_stderr_matches_monte_carlo_over_protocol_runs(inference):
    proto = HierarchicalHistogram(16, 4, "oue", epsilon=1.0)
    options = None if inference == "gls" else ADMM_OPTIONS
    runs = np.array(
        [
            simulate(proto, COUNTS, rng=1000 + s)
            .release(inference=inference, inference_options=options)
            .range(LO, HI)
            .value
            for s in range(RUNS)
        ]
    )
    monte_carlo = runs.std(axis=0, ddof=1)
    release = simulate(proto, COUNTS, rng=7).release(inference=inference, inference_options=options)
    boot = release.bootstrap(LO, HI, reps=REPS, rng=11)
    tol = _sd_tolerance(RUNS, REPS)  # 0.231 for 300 runs and 300 replicates
    np.testing.assert_allclose(boot, monte_carlo, rtol=tol)
    if inference == "gls":  # the exact standard errors: only one estimate's sampling error
        exact = release.range(LO, HI).stderr
        single = 4.0 / math.sqrt(2 * (REPS - 1))  # 0.164: one estimate's sampling error
        np.testing.assert_allclose(boot, exact, rtol=single)
        np.testing.assert_allclose(monte_carlo, exact, rtol=single)
    else:
        assert np.all(np.isnan(release.range(LO, HI).stderr))


# ------------------------------------------------------------------ a toy protocol and oracle
class ToyFlat(Flat):
    """Flat under another name (what a new protocol adds): its reports carry "ldp-toy"."""

    name = "ldp-toy"


class ToyOracle(GRR):
    """GRR under another name (what a new oracle adds)."""

    name = "toy-rr"


@contextlib.contextmanager
def registered_toys():
    register_protocol(ToyFlat, "toy", summary="a toy protocol registered by the test")
    FREQUENCY_ORACLES.add(ToyOracle, summary="a toy oracle registered by the test")
    try:
        yield
    finally:
        LDP_PROTOCOLS.unregister("toy")
        FREQUENCY_ORACLES.unregister("toy-rr")


@pytest.fixture
def toys():
    with registered_toys():
        yield


@pytest.fixture
def population(tmp_path):
    path = tmp_path / "values.csv"
    rng = np.random.default_rng(5)
    path.write_text("v\n" + "\n".join(str(int(v)) for v in rng.integers(0, 8, 300)) + "\n")
    return path


def test_registered_protocols_build_their_classes_and_read_back_their_headers():
    for option, cls in (("hierarchical", HierarchicalHistogram), ("flat", Flat)):
        proto = build_protocol(option, 16, 1.0, 2, "olh")
        assert type(proto) is cls and proto.oracle_name == "olh"
        assert protocol_class(cls.name) is cls
        assert protocol_from_header(proto.describe()).describe() == proto.describe()
    haar = build_protocol("haar", 16, 1.0, 2, "olh")
    assert haar.name == "ldp-haar-hrr" and haar.levels == 4 and haar.oracle_name == "hrr"
    assert build_protocol("hierarchical", 16, 1.0, 2, "oue").tree.depth == 4  # 16 = 2^4


# ------------------------------------------------------------------ one registration reaches everything
def test_a_registered_toy_protocol_and_oracle_reach_the_cli_and_the_lookups(toys, population, tmp_path):
    assert _choices("simulate", "protocol") == ("hierarchical", "haar", "flat", "toy")
    assert _choices("encode", "oracle") == ("grr", "oue", "olh", "hrr", "toy-rr")
    assert "toy:atoyprotocolregisteredbythetest" in _squeezed(CliRunner().invoke(ldp, ["encode", "--help"]).output)
    proto = build_protocol("toy", 8, 1.0, 4, "toy-rr")
    assert type(proto) is ToyFlat and type(proto.oracle(1)) is ToyOracle
    assert type(make_oracle("toy-rr", 8, 1.0)) is ToyOracle

    run = CliRunner().invoke
    reports, release = tmp_path / "r.npz", tmp_path / "rel.json"
    args = ["encode", str(population), "-c", "v", "--lo", "0", "--hi", "7", "-e", "1", "--seed", "3"]
    result = run(ldp, [*args, "--protocol", "toy", "--oracle", "toy-rr", "-o", str(reports)])
    assert result.exit_code == 0, result.output
    assert "ldp-toy" in result.output
    result = run(ldp, ["aggregate", str(reports), "-o", str(release)])  # the header names ldp-toy
    assert result.exit_code == 0, result.output
    parameters = json.loads(release.read_text())["provenance"]["parameters"]
    assert parameters["protocol"] == "ldp-toy" and parameters["oracle"] == "toy-rr"
    assert sum(parameters["users_per_level"].values()) == 300


def test_unregistering_removes_the_toy_everywhere(population, tmp_path):
    with registered_toys():
        header = build_protocol("toy", 8, 1.0, 4, "grr").describe()
    assert "toy" not in _choices("simulate", "protocol") and "toy-rr" not in _choices("simulate", "oracle")
    result = CliRunner().invoke(
        ldp, ["encode", str(population), "-c", "v", "--lo", "0", "--hi", "7", "-e", "1", "--protocol", "toy"]
    )
    assert result.exit_code == 2 and "'toy' is not one of 'hierarchical', 'haar', 'flat'" in result.output
    with pytest.raises(ReportError, match="unknown protocol 'ldp-toy' in the reports"):
        protocol_from_header(header)
    with pytest.raises(ParameterError, match="unknown oracle 'toy-rr'"):
        make_oracle("toy-rr", 8, 1.0)


def test_a_name_is_registered_once():
    with pytest.raises(ParameterError, match="protocol 'flat' is already registered"):
        register_protocol(ToyFlat, "flat", summary="twice")
    with pytest.raises(ParameterError, match="oracle 'grr' is already registered"):
        FREQUENCY_ORACLES.add(GRR, summary="twice")
    assert LDP_PROTOCOLS.names() == ("hierarchical", "haar", "flat")


def test_protocols_check_every_level_oracle_at_construction():
    from dprange.ldp import HierarchicalHistogram
    from dprange.ldp.range_protocols import Flat, HaarHRR

    for make in (
        lambda: HierarchicalHistogram(64, 4, "olh", epsilon=12.0),
        lambda: Flat(64, "oue", epsilon=800.0),
        lambda: HaarHRR(64, epsilon=710.0),
        lambda: HierarchicalHistogram(64, 4, "oue").with_epsilon(23.0),
    ):
        with pytest.raises(ParameterError, match="supports epsilon"):
            make()
    assert HierarchicalHistogram(64, 4, "olh", epsilon=11.0).epsilon == 11.0


@pytest.mark.parametrize(
    "last, message",
    [
        ([1, [256, 0]], "0..255"),
        ([1, [-1, 0]], "0..255"),
        ([1, [True, 0]], "true/false"),
        ([True, [3, 0]], "bad report"),
    ],
)
def test_protocol_jsonl_refuses_bad_oue_bytes(tmp_path, last, message):
    """The protocol's JSON lines used to accept bytes 256 and -1 (wrapped to 0 and 255) and booleans."""
    from dprange.ldp.protocols import ProtocolReports
    from dprange.ldp.range_protocols import Flat

    text = Flat(10, "oue", epsilon=1.0).randomize(np.arange(10), 1).jsonl_text()
    path = tmp_path / "p.jsonl"
    path.write_text(text + json.dumps(last) + "\n")
    with pytest.raises(ReportError, match=message):
        ProtocolReports.load(path)
    path.write_text(text)
    assert ProtocolReports.load(path).n == 10


@pytest.mark.parametrize("header", [["a", "list"], "ldp-flat", 5, None])
def test_report_headers_that_are_not_objects(header):
    from dprange.cli.ldp import protocol_from_header
    from dprange.ldp.protocols import ProtocolReports
    from dprange.ldp.range_protocols import Flat

    with pytest.raises(ReportError, match="not a JSON object"):
        protocol_from_header(header)
    good = Flat(10, "oue", epsilon=1.0).randomize(np.arange(10), 1)
    with pytest.raises(ReportError, match="not a JSON object"):
        Flat(10, "oue", epsilon=1.0).aggregator().add(ProtocolReports(header, good.parts))


@pytest.mark.parametrize("protocol", ["ldp-haar-hrr", "ldp-hierarchical", "ldp-flat"])
def test_huge_header_domain_is_refused_before_anything_is_built(protocol):
    from dprange.cli.ldp import protocol_from_header
    from dprange.ldp.range_protocols import Flat, HaarHRR, HierarchicalHistogram

    make = {
        "ldp-haar-hrr": lambda: HaarHRR(16, epsilon=1.0),
        "ldp-flat": lambda: Flat(16, "oue", epsilon=1.0),
        "ldp-hierarchical": lambda: HierarchicalHistogram(16, 4, "oue", epsilon=1.0),
    }[protocol]
    header = make().describe()
    header["domain_size"] = 2**60
    with pytest.raises(ReportError, match="more than the"):
        protocol_from_header(header)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("domain_size", "abc", "malformed report header"),
        ("domain_size", -1, "malformed report header"),
        ("domain_size", 10**30, "more than the"),
        ("epsilon", 800.0, "supports epsilon"),
        ("epsilon", "x", "malformed"),
        ("level_probabilities", [2.0], "header"),
        ("oracle", "xyz", "unknown oracle"),
        ("oracle_options", {"g": 1}, "malformed report header"),
    ],
)
def test_corrupt_protocol_headers_are_report_errors(field, value, message):
    from dprange.cli.ldp import protocol_from_header
    from dprange.ldp.range_protocols import Flat

    header = Flat(10, "oue", epsilon=1.0).describe()
    header[field] = value
    with pytest.raises(ReportError, match=message):
        protocol_from_header(header)


def test_level_sampling_uses_integer_coins():
    """Protocol levels from one 62-bit coin: U < floor(2^62 c_1) is level 1, U at it level 2."""
    from dprange.ldp import HierarchicalHistogram

    proto = HierarchicalHistogram(16, 4, "oue", epsilon=1.0, level_probabilities=[0.3, 0.7])
    cut = int(np.floor(0.3 * 2.0**62))
    assert proto.level_thresholds().tolist() == [cut, ONE]
    source = ScriptedSource({ONE: [[0, cut - 1, cut, ONE - 1]]})
    assert proto.sample_levels(4, source).tolist() == [1, 1, 2, 2]


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
