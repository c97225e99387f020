"""Contingency tables with public marginals as product-domain releases (issue 10, item 7):
any Kronecker / Privelet / Fourier release constrained to published marginals, against the
dense GLS on the constraint set (null-space parameterisation); release_table through it
(TableRelease.grid), JSON round trip, release_grid(public_marginals=...), refusals."""

from __future__ import annotations

import numpy as np
import pytest

from dprange import Domain, ParameterError, ProductDomain
from dprange.answers.constrained import constrain
from dprange.api import release_grid
from dprange.mechanisms.grid import Kronecker


def test_release_grid_takes_public_marginals_checked_before_the_columns_are_read(rng):
    domain = ProductDomain([Domain.integers(0, 2), Domain.integers(0, 3)])
    columns = [rng.integers(0, 3, 200), rng.integers(0, 4, 200)]
    counts = domain.histogram(columns)
    rel = release_grid(columns, domain, 1.0, mechanism="kronecker", rng=2, public_marginals={(1,): counts.sum(axis=0)})
    np.testing.assert_allclose(rel.marginal(1).value, counts.sum(axis=0), atol=1e-8)
    assert rel.domain == domain and rel.public_marginals[0][0] == (1,)

    class Unreadable:
        def __array__(self, *args, **kwargs):
            raise AssertionError("the columns were read")

        def __len__(self):
            raise AssertionError("the columns were read")

    with pytest.raises(ParameterError, match="disagree with one another"):
        release_grid(
            Unreadable(), domain, 1.0, mechanism="kronecker", public_marginals={(0,): [1, 2, 3], (1,): [1, 1, 1, 1]}
        )
    with pytest.raises(ParameterError, match="kd_hierarchy cannot take public marginals"):
        release_grid(Unreadable(), domain, 1.0, mechanism="kd_hierarchy", public_marginals={(0,): [1, 2, 3]})
    with pytest.raises(ParameterError, match="must have shape"):
        release_grid(Unreadable(), domain, 1.0, mechanism="kronecker", public_marginals={(0,): [1, 2]})
    replaced = Kronecker("identity", neighbours="replace").release(counts, 1.0, rng=1)
    with pytest.raises(ParameterError, match="public total"):
        constrain(replaced, {(0,): counts.sum(axis=1) + 1})  # total 203, the release's public total is 200
