"""dprange.cli.render: the notes the commands print: a named mechanism not made for the workload,
and the strategy measured (the identity in place of an optimum) and the others built."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import grid_args, run_cli, true_quantiles

from conftest import SHARED
from dprange.cli.demo import example_path
from dprange.cli.render import strategy_note
from dprange.io import read_column
from dprange.mechanisms.optimized import Optimized


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


@pytest.mark.usefixtures("private_cache")
def test_the_command_line_note_names_the_identity():
    mech = Optimized("all-range")
    mech.design(64, 5.0)
    note = strategy_note(mech.strategy(64).describe())
    assert note.startswith("strategy: the identity (64 bins), measured in place of the optimised p-identity strategy")


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("n", "epsilon", "measured_choice"), [(64, 5.0, "identity"), (64, 1.0, "optimised")])
def test_the_strategy_measured_is_not_listed_as_also_built(n, epsilon, measured_choice):
    """One template (p-identity) builds one strategy: the release names it (or the identity
    measured in its place) and lists nothing else, nor counts its time twice."""
    mech = Optimized("all-range", template="p-identity")
    mech.design(n, epsilon)
    described = mech.strategy(n).describe()
    assert described["measured"] == measured_choice
    assert "also_built" not in described
    note = strategy_note(described)
    assert "also built" not in note and f"optimised in {described['optimisation_seconds']:.2f} s" in note


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("columns", "epsilon", "said"), [(1, 5, True), (2, 5, True), (2, 1, False)])
def test_the_command_line_says_when_the_identity_was_measured(tmp_path, capsys, columns, epsilon, said):
    rng = np.random.default_rng(1)
    path = tmp_path / "data.csv"
    path.write_text("a,b\n" + "".join(f"{a},{b}\n" for a, b in zip(rng.integers(0, 40, 300), rng.integers(0, 40, 300))))
    args = ["release", path, "-c", "a", "--lo", 0, "--hi", 39, "--integers", "-e", epsilon, "--seed", 2]
    if columns == 2:
        args += ["-c", "b", "--lo", 0, "--hi", 39, "-m", "optimized_kronecker"]
    else:
        args += ["-m", "optimized"]
    code, stdout, err = run_cli([*args, "-o", tmp_path / "out.json"], capsys)
    assert code == 0, err
    message = "measured the identity on every axis" if columns == 2 else "strategy: the identity (40 bins)"
    assert (message in stdout) is said


# The decile table on point masses: the interval first, no point inside a concentrated bin.
ADULT = SHARED / "data" / "adult" / "adult.csv"
DECILES = np.linspace(0.1, 0.9, 9)


@pytest.mark.skipif(not ADULT.exists(), reason="needs ../shared/data/adult/adult.csv")
def test_cli_prints_the_interval_first_and_no_point_in_the_zero_bin(tmp_path, capsys):
    """The issue's command: every decile row is its interval [0, 100] then no point."""
    out = tmp_path / "cg.json"
    args = ["release", ADULT, "-c", "capital-gain", "--lo", "0", "--hi", "100000", "--bins", "1000"]
    code, stdout, err = run_cli([*args, "-e", "1", "--workload", "prefix", "-o", str(out)], capsys)
    assert code == 0, err
    rows = [line.split() for line in stdout.splitlines() if line.strip()[:3] in {f"0.{i}" for i in range(1, 10)}]
    assert len(rows) == 9
    for row in rows:
        assert row[1:] == ["[", "0,", "100]", "no", "point:", "in", "bin", "[0,", "100)"], row


@pytest.mark.slow
def test_demo_first_decile_is_the_zero_bin(tmp_path, capsys):
    """The demo's incomes are 0 for 12.3% of the records: the first decile (truly 0) is printed
    as its bin from 0, with no point."""
    incomes = read_column(example_path(), "income")
    assert true_quantiles(incomes, DECILES)[0] == 0
    code, stdout, err = run_cli(["demo", "--output", str(tmp_path / "demo"), "--seed", "4"], capsys)
    assert code == 0, err
    first = next(line for line in stdout.splitlines() if line.strip().startswith("0.1 "))
    assert first.split()[1:] == ["[", "0,", "244.141]", "no", "point:", "in", "bin", "[0,", "244.141)"], first
