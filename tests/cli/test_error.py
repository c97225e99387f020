"""dprange.cli.error: ``dprange error`` ranks mechanisms by exact error in 1-D (--n) and k-D
(--shape, --ranges), prints the SVD bound and the exact L2 optimum where they hold, builds only
the strategies it ranks, and refuses bad options in one line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from _helpers import cached_templates, run_cli

from dprange import Domain, ProductDomain
from dprange.analysis.grid import expected_error, select_grid, svd_bound
from dprange.api import release_grid
from dprange.mechanisms.grid import Kronecker, load_grid_release


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
@pytest.mark.slow
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
@pytest.mark.slow
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


def test_error_command_limits(capsys):
    for args, message in (
        (["--n", "1000000000"], "more than the"),
        (["--n", "64", "-w", "random-ranges", "--queries", "100000000000"], "--queries"),
        (["--n", "64", "--mechanisms", "h99999999999"], "pads a level"),
        (["--n", "64", "--noise", "gaussian"], "pass --delta"),
    ):
        code, _, err = run_cli(["error", "-e", "1", *args], capsys)
        assert code == 2 and message in err, err


@pytest.mark.usefixtures("private_cache")
def test_the_error_command_builds_only_the_strategy_at_its_delta(capsys):
    from dprange.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["error", "--n", "32", "-w", "prefix", "-e", "1", "--delta", "1e-6", "--mechanisms", "flat,optimized"])
    assert exc.value.code == 0, capsys.readouterr().err
    assert cached_templates() == {"l2"}


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


@pytest.mark.usefixtures("private_cache")
def test_cli_error_and_release_choose_the_optimised_product(tmp_path, capsys):
    code, stdout, err = run_cli(["error", "--shape", "32x32", "-e", 1], capsys)
    assert code == 0 and err == ""
    selection = select_grid((32, 32), 1.0)
    assert f"recommended: {selection.mechanism!r}" in stdout and "OptimizedKronecker" in stdout
    assert f"{math.sqrt(selection.error):>12.4f}  {selection.mechanism!r}" in stdout
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 32, 400), rng.integers(0, 32, 400)
    path, out = tmp_path / "two.csv", tmp_path / "grid.json"
    path.write_text("a,b\n" + "".join(f"{x},{y}\n" for x, y in zip(a, b)))
    args = ["release", path, "-c", "a", "-c", "b", "--lo", 0, "--hi", 31, "--lo", 0, "--hi", 31, "--integers"]
    code, stdout, err = run_cli([*args, "-e", 1, "--seed", 3, "-o", out], capsys)
    assert code == 0 and err == ""
    assert f"auto: chose {selection.mechanism!r} for the all-rectangles workload" in stdout
    saved = load_grid_release(out.read_text())
    domain = ProductDomain([Domain.integers(0, 31), Domain.integers(0, 31)])
    same = release_grid([a, b], domain, 1.0, rng=3)
    np.testing.assert_allclose(saved.counts, same.counts, rtol=0, atol=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_cli_error_lists_the_five_axis_product_as_excluded_with_the_quantisation_reason(capsys):
    code, stdout, err = run_cli(["error", "--shape", "3x3x3x2x2", "-e", 1, "--delta", 1e-6], capsys)
    assert code == 0 and err == ""
    lines = [row for row in stdout.splitlines() if row.startswith("excluded OptimizedKronecker")]
    assert len(lines) == 2  # both L2 templates
    for line in lines:
        assert "quantised to integers and the factors multiply" in line and "kd_hierarchy" in line
