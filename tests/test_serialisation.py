"""Release serialisation: JSON (streaming, atomic), NPZ, load_release; Release argument checks."""

import json
import os

import numpy as np
import pytest

import dprange
from dprange import DataError, DPRangeError, Flat, Hierarchical, ParameterError, Release
from dprange.mechanisms import NonlinearEstimate
from dprange.serialisation import LoadedRelease, load_release


def nonlinear_zero_release(n=8):
    """An NNLS release whose estimate is all zeros (its estimated total is 0)."""
    return Release(np.zeros(n), NonlinearEstimate(np.zeros(n), None, None), mechanism="hierarchical",
                   epsilon=0.01, inference="nnls", noise="discrete_laplace")


@pytest.fixture(scope="module")
def gls_release():
    counts = np.random.default_rng(3).poisson(30, 100)
    return Hierarchical(4).release(counts, 1.0, rng=7, domain=dprange.Domain.interval(0, 50, 100))


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
    from dprange import serialisation

    rel = Flat().release(np.arange(1000), 1.0, rng=1)
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


@pytest.mark.parametrize("suffix", ["json", "npz"])
def test_load_release_round_trip(gls_release, tmp_path, suffix):
    path = tmp_path / f"r.{suffix}"
    getattr(gls_release, f"to_{suffix}")(path)
    loaded = load_release(path)
    assert isinstance(loaded, LoadedRelease) and loaded.domain == gls_release.domain
    assert loaded.epsilon == 1.0 and loaded.mechanism == "hierarchical" and loaded.exact_error_bars
    np.testing.assert_array_equal(loaded.estimate, gls_release.estimate)
    lo, hi = np.array([0, 3, 10]), np.array([99, 40, 10])
    np.testing.assert_allclose(loaded.range(lo, hi).value, gls_release.range(lo, hi).value, rtol=1e-12)
    np.testing.assert_allclose(loaded.prefix(50).value, gls_release.prefix(50).value, rtol=1e-12)
    np.testing.assert_allclose(loaded.histogram().stderr, gls_release.histogram().stderr, rtol=1e-15)
    assert loaded.total().value == pytest.approx(gls_release.total().value, rel=1e-15)
    assert loaded.total().stderr == pytest.approx(gls_release.total().stderr, rel=1e-15)
    assert loaded.range(5, 5).stderr == pytest.approx(gls_release.range(5, 5).stderr, rel=1e-15)
    assert loaded.metadata["deciles"] == json.loads(gls_release.to_json())["deciles"]
    with pytest.raises(ParameterError, match="single bins and of the total"):
        loaded.range(3, 40).stderr
    with pytest.raises(ParameterError):
        loaded.range(True, 3)


def test_load_release_of_a_nonlinear_release(tmp_path):
    rel = nonlinear_zero_release()
    for name in ("z.json", "z.npz"):
        path = tmp_path / name
        (rel.to_json if name.endswith("json") else rel.to_npz)(path)
        loaded = load_release(path)
        assert not loaded.exact_error_bars and loaded.range(0, 7).value == 0.0
        with pytest.raises(ParameterError, match="no standard errors"):
            loaded.histogram().stderr


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


BAD_INDICES = [True, False, "1", None, [[1, 2], [3]], float("nan"), float("inf"), 1.5, 2**70, -1, 100,
               np.array([True]), [1, "a"], {"a": 1}]


@pytest.mark.parametrize("index", BAD_INDICES, ids=range(len(BAD_INDICES)))
def test_bad_bin_indices_raise_parameter_errors(gls_release, index):
    with pytest.raises(ParameterError):
        gls_release.range(index, 5)
    with pytest.raises(ParameterError):
        gls_release.range(0, index)
    with pytest.raises(ParameterError):
        gls_release.prefix(index)
    with pytest.raises(ParameterError):
        gls_release.bootstrap(0, index, reps=2, rng=0)


def test_integral_float_indices_still_work(gls_release):
    assert gls_release.range(0.0, 9.0).value == gls_release.range(0, 9).value
    assert gls_release.prefix(np.array([3, 4])).value.shape == (2,)


@pytest.mark.parametrize("reps", [1, 10**7, "200", None, True, 2.5])
def test_bootstrap_reps_are_checked(gls_release, reps):
    with pytest.raises(ParameterError, match="reps"):
        gls_release.bootstrap(0, 5, reps=reps, rng=0)


BAD_LEVELS = [True, "0.5", None, [[0.1, 0.2], [0.3]], {"a": 1}, [0.5, "a"], 1 + 1j, np.array([True]), float("nan"), 1.5]


@pytest.mark.parametrize("q", BAD_LEVELS, ids=range(len(BAD_LEVELS)))
def test_bad_quantile_levels_raise_parameter_errors(gls_release, q):
    with pytest.raises(ParameterError):
        gls_release.quantile(q)


@pytest.mark.parametrize("alpha", ["0.5", None, [0.1], 1 + 1j, True, 0, 1])
def test_bad_alpha_raises_parameter_errors(gls_release, alpha):
    with pytest.raises(ParameterError, match="alpha"):
        gls_release.range(0, 3).confidence_interval(alpha)
    with pytest.raises(ParameterError, match="alpha"):
        gls_release.quantile(0.5).confidence_interval(alpha)
