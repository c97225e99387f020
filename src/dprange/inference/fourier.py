"""Least squares for the Fourier strategy on marginals (Barak et al., PODS 2007): the estimate of
every marginal the measured coefficients determine, with exact variances.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..operators.dense import Explicit
from ..operators.structured import Kron
from ..strategies.fourier import axis_frame, axis_mu, frame_block
from ..workloads.rectangles import check_rectangles


class FourierEstimate:
    """The least-squares estimate of the Fourier measurements (module doc) with exact
    variances of every estimable query."""

    def __init__(self, shape, order: int, subsets, values, variances, total=None):
        self.grid = tuple(shape)
        self.order = int(order)
        self.subsets = list(subsets)
        self.variances = [float(v) for v in variances]
        self.known_total = total is not None
        cells = math.prod(self.grid)
        leaves = np.full(cells, float(total) / cells if total is not None else 0.0)
        for T, y in zip(self.subsets, values):
            leaves += self._pinv(T).matvec(np.asarray(y, dtype=float))  # cost O(cells) per block
        self.leaves = leaves

    def _pinv(self, T) -> Kron:
        """F_T^+ = (x)_{a in T} C_a^T / mu_a (x) (x)_{a not in T} 1 / n_a."""
        factors = [
            Explicit(axis_frame(n).T / axis_mu(n)) if a in T else Explicit(np.full((n, 1), 1.0 / n))
            for a, n in enumerate(self.grid)
        ]
        return Kron(factors)

    def _restricted_axes(self, lows, highs) -> np.ndarray:
        sides = np.asarray(self.grid)
        return ((lows > 0) | (highs < sides - 1)) & (sides >= 2)

    def check_estimable(self, lows, highs) -> None:
        """ParameterError unless every rectangle is restricted on at most ``order`` axes."""
        lows, highs = check_rectangles(self.grid, lows, highs)
        restricted = self._restricted_axes(lows, highs).sum(axis=1)
        if restricted.size and restricted.max() > self.order:
            raise ParameterError(
                f"this Fourier release answers marginals of up to {self.order} axes; a rectangle restricted on "
                f"{int(restricted.max())} axes is not estimable from it (release with order={int(restricted.max())})"
            )

    def _axis_factors(self, lengths: np.ndarray, a: int) -> tuple[np.ndarray, np.ndarray]:
        """(in T, not in T) factors of the variance for ranges of these lengths on axis a."""
        n = self.grid[a]
        inside = lengths * (n - lengths) / (n * axis_mu(n)) if n >= 2 else np.zeros(lengths.shape)
        return inside, (lengths / n) ** 2

    def rectangle_variance(self, lows, highs) -> np.ndarray:
        """Exact variance of every rectangle's estimate ((R, k) inclusive bounds), vectorised."""
        lows, highs = check_rectangles(self.grid, lows, highs)
        self.check_estimable(lows, highs)
        factors = [self._axis_factors((highs[:, a] - lows[:, a] + 1).astype(float), a) for a in range(len(self.grid))]
        out = np.zeros(lows.shape[0])
        for T, v in zip(self.subsets, self.variances):
            term = np.full(lows.shape[0], v)
            for a, (inside, outside) in enumerate(factors):
                term *= inside if a in T else outside  # cost O(R) per axis and block
            out += term
        return out

    def mean_variance(self, families) -> float:
        """The exact mean variance over the product of per-axis range families (means of
        products of independent per-axis factors multiply)."""
        restricted = 0
        means = []
        for a, (lo, hi) in enumerate(families):
            lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
            restricted += bool(self.grid[a] >= 2 and np.any((lo > 0) | (hi < self.grid[a] - 1)))
            inside, outside = self._axis_factors((hi - lo + 1).astype(float), a)
            means.append((float(inside.mean()), float(outside.mean())))
        if restricted > self.order:
            raise ParameterError(
                f"the Fourier strategy of order {self.order} answers marginals of up to {self.order} axes only"
            )
        return sum(
            v * math.prod(m[0] if a in T else m[1] for a, m in enumerate(means))
            for T, v in zip(self.subsets, self.variances)
        )

    def covariance_apply(self, V) -> np.ndarray:
        """Cov(x) V for the columns of V (cells x m): sum_T v_T F_T^+ F_T^+T V."""
        V = np.asarray(V, dtype=float).reshape(len(self.leaves), -1)
        out = np.zeros(V.shape)
        for T, v in zip(self.subsets, self.variances):
            pinv = self._pinv(T)
            out += v * pinv.matmat(pinv.rmatmat(V))  # cost O(cells m) per block
        return out

    def query_variance(self, weights) -> np.ndarray:
        """Exact variance of q . x for every row q of ``weights`` (cells in C order);
        ParameterError for a query with a component outside the measured subspaces."""
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        cells = math.prod(self.grid)
        out = np.zeros(q.shape[0])
        explained = np.repeat(q.sum(axis=1, keepdims=True) / cells, cells, axis=1)  # the total's component
        for T, v in zip(self.subsets, self.variances):
            pinv = self._pinv(T)
            out += v * np.sum(pinv.rmatmat(q.T) ** 2, axis=0)  # ||F_T^+T q||^2
            if T:
                explained += pinv.matmat(frame_block(self.grid, T).matmat(q.T)).T  # P_T q
        if np.any(np.abs(explained - q) > 1e-9 * max(1.0, float(np.abs(q).max(initial=0.0)))):
            raise ParameterError(
                f"a query has a component outside the Fourier subspaces of order {self.order}: it is not estimable"
            )
        return out if np.ndim(weights) > 1 else out[0]
