"""dprange.cli.quantiles: ``dprange quantiles`` prints and saves the method, its grid, JointExp's
precision and charge, and what the noisy count cost."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import run_cli

from dprange.answers.describe import release_schema
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


# Parity with ``dprange release`` (issue 34, item 6): --session, --output, intervals by default,
# a plain explanation of the method; the ledger names the column and the file.
def quantile_args(path, *extra):
    return ["quantiles", path, "-c", "x", "--lo", 0, "--hi", 99, "--integers", "-e", 1, "--seed", 2, *extra]


@pytest.fixture
def integers_csv(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("x\n" + "\n".join(str(v) for v in np.random.default_rng(10).integers(0, 100, 500)) + "\n")
    return path


def test_quantiles_default_has_intervals_and_says_its_method_plainly(integers_csv, capsys):
    code, out, err = run_cli(quantile_args(integers_csv), capsys)
    assert code == 0, err
    assert "method: histogram, which counts the values in public bins, adds noise" in out
    rows = [line for line in out.splitlines() if line.strip().startswith("q=")]
    assert len(rows) == 9 and all("[" in row for row in rows)  # an interval on every level
    code, out, err = run_cli(quantile_args(integers_csv, "--method", "auto", "--q", "0.5"), capsys)
    assert code == 0 and "chosen by auto as the most accurate for 1 levels at this budget" in out
    assert "JointExp" not in out and "m >=" not in out


def test_quantiles_output_is_a_self_describing_file(integers_csv, tmp_path, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    out_path = tmp_path / "q.json"
    code, out, err = run_cli(quantile_args(integers_csv, "-o", out_path, "--units", "cm", "--json"), capsys)
    assert code == 0, err
    saved = json.loads(out_path.read_text())
    jsonschema.Draft202012Validator(release_schema()).validate(saved)
    assert saved["input"] == {"columns": ["x"], "units": ["cm"], "source": str(integers_csv)}
    assert saved["intervals"]["lower"] == json.loads(out)["intervals"]["lower"]
    assert saved["privacy_statement"]["epsilon"] == 1.0 and saved["explanation"].startswith("method: histogram")
    private = tmp_path / "p.json"
    args = ["quantiles", integers_csv, "-c", "x", "--private-bounds", "--integers", "-e", 1, "--seed", 2, "-o", private]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    public = json.loads(private.read_text())["privacy_statement"]["public"]
    assert "the bounds were found privately" in public[0]


def test_quantiles_spend_from_a_session_naming_the_column_and_file(integers_csv, tmp_path, capsys):
    ledger = tmp_path / "ledger.json"
    session = ["--session", ledger, "--session-epsilon", 1.5]
    code, out, err = run_cli(quantile_args(integers_csv, *session), capsys)
    assert code == 0 and "spent 1 of epsilon 1.5 in 1 releases" in out, err
    (entry,) = json.loads(ledger.read_text())["entries"]
    assert entry["what"].endswith(f"of column 'x' of {str(integers_csv)!r}")
    code, _, err = run_cli(quantile_args(integers_csv, *session), capsys)
    assert code == 2 and "needs epsilon = 1" in err  # would overspend: refused, nothing charged
    assert len(json.loads(ledger.read_text())["entries"]) == 1


def test_quantiles_charge_before_reading_and_a_missing_file_is_free(integers_csv, tmp_path, capsys):
    ledger = tmp_path / "ledger.json"
    session = ["--session", ledger, "--session-epsilon", 5]
    code, _, err = run_cli(quantile_args(tmp_path / "missing.csv", *session), capsys)
    assert code == 2 and (not ledger.exists() or json.loads(ledger.read_text())["entries"] == [])
    bad = ["quantiles", integers_csv, "-c", "nope", "--lo", 0, "--hi", 99, "-e", 1, *session]
    code, _, err = run_cli(bad, capsys)
    assert code == 2 and "nope" in err
    assert len(json.loads(ledger.read_text())["entries"]) == 1  # the data were read: charged
