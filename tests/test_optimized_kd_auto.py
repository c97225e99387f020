"""The optimised k-D mechanisms as candidates of the k-D auto (issue 15): exact mean errors of
their error models against dense formulas, select_grid's choice against every candidate's exact
error, the optimised Kronecker product chosen where it wins, no cold optimisation above the limit
per axis (the cached strategy is used), optimised marginals, JSON round trips and the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import run_cli

from dprange import Domain, ProductDomain
from dprange.analysis.grid import select_grid
from dprange.api import release_grid
from dprange.mechanisms.grid import load_grid_release

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


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


def test_cli_error_lists_the_five_axis_product_as_excluded_with_the_quantisation_reason(capsys):
    code, stdout, err = run_cli(["error", "--shape", "3x3x3x2x2", "-e", 1, "--delta", 1e-6], capsys)
    assert code == 0 and err == ""
    lines = [row for row in stdout.splitlines() if row.startswith("excluded OptimizedKronecker")]
    assert len(lines) == 2  # both L2 templates
    for line in lines:
        assert "quantised to integers and the factors multiply" in line and "kd_hierarchy" in line
