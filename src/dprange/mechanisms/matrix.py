"""Matrix: the matrix mechanism (Li, Hay, Rastogi, Miklau, McGregor, PODS 2010) for any given
strategy, quantised to integers so that noise reveals nothing beyond the noisy answers.
"""

from __future__ import annotations

import numpy as np

from .._params import Custom, Param
from .._validation import check_positive_int
from ..errors import ParameterError
from ..registry import MECHANISMS, Citation
from ..strategies.matrix import DENSE_COVARIANCE_LIMIT, MatrixStrategy
from .base import Mechanism


def _measured_strategy(value, name: str) -> MatrixStrategy:
    """The strategy parameter as the integer strategy that is measured (a zero one measures nothing)."""
    strategy = value if isinstance(value, MatrixStrategy) else MatrixStrategy(value)
    if not np.any(strategy.explicit()):
        raise ParameterError(f"the {name} matrix is zero; it measures nothing")
    return strategy


class Matrix(Mechanism):
    """Matrix mechanism with strategy A and least-squares inference (see module doc).

    ``noise="auto"`` is discrete Laplace when delta = 0 and Gaussian when delta > 0, on the
    integer (quantised) strategy.
    """

    name = "matrix"

    PARAMS = (
        Param(
            "strategy",
            Custom(_measured_strategy, "matrix (dense, scipy sparse, or a LinearOperator over <= 4096 bins)"),
            "the strategy A (p x n) whose rows are measured; a real one is quantised to integers",
            positional=True,
            attribute="_strategy",
        ),
        *Mechanism.PARAMS,
    )
    _strategy: MatrixStrategy

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Depends on two parameters: with the public total (replace) one direction less is needed.
        self._strategy.check_rank(known_total=self.neighbours == "replace")

    def sensitivity(self, n: int | None = None) -> tuple[float, float]:
        """(L1, L2) sensitivity of the measured (quantised) strategy under the relation."""
        if n is not None:
            self.strategy(n)  # checks n
        return (self._strategy.sensitivity(self.neighbours, 1), self._strategy.sensitivity(self.neighbours, 2))

    def parameters(self) -> dict:
        # An override (not the base's PARAMS-derived one): the declared strategy is a matrix,
        # not JSON; provenance records its shape and quantisation factor instead.
        return {
            "strategy_shape": [self._strategy.rows, self._strategy.n],
            "quantisation_factor": self._strategy.factor,
            **super().parameters(),
        }

    def strategy(self, n: int) -> MatrixStrategy:
        if n != self._strategy.n:
            raise ParameterError(f"the strategy has {self._strategy.n} columns but the data have {n} bins")
        return self._strategy

    def budget_fractions(self, strategy, epsilon) -> np.ndarray:
        return np.ones(1)

    def error_model(self, n: int, epsilon, *, delta=0.0):
        if check_positive_int(n, "n") > DENSE_COVARIANCE_LIMIT:
            raise ParameterError(f"exact error of a matrix strategy is computed for n <= {DENSE_COVARIANCE_LIMIT}")
        return super().error_model(n, epsilon, delta=delta)


MECHANISMS.add(
    Matrix,
    summary="the matrix mechanism: any full-rank strategy matrix, quantised to integers, with least squares",
    citation=Citation(
        "Li, Hay, Rastogi, Miklau and McGregor",
        "Optimizing Linear Counting Queries Under Differential Privacy",
        "PODS 2010",
    ),
)
