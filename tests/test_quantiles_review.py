"""Review of the quantiles' record count (dprange.quantile_mechanisms.bins): the parts of epsilon that a
saved session ledger names, the CLI's text output, and auto's choice without any count."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dprange.quantile_mechanisms import bins as qb


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
