"""Local-DP protocols produce Measurements and go through ``infer``: the GLS releases are
today's (tree GLS / Haar inversion with the realised users and plug-in variances), NNLS and
L1 releases work, and their parametric-bootstrap standard errors agree with the Monte-Carlo
spread of the same release over independent protocol runs (exact aggregator states from
``simulate``)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from dprange.cli import main
from dprange.cli.ldp import ldp


def _cli_error(argv, capsys) -> str:
    """Run the real entry point; it must exit 2 with one line on stderr, which is returned."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and err.startswith("dprange: error: ")
    return err


def test_cli_aggregate_and_simulate_with_nnls(tmp_path, capsys):
    rng = np.random.default_rng(0)
    (tmp_path / "a.csv").write_text("age\n" + "\n".join(str(v) for v in rng.integers(0, 64, 400)) + "\n")
    run = CliRunner().invoke
    common = ["--column", "age", "--lo", "0", "--hi", "63", "--epsilon", "1.0", "--seed", "3"]
    assert run(ldp, ["encode", str(tmp_path / "a.csv"), *common, "-o", str(tmp_path / "a.npz")]).exit_code == 0
    out = tmp_path / "rel.json"
    res = run(ldp, ["aggregate", str(tmp_path / "a.npz"), "--inference", "nnls", "-o", str(out)])
    assert res.exit_code == 0, res.output
    saved = json.loads(out.read_text())
    assert saved["inference"] == "nnls" and saved["histogram"]["stderr"] is None
    assert min(saved["histogram"]["value"]) >= 0 and sum(saved["histogram"]["value"]) == pytest.approx(400)
    assert "'ridge'" in _cli_error(["ldp", "aggregate", str(tmp_path / "a.npz"), "--inference", "ridge"], capsys)
    np.save(tmp_path / "h.npy", rng.integers(0, 1000, 64))
    res = run(ldp, ["simulate", str(tmp_path / "h.npy"), "-e", "1.0", "--seed", "1", "--inference", "nnls"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["inference"] == "nnls"
    assert "'LS'" in _cli_error(["ldp", "simulate", str(tmp_path / "h.npy"), "-e", "1", "--inference", "LS"], capsys)
