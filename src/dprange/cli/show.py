"""``dprange show`` and ``dprange query``: read a saved release (1-D or k-D) and print what it
says, or answer questions from it, with intervals, in value units.  Post-processing only: no
data are read and no budget is spent.

``show`` prints a saved 1-D JSON release's summary from the file itself when it holds the
deciles with simultaneous intervals at the level asked (what ``release -o`` writes), without
importing numpy or the library (under 0.3 s of CPU: benchmarks/cli_startup.py); otherwise, and
for ``query``, the release is rebuilt by :mod:`.saved_release`.
"""

from __future__ import annotations

import json

import click

from .._lazy import lazy_module
from ..answers.describe import Labels
from ..errors import ParameterError
from .group import cli

#: Rebuilds a saved release and answers from it (numpy, scipy and the answers layer).
saved_release = lazy_module("dprange.cli.saved_release")

#: The saved-release format whose summary :func:`saved_summary` reads (answers.writers.FORMAT_VERSION).
SAVED_FORMAT = 3

#: The columns of the deciles table, in order, and where a saved file holds each.
DECILE_COLUMNS = {
    "q": "q",
    "value": "value",
    "placement": "placement",
    "bin_lower": "bin_lower",
    "bin_upper": "bin_upper",
    "ci_lower": "lower",
    "ci_upper": "upper",
}

FORMATS = ("table", "csv", "json")


def saved_summary(path: str, alpha: float) -> dict | None:
    """The summary of a saved 1-D JSON release read from the file as written, when it holds
    what the summary shows: exact error bars, the total, and the deciles with intervals holding
    all nine at once at level 1 - ``alpha``.  None otherwise (NPZ, k-D, other levels,
    data-dependent or unsaved error bars, an unreadable file): the release is then rebuilt."""
    if not str(path).endswith(".json"):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None  # the rebuilding path says what is wrong
    if not isinstance(data, dict) or data.get("dprange_release") != SAVED_FORMAT or "error_bars" in data:
        return None
    deciles, total = data.get("deciles"), data.get("total") or {}
    if not isinstance(deciles, dict) or deciles.get("alpha") != alpha or deciles.get("simultaneous") is not True:
        return None
    try:
        columns = [deciles[saved] for saved in DECILE_COLUMNS.values()]
        rows = [dict(zip(DECILE_COLUMNS, row, strict=True)) for row in zip(*columns, strict=True)]
        return {
            "kind": "1-D release",
            "bins": len(data["histogram"]["value"]),
            "input": data["input"],
            "mechanism": data["mechanism"],
            "privacy": data["privacy_statement"]["statement"],
            "domain": data["domain"],
            "total": {"value": float(total["value"]), "stderr": float(total["stderr"])},
            "deciles": rows,
        }
    except (KeyError, TypeError, ValueError):
        return None


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
    if info["kind"] == "grouped release":
        return grouped_text(info, alpha)
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


def grouped_text(info: dict, alpha: float) -> str:
    """A grouped release's summary: the group-by and its budget, then each group's."""
    budget = f"epsilon={info['epsilon']:g}" + (f", delta={info['delta']:g}" if info["delta"] else "")
    lines = [f"grouped release by {info['by']!r}: {len(info['groups'])} groups, {budget} in all"]
    if info.get("key_selection"):
        lines.append("keys selected privately (the keys not kept and their number are not published)")
    for group in info["groups"]:
        lines += ["", f"{info['by']} = {group['key']}:", summary_text(group, alpha)]
    return "\n".join(lines)


@cli.command("show")
@click.argument("path", metavar="RELEASE", type=click.Path(dir_okay=False))
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Intervals at level 1 - alpha.")
@click.option("--format", "fmt", type=click.Choice(("table", "json")), default="table", show_default=True)
def show_command(path, alpha, fmt):
    """Summarise a saved release (1-D or k-D): input, mechanism, privacy, total and deciles.

    Post-processing of the saved file: no data are read, no budget is spent."""
    info = saved_summary(path, alpha) or saved_release.summary(saved_release.read_release(path), alpha)
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
    rows = saved_release.query_rows(path, ranges, levels, points, alpha)
    if fmt == "json":
        click.echo(json.dumps(rows, indent=1))
    elif fmt == "csv":
        click.echo(saved_release.rows_csv(rows), nl=False)
    else:
        click.echo(table_text(rows))
