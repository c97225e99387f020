"""dprange.data_aware.hilbert: the Hilbert order against its inverse and adjacency, and on grids
that are not square powers of two."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dprange.data_aware.hilbert import hilbert_cells, hilbert_index, hilbert_sequence
from dprange.errors import ParameterError


# ------------------------------------------------------------------------- Hilbert order
@pytest.mark.parametrize("side", [1, 2, 4, 8, 32])
def test_hilbert_index_is_a_bijection_with_an_exact_inverse_and_adjacent_steps(side):
    x, y = np.indices((side, side)).reshape(2, -1)
    d = hilbert_index(side, x, y)
    assert sorted(d.tolist()) == list(range(side * side))
    back_x, back_y = hilbert_cells(side, d)
    np.testing.assert_array_equal(back_x, x)
    np.testing.assert_array_equal(back_y, y)
    cx, cy = hilbert_cells(side, np.arange(side * side))
    assert np.all(np.abs(np.diff(cx)) + np.abs(np.diff(cy)) == 1)  # consecutive cells are neighbours
    if side > 1:
        assert (cx[0], cy[0]) == (0, 0) and cx[-1] == side - 1 and cy[-1] == 0


def test_hilbert_sequence_of_other_shapes_skips_the_padding():
    for shape in [(3, 5), (5, 3), (1, 7), (8, 8), (6, 1)]:
        seq = hilbert_sequence(shape)
        assert sorted(seq.tolist()) == list(range(shape[0] * shape[1]))
        side = 1 << max(0, math.ceil(math.log2(max(shape))))
        rows, cols = np.unravel_index(seq, shape)
        assert np.all(np.diff(hilbert_index(side, rows, cols)) > 0)  # the curve's order, restricted
    with pytest.raises(ParameterError, match="power of two"):
        hilbert_index(6, 0, 0)
    with pytest.raises(ParameterError, match="2-D"):
        hilbert_sequence((2, 2, 2))
