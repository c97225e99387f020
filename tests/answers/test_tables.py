"""dprange.answers.tables: Release.to_frame / to_pandas / to_csv and GridRelease.to_frame /
to_csv (issue 34, item 3): every table holds the release's own answers, and the CSV read back
by pandas is the frame (the round trip)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from dprange import Domain, Hierarchical
from dprange.errors import ParameterError
from dprange.mechanisms.grid import Kronecker

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def interval():
    counts = np.random.default_rng(3).poisson(20, 40)
    return Hierarchical(4).release(counts, 1.0, rng=4, domain=Domain.interval(0.0, 5.0, 40))


@pytest.fixture(scope="module")
def integers():
    counts = np.random.default_rng(1).poisson(20, 50)
    return Hierarchical(4, inference="nnls").release(counts, 1.0, rng=2, domain=Domain.integers(10, 59))


def round_trip(release, table, **options):
    frame = release.to_pandas(table, **options)
    back = pd.read_csv(io.StringIO(release.to_csv(table=table, **options)))
    pd.testing.assert_frame_equal(back, frame, check_dtype=False, rtol=0, atol=0)
    return frame


def test_histogram_table_is_the_release_histogram_and_round_trips(interval):
    frame = round_trip(interval, "histogram", alpha=0.1)
    answer = interval.histogram()
    lower, upper = answer.confidence_interval(0.1)
    np.testing.assert_array_equal(frame["bin"], np.arange(40))
    np.testing.assert_array_equal(frame["bin_lower"], interval.domain.edges[:-1])
    np.testing.assert_array_equal(frame["bin_upper"], interval.domain.edges[1:])
    np.testing.assert_array_equal(frame["count"], answer.value)
    np.testing.assert_array_equal(frame["stderr"], answer.stderr)
    np.testing.assert_array_equal(frame["ci_lower"], lower)
    np.testing.assert_array_equal(frame["ci_upper"], upper)


def test_cdf_table_is_the_cdf_with_its_band(interval):
    frame = round_trip(interval, "cdf")
    lower, upper = interval.cdf_band(0.05)
    np.testing.assert_array_equal(frame["at"], interval.domain.edges[1:])
    np.testing.assert_array_equal(frame["cdf"], interval.cdf().value)
    np.testing.assert_array_equal(frame["stderr"], interval.cdf().stderr)
    np.testing.assert_array_equal(frame["ci_lower"], lower)
    np.testing.assert_array_equal(frame["ci_upper"], upper)


@pytest.mark.parametrize("simultaneous", [False, True])
def test_quantile_table_is_the_release_quantiles(interval, simultaneous):
    levels = [0.05, 0.5, 0.99]
    frame = round_trip(interval, "quantiles", q=levels, simultaneous=simultaneous)
    answer = interval.quantile(levels)
    lower, upper = answer.confidence_interval(0.05, simultaneous=simultaneous)
    np.testing.assert_array_equal(frame["q"], levels)
    np.testing.assert_array_equal(frame["value"], answer.value)
    assert list(frame["placement"]) == list(answer.placement)
    np.testing.assert_array_equal(frame["bin_lower"], answer.bin_lower)
    np.testing.assert_array_equal(frame["ci_lower"], lower)
    np.testing.assert_array_equal(frame["ci_upper"], upper)
    assert len(interval.to_frame("quantiles")) == 9  # the deciles by default


def test_integer_domains_and_releases_without_error_bars(integers):
    """Integer bins are their integers; NNLS has no exact error bars: NaN, not invented numbers."""
    frame = round_trip(integers, "histogram")
    np.testing.assert_array_equal(frame["bin_lower"], np.arange(10, 60))
    np.testing.assert_array_equal(frame["bin_upper"], np.arange(10, 60))
    np.testing.assert_array_equal(frame["count"], integers.histogram().value)
    assert frame[["stderr", "ci_lower", "ci_upper"]].isna().all().all()
    assert round_trip(integers, "quantiles")[["ci_lower", "ci_upper"]].isna().all().all()


def test_grid_cells_table_names_its_axes_and_round_trips():
    counts = np.random.default_rng(7).integers(0, 9, size=(4, 3))
    release = Kronecker([2, "haar"]).release(counts, 1.0, rng=5).with_labels(["age", "hours"])
    frame = release.to_frame()
    back = pd.read_csv(io.StringIO(release.to_csv()))
    pd.testing.assert_frame_equal(back, frame, check_dtype=False, rtol=0, atol=0)
    assert list(frame.columns[:2]) == ["age_bin", "hours_bin"]
    np.testing.assert_allclose(frame["count"], release.counts.ravel(), rtol=0, atol=1e-12)
    cells = np.indices((4, 3)).reshape(2, -1).T
    np.testing.assert_array_equal(frame["count"], release.rectangle(cells, cells).value)
    np.testing.assert_allclose(frame["stderr"], release.rectangle(cells, cells).stderr, rtol=1e-12)


def test_unknown_tables_are_refused(interval):
    with pytest.raises(ParameterError, match="table must be one of histogram, cdf, quantiles"):
        interval.to_frame("cells")
