"""dawa_pruned (dprange.data_aware.pruned_hilbert): DAWA over the Hilbert order with the buckets
whose estimate is below a threshold times its standard error set to zero and the rest scaled back
to the total, checked as that very computation on DAWA's release with the same seed (standard
errors from the explicit covariance of the bucket estimate), the pruning against explicit sums,
its privacy as post-processing of DAWA's release, its error by Monte-Carlo beside DAWA on few
records heaped in a corner and on a smooth blob, and its bootstrap against the spread of releases."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import HEAVY_HIGHS as HIGHS
from _helpers import HEAVY_LOWS as LOWS
from _helpers import HEAVY_SIDE as SIDE
from _helpers import assert_bootstrap_follows_releases, heaped_grid, heavy_cells_grid

import dprange
from dprange import DAWAHilbert, ParameterError, PrunedDAWAHilbert
from dprange.data_aware.grid import DataAwareGridRelease
from dprange.data_aware.hilbert import hilbert_sequence
from dprange.data_aware.pruned_hilbert import marked_buckets, pruned_totals
from dprange.data_aware.spatial_trees import box_sums, summed_area
from dprange.registry import GRID_MECHANISMS
from dprange.workloads.rectangles import random_rectangles


def test_pruned_totals_zero_the_marked_buckets_and_scale_the_rest_to_the_total():
    totals = np.array([10.0, -2.0, 3.0, 30.0])
    marked = np.array([False, True, True, False])
    np.testing.assert_allclose(pruned_totals(totals, marked, 41.0), np.array([10.0, 0.0, 0.0, 30.0]) * 41.0 / 40.0)
    np.testing.assert_allclose(pruned_totals(totals, marked, -3.0), np.zeros(4))  # a negative total: 0
    assert pruned_totals(np.zeros(3), np.array([True, False, False]), 1.0) is None  # the rest sums to nothing


def test_marked_buckets_are_the_longest_run_of_low_buckets_whose_sum_stands_below_its_standard_error():
    """Below 3 standard errors (1, 1, 1, 2 and 1): buckets 0-3, ratios -1, 2.5, 0.5 and 0.5; in
    order 0, 2, 3, 1 their running sums -1, -0.5, 0.5 and 3 against the standard errors of the
    nested sums, sqrt(w' C w) = 1, 1 (C_02 = -0.5), 2.24 and 2.45: at a joint threshold of 2 all
    four pass, at 0.4 the first three (3 > 0.98), at 0.2 the first two (0.5 > 0.45)."""
    totals = np.array([-1.0, 2.5, 0.5, 1.0, 9.0])
    covariance = np.diag([1.0, 1.0, 1.0, 4.0, 1.0])
    covariance[0, 2] = covariance[2, 0] = -0.5
    deviations = np.sqrt(np.diag(covariance))

    def nested(order):
        indicators = np.tril(np.ones((order.size, order.size)))
        rows = np.zeros((order.size, totals.size))
        rows[:, order] = indicators
        return np.einsum("ki,ij,kj->k", rows, covariance, rows)

    def expected(joint):
        order = np.array([0, 2, 3, 1])  # ratios -1, 0.5, 0.5 (stable: bucket 2 first), 2.5
        sums = np.cumsum(totals[order])
        passing = np.flatnonzero(sums < joint * np.sqrt(nested(order)))
        out = np.zeros(totals.size, dtype=bool)
        if passing.size:
            out[order[: passing[-1] + 1]] = True
        return out

    for joint in (2.0, 0.4, 0.2, 0.0):
        np.testing.assert_array_equal(marked_buckets(totals, deviations, 3.0, joint, nested), expected(joint))
    for joint, marked in ((2.0, [0, 1, 2, 3]), (0.4, [0, 2, 3]), (0.2, [0, 2])):
        np.testing.assert_array_equal(np.flatnonzero(marked_buckets(totals, deviations, 3.0, joint, nested)), marked)
    assert not marked_buckets(totals, deviations, 0.0, 2.0, nested)[1:].any()  # threshold 0: the negative one
    assert not marked_buckets(np.array([5.0, 6.0]), np.ones(2), 3.0, 2.0, nested).any()  # none below
    light = np.array([0.5, 1.0, 9.0, 9.0, 9.0])  # two below, their sums 0.5 and 1.5: no run below 0
    assert not marked_buckets(light, np.ones(5), 3.0, 0.0, nested).any()


def bucket_covariance(reduced, size: int) -> np.ndarray:
    """The covariance of the bucket estimates, explicitly: Var(e_i + e_j) = C_ii + C_jj + 2 C_ij."""
    eye = np.eye(size)
    diagonal = np.array([reduced.query_variance(row) for row in eye])
    pairs = np.array([[reduced.query_variance(eye[i] + eye[j]) for j in range(size)] for i in range(size)])
    return (pairs - diagonal[:, None] - diagonal[None, :]) / 2


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("threshold", [0.0, 2.0])
def test_release_is_dawas_with_its_buckets_below_the_threshold_pruned(neighbours, threshold):
    """The cells are DAWA's release with the same seed, its buckets (runs of the Hilbert order)
    whose estimated total is below the threshold times its standard error (from the explicit
    covariance of the bucket estimate) set to zero, as their sum is below two standard errors of
    it (the joint test, with that covariance), and the rest multiplied by the total (DAWA's
    estimated one, or N under replace) over their sum; the private steps are DAWA's."""
    x = heavy_cells_grid()
    mech = PrunedDAWAHilbert(ratio=0.3, neighbours=neighbours, threshold=threshold)
    r = mech.release(x, 0.8, rng=7)
    base = DAWAHilbert(ratio=0.3, neighbours=neighbours).release(x, 0.8, rng=7)
    inner = base._noise.inner
    _, _, starts = inner._reduced
    ends = np.append(starts[1:], x.size)
    sequence = hilbert_sequence(x.shape)
    in_order = base.counts.ravel()[sequence]
    totals = np.array([in_order[a:b].sum() for a, b in zip(starts, ends)])
    covariance = bucket_covariance(inner.noise_only_error_model.reduced, starts.size)
    sd = np.sqrt(np.diag(covariance))
    below = np.flatnonzero(totals < threshold * sd)
    order = below[np.argsort(totals[below] / sd[below], kind="stable")]
    sums = np.cumsum(totals[order])
    nested = np.array([covariance[np.ix_(order[: k + 1], order[: k + 1])].sum() for k in range(order.size)])
    passing = np.flatnonzero(sums < 2.0 * np.sqrt(nested))
    kept = np.ones(starts.size, dtype=bool)
    kept[order[: passing[-1] + 1]] = False
    total = x.sum() if neighbours == "replace" else totals.sum()
    assert 0 < kept.sum() < starts.size
    expected_in_order = np.zeros(x.size)
    for a, b, t, keep in zip(starts, ends, totals, kept):
        if keep:
            expected_in_order[a:b] = t * total / totals[kept].sum() / (b - a)
    expected = np.empty(x.size)
    expected[sequence] = expected_in_order
    np.testing.assert_allclose(r.counts.ravel(), expected, rtol=1e-10, atol=1e-9)
    assert r.counts.sum() == pytest.approx(total, rel=1e-9)
    assert r.parameters["private_steps"] == base.parameters["private_steps"] and r.epsilon == base.epsilon
    assert r.parameters["kept_buckets"] == kept.sum() and r.parameters["buckets"] == starts.size
    assert r.parameters["threshold"] == threshold and r.parameters["joint"] == 2.0 and r.mechanism == "dawa_pruned"


def test_on_a_smooth_blob_the_joint_test_keeps_light_buckets_that_hold_records():
    """On a smooth blob at epsilon 0.1 many light buckets are each below three standard errors but
    hold records: in each of six releases the joint test keeps more of them than the threshold
    alone (a joint threshold of 10^9), which empties all but a few."""
    blob = blob_grid()
    for seed in range(6):
        with_test = PrunedDAWAHilbert(ratio=0.25).release(blob, 0.1, rng=seed).parameters["kept_buckets"]
        alone = PrunedDAWAHilbert(ratio=0.25, joint=1e9).release(blob, 0.1, rng=seed).parameters["kept_buckets"]
        assert with_test > alone


def test_where_no_bucket_stands_out_the_release_is_dawas():
    """A grid with too few records for any bucket to reach three standard errors keeps DAWA's
    release as it is (every bucket counted as kept)."""
    few = np.zeros((SIDE, SIDE), dtype=np.int64)
    few[3, 4] = 1
    r = PrunedDAWAHilbert().release(few, 0.5, rng=5)
    np.testing.assert_array_equal(r.counts, DAWAHilbert().release(few, 0.5, rng=5).counts)
    assert r.parameters["kept_buckets"] == r.parameters["buckets"]


def test_it_reads_the_counts_only_through_dawas_release(monkeypatch):
    """Post-processing (its privacy is DAWA's): with DAWAHilbert.release made to release another
    grid's DAWA output, the pruned release is that grid's, whatever counts it was given."""
    x, y = heavy_cells_grid(), np.random.default_rng(3).poisson(5, (SIDE, SIDE))
    expected = PrunedDAWAHilbert().release(y, 0.5, rng=2).counts
    original = DAWAHilbert.release

    def release_of_y(self, counts, epsilon, **kwargs):
        return original(self, y, epsilon, **kwargs)

    monkeypatch.setattr(DAWAHilbert, "release", release_of_y)
    np.testing.assert_array_equal(PrunedDAWAHilbert().release(x, 0.5, rng=2).counts, expected)


def blob_grid() -> np.ndarray:
    """1,000 records on 64 x 64 from a wide Gaussian blob (smooth, as STROKE)."""
    i, j = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    p = np.exp(-((i - 30) ** 2 + (j - 36) ** 2) / (2 * 12.0**2))
    return np.random.default_rng(0).multinomial(1000, (p / p.sum()).ravel()).reshape(64, 64)


def mean_errors(x, trials=20) -> dict[str, float]:
    """Mean squared error over 200 random rectangles of DAWA and dawa_pruned at epsilon 0.1, the
    same seeds (the same partition and measurements)."""
    rectangles = random_rectangles(x.shape, 200, rng=1)
    truth = box_sums(summed_area(x.astype(float)), rectangles.lows, rectangles.highs)
    mechs = {"dawa": DAWAHilbert(ratio=0.25), "pruned": PrunedDAWAHilbert(ratio=0.25)}
    out: dict[str, list[float]] = {k: [] for k in mechs}
    for seed in range(trials):
        for key, mech in mechs.items():
            cells = mech.release(x, 0.1, rng=seed).counts
            out[key].append(np.mean((box_sums(summed_area(cells), rectangles.lows, rectangles.highs) - truth) ** 2))
    return {k: float(np.mean(v)) for k, v in out.items()}


def test_on_few_records_heaped_in_a_corner_pruning_removes_most_of_dawas_error():
    """The heaped grid at epsilon 0.1 (0.024 records per cell times epsilon), 20 releases: the
    pruned release has under half DAWA's error on random rectangles; on a smooth blob of as many
    records, less than DAWA's (the joint test keeps the light buckets that hold records)."""
    heaped = mean_errors(heaped_grid())
    assert heaped["pruned"] < 0.5 * heaped["dawa"]
    blob = mean_errors(blob_grid())
    assert blob["pruned"] < blob["dawa"]


def test_the_bootstrap_re_prunes_and_follows_the_spread_of_releases():
    """The bootstrap re-draws DAWA's bucket measurements around the released estimate and re-runs
    the marks and the scale: on the heavy cells within 30% of the spread of 40 releases (with
    DAWA's partition drawn again in each release); no noise-only error bars either."""
    assert_bootstrap_follows_releases(PrunedDAWAHilbert, heavy_cells_grid(), 2.0, LOWS, HIGHS, rtol=0.3)
    r = PrunedDAWAHilbert().release(heavy_cells_grid(), 2.0, rng=0)
    assert isinstance(r, DataAwareGridRelease)
    with pytest.raises(ParameterError, match="bootstrap"):
        r.noise_only_stderr(LOWS, HIGHS)


def test_registered_saved_validated_and_released_from_records():
    """Registered as a 2-D mechanism, threshold 3 by default and declared before the shared
    parameters; a release saves and loads with its parameters; a bad threshold is refused; and
    ``release_grid`` by name releases the same cells from the records."""
    assert GRID_MECHANISMS["dawa_pruned"].factory is PrunedDAWAHilbert and PrunedDAWAHilbert().threshold == 3.0
    assert PrunedDAWAHilbert().joint == 2.0
    mech = PrunedDAWAHilbert(threshold=2.5)
    names = list(mech.parameters())
    assert names.index("threshold") < names.index("neighbours")
    r = mech.release(heavy_cells_grid(), 1.0, rng=4)
    back = DataAwareGridRelease.from_json(r.to_json())
    np.testing.assert_array_equal(back.counts, r.counts)
    assert back.parameters["threshold"] == 2.5 and back.parameters["kept_buckets"] == r.parameters["kept_buckets"]
    assert json.loads(r.to_json())["provenance"]["mechanism"] == "dawa_pruned"
    for bad in (-1.0, float("nan"), True, "3"):
        with pytest.raises(ParameterError, match="threshold"):
            PrunedDAWAHilbert(threshold=bad)
        with pytest.raises(ParameterError, match="joint"):
            PrunedDAWAHilbert(joint=bad)
    domain = dprange.ProductDomain([dprange.Domain.integers(0, SIDE - 1)] * 2)
    rows, cols = np.nonzero(heavy_cells_grid())
    weights = heavy_cells_grid()[rows, cols]
    columns = [np.repeat(rows, weights), np.repeat(cols, weights)]
    released = dprange.release_grid(columns, domain, 1.0, mechanism="dawa_pruned", threshold=2.5, rng=4)
    assert released.mechanism == "dawa_pruned"
    np.testing.assert_array_equal(released.counts, r.counts)
