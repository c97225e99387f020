"""The public grid quantile mechanisms work on: bounds, cells and levels, checked once."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..privacy.exact_choice import MAX_GRID

NEIGHBOURS = ("add_remove", "replace")


def check_neighbours(neighbours) -> str:
    if neighbours not in NEIGHBOURS:
        raise ParameterError(f"neighbours must be 'add_remove' or 'replace', got {neighbours!r}")
    return neighbours


def check_levels(q) -> np.ndarray:
    """Quantile levels as a sorted 1-D float array of distinct values in (0, 1)."""
    if q is None or isinstance(q, (str, bytes, bool, np.bool_, dict)):
        raise ParameterError(f"quantile levels must be numbers in (0, 1), got {q!r}")
    try:
        arr = np.atleast_1d(np.asarray(q))
        if arr.dtype.kind not in "iuf" or arr.ndim != 1:
            raise TypeError
    except (TypeError, ValueError):
        raise ParameterError("quantile levels must be a number or a flat list of numbers in (0, 1)") from None
    arr = arr.astype(float)
    if arr.size == 0 or not np.all((arr > 0) & (arr < 1)):
        raise ParameterError("quantile levels must lie strictly between 0 and 1")
    if np.any(np.diff(arr) <= 0):
        raise ParameterError("quantile levels must be strictly increasing (sort them and drop repeats)")
    return arr


def check_bounds(bounds, *, integer: bool) -> tuple[float, float]:
    """(a, b) as floats: finite, a < b, integers when ``integer``; else ParameterError."""
    try:
        lo, hi = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise ParameterError(f"bounds must be a pair (a, b) of numbers, got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError(f"bounds must be finite with a < b, got {bounds!r}")
    if integer and (lo != round(lo) or hi != round(hi)):
        raise ParameterError(f"integer bounds must be integers, got {bounds!r}")
    return lo, hi


@dataclass(frozen=True)
class QuantileGrid:
    """Public candidate outputs: the integers lo..hi, or ``cells`` cells of [lo, hi]."""

    lo: float
    hi: float
    cells: int
    integer: bool

    @classmethod
    def from_bounds(cls, bounds, *, integer: bool, cells: int | None = None) -> QuantileGrid:
        lo, hi = check_bounds(bounds, integer=integer)
        if integer:
            size = int(hi) - int(lo) + 1
            if size > MAX_GRID:
                raise ParameterError(f"the integer range has {size} values, above {MAX_GRID}; use real bounds")
            return cls(lo, hi, size, True)
        cells = 2**20 if cells is None else int(cells)
        if not 1 <= cells <= MAX_GRID:
            raise ParameterError(f"cells must be between 1 and {MAX_GRID}, got {cells}")
        return cls(lo, hi, cells, False)

    @property
    def width(self) -> float:
        """The spacing of the candidate outputs (1 for integers)."""
        return 1.0 if self.integer else (self.hi - self.lo) / self.cells

    def index(self, values) -> np.ndarray:
        """The cell of every value (values clipped into [lo, hi]), as int64."""
        v = np.clip(np.asarray(values, dtype=float), self.lo, self.hi)
        if self.integer:
            return np.round(v - self.lo).astype(np.int64)
        return np.minimum(np.floor((v - self.lo) / self.width), self.cells - 1).astype(np.int64)

    def value(self, index) -> np.ndarray:
        """The reported value of cells: the integer, or the cell's midpoint."""
        i = np.asarray(index, dtype=float)
        if self.integer:
            return self.lo + i
        return np.minimum(self.lo + (i + 0.5) * self.width, self.hi)
