"""MWEM (Hardt, Ligett, McSherry, NIPS 2012): rounds of a query selected by the exponential
mechanism, measured with noise, and multiplicative-weights updates of a synthetic histogram.

The practical choices follow the authors' evaluation code (DPBench, Hay, Machanavajjhala, Miklau,
Chen and Zhang, SIGMOD 2016: MWEM with many update passes and the last iterate, MWEM*'s rounds
from N epsilon) without its shortcut (it starts from and renormalises to the true total): here
the total is a noisy one, refined by the complements measured for free (docs/data-aware.md).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._params import Custom, Flag, Integer, OneOf, Param
from .._validation import check_delta, check_epsilon, check_positive_int, exact_sum
from ..errors import ParameterError
from ..mechanisms.base import Mechanism, check_counts
from ..privacy.noise import NoiseSpec
from ..privacy.samplers import resolve_rng
from ..registry import MECHANISMS, WORKLOADS, Citation
from ..workloads.ranges import AllRange, Identity, Prefix, Workload, make_workload, not_a_workload
from .dawa import DAWA
from .release import DataAwareRelease
from .steps import SHARE, check_steps_within, data_aware_provenance, laplace_spec, select_query, selection_gamma, step

#: MWEM*'s rounds T by N epsilon (DPBench, Hay et al. SIGMOD 2016; dpcomp_core's
#: ``mwemND.Lfunction`` for 1-D), linearly interpolated, here on the noisy or declared total.
ROUNDS_BY_SIGNAL = (
    (0.0, 1.0, 10.0, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8),
    (2, 2, 2, 4, 8, 12, 60, 80, 140, 140),
)

#: Most multiplicative-weights updates per round: the passes over all past measurements stop
#: there (the authors make 100 passes; past this many updates they change little, and the time
#: grows as rounds^2 x passes).
UPDATES_PER_ROUND = 3000

#: Most ranges MWEM enumerates in its selection (all ranges on about 5800 bins).
MAX_QUERIES = 2**24

#: A multiplicative-weights exponent is clipped to this magnitude (post-processing: it only
#: keeps the floats finite when a noisy total is tiny against a measured count).
MAX_EXPONENT = 30.0


def mwem_update(weights: np.ndarray, lo: int, hi: int, measured: float, total: float) -> np.ndarray:
    """One multiplicative-weights step (Hardt, Ligett and McSherry, NIPS 2012, Algorithm 1):
    A(x) proportional to A(x) exp(q(x) (m - q(A)) / (2 N)), renormalised to total N."""
    error = measured - weights[lo : hi + 1].sum()
    out = weights.copy()
    out[lo : hi + 1] *= math.exp(error / (2.0 * total))
    return out * (total / out.sum())


def update_passes(weights: np.ndarray, history: list[tuple[int, int, float]], total: float, passes: int) -> None:
    """``passes`` sweeps of :func:`mwem_update` over the measured ranges ``(lo, hi, m)`` in
    place, on unnormalised weights (the histogram is ``weights`` scaled to ``total``); ends
    normalised to ``total``."""
    current = float(weights.sum())
    for _ in range(passes):
        for lo, hi, measured in history:
            part = float(weights[lo : hi + 1].sum())
            exponent = (measured - part * total / current) / (2.0 * total)
            factor = math.exp(min(max(exponent, -MAX_EXPONENT), MAX_EXPONENT))
            weights[lo : hi + 1] *= factor
            current += (factor - 1.0) * part
        weights *= total / float(weights.sum())
        current = float(weights.sum())


def range_answers(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    sums = np.concatenate([[0.0], np.cumsum(values)])
    return sums[hi + 1] - sums[lo]


def measured_pieces(lo: int, hi: int, n: int, complements: bool) -> list[tuple[int, int]]:
    """The disjoint ranges measured for a selected range [lo, hi] on n bins: the range, and with
    ``complements`` the non-empty parts of its complement, [0, lo - 1] and [hi + 1, n - 1].  A
    record lies in exactly one of them, so under add/remove the vector of their counts has L1
    sensitivity 1 and one Laplace draw each at the round's epsilon is epsilon-DP (parallel
    composition); under replace it would have sensitivity 2."""
    pieces = [(lo, hi)]
    if complements and lo > 0:
        pieces.append((0, lo - 1))
    if complements and hi < n - 1:
        pieces.append((hi + 1, n - 1))
    return pieces


def rounds_for(total: float, epsilon: float) -> int:
    """MWEM*'s number of rounds for a total N (noisy or declared) at epsilon: the table
    :data:`ROUNDS_BY_SIGNAL` at N epsilon."""
    signal = max(float(total), 0.0) * float(epsilon)
    return int(np.interp(signal, *ROUNDS_BY_SIGNAL))


def check_rounds(value, name: str) -> int | str:
    """ "auto" or an integer >= 1."""
    return value if value == "auto" else check_positive_int(value, name)


def parse_rounds(text: str, option: str) -> int | str:
    return text if text == "auto" else check_positive_int(int(text) if text.isdigit() else text, option)


def check_range_workload(value, name: str):
    """A workload name or a :class:`Workload` of ranges (MWEM selects among its ranges)."""
    if isinstance(value, Workload):
        if value.ranges is Workload.ranges and not hasattr(value, "lo"):
            raise ParameterError(f"{name} must be a workload of ranges for MWEM, got {value.name}")
        return value
    if isinstance(value, str):
        WORKLOADS.lookup(value)
        return value
    raise not_a_workload(value, name)


class MWEM(Mechanism):
    """MWEM (Hardt, Ligett and McSherry, "A Simple and Practical Algorithm for Differentially
    Private Data Release", NIPS 2012) over a workload of ranges (``workload``, default all
    prefixes; ``dprange.release`` hands it the release's workload).

    Under add/remove the total is estimated first with ``total_share`` of epsilon (under
    replace it is public; ``release(..., public_total=N)`` declares it).  ``rounds`` T ("auto":
    MWEM*'s table at N epsilon, DPBench, Hay et al. SIGMOD 2016, with the noisy or public N);
    each round spends (epsilon - total share) / T, half on choosing, by the exponential
    mechanism (score |q(A) - q(x)|, sensitivity 1, exact sampler), the worst answered range (a
    range may be chosen again, as in Algorithm 1), and half on discrete-Laplace answers: under
    add/remove with ``complements`` the range and the parts of its complement are measured
    together (disjoint: one epsilon), and every round's sum of pieces refines the total by
    inverse-variance weighting.  After each round the multiplicative-weights update re-applies
    every measurement so far ``passes`` times (at most :data:`UPDATES_PER_ROUND` updates).
    ``iterate``: the release is the last approximation (the authors' code) or the average of
    the T approximations (Algorithm 1).
    """

    name = "mwem"
    #: The measured queries are chosen from the data: no data-free design or error model.
    data_aware = True

    PARAMS = (
        Param(
            "rounds",
            Custom(check_rounds, "auto or an integer >= 1", parse_rounds),
            "number of rounds T, or auto (MWEM*'s table at the noisy total x epsilon)",
            default="auto",
        ),
        Param("total_share", SHARE, "add/remove: share of epsilon spent on the noisy total", default=0.1),
        Param("passes", Integer(0), "update passes over all past measurements each round", default=100),
        Param(
            "iterate", OneOf(("last", "average")), "the release: last approximation or their average", default="last"
        ),
        Param(
            "complements",
            Flag(),
            "add/remove: also measure the parts of each selected range's complement (free: disjoint)",
            default=True,
        ),
        Param(
            "workload",
            Custom(check_range_workload, "a workload name or a dprange.workloads.Workload of ranges"),
            "the ranges MWEM selects among",
            default="prefix",
        ),
        *Mechanism.PARAMS,
    )
    rounds: int | str
    total_share: float
    passes: int
    iterate: str
    complements: bool
    workload: Workload | str

    def parameters(self) -> dict:
        workload = self.workload
        if isinstance(workload, Workload):  # the standard ones by name, others by their size
            workload = workload.name if type(workload) in (AllRange, Prefix, Identity) else f"{workload.m} ranges"
        return {
            "rounds": self.rounds,
            "total_share": self.total_share,
            "passes": self.passes,
            "iterate": self.iterate,
            "complements": self.complements,
            "workload": workload,
            **super().parameters(),
        }

    def query_count(self, n: int) -> int:
        workload = self.workload if isinstance(self.workload, Workload) else make_workload(self.workload, n)
        if workload.n != n:
            raise ParameterError(f"MWEM's workload is defined on {workload.n} bins but the data have {n}")
        if workload.m > MAX_QUERIES:
            raise ParameterError(
                f"MWEM enumerates its workload's {workload.m} ranges, more than {MAX_QUERIES}; "
                "give workload='prefix' or a dprange.workloads.Ranges"
            )
        return workload.m

    def queries(self, n: int, workload=None) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) of the ranges selected among: ``workload`` if given, else the declared one."""
        if workload is None:
            self.query_count(n)
            workload = self.workload if isinstance(self.workload, Workload) else make_workload(self.workload, n)
        lohi = workload.ranges()
        if lohi is None:
            raise ParameterError(f"MWEM selects among ranges; the workload {workload.name} has none")
        lo, hi = (np.asarray(a, dtype=np.int64) for a in lohi)
        if lo.size == 0 or lo.min() < 0 or hi.max() >= n or np.any(lo > hi):
            raise ParameterError(f"the workload's ranges must lie in 0..{n - 1} with lo <= hi")
        return lo, hi

    def strategy(self, n: int) -> None:
        """MWEM's measured queries are chosen privately from the data: no data-free shape (the
        workload is checked here, before any count is read)."""
        self.query_count(check_positive_int(n, "n"))

    def max_rounds(self) -> int:
        return ROUNDS_BY_SIGNAL[1][-1] if self.rounds == "auto" else int(self.rounds)

    def noise_specs(self, strategy, epsilon: float, delta: float) -> list[NoiseSpec]:
        """The noise of the measured answers at the most rounds (checked before any count is read)."""
        if check_delta(delta) > 0:
            raise ParameterError("MWEM here is pure epsilon-DP; pass delta=0")
        if self.inference != "gls":
            raise ParameterError("MWEM has no inference options: its estimate comes from multiplicative weights")
        rounds = self.max_rounds()
        _, _, eps_measure = self.shares(check_epsilon(epsilon), rounds=rounds)
        return [laplace_spec(eps_measure, 1)] * rounds

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError("MWEM's measurements depend on private selections; call release(...)")

    def design(self, n, epsilon, *, delta=0.0):
        raise ParameterError("MWEM's design depends on the data (private selections); it has no data-free design")

    def total_epsilon(self, epsilon: float, public: bool = False) -> float:
        """The share spent on the noisy total: none under replace or with a declared total."""
        return 0.0 if self.neighbours == "replace" or public else epsilon * self.total_share

    def shares(self, epsilon: float, public: bool = False, rounds: int | None = None) -> tuple[float, float, float]:
        """(total, selection per round, measurement per round) for ``rounds`` rounds (default
        the declared number); exact sum at most epsilon.  ``public``: the total is declared
        public (nothing spent on it)."""
        rounds = self.max_rounds() if rounds is None else rounds
        total = self.total_epsilon(epsilon, public)
        per_round = (epsilon - total) / rounds / 2
        while exact_sum([total, *([per_round] * (2 * rounds))]) > Fraction(epsilon):
            per_round = math.nextafter(per_round, 0.0)
        return total, per_round, per_round

    def release(
        self, counts, epsilon, *, delta=0.0, rng=None, domain=None, workload=None, public_total=None
    ) -> DataAwareRelease:
        """``workload``: the ranges to select among (default: the declared ``workload``).
        ``public_total``: under add/remove, a number of records the user declares public (then
        no budget buys a noisy one); under replace the total is public already."""
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        if public_total is not None:
            if isinstance(public_total, bool) or not isinstance(public_total, (int, np.integer)) or public_total < 1:
                raise ParameterError(f"public_total must be a positive integer, got {public_total!r}")
            if self.neighbours == "replace" and int(public_total) != int(counts.sum()):
                raise ParameterError("under replace neighbours the total is public already; leave public_total unset")
        self.noise_specs(None, epsilon, delta)
        n = counts.size
        lo, hi = self.queries(n, workload)
        source = resolve_rng(rng)
        public = self.neighbours == "replace" or public_total is not None
        steps = []
        total_estimate = TotalEstimate()
        if public_total is not None:
            total_estimate.fix(float(public_total))
        elif self.neighbours == "replace":
            total_estimate.fix(float(counts.sum()))
        else:
            eps_total = self.total_epsilon(epsilon)
            spec = laplace_spec(eps_total, 1)
            total_estimate.add(int(counts.sum()) + int(spec.sample((1,), source)[0]), spec.variance)
            steps.append(step("total", eps_total))
        rounds = int(self.rounds) if self.rounds != "auto" else max(1, rounds_for(total_estimate.value, epsilon))
        _, eps_select, eps_measure = self.shares(epsilon, public=public, rounds=rounds)
        complements = self.complements and self.neighbours != "replace"
        estimate, selected = self.run_rounds(
            counts, lo, hi, rounds, eps_select, eps_measure, complements, total_estimate, source
        )
        steps += [step("select", eps_select, rounds), step("measure", eps_measure, rounds)]
        check_steps_within(steps, epsilon)
        params = {
            **self.parameters(),
            "queries": int(lo.size),
            "rounds_run": rounds,
            "selected": selected,
            "complements_measured": complements,
        }
        provenance = data_aware_provenance(
            self, "discrete_laplace", params, steps, epsilon, 0.0, total_estimate.value if public else None, rng
        )
        return DataAwareRelease(estimate, provenance, domain=domain)

    def run_rounds(self, counts, lo, hi, rounds, eps_select, eps_measure, complements, total_estimate, source):
        """The T rounds: (the released histogram, the indices of the selected ranges)."""
        n = counts.size
        true_answers = range_answers(counts, lo, hi).astype(np.int64)
        sums = np.concatenate([[0], np.cumsum(counts)])
        gamma = selection_gamma(eps_select)
        spec = laplace_spec(eps_measure, 1)
        weights = np.full(n, total_estimate.value / n)
        average = np.zeros(n)
        history: list[tuple[int, int, float]] = []
        selected: list[int] = []
        for _ in range(rounds):
            total = total_estimate.value
            approx = range_answers(weights * (total / weights.sum()), lo, hi)
            scores = np.abs(approx - true_answers)

            def exact_score(r: int, approx=approx) -> Fraction:
                return abs(Fraction(float(approx[r])) - int(true_answers[r]))

            r = select_query(scores, exact_score, gamma, source)
            selected.append(r)
            pieces = measured_pieces(int(lo[r]), int(hi[r]), n, complements)
            noise = spec.sample((len(pieces),), source)
            measured = [(a, b, float(int(sums[b + 1] - sums[a]) + int(z))) for (a, b), z in zip(pieces, noise)]
            if complements:
                total_estimate.add(sum(m for _, _, m in measured), len(pieces) * spec.variance)
            history += measured
            total = total_estimate.value
            update_passes(weights, measured, total, 1)
            update_passes(weights, history, total, min(self.passes, max(1, UPDATES_PER_ROUND // len(history))))
            average += weights
        if self.iterate == "average":
            return average / rounds, selected
        return weights * (total_estimate.value / weights.sum()), selected


class TotalEstimate:
    """The total N as the inverse-variance weighted mean of its noisy measurements (the noisy
    total, every round's sum of measured pieces), at least 1; or a public value."""

    def __init__(self):
        self.weighted = 0.0
        self.precision = 0.0
        self.public: float | None = None

    def fix(self, value: float) -> None:
        self.public = value

    def add(self, measured: float, variance: float) -> None:
        if self.public is None:
            self.weighted += measured / variance
            self.precision += 1.0 / variance

    @property
    def value(self) -> float:
        if self.public is not None:
            return self.public
        return max(self.weighted / self.precision, 1.0)


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
