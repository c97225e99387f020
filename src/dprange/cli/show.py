"""``dprange show`` and ``dprange query``: read a saved release (1-D or k-D) and print what it
says, or answer questions from it, with intervals, in value units.  Post-processing only: no
data are read and no budget is spent.  Imports the answers layer only (a saved k-D release's
design is rebuilt by :mod:`dprange.mechanisms.grid`, imported when one is read).
"""

from __future__ import annotations

import json

import click
import numpy as np

from .._lazy import lazy_module
from ..answers.describe import Labels
from ..answers.release import Release, bins_between, load_release
from ..answers.tables import csv_text, release_table
from ..errors import DataError, ParameterError
from .group import cli

#: Rebuilds a saved k-D release's design (imported only when a k-D release is read).
grid_loader = lazy_module("dprange.mechanisms.grid")


#: Reads a saved data-aware 2-D release (imported only when one is read).
data_aware_grid = lazy_module("dprange.data_aware.grid")

FORMATS = ("table", "csv", "json")


def read_release(path: str):
    """The release saved at ``path``: a :class:`Release` (JSON or NPZ) or a GridRelease."""
    if str(path).endswith(".json"):
        try:
            with open(path, encoding="utf-8") as fh:
                head = fh.read(4096)
        except OSError as exc:
            raise DataError(f"cannot read {path!r}: {exc.strerror}") from None
        compact = head.replace(" ", "")
        if '"kind":"grid_release"' in compact:
            with open(path, encoding="utf-8") as fh:
                return grid_loader.load_grid_release(fh.read())
        if '"kind":"data_aware_grid_release"' in compact:
            with open(path, encoding="utf-8") as fh:
                return data_aware_grid.DataAwareGridRelease.from_json(fh.read())
    return load_release(path)


def summary(release, alpha: float) -> dict:
    """What ``dprange show`` prints: the input, the mechanism, the guarantee in words, the
    domain and the main answers (deciles for 1-D, the total and cells for k-D)."""
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


def _text(value) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def table_text(rows: list[dict]) -> str:
    """Rows as a plain aligned table."""
    if not rows:
        return ""
    names = list(rows[0])
    cells = [[_text(row[n]) for n in names] for row in rows]
    widths = [max(len(n), *(len(c[i]) for c in cells)) for i, n in enumerate(names)]
    lines = ["  ".join(n.rjust(w) for n, w in zip(names, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def summary_text(info: dict, alpha: float) -> str:
    labels = Labels.from_dict(info["input"])
    what = ", ".join(repr(labels.axis_label(a)) for a in range(len(labels.columns))) or "unnamed values"
    lines = [f"{info['kind']} of {what}" + (f" from {labels.source}" if labels.source else "")]
    lines.append(f"mechanism: {info['mechanism']}; domain: {info['domain']}")
    lines.append(f"privacy: {info['privacy']}")
    total = info["total"]
    lines.append(f"total: {total['value']:.6g}" + (f" ± {total['stderr']:.3g} (1 s.e.)" if total["stderr"] else ""))
    deciles = info.get("deciles")
    if isinstance(deciles, list):
        lines.append(f"deciles, {100 * (1 - alpha):g}% intervals holding all nine at once (ci_lower, ci_upper):")
        lines.append(
            table_text([{k: row[k] for k in ("q", "ci_lower", "ci_upper", "value", "placement")} for row in deciles])
        )
    elif deciles:
        lines.append(f"deciles unavailable: {deciles}")
    return "\n".join(lines)


@cli.command("show")
@click.argument("path", metavar="RELEASE", type=click.Path(dir_okay=False))
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Intervals at level 1 - alpha.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
def show_command(path, alpha, fmt):
    """Summarise a saved release (1-D or k-D): input, mechanism, privacy, total and deciles.

    Post-processing of the saved file: no data are read, no budget is spent."""
    info = summary(read_release(path), alpha)
    click.echo(json.dumps(info, indent=1) if fmt == "json" else summary_text(info, alpha))


@cli.command("query")
@click.argument("path", metavar="RELEASE", type=click.Path(dir_okay=False))
@click.option(
    "--range",
    "ranges",
    type=(float, float),
    multiple=True,
    help="Count the records with A <= value <= B on integer domains, A <= value < B on interval domains "
    "(A and B bin edges; the top bin holds the upper bound); for a k-D release give one --range per axis, "
    "in order: one rectangle.",
)
@click.option("--quantile", "levels", type=float, multiple=True, help="A quantile level in (0, 1) (repeatable).")
@click.option("--cdf-at", "points", type=float, multiple=True, help="The fraction of records <= V (repeatable).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Intervals at level 1 - alpha (pointwise).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def query_command(path, ranges, levels, points, alpha, fmt):
    """Answer range counts, quantiles and CDF values from a saved release, with intervals.

    Answers are in the values' units.  Post-processing of the saved file: no data are read,
    no budget is spent."""
    if not (ranges or levels or points):
        raise ParameterError("nothing to answer: give --range A B, --quantile Q or --cdf-at V")
    release = read_release(path)
    if isinstance(release, Release):
        rows = answers_1d(release, ranges, levels, points, alpha)
    else:
        if levels or points:
            raise ParameterError("--quantile and --cdf-at need a 1-D release; a k-D release answers --range")
        rows = [rectangle_row(release, ranges, alpha)]
    columns = {name: np.array([row[name] for row in rows], dtype=object) for name in rows[0]}
    if fmt == "json":
        click.echo(json.dumps(rows, indent=1))
    elif fmt == "csv":
        click.echo(csv_text(columns), nl=False)
    else:
        click.echo(table_text(rows))


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
