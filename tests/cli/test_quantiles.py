"""dprange.cli.quantiles: ``dprange quantiles`` prints and saves the method, its grid, JointExp's
precision and charge, and what the noisy count cost."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dprange.quantile_mechanisms import bins as qb
from dprange.quantile_mechanisms import joint_exp


def test_cli_declares_the_grid(tmp_path, capsys):
    """dprange quantiles --method joint_exp names its output grid in the text and the JSON."""
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(str(v) for v in np.random.default_rng(10).integers(0, 100, 200)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "0", "--hi", "99", "-e", "1", "--method", "joint_exp"]
    outputs = {}
    for extra in ([], ["--json"], ["--integers", "--json"]):
        with pytest.raises(SystemExit) as done:
            main([*base, "--q", "0.25,0.75", "--n-max", "1000", "--seed", "1", *extra])
        assert done.value.code == 0
        outputs[tuple(extra)] = capsys.readouterr().out
    assert "output grid: 1099511627776 cells of [0, 99], cell midpoints" in outputs[()].splitlines()
    real = json.loads(outputs[("--json",)])
    grid = joint_exp.JointGrid.from_bounds((0, 99), integer=False)
    assert real["grid"] == grid.to_dict() and real["grid"]["cells"] == 2**40
    assert all(grid.value(round(v / grid.cells.width - 0.5)) == v for v in real["values"])
    integer = json.loads(outputs[("--integers", "--json")])
    assert integer["grid"] == {"lower": 0.0, "upper": 99.0, "cells": 100, "subcells": 2**45, "values": "integers"}


def test_cli_prints_jointexps_precision_and_charge(tmp_path, capsys):
    """dprange quantiles --method joint_exp names the working precision and the epsilon run at,
    in the text output and the JSON (the code as it was printed neither)."""
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(f"{v:.4f}" for v in np.random.default_rng(10).normal(0, 1, 300)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "-5", "--hi", "5", "-e", "1", "--method", "joint_exp"]
    outputs = {}
    for extra in ([], ["--json"]):
        with pytest.raises(SystemExit) as done:
            main([*base, "--q", "0.25,0.75", "--n-max", "1000", "--seed", "1", *extra])
        assert done.value.code == 0
        outputs[tuple(extra)] = capsys.readouterr().out
    record = json.loads(outputs[("--json",)])["float_error"]
    run = 1.0 - joint_exp.joint_charged_epsilon(1.0, np.array([0.25, 0.75]), "add_remove", 1000, 10.0, "double")
    assert record["precision"] == "double" and record["charge"] == pytest.approx(run, rel=1e-9)
    line = f"float error: double precision, ran at epsilon {record['run_epsilon']:.10g} (charge {record['charge']:.3g})"
    assert line in outputs[()].splitlines()


def test_cli_quantiles(tmp_path, capsys):
    from dprange.cli import main

    path = tmp_path / "data.csv"
    rng = np.random.default_rng(12)
    path.write_text("age\n" + "\n".join(str(v) for v in rng.integers(20, 60, 3000)) + "\n")
    with pytest.raises(SystemExit) as done:
        main(
            [
                "quantiles",
                str(path),
                "-c",
                "age",
                "--lo",
                "0",
                "--hi",
                "100",
                "--integers",
                "-e",
                "1",
                "--q",
                "0.25,0.5",
                "--method",
                "histogram",
                "--seed",
                "1",
            ]
        )
    out = capsys.readouterr().out
    assert done.value.code == 0 and "q=0.5:" in out and "[" in out and "bin edges" in out
    with pytest.raises(SystemExit) as done:
        main(["quantiles", str(path), "-c", "age", "-e", "1"])
    assert done.value.code == 2 and "--private-bounds" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        main(
            ["quantiles", str(path), "-c", "age", "--private-bounds", "-e", "1", "--integers", "--json", "--seed", "3"]
        )
    result = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and result["bounds"]["source"] == "private" and result["bounds"]["upper"] == 64.0


def test_cli_count_share(tmp_path, capsys):
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(f"{v:.4f}" for v in np.random.default_rng(10).normal(0, 1, 2000)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "-5", "--hi", "5", "-e", "1", "--method", "histogram"]
    with pytest.raises(SystemExit) as done:
        main([*base, "--seed", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and out["record_count"]["source"] == "noisy count"
    assert out["record_count"]["epsilon"] == pytest.approx(0.05)
    assert out["bins"] == qb.histogram_bins(out["record_count"]["value"] * 0.95)
    with pytest.raises(SystemExit) as done:
        main([*base, "--seed", "1", "--count-share", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and out["record_count"] is None and out["bins"] == qb.epsilon_only_bins(1.0)
    with pytest.raises(SystemExit) as done:
        main([*base, "--count-share", "2"])
    assert done.value.code != 0 and "--count-share" in capsys.readouterr().err


def test_cli_text_output_names_the_noisy_count_and_the_bins(tmp_path, capsys):
    """The text output (not only --json) says what the count cost, its value and the bins;
    with --n-max no budget goes to a count and no count line is printed."""
    from dprange.cli import main

    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(f"{v:.4f}" for v in np.random.default_rng(10).normal(0, 1, 2000)) + "\n")
    base = ["quantiles", str(path), "-c", "x", "--lo", "-5", "--hi", "5", "-e", "1", "--method", "histogram"]
    outputs = {}
    for extra in ([], ["--json"], ["--n-max", "4000"]):
        with pytest.raises(SystemExit) as done:
            main([*base, "--seed", "1", *extra])
        assert done.value.code == 0
        outputs[tuple(extra)] = capsys.readouterr().out
    counted = json.loads(outputs[("--json",)])["record_count"]
    lines = outputs[()].splitlines()
    assert f"record count (noisy, epsilon 0.05): {counted['value']}" in lines
    assert f"histogram bins: {qb.histogram_bins(counted['value'] * 0.95)}" in lines
    declared = outputs[("--n-max", "4000")].splitlines()
    assert not any(line.startswith("record count") for line in declared)
    assert f"histogram bins: {qb.histogram_bins(4000 * 1.0)}" in declared
