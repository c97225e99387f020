"""What the facade's entry points share: the one neighbouring relation of a release, a
mechanism from its name, and the session's charge before any data are read."""

from __future__ import annotations

from .._validation import check_neighbours
from ..domain import CATEGORY_CLIP_MESSAGE, Domain, ProductDomain
from ..errors import ParameterError
from ..mechanisms.base import Mechanism
from ..privacy.session import Session
from ..registry import MECHANISMS

REPLACE_DROP_MISSING_MESSAGE = (
    "neighbours='replace' publishes the number of records exactly, and with drop_missing=True that number "
    "is counted after dropping, so it would reveal how many values were missing; clean the missing values "
    "first or use neighbours='add_remove'"
)


def resolve_neighbours(mechanism, neighbours) -> str:
    """The one neighbouring relation of a release: ``neighbours`` if given, else the
    mechanism object's, else "add_remove"; a conflict with a mechanism object is an error."""
    if neighbours is not None:
        check_neighbours(neighbours)
    if isinstance(mechanism, Mechanism):
        if neighbours is not None and neighbours != mechanism.neighbours:
            raise ParameterError(
                f"neighbours={neighbours!r} conflicts with the mechanism's neighbours={mechanism.neighbours!r}; "
                "pass one of them only (neighbours=None uses the mechanism's)"
            )
        return mechanism.neighbours
    return neighbours or "add_remove"


def make_mechanism(mechanism, *, neighbours: str = "add_remove", **params) -> Mechanism:
    """A mechanism object from None (Hierarchical()), a registered name, or an object.

    A name (or None) is built with ``neighbours`` and ``params``, checked by the class's
    declared parameters; an object is returned as it is and keeps its own parameters."""
    if isinstance(mechanism, Mechanism):
        if params:
            raise ParameterError(
                f"{', '.join(sorted(params))} apply to mechanisms given by name; "
                f"{type(mechanism).__name__} keeps the parameters it was built with"
            )
        return mechanism
    entry = MECHANISMS.lookup("hierarchical" if mechanism is None else mechanism)
    if not entry.nameable:
        needs = ", ".join(p.name for p in entry.params if p.required)
        builder = getattr(entry.factory, "__name__", entry.name)
        raise ParameterError(f"mechanism {entry.name!r} needs {needs}: build {builder}(...) and pass the object")
    return entry.build(neighbours=neighbours, **params)


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


def release_workload(domain, workload, clip: bool = False):
    """The workload a release optimises for when ``workload`` is None: all ranges (all
    rectangles on a :class:`~dprange.ProductDomain`) on ordered domains; on a categorical
    domain each category's count (``"identity"``: auto then ranks Flat and its peers), on a
    product with a categorical axis its marginals.  Prefix workloads need an order, so they
    are refused where an axis is categorical, as is ``clip`` where no axis can be clipped."""
    axes = domain.domains if isinstance(domain, ProductDomain) else [domain]
    categorical = [isinstance(d, Domain) and d.categorical for d in axes]
    if clip and categorical and all(categorical):
        raise ParameterError(CATEGORY_CLIP_MESSAGE)
    if workload is None:
        if isinstance(domain, ProductDomain):
            return "marginals" if any(categorical) else "all-rectangles"
        return "identity" if any(categorical) else "all-range"
    if any(categorical) and isinstance(workload, str) and workload.replace("_", "-") in ("prefix", "prefix-rectangles"):
        raise ParameterError(
            f"workload {workload!r} asks cumulative counts, but categories are unordered; use 'identity' "
            "(one count per category) or 'marginals'"
        )
    return workload
