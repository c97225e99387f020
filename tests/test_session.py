"""The privacy session: exact sequential composition, refusal before data are read, a
ledger that survives saving and resuming, and the --session option of the CLI."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from _helpers import Unreadable, _cli

import dprange
from dprange import BudgetError, DataError, Domain, DomainError, ParameterError, Session
from dprange.ldp.range_protocols import Flat

DOMAIN = Domain.integers(0, 9)
VALUES = np.arange(10).repeat(3)


def test_19_releases_at_epsilon_over_19_fit_exactly_and_a_20th_is_refused():
    session = Session(1.0)
    for seed in range(19):
        dprange.release(VALUES, DOMAIN, 1.0 / 19, mechanism="flat", rng=seed, session=session)
    assert sum(e.epsilon for e in session.entries) != 1.0  # a float sum drifts (0.9999999999999996)...
    assert session.spent_epsilon == sum(Fraction(e.epsilon) for e in session.entries) <= Fraction(1)  # ...not this
    assert len(session.entries) == 19
    with pytest.raises(BudgetError, match="19 releases so far"):
        dprange.release(VALUES, DOMAIN, 1e-3, mechanism="flat", session=session)


def test_a_share_over_by_rounding_is_lowered_to_fit_and_the_ledger_adds_up_exactly():
    # ten releases at 0.1: Fraction(0.1) * 10 > 1, so the tenth is lowered by a few ulps
    session = Session(1.0)
    for seed in range(10):
        rel = dprange.release(VALUES, DOMAIN, 0.1, mechanism="flat", rng=seed, session=session)
    assert [e.epsilon for e in session.entries[:9]] == [0.1] * 9
    last = session.entries[-1].epsilon
    left = Fraction(1) - 9 * Fraction(0.1)
    assert Fraction(last) <= left < Fraction(float(np.nextafter(last, 1.0)))  # the largest float that fits
    assert 0.1 - last < 1e-16 and rel.epsilon == last  # the release ran with it
    assert session.spent_epsilon <= 1 and Fraction(1) - session.spent_epsilon < Fraction(2) ** -52
    with pytest.raises(BudgetError):
        session.allot(2**-40)


def test_overspending_is_refused_before_the_values_are_read():
    session = Session(0.5)
    with pytest.raises(BudgetError, match="needs epsilon = 0.6 but the session has 0.5"):
        dprange.release(Unreadable(), DOMAIN, 0.6, session=session)
    with pytest.raises(BudgetError):
        dprange.quantiles(Unreadable(), [0.5], 0.6, bounds=(0, 9), session=session)
    with pytest.raises(BudgetError, match="delta"):
        dprange.release(Unreadable(), DOMAIN, 0.1, delta=1e-6, session=session)  # the session has no delta
    assert session.entries == []


def test_a_release_that_fails_on_a_value_is_charged_and_one_refused_on_a_parameter_is_not():
    """Issue 30: a failure once the values are read depends on them, so it is charged (it
    was free before); a parameter refused before they are read costs nothing."""
    session = Session(1.0)
    with pytest.raises(DomainError):
        dprange.release([1, 2, 99], DOMAIN, 0.5, session=session)
    assert [e.epsilon for e in session.entries] == [0.5] and session.remaining_epsilon == 0.5
    with pytest.raises(ParameterError, match="unknown mechanism"):
        dprange.release(Unreadable(), DOMAIN, 0.25, mechanism="no-such", session=session)
    assert len(session.entries) == 1


def test_quantiles_local_reports_and_delta_are_charged():
    session = Session(2.0, delta=1e-6)
    dprange.quantiles(VALUES, [0.25, 0.5], 0.5, bounds=(0, 9), integer=True, rng=1, session=session)
    dprange.release(VALUES, DOMAIN, 0.5, delta=4e-7, mechanism="flat", rng=2, session=session)
    reports = session.randomize(Flat(10, "grr", epsilon=1.0), VALUES, rng=3, what="survey")
    assert reports.n == VALUES.size
    kinds = [(e.kind, e.epsilon, e.delta) for e in session.entries]
    assert kinds == [("central", 0.5, 0.0), ("central", 0.5, 4e-7), ("local", 1.0, 0.0)]
    assert session.entries[0].mechanism.startswith("quantiles:") and session.entries[2].what == "survey"
    assert session.spent_epsilon == 2 and session.spent_delta == Fraction(4e-7)
    with pytest.raises(BudgetError):
        session.randomize(Flat(10, "grr", epsilon=0.1), VALUES)


def test_the_ledger_survives_save_and_resume(tmp_path):
    path = tmp_path / "ledger.json"
    session = Session.open(path, 1.0)
    assert not path.exists()  # written at the first spend
    dprange.release(VALUES, DOMAIN, 0.3, mechanism="flat", rng=1, session=session)
    resumed = Session.open(path)
    assert resumed.entries == session.entries and resumed.epsilon == 1.0
    dprange.release(VALUES, DOMAIN, 0.3, mechanism="flat", rng=2, session=resumed)
    again = Session.open(str(path))
    assert len(again.entries) == 2 and again.spent_epsilon == 2 * Fraction(0.3)
    data = json.loads(path.read_text())
    assert data["dprange_ledger"] == 1 and [e["epsilon"] for e in data["entries"]] == [0.3, 0.3]
    assert all(e["mechanism"].startswith("Flat") and e["when"].endswith("+00:00") for e in data["entries"])
    with pytest.raises(ParameterError, match="cannot be changed"):
        Session.open(path, 2.0)
    # the stale session (one spend behind) may not overwrite the newer ledger
    with pytest.raises(DataError, match="changed by another process"):
        dprange.release(VALUES, DOMAIN, 0.1, mechanism="flat", session=session)
    assert len(Session.open(path).entries) == 2 and len(session.entries) == 1


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["entries"].append({**d["entries"][0], "epsilon": 0.9}), "spends more than its budget"),
        (lambda d: d.pop("dprange_ledger"), "not a dprange ledger"),
        (lambda d: d["entries"][0].pop("epsilon"), "lacks the field 'epsilon'"),
        (lambda d: d["entries"][0].update(epsilon="x"), "finite number"),
    ],
)
def test_edited_or_corrupt_ledgers_are_refused(tmp_path, edit, message):
    path = tmp_path / "l.json"
    session = Session(1.0, path=path)
    session.charge(0.2, what="test", mechanism="flat")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=message):
        Session.open(path)


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
