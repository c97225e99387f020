"""What a saved release says about itself (issue 34, item 2): the input it was made from
(column names, units, the file), the privacy guarantee in words, the software version and
the JSON Schema every saved release follows.

:class:`Labels` are public descriptions the caller gives (a column's name and units are not
read from the data's values); they never change an answer.  :func:`privacy_statement`
restates, in words, the guarantee recorded in numbers in the release: the privacy unit (one
record: a row of the input, or one user's report in local DP), the neighbouring relation,
epsilon and delta, and what the release treats as public.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from importlib import metadata

from ..errors import DataError, ParameterError, excerpt

#: The published JSON Schema of saved releases (1-D :class:`~dprange.Release` and k-D
#: :class:`~dprange.answers.grid.GridRelease`), shipped in the package; docs/release-format.md.
SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema", "release.schema.json")


#: The schema's identifier, written in every saved release ("$schema" names the JSON Schema
#: dialect, so the file names its own schema under "schema").
SCHEMA_ID = "https://dprange.invalid/schema/release.schema.json"


@dataclass(frozen=True)
class Labels:
    """Public descriptions of a release's input: ``columns`` (one name per axis), ``units``
    (one per axis, None where not given; empty when none is given) and ``source`` (the input
    file or pattern as given, None for in-memory values)."""

    columns: tuple[str, ...] = ()
    units: tuple[str | None, ...] = ()
    source: str | None = None

    def __post_init__(self) -> None:
        columns = tuple(self.columns)
        units = tuple(self.units)
        if not all(isinstance(c, str) for c in columns):
            raise ParameterError(f"column names must be strings, got {list(columns)!r}")
        if not all(u is None or isinstance(u, str) for u in units):
            raise ParameterError(f"units must be strings, got {list(units)!r}")
        if units and len(units) != len(columns):
            raise ParameterError(f"give one unit per column: {len(columns)} column(s), {len(units)} unit(s)")
        if self.source is not None and not isinstance(self.source, str):
            raise ParameterError(f"the source must be a file name (a string), got {self.source!r}")
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "units", units)

    @classmethod
    def of(cls, columns=None, units=None, source=None) -> Labels:
        """Labels from a column name or names, a unit or units (one per column) and a source path."""
        columns = _names(columns, "column names")
        units = _names(units, "units")
        if isinstance(source, (list, tuple)):
            source = ", ".join(os.fspath(s) for s in source)
        return cls(columns, units, None if source is None else os.fspath(source))

    def axis_label(self, axis: int = 0, default: str = "value") -> str:
        """The name of an axis for tables and plots: "column (units)", the column, or ``default``."""
        name = self.columns[axis] if axis < len(self.columns) else default
        unit = self.units[axis] if axis < len(self.units) else None
        return f"{name} ({unit})" if unit else name

    def to_dict(self) -> dict:
        return {"columns": list(self.columns), "units": list(self.units) or None, "source": self.source}

    @classmethod
    def from_dict(cls, data) -> Labels:
        """The labels saved by :meth:`to_dict` (absent in files before format 3: no labels)."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise DataError(f"the saved input description {excerpt(data, 30)!r} is not a mapping; the file is corrupt")
        try:
            return cls(tuple(data.get("columns") or ()), tuple(data.get("units") or ()), data.get("source"))
        except (ParameterError, TypeError):
            raise DataError("the saved input description (columns, units, source) is malformed; corrupt file") from None


def _names(value, what: str) -> tuple:
    """One name or a sequence of names as a tuple (ParameterError for anything else)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise ParameterError(f"{what} must be strings, got {value!r}")


RELATIONS = {
    "add_remove": "add/remove: two datasets are neighbours when one is the other with one record added or removed",
    "replace": "replace: two datasets are neighbours when they have the same number of records and differ in one",
}


def privacy_statement(
    *,
    epsilon: float,
    delta: float,
    neighbours: str,
    total_public: bool,
    seeded: bool,
    local: bool = False,
    data_dependent: bool = False,
    public_domain: bool = True,
    privacy_unit: dict | None = None,
) -> dict:
    """The guarantee of a release in words, with its parts: ``unit``, ``relation``,
    ``epsilon``, ``delta``, ``public`` (what the release does not protect) and ``statement``.
    ``public_domain=False``: the bounds were found privately (paid for from epsilon).
    ``privacy_unit``: the record of a release with a privacy unit (``privacy_id``, its bounds,
    its relation): the unit is then one person, all the rows sharing an id."""
    kind = f"({epsilon:g}, {delta:g})-differential privacy" if delta > 0 else f"{epsilon:g}-differential privacy"
    relation = RELATIONS.get(neighbours, neighbours)
    if local:
        unit = "one user: each user's report is randomised on the user's side before it is collected"
        model, who = "local", "one user's value"
    elif privacy_unit is not None:
        unit, relation = person_unit(privacy_unit)
        model, who = "central", "one person's rows"
    else:
        unit = "one record (one row of the input)"
        model, who = "central", "one record"
    public = [
        "the domain (bounds and bins) and the mechanism with its parameters, chosen without the data"
        if public_domain
        else "the mechanism with its parameters, chosen without the data (the bounds were found privately, "
        "paid for from epsilon)",
        "every estimate, error bar and interval in this file is computed from the noisy measurements and "
        "these public facts (post-processing)",
    ]
    if total_public:
        public.append("the number of records (published exactly: the replace relation keeps it fixed)")
    if data_dependent:
        public.append("the private choices made from the data (paid for from epsilon) shape the estimate")
    statement = (
        f"{kind} ({model} model) for {unit}, under {relation}: changing "
        f"{who} changes the probability of any output by a factor of at most exp({epsilon:g})"
        + (f", except with probability {delta:g}" if delta > 0 else "")
        + "."
    )
    if seeded:
        statement += " The noise was seeded (reproducible): not for publication."
    return {
        "model": model,
        "unit": unit,
        "relation": neighbours,
        "epsilon": epsilon,
        "delta": delta,
        "public": public,
        "statement": statement,
    }


def person_unit(privacy_unit: dict) -> tuple[str, str]:
    """(the unit, the relation) of a release with a privacy unit, in words."""
    rows, groups = privacy_unit.get("max_rows_per_id"), privacy_unit.get("max_groups_per_id", 1)
    bounds = f"at most {rows} rows kept per person" + (f" in each of at most {groups} groups" if groups != 1 else "")
    unit = f"one person: all the rows sharing a value of {privacy_unit.get('privacy_id')!r} ({bounds})"
    return unit, str(privacy_unit.get("relation", "add or remove one id with all its rows"))


def self_description(
    labels: Labels,
    record,
    *,
    local: bool = False,
    data_dependent: bool = False,
    public_domain: bool = True,
    privacy_unit: dict | None = None,
) -> dict:
    """The keys every saved release carries about itself: ``schema``, ``software``, ``input``
    (the labels) and ``privacy_statement`` (:func:`privacy_statement` of ``record``: a
    Provenance or Measurements, with epsilon, delta, neighbours, total and seeded, and the
    privacy unit a Provenance records or ``privacy_unit`` gives)."""
    return {
        "schema": SCHEMA_ID,
        "software": software(),
        "input": labels.to_dict(),
        "privacy_statement": privacy_statement(
            epsilon=record.epsilon,
            delta=record.delta,
            neighbours=record.neighbours,
            total_public=record.total is not None,
            seeded=record.seeded,
            local=local,
            data_dependent=data_dependent,
            public_domain=public_domain,
            privacy_unit=privacy_unit if privacy_unit is not None else getattr(record, "privacy_unit", None),
        ),
    }


def software() -> dict:
    """The software that wrote a release: name and version (the installed distribution's)."""
    return {"name": "dprange", "version": _version()}


@cache
def _version() -> str:
    try:
        return metadata.version("dprange")
    except metadata.PackageNotFoundError:
        return "unknown"


@cache
def release_schema() -> dict:
    """The published JSON Schema of saved releases (:data:`SCHEMA_PATH`)."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        return json.load(fh)
