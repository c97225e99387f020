"""Matplotlib figures of a release (needs ``pip install dprange[plot]``): the CDF with its
confidence band, the histogram with error bars, the heatmap of a 2-D grid release, and several
groups' CDFs or histograms on one axes, all in one style (:mod:`dprange.answers.plot_style`).

Every figure is drawn from the release alone (post-processing: no privacy cost).  The value
axis is labelled with the column name and units (the arguments, else what the release
records, else "value"); ``log_x=True`` draws it logarithmic (symmetric-log when the domain
starts at or below 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from ..errors import DPRangeError, ParameterError
from . import plot_style as style

#: Above this many bins the histogram is a step line with a shaded band, not bars with error bars
#: (a 7-inch figure at 150 dpi is about 1000 pixels wide; 16384 bars took 14 s to draw).
MAX_BARS = 1000


#: Above this many bins, runs of bins narrower than a pixel are drawn as ranges (:func:`_draw_counts`).
MAX_STEPS = 4096


def _level(alpha: float) -> str:
    return f"{100 * (1 - alpha):g}%"


def _cdf_steps(release, alpha: float):
    """(edges, point, lower, upper): the CDF and its pointwise band as step functions over the
    bin edges, starting at 0 on the lowest edge (lower = upper = point without exact bars)."""
    cdf = np.asarray(release.cdf().value, dtype=float)
    if release.exact_error_bars:
        lower, upper = (np.asarray(b, dtype=float) for b in release.cdf_band(alpha))
    else:
        lower, upper = cdf, cdf
    start = np.zeros(1)
    edges = np.asarray(release.domain.edges, dtype=float)
    return edges, *(np.concatenate([start, v]) for v in (cdf, lower, upper))


def _draw_cdf(ax, release, alpha: float, colour: str, label: str, band_label: str | None) -> tuple:
    """The CDF's step line and its band, filled; returns :func:`_cdf_steps` (computed once: the
    band of a million bins takes seconds)."""
    steps = _cdf_steps(release, alpha)
    edges, point, lower, upper = steps
    if release.exact_error_bars:
        ax.fill_between(
            edges,
            np.clip(lower, 0.0, 1.0),
            np.clip(upper, 0.0, 1.0),
            step="post",
            color=colour,
            alpha=style.BAND_ALPHA,
            linewidth=0,
            label=band_label,
        )
    ax.step(edges, point, where="post", color=colour, lw=1.6, label=label)
    return steps


def _value_axes(ax, column, units, log_x: bool, edges, *, cdf: bool) -> None:
    """The value axis (column and units; log-x if asked) and the fraction or count axis."""
    ax.set_xlabel(style.axis_label(column, units))
    if cdf:
        ax.set_ylabel("fraction of records ≤ value")
        ax.set_ylim(-0.02, 1.02)
    else:
        ax.set_ylabel("records per bin")
    if log_x:
        style.set_log_x(ax, edges)


def _band_note(release, alpha: float, what: str) -> str:
    if release.exact_error_bars:
        return f"{what}: exact {_level(alpha)} pointwise confidence intervals."
    return (
        "No error bars: this estimate's errors are not known exactly (non-linear inference or data-dependent design)."
    )


def _narrow_band(release, steps: tuple) -> str:
    """A note on a band too narrow to see at the figure's scale (below 0.005 of the unit
    height, about a line's width): its widest half-width, so that the reader knows it is there."""
    if not release.exact_error_bars:
        return ""
    _, point, lower, upper = steps
    widest = float(np.max(np.maximum(point - lower, upper - point)))
    if widest >= 0.005:
        return ""
    return f" The band is at most ±{widest:.2g} wide: narrower than the line at this scale."


def plot_cdf(
    release,
    path: str | IO[bytes],
    *,
    alpha: float = 0.05,
    title: str | None = None,
    column: str | None = None,
    units: str | None = None,
    log_x: bool = False,
) -> str | IO[bytes]:
    """Save the estimated CDF with its pointwise (1 - alpha) confidence band as a PNG.

    The band is :meth:`dprange.Release.cdf_band` (exact one-sided bounds at each bin edge),
    drawn filled under the estimate's step line; ``column`` and ``units`` label the value axis."""
    plt = style.pyplot()
    with style.drawing(plt):
        column, units = style.describe_column(release, column, units)
        fig, ax = style.new_figure(plt)
        steps = _draw_cdf(ax, release, alpha, style.POINT_COLOUR, "estimated CDF", f"{_level(alpha)} pointwise band")
        _value_axes(ax, column, units, log_x, release.domain.edges, cdf=True)
        ax.legend(loc="lower right")
        heading = title or (f"Cumulative distribution of {column}" if column else "Cumulative distribution")
        caption = style.privacy_caption(
            release, _band_note(release, alpha, "Shaded band") + _narrow_band(release, steps)
        )
        return style.finish(plt, fig, ax, path, heading, caption)


def plot_histogram(
    release,
    path: str | IO[bytes],
    *,
    alpha: float = 0.05,
    title: str | None = None,
    column: str | None = None,
    units: str | None = None,
    log_x: bool = False,
) -> str | IO[bytes]:
    """Save the estimated count of every bin as bars over the bin edges, with (1 - alpha)
    error bars (:meth:`dprange.Release.histogram`'s intervals: exact, Laplace-aware), as a PNG.

    Above :data:`MAX_BARS` bins, a step line with the intervals as a shaded band.  Estimated
    counts may be negative (unbiased least squares): they are drawn as they are."""
    plt = style.pyplot()
    with style.drawing(plt):
        column, units = style.describe_column(release, column, units)
        edges = np.asarray(release.domain.edges, dtype=float)
        answer = release.histogram()
        counts = np.asarray(answer.value, dtype=float)
        fig, ax = style.new_figure(plt)
        if counts.size > MAX_BARS:  # more bins than pixels: bars would cost seconds and show nothing more
            _draw_counts(ax, release, alpha, style.POINT_COLOUR, "estimated count")
            what = "Shaded band"
            if counts.size > MAX_STEPS:
                what = "Runs of bins narrower than a pixel show the range of their counts; shaded band"
        else:
            draw_bars(ax, edges, counts, answer if release.exact_error_bars else None, alpha)
            what = "Error bars"
        ax.axhline(0, color="#808080", lw=0.6)
        _value_axes(ax, column, units, log_x, edges, cdf=False)
        ax.legend(loc="upper right")
        heading = title or (f"Histogram of {column}" if column else "Histogram")
        caption = style.privacy_caption(release, _band_note(release, alpha, what))
        return style.finish(plt, fig, ax, path, heading, caption)


def draw_bars(ax, edges, counts, answer, alpha: float) -> None:
    """Bars of the counts over the bin edges, with the (1 - alpha) intervals of ``answer`` as
    error bars (none when ``answer`` is None: no exact errors)."""
    many = counts.size > 60
    ax.bar(
        edges[:-1],
        counts,
        width=np.diff(edges),
        align="edge",
        color=style.BAR_COLOUR,
        edgecolor=style.POINT_COLOUR,
        linewidth=0 if many else 0.6,
        label="estimated count",
    )
    if answer is None:
        return
    lower, upper = (np.asarray(b, dtype=float) for b in answer.confidence_interval(alpha))
    ax.errorbar(
        (edges[:-1] + edges[1:]) / 2,
        counts,
        yerr=np.vstack([counts - lower, upper - counts]),
        fmt="none",
        ecolor=style.ERRORBAR_COLOUR,
        elinewidth=0.5 if many else 0.9,
        capsize=0 if many else 2,
        label=f"{_level(alpha)} interval",
    )


def plot_bars(
    release,
    path: str | IO[bytes],
    *,
    alpha: float = 0.05,
    title: str | None = None,
    column: str | None = None,
) -> str | IO[bytes]:
    """Save the estimated count of every bin of a release as a labelled bar chart PNG (the
    chart of a categorical domain, whose bins have no order for a CDF), with each bin's
    (1 - alpha) interval as an error bar when the error bars are exact."""
    plt = style.pyplot()
    with style.drawing(plt):
        column, _ = style.describe_column(release, column, None)
        counts = release.histogram()
        labels = [style.plain(str(label)) for label in release.labels]
        fig, ax = style.new_figure(plt)
        fig.set_size_inches(max(style.FIGSIZE[0], min(0.5 * len(labels) + 2, 16.0)), style.FIGSIZE[1])
        position = np.arange(len(labels))
        exact = release.exact_error_bars
        draw_bars(ax, np.arange(len(labels) + 1) - 0.5, counts.value, counts if exact else None, alpha)
        note = f"Error bars: {_level(alpha)} intervals." if exact else "No exact error bars."
        rotate = len(labels) > 6
        ax.set_xticks(position, labels, rotation=45 if rotate else 0, ha="right" if rotate else "center")
        ax.set_xlabel(style.axis_label(column, None, "category"))
        ax.set_ylabel("estimated count")
        heading = title or (f"Counts of {column}" if column else "Counts by category")
        return style.finish(plt, fig, ax, path, heading, style.privacy_caption(release, note))


def plot_heatmap(
    release,
    path: str | IO[bytes],
    *,
    labels: tuple[str, str] | None = None,
    title: str | None = None,
    units: tuple[str | None, str | None] | None = None,
) -> str | IO[bytes]:
    """Save the estimated cell counts of a 2-D :class:`~dprange.answers.grid.GridRelease` as a
    heatmap PNG (axis 0 across, axis 1 up, on the domain's bin edges when it has a domain),
    with the typical cell standard error in the caption (every cell's error is in the release).
    ``labels``: the two column names (default: what the release records, else "axis 0", "axis 1")."""
    if len(release.shape) != 2:
        raise DPRangeError(f"a heatmap needs a 2-D release, this one has {len(release.shape)} axes")
    plt = style.pyplot()
    with style.drawing(plt):
        counts = release.counts
        axes = release.domain.domains if release.domain is not None else [None, None]
        # a categorical axis is drawn on its bin positions, its labels as ticks
        x, y = (
            np.arange(n + 1, dtype=float) if d is None or d.categorical else np.asarray(d.edges, dtype=float)
            for d, n in zip(axes, release.shape)
        )
        stderr = float(np.median(release.marginal((0, 1)).stderr))
        recorded, recorded_units = style.recorded_columns(release)
        if labels is None and recorded and len(recorded) == 2:
            labels = (str(recorded[0]), str(recorded[1]))
        first, second = labels or ("axis 0", "axis 1")
        if units is None and recorded_units and len(recorded_units) == 2:
            units = tuple(recorded_units)
        first_units, second_units = units or (None, None)
        fig, ax = style.new_figure(plt, heatmap=True)
        mesh = ax.pcolormesh(x, y, counts.T, shading="flat", cmap=style.HEATMAP_CMAP)
        ax.grid(False)
        fig.colorbar(mesh, ax=ax, label="estimated records per cell")
        if axes[0] is not None and axes[0].categorical:
            ax.set_xticks(np.arange(release.shape[0]) + 0.5, axes[0].bin_labels(), rotation=45, ha="right")
        if axes[1] is not None and axes[1].categorical:
            ax.set_yticks(np.arange(release.shape[1]) + 0.5, axes[1].bin_labels())
        ax.set_xlabel(style.axis_label(first, first_units, "axis 0"))
        ax.set_ylabel(style.axis_label(second, second_units, "axis 1"))
        heading = title or (f"Records by {first} and {second}" if labels else "Estimated cell counts")
        error = (
            f"Cell standard error about {stderr:.3g} (median over the cells)."
            if np.isfinite(stderr)
            else "No error bars: the estimate has a data-dependent bias."
        )
        caption = style.privacy_caption(release, error)
        return style.finish(plt, fig, ax, path, heading, caption)


def plot_groups(
    releases: Mapping[str, Any],
    path: str | IO[bytes],
    *,
    kind: str = "cdf",
    alpha: float = 0.05,
    title: str | None = None,
    column: str | None = None,
    units: str | None = None,
    log_x: bool = False,
) -> str | IO[bytes]:
    """Save several groups' releases of one column (``{"group name": release}``) on one axes:
    ``kind="cdf"`` their CDFs with pointwise bands, ``kind="histogram"`` their counts per bin
    as step lines with (1 - alpha) bands; one colour per group (Okabe and Ito's palette)."""
    if kind not in ("cdf", "histogram"):
        raise ParameterError(f"kind must be 'cdf' or 'histogram', got {kind!r}")
    if not releases:
        raise ParameterError("plot_groups needs at least one release")
    if len(releases) > len(style.GROUP_COLOURS):
        raise ParameterError(f"plot_groups draws at most {len(style.GROUP_COLOURS)} groups; got {len(releases)}")
    plt = style.pyplot()
    with style.drawing(plt):
        first = next(iter(releases.values()))
        column, units = style.describe_column(first, column, units)
        fig, ax = style.new_figure(plt)
        for (name, release), colour in zip(releases.items(), style.GROUP_COLOURS):
            if kind == "cdf":
                _draw_cdf(ax, release, alpha, colour, style.plain(name), None)
            else:
                _draw_counts(ax, release, alpha, colour, style.plain(name))
        _value_axes(ax, column, units, log_x, first.domain.edges, cdf=kind == "cdf")
        ax.legend(loc="lower right" if kind == "cdf" else "upper right")
        what = "Cumulative distribution" if kind == "cdf" else "Histogram"
        heading = title or (f"{what} of {column} by group" if column else f"{what} by group")
        caption = _groups_caption(releases, alpha)
        return style.finish(plt, fig, ax, path, heading, caption)


def _groups_caption(releases: Mapping[str, Any], alpha: float) -> str:
    """The caption of a group plot: the shared privacy parameters, or each group's."""
    first = next(iter(releases.values()))
    note = _band_note(first, alpha, "Shaded bands")
    if len({(r.mechanism, r.epsilon, r.delta, r.neighbours) for r in releases.values()}) == 1:
        return style.privacy_caption(first, note)
    each = "; ".join(f"{name}: {r.mechanism}, ε = {r.epsilon:g}, δ = {r.delta:g}" for name, r in releases.items())
    return f"Private estimates (dprange): {each}.\n{note}"


def _draw_counts(ax, release, alpha: float, colour: str, label: str) -> None:
    """Counts per bin as a step line over the edges, with their (1 - alpha) band.  Above
    :data:`MAX_STEPS` bins, each of MAX_STEPS / 2 runs of consecutive bins (narrower than a
    pixel) is drawn as the range of its counts (filled) inside the range of its intervals: the
    same picture at the figure's resolution, without drawing a million-vertex polygon."""
    edges = np.asarray(release.domain.edges, dtype=float)
    answer = release.histogram()
    counts = np.asarray(answer.value, dtype=float)
    exact = release.exact_error_bars
    lower, upper = (np.asarray(b, dtype=float) for b in answer.confidence_interval(alpha)) if exact else (None, None)
    if counts.size > MAX_STEPS:
        starts = np.arange(0, counts.size, -(-counts.size // (MAX_STEPS // 2)))
        edges = np.append(edges[starts], edges[-1])
        if lower is not None and upper is not None:
            lower, upper = np.minimum.reduceat(lower, starts), np.maximum.reduceat(upper, starts)
        low, high = np.minimum.reduceat(counts, starts), np.maximum.reduceat(counts, starts)
        ax.fill_between(edges, _last(low), _last(high), step="post", color=colour, linewidth=0.8, label=label)
    else:
        ax.step(edges, _last(counts), where="post", color=colour, lw=1.4, label=label)
    if lower is not None and upper is not None:
        ax.fill_between(
            edges, _last(lower), _last(upper), step="post", color=colour, alpha=style.BAND_ALPHA, linewidth=0
        )


def _last(values: np.ndarray) -> np.ndarray:
    """``values`` with its last repeated: a step function over n + 1 edges."""
    return np.append(values, values[-1])
