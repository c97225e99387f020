"""The Hilbert curve on 2-D grids: a 1-D order of the cells that keeps neighbours close.

On a 2^k x 2^k grid, consecutive positions of the curve are adjacent cells (Hilbert, "Ueber
die stetige Abbildung einer Linie auf ein Flaechenstueck", Mathematische Annalen 1891); the
iterative digit form here follows Butz ("Alternative Algorithm for Hilbert's Space-Filling
Curve", IEEE Transactions on Computers 1971).  DAWA over a Hilbert order (Li, Hay, Miklau and
Wang, PVLDB 2014, section 6) runs the 1-D mechanism on the cells in this order.

Other shapes are padded to the smallest 2^k x 2^k square holding them; the padded cells are
public (the domain is), so :func:`hilbert_sequence` simply skips them: the order of the real
cells is the curve's order restricted to them.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..workloads.rectangles import check_shape


def _check_side(side: int) -> int:
    if isinstance(side, bool) or not isinstance(side, (int, np.integer)) or side < 1 or side & (side - 1):
        raise ParameterError(f"the Hilbert curve needs a side that is a power of two, got {side!r}")
    return int(side)


def _rotate(side: int, x: np.ndarray, y: np.ndarray, rx: np.ndarray, ry: np.ndarray):
    """Reflect and transpose the quadrant (the curve's rotation step), vectorised."""
    flip = (ry == 0) & (rx == 1)
    x = np.where(flip, side - 1 - x, x)
    y = np.where(flip, side - 1 - y, y)
    swap = ry == 0
    return np.where(swap, y, x), np.where(swap, x, y)


def hilbert_index(side: int, x, y) -> np.ndarray:
    """Position on the curve of the cells (x, y) of a side x side grid (side a power of two)."""
    side = _check_side(side)
    x = np.asarray(x, dtype=np.int64).copy()
    y = np.asarray(y, dtype=np.int64).copy()
    d = np.zeros(np.broadcast(x, y).shape, dtype=np.int64)
    s = side // 2
    while s > 0:
        rx = ((x & s) > 0).astype(np.int64)
        ry = ((y & s) > 0).astype(np.int64)
        d += s * s * ((3 * rx) ^ ry)
        x, y = _rotate(side, x, y, rx, ry)
        s //= 2
    return d


def hilbert_cells(side: int, d) -> tuple[np.ndarray, np.ndarray]:
    """The cells (x, y) at positions ``d`` of the curve: the inverse of :func:`hilbert_index`."""
    side = _check_side(side)
    t = np.asarray(d, dtype=np.int64).copy()
    x = np.zeros(t.shape, dtype=np.int64)
    y = np.zeros(t.shape, dtype=np.int64)
    s = 1
    while s < side:
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        x, y = _rotate(s, x, y, rx, ry)
        x += s * rx
        y += s * ry
        t //= 4
        s *= 2
    return x, y


def padded_side(shape) -> int:
    """The side of the smallest 2^k x 2^k square holding a 2-D grid of ``shape``."""
    rows, cols = check_2d(shape)
    side = 1
    while side < max(rows, cols):
        side *= 2
    return side


def check_2d(shape) -> tuple[int, int]:
    sides = check_shape(shape)
    if len(sides) != 2:
        raise ParameterError(f"the Hilbert order is for 2-D grids, got {len(sides)} axes")
    return sides[0], sides[1]


def hilbert_sequence(shape) -> np.ndarray:
    """The flat (C order) indices of the cells of a 2-D grid in the order of the Hilbert curve
    of the padded square, padded cells skipped: ``counts.ravel()[hilbert_sequence(shape)]``
    is the 1-D histogram a 1-D mechanism sees.  O(cells log side)."""
    rows, cols = check_2d(shape)
    side = padded_side(shape)
    x, y = np.indices((rows, cols)).reshape(2, -1)
    return np.argsort(hilbert_index(side, x, y), kind="stable")
