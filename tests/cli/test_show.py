"""dprange.cli.show: ``dprange show`` summarises a saved release and ``dprange query`` answers
range counts, quantiles and CDF values from it, with intervals, in value units (issue 34,
item 3), on saved 1-D and k-D releases; the answers are the loaded release's own."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from _helpers import run_cli

import dprange
from dprange import load_grid_release, load_release
from dprange.answers.release import Release
from dprange.answers.writers import FORMAT_VERSION
from dprange.cli import saved_release, show
from dprange.data_aware.grid import DataAwareGridRelease
from dprange.errors import DataError


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
    saved_deciles = json.loads(one.read_text())["deciles"]  # printed as saved: the release's own
    for column, saved_column, rebuilt in (
        ("value", "value", answer.value),
        ("ci_lower", "lower", lower),
        ("ci_upper", "upper", upper),
    ):
        shown = [row[column] for row in info["deciles"]]
        assert shown == saved_deciles[saved_column]
        np.testing.assert_allclose(shown, rebuilt, rtol=1e-13)  # the rebuilt release's, to rounding
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


def _summaries(path, alpha=0.05):
    """(the summary read from the saved file, the summary of the rebuilt release)."""
    return show.saved_summary(str(path), alpha), saved_release.summary(saved_release.read_release(str(path)), alpha)


def _same(fast, slow):
    assert fast.keys() == slow.keys()
    for key in fast:
        if key == "deciles":
            assert [row.keys() for row in fast[key]] == [row.keys() for row in slow[key]]
            for a, b in zip(fast[key], slow[key]):
                assert a["placement"] == b["placement"]
                numbers = [k for k in a if k != "placement"]
                np.testing.assert_allclose([a[k] for k in numbers], [b[k] for k in numbers], rtol=1e-12)
        elif key == "total":
            assert fast[key] == pytest.approx(slow[key], rel=1e-12)
        else:
            assert fast[key] == slow[key], key


@pytest.mark.parametrize(
    "mechanism, values, domain",
    [
        ("hierarchical", "integers", ("integers", 0, 63)),
        ("flat", "spike", ("interval", 0.0, 1000.0, 40)),  # a concentrated first decile
        ("optimized", "integers", ("integers", 0, 63)),
    ],
)
def test_show_reads_the_saved_summary_as_the_rebuilt_release_gives_it(tmp_path, mechanism, values, domain):
    """The summary ``show`` reads from a saved JSON release (without rebuilding it: no numpy)
    is the rebuilt release's summary: same deciles, placements, intervals, total, privacy."""
    rng = np.random.default_rng(7)
    data = (
        rng.integers(0, 64, 400)
        if values == "integers"
        else np.where(rng.random(2000) < 0.3, 0.0, rng.random(2000) * 1000)
    )
    dom = dprange.Domain.integers(*domain[1:]) if domain[0] == "integers" else dprange.Domain.interval(*domain[1:])
    release = dprange.release(data, dom, 1.0, mechanism=mechanism, rng=np.random.default_rng(1))
    path = tmp_path / "r.json"
    path.write_text(release.to_json())
    fast, slow = _summaries(path)
    assert fast is not None
    _same(fast, slow)
    assert _summaries(path, alpha=0.1)[0] is None  # another level: rebuilt


def test_show_rebuilds_what_the_file_does_not_hold(tmp_path):
    """Data-dependent error bars, a changed format version and a broken file are not read
    as saved; the format the summary reads is the one the writers write."""
    assert show.SAVED_FORMAT == FORMAT_VERSION
    data = np.random.default_rng(2).integers(0, 32, 300)
    dawa = dprange.release(data, dprange.Domain.integers(0, 31), 1.0, mechanism="dawa", rng=np.random.default_rng(1))
    path = tmp_path / "dawa.json"
    path.write_text(dawa.to_json())
    assert show.saved_summary(str(path), 0.05) is None
    saved = json.loads(
        dprange.release(data, dprange.Domain.integers(0, 31), 1.0, rng=np.random.default_rng(1)).to_json()
    )
    saved["dprange_release"] = FORMAT_VERSION + 1
    path.write_text(json.dumps(saved))
    assert show.saved_summary(str(path), 0.05) is None
    path.write_text("{not json")
    assert show.saved_summary(str(path), 0.05) is None


def test_show_of_a_saved_1d_release_loads_no_numpy(saved, capsys, tmp_path):
    """`dprange show` on a release written by `release -o` imports neither numpy nor scipy."""
    _, one, _ = release_files(saved, capsys)
    code = (
        "import sys\nfrom dprange.cli import main\n"
        "try:\n    main(['show', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('numpy', 'scipy') if m in sys.modules), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(one)], capture_output=True, text=True, check=True)
    assert result.stderr.strip().splitlines()[-1] == "[]", result.stderr
    assert "deciles, 95% intervals" in result.stdout


def test_show_and_query_a_saved_grouped_release(tmp_path, capsys):
    """A release saved with --by: `show` prints each group's summary under the group-by line,
    `query` answers per group with the key first, as the loaded GroupedRelease gives them."""
    rng = np.random.default_rng(6)
    path = tmp_path / "people.csv"
    ids, groups, ages = rng.integers(0, 300, 2000), rng.choice(["a", "b"], 2000), rng.integers(18, 80, 2000)
    path.write_text("id,g,age\n" + "".join(f"{i},{g},{a}\n" for i, g, a in zip(ids, groups, ages)))
    out = tmp_path / "grouped.json"
    base = ["release", path, "-c", "age", "--lo", 0, "--hi", 100, "--integers", "--by", "g", "--groups", "a,b"]
    code, _, err = run_cli(
        [*base, "--privacy-id", "id", "--max-rows-per-id", 5, "-e", 1, "--units", "years", "-o", out], capsys
    )
    assert code == 0, err
    code, text, err = run_cli(["show", out], capsys)
    assert code == 0, err
    assert text.startswith("grouped release by 'g': 2 groups, epsilon=1 in all")
    assert text.count("1-D release of 'age (years)' from") == 2 and "for one person: all the rows sharing" in text
    grouped = dprange.GroupedRelease.from_json(str(out))
    code, text, err = run_cli(["query", out, "--range", 30, 39, "--format", "json"], capsys)
    assert code == 0, err
    rows = json.loads(text)
    assert [row["g"] for row in rows] == ["a", "b"]
    for row, key in zip(rows, ["a", "b"]):
        assert row["answer"] == pytest.approx(grouped[key].count_between(30, 39).value)
    code, _, err = run_cli(["report", out, "-o", tmp_path / "r.html"], capsys)
    assert code == 0, err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h1>Private release of age by g</h1>" in page and "<h2>g = a</h2>" in page and "<h2>g = b</h2>" in page
    assert "one person: all the rows sharing a value of 'id'" in page.replace("&#x27;", "'")
    again = [*base, "--privacy-id", "id", "--max-rows-per-id", 5, "-e", 1, "-o", tmp_path / "g2.json"]
    code, text, err = run_cli([*again, "--report", tmp_path / "g2.html"], capsys)
    assert code == 0, err
    assert text.rstrip().endswith(f"wrote {tmp_path / 'g2.json'} and {tmp_path / 'g2.html'}")
    assert "<h2>g = b</h2>" in (tmp_path / "g2.html").read_text(encoding="utf-8")
    code, _, err = run_cli([*again, "--log-x"], capsys)
    assert code == 2 and "--log-x is not offered with --privacy-id or --by yet" in err


def test_read_release_reads_each_kind_by_its_first_bytes_whatever_the_suffix(tmp_path):
    """The one reader of ``show``, ``query`` and ``report``: a 1-D release (JSON and NPZ), a grid
    release, a data-aware grid release and a grouped release, each read back as its own kind, a
    grid release also from a file without the .json suffix; a missing path is one DataError."""
    domain = dprange.Domain.integers(0, 15)
    rng = np.random.default_rng(2)
    one = dprange.release(rng.integers(0, 16, 300), domain, 1.0, rng=1)
    columns = [rng.integers(0, 16, 300), rng.integers(0, 16, 300)]
    grid = dprange.release_grid(columns, dprange.ProductDomain([domain, domain]), 1.0, rng=1)
    aware = dprange.release_grid(columns, dprange.ProductDomain([domain, domain]), 1.0, mechanism="dawa_pruned", rng=1)
    grouped = dprange.GroupedRelease("g", ["a", "b"], [one, dprange.release(np.arange(16), domain, 1.0, rng=2)], 1.0)
    one.to_json(str(tmp_path / "one.json"))
    one.to_npz(str(tmp_path / "one.npz"))
    (tmp_path / "grid.json").write_text(grid.to_json())
    (tmp_path / "grid.out").write_text(grid.to_json())
    (tmp_path / "aware.json").write_text(aware.to_json())
    grouped.to_json(str(tmp_path / "grouped.json"))
    kinds = {
        "one.json": Release,
        "one.npz": Release,
        "grid.json": type(grid),
        "grid.out": type(grid),
        "aware.json": DataAwareGridRelease,
        "grouped.json": dprange.GroupedRelease,
    }
    for name, kind in kinds.items():
        assert type(saved_release.read_release(str(tmp_path / name))) is kind, name
    np.testing.assert_allclose(saved_release.read_release(str(tmp_path / "grid.out")).counts, grid.counts)
    np.testing.assert_allclose(saved_release.read_release(str(tmp_path / "aware.json")).counts, aware.counts)
    with pytest.raises(DataError, match="does not exist or is not a file"):
        saved_release.read_release(str(tmp_path / "missing.json"))
