"""Private key selection (Desfontaines et al., PoPETs 2022) against the definition of (epsilon, delta)-DP.

Tiny data: 1-3 ids, each with rows in 1-3 keys.  The exact law of the output (the set of keys
kept) is enumerated: every id keeps a uniform m-subset of its keys (the law of contribution
bounding to m groups per id; tests/engines/test_bounding.py checks the code draws it), each
key's count is its number of ids after bounding, and each key is kept independently with the
float pi(count) the code computes (:class:`PartitionSelection`), taken as an exact rational
(:func:`bernoulli` draws exactly that probability: checked below).  For every id removed, the
hockey-stick divergence sum_S max(0, P(S | D) - e^epsilon P(S | D')) is computed in both
directions in exact arithmetic, with a rational lower bound of e^epsilon (which can only raise
it), and must be at most delta.  It exceeds delta when pi is computed for a larger delta or when
the m keys an id touches are ignored (pi for (epsilon, delta) per key instead of the split).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dprange.errors import ParameterError
from dprange.privacy.partition_selection import SHRINK, PartitionSelection, bernoulli

#: id -> its keys (one entry per key it has rows in)
DATASETS = [
    {"a": ["x"]},
    {"a": ["x"], "b": ["x"], "c": ["x"]},
    {"a": ["x"], "b": ["x"], "c": ["x", "y"]},
    {"a": ["x", "y"], "b": ["y", "z"], "c": ["x"]},
    {"a": ["x", "y", "z"], "b": ["y"], "c": ["z", "x"]},
]


def exp_below(epsilon: float) -> Fraction:
    """A rational at most e^epsilon (math.exp is within an ulp; two steps down are below it)."""
    return Fraction(math.nextafter(math.nextafter(math.exp(epsilon), 0.0), 0.0))


def output_law(data: dict, selection: PartitionSelection, m: int) -> dict:
    """{frozenset of keys kept: exact probability}."""
    keys = sorted({k for ks in data.values() for k in ks})
    choices = [list(itertools.combinations(sorted(set(ks)), min(m, len(set(ks))))) for ks in data.values()]
    law: dict = {}
    for chosen in itertools.product(*choices):
        weight = Fraction(1)
        for options in choices:
            weight /= len(options)
        counts = {k: sum(k in c for c in chosen) for k in keys}
        pis = {k: Fraction(selection.probability(counts[k])) for k in keys}
        for kept in itertools.product([False, True], repeat=len(keys)):
            p = weight
            for k, keep in zip(keys, kept):
                p *= pis[k] if keep else 1 - pis[k]
            if p:
                out = frozenset(k for k, keep in zip(keys, kept) if keep)
                law[out] = law.get(out, 0) + p
    return law


def hockey_stick(p: dict, q: dict, e_eps: Fraction) -> Fraction:
    return sum((max(Fraction(0), p[s] - e_eps * q.get(s, 0)) for s in p), Fraction(0))


def worst_divergence(data: dict, selection: PartitionSelection, m: int, epsilon: float) -> Fraction:
    """The largest hockey stick over every id removed, both directions."""
    e_eps = exp_below(epsilon)
    full = output_law(data, selection, m)
    worst = Fraction(0)
    for gone in data:
        less = output_law({i: k for i, k in data.items() if i != gone}, selection, m)
        worst = max(worst, hockey_stick(full, less, e_eps), hockey_stick(less, full, e_eps))
    return worst


@pytest.mark.parametrize("epsilon, delta", [(0.7, 0.1), (1.0, 1e-3), (0.05, 0.3)])
@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("data", DATASETS, ids=["one", "three-ids", "shared", "chain", "three-keys"])
def test_private_key_selection_meets_its_delta_exactly(data, m, epsilon, delta):
    selection = PartitionSelection(epsilon, delta, m)
    assert worst_divergence(data, selection, m, epsilon) <= Fraction(delta)


def test_the_drop_constraint_binds():
    """At epsilon 0.05, delta 0.3 three ids push pi(3) onto the second term of the recursion
    (1 - pi(n) >= e^-epsilon (1 - pi(n-1) - delta)): keeping only the first term exceeds delta."""
    selection = PartitionSelection(0.05, 0.3)
    first_only = min(math.exp(0.05) * selection.probability(2) + 0.3, 1.0)
    assert selection.probability(3) < first_only - 0.01
    selection._table[3] = first_only  # the mutation: pi(3) from the first term alone
    assert worst_divergence(DATASETS[1], selection, 1, 0.05) > Fraction(0.3)


def test_the_delta_is_met_with_equality_by_one_id_alone():
    """pi(1) = delta (up to the rounding margin): the optimal mechanism spends all of delta."""
    selection = PartitionSelection(0.7, 0.1)
    assert worst_divergence(DATASETS[0], selection, 1, 0.7) >= Fraction(0.1) * (1 - 4 * Fraction(SHRINK))


@pytest.mark.parametrize("data", [DATASETS[0], {"a": ["x"], "b": ["y"], "c": ["y"]}], ids=["one", "pair"])
def test_the_delta_is_exceeded_when_pi_is_computed_for_a_larger_delta_or_epsilon(data):
    epsilon, delta = 0.7, 0.1
    too_generous = PartitionSelection(epsilon, 1.5 * delta, 1)
    assert worst_divergence(data, too_generous, 1, epsilon) > Fraction(delta)
    if len(data) > 1:  # a key with 2 ids: pi(2) for a larger epsilon exceeds e^epsilon pi(1) + delta
        assert worst_divergence(data, PartitionSelection(1.5 * epsilon, delta, 1), 1, epsilon) > Fraction(delta)


@pytest.mark.parametrize("data", [DATASETS[3], DATASETS[4]], ids=["chain", "three-keys"])
def test_the_delta_is_exceeded_when_the_keys_per_id_are_ignored(data):
    """Ids kept in m = 2 keys, but each key drawn with pi for the whole (epsilon, delta)."""
    epsilon, delta = 0.7, 0.1
    ignoring_m = PartitionSelection(epsilon, delta, 1)
    assert worst_divergence(data, ignoring_m, 2, epsilon) > Fraction(delta)


def test_pi_follows_the_papers_recursion_within_the_rounding_margin():
    epsilon, delta = 0.5, 1e-6
    selection = PartitionSelection(epsilon, delta)
    exact = [0.0]
    while exact[-1] < 1.0:
        p = exact[-1]
        exact.append(min(math.exp(epsilon) * p + delta, 1 - math.exp(-epsilon) * (1 - p - delta), 1.0))
    got = selection.probabilities(np.arange(len(exact) + 5))
    assert got[0] == 0.0 and got[-1] == 1.0 and np.all(np.diff(got) >= 0)
    assert np.allclose(got[: len(exact)], exact, rtol=1e-12, atol=0)
    assert got[1] == pytest.approx(delta, rel=1e-12)
    # m = 2: the pi of (epsilon / 2, delta / 2)
    split = PartitionSelection(epsilon, delta, 2)
    assert split.probability(7) == PartitionSelection(epsilon / 2, delta / 2).probability(7)


def test_private_key_selection_needs_delta():
    with pytest.raises(ParameterError, match="delta > 0"):
        PartitionSelection(1.0, 0.0)


class Words:
    """A fake source returning the given 62-bit words in turn."""

    def __init__(self, *words):
        self.words = list(words)

    def integers(self, low, high):
        assert (low, high) == (0, 2**62)
        return self.words.pop(0)


def test_bernoulli_compares_uniform_words_with_the_digits_of_p():
    assert bernoulli(0.5, Words(2**61 - 1)) is True
    assert bernoulli(0.5, Words(2**61)) is False  # U = 1/2 exactly is not below 1/2
    tiny = 2.0**-70  # digits: 0, then 2^54
    assert bernoulli(tiny, Words(0, 2**54 - 1)) is True
    assert bernoulli(tiny, Words(0, 2**54)) is False
    assert bernoulli(tiny, Words(1)) is False
    assert bernoulli(0.0, Words()) is False and bernoulli(1.0, Words()) is True


def test_bernoulli_draws_its_probability():
    """Monte-Carlo: 40000 draws of p = 0.3 and of p = 0.02 within 4.5 standard errors."""
    rng = np.random.default_rng(7)
    for p in (0.3, 0.02):
        draws = 40_000
        hits = sum(bernoulli(p, rng) for _ in range(draws))
        assert abs(hits / draws - p) <= 4.5 * math.sqrt(p * (1 - p) / draws)


def test_select_keeps_absent_keys_never_and_large_keys_always():
    selection = PartitionSelection(1.0, 1e-5)
    kept = selection.select([0, 0, 10_000, 10_000], np.random.default_rng(1))
    assert kept.tolist() == [False, False, True, True]


def test_counts_beyond_the_table_take_its_last_pi_without_a_data_dependent_refusal(monkeypatch):
    import dprange.privacy.partition_selection as module

    monkeypatch.setattr(module, "MAX_TABLE", 50)
    selection = PartitionSelection(1e-3, 1e-9)
    last = selection.probability(50)
    assert 0 < last < 1 and selection.probability(10**9) == last
    assert selection.probabilities([3, 10**9]).tolist() == [selection.probability(3), last]
