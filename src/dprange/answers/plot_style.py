"""One style for every figure of a release (CDF, histogram, heatmap, groups): figure size,
resolution, fonts, colours, the axis labels built from the column name and units, the caption
that names the mechanism and the privacy parameters, and the logarithmic value axis.

The title says what is shown ("Cumulative distribution of age"); how it was made (mechanism,
epsilon, delta, the band's level) goes to a caption under the axes, as journals ask.
Matplotlib is optional (``pip install dprange[plot]``) and imported on first use.
"""

from __future__ import annotations

from typing import IO, Any

import numpy as np

from ..errors import DPRangeError

#: Figure sizes in inches (single-column width) and resolution of the saved PNG.
FIGSIZE = (7.0, 4.4)
HEATMAP_FIGSIZE = (7.0, 5.6)
DPI = 150
#: The estimate's line, its band (filled, translucent: visible but not hiding the line).
POINT_COLOUR = "#1f4e79"
BAND_COLOUR = "#5b9bd5"
BAND_ALPHA = 0.28
BAR_COLOUR = "#9dc3e6"
ERRORBAR_COLOUR = "#1f2d3d"
CAPTION_COLOUR = "#4d4d4d"
HEATMAP_CMAP = "viridis"
#: Okabe and Ito's colour-blind-safe palette, for groups.
GROUP_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 10.5,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
}

NEIGHBOUR_WORDS = {"add_remove": "add/remove one record", "replace": "replace one record"}


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only), or DPRangeError saying how to install it."""
    try:
        import matplotlib  # noqa: PLC0415 - optional dependency, imported when a figure is drawn

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415 - optional dependency
    except ImportError:
        raise DPRangeError("plotting needs matplotlib: pip install 'dprange[plot]'") from None
    return plt


def recorded_columns(release) -> tuple[list[str] | None, list | None]:
    """The column names and units the release records (``release.input_labels``:
    :class:`dprange.answers.describe.Labels`), each None where it records none."""
    labels = getattr(release, "input_labels", None)
    columns = list(getattr(labels, "columns", ()) or ()) or None
    units = list(getattr(labels, "units", ()) or ()) or None
    return columns, units


def describe_column(release, column: str | None, units: str | None) -> tuple[str | None, str | None]:
    """The column name and units to show: the arguments if given, else what the release records
    (:func:`recorded_columns`), else None."""
    columns, recorded_units = recorded_columns(release)
    if column is None and columns:
        column = ", ".join(str(c) for c in columns)
    if units is None and recorded_units and len(recorded_units) == 1:
        units = recorded_units[0]
    return (None if column is None else str(column)), (None if units is None else str(units))


def plain(text: str) -> str:
    """``text`` shown as written: matplotlib reads a pair of "$" as mathematics ("$x^2$"); a
    column name is user input, so its dollar signs are escaped."""
    return str(text).replace("$", r"\$")


def axis_label(column: str | None, units: str | None, default: str = "value") -> str:
    """The axis label "age (years)", "age", or the default when the column is not known (shown
    as written)."""
    name = column if column else default
    return plain(f"{name} ({units})" if units else name)


def seeded(release) -> bool:
    """True when the release's noise came from a seeded generator (a 1-D release says so; a grid
    release's measurements do)."""
    value = getattr(release, "seeded", None)
    if value is None:
        value = getattr(getattr(release, "measurements", None), "seeded", False)
    return bool(value)


def privacy_caption(release, extra: str = "") -> str:
    """ "Private estimate (dprange, mechanism hierarchical): ε = 1, δ = 0, add/remove one record"
    and ``extra`` (what the band or the bars mean)."""
    delta = getattr(release, "delta", 0.0) or 0.0
    relation = NEIGHBOUR_WORDS.get(getattr(release, "neighbours", ""), str(getattr(release, "neighbours", "")))
    text = f"Private estimate (dprange, mechanism {release.mechanism}): ε = {release.epsilon:g}"
    text += f", δ = {delta:g}" if delta else ", δ = 0"
    text += f"; neighbours: {relation}"
    if seeded(release):
        text += "; seeded noise (not for publication)"
    return text + (f".\n{extra}" if extra else ".")


def new_figure(plt, *, heatmap: bool = False):
    """(figure, axes) in the house style (draw inside ``plt.rc_context(RC)``, see :func:`drawing`)."""
    return plt.subplots(figsize=HEATMAP_FIGSIZE if heatmap else FIGSIZE, dpi=DPI)


def drawing(plt):
    """The house style's settings, for the whole of one figure's drawing (a context manager)."""
    return plt.rc_context(RC)


def finish(plt, fig, ax, path: str | IO[bytes], title: str, caption: str) -> str | IO[bytes]:
    """Title over the axes, caption under them, saved as PNG to ``path`` (a file or a binary
    stream) and closed."""
    ax.set_title(plain(title), loc="left")
    lines = caption.count("\n") + 1
    bottom = 0.035 + 0.045 * lines
    fig.text(0.01, 0.012, caption, ha="left", va="bottom", fontsize=8, color=CAPTION_COLOUR, wrap=True)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def set_log_x(ax, edges) -> None:
    """A logarithmic value axis: log where every edge is positive; symmetric-log otherwise,
    linear over the first bin (so that a bin at 0, such as the 92% of zeros in a capital-gain
    column, stays visible) and logarithmic beyond it."""
    edges = np.asarray(edges, dtype=float)
    if edges[0] > 0:
        ax.set_xscale("log")
    else:
        positive = edges[edges > 0]
        ax.set_xscale("symlog", linthresh=float(positive[0]) if positive.size else 1.0, linscale=0.5)
    ax.set_xlim(edges[0], edges[-1])
