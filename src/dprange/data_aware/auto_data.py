"""``auto-data``: choose between the best data-independent mechanism and a data-aware one from
private features of the data, in the spirit of Pythia (Kotsogiannis, Machanavajjhala, Hay and
Miklau, "Pythia: Data Dependent Differentially Private Algorithm Selection", SIGMOD 2017).

A declared share ``feature_share`` of epsilon buys two features: the noisy number of records
N (free under replace neighbours, where it is public) and the noisy number of non-empty bins
Z (discrete Laplace; one record changes it by at most 1 under both relations).  The rule, fitted
on the training shapes of the DPBench 1-D histograms (``benchmarks/dpbench.py --fit``; the
hold-out shapes were not used), then picks a mechanism that runs with the rest of epsilon:

* ``structure-first`` (:class:`~dprange.data_aware.structure_first.StructureFirst`) when the signal per
  non-empty bin, N epsilon / Z, is below ``LOW`` (the noise swamps the shape: few buckets win);
* ``dawa`` (:class:`~dprange.data_aware.dawa.DAWA`, its bucket hierarchy chosen for the workload)
  when it is below ``HIGH``;
* otherwise the data-independent mechanism of least exact expected error on the workload
  (:func:`~dprange.analysis.auto_mechanism`, at the remaining epsilon).

How the rule does on the training and the hold-out shapes: docs/data-aware.md, "Figures by
module" (on some hold-out shapes DAWA alone does better: two features do not tell every shape
apart).

Error bars: the features' noise is independent of the measurement noise, so given the choice
a data-independent release keeps its exact error bars (its provenance lists the feature
steps); a DAWA release has DAWA's noise-only ones.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np

from .._params import OneOf, Param
from .._validation import check_delta, check_epsilon, exact_sum, float_at_least
from ..analysis.selection import auto_mechanism
from ..errors import ParameterError
from ..mechanisms.base import Mechanism, check_counts
from ..privacy.samplers import resolve_rng
from ..registry import MECHANISMS, Citation
from ..strategies.calibration import is_seeded
from .dawa import DAWA
from .steps import SHARE, laplace_spec, spent, step
from .structure_first import StructureFirst

#: The fitted rule on the signal per non-empty bin, N epsilon / Z (records x epsilon): below
#: LOW StructureFirst (few buckets win when noise swamps the shape), below HIGH DAWA, else the
#: best data-independent mechanism.  Fitted by ``python benchmarks/dpbench.py --fit`` on the
#: training shapes only (TRAINING there: ADULTFRANK, MEDCOST, HEPTH, PATENT), 10 trials, both
#: domains, all scales, epsilons and workloads.
LOW = 0.681


HIGH = 68.129


WORKLOADS = ("all-range", "prefix")


def choose(total: float, nonempty: float, epsilon: float, low: float = LOW, high: float = HIGH) -> str:
    """The rule: "structure-first", "dawa" or "data-independent" from the noisy features and
    the epsilon left."""
    signal = max(total, 1.0) * epsilon / max(nonempty, 1.0)
    if signal < low:
        return "structure-first"
    return "dawa" if signal < high else "data-independent"


class AutoData(Mechanism):
    """Choose StructureFirst, DAWA or the best data-independent mechanism from two private features (noisy
    total, noisy number of non-empty bins) bought with ``feature_share`` of epsilon; see the
    module docstring for the rule and where it was fitted."""

    name = "auto-data"
    data_aware = True

    PARAMS = (
        Param(
            "feature_share",
            SHARE,
            "share of epsilon spent on the features (noisy total and non-empty bins)",
            default=0.05,
        ),
        Param("tuned_for", OneOf(WORKLOADS), "the workload the chosen mechanism is tuned for", default="all-range"),
        *Mechanism.PARAMS,
    )
    feature_share: float
    tuned_for: str

    def shares(self, epsilon: float) -> tuple[float, float, float]:
        """(total, non-empty bins, rest); the total is free (public) under replace."""
        features = epsilon * self.feature_share
        total = 0.0 if self.neighbours == "replace" else features / 2
        nonempty = features - total
        rest = epsilon - features
        while exact_sum([total, nonempty, rest]) > Fraction(epsilon):
            rest = math.nextafter(rest, 0.0)
        return total, nonempty, rest

    def strategy(self, n: int):
        """The data-free worst case checked before any count is read: the data-independent choice
        (at epsilon 1; :meth:`strategy_at` builds it at the epsilon a release leaves it)."""
        return self.independent(n, 1.0).strategy(n)

    def strategy_at(self, n: int, epsilon, delta=0.0):
        """The data-independent branch's strategy at the epsilon it would run with (what is left
        after the features): its per-level budgets, if any, are absolute and must fit that."""
        return self.independent(n, self.shares(check_epsilon(epsilon))[2]).strategy(n)

    def noise_specs(self, strategy, epsilon: float, delta: float):
        """The data-independent branch's noise at the epsilon left after the features, from the
        mechanism ``auto`` chooses at that epsilon (the one :meth:`release` would run)."""
        if check_delta(delta) > 0:
            raise ParameterError("auto-data here is pure epsilon-DP; pass delta=0")
        rest = self.shares(check_epsilon(epsilon))[2]
        return self.independent(strategy.n if hasattr(strategy, "n") else 2, rest).noise_specs(strategy, rest, delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError("auto-data's measurements depend on a private choice; call release(...)")

    def design(self, n, epsilon, *, delta=0.0):
        raise ParameterError("auto-data's design depends on a private choice; it has no data-free design")

    def independent(self, n: int, epsilon: float) -> Mechanism:
        return auto_mechanism(self.tuned_for, n, epsilon, neighbours=self.neighbours, noise=self.noise)

    def features(self, counts, epsilon: float, rng=None) -> tuple[float, float, list[dict]]:
        """(noisy total, noisy number of non-empty bins, their private steps)."""
        counts = check_counts(counts)
        source = resolve_rng(rng)
        eps_total, eps_nonempty, _ = self.shares(epsilon)
        steps = []
        if self.neighbours == "replace":
            total = float(counts.sum())
        else:
            total = float(int(counts.sum()) + int(laplace_spec(eps_total, 1).sample((1,), source)[0]))
            steps.append(step("total", eps_total))
        # one record added or removed, or moved between bins, changes the count of non-empty
        # bins by at most 1 (a move can empty one bin and fill another: -1 + 1)
        nonempty = float(int(np.count_nonzero(counts)) + int(laplace_spec(eps_nonempty, 1).sample((1,), source)[0]))
        steps.append(step("nonempty", eps_nonempty))
        return total, nonempty, steps

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None):
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        if delta > 0:
            raise ParameterError("auto-data here is pure epsilon-DP; pass delta=0")
        source = resolve_rng(rng)
        total, nonempty, steps = self.features(counts, epsilon, source)
        rest = self.shares(epsilon)[2]
        chosen = choose(total, nonempty, rest)
        inner: Mechanism
        if chosen == "structure-first":
            inner = StructureFirst(
                neighbours=self.neighbours,
                noise=self.noise,
                inference=self.inference,
                inference_options=self.inference_options,
            )
        elif chosen == "dawa":
            inner = DAWA(
                bucket_workload=self.tuned_for,
                neighbours=self.neighbours,
                noise=self.noise,
                inference=self.inference,
                inference_options=self.inference_options,
            )
        else:
            inner = self.independent(counts.size, rest)
        released = inner.release(counts, rest, rng=source, domain=domain)
        inner_steps = released.parameters.get("private_steps") or [step("measure", released.epsilon)]
        steps = steps + list(inner_steps)
        if spent(steps) > Fraction(epsilon):
            raise ParameterError("auto-data's private steps spend more than epsilon; report this as a bug")
        provenance = dataclasses.replace(
            released.provenance,
            mechanism=self.name,
            parameters={
                **self.parameters(),
                "chosen": inner.name,
                "chosen_parameters": released.parameters,
                "features": {"total": total, "nonempty": nonempty, "epsilon_left": rest},
                "private_steps": steps,
            },
            epsilon=min(float_at_least(spent(steps)), epsilon),
            seeded=is_seeded(rng),
        )
        released.provenance = provenance
        return released


MECHANISMS.add(
    AutoData,
    summary="data-aware choice: a small declared share of epsilon on a noisy total and a noisy count of non-empty "
    "bins, then StructureFirst, DAWA or the best data-independent mechanism by a rule fitted on DPBench shapes",
    citation=Citation(
        "Kotsogiannis, Machanavajjhala, Hay and Miklau",
        "Pythia: Data Dependent Differentially Private Algorithm Selection",
        "SIGMOD 2017",
    ),
    auto=False,
)
