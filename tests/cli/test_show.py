"""dprange.cli.show: ``dprange show`` summarises a saved release and ``dprange query`` answers
range counts, quantiles and CDF values from it, with intervals, in value units (issue 34,
item 3), on saved 1-D and k-D releases; the answers are the loaded release's own."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from _helpers import run_cli

from dprange import load_grid_release, load_release
from dprange.data_aware.grid import DataAwareGridRelease


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A 1-D release (interval bins, units) and a 2-D one of the same small file."""
    folder = tmp_path_factory.mktemp("show")
    rng = np.random.default_rng(4)
    path = folder / "people.csv"
    age, hours = rng.integers(18, 80, 3000), rng.integers(0, 60, 3000)
    path.write_text("age,hours\n" + "".join(f"{a},{h}\n" for a, h in zip(age, hours)))
    one, grid = folder / "age.json", folder / "grid.json"
    base = ["release", path, "-c", "age", "--lo", 0, "--hi", 100, "--bins", 50, "-e", 1, "--seed", 3]
    return path, one, grid, base


def release_files(saved, capsys):
    path, one, grid, base = saved
    if not one.exists():
        code, _, err = run_cli([*base, "--units", "years", "--workload", "prefix", "-o", one], capsys)
        assert code == 0, err
        code, _, err = run_cli([*base, "-c", "hours", "--lo", 0, "--hi", 60, "--bins", 20, "-o", grid], capsys)
        assert code == 0, err
    return path, one, grid


def test_show_summarises_a_1d_release(saved, capsys):
    path, one, _ = release_files(saved, capsys)
    code, out, err = run_cli(["show", one], capsys)
    assert code == 0, err
    assert out.startswith(f"1-D release of 'age (years)' from {path}")
    assert "1-differential privacy (central model) for one record" in out
    code, out, err = run_cli(["show", one, "--format", "json"], capsys)
    info = json.loads(out)
    release = load_release(one)
    answer = release.quantile(np.round(np.linspace(0.1, 0.9, 9), 2))  # the deciles as saved
    lower, upper = answer.confidence_interval(0.05, simultaneous=True)
    np.testing.assert_array_equal([row["value"] for row in info["deciles"]], answer.value)
    np.testing.assert_array_equal([row["ci_lower"] for row in info["deciles"]], lower)
    np.testing.assert_array_equal([row["ci_upper"] for row in info["deciles"]], upper)
    assert info["total"]["value"] == pytest.approx(release.total().value)


def test_query_answers_as_the_loaded_release_in_value_units(saved, capsys):
    _, one, _ = release_files(saved, capsys)
    args = ["query", one, "--range", 30, 40, "--quantile", 0.5, "--cdf-at", 50, "--alpha", 0.1]
    code, out, err = run_cli([*args, "--format", "json"], capsys)
    assert code == 0, err
    rows = json.loads(out)
    release = load_release(one)
    count = release.count_between(30, 40)
    assert rows[0]["query"] == "count 30 <= value < 40"
    assert rows[0]["answer"] == count.value and rows[0]["stderr"] == count.stderr
    assert (rows[0]["ci_lower"], rows[0]["ci_upper"]) == tuple(count.confidence_interval(0.1))
    median = release.quantile([0.5])
    assert rows[1]["answer"] == median.value[0]
    assert rows[1]["ci_lower"] == median.confidence_interval(0.1)[0][0]
    cdf = release.cdf_at([50.0])
    assert rows[2]["answer"] == cdf.value[0] and rows[2]["ci_upper"] == cdf.confidence_interval(0.1)[1][0]
    code, out, err = run_cli([*args, "--format", "csv"], capsys)
    table = list(csv.DictReader(io.StringIO(out)))
    assert [float(r["answer"]) for r in table] == [r["answer"] for r in rows]
    code, out, err = run_cli(args, capsys)
    assert code == 0 and "count 30 <= value < 40" in out and "a guess inside its bin" in out


def test_query_answers_a_rectangle_of_a_saved_grid(saved, capsys):
    _, _, grid = release_files(saved, capsys)
    code, out, err = run_cli(["show", grid], capsys)
    assert code == 0 and out.startswith("2-D grid release of 'age', 'hours'"), err
    code, out, err = run_cli(["query", grid, "--range", 20, 40, "--range", 6, 12, "--format", "json"], capsys)
    assert code == 0, err
    (row,) = json.loads(out)
    release = load_grid_release(grid.read_text())
    answer = release.rectangle([10, 2], [19, 3])  # [20, 40): bins 10..19 of 2-wide; [6, 12): bins 2..3 of 3-wide
    assert row["query"] == "count 20 <= age < 40 and 6 <= hours < 12"
    assert row["answer"] == pytest.approx(answer.value) and row["stderr"] == pytest.approx(answer.stderr)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "nothing to answer"),
        (["--range", 31, 40], "is not a bin edge"),
        (["--quantile", 1.5], "q"),
    ],
)
def test_query_refusals_are_one_line(saved, capsys, extra, message):
    _, one, _ = release_files(saved, capsys)
    code, _, err = run_cli(["query", one, *extra], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_grid_queries_need_one_range_per_axis(saved, capsys):
    _, _, grid = release_files(saved, capsys)
    code, _, err = run_cli(["query", grid, "--range", 20, 40], capsys)
    assert code == 2 and "give 2 --range A B" in err
    code, _, err = run_cli(["query", grid, "--quantile", 0.5], capsys)
    assert code == 2 and "need a 1-D release" in err


def test_show_and_query_a_saved_data_aware_grid(tmp_path, capsys):
    rng = np.random.default_rng(1)
    path = tmp_path / "points.csv"
    path.write_text("a,b\n" + "".join(f"{u},{v}\n" for u, v in zip(rng.integers(0, 16, 400), rng.integers(0, 16, 400))))
    out = tmp_path / "grid.json"
    args = ["release", path, "-c", "a", "-c", "b", "--lo", 0, "--hi", 15, "--lo", 0, "--hi", 15, "--integers"]
    code, _, err = run_cli([*args, "-e", 1, "--seed", 4, "-o", out, "-m", "hybrid_tree"], capsys)
    assert code == 0, err
    code, text, err = run_cli(["show", out], capsys)
    assert code == 0 and text.startswith("2-D grid release of 'a', 'b'"), err
    code, text, err = run_cli(["query", out, "--range", 0, 7, "--range", 2, 3, "--format", "json"], capsys)
    assert code == 0, err
    (row,) = json.loads(text)
    release = DataAwareGridRelease.from_json(out.read_text())
    assert row["answer"] == pytest.approx(release.rectangle([0, 2], [7, 3]).value)
    assert row["ci_lower"] is None and row["stderr"] is None and row["note"].startswith("no error bars")
