"""Measurements: noisy answers of operator blocks, with everything inference needs.

A :class:`LinearMeasurement` is one block of linear queries (an
:class:`~dprange.operators.Operator`), its noisy answers and their exact noise variance; a
:class:`Measurements` is the list of them plus provenance (epsilon, delta, neighbouring
relation, public total, whether the noise was seeded, central or local).  Inference
(:func:`dprange.inference.infer`) is post-processing of these: it never touches the data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .errors import ParameterError
from .operators.base import Operator
from .operators.structured import HaarLevel, TreeLevel, VStack
from .privacy.noise import NoiseSpec


@dataclass(frozen=True)
class LinearMeasurement:
    """One measured block: ``values`` = ``block`` x + noise of variance ``variance`` per row.

    ``noise`` is the central sampler (its ``sample`` re-draws the noise for the bootstrap);
    None for estimates whose noise is not drawn by dprange (local-DP frequency estimates,
    whose variance is then given per row or as a scalar).
    """

    block: Operator
    values: np.ndarray
    variance: float | np.ndarray
    noise: NoiseSpec | None = None

    def row_variances(self) -> np.ndarray:
        """The noise variance of every row (length m)."""
        return np.broadcast_to(np.asarray(self.variance, dtype=float), (self.block.shape[0],))

    def row_scales(self) -> np.ndarray:
        """The noise scale of every row: the sampler's scale (Laplace b, Gaussian sigma), else
        the standard deviation.  ADMM weights rows by their inverse (Laplace likelihood)."""
        if self.noise is not None:
            return np.full(self.block.shape[0], float(self.noise.scale))
        return np.sqrt(self.row_variances())

    def level_index(self) -> int | None:
        """The depth (tree) or level (Haar) this block measures, None for other blocks."""
        if isinstance(self.block, TreeLevel):
            return self.block.depth
        if isinstance(self.block, HaarLevel):
            return self.block.level
        return None


@dataclass
class Measurements:
    """Noisy answers of a strategy's blocks, with provenance.

    ``total`` is the public number of records (replace neighbours) or None.  ``source`` is
    "central" or "local:<oracle>".  Every block has ``n`` columns.
    """

    measurements: list[LinearMeasurement]
    n: int
    epsilon: float
    delta: float = 0.0
    neighbours: str = "add_remove"
    total: float | None = None
    seeded: bool = False
    source: str = "central"

    def __post_init__(self):
        for m in self.measurements:
            if m.block.shape[1] != self.n:
                raise ParameterError(f"every measured block must have {self.n} columns, got {m.block.shape[1]}")
            if np.shape(m.values) != (m.block.shape[0],):
                raise ParameterError(
                    f"a block of {m.block.shape[0]} rows needs as many values, got {np.shape(m.values)}"
                )

    @property
    def blocks(self) -> list[Operator]:
        return [m.block for m in self.measurements]

    @property
    def noise_kind(self) -> str | None:
        """The one noise kind of every block, else None (mixed or local)."""
        kinds = {m.noise.kind for m in self.measurements if m.noise is not None}
        has_all = all(m.noise is not None for m in self.measurements)
        return kinds.pop() if len(kinds) == 1 and has_all else None

    def stacked(self) -> tuple[np.ndarray, np.ndarray]:
        """All measured values and their per-row variances, blocks concatenated in order."""
        if not self.measurements:
            return np.zeros(0), np.zeros(0)
        ys = [np.asarray(m.values, dtype=float) for m in self.measurements]
        vs = [m.row_variances() for m in self.measurements]
        return np.concatenate(ys), np.concatenate(vs)

    def operator(self) -> VStack:
        """The measured rows as one operator (same row order as :meth:`stacked`)."""
        return VStack(self.blocks)

    def with_values(self, values, *, total: float | None = None) -> Measurements:
        """The same design (blocks, noise, provenance) with new values (the bootstrap); the
        public total is replaced when ``total`` is given."""
        values = list(values)
        if len(values) != len(self.measurements):
            raise ParameterError(f"expected {len(self.measurements)} arrays of values, got {len(values)}")
        new = [replace(m, values=np.asarray(v)) for m, v in zip(self.measurements, values)]
        return replace(self, measurements=new, total=self.total if total is None else float(total))

    # -- by level: the view of tree and wavelet releases --------------------------------
    def _level_count(self) -> int:
        blocks = self.blocks
        if blocks and all(isinstance(b, TreeLevel) for b in blocks):
            return blocks[0].tree.depth + 1
        if blocks and all(isinstance(b, HaarLevel) for b in blocks):
            return blocks[0].haar.height + 1
        return len(blocks)

    def _by_level(self, field: str) -> list:
        out: list = [None] * self._level_count()
        for position, m in enumerate(self.measurements):
            index = m.level_index()
            out[position if index is None else index] = getattr(m, field)
        return out

    @property
    def values(self) -> list:
        """Compatibility view: noisy values by tree depth / Haar level (None where not
        measured); for other strategies one entry per block."""
        return self._by_level("values")

    @property
    def noise(self) -> list:
        """Compatibility view: the NoiseSpec by tree depth / Haar level (see :attr:`values`)."""
        return self._by_level("noise")

    @property
    def variances(self) -> list:
        """Noise variance by tree depth / Haar level (see :attr:`values`)."""
        return self._by_level("variance")
