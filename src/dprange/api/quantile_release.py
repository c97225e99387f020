"""``dprange.quantiles``: quantiles from raw values, by a private histogram, JointExp or
ApproxQuantiles, with public or private bounds and a record count that is public, declared or
noisy; the session is charged for all of epsilon before the values are read.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import cast

import numpy as np

from .._validation import check_epsilon
from ..answers.release import Release
from ..domain import Domain
from ..engines.frames import select_column
from ..errors import ParameterError
from ..privacy.samplers import resolve_rng
from ..quantile_mechanisms import bins as quantile_bins
from ..quantile_mechanisms.bins import COUNT_SHARE, check_count_share, epsilon_only_bins, public_count, record_count
from ..quantile_mechanisms.grid import check_bounds, check_levels, check_neighbours
from ..quantile_mechanisms.joint_exp import (
    JointCharge,
    JointGrid,
    check_n_max,
    joint_affordable,
    joint_charged_epsilon,
    joint_precision,
)
from ..quantile_mechanisms.methods import (
    QuantilesResult,
    as_values,
    auto_method,
    auto_reads_count,
    register_quantile_method,
)
from ..quantile_mechanisms.private_bounds import private_bounds
from ..registry import QUANTILE_METHODS, Citation
from .common import _session, charge_before_reading
from .histogram import release
from .units import unit_quantiles

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
    :func:`~dprange.quantile_mechanisms.bins.histogram_bins` of n x epsilon); None: the epsilon-only
    rule :func:`~dprange.quantile_mechanisms.bins.epsilon_only_bins`."""
    a, b = bounds
    if not histogram_binned(bounds, integer):
        domain = Domain.integers(int(a), int(b))
    else:
        domain = Domain.interval(a, b, epsilon_only_bins(epsilon) if bins is None else bins)
    rel = cast(Release, release(values, domain, epsilon, workload="prefix", neighbours=neighbours, rng=rng, clip=True))
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
    privacy_id: str | None = None,
    max_rows_per_id: int | None = None,
    label: str | None = None,
) -> QuantilesResult:
    """epsilon-DP quantiles of raw ``values`` at levels ``q`` (strictly increasing, in (0, 1)).

    ``bounds``: public (a, b) (values outside are clipped), or ``"private"`` to spend
    ``bounds_share`` of epsilon on :func:`dprange.quantile_mechanisms.private_bounds.private_bounds` first.
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
    (default :func:`dprange.quantile_mechanisms.bins.histogram_bins` of n x epsilon).
    ``session``: a :class:`dprange.privacy.session.Session` that pays for all of epsilon (bounds
    included): checked, and charged, before ``values`` are read, whatever the outcome (see
    :func:`release`; JointExp's refusal of more than ``n_max`` records and failed private
    bounds are outcomes too).  ``column``: the
    column of a table ``values`` (see :func:`release`).  ``n_max``: a public upper bound on the
    number of records; JointExp needs it under add/remove to charge its float error (without
    it "auto" picks the exact split where it would pick JointExp); the route's bins and "auto"
    use it as the record count.  ``label``: what is released, as the session's ledger names
    it (the CLI: the column and the input file).

    ``count_share``: under add/remove without ``n_max``, the share of epsilon (default 0.05)
    spent on a noisy record count (:func:`dprange.quantile_mechanisms.bins.record_count`) when the
    histogram route's default bins or auto's choice need n; 0 spends nothing (the bins then
    follow epsilon alone and auto uses m alone).  The result records the count, its source
    and its cost (``count``), and the bins used.

    ``privacy_id`` with ``max_rows_per_id=k`` (a table ``values`` and ``column``): at most k
    random rows per id are kept and the method runs at epsilon / k, so the quantiles protect one
    id with all its rows (pure DP, add/remove; docs/privacy.md, "Privacy units"); the result's
    ``privacy_unit`` records it and its parts (bounds, count) are at the row-level epsilon.
    Without it one row must be one person.
    """
    if privacy_id is not None or max_rows_per_id is not None:

        def run_bounded(kept, row_epsilon, source):
            return quantiles(
                kept,
                q,
                row_epsilon,
                bounds=bounds,
                method=method,
                rng=source,
                bounds_share=bounds_share,
                neighbours=neighbours,
                integer=integer,
                cells=cells,
                bins=bins,
                n_max=n_max,
                count_share=count_share,
            )

        return unit_quantiles(
            run_bounded,
            values,
            column,
            epsilon,
            privacy_id=privacy_id,
            max_rows_per_id=max_rows_per_id,
            rng=rng,
            session=session,
            neighbours=neighbours,
        )
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
        what = what if label is None else f"{what} of {label}"
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
