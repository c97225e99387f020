"""Contribution bounding: at most k rows per id (per group), in at most m groups per id.

Every row gets a uniform random key from the secure source (62 bits); an id keeps, in each
of its groups, the k rows with the smallest keys: a uniformly random k-subset of its rows
(never the first k: row order is data).  With a group-by, an id's groups are ranked by a
keyed hash of (id, group) under a 128-bit secret drawn from the same source, and the id keeps
its m lowest: a random choice of m of its groups, the same in every batch, whatever the
number of rows in each.  Privacy needs only that what an id keeps depends on that id's own
rows and on randomness independent of the data (docs/privacy.md, "Privacy units"); the
randomness makes the choice unbiased.

Rows are grouped by a keyed hash of their id (SplitMix64's finaliser: a bijection, so two ids
never share it) and ordered within an id by a sort word, the group (16 bits) over the top 48
bits of the key.  Cuts run bucket by bucket (the top 8 bits of the id hash: every row of an id
in one bucket), so that each sort fits in cache: one sort of a 64-bit key per row holding the
next bits of the id hash, the group, the top bits of the key and the row's position, then the
few runs that key cannot order (ids sharing those bits, keys tied in them) re-sorted on the
full words.

Streaming (:class:`BoundedCounter`): the kept rows of the batches read so far (id hash, sort
word, bin: 20 bytes a row, per bucket) are the state; the batches read since are merged with it
and cut back to the k smallest keys per (id, group) in the m lowest-ranked groups of each id
once they hold as many rows as the state (or :data:`PRUNE_ROWS`), and at the end: the same
choice as on all rows at once (the k smallest of a union are among the k smallest of each
part, and a group among an id's m lowest of all its groups is among its m lowest of any part).
The state holds at most ids x m x k rows; beyond :data:`MAX_KEPT_ROWS` (320 MiB) it is refused
(DataError); with the rows waiting for a cut, memory is at most about twice the state.

Ids are 64-bit codes: integer ids (and strings that write one, "7", so that a CSV column
read as text and a Parquet integer column agree) are used as they are, other ids are hashed
(pandas' SipHash when pandas is installed, else BLAKE2b), the same in every batch.  Two ids
whose codes collide are bounded together as one, which only drops rows (privacy is kept); at 10^6 ids the chance of
any collision is below 3e-8.  Ties between the 48-bit keys of one id's rows in one group
(chance below rows_per_id^2 / 2^49 per id) are broken arbitrarily.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from ..errors import DataError, ParameterError, private

#: The most rows the streaming state keeps (ids x groups kept x rows kept), 20 bytes each.
MAX_KEPT_ROWS = 2**24

_KEY_BOUND = 2**62
#: A row's sort word: its group (16 bits) over the top 48 bits of its key.
_KEY_BITS = 48
_SHIFT_KEY = np.uint64(_KEY_BITS)
_GROUP_LIMIT = 2**16
#: Rows are cut in buckets by the top 8 bits of their id hash (all rows of an id in one), so
#: that each sort fits in cache; fewer than _BUCKET_MIN_ROWS rows are cut in one piece.
_BUCKET_BITS = 8
_BUCKET_MIN_ROWS = 2**16
#: The sort key of a cut holds the row's position when this many bits are left for the id hash
#: and the key beside it and the group; else the piece is argsorted.
_MIN_SHARED_BITS = 24
#: The streaming state is cut back when the rows added since the last cut reach this or the
#: state's own size (amortised: each row takes part in O(log rows) sorts at most).
PRUNE_ROWS = 2**21
#: Batches are scattered to the buckets once they hold this many rows together.
_SCATTER_ROWS = 2**18
#: Ids written as canonical decimal integers within int64 are coded as those integers.
_CANONICAL_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,17})\Z")
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def id_codes(values) -> np.ndarray:
    """64-bit codes of the ids ``values`` (a column of any supported type), int64; missing ids
    are a DataError (a row without a person cannot be bounded)."""
    arr = _plain(values)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "f":
        if np.isnan(arr).any():
            raise DataError(
                f"{private(int(np.isnan(arr).sum()))} rows have a missing id; drop them or fill the id column"
            )
        if np.any(arr != np.round(arr)):
            raise DataError("the id column holds non-integer numbers; use integer or string ids")
        return arr.astype(np.int64)
    objects = arr.astype(object)
    missing = np.fromiter((v is None or (isinstance(v, float) and v != v) for v in objects), bool, objects.size)
    if missing.any():
        raise DataError(f"{private(int(missing.sum()))} rows have a missing id; drop them or fill the id column")
    strings = np.asarray([str(v) for v in objects], dtype=object)
    codes = _hash_objects(strings)
    integer = np.fromiter((_CANONICAL_INTEGER.match(s) is not None for s in strings), bool, strings.size)
    if integer.any():  # "7" is the id 7, as an integer column (CSV) or a Parquet one gives it
        codes[integer] = np.array([int(s) for s in strings[integer]], dtype=np.int64)
    return codes


def _plain(values) -> np.ndarray:
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        try:
            return np.asarray(values.to_numpy(zero_copy_only=False))  # pyarrow
        except TypeError:
            return np.asarray(values.to_numpy())  # pandas, polars
    if hasattr(values, "combine_chunks"):
        return np.asarray(values.combine_chunks().to_numpy(zero_copy_only=False))
    return np.asarray(values)


def _hash_objects(strings: np.ndarray) -> np.ndarray:
    try:
        import pandas as pd  # noqa: PLC0415 (optional dependency)
    except ImportError:  # pragma: no cover - pandas is installed with the io extra
        digests = [hashlib.blake2b(s.encode(), digest_size=8).digest() for s in strings]
        return np.frombuffer(b"".join(digests), dtype=np.int64).copy()
    return pd.util.hash_array(strings, categorize=True).view(np.int64)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (uint64, wrapping): a bijection."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


class Bounder:
    """The random choices of one bounded release: k rows per (id, group), m groups per id."""

    def __init__(self, rng, max_rows_per_id: int, max_groups_per_id: int = 1):
        self.rng = rng
        self.k = int(max_rows_per_id)
        self.m = int(max_groups_per_id)
        secret = rng.integers(0, _KEY_BOUND, size=2)
        self._secret = (np.uint64(int(secret[0])), np.uint64(int(secret[1])))

    def row_keys(self, size: int) -> np.ndarray:
        """Fresh uniform keys of ``size`` rows (int64 in [0, 2^62))."""
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self.rng.integers(0, _KEY_BOUND, size=size), dtype=np.int64)

    def id_hashes(self, ids: np.ndarray) -> np.ndarray:
        """A keyed bijection of the id codes (uint64): rows are grouped and bucketed by it."""
        return _mix(np.asarray(ids).astype(np.uint64) ^ self._secret[0])

    def group_rank_keys(self, hashes: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """The keyed hash of (id, group) that ranks an id's groups, from the id hashes."""
        return _mix(hashes ^ (groups.astype(np.uint64) * _GOLDEN) ^ self._secret[1])

    def keep(self, ids: np.ndarray, groups: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Indices (sorted) of the rows kept: the k smallest ``keys`` per (id, group) among the
        m lowest-ranked groups of each id."""
        hashes = self.id_hashes(ids)
        words = sort_words(groups, keys)
        if hashes.size < _BUCKET_MIN_ROWS:
            return np.sort(self.kept(hashes, words))
        parts = bucket_parts(hashes, 1 << _BUCKET_BITS)
        order = parts.order
        hashes, words = hashes[order], words[order]
        kept = [start + self.kept(hashes[start:stop], words[start:stop]) for start, stop in parts.spans()]
        return np.sort(order[np.concatenate(kept)])

    def kept(self, hashes: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Positions of the rows kept among rows holding every row of their ids (id hashes and
        sort words), in the order of (id hash, sort word)."""
        if hashes.size == 0:
            return np.zeros(0, dtype=np.int64)
        order, sid = _sorted_order(hashes, words)
        sgroup = words[order] >> _SHIFT_KEY
        new_id = np.ones(order.size, dtype=bool)
        new_id[1:] = sid[1:] != sid[:-1]
        new_pair = new_id.copy()
        new_pair[1:] |= sgroup[1:] != sgroup[:-1]
        keep = _first_in_runs(new_pair, self.k)
        starts = np.flatnonzero(new_pair)
        id_of_pair = np.cumsum(new_id[starts]) - 1
        pairs_per_id = np.bincount(id_of_pair)
        if pairs_per_id.max() > self.m:
            pair_kept = self._pair_kept(sid[starts], sgroup[starts], id_of_pair, pairs_per_id)
            keep &= pair_kept[np.cumsum(new_pair) - 1]
        return order[keep]

    def _pair_kept(self, pair_id, pair_group, id_of_pair, pairs_per_id) -> np.ndarray:
        """Per (id, group) pair, sorted by id: whether the group is among its id's m lowest-ranked
        (only the pairs of ids with more than m groups are ranked)."""
        crowded = np.flatnonzero(pairs_per_id[id_of_pair] > self.m)
        rank_key = self.group_rank_keys(pair_id[crowded], pair_group[crowded])
        by_rank = crowded[_order_within_runs(id_of_pair[crowded], rank_key)]
        new_id = np.ones(by_rank.size, dtype=bool)
        new_id[1:] = id_of_pair[by_rank][1:] != id_of_pair[by_rank][:-1]
        pair_kept = np.ones(pair_id.size, dtype=bool)
        pair_kept[by_rank] = _first_in_runs(new_id, self.m)
        return pair_kept


def _order_within_runs(run: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The stable order by (run, key) of entries whose ``run`` (int64 >= 0) never decreases: one
    sort of 64-bit words holding the run, the top bits of the key and the position; where two
    entries of a run tie in those key bits, a lexsort on the full keys."""
    run_bits = max(int(run[-1]).bit_length(), 1) if run.size else 1
    index_bits = max((run.size - 1).bit_length(), 1)
    key_bits = 64 - run_bits - index_bits
    if key_bits >= _MIN_SHARED_BITS:
        words = run.astype(np.uint64) << np.uint64(64 - run_bits)
        words |= (key >> np.uint64(64 - key_bits)) << np.uint64(index_bits)
        words |= np.arange(run.size, dtype=np.uint64)
        words.sort()
        order = words.view(np.int64) & ((1 << index_bits) - 1)
        words >>= np.uint64(index_bits)
        if not np.any(words[1:] == words[:-1]):
            return order
    return np.lexsort((key, run))


def sort_words(groups: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """A row's group (16 bits) over the top 48 bits of its key, in one uint64 word."""
    groups = np.asarray(groups)
    if groups.size and (groups.min() < 0 or groups.max() >= _GROUP_LIMIT):
        raise ParameterError(f"contribution bounding takes group indices in [0, {_GROUP_LIMIT}); declare fewer groups")
    return (groups.astype(np.uint64) << _SHIFT_KEY) | (np.asarray(keys).astype(np.uint64) >> np.uint64(62 - _KEY_BITS))


def _sorted_order(hashes: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order of rows by (id hash, sort word), and the id hashes in that order.

    One sort of a 64-bit key per row: bits of the id hash below the bucket bits, the group, the
    top bits of the key and, lowest, the row's position (so that sorting the keys themselves,
    faster than an argsort, gives the order); then the runs that key cannot order (ids sharing
    its hash bits, keys tied in its key bits) are re-sorted on the full words.  Ties of the full
    words (same id, group and 48 key bits) stay in position order."""
    size = hashes.size
    group_bits = max(int(words.max() >> _SHIFT_KEY).bit_length(), 1)
    index_bits = max((size - 1).bit_length(), 1)
    rest = 64 - group_bits - index_bits
    if rest < _MIN_SHARED_BITS:  # a piece too large to share one word with its positions: an argsort
        head_bits, index_bits = 32, 0
    else:
        head_bits = (rest + 4) // 2
    tail = np.uint64(64 - head_bits)
    sort_key = hashes << np.uint64(_BUCKET_BITS)
    sort_key >>= tail
    sort_key <<= tail
    key_part = words << np.uint64(16 - group_bits)
    key_part >>= np.uint64(head_bits + index_bits)
    key_part <<= np.uint64(index_bits)
    sort_key |= key_part
    if index_bits:
        sort_key |= np.arange(size, dtype=np.uint64)
        sort_key.sort()
        order = sort_key.view(np.int64) & ((1 << index_bits) - 1)
        sort_key >>= np.uint64(index_bits)
        ordered = sort_key
    else:
        order = np.argsort(sort_key)
        ordered = sort_key[order]
    ids = hashes[order]
    change = ordered[1:] ^ ordered[:-1]
    same_head = change < np.uint64(1 << (64 - head_bits - index_bits))
    unsure = same_head & ((change == 0) | (ids[1:] != ids[:-1]))
    if unsure.any():
        _reorder_runs(order, ids, hashes, words, same_head, unsure)
    return order, ids


def _reorder_runs(order, ids, hashes, words, same_head, unsure) -> None:
    """Sort in place, on the full (id hash, sort word), the runs of equal sort-key hash bits
    (``same_head``: whether each row's bits equal the previous row's) holding an ``unsure`` pair."""
    run_starts = np.flatnonzero(~same_head) + 1
    bounds = np.concatenate(([0], run_starts, [order.size]))
    runs = np.unique(np.searchsorted(run_starts, np.flatnonzero(unsure), side="right"))
    starts, lengths = bounds[runs], bounds[runs + 1] - bounds[runs]
    offsets = np.cumsum(lengths) - lengths
    rows = np.arange(int(lengths.sum())) + np.repeat(starts - offsets, lengths)
    run_of_row = np.repeat(np.arange(runs.size), lengths)
    sub = order[rows]
    order[rows] = sub[np.lexsort((sub, words[sub], hashes[sub], run_of_row))]
    ids[rows] = hashes[order[rows]]


class _Buckets:
    """Rows scattered by the top bits of their id hash (every row of an id in one bucket)."""

    def __init__(self, order: np.ndarray, bounds: np.ndarray):
        self.order, self.bounds = order, bounds

    def spans(self):
        """(start, stop) of every non-empty bucket in ``order``."""
        return [(int(a), int(b)) for a, b in zip(self.bounds[:-1], self.bounds[1:]) if b > a]


def bucket_parts(hashes: np.ndarray, buckets: int) -> _Buckets:
    """The rows in bucket order (a stable radix sort on the top bits of the id hashes)."""
    bits = buckets.bit_length() - 1
    bucket = (hashes >> np.uint64(64 - bits)).astype(np.uint16) if bits else np.zeros(hashes.size, np.uint16)
    order = np.argsort(bucket, kind="stable")
    bounds = np.zeros(buckets + 1, dtype=np.int64)
    np.cumsum(np.bincount(bucket, minlength=buckets), out=bounds[1:])
    return _Buckets(order, bounds)


def _first_in_runs(starts: np.ndarray, count: int) -> np.ndarray:
    """Whether each entry is among the first ``count`` of its run (``starts`` marks each run's
    first entry): a run starts within the ``count`` entries ending at it, found by doubling
    windows (log2 count passes over booleans)."""
    if count < 1:
        return np.zeros(starts.size, dtype=bool)
    window, width = starts.copy(), 1
    while 2 * width <= count:
        wider = window.copy()
        wider[width:] |= window[:-width]
        window, width = wider, 2 * width
    rest = count - width  # [i - count + 1, i] is [i - width + 1, i] and [i - count + 1, i - rest]
    if rest:
        window = window.copy()
        window[rest:] |= window[: window.size - rest].copy()
    return window


def _rank_in_runs(starts: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of a sorted array (``starts`` marks each run's first entry)."""
    position = np.arange(starts.size, dtype=np.int64)
    run_start = np.maximum.accumulate(np.where(starts, position, 0))
    return position - run_start


def bounded_rows(ids, rng, max_rows_per_id: int, groups=None, max_groups_per_id: int = 1) -> np.ndarray:
    """Indices of the rows kept by contribution bounding of the in-memory ids (and groups)."""
    codes = id_codes(ids)
    group_codes = np.zeros(codes.size, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    bounder = Bounder(rng, max_rows_per_id, max_groups_per_id)
    return bounder.keep(codes, group_codes, bounder.row_keys(codes.size))


class BoundedCounter:
    """Counts per (group, bin) of a stream of (id, group, bin) batches, bounded as
    :class:`Bounder` says, in memory of at most :data:`MAX_KEPT_ROWS` kept rows.

    The state: per bucket of id hashes, the kept rows' id hashes and sort words (uint64) and
    bins (uint32), and the rows added since the last cut (scattered to their buckets in pieces
    of at least :data:`_SCATTER_ROWS` rows, so that small batches make few pieces)."""

    def __init__(self, bounder: Bounder, limit: int = MAX_KEPT_ROWS, buckets: int = 1 << _BUCKET_BITS):
        self.bounder = bounder
        self.limit = limit
        self.buckets = buckets
        empty = (np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.uint32))
        self._kept: list[tuple[np.ndarray, ...]] = [empty] * buckets
        self._pending: list[list[tuple[np.ndarray, ...]]] = [[] for _ in range(buckets)]
        self._fresh: list[tuple[np.ndarray, ...]] = []
        self._fresh_rows = self._pending_rows = self.kept_rows = 0

    def add(self, ids: np.ndarray, groups: np.ndarray, bins: np.ndarray) -> None:
        """Add one batch (id codes, group indices, bin indices); the state is cut back once the
        rows added since the last cut reach :data:`PRUNE_ROWS` or its own size."""
        hashes = self.bounder.id_hashes(ids)
        words = sort_words(groups, self.bounder.row_keys(hashes.size))
        bins = np.asarray(bins)
        self._fresh.append((hashes, words, bins.astype(np.uint32) if bins.size and bins.max() < 2**32 else bins))
        self._fresh_rows += hashes.size
        self._pending_rows += hashes.size
        if self._fresh_rows >= _SCATTER_ROWS:
            self._scatter()
        if self._pending_rows >= max(self.kept_rows, PRUNE_ROWS):
            self._prune()

    def _scatter(self) -> None:
        """The rows added since the last scatter, in pieces by bucket."""
        if not self._fresh:
            return
        columns = self._fresh[0] if len(self._fresh) == 1 else [np.concatenate(c) for c in zip(*self._fresh)]
        self._fresh, self._fresh_rows = [], 0
        parts = bucket_parts(columns[0], self.buckets)
        columns = [column[parts.order] for column in columns]
        for bucket, (start, stop) in enumerate(zip(parts.bounds[:-1], parts.bounds[1:])):
            if stop > start:
                self._pending[bucket].append(tuple(column[start:stop] for column in columns))

    def _prune(self) -> None:
        """Cut every bucket back to its kept rows (its state and its new rows at once)."""
        self._scatter()
        for bucket in range(self.buckets):
            if not self._pending[bucket]:
                continue
            parts = [self._kept[bucket], *self._pending[bucket]]
            hashes, words, bins = (np.concatenate(column) for column in zip(*parts))
            self._pending[bucket] = []
            kept = self.bounder.kept(hashes, words)
            self.kept_rows += kept.size - self._kept[bucket][0].size
            self._kept[bucket] = (hashes[kept], words[kept], bins[kept])
        self._pending_rows = 0
        if self.kept_rows > self.limit:
            raise DataError(
                f"contribution bounding would hold {private(int(self.kept_rows))} rows (ids x groups x rows kept), "
                f"over the limit of {self.limit}; lower max_rows_per_id or max_groups_per_id, or count on Spark"
            )

    def counts(self, groups: int, bins: int) -> np.ndarray:
        """The bounded counts, shape (groups, bins), int64."""
        self._prune()
        totals = np.zeros(groups * bins, dtype=np.int64)
        for _, words, kept_bins in self._kept:
            if words.size:
                flat = (words >> _SHIFT_KEY).astype(np.int64) * bins + kept_bins
                totals += np.bincount(flat, minlength=groups * bins)
        return totals.reshape(groups, bins)
