"""The one exception family of dprange.

Every error a user can cause derives from :class:`DPRangeError`, and its message says what
was wrong and what to do.  The subclasses also derive from the matching built-in exception
(``ValueError``, ``TypeError``...) so that generic ``except ValueError`` code keeps working.
"""

from __future__ import annotations

import contextlib
import os


class DPRangeError(Exception):
    """Base class of every error raised by dprange on bad input or bad state."""


class ParameterError(DPRangeError, ValueError):
    """A privacy or mechanism parameter is invalid (epsilon, delta, branching, budget...)."""


class DomainError(DPRangeError, ValueError):
    """Data do not fit the public domain (out of bounds, NaN, wrong type)."""


class DataError(DPRangeError, ValueError):
    """Input data or files are malformed (missing column, non-numeric values, bad reports)."""


class ReportError(DataError):
    """Local-DP reports are malformed or do not match the aggregator's parameters."""


class ConvergenceWarning(UserWarning):
    """An iterative estimator (ADMM for NNLS / L1) stopped at its iteration cap before meeting
    its tolerance: the estimate is usable but not the optimum; raise ``maxiter`` or ``tol``."""


#: Environment variable that switches redaction on ("1", "true", "yes", "on").
REDACT_ENV = "DPRANGE_REDACT"


#: What a redacted private quantity reads as in a message.
REDACTED = "<redacted>"


_setting: dict = {"enabled": None}


def set_redaction(enabled: bool | None) -> None:
    """Redact private quantities in error messages (True), show them (False), or follow the
    environment variable DPRANGE_REDACT again (None).  Applies to the whole process."""
    if enabled is not None and not isinstance(enabled, bool):
        raise ParameterError(f"set_redaction takes True, False or None, got {enabled!r}")
    _setting["enabled"] = enabled


def redaction_enabled() -> bool:
    """Whether messages must hide private quantities (see :func:`set_redaction`)."""
    enabled = _setting["enabled"]
    if enabled is not None:
        return enabled
    return os.environ.get(REDACT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@contextlib.contextmanager
def redacted(enabled: bool = True):
    """Context in which error messages hide private quantities (restores the previous state)."""
    previous = _setting["enabled"]
    set_redaction(enabled)
    try:
        yield
    finally:
        _setting["enabled"] = previous


def private(value) -> str:
    """A private quantity (a count of bad rows, a row number, a raw value) as it may appear in
    a message: integers as digits, anything else as a short printable repr, or ``<redacted>``
    when redaction is on."""
    if redaction_enabled():
        return REDACTED
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return excerpt(repr(value))


def excerpt(text, limit: int = 40) -> str:
    """``text`` cut to ``limit`` characters with non-printable characters escaped, so that a
    message stays one short readable line whatever a file contains."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="backslashreplace")
    text = str(text)
    cleaned = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."
