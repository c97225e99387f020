"""Measurements: the noisy answers of a strategy, with everything inference needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse.linalg import LinearOperator

from .noise import NoiseSpec


@dataclass
class Measurements:
    """Noisy answers to a strategy's queries, grouped by level.

    ``values[k]`` and ``noise[k]`` are None for a level that is not measured.  ``total`` is
    the public number of records (replace neighbours) or None.  Inference is post-processing
    of these: it never touches the private data.
    """

    strategy: Any  # TreeStrategy, HaarStrategy or MatrixStrategy
    values: list
    noise: list
    epsilon: float
    delta: float
    neighbours: str
    total: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def variances(self) -> list:
        """Exact noise variance of every level (None where unmeasured)."""
        return [None if spec is None else spec.variance for spec in self.noise]

    @property
    def noise_kind(self) -> str | None:
        kinds = {spec.kind for spec in self.noise if isinstance(spec, NoiseSpec)}
        return kinds.pop() if len(kinds) == 1 else None

    def stacked(self) -> tuple[np.ndarray, np.ndarray]:
        """All measured values and their per-row variances, levels concatenated top down."""
        ys, vs = [], []
        for y, spec in zip(self.values, self.noise):
            if y is None:
                continue
            ys.append(np.asarray(y, dtype=float))
            vs.append(np.full(np.size(y), spec.variance))
        return np.concatenate(ys), np.concatenate(vs)

    def operator(self) -> LinearOperator:
        """The measured rows as a LinearOperator (same row order as :meth:`stacked`)."""
        return self.strategy.operator()
