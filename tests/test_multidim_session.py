"""k-D releases spend from a privacy session (issue 10): dprange.release / release_grid with
session=, and `dprange release` with several --column and --session."""

from __future__ import annotations

import json

from _helpers import _cli


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
    code, out = _cli([*base, "-e", 0.5, "-o", tmp_path / "b.json"], capsys)
    assert code == 2 and "needs epsilon = 0.5" in out.err
    assert not (tmp_path / "b.json").exists()
    assert len(json.loads(ledger.read_text())["entries"]) == 1
