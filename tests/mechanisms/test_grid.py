"""k-D mechanisms (dprange.mechanisms.grid): Kronecker, the quadtree, the k-D hierarchy and
Privelet (Xiao, Wang and Gehrke, ICDE 2010) against their definitions: exact privacy loss on a
2 x 2 domain, Monte-Carlo variances, parameters, auto's candidates, and saved releases checked
against their design before parsing."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from _helpers import (
    assert_linear_privacy,
    assert_unbiased_with_variance,
    assert_variances,
    box_matrix,
    every_rectangle,
    peak_bytes_raising,
    stacked,
)

from conftest import dense_gls
from dprange import ParameterError
from dprange.errors import DataError
from dprange.inference.kron import morton_order
from dprange.mechanisms import grid as grid_mechanisms
from dprange.mechanisms.grid import KDHierarchy, Kronecker, Privelet, Quadtree, load_grid_release
from dprange.strategies import kron as kron_strategies
from dprange.strategies.trees import HaarStrategy


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


def haar_inverse_2d(shape, blocks):
    """Privelet's own estimate: the inverse Haar transform along each axis of the noisy
    coefficients (sides powers of two), written with the 1-D HaarStrategy.reconstruct."""
    hs = [HaarStrategy(n) for n in shape]
    levels = [h.height + 1 for h in hs]
    grid = np.empty((shape[0], shape[1]))
    coeffs = {}
    for (l0, l1), values in zip(((a, b) for a in range(levels[0]) for b in range(levels[1])), blocks):
        rows0 = 1 if l0 == 0 else 2 ** (l0 - 1)
        coeffs[l0, l1] = np.asarray(values, dtype=float).reshape(rows0, -1)
    # invert along axis 1 for every level of axis 0, then along axis 0
    partial = {}
    for l0 in range(levels[0]):
        stacked_rows = coeffs[l0, 0].shape[0]
        out = np.empty((stacked_rows, shape[1]))
        for r in range(stacked_rows):
            out[r] = hs[1].reconstruct([coeffs[l0, l1][r] for l1 in range(levels[1])])
        partial[l0] = out
    for c in range(shape[1]):
        grid[:, c] = hs[0].reconstruct([partial[l0][:, c] for l0 in range(levels[0])])
    return grid


def test_privelet_is_haar_on_every_axis_with_privelets_noise_scale():
    shape = (8, 4)
    plan = Privelet().plan(shape, 0.5)
    assert len(plan.blocks) == 4 * 3
    np.testing.assert_allclose(plan.budget, 0.5 / 12, rtol=1e-12)  # epsilon / prod (1 + h_a)
    meas = Privelet(noise="laplace_float").measure(np.ones(shape, dtype=int), 0.5, rng=0)
    lam = (1 + 3) * (1 + 2) / 0.5  # Privelet's lambda on the integer differences
    for m in meas.measurements:
        assert m.noise.scale == pytest.approx(lam, rel=1e-12) and m.noise.scale >= lam
    assert Privelet(["haar", "identity"]).plan((8, 5), 1.0).budget[0] == pytest.approx(1.0 / 4)
    assert (
        Privelet().parameters() == {"axes": "haar", **Privelet().parameters()}
        and "budget" not in Privelet().parameters()
    )
    with pytest.raises(ParameterError, match="'haar' or 'identity'"):
        Privelet([4, "haar"])


def test_on_powers_of_two_the_estimate_is_privelets_inverse_transform(rng):
    shape = (4, 8)
    counts = rng.integers(0, 30, size=shape)
    mech = Privelet(noise="laplace_float")
    meas = mech.measure(counts, 1.0, rng=3)
    est = mech.estimate(shape, meas)
    expected = haar_inverse_2d(shape, [m.values for m in meas.measurements])
    np.testing.assert_allclose(est.leaves.reshape(shape), expected, atol=1e-9)
    A, y, _ = stacked(meas)
    assert A.shape[0] == A.shape[1]  # square: no redundancy to average
    np.testing.assert_allclose(est.leaves, np.linalg.solve(A, y), atol=1e-9)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("shape,axes", [((3, 5), "haar"), ((6, 4), ["haar", "identity"]), ((3, 2, 5), "haar")])
def test_off_powers_of_two_least_squares_and_rectangle_variances_equal_dense_gls(shape, axes, relation, rng):
    counts = rng.integers(0, 20, size=shape)
    mech = Privelet(axes, neighbours=relation, noise="laplace_float")
    meas = mech.measure(counts, 1.0, rng=1)
    est = mech.estimate(shape, meas)
    A, y, v = stacked(meas)
    x, cov = dense_gls(A, y, v, total=meas.total)
    np.testing.assert_allclose(est.leaves, x, atol=1e-8)
    lows, highs = every_rectangle(shape)
    Q = box_matrix(shape, lows, highs)
    assert_variances(est.rectangle_variance(lows, highs), np.einsum("ri,ij,rj->r", Q, cov, Q))
    # the same design as the Kronecker of Haar axes with uniform budgets
    other = Kronecker(axes, neighbours=relation, noise="laplace_float").measure(counts, 1.0, rng=1)
    assert [m.noise for m in other.measurements] == [m.noise for m in meas.measurements]


@pytest.mark.parametrize("noise", ["discrete_laplace", "gaussian"])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_privelet_privacy_ratio_on_a_two_by_two_domain(relation, noise):
    mech = Privelet(neighbours=relation, noise=noise)
    assert_linear_privacy(mech, np.array([[1, 2], [3, 1]]), relation, noise)


def test_monte_carlo_unbiased_with_the_exact_variance_and_json_round_trip():
    shape = (3, 6)
    counts = np.arange(18).reshape(shape) % 4
    lows, highs = np.array([[0, 1], [1, 0], [2, 5]]), np.array([[2, 4], [2, 5], [2, 5]])
    truth = box_matrix(shape, lows, highs) @ counts.ravel()
    source = np.random.default_rng(7)
    mech = Privelet()
    runs = np.array([mech.release(counts, 1.0, rng=source).rectangle(lows, highs).value for _ in range(600)])
    assert_unbiased_with_variance(runs, truth, mech.error_model(shape, 1.0).rectangle_variance(lows, highs))
    rel = mech.release(counts, 1.0, rng=1)
    back = load_grid_release(rel.to_json())
    np.testing.assert_allclose(back.counts, rel.counts)
    assert back.mechanism == "privelet" and back.parameters == {"axes": "haar", **back.parameters}
    assert math.isclose(back.rectangle(lows[0], highs[0]).stderr, rel.rectangle(lows[0], highs[0]).stderr)


MILLION = "[" + ",".join(["0.5"] * 10**6) + "]"


def test_a_grid_release_with_more_values_than_its_design_is_refused_before_parsing():
    """A block's values counted against the rows of the design rebuilt from the file's
    parameters: 10^6 numbers where the design has 7 rows are refused without parsing them
    (32 MB of Python floats before issue 30)."""
    rel = KDHierarchy(2).release(np.arange(16).reshape(4, 4) % 5, 1.0, rng=3)
    data = rel.to_dict()
    rows = len(data["measurements"][0]["values"])
    data["measurements"][0]["values"] = "MILLION"
    text = json.dumps(data).replace('"MILLION"', MILLION)
    with pytest.raises(DataError, match=f"a saved block has 1000000 values, its design {rows} rows"):
        load_grid_release(text)
    assert peak_bytes_raising(DataError, lambda: load_grid_release(text)) < 1 << 20
    np.testing.assert_array_equal(load_grid_release(rel.to_json()).counts, rel.counts)


def test_auto_candidates_skip_hierarchies_too_large_to_pad():
    five = (50, 100, 7, 4, 2)
    assert grid_mechanisms.hierarchy_candidates_kd(five) == []  # 128^5 cells padded
    assert len(grid_mechanisms.hierarchy_candidates_kd((64, 64))) == 6
    for b, rule in itertools.product((2, 4, 8), kron_strategies.BUDGET_RULES):
        assert any(m.branching == b and m.budget == rule for m in grid_mechanisms.hierarchy_candidates_kd((64, 64)))
