"""Simulating a local-DP collection without materialising every report, where that is exact.

``simulate(protocol, counts, epsilon, rng)`` returns the aggregator state that running every
client on a population with histogram ``counts`` would give, drawn from exactly the same
distribution:

* users are split across levels exactly: each user picks a level independently, so the
  users of each bin split as one multinomial per bin (a single vectorised draw);
* OUE: the count of each item is Binomial(n_z, 1/2) + Binomial(N_l - n_z, q) (bits are
  independent across items and users) — **exact**, O(nodes) per level (Cormode et al., PVLDB 2019, section 5);
* GRR: a GRR report is the mixture "own value w.p. p - q, else uniform over all D values"
  (p - q + D q = 1), so the counts are Binomial(n_z, p - q) kept reports plus a
  Multinomial(remaining users, uniform over D) — **exact**, O(D) per level;
* OLH: the aggregate has no exact shortcut for a concrete hash family (the support indicators
  of one user are dependent through her hash; Cormode et al. say as much).  By default users are
  run through the real client and server code (exact by construction, O(N D)).  With
  ``olh_ideal_hash=True`` the counts are drawn as Binomial(n_z, p) + Binomial(N_l - n_z, 1/g)
  independently per item, which is **exact for an ideal (fully random) hash function** and
  matches every item's marginal law for ours up to its O(g / 2^31) non-uniformity, but not
  the small correlations a real 2-universal family induces between items;
* HRR (and HaarHRR's signed HRR): **no exact shortcut** is known (which users share a
  Hadamard row couples all coefficients); users are run through the real client and server
  code in chunks of 2^22, without ever holding all N values — exact by construction, O(N)
  time (timing: docs/ldp.md).

Simulation is for experiments: it needs a seedable numpy Generator (binomials), and it
reads the true histogram, so its output is only private in the sense of the protocol.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..privacy.samplers import SecureRandom, resolve_rng
from ..progress import tracked
from .oracles import GRR, OLH, OUE
from .protocols import Protocol, ProtocolAggregator

CHUNK = 1 << 22


def _generator(rng) -> np.random.Generator:
    source = resolve_rng(rng)
    if isinstance(source, SecureRandom):
        return np.random.default_rng(int(source.integers(0, 2**62)))
    return source


def split_by_level(counts: np.ndarray, probabilities: np.ndarray, gen: np.random.Generator) -> list:
    """Exact random split of a population (histogram) into level groups: every user picks a
    level independently, so the users of each bin split as one Multinomial(n_z, p), independent
    across bins (one vectorised draw, O(D L))."""
    split = gen.multinomial(counts.astype(np.int64), probabilities)  # (D, levels)
    return [np.ascontiguousarray(split[:, level]) for level in range(split.shape[1])]


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
    kept = gen.binomial(own, oracle.p - oracle.q)
    return (kept + gen.multinomial(n - int(kept.sum()), np.full(size, 1.0 / size))).astype(float)


def _simulate_olh_ideal(oracle: OLH, node_counts, n, gen):
    size = oracle.domain_size
    own = np.zeros(size, dtype=np.int64)
    own[: node_counts.size] = node_counts
    return (gen.binomial(own, oracle.p) + gen.binomial(n - own, 1.0 / oracle.g)).astype(float)


def values_in_chunks(counts: np.ndarray, chunk: int = CHUNK):
    """The sorted values of a histogram, ``chunk`` at a time (O(chunk log D) each)."""
    cum = np.cumsum(counts)
    total = int(cum[-1]) if cum.size else 0
    for start in range(0, total, chunk):
        yield np.searchsorted(cum, np.arange(start, min(start + chunk, total)), side="right")


def _per_user(protocol, level, group, gen, aggregator):
    """Real clients in chunks: expand the histogram into values and randomise them."""
    for values in values_in_chunks(group):
        aggregator.add(protocol._report_level(level, values.astype(np.int64), gen))


def simulate(protocol: Protocol, counts, epsilon=None, rng=None, *, olh_ideal_hash: bool = False) -> ProtocolAggregator:
    """The aggregator state after every user of ``counts`` reported (see module doc).

    ``counts``: the population's histogram (D non-negative integers); ``epsilon`` overrides
    the protocol's; ``rng``: a seed or numpy Generator (a SecureRandom is turned into a
    seeded numpy Generator: simulation needs binomial draws).  The result is a
    :class:`ProtocolAggregator` whose ``release()`` gives the protocol's release.
    """
    if epsilon is not None:
        protocol = protocol.with_epsilon(epsilon)
    protocol._eps()
    counts = np.asarray(counts)
    if counts.ndim != 1 or counts.size != protocol.domain_size or counts.dtype.kind not in "iu" or np.any(counts < 0):
        raise ParameterError(f"counts must be {protocol.domain_size} non-negative integers (one per value)")
    gen = _generator(rng)
    agg = protocol.aggregator()
    groups = split_by_level(counts, protocol.level_probabilities, gen)
    for level, group in enumerate(tracked(groups, "simulating levels", unit="level"), start=1):
        n = int(group.sum())
        if n == 0:
            continue
        oracle = agg.levels[level].oracle
        nodes = _node_counts(protocol, level, group)
        if isinstance(oracle, OUE) and nodes is not None:
            agg.levels[level].add_summary(_simulate_oue(oracle, nodes, n, gen).astype(float), n)
        elif isinstance(oracle, GRR) and nodes is not None:
            agg.levels[level].add_summary(_simulate_grr(oracle, nodes, n, gen), n)
        elif isinstance(oracle, OLH) and nodes is not None and olh_ideal_hash:
            agg.levels[level].add_summary(_simulate_olh_ideal(oracle, nodes, n, gen), n)
        else:
            _per_user(protocol, level, group, gen, agg.levels[level])
    return agg


#: Whether ``simulate`` draws each oracle's aggregate exactly without per-user reports.
SHORTCUT_EXACT = {"oue": True, "grr": True, "olh": False, "hrr": False}
