"""Local-DP range protocols (seed 002 section 4): exact consistency = dense weighted least
squares, HaarHRR = dense inversion with its exact covariance, the paper's two-stage
consistency (= GLS only with equal users per level, never better), the exact analysis
against dense matrices, serialisation, the CLI, and rejection of mismatched reports."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from dprange import ReportError
from dprange.cli.ldp import ldp


def test_cli_encode_aggregate_simulate(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "a.csv").write_text("age\n" + "\n".join(str(v) for v in rng.integers(0, 64, 300)) + "\n")
    (tmp_path / "b.csv").write_text("age\n" + "\n".join(str(v) for v in rng.integers(0, 64, 200)) + "\n")
    run = CliRunner().invoke
    common = ["--column", "age", "--lo", "0", "--hi", "63", "--epsilon", "1.0", "--branching", "4"]
    assert run(ldp, ["encode", str(tmp_path / "a.csv"), *common, "-o", str(tmp_path / "a.npz")]).exit_code == 0
    assert run(ldp, ["encode", str(tmp_path / "b.csv"), *common, "-o", str(tmp_path / "b.jsonl")]).exit_code == 0
    res = run(
        ldp,
        [
            "aggregate",
            str(tmp_path / "a.npz"),
            str(tmp_path / "b.jsonl"),
            "--lo",
            "0",
            "--hi",
            "63",
            "-o",
            str(tmp_path / "rel.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "rel.json").read_text())
    assert out["total"]["value"] == pytest.approx(500) and out["total"]["public"]
    assert out["mechanism"] == "ldp-hierarchical" and out["privacy"]["epsilon"] == 1.0
    assert len(out["histogram"]["value"]) == 64 and all(s > 0 for s in out["histogram"]["stderr"])
    # a file made with another epsilon is rejected, naming the file
    other = ["--column", "age", "--lo", "0", "--hi", "63", "--epsilon", "2.0", "--branching", "4"]
    assert run(ldp, ["encode", str(tmp_path / "b.csv"), *other, "-o", str(tmp_path / "c.npz")]).exit_code == 0
    res = run(ldp, ["aggregate", str(tmp_path / "a.npz"), str(tmp_path / "c.npz")])
    assert res.exit_code != 0 and isinstance(res.exception, ReportError) and "c.npz" in str(res.exception)
    # values outside the public bounds are an error, not clipped
    res = run(ldp, ["encode", str(tmp_path / "a.csv"), "--column", "age", "--lo", "0", "--hi", "10", "-e", "1"])
    assert res.exit_code != 0
    np.save(tmp_path / "h.npy", rng.integers(0, 1000, 64))
    res = run(ldp, ["simulate", str(tmp_path / "h.npy"), "-e", "1.0", "--protocol", "haar", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["rmse_x1000_ranges"] > 0
