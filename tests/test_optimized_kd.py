"""Kronecker products of optimised 1-D strategies (dprange.mechanisms.optimized_grid): least squares and
rectangle variances against the dense formulas, the product identity of the error, a gain
over the fixed Kronecker strategies, Monte-Carlo, and the saved release."""

import math

import numpy as np
import pytest
from _helpers import indicator

from dprange import Domain, ProductDomain
from dprange.analysis.grid import expected_error
from dprange.api import choose_grid_mechanism, release_grid
from dprange.errors import ParameterError
from dprange.registry import GRID_MECHANISMS
from dprange.workloads import Rectangles

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


def test_named_optimised_grid_mechanisms_take_the_release_workload_and_order():
    """mechanism="optimized_kronecker" / "optimized_marginals" by name are optimised for the
    release's workload and order (they kept all rectangles and 2-way marginals whatever was
    asked); a workload the mechanism is not made for is refused, not ignored."""
    shape = (6, 5, 4)
    prefix = choose_grid_mechanism("optimized_kronecker", shape, 1.0, workload="prefix-rectangles")
    assert prefix.workload == "prefix-rectangles"
    one_way = choose_grid_mechanism("optimized_marginals", shape, 1.0, workload="marginals", order=1)
    assert one_way.order == 1
    counts = np.random.default_rng(2).poisson(4, shape)
    domain = ProductDomain([Domain.integers(0, n - 1) for n in shape])
    columns = [np.repeat(axis.ravel(), counts.ravel()) for axis in np.indices(shape)]
    release = release_grid(columns, domain, 1.0, mechanism="optimized_marginals", workload="marginals", order=1)
    assert release.parameters["order"] == 1
    with pytest.raises(ParameterError, match="workload must be one of"):
        choose_grid_mechanism("optimized_kronecker", shape, 1.0, workload="marginals")


@pytest.mark.parametrize("workload", ["all-rectangles", "prefix-rectangles"])
@pytest.mark.parametrize(("name", "shape"), [("optimized_marginals", (10, 10, 10)), ("fourier", (6, 5, 4))])
def test_a_named_marginals_mechanism_is_refused_for_rectangles_it_does_not_answer(name, shape, workload):
    """optimized_marginals (2-way marginals of 10^3: the three 2-way tables, no full table) and
    fourier of order 2 on three axes answer no rectangle restricted on all three axes: named
    with a rectangle workload they were accepted and most rectangles had infinite error."""
    with pytest.raises(ParameterError) as exc:
        choose_grid_mechanism(name, shape, 1.0, workload=workload)
    message = str(exc.value)
    assert f"mechanism={name!r} answers marginals of up to 2 axes (workload='marginals', order=2)" in message
    assert f"not every query of workload={workload!r} on this 3-axis grid" in message
    assert "'optimized_kronecker', 'kronecker', 'kd_hierarchy' or 'auto'" in message
    error = expected_error(GRID_MECHANISMS[name].build(), shape, workload, 1.0) if name != "fourier" else math.inf
    assert error == math.inf  # (fourier refuses the family in its error model)
    domain = ProductDomain([Domain.integers(0, n - 1) for n in shape])
    columns = [np.zeros(3, dtype=int)] * 3
    with pytest.raises(ParameterError, match="answers marginals"):
        release_grid(columns, domain, 1.0, mechanism=name, workload=workload)
    assert choose_grid_mechanism(name, shape, 1.0, workload="marginals").name == name


def test_a_named_marginals_mechanism_answering_every_rectangle_is_accepted():
    """Where the design answers every rectangle of the workload it is kept: fourier of order 2
    on two axes, optimized_marginals whose optimum is the full table (6 x 5 x 4), explicit
    rectangles restricted on at most the order's axes; others of the Rectangles refuse."""
    assert choose_grid_mechanism("fourier", (6, 5), 1.0, workload="all-rectangles").order == 2
    kept = choose_grid_mechanism("optimized_marginals", (6, 5, 4), 1.0, workload="all-rectangles")
    assert math.isfinite(expected_error(kept, (6, 5, 4), "all-rectangles", 1.0))
    two_axes = Rectangles((6, 5, 4), [[0, 1, 0], [2, 0, 0]], [[5, 3, 3], [4, 4, 3]])
    assert choose_grid_mechanism("fourier", (6, 5, 4), 1.0, workload=two_axes).name == "fourier"
    three_axes = Rectangles((6, 5, 4), [[0, 1, 1]], [[4, 3, 3]])
    with pytest.raises(ParameterError, match="not every query of the Rectangles given as workload"):
        choose_grid_mechanism("fourier", (6, 5, 4), 1.0, workload=three_axes)


def test_weighted_ranges_gram_is_the_dense_one_and_bad_weights_are_refused():
    from dprange.workloads import WeightedRanges

    rng = np.random.default_rng(30)
    ends = rng.integers(0, 13, (40, 2))
    weights = rng.random(40) + 0.1
    workload = WeightedRanges(ends.min(1), ends.max(1), weights, 13)
    dense = indicator((13,), ends.min(1)[:, None], ends.max(1)[:, None]) * np.sqrt(weights)[:, None]
    np.testing.assert_allclose(workload.dense(), dense, rtol=1e-15)
    np.testing.assert_allclose(workload.gram(), dense.T @ dense, rtol=1e-12, atol=1e-12)
    assert workload.ranges() is None and workload.m == 40  # no unweighted range shortcut
    for bad in (np.zeros(40), -weights, weights[:-1], np.full(40, np.nan)):
        with pytest.raises(ParameterError, match="weight"):
            WeightedRanges(ends.min(1), ends.max(1), bad, 13)
