"""Releases with a privacy unit (many rows per person) and group-by with public or private keys.

:func:`unit_release` is what ``dprange.release`` and ``dprange.release_files`` run when they
are given ``privacy_id`` or ``by``: everything is checked and the session charged before any
value is read; the rows are bounded (:mod:`dprange.engines.bounding`: at most k random rows
per id in each of at most m random groups), counted per (group, bin), and each group is
released by the mechanism at the row-level epsilon that group privacy gives
(:mod:`dprange.privacy.units`).  The releases record the id-level epsilon and the relation
"add or remove one id with all its rows".

Private keys (``by=`` without ``groups=``, delta > 0): a share ``key_share`` of epsilon and all
of delta choose the keys (:class:`~dprange.privacy.partition_selection.PartitionSelection` on
each key's distinct ids after bounding to m keys per id, :mod:`dprange.engines.key_counts`),
the rest of epsilon releases the keys kept, as public keys would be, sorted.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import check_delta, check_epsilon
from ..answers.grouped import GroupedRelease
from ..answers.release import Release
from ..columns import column_array, value_at
from ..domain import Domain, _drop_missing
from ..engines.bounding import Bounder, id_codes
from ..engines.frames import is_frame, select_column
from ..engines.key_counts import text_table
from ..engines.local import DEFAULT_BATCH_ROWS, expand_inputs
from ..engines.spark import is_spark_frame
from ..engines.spark_units import spark_bounded_counts
from ..engines.unit_files import stream_bounded_counts
from ..errors import ParameterError, excerpt, private
from ..privacy.partition_selection import PartitionSelection
from ..privacy.samplers import resolve_rng
from ..privacy.units import PrivacyUnit, check_unit_release, make_unit
from .common import _session, charge_before_reading
from .private_keys import (
    KEY_SHARE,
    PRIVATE_KEYS_NOTE,
    check_key_share_use,
    check_private_keys,
    private_what,
    release_delta,
    select_keys,
    split_epsilon,
)

#: The most public group keys one grouped release takes.
MAX_GROUPS = 10_000


@dataclasses.dataclass(frozen=True)
class Grouping:
    """A public group-by: the key column ``by`` and its declared keys (in order)."""

    by: str
    keys: tuple

    @classmethod
    def make(cls, by, groups) -> Grouping | None:
        if by is None:
            if groups is not None:
                raise ParameterError("groups= needs by= (the column holding the group keys)")
            return None
        if not isinstance(by, str) or not by:
            raise ParameterError("by must name the column holding the group keys")
        if groups is None or isinstance(groups, (str, bytes)) or len(list(groups)) == 0:
            raise ParameterError(
                f"by={by!r} needs groups=[...]: the public list of keys (they are never read from the data)"
            )
        keys = tuple(groups)
        if not all(isinstance(k, (str, int, float, np.integer, np.floating)) for k in keys):
            raise ParameterError("the group keys must be strings or numbers")
        if len({str(k) for k in keys}) != len(keys):
            raise ParameterError("the group keys must be distinct")
        if len(keys) > MAX_GROUPS:
            raise ParameterError(f"at most {MAX_GROUPS} groups are supported, got {len(keys)}")
        return cls(by, tuple(k.item() if isinstance(k, np.generic) else k for k in keys))

    def indices(self, values) -> np.ndarray:
        """The index of every row's key in the declared list, -1 for keys not declared or missing
        (dropped).  Text keys are compared without surrounding spaces; numbers as numbers."""
        arr = _plain_keys(values)
        if arr.dtype.kind in "iufb":
            declared = np.array([_as_number(k) for k in self.keys], dtype=float)
            numeric = arr.astype(float)
            out = np.full(arr.size, -1, dtype=np.int64)
            for i, key in enumerate(declared):
                out[numeric == key] = i
            return out
        uniques, inverse = np.unique(arr.astype(str), return_inverse=True)
        lookup = {str(k).strip(): i for i, k in enumerate(self.keys)}
        # " Male" in a CSV cell is the key "Male"
        mapped = np.array([lookup.get(str(u).strip(), -1) for u in uniques], dtype=np.int64)
        return mapped[inverse.reshape(-1)] if uniques.size else np.zeros(0, dtype=np.int64)


def _as_number(key) -> float:
    try:
        return float(key)
    except (TypeError, ValueError):
        return float("nan")  # a string key never matches a numeric column


def _plain_keys(values) -> np.ndarray:
    if hasattr(values, "to_numpy") and not isinstance(values, np.ndarray):
        try:
            return np.asarray(values.to_numpy(zero_copy_only=False))
        except TypeError:
            return np.asarray(values.to_numpy())
    if hasattr(values, "combine_chunks"):
        return np.asarray(values.combine_chunks().to_numpy(zero_copy_only=False))
    return np.asarray(values)


def group_epsilon(unit: PrivacyUnit | None, epsilon: float) -> float:
    """The id-level (or row-level, without a unit) epsilon each group's release records."""
    return epsilon if unit is None else unit.group_epsilon(epsilon)


def row_epsilon(unit: PrivacyUnit | None, epsilon: float) -> float:
    """The epsilon a mechanism runs at on one group's bounded counts."""
    return epsilon if unit is None else unit.row_epsilon(epsilon)


def unit_release(
    values,
    domain: Domain,
    epsilon,
    *,
    choose,
    privacy_id=None,
    max_rows_per_id=None,
    max_groups_per_id=1,
    by=None,
    groups=None,
    column=None,
    delta=0.0,
    rng=None,
    clip=False,
    drop_missing=False,
    neighbours=None,
    session=None,
    files=False,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    engine: str = "local",
    spark=None,
    key_share: float = KEY_SHARE,
) -> Release | GroupedRelease:
    """The release of ``column`` with a privacy unit and / or a group-by (module doc); ``by``
    without ``groups`` selects the keys privately with ``key_share`` of epsilon and all of delta.

    ``choose(row_epsilon)`` returns the checked mechanism (the facade's choice at the epsilon
    the mechanism runs at).  ``files``: ``values`` is a file source read by the local engine, or
    by Spark with ``engine="spark"`` (``spark``: a SparkSession or master URL); a Spark
    DataFrame ``values`` is counted by Spark."""
    unit = make_unit(privacy_id, max_rows_per_id, max_groups_per_id)
    private_keys = by is not None and groups is None
    grouping = None if private_keys else Grouping.make(by, groups)
    if max_groups_per_id != 1 and (unit is None or by is None):
        raise ParameterError("max_groups_per_id needs privacy_id and by= (without an id, each row is in one group)")
    if not isinstance(domain, Domain):
        raise ParameterError("privacy_id and by= are offered for one column (a Domain), not a ProductDomain")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if private_keys:
        check_private_keys(by, delta, key_share)
    check_key_share_use(by, groups, key_share)
    check_unit_release(unit, release_delta(by, groups, delta), neighbours, "this release")
    if neighbours == "replace" and by is not None:
        raise ParameterError(
            "by= is offered under neighbours='add_remove' only: replace would publish each group's size"
        )
    if is_spark_frame(values) and not isinstance(column, str):
        raise ParameterError("the values are a Spark DataFrame: name the column to release with column='...'")
    if not files and not is_spark_frame(values):
        _check_frame(values, column, unit, grouping or (Grouping(by, ()) if private_keys else None))
    elif session is not None and engine == "local":
        expand_inputs(values)  # a source naming no file is refused free
    if session is not None:
        epsilon, delta = _session(session).allot(epsilon, delta)
    total = epsilon
    selection = None
    if private_keys:
        key_epsilon, epsilon = split_epsilon(total, key_share)
        selection = PartitionSelection(key_epsilon, delta, 1 if unit is None else unit.max_groups_per_id)
        delta = 0.0
    mech = choose(row_epsilon(unit, epsilon))
    what = _ledger_what(column, domain, unit, grouping)
    if selection is not None:
        what = private_what(column, domain, by, None if unit is None else _unit_what(unit, True))
    charge_before_reading(session, total, delta if selection is None else selection.delta, what, repr(mech))
    source = resolve_rng(rng)
    on_spark = engine == "spark" or is_spark_frame(values)
    if selection is not None:
        kept = select_keys(
            values, by, unit, selection, source, files=files, batch_rows=batch_rows, spark=on_spark, session=spark
        )
        grouping = Grouping(by, kept)
    bounder = None if unit is None else Bounder(source, unit.max_rows_per_id, unit.max_groups_per_id)
    shared = {
        "id_column": None if unit is None else unit.id_column,
        "by": None if grouping is None else grouping.by,
        "bounder": bounder,
        "clip": clip,
        "drop_missing": drop_missing,
    }
    if grouping is not None and not grouping.keys:
        counts = np.zeros((0, domain.size), dtype=np.int64)  # no key selected: nothing to count
    elif on_spark:
        keys = [0] if grouping is None else list(grouping.keys)
        counts = spark_bounded_counts(values, column, domain, keys=keys, spark=spark, **shared)
    elif files and domain.categorical:  # categories are text: read the columns into memory
        names = [column] + [c for c in (shared["id_column"], shared["by"]) if c is not None]
        table = text_table(values, names, batch_rows)
        counts = frame_counts(table, column, domain, unit, grouping, bounder, clip=clip, drop_missing=drop_missing)
    elif files:
        groups = 1 if grouping is None else len(grouping.keys)
        index = None if grouping is None else grouping.indices
        counts = stream_bounded_counts(
            values, column, domain, group_index=index, groups=groups, batch_rows=batch_rows, **shared
        )
    else:
        counts = frame_counts(values, column, domain, unit, grouping, bounder, clip=clip, drop_missing=drop_missing)
    record = None if unit is None else unit.to_dict(epsilon)
    run_at = row_epsilon(unit, epsilon)
    releases = [
        _relabel(mech.release(c, run_at, delta=delta, rng=source, domain=domain), group_epsilon(unit, epsilon), record)
        for c in counts
    ]
    if grouping is None:
        return releases[0]
    if selection is None:
        return GroupedRelease(grouping.by, list(grouping.keys), releases, epsilon, record)
    chosen = selection.to_dict() | {"release_epsilon": epsilon, "keys": PRIVATE_KEYS_NOTE}
    return GroupedRelease(grouping.by, list(grouping.keys), releases, total, record, key_selection=chosen)


def _relabel(release, epsilon: float, record: dict | None):
    """The release recording the id-level epsilon of its group and the privacy unit."""
    if record is None and epsilon == release.provenance.epsilon:
        return release
    release.provenance = dataclasses.replace(release.provenance, epsilon=epsilon, privacy_unit=record)
    return release


def _check_frame(values, column, unit, grouping) -> None:
    if not is_frame(values) or not isinstance(column, str):
        raise ParameterError(
            "privacy_id and by= name columns: pass a table (pandas / polars DataFrame, pyarrow Table) and column='...'"
        )
    for name in [unit.id_column] if unit is not None else []:
        select_column(values, name)  # DataError naming the missing column, before any value is read
    if grouping is not None:
        select_column(values, grouping.by)


def frame_counts(values, column, domain, unit, grouping, bounder, *, clip, drop_missing) -> np.ndarray:
    """Bounded counts (groups, bins) of an in-memory table (a categorical domain: its values'
    category codes, checked as :meth:`Domain.bucketize` checks them)."""
    if domain.categorical:
        raw = _category_codes(domain, select_column(values, column), clip, drop_missing)
        present = raw >= 0
    else:
        raw = column_array(select_column(values, column))
        present = ~_missing(raw)
        if not present.all():
            _drop_missing(raw, drop_missing)  # DomainError, with the count, unless dropping
    keep = present
    group = np.zeros(raw.shape[0], dtype=np.int64)
    if grouping is not None:
        group = grouping.indices(select_column(values, grouping.by))
        keep = keep & (group >= 0)
    rows = np.flatnonzero(keep)
    if bounder is not None:
        ids = id_codes(select_column(values, unit.id_column))[rows]
        rows = rows[bounder.keep(ids, group[rows], bounder.row_keys(rows.size))]
    data = np.ma.getdata(raw) if isinstance(raw, np.ma.MaskedArray) else raw
    bins = data[rows] if domain.categorical else domain.bucketize(data[rows], clip=clip)
    groups = 1 if grouping is None else len(grouping.keys)
    flat = group[rows] * domain.size + bins
    return np.bincount(flat, minlength=groups * domain.size).astype(np.int64).reshape(groups, domain.size)


def _category_codes(domain: Domain, values, clip, drop_missing) -> np.ndarray:
    """Every row's category code (MISSING_CODE where dropped); a value outside the list, or a
    missing one unless dropping, is the DomainError :meth:`Domain.bucketize` raises."""
    if clip is True:
        domain.bucketize([], clip=True)  # the categorical clip refusal, one message
    codes = domain.codes(values)
    bad = domain.first_bad_code(codes, drop_missing)
    if bad is not None:
        raise domain.code_error(codes, bad, f"e.g. {private(value_at(values, bad))}")
    return codes


def _missing(raw) -> np.ndarray:
    if isinstance(raw, np.ma.MaskedArray):
        return np.ma.getmaskarray(raw)
    if raw.dtype.kind == "f":
        return np.isnan(raw)
    return np.zeros(raw.shape[0], dtype=bool)


def _ledger_what(column, domain, unit, grouping) -> str:
    parts = [f"histogram of column {excerpt(repr(column))} on {domain!r}"]
    if grouping is not None:
        parts.append(f"by {grouping.by!r} over {len(grouping.keys)} public groups")
    if unit is not None:
        parts.append(_unit_what(unit, grouping))
    return ", ".join(parts)


def _unit_what(unit: PrivacyUnit, grouping) -> str:
    return f"privacy unit {unit.id_column!r} (at most {unit.max_rows_per_id} rows per id" + (
        f" per group, {unit.max_groups_per_id} groups per id)" if grouping is not None else ")"
    )


def unit_quantiles(run, values, column, epsilon, *, privacy_id, max_rows_per_id, rng, session, neighbours):
    """Quantiles with a privacy unit: the session charged the id-level epsilon before any value
    is read, at most k random rows kept per id, then ``run(kept values, row epsilon, source)``
    (the quantile method at epsilon / k: group privacy); the result records epsilon and the unit."""
    unit = make_unit(privacy_id, max_rows_per_id)
    assert unit is not None
    epsilon = check_epsilon(epsilon)
    check_unit_release(unit, 0.0, neighbours, "quantiles")
    _check_frame(values, column, unit, None)
    if session is not None:
        epsilon, _ = _session(session).allot(epsilon)
    charge_before_reading(
        session, epsilon, 0.0, f"quantiles of column {excerpt(repr(column))}, " + _unit_what(unit, None), "quantiles"
    )
    source = resolve_rng(rng)
    raw = column_array(select_column(values, column))
    ids = id_codes(select_column(values, unit.id_column))
    bounder = Bounder(source, unit.max_rows_per_id)
    kept = bounder.keep(ids, np.zeros(ids.size, dtype=np.int64), bounder.row_keys(ids.size))
    result = run(raw[kept], unit.row_epsilon(epsilon), source)
    return dataclasses.replace(result, epsilon=epsilon, seeded=rng is not None, privacy_unit=unit.to_dict(epsilon))


def check_unit_grid(unit, columns, delta, neighbours, drop_missing, public_marginals) -> None:
    """What ``release_grid`` with a privacy unit refuses before any value is read."""
    if unit is None:
        return
    check_unit_release(unit, delta, neighbours, "release_grid")
    if drop_missing or public_marginals is not None:
        raise ParameterError(
            "release_grid with privacy_id takes neither drop_missing nor public_marginals yet; clean the missing "
            "values first"
        )
    if is_spark_frame(columns) or not is_frame(columns):
        raise ParameterError(
            "release_grid with privacy_id needs a table (pandas / polars / pyarrow) holding the id column"
        )
    select_column(columns, unit.id_column)  # DataError naming a missing column, before any value is read


def bounded_grid_counts(columns, domain, unit: PrivacyUnit, source, *, clip) -> np.ndarray:
    """The k-D counts of a table's columns other than the id column, at most k random rows per id."""
    ids = id_codes(select_column(columns, unit.id_column))
    axes = _without_column(columns, unit.id_column)
    index = domain.bucketize(axes, clip=clip)
    bounder = Bounder(source, unit.max_rows_per_id)
    kept = bounder.keep(ids, np.zeros(ids.size, dtype=np.int64), bounder.row_keys(ids.size))
    flat = np.ravel_multi_index(tuple(index[:, kept]), domain.shape)
    return np.bincount(flat, minlength=domain.size).astype(np.int64).reshape(domain.shape)


def _without_column(table, name: str):
    library = type(table).__module__.split(".")[0]
    if library == "pandas":
        return table.drop(columns=[name])
    if library == "pyarrow":
        return table.drop_columns([name]) if hasattr(table, "drop_columns") else table.drop([name])
    if type(table).__name__ == "LazyFrame":
        return table.drop(name).collect()
    return table.drop(name)
