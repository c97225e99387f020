"""dprange.answers.codec: saved releases load back and answer identically (JSON and NPZ, central,
local and nonlinear, every error model rebuilt from its dictionary, format 1 files); corrupt,
truncated, future or oversized files give one-line data errors before anything large is
decoded."""

import json
import os
import zipfile

import numpy as np
import pytest
from _helpers import nonlinear_zero_release, peak_bytes_raising, same

from dprange import DataError, Domain, Flat, Hierarchical, ParameterError, Release, Wavelet, workloads
from dprange.answers.provenance import Provenance
from dprange.answers.release import load_release
from dprange.answers.writers import FORMAT_VERSION, jsonable
from dprange.inference.dense import DenseErrorModel
from dprange.inference.tree import TreeErrorModel
from dprange.inference.wavelet import HaarEstimate
from dprange.ldp import Flat as LocalFlat
from dprange.ldp import HaarHRR, HierarchicalHistogram
from dprange.mechanisms.matrix import Matrix


@pytest.mark.parametrize("suffix", ["json", "npz"])
def test_load_release_round_trip(gls_release, tmp_path, suffix):
    path = tmp_path / f"r.{suffix}"
    getattr(gls_release, f"to_{suffix}")(path)
    loaded = load_release(path)
    assert type(loaded) is Release and loaded.domain == gls_release.domain
    assert loaded.epsilon == 1.0 and loaded.mechanism == "hierarchical" and loaded.exact_error_bars
    np.testing.assert_array_equal(loaded.estimate, gls_release.estimate)
    lo, hi = np.array([0, 3, 10]), np.array([99, 40, 10])
    np.testing.assert_allclose(loaded.range(lo, hi).value, gls_release.range(lo, hi).value, rtol=1e-12)
    np.testing.assert_allclose(loaded.prefix(50).value, gls_release.prefix(50).value, rtol=1e-12)
    np.testing.assert_allclose(loaded.histogram().stderr, gls_release.histogram().stderr, rtol=1e-15)
    assert loaded.total().value == pytest.approx(gls_release.total().value, rel=1e-15)
    assert loaded.total().stderr == pytest.approx(gls_release.total().stderr, rel=1e-15)
    assert loaded.range(5, 5).stderr == pytest.approx(gls_release.range(5, 5).stderr, rel=1e-15)
    assert loaded.to_dict() == gls_release.to_dict()
    assert loaded.range(3, 40).stderr == gls_release.range(3, 40).stderr  # several bins: the saved model
    with pytest.raises(ParameterError):
        loaded.range(True, 3)


def test_load_release_of_a_nonlinear_release(tmp_path):
    rel = nonlinear_zero_release()
    for name in ("z.json", "z.npz"):
        path = tmp_path / name
        (rel.to_json if name.endswith("json") else rel.to_npz)(path)
        loaded = load_release(path)
        assert not loaded.exact_error_bars and loaded.range(0, 7).value == 0.0
        assert np.all(np.isnan(loaded.histogram().stderr))  # as the original: no closed form
        with pytest.raises(ParameterError, match="no closed-form intervals"):
            loaded.cdf_band()


def test_load_release_refuses_what_is_not_a_release(gls_release, tmp_path):
    cases = {
        "text.json": b"not json at all",
        "other.json": b'{"a": 1}',
        "nohist.json": b'{"dprange_release": 1}',
        "binary.json": bytes(range(256)),
        "other.npz": None,
        "short.json": None,
    }
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    data = gls_release.to_dict()
    data["histogram"]["value"] = data["histogram"]["value"][:-1]
    cases["short.json"] = json.dumps(data).encode()
    for name, content in cases.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
        with pytest.raises(DataError) as info:
            load_release(tmp_path / name)
        assert "\n" not in str(info.value) and str(info.value).isprintable()
    with pytest.raises(DataError, match="does not exist"):
        load_release(tmp_path / "absent.json")
    with pytest.raises(ParameterError):
        load_release(None)


LEVELS = np.linspace(0.1, 0.9, 9)


def sparse_difference_strategy(n):
    import scipy.sparse as sp

    return sp.vstack([sp.eye(n), sp.diags([np.ones(n - 1), -np.ones(n - 1)], [0, 1], shape=(n - 1, n))]).tocsc()


ROUND_TRIP_CASES = {
    "flat": (lambda: Flat(), 100, {}, None),
    "flat-replace": (lambda: Flat(neighbours="replace"), 60, {}, "interval"),
    "h2": (lambda: Hierarchical(2), 100, {}, None),
    "h4-root": (lambda: Hierarchical(4, measure_root=True), 100, {}, "interval"),
    "h357-replace": (lambda: Hierarchical([3, 5, 7], neighbours="replace"), 90, {}, "interval"),
    "h8-geometric": (lambda: Hierarchical(8, budget="geometric"), 300, {}, None),
    "h4-budget-list": (lambda: Hierarchical(4, budget=[0.05, 0.1, 0.15, 0.2]), 100, {}, "interval"),
    "h16-gaussian": (lambda: Hierarchical(16, noise="gaussian"), 200, {"delta": 1e-6}, "interval"),
    "h4-laplace": (lambda: Hierarchical(4, noise="laplace_float", measure_root=True), 50, {}, None),
    "h3-replace-root": (lambda: Hierarchical(3, measure_root=True, neighbours="replace"), 50, {}, None),
    "wavelet": (lambda: Wavelet(), 100, {}, "interval"),
    "wavelet-replace": (lambda: Wavelet(neighbours="replace"), 37, {}, None),
    "wavelet-gaussian": (lambda: Wavelet(noise="gaussian"), 77, {"delta": 1e-6}, "interval"),
    "wavelet-laplace": (lambda: Wavelet(noise="laplace_float"), 5, {}, "interval"),
    "matrix": (lambda: Matrix(np.tril(np.ones((24, 24)))), 24, {}, "interval"),
    "matrix-real-replace": (
        lambda: Matrix(np.vstack([np.eye(20), np.full((1, 20), 0.3)]), neighbours="replace"),
        20,
        {},
        None,
    ),
    "matrix-sparse-gaussian": (
        lambda: Matrix(sparse_difference_strategy(30), noise="gaussian"),
        30,
        {"delta": 1e-5},
        "interval",
    ),
}


def make_release(case):
    mechanism, n, kwargs, domain = ROUND_TRIP_CASES[case]
    counts = np.random.default_rng(len(case)).poisson(30, n)
    dom = Domain.interval(-5.0, 20.0, n) if domain == "interval" else None
    return mechanism().release(counts, 0.5, rng=11, domain=dom, **kwargs)


def assert_same_answers(original, loaded):
    assert type(loaded) is Release
    same(loaded.estimate, original.estimate)
    assert loaded.parameters == jsonable(original.parameters)  # JSON keys are strings
    assert loaded.provenance == Provenance.from_dict(jsonable(original.provenance.to_dict()))
    for attr in (
        "mechanism",
        "epsilon",
        "delta",
        "neighbours",
        "public_total",
        "inference",
        "noise",
        "seeded",
        "noise_scales",
        "inference_options",
        "domain",
    ):
        assert getattr(loaded, attr) == getattr(original, attr), attr
    n = original.n
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, n, 1000), rng.integers(0, n, 1000)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    pairs = [
        (original.range(lo, hi), loaded.range(lo, hi)),
        (original.prefix(np.arange(n)), loaded.prefix(np.arange(n))),
        (original.histogram(), loaded.histogram()),
        (original.total(), loaded.total()),
        (original.range(3, n - 2), loaded.range(3, n - 2)),
        (original.cdf(), loaded.cdf()),
    ]
    for mine, theirs in pairs:
        same(theirs.value, mine.value)
        same(theirs.stderr, mine.stderr)
        same(theirs.confidence_interval(0.05), mine.confidence_interval(0.05))
    same(loaded.cdf(consistent=True).value, original.cdf(consistent=True).value)
    same(loaded.cdf_band(0.05), original.cdf_band(0.05))
    edges = original.domain.edges if original.domain.kind == "interval" else np.arange(n) + original.domain.lo
    points = np.linspace(edges[0] - 1, edges[-1] + 1, 41)
    mine, theirs = original.cdf_at(points), loaded.cdf_at(points)
    same(theirs.value, mine.value)
    same(theirs.confidence_interval(0.05), mine.confidence_interval(0.05))
    same(theirs.confidence_interval(0.05, simultaneous=True), mine.confidence_interval(0.05, simultaneous=True))
    for consistent in (True, False):
        mine, theirs = original.quantile(LEVELS, consistent=consistent), loaded.quantile(LEVELS, consistent=consistent)
        same(theirs.value, mine.value)
        same(theirs.bins, mine.bins)
        same(theirs.confidence_interval(0.05), mine.confidence_interval(0.05))
        same(theirs.confidence_interval(0.05, simultaneous=True), mine.confidence_interval(0.05, simultaneous=True))
    same(loaded.quantile_bins(LEVELS, 0.05), original.quantile_bins(LEVELS, 0.05))
    explicit = workloads.Explicit(np.random.default_rng(6).normal(size=(4, n)))
    for workload in (workloads.RandomRanges(n, 50, seed=1), explicit):
        mine, theirs = original.answer(workload), loaded.answer(workload)
        same(theirs.value, mine.value)
        same(theirs.stderr, mine.stderr)
    with pytest.raises(ParameterError, match="loaded from a file"):
        loaded.bootstrap(0, 3, reps=2, rng=0)


@pytest.mark.parametrize("case", list(ROUND_TRIP_CASES))
def test_json_and_npz_round_trips_answer_identically(case, tmp_path):
    original = make_release(case)
    text = original.to_json()
    assert json.loads(text)["error_model"] is not None
    assert_same_answers(original, Release.from_json(text))
    assert_same_answers(original, Release.from_dict(original.to_dict()))
    assert_same_answers(original, load_release(original.to_json(tmp_path / "r.json")))
    assert_same_answers(original, Release.from_json(tmp_path / "r.json"))
    assert_same_answers(original, load_release(original.to_npz(tmp_path / "r.npz")))
    assert Release.from_json(text).to_json() == text  # saving a loaded release gives the same file
    same(Release.from_json(text.encode()).range(0, original.n - 1).stderr, original.range(0, original.n - 1).stderr)


@pytest.mark.parametrize(
    "protocol",
    [
        HaarHRR(16, epsilon=1.0, level_probabilities=[0.1, 0.2, 0.3, 0.4]),
        HaarHRR(23, epsilon=2.0),
        HierarchicalHistogram(20, 3, "grr", epsilon=0.7, level_probabilities=[0.6, 0.3, 0.1]),
        HierarchicalHistogram(50, 4, "oue", epsilon=1.0),
        HierarchicalHistogram(30, [2, 3, 5], "olh", epsilon=1.5),
        HierarchicalHistogram(40, 4, "hrr", epsilon=1.0),
        LocalFlat(20, epsilon=1.0),
        LocalFlat(12, "grr", epsilon=2.0),
    ],
    ids=["haar-hrr", "haar-hrr-23", "hh-grr", "hh-oue", "hh-olh-mixed", "hh-hrr", "flat-oue", "flat-grr"],
)
def test_local_releases_round_trip_with_per_node_variances(protocol, tmp_path):
    rng = np.random.default_rng(3)
    original = protocol.aggregator().add(protocol.randomize(rng.integers(0, protocol.domain_size, 3000), rng)).release()
    assert_same_answers(original, Release.from_json(original.to_json()))
    assert_same_answers(original, load_release(original.to_npz(tmp_path / "r.npz")))


def test_saved_error_model_is_compact():
    """A 2^16-bin tree release keeps its model in a few numbers, not one per node."""
    rel = Hierarchical(16).release(np.ones(1 << 16, dtype=np.int64), 1.0, rng=1)
    model = rel.to_dict()["error_model"]
    assert model == {
        "kind": "tree",
        "n": 1 << 16,
        "branching": [16] * 4,
        "measure_root": False,
        "known_total": False,
        "level_variances": [None] + [rel.error_model.level_variances[d] for d in range(1, 5)],
    }
    assert len(json.dumps(model)) < 300
    haar = Wavelet().release(np.ones(1000, dtype=np.int64), 1.0, rng=1).to_dict()["error_model"]
    assert haar["kind"] == "haar" and len(haar["level_variances"]) == 11 and len(json.dumps(haar)) < 400


@pytest.mark.parametrize(
    "mechanism, n",
    [
        (Flat(), 40),
        (Hierarchical([2, 3, 4], measure_root=True), 20),
        (Hierarchical(5, neighbours="replace"), 33),
        (Wavelet(), 21),
        (Wavelet(neighbours="replace"), 16),
        (Matrix(np.triu(np.ones((12, 12)))), 12),
    ],
)
def test_error_models_rebuild_from_their_dictionaries(mechanism, n):
    model = mechanism.error_model(n, 0.7)
    data = json.loads(json.dumps(model.to_dict()))
    rebuilt = {"tree": TreeErrorModel, "haar": HaarEstimate, "dense_matrix": DenseErrorModel}[data["kind"]].from_dict(
        data
    )
    lo, hi = np.triu_indices(n)
    same(rebuilt.range_variance(lo, hi), model.range_variance(lo, hi))
    assert rebuilt.to_dict() == model.to_dict()


def test_a_model_that_cannot_be_saved_says_so(tmp_path):
    """Least squares through an operator (no closed form here): values round-trip, standard
    errors are exact in the file but a loaded copy refuses them with the reason."""
    from dprange.inference.least_squares import gls

    A = np.vstack([np.eye(6), np.ones((1, 6))])
    estimate = gls(A, np.arange(7.0), np.ones(7))
    rel = Release(estimate.leaves, estimate, Provenance("custom", epsilon=1.0))
    data = rel.to_dict()
    assert data["error_model"] is None and "cannot be saved" in data["error_bars"]
    loaded = Release.from_dict(data)
    same(loaded.range(1, 4).value, rel.range(1, 4).value)
    with pytest.raises(ParameterError, match="cannot be saved"):
        _ = loaded.range(1, 4).stderr


def test_format_1_files_still_load(gls_release):
    data = gls_release.to_dict()
    data["dprange_release"] = 1
    del data["error_model"], data["noise_scales"]
    loaded = Release.from_dict(data)
    same(loaded.histogram().stderr, gls_release.histogram().stderr)
    assert loaded.total().stderr == gls_release.total().stderr
    with pytest.raises(ParameterError, match="format 1"):
        _ = loaded.range(3, 40).stderr


def corrupt(data, change):
    data = json.loads(json.dumps(data))
    change(data)
    return data


CORRUPTIONS = {
    "future version": (lambda d: d.update(dprange_release=FORMAT_VERSION + 1), "newer"),
    "text version": (lambda d: d.update(dprange_release="2"), "version"),
    "no version": (lambda d: d.pop("dprange_release"), "not a dprange release"),
    "unknown model": (lambda d: d["error_model"].update(kind="magic"), "error model"),
    "model lacks field": (lambda d: d["error_model"].pop("branching"), "lacks the field"),
    "model of other size": (lambda d: d["error_model"].update(n=99), "over 99 bins"),
    "huge model": (lambda d: d["error_model"].update(n=10**15), "over 1000000000000000 bins"),
    "huge branching": (lambda d: d["error_model"].update(branching=[10**12]), "never that wide"),
    "short variances": (lambda d: d["error_model"]["level_variances"].pop(), "error model"),
    "text variance": (lambda d: d["error_model"]["level_variances"].__setitem__(1, "x"), "error model"),
    "bad branching": (lambda d: d["error_model"].update(branching=[1, 200]), "error model"),
    "model not a dict": (lambda d: d.update(error_model=[1, 2]), "error model"),
    "changed variance": (lambda d: d["error_model"]["level_variances"].__setitem__(2, 1.0), "disagree"),
    "changed stderr": (lambda d: d["histogram"]["stderr"].__setitem__(0, 1.0), "disagree"),
    "bad neighbours": (lambda d: d["privacy"].update(neighbours="swap"), "neighbours"),
    "bad epsilon": (lambda d: d["privacy"].update(epsilon="1"), "epsilon"),
    "no privacy": (lambda d: d.pop("privacy"), "privacy"),
    "bad scales": (lambda d: d.update(noise_scales=["a"]), "noise scales"),
    "no total": (lambda d: d.pop("total"), "total"),
    "bad domain": (lambda d: d["domain"].update(bins=7), "domain"),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corrupt_or_future_files_give_one_line_data_errors(gls_release, tmp_path, name):
    change, message = CORRUPTIONS[name]
    data = corrupt(gls_release.to_dict(), change)
    (tmp_path / "r.json").write_text(json.dumps(data))
    meta = {k: v for k, v in data.items() if k != "histogram"}
    np.savez(
        tmp_path / "r.npz",
        __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
        estimate=np.asarray(data["histogram"]["value"], dtype=float),
        stderr=np.asarray(data["histogram"]["stderr"], dtype=float),
    )
    for load in (
        lambda: Release.from_dict(data),
        lambda: Release.from_json(json.dumps(data)),
        lambda: load_release(tmp_path / "r.json"),
        lambda: load_release(tmp_path / "r.npz"),
    ):
        with pytest.raises(DataError, match=message) as info:
            load()
        assert "\n" not in str(info.value) and str(info.value).isprintable() and len(str(info.value)) < 200


def test_corrupt_matrix_models_give_data_errors():
    data = make_release("matrix").to_dict()
    for change, message in [
        (lambda m: m.update(shape=[10**9, 24]), "rows"),
        (lambda m: m.update(shape=[24]), "bins"),
        (lambda m: m["value"].__setitem__(0, 0.5), "integer"),
        (lambda m: m.update(variance=-1.0), "variance"),
        (lambda m: m.update(row="x"), "corrupt"),
    ]:
        with pytest.raises(DataError, match=message) as info:
            Release.from_dict(corrupt(data, lambda d, change=change: change(d["error_model"])))
        assert "\n" not in str(info.value)


def test_truncated_files_give_data_errors(gls_release, tmp_path):
    with pytest.raises(ParameterError, match="path"):
        Release.from_json(12)
    with pytest.raises(DataError, match="UTF-8"):
        Release.from_json(b"{\xff}")
    text = gls_release.to_json()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(DataError, match="not valid JSON"):
        load_release(tmp_path / "cut.json")
    with pytest.raises(DataError, match="not valid JSON"):
        Release.from_json(text[:-3])
    blob = open(gls_release.to_npz(tmp_path / "r.npz"), "rb").read()
    (tmp_path / "cut.npz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataError):
        load_release(tmp_path / "cut.npz")


# ----------------------------------------------------------------------------- bounded loads (issue 30 item 5)


def crafted_npz(path, release, items: int, compress: int, header_items: int | None = None) -> str:
    """``release``'s .npz with its estimate replaced by ``items`` zeros (float64, written a MiB
    at a time), the .npy header declaring ``header_items`` (default ``items``)."""
    with zipfile.ZipFile(release.to_npz(str(path) + ".source.npz")) as source:
        meta = source.read("__meta__.npy")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("__meta__.npy", meta)
        info = zipfile.ZipInfo("estimate.npy")
        info.compress_type = compress
        with archive.open(info, "w", force_zip64=True) as member:
            shape = (items if header_items is None else header_items,)
            np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": shape})
            for start in range(0, items * 8, 1 << 20):
                member.write(bytes(min(1 << 20, items * 8 - start)))
    return str(path)


@pytest.mark.parametrize("case", ["inflates past the cap", "more than the domain", "header beyond the data"])
def test_npz_members_are_checked_before_they_are_decoded(gls_release, tmp_path, monkeypatch, case):
    """A crafted .npz whose estimate would decode to far more than the release's 100 bins is
    refused before decoding: a compressed member declaring more than the cap (1 MiB here,
    64 MiB by default; 4 MiB of zeros in 4 kB), one under the cap but not of the domain's size,
    a stored one whose header declares 10^12 numbers (numpy allocated 8 TB: MemoryError).
    Before issue 30 the first two decoded 4 MiB and the last ended in MemoryError."""
    from dprange.answers import codec as serialisation

    monkeypatch.setattr(serialisation, "INFLATED_MEMBER_MAX_BYTES", 1 << 20)
    path = tmp_path / "crafted.npz"
    if case == "inflates past the cap":
        crafted_npz(path, gls_release, 1 << 19, zipfile.ZIP_DEFLATED)
        message = "would decode to 4194432 bytes"
    elif case == "more than the domain":
        monkeypatch.setattr(serialisation, "INFLATED_MEMBER_MAX_BYTES", 64 << 20)
        crafted_npz(path, gls_release, 1 << 19, zipfile.ZIP_DEFLATED)
        message = "not the saved domain's 100 numbers"
    else:
        crafted_npz(path, gls_release, 100, zipfile.ZIP_STORED, header_items=10**12)
        message = "declares <f8 \\(1000000000000,\\)"
    assert os.path.getsize(path) < 10_000
    with pytest.raises(DataError, match=message) as info:
        load_release(path)
    assert "\n" not in str(info.value) and str(info.value).isprintable()
    assert peak_bytes_raising(DataError, lambda: load_release(path)) < 1 << 19  # the member never decoded


@pytest.mark.parametrize("key", ["value", "stderr"])
def test_json_histogram_arrays_are_counted_against_the_domain_before_they_are_parsed(gls_release, key):
    """A JSON release whose histogram array holds 10^6 numbers for a domain of 100 bins is
    refused before the array is parsed (it took 32 MB of Python floats; the text is 4 MB),
    wherever the histogram stands in the file."""
    data = gls_release.to_dict()
    histogram = data.pop("histogram")
    histogram[key] = "ARRAY"
    text = json.dumps({"histogram": histogram, **data}).replace('"ARRAY"', "[" + ",".join(["0.5"] * 10**6) + "]")
    message = f"the saved domain has 100 bins but the histogram's {key} has 1000000 numbers"
    with pytest.raises(DataError, match=message) as info:
        Release.from_json(text)
    assert "\n" not in str(info.value)
    assert peak_bytes_raising(DataError, lambda: Release.from_json(text)) < 1 << 20
    histogram[key] = gls_release.to_dict()["histogram"][key]  # the histogram first, of the right size: read
    reordered = Release.from_json(json.dumps({"histogram": histogram, **data}))
    np.testing.assert_array_equal(reordered.estimate, gls_release.estimate)


@pytest.mark.parametrize(
    "mechanism",
    [
        Hierarchical(4, inference="nnls"),
        Flat(inference="l1", inference_options={"alpha": 0.5}),
        Wavelet(inference="nnls", neighbours="replace"),
    ],
    ids=["h4-nnls", "flat-l1", "wavelet-nnls-replace"],
)
def test_nonlinear_releases_round_trip_their_values(mechanism):
    """NNLS / L1 releases have no closed-form errors: a loaded copy answers 1,000 ranges, the
    CDF and the nine quantiles with the same values, and NaN standard errors as the original."""
    counts = np.random.default_rng(8).poisson(4, 45)
    original = mechanism.release(counts, 0.5, rng=3, domain=Domain.interval(0.0, 9.0, 45))
    loaded = Release.from_json(original.to_json())
    assert loaded.provenance == Provenance.from_dict(jsonable(original.provenance.to_dict()))
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 45, 1000), rng.integers(0, 45, 1000)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    for mine, theirs in [(original.range(lo, hi), loaded.range(lo, hi)), (original.cdf(), loaded.cdf())]:
        same(theirs.value, mine.value)
        assert np.all(np.isnan(mine.stderr)) and np.all(np.isnan(theirs.stderr))
    for consistent in (True, False):
        mine, theirs = original.quantile(LEVELS, consistent=consistent), loaded.quantile(LEVELS, consistent=consistent)
        same(theirs.value, mine.value)
        same(theirs.bins, mine.bins)
        with pytest.raises(ParameterError, match="no closed-form intervals"):
            theirs.confidence_interval(0.05)


def test_a_hand_built_release_with_inference_options_loads():
    """Inference options that the mechanism's parameters do not list are kept by the record
    (they are not a disagreement with the legacy fields)."""
    rel = Release(
        np.ones(4), None, Provenance("custom", epsilon=1.0, inference="nnls", inference_options={"tol": 1e-6})
    )
    loaded = Release.from_json(rel.to_json())
    assert loaded.inference_options == {"tol": 1e-6} and loaded.provenance == rel.provenance
