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

A call that reads data is charged before it reads them and keeps the charge whatever its
outcome: a failure that depends on the data (a refused record count, failed private bounds,
a bad row) answers a question about them (docs/privacy.md, "When a session is charged").

A ledger saved to a file is charged under an exclusive OS lock (``flock`` on a lock file
next to it, ``<ledger>.lock``): the file is re-read, checked against what this session last
saw and against the budget, written to a temporary file, fsynced, renamed over the ledger and
the folder fsynced, all while the lock is held, so processes that share a ledger can never
spend more than its budget together.  The file itself is the trust root: whoever can write
it can delete or edit it (docs/privacy.md, "Trust boundaries").

Sums are exact: every float is a rational number, and the ledger adds the epsilons as
fractions, so no rounding can let the spends exceed the budget.  A request that exceeds
what is left only by float rounding (the last of 19 releases at epsilon / 19) is lowered to
the largest float that fits, and the release runs with that epsilon (:meth:`Session.allot`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from .._validation import check_delta, check_epsilon
from ..errors import DataError, ParameterError, excerpt

#: The version of the ledger's JSON layout.
LEDGER_VERSION = 1


#: Kinds of spend: a central release, or local-DP randomisation by the users.
KINDS = ("central", "local")


#: A request may exceed what is left by this relative amount (float rounding of a share,
#: times the number of spends) and is then lowered to fit; more is refused.
_ROUNDING = Fraction(1, 2**50)


#: How long a charge waits for another process's lock on the ledger before it fails.
LOCK_TIMEOUT_S = 60.0


#: How often a waiting charge retries the lock.
_LOCK_POLL_S = 0.005


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
        them); BudgetError if it overspends.  With a path (and autosave), the check and the
        write happen under the ledger's lock, against the file as it is then: DataError if
        another process changed it since this session read it."""
        if kind not in KINDS:
            raise ParameterError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if self.path is None or not self.autosave:
            return self._record(epsilon, delta, what, mechanism, kind)
        with _ledger_lock(self.path):
            self._check_unchanged(self.path)
            entry = self._record(epsilon, delta, what, mechanism, kind)
            try:
                self._write(self.path)
            except BaseException:
                self.entries.pop()
                raise
        return entry

    def _record(self, epsilon, delta, what: str, mechanism: str, kind: str) -> LedgerEntry:
        """Append the spend to the entries in memory, BudgetError if it does not fit."""
        fitted = self.allot(epsilon, delta)
        if fitted != (float(epsilon), float(delta)):
            raise BudgetError(
                f"a spend of epsilon = {epsilon!r}, delta = {delta!r} exceeds what is left; "
                f"charge what Session.allot returns ({fitted[0]!r}, {fitted[1]!r})"
            )
        entry = LedgerEntry(str(what), _now(), float(epsilon), float(delta), str(mechanism), kind)
        self.entries.append(entry)
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
        """Write the ledger to ``path`` (default: the session's) atomically, under its lock.
        Refuses to overwrite the session's ledger when it changed since this session read or
        wrote it (another process spending from the same file)."""
        chosen = path if path is not None else self.path
        if chosen is None:
            raise ParameterError("give a path to save the ledger to")
        target = os.fspath(chosen)
        with _ledger_lock(target):
            if target == self.path:
                self._check_unchanged(target)
            self._write(target)
        return target

    def _check_unchanged(self, target: str) -> None:
        """DataError if the file at ``target`` is not what this session last read or wrote
        (called with the lock held, so nothing can change it until the write)."""
        current = _read_text(target)
        if current is not None and current != self._saved_text:
            raise DataError(
                f"the ledger {target!r} was changed by another process since it was read; "
                "open it again (Session.open; on the command line, run the command again) and retry"
            )

    def _write(self, target: str) -> None:
        text = self.to_json()
        _write_atomically(target, text)
        if target == self.path:
            self._saved_text = text

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


@contextlib.contextmanager
def _ledger_lock(path: str, timeout: float | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` (created with mode 0600 and left in
    place: removing a lock file others may hold would let two processes lock two files).
    Waits up to ``timeout`` seconds (default :data:`LOCK_TIMEOUT_S`), then DataError: a
    charge that cannot get the lock fails, it never goes ahead unlocked."""
    try:
        import fcntl  # noqa: PLC0415 - POSIX only; imported where a ledger file is written
    except ImportError:
        raise DataError(
            "a ledger file needs POSIX file locks (fcntl), which this platform lacks; use a session without a path"
        ) from None

    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise DataError(f"cannot write the ledger {path!r}: the folder {folder!r} does not exist")
    lock_path = path + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise DataError(f"cannot lock the ledger {path!r} ({lock_path!r}): {excerpt(exc, 80)}") from None
    try:
        deadline = time.monotonic() + (LOCK_TIMEOUT_S if timeout is None else timeout)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise DataError(
                        f"the ledger {path!r} stayed locked by another process ({lock_path!r}); "
                        "retry when that process has finished"
                    ) from None
                time.sleep(_LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write_atomically(path: str, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, fsync it, rename it over ``path``
    and fsync the folder, so that the ledger on disk is the old one or the new one, whole."""
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
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    """Make the rename durable (the folder's entry), where the platform allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
