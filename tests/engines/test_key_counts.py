"""dprange.engines.key_counts: the candidate keys of a private group-by and their distinct ids
after bounding every id to m keys, against counts by hand; streaming equals all at once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dprange.engines.key_counts import KeyBounder, KeyCounter, file_key_counts, key_codes, key_labels
from dprange.errors import DataError


def test_key_labels_strip_text_drop_missing_and_keep_numbers_as_numbers():
    labels, index = key_labels(pd.Series([" b", "a", None, "b ", float("nan"), "", "a"]))
    assert labels == ["a", "b"] and index.tolist() == [1, 0, -1, 1, -1, -1, 0]
    labels, index = key_labels(np.array([2.0, np.nan, 1.5, 2.0]))
    assert labels == [1.5, 2] and isinstance(labels[1], int) and index.tolist() == [1, -1, 0, 1]
    assert key_labels(np.array([3, 1, 3]))[0] == [1, 3]


def test_key_codes_depend_on_the_key_alone():
    assert key_codes(["x", "y"])[1] == key_codes(["y"])[0]
    assert key_codes([7])[0] == key_codes(["7"])[0] == 7


def by_hand(ids, keys, m, bounder):
    """Distinct ids per key when each id keeps its m keys of lowest rank (the bounder's keyed hash)."""
    codes = dict(zip(sorted(set(keys)), key_codes(sorted(set(keys)))))
    counts = dict.fromkeys(codes, 0)
    for person in sorted(set(ids)):
        own = sorted({k for i, k in zip(ids, keys) if i == person})
        rank = bounder.ranks(np.full(len(own), person, dtype=np.int64), np.array([codes[k] for k in own]))
        for position in np.argsort(rank)[:m]:
            counts[own[position]] += 1
    return [counts[k] for k in sorted(counts)]


@pytest.mark.parametrize("m", [1, 2])
def test_distinct_ids_after_bounding_to_m_keys_batch_by_batch(m):
    """Batches of 53 rows, the state cut at every batch: the same counts as the rule on all rows."""
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 40, 600)
    keys = rng.choice(["p", "q", "r", "s"], 600)
    bounder = KeyBounder(np.random.default_rng(5), m)
    counter = KeyCounter(bounder)
    for start in range(0, 600, 53):
        counter.add(keys[start : start + 53], ids[start : start + 53])
        counter._cut()
    labels, counts = counter.counts()
    assert labels == ["p", "q", "r", "s"]
    assert counts.tolist() == by_hand(ids.tolist(), keys.tolist(), m, bounder)
    assert counts.sum() == sum(min(m, len(set(keys[ids == i]))) for i in set(ids.tolist()))


def test_an_id_keeps_a_uniform_choice_of_its_keys():
    """Monte-Carlo over 3000 secrets: an id with keys p, q, r and m = 1 keeps each with
    probability 1/3 (within 4.5 standard errors), whatever keys the other ids hold."""
    rng = np.random.default_rng(9)
    chosen = np.zeros(3)
    for _ in range(3000):
        counter = KeyCounter(KeyBounder(rng, 1))
        counter.add(np.array(["p", "q", "r", "q", "s"]), np.array([7, 7, 7, 8, 9]))
        _, counts = counter.counts()
        chosen += counts[:3] - [0, 1, 0]  # id 8 holds q alone
    third = 3000 / 3
    assert np.all(np.abs(chosen - third) <= 4.5 * np.sqrt(3000 * (1 / 3) * (2 / 3)))


def test_without_a_unit_each_row_is_one_id(tmp_path):
    frame = pd.DataFrame({"k": ["a", "b", "a", None, "a"]})
    path = tmp_path / "k.csv"
    frame.to_csv(path, index=False)
    assert file_key_counts(str(path), "k", None, None, batch_rows=2) == (["a", "b"], pytest.approx([3, 1]))


def test_the_pairs_held_are_limited():
    counter = KeyCounter(KeyBounder(np.random.default_rng(1), 2), limit=3)
    counter.add(np.array(["a", "b", "c"]), np.array([1, 2, 3]))
    counter.add(np.array(["a"]), np.array([4]))
    with pytest.raises(DataError, match="over the limit of 3"):
        counter.counts()
