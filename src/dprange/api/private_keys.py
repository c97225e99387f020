"""Group-by with private keys: ``dprange.release(..., by="state")`` without ``groups=``.

The keys are read from the data, so choosing them is a release: a share ``key_share`` of
epsilon and all of delta go to :class:`~dprange.privacy.partition_selection.PartitionSelection`
(Desfontaines, Voss, Gipson and Mandayam, "Differentially private partition selection",
PoPETs 2022), which keeps each key present in the data with probability pi(n) of its n distinct
ids after bounding every id to m = ``max_groups_per_id`` keys (one row one id without a
privacy unit: m = 1); the rest of epsilon releases the keys kept, as declared keys would be
(:func:`dprange.api.units.unit_release`), with pure epsilon-DP noise.  The keys kept are
published sorted (never in data order); the others, and how many there were, are not.  The
whole release is (epsilon, delta)-DP for one id added or removed: the selection is
(key epsilon, delta)-DP and, given the keys it publishes, the per-key releases are (epsilon -
key epsilon)-DP (sequential composition).
"""

from __future__ import annotations

from .._validation import fit_last
from ..engines.frames import select_column
from ..engines.key_counts import KeyBounder, KeyCounter, file_key_counts
from ..engines.spark_keys import spark_key_counts
from ..errors import ParameterError, excerpt

#: The share of epsilon that chooses private keys by default (all of delta goes there too).
KEY_SHARE = 0.25


#: What the key selection record says about the keys of a private group-by.
PRIVATE_KEYS_NOTE = (
    "selected privately from the keys present in the data (each kept with probability pi(n) of its n distinct "
    "ids after bounding); the keys not kept and their number are not published; published sorted"
)


def release_delta(by, groups, delta: float) -> float:
    """The delta the per-key releases run at: 0 with private keys (all of delta chooses them)."""
    return 0.0 if by is not None and groups is None else delta


def check_private_keys(by, delta: float, key_share) -> None:
    """What a group-by with private keys refuses before any data are read."""
    if delta <= 0:
        raise ParameterError(
            f"by={by!r} without groups= selects the keys from the data privately, which needs delta > 0: declare "
            "groups=[...] (the public list of keys, free) or give delta (e.g. 1e-6)"
        )
    if isinstance(key_share, bool) or not isinstance(key_share, (int, float)) or not 0 < key_share < 1:
        raise ParameterError(
            f"key_share must be a number in (0, 1), the share of epsilon choosing keys, got {key_share!r}"
        )


def check_key_share_use(by, groups, key_share) -> None:
    """``key_share`` given where no key is selected privately is refused (it would do nothing)."""
    if key_share != KEY_SHARE and (by is None or groups is not None):
        raise ParameterError("key_share is the share of epsilon choosing private keys: it needs by= without groups=")


def split_epsilon(epsilon: float, share: float) -> tuple[float, float]:
    """(epsilon choosing the keys, epsilon releasing them), summing to at most epsilon exactly."""
    chosen = epsilon * share
    return chosen, fit_last([chosen], epsilon - chosen, epsilon)


def select_keys(values, by, unit, selection, source, *, files, batch_rows, spark=False, session=None) -> tuple:
    """The keys kept by the private selection (reads the key and id columns), sorted;
    ``spark``: the candidate keys are counted by Spark (``session``: a SparkSession or master URL)."""
    id_column = None if unit is None else unit.id_column
    bounder = None if unit is None or spark else KeyBounder(source, unit.max_groups_per_id)
    if spark:
        m = 1 if unit is None else unit.max_groups_per_id
        keys, counts = spark_key_counts(values, by, id_column=id_column, max_keys_per_id=m, rng=source, spark=session)
    elif files:
        keys, counts = file_key_counts(values, by, id_column, bounder, batch_rows)
    else:
        counter = KeyCounter(bounder)
        counter.add(select_column(values, by), None if unit is None else select_column(values, unit.id_column))
        keys, counts = counter.counts()
    kept = selection.select(counts, source)
    return tuple(k for k, keep in zip(keys, kept) if keep)


def private_what(column, domain, by, unit_what: str | None) -> str:
    """The session ledger's description of a release with private keys."""
    parts = [f"histogram of column {excerpt(repr(column))} on {domain!r}", f"by {by!r} over keys selected privately"]
    return ", ".join(parts + ([unit_what] if unit_what else []))
