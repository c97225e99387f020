"""What the 1-D data-aware mechanisms share ("exploiting the data", Miklau, DIMACS 2012): the
declared shares of their private steps and the steps' exact accounting, their provenance, the
exact exponential-mechanism selection of a query and the Laplace noise of a step.

DAWA and MWEM spend part of epsilon on a private *choice* that depends on the data (a partition of the
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

from .._params import Custom
from .._validation import check_epsilon, float_at_least
from ..answers.provenance import Provenance
from ..errors import ParameterError
from ..privacy.exact_choice import exact_choice, selection_gamma_at_most
from ..privacy.noise import NoiseSpec
from ..strategies.calibration import is_seeded, noisy_answers
from .release import DataAwareRelease, ExpandedErrorModel

BUCKET_WORKLOADS = ("all-range", "prefix")


SECOND_STAGES = ("greedy_h", "best-hierarchy")


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


def select_query(scores: np.ndarray, exact_score, gamma: Fraction, rng) -> int:
    """Exponential mechanism: index r with P(r) proportional to exp(gamma score_r), sampled
    exactly (:func:`dprange.privacy.exact_choice.exact_choice`); ``exact_score(r)`` is the
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
    :data:`dprange.privacy.exact_choice.MAX_SELECTION_GAMMA` (a huge epsilon)."""
    return selection_gamma_at_most(Fraction(epsilon) / 2)


def laplace_spec(epsilon: float, sensitivity: int, kind: str = "discrete_laplace") -> NoiseSpec:
    """Laplace noise (``kind``: discrete by default, or "laplace_float") of a query of this L1
    sensitivity, exactly epsilon-DP: the scale sampled is at least sensitivity / epsilon."""
    scale = sensitivity / epsilon
    while Fraction(sensitivity) / Fraction(NoiseSpec(kind, scale).effective_scale) > Fraction(epsilon):
        scale = math.nextafter(scale, math.inf)
    return NoiseSpec(kind, scale)


def noisy_total(counts, epsilon: float, source) -> tuple[float, list[dict]]:
    """(N-hat, its private steps): the number of records plus discrete Laplace noise of
    sensitivity 1 at ``epsilon`` (a record added or removed moves it by 1), the step "total";
    with ``epsilon`` 0 the exact number and no step (replace, where it is public)."""
    exact = np.array([int(np.sum(counts))], dtype=np.int64)
    if epsilon == 0.0:
        return float(exact[0]), []
    epsilon = check_epsilon(epsilon, "the total's epsilon (0: exact, under replace)")
    return float(noisy_answers(exact, laplace_spec(epsilon, 1), source)[0]), [step("total", epsilon)]
