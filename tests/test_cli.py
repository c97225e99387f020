"""The dprange command: happy paths and one-line errors with exit status 2."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dprange.cli import main


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    rng = np.random.default_rng(0)
    ages = rng.integers(18, 90, 500)
    with open(path, "w") as fh:
        fh.write("age,name,score\n")
        for i, a in enumerate(ages):
            fh.write(f"{a},p{i},{rng.random():.4f}\n")
    return path


def test_release_writes_json_and_plot(csv_file, tmp_path, capsys):
    out = tmp_path / "out" / "rel.json"
    png = tmp_path / "out" / "cdf.png"
    code, stdout, err = run_cli([
        "release", str(csv_file), "--column", "age", "--lo", "0", "--hi", "120", "--integers",
        "--epsilon", "1", "--seed", "3", "--output", str(out), "--plot", str(png)], capsys)
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["privacy"]["epsilon"] == 1.0 and len(data["histogram"]["value"]) == 121
    assert png.stat().st_size > 1000
    assert "0.5" in stdout and "interval" in stdout


def test_release_parquet_and_options(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": np.linspace(0, 1, 300)}), path)
    code, _, err = run_cli([
        "release", str(path), "-c", "x", "--lo", "0", "--hi", "1", "--bins", "64", "-e", "0.5",
        "--mechanism", "hierarchical", "--branching", "4,4,4", "--budget", "0.125,0.125,0.125,0.125", "--root",
        "--seed", "1", "-o", str(tmp_path / "r.json")], capsys)
    assert code == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["parameters"]["branching"] == [4, 4, 4]


BAD = [
    (["--column", "nope"], "column 'nope' not found"),
    (["--column", "name"], "not numeric"),
    (["--column", "age", "--epsilon", "0"], "epsilon"),
    (["--column", "age", "--epsilon", "inf"], "epsilon"),
    (["--column", "age", "--epsilon", "nan"], "epsilon"),
    (["--column", "age", "--delta", "1"], "delta"),
    (["--column", "age", "--delta", "-0.5"], "delta"),
    (["--column", "age", "--bins", "0", "--lo", "0", "--hi", "100"], "bins"),
    (["--column", "age", "--bins", "10", "--lo", "5", "--hi", "5"], "lo < hi"),
    (["--column", "age", "--bins", "10", "--lo", "0", "--hi", "50"], "outside the public bounds"),
    (["--column", "age", "--branching", "1"], "branching"),
    (["--column", "age", "--budget", "0.5,0.5,0.5"], "one entry per measured level"),  # 2 levels: no root by default
    (["--column", "age", "--budget", "0.5,0.6"], "add up to at most epsilon"),
]


@pytest.mark.parametrize("extra,message", BAD)
def test_bad_input_is_one_line_exit_2(csv_file, tmp_path, capsys, extra, message):
    args = ["release", str(csv_file), "--epsilon", "1", "-o", str(tmp_path / "r.json")]
    if "--bins" not in extra:
        args += ["--lo", "0", "--hi", "120", "--integers"]
    if "--epsilon" in extra:
        args.remove("--epsilon")
        args.remove("1")
    code, _, err = run_cli(args + extra, capsys)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_missing_file_and_nan_values(tmp_path, capsys):
    code, _, err = run_cli(["release", str(tmp_path / "none.csv"), "-c", "a", "--lo", "0", "--hi", "1",
                            "--bins", "2", "-e", "1"], capsys)
    assert code == 2 and "does not exist" in err
    path = tmp_path / "nan.csv"
    path.write_text("a\n0.1\n\n0.7\n")
    code, _, err = run_cli(["release", str(path), "-c", "a", "--lo", "0", "--hi", "1", "--bins", "2", "-e", "1",
                            "-o", str(tmp_path / "r.json")], capsys)
    assert code == 2 and "missing" in err
    code, _, err = run_cli(["release", str(path), "-c", "a", "--lo", "0", "--hi", "1", "--bins", "2", "-e", "1",
                            "--drop-missing", "-o", str(tmp_path / "r.json")], capsys)
    assert code == 0, err
    # Two records: the noisy total may be <= 0; deciles are then reported unavailable, not a crash.
    code, out, err = run_cli(["release", str(path), "-c", "a", "--lo", "0", "--hi", "1", "--bins", "2", "-e", "0.01",
                              "--drop-missing", "--seed", "0", "-o", str(tmp_path / "r.json")], capsys)
    assert code == 0, err


def test_console_script_help_and_demo(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "dprange")
    result = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "release" in result.stdout
    result = subprocess.run([exe, "release", "--help"], capture_output=True, text=True)
    assert "--neighbours" in result.stdout and "--budget" in result.stdout
    result = subprocess.run([exe, "demo", "--output", str(tmp_path / "demo")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "demo" / "release.json").exists()
    result = subprocess.run([exe, "release", "x.csv"], capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_error_command_table_and_json(capsys):
    code, out, err = run_cli(["error", "--n", "1000", "--workload", "all-range", "--epsilon", "1"], capsys)
    assert code == 0, err
    assert "recommended: Hierarchical" in out
    code, out, err = run_cli(["error", "--n", "64", "-w", "identity", "-e", "1", "--mechanisms", "flat,h2,wavelet", "--json"], capsys)
    data = json.loads(out)
    assert data["recommended"].startswith("Flat") and len(data["candidates"]) == 3
    code, _, err = run_cli(["error", "--n", "64", "-e", "1", "--mechanisms", "h1x"], capsys)
    assert code == 2 and "unknown mechanism" in err


def test_release_auto_mechanism(csv_file, tmp_path, capsys):
    code, out, err = run_cli(["release", str(csv_file), "-c", "age", "--lo", "0", "--hi", "120", "--integers", "-e", "1",
                              "--mechanism", "auto", "--workload", "prefix", "--seed", "0", "-o", str(tmp_path / "r.json")], capsys)
    assert code == 0, err
    assert "auto: chose" in out


def test_release_with_l1_inference_and_plot(csv_file, tmp_path, capsys):
    code, out, err = run_cli(["release", str(csv_file), "-c", "age", "--lo", "0", "--hi", "120", "--integers", "-e", "1",
                              "--inference", "l1", "--seed", "0", "-o", str(tmp_path / "r.json"),
                              "--plot", str(tmp_path / "c.png")], capsys)
    assert code == 0, err
    assert "no closed-form intervals" in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["inference"] == "l1" and data["histogram"]["stderr"] is None


def test_ldp_encode_aggregate_simulate(csv_file, tmp_path, capsys):
    a, b, c = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "c.npz"
    for path, eps, seed in ((a, "1", "1"), (b, "1", "2"), (c, "2", "3")):
        code, _, err = run_cli(["ldp", "encode", str(csv_file), "-c", "age", "--lo", "0", "--hi", "127", "-e", eps,
                                "--seed", seed, "-o", str(path)], capsys)
        assert code == 0, err
    out_json = tmp_path / "rel.json"
    code, out, err = run_cli(["ldp", "aggregate", str(a), str(b), "--lo", "0", "--hi", "127", "-o", str(out_json)], capsys)
    assert code == 0, err
    data = json.loads(out_json.read_text())
    assert data["mechanism"] == "ldp-hierarchical" and data["total"]["value"] == 1000
    code, _, err = run_cli(["ldp", "aggregate", str(a), str(c)], capsys)
    assert code == 2 and "epsilon=2.0 (expected 1.0)" in err
    (tmp_path / "junk.npz").write_bytes(b"junk")
    code, _, err = run_cli(["ldp", "aggregate", str(tmp_path / "junk.npz")], capsys)
    assert code == 2 and "malformed" in err
    np.save(tmp_path / "h.npy", np.array([5, 0, 3, 9, 1, 1, 0, 2]))
    code, out, err = run_cli(["ldp", "simulate", str(tmp_path / "h.npy"), "-e", "1", "--scale", "1000",
                              "--protocol", "haar", "--seed", "0"], capsys)
    assert code == 0, err
    assert json.loads(out)["users"] == 21000
