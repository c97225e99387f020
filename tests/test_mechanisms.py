"""Mechanisms: calibration (privacy by the definition), unbiasedness and exact variances."""

import numpy as np
import pytest

import dprange
from dprange import Domain, ParameterError


def test_release_convenience_bucketizes():
    values = np.array([0.5, 1.5, 1.7, 9.9])
    rel = dprange.release(values, Domain.interval(0, 10, 10), 2.0, mechanism="flat", rng=3)
    assert rel.n == 10 and rel.mechanism == "flat"
    with pytest.raises(dprange.DomainError):
        dprange.release([11.0], Domain.interval(0, 10, 10), 1.0)
    with pytest.raises(ParameterError):
        dprange.release(values, Domain.interval(0, 10, 10), 1.0, mechanism="bogus")
