"""dprange.answers.describe: saved releases describe themselves (issue 34, item 2).  Every kind
of saved release (1-D linear and non-linear, integer and interval domains, public totals,
data-aware, local DP, k-D grids and constrained grids, and the CLI's files) validates against
the published JSON Schema; a loaded release answers as the original did; files of format 2
still load; the privacy statement says what the numbers say."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import counts_example, run_cli

from conftest import REPO
from dprange import DAWA, Domain, Flat, Hierarchical, Release, Wavelet
from dprange.answers.constrained import constrain
from dprange.answers.describe import SCHEMA_PATH, Labels, privacy_statement, release_schema
from dprange.data_aware.grid import DataAwareGridRelease, HybridTree
from dprange.errors import ParameterError
from dprange.ldp import HierarchicalHistogram
from dprange.ldp.simulate import simulate
from dprange.mechanisms.grid import Kronecker, load_grid_release

jsonschema = pytest.importorskip("jsonschema")  # the test extra (pyproject.toml)


def validate(document: dict) -> None:
    jsonschema.Draft202012Validator(release_schema()).validate(document)


def interval_release():
    counts = np.random.default_rng(3).poisson(20, 40)
    return Hierarchical(4).release(counts, 1.0, rng=4, domain=Domain.interval(0.0, 5.0, 40))


ONE_D = {
    "hierarchical-interval": interval_release,
    "flat-integers-replace": lambda: Flat(neighbours="replace").release(
        counts_example(32), 0.5, rng=1, domain=Domain.integers(10, 41)
    ),
    "wavelet-gaussian": lambda: Wavelet(noise="gaussian").release(counts_example(64), 1.0, delta=1e-6, rng=2),
    "hierarchical-nnls": lambda: Hierarchical(4, inference="nnls").release(counts_example(64), 1.0, rng=3),
    "dawa": lambda: DAWA().release(counts_example(), 1.0, rng=1),
    "ldp": lambda: simulate(HierarchicalHistogram(16, 4, "oue", epsilon=1.0), np.full(16, 40), rng=2).release(),
}


@pytest.mark.parametrize("make", ONE_D.values(), ids=ONE_D.keys())
@pytest.mark.parametrize("cdf", [False, True])
def test_every_kind_of_1d_release_validates_and_loads_answering_as_before(make, cdf):
    release = make().with_labels("income", "USD", "data/incomes.csv")
    saved = json.loads(release.to_json(cdf=cdf))
    validate(saved)
    assert saved["input"] == {"columns": ["income"], "units": ["USD"], "source": "data/incomes.csv"}
    assert ("cdf" in saved) is cdf
    loaded = Release.from_json(json.dumps(saved))
    assert loaded.input_labels == release.input_labels
    lo, hi = np.array([0, 3, 5]), np.array([release.n - 1, 7, 5])
    np.testing.assert_array_equal(loaded.range(lo, hi).value, release.range(lo, hi).value)
    if release.exact_error_bars:
        np.testing.assert_allclose(loaded.range(lo, hi).stderr, release.range(lo, hi).stderr, rtol=1e-12)
        before, after = release.quantile([0.25, 0.5]), loaded.quantile([0.25, 0.5])
        np.testing.assert_array_equal(after.value, before.value)
        np.testing.assert_array_equal(after.confidence_interval(0.05)[0], before.confidence_interval(0.05)[0])


def test_saved_cdf_is_the_release_cdf_with_its_band():
    release = interval_release()
    saved = release.to_dict(cdf=True)["cdf"]
    np.testing.assert_array_equal(saved["at"], release.domain.edges[1:])
    np.testing.assert_array_equal(saved["value"], release.cdf().value)
    lower, upper = release.cdf_band(0.05)
    np.testing.assert_array_equal(saved["lower"], lower)
    np.testing.assert_array_equal(saved["upper"], upper)


def grid_releases():
    counts = np.random.default_rng(7).integers(0, 9, size=(4, 3))
    plain = Kronecker([2, "haar"]).release(counts, 1.0, rng=5)
    return {
        "kronecker": plain,
        "constrained": constrain(plain, {(0,): counts.sum(axis=1)}),
    }


@pytest.mark.parametrize("name", ["kronecker", "constrained"])
def test_grid_releases_validate_and_load_with_their_labels(name):
    release = grid_releases()[name].with_labels(["age", "hours"], ["years", None], "adult.csv")
    saved = json.loads(release.to_json())
    validate(saved)
    loaded = load_grid_release(release.to_json())
    assert loaded.input_labels == release.input_labels
    lows, highs = np.array([[0, 0], [1, 1]]), np.array([[3, 2], [2, 1]])
    np.testing.assert_allclose(loaded.rectangle(lows, highs).value, release.rectangle(lows, highs).value)
    np.testing.assert_allclose(loaded.rectangle(lows, highs).stderr, release.rectangle(lows, highs).stderr)


def test_data_aware_grid_releases_validate_and_load_with_their_labels():
    counts = np.random.default_rng(8).integers(0, 20, size=(16, 16))
    release = HybridTree(kd_levels=2, height=4).release(counts, 1.0, rng=3).with_labels(["a", "b"], None, "p.csv")
    saved = json.loads(release.to_json())
    validate(saved)
    assert saved["privacy_statement"]["public"][-1].startswith("the private choices made from the data")
    loaded = DataAwareGridRelease.from_json(release.to_json())
    assert loaded.input_labels == release.input_labels
    np.testing.assert_array_equal(loaded.counts, release.counts)


def test_cli_releases_validate_name_their_column_units_and_file(tmp_path, capsys, two_columns):
    path, _, _ = two_columns
    one, grid = tmp_path / "one.json", tmp_path / "grid.json"
    base = ["release", path, "-c", "age", "--lo", 18, "--hi", 59, "--integers", "-e", 1, "--seed", 1]
    code, _, err = run_cli([*base, "--units", "years", "--workload", "prefix", "-o", one], capsys)
    assert code == 0, err
    code, _, err = run_cli([*base, "-c", "hours", "--lo", 0, "--hi", 49, "-o", grid], capsys)
    assert code == 0, err
    for out in (one, grid):
        saved = json.loads(out.read_text())
        validate(saved)
        assert saved["input"]["source"] == str(path)
    assert json.loads(one.read_text())["input"]["units"] == ["years"]
    assert json.loads(one.read_text())["cdf"]["alpha"] == 0.05
    assert json.loads(grid.read_text())["input"]["columns"] == ["age", "hours"]


def test_a_unit_per_column_is_checked_before_the_data_are_read(tmp_path, capsys, two_columns):
    path, _, _ = two_columns
    args = ["release", path, "-c", "age", "--lo", 18, "--hi", 59, "--integers", "-e", 1, "--units", "a", "--units", "b"]
    code, _, err = run_cli([*args, "-o", tmp_path / "x.json"], capsys)
    assert code == 2 and "one unit per column" in err


def test_the_schema_refuses_what_a_release_must_say():
    """The schema is not vacuous: a file without its privacy statement, of an older format,
    or with a wrong relation fails."""
    saved = interval_release().to_dict()
    validate(saved)
    for broken in (
        {k: v for k, v in saved.items() if k != "privacy_statement"},
        {**saved, "dprange_release": 2},
        {**saved, "privacy_statement": {**saved["privacy_statement"], "relation": "swap"}},
        {**saved, "input": {"columns": "age", "units": None, "source": None}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate(broken)


def test_format_2_files_still_load_and_answer_as_before():
    release = interval_release()
    saved = release.to_dict()
    old = {k: v for k, v in saved.items() if k not in ("schema", "software", "input", "privacy_statement")}
    old["dprange_release"] = 2
    loaded = Release.from_dict(old)
    assert loaded.input_labels == Labels()
    np.testing.assert_array_equal(loaded.histogram().value, release.histogram().value)
    np.testing.assert_allclose(loaded.histogram().stderr, release.histogram().stderr, rtol=1e-12)


def test_privacy_statement_says_what_the_numbers_say():
    replace = privacy_statement(epsilon=0.5, delta=1e-6, neighbours="replace", total_public=True, seeded=False)
    assert replace["statement"].startswith("(0.5, 1e-06)-differential privacy (central model) for one record")
    assert "same number of records" in replace["statement"] and "except with probability 1e-06" in replace["statement"]
    assert any("number of records" in p for p in replace["public"])
    added = privacy_statement(epsilon=1.0, delta=0.0, neighbours="add_remove", total_public=False, seeded=True)
    assert added["statement"].startswith("1-differential privacy") and "not for publication" in added["statement"]
    assert not any("number of records" in p for p in added["public"])
    ldp = ONE_D["ldp"]().to_dict()["privacy_statement"]
    assert ldp["model"] == "local" and ldp["unit"].startswith("one user")


def test_labels_refuse_a_unit_count_that_differs_from_the_columns():
    with pytest.raises(ParameterError, match="one unit per column"):
        Labels.of(["a", "b"], ["x"])
    assert Labels.of("income", "USD").axis_label() == "income (USD)"
    assert Labels().axis_label() == "value"


def test_the_published_schema_in_docs_is_the_packaged_one():
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        packaged = json.load(fh)
    assert json.loads((REPO / "docs" / "release.schema.json").read_text()) == packaged
    jsonschema.Draft202012Validator.check_schema(packaged)
