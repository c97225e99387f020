"""Issue 30, item 2: a session is charged before the data are read, whatever the outcome (a
refusal or a bad value that depends on the data is an answer about them), on every path that
reads data with a session; a refusal from public facts costs nothing."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _helpers import Unreadable, _cli

import dprange
from dprange import DataError, Domain, DomainError, ParameterError, ProductDomain, Session
from dprange.api import grid as api_grid
from dprange.api import histogram as api_histogram
from dprange.cli import release as cli_module
from dprange.ldp.range_protocols import Flat

DOMAIN = Domain.integers(0, 9)
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
