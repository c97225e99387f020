"""dprange.cli.release: ``dprange release`` with one column or several (a k-D GridRelease,
--plot heatmap), by name or auto, through dprange.release; options checked before the data are
read, one-line errors with exit status 2, outputs left as they were on failure, and the notes on
optimised strategies and their cache."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from _helpers import _release, grid_args, release_args, run_cli, write_csv

import dprange
from dprange import Domain, Hierarchical, Mechanism, ProductDomain, api
from dprange.analysis.grid import select_grid
from dprange.answers.release import load_release
from dprange.api import release_grid
from dprange.cli import main
from dprange.data_aware.grid import DataAwareGridRelease
from dprange.mechanisms.grid import KDHierarchy, load_grid_release


def test_release_writes_json_and_plot(csv_file, tmp_path, capsys):
    out = tmp_path / "out" / "rel.json"
    png = tmp_path / "out" / "cdf.png"
    code, stdout, err = run_cli(
        [
            "release",
            str(csv_file),
            "--column",
            "age",
            "--lo",
            "0",
            "--hi",
            "120",
            "--integers",
            "--epsilon",
            "1",
            "--seed",
            "3",
            "--output",
            str(out),
            "--plot",
            str(png),
        ],
        capsys,
    )
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["privacy"]["epsilon"] == 1.0 and len(data["histogram"]["value"]) == 121
    assert png.stat().st_size > 1000
    assert "0.5" in stdout and "interval" in stdout


def test_release_parquet_and_options(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": np.linspace(0, 1, 300)}), path)
    code, _, err = run_cli(
        [
            "release",
            str(path),
            "-c",
            "x",
            "--lo",
            "0",
            "--hi",
            "1",
            "--bins",
            "64",
            "-e",
            "0.5",
            "--mechanism",
            "hierarchical",
            "--branching",
            "4,4,4",
            "--budget",
            "0.125,0.125,0.125,0.125",
            "--root",
            "--seed",
            "1",
            "-o",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert code == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["parameters"]["branching"] == [4, 4, 4]


BAD = [
    (["--column", "nope"], "column 'nope' not found"),
    (["--column", "name"], "not numeric"),
    (["--column", "age", "--epsilon", "0"], "epsilon"),
    (["--column", "age", "--epsilon", "inf"], "epsilon"),
    (["--column", "age", "--epsilon", "nan"], "epsilon"),
    (["--column", "age", "--delta", "1"], "delta"),
    (["--column", "age", "--delta", "-0.5"], "delta"),
    (["--column", "age", "--bins", "0", "--lo", "0", "--hi", "100"], "bins"),
    (["--column", "age", "--bins", "10", "--lo", "5", "--hi", "5"], "lo < hi"),
    (["--column", "age", "--bins", "10", "--lo", "0", "--hi", "50"], "outside the public bounds"),
    (["--column", "age", "--branching", "1"], "branching"),
    (["--column", "age", "--budget", "0.5,0.5,0.5"], "one entry per measured level"),  # 2 levels: no root by default
    (["--column", "age", "--budget", "0.5,0.6"], "add up to at most epsilon"),
]


@pytest.mark.parametrize("extra,message", BAD)
def test_bad_input_is_one_line_exit_2(csv_file, tmp_path, capsys, extra, message):
    args = ["release", str(csv_file), "--epsilon", "1", "-o", str(tmp_path / "r.json"), "--mechanism", "hierarchical"]
    if "--bins" not in extra:
        args += ["--lo", "0", "--hi", "120", "--integers"]
    if "--epsilon" in extra:
        args.remove("--epsilon")
        args.remove("1")
    code, _, err = run_cli(args + extra, capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_missing_file_and_nan_values(tmp_path, capsys):
    code, _, err = run_cli(
        ["release", str(tmp_path / "none.csv"), "-c", "a", "--lo", "0", "--hi", "1", "--bins", "2", "-e", "1"], capsys
    )
    assert code == 2 and "does not exist" in err
    path = tmp_path / "nan.csv"
    path.write_text("a\n0.1\n\n0.7\n")
    code, _, err = run_cli(
        [
            "release",
            str(path),
            "-c",
            "a",
            "--lo",
            "0",
            "--hi",
            "1",
            "--bins",
            "2",
            "-e",
            "1",
            "-o",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert code == 2 and "missing" in err
    code, _, err = run_cli(
        [
            "release",
            str(path),
            "-c",
            "a",
            "--lo",
            "0",
            "--hi",
            "1",
            "--bins",
            "2",
            "-e",
            "1",
            "--drop-missing",
            "-o",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert code == 0, err
    # Two records: the noisy total may be <= 0; deciles are then reported unavailable, not a crash.
    code, out, err = run_cli(
        [
            "release",
            str(path),
            "-c",
            "a",
            "--lo",
            "0",
            "--hi",
            "1",
            "--bins",
            "2",
            "-e",
            "0.01",
            "--drop-missing",
            "--seed",
            "0",
            "-o",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert code == 0, err


def test_release_says_when_the_strategy_is_optimised_for_replace_neighbours(csv_file, tmp_path, capsys, monkeypatch):
    """Under --neighbours replace (epsilon-DP) the p-Identity strategy is optimised with the
    public total (Optimized.replace_program), and the release says so and saves it."""
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "cache"))
    args = ["release", str(csv_file), "-c", "age", "--lo", "0", "--hi", "120", "--integers", "-e", "1"]
    args += ["-m", "optimized", "--workload", "prefix", "--neighbours", "replace", "-o", str(tmp_path / "r.json")]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    strategy = json.loads((tmp_path / "r.json").read_text())["parameters"]["strategy"]
    assert strategy["optimised_for"] == "replace" and strategy["measured"] == "optimised"
    assert f"strategy: p-identity, {strategy['rows']} x 121 (optimised for replace neighbours), optimised in" in out


def test_release_reports_the_optimisation_time_and_the_strategy_cache(csv_file, tmp_path, capsys, monkeypatch):
    """-m optimized says how long the strategy took and whether it was read from, stored in or
    could not be stored in the strategy cache (a cold optimisation at 4096 bins takes ~16 s)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(cache))
    args = ["release", str(csv_file), "-c", "age", "--lo", "0", "--hi", "120", "--integers", "-e", "1"]
    args += ["-m", "optimized", "--workload", "prefix", "-o", str(tmp_path / "r.json")]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    strategy = json.loads((tmp_path / "r.json").read_text())["parameters"]["strategy"]
    seconds = f"{strategy['optimisation_seconds']:.2f}"
    assert strategy["stored"] and not strategy["cached"]
    assert f"strategy: p-identity, {strategy['rows']} x 121, optimised in {seconds} s" in out
    assert f"stored in the strategy cache {cache}" in out
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert f"read from the strategy cache {cache} (optimised in {seconds} s when first built)" in out
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "not stored: the strategy cache" in out and "DPRANGE_CACHE_DIR" in out
    assert not json.loads((tmp_path / "r.json").read_text())["parameters"]["strategy"]["stored"]


def test_release_reports_the_time_of_every_strategy_template_auto_built(csv_file, tmp_path, capsys, monkeypatch):
    """With delta > 0 under replace neighbours, template auto builds the L2 p-Identity strategy
    and the exact L2 optimum (both for replace) and keeps the optimum; only the chosen one's
    optimisation time was reported.  Every strategy built is now in the release
    (``also_built``, kept by the JSON round trip) and in the command line's line, with the time
    spent on all of them.  (Under add/remove template auto builds the optimum alone.)"""
    monkeypatch.setenv("DPRANGE_CACHE_DIR", str(tmp_path / "cache"))
    args = ["release", str(csv_file), "-c", "age", "--lo", "0", "--hi", "120", "--integers", "-e", "1"]
    args += ["--delta", "1e-6", "--neighbours", "replace", "-m", "optimized", "-o", str(tmp_path / "r.json")]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    strategy = json.loads((tmp_path / "r.json").read_text())["parameters"]["strategy"]
    (other,) = strategy["also_built"]
    assert {strategy["template"], other["template"]} == {"p-identity-l2", "l2-optimal"}
    assert other["optimisation_seconds"] > 0 and not other["cached"]
    spent = strategy["optimisation_seconds"] + other["optimisation_seconds"]
    assert f"also built: {other['template']} (optimised in {other['optimisation_seconds']:.2f} s)" in out
    assert f"; {spent:.2f} s of optimisation in all" in out
    assert load_release(tmp_path / "r.json").parameters["strategy"] == strategy
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert f"also built: {other['template']} (read from the cache, optimised in " in out
    assert "; none optimised now (all read from the cache)" in out and "of optimisation in all" not in out


def test_release_auto_mechanism(csv_file, tmp_path, capsys):
    code, out, err = run_cli(
        [
            "release",
            str(csv_file),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "120",
            "--integers",
            "-e",
            "1",
            "--mechanism",
            "auto",
            "--workload",
            "prefix",
            "--seed",
            "0",
            "-o",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert code == 0, err
    assert "auto: chose" in out


def test_release_with_l1_inference_and_plot(csv_file, tmp_path, capsys):
    code, out, err = run_cli(
        [
            "release",
            str(csv_file),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "120",
            "--integers",
            "-e",
            "1",
            "--inference",
            "l1",
            "--seed",
            "0",
            "-o",
            str(tmp_path / "r.json"),
            "--plot",
            str(tmp_path / "c.png"),
        ],
        capsys,
    )
    assert code == 0, err
    assert "no closed-form intervals" in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["inference"] == "l1" and data["histogram"]["stderr"] is None


@pytest.mark.parametrize("extra", [["--drop-missing"], ["--clip"], ["--bins", "8"]])
def test_options_named_in_messages_exist(csv_file, tmp_path, capsys, extra):
    """The options the messages point to are real options of the command."""
    args = _release(csv_file, *extra, "-o", str(tmp_path / "r.json"))
    if "--bins" in extra:
        args.remove("--integers")
    code, _, err = run_cli(args, capsys)
    assert code == 0, err


def test_missing_values_message_names_the_option(tmp_path, capsys):
    path = tmp_path / "nan.csv"
    path.write_text("age\n3\n\n5\n")
    code, _, err = run_cli(_release(path, "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "pass --drop-missing" in err and "drop_missing=True" not in err
    path.write_text("age\n3\n500\n")
    code, _, err = run_cli(_release(path, "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "pass --clip" in err and "clip=True" not in err
    path.write_text("age\n3.5\n")
    code, _, err = run_cli(_release(path, "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "--bins N" in err and "Domain.interval" not in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--alpha", "2"], "--alpha"),
        (["--alpha", "0"], "--alpha"),
        (["-o", ""], "--output is empty"),
        (["--plot", "cdf.xyz"], ".png"),
        (["--epsilon", "0"], "--epsilon"),
        (["--budget", "0.5,0.5,0.5"], "one entry per measured level"),
        (["--branching", "1000000000000"], "--branching factor"),
        (["--neighbours", "replace", "--drop-missing"], "public total would reveal"),
        (["--noise", "gaussian"], "--delta"),
        (["--seed", "-3"], "--seed"),
    ],
)
def test_options_are_checked_before_the_data_is_read(csv_file, tmp_path, capsys, monkeypatch, extra, message):
    """M1: a bad option fails before any data is read and before anything is written."""
    import dprange.cli.release as cli_module

    def no_reading(*args, **kwargs):
        raise AssertionError("the data was read before the options were checked")

    monkeypatch.setattr(cli_module, "read_column", no_reading)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = _release(csv_file, "-o", "r.json")
    for option in ("--epsilon", "--seed", "-o"):
        if option in extra and option in args:
            i = args.index(option)
            del args[i : i + 2]
    code, out, err = run_cli(args + extra, capsys)
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert out == "" and os.listdir(work) == []


def test_bad_plot_suffix_leaves_no_json(csv_file, tmp_path, capsys):
    """C5/M2: --plot cdf.xyz used to raise a traceback after the JSON was written."""
    out = tmp_path / "out" / "r.json"
    code, _, err = run_cli(_release(csv_file, "-o", str(out), "--plot", str(tmp_path / "out" / "cdf.xyz")), capsys)
    assert code == 2 and ".png" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_failure_after_the_release_keeps_the_previous_output(tmp_path, capsys):
    """M2: the plot fails (no positive total on two records at tiny epsilon) after the
    release was computed: the JSON from an earlier run stays as it was, nothing new appears."""
    path = tmp_path / "tiny.csv"
    path.write_text("age\n3\n4\n")
    out = tmp_path / "r.json"
    out.write_text("previous release")
    code, _, err = run_cli(
        [
            "release",
            str(path),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "120",
            "--integers",
            "-e",
            "0.001",
            "-m",
            "flat",
            "--seed",
            "0",
            "-o",
            str(out),
            "--plot",
            str(tmp_path / "new" / "c.png"),
        ],
        capsys,
    )  # seed 0: total < 0
    assert code == 2 and "not positive" in err
    assert out.read_text() == "previous release"
    assert sorted(os.listdir(tmp_path)) == ["r.json", "tiny.csv"]


def test_replace_with_drop_missing_is_refused(tmp_path, capsys):
    """P4: with replace neighbours the exact public total would be the number of complete rows."""
    path = tmp_path / "m.csv"
    path.write_text("age\n3\n\n5\n")
    code, _, err = run_cli(
        _release(path, "--neighbours", "replace", "--drop-missing", "-o", str(tmp_path / "r.json")), capsys
    )
    assert code == 2 and "--drop-missing cannot be used with --neighbours replace" in err
    assert "public total would reveal how many rows were dropped" in err
    assert not (tmp_path / "r.json").exists()
    code, _, err = run_cli(_release(path, "--neighbours", "replace", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "missing" in err  # without --drop-missing: clean the data first


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--bins", "1000000000"], "more than the"),
        (["--integers", "--hi", "1e12"], "more than the"),
        (["--bins", "16", "--branching", "99999999999"], "--branching factor 99999999999 pads a level"),
    ],
)
def test_huge_domains_fail_early(csv_file, tmp_path, capsys, monkeypatch, extra, message):
    """C2: these used to allocate terabytes (MemoryError traceback) or get the process killed."""
    import dprange.cli.release as cli_module

    monkeypatch.setattr(cli_module, "read_column", lambda *a: pytest.fail("data read before the size check"))
    args = [
        "release",
        str(csv_file),
        "-c",
        "age",
        "--lo",
        "0",
        "--hi",
        "120",
        "-e",
        "1",
        "-o",
        str(tmp_path / "r.json"),
        "-m",
        "hierarchical",
    ]
    if "--integers" in extra:
        args = [a for a in args if a not in ("--hi", "120")]
    code, _, err = run_cli(args + extra, capsys)
    assert code == 2 and message in err


def test_interval_whose_width_overflows_is_refused(csv_file, tmp_path, capsys):
    """--lo -1e308 --hi 1e308 used to put every value in bin 0 (hi - lo = inf)."""
    code, _, err = run_cli(
        [
            "release",
            str(csv_file),
            "-c",
            "age",
            "--lo",
            "-1e308",
            "--hi",
            "1e308",
            "--bins",
            "4",
            "-e",
            "1",
            "-o",
            str(tmp_path / "r.json"),
        ],
        capsys,
    )
    assert code == 2 and "overflows" in err


def test_redact_keeps_raw_values_and_row_numbers_out(tmp_path, capsys):
    path = tmp_path / "secret.csv"
    path.write_text("age\n3\n4\nsecret-value-991\n")
    code, _, err = run_cli(_release(path, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "not numeric" in err
    assert "secret-value-991" not in err and "row 4" not in err
    path.write_text("age\n3\n\n\n\n\n\n\n5\n")
    code, _, err = run_cli(_release(path, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "missing" in err and "7 values" not in err


def test_empty_dataset_and_trailing_commas_are_valid_input(tmp_path, capsys):
    """A header-only CSV is the empty dataset (a valid dataset: its release is as private as
    any other), and a trailing comma on every row does not shift the column."""
    empty = tmp_path / "empty.csv"
    empty.write_text("age\n")
    code, _, err = run_cli(
        [
            "release",
            str(empty),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "9",
            "--integers",
            "-e",
            "1",
            "--seed",
            "0",
            "-o",
            str(tmp_path / "e.json"),
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads((tmp_path / "e.json").read_text())["total"]["public"] is False
    commas = tmp_path / "commas.csv"
    commas.write_text("age,other\n1,9,\n2,9,\n3,9,\n")
    code, _, err = run_cli(
        [
            "release",
            str(commas),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "3",
            "--integers",
            "-e",
            "50",
            "--mechanism",
            "flat",
            "--seed",
            "0",
            "-o",
            str(tmp_path / "c.json"),
        ],
        capsys,
    )
    assert code == 0, err
    hist = json.loads((tmp_path / "c.json").read_text())["histogram"]["value"]
    assert [round(v) for v in hist] == [0, 1, 1, 1]


def test_optimized_above_its_limit_names_mechanisms_the_cli_knows(capsys):
    """Above the optimised strategies' bin limit the refusal names registered mechanisms
    ('hierarchical', 'wavelet'), which both --mechanisms and mechanism= accept."""
    from dprange.strategies.matrix import DENSE_COVARIANCE_LIMIT

    code, _, err = run_cli(
        ["error", "--n", str(DENSE_COVARIANCE_LIMIT + 1), "-e", "1", "--mechanisms", "optimized"], capsys
    )
    assert code == 2 and "hierarchical or wavelet mechanism" in err and "Hierarchical" not in err


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


@pytest.mark.parametrize("mechanism", ["dawa_hilbert", "dawa_pruned", "kd_tree", "agrid", "auto_pruned"])
def test_two_columns_release_by_a_data_aware_grid_mechanism(two_columns, tmp_path, capsys, mechanism):
    """A data-aware 2-D mechanism by name releases the grid of release_grid and says its answers have
    no error bars (DAWA's release records its inner 1-D strategy, not one per axis)."""
    path, age, hours = two_columns
    out = tmp_path / "grid.json"
    code, stdout, err = run_cli(grid_args(path, out, "-m", mechanism), capsys)
    assert code == 0 and err == ""
    saved = DataAwareGridRelease.from_json(out.read_text())
    domain = ProductDomain([Domain.integers(18, 59), Domain.integers(0, 49)])
    same = release_grid([age, hours], domain, 1.0, mechanism=mechanism, rng=4)
    np.testing.assert_allclose(saved.counts, same.counts, rtol=0, atol=1e-9)
    assert f"{mechanism} release of 'age' x 'hours': 42x50 cells" in stdout
    assert "(no error bars: the estimate has a data-dependent bias)" in stdout


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


def _run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr()


def test_cli_releases_a_glob_as_one_column_and_equals_the_in_memory_release(tmp_path, ints, capsys, monkeypatch):
    for k, part in enumerate(np.array_split(ints, 3)):
        write_csv(tmp_path / f"part-{k}.csv", part)
    whole = write_csv(tmp_path / "whole.csv", ints)
    common = ["-c", "x", "--lo", "-3", "--hi", "49", "--integers", "-e", "1", "-m", "flat", "--seed", "3"]
    code, _ = _run(["release", str(tmp_path / "part-*.csv"), *common, "-o", str(tmp_path / "glob.json")], capsys)
    assert code == 0
    code, _ = _run(["release", whole, *common, "-o", str(tmp_path / "whole.json")], capsys)
    assert code == 0
    monkeypatch.setattr("dprange.cli.options.STREAM_FROM_BYTES", 0)  # the same file through the streaming engine
    code, _ = _run(["release", whole, *common, "-o", str(tmp_path / "streamed.json")], capsys)
    assert code == 0
    hist = [
        json.loads((tmp_path / name).read_text())["histogram"] for name in ("glob.json", "whole.json", "streamed.json")
    ]
    assert hist[0] == hist[1] == hist[2]


def test_cli_stops_at_a_bad_value_in_the_last_file_and_writes_nothing(tmp_path, ints, capsys):
    write_csv(tmp_path / "part-0.csv", ints)
    write_csv(tmp_path / "part-1.csv", [1, 2, None])
    out = tmp_path / "out.json"
    argv = ["release", str(tmp_path / "part-*.csv"), "-c", "x", "--lo", "-3", "--hi", "49", "--integers", "-e", "1"]
    code, captured = _run([*argv, "-o", str(out)], capsys)
    assert code == 2 and not out.exists()
    assert captured.err.count("\n") == 1 and "row 4 of" in captured.err and "part-1.csv" in captured.err
    assert "--drop-missing" in captured.err


def test_cli_spark_master_needs_engine_spark(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_text("x\n1\n")
    args = ["release", str(path), "-c", "x", "--lo", "0", "--hi", "3", "--integers", "-e", "1"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--spark-master", "local[2]", "-o", str(tmp_path / "r.json")])
    assert exc.value.code == 2
    assert "--spark-master needs --engine spark" in capsys.readouterr().err


def test_cli_releases_a_data_aware_grid_by_name(tmp_path, capsys):
    import json

    from dprange.cli import main

    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 16, 400), rng.integers(0, 16, 400)
    path = tmp_path / "points.csv"
    path.write_text("a,b\n" + "".join(f"{u},{v}\n" for u, v in zip(a, b)))
    out = tmp_path / "grid.json"
    args = ["release", path, "-c", "a", "-c", "b", "--lo", 0, "--hi", 15, "--lo", 0, "--hi", 15, "--integers"]
    args += ["-e", 1, "--seed", 4, "-o", out, "-m", "hybrid_tree"]
    with pytest.raises(SystemExit) as exc:
        main([str(v) for v in args])
    stdout = capsys.readouterr().out
    assert exc.value.code == 0
    saved = json.loads(out.read_text())
    assert saved["kind"] == "data_aware_grid_release" and saved["error_bars"].startswith("not available")
    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    same = dprange.release_grid([a, b], domain, 1.0, mechanism="hybrid_tree", rng=4)
    np.testing.assert_allclose(np.reshape(saved["counts"], (16, 16)), same.counts)
    assert saved["provenance"]["parameters"]["private_steps"] == same.parameters["private_steps"]
    assert "no error bars" in stdout and "±" not in stdout
    with pytest.raises(SystemExit) as exc:
        main([str(v) for v in [*args, "--branching", 4]])
    assert exc.value.code != 0
    assert "--branching is not a parameter of --mechanism hybrid_tree" in capsys.readouterr().err


def test_cli_auto_data_is_the_2_d_choice_with_several_columns_and_the_1_d_one_with_one(tmp_path, capsys):
    """--mechanism auto-data names the 2-D auto-data (dprange.data_aware.auto_grid) with two
    --column and the 1-D one with one; the file records the features, the choice and the steps."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 16, 600)
    b = np.minimum(15, a + rng.integers(0, 3, 600))
    path = tmp_path / "points.csv"
    path.write_text("a,b\n" + "".join(f"{u},{v}\n" for u, v in zip(a, b)))
    out = tmp_path / "grid.json"
    args = ["release", path, "-c", "a", "-c", "b", "--lo", 0, "--hi", 15, "--lo", 0, "--hi", 15, "--integers"]
    code, _, err = run_cli([*args, "-e", 1, "--seed", 4, "-o", out, "--mechanism", "auto-data"], capsys)
    assert code == 0, err
    saved = json.loads(out.read_text())
    record = saved["provenance"]["parameters"] if "provenance" in saved else saved["selection"]
    assert [s["step"] for s in record["private_steps"]][:4] == ["total", "nonempty", "top", "offpeak"]
    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    same = dprange.release_grid([a, b], domain, 1.0, mechanism="auto-data", rng=4)
    np.testing.assert_allclose(np.reshape(load_saved_counts(saved), (16, 16)), same.counts, rtol=0, atol=1e-9)
    one = tmp_path / "one.json"
    code, stdout, err = run_cli(
        ["release", path, "-c", "a", "--lo", 0, "--hi", 15, "--integers", "-e", 1, "-o", one, "-m", "auto-data"], capsys
    )
    assert code == 0 and "auto-data release of 'a'" in stdout, err
    assert json.loads(one.read_text())["provenance"]["mechanism"] == "auto-data"


def load_saved_counts(saved: dict) -> np.ndarray:
    """The cell estimates of a saved k-D release of either kind (data-aware or exact)."""
    if saved["kind"] == "data_aware_grid_release":
        return np.asarray(saved["counts"], dtype=float)
    return load_grid_release(saved).counts


def test_cli_release_goes_through_dprange_release(ages_csv, tmp_path, capsys, monkeypatch):
    calls = []
    real = api.release

    def spy(values, domain, epsilon, **kwargs):
        calls.append(kwargs["mechanism"])
        return real(values, domain, epsilon, **kwargs)

    monkeypatch.setattr(api, "release", spy)
    code, out, err = run_cli(release_args(ages_csv, tmp_path / "r.json", "--workload", "prefix"), capsys)
    assert code == 0, err
    assert len(calls) == 1 and isinstance(calls[0], Mechanism)
    assert f"auto: chose {calls[0]!r} for the prefix workload" in out
    code, _, err = run_cli(
        release_args(ages_csv, tmp_path / "h.json", "--branching", "4,4", "--inference", "l1"), capsys
    )
    assert code == 0, err
    assert isinstance(calls[1], Hierarchical) and calls[1].branching == [4, 4] and calls[1].inference == "l1"


@pytest.mark.parametrize(
    "extra,message",
    [
        (["-m", "flat", "--branching", "4"], "--branching is not a parameter of --mechanism flat"),
        (["-m", "wavelet", "--root"], "--root is not a parameter of --mechanism wavelet"),
        (["-m", "auto", "--budget", "geometric"], "--budget cannot be given with --mechanism auto"),
    ],
)
def test_options_the_mechanism_does_not_take_are_refused(ages_csv, tmp_path, capsys, monkeypatch, extra, message):
    """They used to be ignored without a word (the release ran with other parameters than
    the user asked for); now they fail before the data is read."""
    import dprange.cli.release as cli_module

    monkeypatch.setattr(cli_module, "read_column", lambda *a: pytest.fail("data read before the options were checked"))
    code, _, err = run_cli(release_args(ages_csv, tmp_path / "r.json", *extra), capsys)
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


# ----------------------------------------------------------------------------- categories
ADULT_WORKCLASS = "Private,Self-emp-not-inc,Self-emp-inc,Federal-gov,Local-gov,State-gov,Without-pay,Never-worked"
ADULT_RACE = "White,Black,Asian-Pac-Islander,Amer-Indian-Eskimo,Other"


def adult_cells(*names):
    """Adult's text columns as the csv module reads them (cells stripped): the reference."""
    import csv

    from conftest import SHARED

    path = SHARED / "data" / "adult" / "adult.csv"
    if not path.exists():
        pytest.skip("needs ../shared/data/adult/adult.csv")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return str(path), [[row[name].strip() for row in rows] for name in names]


def test_release_of_a_categorical_column_of_adult_prints_and_writes_labels(tmp_path, capsys):
    """-c workclass --categories ... --other: at epsilon 1e6 (discrete noise 0) the JSON holds
    Adult's true counts per category (the unlisted '?' in the other bin), the table and the
    bar chart name the categories, and the JSON's domain keeps them."""
    path, (cells,) = adult_cells("workclass")
    out, png = tmp_path / "w.json", tmp_path / "w.png"
    args = ["release", path, "-c", "workclass", "--categories", f"workclass={ADULT_WORKCLASS}", "--other"]
    code, stdout, err = run_cli([*args, "-e", "1e6", "--seed", 0, "-o", out, "--plot", png], capsys)
    assert code == 0, err
    labels = ADULT_WORKCLASS.split(",")
    truth = [cells.count(label) for label in labels] + [sum(c not in labels for c in cells)]
    assert truth[-1] == cells.count("?") > 0
    data = json.loads(out.read_text())
    assert data["domain"] == {"kind": "categories", "categories": labels, "other": "other", "bins": 9}
    assert data["histogram"]["value"] == truth
    assert "for the identity workload" in stdout and "deciles" not in stdout
    for label, count in zip([*labels, "other"], truth):
        assert re.search(rf"^{re.escape(label)} +{count}\.0 ", stdout, re.M), label
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rel = load_release(str(out))
    assert rel.count_of(["Private", "other"]).value == truth[0] + truth[-1]


def test_release_of_two_categorical_columns_of_adult_is_a_labelled_two_way_table(tmp_path, capsys):
    path, (sex, race) = adult_cells("sex", "race")
    out = tmp_path / "sr.json"
    args = ["release", path, "-c", "sex", "-c", "race", "--categories", "sex=Male,Female"]
    args += ["--categories", f"race={ADULT_RACE}", "-e", "1e6", "--seed", 0, "-o", out, "--plot", tmp_path / "h.png"]
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    races = ADULT_RACE.split(",")
    truth = np.array([[sum(s == a and r == b for s, r in zip(sex, race)) for b in races] for a in ("Male", "Female")])
    rel = load_grid_release(out.read_text())
    np.testing.assert_allclose(rel.counts, truth, atol=1e-6)
    assert rel.labels == [["Male", "Female"], races]
    assert "sex x race: estimated counts" in stdout
    male = " ".join(f"{v:.1f}" for v in truth[0])
    assert re.search(r"^Male +" + r" +".join(re.escape(f"{v:.1f}") for v in truth[0]) + "$", stdout, re.M), male
    assert re.search(rf"^  Black +{truth[:, 1].sum()}\.0 ± ", stdout, re.M)


def test_categories_file_and_a_numeric_axis(tmp_path, capsys):
    """--categories-file (a label with a comma, blank lines skipped) beside a numeric --column
    whose --lo/--hi are the only ones given."""
    path = write_csv(tmp_path / "d.csv", ['"a, b"', "c", '"a, b"', "c", "c"], extra=None, header="k,n")
    listing = tmp_path / "k.txt"
    listing.write_text("a, b\n\nc\n", encoding="utf-8")
    out = tmp_path / "o.json"
    args = ["release", path, "-c", "k", "-c", "n", "--categories-file", f"k={listing}", "--lo", 0, "--hi", 4]
    code, stdout, err = run_cli([*args, "--integers", "-e", "1e6", "--seed", 1, "-o", out], capsys)
    assert code == 0, err
    rel = load_grid_release(out.read_text())
    np.testing.assert_allclose(rel.counts, [[1, 0, 1, 0, 0], [0, 1, 0, 1, 1]], atol=1e-6)
    assert rel.labels[0] == ["a, b", "c"]


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--categories", "wc=a"], "--categories names 'wc', which is not a --column"),
        (["--categories", "k"], "--categories takes COLUMN=a,b,c"),
        (["--categories", "k=a,b", "--categories", "k=a"], "categories of 'k' are given twice"),
        (["--categories", "k=a,a"], "--categories k: the category 'a' is listed twice"),
        (["--categories", "k=a,,b"], "reads as a missing value"),
        (["--categories-file", "k=/no/such/file"], "cannot read the categories file"),
        (["--categories", "k=a,b", "--lo", "0"], "--column k has --categories, which has no bounds or bins; drop --lo"),
        (["--categories", "k=a,b", "--workload", "prefix"], "categories are unordered; use 'identity'"),
        (["--categories", "k=a,b", "--other", "--clip"], "clip does not apply to categories"),
        (["--other", "--lo", "0", "--hi", "3", "--integers"], "--other adds a bin to categorical columns"),
        (["--categories", "k=a"], r"1 values are not among the 1 public categories \(e.g. 'b'\).*\(--other\)"),
        (
            ["--lo", "0", "--hi", "3", "--integers"],
            r"not numeric \(e.g. 'a' on row 2\); a column of .* \(--categories COL=a,b,c\)$",
        ),
    ],
)
def test_categorical_options_are_checked_with_one_line_errors(tmp_path, capsys, extra, message):
    path = write_csv(tmp_path / "d.csv", ["a", "b", "a"], header="k,n")
    code, stdout, err = run_cli(["release", path, "-c", "k", "-e", 1, "-o", tmp_path / "o.json", *extra], capsys)
    assert code == 2 and re.search(message, err), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o.json").exists()
