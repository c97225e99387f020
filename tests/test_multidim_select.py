"""k-D mechanisms in the registry, their automatic choice by exact expected error, the k-D
SVD bound, and the k-D entry point dprange.release_grid (issue 10, items 5 and 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dprange
from dprange import Domain, FourierMarginals, Hierarchical, KDHierarchy, Kronecker, Privelet, ProductDomain, Quadtree
from dprange.analysis import grid as grid_analysis
from dprange.analysis import noise_variance_floor
from dprange.analysis import svd_bound as svd_bound_1d
from dprange.api import choose_grid_mechanism, release_grid
from dprange.errors import ParameterError
from dprange.mechanisms import base as mechanisms_base
from dprange.mechanisms.base import Mechanism
from dprange.mechanisms.optimized_grid import OptimizedKronecker, OptimizedMarginals
from dprange.registry import GRID_MECHANISMS, GRID_WORKLOADS, MECHANISMS, docs_markdown
from dprange.workloads import all_rectangles, marginals, prefix_rectangles


def test_k_d_mechanisms_are_registered_apart_from_the_1_d_ones():
    data_aware = ("kd_tree", "hybrid_tree", "dawa_hilbert")  # dprange.data_aware.grid: never chosen by auto
    independent = ("kronecker", "kd_hierarchy", "quadtree", "privelet", "fourier")
    optimized = ("optimized_kronecker", "optimized_marginals")
    assert GRID_MECHANISMS.names() == (*independent, *optimized, *data_aware)
    assert GRID_MECHANISMS.names(auto=True) == ("kronecker", "kd_hierarchy", "fourier", *optimized)
    # quadtree = kd_hierarchy(2) in 2-D, privelet = kronecker("haar")
    factories = [Kronecker, KDHierarchy, Quadtree, Privelet, FourierMarginals, OptimizedKronecker, OptimizedMarginals]
    assert [GRID_MECHANISMS[n].factory for n in independent + optimized] == factories
    for entry in MECHANISMS.values():  # the 1-D registry (run on 1-D counts by its tests) has none of them
        assert entry.factory is not None and not issubclass(entry.factory, mechanisms_base.GridMechanism)
    assert GRID_WORKLOADS.names() == ("all-rectangles", "prefix-rectangles", "marginals")
    page = docs_markdown()
    assert "## k-D mechanisms" in page and "## k-D workloads" in page
    for name in GRID_MECHANISMS:
        assert f"| `{name}` | {GRID_MECHANISMS[name].summary}" in page


def _dense_bound(W: np.ndarray, epsilon: float, delta: float = 0.0) -> float:
    singular = np.linalg.svd(W, compute_uv=False).sum()
    return noise_variance_floor(epsilon, delta) * singular**2 / W.shape[1] / W.shape[0]


@pytest.mark.parametrize("shape", [(5, 3, 4), (2, 7), (6,), (3, 1, 2)])
def test_svd_bound_equals_the_dense_singular_values(shape):
    """Products of per-axis singular values (rectangles) and the I/J eigenbasis (marginals)
    against numpy's SVD of the dense workload."""
    cases = [("all-rectangles", all_rectangles(shape), 2), ("prefix-rectangles", prefix_rectangles(shape), 2)]
    cases += [("marginals", marginals(shape, order), order) for order in range(1, len(shape) + 1)]
    for name, W, order in cases:
        for epsilon, delta in ((1.0, 0.0), (0.3, 1e-6)):
            expected = _dense_bound(W.dense(), epsilon, delta)
            got = grid_analysis.svd_bound(shape, name, epsilon, delta, order=order)
            assert got == pytest.approx(expected, rel=1e-10), (name, order)


def test_svd_bound_in_one_dimension_is_the_1_d_bound():
    assert grid_analysis.svd_bound((7,), "all-rectangles", 0.5) == pytest.approx(svd_bound_1d("all-range", 0.5, n=7))
    assert grid_analysis.svd_bound((7,), "prefix-rectangles", 0.5) == pytest.approx(svd_bound_1d("prefix", 0.5, n=7))


@pytest.mark.parametrize(("delta", "noise"), [(0.0, "laplace_float"), (0.0, "auto"), (1e-6, "auto")])
def test_no_mechanism_beats_the_svd_bound(delta, noise):
    shape = (6, 5)
    for workload in GRID_WORKLOADS:
        bound = grid_analysis.svd_bound(shape, workload, 1.0, delta, noise=noise)
        checked = 0
        for mech in grid_analysis.grid_candidates(shape, noise=noise):
            try:
                error = grid_analysis.expected_error(mech, shape, workload, 1.0, delta=delta)
            except ParameterError:  # a design that cannot answer the workload (Fourier of order 1)
                assert isinstance(mech, FourierMarginals) and mech.order < len(shape)
                continue
            assert error >= bound * (1 - 1e-9), (workload, mech)
            checked += 1
        assert checked >= len(grid_analysis.grid_candidates(shape)) - 2


def _dense_mean_error(mech, shape, W: np.ndarray) -> float:
    return float(np.mean(mech.error_model(shape, 1.0).query_variance(W)))


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_select_grid_ranks_every_candidate_by_its_exact_error(neighbours):
    shape = (5, 4)
    for name, W, order in (
        ("all-rectangles", all_rectangles(shape).dense(), 2),
        ("prefix-rectangles", prefix_rectangles(shape).dense(), 2),
        ("marginals", marginals(shape, 1).dense(), 1),
    ):
        selection = grid_analysis.select_grid(shape, 1.0, workload=name, neighbours=neighbours, order=order)
        errors = [c.error for c in selection.table]
        pool = grid_analysis.grid_candidates(shape, neighbours=neighbours, workload=name, order=order)
        assert errors == sorted(errors) and len(errors) == len(pool) - len(selection.excluded)
        for cand in selection.table:
            assert cand.mechanism.neighbours == neighbours
            assert cand.error == pytest.approx(_dense_mean_error(cand.mechanism, shape, W), rel=1e-9)
        assert selection.mechanism is selection.table[0].mechanism
        assert selection.workload["name"] == name and selection.workload["shape"] == list(shape)


def test_select_grid_prefers_hierarchies_on_large_2_d_grids_and_flat_on_small_ones():
    """Qardaji et al. section 5: hierarchies win on large grids for rectangles, flat on small ones."""
    small = grid_analysis.select_grid((4, 4), 1.0).mechanism
    assert isinstance(small, Kronecker) and small.axes == "identity"
    large = grid_analysis.select_grid((128, 128), 1.0)
    assert not (isinstance(large.mechanism, Kronecker) and large.mechanism.axes == "identity")
    flat = grid_analysis.expected_error(Kronecker("identity"), (128, 128), "all-rectangles", 1.0)
    assert large.error < flat / 2


def test_select_grid_lists_what_it_cannot_run_and_checks_its_arguments():
    quadtree = Quadtree()
    selection = grid_analysis.select_grid((4, 4, 4), 1.0, candidates=[Kronecker(2), quadtree])
    assert [m for m, _ in selection.excluded] == [quadtree] and "2-D grid" in selection.excluded[0][1]
    with pytest.raises(ParameterError, match="workload must be one of all-rectangles"):
        grid_analysis.select_grid((4, 4), 1.0, workload="all-range")
    with pytest.raises(ParameterError, match="order must be 1..2"):
        grid_analysis.select_grid((4, 4), 1.0, workload="marginals", order=3)
    with pytest.raises(ParameterError, match="no k-D mechanism"):
        grid_analysis.select_grid((4, 4, 4), 1.0, candidates=[quadtree])
    # underscores (the former spelling) still name the workloads
    assert grid_analysis.expected_error(Kronecker(2), (4, 3), "all_rectangles", 1.0) == grid_analysis.expected_error(
        Kronecker(2), (4, 3), "all-rectangles", 1.0
    )


def _columns(records=400, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 12, records), rng.integers(0, 9, records)]


DOMAIN = ProductDomain([Domain.integers(0, 11), Domain.integers(0, 8)])


def test_release_grid_auto_uses_the_selection_and_dprange_release_dispatches_to_it():
    columns = _columns()
    chosen = grid_analysis.select_grid(DOMAIN.shape, 0.7, workload="prefix-rectangles").mechanism
    rel = release_grid(columns, DOMAIN, 0.7, workload="prefix-rectangles", rng=5)
    assert rel.mechanism == chosen.name
    assert {k: v for k, v in rel.parameters.items() if k != "strategy"} == chosen.parameters()
    described = chosen.describe_strategy(DOMAIN.shape, 0.7)  # an optimised design's record, None for fixed ones
    assert rel.parameters.get("strategy", {}).get("measured") == (described or {}).get("measured")
    again = dprange.release(columns, DOMAIN, 0.7, workload="prefix-rectangles", rng=5)
    np.testing.assert_array_equal(again.counts, rel.counts)
    named = dprange.release_grid(columns, DOMAIN, 0.7, mechanism="kd_hierarchy", branching=3, rng=5)
    assert named.mechanism == "kd_hierarchy" and named.parameters["branching"] == 3
    exact = DOMAIN.histogram(columns)
    model = KDHierarchy(3).error_model(DOMAIN.shape, 0.7)
    assert named.rectangle([0, 0], [11, 8]).stderr == pytest.approx(
        math.sqrt(model.rectangle_variance([[0, 0]], [[11, 8]])[0])
    )
    assert abs(named.rectangle([0, 0], [11, 8]).value - exact.sum()) < 10 * named.rectangle([0, 0], [11, 8]).stderr


class Untouchable:
    """Columns that fail the test if anything reads them."""

    def __getattr__(self, name):
        raise AssertionError("the data were read before the parameters were checked")

    def __len__(self):
        raise AssertionError("the data were read before the parameters were checked")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"mechanism": "flat"}, "unknown k-D mechanism 'flat'"),
        ({"mechanism": Hierarchical()}, "releases 1-D counts"),
        ({"mechanism": "auto", "branching": 4}, "cannot be given with mechanism='auto'"),
        ({"mechanism": "kronecker", "axes": "tree"}, "axes"),
        ({"inference": "nnls"}, "exact least squares only"),
        ({"workload": "all-range"}, "workload must be one of"),
        ({"neighbours": "replace", "drop_missing": True}, "drop"),
        ({"mechanism": "kronecker", "axes": [2, 2, 2]}, "one axis strategy, or one per axis"),
        ({"mechanism": "quadtree", "domain": ProductDomain([Domain.integers(0, 3)] * 3)}, "2-D grid"),
    ],
)
def test_release_grid_checks_everything_before_reading_the_columns(kwargs, message):
    kwargs = {"epsilon": 1.0, "domain": DOMAIN, **kwargs}
    with pytest.raises(ParameterError, match=message):
        release_grid(Untouchable(), kwargs.pop("domain"), kwargs.pop("epsilon"), **kwargs)


def test_choose_grid_mechanism_keeps_a_k_d_object_and_builds_names():
    mech = Kronecker([4, "identity"], budget="geometric")
    assert choose_grid_mechanism(mech, (8, 8), 1.0) is mech
    built = choose_grid_mechanism("kronecker", (8, 8), 1.0, neighbours="replace", axes="haar")
    assert isinstance(built, Kronecker) and built.axes == "haar" and built.neighbours == "replace"
    assert isinstance(built, Mechanism)
    with pytest.raises(ParameterError, match="conflicts"):
        choose_grid_mechanism(mech, (8, 8), 1.0, neighbours="replace")


def test_product_domain_errors_name_the_axis():
    """Was: the 1-D message alone, with no axis."""
    with pytest.raises(dprange.errors.DomainError, match=r"^axis 1: .*outside the public bounds"):
        DOMAIN.histogram([np.array([0, 11]), np.array([0, 9])])
