"""Contribution bounding: at most k rows per id (per group), in at most m groups per id.

Every row gets a uniform random key from the secure source (62 bits); an id keeps, in each
of its groups, the k rows with the smallest keys: a uniformly random k-subset of its rows
(never the first k: row order is data).  With a group-by, an id's groups are ranked by a
keyed hash of (id, group) under a 128-bit secret drawn from the same source, and the id keeps
its m lowest: a random choice of m of its groups, the same in every batch, whatever the
number of rows in each.  Privacy needs only that what an id keeps depends on that id's own
rows and on randomness independent of the data (docs/privacy.md, "Privacy units"); the
randomness makes the choice unbiased.

Streaming (:class:`BoundedCounter`): the kept rows of the batches read so far (id code, group,
key, bin: 32 bytes a row) are the state; the batches read since are merged with it and cut
back to the k smallest keys per (id, group) in the m lowest-ranked groups of each id once they
hold as many rows as the state (or :data:`PRUNE_ROWS`), and at the end: the same choice as on
all rows at once (the k smallest of a union are among the k smallest of each part).  Rows are
sorted by id, then by group and the top 48 bits of their key in one 64-bit word.  The state
holds at most ids x m x k rows; beyond :data:`MAX_KEPT_ROWS` (512 MiB) it is refused
(DataError); with the rows waiting for a cut, memory is at most about twice the state.

Ids are 64-bit codes: integer ids (and strings that write one, "7", so that a CSV column
read as text and a Parquet integer column agree) are used as they are, other ids are hashed
(pandas' SipHash when pandas is installed, else BLAKE2b), the same in every batch.  Two ids
whose codes collide are bounded together as one, which only drops rows (privacy is kept); at 10^6 ids the chance of
any collision is below 3e-8.  Ties between the 48-bit keys of one id's rows in one group
(chance below rows_per_id^2 / 2^49 per id) are broken by position.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from ..errors import DataError, private

#: The most rows the streaming state keeps (ids x groups kept x rows kept), 32 bytes each.
MAX_KEPT_ROWS = 2**24

_KEY_BOUND = 2**62
#: Group indices below 2^15 share one sort key with the top 48 bits of the row key.
_KEY_BITS = 48
_GROUP_LIMIT = 2**15
#: The streaming state is cut back when the rows added since the last cut reach this or the
#: state's own size (amortised: each row takes part in O(log rows) sorts at most).
PRUNE_ROWS = 2**21
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
    """SplitMix64's finaliser (uint64, wrapping)."""
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

    def group_rank_keys(self, ids: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """The keyed hash of (id, group) that ranks an id's groups (distinct within an id)."""
        with np.errstate(over="ignore"):
            first = _mix(ids.astype(np.uint64) ^ self._secret[0])
            return _mix(first ^ (groups.astype(np.uint64) * _GOLDEN) ^ self._secret[1])

    def keep(self, ids: np.ndarray, groups: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """Indices (sorted) of the rows kept: the k smallest ``keys`` per (id, group) among the
        m lowest-ranked groups of each id."""
        if ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        if groups.size and 0 <= groups.min() and groups.max() < _GROUP_LIMIT:  # one sort key for (group, key)
            order = np.lexsort(((groups << _KEY_BITS) | (keys >> (62 - _KEY_BITS)), ids))
        else:
            order = np.lexsort((keys, groups, ids))
        sid, sgroup = ids[order], groups[order]
        new_pair = np.ones(order.size, dtype=bool)
        new_pair[1:] = (sid[1:] != sid[:-1]) | (sgroup[1:] != sgroup[:-1])
        rank_in_pair = _rank_in_runs(new_pair)
        keep = rank_in_pair < self.k
        if self.m > 1 or np.any(sgroup != sgroup[0]):
            keep &= self._group_kept(sid, sgroup, new_pair)
        return np.sort(order[keep])

    def _group_kept(self, sid: np.ndarray, sgroup: np.ndarray, new_pair: np.ndarray) -> np.ndarray:
        """Per sorted row: whether its group is among its id's m lowest-ranked groups."""
        starts = np.flatnonzero(new_pair)
        pair_id, pair_group = sid[starts], sgroup[starts]
        rank_key = self.group_rank_keys(pair_id, pair_group)
        by_rank = np.lexsort((rank_key, pair_id))
        new_id = np.ones(starts.size, dtype=bool)
        new_id[1:] = pair_id[by_rank][1:] != pair_id[by_rank][:-1]
        pair_rank = np.empty(starts.size, dtype=np.int64)
        pair_rank[by_rank] = _rank_in_runs(new_id)
        pair_of_row = np.cumsum(new_pair) - 1
        return pair_rank[pair_of_row] < self.m


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
    :class:`Bounder` says, in memory of at most :data:`MAX_KEPT_ROWS` kept rows."""

    def __init__(self, bounder: Bounder, limit: int = MAX_KEPT_ROWS):
        self.bounder = bounder
        self.limit = limit
        empty = np.zeros(0, dtype=np.int64)
        self.ids, self.groups, self.keys, self.bins = empty, empty, empty, empty
        self._pending: list[tuple[np.ndarray, ...]] = []
        self._pending_rows = 0

    def add(self, ids: np.ndarray, groups: np.ndarray, bins: np.ndarray) -> None:
        """Add one batch (id codes, group indices, bin indices, int64); the state is cut back
        once the rows added since the last cut reach :data:`PRUNE_ROWS` or its own size."""
        self._pending.append((ids, groups, self.bounder.row_keys(bins.size), bins))
        self._pending_rows += bins.size
        if self._pending_rows >= max(self.ids.size, PRUNE_ROWS):
            self._prune()

    def _prune(self) -> None:
        parts = [(self.ids, self.groups, self.keys, self.bins), *self._pending]
        ids, groups, keys, bins = (np.concatenate([p[i] for p in parts]) for i in range(4))
        self._pending, self._pending_rows = [], 0
        kept = self.bounder.keep(ids, groups, keys)
        if kept.size > self.limit:
            raise DataError(
                f"contribution bounding would hold {private(int(kept.size))} rows (ids x groups x rows kept), over the "
                f"limit of {self.limit}; lower max_rows_per_id or max_groups_per_id, or count on Spark"
            )
        self.ids, self.groups, self.keys, self.bins = ids[kept], groups[kept], keys[kept], bins[kept]

    def counts(self, groups: int, bins: int) -> np.ndarray:
        """The bounded counts, shape (groups, bins), int64."""
        self._prune()
        flat = self.groups * bins + self.bins
        return np.bincount(flat, minlength=groups * bins).astype(np.int64).reshape(groups, bins)
