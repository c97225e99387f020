"""Release answers: values, exact standard errors, CDF, quantiles, serialisation."""

import numpy as np
import pytest

import dprange
from dprange import Domain, Hierarchical, ParameterError
from dprange.analysis import expected_error, select
from dprange.api import choose_mechanism
from dprange.registry import MECHANISMS
from dprange.workloads import Explicit, Ranges


@pytest.mark.parametrize(
    "workload", [Ranges([0, 5], [9, 30], 50), Explicit(np.ones((2, 50)))], ids=["ranges", "explicit"]
)
def test_a_workload_on_another_number_of_bins_is_refused_for_every_mechanism(workload):
    """A named mechanism (or a mechanism object) given a Ranges / Explicit workload defined on
    another number of bins than the domain's was accepted, the workload ignored; auto and
    optimized refused it in their own words.  Every mechanism now refuses it, giving both numbers."""
    counts, domain = np.ones(100, dtype=int), Domain.integers(0, 99)
    message = "the workload is defined on 50 bins but the domain has 100"
    for mechanism in (*MECHANISMS.names(nameable=True), "auto", Hierarchical(4)):
        with pytest.raises(ParameterError, match=message):
            choose_mechanism(mechanism, 100, 1.0, workload=workload)
        with pytest.raises(ParameterError, match=message):
            dprange.release(counts, domain, 1.0, mechanism=mechanism, workload=workload)
    with pytest.raises(ParameterError, match="the workload is defined on 50 bins but n = 100"):
        select(workload, 100, 1.0)
    with pytest.raises(ParameterError, match="the workload is defined on 50 bins but n = 100"):
        expected_error(Hierarchical(4), workload, 1.0, n=100)
    on_domain = Ranges([0, 5], [9, 30], 100)
    release = dprange.release(counts, domain, 1.0, mechanism="hierarchical", workload=on_domain, rng=0)
    assert release.answer(on_domain).value.shape == (2,)
