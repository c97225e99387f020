"""The frequency-oracle base: clients that randomise one value each, and mergeable aggregators
that turn their reports into unbiased counts with exact variances (Wang et al., USENIX Security 2017).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._validation import check_epsilon, check_positive_int
from ..errors import ParameterError, ReportError
from ..privacy.samplers import resolve_rng
from .coins import MIN_LIE_PROBABILITY, PROBABILITY_BITS, check_values, exp_lower_bound
from .reports import Reports


class FrequencyOracle:
    """Base: validation, the aggregator and the variance formula (see module doc)."""

    name = "oracle"

    def __init__(self, domain_size: int, epsilon: float):
        self.domain_size = check_positive_int(domain_size, "domain_size", minimum=2)
        self.epsilon = check_epsilon(epsilon)
        self._check_epsilon_limit()
        self._configure()

    def _configure(self) -> None:
        """Derive the randomiser from the validated epsilon: refuse an epsilon whose integer
        thresholds carry no information, and check the exact privacy ratio."""
        if self.exact_p <= self.exact_q:
            raise ParameterError(
                f"epsilon {self.epsilon:g} is too small for {self.name.upper()} "
                f"(here D = {self.domain_size}): at 62-bit resolution its reports would carry no "
                f"information; use epsilon >= {self._min_epsilon_hint():.3g}"
            )
        if self.privacy_ratio() > exp_lower_bound(self.epsilon):  # never: the thresholds are rounded safely
            raise AssertionError(f"{self.name} thresholds exceed e^epsilon")

    def _min_epsilon_hint(self) -> float:
        return 8.0 * 2.0**-PROBABILITY_BITS

    def privacy_ratio(self) -> Fraction:
        """max over two inputs a, b and an output o of P(o | a) / P(o | b), exactly, for the
        distribution the client samples (a randomised-response family with p' >= q')."""
        return self.exact_p / self.exact_q

    @property
    def exact_p(self) -> Fraction:
        """The realised probability of reporting one's own value (keeping the truth), exactly."""
        raise NotImplementedError

    @property
    def exact_q(self) -> Fraction:
        """The realised probability of the report supporting a value one does not hold, exactly."""
        raise NotImplementedError

    def max_epsilon(self) -> float:
        """The largest epsilon this oracle supports (module doc, "Largest epsilon")."""
        return math.log(1.0 / MIN_LIE_PROBABILITY - 1.0)  # q = 1 / (e^eps + 1) >= 2^-32

    def _check_epsilon_limit(self) -> None:
        limit = self.max_epsilon()
        if self.epsilon > limit:
            raise ParameterError(
                f"{self.name.upper()} supports epsilon <= {limit:.4f} (here D = {self.domain_size}), "
                f"got {self.epsilon:g}; {self._limit_reason()}"
            )

    def _limit_reason(self) -> str:
        return "beyond it the probability of randomising a report falls below 2^-32"

    # realised probabilities (p: report own value / keep; q: any other) and the estimator's slope
    @property
    def p(self) -> float:
        return float(self.exact_p)

    @property
    def q(self) -> float:
        return float(self.exact_q)

    @property
    def slope(self) -> float:
        return float(self.exact_p - self.exact_q)

    def params(self) -> dict:
        return {}

    def _reports(self, data: dict, n: int) -> Reports:
        data["n"] = np.array([n])
        return Reports(self.name, self.epsilon, self.domain_size, data, self.params())

    fields: tuple = ()  # the report arrays, one entry (row) per user

    def check(self, reports: Reports) -> None:
        """Reports must come from an oracle with the same kind, epsilon, domain and parameters,
        and hold exactly one entry per user in each of the oracle's fields."""
        if not isinstance(reports, Reports):
            raise ReportError("expected a Reports object")
        mine = (self.name, self.epsilon, self.domain_size, self.params())
        theirs = (reports.oracle, reports.epsilon, reports.domain_size, reports.params)
        if mine != theirs:
            raise ReportError(f"reports were made with {theirs[:3]} {theirs[3] or ''}, not {mine[:3]} {mine[3] or ''}")
        n_field = np.asarray(reports.data.get("n", [-1]))
        if n_field.shape != (1,) or n_field.dtype.kind not in "iu" or n_field[0] < 0:
            raise ReportError(
                "reports need their user count 'n' as one non-negative integer (an integer array of length 1); "
                "the file is malformed"
            )
        for key in self.fields:
            if key not in reports.data:
                raise ReportError(f"{self.name} reports lack the field {key!r}; the file is malformed")
            if np.shape(reports.data[key])[:1] != (reports.n,):
                raise ReportError(
                    f"{self.name} reports: field {key!r} has {np.shape(reports.data[key])[:1]} rows "
                    f"for {reports.n} users; the file is malformed"
                )

    def aggregator(self) -> Aggregator:
        return Aggregator(self)

    def report_bytes(self) -> int:
        """Bytes of one user's report in memory (about)."""
        return 16

    def collect(self, values, rng=None, batch_users: int | None = None) -> Aggregator:
        """Randomise every user's value and aggregate the reports batch by batch: the server
        state that receiving all reports would give, in memory O(batch x report size) (OUE at
        D = 2^16 holds 8 KB per report).  ``batch_users`` defaults to 16 MB of reports."""
        v = check_values(values, self.domain_size)
        source = resolve_rng(rng)
        batch = batch_users or max(1, (1 << 24) // self.report_bytes())
        agg = self.aggregator()
        for start in range(0, v.size, batch):
            agg.add(self.randomize(v[start : start + batch], source))
        return agg

    @property
    def realised_epsilon(self) -> float:
        """ln of the exact worst ratio of the client's output probabilities (<= epsilon)."""
        return math.log(self.privacy_ratio())

    def variance(self, n: int, frequencies=None) -> np.ndarray:
        """Exact variance of each frequency estimate from n users (f = 0 part if f is None)."""
        f = np.zeros(self.estimate_size) if frequencies is None else np.asarray(frequencies, dtype=float)
        return (f * self.p * (1 - self.p) + (1 - f) * self.q * (1 - self.q)) / (n * self.slope**2)

    @property
    def estimate_size(self) -> int:
        return self.domain_size

    # subclasses: randomize(values, rng) -> Reports ; counts(reports) -> summary array
    def randomize(self, values, rng=None) -> Reports:
        raise NotImplementedError

    def summarize(self, reports: Reports) -> np.ndarray:
        raise NotImplementedError

    def estimate_from(self, summary: np.ndarray, n: int) -> np.ndarray:
        return (summary / n - self.q) / self.slope

    def output_distribution(self, value: int) -> np.ndarray:
        """Exact probability of every possible report for input ``value`` (small domains)."""
        raise NotImplementedError


class Aggregator:
    """Server side: accumulates report batches (``add``), combines (``merge``), estimates."""

    def __init__(self, oracle: FrequencyOracle):
        self.oracle = oracle
        self.n = 0
        self.summary: np.ndarray | None = None

    def add(self, reports: Reports) -> Aggregator:
        self.oracle.check(reports)
        part = self.oracle.summarize(reports)
        self.summary = part if self.summary is None else self.summary + part
        self.n += reports.n
        return self

    def add_summary(self, summary: np.ndarray, n: int) -> Aggregator:
        """Add an already summarised state (used by exact simulation)."""
        self.summary = summary if self.summary is None else self.summary + summary
        self.n += int(n)
        return self

    def merge(self, other: Aggregator) -> Aggregator:
        if (
            type(other.oracle) is not type(self.oracle)
            or other.oracle.params() != self.oracle.params()
            or (other.oracle.epsilon, other.oracle.domain_size) != (self.oracle.epsilon, self.oracle.domain_size)
        ):
            raise ReportError("cannot merge aggregators of different oracles, epsilons or domains")
        if other.summary is not None:
            self.add_summary(other.summary, other.n)
        return self

    def estimate(self) -> np.ndarray:
        """Unbiased estimates of the fraction of users holding each value."""
        if self.n == 0:
            raise ReportError("no reports were aggregated")
        assert self.summary is not None  # n > 0: something was added
        return self.oracle.estimate_from(self.summary, self.n)[: self.oracle.domain_size]

    def variance(self, frequencies=None) -> np.ndarray:
        return self.oracle.variance(self.n, frequencies)[: self.oracle.domain_size]
