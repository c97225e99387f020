"""DAWA (Li, Hay, Miklau, Wang, PVLDB 2014): a private partition of the domain into buckets of
near-uniform counts, then a GreedyH hierarchy over the buckets, each step with a declared share
of epsilon.
"""

from __future__ import annotations

import numpy as np

from .._params import Custom, Integer, OneOf, Param
from .._validation import check_delta, check_epsilon, fit_budget
from ..analysis.selection import select
from ..errors import ParameterError
from ..mechanisms.base import Mechanism, check_counts
from ..mechanisms.basic import Hierarchical, auto_hierarchies
from ..privacy.noise import NoiseSpec
from ..privacy.samplers import resolve_rng
from .greedy_h import cached_greedy_weights, hierarchy_of
from .partition import _INT_LIMIT, dyadic_partition, gibbs_partition, noisy_level_costs, partition_noise
from .privtree import EDGE_BINS, privtree_partition
from .release import DataAwareRelease
from .steps import BUCKET_WORKLOADS, SECOND_STAGES, SHARE, bucket_release, check_branching, check_steps_within, step

#: The private partition steps: "privtree" (a top-down split of the dyadic tree on noisy,
#: depth-biased median deviations), "gibbs" (one exponential-mechanism draw over every aligned
#: dyadic partition) and "noisy-costs" (independent noise on every dyadic bucket's cost).
PARTITIONS = ("privtree", "gibbs", "noisy-costs")

#: Above this many buckets GreedyH's search (8 grid values x depth x 2 exact O(m) error
#: evaluations; CPU s, cold cache: 0.3 at 4096 buckets, 0.8 at 2^14, 3.5 at 2^16, where it
#: chose the 16-ary tree "best-hierarchy" picks) gives way to "best-hierarchy".  Cached per
#: number of buckets and workload.
GREEDY_LIMIT = 2**14


class DAWA(Mechanism):
    """DAWA in 1-D (Li, Hay, Miklau and Wang, "A Data- and Workload-Aware Algorithm for Range
    Queries Under Differential Privacy", PVLDB 2014).

    Step 1 (share ``ratio`` of epsilon): a private partition of the bins into aligned dyadic
    buckets of near-uniform counts.  ``partition="privtree"`` (default) splits the dyadic tree
    top-down, a node when its median deviation, less a bias that grows with depth, plus
    discrete-Laplace noise exceeds DAWA's bucket penalty 1/eps2 (Zhang, Xiao and Xie's PrivTree,
    SIGMOD 2016, with a loss bound for a score that moves either way:
    :func:`~dprange.data_aware.privtree.privtree_partition`); noise keeps a node whole, so
    empty and flat runs stay one bucket; its nodes of at most ``edge_bins`` bins (default
    :data:`~dprange.data_aware.privtree.EDGE_BINS`) at either end of the domain split without a
    decision once reached (a public rule: the ends of a bounded domain often hold a point mass,
    values clamped to a bound or zeros, which the depth bias would leave in a bucket of several
    bins; 0 turns it off).  The other two score partitions by DAWA's L1 cost
    sum_B (dev(B) + 1/eps2).  ``partition="noisy-costs"`` puts independent noise on every
    dyadic bucket's cost, calibrated to the whole cost vector's sensitivity (about 2 c log2 n,
    c = 1 add/remove, 2 replace; :func:`partition_noise`), and keeps the exact minimiser.
    ``partition="gibbs"`` draws the whole partition once by the exponential mechanism,
    P(P) proportional to exp(-score(P) / T - |P|) with 1 / T = eps1 / (4 c) (one record moves
    the score by less than 2 c), by an exact top-down sampler over the dyadic tree
    (:func:`gibbs_partition`).  Unlike the paper's interval search all three are provably eps1-DP.
    Step 2 (the rest): ``second_stage="greedy_h"`` (default) measures the bucket totals with the
    GreedyH strategy adapted to ``bucket_workload`` over the buckets (:mod:`dprange.data_aware.greedy_h`:
    a binary hierarchy with per-depth weights chosen greedily bottom-up and refined, never
    worse in exact expected error than the hierarchies "best-hierarchy" picks from when
    those have branching 2^k), exact GLS on the weighted tree, uniform expansion; above
    :data:`GREEDY_LIMIT` buckets it falls back to "best-hierarchy" (its search costs O(m)
    per trial).  ``second_stage="best-hierarchy"``: ``bucket_branching`` "auto" picks, among the
    coarse grid of ``auto`` (b = 4..64), the one of least exact expected error on
    ``bucket_workload`` over the buckets (all ranges of buckets by default; the number of buckets
    is public once the partition is), measured and inferred by the ordinary pipeline; the estimate
    spreads each bucket's total uniformly over its bins.

    Why not the paper's candidate set (every interval, or every power-of-two length at every
    offset) with Laplace(2 / eps1) per interval: each bin lies in many overlapping candidates,
    and the minimiser of such costs is not eps1-DP; on 3 bins the exact loss is 1.12 eps1
    (tests/data_aware/test_partition.py).  The noisy costs carry noise that grows with log n
    and their minimiser exploits it, cutting sparse data into many wrong buckets at small
    epsilon x scale; a Gibbs draw splits flat regions into many buckets (its prior mass lies on
    the many partitions of nearly equal score).  Both lose to PrivTree side by side with the
    authors' DAWA (docs/data-aware.md).

    Default ratio 0.25 (the paper's; against 0.1 and the unclamped costs: docs/data-aware.md,
    "Figures by module").
    """

    name = "dawa"
    #: The error model depends on the data (a private partition): no data-free design.
    data_aware = True

    PARAMS = (
        Param("ratio", SHARE, "share of epsilon spent on the partition", default=0.25),
        Param(
            "partition",
            OneOf(PARTITIONS),
            "the private partition: privtree (split where the noisy deviation is high), gibbs or noisy-costs",
            default="privtree",
            attribute="partition_step",
        ),
        Param(
            "edge_bins",
            Integer(0),
            "privtree: nodes of at most this many bins at either end of the domain split without a decision",
            default=EDGE_BINS,
        ),
        Param(
            "second_stage",
            OneOf(SECOND_STAGES),
            "second stage on the buckets: greedy_h (GreedyH weights for bucket_workload) or best-hierarchy",
            default="greedy_h",
        ),
        Param(
            "bucket_branching",
            Custom(check_branching, "auto or an integer >= 2"),
            "best-hierarchy's tree: auto (least exact expected error on the buckets' ranges) or a branching factor",
            default="auto",
        ),
        Param(
            "bucket_workload",
            OneOf(BUCKET_WORKLOADS),
            "the ranges of buckets the second stage is chosen for (greedy_h, or best-hierarchy with auto branching)",
            default="all-range",
        ),
        *Mechanism.PARAMS,
    )
    ratio: float
    partition_step: str
    edge_bins: int
    second_stage: str
    bucket_branching: int | str
    bucket_workload: str

    def budgets(self, epsilon: float) -> tuple[float, float]:
        """(partition, measurement) shares, exact sum at most epsilon."""
        first = epsilon * self.ratio
        return tuple(fit_budget([first, epsilon - first], epsilon))  # type: ignore[return-value]

    def partition(self, counts, epsilon_partition: float, epsilon_measure: float, rng=None) -> np.ndarray:
        """Step 1 alone: start bins of the private partition (epsilon_partition-DP)."""
        counts = check_counts(counts)
        if int(counts.sum()) * counts.size >= _INT_LIMIT:
            raise ParameterError("DAWA needs total x bins below 2^62; coarsen the domain")
        changed = 2 if self.neighbours == "replace" else 1
        if self.partition_step == "privtree":
            return privtree_partition(
                counts, epsilon_partition, 1.0 / epsilon_measure, changed, resolve_rng(rng), self.edge_bins
            )
        if self.partition_step == "gibbs":
            return gibbs_partition(counts, epsilon_partition, 1.0 / epsilon_measure, changed, resolve_rng(rng))
        specs = partition_noise(counts.size, epsilon_partition, changed)
        costs = noisy_level_costs(counts, specs, resolve_rng(rng))
        return dyadic_partition(costs, counts.size, 1.0 / epsilon_measure)

    def inner(self, buckets: int | None = None, epsilon: float = 1.0, delta: float = 0.0) -> Hierarchical:
        """The hierarchy measured on the bucket totals: with ``second_stage="greedy_h"`` and 2 to
        :data:`GREEDY_LIMIT` buckets the GreedyH weights as a tree with per-level budgets
        summing to ``epsilon``; else the given branching, or with "auto" the
        coarse grid's hierarchy of least exact expected error on ``bucket_workload`` over the
        buckets (public: the number of buckets is the released partition's); without
        ``buckets`` (the data-free check) the deepest candidate, b = 4."""
        if self.second_stage == "greedy_h" and buckets is not None and 2 <= buckets <= GREEDY_LIMIT:
            known_total = self.neighbours == "replace"
            weights = cached_greedy_weights(buckets, self.bucket_workload, known_total)
            tree, measure_root, budget = hierarchy_of(weights, epsilon, known_total=known_total)
            return Hierarchical(
                tree,
                budget,
                measure_root=measure_root,
                neighbours=self.neighbours,
                noise=self.noise,
                inference=self.inference,
                inference_options=self.inference_options,
            )
        branching = self.bucket_branching
        if branching == "auto":
            branching = 4 if buckets is None else self.chosen_branching(buckets, epsilon, delta)
        return Hierarchical(
            branching,
            neighbours=self.neighbours,
            noise=self.noise,
            inference=self.inference,
            inference_options=self.inference_options,
        )

    def chosen_branching(self, buckets: int, epsilon: float, delta: float) -> int:
        candidates = auto_hierarchies(buckets, neighbours=self.neighbours, noise=self.noise, fast=True)
        if not candidates:
            return 2
        chosen = select(
            self.bucket_workload,
            buckets,
            epsilon,
            delta=delta,
            neighbours=self.neighbours,
            noise=self.noise,
            candidates=candidates,
        ).mechanism
        return int(chosen.branching)  # type: ignore[attr-defined]

    def strategy(self, n: int):
        """The data-free worst case checked before any count is read: the hierarchy on n
        buckets (every bin its own bucket)."""
        return self.inner().strategy(n)

    def noise_specs(self, strategy, epsilon: float, delta: float) -> list[NoiseSpec]:
        """The measurement step's noise on ``strategy`` with its share of epsilon."""
        return self.inner().noise_specs(strategy, self.budgets(check_epsilon(epsilon))[1], delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError("DAWA's measurements depend on a private partition; call release(...)")

    def design(self, n, epsilon, *, delta=0.0):
        raise ParameterError("DAWA's design depends on the data (a private partition); it has no data-free design")

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareRelease:
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        source = resolve_rng(rng)
        eps_partition, eps_measure = self.budgets(epsilon)
        starts = self.partition(counts, eps_partition, eps_measure, source)
        reduced = np.add.reduceat(counts, starts)
        inner = self.inner(reduced.size, eps_measure, delta)
        measurements = inner.measure(reduced, eps_measure, delta=delta, rng=source)
        estimate = inner.infer(measurements)
        steps = [step("partition", eps_partition), step("measure", measurements.epsilon)]
        check_steps_within(steps, epsilon)
        params = {
            **self.parameters(),
            "buckets": starts.tolist(),
            "bucket_hierarchy": inner.branching,
            "bucket_budget": inner.budget,
            "measure_root": inner.measure_root,
            "strategy": inner.strategy(reduced.size).describe(),
        }
        return bucket_release(
            self, estimate, starts, counts.size, measurements, params, steps, epsilon, delta, rng, domain
        )
