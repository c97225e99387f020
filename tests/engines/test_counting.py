"""The engines' fast batch counts equal Domain.histogram exactly, on values at, just beside
and between the published edges, with clipping, dropping and the errors left to the domain."""

from __future__ import annotations

import numpy as np
import pytest

from dprange import Domain, DomainError
from dprange.engines import counting
from dprange.engines.counting import EdgeTable, batch_histogram, edge_table

DOMAINS = [
    Domain.interval(0.1, 0.7, 7),
    Domain.interval(-1e6, 3.3, 1000),
    Domain.interval(0.0, 1e6, 1024),
    Domain.interval(-2.5e-300, 1e-300, 3),
]


def edge_values(domain: Domain) -> np.ndarray:
    """Every published edge, its float neighbours, bin midpoints and random values, shuffled."""
    edges = domain.edges
    inside = np.concatenate(
        [
            edges,
            np.nextafter(edges, np.inf),
            np.nextafter(edges, -np.inf),
            (edges[:-1] + edges[1:]) / 2,
            np.random.default_rng(1).uniform(domain.lo, domain.hi, 5000),
        ]
    )
    inside = inside[(inside >= domain.lo) & (inside <= domain.hi)]
    return np.random.default_rng(2).permutation(inside)


@pytest.mark.parametrize("domain", DOMAINS, ids=repr)
def test_fast_counts_equal_the_domain_at_and_beside_every_edge(domain, monkeypatch):
    monkeypatch.setattr(counting, "CHUNK", 1000)  # several chunks, and a short last one
    values = edge_values(domain)
    table = edge_table(domain)
    counts = batch_histogram(domain, values, table=table)
    assert counts.dtype == np.int64 and counts.sum() == values.size
    np.testing.assert_array_equal(counts, domain.histogram(values))


def test_the_correction_is_exercised():
    """The affine guess is off by one for some values beside the edges (so the test above
    checks the correction, not only the guess)."""
    domain = DOMAINS[0]
    table = EdgeTable(domain)
    values = edge_values(domain)
    guess = np.minimum(((values - table.lo) * table.scale).astype(np.int64), table.bins - 1)
    exact = np.minimum(np.searchsorted(domain.edges, values, side="right") - 1, table.bins - 1)
    assert np.any(guess != exact)


@pytest.mark.parametrize("domain", DOMAINS[:2], ids=repr)
def test_clip_and_drop_missing_equal_the_domain(domain):
    values = edge_values(domain)
    width = domain.hi - domain.lo
    dirty = np.concatenate([values, [np.nan, -np.inf, np.inf, domain.lo - width, domain.hi + width, np.nan]])
    dirty = np.random.default_rng(3).permutation(dirty)
    table = edge_table(domain)
    np.testing.assert_array_equal(
        batch_histogram(domain, dirty, clip=True, drop_missing=True, table=table),
        domain.histogram(dirty, clip=True, drop_missing=True),
    )
    only_outside = dirty[~np.isnan(dirty)]
    np.testing.assert_array_equal(
        batch_histogram(domain, only_outside, clip=True, table=table), domain.histogram(only_outside, clip=True)
    )
    with pytest.raises(DomainError, match="missing"):
        batch_histogram(domain, dirty, clip=True, table=table)
    with pytest.raises(DomainError, match="outside the public bounds"):
        batch_histogram(domain, only_outside, table=table)
    assert batch_histogram(domain, np.array([np.nan]), drop_missing=True, table=table).sum() == 0
    assert batch_histogram(domain, np.zeros(0), table=table).sum() == 0


def test_other_inputs_take_the_domain_path():
    integers = Domain.integers(-3, 5)
    values = np.arange(-3, 6)
    np.testing.assert_array_equal(batch_histogram(integers, values), np.ones(9, dtype=np.int64))
    assert edge_table(integers) is None
    assert edge_table(Domain.interval(0.0, 1.0, counting.MAX_TABLE_BINS + 1)) is None
    interval = DOMAINS[0]
    ints = np.array([0, 0, 0])  # int64 on an interval: the domain converts them
    with pytest.raises(DomainError, match="outside"):
        batch_histogram(interval, ints, table=edge_table(interval))
