"""The candidate group keys of a private group-by and their numbers of distinct ids, read from
the data (private: only :class:`~dprange.privacy.partition_selection.PartitionSelection` may see them).

A row's key is its ``by`` cell: text without surrounding spaces (as a declared key matches it),
a number as a number (integral floats as integers); a missing or empty key drops the row.  With
a privacy unit every id is first bounded to m of its keys (:class:`KeyBounder`: its keys ranked
by a keyed hash of (id, key code) under a secret from the secure source), so that one id adds
one to at most m counts.  Keys are coded by a 64-bit hash of their
text (:func:`~dprange.engines.bounding.id_codes`), never by their position among the keys
present: an id's choice then depends on its own rows and the secret only, not on which other
keys the data hold.  Without a unit each row is one id (m = 1): a key's count is its rows.

Memory: the distinct (id, key) pairs kept (16 bytes each) and one label per distinct key, cut
back like the bounding state (:data:`~dprange.engines.bounding.MAX_KEPT_ROWS` pairs at most).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import DataError, DPRangeError, ParameterError, private
from ..io import MISSING_MARKERS, PARQUET_SUFFIXES, _detail, check_no_nul, open_parquet
from .bounding import MAX_KEPT_ROWS, PRUNE_ROWS, _mix, _plain, _rank_in_runs, id_codes
from .local import DEFAULT_BATCH_ROWS, expand_inputs

#: An odd 64-bit multiplier (the golden ratio's) spreading key codes before the mix.
_ODD = np.uint64(0x9E3779B97F4A7C15)


def key_labels(values) -> tuple[list, np.ndarray]:
    """(the distinct keys of a column, as labels; each row's index among them, -1 when missing)."""
    if _is_arrow_text(values):  # factorised by pyarrow: one Python string per distinct key
        encoded = (values.combine_chunks() if hasattr(values, "combine_chunks") else values).dictionary_encode()
        index = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        return _text_labels(encoded.dictionary.to_pylist(), index)
    arr = _plain(values)
    if arr.dtype.kind in "iub":
        uniques, inverse = np.unique(arr, return_inverse=True)
        return [int(u) for u in uniques], inverse.reshape(-1).astype(np.int64)
    if arr.dtype.kind == "f":
        present = ~np.isnan(arr)
        uniques, inverse = np.unique(arr[present], return_inverse=True)
        index = np.full(arr.size, -1, dtype=np.int64)
        index[present] = inverse.reshape(-1)
        return [int(u) if float(u).is_integer() else float(u) for u in uniques], index
    try:
        import pandas as pd  # noqa: PLC0415 (optional: factorises in C, missing values as -1)
    except ImportError:  # pragma: no cover - pandas is installed with the io extra
        objects = arr.astype(object)
        missing = np.fromiter((v is None or (isinstance(v, float) and v != v) for v in objects), bool, objects.size)
        uniques, inverse = np.unique(objects[~missing].astype(str), return_inverse=True)
        index = np.full(arr.size, -1, dtype=np.int64)
        index[~missing] = inverse.reshape(-1)
        return _text_labels(uniques.tolist(), index)
    codes, distinct = pd.factorize(arr.astype(object))
    return _text_labels(list(distinct), np.asarray(codes, dtype=np.int64))


def _is_arrow_text(values) -> bool:
    kind = getattr(values, "type", None)
    return hasattr(values, "dictionary_encode") and kind is not None and str(kind) in ("string", "large_string")


def _text_labels(distinct: list, index: np.ndarray) -> tuple[list, np.ndarray]:
    """Labels of text keys: stripped (" Male" is "Male"), empty and missing markers dropped;
    ``index`` maps rows to ``distinct`` and is remapped to the labels."""
    stripped = ["" if text is None else str(text).strip() for text in distinct]
    labels = sorted({text for text in stripped if text and text not in MISSING_MARKERS})
    position = {label: i for i, label in enumerate(labels)}
    remap = np.array([position.get(text, -1) for text in stripped] + [-1], dtype=np.int64)
    return labels, remap[index]  # index -1 (missing) takes the appended -1


def _sort_key(label) -> tuple:
    """Keys are published sorted: numbers by value, then text by code point (never data order)."""
    return (1, label, 0.0) if isinstance(label, str) else (0, "", float(label))


def key_codes(labels: list) -> np.ndarray:
    """64-bit codes of key labels (int64), from the key's text alone."""
    return id_codes(np.array([str(label) for label in labels], dtype=object)) if labels else np.zeros(0, np.int64)


class KeyBounder:
    """Each id keeps its m keys of lowest rank, the rank a keyed hash of (id code, key code)
    under a 124-bit secret drawn from the secure source: a random choice of m of its keys that
    depends on its own rows and the secret only, the same in every batch."""

    def __init__(self, rng, max_keys_per_id: int):
        self.m = int(max_keys_per_id)
        secret = rng.integers(0, 1 << 62, size=2)
        self._secret = (np.uint64(int(secret[0])), np.uint64(int(secret[1])))

    def ranks(self, ids: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """The rank key of every (id, key) pair (uint64)."""
        with np.errstate(over="ignore"):
            first = _mix(ids.astype(np.uint64) ^ self._secret[0])
            return _mix(first ^ (codes.astype(np.uint64) * _ODD) ^ self._secret[1])

    def keep(self, ids: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct (id, key) pairs of the rows given whose key is among its id's m lowest-ranked."""
        if ids.size == 0:
            return ids, codes
        order = np.lexsort((codes, ids))
        ids, codes = ids[order], codes[order]
        distinct = np.ones(ids.size, dtype=bool)
        distinct[1:] = (ids[1:] != ids[:-1]) | (codes[1:] != codes[:-1])
        ids, codes = ids[distinct], codes[distinct]
        by_rank = np.lexsort((self.ranks(ids, codes), ids))
        ids, codes = ids[by_rank], codes[by_rank]
        new_id = np.ones(ids.size, dtype=bool)
        new_id[1:] = ids[1:] != ids[:-1]
        kept = _rank_in_runs(new_id) < self.m
        return ids[kept], codes[kept]


class KeyCounter:
    """Distinct ids per key over batches of (key column, id column): ``bounder`` bounds each id
    to m keys; None counts rows (one row, one id)."""

    def __init__(self, bounder: KeyBounder | None, limit: int = MAX_KEPT_ROWS):
        self.bounder = bounder
        self.limit = limit
        self.labels: dict[int, object] = {}
        self.row_counts: dict[int, int] = {}
        empty = np.zeros(0, dtype=np.int64)
        self.ids, self.codes = empty, empty
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    def add(self, keys, ids=None) -> None:
        """One batch: its key column and (with a bounder) its id column."""
        labels, index = key_labels(keys)
        codes = key_codes(labels)
        for code, label in zip(codes.tolist(), labels):
            if self.labels.setdefault(code, label) != label:
                raise DataError("two group keys share a 64-bit code; declare the keys with groups=[...]")
        present = index >= 0
        row_codes = codes[index[present]] if codes.size else np.zeros(0, dtype=np.int64)
        if self.bounder is None:
            values, counts = np.unique(row_codes, return_counts=True)
            for code, count in zip(values.tolist(), counts.tolist()):
                self.row_counts[code] = self.row_counts.get(code, 0) + count
            return
        if ids is None:
            raise ParameterError("a KeyCounter with a bounder needs the id column")
        kept = self.bounder.keep(id_codes(ids)[present], row_codes)
        self._pending.append(kept)
        self._pending_rows += kept[0].size
        if self._pending_rows >= max(self.ids.size, PRUNE_ROWS):
            self._cut()

    def _cut(self) -> None:
        """The pairs kept so far and since, cut back to m per id: the m lowest of a union are
        among the m lowest of each part, so this is the choice made on all rows at once."""
        assert self.bounder is not None
        ids = np.concatenate([self.ids] + [p[0] for p in self._pending])
        codes = np.concatenate([self.codes] + [p[1] for p in self._pending])
        self._pending, self._pending_rows = [], 0
        self.ids, self.codes = self.bounder.keep(ids, codes)
        if self.ids.size > self.limit:
            raise DataError(
                f"private key selection would hold {private(int(self.ids.size))} (id, key) pairs, over the limit "
                f"of {self.limit}; lower max_groups_per_id or declare the keys with groups=[...]"
            )

    def counts(self) -> tuple[list, np.ndarray]:
        """(the keys present, sorted; the number of distinct ids of each after bounding)."""
        if self.bounder is None:
            totals = self.row_counts
        else:
            self._cut()
            values, counts = np.unique(self.codes, return_counts=True)
            totals = dict(zip(values.tolist(), counts.tolist()))
        order = sorted(self.labels, key=lambda code: _sort_key(self.labels[code]))
        return [self.labels[c] for c in order], np.array([totals.get(c, 0) for c in order], dtype=np.int64)


def file_key_counts(
    source, by: str, id_column: str | None, bounder: KeyBounder | None, batch_rows: int = DEFAULT_BATCH_ROWS
) -> tuple[list, np.ndarray]:
    """:meth:`KeyCounter.counts` of the ``by`` (and ``id_column``) columns of CSV / Parquet
    files, read ``batch_rows`` rows at a time (keys and ids read as text from CSV)."""
    counter = KeyCounter(bounder)
    names = [by] if id_column is None else [by, id_column]
    for path in expand_inputs(source):
        for batch in _batches(path, names, batch_rows):
            counter.add(batch.column(0), None if id_column is None else batch.column(1))
    return counter.counts()


def text_table(source, names: list[str], batch_rows: int = DEFAULT_BATCH_ROWS):
    """The ``names`` columns of every file of ``source`` as one pyarrow Table, in memory (CSV
    cells as text, Parquet columns as stored): the id path of a categorical value column, which
    the streaming engine (numeric values only) does not take."""
    import pyarrow as pa  # noqa: PLC0415 (the readers below need it: DataError without it)

    if len(set(names)) != len(names):
        raise ParameterError("the value, id and group columns must be different columns")
    batches = [batch for path in expand_inputs(source) for batch in _batches(path, names, batch_rows)]
    tables = [pa.Table.from_batches([b]) for b in batches]
    if not tables:
        return pa.table({name: pa.array([], pa.string()) for name in names})
    return pa.concat_tables(tables, promote_options="permissive")


def _batches(path: str, names: list[str], batch_rows: int) -> Iterator:
    if path.lower().endswith(PARQUET_SUFFIXES):
        handle = open_parquet(path, names[0])
        for name in names[1:]:
            open_parquet(path, name)
        try:
            yield from handle.iter_batches(batch_size=batch_rows, columns=names)
        except DPRangeError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"cannot read {path!r}{_detail(exc)}") from None
        return
    try:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.csv as pv  # noqa: PLC0415
    except ImportError:
        raise DataError("by= without groups= on CSV files needs pyarrow: pip install 'dprange[io]'") from None
    check_no_nul(path)
    convert = pv.ConvertOptions(
        include_columns=names,
        column_types={name: pa.string() for name in names},
        null_values=list(MISSING_MARKERS),
        strings_can_be_null=True,
    )
    read = pv.ReadOptions(block_size=max(1 << 16, min(batch_rows * 64, 1 << 26)))
    try:
        yield from pv.open_csv(path, read_options=read, convert_options=convert)
    except DPRangeError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"cannot read the columns {', '.join(map(repr, names))} of {path!r}{_detail(exc)}") from None
