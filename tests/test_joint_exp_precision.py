"""JointExp's working precision: the charge at double and extended precision, the extended
path's law against a 60-digit definition, and the platform assumptions its bound rests on.

The extended path runs where numpy's long double is wider than double (x87 80-bit on x86-64
Linux); its tests are skipped elsewhere.  Everything forced onto a path uses the private
``_precision`` keyword or long double lengths."""

import json

import numpy as np
import pytest

from dprange.quantile_mechanisms import joint_exp


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
