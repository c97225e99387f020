"""One column of values from numpy, pandas, pyarrow, polars or a masked array, as a numpy array
with its missing values marked: the one place where input types are told apart.

Numeric columns become int64 / float64 arrays (:func:`column_array`); categorical columns
become the bin codes of a public category list (:func:`category_codes`), by one rule for every
input type (:func:`category_key`), applied once per distinct value.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import DataError, private

#: Floats represent every integer up to 2^53 exactly, and no further.
EXACT_FLOAT_INTEGER = 2**53


_INT64_MAX = np.iinfo(np.int64).max


#: Cells read as missing by every reader (pandas' default markers); a categorical value equal
#: to one of them (after stripping spaces) is missing too, whatever its input type.
MISSING_MARKERS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)


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


# ----------------------------------------------------------------------------- categories
#: The code of a missing value (None, NaN, pandas NA, a null, a missing marker).
MISSING_CODE = -1


#: The code of a value that is not in the category list (and no other bin takes it).
OUTSIDE_CODE = -2


def category_key(value) -> str | None:
    """The text a value is matched by against a category list, or None when it is missing.

    Text is stripped of surrounding spaces (as CSV cells are) and a missing marker
    (:data:`MISSING_MARKERS`: empty, NA, NaN, null, None...) is missing; integers (and
    integral floats, as an integer column with missing values holds them) are their decimal
    text, so the category "3" matches the integer 3 and the CSV cell "3"; None, NaN and pandas
    NA are missing.  Booleans, fractions and other objects raise DataError."""
    if _is_missing(value):
        return None
    if isinstance(value, str):
        text = value.strip()
        return None if text in MISSING_MARKERS else text
    if isinstance(value, (bool, np.bool_)):
        raise DataError("the column holds booleans (True/False); give categories as text")
    if isinstance(value, (numbers.Integral, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer():
        return str(int(value))
    raise DataError(f"a categorical column holds text or integers, not {private(value)}")


def category_codes(values, lookup: dict[str, int], default: int = OUTSIDE_CODE) -> np.ndarray:
    """The int64 code of every value of a column: ``lookup[category_key(v)]``, ``default``
    for a value not in ``lookup`` (the other bin, or :data:`OUTSIDE_CODE`), and
    :data:`MISSING_CODE` for a missing one.

    Accepts what :func:`column_array` accepts plus text: numpy arrays (str, object, integer,
    float), lists, pandas Series (categoricals by their categories), pyarrow (Chunked)Arrays
    (dictionary arrays by their dictionary) and polars Series.  Each distinct value is keyed
    once (:func:`category_key`), so every input type follows the same rule."""

    def code(value) -> int:
        key = category_key(value)
        return MISSING_CODE if key is None else lookup.get(key, default)

    module = type(values).__module__
    if module.startswith("polars"):
        values = values.to_arrow()
        module = type(values).__module__
    if module.startswith("pyarrow"):
        return _arrow_codes(values, code)
    if module.startswith("pandas") and hasattr(values, "dtype"):
        return _pandas_codes(values, code)
    if values is None or isinstance(values, (str, bytes, dict)):
        raise DataError(f"the values must be a column of categories, got {type(values).__name__}")
    arr = np.asarray(values, dtype=object) if isinstance(values, (list, tuple)) else np.asarray(values)
    arr = np.atleast_1d(arr)
    if arr.ndim != 1:
        raise DataError(f"the values must be a 1-D column, got an array of shape {arr.shape}")
    if isinstance(values, np.ma.MaskedArray):
        codes = _numpy_codes(np.ma.getdata(arr), code)
        codes[np.ma.getmaskarray(values).ravel()] = MISSING_CODE
        return codes
    return _numpy_codes(arr, code)


def _distinct_codes(uniques, inverse, code) -> np.ndarray:
    """The codes of values given as distinct values and each value's index among them."""
    table = np.fromiter((code(u) for u in uniques), dtype=np.int64, count=len(uniques))
    return table[np.asarray(inverse, dtype=np.int64)]


def _numpy_codes(arr: np.ndarray, code) -> np.ndarray:
    kind = arr.dtype.kind
    if kind == "b":
        raise DataError("the column holds booleans (True/False); give categories as text")
    if kind in "iufU":
        uniques, inverse = np.unique(arr, return_inverse=True)
        return _distinct_codes(uniques.tolist(), inverse.ravel(), code)
    if kind != "O":
        raise DataError(f"a categorical column holds text or integers, not values of dtype {arr.dtype}")
    try:
        import pandas as pd  # noqa: PLC0415 - its hash table keys objects faster than a dict loop

        inverse, uniques = pd.factorize(arr, use_na_sentinel=True)
    except (ImportError, TypeError):  # no pandas, or unhashable values (refused by category_key)
        return _object_codes(arr, code)
    return _factorized_codes(np.asarray(inverse), list(uniques), code)


def _factorized_codes(inverse: np.ndarray, uniques: list, code) -> np.ndarray:
    """The codes of a column given as each value's index among its distinct values (-1 for a
    missing value, as pandas.factorize gives it)."""
    codes = _distinct_codes(uniques, np.maximum(inverse, 0), code)
    codes[inverse < 0] = MISSING_CODE
    return codes


def _object_codes(arr: np.ndarray, code) -> np.ndarray:
    """The codes of an object array, each distinct hashable value keyed once."""
    seen: dict = {}
    codes = np.empty(arr.size, dtype=np.int64)
    for i, value in enumerate(arr):
        try:
            found = seen.get(value)
        except TypeError:  # unhashable: keyed alone (and refused by category_key)
            found = None
        if found is None:
            found = code(value)
            try:
                seen[value] = found
            except TypeError:
                pass
        codes[i] = found
    return codes


def _pandas_codes(series, code) -> np.ndarray:
    import pandas as pd  # noqa: PLC0415 - only when given a pandas object

    if isinstance(series.dtype, pd.CategoricalDtype):
        table = np.fromiter((code(c) for c in series.cat.categories.tolist()), dtype=np.int64)
        raw = np.asarray(series.cat.codes, dtype=np.int64)
        codes = table[np.maximum(raw, 0)] if table.size else np.zeros(raw.size, dtype=np.int64)
        codes[raw < 0] = MISSING_CODE
        return codes
    if pd.api.types.is_bool_dtype(series.dtype):
        raise DataError("the column holds booleans (True/False); give categories as text")
    inverse, uniques = pd.factorize(series, use_na_sentinel=True)
    return _factorized_codes(np.asarray(inverse), list(uniques), code)


def _arrow_codes(values, code) -> np.ndarray:
    import pyarrow as pa  # noqa: PLC0415 - only when given a pyarrow object

    if isinstance(values, pa.ChunkedArray):
        parts = [_arrow_codes(chunk, code) for chunk in values.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if not isinstance(values, pa.Array):
        raise DataError(f"cannot read a column from a {type(values).__name__}")
    if pa.types.is_null(values.type):
        return np.full(len(values), MISSING_CODE, dtype=np.int64)
    if pa.types.is_boolean(values.type):
        raise DataError("the column holds booleans (True/False); give categories as text")
    if not pa.types.is_dictionary(values.type):
        values = values.dictionary_encode()
    indices = values.indices
    missing = np.asarray(indices.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    inverse = np.asarray(indices.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    codes = _distinct_codes(values.dictionary.to_pylist(), inverse, code)
    codes[missing] = MISSING_CODE
    return codes


def value_at(values, i: int):
    """The raw value at position ``i`` of a column (any input type :func:`category_codes`
    reads), for messages."""
    module = type(values).__module__
    if module.startswith("pyarrow"):
        return values[i].as_py()
    if module.startswith("pandas") and hasattr(values, "iloc"):
        return values.iloc[i]
    return values[i]
