"""dprange.answers.writers: a release's dictionary, JSON text and files (atomic, chunked standard
errors, umask for published files while ledgers and caches stay private), nonlinear releases,
deciles and per-node variances as written."""

import contextlib
import json
import os

import numpy as np
import pytest
from _helpers import mode, nonlinear_zero_release, same

import dprange
from dprange import Domain, DPRangeError, Hierarchical, ParameterError, Wavelet
from dprange.cli import main
from dprange.inference.tree import TreeErrorModel, tree_error_model
from dprange.optimize import cache as optimized
from dprange.strategies.trees import TreeStrategy


@contextlib.contextmanager
def umask(mask: int):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    values = np.random.default_rng(0).integers(0, 16, 200)
    path.write_text("x\n" + "".join(f"{v}\n" for v in values))
    return path


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("mask", "published"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_releases_follow_the_umask_and_ledgers_and_caches_stay_private(csv_file, tmp_path, capsys, mask, published):
    output, ledger = tmp_path / "out" / "release.json", tmp_path / "ledger.json"
    command = ["release", str(csv_file), "-c", "x", "--lo", "0", "--hi", "15", "--integers", "-e", "1"]
    command += ["-m", "optimized", "-o", str(output), "--session", str(ledger), "--session-epsilon", "5"]
    with umask(mask):
        with pytest.raises(SystemExit) as exc:
            main(command)
        assert exc.value.code == 0, capsys.readouterr().err
        release = dprange.load_release(output)
        saved = [release.to_json(tmp_path / "api.json"), release.to_npz(tmp_path / "api.npz")]
    assert mode(output) == published  # the command's release (0600 before issue 30)
    assert all(mode(path) == published for path in saved)  # the library's
    assert mode(ledger) == 0o600
    cached = optimized.cache_files()
    assert cached and all(mode(path) == 0o600 for path in cached)  # 0644 under umask 022 before
    assert mode(optimized.cache_dir()) == 0o700


def test_saved_release_standard_errors_equal_per_query():
    counts = np.random.default_rng(5).poisson(20, 700)
    rel = Hierarchical(16).release(counts, 1.0, rng=6)
    idx = np.arange(rel.n)
    expected = np.sqrt(rel.error_model.range_variance(idx, idx))
    np.testing.assert_allclose(rel.to_dict()["histogram"]["stderr"], expected, rtol=1e-12)
    np.testing.assert_allclose(rel.histogram().stderr, expected, rtol=1e-12)


def test_json_deciles_are_simultaneous_and_say_so():
    dom = Domain.interval(0, 100, 40)
    values = np.random.default_rng(14).uniform(0, 100, 600)
    rel = Hierarchical(4).release(dom.histogram(values), 0.5, rng=15, domain=dom)
    deciles = rel.to_dict()["deciles"]
    lower, upper = rel.quantile(np.linspace(0.1, 0.9, 9)).confidence_interval(0.05, simultaneous=True)
    assert deciles["simultaneous"] is True and deciles["interpolated"] is True
    np.testing.assert_array_equal(deciles["lower"], lower)
    np.testing.assert_array_equal(deciles["upper"], upper)


def test_to_dict_records_privacy_and_is_json():
    rel = Hierarchical(4, "geometric", neighbours="replace").release(
        np.arange(30) % 5, 0.5, rng=2, domain=Domain.interval(0, 3, 30)
    )
    data = json.loads(rel.to_json())
    assert data["mechanism"] == "hierarchical"
    assert data["privacy"] == {
        "epsilon": 0.5,
        "delta": 0.0,
        "neighbours": "replace",
        "noise": "discrete_laplace",
        "seeded": True,
    }
    assert data["parameters"]["branching"] == 4 and data["parameters"]["budget"] == "geometric"
    assert data["domain"] == {"kind": "interval", "lo": 0.0, "hi": 3.0, "bins": 30}
    assert data["total"]["public"] is True and data["total"]["value"] == float((np.arange(30) % 5).sum())
    assert len(data["histogram"]["value"]) == 30 and len(data["deciles"]["value"]) == 9


def test_all_zero_nonlinear_release_serialises():
    rel = nonlinear_zero_release()
    data = json.loads(rel.to_json())
    assert data["deciles"] is None
    assert data["histogram"]["value"] == [0.0] * 8 and data["histogram"]["stderr"] is None
    assert data["total"] == {"value": 0.0, "stderr": None, "public": False}


def test_nonlinear_quantile_intervals_are_null_with_a_note():
    counts = np.random.default_rng(0).poisson(50, 64)
    rel = Hierarchical(4, inference="nnls").release(counts, 1.0, rng=2)
    deciles = json.loads(rel.to_json())["deciles"]
    assert deciles["lower"] is None and deciles["upper"] is None
    assert "no closed-form quantile intervals" in deciles["intervals"]
    assert len(deciles["value"]) == 9 and all(np.isfinite(deciles["value"]))


def test_json_text_and_file_match_to_dict(gls_release, tmp_path):
    expected = gls_release.to_dict()
    assert json.loads(gls_release.to_json()) == expected
    path = tmp_path / "r.json"
    assert gls_release.to_json(path) == str(path)
    assert json.loads(path.read_text()) == expected
    np.testing.assert_array_equal(expected["histogram"]["value"], gls_release.estimate)
    np.testing.assert_allclose(expected["histogram"]["stderr"], gls_release.histogram().stderr, rtol=1e-15)
    assert len(path.read_text().splitlines()) < 100  # arrays on one line each, not one line per number


def test_standard_errors_are_computed_in_chunks(monkeypatch):
    # A model without the one-pass variances (tests/inference/test_tree.py, tests/inference/test_wavelet.py).
    from dprange.answers import writers as serialisation
    from dprange.inference.wavelet import HaarEstimate

    monkeypatch.delattr(HaarEstimate, "prefix_variances")
    rel = Wavelet().release(np.arange(1000), 1.0, rng=1)
    sizes = []
    model = rel.error_model
    original = model.range_variance

    def counting(lo, hi):
        sizes.append(np.size(lo))
        return original(lo, hi)

    monkeypatch.setattr(model, "range_variance", counting)
    monkeypatch.setattr(serialisation, "STDERR_CHUNK", 128)
    monkeypatch.setattr(serialisation, "CHUNK", 100)
    text = rel.to_json()
    histogram_calls = [s for s in sizes if 1 < s <= 128]  # the deciles (Release.cdf) ask for all n at once
    assert histogram_calls == [128] * 7 + [104]
    monkeypatch.setattr(model, "range_variance", original)
    np.testing.assert_allclose(json.loads(text)["histogram"]["stderr"], rel.histogram().stderr, rtol=1e-15)


def test_writes_are_atomic(gls_release, tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text("previous release")
    model = gls_release.error_model

    def fail(lo, hi):
        raise RuntimeError("disk full while computing")

    monkeypatch.setattr(model, "range_variance", fail)
    with pytest.raises(RuntimeError):
        gls_release.to_json(path)
    assert path.read_text() == "previous release"
    assert sorted(os.listdir(tmp_path)) == ["r.json"]  # no temporary file left behind
    with pytest.raises(RuntimeError):
        gls_release.to_npz(tmp_path / "r.npz")
    assert sorted(os.listdir(tmp_path)) == ["r.json"]


def test_bad_output_paths_are_dprange_errors(gls_release, tmp_path):
    for bad in ("", str(tmp_path), str(tmp_path / "missing" / "r.json"), 3):
        with pytest.raises(DPRangeError):
            gls_release.to_json(bad)
        with pytest.raises(DPRangeError):
            gls_release.to_npz(bad)
    for alpha in (0, 1, -0.1, "0.05", None, True, float("nan")):
        with pytest.raises(ParameterError, match="alpha"):
            gls_release.to_json(alpha=alpha)
        with pytest.raises(ParameterError, match="alpha"):
            gls_release.to_npz(tmp_path / "r.npz", alpha=alpha)
    assert os.listdir(tmp_path) == []


def test_per_node_tree_variances_are_saved_as_lists():
    tree = TreeStrategy(10, (2, 5), measure_root=True)
    variances = [3.0, np.array([1.0, 2.0]), np.linspace(1.0, 2.0, 10)]
    model = tree_error_model(tree, variances)
    data = model.to_dict()
    assert data["level_variances"] == [3.0, [1.0, 2.0], np.linspace(1.0, 2.0, 10).tolist()]
    lo, hi = np.triu_indices(10)
    same(TreeErrorModel.from_dict(data).range_variance(lo, hi), model.range_variance(lo, hi))
