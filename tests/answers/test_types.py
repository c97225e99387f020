"""dprange.answers.types: the one-sided factor of discrete noise against exact single-draw and sum
probabilities, and the checks on quantile levels and alpha."""

import math
import sys

import numpy as np
import pytest

from dprange import ParameterError

answer_types = sys.modules["dprange.answers.types"]


def test_discrete_factor_exact_single_draw_and_sums():
    """Exact probabilities: one discrete Laplace draw X with decay t and sd s misses
    P(X < -k s) = t^(floor(k s) + 1) / (1 + t) <= alpha/2 for the factor, over scales where the
    plain Laplace factor fails (e.g. t = 0.05: 0.048 > 0.025); and sums of 2-6 equal draws
    (exact convolution) stay below alpha/2 too."""
    alpha = 0.05
    plain = answer_types._z(alpha, "laplace")
    failed_plain = 0
    for scale in np.geomspace(0.2, 20, 40):
        t = math.exp(-1 / scale)
        sd = math.sqrt(2 * t) / (1 - t)
        k = answer_types.one_sided_factor(alpha, "discrete_laplace", [scale])
        assert t ** (math.floor(k * sd) + 1) / (1 + t) <= alpha / 2
        failed_plain += t ** (math.floor(plain * sd) + 1) / (1 + t) > alpha / 2
        support = np.arange(-200, 201)
        pmf = (1 - t) / (1 + t) * t ** np.abs(support)
        dist = pmf
        for m in range(2, 7):
            dist = np.convolve(dist, pmf)
            grid = np.arange(dist.size) - (dist.size // 2)
            assert dist[grid > k * sd * math.sqrt(m)].sum() <= alpha / 2 + 1e-12, (scale, m)
    assert failed_plain >= 5
    # Gaussian: the normal quantile; continuous Laplace: the larger of normal and Laplace
    assert answer_types.one_sided_factor(alpha, "gaussian") == pytest.approx(1.959963984540054)
    assert answer_types.one_sided_factor(alpha, "laplace") == pytest.approx(math.log(20) / math.sqrt(2))


BAD_LEVELS = [True, "0.5", None, [[0.1, 0.2], [0.3]], {"a": 1}, [0.5, "a"], 1 + 1j, np.array([True]), float("nan"), 1.5]


@pytest.mark.parametrize("q", BAD_LEVELS, ids=range(len(BAD_LEVELS)))
def test_bad_quantile_levels_raise_parameter_errors(gls_release, q):
    with pytest.raises(ParameterError):
        gls_release.quantile(q)


@pytest.mark.parametrize("alpha", ["0.5", None, [0.1], 1 + 1j, True, 0, 1])
def test_bad_alpha_raises_parameter_errors(gls_release, alpha):
    with pytest.raises(ParameterError, match="alpha"):
        gls_release.range(0, 3).confidence_interval(alpha)
    with pytest.raises(ParameterError, match="alpha"):
        gls_release.quantile(0.5).confidence_interval(alpha)
