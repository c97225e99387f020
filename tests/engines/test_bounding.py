"""dprange.engines.bounding: at most k random rows per id (per group), m random groups per id;
the law drawn (uniform subsets, never the first rows), the streaming state against the whole
data at once, the memory limit, and the id codes."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from _helpers import chi_square_p

from dprange.engines import bounding
from dprange.engines.bounding import BoundedCounter, Bounder, bounded_rows, id_codes
from dprange.errors import DataError, ParameterError


def subset_frequencies(ids, k, draws, groups=None, m=1, seed=0):
    rng = np.random.default_rng(seed)
    seen: Counter = Counter()
    for _ in range(draws):
        seen[tuple(bounded_rows(ids, rng, k, groups, m))] += 1
    return seen


def test_each_id_keeps_a_uniform_k_subset_of_its_rows():
    ids = np.array([7, 7, 7, 7, 9, 9, 9])  # 4 rows of id 7, 3 of id 9; k = 2
    seen = subset_frequencies(ids, 2, 6000)
    expected = [
        tuple(sorted(a + b))
        for a in itertools.combinations(range(4), 2)
        for b in itertools.combinations(range(4, 7), 2)
    ]
    assert set(seen) == set(expected)  # never more than k rows of an id, every pair possible
    assert chi_square_p([seen[e] for e in expected], np.full(len(expected), 1 / len(expected))) > 1e-4
    # the first k rows are not favoured (a "first k" rule would keep (0, 1, 4, 5) every time)
    assert seen[(0, 1, 4, 5)] < 6000 / 18 * 1.3


def test_each_id_keeps_m_groups_chosen_uniformly_whatever_their_rows():
    ids = np.array([1, 1, 1, 1])
    groups = np.array([0, 1, 1, 2])  # group 1 has two rows: it must not be chosen more often
    seen = subset_frequencies(ids, 5, 6000, groups, 1)
    chosen_group = Counter()
    for rows, count in seen.items():
        assert len({groups[r] for r in rows}) == 1
        chosen_group[groups[rows[0]]] += count
    assert chi_square_p([chosen_group[g] for g in range(3)], np.full(3, 1 / 3)) > 1e-4
    two = subset_frequencies(ids, 1, 3000, groups, 2, seed=1)
    assert all(len(rows) == 2 and groups[rows[0]] != groups[rows[1]] for rows in two)


@pytest.mark.parametrize("split", [[10], [3, 7], [1, 1, 1, 1, 6], [5, 5]])
@pytest.mark.parametrize("prune_rows", [1, 4, 2**21])
def test_streaming_state_equals_the_whole_data_at_once(split, prune_rows, monkeypatch):
    """Same seed, same keys in the same order: batches give the counts of one pass, whenever
    the state is cut."""
    monkeypatch.setattr(bounding, "PRUNE_ROWS", prune_rows)
    data = np.random.default_rng(3)
    ids = data.integers(0, 3, size=10)
    groups = data.integers(0, 2, size=10)
    bins = data.integers(0, 4, size=10)
    whole = Bounder(np.random.default_rng(11), 2, 1)
    kept = whole.keep(ids, groups, whole.row_keys(10))
    expected = np.zeros((2, 4), dtype=np.int64)
    np.add.at(expected, (groups[kept], bins[kept]), 1)
    counter = BoundedCounter(Bounder(np.random.default_rng(11), 2, 1))
    start = 0
    for size in split:
        counter.add(ids[start : start + size], groups[start : start + size], bins[start : start + size])
        start += size
    assert np.array_equal(counter.counts(2, 4), expected)
    assert counter.kept_rows <= 3 * 2  # ids x k: the state never holds more once cut


def test_streaming_state_over_its_limit_is_refused(monkeypatch):
    counter = BoundedCounter(Bounder(np.random.default_rng(0), 2), limit=5)
    counter.add(np.arange(5), np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64))
    assert counter.counts(1, 1)[0, 0] == 5
    counter.add(np.array([9]), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
    with pytest.raises(DataError, match="over the limit of 5"):
        counter.counts(1, 1)
    monkeypatch.setattr(bounding, "PRUNE_ROWS", 4)  # cut while streaming, not only at the end
    counter = BoundedCounter(Bounder(np.random.default_rng(0), 2), limit=5)
    with pytest.raises(DataError, match="over the limit of 5"):
        counter.add(np.arange(6), np.zeros(6, dtype=np.int64), np.zeros(6, dtype=np.int64))


def test_id_codes_of_integers_strings_and_missing_ids():
    assert np.array_equal(id_codes(np.array([3, 1, 3])), [3, 1, 3])
    codes = id_codes(np.array(["u1", "u2", "u1"], dtype=object))
    assert codes[0] == codes[2] != codes[1]
    pa = pytest.importorskip("pyarrow")
    assert np.array_equal(id_codes(pa.array(["u1", "u2", "u1"])), codes)
    with pytest.raises(DataError, match="missing id"):
        id_codes(np.array(["u1", None], dtype=object))
    with pytest.raises(DataError, match="missing id"):
        id_codes(np.array([1.0, np.nan]))


def reference_keep(bounder, ids, groups, keys):
    """The rule written plainly: rows sorted by (id, group, key), the k first of each (id, group)
    in the m groups of each id with the lowest rank keys."""
    hashes = bounder.id_hashes(ids)
    kept = []
    for ident in np.unique(ids):
        rows = np.flatnonzero(ids == ident)
        own = np.unique(groups[rows])
        rank = bounder.group_rank_keys(np.full(own.size, hashes[rows[0]]), own)
        for group in own[np.argsort(rank)][: bounder.m]:
            in_group = rows[groups[rows] == group]
            kept.extend(in_group[np.argsort(keys[in_group] >> 14, kind="stable")][: bounder.k])
    return np.sort(np.array(kept, dtype=np.int64))


@pytest.mark.parametrize("bucket_min_rows", [2**16, 1])  # cut in one piece, or bucket by bucket
@pytest.mark.parametrize("shared_bits", [24, 64])  # positions in the sort key, or an argsort
def test_keep_equals_the_rule_written_plainly(bucket_min_rows, shared_bits, monkeypatch):
    monkeypatch.setattr(bounding, "_BUCKET_MIN_ROWS", bucket_min_rows)
    monkeypatch.setattr(bounding, "_MIN_SHARED_BITS", shared_bits)
    data = np.random.default_rng(5)
    ids = data.integers(0, 400, size=6000) ** 2  # 1 to ~40 rows per id
    groups = data.integers(0, 6, size=6000)
    bounder = Bounder(np.random.default_rng(8), 3, 2)
    keys = bounder.row_keys(ids.size)
    assert np.array_equal(bounder.keep(ids, groups, keys), reference_keep(bounder, ids, groups, keys))


def test_rows_the_one_word_sort_key_cannot_order_are_ordered_exactly(monkeypatch):
    """Two ids sharing the hash bits of the sort key, and keys tied in the bits it holds:
    the order is still by (id hash, group, key)."""
    top = np.uint64(0xAB) << np.uint64(56)
    hashes = np.array([top | np.uint64(2), top | np.uint64(1), top | np.uint64(2), top | np.uint64(1)], np.uint64)
    words = np.array([5, 7, 3, (1 << 20) + 4], dtype=np.uint64)  # keys differing only in their low bits
    for shared_bits in (24, 64):  # positions in the sort key, or an argsort
        monkeypatch.setattr(bounding, "_MIN_SHARED_BITS", shared_bits)
        order, ordered_ids = bounding._sorted_order(hashes, words)
        assert list(order) == [1, 3, 2, 0]  # (id 1: keys 7, 2^20+4), then (id 2: keys 3, 5)
        assert np.array_equal(ordered_ids, hashes[order])
    bounder = Bounder(np.random.default_rng(0), 1)
    assert sorted(bounder.kept(hashes, words)) == [1, 2]  # the smallest key of each id


@pytest.mark.parametrize("batch", [97, 4096, 20000])
@pytest.mark.parametrize("scatter_rows", [1, 500])
def test_streaming_counts_do_not_depend_on_the_batch_size_or_the_buckets(batch, scatter_rows, monkeypatch):
    """Batches scattered to the buckets alone or together, the state cut while streaming."""
    monkeypatch.setattr(bounding, "_SCATTER_ROWS", scatter_rows)
    monkeypatch.setattr(bounding, "PRUNE_ROWS", 3000)
    data = np.random.default_rng(6)
    ids = data.integers(0, 300, size=20000)
    groups = data.integers(0, 4, size=20000)
    bins = data.integers(0, 9, size=20000)
    whole = Bounder(np.random.default_rng(2), 2, 2)
    kept = whole.keep(ids, groups, whole.row_keys(ids.size))
    expected = np.zeros((4, 9), dtype=np.int64)
    np.add.at(expected, (groups[kept], bins[kept]), 1)
    for buckets in (1, 16):
        counter = BoundedCounter(Bounder(np.random.default_rng(2), 2, 2), buckets=buckets)
        for start in range(0, ids.size, batch):
            counter.add(ids[start : start + batch], groups[start : start + batch], bins[start : start + batch])
        assert np.array_equal(counter.counts(4, 9), expected)


def test_groups_beyond_the_sort_word_are_refused():
    bounder = Bounder(np.random.default_rng(0), 1)
    with pytest.raises(ParameterError, match="group indices"):
        bounder.keep(np.array([1]), np.array([2**16]), bounder.row_keys(1))


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13])
def test_first_in_runs_marks_the_first_entries_of_each_run(count):
    starts = np.random.default_rng(count).random(500) < 0.1
    starts[0] = True
    rank = np.arange(500) - np.maximum.accumulate(np.where(starts, np.arange(500), 0))
    assert np.array_equal(bounding._first_in_runs(starts, count), rank < count)
    assert np.array_equal(bounding._rank_in_runs(starts), rank)  # what engines.key_counts ranks with


@pytest.mark.parametrize("shared_bits", [24, 64])
@pytest.mark.parametrize("tied", [0.0, 0.5])  # the share of keys tied in the sort key's key bits
def test_many_runs_the_sort_key_cannot_order_are_each_ordered_exactly(shared_bits, tied, monkeypatch):
    """Ids in 4 sets sharing the sort key's hash bits, keys differing only below its key bits,
    among ids and keys it orders: every id's rows together, in the order of their sort words."""
    monkeypatch.setattr(bounding, "_MIN_SHARED_BITS", shared_bits)
    data = np.random.default_rng(4)
    # bits 24-55 of the id hash: the sort key holds them (its bucket bits 56-63 and bits 0-23 not)
    head = data.integers(0, 4, size=40).astype(np.uint64) << np.uint64(30)
    own = (data.integers(0, 256, size=40).astype(np.uint64) << np.uint64(56)) | data.integers(0, 2**24, size=40).astype(
        np.uint64
    )
    unique = np.concatenate([head | own, data.integers(0, 2**63, size=40).astype(np.uint64)])
    hashes = unique[data.integers(0, 80, size=600)]
    keys = np.where(data.random(600) < tied, data.integers(0, 8, size=600), data.integers(0, 2**62, size=600))
    words = bounding.sort_words(data.integers(0, 3, size=600), keys)
    order, ordered_ids = bounding._sorted_order(hashes, words)
    assert np.array_equal(np.sort(order), np.arange(600))
    assert np.array_equal(ordered_ids, hashes[order])
    same_id = ordered_ids[1:] == ordered_ids[:-1]
    assert np.count_nonzero(~same_id) + 1 == np.unique(hashes).size  # the rows of an id together
    ordered_words = words[order]
    rising = (ordered_words[1:] > ordered_words[:-1]) | (
        (ordered_words[1:] == ordered_words[:-1]) & (order[1:] > order[:-1])  # full ties in position order
    )
    assert rising[same_id].all()


@pytest.mark.parametrize("shared_bits", [24, 64])  # one sort of words, or a lexsort
@pytest.mark.parametrize("tied", [False, True])  # keys tied in their top bits within a run
def test_order_within_runs_is_the_stable_order_by_run_then_key(shared_bits, tied, monkeypatch):
    monkeypatch.setattr(bounding, "_MIN_SHARED_BITS", shared_bits)
    data = np.random.default_rng(9)
    run = np.sort(data.integers(0, 300, size=1000))
    key = data.integers(0, 2**63, size=1000).astype(np.uint64) * np.uint64(2)
    if tied:
        key[1::7] = key[::7][: key[1::7].size] - np.uint64(1)  # smaller, equal in the top bits
    assert np.array_equal(bounding._order_within_runs(run, key), np.lexsort((key, run)))
