"""Public domains: bounds and bins, and bucketizing raw values into a histogram.

The bounds and bins of a domain are public: they must come from knowledge about the data
(a questionnaire's range, a sensor's limits), never from the private data themselves,
because reading min/max from the data without spending privacy budget leaks them.

* :meth:`Domain.integers` (lo..hi): one bin per integer, bin i holds value lo + i.
* :meth:`Domain.interval` (lo, hi, bins): ``bins`` equal half-open bins
  [lo + i w, lo + (i+1) w) with w = (hi - lo) / bins, the last one closed at hi.

Bucketizing is strict by default: a value outside the bounds, NaN or None raises
:class:`~dprange.errors.DomainError`.  ``clip=True`` moves out-of-bound values to the nearest
edge bin (this changes the data, not the privacy guarantee: clipping is applied per record
before counting).  ``drop_missing=True`` drops NaN/None; the number of dropped rows is not
returned, because it is private.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ._validation import check_positive_int
from .errors import DataError, DomainError, ParameterError


def to_numpy_column(values) -> np.ndarray:
    """Convert a numpy array, list, pandas Series or pyarrow (Chunked)Array to a float array.

    Missing values (None, pandas NA, pyarrow nulls) become NaN.  Non-numeric values raise
    :class:`DataError`.
    """
    if hasattr(values, "to_numpy") and type(values).__module__.startswith("pyarrow"):
        import pyarrow as pa  # noqa: PLC0415 - only when given a pyarrow object

        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_null(values.type)):
            raise DataError(f"the column has type {values.type}, not a numeric type")
        values = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
    elif hasattr(values, "to_numpy"):  # pandas Series / Index
        try:
            values = values.to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError) as exc:
            raise DataError(f"the column is not numeric: {exc}") from None
    arr = np.asarray(values)
    if arr.dtype == object:
        try:
            arr = np.array([np.nan if v is None else v for v in arr.ravel()], dtype=float).reshape(arr.shape)
        except (TypeError, ValueError):
            raise DataError("the values are not numeric") from None
    if arr.dtype.kind not in "biuf":
        raise DataError(f"the values are not numeric (dtype {arr.dtype})")
    return arr.astype(float, copy=False).ravel()


class Domain:
    """A public 1-D domain: bounds and bins.  Build it with :meth:`integers` or :meth:`interval`."""

    def __init__(self, kind: str, lo: float, hi: float, bins: int):
        self.kind = kind
        self.lo = lo
        self.hi = hi
        self.bins = bins

    @classmethod
    def integers(cls, lo: int, hi: int) -> "Domain":
        """The integers lo..hi inclusive, one bin each."""
        for name, value in (("lo", lo), ("hi", hi)):
            if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
                if not (isinstance(value, float) and value.is_integer()):
                    raise ParameterError(f"integer domain bound {name} must be an integer, got {value!r}")
        lo, hi = int(lo), int(hi)
        if lo > hi:
            raise ParameterError(f"integer domain needs lo <= hi, got lo={lo}, hi={hi}")
        return cls("integers", lo, hi, hi - lo + 1)

    @classmethod
    def interval(cls, lo: float, hi: float, bins: int) -> "Domain":
        """The real interval [lo, hi] cut into ``bins`` equal bins."""
        for name, value in (("lo", lo), ("hi", hi)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ParameterError(f"domain bound {name} must be a finite number, got {value!r}")
        if not lo < hi:
            raise ParameterError(f"domain needs lo < hi, got lo={lo}, hi={hi}")
        bins = check_positive_int(bins, "bins")
        return cls("interval", float(lo), float(hi), bins)

    @property
    def size(self) -> int:
        """Number of bins."""
        return self.bins

    @property
    def edges(self) -> np.ndarray:
        """Bin edges (bins + 1 values); for integers, bin i is [lo + i - 0.5, lo + i + 0.5)."""
        if self.kind == "integers":
            return self.lo - 0.5 + np.arange(self.bins + 1, dtype=float)
        return np.linspace(self.lo, self.hi, self.bins + 1)

    def bin_values(self) -> np.ndarray:
        """A representative value per bin: the integer itself, or the bin's upper edge."""
        if self.kind == "integers":
            return self.lo + np.arange(self.bins, dtype=float)
        return self.edges[1:]

    def bucketize(self, values, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """Bin index of every value (int64).  O(len(values)).  See the module doc for rules."""
        arr = to_numpy_column(values)
        missing = np.isnan(arr)
        if missing.any():
            if not drop_missing:
                raise DomainError(
                    f"{int(missing.sum())} values are missing (NaN/None); "
                    "clean them or pass drop_missing=True"
                )
            arr = arr[~missing]
        if self.kind == "integers":
            if arr.size and not np.all(np.isinf(arr) | (arr == np.floor(arr))):
                raise DomainError(
                    "the integer domain got non-integer values; use Domain.interval for real values"
                )
            low, high = float(self.lo), float(self.hi)
        else:
            low, high = self.lo, self.hi
        outside = (arr < low) | (arr > high)
        if outside.any():
            if not clip:
                raise DomainError(
                    f"{int(outside.sum())} values lie outside the public bounds [{self.lo}, {self.hi}]; "
                    "widen the bounds or pass clip=True to clip them"
                )
            arr = np.clip(arr, low, high)
        if self.kind == "integers":
            return (arr - self.lo).astype(np.int64)
        index = np.floor((arr - self.lo) * (self.bins / (self.hi - self.lo))).astype(np.int64)
        return np.minimum(index, self.bins - 1)

    def histogram(self, values, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """Exact (private!) bin counts of ``values``: feed them to a mechanism, never publish them."""
        index = self.bucketize(values, clip=clip, drop_missing=drop_missing)
        return np.bincount(index, minlength=self.bins).astype(np.int64)

    def index_of(self, value) -> np.ndarray:
        """Bin index of public values (for turning value ranges into bin ranges)."""
        return self.bucketize(np.atleast_1d(np.asarray(value, dtype=float)), clip=True)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "lo": self.lo, "hi": self.hi, "bins": self.bins}

    @classmethod
    def from_dict(cls, data: dict) -> "Domain":
        if data["kind"] == "integers":
            return cls.integers(data["lo"], data["hi"])
        return cls.interval(data["lo"], data["hi"], data["bins"])

    def __eq__(self, other) -> bool:
        return isinstance(other, Domain) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        if self.kind == "integers":
            return f"Domain.integers({self.lo}, {self.hi})"
        return f"Domain.interval({self.lo}, {self.hi}, bins={self.bins})"
