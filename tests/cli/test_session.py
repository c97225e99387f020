"""dprange.cli.session: --session and --session-epsilon spend from a ledger file, refuse what would
overspend before writing anything, charge a failure once the data are read, and count spends
made by another process."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from _helpers import _cli

from dprange import Session
from dprange.cli import release as cli_module


def test_cli_several_columns_spend_from_the_ledger_and_a_refusal_writes_nothing(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{i % 4},{i % 5}\n" for i in range(40)))
    ledger = tmp_path / "ledger.json"
    base = ["release", data, "-c", "x", "-c", "y", "--lo", 0, "--hi", 3, "--lo", 0, "--hi", 4, "--integers"]
    base += ["--session", ledger, "--session-epsilon", 1]
    code, out = _cli([*base, "-e", 0.75, "--seed", 2, "-o", tmp_path / "a.json"], capsys)
    assert code == 0, out.err
    assert "spent 0.75 of epsilon 1 in 1 releases" in out.out
    saved = json.loads(ledger.read_text())
    assert [e["epsilon"] for e in saved["entries"]] == [0.75]
    assert saved["entries"][0]["what"].startswith(f"k-D histogram of columns 'x', 'y' of {str(data)!r}")  # issue 34
    code, out = _cli([*base, "-e", 0.5, "-o", tmp_path / "b.json"], capsys)
    assert code == 2 and "needs epsilon = 0.5" in out.err
    assert not (tmp_path / "b.json").exists()
    assert len(json.loads(ledger.read_text())["entries"]) == 1


VALUES = np.arange(10).repeat(3)


def test_cli_session_spends_refuses_and_writes_nothing_when_refused(tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("x\n" + "\n".join(str(v) for v in VALUES) + "\n")
    ledger = tmp_path / "ledger.json"
    code, out = _cli(["session", "init", str(ledger), "-e", "1"], capsys)
    assert code == 0 and ledger.exists()
    base = ["release", str(data), "-c", "x", "--lo", "0", "--hi", "9", "--integers", "--session", str(ledger)]
    code, out = _cli([*base, "-e", "0.7", "-o", str(tmp_path / "a.json")], capsys)
    assert code == 0 and "spent 0.7 of epsilon 1 in 1 releases" in out.out
    before = ledger.read_text()
    code, out = _cli([*base, "-e", "0.7", "-o", str(tmp_path / "b.json")], capsys)
    assert code == 2 and "session has 0.3 of its 1 left" in out.err and out.err.count("\n") == 1
    assert not (tmp_path / "b.json").exists() and ledger.read_text() == before
    code, out = _cli(["session", "show", str(ledger)], capsys)
    assert code == 0 and "spent epsilon 0.7 of 1" in out.out
    code, out = _cli(["session", "init", str(ledger), "-e", "1"], capsys)
    assert code == 2 and "exists already" in out.err


def test_cli_creates_a_session_with_session_epsilon_and_a_failed_release_is_charged(tmp_path, capsys):
    """Issue 30: the value 20 outside 0..9 is found by reading the data, so the failed
    release is charged (it was free, and created no ledger, before)."""
    good = tmp_path / "d.csv"
    good.write_text("x\n1\n2\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("x\n1\n20\n")
    ledger = tmp_path / "new.json"
    base = ["-c", "x", "--lo", "0", "--hi", "9", "--integers", "-e", "0.25", "--session", str(ledger)]
    code, out = _cli(["release", str(bad), *base, "--session-epsilon", "1", "-o", str(tmp_path / "x.json")], capsys)
    assert code == 2 and not (tmp_path / "x.json").exists()
    assert Session.open(ledger).spent_epsilon == Fraction(0.25)
    code, out = _cli(["release", str(good), *base, "--session-epsilon", "1", "-o", str(tmp_path / "y.json")], capsys)
    assert code == 0 and Session.open(ledger).spent_epsilon == 2 * Fraction(0.25)
    code, out = _cli(["release", str(tmp_path / "d*.csv"), *base, "-o", str(tmp_path / "z.json")], capsys)
    assert code == 0 and Session.open(ledger).entries[-1].what.startswith("histogram of column 'x' of '")
    code, out = _cli(["release", str(good), *base[:-2], "--session-epsilon", "1"], capsys)
    assert code == 2 and "--session-epsilon needs --session" in out.err


@pytest.mark.parametrize("columns", [["-c", "x"], ["-c", "x", "-c", "y"]], ids=["1-D", "k-D"])
def test_cli_charges_a_bad_row_once_read_but_not_a_bad_option_or_a_missing_file(tmp_path, capsys, columns):
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,1\noops,oops\n")
    ledger = tmp_path / "ledger.json"
    bounds = ["--lo", "0", "--hi", "9"] * (len(columns) // 2)
    base = [*columns, *bounds, "--integers", "-e", "0.25", "--session", str(ledger), "--session-epsilon", "1"]
    code, out = _cli(["release", str(bad), *base, "-o", str(tmp_path / "a.json")], capsys)
    assert code == 2 and "oops" in out.err and not (tmp_path / "a.json").exists()
    assert [e.epsilon for e in Session.open(ledger).entries] == [0.25]
    assert (
        Session.open(ledger).entries[0].what.startswith("histogram of column 'x' of '" if len(columns) == 2 else "k-D")
    )
    before = ledger.read_text()
    code, out = _cli(["release", str(bad), *base, "--alpha", "2", "-o", str(tmp_path / "b.json")], capsys)
    assert code == 2 and "alpha" in out.err
    code, out = _cli(["release", str(tmp_path / "none.csv"), *base, "-o", str(tmp_path / "c.json")], capsys)
    assert code == 2 and "does not exist" in out.err
    assert ledger.read_text() == before


def test_cli_counts_a_spend_made_by_another_process_while_it_prepared(tmp_path, capsys, monkeypatch):
    """Another process charges the ledger after the command opened it and before it reads
    INPUT: the command charges on top of it (it was refused as a change of the file)."""
    data = tmp_path / "d.csv"
    data.write_text("x\n1\n2\n")
    ledger = tmp_path / "ledger.json"
    Session.open(ledger, 1.0).charge(0.25, what="first", mechanism="test")
    check_seed = cli_module.check_seed

    def meanwhile(seed):
        Session.open(ledger).charge(0.25, what="meanwhile", mechanism="test")
        check_seed(seed)

    monkeypatch.setattr(cli_module, "check_seed", meanwhile)
    base = ["release", str(data), "-c", "x", "--lo", "0", "--hi", "9", "--integers", "-e", "0.25"]
    code, out = _cli([*base, "--session", str(ledger), "-o", str(tmp_path / "a.json")], capsys)
    assert code == 0, out.err
    assert "spent 0.75 of epsilon 1 in 3 releases" in out.out
    assert [e.what for e in Session.open(ledger).entries][:2] == ["first", "meanwhile"]
