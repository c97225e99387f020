"""A privacy session: one budget (epsilon, delta) shared by several releases, with a ledger.

Releases on the same records compose sequentially (Dwork, McSherry, Nissim and Smith,
"Calibrating Noise to Sensitivity in Private Data Analysis", TCC 2006; Dwork and Roth, "The
Algorithmic Foundations of Differential Privacy", FnT-TCS 2014, Theorem 3.16): their
epsilons and deltas add up.  A :class:`Session` hands out shares of its budget, refuses a
release that would overspend before any data are read, and records every spend in a ledger
(what, when, epsilon, delta, mechanism, central or local) that is saved to and resumed from
JSON.  Local-DP randomisation spends the same budget (each user's reports are epsilon-LDP,
hence epsilon-DP for the whole collection).  Parallel composition is not applied: every
release is charged in full.

Sums are exact: every float is a rational number, and the ledger adds the epsilons as
fractions, so no rounding can let the spends exceed the budget.  A request that exceeds
what is left only by float rounding (the last of 19 releases at epsilon / 19) is lowered to
the largest float that fits, and the release runs with that epsilon (:meth:`Session.allot`).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import tempfile
from dataclasses import dataclass
from fractions import Fraction

from ._validation import check_delta, check_epsilon
from .errors import DataError, ParameterError, excerpt

#: The version of the ledger's JSON layout.
LEDGER_VERSION = 1
#: Kinds of spend: a central release, or local-DP randomisation by the users.
KINDS = ("central", "local")
#: A request may exceed what is left by this relative amount (float rounding of a share,
#: times the number of spends) and is then lowered to fit; more is refused.
_ROUNDING = Fraction(1, 2**50)


class BudgetError(ParameterError):
    """A release would spend more than what is left of the session's budget."""


@dataclass(frozen=True)
class LedgerEntry:
    """One spend: ``what`` was released, ``when`` (ISO 8601, UTC), ``epsilon`` and ``delta``
    spent, the ``mechanism`` and the ``kind`` ("central" or "local")."""

    what: str
    when: str
    epsilon: float
    delta: float
    mechanism: str
    kind: str = "central"

    def to_dict(self) -> dict:
        return {
            "what": self.what,
            "when": self.when,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "mechanism": self.mechanism,
            "kind": self.kind,
        }

    @classmethod
    def from_dict(cls, data) -> LedgerEntry:
        if not isinstance(data, dict):
            raise DataError("a ledger entry must be a mapping with what, when, epsilon, delta, mechanism and kind")
        try:
            entry = cls(
                str(data["what"]),
                str(data["when"]),
                _finite(data["epsilon"], "epsilon"),
                _finite(data["delta"], "delta"),
                str(data["mechanism"]),
                str(data.get("kind", "central")),
            )
        except KeyError as exc:
            raise DataError(f"a ledger entry lacks the field {exc.args[0]!r}") from None
        if entry.epsilon < 0 or entry.delta < 0 or entry.kind not in KINDS:
            raise DataError(f"a ledger entry is malformed (epsilon {entry.epsilon!r}, kind {excerpt(entry.kind)})")
        return entry


def _finite(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"a ledger's {name} must be a finite number, got {excerpt(repr(value))}")
    return float(value)


def _largest_float_at_most(value: Fraction) -> float:
    out = float(value)
    return out if Fraction(out) <= value else math.nextafter(out, -math.inf)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class Session:
    """A privacy budget ``epsilon`` (and ``delta``) spent by releases in sequence.

    ``dprange.release(..., session=s)`` and ``dprange.quantiles(..., session=s)`` spend from
    it; :meth:`randomize` spends on local-DP reports; :meth:`charge` records any other
    release.  ``path``: the JSON file the ledger is saved to after every spend (created if
    absent; :meth:`open` resumes an existing one); ``autosave=False`` leaves the saving to
    :meth:`save` (the command line saves it just before writing its outputs)."""

    def __init__(self, epsilon, delta=0.0, *, path=None, autosave: bool = True):
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.entries: list[LedgerEntry] = []
        self.path = None if path is None else os.fspath(path)
        self.autosave = bool(autosave)
        self._saved_text: str | None = None

    # ------------------------------------------------------------------ accounting
    @property
    def spent_epsilon(self) -> Fraction:
        """The exact sum of the epsilons spent."""
        return sum((Fraction(e.epsilon) for e in self.entries), Fraction(0))

    @property
    def spent_delta(self) -> Fraction:
        """The exact sum of the deltas spent."""
        return sum((Fraction(e.delta) for e in self.entries), Fraction(0))

    @property
    def remaining_epsilon(self) -> float:
        """The largest float epsilon a next release may still spend."""
        return _largest_float_at_most(Fraction(self.epsilon) - self.spent_epsilon)

    @property
    def remaining_delta(self) -> float:
        return _largest_float_at_most(Fraction(self.delta) - self.spent_delta)

    def allot(self, epsilon, delta=0.0) -> tuple[float, float]:
        """The (epsilon, delta) a release asking for ``epsilon`` and ``delta`` may spend: the
        request itself, or lowered by the fewest ulps when it exceeds what is left only by
        float rounding; :class:`BudgetError` when it would overspend.  Spends nothing."""
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        return (
            self._fit(epsilon, Fraction(self.epsilon), self.spent_epsilon, "epsilon"),
            self._fit(delta, Fraction(self.delta), self.spent_delta, "delta") if delta > 0 else 0.0,
        )

    def _fit(self, asked: float, budget: Fraction, spent: Fraction, name: str) -> float:
        left = budget - spent
        excess = Fraction(asked) - left
        if excess <= 0:
            return asked
        tolerance = budget * _ROUNDING * (len(self.entries) + 1)
        if left > 0 and excess <= tolerance:
            return _largest_float_at_most(left)
        raise BudgetError(
            f"this release needs {name} = {asked!r} but the session has {float(left):.6g} of its "
            f"{float(budget):g} left ({len(self.entries)} releases so far); lower the release's {name} "
            "or start a new session"
        )

    def charge(self, epsilon, delta=0.0, *, what: str, mechanism: str, kind: str = "central") -> LedgerEntry:
        """Record a spend of exactly ``epsilon`` and ``delta`` (as :meth:`allot` returned
        them) and save the ledger when the session has a path; BudgetError if it overspends."""
        if kind not in KINDS:
            raise ParameterError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        fitted = self.allot(epsilon, delta)
        if fitted != (float(epsilon), float(delta)):
            raise BudgetError(
                f"a spend of epsilon = {epsilon!r}, delta = {delta!r} exceeds what is left; "
                f"charge what Session.allot returns ({fitted[0]!r}, {fitted[1]!r})"
            )
        entry = LedgerEntry(str(what), _now(), float(epsilon), float(delta), str(mechanism), kind)
        self.entries.append(entry)
        if self.path is not None and self.autosave:
            try:
                self.save(self.path)
            except BaseException:
                self.entries.pop()
                raise
        return entry

    def randomize(self, protocol, values, rng=None, *, what: str = "local-DP reports"):
        """The users' local-DP reports of ``values`` under ``protocol`` (a
        :mod:`dprange.ldp.protocols` protocol), its epsilon charged first (kind "local")."""
        epsilon, _ = self.allot(protocol.epsilon)
        if epsilon != protocol.epsilon:
            protocol = protocol.with_epsilon(epsilon)
        self.charge(epsilon, 0.0, what=what, mechanism=protocol.name, kind="local")
        return protocol.randomize(values, rng)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        return {
            "dprange_ledger": LEDGER_VERSION,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "entries": [e.to_dict() for e in self.entries],
            "spent_epsilon": float(self.spent_epsilon),
            "spent_delta": float(self.spent_delta),
        }

    @classmethod
    def from_dict(cls, data, *, path=None) -> Session:
        """The session saved by :meth:`to_dict`; DataError for a malformed or overspent ledger."""
        if not isinstance(data, dict) or data.get("dprange_ledger") != LEDGER_VERSION:
            raise DataError(f"not a dprange ledger (version {LEDGER_VERSION}): the field 'dprange_ledger' is missing")
        try:
            session = cls(data["epsilon"], data.get("delta", 0.0), path=path)
        except (KeyError, ParameterError):
            raise DataError("the ledger's budget (epsilon > 0, delta in [0, 1)) is missing or invalid") from None
        entries = data.get("entries")
        if not isinstance(entries, list):
            raise DataError("the ledger's 'entries' must be a list")
        session.entries = [LedgerEntry.from_dict(e) for e in entries]
        if session.spent_epsilon > Fraction(session.epsilon) or session.spent_delta > Fraction(session.delta):
            raise DataError("the ledger spends more than its budget; it has been edited or corrupted")
        return session

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def save(self, path=None) -> str:
        """Write the ledger to ``path`` (default: the session's) atomically.  Refuses to
        overwrite a ledger that changed since this session read or wrote it (another process
        spending from the same file)."""
        chosen = path if path is not None else self.path
        if chosen is None:
            raise ParameterError("give a path to save the ledger to")
        target = os.fspath(chosen)
        current = _read_text(target)
        if current is not None and target == self.path and current != self._saved_text:
            raise DataError(
                f"the ledger {target!r} was changed by another process since it was read; "
                "resume it again (Session.open) and retry"
            )
        text = self.to_json()
        _write_atomically(target, text)
        self._saved_text = text
        return target

    @classmethod
    def open(cls, path, epsilon=None, delta=0.0, *, autosave: bool = True) -> Session:
        """Resume the ledger saved at ``path``; if there is none, start a session of
        ``epsilon`` (and ``delta``) to be saved there at its first spend (DataError when no
        epsilon is given)."""
        path = os.fspath(path)
        text = _read_text(path)
        if text is None:
            if epsilon is None:
                raise DataError(f"the ledger {path!r} does not exist; give the session's epsilon to create it")
            return cls(epsilon, delta, path=path, autosave=autosave)
        try:
            data = json.loads(text)
        except ValueError:
            raise DataError(f"the ledger {path!r} is not valid JSON") from None
        session = cls.from_dict(data, path=path)
        session.autosave = bool(autosave)
        session._saved_text = text
        if epsilon is not None and (check_epsilon(epsilon) != session.epsilon or check_delta(delta) != session.delta):
            raise ParameterError(
                f"the ledger {path!r} holds a budget of epsilon = {session.epsilon!r}, delta = {session.delta!r}; "
                "a session's budget cannot be changed after it started"
            )
        return session

    def __repr__(self) -> str:
        return (
            f"Session(epsilon={self.epsilon!r}, delta={self.delta!r}, spent={float(self.spent_epsilon):.6g}, "
            f"releases={len(self.entries)})"
        )


def _read_text(path: str) -> str | None:
    if os.path.isdir(path):
        raise DataError(f"the ledger path {path!r} is a folder; give a file such as 'ledger.json'")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read the ledger {path!r}: {excerpt(exc, 80)}") from None


def _write_atomically(path: str, text: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise DataError(f"cannot write the ledger {path!r}: the folder {folder!r} does not exist")
    fd, temporary = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
