"""dprange.api.quantile_release: dprange.quantiles spends at most epsilon (private bounds, noisy
count, histogram route), chooses from public facts only, refuses missing bounds and bad values,
covers on awkward data, and records what it spent and at which precision."""

from __future__ import annotations

import json
import warnings
import zlib

import numpy as np
import pytest
from scipy import stats

import dprange
from dprange import DataError, ParameterError
from dprange.privacy.session import Session
from dprange.quantile_mechanisms import bins as qb
from dprange.quantile_mechanisms import joint_exp

LEVELS_19 = np.arange(1, 20) / 20


def test_a_saved_session_names_the_noisy_count_and_bounds_spends(tmp_path):
    """The ledger's entry holds the total; its description names the parts spent on private
    bounds and on the noisy record count, so a saved session shows that a count was drawn."""
    path = tmp_path / "ledger.json"
    session = Session.open(path, 2.0)
    values = np.random.default_rng(1).normal(30, 5, 600)
    result = dprange.quantiles(
        values, LEVELS_19, 0.5, bounds="private", bounds_share=0.1, method="histogram", rng=2, session=session
    )
    assert result.count.source == "noisy count" and result.count_epsilon == 0.5 * 0.05
    entry = json.loads(path.read_text())["entries"][0]
    assert entry["epsilon"] == 0.5
    assert entry["what"] == (
        f"quantiles at 19 levels (of which bounds epsilon {0.5 * 0.1!r}, record count epsilon {0.5 * 0.05!r})"
    )
    # public n (replace), public bounds: nothing but the quantiles is spent, and the entry says so
    dprange.quantiles(values, LEVELS_19, 0.5, bounds=(0, 60), neighbours="replace", rng=3, session=session)
    assert Session.open(path).entries[1].what == "quantiles at 19 levels"


def test_the_former_api_histogram_bins_does_not_silently_change_meaning():
    """dprange.api.histogram_bins(epsilon) was documented (256 bins at epsilon 0.1); the rule
    of n x epsilon took over that name in dprange.api and answered 8 to the same call.  The
    old name is gone (an AttributeError, not a different number)."""
    import dprange.api

    assert not hasattr(dprange.api, "histogram_bins")
    assert qb.epsilon_only_bins(0.1) == 256 and qb.histogram_bins(0.1) == 8


def test_a_histogram_route_release_warns_nothing():
    """The budget search scores a too-small level budget as inf; its numerical gradient met
    inf - inf and numpy printed "invalid value encountered in subtract" to the user."""
    rng = np.random.default_rng(5)
    values = rng.uniform(-5, 5, 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = dprange.quantiles(
            values, np.arange(1, 100) / 100, 0.1, bounds=(-5, 5), method="histogram", rng=rng, bins=128, n_max=1000
        )
    assert result.values.shape == (99,)


EXTENDED = joint_exp.extended_precision_available()
needs_extended = pytest.mark.skipif(not EXTENDED, reason="this platform's long double is not wider than double")


@needs_extended
def test_quantiles_records_the_precision_and_the_charge():
    """dprange.quantiles with JointExp: the result (and its JSON) names the working precision
    and the epsilon the mechanism ran at; 99 levels at epsilon 0.1 and n_max = 10^6 run in
    extended precision, 2 levels in double."""
    values = np.random.default_rng(3).uniform(0, 1e5, 200)
    levels = np.arange(1, 100) / 100
    many = dprange.quantiles(values, levels, 0.1, bounds=(0, 1e5), method="joint_exp", rng=2, n_max=10**6)
    assert many.float_error.precision == "extended" and many.float_error.charge < 1e-5
    few = dprange.quantiles(values, [0.25, 0.75], 0.1, bounds=(0, 1e5), method="joint_exp", rng=2, n_max=10**6)
    assert few.float_error.precision == "double"
    record = many.to_dict()["float_error"]
    assert record["precision"] == "extended" and record["run_epsilon"] == many.float_error.run_epsilon
    assert record["epsilon"] == 0.1 and record["n_max"] == 10**6
    hist = dprange.quantiles(values, [0.5], 0.1, bounds=(0, 1e5), method="histogram", rng=2, n_max=32561)
    assert hist.float_error is None and hist.to_dict()["float_error"] is None


# ----------------------------------------------------------------------------- the entry point


def test_quantiles_with_private_bounds_records_the_spend():
    rng = np.random.default_rng(9)
    values = rng.normal(40, 5, 4000)
    result = dprange.quantiles(
        values, [0.25, 0.5, 0.75], 1.0, bounds="private", bounds_share=0.2, method="approximate", rng=rng
    )
    assert result.bounds_source == "private" and result.bounds == (0.0, 64.0)
    assert result.bounds_epsilon == pytest.approx(0.2) and result.epsilon == 1.0
    assert np.all(np.abs(result.values - np.quantile(values, [0.25, 0.5, 0.75])) < 0.5)
    assert not result.has_intervals
    with pytest.raises(ParameterError, match="no honest confidence intervals"):
        result.confidence_interval()
    assert result.to_dict()["bounds"] == {
        "lower": 0.0,
        "upper": 64.0,
        "source": "private",
        "epsilon": pytest.approx(0.2),
    }


def test_quantiles_spend_never_exceeds_epsilon():
    """The remaining budget is rounded down until bounds + rest <= epsilon exactly."""
    rng = np.random.default_rng(10)
    result = dprange.quantiles(rng.normal(0, 1, 3000) + 10, [0.5], 0.3, bounds="private", bounds_share=0.1, rng=rng)
    assert result.bounds_epsilon == 0.3 * 0.1


def test_quantiles_histogram_route_has_intervals_that_cover():
    rng = np.random.default_rng(11)
    values = rng.integers(0, 50, 2000)
    truth = np.sort(values)[np.ceil(np.array([0.1, 0.5, 0.9]) * 2000).astype(int) - 1]
    result = dprange.quantiles(values, [0.1, 0.5, 0.9], 1.0, bounds=(0, 63), integer=True, method="histogram", rng=rng)
    lower, upper = result.confidence_interval(0.05, simultaneous=True)
    assert np.all((lower <= truth) & (truth <= upper))
    assert result.to_dict()["intervals"]["alpha"] == 0.05


def test_auto_uses_public_facts_only():
    """Same public facts, different data: the same method."""
    a = dprange.quantiles(np.zeros(100), [0.5], 1.0, bounds=(0, 10), rng=0)
    b = dprange.quantiles(np.full(5000, 9.0), [0.5], 1.0, bounds=(0, 10), rng=0)
    assert a.method == b.method and a.reason == b.reason != ""


def test_quantiles_refuses_missing_bounds_and_bad_values():
    with pytest.raises(ParameterError, match="bounds"):
        dprange.quantiles([1.0, 2.0], [0.5], 1.0)
    with pytest.raises(DataError, match="NaN"):
        dprange.quantiles([1.0, float("nan")], [0.5], 1.0, bounds=(0, 3))
    with pytest.raises(ParameterError, match="method"):
        dprange.quantiles([1.0], [0.5], 1.0, bounds=(0, 3), method="median")
    with pytest.raises(ParameterError, match="bounds_share"):
        dprange.quantiles([1.0], [0.5], 1.0, bounds="private", bounds_share=1.5)


def test_wide_integer_bounds_use_real_cells_and_integer_outputs():
    rng = np.random.default_rng(13)
    values = rng.integers(0, 1000, 3000)
    result = dprange.quantiles(values, [0.5], 2.0, bounds=(0, 2**40), integer=True, method="approximate", rng=rng)
    assert result.values[0] == np.floor(result.values[0]) and abs(result.values[0] - np.median(values)) < 2**40 / 2**19


QUANTILES_COVERAGE_CASES = {
    # every record on one bin edge of the default domain at epsilon 0.1 (8 bins at n = 300; -1.25 is
    # an edge of (-5, 5) cut into any 2^k >= 8 bins; the 256 bins of the epsilon-only rule had -1.09)
    "point-mass-on-edge": (lambda rng: np.full(300, -1.25), (-5.0, 5.0), False),
    # integers on a real domain: atoms at every integer
    "integers-on-real-bounds": (lambda rng: rng.integers(-3, 4, 400).astype(float), (-5.0, 5.0), False),
    # integer data on integer bounds: one bin per value
    "integer-bounds": (lambda rng: np.clip(np.round(rng.normal(40, 12, 400)), 0, 100), (0.0, 100.0), True),
}


@pytest.mark.parametrize("case", sorted(QUANTILES_COVERAGE_CASES))
def test_quantiles_histogram_route_covers_on_awkward_data(case):
    """dprange.quantiles' intervals (the default bins at epsilon 0.1) hold the true quantile in
    at least 95% of 100 releases per level, and all three levels at once in 95% (simultaneous),
    up to Monte-Carlo error (fails when P(Binomial(100, 0.95) <= hits) < 0.001)."""
    make, bounds, integer = QUANTILES_COVERAGE_CASES[case]
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    values = make(rng)
    levels = np.array([0.1, 0.5, 0.9])
    ordered = np.sort(values)
    truth = ordered[np.ceil(levels * ordered.size - 1e-9).astype(int) - 1]
    trials, pointwise, together = 100, np.zeros(3), 0
    for _ in range(trials):
        result = dprange.quantiles(values, levels, 0.1, bounds=bounds, integer=integer, method="histogram", rng=rng)
        lower, upper = result.confidence_interval(0.05)
        pointwise += (lower <= truth) & (truth <= upper)
        lower, upper = result.confidence_interval(0.05, simultaneous=True)
        together += bool(np.all((lower <= truth) & (truth <= upper)))
    floor = stats.binom.ppf(1e-3, trials, 0.95)
    assert np.all(pointwise >= floor) and together >= floor, (pointwise, together)


def test_quantiles_auto_runs_jointexp_at_ten_levels_with_n_max():
    values = np.random.default_rng(3).normal(0, 1, 400)
    result = dprange.quantiles(values, np.arange(1, 11) / 11, 1.0, bounds=(-5, 5), n_max=10_000, rng=4)
    assert result.method == "joint_exp" and "256 bins > m^2" in result.reason
    assert result.values.shape == (10,) and np.all(np.diff(result.values) >= 0)
