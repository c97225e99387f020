"""CDF consistency: trellis = brute force; isotonic = trellis; Release integration."""

import numpy as np

from dprange import Hierarchical


def test_release_consistent_cdf_and_quantiles():
    x = np.random.default_rng(4).poisson(20, 300)
    for mech in (Hierarchical(4, neighbours="replace"), Hierarchical(16)):
        rel = mech.release(x, 0.5, rng=5)
        cdf = rel.cdf(consistent=True).value
        assert np.all(np.diff(cdf) >= 0) and cdf[-1] == 1.0 and cdf[0] >= 0
        q = rel.quantile([0.25, 0.5, 0.75], consistent=True)
        assert np.all(np.diff(q.value) >= 0)
        lower, upper = q.confidence_interval()
        assert np.all(lower <= upper)
    rel = Hierarchical(4, neighbours="replace").release(x, 0.5, rng=5)
    assert rel.consistent_cumulative()[-1] == x.sum()
