"""dprange.strategies.fourier: the replace change table equals the dense frames."""

from __future__ import annotations

import itertools

import numpy as np
import pytest


def reference_replace_change(shape, subsets, p):
    """R[d, t] = ||F_T (e_j - e_i)||_p^p from the dense frame blocks, for cells i = 0 and j
    differing from it on exactly the axes of D (the axes' frames are symmetric in the bins)."""
    from dprange.strategies.fourier import frame_block

    axes = [a for a, n in enumerate(shape) if n >= 2]
    moves = [D for size in range(1, len(axes) + 1) for D in itertools.combinations(axes, size)]
    out = np.zeros((len(moves), len(subsets)), dtype=object)
    for t, T in enumerate(subsets):
        dense = frame_block(shape, T).dense()
        for d, D in enumerate(moves):
            j = np.ravel_multi_index(tuple(1 if a in D else 0 for a in range(len(shape))), shape)
            change = np.rint(dense[:, j] - dense[:, 0]).astype(np.int64)
            out[d, t] = int(np.sum(np.abs(change) ** p))
    return out


@pytest.mark.parametrize("shape,order", [((2, 3, 4), 2), ((3, 3, 2, 2), 3), ((2,) * 5, 2), ((4, 1, 5), 1)])
def test_replace_change_table_equals_the_dense_frames(shape, order):
    from dprange.strategies.fourier import fourier_subsets, replace_change

    subsets = tuple(fourier_subsets(shape, order))
    for p in (1, 2):
        np.testing.assert_array_equal(replace_change(shape, subsets, p), reference_replace_change(shape, subsets, p))
