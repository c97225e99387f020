"""Simulating a local-DP collection without materialising every report, where that is exact.

``simulate(protocol, counts, epsilon, rng)`` returns the aggregator state that running every
client on a population with histogram ``counts`` would give, drawn from exactly the same
distribution:

* users are split across levels exactly: the number per level is multinomial and, given
  it, which users go where is a sequence of multivariate hypergeometric draws (numpy's
  ``multivariate_hypergeometric``);
* OUE: the count of each item is Binomial(n_z, 1/2) + Binomial(N_l - n_z, q) (bits are
  independent across items and users) — exact, O(nodes) per level (seed 002 section 5);
* GRR: each value class keeps Binomial(n_z, p) reports and spreads the rest uniformly over
  the other values by a multinomial — exact, O(level size^2), used up to 4096 values;
* HRR and OLH (and GRR on larger levels): no exact aggregate shortcut is known (seed 002 says
  the same of OLH); the users are generated value by value and run through the real client
  and server code in chunks — exact by construction, O(N) (HRR) or O(N D) (OLH).

Simulation is for experiments: it needs a seedable numpy Generator (binomials), and it
reads the true histogram, so its output is only private in the sense of the protocol.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..noise import SecureRandom, resolve_rng
from .oracles import GRR, OUE
from .protocols import Protocol, ProtocolAggregator

CHUNK = 1 << 22


def _generator(rng) -> np.random.Generator:
    source = resolve_rng(rng)
    if isinstance(source, SecureRandom):
        return np.random.default_rng(int(source.integers(0, 2**62)))
    return source


def split_by_level(counts: np.ndarray, probabilities: np.ndarray, gen: np.random.Generator) -> list:
    """Exact random split of a population (histogram) into level groups."""
    remaining = counts.astype(np.int64).copy()
    sizes = gen.multinomial(int(remaining.sum()), probabilities)
    groups = []
    for size in sizes[:-1]:
        if size == 0:
            groups.append(np.zeros_like(remaining))
            continue
        part = gen.multivariate_hypergeometric(remaining, int(size), method="marginals")
        groups.append(part)
        remaining -= part
    groups.append(remaining)
    return groups


def _node_counts(protocol, level, group):
    """True node counts at ``level`` for tree protocols (None for HaarHRR: signed inputs)."""
    return protocol.tree.level_sums(group)[level] if hasattr(protocol, "tree") else None


def _simulate_oue(oracle: OUE, node_counts, n, gen):
    size = oracle.domain_size
    own = np.zeros(size, dtype=np.int64)
    own[: node_counts.size] = node_counts
    return gen.binomial(own, 0.5) + gen.binomial(n - own, oracle.q)


def _simulate_grr(oracle: GRR, node_counts, n, gen):
    size = oracle.domain_size
    own = np.zeros(size, dtype=np.int64)
    own[: node_counts.size] = node_counts
    kept = gen.binomial(own, oracle.p)
    out = kept.astype(float)
    for z in np.flatnonzero(own - kept):
        spread = gen.multinomial(int(own[z] - kept[z]), np.full(size - 1, 1.0 / (size - 1)))
        out[np.arange(size) != z] += spread
    return out


def _per_user(protocol, level, group, gen, aggregator):
    """Real clients in chunks: expand the histogram into values and randomise them."""
    values = np.repeat(np.arange(group.size, dtype=np.int64), group)
    for start in range(0, values.size, CHUNK):
        chunk = values[start : start + CHUNK]
        aggregator.add(protocol._report_level(level, chunk, gen))


def simulate(protocol: Protocol, counts, epsilon=None, rng=None) -> ProtocolAggregator:
    """The aggregator state after every user of ``counts`` reported (see module doc)."""
    if epsilon is not None:
        protocol = protocol.with_epsilon(epsilon)
    protocol._eps()
    counts = np.asarray(counts)
    if counts.ndim != 1 or counts.size != protocol.domain_size or counts.dtype.kind not in "iu" or np.any(counts < 0):
        raise ParameterError(f"counts must be {protocol.domain_size} non-negative integers (one per value)")
    gen = _generator(rng)
    agg = protocol.aggregator()
    groups = split_by_level(counts, protocol.level_probabilities, gen)
    for level, group in enumerate(groups, start=1):
        n = int(group.sum())
        if n == 0:
            continue
        oracle = agg.levels[level].oracle
        nodes = _node_counts(protocol, level, group)
        if isinstance(oracle, OUE) and nodes is not None:
            agg.levels[level].add_summary(_simulate_oue(oracle, nodes, n, gen).astype(float), n)
        elif isinstance(oracle, GRR) and nodes is not None and oracle.domain_size <= 4096:
            agg.levels[level].add_summary(_simulate_grr(oracle, nodes, n, gen), n)
        else:
            _per_user(protocol, level, group, gen, agg.levels[level])
    return agg
