"""Issue 30, item 2: a session is charged before the data are read, whatever the outcome (a
refusal or a bad value that depends on the data is an answer about them), on every path that
reads data with a session; a refusal from public facts costs nothing."""

from __future__ import annotations

import pytest
from _helpers import _cli

from dprange import Session
from dprange.cli import release as cli_module


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
