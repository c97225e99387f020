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

import math
import os
from fractions import Fraction

import numpy as np

# quantile_bins as a module: api.histogram_bins(epsilon) was documented; n x epsilon's rule must not take that name
from . import quantile_bins
from ._params import find, replaced
from ._validation import check_delta, check_epsilon, check_positive_int
from .analysis import auto_mechanism
from .constrained import constrain
from .domain import Domain
from .engines.frames import select_column
from .engines.local import DEFAULT_BATCH_ROWS, expand_inputs, stream_histogram
from .engines.spark import is_spark_frame, spark_histogram
from .errors import ParameterError
from .marginal_constraints import MarginalConstraints, published_marginals
from .mechanisms import REPLACE_DROP_MISSING_MESSAGE, Mechanism, make_mechanism, resolve_neighbours
from .multidim import GridMechanism, check_answers_workload, select_grid
from .noise import resolve_rng
from .private_bounds import private_bounds
from .product_domain import ProductDomain
from .quantile_bins import COUNT_SHARE, check_count_share, epsilon_only_bins, public_count, record_count
from .quantile_mechanisms import (
    JointCharge,
    JointGrid,
    QuantilesResult,
    as_values,
    auto_method,
    auto_reads_count,
    check_bounds,
    check_levels,
    check_n_max,
    check_neighbours,
    joint_affordable,
    joint_charged_epsilon,
    joint_precision,
    register_quantile_method,
)
from .registry import GRID_MECHANISMS, MECHANISMS, QUANTILE_METHODS, Citation
from .release import Release
from .session import Session
from .workloads import check_workload_bins


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
        # a mechanism optimised for a workload (Optimized) is optimised for the release's
        options.update(entry.declared(workload=workload))
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
    workload="all-range",
    inference="gls",
    noise="auto",
    session=None,
    column: str | None = None,
) -> Release:
    """Bucketize raw ``values`` into ``domain`` and release them with ``mechanism``.

    ``mechanism``: None or ``"auto"`` (default) is the mechanism with the least exact
    expected error on ``workload`` (default ``"all-range"``; use ``"prefix"`` when the CDF
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

    ``session``: a :class:`dprange.session.Session` that pays for the release: a release
    that would overspend it is refused before ``values`` are read; otherwise the spend is
    recorded in its ledger before ``values`` are read and stays whatever the outcome (a bad
    value answers a question about the data; docs/privacy.md, "When a session is charged").
    Epsilon may be lowered by a few ulps to fit exactly: :meth:`Session.allot`.

    Every parameter is checked (:func:`check_release`) before ``values`` are bucketized.

    With a :class:`~dprange.ProductDomain` this is :func:`release_grid` (``values`` are then
    the columns, ``workload`` a k-D workload, default all rectangles).
    """
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
    mech, epsilon, delta = _prepare(
        domain, epsilon, mechanism, delta, drop_missing, neighbours, workload, inference, noise, session
    )
    spark = is_spark_frame(values)  # counted where it lies, by the Spark engine
    if spark and column is None:
        raise ParameterError("the values are a Spark DataFrame: name the column to release with column='...'")
    charge_before_reading(session, epsilon, delta, f"histogram on {domain!r}", repr(mech))
    if spark:
        counts = spark_histogram(values, column, domain, clip=clip, drop_missing=drop_missing)
    else:
        counts = domain.histogram(select_column(values, column), clip=clip, drop_missing=drop_missing)
    return mech.release(counts, epsilon, delta=delta, rng=rng, domain=domain)


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
    workload="all-range",
    inference="gls",
    noise="auto",
    session=None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    engine: str = "local",
    spark=None,
) -> Release:
    """:func:`release` of ``column`` in CSV / Parquet files, counted by the local streaming
    engine (:func:`dprange.engines.local.stream_histogram`: ``source`` is a path, a folder, a
    glob pattern or a list of them, read ``batch_rows`` rows at a time in bounded memory).
    The same checks run before any file is opened, and a bad value stops the release.

    ``engine="spark"``: counted by Spark instead (:func:`dprange.engines.spark.spark_histogram`;
    ``source`` may then also be a Spark DataFrame or URLs); ``spark`` is a SparkSession or a
    master URL (default ``local[*]``).  The counts, and so the release, are the same.
    ``session`` is charged before any file is opened, whatever the outcome (as in :func:`release`;
    a source that names no file is refused first, free)."""
    if engine not in ("local", "spark"):
        raise ParameterError(f"engine must be 'local' or 'spark', got {engine!r}")
    mech, epsilon, delta = _prepare(
        domain, epsilon, mechanism, delta, drop_missing, neighbours, workload, inference, noise, session
    )
    if engine == "local" and session is not None:
        expand_inputs(source)  # a source that names no file is refused free: the file system is not the data
    charge_before_reading(session, epsilon, delta, files_ledger_what(source, column, domain), repr(mech))
    if engine == "spark":
        counts = spark_histogram(source, column, domain, clip=clip, drop_missing=drop_missing, spark=spark)
    else:
        counts = stream_histogram(source, column, domain, clip=clip, drop_missing=drop_missing, batch_rows=batch_rows)
    return mech.release(counts, epsilon, delta=delta, rng=rng, domain=domain)


def files_ledger_what(source, column: str, domain) -> str:
    """The session ledger's description of a release of ``column`` of the files ``source``."""
    return f"histogram of column {column!r} of {_describe_source(source)} on {domain!r}"


def _describe_source(source) -> str:
    if isinstance(source, (list, tuple)):
        return "[" + ", ".join(repr(os.fspath(s)) if isinstance(s, (str, os.PathLike)) else "?" for s in source) + "]"
    return repr(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else "files"


def _prepare(domain, epsilon, mechanism, delta, drop_missing, neighbours, workload, inference, noise, session):
    """(mechanism, epsilon, delta) of a release, everything checked before data are read."""
    if not isinstance(domain, Domain):
        raise ParameterError("domain must be a dprange.Domain (Domain.integers or Domain.interval)")
    if resolve_neighbours(mechanism, neighbours) == "replace" and drop_missing:
        raise ParameterError(REPLACE_DROP_MISSING_MESSAGE)
    if session is not None:
        epsilon, delta = _session(session).allot(epsilon, delta)
    mech = choose_mechanism(
        mechanism,
        domain.size,
        epsilon,
        delta=delta,
        neighbours=neighbours,
        workload=workload,
        inference=inference,
        noise=noise,
    )
    check_release(mech, domain.size, epsilon, delta)
    return mech, epsilon, delta


def charge_before_reading(session, epsilon: float, delta: float, what: str, mechanism: str) -> None:
    """Charge ``session`` (when one is given) for a call that is about to read data.  The
    spend is on record (in the ledger file, when the session has one) before any value is
    read and is never refunded: a failure after this point may depend on the data, so it is
    an answer about them too (docs/privacy.md, "When a session is charged")."""
    if session is not None:
        _session(session).charge(epsilon, delta, what=what, mechanism=mechanism)


def _session(session) -> Session:
    if not isinstance(session, Session):
        raise ParameterError("session must be a dprange.Session (or None)")
    return session


# ------------------------------------------------------------------ k-D releases


def choose_grid_mechanism(
    mechanism,
    shape,
    epsilon,
    *,
    delta=0.0,
    neighbours=None,
    workload="all-rectangles",
    order: int = 2,
    inference="gls",
    noise="auto",
    **params,
) -> GridMechanism:
    """The configured k-D mechanism a release of a grid of ``shape`` uses; data are not touched.

    ``mechanism``: None or ``"auto"``: the least exact expected error on ``workload``
    (:func:`dprange.multidim.select_grid`); a name registered in
    ``dprange.registry.GRID_MECHANISMS`` ("kronecker", "kd_hierarchy", "quadtree"), built with
    ``params``; or a k-D mechanism object, used as it is.
    """
    if inference != "gls":
        raise ParameterError("k-D mechanisms use exact least squares only; pass inference='gls'")
    relation = resolve_neighbours(mechanism, neighbours)
    if isinstance(mechanism, GridMechanism):
        if params:
            raise ParameterError(f"{', '.join(sorted(params))} cannot be given with a mechanism object")
        mechanism.follow_delta(delta)
        return mechanism
    if mechanism is None or (isinstance(mechanism, str) and mechanism == "auto"):
        if params:
            raise ParameterError(
                f"{', '.join(sorted(params))} cannot be given with mechanism='auto', which chooses its own "
                "parameters; name the mechanism they belong to"
            )
        selection = select_grid(
            shape, epsilon, workload=workload, delta=delta, neighbours=relation, noise=noise, order=order
        )
        return selection.mechanism
    if isinstance(mechanism, Mechanism):
        raise ParameterError(
            f"{type(mechanism).__name__} releases 1-D counts; for a ProductDomain use one of "
            f"{', '.join(GRID_MECHANISMS.names())} or 'auto'"
        )
    entry = GRID_MECHANISMS.lookup(mechanism, also=("auto",))
    # mechanisms optimised for a workload or an order (optimized_kronecker, optimized_marginals,
    # fourier) take the release's unless given in params
    mech = entry.build(neighbours=relation, noise=noise, **{**entry.declared(workload=workload, order=order), **params})
    mech.follow_delta(delta)  # a template chosen by delta is planned at the release's delta
    check_answers_workload(mech, shape, workload, epsilon, delta=delta, order=order)  # marginals ones
    return mech


def release_grid(
    columns,
    domain: ProductDomain,
    epsilon,
    *,
    mechanism=None,
    delta=0.0,
    rng=None,
    clip=False,
    drop_missing=False,
    neighbours=None,
    workload="all-rectangles",
    order: int = 2,
    inference="gls",
    noise="auto",
    session=None,
    public_marginals=None,
    **params,
):
    """Bucketize several columns into the product ``domain`` and release the k-D histogram
    (a :class:`~dprange.grid_release.GridRelease`: rectangles, marginals, dominance counts,
    each with exact standard errors).

    ``columns``: a list of arrays (one per axis), a (records x k) array, a pandas DataFrame,
    a pyarrow Table or a Spark DataFrame (its columns in order, counted by Spark).
    ``mechanism``: "auto" (default: the least exact expected error on
    ``workload``, "all-rectangles", "prefix-rectangles" or "marginals" of ``order``, or a
    :class:`~dprange.workloads_kd.Rectangles`: the rectangles to be asked, for which the
    product of axes optimised for them is ranked too; from public parameters only), a name
    of ``dprange.registry.GRID_MECHANISMS`` with ``params``
    (e.g. ``mechanism="kronecker", axes=[4, "identity"]``; the named mechanisms optimised for
    a workload or an order, "optimized_kronecker", "optimized_marginals" and "fourier", take
    ``workload`` and ``order``), or a k-D mechanism object.
    ``neighbours``, ``clip``, ``drop_missing`` and ``rng`` as in :func:`release`; every
    parameter is checked, and the noise calibrated, before the columns are read.
    ``session``: a :class:`dprange.session.Session` that pays for the release, as in
    :func:`release` (refused before the columns are read if it would overspend; charged before
    they are read, whatever the outcome).  ``public_marginals``: {kept axes: published values} that the
    release is made to meet exactly, with exact errors (:func:`dprange.contingency.constrain`;
    values published elsewhere, never computed here from the columns).
    """
    if not isinstance(domain, ProductDomain):
        raise ParameterError("domain must be a dprange.ProductDomain (one dprange.Domain per column)")
    if resolve_neighbours(mechanism, neighbours) == "replace" and drop_missing:
        raise ParameterError(REPLACE_DROP_MISSING_MESSAGE)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if session is not None:
        epsilon, delta = _session(session).allot(epsilon, delta)
    mech = choose_grid_mechanism(
        mechanism,
        domain.shape,
        epsilon,
        delta=delta,
        neighbours=neighbours,
        workload=workload,
        order=order,
        inference=inference,
        noise=noise,
        **params,
    )
    mech.plan(domain.shape, epsilon)  # the design and its per-axis limits, before any value is read
    if public_marginals is not None:  # checked (design, shapes, agreement) before any value is read
        if not getattr(mech, "constrainable", False):
            raise ParameterError(
                f"{mech.name} cannot take public marginals; use mechanism='kronecker', 'privelet' or 'fourier'"
            )
        MarginalConstraints.build(domain.shape, *published_marginals(public_marginals, domain.shape))
    charge_before_reading(session, epsilon, delta, f"k-D histogram on {domain!r}", repr(mech))
    if is_spark_frame(columns):  # its columns in order, counted by the Spark engine
        counts = spark_histogram(columns, list(columns.columns), domain, clip=clip, drop_missing=drop_missing)
    else:
        counts = domain.histogram(columns, clip=clip, drop_missing=drop_missing)
    result = mech.release(counts, epsilon, delta=delta, rng=rng, domain=domain)
    if public_marginals is not None:
        result = constrain(result, public_marginals)
    return result


# ------------------------------------------------------------------ quantiles from raw values

HISTOGRAM_MAX_INTEGERS = 2**17  # integer ranges up to this size get one bin per integer


def histogram_binned(bounds, integer: bool) -> bool:
    """Whether the histogram route cuts ``bounds`` into equal bins (real bounds, or integer
    ranges wider than HISTOGRAM_MAX_INTEGERS) rather than one bin per integer."""
    return not (integer and bounds[1] - bounds[0] + 1 <= HISTOGRAM_MAX_INTEGERS)


def quantiles_ledger_what(levels: int, bounds_epsilon: float, count_epsilon: float, count_condition: str = "") -> str:
    """The session ledger's description of a quantiles release, naming the parts of its
    epsilon spent on private bounds and on a noisy record count (the entry holds the total).
    ``count_condition``: when the count is drawn, where that depends on the private bounds."""
    parts = [f"bounds epsilon {bounds_epsilon!r}"] if bounds_epsilon else []
    if count_epsilon:
        parts.append(f"record count epsilon {count_epsilon!r}{count_condition}")
    return f"quantiles at {levels} levels" + (f" (of which {', '.join(parts)})" if parts else "")


def _planned_count_epsilon(method, levels, epsilon, box, *, integer, neighbours, n_max, bins, count_share):
    """(epsilon of the noisy record count, condition) as far as public facts tell before the
    data are read: quantiles draws a count only without a public one, where the route's bins
    or auto's choice need it; on integer data with private bounds that depends on how wide
    the bounds found are (the condition says so)."""
    if neighbours == "replace" or n_max is not None:  # quantile_bins.public_count has n
        return 0.0, ""

    def wanted(binned: bool) -> bool:
        return (method == "histogram" and binned and bins is None) or (
            method == "auto" and auto_reads_count(levels.size, binned=binned)
        )

    if box is not None or not integer:
        return (epsilon * count_share if wanted(histogram_binned(box, integer)) else 0.0), ""
    if not wanted(True):
        return 0.0, ""
    return epsilon * count_share, f" if the bounds found span more than {HISTOGRAM_MAX_INTEGERS} integers"


def _private_bounds_epsilon(epsilon: float, bounds_share, count_share: float) -> float:
    if not (isinstance(bounds_share, float | int) and 0 < bounds_share < 1):
        raise ParameterError(f"bounds_share must be a number in (0, 1), got {bounds_share!r}")
    if bounds_share + count_share >= 1:
        raise ParameterError("bounds_share + count_share must be below 1 (CLI: --bounds-share, --count-share)")
    return epsilon * bounds_share


def _check_joint_exp_before_reading(levels, epsilon: float, neighbours: str, n_max, box, integer: bool) -> None:
    """JointExp's refusals that follow from public facts alone (a missing n_max under
    add/remove; a float-error charge of half of epsilon or more at n_max on public bounds),
    raised before the data are read, so that they cost nothing."""
    if neighbours == "add_remove" and n_max is None:
        raise ParameterError(
            "method 'joint_exp' under add/remove neighbours needs n_max (CLI: --n-max), a public upper bound "
            "on the number of records; or use method 'approximate'"
        )
    if box is not None and n_max is not None:
        width = box[1] - box[0] + (1 if integer else 0)  # JointExp's range: [a, b + 1) on integers
        joint_charged_epsilon(
            epsilon, levels, neighbours, n_max, width, joint_precision(epsilon, levels, neighbours, n_max, width)
        )


def _run_histogram(values, levels, epsilon, bounds, *, integer, neighbours, rng, cells, bins):
    """The histogram route: (estimates, the Release that has their intervals).  ``bins``:
    equal bins on binned bounds (:func:`dprange.quantiles` passes
    :func:`~dprange.quantile_bins.histogram_bins` of n x epsilon); None: the epsilon-only
    rule :func:`~dprange.quantile_bins.epsilon_only_bins`."""
    a, b = bounds
    if not histogram_binned(bounds, integer):
        domain = Domain.integers(int(a), int(b))
    else:
        domain = Domain.interval(a, b, epsilon_only_bins(epsilon) if bins is None else bins)
    rel = release(values, domain, epsilon, workload="prefix", neighbours=neighbours, rng=rng, clip=True)
    return np.asarray(rel.quantile(levels).value, dtype=float), rel


register_quantile_method(
    "histogram",
    _run_histogram,
    "a private histogram for the prefix workload (dprange.release), read by Release.quantile; "
    "honest intervals whose ends are bin edges",
    Citation(
        "Qardaji, Yang and Li", "Understanding Hierarchical Methods for Differentially Private Histograms", "PVLDB 2013"
    ),
)


def quantiles(
    values,
    q,
    epsilon,
    *,
    bounds=None,
    method: str = "auto",
    rng=None,
    bounds_share: float = 0.1,
    neighbours: str = "add_remove",
    integer: bool = False,
    cells: int | None = None,
    bins: int | None = None,
    session=None,
    column: str | None = None,
    n_max: int | None = None,
    count_share: float = COUNT_SHARE,
) -> QuantilesResult:
    """epsilon-DP quantiles of raw ``values`` at levels ``q`` (strictly increasing, in (0, 1)).

    ``bounds``: public (a, b) (values outside are clipped), or ``"private"`` to spend
    ``bounds_share`` of epsilon on :func:`dprange.private_bounds.private_bounds` first.
    ``method``: a name registered in ``dprange.registry.QUANTILE_METHODS``: "histogram" (a
    private histogram for the prefix workload, read by :meth:`Release.quantile`; honest
    intervals), "joint_exp" (JointExp: Gillenwater, Joseph and Kulesza, ICML 2021),
    "approximate" (the recursive split: Kaplan, Schnapp and Stemmer, ICML 2022), or "auto"
    (chosen from public or paid-for facts only: :func:`auto_method`).  ``neighbours``: "add_remove"
    (default) or "replace" (n public).  ``rng``: None (the secure source) or a seed / numpy
    Generator (reproducible experiments only; the result records ``seeded``).  ``integer``: the values are
    integers (outputs and bounds are integers).  ``cells``: grid cells of the recursive split
    on real bounds (default 2^20) and of JointExp's outputs (default 2^40; the result's
    ``grid``); ``bins``: bins of the histogram route on real bounds
    (default :func:`dprange.quantile_bins.histogram_bins` of n x epsilon).
    ``session``: a :class:`dprange.session.Session` that pays for all of epsilon (bounds
    included): checked, and charged, before ``values`` are read, whatever the outcome (see
    :func:`release`; JointExp's refusal of more than ``n_max`` records and failed private
    bounds are outcomes too).  ``column``: the
    column of a table ``values`` (see :func:`release`).  ``n_max``: a public upper bound on the
    number of records; JointExp needs it under add/remove to charge its float error (without
    it "auto" picks the exact split where it would pick JointExp); the route's bins and "auto"
    use it as the record count.

    ``count_share``: under add/remove without ``n_max``, the share of epsilon (default 0.05)
    spent on a noisy record count (:func:`dprange.quantile_bins.record_count`) when the
    histogram route's default bins or auto's choice need n; 0 spends nothing (the bins then
    follow epsilon alone and auto uses m alone).  The result records the count, its source
    and its cost (``count``), and the bins used.
    """
    levels = check_levels(q)
    epsilon = check_epsilon(epsilon)
    count_share = check_count_share(count_share)
    n_max = check_n_max(n_max)
    if session is not None:
        epsilon, _ = _session(session).allot(epsilon)
    neighbours = check_neighbours(neighbours)
    if method != "auto":
        QUANTILE_METHODS.lookup(method, also=("auto",))
    seeded = rng is not None
    rng = resolve_rng(rng)
    box: tuple[float, float] | None = None  # private bounds are found once the data are read
    if isinstance(bounds, str) and bounds == "private":
        spent_on_bounds = _private_bounds_epsilon(epsilon, bounds_share, count_share)
    elif bounds is None:
        raise ParameterError(
            "quantiles needs bounds=(a, b) (public) or bounds='private' (spends bounds_share of epsilon)"
        )
    else:
        spent_on_bounds, box = 0.0, check_bounds(bounds, integer=integer)
    if method == "joint_exp":
        _check_joint_exp_before_reading(levels, epsilon, neighbours, n_max, box, integer)
    if session is not None:
        planned, condition = _planned_count_epsilon(
            method,
            levels,
            epsilon,
            box,
            integer=integer,
            neighbours=neighbours,
            n_max=n_max,
            bins=bins,
            count_share=count_share,
        )
        what = quantiles_ledger_what(len(levels), spent_on_bounds, planned, condition)
        charge_before_reading(session, epsilon, 0.0, what, f"quantiles:{method}")
    data = as_values(select_column(values, column))
    if box is None:
        found = private_bounds(data, spent_on_bounds, neighbours=neighbours, integer=integer, rng=rng)
        box, source = (found.lower, found.upper), "private"
    else:
        source = "public"
    binned = histogram_binned(box, integer)
    count = public_count(data.size, neighbours=neighbours, n_max=n_max)
    wants_count = (method == "histogram" and binned and bins is None) or (
        method == "auto" and auto_reads_count(levels.size, binned=binned)
    )
    spent_on_count = epsilon * count_share if count is None and wants_count else 0.0
    remaining = epsilon - spent_on_bounds - spent_on_count
    while Fraction(remaining) + Fraction(spent_on_bounds) + Fraction(spent_on_count) > Fraction(epsilon):
        remaining = math.nextafter(remaining, 0.0)  # never spend more than epsilon
    if spent_on_count > 0:
        count = record_count(data.size, spent_on_count, rng=rng)  # epsilon_count-DP, recorded below
    reason = ""
    chosen = method
    if method == "auto":
        joint_width = box[1] - box[0] + (1 if integer else 0)  # JointExp's range: [a, b + 1) on integers
        joint_ok = (n_max is not None or neighbours == "replace") and joint_affordable(
            remaining, levels, neighbours, data.size if n_max is None else n_max, joint_width
        )  # JointExp refuses a float-error charge of half of epsilon or more (a huge n_max)
        chosen, reason = auto_method(
            levels.size,
            remaining,
            integer=integer,
            width=box[1] - box[0],
            joint_ok=joint_ok,
            n=None if count is None else count.value,
            binned=binned,
        )
    if chosen == "histogram" and binned and bins is None:
        bins = epsilon_only_bins(remaining) if count is None else quantile_bins.histogram_bins(count.value * remaining)
    run = QUANTILE_METHODS[chosen].factory
    assert run is not None
    extra = {"n_max": n_max} if chosen == "joint_exp" else {}  # only JointExp reads a record bound
    grid = JointGrid.from_bounds(box, integer=integer, cells=cells) if chosen == "joint_exp" else None
    estimates, release_obj = run(
        data, levels, remaining, box, integer=integer, neighbours=neighbours, rng=rng, cells=cells, bins=bins, **extra
    )
    float_error = release_obj if isinstance(release_obj, JointCharge) else None  # JointExp's charge, no Release
    if float_error is not None:
        release_obj = None
    return QuantilesResult(
        levels,
        np.asarray(estimates, dtype=float),
        chosen,
        epsilon,
        box,
        source,
        spent_on_bounds,
        neighbours,
        seeded,
        reason,
        release_obj,
        count=count,
        bins=bins if chosen == "histogram" and binned else None,
        float_error=float_error,
        grid=grid,
    )
