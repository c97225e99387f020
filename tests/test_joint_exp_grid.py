"""JointExp's output on its public grid (issue 30, item 1): no published float is computed from
a data value, and the whole output (interval and point) obeys the definition on tiny domains.

The code as it was published start + U (end - start) in floats, start and end data values, so
the set of possible outputs depended on the exact data (Mironov, "On Significance of the Least
Significant Bits for Differential Privacy", CCS 2012): with x = {0.2, 0.7} and x' = {0.2, 0.7 +
2^-30}, 16.6% of 3000 medians under x were impossible under x' (replace).  Now records are
placed at whole positions of a public grid and each output is the floor of a uniform point of
its interval, reported as its cell's value (docs/privacy.md, "Floats computed from data
values")."""

import json

import numpy as np
import pytest

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
