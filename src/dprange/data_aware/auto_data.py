"""``auto-data``: choose among every registered 1-D mechanism (the data-independent ``auto``,
DAWA, MWEM, StructureFirst) from private features of the data, in the spirit of Pythia
(Kotsogiannis, Machanavajjhala, Hay and Miklau, "Pythia: Data Dependent Differentially Private
Algorithm Selection", SIGMOD 2017).

A declared share ``feature_share`` of epsilon buys three features, each a recorded private step
with its part of the share (:data:`FEATURE_WEIGHTS`: most of it on the merge cost, whose noise
does not fall with N; discrete Laplace each):

* ``total``: the noisy number of records N (sensitivity 1; free under replace neighbours, where
  it is public);
* ``merge``: the noisy least dyadic merge cost (:func:`~dprange.data_aware.selector.merge_cost`:
  DAWA's partition objective at the penalty of the epsilon left), how much DAWA's merging can
  gain: near ``penalty * n`` where no merge pays, far below where large regions are flat.  It
  tells scattered from contiguous occupancy, which a count of non-empty bins cannot (sensitivity
  1 under add/remove; 2 under replace, a moved record changing two bins);
* ``top``: the noisy number of records in the n / 64 heaviest bins, how concentrated the mass is
  (a maximum over bin sets of sums of counts: a record added or removed changes it by at most
  1, a moved record by at most 1 as well, since the removal lowers it by 0 or 1 and the
  addition raises it by 0 or 1).

The choice is post-processing of those noisy features: a selector trained on public data only
(:mod:`dprange.data_aware.selector`; the DPBench shapes and synthetic shapes, retrained by
``benchmarks/train_auto_data.py``, validated leave-one-shape-out) names the mechanism, which
runs with the rest of epsilon.  Its validation figures: docs/data-aware.md.  A constant
selector (one leaf, as shipped when no fit validates as safe: it names ``auto``) makes the
features pointless, so none are bought: the release is its choice at the whole epsilon, with
the choice's own private steps only, and ``features`` is None in its parameters.

Error bars: the features' noise is independent of the measurement noise, so given the choice
a data-independent release keeps its exact error bars (its provenance lists the feature
steps); a data-aware release has that mechanism's noise-only ones.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from .._params import OneOf, Param
from .._validation import check_delta, check_epsilon, fit_last, float_at_least
from ..analysis.selection import auto_mechanism
from ..errors import ParameterError
from ..mechanisms.base import Mechanism, check_counts
from ..privacy.samplers import resolve_rng
from ..registry import MECHANISMS, Citation
from ..strategies.calibration import is_seeded
from ..workloads import RandomRanges
from .dawa import DAWA
from .mwem import MWEM
from .selector import Selector, feature_matrix, heavy_bins, merge_cost, merge_penalty, shipped, top_mass
from .steps import SHARE, laplace_spec, noisy_total, spent, step
from .structure_first import StructureFirst

WORKLOADS = ("all-range", "prefix")

#: The features and the parts of ``feature_share`` each gets, in the order of their private steps
#: (``total`` is skipped under replace, its part going to the others).  Most goes to the merge
#: cost, whose noise does not fall with N.
FEATURE_WEIGHTS = {"total": 1, "merge": 10, "top": 1}

#: MWEM tuned for all ranges selects among this many public random ranges (a fixed sample).
MWEM_RANGES = 2000


def choose_many(total, merge, top, n: int, epsilon: float, tuned_for: str, selector=None) -> list[str]:
    """The selector's choices (candidate names: "auto", "dawa", "mwem", "structure-first") for
    arrays of noisy features, the public number of bins, the epsilon left and the workload."""
    x = feature_matrix(np.ravel(total), np.ravel(merge), np.ravel(top), n, epsilon, tuned_for == "prefix")
    return (selector or shipped()).choose(x)


def choose(total: float, merge: float, top: float, n: int, epsilon: float, tuned_for: str, selector=None) -> str:
    """The selector's choice for one release's noisy features (post-processing: reads no data)."""
    return choose_many(total, merge, top, n, epsilon, tuned_for, selector)[0]


class AutoData(Mechanism):
    """Choose the data-independent ``auto``, DAWA, MWEM or StructureFirst from three private
    features (noisy total, noisy least dyadic merge cost, noisy mass of the heaviest bins)
    bought with ``feature_share`` of epsilon, by the selector trained on public data; see the
    module docstring."""

    name = "auto-data"
    data_aware = True

    PARAMS = (
        Param(
            "feature_share",
            SHARE,
            "share of epsilon spent on the features (noisy total, merge cost, mass of the heaviest bins)",
            default=0.05,
        ),
        Param("tuned_for", OneOf(WORKLOADS), "the workload the chosen mechanism is tuned for", default="all-range"),
        *Mechanism.PARAMS,
    )
    feature_share: float
    tuned_for: str
    #: The trained selector (None: the one shipped with the package); benchmarks set another one
    #: to measure leave-one-shape-out.
    selector: Selector | None = None
    #: The features bought and their parts of ``feature_share``.
    feature_weights = FEATURE_WEIGHTS

    def shares(self, epsilon: float) -> tuple[float, float, float, float]:
        """(total, middle feature, top mass, rest) by ``feature_weights``; the total is free
        (public) under replace."""
        features = epsilon * self.feature_share
        weight_total, weight_middle, weight_top = self.feature_weights.values()
        total = (
            0.0
            if self.neighbours == "replace"
            else features * weight_total / (weight_total + weight_middle + weight_top)
        )
        middle = (features - total) * weight_middle / (weight_middle + weight_top)
        top = (features - total) * weight_top / (weight_middle + weight_top)
        return total, middle, top, fit_last([total, middle, top], epsilon - features, epsilon)

    def buys_features(self) -> bool:
        """Whether a release buys the features: not when the selector is constant (a single leaf,
        e.g. the shipped ``auto`` leaf), whose choice they could not change."""
        return self.constant_choice() is None

    def constant_choice(self) -> str | None:
        """The mechanism the selector names whatever the features, if it is constant (else None)."""
        return (self.selector or shipped()).constant()

    def budget_left(self, epsilon: float) -> float:
        """The epsilon the chosen mechanism runs with: all of it when no features are bought."""
        epsilon = check_epsilon(epsilon)
        return self.shares(epsilon)[3] if self.buys_features() else epsilon

    def strategy(self, n: int):
        """The data-free worst case checked before any count is read: the data-independent choice
        (at epsilon 1; :meth:`strategy_at` builds it at the epsilon a release leaves it)."""
        return self.independent(n, 1.0).strategy(n)

    def strategy_at(self, n: int, epsilon, delta=0.0):
        """The data-independent branch's strategy at the epsilon it would run with (what is left
        after the features, if bought): its per-level budgets, if any, are absolute and must fit that."""
        return self.independent(n, self.budget_left(check_epsilon(epsilon))).strategy(n)

    def noise_specs(self, strategy, epsilon: float, delta: float):
        """The data-independent branch's noise at the epsilon left after the features (if bought),
        from the mechanism ``auto`` chooses at that epsilon (the one :meth:`release` would run)."""
        if check_delta(delta) > 0:
            raise ParameterError("auto-data here is pure epsilon-DP; pass delta=0")
        rest = self.budget_left(check_epsilon(epsilon))
        n = strategy.n if hasattr(strategy, "n") else 2
        return self.independent(n, rest).noise_specs(strategy, rest, delta)

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError("auto-data's measurements depend on a private choice; call release(...)")

    def design(self, n, epsilon, *, delta=0.0):
        raise ParameterError("auto-data's design depends on a private choice; it has no data-free design")

    def independent(self, n: int, epsilon: float) -> Mechanism:
        return auto_mechanism(self.tuned_for, n, epsilon, neighbours=self.neighbours, noise=self.noise)

    def features(self, counts, epsilon: float, rng=None) -> tuple[float, float, float, list[dict]]:
        """(noisy total, noisy middle feature (the merge cost), noisy top mass, their private steps)."""
        counts = check_counts(counts)
        value, sensitivity = self.middle_feature(counts, self.shares(epsilon)[-1])
        exact = [
            (list(self.feature_weights)[1], value, sensitivity),
            ("top", top_mass(counts, self.heavy(counts.size)), 1),
        ]
        return self.noisy_features(counts, exact, epsilon, rng)

    def noisy_features(self, counts: np.ndarray, exact, epsilon: float, rng=None) -> tuple:
        """(noisy total, each of ``exact``'s (name, value, sensitivity) with discrete Laplace noise
        at its share, the private steps): the total first, then ``exact`` in order, on
        ``shares(epsilon)`` between the total's and the rest; ``counts`` checked by the caller."""
        source = resolve_rng(rng)
        eps_total, *parts, _ = self.shares(epsilon)
        total, steps = noisy_total(counts, eps_total, source)  # exact under replace (eps_total 0)
        noisy = []
        for (name, value, sensitivity), eps in zip(exact, parts, strict=True):
            noisy.append(float(value + int(laplace_spec(eps, sensitivity).sample((1,), source)[0])))
            steps.append(step(name, eps))
        return (total, *noisy, steps)

    def heavy(self, n: int) -> int:
        """How many of the heaviest bins the top mass sums (public): n / 64, at least 1."""
        return heavy_bins(n)

    def middle_feature(self, counts: np.ndarray, epsilon_left: float) -> tuple[int, int]:
        """(the exact middle feature, its sensitivity): the least dyadic merge cost at the penalty of
        the epsilon left, sensitivity 1 (2 under replace: a moved record changes two bins)."""
        return merge_cost(counts, merge_penalty(epsilon_left)), 2 if self.neighbours == "replace" else 1

    def candidate(self, name: str, n: int, epsilon: float) -> tuple[Mechanism, dict]:
        """The mechanism a choice names, and the keyword arguments of its release."""
        shared = {"neighbours": self.neighbours, "noise": self.noise}
        inference = {"inference": self.inference, "inference_options": self.inference_options}
        if name == "auto":
            return self.independent(n, epsilon), {}
        if name == "dawa":
            # the partition the selector was trained and validated on: no forced splits at the ends
            return DAWA(bucket_workload=self.tuned_for, edge_bins=0, **shared, **inference), {}
        if name == "structure-first":
            return StructureFirst(**shared, **inference), {}
        if name == "mwem":
            # MWEM selects among the workload's queries: every prefix, or a fixed public sample of ranges
            workload = None if self.tuned_for == "prefix" else RandomRanges(n, k=MWEM_RANGES, seed=0)
            return MWEM(**shared), {"workload": workload}
        raise ParameterError(f"the auto-data selector names an unknown mechanism {name!r}; retrain it")

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None):
        counts = check_counts(counts)
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        if delta > 0:
            raise ParameterError("auto-data here is pure epsilon-DP; pass delta=0")
        source = resolve_rng(rng)
        constant = self.constant_choice()
        features: dict | None = None
        if constant is None:
            total, merge, top, steps = self.features(counts, epsilon, source)
            rest = self.shares(epsilon)[3]
            chosen = choose(total, merge, top, counts.size, rest, self.tuned_for, self.selector)
            features = {"total": total, "merge": merge, "top": top, "epsilon_left": rest}
        else:  # a constant selector: its choice needs no features, and the choice runs with all of epsilon
            chosen, rest, steps = constant, epsilon, []
        inner, options = self.candidate(chosen, counts.size, rest)
        released = inner.release(counts, rest, rng=source, domain=domain, **options)
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
                "features": features,
                "private_steps": steps,
            },
            epsilon=min(float_at_least(spent(steps)), epsilon),
            seeded=is_seeded(rng),
        )
        released.provenance = provenance
        return released


MECHANISMS.add(
    AutoData,
    summary="data-aware choice: a small declared share of epsilon on a noisy total, a noisy least dyadic merge "
    "cost (DAWA's partition objective) and the noisy mass of the heaviest bins (none while the trained "
    "selector names one mechanism whatever they are), then auto, DAWA, MWEM or StructureFirst by a selector "
    "trained on public data (DPBench and synthetic shapes)",
    citation=Citation(
        "Kotsogiannis, Machanavajjhala, Hay and Miklau",
        "Pythia: Data Dependent Differentially Private Algorithm Selection",
        "SIGMOD 2017",
    ),
    auto=False,
)
