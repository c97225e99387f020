"""dprange.answers.plot: the bar chart of a categorical release (bars at the estimates, error bars
at the intervals, the categories as ticks) and the heatmap of a 2-D release with a categorical
axis (its labels as ticks)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import dprange
from dprange import Domain, ProductDomain
from dprange.answers.plot import plot_bars, plot_heatmap

plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture
def figures(monkeypatch):
    """The figures the plotting functions close (kept open for the test to read)."""
    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for fig in kept:
        plt.figure(fig.number)
        plt.clf()


def test_bar_chart_of_a_categorical_release_draws_estimates_intervals_and_labels(figures):
    domain = Domain.categories(["Private", "State-gov", "?"], other=True)
    values = ["Private"] * 30 + ["State-gov"] * 12 + ["?"] * 4 + ["Dentist"]
    rel = dprange.release(values, domain, 1.0, mechanism="hierarchical", rng=5)
    buffer = io.BytesIO()
    plot_bars(rel, buffer, alpha=0.1)
    assert buffer.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = figures[0].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Private", "State-gov", "?", "other"]
    heights = [bar.get_height() for bar in ax.patches]
    np.testing.assert_allclose(heights, rel.estimate)
    lower, upper = rel.histogram().confidence_interval(0.1)
    from matplotlib.container import ErrorbarContainer

    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    (errorbar,) = bars.lines[2]
    segments = np.array(errorbar.get_segments())
    np.testing.assert_allclose(segments[:, 0, 1], lower)
    np.testing.assert_allclose(segments[:, 1, 1], upper)


def test_heatmap_of_a_categorical_axis_names_its_categories(figures):
    domain = ProductDomain([Domain.integers(0, 2), Domain.categories(["Male", "Female"])])
    rel = dprange.release_grid([[0, 1, 2, 2], ["Male", "Female", "Male", "Male"]], domain, 1.0, rng=1)
    plot_heatmap(rel, io.BytesIO(), labels=("age", "sex"))
    ax = figures[0].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Male", "Female"]
    np.testing.assert_allclose(ax.get_yticks(), [0.5, 1.5])
    np.testing.assert_allclose(ax.collections[0].get_array().reshape(2, 3), rel.counts.T)
