"""2-D data-aware mechanisms (dprange.data_aware.grid, spatial_trees, hilbert): the Hilbert order
against its inverse and adjacency, the private-median cuts against the exponential mechanism's
definition and the neighbour ratio of the whole partition on tiny grids (exact output
probabilities), the tree least squares and its noise-only covariance against the dense GLS,
the accounting, honest error fields and seeded reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

import dprange
from dprange import ProductDomain


def test_cli_releases_a_data_aware_grid_by_name(tmp_path, capsys):
    import json

    from dprange.cli import main

    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 16, 400), rng.integers(0, 16, 400)
    path = tmp_path / "points.csv"
    path.write_text("a,b\n" + "".join(f"{u},{v}\n" for u, v in zip(a, b)))
    out = tmp_path / "grid.json"
    args = ["release", path, "-c", "a", "-c", "b", "--lo", 0, "--hi", 15, "--lo", 0, "--hi", 15, "--integers"]
    args += ["-e", 1, "--seed", 4, "-o", out, "-m", "hybrid_tree"]
    with pytest.raises(SystemExit) as exc:
        main([str(v) for v in args])
    stdout = capsys.readouterr().out
    assert exc.value.code == 0
    saved = json.loads(out.read_text())
    assert saved["kind"] == "data_aware_grid_release" and saved["error_bars"].startswith("not available")
    domain = ProductDomain([dprange.Domain.integers(0, 15), dprange.Domain.integers(0, 15)])
    same = dprange.release_grid([a, b], domain, 1.0, mechanism="hybrid_tree", rng=4)
    np.testing.assert_allclose(np.reshape(saved["counts"], (16, 16)), same.counts)
    assert saved["provenance"]["parameters"]["private_steps"] == same.parameters["private_steps"]
    assert "no error bars" in stdout and "±" not in stdout
    with pytest.raises(SystemExit) as exc:
        main([str(v) for v in [*args, "--branching", 4]])
    assert exc.value.code != 0
    assert "--branching is not a parameter of --mechanism hybrid_tree" in capsys.readouterr().err
