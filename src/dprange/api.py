"""The one-call facade ``dprange.release``: raw values -> histogram -> private release.

It sits above both the mechanisms (:mod:`dprange.mechanisms`) and the automatic choice among
them by exact expected error (:mod:`dprange.analysis`), which itself builds mechanisms; so
the facade has a module of its own and neither of those imports the other in a circle.
"""

from __future__ import annotations

from .analysis import auto_mechanism
from .domain import Domain
from .errors import ParameterError
from .mechanisms import INFERENCE, MECHANISMS, REPLACE_DROP_MISSING_MESSAGE, make_mechanism, resolve_neighbours
from .release import Release


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
) -> Release:
    """Bucketize raw ``values`` into ``domain`` and release them with ``mechanism``.

    ``mechanism``: None or ``"auto"`` (default) is the mechanism with the least exact
    expected error on ``workload`` (default ``"all-range"``; use ``"prefix"`` when the CDF
    and quantiles matter; a name or a Workload; see :func:`dprange.analysis.select`),
    chosen from public parameters only and cached on them.  A name ("flat",
    "hierarchical", "wavelet") or a configured mechanism object is used as given.
    ``inference`` ("gls", "nnls", "l1") and ``noise`` apply to the automatic choice and to
    named mechanisms; a mechanism object keeps its own.

    ``neighbours``: None (the default) means the mechanism object's relation ("add_remove"
    for names, None and "auto"); a relation given here builds named mechanisms with it and
    must agree with a mechanism object's.  ``neighbours="replace"`` publishes the number of
    records exactly, so it refuses ``drop_missing=True`` (the count after dropping would
    reveal how many values were missing).
    """
    if not isinstance(domain, Domain):
        raise ParameterError("domain must be a dprange.Domain (Domain.integers or Domain.interval)")
    if inference not in INFERENCE:
        raise ParameterError(f"inference must be one of {', '.join(INFERENCE)}, got {inference!r}")
    relation = resolve_neighbours(mechanism, neighbours)
    if relation == "replace" and drop_missing:
        raise ParameterError(REPLACE_DROP_MISSING_MESSAGE)
    if mechanism is None or (isinstance(mechanism, str) and mechanism == "auto"):
        mech = auto_mechanism(workload, domain.size, epsilon, delta=delta, neighbours=relation, noise=noise)
        mech.inference = inference
    elif isinstance(mechanism, str) and mechanism in MECHANISMS:
        mech = MECHANISMS[mechanism](neighbours=relation, noise=noise, inference=inference)
    else:
        mech = make_mechanism(mechanism, neighbours=relation)
    counts = domain.histogram(values, clip=clip, drop_missing=drop_missing)
    return mech.release(counts, epsilon, delta=delta, rng=rng, domain=domain)
