"""k-D mechanisms in the registry, their automatic choice by exact expected error, the k-D
SVD bound, and the k-D entry point dprange.release_grid (issue 10, items 5 and 6)."""

from __future__ import annotations

import numpy as np
import pytest

import dprange
from dprange import Domain, FourierMarginals, KDHierarchy, Kronecker, Privelet, ProductDomain, Quadtree
from dprange.mechanisms import base as mechanisms_base
from dprange.mechanisms.optimized_grid import OptimizedKronecker, OptimizedMarginals
from dprange.registry import GRID_MECHANISMS, GRID_WORKLOADS, MECHANISMS, docs_markdown


def test_k_d_mechanisms_are_registered_apart_from_the_1_d_ones():
    data_aware = ("kd_tree", "hybrid_tree", "dawa_hilbert")  # dprange.data_aware.grid: never chosen by auto
    independent = ("kronecker", "kd_hierarchy", "quadtree", "privelet", "fourier")
    optimized = ("optimized_kronecker", "optimized_marginals")
    assert GRID_MECHANISMS.names() == (*independent, *optimized, *data_aware)
    assert GRID_MECHANISMS.names(auto=True) == ("kronecker", "kd_hierarchy", "fourier", *optimized)
    # quadtree = kd_hierarchy(2) in 2-D, privelet = kronecker("haar")
    factories = [Kronecker, KDHierarchy, Quadtree, Privelet, FourierMarginals, OptimizedKronecker, OptimizedMarginals]
    assert [GRID_MECHANISMS[n].factory for n in independent + optimized] == factories
    for entry in MECHANISMS.values():  # the 1-D registry (run on 1-D counts by its tests) has none of them
        assert entry.factory is not None and not issubclass(entry.factory, mechanisms_base.GridMechanism)
    assert GRID_WORKLOADS.names() == ("all-rectangles", "prefix-rectangles", "marginals")
    page = docs_markdown()
    assert "## k-D mechanisms" in page and "## k-D workloads" in page
    for name in GRID_MECHANISMS:
        assert f"| `{name}` | {GRID_MECHANISMS[name].summary}" in page


DOMAIN = ProductDomain([Domain.integers(0, 11), Domain.integers(0, 8)])


def test_product_domain_errors_name_the_axis():
    """Was: the 1-D message alone, with no axis."""
    with pytest.raises(dprange.errors.DomainError, match=r"^axis 1: .*outside the public bounds"):
        DOMAIN.histogram([np.array([0, 11]), np.array([0, 9])])
