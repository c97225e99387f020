"""``dprange.release_grid``: several columns released as one k-D histogram (a product domain),
with the k-D mechanism named, given, or chosen by exact expected error on the workload.
"""

from __future__ import annotations

from .._validation import check_delta, check_epsilon
from ..analysis.grid import check_answers_workload, select_grid
from ..answers.constrained import constrain
from ..domain import ProductDomain
from ..engines.spark import is_spark_frame, spark_histogram
from ..errors import ParameterError
from ..inference.marginal_constraints import MarginalConstraints, published_marginals
from ..mechanisms.base import GridMechanism, Mechanism
from ..privacy.samplers import resolve_rng
from ..privacy.units import make_unit
from ..registry import GRID_MECHANISMS
from .common import (
    REPLACE_DROP_MISSING_MESSAGE,
    _session,
    charge_before_reading,
    release_workload,
    resolve_neighbours,
)
from .units import bounded_grid_counts, check_unit_grid, row_epsilon


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
    (:func:`dprange.analysis.grid.select_grid`); a name registered in
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
    workload=None,
    order: int = 2,
    inference="gls",
    noise="auto",
    session=None,
    public_marginals=None,
    privacy_id: str | None = None,
    max_rows_per_id: int | None = None,
    **params,
):
    """Bucketize several columns into the product ``domain`` and release the k-D histogram
    (a :class:`~dprange.answers.grid.GridRelease`: rectangles, marginals, dominance counts,
    each with exact standard errors).

    ``columns``: a list of arrays (one per axis), a (records x k) array, a pandas DataFrame,
    a pyarrow Table or a Spark DataFrame (its columns in order, counted by Spark).
    ``mechanism``: "auto" (default: the least exact expected error on
    ``workload``, "all-rectangles" (the default; "marginals" where an axis is categorical:
    :func:`dprange.api.common.release_workload`), "prefix-rectangles" or "marginals" of ``order``, or a
    :class:`~dprange.workloads.rectangles.Rectangles`: the rectangles to be asked, for which the
    product of axes optimised for them is ranked too; from public parameters only), a name
    of ``dprange.registry.GRID_MECHANISMS`` with ``params``
    (e.g. ``mechanism="kronecker", axes=[4, "identity"]``; the named mechanisms optimised for
    a workload or an order, "optimized_kronecker", "optimized_marginals" and "fourier", take
    ``workload`` and ``order``), or a k-D mechanism object.
    ``neighbours``, ``clip``, ``drop_missing`` and ``rng`` as in :func:`release`; every
    parameter is checked, and the noise calibrated, before the columns are read.
    ``session``: a :class:`dprange.privacy.session.Session` that pays for the release, as in
    :func:`release` (refused before the columns are read if it would overspend; charged before
    they are read, whatever the outcome).  ``public_marginals``: {kept axes: published values} that the
    release is made to meet exactly, with exact errors (:func:`dprange.answers.constrained.constrain`;
    values published elsewhere, never computed here from the columns).

    ``privacy_id`` (with ``max_rows_per_id=k``): ``columns`` is a table holding the id column;
    its other columns, in order, are the axes; at most k random rows per id are kept and the
    release protects one id with all its rows (as :func:`release`; docs/privacy.md, "Privacy
    units"); ``GridRelease.privacy_unit`` records it and ``epsilon`` is the id-level one.
    """
    if not isinstance(domain, ProductDomain):
        raise ParameterError("domain must be a dprange.ProductDomain (one dprange.Domain per column)")
    if resolve_neighbours(mechanism, neighbours) == "replace" and drop_missing:
        raise ParameterError(REPLACE_DROP_MISSING_MESSAGE)
    if workload is None and any(d.categorical for d in domain.domains):
        order = min(order, domain.ndim) if isinstance(order, int) else order
    workload = release_workload(domain, workload, clip is True)
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    unit = make_unit(privacy_id, max_rows_per_id)
    check_unit_grid(unit, columns, delta, neighbours, drop_missing, public_marginals)
    if session is not None:
        epsilon, delta = _session(session).allot(epsilon, delta)
    run_at = row_epsilon(unit, epsilon)
    mech = choose_grid_mechanism(
        mechanism,
        domain.shape,
        run_at,
        delta=delta,
        neighbours=neighbours,
        workload=workload,
        order=order,
        inference=inference,
        noise=noise,
        **params,
    )
    mech.plan(domain.shape, run_at)  # the design and its per-axis limits, before any value is read
    if public_marginals is not None:  # checked (design, shapes, agreement) before any value is read
        if not getattr(mech, "constrainable", False):
            raise ParameterError(
                f"{mech.name} cannot take public marginals; use mechanism='kronecker', 'privelet' or 'fourier'"
            )
        MarginalConstraints.build(domain.shape, *published_marginals(public_marginals, domain.shape))
    charge_before_reading(session, epsilon, delta, f"k-D histogram on {domain!r}", repr(mech))
    if unit is not None:
        source = resolve_rng(rng)
        counts = bounded_grid_counts(columns, domain, unit, source, clip=clip)
        result = mech.release(counts, run_at, delta=delta, rng=source, domain=domain)
        result.privacy_unit = unit.to_dict(epsilon) | {"epsilon": epsilon}
        return result
    if is_spark_frame(columns):  # its columns in order, counted by the Spark engine
        counts = spark_histogram(columns, list(columns.columns), domain, clip=clip, drop_missing=drop_missing)
    else:
        counts = domain.histogram(columns, clip=clip, drop_missing=drop_missing)
    result = mech.release(counts, epsilon, delta=delta, rng=rng, domain=domain)
    if public_marginals is not None:
        result = constrain(result, public_marginals)
    return result
