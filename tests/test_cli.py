"""The dprange command: happy paths and one-line errors with exit status 2."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from _helpers import run_cli

from dprange.answers.release import load_release


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    rng = np.random.default_rng(0)
    ages = rng.integers(18, 90, 500)
    with open(path, "w") as fh:
        fh.write("age,name,score\n")
        for i, a in enumerate(ages):
            fh.write(f"{a},p{i},{rng.random():.4f}\n")
    return path


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


def test_console_script_help_and_demo(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "dprange")
    result = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "release" in result.stdout
    result = subprocess.run([exe, "release", "--help"], capture_output=True, text=True)
    assert "--neighbours" in result.stdout and "--budget" in result.stdout
    result = subprocess.run([exe, "demo", "--output", str(tmp_path / "demo")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "demo" / "release.json").exists()
    result = subprocess.run([exe, "release", "x.csv"], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr


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


def test_error_command_table_and_json(capsys):
    code, out, err = run_cli(["error", "--n", "2000", "--workload", "all-range", "--epsilon", "1"], capsys)
    assert code == 0, err
    assert "recommended: Hierarchical" in out  # above 1024 bins auto ranks only a cached optimised strategy
    code, out, err = run_cli(["error", "--n", "1000", "--workload", "all-range", "--epsilon", "1"], capsys)
    assert code == 0, err
    assert "recommended: Optimized(workload='all-range', template='p-identity'" in out  # optimised up to 1024
    code, out, err = run_cli(
        ["error", "--n", "64", "-w", "identity", "-e", "1", "--mechanisms", "flat,h2,wavelet", "--json"], capsys
    )
    data = json.loads(out)
    assert data["recommended"].startswith("Flat") and len(data["candidates"]) == 3
    code, _, err = run_cli(["error", "--n", "64", "-e", "1", "--mechanisms", "h1x"], capsys)
    assert code == 2 and "unknown mechanism" in err


def test_error_command_ranks_the_optimised_mechanism_on_the_chosen_workload(capsys):
    """--mechanisms optimized ranks the strategy optimised for --workload (it was the one for
    all ranges), with the error expected_error gives it."""
    from dprange.analysis import expected_error
    from dprange.mechanisms.optimized import Optimized

    code, out, err = run_cli(
        ["error", "--n", "32", "-w", "prefix", "-e", "1", "--mechanisms", "optimized", "--json"], capsys
    )
    assert code == 0, err
    (row,) = json.loads(out)["candidates"]
    assert "workload='prefix'" in row["mechanism"]
    assert row["expected_error"] == pytest.approx(expected_error(Optimized("prefix"), "prefix", 1.0, n=32), rel=1e-12)


def test_error_command_prints_the_svd_bound_under_add_remove(capsys):
    """The 1-D table ends with Li and Miklau's bound for the noise in use (tight for Flat on the
    identity workload: its RMSE is the bound's); under replace no bound is printed (a public
    total is free there, so the add/remove bound need not hold)."""
    from dprange.analysis import svd_bound
    from dprange.workloads import AllRange, Identity

    code, out, err = run_cli(["error", "--n", "64", "-w", "identity", "-e", "1", "--mechanisms", "flat"], capsys)
    assert code == 0, err
    bound = svd_bound(Identity(64), 1.0)
    assert f"(Li and Miklau, SVD bound): RMSE {bound**0.5:.4f}" in out
    assert f"{bound**0.5:>12.4f}  Flat(" in out
    code, out, err = run_cli(["error", "--n", "50", "-e", "1", "--delta", "1e-6", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["svd_bound"] == pytest.approx(svd_bound(AllRange(50), 1.0, 1e-6))
    assert min(c["expected_error"] for c in data["candidates"]) >= data["svd_bound"]
    code, out, err = run_cli(["error", "--n", "50", "-e", "1", "--neighbours", "replace", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["svd_bound"] is None
    code, out, _ = run_cli(["error", "--n", "50", "-e", "1", "--neighbours", "replace"], capsys)
    assert "SVD bound" not in out


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_error_command_prints_the_exact_l2_optimum_on_small_domains(delta, capsys):
    """Up to 256 bins under add/remove the 1-D table also gives the exact optimum of the L2
    program (dprange.analysis.l2_optimum_bound): between the SVD bound and every candidate,
    reached by the optimised candidate under (epsilon, delta); under replace up to 128 bins the
    replace program's (below every candidate; no SVD bound there); none above."""
    from dprange.analysis import l2_optimum_bound
    from dprange.workloads import Prefix

    base = ["error", "--n", "48", "-w", "prefix", "-e", "1", "--delta", str(delta)]
    code, out, err = run_cli([*base, "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    optimum = l2_optimum_bound(Prefix(48), 1.0, delta)
    assert data["l2_optimum_bound"] == pytest.approx(optimum, rel=1e-9)
    assert data["svd_bound"] < optimum <= min(c["expected_error"] for c in data["candidates"])
    if delta > 0:
        assert data["expected_error"] <= 1.001 * optimum and "l2-optimal" in data["recommended"]
    code, out, err = run_cli(base, capsys)
    assert code == 0, err
    label = "least error of any matrix mechanism with this noise" if delta else "tighter lower bound"
    assert label in out and f"RMSE {optimum**0.5:.4f}" in out
    code, out, err = run_cli([*base, "--neighbours", "replace", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    replace = l2_optimum_bound(Prefix(48), 1.0, delta, neighbours="replace")
    assert data["l2_optimum_bound"] == pytest.approx(replace, rel=1e-9) and data["svd_bound"] is None
    assert replace <= min(c["expected_error"] for c in data["candidates"])
    for other in (["--n", "257"], ["--n", "129", "--neighbours", "replace"]):
        code, out, err = run_cli(["error", *other, "-w", "prefix", "-e", "1", "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["l2_optimum_bound"] is None


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_error_command_prints_the_exact_kd_optimum(delta, capsys):
    """k-D: rectangles with sides up to 256 get the product of the axes' L2 optima (a line and
    JSON l2_optimum_bound, between the SVD bound and every candidate); marginals get the SVD
    bound as their exact optimum (JSON only: the line above says it); none with a side above
    256 or under replace."""
    from dprange.analysis import grid as grid_analysis

    base = ["error", "--shape", "12x10", "-e", "1", "--delta", str(delta)]
    code, out, err = run_cli([*base, "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    optimum = grid_analysis.l2_optimum_bound((12, 10), "all-rectangles", 1.0, delta)
    assert data["l2_optimum_bound"] == pytest.approx(optimum, rel=1e-12)
    assert data["svd_bound"] < optimum <= min(c["expected_error"] for c in data["candidates"])
    code, out, err = run_cli(base, capsys)
    assert code == 0, err
    assert f"RMSE {optimum**0.5:.4f}" in out and ("optimized_kronecker" in out) == (delta > 0)
    code, out, err = run_cli([*base, "-w", "marginals", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["l2_optimum_bound"] == data["svd_bound"]
    for other in (["--shape", "257x2"], ["--shape", "12x10", "--neighbours", "replace"]):
        code, out, err = run_cli(["error", *other, "-e", "1", "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["l2_optimum_bound"] is None


BOUND_LINE = "lower bound for any matrix mechanism (Li and Miklau, SVD bound): RMSE"


def _expected_svd_bound(size: list, epsilon: float, delta: float) -> float:
    """The bound the error command should report: 1-D all ranges (--n) or k-D all rectangles (--shape)."""
    from dprange.analysis import grid as grid_analysis
    from dprange.analysis import svd_bound
    from dprange.workloads import AllRange

    if size[0] == "--n":
        return svd_bound(AllRange(int(size[1])), epsilon, delta)
    return grid_analysis.svd_bound(tuple(int(s) for s in size[1].split("x")), "all-rectangles", epsilon, delta)


@pytest.mark.parametrize("size", [["--n", "40"], ["--shape", "6x5"], ["--shape", "4x3x2"]])
@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_error_command_gives_the_svd_bound_only_under_add_remove(size, delta, capsys):
    """Li and Miklau's bound holds under add/remove; under replace a public total is free and a
    mechanism may go below it, so neither the table nor the JSON may carry it there (1-D and k-D;
    the 1-D table gives the replace program's exact optimum instead, tested above)."""
    base = ["error", *size, "-e", "1", "--delta", str(delta)]
    bound = _expected_svd_bound(size, 1.0, delta)
    code, out, err = run_cli([*base, "--neighbours", "add_remove"], capsys)
    assert code == 0, err
    assert f"{BOUND_LINE} {bound**0.5:.4f}" in out
    code, out, err = run_cli([*base, "--neighbours", "add_remove", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["svd_bound"] == pytest.approx(bound, rel=1e-12)
    assert min(c["expected_error"] for c in data["candidates"]) >= bound * (1 - 1e-9)
    code, out, err = run_cli([*base, "--neighbours", "replace"], capsys)
    assert code == 0, err
    assert "SVD bound" not in out and BOUND_LINE not in out
    code, out, err = run_cli([*base, "--neighbours", "replace", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["svd_bound"] is None


def test_error_command_gives_the_closed_form_svd_bound_above_4096_bins(capsys):
    """All ranges, prefixes and the identity have closed-form singular values: the bound at any
    n; a workload without one (random ranges) still stops at 4096 bins (an O(n^3) eigendecomposition)."""
    from dprange.analysis import svd_bound
    from dprange.workloads import make_workload

    for workload in ("all-range", "prefix", "identity"):
        code, out, err = run_cli(
            ["error", "--n", "5000", "-w", workload, "-e", "1", "--mechanisms", "flat", "--json"], capsys
        )
        assert code == 0, err
        assert json.loads(out)["svd_bound"] == pytest.approx(svd_bound(make_workload(workload, 5000), 1.0), rel=1e-12)
    code, out, err = run_cli(["error", "--n", "5000", "-w", "prefix", "-e", "1", "--mechanisms", "flat"], capsys)
    assert f"{BOUND_LINE} {svd_bound(make_workload('prefix', 5000), 1.0) ** 0.5:.4f}" in out
    args = ["error", "--n", "5000", "-w", "random-ranges", "--queries", "50", "-e", "1", "--mechanisms", "flat"]
    code, out, err = run_cli([*args, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["svd_bound"] is None
    code, out, err = run_cli(args, capsys)
    assert code == 0 and "SVD bound" not in out


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


def test_ldp_encode_aggregate_simulate(csv_file, tmp_path, capsys):
    a, b, c = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "c.npz"
    for path, eps, seed in ((a, "1", "1"), (b, "1", "2"), (c, "2", "3")):
        code, _, err = run_cli(
            [
                "ldp",
                "encode",
                str(csv_file),
                "-c",
                "age",
                "--lo",
                "0",
                "--hi",
                "127",
                "-e",
                eps,
                "--seed",
                seed,
                "-o",
                str(path),
            ],
            capsys,
        )
        assert code == 0, err
    out_json = tmp_path / "rel.json"
    code, out, err = run_cli(
        ["ldp", "aggregate", str(a), str(b), "--lo", "0", "--hi", "127", "-o", str(out_json)], capsys
    )
    assert code == 0, err
    data = json.loads(out_json.read_text())
    assert data["mechanism"] == "ldp-hierarchical" and data["total"]["value"] == 1000
    code, _, err = run_cli(["ldp", "aggregate", str(a), str(c)], capsys)
    assert code == 2 and "epsilon=2.0 (expected 1.0)" in err
    (tmp_path / "junk.npz").write_bytes(b"junk")
    code, _, err = run_cli(["ldp", "aggregate", str(tmp_path / "junk.npz")], capsys)
    assert code == 2 and "malformed" in err
    np.save(tmp_path / "h.npy", np.array([5, 0, 3, 9, 1, 1, 0, 2]))
    code, out, err = run_cli(
        ["ldp", "simulate", str(tmp_path / "h.npy"), "-e", "1", "--scale", "1000", "--protocol", "haar", "--seed", "0"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["users"] == 21000


# --------------------------------------------------------------------- hardening (review items)
from dprange.cli import options as _cli_helpers  # noqa: E402
from dprange.cli.options import StagedOutputs, cli_message  # noqa: E402

RELEASE = [
    "release",
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
    "0",
    "--mechanism",
    "hierarchical",
]


def _release(csv_file, *extra):
    return [RELEASE[0], str(csv_file), *RELEASE[1:], *extra]


@pytest.mark.parametrize(
    "library,cli",
    [
        (
            "3 values are missing (NaN/None); clean them or pass drop_missing=True",
            "3 values are missing (NaN/None); clean them or pass --drop-missing",
        ),
        (
            "2 values lie outside the public bounds [0, 1]; widen the bounds or pass clip=True to clip them",
            "2 values lie outside the public bounds [0, 1]; widen the bounds or pass --clip to clip them",
        ),
        (
            "the integer domain got non-integer values; use Domain.interval for real values",
            "the integer domain got non-integer values; give --bins N (equal bins over [lo, hi]) for real values",
        ),
        (
            "integer domain bound lo must be an integer, got 0.5",
            "--lo (one bin per integer) must be an integer, got 0.5",
        ),
        ("domain bound hi must be a finite number, got inf", "--hi must be a finite number, got inf"),
        ("bins must be an integer >= 1, got 0", "--bins must be an integer >= 1, got 0"),
        ("branching must be an integer >= 2, got 1", "--branching must be an integer >= 2, got 1"),
        (
            "every branching factor must be an integer >= 2, got 0",
            "every --branching factor must be an integer >= 2, got 0",
        ),
        (
            "the branching list is empty; give at least one factor >= 2",
            "the --branching list is empty; give at least one factor >= 2",
        ),
        (
            "budget list must have one entry per measured level (3), got 2",
            "--budget list must have one entry per measured level (3), got 2",
        ),
        (
            "every entry of the budget list must be a positive finite number",
            "every entry of --budget must be a positive finite number",
        ),
        ("epsilon must be a positive finite number, got 0.0", "--epsilon must be a positive finite number, got 0.0"),
        ("delta must be in [0, 1), got 1.0", "--delta must be in [0, 1), got 1.0"),
        (
            "Gaussian noise needs delta > 0; pass delta or use Laplace noise",
            "Gaussian noise needs delta > 0; pass --delta or choose --noise discrete_laplace",
        ),
        ("rng seed must be a non-negative integer, got -1", "--seed must be a non-negative integer, got -1"),
        ("k must be an integer >= 1, got 0", "--queries must be an integer >= 1, got 0"),
        ("a message\non two lines", "a message on two lines"),
    ],
)
def test_cli_message_speaks_in_options(library, cli):
    assert cli_message(library) == cli


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


def test_empty_output_path_writes_nothing_and_fails(csv_file, tmp_path, capsys, monkeypatch):
    """W10: -o '' used to print 'wrote' and exit 0 without writing anything."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = run_cli(_release(csv_file, "-o", ""), capsys)
    assert code == 2 and "--output is empty" in err and "wrote" not in out
    assert os.listdir(work) == []


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


def test_staged_outputs_write_all_or_nothing(tmp_path, monkeypatch):
    """Files appear only through os.replace of a complete temporary file; when one output
    cannot be written, the others are not written either and created folders vanish."""
    staged = StagedOutputs()
    staged.add(str(tmp_path / "a" / "b" / "one.json"), "{}")
    staged.add(str(tmp_path / "blocker" / "two.png"), b"png")
    (tmp_path / "blocker").write_text("a file where a folder is needed")
    with pytest.raises(OSError):
        staged.commit()
    assert sorted(os.listdir(tmp_path)) == ["blocker"]
    good = StagedOutputs()
    good.add(str(tmp_path / "a" / "one.json"), "{}")
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(
        _cli_helpers.os, "replace", lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst))
    )
    good.commit()
    assert (tmp_path / "a" / "one.json").read_text() == "{}"
    assert len(replaced) == 1 and os.path.dirname(replaced[0][0]) == str(tmp_path / "a")
    assert os.listdir(tmp_path / "a") == ["one.json"]


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
    "args,message",
    [
        (["release", "x.csv", "--bogus"], "No such option '--bogus'"),
        (["release", "x.csv", "-c", "a", "-e", "1", "--mechanism", "bogus"], "'bogus' is not one of"),
        (["release"], "Missing argument 'INPUT'"),
        (["release", "x.csv", "-c", "a", "-e", "one"], "'one' is not a valid float"),
        (["error", "--n", "8"], "Missing option '--epsilon'"),
        (["ldp", "encode", "x.csv", "-c", "a", "-e", "1", "--branching", "two"], "'two' is not a valid integer"),
    ],
)
def test_usage_errors_are_one_line(capsys, args, message):
    """M6: click's three-line usage errors become one line 'dprange: error: ...' with exit 2."""
    code, out, err = run_cli(args, capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == [err.strip()] and err.startswith("dprange: error: ") and message in err


def test_no_command_prints_help_and_one_error_line(capsys):
    code, out, err = run_cli([], capsys)
    assert code == 2 and "release" in out and err.startswith("dprange: error: no command given")
    assert len(err.splitlines()) == 1


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


def test_error_command_limits(capsys):
    for args, message in (
        (["--n", "1000000000"], "more than the"),
        (["--n", "64", "-w", "random-ranges", "--queries", "100000000000"], "--queries"),
        (["--n", "64", "--mechanisms", "h99999999999"], "pads a level"),
        (["--n", "64", "--noise", "gaussian"], "pass --delta"),
    ):
        code, _, err = run_cli(["error", "-e", "1", *args], capsys)
        assert code == 2 and message in err, err


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


def test_redact_sets_the_switch_for_the_run_only(csv_file, tmp_path, capsys, monkeypatch):
    """M7: --redact sets DPRANGE_REDACT=1 while the command runs and restores it afterwards."""
    import dprange.cli.release as cli_module

    monkeypatch.delenv("DPRANGE_REDACT", raising=False)
    seen = []
    real = cli_module.read_column

    def spy(*args):
        seen.append(os.environ.get("DPRANGE_REDACT"))
        return real(*args)

    monkeypatch.setattr(cli_module, "read_column", spy)
    code, _, err = run_cli(_release(csv_file, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 0, err
    code, _, err = run_cli(_release(csv_file, "-o", str(tmp_path / "r.json")), capsys)
    assert code == 0, err
    assert seen == ["1", None] and "DPRANGE_REDACT" not in os.environ


@pytest.mark.parametrize("command", [["ldp", "encode"], ["ldp", "aggregate"], ["ldp", "simulate"], ["release"]])
def test_redact_is_an_option_of_release_and_ldp(command):
    from click.testing import CliRunner

    from dprange.cli.group import cli

    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "--redact" in result.output


def test_redact_keeps_raw_values_and_row_numbers_out(tmp_path, capsys):
    path = tmp_path / "secret.csv"
    path.write_text("age\n3\n4\nsecret-value-991\n")
    code, _, err = run_cli(_release(path, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "not numeric" in err
    assert "secret-value-991" not in err and "row 4" not in err
    path.write_text("age\n3\n\n\n\n\n\n\n5\n")
    code, _, err = run_cli(_release(path, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 2 and "missing" in err and "7 values" not in err


def test_internal_error_is_one_line_and_redacted(csv_file, tmp_path, capsys, monkeypatch):
    """A bug is still one line (exit 1, asking for a report); with --redact its message,
    which might quote data, is left out."""
    import dprange.cli.release as cli_module

    def broken(*args):
        raise RuntimeError("value 12345 of row 7")

    monkeypatch.setattr(cli_module, "read_column", broken)
    code, _, err = run_cli(_release(csv_file, "-o", str(tmp_path / "r.json")), capsys)
    assert code == 1 and err.startswith("dprange: error: internal error (RuntimeError: value 12345")
    code, _, err = run_cli(_release(csv_file, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 1 and "RuntimeError" in err and "12345" not in err and len(err.splitlines()) == 1


def test_simulate_refuses_fractional_histograms(tmp_path, capsys):
    """W8: a float histogram used to be truncated silently (5.7 became 5 users)."""
    np.save(tmp_path / "f.npy", np.array([5.7, 1.0, 2.0, 3.0]))
    code, _, err = run_cli(
        ["ldp", "simulate", str(tmp_path / "f.npy"), "-e", "1", "--protocol", "flat", "--seed", "0"], capsys
    )
    assert code == 2 and "whole-number counts" in err
    np.save(tmp_path / "w.npy", np.array([5.0, 1.0, 2.0, 3.0]))  # whole numbers stored as floats are fine
    code, out, err = run_cli(
        ["ldp", "simulate", str(tmp_path / "w.npy"), "-e", "1", "--protocol", "flat", "--seed", "0", "--scale", "10"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["users"] == 110
    np.save(tmp_path / "s.npy", np.array(["1", "2"]))
    code, _, err = run_cli(["ldp", "simulate", str(tmp_path / "s.npy"), "-e", "1"], capsys)
    assert code == 2 and "numeric histogram" in err


def test_ldp_encode_checks_epsilon_before_reading(csv_file, tmp_path, capsys, monkeypatch):
    """C3 at the command line: OLH at epsilon 30 used to encode reports no server could aggregate."""
    import dprange.cli.ldp as ldp_cli

    monkeypatch.setattr(ldp_cli, "read_column", lambda *a: pytest.fail("data read before epsilon was checked"))
    code, _, err = run_cli(
        [
            "ldp",
            "encode",
            str(csv_file),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "127",
            "-e",
            "30",
            "--oracle",
            "olh",
            "-o",
            str(tmp_path / "r.npz"),
        ],
        capsys,
    )
    assert code == 2 and "OLH supports epsilon <= 11.09" in err and not (tmp_path / "r.npz").exists()


def test_ldp_aggregate_refuses_the_same_file_twice_and_wrong_bounds(csv_file, tmp_path, capsys):
    rep = tmp_path / "a.npz"
    code, _, err = run_cli(
        [
            "ldp",
            "encode",
            str(csv_file),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "127",
            "-e",
            "1",
            "--seed",
            "1",
            "-o",
            str(rep),
        ],
        capsys,
    )
    assert code == 0, err
    code, _, err = run_cli(["ldp", "aggregate", str(rep), str(rep), "-o", str(tmp_path / "r.json")], capsys)
    assert code == 2 and "given twice" in err
    code, _, err = run_cli(
        ["ldp", "aggregate", str(rep), "--lo", "0", "--hi", "63", "-o", str(tmp_path / "r.json")], capsys
    )
    assert code == 2 and "give 64 bins but the reports cover 128 values" in err
    assert not (tmp_path / "r.json").exists()
    code, _, err = run_cli(
        ["ldp", "aggregate", str(rep), "--lo", "0", "--hi", "127", "-o", str(tmp_path / "r.json")], capsys
    )
    assert code == 0 and json.loads((tmp_path / "r.json").read_text())["total"]["value"] == 500


def test_redact_in_ldp_encode_keeps_raw_values_out(tmp_path, capsys):
    path = tmp_path / "secret.csv"
    path.write_text("age\n3\n4\nsecret-value-517\n")
    code, _, err = run_cli(
        [
            "ldp",
            "encode",
            str(path),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "127",
            "-e",
            "1",
            "--redact",
            "-o",
            str(tmp_path / "r.npz"),
        ],
        capsys,
    )
    assert code == 2 and "not numeric" in err
    assert "secret-value-517" not in err and "row 4" not in err


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
