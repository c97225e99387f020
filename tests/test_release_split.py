"""Release split by job: Provenance record, answers in domain units, bootstrap plumbing,
CDF/quantiles as post-processing (dprange.answers.cdf), provenance in the saved JSON."""

import json

import numpy as np
import pytest

from dprange import DataError, Domain, Flat, Hierarchical, ParameterError, Release, Wavelet
from dprange.answers.cdf import CumulativeEstimate
from dprange.answers.provenance import Provenance


@pytest.fixture(scope="module")
def integer_release():
    """Hierarchical(4) on the integers 10..59 (50 bins)."""
    counts = np.random.default_rng(1).poisson(20, 50)
    return Hierarchical(4).release(counts, 1.0, rng=2, domain=Domain.integers(10, 59))


@pytest.fixture(scope="module")
def interval_release():
    """Wavelet on [0, 5] in 40 bins of width 0.125 (edges exact in binary)."""
    counts = np.random.default_rng(3).poisson(20, 40)
    return Wavelet(neighbours="replace").release(counts, 1.0, rng=4, domain=Domain.interval(0.0, 5.0, 40))


# ----------------------------------------------------------------------------- provenance
def test_provenance_round_trips_through_json_and_normalises_types():
    p = Provenance(
        "hierarchical",
        {"branching": 4},
        epsilon=0.5,
        delta=1e-6,
        neighbours="replace",
        total=100,
        inference="l1",
        inference_options={"alpha": 1.0},
        noise="gaussian",
        seeded=True,
        noise_scales=[1.5, 2.0],
    )
    assert p.total == 100.0 and isinstance(p.total, float)
    assert p.noise_scales == (1.5, 2.0)
    assert Provenance.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert not p.exact_error_bars and Provenance("flat").exact_error_bars
    with pytest.raises(AttributeError):
        p.epsilon = 2.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(epsilon=-1), "epsilon"),
        (lambda d: d.update(neighbours="swap"), "neighbours"),
        (lambda d: d.update(inference="mle"), "inference"),
        (lambda d: d.update(noise_scales="1,2"), "noise scales"),
        (lambda d: d.update(seeded="yes"), "seeded"),
        (lambda d: d.update(colour="blue"), "unknown fields"),
        (lambda d: d.update(mechanism=3), "mechanism"),
    ],
)
def test_malformed_provenance_is_a_data_error(change, message):
    data = Provenance("flat", epsilon=1.0).to_dict()
    change(data)
    with pytest.raises(DataError, match=message):
        Provenance.from_dict(data)


def test_release_keeps_the_old_attribute_names(integer_release):
    rel = integer_release
    p = rel.provenance
    assert isinstance(p, Provenance)
    assert (rel.mechanism, rel.epsilon, rel.delta, rel.neighbours) == ("hierarchical", 1.0, 0.0, "add_remove")
    assert rel.public_total is None and rel.inference == "gls" and rel.noise == "discrete_laplace"
    assert rel.seeded is True and rel.noise_scales == list(p.noise_scales) and len(rel.noise_scales) == 3
    assert rel.parameters["branching"] == 4 and rel.inference_options == {}
    assert rel.measurements is not None


def test_release_needs_a_provenance_record():
    with pytest.raises(ParameterError, match="Provenance"):
        Release(np.zeros(3), None, {"mechanism": "flat"})  # type: ignore[arg-type]


def test_provenance_is_saved_and_checked_against_the_legacy_fields(integer_release):
    data = integer_release.to_dict()
    assert data["dprange_release"] == 2
    assert Provenance.from_dict(data["provenance"]) == Provenance.from_dict(
        json.loads(json.dumps(integer_release.provenance.to_dict()))
    )
    loaded = Release.from_dict(data)
    assert loaded.provenance == Provenance.from_dict(data["provenance"])
    assert loaded.measurements is None
    # a format-2 file written before the record existed still loads, to the same provenance
    older = {k: v for k, v in data.items() if k != "provenance"}
    assert Release.from_dict(older).provenance == loaded.provenance
    # a record that disagrees with the privacy fields is corruption
    data["provenance"]["epsilon"] = 2.0
    with pytest.raises(DataError, match="provenance disagrees"):
        Release.from_dict(data)


def test_inference_options_are_kept_through_a_file():
    counts = np.random.default_rng(5).poisson(10, 16)
    rel = Flat(inference="l1", inference_options={"alpha": 0.5}).release(counts, 1.0, rng=1)
    assert rel.inference_options == {"alpha": 0.5}
    assert Release.from_json(rel.to_json()).inference_options == {"alpha": 0.5}


# ----------------------------------------------------------------------------- bootstrap
def test_bootstrap_without_measurements_says_what_it_needs(integer_release):
    rel = Release(integer_release.estimate, integer_release.error_model, integer_release.provenance)
    with pytest.raises(ParameterError, match="bootstrap needs the mechanism's measurements"):
        rel.bootstrap(0, 3, reps=2, rng=0)


def test_bootstrap_is_reproducible_with_a_seed(integer_release):
    a = integer_release.bootstrap([0, 5], [49, 20], reps=20, rng=9)
    b = integer_release.bootstrap([0, 5], [49, 20], reps=20, rng=9)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (2,) and np.all(a > 0)


# ----------------------------------------------------------------------------- CDF module
def test_cdf_and_quantiles_are_post_processing_of_estimate_model_and_provenance(interval_release):
    rel = interval_release
    cum = CumulativeEstimate(rel.estimate, rel.error_model, rel.provenance, rel.domain)
    levels = np.linspace(0.1, 0.9, 9)
    np.testing.assert_array_equal(cum.cdf().value, rel.cdf().value)
    np.testing.assert_array_equal(cum.cdf().stderr, rel.cdf().stderr)
    np.testing.assert_array_equal(cum.quantile(levels).value, rel.quantile(levels).value)
    np.testing.assert_array_equal(
        cum.quantile(levels).confidence_interval(0.1), rel.quantile(levels).confidence_interval(0.1)
    )
    np.testing.assert_array_equal(cum.cdf_band(0.05), rel.cdf_band(0.05))


# ----------------------------------------------------------------------------- domain units
def test_count_between_on_integers_is_the_range_of_those_bins(integer_release):
    rel = integer_release
    assert rel.bins_of(10, 59) == (0, 49)
    assert rel.bins_of(12, 12) == (2, 2)
    assert rel.bins_of(20.0, 30) == (10, 20)  # integral floats are integers
    mine, bins = rel.count_between(20, 30), rel.range(10, 20)
    assert mine.value == bins.value == pytest.approx(rel.estimate[10:21].sum())
    assert mine.stderr == bins.stderr > 0
    assert mine.confidence_interval(0.05) == bins.confidence_interval(0.05)
    lo, hi = rel.bins_of(np.array([10, 15]), np.array([11, 59]))
    np.testing.assert_array_equal(lo, [0, 5])
    np.testing.assert_array_equal(hi, [1, 49])
    np.testing.assert_array_equal(rel.count_between([10, 15], [11, 59]).stderr, rel.range([0, 5], [1, 49]).stderr)


def test_count_between_on_integers_refuses_what_it_cannot_count(integer_release):
    rel = integer_release
    for a, b, message in [
        (9, 20, "an integer from 10 to 59"),
        (10, 60, "an integer from 10 to 59"),
        (10.5, 20, "must be an integer"),
        (30, 20, "a <= b"),
        ("10", 20, "must be a number"),
        (None, 20, "must be a number"),
        (float("nan"), 20, "finite"),
    ]:
        with pytest.raises(ParameterError, match=message):
            rel.count_between(a, b)


def test_count_between_on_intervals_needs_bin_edges(interval_release):
    rel = interval_release
    edges = rel.domain.edges
    assert rel.bins_of(0.0, 5.0) == (0, 39)
    assert rel.bins_of(1.0, 1.25) == (8, 9)
    assert rel.bins_of(edges[3] + 1e-13, edges[7]) == (3, 6)  # published float edges, to 1e-9 of a bin
    answer = rel.count_between(1.0, 2.5)
    assert answer.value == rel.range(8, 19).value
    assert answer.stderr == rel.range(8, 19).stderr
    with pytest.raises(ParameterError, match=r"1\.3 is not a bin edge.*nearest edges 1\.25 or 1\.375"):
        rel.count_between(1.3, 2.5)
    with pytest.raises(ParameterError, match="outside the domain"):
        rel.count_between(-1.0, 2.5)
    with pytest.raises(ParameterError, match="a < b"):
        rel.count_between(2.5, 2.5)


def test_count_below_is_the_prefix_below_a_value(integer_release, interval_release):
    rel = integer_release
    assert rel.count_below(10).value == 0.0 and rel.count_below(10).stderr == 0.0
    assert rel.count_below(10).confidence_interval(0.05) == (0.0, 0.0)
    below = rel.count_below(25)  # the values 10..24: bins 0..14
    assert below.value == rel.prefix(14).value and below.stderr == rel.prefix(14).stderr
    assert rel.count_below(60).value == rel.total().value  # one past the top: every record
    both = rel.count_below([10, 25])
    np.testing.assert_array_equal(both.value, [0.0, rel.prefix(14).value])
    np.testing.assert_array_equal(both.stderr, [0.0, rel.prefix(14).stderr])
    with pytest.raises(ParameterError, match="from 10 to 60"):
        rel.count_below(61)
    other = interval_release
    assert other.count_below(2.0).value == other.prefix(15).value
    assert other.count_below(2.0).stderr == other.prefix(15).stderr
    with pytest.raises(ParameterError, match="not a bin edge"):
        other.count_below(2.01)


def test_a_release_does_not_keep_its_mechanism_alive():
    """The bootstrap used to be a closure over the mechanism: the release kept it alive."""
    import gc
    import weakref

    mechanism = Hierarchical(4)
    rel = mechanism.release(np.arange(32) % 5, 1.0, rng=1)
    alive = weakref.ref(mechanism)
    del mechanism
    gc.collect()
    assert alive() is None
    assert rel.bootstrap(0, 31, reps=3, rng=0).shape == ()


def test_changing_the_mechanism_afterwards_does_not_change_the_release():
    """The bootstrap reruns the release's own inference, not the mechanism's current one."""
    mechanism = Flat()
    rel = mechanism.release(np.random.default_rng(2).poisson(3, 24), 0.5, rng=1)
    before = rel.bootstrap([0, 4], [23, 9], reps=30, rng=5)
    mechanism.inference = "nnls"
    np.testing.assert_array_equal(rel.bootstrap([0, 4], [23, 9], reps=30, rng=5), before)


def test_a_hand_built_release_with_inference_options_loads():
    """Inference options that the mechanism's parameters do not list are kept by the record
    (they are not a disagreement with the legacy fields)."""
    rel = Release(
        np.ones(4), None, Provenance("custom", epsilon=1.0, inference="nnls", inference_options={"tol": 1e-6})
    )
    loaded = Release.from_json(rel.to_json())
    assert loaded.inference_options == {"tol": 1e-6} and loaded.provenance == rel.provenance
