"""The one exception family of dprange.

Every error a user can cause derives from :class:`DPRangeError`, and its message says what
was wrong and what to do.  The subclasses also derive from the matching built-in exception
(``ValueError``, ``TypeError``...) so that generic ``except ValueError`` code keeps working.
"""

from __future__ import annotations


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
