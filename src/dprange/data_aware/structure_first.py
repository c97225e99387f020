"""StructureFirst (Xu, Zhang, Xiao, Yang, Yu and Winslett, "Differentially Private Histogram
Publication", ICDE 2012): private bucket boundaries first, then noisy counts.

Step 1, the boundaries (share ``ratio`` of epsilon, eps1).  The bins are grouped into the cells
of a public grid (``grid`` bins each; boundaries lie on cell edges), each cell's count is the
sum of its bins' counts clipped at the public ``max_count`` F.  A partition P of the cells into
k = ``buckets`` intervals costs the sum of its buckets' L1 deviations from their means,
cost(P) = sum_B sum_{c in B} |x_c - mean_B| (DAWA's cost: Li, Hay, Miklau and Wang, PVLDB 2014).
The boundaries are ONE draw of the exponential mechanism (McSherry and Talwar, FOCS 2007) over
all partitions into k buckets, P(P) proportional to exp(-gamma cost(P)), sampled exactly by
forward sums and k - 1 backward choices (:func:`log_partition_sums`, :meth:`StructureFirst.boundaries`).
A record changes one cell count by at most 1 and so one bucket's deviation by at most
2 (1 - 1/s) (s <= m - k + 1 its cells; the proof of DAWA's partition); under replace it moves
inside one bucket (at most 2) or between two buckets of a + b <= m - k + 2 cells (at most
4 (1 - 2 / (a + b))): :func:`deviation_sensitivity`.  gamma = eps1 / (2 Delta) makes the draw
eps1-DP, less the charged rounding slack of the float log-weights (:func:`rounding_slack`).
Unlike the paper's v-optimal SSE score (sensitivity 2F + 1, a bound read from the true total
in the authors' code) the score's sensitivity does not grow with the counts, empty regions
cost nothing, and the one joint draw spends eps1 once where the paper's k - 1 sequential draws
get eps1 / (k - 1) each: when the data say little the draw is a uniform partition, not the
sequential draws' stick-breaking (most buckets in the leftmost cells).

Step 2, the counts (the rest, eps2).  A level-uniform tree over the k buckets (the *top*,
branching ``tree_branching``, its root the total: unmeasured, or public under replace) whose leaves
are the bucket totals, and with ``within="hierarchy"`` (default; the authors' code, Hay et
al.'s tree in every bucket) inside every bucket of two or more bins a level-uniform tree down to
its bins, its root being the bucket's node.  Every node gets discrete-Laplace noise; along every
bin's path the top's inner levels get eps2 / P each (P the longest path's nodes) and the
bucket's own nodes share the rest equally, so every path spends eps2 exactly (buckets are
disjoint: parallel composition; under replace every node's scale doubles).  The estimate is
the exact least-squares (GLS) estimate over all those nodes (:class:`BucketTrees`), which
dominates Hay et al.'s boosting; with ``within="uniform"`` only the top is measured and each
bucket's estimate is spread evenly over its bins (the paper's histogram).

The split.  Given the boundaries the "hierarchy" estimate is unbiased and its covariance does
not depend on the counts: the boundaries cannot lower its error, only reshape the trees (a
range costs about the same in any partition into few buckets).  So the boundaries get a small
share (``ratio`` 0.05: the counts' variances are 1 / 0.95^2 = 1.11 times those with all of
epsilon) and few buckets (k = 8, branching 8: a range crosses few bucket edges, and the top
adds one level).  All of n, k, F, ``grid``, ``tree_branching`` and ``ratio`` are public; nothing
reads the total.

Error bars.  Given the boundaries the "hierarchy" estimate is unbiased, and its exact
covariance is :class:`BucketTreeErrorModel` (``noise_only_stderr``); the boundaries depend on
the data, so the release keeps ``data_dependent=True``.  "uniform" adds the bias of the even
spread.  Pure epsilon-DP only (Laplace noise, delta = 0), least squares only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .._params import Integer, OneOf, Param
from .._validation import check_delta, check_epsilon, fit_budget
from ..answers.bootstrap import check_reps
from ..errors import ParameterError
from ..inference.tree import TreeErrorModel, flat_ranges, tree_gls
from ..mechanisms.base import Mechanism, check_counts
from ..privacy.exact_choice import selection_gamma_at_most
from ..privacy.noise import NoiseSpec
from ..privacy.samplers import resolve_rng
from ..registry import MECHANISMS, Citation
from ..strategies.calibration import resolve_noise
from ..strategies.trees import TreeStrategy, tree_height
from .release import DataAwareRelease
from .steps import SHARE, check_steps_within, data_aware_provenance, laplace_spec, select_query, step

#: Cells of the boundary grid kept by the default ``grid``.
MAX_CELLS = 512

#: How the counts inside a bucket are measured.
WITHIN = ("hierarchy", "uniform")

#: Relative error allowed per floating-point operation of the forward sums (32 ulps: exp and
#: log as numpy computes them, sums of up to MAX_CELLS terms charged separately).
ROUNDING = 2.0**-48


# ----------------------------------------------------------------------------- step 1
def cell_edges(n: int, grid: int) -> np.ndarray:
    """The candidate bucket edges 0, grid, 2 grid, ..., n (public)."""
    return np.append(np.arange(0, n, grid), n)


def cell_counts(counts: np.ndarray, edges: np.ndarray, max_count: int) -> np.ndarray:
    """Each cell's count: the sum of its bins' counts clipped at ``max_count``."""
    return np.add.reduceat(np.minimum(counts, max_count), edges[:-1]).astype(np.int64)


def scaled_deviations(values: np.ndarray) -> np.ndarray:
    """D[a, b] = s dev(a, b) = sum_{a <= c < b} |s x_c - S| (s = b - a, S the interval's sum),
    exact integers, for every interval of cells a < b (0 elsewhere).  Since the deviations from
    the mean sum to 0, D = 2 (S count_< - s sum_<) over the cells with x_c < S / s, i.e.
    x_c <= (S - 1) // s: counts and sums of values up to a rank, per prefix of cells, are
    one (m + 1) x (distinct values) table.  O(m^2) time and memory."""
    m = values.size
    distinct = np.unique(values)
    rank = np.searchsorted(distinct, values) + 1  # rank 0: below every value
    below_count = np.zeros((m + 1, distinct.size + 1), dtype=np.int64)
    below_sum = np.zeros((m + 1, distinct.size + 1), dtype=np.int64)
    below_count[np.arange(1, m + 1), rank] = 1
    below_sum[np.arange(1, m + 1), rank] = values
    below_count = np.cumsum(np.cumsum(below_count, axis=0), axis=1)
    below_sum = np.cumsum(np.cumsum(below_sum, axis=0), axis=1)
    prefix = np.concatenate([[0], np.cumsum(values)])
    a, b = np.triu_indices(m + 1, 1)
    size, total = b - a, prefix[b] - prefix[a]
    threshold = np.searchsorted(distinct, np.maximum(total - 1, -1) // size, side="right")
    count = below_count[b, threshold] - below_count[a, threshold]
    low = below_sum[b, threshold] - below_sum[a, threshold]
    out = np.zeros((m + 1, m + 1), dtype=np.int64)
    out[a, b] = 2 * (total * count - size * low)
    return out


def deviation_costs(values: np.ndarray) -> np.ndarray:
    """C[a, b] = dev(a, b), the L1 deviation of cells a..b-1 from their mean (inf unless a < b)."""
    m = values.size
    sizes = np.arange(m + 1)[None, :] - np.arange(m + 1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = scaled_deviations(values) / sizes
    out[sizes <= 0] = np.inf
    return out


def deviation_sensitivity(cells: int, buckets: int, changed: int) -> Fraction:
    """Delta: how far one record moves cost(P) of any partition of ``cells`` cells into
    ``buckets`` intervals.  Add/remove changes one cell by 1 and so one bucket's deviation, of
    s <= cells - buckets + 1 cells, by at most 2 (1 - 1/s) (its own term moves by 1 - 1/s, the
    s - 1 others by 1/s each).  Replace moves a record inside one bucket (two terms move by at
    most 1: 2) or between two buckets of a + b <= cells - buckets + 2 cells (at most
    2 (1 - 1/a) + 2 (1 - 1/b), largest at a = b: 4 (1 - 2 / (a + b)))."""
    if changed == 1:
        return 2 * (1 - Fraction(1, cells - buckets + 1))
    pair = cells - buckets + 2
    a, b = pair // 2, pair - pair // 2
    return max(Fraction(2), 2 * (1 - Fraction(1, a)) + 2 * (1 - Fraction(1, b)))


def rounding_slack(gamma: float, k: int, cells: int, n: int, max_count: int) -> float:
    """An upper bound on the privacy loss the float log-weights add: every log-weight of a
    backward choice is within eta = (k + 1) (M + m + 4) ROUNDING of its exact value, with M a
    public bound on their size (gamma times the largest cost 2 n F, plus k log(m + 1) from the
    partition sums); a choice's probabilities are then within e^(2 eta) of the exact ones, the
    k - 1 choices' product within e^(2 (k - 1) eta), and the ratio between neighbours within
    e^(4 (k - 1) eta) of the exact mechanism's."""
    size = gamma * 2.0 * n * max_count + k * math.log(cells + 1) + 1.0
    eta = (k + 1) * (size + cells + 4) * ROUNDING
    return 4.0 * (k - 1) * eta


def selection_gamma(epsilon_step: float, sensitivity: Fraction, k: int, cells: int, n: int, max_count: int) -> float:
    """The float gamma with 2 gamma Delta + rounding slack <= epsilon_step exactly (at most
    :data:`~dprange.privacy.exact_choice.MAX_SELECTION_GAMMA`)."""
    budget = Fraction(epsilon_step)
    top = selection_gamma_at_most(budget / (2 * sensitivity))
    slack = Fraction(rounding_slack(float(top), k, cells, n, max_count))
    if slack > budget / 2:
        raise ParameterError("StructureFirst's boundary scores are too large to draw exactly; lower max_count")
    gamma = float(min((budget - slack) / (2 * sensitivity), top))
    while 2 * Fraction(gamma) * sensitivity + slack > budget or Fraction(gamma) > top:
        gamma = math.nextafter(gamma, 0.0)
    return gamma


def log_partition_sums(weights: np.ndarray, k: int) -> np.ndarray:
    """L[j, b] = log sum over partitions of cells 0..b-1 into j buckets of exp(sum of their
    log-weights ``weights[a, b]``) (-inf where none exists), for j < k; O(k m^2)."""
    m = weights.shape[0] - 1
    out = np.full((max(k, 2), m + 1), -np.inf)
    out[1] = weights[0]
    for j in range(2, k):
        terms = out[j - 1][:, None] + weights  # cost: O(m^2) per bucket
        top = terms.max(axis=0)
        finite = np.isfinite(top)
        shift = np.where(finite, top, 0.0)
        with np.errstate(divide="ignore"):
            out[j] = np.where(finite, shift + np.log(np.exp(terms - shift).sum(axis=0)), -np.inf)
    return out


# ----------------------------------------------------------------------------- step 2
@dataclass(frozen=True)
class Level:
    """One measured group of nodes: where it is, its noise and its noisy values."""

    where: tuple
    noise: NoiseSpec
    values: np.ndarray


@dataclass
class StructureMeasurements:
    """The noisy node counts of step 2: the top's levels by depth, the bucket nodes (one noise
    each), every bucket tree's levels by depth; ``measurements`` lists them all."""

    top: dict
    buckets: list
    inner: list
    epsilon: float
    total: float | None
    noise_kind: str

    @property
    def measurements(self) -> list[Level]:
        out = list(self.top.values()) + [b for b in self.buckets if b is not None]
        return out + [level for levels in self.inner for level in levels.values()]


class BucketTrees:
    """Step 2's tree given the bucket starts: the top over the k buckets and, for "hierarchy",
    a tree inside every bucket of two or more bins (see the module docstring)."""

    def __init__(self, starts, n: int, branching: int, hierarchy: bool, known_total: bool):
        self.starts = np.asarray(starts, dtype=np.int64)
        self.n = n
        self.sizes = np.append(self.starts[1:], n) - self.starts
        self.k = self.starts.size
        self.known_total = known_total
        self.top = TreeStrategy(self.k, branching, measure_root=False, known_total=known_total)
        self.inner = [
            TreeStrategy(int(s), branching, measure_root=False) if hierarchy and s > 1 else None for s in self.sizes
        ]
        self.bucket_of = np.repeat(np.arange(self.k), self.sizes)

    @property
    def top_inner_depths(self) -> range:
        """The top's measured levels above the buckets."""
        return range(1, self.top.depth)

    def bucket_measured(self, j: int) -> bool:
        """The bucket's own node is measured unless it is the (private or public) root with a
        tree below it."""
        if self.k > 1:
            return True
        return not self.known_total and self.inner[j] is None

    def depth_of(self, j: int) -> int:
        tree = self.inner[j]
        return 0 if tree is None else tree.depth

    def node_budgets(self, epsilon: float) -> tuple[float, list[float]]:
        """(each top inner level's epsilon, each bucket's per-node epsilon): every bin's path
        sums to at most ``epsilon`` exactly."""
        above = len(self.top_inner_depths)
        own = [int(self.bucket_measured(j)) + self.depth_of(j) for j in range(self.k)]
        longest = above + max(own)
        top = epsilon / longest if above else 0.0
        rest = Fraction(epsilon) - above * Fraction(top)
        budgets = []
        for count in own:
            share = float(rest / count) if count else 0.0
            while count and above * Fraction(top) + count * Fraction(share) > Fraction(epsilon):
                share = math.nextafter(share, 0.0)
            budgets.append(share)
        return top, budgets

    def specs(self, epsilon: float, kind: str, changed: int):
        """The noise of every measured node group: (top levels, bucket nodes, bucket trees)."""
        top, own = self.node_budgets(epsilon)
        top_specs = {d: laplace_spec(top, changed, kind) for d in self.top_inner_depths}
        bucket_specs = [laplace_spec(e, changed, kind) if self.bucket_measured(j) else None for j, e in enumerate(own)]
        inner_specs = [None if t is None else laplace_spec(e, changed, kind) for t, e in zip(self.inner, own)]
        return top_specs, bucket_specs, inner_specs

    def exact_answers(self, counts: np.ndarray):
        """Node counts of (top levels by depth, bucket totals, bucket trees' levels by depth)."""
        totals = np.add.reduceat(counts, self.starts)
        top = {d: level_answers(self.top, d, totals) for d in self.top_inner_depths}
        inner = [
            {}
            if tree is None
            else {d: level_answers(tree, d, counts[s : s + tree.n]) for d in range(1, tree.depth + 1)}
            for tree, s in zip(self.inner, self.starts)
        ]
        return top, totals, inner

    def measure(self, counts, specs, epsilon: float, source, kind: str) -> StructureMeasurements:
        top_specs, bucket_specs, inner_specs = specs
        top, totals, inner = self.exact_answers(counts)
        return StructureMeasurements(
            {d: noisy(("top", d), top_specs[d], top[d], source) for d in self.top_inner_depths},
            [
                None if spec is None else noisy(("bucket", j), spec, totals[j : j + 1], source)
                for j, spec in enumerate(bucket_specs)
            ],
            [
                {d: noisy(("inner", j, d), spec, values, source) for d, values in levels.items()}
                for j, (spec, levels) in enumerate(zip(inner_specs, inner))
            ],
            epsilon,
            float(counts.sum()) if self.known_total else None,
            kind,
        )

    def estimate(self, meas: StructureMeasurements) -> BucketTreeEstimate:
        """The GLS estimate over every measured node, exactly, in O(nodes): each bucket tree's
        upward pass gives its from-below total and variance, combined with the bucket's node
        they are the top's leaf measurement; the top's GLS gives the bucket totals; each bucket
        tree's downward pass from its total gives its bins (the two passes of
        :func:`~dprange.inference.tree.tree_gls`, split at the buckets)."""
        leaf_values, leaf_variances = np.zeros(self.k), np.zeros(self.k)
        for j in range(self.k):
            leaf_values[j], leaf_variances[j] = self.bucket_leaf(meas, j)
        depth = self.top.depth
        values: list = [None] * (depth + 1)
        variances: list = [None] * (depth + 1)
        for d, level in meas.top.items():
            values[d], variances[d] = level.values, level.noise.variance
        values[depth], variances[depth] = leaf_values, leaf_variances
        if self.known_total and depth == 0:
            values[0] = variances[0] = None
        top = tree_gls(self.top, values, variances, total=meas.total)
        totals = top.leaves
        leaves = np.empty(self.n)
        gains = np.empty(self.n)
        residuals: list = []
        for j, (tree, s, size) in enumerate(zip(self.inner, self.starts, self.sizes)):
            if tree is None:
                leaves[s : s + size] = totals[j] / size
                gains[s : s + size] = 1.0 / size
                residuals.append(None)
                continue
            bins_values, bins_variances = inner_levels(tree, meas.inner[j])
            down = tree_gls(tree, bins_values, bins_variances, total=float(totals[j]))
            leaves[s : s + size] = down.leaves
            zeros = [None if v is None else np.zeros_like(v, dtype=float) for v in bins_values]
            gains[s : s + size] = tree_gls(tree, zeros, bins_variances, total=1.0).leaves
            residuals.append(down)
        return BucketTreeEstimate(leaves, BucketTreeErrorModel(top, residuals, gains, self.starts, self.n))

    def bucket_leaf(self, meas: StructureMeasurements, j: int) -> tuple[float, float]:
        """The top's leaf j: the bucket node's noisy count combined with its tree's from-below
        estimate by inverse variances (the upward pass's step), or whichever exists."""
        node = meas.buckets[j]
        tree = self.inner[j]
        if tree is None:
            if node is None:
                return 0.0, 0.0  # n = 1 under replace: the public total is the top's root
            return float(node.values[0]), node.noise.variance
        values, variances = inner_levels(tree, meas.inner[j])
        up = tree_gls(tree, values, variances)
        below, below_variance = float(up.from_below[0][0]), float(up.from_below_variance[0][0])
        if node is None:
            return below, below_variance
        y, v = float(node.values[0]), node.noise.variance
        return (y * below_variance + below * v) / (below_variance + v), below_variance * v / (below_variance + v)


def level_answers(tree: TreeStrategy, depth: int, x: np.ndarray) -> np.ndarray:
    """Exact counts of the nodes at ``depth`` (integers stay integers)."""
    block = tree.block_sizes[depth]
    rows = tree.level_sizes[depth]
    padded = np.zeros(rows * block, dtype=x.dtype)
    padded[: x.size] = x
    return padded.reshape(rows, block).sum(axis=1)


def noisy(where: tuple, spec: NoiseSpec, exact: np.ndarray, source) -> Level:
    return Level(where, spec, exact + spec.sample(exact.shape, source))


def inner_levels(tree: TreeStrategy, levels: dict) -> tuple[list, list]:
    """A bucket tree's (values, variances) by depth, its root unmeasured."""
    values: list = [None] * (tree.depth + 1)
    variances: list = [None] * (tree.depth + 1)
    for d, level in levels.items():
        values[d], variances[d] = level.values, level.noise.variance
    return values, variances


class BucketTreeErrorModel:
    """Exact noise-only variances of the StructureFirst estimate given the buckets.

    Inside a bucket j the estimate of a part R of it is g_R t_j + r_R, with t_j the GLS
    estimate of the bucket's total, g_R the sum of the bins' gains (their estimates' share of
    a known total) and r_R the bucket tree's residual given its total, which is uncorrelated
    with the bucket's from-below estimate and so with every other node (the smoother's form in
    :mod:`dprange.inference.tree`).  So Var(sum_i q_i xhat_i) = Var_top(sum_j G_j t_j) +
    sum_j Var(r_j(q)), G_j = sum_{i in j} q_i g_i: the top's error model on the bucket
    weights plus each bucket tree's with a known total.  Even spreading: g = 1 / size, r = 0.
    """

    #: Rows of bucket weights per batch of the top's query variances.
    BATCH_CELLS = 1 << 22

    def __init__(self, top: TreeErrorModel, residuals: list, gains: np.ndarray, starts: np.ndarray, n: int):
        self.top = top
        self.residuals = residuals
        self.gains = gains
        self.starts = starts
        self.ends = np.append(starts[1:], n) - 1
        self.n = n
        self.bucket_of = np.repeat(np.arange(starts.size), self.ends - starts + 1)
        self.cumulative_gains = np.concatenate([[0.0], np.cumsum(gains)])

    def top_variance(self, weights: np.ndarray) -> np.ndarray:
        rows = max(1, self.BATCH_CELLS // max(weights.shape[1], 1))
        return np.concatenate(
            [np.atleast_1d(self.top.query_variance(weights[i : i + rows])) for i in range(0, weights.shape[0], rows)]
        )

    def residual_variance(self, buckets: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Var of the residuals of bins lo..hi (inside bucket ``buckets``, global indices)."""
        out = np.zeros(buckets.size)
        for j in np.unique(buckets):
            model = self.residuals[int(j)]
            if model is None:
                continue
            rows = buckets == j
            start = self.starts[j]
            out[rows] = model.range_variance(lo[rows] - start, hi[rows] - start)
        return out

    def range_variance(self, lo, hi) -> np.ndarray:
        shape, left, right = flat_ranges(lo, hi, self.n)
        if left.size == 0:
            return np.zeros(shape)
        first, last = self.bucket_of[left], self.bucket_of[right]
        same = first == last
        left_end = np.where(same, right, self.ends[first])
        right_start = np.where(same, right, self.starts[last])
        weights = np.zeros((left.size, self.starts.size))
        rows = np.arange(left.size)
        weights[rows, first] = self.cumulative_gains[left_end + 1] - self.cumulative_gains[left]
        tail = self.cumulative_gains[right + 1] - self.cumulative_gains[right_start]
        weights[rows, last] += np.where(same, 0.0, tail)
        columns = np.arange(self.starts.size)
        weights[(columns > first[:, None]) & (columns < last[:, None])] = 1.0
        variance = self.top_variance(weights) + self.residual_variance(first, left, left_end)
        apart = ~same
        variance[apart] += self.residual_variance(last[apart], right_start[apart], right[apart])
        return np.maximum(variance, 0.0).reshape(shape)

    def query_variance(self, weights) -> np.ndarray:
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        if q.shape[-1] != self.n:
            raise ParameterError(f"query weights must have {self.n} entries per query")
        bucket_weights = np.zeros((q.shape[0], self.starts.size))
        np.add.at(bucket_weights.T, self.bucket_of, (q * self.gains).T)
        out = self.top_variance(bucket_weights)
        for j, model in enumerate(self.residuals):
            if model is not None:
                out = out + np.atleast_1d(model.query_variance(q[:, self.starts[j] : self.ends[j] + 1]))
        out = np.maximum(out, 0.0)
        return out if np.ndim(weights) > 1 else out[0]


@dataclass
class BucketTreeEstimate:
    leaves: np.ndarray
    error_model: BucketTreeErrorModel


class StructureFirstRelease(DataAwareRelease):
    """A StructureFirst release: noise-only error bars from :class:`BucketTreeErrorModel`; the
    bootstrap re-draws every node's noise around the released estimate and reruns the GLS."""

    def __init__(self, estimate, provenance, *, domain, trees: BucketTrees, measurements: StructureMeasurements):
        super().__init__(estimate.leaves, provenance, domain=domain, noise_only_error_model=estimate.error_model)
        self._trees = trees
        self._reduced = (measurements, "gls", trees.starts)

    def bootstrap(self, lo, hi, *, reps: int = 200, rng=None) -> np.ndarray:
        reps = check_reps(reps)
        lo, hi = self._check_ranges(lo, hi)
        shape, left, right = flat_ranges(lo, hi, self.n)
        measurements = self._reduced[0]
        specs = (
            {d: level.noise for d, level in measurements.top.items()},
            [None if b is None else b.noise for b in measurements.buckets],
            [next(iter(levels.values())).noise if levels else None for levels in measurements.inner],
        )
        source = resolve_rng(rng)
        answers = np.empty((reps, left.size))
        for r in range(reps):
            redrawn = self._trees.measure(self.estimate, specs, measurements.epsilon, source, measurements.noise_kind)
            if measurements.total is not None:
                redrawn.total = measurements.total
            sums = np.concatenate([[0.0], np.cumsum(self._trees.estimate(redrawn).leaves)])
            answers[r] = sums[right + 1] - sums[left]
        return answers.std(axis=0, ddof=1).reshape(shape)


# ----------------------------------------------------------------------------- mechanism
class StructureFirst(Mechanism):
    """StructureFirst (Xu et al., ICDE 2012) as the authors' code measures it: private bucket
    boundaries by one exponential-mechanism draw over all partitions, then a tree over the
    buckets with a tree inside every bucket and exact least squares; see the module docstring."""

    name = "structure-first"
    data_aware = True

    PARAMS = (
        Param("buckets", Integer(1), "number of buckets k", default=8),
        Param(
            "max_count",
            Integer(1),
            "public bound F on one bin's count: counts are clipped to it for the boundary costs only",
            default=100_000,
        ),
        Param("ratio", SHARE, "share of epsilon spent on the boundaries", default=0.05),
        Param(
            "grid",
            Integer(0),
            "boundaries every `grid` bins (0: the least power of two giving <= 512 cells)",
            default=0,
        ),
        Param(
            "within",
            OneOf(WITHIN),
            "inside a bucket: a tree down to its bins (hierarchy) or its total spread evenly (uniform)",
            default="hierarchy",
        ),
        Param(
            "tree_branching",
            Integer(2),
            "branching factor of the tree over the buckets and of the trees inside them",
            default=8,
        ),
        *Mechanism.PARAMS,
    )
    buckets: int
    max_count: int
    ratio: float
    grid: int
    within: str
    tree_branching: int

    def cell_size(self, n: int) -> int:
        if self.grid:
            return self.grid
        g = 1
        while -(-n // g) > MAX_CELLS:
            g *= 2
        return g

    def bucket_count(self, n: int) -> tuple[np.ndarray, int]:
        """(the public cell edges, the number of buckets k <= cells)."""
        edges = cell_edges(n, self.cell_size(n))
        return edges, min(self.buckets, edges.size - 1)

    def budgets(self, epsilon: float, choose: bool) -> tuple[float, float]:
        """(boundaries, counts): nothing on the boundaries when only one partition exists."""
        if not choose:
            return 0.0, epsilon
        first, rest = fit_budget([epsilon * self.ratio, epsilon - epsilon * self.ratio], epsilon)
        return first, rest

    def changed(self) -> int:
        return 2 if self.neighbours == "replace" else 1

    def noise_kind(self, delta: float) -> str:
        """The Laplace kind of the counts; refuses what this mechanism does not do."""
        if self.inference != "gls":
            raise ParameterError(
                "StructureFirst estimates by exact least squares over its bucket trees; pass inference='gls'"
            )
        kind = resolve_noise(self.noise, delta)
        if kind == "gaussian" or delta > 0:
            raise ParameterError("StructureFirst here is pure epsilon-DP; pass delta=0 and Laplace noise")
        return kind

    def strategy(self, n: int) -> TreeStrategy:
        """The data-free shape checked before any count is read: the tree over n bins (one bucket)."""
        return TreeStrategy(n, self.tree_branching, measure_root=False, known_total=self.neighbours == "replace")

    def noise_specs(self, strategy, epsilon: float, delta: float) -> list[NoiseSpec]:
        """The noise of the deepest possible path's nodes (the finest a release can add):
        checked before any count is read."""
        epsilon = check_epsilon(epsilon)
        kind = self.noise_kind(check_delta(delta))
        n = strategy.n
        _, k = self.bucket_count(n)
        longest = tree_height(k, self.tree_branching) + 1 + tree_height(n, self.tree_branching)
        _, rest = self.budgets(epsilon, 1 < k)
        return [laplace_spec(rest / longest, self.changed(), kind)]

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError("StructureFirst's measurements depend on private boundaries; call release(...)")

    def design(self, n, epsilon, *, delta=0.0):
        raise ParameterError(
            "StructureFirst's design depends on the data (private boundaries); it has no data-free design"
        )

    def boundaries(self, counts, epsilon_step: float, rng=None) -> np.ndarray:
        """Step 1 alone: the start bins of the k buckets, one epsilon_step-DP draw."""
        counts = check_counts(counts)
        n = counts.size
        edges, k = self.bucket_count(n)
        m = edges.size - 1
        if not 1 < k < m:
            return edges[:k] if k < m else edges[:-1]
        if 2.0 * n * n * float(self.max_count) >= 2.0**62:
            raise ParameterError("StructureFirst needs 2 bins^2 x max_count below 2^62; lower max_count")
        sensitivity = deviation_sensitivity(m, k, self.changed())
        gamma = selection_gamma(epsilon_step, sensitivity, k, m, n, self.max_count)
        weights = -gamma * deviation_costs(cell_counts(counts, edges, self.max_count))
        sums = log_partition_sums(weights, k)
        source = resolve_rng(rng)
        right = m
        chosen = []
        for j in range(k - 1, 0, -1):
            candidates = np.arange(j, right)
            scores = sums[j][candidates] + weights[candidates, right]

            def exact_score(r: int, scores=scores) -> Fraction:
                return Fraction(float(scores[r]))

            right = int(candidates[select_query(scores, exact_score, Fraction(1), source)])
            chosen.append(right)
        return edges[np.array([0, *reversed(chosen)], dtype=np.int64)]

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> StructureFirstRelease:
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        kind = self.noise_kind(delta)
        source = resolve_rng(rng)
        n = counts.size
        edges, k = self.bucket_count(n)
        choose = 1 < k < edges.size - 1
        eps_boundaries, eps_counts = self.budgets(epsilon, choose)
        starts = self.boundaries(counts, eps_boundaries, source)
        trees = BucketTrees(starts, n, self.tree_branching, self.within == "hierarchy", self.neighbours == "replace")
        measurements = trees.measure(counts, trees.specs(eps_counts, kind, self.changed()), eps_counts, source, kind)
        estimate = trees.estimate(measurements)
        steps = ([step("boundaries", eps_boundaries)] if choose else []) + [step("measure", eps_counts)]
        check_steps_within(steps, epsilon)
        params = {
            **self.parameters(),
            "buckets_used": int(k),
            "starts": starts.tolist(),
            "grid_used": self.cell_size(n),
        }
        provenance = data_aware_provenance(self, kind, params, steps, epsilon, delta, measurements.total, rng)
        return StructureFirstRelease(estimate, provenance, domain=domain, trees=trees, measurements=measurements)


MECHANISMS.add(
    StructureFirst,
    summary="data-aware: bucket boundaries by one exponential-mechanism draw over all partitions (L1 deviation "
    "cost), then a tree over the buckets and a tree inside each, exact least squares (error bars noise-only, "
    "given the boundaries)",
    citation=Citation(
        "Xu, Zhang, Xiao, Yang, Yu and Winslett", "Differentially Private Histogram Publication", "ICDE 2012"
    ),
    auto=False,
)
