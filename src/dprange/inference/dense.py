"""The error model of a dense strategy (the matrix mechanism): exact covariance (A^T A)^-1 and the
range variances it gives, saved and loaded with the release.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ..errors import ParameterError
from ..measurements import LinearMeasurement, Measurements
from ..strategies.matrix import DENSE_COVARIANCE_LIMIT, MatrixStrategy
from .dispatch import design_error_model
from .least_squares import unpack_integers


class DenseErrorModel:
    """The saved form of a matrix release's error model (kind "dense_matrix"): the measured
    integer strategy, its one noise variance and whether the total is public.  :meth:`from_dict`
    rebuilds the estimate's error model (a
    :class:`~dprange.inference.least_squares.DenseGLSEstimate`) exactly."""

    @classmethod
    def from_dict(cls, data: dict, *, adopt_inverse=None):
        """The error model described by ``to_dict`` (least-squares query variances through the
        strategy operator, range variances from the dense covariance).  ``adopt_inverse``, a
        function of the strategy's block, may first give it the (A^T A)^-1 kept elsewhere
        (the strategy cache: :func:`dprange.optimize.cache.adopt_cached_inverse`)."""
        rows, n = (int(v) for v in data["shape"])
        if not 0 < n <= DENSE_COVARIANCE_LIMIT:
            raise ParameterError(f"a saved matrix strategy must have 1 to {DENSE_COVARIANCE_LIMIT} columns, not {n}")
        if "packed" in data:  # a large dense strategy (DenseGLSEstimate.to_dict)
            if not 0 < rows <= 4 * n:
                raise ParameterError(f"a saved dense strategy over {n} bins cannot have {rows} rows")
            strategy = MatrixStrategy(unpack_integers(data["packed"], (rows, n)))
        else:
            strategy = cls._from_triplets(data, rows, n)
        if adopt_inverse is not None:
            adopt_inverse(strategy.block)
        return matrix_estimate_model(strategy, _saved_variance(data), bool(data["known_total"]))

    @staticmethod
    def _from_triplets(data: dict, rows: int, n: int) -> MatrixStrategy:
        """The strategy saved as row, column, value triplets (small or sparse ones)."""
        if not 0 < rows <= len(data["value"]) + 4 * n:
            raise ParameterError(f"a saved matrix strategy with {len(data['value'])} nonzeros cannot have {rows} rows")
        matrix = sp.csc_matrix(
            (
                np.asarray(data["value"], dtype=float),
                (np.asarray(data["row"], dtype=np.int64), np.asarray(data["col"], dtype=np.int64)),
            ),
            shape=(rows, n),
        )
        if not np.all(matrix.data == np.round(matrix.data)):
            raise ParameterError("a saved matrix strategy must have integer entries")
        return MatrixStrategy(matrix if data["sparse"] else np.ascontiguousarray(matrix.toarray()))


def _saved_variance(data: dict) -> float:
    variance = float(data["variance"])
    if not (variance > 0 and math.isfinite(variance)):
        raise ParameterError("the saved noise variance must be positive and finite")
    return variance


def matrix_estimate_model(strategy: MatrixStrategy, variance: float, known_total: bool):
    """The error model a matrix release carries, without data (GLS on the zero design)."""
    zeros = np.zeros(strategy.rows)
    design = Measurements(
        [LinearMeasurement(strategy.block, zeros, variance)],
        strategy.n,
        math.nan,
        total=0.0 if known_total else None,
    )
    return design_error_model(design)
