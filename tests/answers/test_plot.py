"""dprange.answers.plot and plot_style: what each figure shows, read back from its axes: the band
and error bars are the release's intervals, the axes carry the column name and units (given, or
recorded by the release), the title says what is shown and the caption how it was made, log-x
scales, and one style across the CDF, histogram, heatmap and group plots.
The bar chart of a categorical release and the heatmap with a categorical axis are read back too."""

from __future__ import annotations

import io

import numpy as np
import pytest
from _helpers import plotted_ages_release, plotted_grid_release

import dprange
from dprange import Domain, ProductDomain
from dprange.answers import plot, plot_style

pytest.importorskip("matplotlib")
plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(scope="module")
def ages():
    return plotted_ages_release()


@pytest.fixture(scope="module")
def grid():
    return plotted_grid_release()


@pytest.fixture
def drawn(monkeypatch):
    """Every figure finished during the test: (figure, axes, title, caption), and its PNG bytes."""
    figures = []
    finish = plot_style.finish

    def keep(plt, fig, ax, path, title, caption):
        figures.append((fig, ax, title, caption))
        return finish(plt, fig, ax, path, title, caption)

    monkeypatch.setattr(plot_style, "finish", keep)
    return figures


def draw(function, release, **options):
    buffer = io.BytesIO()
    function(release, buffer, **options)
    assert buffer.getvalue().startswith(b"\x89PNG\r\n\x1a\n")
    return buffer


def test_cdf_band_is_the_release_band_filled_and_labelled(ages, drawn):
    draw(plot.plot_cdf, ages, column="age", units="years")
    fig, ax, title, caption = drawn[0]
    (band,) = ax.collections
    lower, upper = ages.cdf_band(0.05)
    ys = np.round(band.get_paths()[0].vertices[:, 1], 12)
    expected = np.round(np.clip(np.concatenate([[0.0], lower, upper]), 0, 1), 12)
    assert set(ys) == set(expected)  # the filled band runs along the exact lower and upper bounds
    assert 0.25 <= band.get_alpha() <= 0.3
    (line,) = ax.lines
    np.testing.assert_allclose(line.get_ydata(), np.concatenate([[0.0], ages.cdf().value]))
    np.testing.assert_allclose(line.get_xdata(), ages.domain.edges)
    assert ax.get_xlabel() == "age (years)"
    assert title == "Cumulative distribution of age" and "hierarchical" not in title
    assert "mechanism hierarchical" in caption and "ε = 0.5" in caption and "95% pointwise" in caption
    assert "seeded noise" in caption  # rng=1: the caption warns


def test_histogram_bars_are_the_counts_with_their_intervals(ages, drawn):
    draw(plot.plot_histogram, ages, column="age", units="years", alpha=0.1)
    _, ax, title, caption = drawn[0]
    bars = ax.patches
    answer = ages.histogram()
    np.testing.assert_allclose([b.get_height() for b in bars], answer.value)
    np.testing.assert_allclose([b.get_x() for b in bars], ages.domain.edges[:-1])
    np.testing.assert_allclose([b.get_width() for b in bars], np.diff(ages.domain.edges))
    (errorbars,) = [c for c in ax.collections if len(c.get_segments()) == ages.n]
    segments = np.array(errorbars.get_segments())  # one vertical segment per bin: (lower, upper)
    lower, upper = answer.confidence_interval(0.1)
    np.testing.assert_allclose(segments[:, 0, 1], lower)
    np.testing.assert_allclose(segments[:, 1, 1], upper)
    assert ax.get_xlabel() == "age (years)" and ax.get_ylabel() == "records per bin"
    assert title == "Histogram of age" and "90% pointwise" in caption


def test_histogram_of_more_bins_than_pixels_is_a_line_with_a_band(drawn):
    n = plot.MAX_BARS + 24
    wide = dprange.release(np.arange(3000) % n, Domain.integers(0, n - 1), 1.0, mechanism="hierarchical", rng=3)
    draw(plot.plot_histogram, wide)
    _, ax, _, caption = drawn[0]
    assert not ax.patches and "Shaded band" in caption
    (line,) = [line for line in ax.lines if len(line.get_ydata()) == n + 1]
    answer = wide.histogram()
    np.testing.assert_allclose(line.get_ydata()[:-1], answer.value)
    (band,) = ax.collections
    lower, upper = answer.confidence_interval(0.05)
    ys = band.get_paths()[0].vertices[:, 1]
    assert np.isclose(ys.min(), lower.min()) and np.isclose(ys.max(), upper.max())


def test_histogram_of_more_bins_than_steps_draws_each_run_as_its_range(drawn):
    n = 3 * plot.MAX_STEPS
    wide = dprange.release(np.arange(5000) % n, Domain.integers(0, n - 1), 1.0, mechanism="hierarchical", rng=3)
    draw(plot.plot_histogram, wide)
    _, ax, _, caption = drawn[0]
    counts_range, band = ax.collections
    answer = wide.histogram()
    lower, upper = answer.confidence_interval(0.05)
    runs = np.arange(n).reshape(-1, 6)  # MAX_STEPS / 2 runs of 6 bins
    drawn_counts = counts_range.get_paths()[0].vertices[:, 1]
    assert set(np.round(answer.value[runs].min(axis=1), 9)) <= set(np.round(drawn_counts, 9))
    assert set(np.round(answer.value[runs].max(axis=1), 9)) <= set(np.round(drawn_counts, 9))
    ys = band.get_paths()[0].vertices[:, 1]
    assert set(np.round(lower[runs].min(axis=1), 9)) <= set(np.round(ys, 9))
    assert set(np.round(upper[runs].max(axis=1), 9)) <= set(np.round(ys, 9))
    assert "narrower than a pixel" in caption


def test_column_and_units_default_to_what_the_release_records(ages, drawn):
    draw(plot.plot_cdf, ages)
    assert drawn[-1][1].get_xlabel() == "value" and drawn[-1][2] == "Cumulative distribution"
    labelled = ages.with_labels("income", "USD")  # what the release records (Release.input_labels)
    draw(plot.plot_histogram, labelled)
    assert drawn[-1][1].get_xlabel() == "income (USD)" and drawn[-1][2] == "Histogram of income"
    draw(plot.plot_histogram, labelled, column="age", units="years")  # the arguments win
    assert drawn[-1][1].get_xlabel() == "age (years)"


def test_dollar_signs_in_names_are_shown_as_written(ages, drawn):
    draw(plot.plot_cdf, ages, column="price $x^2$", units="US$")
    _, ax, title, _ = drawn[-1]
    assert ax.get_xlabel() == r"price \$x^2\$ (US\$)"
    assert ax.get_title(loc="left") == r"Cumulative distribution of price \$x^2\$"
    draw(plot.plot_groups, {"$a$": ages}, column="$")
    assert [t.get_text() for t in drawn[-1][1].get_legend().get_texts()] == [r"\$a\$"]


def test_log_x_is_log_or_symlog_from_zero_over_the_domain(drawn):
    from_zero = dprange.release(np.zeros(100), Domain.interval(0, 1000, 10), 1.0, mechanism="hierarchical")
    draw(plot.plot_histogram, from_zero, log_x=True)
    ax = drawn[-1][1]
    assert ax.get_xscale() == "symlog" and ax.get_xlim() == pytest.approx((0, 1000))
    assert ax.xaxis.get_transform().linthresh == pytest.approx(100)  # linear over the first bin
    positive = dprange.release(np.full(100, 5.0), Domain.interval(1, 1000, 10), 1.0, mechanism="hierarchical")
    draw(plot.plot_cdf, positive, log_x=True)
    assert drawn[-1][1].get_xscale() == "log"
    draw(plot.plot_cdf, positive)
    assert drawn[-1][1].get_xscale() == "linear"


def test_narrow_band_is_named_in_the_caption(drawn):
    many = dprange.release(np.arange(200_000) % 10, Domain.integers(0, 9), 5.0, mechanism="hierarchical")
    draw(plot.plot_cdf, many)
    lower, upper = many.cdf_band(0.05)
    widest = np.max(np.maximum(many.cdf().value - lower, upper - many.cdf().value))
    assert widest < 0.005 and f"±{widest:.2g}" in drawn[-1][3]


def test_heatmap_labels_units_title_and_caption(grid, drawn):
    draw(plot.plot_heatmap, grid, labels=("age", "hours"), units=("years", "h"))
    fig, ax, title, caption = drawn[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("age (years)", "hours (h)")
    assert title == "Records by age and hours" and "mechanism kronecker" in caption
    assert "seeded noise" in caption  # rng=2: recorded in the grid's measurements
    (mesh,) = ax.collections
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(8, 10), grid.counts.T)


def test_heatmap_of_a_data_aware_release_says_it_has_no_error_bars(grid, drawn):
    """A data-aware grid release's cells have no standard errors: the caption says so instead of
    quoting a median of NaNs; an exact release's quotes its median standard error."""
    counts = np.random.default_rng(3).poisson(20, grid.shape)
    rows, cols = np.indices(grid.shape)
    columns = [np.repeat(rows.ravel(), counts.ravel()), np.repeat(cols.ravel(), counts.ravel())]
    domain = ProductDomain([Domain.integers(0, grid.shape[0] - 1), Domain.integers(0, grid.shape[1] - 1)])
    aware = dprange.release_grid(columns, domain, 1.0, mechanism="dawa_pruned", rng=1)
    draw(plot.plot_heatmap, aware)
    draw(plot.plot_heatmap, grid)
    assert "No error bars: the estimate has a data-dependent bias." in drawn[0][3] and "nan" not in drawn[0][3]
    assert "Cell standard error about" in drawn[1][3]


def test_groups_one_colour_and_one_legend_entry_per_group(ages, drawn):
    other = dprange.release(
        np.random.default_rng(5).integers(30, 60, 500), ages.domain, 0.5, mechanism="hierarchical", rng=2
    )
    draw(plot.plot_groups, {"men": ages, "women": other}, column="age")
    _, ax, title, caption = drawn[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["men", "women"]
    assert [line.get_color() for line in ax.lines] == list(plot_style.GROUP_COLOURS[:2])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), np.concatenate([[0.0], other.cdf().value]))
    assert title == "Cumulative distribution of age by group" and "ε = 0.5" in caption
    draw(plot.plot_groups, {"men": ages, "women": other}, kind="histogram")
    np.testing.assert_allclose(drawn[-1][1].lines[0].get_ydata()[:-1], ages.histogram().value)
    with pytest.raises(dprange.ParameterError, match="kind"):
        plot.plot_groups({"a": ages}, io.BytesIO(), kind="pie")


def test_one_style_for_every_figure(ages, grid, drawn):
    draw(plot.plot_cdf, ages)
    draw(plot.plot_histogram, ages)
    draw(plot.plot_groups, {"all": ages})
    draw(plot.plot_heatmap, grid)
    sizes = [tuple(fig.get_size_inches()) for fig, *_ in drawn]
    assert sizes[:3] == [plot_style.FIGSIZE] * 3 and sizes[3] == plot_style.HEATMAP_FIGSIZE
    assert {fig.dpi for fig, *_ in drawn} == {plot_style.DPI}
    for _, ax, title, caption in drawn:
        assert ax.title.get_fontweight() == "bold" and ax.title.get_fontsize() == plot_style.RC["axes.titlesize"]
        assert ax.get_title(loc="left") == title and caption.startswith("Private estimate")


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
    plot.plot_bars(rel, buffer, alpha=0.1)
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
    plot.plot_heatmap(rel, io.BytesIO(), labels=("age", "sex"))
    ax = figures[0].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Male", "Female"]
    np.testing.assert_allclose(ax.get_yticks(), [0.5, 1.5])
    np.testing.assert_allclose(ax.collections[0].get_array().reshape(2, 3), rel.counts.T)
