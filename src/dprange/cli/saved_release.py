"""What ``dprange show`` and ``dprange query`` compute from a saved release rebuilt in memory
(1-D or k-D): the summary, range counts, quantiles and CDF values with intervals, in value
units; and the reader of a saved release of any kind (:func:`read_release`), which ``dprange
report`` shares.  Post-processing only: no data are read and no budget is spent.  Imported by
:mod:`.show` only when the saved file itself does not hold the answer (numpy, scipy and the
answers layer load here).
"""

from __future__ import annotations

import os

import numpy as np

from .._lazy import lazy_module
from ..answers.grouped import GroupedRelease
from ..answers.release import Release, bins_between, load_release
from ..answers.tables import csv_text, release_table
from ..errors import DataError, ParameterError

#: Rebuilds a saved k-D release's design (imported only when a k-D release is read).
grid_loader = lazy_module("dprange.mechanisms.grid")

#: Reads a saved data-aware 2-D release (imported only when one is read).
data_aware_grid = lazy_module("dprange.data_aware.grid")


#: How far into a saved file its kind (``"kind": "grid_release"`` and the like) is looked for: its
#: writer puts it first; a 1-D release's JSON or NPZ never holds those names.
KIND_HEAD_BYTES = 4096


def read_release(path: str):
    """The release saved at ``path``, by the kind its first bytes name (whatever the file's suffix):
    a GridRelease for "grid_release", a data-aware grid release for "data_aware_grid_release", a
    GroupedRelease (one release per group) for a release saved with ``--by``, else a 1-D
    :class:`Release` (JSON or NPZ)."""
    if not os.path.isfile(path):
        raise DataError(f"release file {path!r} does not exist or is not a file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(KIND_HEAD_BYTES)
    except OSError as exc:
        raise DataError(f"cannot read {path!r}: {exc.strerror}") from None
    if b'"grid_release"' in head:
        with open(path, encoding="utf-8") as fh:
            return grid_loader.load_grid_release(fh.read())
    if b'"data_aware_grid_release"' in head:
        with open(path, encoding="utf-8") as fh:
            return data_aware_grid.DataAwareGridRelease.from_json(fh.read())
    if b'"dprange_grouped_release"' in head:
        return GroupedRelease.from_json(path)
    return load_release(path)


def summary(release, alpha: float) -> dict:
    """What ``dprange show`` prints: the input, the mechanism, the guarantee in words, the
    domain and the main answers (deciles for 1-D, the total and cells for k-D); for a grouped
    release the group-by, its budget and each group's summary."""
    if isinstance(release, GroupedRelease):
        return {
            "kind": "grouped release",
            "by": release.by,
            "epsilon": release.epsilon,
            "delta": release.delta,
            "privacy_unit": release.privacy_unit,
            "key_selection": release.key_selection,
            "groups": [{"key": key, **summary(group, alpha)} for key, group in release.items()],
        }
    if isinstance(release, Release):
        saved = release.to_dict(alpha=alpha)
        out = {"kind": "1-D release", "bins": release.n}
        total = release.total()
    else:
        saved = release.to_dict()
        out = {"kind": f"{len(release.shape)}-D grid release", "shape": list(release.shape)}
        total = release.rectangle([0] * len(release.shape), [n - 1 for n in release.shape])
    out.update(
        {
            "input": saved["input"],
            "mechanism": release.mechanism,
            "privacy": saved["privacy_statement"]["statement"],
            "domain": None if release.domain is None else release.domain.to_dict(),
            "total": {"value": float(total.value), "stderr": float(total.stderr) if _exact(release) else None},
        }
    )
    if isinstance(release, Release):
        try:
            out["deciles"] = _listed(release_table(release, "quantiles", alpha=alpha, simultaneous=True))
        except ParameterError as exc:
            out["deciles"] = str(exc)
    return out


def _exact(release) -> bool:
    """Whether the release has exact error bars (data-aware releases have none)."""
    return bool(getattr(release, "exact_error_bars", True))


def _listed(columns: dict) -> list[dict]:
    """Rows of a table as dictionaries (NaN as None)."""
    names = list(columns)
    rows = zip(*(np.asarray(columns[n]).tolist() for n in names))
    return [{n: (None if isinstance(v, float) and np.isnan(v) else v) for n, v in zip(names, row)} for row in rows]


def _row(query: str, answer: float, lower, upper, stderr=None, note: str = "") -> dict:
    return {
        "query": query,
        "answer": float(answer),
        "ci_lower": None if lower is None else float(lower),
        "ci_upper": None if upper is None else float(upper),
        "stderr": None if stderr is None else float(stderr),
        "note": note,
    }


def answers_1d(release: Release, ranges, levels, points, alpha: float) -> list[dict]:
    exact = release.exact_error_bars
    rows = []
    for a, b in ranges:
        answer = release.count_between(a, b)
        lower, upper = answer.confidence_interval(alpha) if exact else (None, None)
        query = f"count {a:g} <= value {'<=' if release.domain.kind == 'integers' else '<'} {b:g}"
        rows.append(_row(query, answer.value, lower, upper, answer.stderr if exact else None))
    if levels:
        table = release_table(release, "quantiles", alpha=alpha, q=levels)
        for q, value, placement, low, high, ci_lower, ci_upper in zip(
            *(table[k] for k in ("q", "value", "placement", "bin_lower", "bin_upper", "ci_lower", "ci_upper"))
        ):
            note = {"interpolated": "a guess inside its bin", "concentrated": f"no point: in bin [{low:g}, {high:g})"}
            lower, upper = (ci_lower, ci_upper) if exact else (None, None)
            rows.append(_row(f"quantile {q:g}", value, lower, upper, note=note.get(str(placement), "")))
    if points:
        at = release.cdf_at(np.asarray(points, dtype=float))
        bounds = at.confidence_interval(alpha) if exact else ([None] * len(points),) * 2
        for v, value, low, high in zip(points, np.atleast_1d(at.value), *bounds):
            rows.append(_row(f"cdf at {v:g}", value, low, high))
    return rows


def rectangle_row(release, ranges, alpha: float) -> dict:
    """One rectangle of a k-D release from one (A, B) per axis in value units."""
    k = len(release.shape)
    if len(ranges) != k:
        raise ParameterError(f"a {k}-D release answers one rectangle: give {k} --range A B, one per axis in order")
    lows, highs = zip(*(axis_bins(release, axis, a, b) for axis, (a, b) in enumerate(ranges)))
    answer = release.rectangle(list(lows), list(highs))
    exact = _exact(release)
    lower, upper = answer.confidence_interval(alpha) if exact else (None, None)
    note = "" if _exact(release) else "no error bars: data-aware (private choices bias the estimate)"
    names = release.input_labels.columns or tuple(f"axis{a}" for a in range(k))
    kinds = ["integers"] * k if release.domain is None else [d.kind for d in release.domain.domains]
    query = " and ".join(
        f"{a:g} <= {name} {'<=' if kind == 'integers' else '<'} {b:g}"
        for name, kind, (a, b) in zip(names, kinds, ranges)
    )
    return _row(f"count {query}", answer.value, lower, upper, answer.stderr if exact else None, note)


def axis_bins(release, axis: int, a: float, b: float) -> tuple[int, int]:
    """Bins (first, last) of A <= value <= B on one axis: integers A..B on integer axes, the bins
    between the edges A < B on interval axes, bin indices without a domain."""
    if release.domain is None:
        first, last = int(a), int(b)
    else:
        first, last = bins_between(release.domain.domains[axis], a, b)
    if not (0 <= first <= last < release.shape[axis]):
        raise ParameterError(f"--range {a:g} {b:g} is outside axis {axis} (bins 0..{release.shape[axis] - 1})")
    return first, last


def query_rows(path: str, ranges, levels, points, alpha: float) -> list[dict]:
    """The answers of ``dprange query``: one row per range, quantile level and CDF point (per
    group, with the group's key first, for a grouped release)."""
    release = read_release(path)
    if isinstance(release, GroupedRelease):
        return [
            {release.by: key, **row}
            for key, group in release.items()
            for row in answers_1d(group, ranges, levels, points, alpha)
        ]
    if isinstance(release, Release):
        return answers_1d(release, ranges, levels, points, alpha)
    if levels or points:
        raise ParameterError("--quantile and --cdf-at need a 1-D release; a k-D release answers --range")
    return [rectangle_row(release, ranges, alpha)]


def rows_csv(rows: list[dict]) -> str:
    """Rows as CSV text (the columns of the first row)."""
    return csv_text({name: np.array([row[name] for row in rows], dtype=object) for name in rows[0]})
