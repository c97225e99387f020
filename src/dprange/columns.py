"""One column of values from numpy, pandas, pyarrow, polars or a masked array, as a numpy array
with its missing values marked: the one place where input types are told apart.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import DataError, private

#: Floats represent every integer up to 2^53 exactly, and no further.
EXACT_FLOAT_INTEGER = 2**53


_INT64_MAX = np.iinfo(np.int64).max


# ----------------------------------------------------------------------------- columns
def column_array(values):
    """The values of a column as int64 (integer data), float64 (NaN = missing) or, for
    integer data with missing values beyond 2^53, a masked int64 array.

    Accepts numpy arrays, lists, pandas Series/Index and pyarrow (Chunked)Arrays.  Missing
    values (None, pandas NA, pyarrow nulls) become NaN or masked entries.  Boolean,
    non-numeric and non-1-D input raises :class:`DataError`.
    """
    if type(values).__module__.startswith("pyarrow"):
        return _pyarrow_column(values)
    if type(values).__module__.startswith("pandas") and hasattr(values, "dtype"):  # Series / Index
        return _pandas_column(values)
    if isinstance(values, np.ma.MaskedArray):
        return _masked_column(values)
    if values is None or isinstance(values, (str, bytes, dict)):
        raise DataError(f"the values must be a column of numbers, got {type(values).__name__}")
    if isinstance(values, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in values):
        raise DataError("the column holds booleans (True/False), not numbers; encode them as numbers first")
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError):
        raise DataError("the values must be a flat column of numbers (got a ragged or nested sequence)") from None
    arr = np.atleast_1d(arr)
    if arr.ndim != 1:
        raise DataError(f"the values must be a 1-D column, got an array of shape {arr.shape}")
    if arr.dtype == object:
        return _object_column(arr)
    return _numeric_array(arr)


def to_numpy_column(values) -> np.ndarray:
    """The values as a float64 array (NaN = missing); see :func:`column_array` for int64."""
    arr = column_array(values)
    if isinstance(arr, np.ma.MaskedArray):
        return np.ma.filled(arr.astype(float), np.nan)
    return arr.astype(float, copy=False)


def _numeric_array(arr: np.ndarray) -> np.ndarray:
    kind = arr.dtype.kind
    if kind == "b":
        raise DataError("the column is boolean (True/False), not numeric; encode it as numbers first")
    if kind == "i":
        return arr.astype(np.int64, copy=False)
    if kind == "u":
        # values above int64's range are outside every domain: saturate, keeping them out of bounds
        return (
            np.minimum(arr, np.uint64(_INT64_MAX)).astype(np.int64) if arr.dtype.itemsize == 8 else arr.astype(np.int64)
        )
    if kind == "f":
        return arr.astype(np.float64, copy=False)
    raise DataError(f"the values are not numeric (dtype {arr.dtype})")


def _object_column(arr: np.ndarray):
    """Python objects: None = missing; ints stay exact; floats, Decimals and Fractions become floats."""
    missing = np.zeros(arr.size, dtype=bool)
    all_integers = True
    for i, v in enumerate(arr):
        if _is_missing(v):
            missing[i] = True
        elif isinstance(v, (bool, np.bool_)):
            raise DataError("the column holds booleans (True/False), not numbers; encode them as numbers first")
        elif isinstance(v, (numbers.Integral, np.integer)):
            continue
        elif isinstance(v, (numbers.Real, np.floating)) or _is_decimal(v):
            all_integers = False
        else:
            raise DataError(f"the values are not numeric (e.g. {private(v)})")
    if all_integers:
        ints = np.array([0 if m else _saturate(int(v)) for v, m in zip(arr, missing)], dtype=np.int64)
        return _integers_with_missing(ints, missing)
    try:
        return np.array([np.nan if m else float(v) for v, m in zip(arr, missing)], dtype=float)
    except (OverflowError, ValueError, TypeError):
        raise DataError("the values are not finite numbers that fit in float64") from None


def _is_missing(v) -> bool:
    """None, NaN, pandas NA / NaT."""
    if v is None or type(v).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(v, (float, np.floating)) and math.isnan(v)


def _is_decimal(v) -> bool:
    return type(v).__name__ == "Decimal"


def _saturate(v: int) -> int:
    """Python ints beyond int64 are beyond every domain: saturate them (they stay out of bounds)."""
    return max(-_INT64_MAX, min(_INT64_MAX, v))


def _integers_with_missing(ints: np.ndarray, missing: np.ndarray):
    """int64 if nothing is missing, float64 with NaN if exact, else a masked int64 array."""
    if not missing.any():
        return ints
    if np.all(np.abs(ints[~missing]) <= EXACT_FLOAT_INTEGER):
        out = ints.astype(float)
        out[missing] = np.nan
        return out
    return np.ma.MaskedArray(ints, mask=missing)


def _masked_column(values: np.ma.MaskedArray):
    data = _numeric_array(np.atleast_1d(np.ma.getdata(values)))
    mask = np.broadcast_to(np.ma.getmaskarray(values), data.shape).ravel()
    if data.ndim != 1:
        raise DataError(f"the values must be a 1-D column, got an array of shape {data.shape}")
    if data.dtype.kind == "f":
        out = data.copy()
        out[mask] = np.nan
        return out
    return _integers_with_missing(data, mask)


def _pandas_column(series):
    import pandas as pd  # noqa: PLC0415 - only when given a pandas object

    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        raise DataError("the column is boolean (True/False), not numeric; encode it as numbers first")
    if pd.api.types.is_integer_dtype(dtype):
        missing = np.asarray(series.isna(), dtype=bool)
        ints = np.asarray(series.fillna(0).to_numpy() if missing.any() else series.to_numpy())
        return _integers_with_missing(_numeric_array(ints), missing)
    if pd.api.types.is_float_dtype(dtype):
        return series.to_numpy(dtype=float, na_value=np.nan)
    return _object_column(np.asarray(series.to_numpy(dtype=object)))


def _pyarrow_column(values):
    import pyarrow as pa  # noqa: PLC0415 - only when given a pyarrow object

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        raise DataError(f"cannot read a column from a {type(values).__name__}")
    kind = values.type
    missing = np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_null(kind):
        return np.full(len(values), np.nan)
    if pa.types.is_boolean(kind):
        raise DataError("the column is boolean (True/False), not numeric; encode it as numbers first")
    if pa.types.is_integer(kind):
        ints = values.fill_null(0).to_numpy(zero_copy_only=False)
        return _integers_with_missing(_numeric_array(np.asarray(ints)), missing)
    if pa.types.is_floating(kind):
        return values.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(float)
    if pa.types.is_decimal(kind):
        return _decimal_column(values, missing)
    raise DataError(f"the column has type {kind}, not a numeric type")


def _decimal_column(values, missing: np.ndarray):
    """Decimal columns: integers (scale 0) stay exact int64; others become float64, which is
    exact up to rounding to the nearest float (as when a CSV is parsed) and refused from 2^53
    on, where floats no longer hold every integer."""
    import pyarrow as pa  # noqa: PLC0415

    if values.type.scale <= 0:
        ints = [0 if v is None else _saturate(int(v)) for v in values.to_pylist()]
        return _integers_with_missing(np.asarray(ints, dtype=np.int64), missing)
    # through the decimal text: parsing rounds to the nearest float, as for a CSV cell
    text = values.cast(pa.string()).to_numpy(zero_copy_only=False)
    floats = np.asarray(np.where(missing, "nan", text).astype(str), dtype=float)
    if np.any(np.abs(floats[~missing]) >= EXACT_FLOAT_INTEGER):
        raise DataError(
            "the decimal column holds values beyond 2^53 that float64 cannot represent exactly; "
            "store them as integers (decimal scale 0) or int64"
        )
    return floats
