"""k-D domains, workloads, mechanisms, least squares and releases against dense matrices."""

import numpy as np
import pandas as pd
import pytest
from _helpers import box_matrix, every_rectangle

from dprange import Domain, DomainError, ParameterError
from dprange.domain import ProductDomain
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
