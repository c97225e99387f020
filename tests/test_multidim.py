"""k-D domains, workloads, mechanisms, least squares and releases against dense matrices."""

import math

import numpy as np
import pandas as pd
import pytest
from _helpers import assert_linear_privacy, assert_unbiased_with_variance, box_matrix, every_rectangle, stacked

from conftest import dense_gls
from dprange import DataError, Domain, DomainError, ParameterError
from dprange.analysis.grid import expected_error
from dprange.domain import ProductDomain
from dprange.inference.kron import morton_order
from dprange.mechanisms.grid import KDHierarchy, Kronecker, Quadtree, load_grid_release
from dprange.workloads import Rectangles, all_rectangles, marginals, prefix_rectangles, random_rectangles


# ----------------------------------------------------------------------------- domain
def test_product_domain_histogram_counts_every_record_in_its_cell():
    dom = ProductDomain([Domain.integers(17, 19), Domain.interval(0.0, 10.0, 4)])
    ages = np.array([17, 18, 19, 19, 17])
    hours = np.array([0.0, 2.5, 9.9, 10.0, 5.0])
    hist = dom.histogram([ages, hours])
    expected = np.zeros((3, 4), dtype=np.int64)
    for a, h in zip(ages - 17, np.minimum((hours / 2.5).astype(int), 3)):
        expected[a, h] += 1
    assert hist.dtype == np.int64 and dom.shape == (3, 4)
    np.testing.assert_array_equal(hist, expected)
    np.testing.assert_array_equal(dom.histogram(np.column_stack([ages, hours])), expected)


def test_product_domain_bad_inputs_follow_the_1d_rules():
    dom = ProductDomain([Domain.integers(0, 2), Domain.integers(0, 3)])
    with pytest.raises(DomainError, match="outside the public bounds"):
        dom.histogram([[0, 5], [1, 1]])
    np.testing.assert_array_equal(dom.histogram([[0, 5], [1, 1]], clip=True)[2], [0, 1, 0, 0])
    frame = pd.DataFrame({"a": [0.0, np.nan, 2.0], "b": [1, 2, None]})
    with pytest.raises(DomainError, match="2 records have a missing value"):
        dom.histogram(frame)
    hist = dom.histogram(frame, drop_missing=True)  # the whole record goes, from both columns
    assert hist.sum() == 1 and hist[0, 1] == 1
    with pytest.raises(ParameterError, match="2 axes, got 3"):
        dom.histogram([[0], [1], [2]])
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"a": pa.array([0, None, 2]), "b": pa.array([1, 2, 3])})
    with pytest.raises(DomainError, match="1 records have a missing value"):
        dom.histogram(table)
    np.testing.assert_array_equal(np.argwhere(dom.histogram(table, drop_missing=True)), [[0, 1], [2, 3]])


# ----------------------------------------------------------------------------- workloads
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4)])
def test_rectangle_workloads_equal_their_dense_definitions(shape, rng):
    lows, highs = every_rectangle(shape)
    dense = box_matrix(shape, lows, highs)
    W = all_rectangles(shape)
    np.testing.assert_array_equal(W.dense(), dense)
    np.testing.assert_allclose(W.gram().dense(), dense.T @ dense)
    explicit = Rectangles(shape, lows, highs)
    np.testing.assert_array_equal(explicit.dense(), dense)
    y = rng.normal(size=dense.shape[0])
    np.testing.assert_allclose(explicit.rmatvec(y), dense.T @ y)
    cells = np.array(list(np.ndindex(*shape)))
    np.testing.assert_array_equal(prefix_rectangles(shape).dense(), box_matrix(shape, np.zeros_like(cells), cells))
    rand = random_rectangles(shape, 50, rng=3)
    np.testing.assert_array_equal(rand.dense(), box_matrix(shape, rand.lows, rand.highs))


def test_marginals_sum_the_other_axes():
    shape = (2, 3, 4)
    x = np.arange(24.0)
    got = marginals(shape, 2).matvec(x)
    cube = x.reshape(shape)
    expected = np.concatenate([cube.sum(axis=2).ravel(), cube.sum(axis=1).ravel(), cube.sum(axis=0).ravel()])
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(ParameterError, match="3-way marginal needs at least 3 axes"):
        marginals((2, 3), 3)


def test_quadtree_is_a_tree_of_squares_in_morton_order():
    order = morton_order(4, 2, 2)
    # depth-1 nodes of a 4 x 4 quadtree: the four 2 x 2 quadrants are contiguous in Morton order
    quadrant = (np.indices((4, 4))[0] // 2) * 2 + np.indices((4, 4))[1] // 2
    np.testing.assert_array_equal(np.sort(order.reshape(4, 4)[quadrant == 1]), [4, 5, 6, 7])
    mech = Quadtree(budget="geometric")
    plan = mech.plan((3, 5), 1.0)  # padded to 8 x 8
    assert plan.blocks[0].shape[1] == 64
    ratios = np.array(plan.budget[1:]) / np.array(plan.budget[:-1])
    np.testing.assert_allclose(ratios, 2 ** (1 / 3))


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


def test_monte_carlo_unbiased_with_the_exact_variance():
    shape = (3, 4)
    counts = np.arange(12).reshape(shape) % 5
    lows, highs = np.array([[0, 1], [1, 0], [2, 3]]), np.array([[2, 2], [2, 3], [2, 3]])
    truth = box_matrix(shape, lows, highs) @ counts.ravel()
    source = np.random.default_rng(2024)
    for mech in (Kronecker([2, "haar"]), Quadtree(neighbours="replace")):
        runs = np.array([mech.release(counts, 1.0, rng=source).rectangle(lows, highs).value for _ in range(600)])
        assert_unbiased_with_variance(runs, truth, mech.error_model(shape, 1.0).rectangle_variance(lows, highs))


PRIVACY_MECHANISMS = [
    lambda r, z: Kronecker("identity", neighbours=r, noise=z),
    lambda r, z: Kronecker([2, "haar"], budget="geometric", neighbours=r, noise=z),
    lambda r, z: Kronecker("haar", neighbours=r, noise=z),
    lambda r, z: Quadtree(neighbours=r, noise=z),
    lambda r, z: Quadtree(budget="geometric", neighbours=r, noise=z),
    lambda r, z: Quadtree(measure_root=True, neighbours=r, noise=z),
]


@pytest.mark.parametrize("noise", ["discrete_laplace", "gaussian"])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("build", PRIVACY_MECHANISMS)
def test_privacy_ratio_on_a_two_by_two_domain(build, relation, noise):
    mech = build(relation, noise)
    assert_linear_privacy(mech, np.array([[1, 2], [3, 1]]), relation, noise, vector=mech._vector)


def test_k_dimensional_hierarchy_and_bad_parameters():
    mech = KDHierarchy(3)
    plan = mech.plan((4, 2, 5), 1.0)  # padded to 9 x 9 x 9, fan-out 27
    assert plan.shape.branching == (27, 27) and plan.blocks[-1].shape == (729, 729)
    assert plan.blocks[0].shape[0] == 27  # the root is not measured by default
    assert KDHierarchy(3, measure_root=True).plan((4, 2, 5), 1.0).blocks[0].shape[0] == 1
    assert math.isclose(sum(plan.budget), 1.0, rel_tol=1e-12)
    with pytest.raises(ParameterError, match="'identity', 'haar' or a tree branching"):
        Kronecker(["tree"])
    with pytest.raises(ParameterError, match="one per axis \\(2\\), got 3"):
        Kronecker([2, 2, 2]).plan((3, 4), 1.0)
    with pytest.raises(ParameterError, match="quadtree needs a 2-D grid"):
        Quadtree().plan((3, 4, 5), 1.0)
    with pytest.raises(ParameterError, match="use fewer bins or a larger branching"):
        Kronecker([2, "identity"]).error_model((20000, 2), 1.0)
    with pytest.raises(ParameterError, match="least squares only"):
        Kronecker(2, inference="nnls").release(np.ones((2, 3), dtype=int), 1.0, rng=0)
    with pytest.raises(ParameterError, match="whole numbers"):
        Kronecker(2).release(np.full((2, 3), 0.5), 1.0, rng=0)


EXPECTED_ERROR_MECHANISMS = [
    lambda r: Kronecker([2, "haar"], budget="geometric", neighbours=r, noise="laplace_float"),
    lambda r: Kronecker("identity", neighbours=r, noise="gaussian"),
    lambda r: Quadtree(budget="geometric", neighbours=r),
]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("build", EXPECTED_ERROR_MECHANISMS)
def test_expected_error_equals_the_dense_workload_average(build, relation):
    shape = (3, 5)
    mech = build(relation)
    delta = 1e-6 if mech.noise == "gaussian" else 0.0
    meas = mech.measure(np.zeros(shape, dtype=np.int64), 1.0, delta=delta, rng=0)
    A, _, v = stacked(meas)
    _, cov = dense_gls(A, np.zeros(A.shape[0]), v, total=meas.total)
    if isinstance(mech, Quadtree):
        keep = np.zeros((8, 8), dtype=bool)
        keep[:3, :5] = True
        order = morton_order(8, 2, 2)[keep.ravel()]
        cov = cov[np.ix_(order, order)]
    rects = random_rectangles(shape, 40, rng=8)
    workloads = [
        ("all_rectangles", all_rectangles(shape).dense()),
        ("prefix_rectangles", prefix_rectangles(shape).dense()),
        ("marginals", marginals(shape, 1).dense()),
        (rects, rects.dense()),
    ]
    for workload, W in workloads:
        dense = float(np.mean(np.einsum("ri,ij,rj->r", W, cov, W)))
        got = expected_error(mech, shape, workload, 1.0, delta=delta, order=1)
        assert got == pytest.approx(dense, rel=1e-8), workload


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
