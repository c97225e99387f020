"""The release of a data-aware mechanism: the estimate expanded from its buckets, with noise-only
error bars where they exist and no claim of exact ones (the private choices bias the estimate).
"""

from __future__ import annotations

import numpy as np

from ..answers.bootstrap import check_reps, resample_leaves
from ..answers.release import Release
from ..errors import ParameterError
from ..inference.tree import flat_ranges
from ..privacy.samplers import resolve_rng


class ExpandedErrorModel:
    """Noise-only variances of answers on n bins of an estimate expanded uniformly from a
    reduced (bucket) estimate with error model ``reduced``: an answer's weights on the n
    bins become weights on the buckets (sum of the weights inside each, over its size)."""

    def __init__(self, reduced, starts: np.ndarray, n: int):
        self.reduced = reduced
        self.starts = np.asarray(starts, dtype=np.int64)
        self.ends = np.append(self.starts[1:], n) - 1
        self.sizes = self.ends - self.starts + 1
        self.n = n
        self.bucket_of = np.repeat(np.arange(self.starts.size), self.sizes)

    def bucket_weights(self, lo, hi) -> np.ndarray:
        lo = np.atleast_1d(lo)[:, None]
        hi = np.atleast_1d(hi)[:, None]
        overlap = np.minimum(hi, self.ends) - np.maximum(lo, self.starts) + 1
        return np.clip(overlap, 0, None) / self.sizes

    def range_variance(self, lo, hi) -> np.ndarray:
        shape, left, right = flat_ranges(lo, hi, self.n)
        if left.size == 0:
            return np.zeros(shape)
        variances = self.reduced.query_variance(self.bucket_weights(left, right))
        return np.asarray(variances, dtype=float).reshape(shape)

    def query_variance(self, weights) -> np.ndarray:
        w = np.atleast_2d(np.asarray(weights, dtype=float))
        reduced = np.zeros((w.shape[0], self.starts.size))
        np.add.at(reduced.T, self.bucket_of, w.T)
        out = np.asarray(self.reduced.query_variance(reduced / self.sizes), dtype=float)
        return out if np.ndim(weights) > 1 else out[0]


class UnknownErrorModel:
    """The error model of an estimate with no closed-form standard error: NaN everywhere."""

    def __init__(self, n: int):
        self.n = n

    def range_variance(self, lo, hi) -> np.ndarray:
        shape, _, _ = flat_ranges(lo, hi, self.n)
        return np.full(shape, np.nan)

    def query_variance(self, weights) -> np.ndarray:
        w = np.atleast_2d(np.asarray(weights, dtype=float))
        out = np.full(w.shape[0], np.nan)
        return out if np.ndim(weights) > 1 else out[0]


class DataAwareRelease(Release):
    """A release from a data-aware mechanism: ``exact_error_bars`` is False (its bias is
    data-dependent), so its answers' standard errors and intervals are NaN, as for NNLS / L1:
    nothing claims a coverage it does not have.  The noise-only standard error (given the
    private choices, excluding the bias) has its own name, :meth:`noise_only_stderr`, from
    ``noise_only_error_model`` (None for MWEM); :meth:`bootstrap` re-runs only public
    post-processing."""

    def __init__(self, estimate, provenance, *, domain=None, noise_only_error_model=None, reduced=None):
        super().__init__(estimate, UnknownErrorModel(np.size(estimate)), provenance, domain=domain)
        self.noise_only_error_model = noise_only_error_model
        self._reduced = reduced  # (measurements, inference, starts) for DAWA, None for MWEM

    def noise_only_stderr(self, lo, hi) -> np.ndarray:
        """Standard error of the ranges lo..hi due to the measurement noise alone, given the
        private choices (the partition); excludes the data-dependent bias.  NaN for MWEM."""
        lo, hi = self._check_ranges(lo, hi)
        model = self.noise_only_error_model or self.error_model
        return np.sqrt(model.range_variance(lo, hi))

    def bootstrap(self, lo, hi, *, reps: int = 200, rng=None) -> np.ndarray:
        """Parametric bootstrap of the noise-only error: re-draw the reduced measurements'
        noise around the released bucket totals, rerun the reduced inference, expand.  The
        private choices are kept (re-running them would read the data)."""
        if self._reduced is None:
            raise ParameterError(
                "this data-aware release has no public post-processing to re-run (MWEM's updates "
                "follow data-dependent selections); use a DAWA or a data-independent mechanism for error bars"
            )
        reps = check_reps(reps)
        lo, hi = self._check_ranges(lo, hi)
        measurements, method, starts = self._reduced
        sizes = np.append(starts[1:], self.n) - starts
        bucket_totals = np.add.reduceat(self.estimate, starts)
        shape, left, right = flat_ranges(lo, hi, self.n)
        source = resolve_rng(rng)
        answers = np.empty((reps, left.size))
        for r in range(reps):
            reduced = resample_leaves(measurements, bucket_totals, method, source)
            sums = np.concatenate([[0.0], np.cumsum(np.repeat(reduced / sizes, sizes))])
            answers[r] = sums[right + 1] - sums[left]
        return answers.std(axis=0, ddof=1).reshape(shape)
