"""All error bars of the Haar (Privelet) estimate in one pass over the levels.

The one-pass prefix / suffix / bin variances must equal the per-query path
(``range_variance``) and the covariance of the inverse transform built densely from unit
measurements, for n a power of two and not, public and estimated total, per-level and
per-node variances; every caller that asks for n error bars at once must give the numbers
of the per-query path."""

import numpy as np
import pytest

from dprange import Domain, Wavelet, analysis
from dprange.answers.cdf import CumulativeEstimate
from dprange.workloads import AllRange, Identity, Prefix


class _PerQueryOnly:
    """An error model with the per-query interface only (the path before the one pass)."""

    def __init__(self, model):
        self._model = model

    def range_variance(self, lo, hi):
        return self._model.range_variance(lo, hi)

    def query_variance(self, weights):
        return self._model.query_variance(weights)


@pytest.mark.parametrize("workload", [AllRange(300), Prefix(300), Identity(300)])
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_wavelet_workload_errors_equal_per_query(workload, neighbours):
    model = Wavelet(neighbours=neighbours).error_model(300, 0.5)
    reference = _PerQueryOnly(model)
    assert analysis.workload_error(model, workload) == pytest.approx(
        analysis.workload_error(reference, workload), rel=1e-12
    )


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_wavelet_cdf_errors_equal_per_query(neighbours):
    counts = np.random.default_rng(3).poisson(20, 300)
    rel = Wavelet(neighbours=neighbours).release(counts, 1.0, rng=4, domain=Domain.interval(0.0, 30.0, 300))
    fast = CumulativeEstimate(rel.estimate, rel.error_model, rel.provenance, rel.domain, rel._one_sided_factor)
    slow = CumulativeEstimate(
        rel.estimate, _PerQueryOnly(rel.error_model), rel.provenance, rel.domain, rel._one_sided_factor
    )
    expected = slow.cdf().stderr
    residue = 1e-6 * expected.max()
    np.testing.assert_allclose(fast.cdf().stderr, expected, rtol=1e-10, atol=residue)
