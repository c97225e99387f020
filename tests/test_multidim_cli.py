"""`dprange release` with several columns (a k-D GridRelease, --plot heatmap) and `dprange
error --shape` (issue 10, item 8): same rules as the 1-D command line."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from _helpers import grid_args, run_cli

from dprange import Domain, ProductDomain
from dprange.analysis.grid import expected_error, select_grid, svd_bound
from dprange.api import release_grid
from dprange.mechanisms.grid import KDHierarchy, Kronecker, load_grid_release


@pytest.fixture
def two_columns(tmp_path):
    rng = np.random.default_rng(1)
    age, hours = rng.integers(18, 60, 600), rng.integers(0, 50, 600)
    path = tmp_path / "people.csv"
    path.write_text("age,hours,third\n" + "".join(f"{a},{h},{a % 3}\n" for a, h in zip(age, hours)))
    return path, age, hours


def test_two_columns_release_the_grid_of_dprange_release_grid(two_columns, tmp_path, capsys):
    path, age, hours = two_columns
    out = tmp_path / "grid.json"
    code, stdout, err = run_cli(grid_args(path, out, "-m", "kd_hierarchy", "--branching", 4), capsys)
    assert code == 0 and err == ""
    saved = load_grid_release(out.read_text())
    domain = ProductDomain([Domain.integers(18, 59), Domain.integers(0, 49)])
    same = release_grid([age, hours], domain, 1.0, mechanism=KDHierarchy(4), rng=4)
    np.testing.assert_allclose(saved.counts, same.counts, rtol=0, atol=1e-9)
    assert saved.domain == domain and saved.shape == (42, 50)
    total = saved.rectangle([0, 0], [41, 49])
    assert f"total: {total.value:.1f} ± {total.stderr:.1f}" in stdout
    assert "kd_hierarchy release of 'age' x 'hours': 42x50 cells" in stdout


def test_auto_chooses_by_the_k_d_workload_and_bins_per_column(two_columns, tmp_path, capsys):
    path, age, hours = two_columns
    out = tmp_path / "grid.json"
    args = [
        "release", path, "-c", "age", "-c", "hours", "--lo", 18, "--hi", 60, "--bins", 6, "--lo", 0, "--hi", 50,
        "--bins", 5, "-e", 1, "--seed", 4, "-o", out, "--workload", "marginals",
    ]  # fmt: skip
    code, stdout, _ = run_cli(args, capsys)
    assert code == 0
    chosen = select_grid((6, 5), 1.0, workload="marginals").mechanism
    assert f"auto: chose {chosen!r} for the marginals workload" in stdout
    saved = json.loads(out.read_text())
    assert saved["shape"] == [6, 5] and saved["mechanism"] == chosen.name
    exact = ProductDomain([Domain.interval(18, 60, 6), Domain.interval(0, 50, 5)]).histogram([age, hours])
    rel = load_grid_release(saved)
    assert np.all(np.abs(rel.counts - exact) < 8 * rel.marginal((0, 1)).stderr)


def test_heatmap_png_for_two_columns(two_columns, tmp_path, capsys):
    path, _, _ = two_columns
    plot = tmp_path / "map.png"
    code, stdout, _ = run_cli(grid_args(path, tmp_path / "g.json", "--plot", plot, "-m", "kronecker"), capsys)
    assert code == 0 and plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert f"and {plot}" in stdout


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a[:8] + a[10:], "--hi was given 1 times for 2 --column"),  # one --hi
        (lambda a: [*a, "--lo", 3], "--lo was given 3 times"),
        (lambda a: [x for x in a if x != "--integers"], "--column age: give --bins N"),
        (lambda a: [*a, "--bins", 4], "either --integers or --bins"),
        (lambda a: [*a, "-m", "flat"], "--mechanism flat releases one column"),
        (lambda a: [*a, "--inference", "nnls"], "--inference gls"),
        (lambda a: [*a, "--workload", "identity"], "--workload identity is for one column"),
        (lambda a: [*a, "--branching", 4], "give --mechanism kronecker or kd_hierarchy or quadtree"),
        (lambda a: [*a, "-m", "kronecker", "--root"], "--root is not a parameter of --mechanism kronecker"),
        (lambda a: [*a, "-m", "kd_hierarchy", "--branching", "4,4"], "--branching must be a whole number"),
        (lambda a: [*a, "-m", "kronecker", "--branching", "tree"], "'identity', 'haar' or a tree branching"),
        (lambda a: [*a, "-m", "quadtree", "-c", "third", "--lo", 0, "--hi", 2], "2-D grid"),
        (lambda a: [*a, "--plot", "x.png", "-c", "third", "--lo", 0, "--hi", 2], "heatmap of two columns"),
        (lambda a: [*a, "-c", "age", "--lo", 0, "--hi", 2], "names a column twice"),
        (lambda a: [*a, "-e", 0], "epsilon"),
        (lambda a: [*a, "--neighbours", "replace", "--drop-missing"], "--drop-missing"),
    ],
)
def test_bad_multi_column_options_exit_2_with_one_line_before_reading(tmp_path, capsys, change, message):
    """The input file does not exist: every option is checked before the data are read."""
    monkey_out = tmp_path / "never.json"
    code, stdout, err = run_cli(change(grid_args(tmp_path / "missing.csv", monkey_out)), capsys)
    assert code == 2 and stdout == ""
    assert err.startswith("dprange: error: ") and err.count("\n") == 1 and message in err
    assert not monkey_out.exists() and list(tmp_path.iterdir()) == []


def test_k_d_names_are_refused_with_one_column(two_columns, tmp_path, capsys):
    path, _, _ = two_columns
    base = ["release", path, "-c", "age", "--lo", 18, "--hi", 59, "--integers", "-e", 1, "-o", tmp_path / "r.json"]
    code, _, err = run_cli([*base, "-m", "kronecker"], capsys)
    assert code == 2 and "--mechanism kronecker releases several columns" in err
    code, _, err = run_cli([*base, "--workload", "all-rectangles"], capsys)
    assert code == 2 and "--workload all-rectangles is for several columns" in err
    code, _, err = run_cli([*base, "--lo", 3], capsys)
    assert code == 2 and "--lo was given 2 times for 1 --column" in err
    code, stdout, _ = run_cli([*base, "--seed", 1], capsys)  # the 1-D release still runs
    assert code == 0 and "deciles" not in err and "total" in stdout


def test_optimised_kronecker_reports_each_axis_strategy_and_the_cache(two_columns, tmp_path, capsys, monkeypatch):
    """-m optimized_kronecker says, per column, how long its 1-D strategy took and whether it
    was stored in or read from the strategy cache, as the 1-D release does."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(cache))
    path, _, _ = two_columns
    args = grid_args(path, tmp_path / "grid.json", "-m", "optimized_kronecker", "--workload", "prefix")
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    for column, bins in (("age", 42), ("hours", 50)):
        assert f"--column {column}: strategy: p-identity, " in stdout
        assert f" x {bins}, optimised in " in stdout
    assert stdout.count(f"stored in the strategy cache {cache}") == 2
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    assert stdout.count(f"read from the strategy cache {cache}") == 2


@pytest.mark.usefixtures("private_cache")
def test_optimised_kronecker_records_each_axis_optimisation_time_in_the_json(two_columns, tmp_path, capsys):
    """A k-D release's JSON did not record its axes' optimisation time (a 1-D release records
    parameters["strategy"]["optimisation_seconds"]): it records every axis' description now,
    loading keeps it (the design is rebuilt from the other parameters), and the command line
    prints the times the release records."""
    path, _, _ = two_columns
    out = tmp_path / "grid.json"
    code, stdout, err = run_cli(grid_args(path, out, "-m", "optimized_kronecker", "--workload", "prefix"), capsys)
    assert code == 0, err
    saved = json.loads(out.read_text())
    described = saved["parameters"]["strategy"]
    assert [axis["bins"] for axis in described["axes"]] == [42, 50] and described["quantisation_bits"] == 16
    for column, axis in zip(("age", "hours"), described["axes"]):
        assert axis["template"] == "p-identity" and axis["optimisation_seconds"] > 0 and not axis["cached"]
        seconds = f"{axis['optimisation_seconds']:.2f}"
        assert (
            f"--column {column}: strategy: p-identity, {axis['rows']} x {axis['bins']}, optimised in {seconds} s"
            in (stdout)
        )
    loaded = load_grid_release(out.read_text())
    assert loaded.parameters["strategy"] == described
    assert load_grid_release(loaded.to_json()).parameters == loaded.parameters
    np.testing.assert_array_equal(loaded.counts, load_grid_release(saved).counts)


def test_optimised_kronecker_reports_a_strategy_shared_by_columns_of_one_size_once(two_columns, tmp_path, capsys):
    """Columns with as many bins share one 1-D strategy, optimised once: the second column
    names the first's instead of repeating 'optimised in ... s and stored'."""
    path, _, _ = two_columns
    args = [
        "release", path, "-c", "age", "-c", "hours", "--lo", 18, "--hi", 67, "--lo", 0, "--hi", 49,
        "--integers", "--clip", "-e", 1, "--seed", 4, "-o", tmp_path / "grid.json", "-m", "optimized_kronecker",
    ]  # fmt: skip
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    assert stdout.count("optimised in") == 1 and "--column age: strategy: p-identity, " in stdout
    assert "--column hours: the strategy of --column age (the same 50 bins)" in stdout


def test_error_shape_ranks_the_k_d_mechanisms_exactly(capsys):
    code, stdout, err = run_cli(["error", "--shape", "6x5", "-e", 1], capsys)
    assert code == 0 and err == ""
    selection = select_grid((6, 5), 1.0)
    assert f"recommended: {selection.mechanism!r}" in stdout
    for cand in selection.table[:15]:
        assert f"{math.sqrt(cand.error):>12.4f}  {cand.mechanism!r}" in stdout
    bound = svd_bound((6, 5), "all-rectangles", 1.0)
    assert f"RMSE {bound**0.5:.4f}" in stdout
    code, stdout, _ = run_cli(
        [
            "error",
            "--shape",
            "4x3x2",
            "-w",
            "marginals",
            "--order",
            1,
            "-e",
            0.5,
            "--json",
            "--mechanisms",
            "kronecker",
        ],
        capsys,
    )
    table = json.loads(stdout)
    assert code == 0 and len(table["candidates"]) == 1
    assert table["expected_error"] == pytest.approx(expected_error(Kronecker(), (4, 3, 2), "marginals", 0.5, order=1))
    assert table["svd_bound"] == pytest.approx(svd_bound((4, 3, 2), "marginals", 0.5, order=1))


def test_error_shape_ranks_named_optimised_mechanisms_on_the_chosen_workload(capsys):
    """--mechanisms optimized_kronecker / optimized_marginals are ranked as optimised for
    --workload and --order (they were ranked as made for all rectangles and 2-way marginals)."""
    from dprange.mechanisms.optimized_grid import OptimizedKronecker, OptimizedMarginals

    args = ["error", "--shape", "6x5", "-e", 1, "--json", "-w", "prefix-rectangles", "--mechanisms"]
    code, stdout, err = run_cli([*args, "optimized_kronecker"], capsys)
    assert code == 0, err
    expected = expected_error(OptimizedKronecker("prefix-rectangles"), (6, 5), "prefix-rectangles", 1.0)
    assert json.loads(stdout)["expected_error"] == pytest.approx(expected, rel=1e-12)
    args = ["error", "--shape", "4x3x2", "-e", 1, "--json", "-w", "marginals", "--order", 1, "--mechanisms"]
    code, stdout, err = run_cli([*args, "optimized_marginals"], capsys)
    assert code == 0, err
    expected = expected_error(OptimizedMarginals(1), (4, 3, 2), "marginals", 1.0, order=1)
    assert json.loads(stdout)["expected_error"] == pytest.approx(expected, rel=1e-12)


def test_a_named_mechanism_not_made_for_the_workload_is_refused_naming_it(two_columns, tmp_path, capsys):
    """optimized_kronecker is optimised for rectangles, not marginals: the refusal names the
    mechanism and --workload (it said only "workload must be one of all-rectangles,
    prefix-rectangles, got 'marginals'", which the user had not given to any mechanism)."""
    code, _, err = run_cli(
        ["error", "--shape", "6x5", "-e", 1, "-w", "marginals", "--mechanisms", "kronecker,optimized_kronecker"], capsys
    )
    assert code == 2 and "--mechanisms optimized_kronecker is not made for --workload marginals" in err
    path, _, _ = two_columns
    code, _, err = run_cli(
        grid_args(path, tmp_path / "grid.json", "-m", "optimized_kronecker", "--workload", "marginals"), capsys
    )
    assert code == 2 and "--mechanism optimized_kronecker is not made for --workload marginals" in err
    assert not (tmp_path / "grid.json").exists()


def test_a_named_marginals_mechanism_is_refused_for_rectangles_in_option_names(two_columns, tmp_path, capsys):
    """fourier (order 2) on three columns and optimized_marginals on 10x10x10 answer no
    rectangle restricted on three axes: refused, in the command line's terms, no traceback."""
    path, _, _ = two_columns
    args = [*grid_args(path, tmp_path / "grid.json", "-m", "fourier", "--workload", "prefix"), "-c", "third"]
    args += ["--lo", 0, "--hi", 2]
    code, _, err = run_cli(args, capsys)
    assert code == 2 and "Traceback" not in err
    assert "--mechanism fourier answers marginals of up to 2 axes (--workload marginals), not every query of " in err
    assert "--workload prefix-rectangles on this 3-axis grid" in err
    assert "use --mechanism optimized_kronecker, kronecker or kd_hierarchy (or auto)" in err
    assert not (tmp_path / "grid.json").exists()
    code, _, err = run_cli(
        ["error", "--shape", "10x10x10", "-e", 1, "--mechanisms", "kronecker,optimized_marginals"], capsys
    )
    assert code == 2 and "Traceback" not in err
    assert "--mechanisms optimized_marginals answers marginals of up to 2 axes (--workload marginals)" in err
    assert (
        "--workload all-rectangles" in err and "use --mechanisms optimized_kronecker, kronecker or kd_hierarchy" in err
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shape", "8xx8"], "--shape must be sides >= 1 joined by x"),
        (["--shape", "8x0"], "--shape must be sides >= 1"),
        (["--shape", "8x8", "--n", 8], "not both"),
        ([], "Missing option '--n'"),
        (["--n", 8, "-w", "marginals"], "needs --shape"),
        (["--shape", "8x8", "-w", "identity"], "--workload identity is for one column"),
        (["--shape", "8x8", "-w", "marginals", "--order", 3], "--order must be 1..2"),
        (["--shape", "8x8", "--mechanisms", "flat"], "unknown k-D mechanism 'flat'"),
        (["--shape", "8x8", "--mechanisms", ","], "--mechanisms is empty"),
        (["--shape", "100000x100000"], "more than the"),
    ],
)
def test_bad_error_shape_options(capsys, args, message):
    code, stdout, err = run_cli(["error", "-e", 1, *args], capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1 and message in err


def test_out_of_bounds_names_the_column(two_columns, tmp_path, capsys):
    """Was: '... values lie outside the public bounds [0.0, 40.0]' without saying which column."""
    path, _, _ = two_columns
    args = grid_args(path, tmp_path / "g.json")
    args[args.index(49)] = 40  # hours go up to 49
    code, _, err = run_cli(args, capsys)
    assert code == 2 and err.startswith("dprange: error: --column hours: ") and "outside the public bounds" in err
    assert not (tmp_path / "g.json").exists()


def test_ranges_file_optimises_the_release_for_its_rectangles_and_ranges(two_columns, tmp_path, capsys, monkeypatch):
    """--ranges FILE: the rectangles (<column>_lo, <column>_hi, bin indices) or, for one column,
    the ranges (lo, hi) that auto optimises for: the release is the library's with that
    workload (same mechanism, same values for the same seed), and says whose queries it took."""
    from dprange import release
    from dprange.mechanisms.optimized_grid import OptimizedKronecker
    from dprange.workloads import Ranges, Rectangles

    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "cache"))
    path, age, hours = two_columns
    bands = [(a, h) for h in range(0, 50, 5) for a in range(42)]  # the CDF of age in every fifth hour
    queries = tmp_path / "cdfs.csv"
    queries.write_text("age_lo,age_hi,hours_lo,hours_hi\n" + "".join(f"0,{a},{h},{h}\n" for a, h in bands))
    out = tmp_path / "grid.json"
    code, stdout, err = run_cli(grid_args(path, out, "--ranges", queries), capsys)
    assert code == 0, err
    assert f"for the {len(bands)} rectangles of {queries}" in stdout and "optimized_kronecker release" in stdout
    domain = ProductDomain([Domain.integers(18, 59), Domain.integers(0, 49)])
    rects = Rectangles((42, 50), [(0, h) for _, h in bands], bands)
    chosen = select_grid((42, 50), 1.0, workload=rects).mechanism
    assert isinstance(chosen, OptimizedKronecker) and isinstance(chosen.workload, Rectangles)
    same = release_grid([age, hours], domain, 1.0, mechanism=chosen, rng=4)
    np.testing.assert_allclose(load_grid_release(out.read_text()).counts, same.counts, rtol=0, atol=1e-9)
    one = tmp_path / "ages.csv"
    one.write_text("lo,hi\n" + "".join(f"0,{a}\n{a},{a}\n" for a in range(42)))
    args = ["release", path, "-c", "age", "--lo", 18, "--hi", 59, "--integers", "-e", 1, "--seed", 4]
    code, stdout, err = run_cli([*args, "-o", tmp_path / "one.json", "--ranges", one], capsys)
    assert code == 0, err
    assert f"for the 84 ranges of {one}" in stdout
    lows = np.repeat(np.arange(42), 2) * np.tile([0, 1], 42)
    expected = release(age, Domain.integers(18, 59), 1.0, workload=Ranges(lows, np.repeat(np.arange(42), 2), 42), rng=4)
    saved = json.loads((tmp_path / "one.json").read_text())
    assert saved["mechanism"] == expected.mechanism
    np.testing.assert_allclose(saved["histogram"]["value"], expected.estimate, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("age_lo,age_hi\n0,3\n", [], "column 'hours_lo' not found"),
        ("age_lo,age_hi,hours_lo,hours_hi\n0,3,0,50\n", [], r"row 1 \(\[0, 0\] to \[3, 50\]\) is not a range of bins"),
        ("age_lo,age_hi,hours_lo,hours_hi\n2,1,0,5\n", [], "row 1"),
        ("age_lo,age_hi,hours_lo,hours_hi\n0,1.5,0,5\n", [], "'age_hi' must hold bin indices"),
        ("age_lo,age_hi,hours_lo,hours_hi\n0,1,0,5\n0,2,1,\n", [], "'hours_hi' must hold bin indices"),
        ("age_lo,age_hi,hours_lo,hours_hi\n0,1,0,5\n", ["--workload", "prefix"], "give --workload or --ranges"),
    ],
)
def test_bad_ranges_files_are_refused_naming_the_file(two_columns, tmp_path, capsys, content, extra, message):
    path, _, _ = two_columns
    queries = tmp_path / "q.csv"
    queries.write_text(content)
    code, _, err = run_cli(grid_args(path, tmp_path / "grid.json", "--ranges", queries, *extra), capsys)
    assert code == 2 and re.search(message, err), err
    code, _, err = run_cli(grid_args(path, queries, "--ranges", queries), capsys)
    assert code == 2 and "is the input file" in err and queries.read_text() == content  # never overwritten


def test_error_ranks_mechanisms_on_the_ranges_of_a_file(tmp_path, capsys, monkeypatch):
    """dprange error --ranges: with --n the ranges (lo, hi), with --shape the rectangles
    (<name>_lo, <name>_hi per axis, in header order, the file dprange release --ranges reads):
    the ranking is the library's on that workload, with the SVD bound of those ranges."""
    from dprange.analysis import select
    from dprange.workloads import Ranges, Rectangles

    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "cache"))
    rects = tmp_path / "rects.csv"
    rows = [(a, b) for b in range(0, 12, 3) for a in range(30)]
    rects.write_text("x_lo,x_hi,y_lo,y_hi\n" + "".join(f"0,{a},{b},{b + 2}\n" for a, b in rows))
    code, out, err = run_cli(["error", "--shape", "30x12", "-e", 1, "--ranges", rects, "--json"], capsys)
    assert code == 0, err
    ranked = json.loads(out)
    workload = Rectangles((30, 12), [(0, b) for _, b in rows], [(a, b + 2) for a, b in rows])
    expected = select_grid((30, 12), 1.0, workload=workload)
    errors = [c["expected_error"] for c in ranked["candidates"]]
    assert errors == pytest.approx([c.error for c in expected.table], rel=1e-12)
    assert ranked["recommended"] == repr(expected.mechanism)
    assert ranked["svd_bound"] == pytest.approx(svd_bound((30, 12), workload, 1.0), rel=1e-12)
    assert ranked["svd_bound"] < expected.error
    code, out, err = run_cli(["error", "--shape", "30x12", "-e", 1, "--ranges", rects], capsys)
    assert code == 0 and out.startswith(f"{len(rows)} rectangles of {rects}, shape=30x12"), err
    ranges = tmp_path / "ranges.csv"
    ranges.write_text("lo,hi\n" + "".join(f"{a},{min(a + 5, 39)}\n" for a in range(40)))
    code, out, err = run_cli(["error", "--n", 40, "-e", 1, "--ranges", ranges, "--json"], capsys)
    assert code == 0, err
    lo = np.arange(40)
    expected = select(Ranges(lo, np.minimum(lo + 5, 39), 40), None, 1.0)
    assert json.loads(out)["expected_error"] == pytest.approx(expected.table[0].error, rel=1e-12)
    assert json.loads(out)["svd_bound"] is not None
    code, _, err = run_cli(["error", "--shape", "30x12x2", "-e", 1, "--ranges", rects], capsys)
    assert code == 2 and "with a 3-axis --shape it needs <name>_lo and <name>_hi columns for 3 names" in err
    code, _, err = run_cli(["error", "--n", 40, "-e", 1, "--ranges", ranges, "-w", "prefix"], capsys)
    assert code == 2 and "give --workload or --ranges, not both" in err


def test_column_names_reads_a_csv_header_and_a_parquet_schema(tmp_path):
    from dprange.errors import DataError
    from dprange.io import column_names

    path = tmp_path / "q.csv"
    path.write_text("\ufeffa_lo, a_hi,b\n1,2,3\n")
    assert column_names(path) == ["a_lo", "a_hi", "b"]
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(DataError, match="is empty"):
        column_names(tmp_path / "empty.csv")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"lo": [0, 1], "hi": [2, 3]}), tmp_path / "q.parquet")
    assert column_names(tmp_path / "q.parquet") == ["lo", "hi"]
