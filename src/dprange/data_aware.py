"""Data-aware mechanisms in 1-D: DAWA and MWEM ("exploiting the data", Miklau, DIMACS 2012).

Both spend part of epsilon on a private *choice* that depends on the data (a partition of the
bins, the queries to measure), then measure with the rest.  Every private step declares its
share; the shares are recorded in the release's provenance (``parameters["private_steps"]``)
and their exact rational sum never exceeds epsilon.

Error bars.  The estimates are biased in a data-dependent way (uniform expansion inside a
bucket, multiplicative weights), so no closed form gives their error.  Releases say so
(``Release.exact_error_bars`` is False, ``Provenance.data_dependent`` is True); the standard
errors that DAWA's answers carry are the *noise-only* standard errors of the measurement step
given the (private, public after release) partition, also available as
:meth:`DataAwareRelease.noise_only_stderr`; they exclude the bias.  MWEM has no noise-only
closed form: its standard errors are NaN.  The bootstrap of a DAWA release re-runs only public
post-processing (reduced-domain inference and expansion) around the released estimate.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ._params import Custom, Integer, OneOf, Param
from ._validation import (
    check_delta,
    check_epsilon,
    check_positive_int,
    exact_sum,
    fit_budget,
    float_at_least,
    selection_gamma_at_most,
)
from .analysis import select
from .bootstrap import check_reps, resample_leaves
from .errors import ParameterError
from .greedy_h import cached_greedy_weights, hierarchy_of
from .inference.tree import flat_ranges
from .mechanisms import Hierarchical, Mechanism, auto_hierarchies, check_counts, is_seeded
from .noise import NoiseSpec, resolve_rng
from .provenance import Provenance
from .quantile_mechanisms import exact_choice
from .registry import MECHANISMS, Citation
from .release import Release

__all__ = ["DAWA", "MWEM", "DataAwareRelease", "dyadic_partition", "mwem_update"]

#: Counts times bins must stay exact in int64 (the partition's integer costs).
_INT_LIMIT = 2**62


# ----------------------------------------------------------------------------------------
# DAWA step 1: a private partition into dyadic buckets by a noisy L1 deviation cost
# ----------------------------------------------------------------------------------------


def dyadic_levels(n: int) -> list[int]:
    """The bucket sizes 2^l (l >= 1) of the dyadic levels above the leaves, while 2^(l-1) < n."""
    sizes, s = [], 2
    while s // 2 < n:
        sizes.append(s)
        s *= 2
    return sizes if n > 1 else []


def scaled_deviations(counts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """For the aligned buckets of ``size`` bins (the last one truncated at n): their sizes s
    and the integer costs s * dev(B) = sum_k |s x_k - S_B|, where dev is the L1 deviation
    from the bucket's mean (Li, Hay, Miklau and Wang, PVLDB 2014, section 3)."""
    n = counts.size
    starts = np.arange(0, n, size)
    sums = np.add.reduceat(counts, starts)
    sizes = np.minimum(starts + size, n) - starts
    deviation = np.abs(np.repeat(sizes, sizes) * counts - np.repeat(sums, sizes))
    return sizes, np.add.reduceat(deviation, starts)


def worst_loss(sensitivities: list[Fraction], scales: list[float]) -> Fraction:
    """Exact privacy loss sum_l sensitivity_l / b_l of discrete-Laplace levels with scales b_l."""
    return sum(
        (w / Fraction(NoiseSpec("discrete_laplace", b).effective_scale) for w, b in zip(sensitivities, scales)),
        Fraction(0),
    )


def partition_noise(n: int, epsilon: float, changed: int) -> list[NoiseSpec]:
    """Discrete-Laplace noise of the integer costs of every dyadic level, calibrated so that
    the whole vector of noisy costs is epsilon-DP.  Changing one count by 1 changes the cost
    s dev(B) of the one bucket of size s holding it by at most 2 (s - 1); a record changes
    ``changed`` counts (1 add/remove, 2 replace).  Level scale s_l D / epsilon with
    D = changed * sum_l 2 (1 - 1/s_l) spends exactly epsilon; rounding is checked exactly."""
    sizes = dyadic_levels(n)
    if not sizes:
        return []
    weights = [Fraction(2 * changed * (min(s, n) - 1)) for s in sizes]
    total = sum(Fraction(w, min(s, n)) for w, s in zip(weights, sizes))
    scales = [float(min(s, n) * total / Fraction(epsilon)) for s in sizes]
    while worst_loss(weights, scales) > Fraction(epsilon):
        scales = [math.nextafter(b, math.inf) for b in scales]
    return [NoiseSpec("discrete_laplace", b) for b in scales]


def noisy_level_costs(counts: np.ndarray, specs: list[NoiseSpec], source) -> list[np.ndarray]:
    """Noisy L1 deviations max(0, (s dev(B) + Z) / s) of every dyadic bucket, level by level (a
    bucket of one bin has deviation 0 whatever the data: it gets no noise).  A deviation is
    never negative, so clamping the noisy one at 0 is post-processing that only removes noise;
    it makes merging the cheaper choice wherever the noise swamps the deviation (Li et al.'s
    code clamps the same way), which is what wins on sparse data at small epsilon x scale."""
    out = []
    for size, spec in zip(dyadic_levels(counts.size), specs):
        sizes, costs = scaled_deviations(counts, size)
        noisy = np.maximum((costs + spec.sample(costs.shape, source)) / sizes, 0.0)
        out.append(np.where(sizes > 1, noisy, 0.0))
    return out


def dyadic_partition(level_costs: list[np.ndarray], n: int, penalty: float) -> np.ndarray:
    """Start bins of the partition into aligned dyadic buckets minimising
    sum_B (cost(B) + penalty), singletons costing 0 + penalty: a bottom-up pass over the
    levels, O(n) given the costs (``level_costs[l]``: the buckets of size 2^(l+1), the last
    one truncated at n; a truncated bucket equal to a lower one keeps the lower one's cost),
    then a top-down pass giving each bin its highest merged bucket.  Vectorised per level.
    Ties go to the merged bucket (post-processing)."""
    best = np.full(n, float(penalty))
    merged_by_level = []
    for costs in level_costs:
        pairs = (best.size + 1) // 2
        split_cost = np.zeros(pairs)
        np.add.at(split_cost, np.arange(best.size) // 2, best)
        merged = costs + penalty <= split_cost
        if best.size % 2:  # the last pair has one child: the same bucket, no new candidate
            merged[-1] = False
        best = np.where(merged, costs + penalty, split_cost)
        merged_by_level.append(merged)
    owner = np.full(n, -1, dtype=np.int64)
    for size, merged in zip(reversed(dyadic_levels(n)), reversed(merged_by_level)):
        node_start = np.arange(0, n, size)
        bin_node = np.arange(n) // size
        take = merged[bin_node] & (owner < 0)
        owner[take] = node_start[bin_node[take]]
    owner = np.where(owner < 0, np.arange(n), owner)
    return np.unique(owner)


# ----------------------------------------------------------------------------------------
# Error model of a uniformly expanded reduced estimate
# ----------------------------------------------------------------------------------------


class ExpandedErrorModel:
    """Noise-only variances of answers on n bins of an estimate expanded uniformly from a
    reduced (bucket) estimate with error model ``reduced``: an answer's weights on the n
    bins become weights on the buckets (sum of the weights inside each, over its size)."""

    def __init__(self, reduced, starts: np.ndarray, n: int):
        self.reduced = reduced
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.append(self.starts[1:], n) - 1
        self.sizes = self.ends - self.starts + 1
        self.n = n
        self.bucket_of = np.repeat(np.arange(self.starts.size), self.sizes)

    def bucket_weights(self, lo, hi) -> np.ndarray:
        lo = np.atleast_1d(lo)[:, None]
        hi = np.atleast_1d(hi)[:, None]
        overlap = np.minimum(hi, self.ends) - np.maximum(lo, self.starts) + 1
        return np.clip(overlap, 0, None) / self.sizes

    def range_variance(self, lo, hi) -> np.ndarray:
        shape, left, right = flat_ranges(lo, hi, self.n)
        if left.size == 0:
            return np.zeros(shape)
        variances = self.reduced.query_variance(self.bucket_weights(left, right))
        return np.asarray(variances, dtype=float).reshape(shape)

    def query_variance(self, weights) -> np.ndarray:
        w = np.atleast_2d(np.asarray(weights, dtype=float))
        reduced = np.zeros((w.shape[0], self.starts.size))
        np.add.at(reduced.T, self.bucket_of, w.T)
        out = np.asarray(self.reduced.query_variance(reduced / self.sizes), dtype=float)
        return out if np.ndim(weights) > 1 else out[0]


class UnknownErrorModel:
    """The error model of an estimate with no closed-form standard error: NaN everywhere."""

    def __init__(self, n: int):
        self.n = n

    def range_variance(self, lo, hi) -> np.ndarray:
        shape, _, _ = flat_ranges(lo, hi, self.n)
        return np.full(shape, np.nan)

    def query_variance(self, weights) -> np.ndarray:
        w = np.atleast_2d(np.asarray(weights, dtype=float))
        out = np.full(w.shape[0], np.nan)
        return out if np.ndim(weights) > 1 else out[0]


class DataAwareRelease(Release):
    """A release from a data-aware mechanism: ``exact_error_bars`` is False (its bias is
    data-dependent), so its answers' standard errors and intervals are NaN, as for NNLS / L1:
    nothing claims a coverage it does not have.  The noise-only standard error (given the
    private choices, excluding the bias) has its own name, :meth:`noise_only_stderr`, from
    ``noise_only_error_model`` (None for MWEM); :meth:`bootstrap` re-runs only public
    post-processing."""

    def __init__(self, estimate, provenance, *, domain=None, noise_only_error_model=None, reduced=None):
        super().__init__(estimate, UnknownErrorModel(np.size(estimate)), provenance, domain=domain)
        self.noise_only_error_model = noise_only_error_model
        self._reduced = reduced  # (measurements, inference, starts) for DAWA, None for MWEM

    def noise_only_stderr(self, lo, hi) -> np.ndarray:
        """Standard error of the ranges lo..hi due to the measurement noise alone, given the
        private choices (the partition); excludes the data-dependent bias.  NaN for MWEM."""
        lo, hi = self._check_ranges(lo, hi)
        model = self.noise_only_error_model or self.error_model
        return np.sqrt(model.range_variance(lo, hi))

    def bootstrap(self, lo, hi, *, reps: int = 200, rng=None) -> np.ndarray:
        """Parametric bootstrap of the noise-only error: re-draw the reduced measurements'
        noise around the released bucket totals, rerun the reduced inference, expand.  The
        private choices are kept (re-running them would read the data)."""
        if self._reduced is None:
            raise ParameterError(
                "this data-aware release has no public post-processing to re-run (MWEM's updates "
                "follow data-dependent selections); use a DAWA or a data-independent mechanism for error bars"
            )
        reps = check_reps(reps)
        lo, hi = self._check_ranges(lo, hi)
        measurements, method, starts = self._reduced
        sizes = np.append(starts[1:], self.n) - starts
        bucket_totals = np.add.reduceat(self.estimate, starts)
        shape, left, right = flat_ranges(lo, hi, self.n)
        source = resolve_rng(rng)
        answers = np.empty((reps, left.size))
        for r in range(reps):
            reduced = resample_leaves(measurements, bucket_totals, method, source)
            sums = np.concatenate([[0.0], np.cumsum(np.repeat(reduced / sizes, sizes))])
            answers[r] = sums[right + 1] - sums[left]
        return answers.std(axis=0, ddof=1).reshape(shape)


BUCKET_WORKLOADS = ("all-range", "prefix")
SECOND_STAGES = ("greedy_h", "best-hierarchy")
#: Above this many buckets GreedyH's search (8 grid values x depth x 2 exact O(m) error
#: evaluations; CPU s, cold cache: 0.3 at 4096 buckets, 0.8 at 2^14, 3.5 at 2^16, where it
#: chose the 16-ary tree "best-hierarchy" picks) gives way to "best-hierarchy".  Cached per
#: number of buckets and workload.
GREEDY_LIMIT = 2**14


def check_branching(value, name: str) -> int | str:
    """ "auto" or an integer >= 2."""
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
        raise ParameterError(f"{name} must be 'auto' or an integer >= 2, got {value!r}")
    return int(value)


def check_share(value, name: str) -> float:
    """A fraction of epsilon strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise ParameterError(f"{name} must be a fraction of epsilon strictly between 0 and 1, got {value!r}")
    return float(value)


SHARE = Custom(check_share, "a fraction of epsilon in (0, 1)")


def step(name: str, epsilon: float, times: int = 1) -> dict:
    """One private step of the accounting: its name, its epsilon, how many times it ran."""
    return {"step": name, "epsilon": float(epsilon), "times": times}


def spent(steps: list[dict]) -> Fraction:
    """The exact epsilon of the steps (sequential composition)."""
    return sum((Fraction(s["epsilon"]) * s["times"] for s in steps), Fraction(0))


def check_steps_within(steps: list[dict], epsilon: float) -> None:
    """Refuse (a programming error, never expected) private steps whose exact sum exceeds epsilon."""
    if spent(steps) > Fraction(epsilon):
        raise ParameterError("the private steps spend more than epsilon; report this as a bug")


def data_aware_provenance(mechanism, noise, parameters: dict, steps: list[dict], epsilon, delta, total, rng):
    """The provenance of a data-aware release: its private steps recorded in its parameters,
    epsilon their exact sum (rounded up, at most the budget), ``data_dependent`` set."""
    return Provenance(
        mechanism=mechanism.name,
        parameters={**parameters, "private_steps": steps},
        epsilon=min(float_at_least(spent(steps)), epsilon),
        delta=delta,
        neighbours=mechanism.neighbours,
        total=total,
        inference=mechanism.inference,
        inference_options=mechanism.inference_options,
        noise=noise,
        seeded=is_seeded(rng),
        data_dependent=True,
    )


def bucket_release(
    mechanism, estimate, starts, n, measurements, parameters: dict, steps, epsilon, delta, rng, domain
) -> DataAwareRelease:
    """The release of counts measured on the buckets starting at ``starts`` (of n bins): each
    bucket's estimate spread evenly over its bins, the noise-only error model expanded from the
    buckets' (:class:`ExpandedErrorModel`), the provenance of :func:`data_aware_provenance`."""
    sizes = np.append(starts[1:], n) - starts
    provenance = data_aware_provenance(
        mechanism, measurements.noise_kind, parameters, steps, epsilon, delta, measurements.total, rng
    )
    return DataAwareRelease(
        np.repeat(estimate.leaves / sizes, sizes),
        provenance,
        domain=domain,
        noise_only_error_model=ExpandedErrorModel(estimate, starts, n),
        reduced=(measurements, mechanism.inference, starts),
    )


class DAWA(Mechanism):
    """DAWA in 1-D (Li, Hay, Miklau and Wang, "A Data- and Workload-Aware Algorithm for Range
    Queries Under Differential Privacy", PVLDB 2014).

    Step 1 (share ``ratio`` of epsilon): a private partition of the bins into buckets of
    near-uniform counts, minimising the noisy L1 deviation cost sum_B (dev(B) + Z_B + 1/eps2).
    Unlike the paper's interval search, candidate buckets are the aligned dyadic intervals, so
    each count lies in one candidate per level and the whole noisy cost vector is epsilon-DP by
    the Laplace mechanism (:func:`partition_noise`); the minimiser is exact in O(n log n).
    Step 2 (the rest): ``second_stage="greedy_h"`` (default) measures the bucket totals with the
    GreedyH strategy adapted to ``bucket_workload`` over the buckets (:mod:`dprange.greedy_h`:
    a binary hierarchy with per-depth weights chosen greedily bottom-up and refined, never
    worse in exact expected error than the hierarchies "best-hierarchy" picks from when
    those have branching 2^k), exact GLS on the weighted tree, uniform expansion; above
    :data:`GREEDY_LIMIT` buckets it falls back to "best-hierarchy" (its search costs O(m)
    per trial).  ``second_stage="best-hierarchy"``, the earlier second stage: ``bucket_branching``
    "auto" picks, among the coarse grid of ``auto`` (b = 4..64), the one of least exact
    expected error on ``bucket_workload`` over the buckets (all ranges of buckets by default;
    the number of buckets is public once the partition is), measured and inferred by the
    ordinary pipeline; the estimate spreads each bucket's total uniformly over its bins.

    Why not the paper's candidate set (every interval, or every power-of-two length at every
    offset) with Laplace(2 / eps1) per interval: each bin lies in many overlapping candidates,
    and the minimiser of such costs is not eps1-DP; on 3 bins the exact loss is 1.12 eps1
    (tests/test_data_aware_partition.py).  The aligned dyadic candidates put each bin in one
    candidate per level, so the whole cost vector is calibrated exactly.

    Default ratio 0.25 (the paper's): with the clamped costs, on the DPBench shapes ADULTFRANK,
    HEPTH, MEDCOST and NETTRACE (1024 bins, prefixes, scales 10^3-10^7, epsilon 0.1 and 1,
    3 trials) ratio 0.25 gave on average 1.12 of the error of the best data-independent
    mechanism, ratio 0.1 1.27, and the unclamped costs 1.4-1.5 (benchmarks/dpbench.py).
    """

    name = "dawa"
    #: The error model depends on the data (a private partition): no data-free design.
    data_aware = True

    PARAMS = (
        Param("ratio", SHARE, "share of epsilon spent on the partition", default=0.25),
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


# ----------------------------------------------------------------------------------------
# MWEM
# ----------------------------------------------------------------------------------------


def mwem_update(weights: np.ndarray, lo: int, hi: int, measured: float, total: float) -> np.ndarray:
    """One multiplicative-weights step (Hardt, Ligett and McSherry, NIPS 2012, Algorithm 1):
    A(x) proportional to A(x) exp(q(x) (m - q(A)) / (2 N)), renormalised to total N."""
    error = measured - weights[lo : hi + 1].sum()
    out = weights.copy()
    out[lo : hi + 1] *= math.exp(error / (2.0 * total))
    return out * (total / out.sum())


def range_answers(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    sums = np.concatenate([[0.0], np.cumsum(values)])
    return sums[hi + 1] - sums[lo]


def select_query(scores: np.ndarray, exact_score, gamma: Fraction, rng) -> int:
    """Exponential mechanism: index r with P(r) proportional to exp(gamma score_r), sampled
    exactly (:func:`dprange.quantile_mechanisms.exact_choice`); ``exact_score(r)`` is the
    Fraction the float score_r approximates."""
    best = float(scores.max())
    near = np.flatnonzero(scores >= best - (abs(best) + 1.0) * 2.0**-40)
    exact_best = max(exact_score(int(r)) for r in near)
    g = float(gamma)
    exponents = np.maximum(g * (float(exact_best) - scores), 0.0)
    slack = (g * (np.abs(scores) + abs(best) + 1.0) + exponents + 1.0) * 2.0**-45

    def exact_exponent(r: int) -> Fraction:
        return gamma * (exact_best - exact_score(r))

    r, _ = exact_choice(np.ones(scores.size, dtype=np.int64), exponents, slack, exact_exponent, rng)
    return r


def selection_gamma(epsilon: float) -> Fraction:
    """The exponential mechanism's factor: P(r) proportional to exp(gamma score_r) with
    gamma = epsilon / (2 Delta); the score |q(A) - q(x)| has sensitivity Delta = 1 under both
    relations (one record moves any range count by at most 1; A is public).  At most
    :data:`dprange._validation.MAX_SELECTION_GAMMA` (a huge epsilon)."""
    return selection_gamma_at_most(Fraction(epsilon) / 2)


def laplace_spec(epsilon: float, sensitivity: int) -> NoiseSpec:
    """Discrete-Laplace noise of an integer query of this sensitivity, exactly epsilon-DP."""
    scale = sensitivity / epsilon
    while Fraction(sensitivity) / Fraction(NoiseSpec("discrete_laplace", scale).effective_scale) > Fraction(epsilon):
        scale = math.nextafter(scale, math.inf)
    return NoiseSpec("discrete_laplace", scale)


class MWEM(Mechanism):
    """MWEM (Hardt, Ligett and McSherry, "A Simple and Practical Algorithm for Differentially
    Private Data Release", NIPS 2012) over a workload of ranges (default: all prefixes).

    ``rounds`` T rounds; each spends (epsilon - total share) / T, half on choosing the worst
    answered range by the exponential mechanism (score |q(A) - q(x)|, sensitivity 1, exact
    sampler) and half on its discrete-Laplace answer; the multiplicative-weights update then
    re-applies every measurement so far (the paper's practical variant; ``passes`` times).
    The total is public under replace neighbours or when declared (``release(...,
    public_total=N)``), else estimated with ``total_share`` of epsilon.  The release is the
    average of the T approximations (Algorithm 1).
    """

    name = "mwem"
    #: The measured queries are chosen from the data: no data-free design or error model.
    data_aware = True

    PARAMS = (
        Param("rounds", Integer(1), "number of rounds T", default=20),
        Param("total_share", SHARE, "add/remove: share of epsilon spent on the noisy total", default=0.05),
        Param("passes", Integer(0), "extra update passes over all past measurements each round", default=1),
        *Mechanism.PARAMS,
    )
    rounds: int
    total_share: float
    passes: int

    def strategy(self, n: int) -> None:
        """MWEM's measured queries are chosen privately from the data: no data-free shape."""
        check_positive_int(n, "n")

    def noise_specs(self, strategy, epsilon: float, delta: float) -> list[NoiseSpec]:
        """The noise of the T measured answers (checked before any count is read)."""
        if check_delta(delta) > 0:
            raise ParameterError("MWEM here is pure epsilon-DP; pass delta=0")
        if self.inference != "gls":
            raise ParameterError("MWEM has no inference options: its estimate comes from multiplicative weights")
        _, _, eps_measure = self.shares(check_epsilon(epsilon))
        return [laplace_spec(eps_measure, 1)] * self.rounds

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError("MWEM's measurements depend on private selections; call release(...)")

    def design(self, n, epsilon, *, delta=0.0):
        raise ParameterError("MWEM's design depends on the data (private selections); it has no data-free design")

    def shares(self, epsilon: float, public: bool = False) -> tuple[float, float, float]:
        """(total, selection per round, measurement per round); exact sum at most epsilon.
        ``public``: the total is declared public (nothing spent on it)."""
        total = 0.0 if self.neighbours == "replace" or public else epsilon * self.total_share
        per_round = (epsilon - total) / self.rounds / 2
        while exact_sum([total, *([per_round] * (2 * self.rounds))]) > Fraction(epsilon):
            per_round = math.nextafter(per_round, 0.0)
        return total, per_round, per_round

    def release(
        self, counts, epsilon, *, delta=0.0, rng=None, domain=None, workload=None, public_total=None
    ) -> DataAwareRelease:
        """``public_total``: under add/remove, a number of records the user declares public
        (then no budget buys a noisy one); under replace the total is public already."""
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        if public_total is not None:
            if isinstance(public_total, bool) or not isinstance(public_total, (int, np.integer)) or public_total < 1:
                raise ParameterError(f"public_total must be a positive integer, got {public_total!r}")
            if self.neighbours == "replace" and int(public_total) != int(counts.sum()):
                raise ParameterError("under replace neighbours the total is public already; leave public_total unset")
        self.noise_specs(None, epsilon, delta)
        n = counts.size
        lo, hi = (np.zeros(n, dtype=np.int64), np.arange(n)) if workload is None else workload.ranges()
        lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
        if lo.size == 0 or lo.min() < 0 or hi.max() >= n or np.any(lo > hi):
            raise ParameterError(f"the workload's ranges must lie in 0..{n - 1} with lo <= hi")
        source = resolve_rng(rng)
        eps_total, eps_select, eps_measure = self.shares(epsilon)
        steps = []
        public = self.neighbours == "replace" or public_total is not None
        if public_total is not None:
            total = float(public_total)
            eps_select, eps_measure = self.shares(epsilon, public=True)[1:]
        elif self.neighbours == "replace":
            total = float(counts.sum())
        else:
            noisy = int(counts.sum()) + int(laplace_spec(eps_total, 1).sample((1,), source)[0])
            total = float(max(noisy, 1))
            steps.append(step("total", eps_total))
        true_answers = range_answers(counts, lo, hi).astype(np.int64)
        gamma = selection_gamma(eps_select)
        spec = laplace_spec(eps_measure, 1)
        weights = np.full(n, total / n)
        average = np.zeros(n)
        history: list[tuple[int, float]] = []
        for _ in range(self.rounds):
            approx = range_answers(weights, lo, hi)
            scores = np.abs(approx - true_answers)

            def exact_score(r: int, approx=approx) -> Fraction:
                return abs(Fraction(float(approx[r])) - int(true_answers[r]))

            r = select_query(scores, exact_score, gamma, source)
            measured = float(true_answers[r] + spec.sample((1,), source)[0])
            history.append((r, measured))
            weights = mwem_update(weights, int(lo[r]), int(hi[r]), measured, total)
            for _ in range(self.passes):
                for q, value in history:
                    weights = mwem_update(weights, int(lo[q]), int(hi[q]), value, total)
            average += weights
        steps += [step("select", eps_select, self.rounds), step("measure", eps_measure, self.rounds)]
        check_steps_within(steps, epsilon)
        params = {**self.parameters(), "queries": int(lo.size), "selected": [q for q, _ in history]}
        provenance = data_aware_provenance(
            self, "discrete_laplace", params, steps, epsilon, 0.0, total if public else None, rng
        )
        return DataAwareRelease(average / self.rounds, provenance, domain=domain)


MECHANISMS.add(
    DAWA,
    summary="data-aware: a private partition into near-uniform dyadic buckets, then GreedyH (a workload-weighted "
    "hierarchy) on the buckets (error bars noise-only, not exact)",
    citation=Citation(
        "Li, Hay, Miklau and Wang",
        "A Data- and Workload-Aware Algorithm for Range Queries Under Differential Privacy",
        "PVLDB 2014",
    ),
    auto=False,
)
MECHANISMS.add(
    MWEM,
    summary="data-aware: multiplicative weights with exponential-mechanism query selection (no closed-form error bars)",
    citation=Citation(
        "Hardt, Ligett and McSherry",
        "A Simple and Practical Algorithm for Differentially Private Data Release",
        "NIPS 2012",
    ),
    auto=False,
)
