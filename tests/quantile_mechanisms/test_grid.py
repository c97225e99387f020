"""dprange.quantile_mechanisms.grid: the quantile mechanisms' parameters are checked."""

import pytest

from dprange import ParameterError
from dprange.quantile_mechanisms import exponential, joint_exp
from dprange.quantile_mechanisms import grid as quantile_grid


def test_bad_parameters_raise_parameter_error():
    grid = quantile_grid.QuantileGrid.from_bounds((0, 1), integer=False, cells=16)
    with pytest.raises(ParameterError, match="strictly increasing"):
        exponential.approximate_quantiles([0.5], [0.5, 0.2], 1.0, grid, rng=0)
    with pytest.raises(ParameterError, match="between 0 and 1"):
        exponential.approximate_quantiles([0.5], [0.0, 0.5], 1.0, grid, rng=0)
    with pytest.raises(ParameterError, match="epsilon"):
        joint_exp.joint_exponential_quantiles([0.5], [0.5], -1.0, (0, 1), rng=0)
    with pytest.raises(ParameterError, match="neighbours"):
        exponential.exponential_quantile([0.5], 0.5, 1.0, grid, neighbours="swap", rng=0)
    with pytest.raises(ParameterError, match="a < b"):
        quantile_grid.QuantileGrid.from_bounds((1, 0), integer=False)
