"""dprange.cli.options: messages in the command line's terms, outputs staged all or nothing, the
output path checks, and --redact for the run only."""

import os

import pytest
from _helpers import _release, run_cli

from dprange.cli import options as _cli_helpers
from dprange.cli.options import StagedOutputs, cli_message


@pytest.mark.parametrize(
    "library,cli",
    [
        (
            "3 values are missing (NaN/None); clean them or pass drop_missing=True",
            "3 values are missing (NaN/None); clean them or pass --drop-missing",
        ),
        (
            "2 values lie outside the public bounds [0, 1]; widen the bounds or pass clip=True to clip them",
            "2 values lie outside the public bounds [0, 1]; widen the bounds or pass --clip to clip them",
        ),
        (
            "the integer domain got non-integer values; use Domain.interval for real values",
            "the integer domain got non-integer values; give --bins N (equal bins over [lo, hi]) for real values",
        ),
        (
            "integer domain bound lo must be an integer, got 0.5",
            "--lo (one bin per integer) must be an integer, got 0.5",
        ),
        ("domain bound hi must be a finite number, got inf", "--hi must be a finite number, got inf"),
        ("bins must be an integer >= 1, got 0", "--bins must be an integer >= 1, got 0"),
        ("branching must be an integer >= 2, got 1", "--branching must be an integer >= 2, got 1"),
        (
            "every branching factor must be an integer >= 2, got 0",
            "every --branching factor must be an integer >= 2, got 0",
        ),
        (
            "the branching list is empty; give at least one factor >= 2",
            "the --branching list is empty; give at least one factor >= 2",
        ),
        (
            "budget list must have one entry per measured level (3), got 2",
            "--budget list must have one entry per measured level (3), got 2",
        ),
        (
            "every entry of the budget list must be a positive finite number",
            "every entry of --budget must be a positive finite number",
        ),
        ("epsilon must be a positive finite number, got 0.0", "--epsilon must be a positive finite number, got 0.0"),
        ("delta must be in [0, 1), got 1.0", "--delta must be in [0, 1), got 1.0"),
        (
            "Gaussian noise needs delta > 0; pass delta or use Laplace noise",
            "Gaussian noise needs delta > 0; pass --delta or choose --noise discrete_laplace",
        ),
        ("rng seed must be a non-negative integer, got -1", "--seed must be a non-negative integer, got -1"),
        ("k must be an integer >= 1, got 0", "--queries must be an integer >= 1, got 0"),
        ("a message\non two lines", "a message on two lines"),
    ],
)
def test_cli_message_speaks_in_options(library, cli):
    assert cli_message(library) == cli


def test_empty_output_path_writes_nothing_and_fails(csv_file, tmp_path, capsys, monkeypatch):
    """W10: -o '' used to print 'wrote' and exit 0 without writing anything."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = run_cli(_release(csv_file, "-o", ""), capsys)
    assert code == 2 and "--output is empty" in err and "wrote" not in out
    assert os.listdir(work) == []


def test_staged_outputs_write_all_or_nothing(tmp_path, monkeypatch):
    """Files appear only through os.replace of a complete temporary file; when one output
    cannot be written, the others are not written either and created folders vanish."""
    staged = StagedOutputs()
    staged.add(str(tmp_path / "a" / "b" / "one.json"), "{}")
    staged.add(str(tmp_path / "blocker" / "two.png"), b"png")
    (tmp_path / "blocker").write_text("a file where a folder is needed")
    with pytest.raises(OSError):
        staged.commit()
    assert sorted(os.listdir(tmp_path)) == ["blocker"]
    good = StagedOutputs()
    good.add(str(tmp_path / "a" / "one.json"), "{}")
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(
        _cli_helpers.os, "replace", lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst))
    )
    good.commit()
    assert (tmp_path / "a" / "one.json").read_text() == "{}"
    assert len(replaced) == 1 and os.path.dirname(replaced[0][0]) == str(tmp_path / "a")
    assert os.listdir(tmp_path / "a") == ["one.json"]


def test_redact_sets_the_switch_for_the_run_only(csv_file, tmp_path, capsys, monkeypatch):
    """M7: --redact sets DPRANGE_REDACT=1 while the command runs and restores it afterwards."""
    import dprange.cli.release as cli_module

    monkeypatch.delenv("DPRANGE_REDACT", raising=False)
    seen = []
    real = cli_module.read_column

    def spy(*args):
        seen.append(os.environ.get("DPRANGE_REDACT"))
        return real(*args)

    monkeypatch.setattr(cli_module, "read_column", spy)
    code, _, err = run_cli(_release(csv_file, "--redact", "-o", str(tmp_path / "r.json")), capsys)
    assert code == 0, err
    code, _, err = run_cli(_release(csv_file, "-o", str(tmp_path / "r.json")), capsys)
    assert code == 0, err
    assert seen == ["1", None] and "DPRANGE_REDACT" not in os.environ


@pytest.mark.parametrize("command", [["ldp", "encode"], ["ldp", "aggregate"], ["ldp", "simulate"], ["release"]])
def test_redact_is_an_option_of_release_and_ldp(command):
    from click.testing import CliRunner

    from dprange.cli.group import cli

    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0 and "--redact" in result.output
