"""dprange.workloads.rectangles: rectangle workloads and marginals equal their dense definitions."""

import numpy as np
import pytest
from _helpers import box_matrix, every_rectangle

from dprange import ParameterError
from dprange.workloads import Rectangles, all_rectangles, marginals, prefix_rectangles, random_rectangles


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


def test_rectangles_saved_form_round_trips_and_names_what_is_wrong():
    rects = Rectangles((4, 3), [[0, 0], [1, 2]], [[3, 2], [1, 2]])
    saved = rects.to_dict()
    assert saved == {"shape": [4, 3], "lows": [[0, 0], [1, 2]], "highs": [[3, 2], [1, 2]]}
    back = Rectangles.from_dict(saved)
    np.testing.assert_array_equal(back.lows, rects.lows)
    np.testing.assert_array_equal(back.highs, rects.highs)
    assert back.grid == rects.grid
    with pytest.raises(ParameterError, match="^ranges: saved rectangles need shape, lows and highs"):
        Rectangles.from_dict({"shape": [4, 3], "lows": [[0, 0]]}, "ranges")
