"""k-D releases spend from a privacy session (issue 10): dprange.release / release_grid with
session=, and `dprange release` with several --column and --session."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from _helpers import _cli

import dprange
from dprange import BudgetError, Domain, ProductDomain, Session
from dprange.api import release_grid
from dprange.mechanisms.grid import Kronecker

DOMAIN = ProductDomain([Domain.integers(0, 3), Domain.integers(0, 4)])
COLUMNS = [np.arange(40) % 4, np.arange(40) % 5]


class Unreadable:
    """Columns that fail the test if anything reads them."""

    def __array__(self, *args, **kwargs):
        raise AssertionError("the columns were read")

    def __len__(self):
        raise AssertionError("the columns were read")


def test_a_grid_release_is_charged_and_equals_the_release_without_session():
    session = Session(1.0)
    rel = dprange.release(COLUMNS, DOMAIN, 0.4, mechanism="kronecker", rng=3, session=session)
    same = release_grid(COLUMNS, DOMAIN, 0.4, mechanism=Kronecker("identity"), rng=3)
    np.testing.assert_array_equal(rel.counts, same.counts)
    assert [e.epsilon for e in session.entries] == [0.4]
    assert "k-D histogram" in session.entries[0].what and "Kronecker" in session.entries[0].mechanism
    release_grid(COLUMNS, DOMAIN, 0.6, mechanism="kd_hierarchy", session=session)
    assert session.spent_epsilon == Fraction(0.4) + Fraction(0.6) <= 1


def test_an_overspending_grid_release_is_refused_before_the_columns_are_read():
    session = Session(0.5)
    with pytest.raises(BudgetError, match="needs epsilon = 0.6 but the session has 0.5"):
        release_grid(Unreadable(), DOMAIN, 0.6, session=session)
    with pytest.raises(BudgetError):
        dprange.release(Unreadable(), DOMAIN, 0.1, delta=1e-6, session=session)  # the session has no delta
    assert session.entries == []


def test_19_grid_releases_at_epsilon_over_19_fit_exactly():
    session = Session(1.0)
    for seed in range(19):
        release_grid(COLUMNS, DOMAIN, 1.0 / 19, mechanism="kronecker", rng=seed, session=session)
    assert session.spent_epsilon <= 1 and len(session.entries) == 19
    with pytest.raises(BudgetError):
        release_grid(COLUMNS, DOMAIN, 1e-3, mechanism="kronecker", session=session)


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
