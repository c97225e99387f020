"""Matplotlib figures of a release (needs ``pip install dprange[plot]``)."""

from __future__ import annotations

from typing import IO

import numpy as np

from ..errors import DPRangeError


def plot_cdf(release, path: str | IO[bytes], *, alpha: float = 0.05, title: str | None = None) -> str | IO[bytes]:
    """Save the estimated CDF with its pointwise (1 - alpha) confidence band as a PNG.

    The band is :meth:`dprange.Release.cdf_band` (exact one-sided bounds at each bin edge)."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise DPRangeError("plotting needs matplotlib: pip install 'dprange[plot]'") from None
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


def plot_heatmap(
    release, path: str | IO[bytes], *, labels: tuple[str, str] | None = None, title: str | None = None
) -> str | IO[bytes]:
    """Save the estimated cell counts of a 2-D :class:`~dprange.answers.grid.GridRelease` as a
    heatmap PNG (axis 0 across, axis 1 up, on the domain's bin edges when it has a domain),
    with the typical cell standard error in the title (every cell's error is in the release)."""
    if len(release.shape) != 2:
        raise DPRangeError(f"a heatmap needs a 2-D release, this one has {len(release.shape)} axes")
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        raise DPRangeError("plotting needs matplotlib: pip install 'dprange[plot]'") from None
    counts = release.counts
    if release.domain is not None:
        x, y = (np.asarray(d.edges, dtype=float) for d in release.domain.domains)
    else:
        x, y = (np.arange(n + 1, dtype=float) for n in release.shape)
    stderr = float(np.median(release.marginal((0, 1)).stderr))
    fig, ax = plt.subplots(figsize=(7, 5), dpi=120)
    mesh = ax.pcolormesh(x, y, counts.T, shading="flat", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label="estimated count")
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
