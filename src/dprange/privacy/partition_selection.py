"""Private partition (group key) selection: which keys of a group-by to publish, under (epsilon, delta).

Desfontaines, Voss, Gipson and Mandayam, "Differentially private partition selection", PoPETs
2022: when each id contributes to one key, the mechanism that keeps a key with n distinct ids
with probability pi(n), independently per key, where

    pi(0) = 0,
    pi(n) = min(e^epsilon pi(n-1) + delta,  1 - e^-epsilon (1 - pi(n-1) - delta),  1),

is (epsilon, delta)-DP for adding or removing one id and keeps every key with the largest
probability any such mechanism can (their Theorem 1).  The first term is the constraint of
P(keep) when an id joins a key with n - 1 ids, the second that of P(drop) when it leaves one,
each met with equality until pi reaches 1 (where 1 - pi(n-1) <= delta).  A key absent from the
data (n = 0) is never kept: the candidate keys come from the data, which is why delta > 0 is
needed at all (pi(1) = delta: one id alone makes its key appear with probability delta).

**m keys per id.**  When each id contributes to at most m keys (after contribution bounding),
one id changes m keys' counts by one each; the paper's optimality result is for m = 1.  We
split the budget rather than search an m-contribution mechanism: each key's draw uses pi for
(epsilon / m, delta / m); the draws of an id's m keys compose to (epsilon, delta) (basic
composition, which holds for the hockey-stick divergence), and the keys it does not touch have
the same law on both datasets.  The split is simple to check exactly (the tests below) and
costs the factor m in both parameters.

**Floats.**  pi(n) is computed in float64 by the recursion, each value shrunk by a relative
2^-48 (and never below pi(n-1)) so that the float pi used meets both constraints against the
real e^epsilon in exact arithmetic, whatever the rounding of exp and of the recursion (a few
ulps); pi = 1 only where 1 - pi(n-1) <= delta holds exactly (Fractions).  The draw
:func:`bernoulli` keeps a key with probability exactly the float pi (a dyadic rational),
comparing uniform 62-bit words of the secure source with pi's binary digits.
``tests/privacy/test_partition_selection.py`` checks (epsilon, delta) from the definition on
tiny data.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._validation import check_delta, check_epsilon, check_positive_int
from ..errors import ParameterError
from .units import divided_down

#: Each float pi(n) is shrunk by this relative amount (module doc: rounding margin).
SHRINK = 2.0**-48

#: Uniform words compared with pi's binary digits, 62 bits at a time.
_WORD_BITS = 62

#: pi is computed for min(epsilon, this) (e^epsilon beyond it overflows a float).
MAX_EXPONENT = 700.0

#: The longest table of pi built: a count beyond it is drawn with pi(MAX_TABLE) (a constant pi
#: meets both constraints; reached only where pi stays below 1 past 10^7 ids, epsilon near 1e-5).
MAX_TABLE = 10**7


class PartitionSelection:
    """Keep each key with probability pi(n) of its n distinct ids (module doc), for ids each in
    at most ``max_partitions`` (m) keys: pi for (epsilon / m, delta / m)."""

    def __init__(self, epsilon: float, delta: float, max_partitions: int = 1):
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        if self.delta <= 0:
            raise ParameterError("private key selection needs delta > 0: give delta, or declare the keys")
        self.max_partitions = check_positive_int(max_partitions, "max_partitions")
        self.key_epsilon = divided_down(self.epsilon, self.max_partitions)
        self.key_delta = divided_down(self.delta, self.max_partitions)
        self._table = [0.0]

    def probability(self, n: int) -> float:
        """pi(n): the probability that a key with n distinct ids is kept (a float used exactly)."""
        n = int(n)
        if n < 0:
            raise ParameterError("a count of ids cannot be negative")
        self._extend(n)
        return self._table[min(n, len(self._table) - 1)]

    def probabilities(self, counts) -> np.ndarray:
        """pi of every count (float64)."""
        counts = np.asarray(counts, dtype=np.int64)
        if counts.size == 0:
            return np.zeros(0)
        self._extend(int(counts.max()))
        table = np.asarray(self._table)
        return table[np.minimum(counts, table.size - 1)]

    def _extend(self, n: int) -> None:
        """The table up to n, or up to its first 1 (constant after)."""
        table = self._table
        if len(table) > n or table[-1] == 1.0:
            return
        n = min(n, MAX_TABLE)  # never a data-dependent refusal: larger counts take pi(MAX_TABLE)
        rate = min(self.key_epsilon, MAX_EXPONENT)  # a smaller epsilon only lowers pi: still private
        grow, shrink = math.exp(rate), math.exp(-rate)
        delta = self.key_delta
        while len(table) <= n and table[-1] < 1.0:
            table.append(_next(table[-1], grow, shrink, delta))

    def select(self, counts, rng) -> np.ndarray:
        """Whether each key (its count of distinct ids after bounding) is kept: independent
        draws with probability pi(count), exact (:func:`bernoulli`)."""
        return np.array([bernoulli(float(p), rng) for p in self.probabilities(counts)], dtype=bool)

    def to_dict(self) -> dict:
        """The record of a selection: its budget and how each key's budget follows from it."""
        return {
            "method": "optimal partition selection (Desfontaines, Voss, Gipson, Mandayam, PoPETs 2022)",
            "epsilon": self.epsilon,
            "delta": self.delta,
            "max_groups_per_id": self.max_partitions,
            "per_key_epsilon": self.key_epsilon,
            "per_key_delta": self.key_delta,
        }


def _next(previous: float, grow: float, shrink: float, delta: float) -> float:
    """pi(n) from pi(n-1) = ``previous`` (module doc), safe against rounding."""
    if Fraction(previous) + Fraction(delta) >= 1:
        return 1.0
    add = grow * previous + delta
    leave = 1.0 - shrink * (1.0 - previous - delta)
    return min(max(previous, min(add, leave) * (1.0 - SHRINK)), 1.0)


def bernoulli(p: float, rng) -> bool:
    """True with probability exactly ``p`` (a float, hence a dyadic rational): a uniform U in
    [0, 1), drawn 62 bits at a time from ``rng.integers``, is compared with p's binary digits
    until they differ; True when U < p."""
    if p <= 0.0:
        return False
    if p >= 1.0:
        return True
    fraction = Fraction(p)
    rest, scale = fraction.numerator, fraction.denominator  # scale is a power of two
    while True:
        digit, rest = divmod(rest << _WORD_BITS, scale)
        word = int(rng.integers(0, 1 << _WORD_BITS))
        if word != digit:
            return word < digit
        if rest == 0:
            return False  # U's digits so far equal p's and p has no more: U >= p
