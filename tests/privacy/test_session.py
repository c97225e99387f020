"""The privacy session (dprange.privacy.session): exact sequential composition, refusal before data
are read, a charge before the data are read whatever the outcome on every path that reads data
(issue 30, item 2), an exclusive lock on the ledger (item 3), and a ledger that survives saving,
resuming and edits."""

from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
from fractions import Fraction

import numpy as np
import pytest
from _helpers import Unreadable

import dprange
from dprange import BudgetError, DataError, Domain, DomainError, ParameterError, ProductDomain, Session
from dprange.api import grid as api_grid
from dprange.api import histogram as api_histogram
from dprange.api import release_grid
from dprange.ldp.range_protocols import Flat
from dprange.mechanisms.grid import Kronecker
from dprange.privacy import session as session_module

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


GRID = ProductDomain([Domain.integers(0, 3), Domain.integers(0, 3)])
#: Outcomes that depend on the data (they are charged like any other).
OUTCOMES = (DataError, DomainError)


class ChargedFirst:
    """Values that, when read, check that the session's ledger file already holds the charge
    (``spends`` entries), then read as ``values``."""

    def __init__(self, values, path, spends: int = 1):
        self.values, self.path, self.spends, self.reads = np.asarray(values), path, spends, 0

    def __array__(self, dtype=None, copy=None):
        self.reads += 1
        assert len(Session.open(self.path).entries) == self.spends, "the values were read before the charge"
        return self.values if dtype is None else self.values.astype(dtype)

    def __len__(self):
        return len(self.values)


def _ledger(tmp_path, epsilon=4.0) -> Session:
    return Session.open(tmp_path / "ledger.json", epsilon)


def _spent(tmp_path) -> Fraction:
    return Session.open(tmp_path / "ledger.json").spent_epsilon


# ------------------------------------------------------------------ item 2: charged before reading


def test_joint_exp_refusing_more_records_than_n_max_is_charged(tmp_path):
    """The refusal says whether n > n_max: 20 such calls found n exactly for free."""
    session = _ledger(tmp_path)
    values = np.linspace(0.1, 0.9, 20)
    with pytest.raises(DataError, match="more records than the declared n_max"):
        dprange.quantiles(values, [0.5], 1.0, bounds=(0, 1), method="joint_exp", n_max=10, session=session)
    assert _spent(tmp_path) == 1 and session.spent_epsilon == 1
    (entry,) = Session.open(tmp_path / "ledger.json").entries
    assert entry.mechanism == "quantiles:joint_exp" and entry.what == "quantiles at 1 levels"


def test_failed_private_bounds_are_charged_in_full(tmp_path):
    """No bucket reached the threshold (an epsilon_b-DP outcome): the call spent epsilon."""
    session = _ledger(tmp_path)
    with pytest.raises(DataError, match="too few records to find bounds privately"):
        dprange.quantiles([1.0, 2.0, 3.0], [0.5], 0.1, bounds="private", rng=0, session=session)
    assert _spent(tmp_path) == Fraction(0.1)
    (entry,) = session.entries
    assert entry.what == f"quantiles at 1 levels (of which bounds epsilon {0.1 * 0.1!r})"


def test_a_bad_value_is_charged_on_every_library_path(tmp_path):
    """A value outside the domain, NaN among quantiles' values, a bad row of a file: each
    stops the call after the charge."""
    session = _ledger(tmp_path, 10.0)
    with pytest.raises(DomainError):
        dprange.release([1, 2, 99], DOMAIN, 0.5, session=session)
    with pytest.raises(DomainError):
        dprange.release_grid([[0, 1], [0, 9]], GRID, 0.5, mechanism="kronecker", session=session)
    with pytest.raises(DataError, match="NaN"):
        dprange.quantiles([1.0, np.nan], [0.5], 0.5, bounds=(0, 9), method="approximate", session=session)
    bad = tmp_path / "bad.csv"
    bad.write_text("x\n1\n2\n20\n")
    with pytest.raises(DomainError):
        dprange.release_files(bad, "x", DOMAIN, 0.5, session=session)
    assert [e.epsilon for e in Session.open(tmp_path / "ledger.json").entries] == [0.5] * 4
    with pytest.raises(DomainError):  # local-DP reports: charged before the users randomise
        session.randomize(Flat(10, "grr", epsilon=0.5), [1, 2, 30])
    assert _spent(tmp_path) == 5 * Fraction(0.5)


@pytest.mark.parametrize(
    "call",
    [
        lambda v, s: dprange.release(v, DOMAIN, 0.5, mechanism="flat", session=s),
        lambda v, s: dprange.release([v, v], GRID, 0.5, mechanism="kronecker", session=s),
        lambda v, s: dprange.quantiles(v, [0.25, 0.5], 0.5, bounds=(0, 9), integer=True, session=s),
        lambda v, s: dprange.quantiles(v, [0.5], 0.5, bounds="private", integer=True, session=s),
        lambda v, s: dprange.quantiles(v, [0.5], 0.5, bounds=(0, 9), method="joint_exp", n_max=99, session=s),
        lambda v, s: s.randomize(Flat(10, "grr", epsilon=0.5), v),
    ],
    ids=["release", "release_grid", "quantiles", "private-bounds", "joint_exp", "randomize"],
)
def test_the_ledger_file_holds_the_charge_before_any_value_is_read(tmp_path, call):
    session = _ledger(tmp_path)
    values = ChargedFirst(np.arange(40) % 4, tmp_path / "ledger.json")
    try:
        call(values, session)
    except OUTCOMES:  # an outcome (e.g. failed private bounds on 40 records) is charged all the same
        pass
    assert values.reads >= 1 and _spent(tmp_path) == Fraction(0.5)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_files_and_spark_frames_are_charged_before_they_are_counted(tmp_path, monkeypatch, engine):
    """The streaming and Spark engines (counting replaced by a probe; Spark need not run)."""
    session = _ledger(tmp_path)
    seen = []

    def probe(*args, **kwargs):
        seen.append(len(Session.open(tmp_path / "ledger.json").entries))
        raise DataError("the probe read a bad row")

    name = "stream_histogram" if engine == "local" else "spark_histogram"
    for module in (api_histogram, api_grid):  # where the facade's entry points count
        if hasattr(module, name):
            monkeypatch.setattr(module, name, probe)
    source = tmp_path / "in.csv"
    if engine == "local":  # a source that names no file is refused free
        with pytest.raises(DataError, match="does not exist"):
            dprange.release_files(source, "x", DOMAIN, 0.5, session=session)
        assert session.entries == []
        source.write_text("x\n1\n")
    with pytest.raises(DataError, match="probe"):
        dprange.release_files(source, "x", DOMAIN, 0.5, engine=engine, session=session)
    if engine == "spark":
        for module in (api_histogram, api_grid):
            monkeypatch.setattr(module, "is_spark_frame", lambda data: True)
        with pytest.raises(DataError, match="probe"):
            dprange.release("a Spark frame", DOMAIN, 0.5, column="x", session=session)
        with pytest.raises(DataError, match="probe"):
            dprange.release_grid(_Frame(), GRID, 0.5, mechanism="kronecker", session=session)
    assert seen == list(range(1, len(seen) + 1)) and _spent(tmp_path) == len(seen) * Fraction(0.5)


class _Frame:
    columns = ("x", "y")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"bounds": None}, "needs bounds"),
        ({"bounds": "private", "bounds_share": 1.5}, "bounds_share"),
        ({"bounds": (3, 1)}, "a < b"),
        ({"bounds": (0, 9), "method": "joint_exp"}, "needs n_max"),
        ({"bounds": (0, 9), "method": "joint_exp", "n_max": 10**300}, "float error"),
        ({"bounds": (0, 9), "method": "nope"}, "nope"),
    ],
)
def test_quantiles_refused_on_public_facts_cost_nothing_and_read_nothing(tmp_path, options, message):
    session = _ledger(tmp_path)
    with pytest.raises(ParameterError, match=message):
        dprange.quantiles(Unreadable(), [0.5], 0.5, session=session, **options)
    assert session.entries == [] and not (tmp_path / "ledger.json").exists()


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


GRID_DOMAIN = ProductDomain([Domain.integers(0, 3), Domain.integers(0, 4)])
COLUMNS = [np.arange(40) % 4, np.arange(40) % 5]


def test_a_grid_release_is_charged_and_equals_the_release_without_session():
    session = Session(1.0)
    rel = dprange.release(COLUMNS, GRID_DOMAIN, 0.4, mechanism="kronecker", rng=3, session=session)
    same = release_grid(COLUMNS, GRID_DOMAIN, 0.4, mechanism=Kronecker("identity"), rng=3)
    np.testing.assert_array_equal(rel.counts, same.counts)
    assert [e.epsilon for e in session.entries] == [0.4]
    assert "k-D histogram" in session.entries[0].what and "Kronecker" in session.entries[0].mechanism
    release_grid(COLUMNS, GRID_DOMAIN, 0.6, mechanism="kd_hierarchy", session=session)
    assert session.spent_epsilon == Fraction(0.4) + Fraction(0.6) <= 1


def test_an_overspending_grid_release_is_refused_before_the_columns_are_read():
    session = Session(0.5)
    with pytest.raises(BudgetError, match="needs epsilon = 0.6 but the session has 0.5"):
        release_grid(Unreadable(), GRID_DOMAIN, 0.6, session=session)
    with pytest.raises(BudgetError):
        dprange.release(Unreadable(), GRID_DOMAIN, 0.1, delta=1e-6, session=session)  # the session has no delta
    assert session.entries == []


def test_19_grid_releases_at_epsilon_over_19_fit_exactly():
    session = Session(1.0)
    for seed in range(19):
        release_grid(COLUMNS, GRID_DOMAIN, 1.0 / 19, mechanism="kronecker", rng=seed, session=session)
    assert session.spent_epsilon <= 1 and len(session.entries) == 19
    with pytest.raises(BudgetError):
        release_grid(COLUMNS, GRID_DOMAIN, 1e-3, mechanism="kronecker", session=session)
