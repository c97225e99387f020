"""dprange.api.private_keys: group-by with keys selected privately (by= without groups=): the keys
kept and their order, the counts the selection sees (distinct ids after bounding to m keys per
id), the budget split recorded and charged once, the local engine agreeing with the frames, and
the refusals.  The selection's privacy from the definition: tests/privacy/test_partition_selection.py."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from _helpers import write_table

import dprange
from dprange import Domain, GroupedRelease, Session
from dprange.api.private_keys import KEY_SHARE, split_epsilon
from dprange.errors import ParameterError
from dprange.privacy.partition_selection import PartitionSelection

DOMAIN = Domain.integers(0, 4)


@pytest.fixture(scope="module")
def people():
    """ids 0-29 with 2 rows in each of " b" and "a" (text with a space: the key "b"); ids 30-49
    with 3 rows in "c"; one id with one row in "rare"; a row with a missing key."""
    rows = [(i, key, i % 5) for i in range(30) for key in (" b", "a") for _ in range(2)]
    rows += [(i, "c", (i + r) % 5) for i in range(30, 50) for r in range(3)]
    rows += [(99, "rare", 1), (98, None, 2)]
    return pd.DataFrame(rows, columns=["id", "key", "x"])


def captured_counts(monkeypatch) -> list:
    """The counts every PartitionSelection.select is given (the original draw still runs)."""
    seen: list = []
    original = PartitionSelection.select

    def select(self, counts, rng):
        seen.append((self, np.asarray(counts).tolist()))
        return original(self, counts, rng)

    monkeypatch.setattr(PartitionSelection, "select", select)
    return seen


@pytest.mark.parametrize(
    "unit, expected",
    [
        ({}, [60, 60, 60, 1]),  # one row one id: rows per key
        ({"privacy_id": "id", "max_rows_per_id": 2}, [None, None, 20, 1]),  # m = 1: a + b = 30
        ({"privacy_id": "id", "max_rows_per_id": 2, "max_groups_per_id": 2}, [30, 30, 20, 1]),
    ],
)
def test_the_selection_sees_distinct_ids_per_key_after_bounding(people, monkeypatch, unit, expected):
    seen = captured_counts(monkeypatch)
    grouped = dprange.release(people, DOMAIN, 40.0, column="x", by="key", delta=1e-6, rng=3, **unit)
    (selection, counts) = seen[0]
    assert len(seen) == 1 and len(counts) == 4  # keys a, b, c, rare (sorted; the missing key dropped)
    if expected[0] is None:
        assert counts[0] + counts[1] == 30 and counts[2:] == expected[2:]
    else:
        assert counts == expected
    assert selection.max_partitions == unit.get("max_groups_per_id", 1)
    assert selection.epsilon == 40.0 * KEY_SHARE and selection.delta == 1e-6
    # pi(n >= 3) = 1 at epsilon 10 per key; rare (one id) is kept with probability 1e-6: dropped; sorted
    assert grouped.keys == ["a", "b", "c"]


def test_the_kept_keys_are_released_exactly_at_huge_epsilon(people):
    grouped = dprange.release(people, DOMAIN, 1e6, column="x", by="key", delta=1e-6, rng=1, mechanism="flat")
    assert grouped.keys == ["a", "b", "c"]
    stripped = people.assign(key=people.key.str.strip())
    for key in grouped.keys:
        truth = np.bincount(stripped.x[stripped.key == key], minlength=5)
        np.testing.assert_allclose(grouped[key].histogram().value, truth, atol=1e-6)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_the_local_engine_selects_from_the_same_counts(people, tmp_path, monkeypatch, suffix):
    path = write_table(people, tmp_path / f"people.{suffix}")
    seen = captured_counts(monkeypatch)
    unit = {"privacy_id": "id", "max_rows_per_id": 2, "max_groups_per_id": 2}
    files = dprange.release_files(path, "x", DOMAIN, 1e6, by="key", delta=1e-6, rng=2, batch_rows=7, **unit)
    dprange.release(people, DOMAIN, 1e6, column="x", by="key", delta=1e-6, rng=2, **unit)
    assert seen[0][1] == seen[1][1] == [30, 30, 20, 1]
    assert files.keys == ["a", "b", "c"]


def test_the_budget_split_is_recorded_and_charged_once(people):
    session = Session(2.0, 1e-5)
    grouped = dprange.release(
        people, DOMAIN, 1.0, column="x", by="key", delta=1e-6, key_share=0.4, rng=5, session=session
    )
    assert len(session.entries) == 1
    entry = session.entries[0]
    assert entry.epsilon == 1.0 and entry.delta == 1e-6 and "keys selected privately" in entry.what
    chosen = grouped.key_selection
    assert chosen["epsilon"] == 0.4 and chosen["delta"] == 1e-6 and "sorted" in chosen["keys"]
    assert Fraction(chosen["epsilon"]) + Fraction(chosen["release_epsilon"]) <= 1
    assert all(r.epsilon == chosen["release_epsilon"] and r.delta == 0 for r in grouped.releases)
    assert grouped.epsilon == 1.0 and grouped.delta == 1e-6
    back = GroupedRelease.from_json(grouped.to_json())
    assert back.key_selection == chosen and back.keys == grouped.keys and back.delta == 1e-6


def test_no_key_kept_is_a_release_with_no_group(people, tmp_path):
    lonely = people[people.id == 99]
    grouped = dprange.release(lonely, DOMAIN, 1.0, column="x", by="key", delta=1e-9, rng=1)
    assert grouped.keys == [] and len(grouped.to_pandas()) == 0
    back = GroupedRelease.from_json(grouped.to_json())
    assert back.keys == [] and back.key_selection == grouped.key_selection
    pytest.importorskip("matplotlib")
    assert open(grouped.plot(tmp_path / "none.png"), "rb").read(4) == b"\x89PNG"
    with pytest.raises(ParameterError, match="public key"):
        GroupedRelease("key", [], [], 1.0)


def test_split_epsilon_never_exceeds_epsilon():
    for epsilon in (1.0, 0.3, 1e-3, 7.123456789):
        for share in (0.1, 0.25, 1 / 3, 0.9):
            chosen, rest = split_epsilon(epsilon, share)
            assert Fraction(chosen) + Fraction(rest) <= Fraction(epsilon)
            assert chosen == pytest.approx(epsilon * share) and rest == pytest.approx(epsilon * (1 - share))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "needs delta > 0.*public list of keys"),
        ({"delta": 1e-6, "key_share": 1.0}, "key_share"),
        ({"delta": 1e-6, "groups": ["a"], "key_share": 0.5}, "by= without groups="),
        ({"delta": 1e-6, "neighbours": "replace"}, "add_remove"),
    ],
)
def test_private_keys_refuse_before_reading(people, kwargs, message):
    session = Session(5.0, 1e-3)
    with pytest.raises(ParameterError, match=message):
        dprange.release(people, DOMAIN, 1.0, column="x", by="key", session=session, **kwargs)
    assert not session.entries


def test_a_key_share_without_private_keys_is_refused(people):
    with pytest.raises(ParameterError, match="needs by= without groups="):
        dprange.release(people, DOMAIN, 1.0, column="x", key_share=0.5)


def test_through_the_release_a_key_appears_with_its_probability_pi(people):
    """Monte-Carlo through dprange.release with ids: a key held by one id appears with
    probability pi(1) = delta, one held by two ids (three rows) with pi(2) (here 0.3 and
    0.3 e^0.25 + 0.3 = 0.685), 600 releases each within 4.5 standard errors."""
    tiny = pd.DataFrame({"id": [1, 2, 2, 3], "key": ["one", "two", "two", "two"], "x": [0, 1, 2, 3]})
    tiny.loc[3, "id"] = 4  # "two": ids 2 and 4
    selection = PartitionSelection(0.25, 0.3)
    rng = np.random.default_rng(11)
    runs = 600
    seen = {"one": 0, "two": 0}
    for _ in range(runs):
        grouped = dprange.release(
            tiny,
            DOMAIN,
            1.0,
            column="x",
            by="key",
            delta=0.3,
            rng=rng,
            mechanism="flat",
            privacy_id="id",
            max_rows_per_id=2,
        )
        for key in grouped.keys:
            seen[key] += 1
    for key, n in (("one", 1), ("two", 2)):
        p = selection.probability(n)
        assert abs(seen[key] / runs - p) <= 4.5 * np.sqrt(p * (1 - p) / runs), (key, seen[key], p)
