"""Kronecker products of optimised 1-D strategies (dprange.mechanisms.optimized_grid): least squares and
rectangle variances against the dense formulas, the product identity of the error, a gain
over the fixed Kronecker strategies, Monte-Carlo, and the saved release."""

import numpy as np
import pytest
from _helpers import indicator

from dprange.errors import ParameterError

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


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
