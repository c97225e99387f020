"""Releases as tables (issue 34, item 3): the columns behind ``Release.to_frame`` /
``to_pandas`` / ``to_csv`` and ``GridRelease.to_frame`` / ``to_csv``, one table at a time,
as ordered columns of numpy arrays (pandas only wraps them, CSV needs no pandas).

1-D tables (``table=``):

* ``"histogram"``: one row per bin: ``bin`` (index), ``bin_lower`` and ``bin_upper`` (its edges
  in value units; on integer domains both are the bin's integer), ``count`` (the estimate),
  ``stderr`` (exact; NaN without exact error bars), ``ci_lower`` and ``ci_upper`` (the pointwise
  (1 - alpha) interval of the count; NaN without exact error bars).
* ``"cdf"``: one row per bin: ``at`` (its right edge; the integer on integer domains), ``cdf``
  (the fraction of records in bins 0..j, unbiased, not made monotone), ``stderr``, ``ci_lower``
  and ``ci_upper`` (the pointwise band, :meth:`~dprange.Release.cdf_band`).
* ``"quantiles"``: one row per level ``q`` (default the nine deciles): ``value``, ``placement``
  (exact, interpolated or concentrated: :mod:`dprange.answers.cdf`), ``bin_lower`` and
  ``bin_upper`` (the bin of the point), ``ci_lower`` and ``ci_upper`` (bin edges; pointwise, or
  all levels at once with ``simultaneous=True``; NaN without exact error bars).

k-D tables (:class:`~dprange.answers.grid.GridRelease`): ``"cells"``, one row per cell: for
every axis ``<name>_bin`` (and ``<name>_lower``, ``<name>_upper`` with a domain), then
``count``, ``stderr``, ``ci_lower``, ``ci_upper``; axes are named by the release's labels
(else ``axis0``, ``axis1``, ...).
"""

from __future__ import annotations

import csv
import math

import numpy as np

from ..errors import ParameterError
from .writers import write_atomically

TABLES = ("histogram", "cdf", "quantiles")
GRID_TABLES = ("cells",)
DECILES = tuple(np.round(np.linspace(0.1, 0.9, 9), 2))


def release_table(release, table: str = "histogram", *, alpha: float = 0.05, q=None, simultaneous=False) -> dict:
    """The columns of one table of a 1-D release (module doc)."""
    if table == "histogram":
        return _histogram(release, alpha)
    if table == "cdf":
        return _cdf(release, alpha)
    if table == "quantiles":
        return _quantiles(release, alpha, DECILES if q is None else q, simultaneous)
    raise ParameterError(f"table must be one of {', '.join(TABLES)}, got {table!r}")


def _bins(release) -> tuple[np.ndarray, np.ndarray]:
    if release.domain.kind == "integers":
        values = release.domain.bin_values()
        return values, values
    edges = release.domain.edges
    return edges[:-1], edges[1:]


def _interval(answer, alpha: float, exact: bool) -> tuple[np.ndarray, np.ndarray]:
    if not exact:
        nan = np.full(np.shape(answer.value), np.nan)
        return nan, nan
    lower, upper = answer.confidence_interval(alpha)
    return np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)


def _histogram(release, alpha: float) -> dict:
    answer = release.histogram()
    exact = release.exact_error_bars
    lower, upper = _bins(release)
    ci_lower, ci_upper = _interval(answer, alpha, exact)
    return {
        "bin": np.arange(release.n),
        "bin_lower": lower,
        "bin_upper": upper,
        "count": np.asarray(answer.value, dtype=float),
        "stderr": np.asarray(answer.stderr, dtype=float) if exact else np.full(release.n, np.nan),
        "ci_lower": ci_lower,
        "ci_upper": ci_upper,
    }


def _cdf(release, alpha: float) -> dict:
    answer = release.cdf()
    exact = release.exact_error_bars
    band = release.cdf_band(alpha) if exact else (np.full(release.n, np.nan),) * 2
    return {
        "at": release.domain.bin_values(),
        "cdf": np.asarray(answer.value, dtype=float),
        "stderr": np.asarray(answer.stderr, dtype=float) if exact else np.full(release.n, np.nan),
        "ci_lower": np.asarray(band[0], dtype=float),
        "ci_upper": np.asarray(band[1], dtype=float),
    }


def _quantiles(release, alpha: float, q, simultaneous: bool) -> dict:
    levels = np.atleast_1d(np.asarray(q, dtype=float))
    answer = release.quantile(levels)
    if release.exact_error_bars:
        ci_lower, ci_upper = answer.confidence_interval(alpha, simultaneous=simultaneous)
    else:
        ci_lower = ci_upper = np.full(levels.size, np.nan)
    return {
        "q": levels,
        "value": np.atleast_1d(np.asarray(answer.value, dtype=float)),
        "placement": np.atleast_1d(np.asarray(answer.placement, dtype=object)),
        "bin_lower": np.atleast_1d(np.asarray(answer.bin_lower, dtype=float)),
        "bin_upper": np.atleast_1d(np.asarray(answer.bin_upper, dtype=float)),
        "ci_lower": np.asarray(ci_lower, dtype=float),
        "ci_upper": np.asarray(ci_upper, dtype=float),
    }


def grid_table(release, table: str = "cells", *, alpha: float = 0.05) -> dict:
    """The columns of one table of a k-D release (module doc)."""
    if table not in GRID_TABLES:
        raise ParameterError(f"table must be one of {', '.join(GRID_TABLES)} for a grid release, got {table!r}")
    shape = release.shape
    cells = np.indices(shape).reshape(len(shape), -1).T
    out: dict = {}
    for axis, name in enumerate(axis_names(release)):
        out[f"{name}_bin"] = cells[:, axis]
        if release.domain is not None:
            lower, upper = _bins_of_domain(release.domain.domains[axis])
            out[f"{name}_lower"], out[f"{name}_upper"] = lower[cells[:, axis]], upper[cells[:, axis]]
    answer = release.rectangle(cells, cells)
    lower, upper = answer.confidence_interval(alpha)
    out.update(
        {
            "count": np.asarray(answer.value, dtype=float),
            "stderr": np.asarray(answer.stderr, dtype=float),
            "ci_lower": np.asarray(lower, dtype=float),
            "ci_upper": np.asarray(upper, dtype=float),
        }
    )
    return out


def axis_names(release) -> list[str]:
    """The axes' names: the labels' columns, else axis0, axis1, ..."""
    columns = list(release.input_labels.columns)
    return [columns[a] if a < len(columns) else f"axis{a}" for a in range(len(release.shape))]


def _bins_of_domain(domain) -> tuple[np.ndarray, np.ndarray]:
    if domain.kind == "integers":
        values = domain.bin_values()
        return values, values
    return domain.edges[:-1], domain.edges[1:]


def to_frame(columns: dict):
    """A pandas DataFrame of the columns (pandas: ``pip install 'dprange[io]'``)."""
    try:
        import pandas as pd  # noqa: PLC0415  (optional dependency, imported on use)
    except ImportError:
        raise ParameterError("to_frame needs pandas: pip install 'dprange[io]' (or use to_csv)") from None
    return pd.DataFrame(columns)


def csv_text(columns: dict) -> str:
    """The columns as CSV: a header, then one row per entry; floats in their shortest
    round-trip form, NaN and None as an empty field."""
    import io  # noqa: PLC0415

    buffer = io.StringIO()
    write_csv(columns, buffer)
    return buffer.getvalue()


def write_csv(columns: dict, fh) -> None:
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(list(columns))
    for row in zip(*(np.asarray(v).tolist() for v in columns.values())):
        writer.writerow([_cell(v) for v in row])


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def save_csv(columns: dict, path) -> str | None:
    """The CSV text (no path), or the path written atomically."""
    if path is None:
        return csv_text(columns)
    return write_atomically(path, lambda fh: write_csv(columns, fh))
