"""Private spatial decompositions of a 2-D grid: kd splits by private medians, quadtree splits,
noisy node counts, and exact least squares on the resulting (irregular) tree.

A tree is a list of levels; level 0 is the whole grid, and every level is a partition of the
grid into rectangles (a node that cannot be split, a single cell, is carried down as its own
only child).  Hence one record lies in exactly one node of every level: a level's counts have
L1 sensitivity 1 under add/remove and 2 under replace, and private choices made separately in
the nodes of one level compose in parallel.

* kd split (Xiao, Xiong and Yuan, "Differentially Private Data Release through
  Multidimensional Partitioning", SDM 2010 workshop on Secure Data Management; private
  medians as in Cormode, Procopiuc, Srivastava, Shen and Yu, "Differentially Private Spatial
  Decompositions", ICDE 2012): the node is cut in two along one axis at the position chosen
  by the exponential mechanism (McSherry and Talwar, FOCS 2007) with score
  u(c) = -|left(c) - right(c)| (counts on either side).  One record changes u by at most 1
  (add/remove) or 2 (replace: both sides of one node, or one side of two nodes), so
  P(c) proportional to exp(eps u(c) / (2 Delta)) with Delta = 1 or 2 is eps-DP per level;
  sampled exactly (:func:`dprange.privacy.exact_choice.exact_choice`).
* quadtree split: each axis longer than one cell is halved (data-independent, free).
* counts: discrete-Laplace noise per measured level, exactly calibrated
  (:func:`dprange.data_aware.steps.laplace_spec`).
* least squares (:func:`tree_least_squares`): the two passes of Hay, Rastogi, Miklau and
  Suciu (PVLDB 2010) with per-node variances (any fan-out, unmeasured levels allowed): bottom
  up, a node's count and the sum of its children's estimates are averaged by inverse
  variance; top down, the gap between a parent's estimate and its children's sum is shared in
  proportion to the children's variances.  It equals generalised least squares on the leaves
  (tested against the dense solution); a public total fixes the root.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError
from ..privacy.exact_choice import exact_choice, selection_gamma_at_most
from ..privacy.noise import NoiseSpec


@dataclass
class Level:
    """The nodes of one level: inclusive rectangles ``lo``..``hi`` ((nodes, 2) arrays) and the
    index of every node's parent in the level above (None for the root level)."""

    lo: np.ndarray
    hi: np.ndarray
    parent: np.ndarray | None

    @property
    def size(self) -> int:
        return int(self.lo.shape[0])

    @property
    def areas(self) -> np.ndarray:
        return np.prod(self.hi - self.lo + 1, axis=1)


def root_level(shape) -> Level:
    return Level(np.zeros((1, 2), dtype=np.int64), np.array([[shape[0] - 1, shape[1] - 1]], dtype=np.int64), None)


def summed_area(counts: np.ndarray) -> np.ndarray:
    """The (rows + 1) x (cols + 1) table of counts above and left of every corner (int64 for
    integer counts, float for estimates)."""
    dtype = np.int64 if np.asarray(counts).dtype.kind in "biu" else float
    table = np.zeros((counts.shape[0] + 1, counts.shape[1] + 1), dtype=dtype)
    table[1:, 1:] = counts.cumsum(axis=0).cumsum(axis=1)
    return table


def box_sums(table: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sums over the inclusive rectangles lo..hi from a summed-area table (any dtype)."""
    return (
        table[hi[:, 0] + 1, hi[:, 1] + 1]
        - table[lo[:, 0], hi[:, 1] + 1]
        - table[hi[:, 0] + 1, lo[:, 1]]
        + table[lo[:, 0], lo[:, 1]]
    )


# ----------------------------------------------------------------------------- kd splits
def split_gamma(epsilon: float, neighbours: str) -> Fraction:
    """gamma = eps / (2 Delta) of the median's exponential mechanism (module doc), at most
    :data:`dprange.privacy.exact_choice.MAX_SELECTION_GAMMA` (a huge epsilon)."""
    return selection_gamma_at_most(Fraction(epsilon) / (2 * (2 if neighbours == "replace" else 1)))


def split_deviations(marginal: np.ndarray) -> np.ndarray:
    """|left(c) - right(c)| for the cuts c = 1..L-1 (c cells on the left) of a node whose
    counts along the split axis are ``marginal`` (exact integers)."""
    left = np.cumsum(marginal)[:-1]
    return np.abs(2 * left - int(marginal.sum()))


def split_probabilities(marginal: np.ndarray, gamma: Fraction) -> np.ndarray:
    """The exponential mechanism's probabilities of the cuts (float; for tests and analysis)."""
    dev = split_deviations(np.asarray(marginal, dtype=np.int64)).astype(float)
    logits = -float(gamma) * (dev - dev.min())
    p = np.exp(logits)
    return p / p.sum()


def sample_split(marginal: np.ndarray, gamma: Fraction, rng) -> int:
    """A cut c in 1..L-1 drawn exactly with P(c) proportional to exp(-gamma |left - right|)."""
    dev = split_deviations(marginal)
    low = int(dev.min())
    exponents = float(gamma) * (dev - low).astype(float)
    slack = (exponents + 1.0) * 2.0**-45

    def exact_exponent(r: int) -> Fraction:
        return gamma * (int(dev[r]) - low)

    r, _ = exact_choice(np.ones(dev.size, dtype=np.int64), exponents, slack, exact_exponent, rng)
    return r + 1


def split_axis(lo: np.ndarray, hi: np.ndarray, preferred: int) -> int:
    """The axis a kd node is cut along: ``preferred`` unless it is one cell wide; -1 for a single cell."""
    extent = hi - lo + 1
    if extent[preferred] > 1:
        return preferred
    if extent[1 - preferred] > 1:
        return 1 - preferred
    return -1


def kd_level(counts: np.ndarray, level: Level, depth: int, gamma: Fraction, rng) -> Level:
    """The children of every node of ``level`` cut at a private median (module doc); the axis
    alternates with ``depth``.  Cost: one pass over the grid and one exact draw per node."""
    lo, hi, parent = [], [], []
    for i in range(level.size):
        a, b = level.lo[i], level.hi[i]
        axis = split_axis(a, b, depth % 2)
        if axis < 0:
            lo.append(a)
            hi.append(b)
            parent.append(i)
            continue
        box = counts[a[0] : b[0] + 1, a[1] : b[1] + 1]
        cut = sample_split(box.sum(axis=1 - axis), gamma, rng)
        left_hi, right_lo = b.copy(), a.copy()
        left_hi[axis] = a[axis] + cut - 1
        right_lo[axis] = a[axis] + cut
        lo += [a, right_lo]
        hi += [left_hi, b]
        parent += [i, i]
    return Level(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), np.array(parent, dtype=np.int64))


def quad_level(level: Level) -> Level:
    """The children of every node of ``level``: each axis longer than one cell halved (the
    first half gets the smaller part).  Vectorised."""
    extent = level.hi - level.lo + 1
    mid = level.lo + extent // 2
    lo, hi, parent = [], [], []
    for first in (True, False):
        for second in (True, False):
            keep = np.ones(level.size, dtype=bool)
            a, b = level.lo.copy(), level.hi.copy()
            for axis, low_half in ((0, first), (1, second)):
                split = extent[:, axis] > 1
                if low_half:
                    b[split, axis] = mid[split, axis] - 1
                else:
                    a[split, axis] = mid[split, axis]
                    keep &= split
            lo.append(a[keep])
            hi.append(b[keep])
            parent.append(np.flatnonzero(keep))
    order = np.argsort(np.concatenate(parent), kind="stable")
    return Level(np.concatenate(lo)[order], np.concatenate(hi)[order], np.concatenate(parent)[order])


# ----------------------------------------------------------------------------- least squares
def _sum_children(parent: np.ndarray, size: int, values: np.ndarray) -> np.ndarray:
    if values.ndim == 1:
        return np.bincount(parent, weights=values, minlength=size)
    matrix = sp.csr_matrix((np.ones(parent.size), (parent, np.arange(parent.size))), shape=(size, parent.size))
    return np.asarray(matrix @ values)


def tree_least_squares(levels: list[Level], values: list, variances: list, total=None) -> list[np.ndarray]:
    """Generalised least squares estimates of every node (module doc).

    ``values[l]``: the noisy counts of level l ((nodes,) or (nodes, R) for R right-hand sides
    at once), None where not measured; ``variances[l]``: their noise variance (one float per
    level), ignored where not measured.  The last level must be measured.  ``total``: a public
    total (fixes the root).  Cost O(nodes x R)."""
    if values[-1] is None:
        raise ParameterError("the tree's leaves must be measured")
    depth = len(levels)
    z: list = [None] * depth
    var: list = [None] * depth
    z[-1] = np.asarray(values[-1], dtype=float)
    var[-1] = np.full(levels[-1].size, float(variances[-1]))
    sums: list = [None] * depth
    sum_vars: list = [None] * depth
    for d in range(depth - 2, -1, -1):
        parent = levels[d + 1].parent
        assert parent is not None  # only the root level has none
        sums[d] = _sum_children(parent, levels[d].size, z[d + 1])
        sum_vars[d] = np.bincount(parent, weights=var[d + 1], minlength=levels[d].size)
        if values[d] is None:
            z[d], var[d] = sums[d], sum_vars[d]
            continue
        w_own = 1.0 / float(variances[d])
        w_sum = 1.0 / sum_vars[d]
        weight = w_own / (w_own + (w_sum if sums[d].ndim == 1 else w_sum[:, None]))
        z[d] = weight * np.asarray(values[d], dtype=float) + (1.0 - weight) * sums[d]
        var[d] = 1.0 / (w_own + w_sum)
    x: list = [None] * depth
    x[0] = z[0] if total is None else np.full_like(z[0], float(total))
    for d in range(depth - 1):
        parent = levels[d + 1].parent
        assert parent is not None
        gap = x[d] - sums[d]
        share = var[d + 1] / sum_vars[d][parent]
        x[d + 1] = z[d + 1] + (share if gap.ndim == 1 else share[:, None]) * gap[parent]
    return x


def leaf_labels(shape, leaves: Level) -> np.ndarray:
    """The leaf holding every cell: the leaves are disjoint and cover the grid, so painting
    +i / -i at the four corners of leaf i and summing along both axes leaves i on its cells.
    O(cells + leaves)."""
    paint = np.zeros((shape[0] + 1, shape[1] + 1), dtype=np.int64)
    index = np.arange(leaves.size)
    lo, hi = leaves.lo, leaves.hi + 1
    np.add.at(paint, (lo[:, 0], lo[:, 1]), index)
    np.add.at(paint, (lo[:, 0], hi[:, 1]), -index)
    np.add.at(paint, (hi[:, 0], lo[:, 1]), -index)
    np.add.at(paint, (hi[:, 0], hi[:, 1]), index)
    return paint.cumsum(axis=0).cumsum(axis=1)[: shape[0], : shape[1]]


class TreeFit:
    """A measured tree and its least-squares leaves; the noise-only covariance of answers
    (given the tree, which the private steps chose) and a bootstrap of the least squares."""

    def __init__(self, shape, levels: list[Level], measured: list, specs: list, total=None):
        self.shape = tuple(shape)
        self.levels = levels
        self.measured = measured  # noisy counts per level (None: not measured)
        self.specs: list[NoiseSpec | None] = specs
        self.total = total
        self.variances: list = [None if s is None else s.variance for s in specs]
        self.nodes = tree_least_squares(levels, measured, self.variances, total)
        leaves = levels[-1]
        self.leaf_areas = leaves.areas
        self.labels = leaf_labels(self.shape, leaves)

    def expand(self, leaf_values: np.ndarray) -> np.ndarray:
        """Cell estimates: every leaf's estimate spread uniformly over its cells."""
        return (leaf_values / self.leaf_areas)[self.labels]

    @property
    def cells(self) -> np.ndarray:
        return self.expand(self.nodes[-1])

    def leaf_weights(self, cell_weights: np.ndarray) -> np.ndarray:
        """Weights on the leaves of queries given by weights on the cells ((R, cells), C order):
        an answer of the expanded estimate is sum_leaf (its weights inside the leaf / area) x_leaf."""
        w = np.atleast_2d(cell_weights)
        out = np.zeros((w.shape[0], self.levels[-1].size))
        np.add.at(out.T, self.labels.ravel(), w.T)
        return out / self.leaf_areas

    def query_variance(self, cell_weights: np.ndarray) -> np.ndarray:
        """Noise-only variance of q . cells for each row q: q_L^T Cov(x_leaves) q_L, with
        Cov q_L the least squares of the data sigma_leaf^2 q_L on the leaves (public total 0)."""
        q = self.leaf_weights(cell_weights).T  # (leaves, R)
        rhs: list = [
            None if v is None else np.zeros((lv.size, q.shape[1])) for v, lv in zip(self.measured, self.levels)
        ]
        rhs[-1] = float(self.variances[-1]) * q
        cov_q = tree_least_squares(self.levels, rhs, self.variances, None if self.total is None else 0.0)[-1]
        return np.maximum(np.sum(q * cov_q, axis=0), 0.0)

    def resample(self, rng) -> np.ndarray:
        """One bootstrap replicate of the cell estimates: the measured levels re-drawn around
        the fitted node counts with their own noise, the least squares rerun (public)."""
        redrawn = [
            None if spec is None else np.rint(fit) + spec.sample(fit.shape, rng)
            for fit, spec in zip(self.nodes, self.specs)
        ]
        return self.expand(tree_least_squares(self.levels, redrawn, self.variances, self.total)[-1])
