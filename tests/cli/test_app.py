"""dprange.cli.app: the console script runs, and every failure is one line on stderr (usage
errors exit 2; internal errors exit 1, redacted with --redact)."""

import os
import subprocess
import sys

import pytest
from _helpers import _release, run_cli


@pytest.mark.slow
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


@pytest.mark.parametrize(
    "args,message",
    [
        (["release", "x.csv", "--bogus"], "No such option '--bogus'"),
        (["release", "x.csv", "-c", "a", "-e", "1", "--mechanism", "bogus"], "'bogus' is not one of"),
        (["release"], "Missing argument 'INPUT'"),
        (["release", "x.csv", "-c", "a", "-e", "one"], "'one' is not a valid float"),
        (["error", "--n", "8"], "Missing option '--epsilon'"),
        (["ldp", "encode", "x.csv", "-c", "a", "-e", "1", "--branching", "two"], "'two' is not a valid integer"),
    ],
)
def test_usage_errors_are_one_line(capsys, args, message):
    """M6: click's three-line usage errors become one line 'dprange: error: ...' with exit 2."""
    code, out, err = run_cli(args, capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == [err.strip()] and err.startswith("dprange: error: ") and message in err


def test_no_command_prints_help_and_one_error_line(capsys):
    code, out, err = run_cli([], capsys)
    assert code == 2 and "release" in out and err.startswith("dprange: error: no command given")
    assert len(err.splitlines()) == 1


def test_internal_error_is_one_line_and_redacted(csv_file, tmp_path, capsys, monkeypatch):
    """A bug is still one line (exit 1, asking for a report); with --redact its message,
    which might quote data, is left out."""
    import dprange.cli.release as cli_module

    def broken(*args):
        raise RuntimeError("value 12345 of row 7")

    monkeypatch.setattr(cli_module, "read_column", broken)
    code, _, err = run_cli(_release(csv_file, "-o", str(tmp_path / "r.json")), capsys)
    assert code == 1 and err.startswith("dprange: error: internal error (RuntimeError: value 12345")
    code, _, err = run_cli(_release(csv_file, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 1 and "RuntimeError" in err and "12345" not in err and len(err.splitlines()) == 1
