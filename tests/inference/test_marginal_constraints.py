"""dprange.inference.marginal_constraints: the marginal matrix equals numpy's sums."""

import itertools

import numpy as np

from dprange.inference.marginal_constraints import marginal_matrix

TABLE = np.random.default_rng(0).poisson(3, (4, 5, 3))


def test_marginal_matrix_equals_numpy_sums():
    flat = TABLE.ravel()
    for size in range(4):
        for axes in itertools.combinations(range(3), size):
            drop = tuple(a for a in range(3) if a not in axes)
            np.testing.assert_array_equal(marginal_matrix(TABLE.shape, axes) @ flat, TABLE.sum(axis=drop).ravel())
