"""MWEM (Hardt, Ligett, McSherry, NIPS 2012): rounds of a query selected by the exponential
mechanism, measured with noise, and multiplicative-weights updates of a synthetic histogram.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._params import Integer, Param
from .._validation import check_delta, check_epsilon, check_positive_int, exact_sum
from ..errors import ParameterError
from ..mechanisms.base import Mechanism, check_counts
from ..privacy.noise import NoiseSpec
from ..privacy.samplers import resolve_rng
from ..registry import MECHANISMS, Citation
from .dawa import DAWA
from .release import DataAwareRelease
from .steps import SHARE, check_steps_within, data_aware_provenance, laplace_spec, select_query, selection_gamma, step


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
