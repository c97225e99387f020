"""The one-call facade ``dprange.release``: raw values -> histogram -> private release.

It sits above both the mechanisms (:mod:`dprange.mechanisms`) and the automatic choice among
them by exact expected error (:mod:`dprange.analysis`), which itself builds mechanisms; so
the facade has a module of its own and neither of those imports the other in a circle.

:func:`quantiles` answers quantiles from raw values by one of the registered quantile
methods (``dprange.registry.QUANTILE_METHODS``): the histogram route below, JointExp and
the recursive split of :mod:`dprange.quantile_mechanisms`.

``release`` is :func:`choose_mechanism` (the registry's name lookup or ``auto``), then
:func:`check_release` (everything that can fail before any value is read), then the
histogram and the mechanism's release.  The command line calls the same three steps, so it
has no path of its own.
"""

from __future__ import annotations

import os

from .._params import find, replaced
from .._validation import check_delta, check_epsilon, check_positive_int
from ..analysis.selection import auto_mechanism
from ..answers.describe import Labels
from ..answers.grouped import GroupedRelease
from ..answers.release import Release
from ..data_aware.steps import BUCKET_WORKLOADS
from ..domain import Domain, ProductDomain
from ..engines.frames import select_column
from ..engines.local import DEFAULT_BATCH_ROWS, expand_inputs, stream_histogram
from ..engines.spark import is_spark_frame, spark_histogram
from ..errors import ParameterError
from ..mechanisms.base import Mechanism
from ..registry import MECHANISMS
from ..workloads.ranges import check_workload_bins
from .common import (
    REPLACE_DROP_MISSING_MESSAGE,
    _session,
    charge_before_reading,
    make_mechanism,
    release_workload,
    resolve_neighbours,
)
from .grid import release_grid
from .private_keys import KEY_SHARE, check_key_share_use, release_delta
from .units import unit_release


def choose_mechanism(
    mechanism=None,
    n=None,
    epsilon=None,
    *,
    delta=0.0,
    neighbours=None,
    workload="all-range",
    inference="gls",
    noise="auto",
    **params,
) -> Mechanism:
    """The configured mechanism a release on n bins uses; data are not touched.

    ``mechanism``: None or ``"auto"``: the mechanism with the least exact expected error on
    ``workload`` (:func:`dprange.analysis.auto_mechanism`, needs n and epsilon), given
    ``inference``; a registered name (``dprange.registry.MECHANISMS``): built with
    ``neighbours``, ``noise``, ``inference`` and ``params`` (e.g. ``branching=4``), checked by
    the class's declared parameters; a mechanism object: used as it is.  ``neighbours``:
    see :func:`release`.
    """
    declared = Mechanism.PARAMS
    find(declared, "inference").constraint.check(inference, "inference")
    find(declared, "noise").constraint.check(noise, "noise")
    check_workload_bins(workload, n, of_domain=True)
    relation = resolve_neighbours(mechanism, neighbours)
    if mechanism is None or (isinstance(mechanism, str) and mechanism == "auto"):
        if params:
            raise ParameterError(
                f"{', '.join(sorted(params))} cannot be given with mechanism='auto', which chooses its own "
                "parameters; name the mechanism they belong to"
            )
        if n is None or epsilon is None:
            raise ParameterError("mechanism='auto' needs the number of bins n and epsilon to choose")
        n = check_positive_int(n, "n")
        chosen = auto_mechanism(workload, n, epsilon, delta=delta, neighbours=relation, noise=noise)
        return chosen if chosen.inference == inference else replaced(chosen, inference=inference)
    if isinstance(mechanism, str):
        entry = MECHANISMS.lookup(mechanism, also=("auto",))
        # noise and inference go to the classes that declare them; to others only if not the default
        chosen_options = {"noise": noise, "inference": inference}
        own = entry.declared(**chosen_options)
        options = {
            name: value
            for name, value in chosen_options.items()
            if name in own or value != find(declared, name).default
        }
        # a mechanism optimised for a workload (Optimized) is optimised for the release's, MWEM
        # selects among its ranges, and DAWA tunes its second stage to it when it knows its name
        options.update(entry.declared(workload=workload))
        if isinstance(workload, str) and workload in BUCKET_WORKLOADS and "bucket_workload" not in params:
            options.update(entry.declared(bucket_workload=workload))
        return make_mechanism(mechanism, neighbours=relation, **options, **params)
    return make_mechanism(mechanism, neighbours=relation, **params)


def check_release(mech: Mechanism, n: int, epsilon, delta=0.0) -> None:
    """Everything about releasing n bins with ``mech`` that can fail, checked before any
    value is read: epsilon, delta, the strategy on n bins and the noise of every measured
    level (budget list, noise kind, noise scale), and whether non-linear inference has
    anything to fit."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    strategy = mech.strategy_at(check_positive_int(n, "n"), epsilon, delta)
    specs = mech.noise_specs(strategy, epsilon, delta)
    if not specs and mech.inference != "gls":
        raise ParameterError(
            f"nothing is measured here (one bin whose count is the public total), so inference="
            f"{mech.inference!r} has nothing to fit; use inference='gls'"
        )


def release(
    values,
    domain: Domain,
    epsilon,
    *,
    mechanism=None,
    delta=0.0,
    rng=None,
    clip=False,
    drop_missing=False,
    neighbours=None,
    workload=None,
    inference="gls",
    noise="auto",
    session=None,
    column: str | None = None,
    privacy_id: str | None = None,
    max_rows_per_id: int | None = None,
    by: str | None = None,
    groups=None,
    max_groups_per_id: int = 1,
    units: str | None = None,
    key_share: float = KEY_SHARE,
) -> Release | GroupedRelease:
    """Bucketize raw ``values`` into ``domain`` and release them with ``mechanism``.

    Without ``privacy_id`` one row must be one person: neighbouring datasets differ by one
    row.  ``privacy_id="user_id"`` with ``max_rows_per_id=k``: the person is the id; at most
    k rows per id are kept, chosen at random, and the release is epsilon-DP for adding or
    removing one id with all its rows (the mechanism runs at epsilon / k: group privacy;
    pure DP only, add/remove only; docs/privacy.md, "Privacy units").  ``by="state"`` with
    ``groups=[...]`` (the public list of keys; rows with other keys are dropped) returns a
    :class:`~dprange.answers.grouped.GroupedRelease`, one release per key under one epsilon;
    with a privacy unit each id is kept in at most ``max_groups_per_id`` = m groups, each
    released at epsilon / m.  ``by`` without ``groups`` selects the keys from the data
    privately (needs delta > 0): ``key_share`` of epsilon and all of delta choose them
    (Desfontaines et al., PoPETs 2022), the rest releases the keys kept, published sorted.
    Both need a table ``values`` and ``column``.

    ``mechanism``: None or ``"auto"`` (default) is the mechanism with the least exact
    expected error on ``workload`` (default ``"all-range"``, ``"identity"`` on a categorical
    domain: :func:`dprange.api.common.release_workload`; use ``"prefix"`` when the CDF
    and quantiles matter; a name or a Workload; see :func:`dprange.analysis.select`),
    chosen from public parameters only and cached on them.  A registered name ("flat",
    "hierarchical", "wavelet": ``dprange.registry.MECHANISMS``) or a configured mechanism
    object is used as given.  ``inference`` ("gls", "nnls", "l1") and ``noise`` apply to
    the automatic choice and to named mechanisms, ``workload`` also to the named mechanism
    optimised for one ("optimized"); a mechanism object keeps its own.

    ``neighbours``: None (the default) means the mechanism object's relation ("add_remove"
    for names, None and "auto"); a relation given here builds named mechanisms with it and
    must agree with a mechanism object's.  ``neighbours="replace"`` publishes the number of
    records exactly, so it refuses ``drop_missing=True`` (the count after dropping would
    reveal how many values were missing).

    ``values``: a column (numpy array, list, pandas Series, pyarrow array, polars Series),
    or a table (pandas / polars DataFrame, polars LazyFrame, pyarrow Table) with ``column``
    naming the column to release (only that column is read); a Spark DataFrame with
    ``column`` is counted by the Spark engine (:mod:`dprange.engines.spark`).

    ``session``: a :class:`dprange.privacy.session.Session` that pays for the release: a release
    that would overspend it is refused before ``values`` are read; otherwise the spend is
    recorded in its ledger before ``values`` are read and stays whatever the outcome (a bad
    value answers a question about the data; docs/privacy.md, "When a session is charged").
    Epsilon may be lowered by a few ulps to fit exactly: :meth:`Session.allot`.

    Every parameter is checked (:func:`check_release`) before ``values`` are bucketized.

    The release is labelled (``Release.input_labels``, saved in its JSON) with the column's name
    (``column``, or a pandas / polars Series' name) and ``units`` (e.g. "USD") when given.

    With a :class:`~dprange.ProductDomain` this is :func:`release_grid` (``values`` are then
    the columns, ``workload`` a k-D workload, default all rectangles).
    """
    check_key_share_use(by, groups, key_share)
    unit = _unit_arguments(privacy_id, max_rows_per_id, max_groups_per_id, by, groups)
    if unit:
        options = {"delta": delta, "rng": rng, "clip": clip, "drop_missing": drop_missing, "session": session}
        options["key_share"] = key_share
        choice = (mechanism, neighbours, workload, inference, noise)
        result = _unit_release(values, domain, epsilon, unit, choice, column=column, **options)
        return _labelled(result, _labels(column, units))
    if isinstance(domain, ProductDomain):
        if column is not None:
            raise ParameterError("column= is not supported for a ProductDomain; pass the columns (one per axis)")
        return release_grid(
            values,
            domain,
            epsilon,
            mechanism=mechanism,
            delta=delta,
            rng=rng,
            clip=clip,
            drop_missing=drop_missing,
            neighbours=neighbours,
            workload="all-rectangles" if workload == "all-range" else workload,
            inference=inference,
            noise=noise,
            session=session,
        )
    labels = _labels(column if column is not None else _series_name(values), units)
    mech, epsilon, delta = _prepare(
        domain, epsilon, mechanism, delta, (clip, drop_missing), neighbours, workload, inference, noise, session
    )
    spark = is_spark_frame(values)  # counted where it lies, by the Spark engine
    if spark and column is None:
        raise ParameterError("the values are a Spark DataFrame: name the column to release with column='...'")
    charge_before_reading(session, epsilon, delta, f"histogram on {domain!r}", repr(mech))
    if spark:
        counts = spark_histogram(values, column, domain, clip=clip, drop_missing=drop_missing)
    else:
        counts = domain.histogram(select_column(values, column), clip=clip, drop_missing=drop_missing)
    return _labelled(mech.release(counts, epsilon, delta=delta, rng=rng, domain=domain), labels)


def _series_name(values) -> str | None:
    """The name of a pandas / polars Series (a public label, not data), else None."""
    name = getattr(values, "name", None)
    return name if isinstance(name, str) else None


def _labels(column: str | None, units: str | None, source=None) -> Labels | None:
    """The labels of a release (checked before any data are read), None when nothing is given."""
    if column is None and units is None and source is None:
        return None
    return Labels.of("value" if column is None else column, units, source)


def _file_source(source):
    """The input files as a release names them (None for a Spark DataFrame or other table)."""
    return source if isinstance(source, (str, os.PathLike, list, tuple)) else None


def _labelled(result, labels: Labels | None):
    if labels is None:
        return result
    return result.with_labels(list(labels.columns), list(labels.units) or None, labels.source)


def release_files(
    source,
    column: str,
    domain: Domain,
    epsilon,
    *,
    mechanism=None,
    delta=0.0,
    rng=None,
    clip=False,
    drop_missing=False,
    neighbours=None,
    workload=None,
    inference="gls",
    noise="auto",
    session=None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    engine: str = "local",
    spark=None,
    privacy_id: str | None = None,
    max_rows_per_id: int | None = None,
    by: str | None = None,
    groups=None,
    max_groups_per_id: int = 1,
    units: str | None = None,
    key_share: float = KEY_SHARE,
) -> Release | GroupedRelease:
    """:func:`release` of ``column`` in CSV / Parquet files, counted by the local streaming
    engine (:func:`dprange.engines.local.stream_histogram`: ``source`` is a path, a folder, a
    glob pattern or a list of them, read ``batch_rows`` rows at a time in bounded memory).
    The same checks run before any file is opened, and a bad value stops the release.

    ``engine="spark"``: counted by Spark instead (:func:`dprange.engines.spark.spark_histogram`;
    ``source`` may then also be a Spark DataFrame or URLs); ``spark`` is a SparkSession or a
    master URL (default ``local[*]``).  The counts, and so the release, are the same.
    ``session`` is charged before any file is opened, whatever the outcome (as in :func:`release`;
    a source that names no file is refused first, free).  The release is labelled with
    ``column``, ``units`` and the files (``Release.input_labels``)."""
    if engine not in ("local", "spark"):
        raise ParameterError(f"engine must be 'local' or 'spark', got {engine!r}")
    check_key_share_use(by, groups, key_share)
    unit = _unit_arguments(privacy_id, max_rows_per_id, max_groups_per_id, by, groups)
    if unit:
        options = {"delta": delta, "rng": rng, "clip": clip, "drop_missing": drop_missing, "session": session}
        options["key_share"] = key_share
        options |= {"files": True, "batch_rows": batch_rows, "engine": engine, "spark": spark}
        choice = (mechanism, neighbours, workload, inference, noise)
        result = _unit_release(source, domain, epsilon, unit, choice, column=column, **options)
        return _labelled(result, _labels(column, units, _file_source(source)))
    labels = _labels(column, units, _file_source(source))
    mech, epsilon, delta = _prepare(
        domain, epsilon, mechanism, delta, (clip, drop_missing), neighbours, workload, inference, noise, session
    )
    if engine == "local" and session is not None:
        expand_inputs(source)  # a source that names no file is refused free: the file system is not the data
    charge_before_reading(session, epsilon, delta, files_ledger_what(source, column, domain), repr(mech))
    if engine == "spark":
        counts = spark_histogram(source, column, domain, clip=clip, drop_missing=drop_missing, spark=spark)
    else:
        counts = stream_histogram(source, column, domain, clip=clip, drop_missing=drop_missing, batch_rows=batch_rows)
    return _labelled(mech.release(counts, epsilon, delta=delta, rng=rng, domain=domain), labels)


def files_ledger_what(source, column, domain) -> str:
    """The session ledger's description of a release of ``column`` (a name, or several for a
    k-D histogram) of the files ``source``."""
    if isinstance(column, str):
        return f"histogram of column {column!r} of {_describe_source(source)} on {domain!r}"
    return f"k-D histogram of columns {', '.join(repr(c) for c in column)} of {_describe_source(source)} on {domain!r}"


def _describe_source(source) -> str:
    if isinstance(source, (list, tuple)):
        return "[" + ", ".join(repr(os.fspath(s)) if isinstance(s, (str, os.PathLike)) else "?" for s in source) + "]"
    return repr(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else "files"


def _unit_arguments(privacy_id, max_rows_per_id, max_groups_per_id, by, groups) -> dict:
    """The privacy-unit and group-by arguments of a release, or {} when none is given."""
    given = {"privacy_id": privacy_id, "max_rows_per_id": max_rows_per_id, "by": by, "groups": groups}
    if all(value is None for value in given.values()) and max_groups_per_id == 1:
        return {}
    return given | {"max_groups_per_id": max_groups_per_id}


def _unit_release(values, domain, epsilon, unit: dict, choice: tuple, **options):
    """:func:`dprange.api.units.unit_release` with the facade's choice of mechanism."""
    mechanism, neighbours, workload, inference, noise = choice
    workload = release_workload(domain, workload, options["clip"] is True)
    delta = release_delta(unit["by"], unit["groups"], options["delta"])  # private keys: pure per-key releases
    choose = _choice(domain, mechanism, delta, neighbours, workload, inference, noise)
    return unit_release(values, domain, epsilon, choose=choose, neighbours=neighbours, **unit, **options)


def _choice(domain, mechanism, delta, neighbours, workload, inference, noise):
    """The mechanism of a release, chosen and checked at the epsilon it runs at (with a privacy
    unit or a group-by, a share of the release's: :func:`dprange.api.units.unit_release`)."""

    def choose(row_epsilon: float) -> Mechanism:
        mech = choose_mechanism(
            mechanism,
            domain.size,
            row_epsilon,
            delta=delta,
            neighbours=neighbours,
            workload=workload,
            inference=inference,
            noise=noise,
        )
        check_release(mech, domain.size, row_epsilon, delta)
        return mech

    return choose


def _prepare(domain, epsilon, mechanism, delta, flags, neighbours, workload, inference, noise, session):
    """(mechanism, epsilon, delta) of a release, everything checked before data are read
    (``flags``: clip and drop_missing)."""
    clip, drop_missing = flags
    if not isinstance(domain, Domain):
        raise ParameterError("domain must be a dprange.Domain (Domain.integers, Domain.interval or Domain.categories)")
    workload = release_workload(domain, workload, clip is True)
    if resolve_neighbours(mechanism, neighbours) == "replace" and drop_missing:
        raise ParameterError(REPLACE_DROP_MISSING_MESSAGE)
    if session is not None:
        epsilon, delta = _session(session).allot(epsilon, delta)
    mech = _choice(domain, mechanism, delta, neighbours, workload, inference, noise)(epsilon)
    return mech, epsilon, delta
