"""k-D releases made consistent with published marginals.

Any k-D release whose estimate can apply its covariance (the Kronecker and Privelet designs
of :mod:`dprange.mechanisms.grid`, the Fourier design of :mod:`dprange.mechanisms.fourier`) takes published
marginals as equality constraints: the constrained GLS estimate is
x - S C^T (C S C^T)^+ (C x - d) with S = Cov(x), and its covariance
S - S C^T (C S C^T)^+ C S gives every rectangle and marginal cell its exact variance (Lee,
Wang and Kifer, "Maximum Likelihood Postprocessing for Differential Privacy under Consistency
Constraints", KDD 2015, section 5, for tables; here with the design's own covariance).  The
rows of C are Kronecker products (e_i on the kept axes, 1 on the others), so for Kronecker
designs C S C^T and the marginals of S C^T come from per-axis products without a pass over
the cells.  Post-processing of the release and of public values.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.linalg

from ..errors import ParameterError
from ..inference.marginal_constraints import MarginalConstraints, marginal_matrix, published_marginals
from ..workloads.rectangles import Rectangles, check_rectangles
from .grid import GridRelease


def marginal_row_factors(shape, axes_list) -> list[list[np.ndarray]]:
    """The rows of :class:`MarginalConstraints`' C as Kronecker products: per published
    marginal (kept axes, sorted) and per cell of it (C order), e_i on the kept axes and 1 on
    the others."""
    out = []
    for axes in axes_list:
        for cell in itertools.product(*(range(shape[a]) for a in axes)):
            index = dict(zip(axes, cell))
            out.append([np.eye(n)[index[a]] if a in index else np.ones(n) for a, n in enumerate(shape)])
    return out


class ConstrainedEstimate:
    """A k-D least-squares estimate made consistent with published marginals (module doc):
    the GLS estimate under C x = d, with exact variances.  ``base`` must offer
    ``covariance_apply`` (cells x m -> cells x m), ``rectangle_variance`` and ``query_variance``."""

    def __init__(self, base, constraints: MarginalConstraints):
        if not hasattr(base, "covariance_apply"):
            raise ParameterError(
                "published marginals need a design whose covariance can be applied: "
                "use mechanism='kronecker', 'privelet' or 'fourier'"
            )
        self.base = base
        self.grid = tuple(constraints.shape)
        self.constraints = constraints
        C = constraints.matrix
        # C S: k x cells (rows contiguous); _cov_ct is its transpose S C^T (a view)
        self._row_factors = None
        self._cs: np.ndarray | None = None
        if hasattr(base, "covariance_kron_gram"):  # marginal rows are Kronecker products: by axes
            self._row_factors = marginal_row_factors(constraints.shape, constraints.axes)
            middle = base.covariance_kron_gram(self._row_factors)  # C S C^T without a pass over the cells
        else:
            middle = np.asarray(C @ self._cov_ct)
        self._middle = scipy.linalg.pinvh(middle)
        x = np.asarray(base.leaves, dtype=float)
        step = C.T @ (self._middle @ (C @ x - constraints.values))
        self.leaves = x - np.asarray(base.covariance_apply(step)).ravel()
        miss = np.abs(C @ self.leaves - constraints.values)
        if miss.size and miss.max() > 1e-6 * max(1.0, float(np.abs(constraints.values).max())):
            raise ParameterError(
                "the published marginals disagree with what the release fixes exactly (its public total, or "
                "marginals its design does not measure); publish consistent values or use mechanism='kronecker'"
            )

    @property
    def _cov_ct(self) -> np.ndarray:
        """S C^T (cells x k), built on first use (rectangles, dense queries): C S row by row."""
        if self._cs is None:
            C = self.constraints.matrix
            if self._row_factors is not None:
                self._cs = self.base.covariance_kron_rows(self._row_factors)
            else:
                self._cs = np.empty(C.shape)
                for start in range(0, C.shape[0], 32):  # 32 rows at a time
                    chunk = C[start : start + 32].toarray().T
                    self._cs[start : start + chunk.shape[1]] = self.base.covariance_apply(chunk).T  # a few passes
        return self._cs.T

    def check_estimable(self, lows, highs) -> None:
        check = getattr(self.base, "check_estimable", None)
        if check is not None:
            check(lows, highs)

    def _reduction(self, cross: np.ndarray) -> np.ndarray:
        """(q^T S C^T) (C S C^T)^+ (C S q) for every row of ``cross`` = q^T S C^T."""
        return np.einsum("rk,kl,rl->r", cross, self._middle, cross)

    def rectangle_variance(self, lows, highs) -> np.ndarray:
        """Exact variance of every rectangle's constrained estimate ((R, k) inclusive bounds)."""
        lows, highs = check_rectangles(self.grid, lows, highs)
        out = np.asarray(self.base.rectangle_variance(lows, highs), dtype=float).copy()
        table = self._cov_ct.reshape(self.grid + (-1,))
        for start in range(0, lows.shape[0], 1 << 14):  # (R, k) temporaries in chunks
            sl = slice(start, start + (1 << 14))
            cross = Rectangles(self.grid, lows[sl], highs[sl])._apply(table.reshape(-1, table.shape[-1]))
            out[sl] -= self._reduction(cross)
        return np.maximum(out, 0.0)

    def marginal_variance(self, axes, lows, highs) -> np.ndarray:
        """Exact variance of every cell of the marginal over ``axes`` (cells in C order of the
        axes as given; ``lows`` / ``highs`` the same cells as rectangles): the cross terms are
        marginal sums of S C^T, one pass over it instead of a summed-area table."""
        out = np.asarray(self.base.rectangle_variance(lows, highs), dtype=float).copy()
        kept = sorted(axes)
        if self._row_factors is not None:  # by axes: the marginal of S C^T without its cells
            summed = self.base.covariance_kron_rows(self._row_factors, kept=kept).T
        else:
            summed = np.asarray(marginal_matrix(self.grid, kept) @ self._cov_ct)  # cost O(cells k), sparse
        summed = summed.reshape(tuple(self.grid[a] for a in kept) + (-1,))
        summed = np.moveaxis(summed, [kept.index(a) for a in axes], range(len(axes)))
        out -= self._reduction(summed.reshape(-1, summed.shape[-1]))
        return np.maximum(out, 0.0)

    def query_variance(self, weights) -> np.ndarray:
        q = np.atleast_2d(np.asarray(weights, dtype=float))
        base = np.atleast_1d(self.base.query_variance(q))
        out = np.maximum(base - self._reduction(q @ self._cov_ct), 0.0)
        return out if np.ndim(weights) > 1 else out[0]

    def covariance_apply(self, V) -> np.ndarray:
        V = np.asarray(V, dtype=float).reshape(len(self.leaves), -1)
        return self.base.covariance_apply(V) - self._cov_ct @ (self._middle @ (self._cov_ct.T @ V))


def constrain(release, public_marginals):
    """The k-D ``release`` (a :class:`~dprange.answers.grid.GridRelease`) made consistent with
    ``public_marginals`` ({kept axes: published values}, as in :func:`release_table`): a
    GridRelease whose rectangles, marginals and dominance counts meet them, with exact
    standard errors (published marginals: 0).  Post-processing of the release and of
    public values; the values must agree with the release's public total, if any."""
    axes, published = published_marginals(public_marginals, release.shape)
    total = release.measurements.total
    if total is not None:
        for a, v in zip(axes, published):
            if abs(float(np.sum(v)) - total) > 1e-9 * max(1.0, total):
                raise ParameterError(
                    f"the published marginal over axes {a} sums to {float(np.sum(v)):g}, but the release's public "
                    f"total (replace neighbours) is {total:g}; publish marginals of the same records"
                )
        if () not in axes:
            axes, published = [*axes, ()], [*published, np.asarray(float(total))]
    constraints = MarginalConstraints.build(release.shape, axes, published)
    estimate = ConstrainedEstimate(release.estimate, constraints) if axes else release.estimate
    saved = [(a, np.asarray(v, dtype=float)) for a, v in zip(axes, published)]
    return GridRelease(
        release.shape,
        estimate,
        release.measurements,
        mechanism=release.mechanism,
        parameters=release.parameters,
        domain=release.domain,
        public_marginals=saved,
        input_labels=release.input_labels,
    )
