"""The privacy session: exact sequential composition, refusal before data are read, a
ledger that survives saving and resuming, and the --session option of the CLI."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from _helpers import _cli

from dprange import Session

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
