"""dprange.answers.grid: a k-D GridRelease answers rectangles and marginals with exact error bars,
round-trips through JSON and is never worse than the flat answers it dominates."""

import numpy as np
import pytest
from _helpers import box_matrix, every_rectangle

from dprange import DataError, Domain, ParameterError
from dprange.domain import ProductDomain
from dprange.mechanisms.grid import KDHierarchy, Kronecker, Quadtree, load_grid_release


# ----------------------------------------------------------------------------- release
def test_release_rectangles_and_marginals_with_error_bars(rng):
    shape = (4, 6)
    counts = rng.integers(0, 30, size=shape)
    rel = Kronecker([2, 3]).release(counts, 1.0, rng=5)
    lows = np.array([[0, 0], [1, 2], [3, 5]])
    highs = np.array([[3, 5], [2, 4], [3, 5]])
    ans = rel.rectangle(lows, highs)
    np.testing.assert_allclose(ans.value, box_matrix(shape, lows, highs) @ rel.counts.ravel())
    np.testing.assert_allclose(ans.variance, rel.estimate.rectangle_variance(lows, highs))
    one = rel.rectangle([1, 2], [2, 4])
    assert one.value == pytest.approx(ans.value[1]) and one.stderr == pytest.approx(ans.stderr[1])
    lower, upper = ans.confidence_interval(0.05)
    k = (upper - ans.value) / ans.stderr
    assert np.all(k > 1.96) and np.allclose(k, k[0])
    marg = rel.marginal(1)
    np.testing.assert_allclose(marg.value, rel.counts.sum(axis=0))
    Q = box_matrix(shape, np.column_stack([np.zeros(6), np.arange(6)]), np.column_stack([np.full(6, 3), np.arange(6)]))
    np.testing.assert_allclose(marg.variance, rel.estimate.query_variance(Q), rtol=1e-10)
    np.testing.assert_allclose(rel.marginal((1, 0)).value, rel.counts.T)
    with pytest.raises(ParameterError, match="0 <= lows <= highs"):
        rel.rectangle([0, 0], [4, 0])


@pytest.mark.parametrize(
    "mech",
    [Kronecker([3, "haar"], budget="geometric", neighbours="replace"), Quadtree(noise="gaussian"), KDHierarchy(3)],
)
def test_grid_release_json_round_trip_and_dominance(mech, rng):
    shape = (4, 5)
    dom = ProductDomain([Domain.integers(0, 3), Domain.interval(0.0, 1.0, 5)])
    delta = 1e-6 if mech.noise == "gaussian" else 0.0
    rel = mech.release(rng.integers(0, 9, size=shape), 0.7, delta=delta, rng=9, domain=dom)
    back = load_grid_release(rel.to_json())
    np.testing.assert_array_equal(back.counts, rel.counts)
    assert back.domain == dom and back.neighbours == rel.neighbours and back.epsilon == rel.epsilon
    lows, highs = every_rectangle(shape)
    np.testing.assert_array_equal(back.rectangle(lows, highs).stderr, rel.rectangle(lows, highs).stderr)
    points = np.array([[0, 0], [2, 3], [3, 4]])
    dominance = rel.dominance(points)
    np.testing.assert_allclose(dominance.value, [rel.counts[: p + 1, : q + 1].sum() for p, q in points])
    np.testing.assert_allclose(dominance.stderr, rel.rectangle(np.zeros_like(points), points).stderr)
    broken = rel.to_dict()
    broken["measurements"] = broken["measurements"][1:]
    with pytest.raises(DataError, match="measured blocks"):
        load_grid_release(broken)
