"""StructureFirst (Xu, Zhang, Xiao, Yang, Yu and Winslett, "Differentially Private Histogram
Publication", ICDE 2012): a v-optimal histogram whose bucket boundaries are chosen by the
exponential mechanism, then one noisy count per bucket.

Step 1 (share ``ratio`` of epsilon): the v-optimal costs E(j, b), the least sum of squared
errors (SSE) of a partition of the first b cells into j buckets, by dynamic programming on the
counts clipped to the public bound ``max_count`` F; then the k - 1 inner boundaries from the
right, each by the exponential mechanism with score -(E(j, a) + SSE(a, q_{j+1})) over the
candidate edges a and an equal share of step 1's epsilon.  One record changes one clipped
count by at most 1, the SSE of the bucket holding it by at most 2F + 1 (the paper's bound), and
so every score (a minimum over partitions, each with one bucket holding that count) by at
most 2F + 1 (twice that under replace).  Step 2 (the rest): the bucket totals through
:class:`~dprange.mechanisms.basic.Flat` (discrete Laplace, the ordinary pipeline), spread uniformly
over each bucket's bins.  Error bars are noise-only (given the boundaries), as for DAWA.

Boundaries lie on a public grid of ``grid`` bins (default: the smallest power of two keeping
at most 512 cells), which bounds the dynamic programme at O(k (n / grid)^2).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._params import Integer, Param
from .._validation import check_delta, check_epsilon, exact_sum, fit_budget
from ..errors import ParameterError
from ..mechanisms.base import Mechanism, check_counts
from ..mechanisms.basic import Flat
from ..privacy.exact_choice import selection_gamma_at_most
from ..privacy.samplers import resolve_rng
from ..registry import MECHANISMS, Citation
from .release import DataAwareRelease
from .steps import SHARE, bucket_release, check_steps_within, select_query, step

#: Cells of the boundary grid kept by the default ``grid``.
MAX_CELLS = 512


def cell_edges(n: int, grid: int) -> np.ndarray:
    """The candidate bucket edges 0, grid, 2 grid, ..., n (public)."""
    return np.append(np.arange(0, n, grid), n)


def sse_matrix(clipped: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """SSE(a, b) of the bins between edges a < b (inf elsewhere): sum x^2 - (sum x)^2 / size.
    Prefix sums are exact integers below 2^53 (F^2 n is checked), so each entry has one or two
    roundings.  Cost: O(cells^2) memory and time."""
    s1 = np.concatenate([[0], np.cumsum(clipped)])[edges].astype(float)
    s2 = np.concatenate([[0], np.cumsum(clipped.astype(np.int64) ** 2)])[edges].astype(float)
    sizes = edges[None, :] - edges[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (s2[None, :] - s2[:, None]) - (s1[None, :] - s1[:, None]) ** 2 / sizes
    out[sizes <= 0] = np.inf
    return np.maximum(out, 0.0)


def vopt_costs(sse: np.ndarray, k: int) -> np.ndarray:
    """E[j, b]: the least SSE of the cells 0..b-1 in j buckets (j = 1..k; inf if impossible).
    Cost: O(k cells^2), one vectorised min per j."""
    m = sse.shape[0] - 1
    costs = np.full((k + 1, m + 1), np.inf)
    costs[0, 0] = 0.0
    for j in range(1, k + 1):
        costs[j] = (costs[j - 1][:, None] + sse).min(axis=0)  # cost: O(cells^2)
    return costs


def boundary_scores(costs: np.ndarray, sse: np.ndarray, j: int, right: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate edges a (j <= a < right) for the boundary before bucket j + 1 ending at
    ``right``, and their costs E(j, a) + SSE(a, right)."""
    candidates = np.arange(j, right)
    return candidates, costs[j, candidates] + sse[candidates, right]


def float_error_bound(n: int, max_count: int) -> float:
    """A bound on the rounding error of any float score: every score is a sum of at most n
    SSE terms, each at most n F^2 with a few roundings of relative 2^-53."""
    return 4.0 * (n + 2) * n * float(max_count) ** 2 * 2.0**-52


def boundary_probabilities(
    counts, k: int, max_count: int, epsilon_step: float, changed: int = 1, grid: int = 1
) -> dict[tuple[int, ...], float]:
    """Exact output distribution of step 1 (the inner edges, as cell indices), by enumerating
    the sequential choices; for tests on tiny domains."""
    clipped = np.minimum(check_counts(counts), max_count)
    edges = cell_edges(clipped.size, grid)
    k = min(k, edges.size - 1)
    sse = sse_matrix(clipped, edges)
    costs = vopt_costs(sse, k)
    gamma = float(selection_gamma(epsilon_step, max_count, changed, clipped.size))
    out: dict[tuple[int, ...], float] = {}

    def walk(j: int, right: int, chosen: tuple[int, ...], p: float) -> None:
        if j == 0:
            out[chosen] = out.get(chosen, 0.0) + p
            return
        candidates, scores = boundary_scores(costs, sse, j, right)
        w = np.exp(-gamma * (scores - scores.min()))
        w /= w.sum()
        for a, pa in zip(candidates, w):
            walk(j - 1, int(a), (int(a), *chosen), p * float(pa))

    walk(k - 1, edges.size - 1, (), 1.0)
    return out


def selection_gamma(epsilon_step: float, max_count: int, changed: int, n: int) -> Fraction:
    """P(a) proportional to exp(-gamma score_a), gamma = epsilon / (2 Delta) with Delta =
    changed (2F + 1) plus the scores' float error bound; at most
    :data:`dprange.privacy.exact_choice.MAX_SELECTION_GAMMA` (a huge epsilon)."""
    delta = changed * (2 * max_count + 1) + float_error_bound(n, max_count)
    return selection_gamma_at_most(Fraction(epsilon_step) / (2 * Fraction(delta)))


class StructureFirst(Mechanism):
    """StructureFirst (Xu et al., ICDE 2012): v-optimal bucket boundaries by the exponential
    mechanism, then noisy bucket counts; see the module docstring."""

    name = "structure-first"
    data_aware = True

    PARAMS = (
        Param("buckets", Integer(1), "number of buckets k", default=32),
        Param(
            "max_count",
            Integer(1),
            "public bound F on one bin's count (counts are clipped to it for the structure)",
            default=1000,
        ),
        Param("ratio", SHARE, "share of epsilon spent on the boundaries", default=0.3),
        Param(
            "grid",
            Integer(0),
            "boundaries every `grid` bins (0: the least power of two giving <= 512 cells)",
            default=0,
        ),
        *Mechanism.PARAMS,
    )
    buckets: int
    max_count: int
    ratio: float
    grid: int

    def cell_size(self, n: int) -> int:
        if self.grid:
            return self.grid
        g = 1
        while -(-n // g) > MAX_CELLS:
            g *= 2
        return g

    def budgets(self, epsilon: float, k: int) -> tuple[float, float]:
        """(per boundary choice, measurement): (k - 1) choices and one measurement within epsilon."""
        first = epsilon * self.ratio if k > 1 else 0.0
        per = first / (k - 1) if k > 1 else 0.0
        measure = fit_budget([first, epsilon - first], epsilon)[1] if k > 1 else epsilon
        while exact_sum([*([per] * (k - 1)), measure]) > Fraction(epsilon):
            per = math.nextafter(per, 0.0)
        return per, measure

    def strategy(self, n: int):
        """The data-free shape checked before any count is read: one noisy count per bin."""
        return self.inner().strategy(n)

    def inner(self) -> Flat:
        return Flat(
            neighbours=self.neighbours,
            noise=self.noise,
            inference=self.inference,
            inference_options=self.inference_options,
        )

    def noise_specs(self, strategy, epsilon: float, delta: float):
        return self.inner().noise_specs(strategy, epsilon, delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError("StructureFirst's measurements depend on private boundaries; call release(...)")

    def design(self, n, epsilon, *, delta=0.0):
        raise ParameterError(
            "StructureFirst's design depends on the data (private boundaries); it has no data-free design"
        )

    def boundaries(self, counts, epsilon_step: float, rng=None) -> np.ndarray:
        """Step 1 alone: the start bins of the k buckets ((k - 1) epsilon_step-DP)."""
        counts = check_counts(counts)
        n = counts.size
        if float(self.max_count) ** 2 * n >= 2.0**52:
            raise ParameterError("StructureFirst needs max_count^2 x bins below 2^52; lower max_count")
        grid = self.cell_size(n)
        edges = cell_edges(n, grid)
        k = min(self.buckets, edges.size - 1)
        clipped = np.minimum(counts, self.max_count)
        sse = sse_matrix(clipped, edges)
        costs = vopt_costs(sse, k)
        changed = 2 if self.neighbours == "replace" else 1
        gamma = selection_gamma(epsilon_step, self.max_count, changed, n)
        source = resolve_rng(rng)
        right = edges.size - 1
        inner = []
        for j in range(k - 1, 0, -1):
            candidates, scores = boundary_scores(costs, sse, j, right)

            def exact_score(r: int, scores=scores) -> Fraction:
                return -Fraction(float(scores[r]))

            right = int(candidates[select_query(-scores, exact_score, gamma, source)])
            inner.append(right)
        return edges[np.array([0, *reversed(inner)], dtype=np.int64)]

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareRelease:
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        source = resolve_rng(rng)
        n = counts.size
        k = min(self.buckets, cell_edges(n, self.cell_size(n)).size - 1)
        per, eps_measure = self.budgets(epsilon, k)
        starts = self.boundaries(counts, per, source) if k > 1 else np.zeros(1, dtype=np.int64)
        reduced = np.add.reduceat(counts, starts)
        inner = self.inner()
        measurements = inner.measure(reduced, eps_measure, delta=delta, rng=source)
        estimate = inner.infer(measurements)
        steps = ([step("boundaries", per, k - 1)] if k > 1 else []) + [step("measure", measurements.epsilon)]
        check_steps_within(steps, epsilon)
        params = {
            **self.parameters(),
            "buckets_used": int(k),
            "starts": starts.tolist(),
            "grid_used": self.cell_size(n),
        }
        return bucket_release(self, estimate, starts, n, measurements, params, steps, epsilon, delta, rng, domain)


MECHANISMS.add(
    StructureFirst,
    summary="data-aware: v-optimal bucket boundaries chosen by the exponential mechanism, then noisy bucket counts "
    "(error bars noise-only, not exact)",
    citation=Citation(
        "Xu, Zhang, Xiao, Yang, Yu and Winslett", "Differentially Private Histogram Publication", "ICDE 2012"
    ),
    auto=False,
)
