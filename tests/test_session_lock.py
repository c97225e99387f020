"""Issue 30, item 3: the ledger file is checked and charged under an exclusive lock, so that
processes sharing it never spend more than its budget together and no charge is lost; a
charge that cannot get the lock fails; ledgers written before the lock still open."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os

import pytest
from _helpers import Unreadable

import dprange
from dprange import BudgetError, DataError, Domain, Session
from dprange.privacy import session as session_module

DOMAIN = Domain.integers(0, 9)


def _race(path: str, start, results) -> None:
    """Spend 0.1 at a time from the shared ledger until the budget refuses; report the wins."""
    won = []
    start.wait()
    while True:
        try:
            session = Session.open(path)
            epsilon, _ = session.allot(0.1)
            what = f"{os.getpid()}-{len(won)}"
            session.charge(epsilon, what=what, mechanism="race")
        except BudgetError:
            break
        except DataError as exc:  # another process charged since this one opened it: resume and retry
            if "changed by another process" not in str(exc):
                raise
            continue
        won.append(what)
    results.put(won)


def test_six_processes_racing_on_one_ledger_never_overspend_and_every_charge_is_recorded(tmp_path):
    """Measured before the lock: 54-63 successful charges of 0.1 from a budget of 1.0, and the
    file then held 10 of them."""
    path = str(tmp_path / "ledger.json")
    Session(1.0, path=path).save()
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_race, args=(path, start, results)) for _ in range(6)]
    for worker in workers:
        worker.start()
    start.set()
    won = [what for _ in workers for what in results.get(timeout=60)]
    for worker in workers:
        worker.join(timeout=60)
    final = Session.open(path)
    assert final.spent_epsilon <= 1 and len(won) == 10
    assert sorted(e.what for e in final.entries) == sorted(won)


def test_a_charge_that_cannot_get_the_lock_fails_and_writes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "ledger.json"
    session = Session.open(path, 1.0)
    session.charge(0.25, what="first", mechanism="test")
    before = path.read_text()
    monkeypatch.setattr(session_module, "LOCK_TIMEOUT_S", 0.2)
    with open(str(path) + ".lock", "a") as held:  # another process would hold it so
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        other = Session.open(path)
        with pytest.raises(DataError, match="stayed locked by another process"):
            other.charge(0.25, what="second", mechanism="test")
        with pytest.raises(DataError, match="stayed locked"):
            dprange.release(Unreadable(), DOMAIN, 0.25, session=other)
    assert path.read_text() == before and len(other.entries) == 1
    other.charge(0.25, what="second", mechanism="test")  # the lock released, it goes ahead
    assert len(Session.open(path).entries) == 2


def test_a_ledger_written_before_the_lock_still_opens_and_spends(tmp_path):
    """The JSON layout is unchanged: a file from an earlier version (no 'kind') resumes."""
    path = tmp_path / "old.json"
    entry = {"what": "x", "when": "2025-01-01T00:00:00+00:00", "epsilon": 0.5, "delta": 0.0, "mechanism": "Flat()"}
    path.write_text(json.dumps({"dprange_ledger": 1, "epsilon": 1.0, "delta": 0.0, "entries": [entry]}))
    session = Session.open(path)
    session.charge(0.5, what="y", mechanism="flat")
    data = json.loads(path.read_text())
    assert [e["epsilon"] for e in data["entries"]] == [0.5, 0.5] and data["entries"][0]["kind"] == "central"
    assert oct(os.stat(path).st_mode & 0o777) == "0o600" and os.path.exists(str(path) + ".lock")
