"""Public domains: bounds and bins, and bucketizing raw values into a histogram.

The bounds and bins of a domain are public: they must come from knowledge about the data
(a questionnaire's range, a sensor's limits), never from the private data themselves,
because reading min/max from the data without spending privacy budget leaks them.

* :meth:`Domain.integers` (lo..hi): one bin per integer, bin i holds value lo + i.  Binning
  is integer arithmetic: integer columns stay int64 (exact up to the bound limit 2^62);
  float input is accepted only while floats represent the domain's integers exactly
  (bounds within +-2^53).
* :meth:`Domain.interval` (lo, hi, bins): ``bins`` half-open bins defined by their published
  edges, ``edges[i] = lo + (i / bins) * (hi - lo)`` for i < bins and ``edges[bins] = hi``
  (one formula, used by binning, serialisation, quantiles and plots).  A value v is in bin i
  iff edges[i] <= v < edges[i + 1]; the last bin is closed at hi.  A domain whose width
  overflows float64 or whose edges are not strictly increasing in float64 is refused.

Sizes are limited up front: at most :data:`MAX_BINS` bins, so that a mistyped bound fails
with a clear message instead of a MemoryError.

Bucketizing is strict by default: a value outside the bounds, NaN or None raises
:class:`~dprange.errors.DomainError`.  ``clip=True`` moves out-of-bound values to the nearest
edge bin (this changes the data, not the privacy guarantee: clipping is applied per record
before counting).  ``drop_missing=True`` drops NaN/None; the number of dropped rows is not
returned, because it is private.  Boolean columns are refused (True/False are not numbers).

* :meth:`Domain.categories` (labels, other=False): one bin per public category, in the list's
  order, plus an ``other`` bin (the last) when declared.  The list is public: it must come
  from knowledge about the data (a questionnaire's answers, a code book), never from the
  data themselves.  Values are matched as text by one rule on every input type and engine
  (:func:`dprange.columns.category_key`: spaces stripped, integers as their decimal text, the
  missing markers missing); a value outside the list is a :class:`DomainError` unless the
  domain has an ``other`` bin, which then counts it; a missing value is never "other" (it is
  an error unless ``drop_missing``).  Categories are unordered: a categorical domain has no
  edges, CDF or quantiles, only counts of categories and sums of chosen categories; an ordered
  scale is coded as :meth:`Domain.integers`.  Its sensitivity is that of any histogram: one
  record is in exactly one bin.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ._validation import check_positive_int
from .columns import (
    EXACT_FLOAT_INTEGER,
    MISSING_CODE,
    OUTSIDE_CODE,
    category_codes,
    category_key,
    column_array,
    value_at,
)
from .errors import DataError, DomainError, ParameterError, private

#: The largest number of bins a domain may have (2^26: a histogram of 512 MiB of float64).
MAX_BINS = 2**26


#: Integer domain bounds must lie within +-2^62 (bin indices and clipping stay in int64).
MAX_INTEGER_BOUND = 2**62


_EDGE_CHUNK = 2**20


#: Values per chunk when bucketizing integers (a few int64 temporaries of this size).
_INTEGER_CHUNK = 2**18


# ----------------------------------------------------------------------------- bounds
def _check_integer_bound(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        if not (isinstance(value, float) and math.isfinite(value) and value.is_integer()):
            raise ParameterError(f"integer domain bound {name} must be an integer, got {value!r}")
    value = int(value)
    if abs(value) > MAX_INTEGER_BOUND:
        raise ParameterError(f"integer domain bound {name} must lie within +-2^62, got {value}")
    return value


def _check_real_bound(name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(f"domain bound {name} must be a finite number, got {value!r}")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise ParameterError(f"domain bound {name} must be a finite number within float64 range, got {value!r}")
    return out


def _check_bins(bins: int) -> int:
    if bins > MAX_BINS:
        raise ParameterError(
            f"the domain would have {bins} bins, more than the limit of {MAX_BINS} (2^26); "
            "use fewer bins or narrower bounds"
        )
    return bins


def interval_edges(lo: float, hi: float, bins: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """The published edges start..stop-1 (default all bins + 1) of Domain.interval(lo, hi, bins):
    ``lo + (i / bins) * (hi - lo)``, and exactly ``hi`` for i = bins."""
    stop = bins + 1 if stop is None else stop
    i = np.arange(start, stop, dtype=float)
    edges = lo + (i / bins) * (hi - lo)
    if stop == bins + 1 and stop > start:
        edges[-1] = hi
    return edges


def _check_edges_increase(lo: float, hi: float, bins: int) -> None:
    """Refuse bins too narrow for float64 (edges that coincide), checked in chunks."""
    for start in range(0, bins + 1, _EDGE_CHUNK):
        stop = min(bins + 1, start + _EDGE_CHUNK + 1)
        if np.any(np.diff(interval_edges(lo, hi, bins, start, stop)) <= 0):
            raise ParameterError(
                f"the {bins} bins of [{lo!r}, {hi!r}] are too narrow for float64 (some edges coincide); "
                "use fewer bins or a wider interval"
            )


#: Why a categorical domain refuses questions about order (edges, CDF, quantiles).
UNORDERED_MESSAGE = (
    "this domain's categories are unordered, so it has no edges, CDF or quantiles; ask counts of "
    "categories (histogram(), count_of(labels)), or code an ordered scale as Domain.integers"
)


#: Why a categorical domain refuses clip=True.
CATEGORY_CLIP_MESSAGE = (
    "clip does not apply to categories; declare Domain.categories(..., other=True) (--other) to count "
    "values outside the list in an 'other' bin"
)


def _category_label(label) -> str:
    """A public category label as it is matched (:func:`dprange.columns.category_key`)."""
    if isinstance(label, (bool, np.bool_)) or not isinstance(label, (str, numbers.Integral, np.integer)):
        raise ParameterError(f"a category label must be text or an integer, got {label!r}")
    key = category_key(label)
    if key is None:
        raise ParameterError(
            f"the category {label!r} reads as a missing value (empty, or a marker such as NA or null, as "
            "in CSV files); rename the category"
        )
    return key


def _category_list(labels) -> list[str]:
    if isinstance(labels, (str, bytes, dict)) or not hasattr(labels, "__iter__"):
        raise ParameterError(f"give the categories as a list of labels, got {labels!r}")
    out = [_category_label(label) for label in labels]
    if not out:
        raise ParameterError("a categorical domain needs at least one category")
    seen: set[str] = set()
    for label in out:
        if label in seen:
            raise ParameterError(f"the category {label!r} is listed twice; give each category once")
        seen.add(label)
    return out


def _other_label(other, categories: list[str]) -> str | None:
    if other is None or (isinstance(other, (bool, np.bool_)) and not other):
        return None
    label = "other" if isinstance(other, (bool, np.bool_)) else other
    if not isinstance(label, str):
        raise ParameterError(f"other must be True, False or the other bin's label, got {other!r}")
    label = _category_label(label)
    if label in categories:
        raise ParameterError(f"the other bin's label {label!r} is also a category; name the other bin differently")
    return label


class Domain:
    """A public 1-D domain: bounds and bins.  Build it with :meth:`integers`, :meth:`interval`
    or :meth:`categories`."""

    def __init__(self, kind: str, lo: float, hi: float, bins: int, labels=None, other: str | None = None):
        self.kind = kind
        self.lo = lo
        self.hi = hi
        self.bins = bins
        #: The categories' labels, one per bin (the other bin's last), or None (not categorical).
        self.labels: tuple[str, ...] | None = None if labels is None else tuple(labels)
        #: The label of the bin of values outside the category list, or None (such values are errors).
        self.other = other
        declared = () if self.labels is None else self.labels[: bins - (other is not None)]
        self._lookup = {label: i for i, label in enumerate(declared)}

    @classmethod
    def integers(cls, lo: int, hi: int) -> Domain:
        """The integers lo..hi inclusive, one bin each (bounds within +-2^62, at most MAX_BINS)."""
        lo = _check_integer_bound("lo", lo)
        hi = _check_integer_bound("hi", hi)
        if lo > hi:
            raise ParameterError(f"integer domain needs lo <= hi, got lo={lo}, hi={hi}")
        return cls("integers", lo, hi, _check_bins(hi - lo + 1))

    @classmethod
    def interval(cls, lo: float, hi: float, bins: int) -> Domain:
        """The real interval [lo, hi] cut into ``bins`` bins (see the module doc for the edges)."""
        lo = _check_real_bound("lo", lo)
        hi = _check_real_bound("hi", hi)
        if not lo < hi:
            raise ParameterError(f"domain needs lo < hi, got lo={lo}, hi={hi}")
        if not math.isfinite(hi - lo):
            raise ParameterError(f"the width hi - lo of [{lo!r}, {hi!r}] overflows float64; use narrower bounds")
        bins = _check_bins(check_positive_int(bins, "bins"))
        _check_edges_increase(lo, hi, bins)
        return cls("interval", lo, hi, bins)

    @classmethod
    def categories(cls, labels, *, other=False) -> Domain:
        """Public, unordered categories, one bin each in the order given, plus a last bin for
        values outside the list when ``other`` is True (labelled "other") or a label (see the
        module doc: the list is public, values are matched as text, at most MAX_BINS bins)."""
        categories = _category_list(labels)
        other_label = _other_label(other, categories)
        bins = _check_bins(len(categories) + (other_label is not None))
        return cls("categories", 0, bins - 1, bins, [*categories, *([other_label] if other_label else [])], other_label)

    @property
    def categorical(self) -> bool:
        """Whether the bins are unordered categories (:meth:`categories`)."""
        return self.kind == "categories"

    @property
    def size(self) -> int:
        """Number of bins."""
        return self.bins

    def bin_labels(self) -> list[str]:
        """A label per bin: the category, the integer, or the interval "[a, b)" (the last bin
        "[a, b]") with its published edges."""
        if self.labels is not None:
            return list(self.labels)
        if self.kind == "integers":
            return [str(self.lo + i) for i in range(self.bins)]
        edges = self.edges
        return [f"[{edges[i]:g}, {edges[i + 1]:g}{']' if i == self.bins - 1 else ')'}" for i in range(self.bins)]

    def bins_of_labels(self, labels) -> np.ndarray:
        """The bin index of each public label of a categorical domain (int64; one label or a
        list); ParameterError for a label that is no bin's."""
        if not self.categorical:
            raise ParameterError("labels name the bins of a categorical domain (Domain.categories)")
        single = isinstance(labels, (str, numbers.Integral, np.integer))
        wanted = [labels] if single else list(labels)
        index = {label: i for i, label in enumerate(self.labels or ())}
        out = []
        for label in wanted:
            key = _category_label(label)
            if key not in index:
                shown = ", ".join(repr(c) for c in (self.labels or ())[:20])
                raise ParameterError(f"{key!r} is not a category of this domain; its bins are {shown}")
            out.append(index[key])
        return np.asarray(out, dtype=np.int64)

    @property
    def edges(self) -> np.ndarray:
        """Bin edges (bins + 1 floats).  Intervals: the published edges (module doc).  Integers:
        bin i is [lo + i - 0.5, lo + i + 0.5) (exact while the bounds are within +-2^52).
        Categories have none (ParameterError)."""
        if self.categorical:
            raise ParameterError(UNORDERED_MESSAGE)
        if self.kind == "integers":
            return np.arange(self.bins + 1, dtype=float) + (self.lo - 0.5)
        return interval_edges(self.lo, self.hi, self.bins)

    def bin_values(self) -> np.ndarray:
        """A representative value per bin: the integer itself, or the bin's upper edge."""
        if self.categorical:
            raise ParameterError(UNORDERED_MESSAGE)
        if self.kind == "integers":
            return np.arange(self.bins, dtype=float) + float(self.lo)
        return self.edges[1:]

    def bucketize(self, values, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """Bin index of every value (int64).  O(len(values) log bins).  See the module doc for rules."""
        if self.categorical:
            return self._category_bins(values, clip, drop_missing)
        arr = self._column(values, clip, drop_missing)
        if self.kind == "integers":
            return self._integer_bins(arr, clip)
        return self._interval_bins(arr, clip)

    def _column(self, values, clip, drop_missing) -> np.ndarray:
        _check_flags(clip, drop_missing)
        return _drop_missing(column_array(values), drop_missing)

    # ----------------------------------------------------------------- categories
    def codes(self, values) -> np.ndarray:
        """The code of every value of a categorical domain: its bin (values outside the list
        go to the other bin if there is one), MISSING_CODE or OUTSIDE_CODE
        (:func:`dprange.columns.category_codes`)."""
        default = self.bins - 1 if self.other is not None else OUTSIDE_CODE
        return category_codes(values, self._lookup, default)

    def _category_bins(self, values, clip, drop_missing) -> np.ndarray:
        _check_flags(clip, drop_missing)
        if clip:
            raise ParameterError(CATEGORY_CLIP_MESSAGE)
        codes = self.codes(values)
        bad = self.first_bad_code(codes, drop_missing)
        if bad is not None:
            raise self.code_error(codes, bad, f"e.g. {private(value_at(values, bad))}")
        return codes[codes >= 0] if drop_missing else codes

    def first_bad_code(self, codes: np.ndarray, drop_missing: bool) -> int | None:
        """The index of the first code that stops a count (outside the list, or missing
        unless dropped), or None."""
        bad = (codes == OUTSIDE_CODE) if drop_missing else (codes < 0)
        return int(np.argmax(bad)) if bad.any() else None

    def code_error(self, codes: np.ndarray, i: int, where: str) -> DomainError:
        """The error for the bad code ``codes[i]`` (``where``: the value, its row)."""
        if codes[i] == MISSING_CODE:
            count = int(np.count_nonzero(codes == MISSING_CODE))
            return DomainError(
                f"{private(count)} values are missing (None/NaN/empty/NA) ({where}); clean them or pass "
                "drop_missing=True"
            )
        count = int(np.count_nonzero(codes == OUTSIDE_CODE))
        return DomainError(
            f"{private(count)} values are not among the {len(self._lookup)} public categories ({where}); "
            "add them to the list or declare other=True (--other) to count them in an 'other' bin"
        )

    def _check_bounds(self, arr: np.ndarray, low, high, clip: bool) -> np.ndarray:
        outside = (arr < low) | (arr > high)
        if outside.any():
            if not clip:
                raise DomainError(
                    f"{private(int(outside.sum()))} values lie outside the public bounds [{self.lo}, {self.hi}]; "
                    "widen the bounds or pass clip=True to clip them"
                )
            arr = np.clip(arr, low, high)
        return arr

    def _integer_bins(self, arr: np.ndarray, clip: bool) -> np.ndarray:
        clipping = self._check_integers(arr, clip)
        if not clipping and arr.dtype == np.int64:
            return arr - np.int64(self.lo)
        index = np.empty(arr.size, dtype=np.int64)
        for start in range(0, arr.size, _INTEGER_CHUNK):
            stop = start + _INTEGER_CHUNK
            index[start:stop] = self._integer_offsets(arr[start:stop], clipping)
        return index

    def _integer_counts(self, arr: np.ndarray, clip: bool) -> np.ndarray:
        """Bin counts of an integer domain: bincount in cache-sized chunks, each checked by its
        min and max (O(chunk) temporaries, no float64 round trip)."""
        if arr.dtype == np.int64:
            counts = self._checked_int64_counts(arr)
            if counts is not None:
                return counts
        clipping = self._check_integers(arr, clip)  # raises the error, or says what to clip
        counts = np.zeros(self.bins, dtype=np.int64)
        step = self._count_step()
        for start in range(0, arr.size, step):
            counts += np.bincount(self._integer_offsets(arr[start : start + step], clipping), minlength=self.bins)
        return counts

    def _count_step(self) -> int:
        """Values per chunk when counting: each chunk's bincount also costs O(bins)."""
        return max(_INTEGER_CHUNK, self.bins)

    def _checked_int64_counts(self, arr: np.ndarray) -> np.ndarray | None:
        """Counts of int64 values all within the bounds, or None as soon as a chunk is not.

        value - lo may wrap around in int64 only for values out of bounds, and then it lands
        outside 0..bins-1, so checking the offsets' min and max is exact."""
        counts = np.zeros(self.bins, dtype=np.int64)
        step = self._count_step()
        lo = np.int64(self.lo)
        offsets = np.empty(min(arr.size, step) if lo else 0, dtype=np.int64)
        for start in range(0, arr.size, step):
            chunk = arr[start : start + step]
            shifted = np.subtract(chunk, lo, out=offsets[: chunk.size]) if lo else chunk
            if shifted.min() < 0 or shifted.max() >= self.bins:
                return None
            counts += np.bincount(shifted, minlength=self.bins)
        return counts

    def _check_integers(self, arr: np.ndarray, clip: bool) -> bool:
        """Raise DomainError for non-integers or (unless ``clip``) values out of bounds; True
        when some values must be clipped.  One min/max pass, chunks for the rest."""
        is_float = arr.dtype.kind == "f"
        if is_float:
            if max(abs(self.lo), abs(self.hi)) > EXACT_FLOAT_INTEGER:
                raise DomainError(
                    "this integer domain reaches beyond 2^53, where float values cannot represent its integers "
                    "exactly; give integer (int64) values"
                )
            if not all(_all_integral(arr[i : i + _INTEGER_CHUNK]) for i in range(0, arr.size, _INTEGER_CHUNK)):
                raise _non_integer_error(arr)
        if arr.size == 0:
            return False
        low, high = (float(self.lo), float(self.hi)) if is_float else (self.lo, self.hi)
        if arr.min() >= low and arr.max() <= high:
            return False
        if not clip:
            outside = sum(
                int(np.count_nonzero((chunk < low) | (chunk > high)))
                for chunk in (arr[i : i + _INTEGER_CHUNK] for i in range(0, arr.size, _INTEGER_CHUNK))
            )
            raise DomainError(
                f"{private(outside)} values lie outside the public bounds [{self.lo}, {self.hi}]; "
                "widen the bounds or pass clip=True to clip them"
            )
        return True

    def _integer_offsets(self, chunk: np.ndarray, clipping: bool) -> np.ndarray:
        """value - lo as int64 for checked values (clipped to the bounds when ``clipping``)."""
        if clipping:
            low, high = (float(self.lo), float(self.hi)) if chunk.dtype.kind == "f" else (self.lo, self.hi)
            chunk = np.clip(chunk, low, high)
        return chunk.astype(np.int64, copy=False) - np.int64(self.lo)

    def _interval_bins(self, arr: np.ndarray, clip: bool) -> np.ndarray:
        if arr.dtype.kind != "f":
            if max(abs(self.lo), abs(self.hi)) >= EXACT_FLOAT_INTEGER and np.any(np.abs(arr) > EXACT_FLOAT_INTEGER):
                raise DomainError(
                    "integer values beyond 2^53 cannot be compared exactly with this domain's float edges; "
                    "use Domain.integers or bounds within +-2^53"
                )
            arr = arr.astype(float)
        arr = self._check_bounds(arr, self.lo, self.hi, clip)
        return _edge_bins(arr, self.lo, self.hi, self.bins, self.edges)

    def histogram(self, values, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """Exact (private!) bin counts of ``values``: feed them to a mechanism, never publish them."""
        if self.categorical:
            return np.bincount(self._category_bins(values, clip, drop_missing), minlength=self.bins).astype(np.int64)
        arr = self._column(values, clip, drop_missing)
        if self.kind == "integers":
            return self._integer_counts(arr, clip)
        index = self._interval_bins(arr, clip)
        return np.bincount(index, minlength=self.bins).astype(np.int64)

    def index_of(self, value) -> np.ndarray:
        """Bin index of public values (for turning value ranges into bin ranges; the labels'
        bins on a categorical domain)."""
        if self.categorical:
            return self.bins_of_labels(value)
        return self.bucketize(value, clip=True)

    def to_dict(self) -> dict:
        """JSON-friendly description: kind, lo, hi, bins; a categorical domain: kind
        "categories", its "categories" (labels in bin order, without the other bin), "other"
        (the other bin's label, last, or null) and "bins"."""
        if self.categorical:
            declared = list((self.labels or ())[: len(self._lookup)])
            return {"kind": "categories", "categories": declared, "other": self.other, "bins": self.bins}
        return {"kind": self.kind, "lo": self.lo, "hi": self.hi, "bins": self.bins}

    @classmethod
    def from_dict(cls, data: dict) -> Domain:
        """The domain described by :meth:`to_dict` (validated like the constructors)."""
        if not isinstance(data, dict) or data.get("kind") not in ("integers", "interval", "categories"):
            raise DataError(
                "a domain must be a mapping with kind 'integers' or 'interval' (lo, hi, bins) or 'categories' "
                "(categories, other, bins)"
            )
        try:
            if data["kind"] == "categories":
                if not isinstance(data["categories"], list) or not isinstance(data.get("other"), (str, type(None))):
                    raise DataError("a categorical domain needs a list of categories and other: a label or null")
                domain = cls.categories(data["categories"], other=data.get("other") or False)
            elif data["kind"] == "integers":
                domain = cls.integers(data["lo"], data["hi"])
            else:
                domain = cls.interval(data["lo"], data["hi"], data["bins"])
        except KeyError as exc:
            raise DataError(f"the domain lacks the field {exc.args[0]!r}") from None
        if "bins" in data and data["bins"] != domain.bins:
            raise DataError(f"the domain says {data['bins']!r} bins but its bounds give {domain.bins}")
        return domain

    def __eq__(self, other) -> bool:
        return isinstance(other, Domain) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        if self.categorical:
            other = f", other={self.other!r}" if self.other is not None else ""
            return f"Domain.categories({list((self.labels or ())[: len(self._lookup)])!r}{other})"
        if self.kind == "integers":
            return f"Domain.integers({self.lo}, {self.hi})"
        return f"Domain.interval({self.lo}, {self.hi}, bins={self.bins})"


def _edge_bins(arr: np.ndarray, lo: float, hi: float, bins: int, edges: np.ndarray) -> np.ndarray:
    """The bin i with edges[i] <= v < edges[i + 1] (the last bin closed at hi) of every v in
    [lo, hi]: a guess from the bin width, then corrected against the published edges until
    exact (one or two passes; equal to ``searchsorted(edges, v, "right") - 1`` but O(len(v)))."""
    scale = bins / (hi - lo)
    if not math.isfinite(scale) or scale == 0.0:
        return np.minimum(np.searchsorted(edges, arr, side="right") - 1, bins - 1).astype(np.int64)
    index = np.clip(np.floor((arr - lo) * scale), 0, bins - 1).astype(np.int64)
    for _ in range(64):
        low = arr < edges[index]
        high = (index < bins - 1) & (arr >= edges[np.minimum(index + 1, bins)])
        if not (low.any() or high.any()):
            return index
        index = index - low + high
    return np.minimum(np.searchsorted(edges, arr, side="right") - 1, bins - 1).astype(np.int64)


def _check_flags(clip, drop_missing) -> None:
    for name, flag in (("clip", clip), ("drop_missing", drop_missing)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ParameterError(f"{name} must be True or False, got {flag!r}")


def _non_integer_error(arr: np.ndarray) -> DomainError:
    """The error for float values that are not whole numbers: how many, and the first with its
    position (0-based, among the values given), as the file engines name a row."""
    fractional = ~_integral(arr)
    first = int(np.flatnonzero(fractional)[0])
    return DomainError(
        f"the integer domain got {private(int(np.count_nonzero(fractional)))} non-integer values (the first: "
        f"{private(float(arr[first]))} at position {private(first)}, counting from 0); "
        "use Domain.interval for real values"
    )


def _integral(chunk: np.ndarray) -> np.ndarray:
    """Which floats are whole numbers or infinite (infinities are out of bounds, not fractions)."""
    return np.isinf(chunk) | (chunk == np.floor(chunk))


def _all_integral(chunk: np.ndarray) -> bool:
    """Every float is a whole number or infinite."""
    return bool(np.all(_integral(chunk)))


def _drop_missing(arr, drop_missing: bool) -> np.ndarray:
    """The values without missing entries, or DomainError if some are missing and not dropped."""
    if isinstance(arr, np.ma.MaskedArray):
        missing = np.ma.getmaskarray(arr)
        data = np.ma.getdata(arr)
    elif arr.dtype.kind == "f":
        missing = np.isnan(arr)
        data = arr
    else:
        return arr
    if missing.any():
        if not drop_missing:
            raise DomainError(
                f"{private(int(missing.sum()))} values are missing (NaN/None); clean them or pass drop_missing=True"
            )
        return data[~missing]
    return data


def _missing_mask(arr) -> tuple[np.ndarray, np.ndarray]:
    """(values, missing mask) of one column as :func:`column_array` gives it."""
    if isinstance(arr, np.ma.MaskedArray):
        return np.ma.getdata(arr), np.ma.getmaskarray(arr)
    if arr.dtype.kind == "f":
        return arr, np.isnan(arr)
    return arr, np.zeros(arr.shape, dtype=bool)


def _axis_column(domain: Domain, column) -> tuple[np.ndarray, np.ndarray]:
    """(values, missing mask) of one axis' column: a categorical axis gives its codes."""
    if domain.categorical:
        codes = domain.codes(column)
        return codes, codes == MISSING_CODE
    return _missing_mask(column_array(column))


def _split_columns(columns, k: int) -> list:
    """The k columns of a pandas DataFrame, a pyarrow Table, a (records x k) array, or a
    sequence of columns (numpy, pandas, pyarrow)."""
    if hasattr(columns, "columns") and hasattr(columns, "iloc"):  # pandas DataFrame
        return [columns.iloc[:, a] for a in range(columns.shape[1])]
    if hasattr(columns, "column_names") and hasattr(columns, "column"):  # pyarrow Table
        return [columns.column(a) for a in range(columns.num_columns)]
    if isinstance(columns, np.ndarray) and columns.ndim == 2:
        return [columns[:, a] for a in range(columns.shape[1])]
    if type(columns).__module__.startswith("polars") and hasattr(columns, "get_column"):  # polars DataFrame
        return [columns.get_column(name).to_arrow() for name in columns.columns]
    if isinstance(columns, (list, tuple)):
        return list(columns)
    raise ParameterError(
        f"give the {k} columns as a list of arrays, a (records x {k}) array or a DataFrame, "
        f"got {type(columns).__name__}"
    )


class ProductDomain:
    """The cross product of 1-D domains (one per column), C order: the last axis varies fastest.
    Any axis may be categorical (:meth:`Domain.categories`); ``clip`` applies to the others."""

    def __init__(self, domains):
        self.domains = list(domains)
        if not self.domains:
            raise ParameterError("a product domain needs at least one 1-D domain")
        for d in self.domains:
            if not isinstance(d, Domain):
                raise ParameterError(f"every axis must be a dprange.Domain, got {type(d).__name__}")

    @property
    def ndim(self) -> int:
        return len(self.domains)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.domains)

    @property
    def size(self) -> int:
        """Number of cells."""
        return math.prod(self.shape)

    def bucketize(self, columns, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """The cell index of every record: an int64 array (k, records), row a the bin on axis a."""
        for name, flag in (("clip", clip), ("drop_missing", drop_missing)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ParameterError(f"{name} must be True or False, got {flag!r}")
        parts = _split_columns(columns, self.ndim)
        if len(parts) != self.ndim:
            raise ParameterError(f"this product domain has {self.ndim} axes, got {len(parts)} columns")
        arrays = [_axis_column(d, c) for d, c in zip(self.domains, parts)]
        lengths = {values.shape[0] for values, _ in arrays}
        if len(lengths) > 1:
            raise DataError(f"the columns have different lengths {sorted(lengths)}; give one value per record in each")
        missing = np.zeros(arrays[0][0].shape[0], dtype=bool)
        for _, mask in arrays:
            missing |= mask
        if missing.any() and not drop_missing:
            raise DomainError(
                f"{private(int(missing.sum()))} records have a missing value (NaN/None); clean them or "
                "pass drop_missing=True to drop those records"
            )
        keep = ~missing
        index = []
        for axis, (d, (values, _)) in enumerate(zip(self.domains, arrays)):
            try:
                if d.categorical:  # its codes: missing ones are dropped above, clip does not apply
                    codes = values[keep]
                    bad = d.first_bad_code(codes, True)
                    if bad is not None:
                        raise d.code_error(
                            codes, bad, f"e.g. {private(value_at(parts[axis], np.flatnonzero(keep)[bad]))}"
                        )
                    index.append(codes)
                else:
                    index.append(d.bucketize(values[keep], clip=clip))
            except DomainError as exc:  # say which column: the bounds alone may not tell
                raise DomainError(f"axis {axis}: {exc}") from None
        return np.stack(index) if index[0].size else np.zeros((self.ndim, 0), dtype=np.int64)

    def histogram(self, columns, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """Exact (private!) cell counts as a k-D int64 array: feed them to a mechanism."""
        index = self.bucketize(columns, clip=clip, drop_missing=drop_missing)
        flat = np.ravel_multi_index(tuple(index), self.shape) if index.shape[1] else np.zeros(0, dtype=np.int64)
        return np.bincount(flat, minlength=self.size).astype(np.int64).reshape(self.shape)

    def to_dict(self) -> dict:
        return {"kind": "product", "domains": [d.to_dict() for d in self.domains]}

    @classmethod
    def from_dict(cls, data: dict) -> ProductDomain:
        if not isinstance(data, dict) or data.get("kind") != "product" or not isinstance(data.get("domains"), list):
            raise DataError("a product domain must be a mapping with kind 'product' and a list of domains")
        return cls([Domain.from_dict(d) for d in data["domains"]])

    def __eq__(self, other) -> bool:
        return isinstance(other, ProductDomain) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"ProductDomain([{', '.join(repr(d) for d in self.domains)}])"
