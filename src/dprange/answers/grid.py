"""The release of a k-D mechanism: cell estimates, rectangles and marginals with exact errors.

A :class:`GridRelease` holds the least-squares estimate of every cell of the grid
(:mod:`dprange.mechanisms.grid`) and its exact error model.  Rectangle counts (inclusive bin bounds
on every axis, many at once) and marginals (the other axes summed) come as
:class:`~dprange.answers.types.Answer` objects: values, exact standard errors, and confidence
intervals with the factor of :func:`~dprange.answers.types.one_sided_factor` for the release's noise.
Everything here is post-processing of the noisy measurements.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import numpy as np

from ..errors import ParameterError
from ..measurements import Measurements
from ..workloads.rectangles import check_rectangles
from .describe import Labels, self_description
from .tables import grid_table, save_csv, to_frame
from .types import Answer, one_sided_factor

#: The saved k-D format (``"version"``): 2 adds the self-description (input labels, privacy
#: statement, software); version 1 files still load.
GRID_FORMAT_VERSION = 2


def design_digest(block) -> str | None:
    """The block's :meth:`~dprange.operators.Operator.design_digest` (None for a block without
    one): saved with its values so that loading refuses a different rebuilt design."""
    digest = getattr(block, "design_digest", None)
    return digest() if digest is not None else None


class GridRelease:
    """Private estimates of a k-D histogram (``counts``, shape ``shape``) with exact error bars."""

    def __init__(
        self,
        shape,
        estimate,
        measurements: Measurements,
        *,
        mechanism: str,
        parameters=None,
        domain=None,
        public_marginals=None,
        input_labels: Labels | None = None,
    ):
        self.shape = tuple(int(n) for n in shape)
        self.estimate = estimate
        self.measurements = measurements
        self.mechanism = mechanism
        #: The mechanism's parameters (enough to rebuild its design: :func:`dprange.mechanisms.grid.load_grid_release`).
        self.parameters = dict(parameters or {})
        self.domain = domain
        #: Published marginals the estimate meets exactly: (kept axes, values) pairs
        #: (:func:`dprange.answers.constrained.constrain`); empty without.
        self.public_marginals = [(tuple(a), np.asarray(v, dtype=float)) for a, v in (public_marginals or [])]
        #: Public descriptions of the input (columns, units, file): :class:`~dprange.answers.describe.Labels`.
        self.input_labels = input_labels if input_labels is not None else Labels()
        self.noise = measurements.noise_kind
        self.noise_scales = [m.noise.scale for m in measurements.measurements if m.noise is not None]
        #: None when one row is one person; else the privacy unit's record with the id-level
        #: ``epsilon`` (the measurements' epsilon is the row-level one the design ran at).
        self.privacy_unit: dict | None = None
        #: None, or the private choice made before measuring (the 2-D ``auto-data``): its noisy
        #: features, the mechanism chosen, every private step with its epsilon and ``epsilon``, their
        #: exact sum rounded up (the release's epsilon; the measurements ran at what was left).
        self.selection: dict | None = None

    def with_labels(self, columns=None, units=None, source=None) -> GridRelease:
        """This release described: ``columns`` (one name per axis), ``units`` (one per axis)
        and ``source`` (the input file), saved in its JSON (a copy; the answers do not change)."""
        labelled = copy.copy(self)
        labelled.input_labels = Labels.of(columns, units, source)
        return labelled

    @property
    def epsilon(self) -> float:
        """The release's epsilon: per id with a privacy unit, else per row."""
        if self.privacy_unit is not None:
            return float(self.privacy_unit["epsilon"])
        if self.selection is not None:
            return float(self.selection["epsilon"])
        return self.measurements.epsilon

    @property
    def delta(self) -> float:
        return self.measurements.delta

    @property
    def neighbours(self) -> str:
        return self.measurements.neighbours

    @property
    def labels(self) -> list[list[str]] | None:
        """A label per bin of each axis (:meth:`dprange.Domain.bin_labels`: the categories of a
        categorical axis), or None for a release without a domain."""
        return None if self.domain is None else [d.bin_labels() for d in self.domain.domains]

    @property
    def counts(self) -> np.ndarray:
        """The estimated count of every cell (a k-D float array)."""
        return np.asarray(self.estimate.leaves, dtype=float).reshape(self.shape)

    def _factor(self, alpha: float) -> float:
        return one_sided_factor(alpha, self.noise, self.noise_scales)

    def _check_estimable(self, lows, highs) -> None:
        """A design that does not identify every cell (the Fourier strategy of a lower order)
        refuses the rectangles it cannot estimate without bias (ParameterError)."""
        check = getattr(self.estimate, "check_estimable", None)
        if check is not None:
            check(lows, highs)

    def rectangle(self, lows, highs) -> Answer:
        """Counts of the rectangles lows[r, a] <= i_a <= highs[r, a] (bin indices, inclusive):
        one rectangle as two length-k sequences, or many as two (R, k) arrays."""
        single = np.ndim(lows) == 1 and np.ndim(highs) == 1
        lows, highs = check_rectangles(self.shape, lows, highs)
        self._check_estimable(lows, highs)
        table = self.counts
        for a in range(len(self.shape)):
            table = np.cumsum(table, axis=a)
        table = np.pad(table, [(1, 0)] * len(self.shape))
        value = np.zeros(lows.shape[0])
        for choice in np.ndindex(*(2,) * len(self.shape)):
            index = tuple(highs[:, a] + 1 if c == 0 else lows[:, a] for a, c in enumerate(choice))
            value += (-1) ** sum(choice) * table[index]
        estimate = self.estimate

        def variance():
            return estimate.rectangle_variance(lows, highs)

        if single:
            return Answer(value[0], lambda: variance()[0], scalar=True, factor=self._factor)
        return Answer(value, variance, factor=self._factor)

    def dominance(self, points) -> Answer:
        """Dominance counts (the k-D CDF in bins): the cells i <= point on every axis, for one
        point (length k) or many ((R, k))."""
        points = np.asarray(points, dtype=np.int64)
        return self.rectangle(np.zeros_like(points), points)

    def marginal(self, axes) -> Answer:
        """The marginal over ``axes`` (the others summed): values of shape (n_a for a in axes),
        each with its exact standard error."""
        axes = tuple(int(a) for a in np.atleast_1d(axes))
        k = len(self.shape)
        if not axes or len(set(axes)) != len(axes) or any(a < 0 or a >= k for a in axes):
            raise ParameterError(f"axes must be distinct axis numbers in 0..{k - 1}, got {list(axes)}")
        kept = sorted(axes)
        others = tuple(a for a in range(k) if a not in kept)
        value = self.counts.sum(axis=others) if others else self.counts
        value = np.moveaxis(value, [kept.index(a) for a in axes], range(len(axes)))
        cells = np.indices([self.shape[a] for a in axes]).reshape(len(axes), -1)
        lows = np.zeros((cells.shape[1], k), dtype=np.int64)
        highs = np.tile(np.asarray(self.shape, dtype=np.int64) - 1, (cells.shape[1], 1))
        for position, a in enumerate(axes):
            lows[:, a] = highs[:, a] = cells[position]
        self._check_estimable(lows[:1], highs[:1])
        estimate, out_shape = self.estimate, value.shape

        def variance():
            fast = getattr(estimate, "marginal_variance", None)  # constrained releases: one pass
            if fast is not None:
                return fast(axes, lows, highs).reshape(out_shape)
            return estimate.rectangle_variance(lows, highs).reshape(out_shape)

        return Answer(value, variance, factor=self._factor)

    def to_dict(self) -> dict:
        """Everything the release published: the design (mechanism, parameters, shape, budget,
        relation, public total) and the noisy measurements; estimates and errors are rebuilt
        from them exactly (post-processing)."""
        meas = self.measurements
        return {
            "kind": "grid_release",
            "version": GRID_FORMAT_VERSION,
            "shape": list(self.shape),
            "mechanism": self.mechanism,
            "parameters": self.parameters,
            "epsilon": meas.epsilon,
            "delta": meas.delta,
            "neighbours": meas.neighbours,
            "total": meas.total,
            "seeded": meas.seeded,
            "measurements": [
                {
                    "values": np.asarray(m.values, dtype=float).tolist(),
                    "noise": None if m.noise is None else {"kind": m.noise.kind, "scale": m.noise.scale},
                    **({"design": digest} if (digest := design_digest(m.block)) else {}),
                }
                for m in meas.measurements
            ],
            "domain": None if self.domain is None else self.domain.to_dict(),
            **({} if self.privacy_unit is None else {"privacy_unit": self.privacy_unit}),
            **({} if self.selection is None else {"selection": self.selection}),
            **(
                {"public_marginals": [{"axes": list(a), "values": v.tolist()} for a, v in self.public_marginals]}
                if self.public_marginals
                else {}
            ),
            **self._description(),
        }

    def _description(self) -> dict:
        """Format 2's self-description (:func:`dprange.answers.describe.self_description`)."""
        local = getattr(self.measurements, "source", "central") != "central"
        record = self.measurements
        if self.selection is not None or self.privacy_unit is not None:
            # the statement covers the selection's steps too, and a unit's id-level epsilon
            record = dataclasses.replace(record, epsilon=self.epsilon)
        return self_description(self.input_labels, record, local=local, privacy_unit=self.privacy_unit)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def to_frame(self, table: str = "cells", *, alpha: float = 0.05):
        """The cells as a pandas DataFrame: per axis its bin (and edges), then the count, its
        exact standard error and pointwise interval (:mod:`dprange.answers.tables`)."""
        return to_frame(grid_table(self, table, alpha=alpha))

    def to_pandas(self, table: str = "cells", *, alpha: float = 0.05):
        """:meth:`to_frame` (the name pandas users look for)."""
        return self.to_frame(table, alpha=alpha)

    def to_csv(self, path=None, table: str = "cells", *, alpha: float = 0.05):
        """The table of :meth:`to_frame` as CSV: the text without ``path``, else the path."""
        return save_csv(grid_table(self, table, alpha=alpha), path)

    def __repr__(self) -> str:
        return (
            f"GridRelease(shape={list(self.shape)}, mechanism={self.mechanism!r}, epsilon={self.epsilon}, "
            f"neighbours={self.neighbours!r})"
        )
