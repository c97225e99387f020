"""Parametric bootstrap of a release: error bars for estimators without a closed form.

NNLS and L1 estimates (Lee, Wang and Kifer, KDD 2015) are not linear in the noise, so their
standard errors come from the parametric bootstrap (Efron and Tibshirani, "An Introduction to
the Bootstrap", 1993, chapter 6): treat the released estimate x_hat as the truth, re-draw every
block's noise around ``block @ x_hat`` with the same distribution (central: the block's
:class:`~dprange.privacy.noise.NoiseSpec`; local-DP estimates: normal with the row variances), rerun
the same inference, and take the spread of the answers.  Only the public design of the
measurements and the released estimate are used: this is post-processing.  For GLS it
reproduces the exact standard errors up to Monte-Carlo error (a test checks it).
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..inference.dispatch import infer
from ..inference.tree import flat_ranges
from ..measurements import Measurements
from ..operators.structured import block_answers
from ..privacy.samplers import resolve_rng


def check_reps(reps) -> int:
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or not 2 <= reps <= 10**6:
        raise ParameterError(f"reps must be an integer from 2 to 10^6, got {reps!r}")
    return int(reps)


def redraw(measurements: Measurements, leaves, source) -> Measurements:
    """The measurements' design measured again on the histogram ``leaves`` with fresh noise."""
    leaves = np.asarray(leaves, dtype=float)
    if leaves.shape != (measurements.n,):
        raise ParameterError(f"expected an estimate of {measurements.n} bins, got shape {leaves.shape}")
    exact = block_answers(measurements.blocks, leaves)
    values = []
    for m, answer in zip(measurements.measurements, exact):
        if m.noise is not None:
            values.append(answer + m.noise.sample(np.shape(answer), source))
        else:
            sd = np.sqrt(m.row_variances())
            values.append(answer + sd * np.asarray(source.standard_normal(np.shape(answer)), dtype=float))
    total = None if measurements.total is None else float(np.sum(leaves))
    return measurements.with_values(values, total=total)


def resample_leaves(measurements: Measurements, leaves, method: str, source, options=None) -> np.ndarray:
    """One bootstrap replicate: the estimate of x from re-drawn measurements."""
    return infer(redraw(measurements, leaves, source), method, options).leaves


def bootstrap(
    measurements: Measurements, leaves, method: str, lo, hi, *, reps: int = 200, rng=None, options=None
) -> np.ndarray:
    """Parametric-bootstrap standard errors of the ranges lo..hi (inclusive bin indices) of
    the estimate ``leaves`` obtained by ``method`` from ``measurements`` (module doc).

    O(reps x inference cost).  ``rng``: None (os.urandom), a seed or a numpy Generator.
    """
    reps = check_reps(reps)
    shape, left, right = flat_ranges(lo, hi, measurements.n)
    source = resolve_rng(rng)
    answers = np.empty((reps, left.size))
    for r in range(reps):
        sums = np.concatenate([[0.0], np.cumsum(resample_leaves(measurements, leaves, method, source, options))])
        answers[r] = sums[right + 1] - sums[left]
    return answers.std(axis=0, ddof=1).reshape(shape)
