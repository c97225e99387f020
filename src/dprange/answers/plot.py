"""Matplotlib figures of a release (needs ``pip install dprange[plot]``)."""

from __future__ import annotations

from typing import IO

import numpy as np

from ..errors import DPRangeError


def plot_cdf(release, path: str | IO[bytes], *, alpha: float = 0.05, title: str | None = None) -> str | IO[bytes]:
    """Save the estimated CDF with its pointwise (1 - alpha) confidence band as a PNG.

    The band is :meth:`dprange.Release.cdf_band` (exact one-sided bounds at each bin edge)."""
    plt = _pyplot()
    cdf = release.cdf()
    lower, upper = release.cdf_band(alpha) if release.exact_error_bars else (cdf.value, cdf.value)
    x = release.domain.edges
    lower = np.concatenate([[0.0], lower])
    upper = np.concatenate([[0.0], upper])
    values = np.concatenate([[0.0], cdf.value])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    if release.exact_error_bars:
        ax.fill_between(
            x,
            np.clip(lower, 0, 1.05),
            np.clip(upper, -0.05, 1.05),
            step="post",
            alpha=0.3,
            label=f"{100 * (1 - alpha):.0f}% pointwise band",
        )
    ax.step(x, values, where="post", lw=1.4, label="private CDF")
    ax.set_xlabel("value")
    ax.set_ylabel("cumulative fraction")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title or f"{release.mechanism}, epsilon = {release.epsilon:g}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_bars(release, path: str | IO[bytes], *, alpha: float = 0.05, title: str | None = None) -> str | IO[bytes]:
    """Save the estimated count of every bin of a release as a labelled bar chart PNG (the
    chart of a categorical domain, whose bins have no order for a CDF), with each bin's
    (1 - alpha) interval as an error bar when the error bars are exact."""
    plt = _pyplot()
    counts = release.histogram()
    labels = release.labels
    fig, ax = plt.subplots(figsize=(max(5.0, min(0.5 * len(labels) + 2, 16.0)), 4.2), dpi=120)
    position = np.arange(len(labels))
    if release.exact_error_bars:
        lower, upper = counts.confidence_interval(alpha)
        errors = np.vstack([counts.value - lower, upper - counts.value])
        ax.bar(position, counts.value, yerr=errors, capsize=3, label=f"{100 * (1 - alpha):.0f}% intervals")
        ax.legend(loc="upper right")
    else:
        ax.bar(position, counts.value)
    ax.set_xticks(position, labels, rotation=45 if len(labels) > 6 else 0, ha="right" if len(labels) > 6 else "center")
    ax.set_ylabel("estimated count")
    ax.set_title(title or f"{release.mechanism}, epsilon = {release.epsilon:g}")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _pyplot():
    """matplotlib.pyplot on the Agg backend, or DPRangeError naming the extra to install."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise DPRangeError("plotting needs matplotlib: pip install 'dprange[plot]'") from None
    return plt


def plot_heatmap(
    release, path: str | IO[bytes], *, labels: tuple[str, str] | None = None, title: str | None = None
) -> str | IO[bytes]:
    """Save the estimated cell counts of a 2-D :class:`~dprange.answers.grid.GridRelease` as a
    heatmap PNG (axis 0 across, axis 1 up, on the domain's bin edges when it has a domain),
    with the typical cell standard error in the title (every cell's error is in the release)."""
    if len(release.shape) != 2:
        raise DPRangeError(f"a heatmap needs a 2-D release, this one has {len(release.shape)} axes")
    plt = _pyplot()
    counts = release.counts
    axes = release.domain.domains if release.domain is not None else [None, None]
    # a categorical axis is drawn on its bin positions, its labels as ticks
    x, y = (
        np.arange(n + 1, dtype=float) if d is None or d.categorical else np.asarray(d.edges, dtype=float)
        for d, n in zip(axes, release.shape)
    )
    stderr = float(np.median(release.marginal((0, 1)).stderr))
    fig, ax = plt.subplots(figsize=(7, 5), dpi=120)
    mesh = ax.pcolormesh(x, y, counts.T, shading="flat", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label="estimated count")
    if axes[0] is not None and axes[0].categorical:
        ax.set_xticks(np.arange(release.shape[0]) + 0.5, axes[0].bin_labels(), rotation=45, ha="right")
    if axes[1] is not None and axes[1].categorical:
        ax.set_yticks(np.arange(release.shape[1]) + 0.5, axes[1].bin_labels())
    first, second = labels or ("axis 0", "axis 1")
    ax.set_xlabel(first)
    ax.set_ylabel(second)
    ax.set_title(
        title or f"{release.mechanism}, epsilon = {release.epsilon:g} (cell standard error about {stderr:.3g})"
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
