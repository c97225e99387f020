"""All error bars of the Haar (Privelet) estimate in one pass over the levels.

The one-pass prefix / suffix / bin variances must equal the per-query path
(``range_variance``) and the covariance of the inverse transform built densely from unit
measurements, for n a power of two and not, public and estimated total, per-level and
per-node variances; every caller that asks for n error bars at once must give the numbers
of the per-query path."""

import pytest
from _helpers import _PerQueryOnly

from dprange import Wavelet, analysis
from dprange.workloads import AllRange, Identity, Prefix


@pytest.mark.parametrize("workload", [AllRange(300), Prefix(300), Identity(300)])
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_wavelet_workload_errors_equal_per_query(workload, neighbours):
    model = Wavelet(neighbours=neighbours).error_model(300, 0.5)
    reference = _PerQueryOnly(model)
    assert analysis.workload_error(model, workload) == pytest.approx(
        analysis.workload_error(reference, workload), rel=1e-12
    )
