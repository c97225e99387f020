"""Privacy units: one person (an id) with many rows, and what bounding their contribution costs.

By default one row is one person: neighbouring datasets differ by one row.  With a privacy
unit (``privacy_id="user_id"``, ``max_rows_per_id=k``) neighbouring datasets differ by one id
with all its rows, added or removed.  Before counting, at most k rows of every id are kept,
chosen uniformly at random (:mod:`dprange.engines.bounding`); an id then changes at most k
rows of the bounded data, so a mechanism that is (epsilon / k)-DP for one row added or
removed is epsilon-DP for one id (group privacy: Dwork and Roth, "The Algorithmic
Foundations of Differential Privacy", FnT-TCS 2014, Theorem 2.2, which for pure DP is exact
and, for a linear release, is the calibration to the id-level sensitivity k Delta).  Group
privacy of (epsilon, delta)-DP multiplies delta by k e^((k-1) epsilon), so units are offered
for pure epsilon-DP only (delta = 0) and for the add / remove relation only (replace would
publish the bounded number of rows, which depends on how many rows each id has).

Group-by with public keys (:class:`PrivacyUnit.max_groups_per_id` = m): every id's rows are
also bounded to m groups (chosen at random among its groups) and to k rows in each; one id
then changes at most m groups' histograms by at most k rows each, so each group's release
at epsilon / m (row level: epsilon / (m k)) composes to epsilon over an id's m groups
(sequential) and the groups run in parallel (disjoint rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError

#: The neighbouring relation recorded for releases with a privacy unit.
ID_RELATION = "add or remove one id with all its rows"

#: What the counts (and their exact error bars) of a release with a privacy unit are about.
BOUNDED_COUNTS = (
    "the rows kept by contribution bounding (at most max_rows_per_id per id and group): below the data's "
    "counts, by a data-dependent amount, where an id has more rows"
)

#: The relation recorded without one (and said prominently by the CLI's help and the docs).
ROW_RELATION = "add or remove one row; one row must be one person"


@dataclass(frozen=True)
class PrivacyUnit:
    """``id_column``: the column naming the person of every row; ``max_rows_per_id`` (k): rows
    kept per id (per group with a group-by); ``max_groups_per_id`` (m): groups kept per id
    (1 without a group-by)."""

    id_column: str
    max_rows_per_id: int
    max_groups_per_id: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.id_column, str) or not self.id_column:
            raise ParameterError("privacy_id must name the id column (a non-empty string)")
        check_positive_int(self.max_rows_per_id, "max_rows_per_id")
        check_positive_int(self.max_groups_per_id, "max_groups_per_id")

    @property
    def rows_changed(self) -> int:
        """The most rows of one group's bounded data that one id can change (k)."""
        return self.max_rows_per_id

    def group_epsilon(self, epsilon: float) -> float:
        """The id-level budget of one group: epsilon / m, rounded down so that m of them never
        exceed epsilon (exact rational check)."""
        return divided_down(check_epsilon(epsilon), self.max_groups_per_id)

    def row_epsilon(self, epsilon: float) -> float:
        """The row-level budget a mechanism runs at for one group: epsilon / (m k), rounded
        down so that m k of them never exceed epsilon."""
        return divided_down(check_epsilon(epsilon), self.max_groups_per_id * self.max_rows_per_id)

    def to_dict(self, epsilon: float) -> dict:
        """The record saved with a release: the relation, the bounds and the budgets."""
        return {
            "privacy_id": self.id_column,
            "max_rows_per_id": self.max_rows_per_id,
            "max_groups_per_id": self.max_groups_per_id,
            "relation": ID_RELATION,
            "row_epsilon": self.row_epsilon(epsilon),
            "counts": BOUNDED_COUNTS,
        }


def divided_down(epsilon: float, parts: int) -> float:
    """epsilon / parts as a float whose ``parts`` copies sum to at most epsilon exactly."""
    share = epsilon / parts
    while Fraction(share) * parts > Fraction(epsilon):
        share = math.nextafter(share, 0.0)
    return share


def check_unit_release(unit: PrivacyUnit | None, delta: float, neighbours: str | None, what: str) -> None:
    """Refuse, before any data are read, what a privacy unit cannot offer: delta > 0 and the
    replace relation (module doc).  ``what`` names the mechanism or method."""
    if unit is None:
        return
    if delta > 0:
        raise ParameterError(
            f"privacy_id with delta > 0 is not supported for {what}: group privacy over an id's "
            "k rows is exact for pure epsilon-DP only; use delta=0"
        )
    if neighbours == "replace":
        raise ParameterError(
            f"privacy_id is offered under neighbours='add_remove' only ({what}): replace would publish "
            "the bounded number of rows, which depends on each id's rows"
        )


def make_unit(privacy_id, max_rows_per_id, max_groups_per_id=1) -> PrivacyUnit | None:
    """The :class:`PrivacyUnit` of the facade's keyword arguments, or None (one row, one person);
    a bound without an id column is refused."""
    if privacy_id is None:
        if max_rows_per_id is not None:
            raise ParameterError("max_rows_per_id needs privacy_id (the column naming the person of each row)")
        return None
    if max_rows_per_id is None:
        raise ParameterError(
            "privacy_id needs max_rows_per_id=k (rows kept per id, chosen at random); the noise scales with k"
        )
    return PrivacyUnit(privacy_id, max_rows_per_id, max_groups_per_id)
