"""dprange.cli.ldp: ``dprange ldp encode / aggregate / simulate`` end to end, their choices and
help from the registries, NNLS releases, and the refusals before any value is read."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import _choices, _squeezed, run_cli
from click.testing import CliRunner

from dprange import ReportError
from dprange.cli import main
from dprange.cli.ldp import ldp
from dprange.registry import FREQUENCY_ORACLES, INFERENCE, LDP_PROTOCOLS


def test_ldp_encode_aggregate_simulate(csv_file, tmp_path, capsys):
    a, b, c = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "c.npz"
    for path, eps, seed in ((a, "1", "1"), (b, "1", "2"), (c, "2", "3")):
        code, _, err = run_cli(
            [
                "ldp",
                "encode",
                str(csv_file),
                "-c",
                "age",
                "--lo",
                "0",
                "--hi",
                "127",
                "-e",
                eps,
                "--seed",
                seed,
                "-o",
                str(path),
            ],
            capsys,
        )
        assert code == 0, err
    out_json = tmp_path / "rel.json"
    code, out, err = run_cli(
        ["ldp", "aggregate", str(a), str(b), "--lo", "0", "--hi", "127", "-o", str(out_json)], capsys
    )
    assert code == 0, err
    data = json.loads(out_json.read_text())
    assert data["mechanism"] == "ldp-hierarchical" and data["total"]["value"] == 1000
    code, _, err = run_cli(["ldp", "aggregate", str(a), str(c)], capsys)
    assert code == 2 and "epsilon=2.0 (expected 1.0)" in err
    (tmp_path / "junk.npz").write_bytes(b"junk")
    code, _, err = run_cli(["ldp", "aggregate", str(tmp_path / "junk.npz")], capsys)
    assert code == 2 and "malformed" in err
    np.save(tmp_path / "h.npy", np.array([5, 0, 3, 9, 1, 1, 0, 2]))
    code, out, err = run_cli(
        ["ldp", "simulate", str(tmp_path / "h.npy"), "-e", "1", "--scale", "1000", "--protocol", "haar", "--seed", "0"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["users"] == 21000


def test_simulate_refuses_fractional_histograms(tmp_path, capsys):
    """W8: a float histogram used to be truncated silently (5.7 became 5 users)."""
    np.save(tmp_path / "f.npy", np.array([5.7, 1.0, 2.0, 3.0]))
    code, _, err = run_cli(
        ["ldp", "simulate", str(tmp_path / "f.npy"), "-e", "1", "--protocol", "flat", "--seed", "0"], capsys
    )
    assert code == 2 and "whole-number counts" in err
    np.save(tmp_path / "w.npy", np.array([5.0, 1.0, 2.0, 3.0]))  # whole numbers stored as floats are fine
    code, out, err = run_cli(
        ["ldp", "simulate", str(tmp_path / "w.npy"), "-e", "1", "--protocol", "flat", "--seed", "0", "--scale", "10"],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["users"] == 110
    np.save(tmp_path / "s.npy", np.array(["1", "2"]))
    code, _, err = run_cli(["ldp", "simulate", str(tmp_path / "s.npy"), "-e", "1"], capsys)
    assert code == 2 and "numeric histogram" in err


def test_ldp_encode_checks_epsilon_before_reading(csv_file, tmp_path, capsys, monkeypatch):
    """C3 at the command line: OLH at epsilon 30 used to encode reports no server could aggregate."""
    import dprange.cli.ldp as ldp_cli

    monkeypatch.setattr(ldp_cli, "read_column", lambda *a: pytest.fail("data read before epsilon was checked"))
    code, _, err = run_cli(
        [
            "ldp",
            "encode",
            str(csv_file),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "127",
            "-e",
            "30",
            "--oracle",
            "olh",
            "-o",
            str(tmp_path / "r.npz"),
        ],
        capsys,
    )
    assert code == 2 and "OLH supports epsilon <= 11.09" in err and not (tmp_path / "r.npz").exists()


def test_ldp_aggregate_refuses_the_same_file_twice_and_wrong_bounds(csv_file, tmp_path, capsys):
    rep = tmp_path / "a.npz"
    code, _, err = run_cli(
        [
            "ldp",
            "encode",
            str(csv_file),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "127",
            "-e",
            "1",
            "--seed",
            "1",
            "-o",
            str(rep),
        ],
        capsys,
    )
    assert code == 0, err
    code, _, err = run_cli(["ldp", "aggregate", str(rep), str(rep), "-o", str(tmp_path / "r.json")], capsys)
    assert code == 2 and "given twice" in err
    code, _, err = run_cli(
        ["ldp", "aggregate", str(rep), "--lo", "0", "--hi", "63", "-o", str(tmp_path / "r.json")], capsys
    )
    assert code == 2 and "give 64 bins but the reports cover 128 values" in err
    assert not (tmp_path / "r.json").exists()
    code, _, err = run_cli(
        ["ldp", "aggregate", str(rep), "--lo", "0", "--hi", "127", "-o", str(tmp_path / "r.json")], capsys
    )
    assert code == 0 and json.loads((tmp_path / "r.json").read_text())["total"]["value"] == 500


def test_redact_in_ldp_encode_keeps_raw_values_out(tmp_path, capsys):
    path = tmp_path / "secret.csv"
    path.write_text("age\n3\n4\nsecret-value-517\n")
    code, _, err = run_cli(
        [
            "ldp",
            "encode",
            str(path),
            "-c",
            "age",
            "--lo",
            "0",
            "--hi",
            "127",
            "-e",
            "1",
            "--redact",
            "-o",
            str(tmp_path / "r.npz"),
        ],
        capsys,
    )
    assert code == 2 and "not numeric" in err
    assert "secret-value-517" not in err and "row 4" not in err


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


# ------------------------------------------------------------------ the registered names
def test_ldp_cli_choices_are_the_registries():
    for command in ("encode", "simulate"):
        assert _choices(command, "protocol") == LDP_PROTOCOLS.names() == ("hierarchical", "haar", "flat")
        assert _choices(command, "oracle") == FREQUENCY_ORACLES.names() == ("grr", "oue", "olh", "hrr")
    for command in ("aggregate", "simulate"):
        assert _choices(command, "inference") == INFERENCE.names() == ("gls", "nnls", "l1")


def test_help_lists_every_protocol_and_oracle_with_its_summary():
    text = _squeezed(CliRunner().invoke(ldp, ["simulate", "--help"]).output)
    for registry in (LDP_PROTOCOLS, FREQUENCY_ORACLES, INFERENCE):
        for name, entry in registry.items():
            assert _squeezed(f"{name}: {entry.summary}") in text
