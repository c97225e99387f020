"""``auto-data`` on a 2-D grid: choose among the data-independent ``auto`` (the least exact
expected error, :func:`dprange.analysis.grid.select_grid`) and the registered 2-D data-aware
mechanisms (``agrid``, ``ugrid``, ``dawa_hilbert``, ``kd_tree``, ``hybrid_tree``,
``auto_nonnegative`` and ``auto_support``, ``auto`` refitted over non-negative grids, the second
held at zero where its least squares finds no records, ``auto_pruned``, the first set to zero
there, and ``dawa_pruned``, DAWA with the buckets that do not stand out of its noise set to
zero) from private features of the data (the choice ``auto`` released, by default, as least
squares moved toward its non-negative refit: ``auto_toward_nonnegative``), in the spirit of
Pythia (Kotsogiannis, Machanavajjhala, Hay and Miklau, "Pythia: Data Dependent Differentially
Private Algorithm Selection", SIGMOD 2017).

Features.  Six features (:class:`GridFeatures`: the 1-D auto-data's steps with a count of
non-empty cells where the 1-D choice prices merges, a measure of how the mass spreads over
neighbouring cells, one of how much of it lies on the grid's bounds and one of how much lies
near the lower bounds of both attributes): a declared share
``feature_share`` of epsilon buys, each as a recorded private step with an equal part of the
share (discrete Laplace, sensitivity 1 under both relations, since every record lies in exactly
one cell):

* ``total``: the noisy number of records N (free under replace, where N is public);
* ``nonempty``: the noisy number of non-empty cells (a record added or removed changes it by at
  most 1; a moved record can empty one cell and fill another: -1 + 1);
* ``top``: the noisy number of records in the 16 heaviest cells (``GridFeatures.HEAVY_CELLS``;
  a maximum over cell sets of sums of counts: +-1 for a record added, removed or moved);
* ``offpeak``: the noisy number of records outside the heaviest cell of their 2 x 2 block
  (:func:`offpeak_mass`): near 0 where records lie on isolated cells (scattered point masses, a
  lattice of heaped values), which a grid that spreads its counts uniformly within a cell
  misplaces, and up to 3/4 of N where neighbouring cells are alike (smooth or clustered mass);
* ``bound``: the noisy number of records in the grid's first or last row or column
  (:func:`bound_mass`): near N where one attribute or both are zero-inflated or clamped to the
  domain's ends (ADULT-2D and MDSALARY-OVERT in DPBench), which few rectangles of a random or sized
  workload reach and a Hilbert-ordered partition cuts into distant pieces, and about 4 / side of
  N where the records lie inside;
* ``corner``: the noisy number of records in the grid's lower corner block, the first eighth of
  its rows and of its columns (:func:`corner_mass`): most of N where both attributes are heaped
  at their lower bounds (zeros in both: ADULT-2D's capital gain and loss), which an adaptive
  grid isolates in one fine-cut coarse cell that every prefix rectangle holds whole, and little
  where a heap runs along a whole row or column, which its coarse cells cut across.

The choice is post-processing of the noisy features, the public shape, the epsilon left and one
public property of the release's workload, the mean boundary of its rectangles inside the grid
(:func:`workload_boundary`: a data-aware partition's error grows with the boundary its buckets
must be cut along, faster than ``auto``'s):
a selector trained on public data only (:class:`GridSelector` on GRID_FEATURES, shipped as
``auto_grid_selector.json`` beside this module, versioned; the DPBench 2-D shapes and synthetic
shapes, retrained and validated leave-one-shape-out by ``benchmarks/train_auto_grid.py``;
figures in docs/data-aware.md).  The data-independent branch is the least exact expected error
on the release's workload (``workload``, ``order``: ``release_grid`` passes its own), as
``auto`` would choose it.  The chosen mechanism runs with the rest of epsilon and its own
steps are recorded after the features' (a data-aware release's provenance; an exact release's
``GridRelease.selection``).  A constant selector (one leaf) buys no features: its choice runs
with the whole epsilon and ``features`` is None.

Error bars.  The features' noise is independent of the measurement noise, so given the choice
the data-independent branch keeps its exact error bars (a :class:`~dprange.answers.grid.GridRelease`);
a data-aware branch has that mechanism's noise-only ones.
"""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction
from functools import lru_cache
from importlib import resources

import numpy as np

from .._params import OneOf, Param
from .._validation import fit_last, float_at_least
from ..analysis.grid import check_grid_workload, check_order, product_parts
from ..answers.grid import GridRelease
from ..errors import ParameterError
from ..mechanisms.base import GridMechanism, Mechanism, check_counts
from ..privacy.samplers import resolve_rng
from ..registry import GRID_MECHANISMS, Citation
from ..strategies.calibration import is_seeded
from ..workloads.rectangles import Rectangles, check_shape
from .auto_data import AutoData
from .grid import DataAwareGridMechanism
from .nonnegative_grid import ORDER_PARAM, WORKLOAD_PARAM, AutoTowardNonnegative, auto_design, saved_workload
from .selector import Selector, top_mass
from .steps import SHARE, spent, step

#: The names the 2-D selector may choose ("auto": the data-independent choice at the epsilon left).
GRID_CANDIDATES = (
    "auto",
    "agrid",
    "ugrid",
    "dawa_hilbert",
    "kd_tree",
    "hybrid_tree",
    "agrid_fine",
    "auto_nonnegative",
    "auto_support",
    "auto_pruned",
    "dawa_pruned",
)

#: Candidates built for the release's workload, as ``auto`` is (the others ignore it).
WORKLOAD_CANDIDATES = ("auto_nonnegative", "auto_support", "auto_pruned")

#: Parameters a candidate runs with, where not its defaults: the selector was trained on
#: ``dawa_hilbert`` at DAWA's fixed partition share (its default now buys a noisy total of its
#: own, which auto-data's features already are; the choice runs it where that share is right),
#: and on ``dawa_pruned`` at a partition share of 0.4, the low-signal branch's: at 10^3 records
#: and epsilon 0.1 it isolates a heap that 0.25 merges into wide buckets (docs/data-aware.md,
#: "dawa_pruned").
CANDIDATE_PARAMETERS: dict[str, dict[str, object]] = {
    "dawa_hilbert": {"ratio": 0.25},
    "dawa_pruned": {"ratio": 0.4},
    "agrid_fine": {"c2": 1.25},
}

#: Candidates that run a registered mechanism under a name of their own, with the parameters
#: above: ``agrid_fine`` is AGrid with a second level twice as fine per axis (c2 = 1.25 for the
#: paper's 5), which wins where mass is scattered thinly over a large grid and loses where it is
#: dense ("AGrid's second-level constant" in docs/data-aware.md): a choice for the selector, not
#: a constant.
CANDIDATE_MECHANISMS = {"agrid_fine": "agrid"}

#: The 2-D selector's inputs, in order (post-processing of the noisy features and public values).
#: The signal per cell comes first: whether a data-aware grid beats ``auto`` turns mostly on N
#: epsilon against the number of cells, a ratio an axis-aligned tree cannot form from the two.
GRID_FEATURES = (
    "log_signal_per_cell",  # log10 of noisy N times the epsilon left, over the number of cells
    "log_signal_per_occupied",  # log10 of noisy N epsilon over the noisy number of non-empty cells
    "log_sparsity",  # log10 of the noisy share of non-empty cells
    "concentration",  # noisy mass of the 16 heaviest cells over noisy N, in [0, 1]
    "log_cells",  # log2 of the number of cells
    "log_epsilon",  # log10 of the epsilon left
    "offpeak_share",  # noisy records outside the heaviest cell of their 2 x 2 block over noisy N, in [0, 1]
    "workload_boundary",  # the workload's mean boundary inside the grid, in sides (public: workload_boundary)
    "bound_share",  # noisy records in the grid's first or last row or column over noisy N, in [0, 1]
    "log_signal",  # log10 of noisy N times the epsilon left (how far the noisy shares can be trusted)
    "corner_share",  # noisy records in the first eighth of both the rows and the columns over noisy N, in [0, 1]
)

#: Version of the 2-D selector file's layout and its features' definitions (6: the corner share
#: added, each feature a sixth of the share; 5: the bound share and the signal added; 4: the
#: workload's boundary added; 3: the off-peak share added; 2: the concentration sums the 16
#: heaviest cells; 1 summed the cells / 64 heaviest).
GRID_FORMAT = 6

#: The parts of ``feature_share`` each 2-D feature gets, in the order of their private steps
#: (equal; ``total`` is skipped under replace, its part going to the others).
GRID_FEATURE_WEIGHTS = {"total": 1, "nonempty": 1, "top": 1, "offpeak": 1, "bound": 1, "corner": 1}

GRID_SELECTOR_FILE = "auto_grid_selector.json"


def offpeak_mass(counts) -> int:
    """The number of records outside the heaviest cell of their 2 x 2 block: sum over the blocks
    of (block total - its largest count), the grid cut into 2 x 2 blocks from the origin (an odd
    last row or column in blocks of its own, as if padded with empty cells).

    One record added changes its block's total by 1 and its largest count by 0 or 1, so the sum
    by 0 or +1; removed, by 0 or -1; moved, by a removal and an addition: at most 1 either way.
    Raises ParameterError unless ``counts`` is a 2-D grid of non-negative whole numbers."""
    return _offpeak_mass(_checked_grid(counts, "the off-peak mass needs"))


def _checked_grid(counts, needs: str) -> np.ndarray:
    """``counts`` as a checked 2-D int64 grid; otherwise ParameterError, its message starting with
    ``needs`` (e.g. "the bound mass needs")."""
    x = np.asarray(counts)
    if x.ndim != 2:
        raise ParameterError(f"{needs} a 2-D grid of counts, not shape {x.shape}")
    return check_counts(x.ravel()).reshape(x.shape)


def _offpeak_mass(x: np.ndarray) -> int:
    """offpeak_mass of a checked 2-D int64 grid; O(cells), without a copy on even sides."""
    rows, cols = x.shape
    if rows % 2 or cols % 2:
        padded = np.zeros((rows + rows % 2, cols + cols % 2), dtype=x.dtype)
        padded[:rows, :cols] = x
        x = padded
    peaks = np.maximum(np.maximum(x[0::2, 0::2], x[0::2, 1::2]), np.maximum(x[1::2, 0::2], x[1::2, 1::2]))
    return int(x.sum(dtype=np.int64) - peaks.sum(dtype=np.int64))


def bound_mass(counts) -> int:
    """The number of records in the first or the last row or column of a 2-D grid: those at a
    bound of either attribute (a zero, a value clamped to the domain's end), where real
    cross-tabulations of zero-inflated or clamped values heap most of their records.

    One record added or removed changes it by 0 or 1; moved, by at most 1 either way.  Raises
    ParameterError unless ``counts`` is a 2-D grid of non-negative whole numbers."""
    return _bound_mass(_checked_grid(counts, "the bound mass needs"))


def _bound_mass(x: np.ndarray) -> int:
    """bound_mass of a checked 2-D int64 grid: the whole grid less its inner cells, O(cells)."""
    inner = x[1:-1, 1:-1]
    return int(x.sum(dtype=np.int64) - inner.sum(dtype=np.int64))


#: The lower corner block of corner_mass spans the first 1 / CORNER_PARTS of the rows and of the
#: columns (rounded up: at least one of each; public).
CORNER_PARTS = 8


def corner_mass(counts) -> int:
    """The number of records in a 2-D grid's lower corner block: the first ceil(rows / 8) rows
    and the first ceil(columns / 8) columns (CORNER_PARTS), those near the lower bound of both
    attributes, where cross-tabulations of two zero-inflated values (two kinds of income, a
    count and an amount) heap most of their records.

    One record added, removed or moved changes it by at most 1.  Raises ParameterError unless
    ``counts`` is a 2-D grid of non-negative whole numbers."""
    return _corner_mass(_checked_grid(counts, "the corner mass needs"))


def _corner_mass(x: np.ndarray) -> int:
    """corner_mass of a checked 2-D int64 grid, O(cells / 64)."""
    rows, columns = (-(-side // CORNER_PARTS) for side in x.shape)
    return int(x[:rows, :columns].sum(dtype=np.int64))


class GridFeatures(AutoData):
    """The feature steps of the 2-D choice: the noisy total, the noisy number of non-empty cells,
    the noisy mass of the HEAVY_CELLS heaviest cells, the noisy off-peak mass, the noisy bound
    mass (:func:`bound_mass`) and the noisy corner mass (:func:`corner_mass`), equal parts of the
    share (GRID_FEATURE_WEIGHTS; the 1-D auto-data's parameters and steps, with the count of
    non-empty cells where the 1-D choice prices merges).  The non-empty count has sensitivity 1
    under both relations (a record added or removed changes it by at most 1; a moved record can
    empty one cell and fill another: -1 + 1).  The top mass counts a fixed number of cells, not
    a share of them: on a sparse grid at high signal, whether a few heavy cells hold nearly all
    the records is what tells point masses that a data-aware partition isolates from hundreds
    of scattered ones it cannot, and a share of the cells (n / 64: 1,024 on 256 x 256) holds
    every record of both."""

    feature_weights = GRID_FEATURE_WEIGHTS

    #: The number of heaviest cells the 2-D top mass sums (public; all of them below 16 cells).
    HEAVY_CELLS = 16

    def heavy(self, n: int) -> int:
        return min(n, self.HEAVY_CELLS)

    def shares(self, epsilon: float) -> tuple[float, float, float, float, float, float, float]:  # type: ignore[override]
        """(total, non-empty cells, top mass, off-peak mass, bound mass, corner mass, rest): equal
        parts of the share, the total's none under replace (N public); their exact sum at most
        epsilon."""
        features = epsilon * self.feature_share
        bought = [k for k in self.feature_weights if k != "total" or self.neighbours != "replace"]
        weight = sum(self.feature_weights[k] for k in bought)
        parts = {k: (features * self.feature_weights[k] / weight if k in bought else 0.0) for k in self.feature_weights}
        rest = fit_last(parts.values(), epsilon - features, epsilon)
        return parts["total"], parts["nonempty"], parts["top"], parts["offpeak"], parts["bound"], parts["corner"], rest

    def features(self, counts, epsilon: float, rng=None) -> tuple[float, float, float, float, float, float, list[dict]]:  # type: ignore[override]
        """(noisy total, noisy non-empty cells, noisy top mass, noisy off-peak mass, noisy bound
        mass, noisy corner mass, their private steps) of a 2-D grid of counts."""
        grid = _checked_grid(counts, "the 2-D features need")
        return self.noisy_features(grid.ravel(), self.exact_steps(grid), epsilon, rng)

    def exact_steps(self, grid: np.ndarray) -> list[tuple[str, int, int]]:
        """The features after the total before their noise, as (step, value, sensitivity), in the
        order of their steps; ``grid`` a 2-D array of non-negative whole counts (checked by the
        caller, as :meth:`features` checks it)."""
        cells = grid.ravel()
        return [
            ("nonempty", int(np.count_nonzero(cells)), 1),
            ("top", top_mass(cells, self.heavy(cells.size)), 1),
            ("offpeak", _offpeak_mass(grid), 1),
            ("bound", _bound_mass(grid), 1),
            ("corner", _corner_mass(grid), 1),
        ]


def _axis_boundary(n: int, kind: str) -> tuple[float, float]:
    """(mean number of a range's ends inside an axis of n cells, mean length over n) for one
    axis' ranges of :func:`dprange.analysis.grid.axis_ranges` (a kind of
    :func:`~dprange.analysis.grid.product_parts`), in closed form: "all" (the
    n(n+1)/2 ranges: an end at the edge with chance 2/(n+1), mean length (n+2)/3), "prefix"
    ([0, j]: n - 1 of n upper ends inside, mean length (n+1)/2), "cells" (2(n-1) inner ends over
    n cells) and "total" (none)."""
    if kind == "all":
        return 2.0 - 4.0 / (n + 1), (n + 2) / (3.0 * n)
    if kind == "prefix":
        return (n - 1) / n, (n + 1) / (2.0 * n)
    if kind == "cells":
        return 2.0 * (n - 1) / n, 1.0 / n
    return 0.0, 1.0


def _product_boundary(moments) -> float:
    """The mean boundary of a product workload from each axis' (inner ends, length) means: the
    axes' ranges are drawn independently, so each axis' faces count its mean inner ends times the
    other axes' mean lengths."""
    inner = [m[0] for m in moments]
    extent = [m[1] for m in moments]
    return float(sum(inner[a] * math.prod(extent[:a] + extent[a + 1 :]) for a in range(len(moments))))


def _rectangles_boundary(rectangles: Rectangles) -> float:
    """:func:`workload_boundary` of explicit rectangles: the mean over them, 0 for none."""
    lows, highs = rectangles.lows, rectangles.highs
    if lows.shape[0] == 0:
        return 0.0
    sides = np.asarray(rectangles.grid, dtype=float)
    extent = (highs - lows + 1) / sides
    inner = (lows > 0).astype(float) + (highs < sides - 1)
    faces = [inner[:, a] * np.prod(np.delete(extent, a, axis=1), axis=1) for a in range(len(sides))]
    return float(np.mean(np.sum(faces, axis=0)))


def workload_boundary(workload, shape, order: int = 2) -> float:
    """The mean boundary of a k-D workload's rectangles inside the grid, in sides: per rectangle,
    every face not on the grid's edge counts the rectangle's extent along the other axes over
    their sides (on a square 2-D grid, its perimeter inside the grid over the grid's side).  All
    rectangles about 4/3, prefix rectangles about 1, DPBench's (a uniform size per axis placed
    uniformly) about 1.9, single cells 4 / side, the 1-way marginals of a 2-D grid about 2.  Public: reads
    the workload only (``order``: the marginals' order when ``workload`` is "marginals")."""
    shape = check_shape(shape)
    workload = check_grid_workload(workload)
    if isinstance(workload, Rectangles):
        if workload.grid != shape:
            raise ParameterError(f"the workload's rectangles lie on a {list(workload.grid)} grid, not {list(shape)}")
        return _rectangles_boundary(workload)
    if workload == "marginals":
        order = check_order(order, shape)
    parts = product_parts(shape, workload, order)
    total = sum(w * _product_boundary([_axis_boundary(n, k) for n, k in zip(shape, kinds)]) for w, kinds in parts)
    return total / sum(w for w, _ in parts)


def grid_feature_matrix(total, nonempty, top, offpeak, bound, corner, cells, epsilon, boundary) -> np.ndarray:
    """The rows of GRID_FEATURES from noisy (total, non-empty cells, top mass, off-peak mass,
    bound mass, corner mass), the public number of cells, the epsilon left and the workload's
    boundary (:func:`workload_boundary`); broadcasts over arrays."""
    noisy = (total, nonempty, top, offpeak, bound, corner)
    total, nonempty, top, offpeak, bound, corner, cells, epsilon, boundary = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (*noisy, cells, epsilon, boundary))
    )
    records = np.maximum(total, 1.0)
    occupied = np.clip(nonempty, 1.0, cells)
    columns = (
        np.log10(records * epsilon) - np.log10(cells),  # the signal per cell
        np.log10(records * epsilon / occupied),
        np.log10(occupied / cells),
        np.clip(top / records, 0.0, 1.0),
        np.log2(cells),
        np.log10(epsilon),
        np.clip(offpeak / records, 0.0, 1.0),
        boundary,
        np.clip(bound / records, 0.0, 1.0),
        np.log10(records * epsilon),
        np.clip(corner / records, 0.0, 1.0),
    )
    return np.stack(columns, axis=-1)


class GridSelector(Selector):
    """The 2-D choice: a :class:`~dprange.data_aware.selector.Selector` (tree or ridge) on
    GRID_FEATURES, saved in its own versioned layout."""

    def to_dict(self) -> dict:
        return {**super().to_dict(), "format": GRID_FORMAT, "domain": "2-D grid", "features": list(GRID_FEATURES)}

    @classmethod
    def from_dict(cls, data: dict) -> GridSelector:
        """The selector of a 2-D file (layout version, features and candidates checked)."""
        if data.get("domain") != "2-D grid":
            raise ParameterError("this selector file is not a 2-D one; retrain it with benchmarks/train_auto_grid.py")
        if data.get("format") != GRID_FORMAT or tuple(data.get("features", ())) != GRID_FEATURES:
            raise ParameterError("the 2-D auto-data selector file has another layout; retrain it")
        candidates = tuple(data["candidates"])
        unknown = [name for name in candidates if name not in GRID_CANDIDATES]
        if unknown or not candidates or candidates[0] != "auto":
            raise ParameterError(
                f"the 2-D selector names {unknown or list(candidates)}, not a list starting with 'auto' among "
                f"{', '.join(GRID_CANDIDATES)}; retrain it with benchmarks/train_auto_grid.py"
            )
        model = dict(data["model"])
        for key in ("mean", "scale", "lower", "upper"):
            if key in model:
                model[key] = np.asarray(model[key], dtype=float)
        return cls(data["kind"], candidates, model, dict(data.get("training", {})))


@lru_cache(maxsize=1)
def shipped_grid() -> GridSelector:
    """The 2-D selector that ships with the package."""
    text = resources.files(__package__).joinpath(GRID_SELECTOR_FILE).read_text(encoding="utf-8")
    return GridSelector.from_dict(json.loads(text))


def choose_grid(
    total,
    nonempty,
    top,
    offpeak,
    bound,
    corner,
    cells: int,
    epsilon: float,
    boundary: float,
    selector: Selector | None = None,
) -> list[str]:
    """The selector's choices for arrays of noisy features, the public number of cells, the
    epsilon left and the workload's boundary (post-processing: reads no data)."""
    total, nonempty, top, offpeak, bound, corner = (np.ravel(v) for v in (total, nonempty, top, offpeak, bound, corner))
    x = grid_feature_matrix(total, nonempty, top, offpeak, bound, corner, cells, epsilon, boundary)
    return (selector or shipped_grid()).choose(x)


#: The most cells on which auto-data's ``auto`` branch moves least squares toward the non-negative
#: refit (``refit='weighted'``): the grids it was measured on, up to 256 x 256; its five refits take
#: minutes on larger ones (docs/data-aware.md), which keep least squares.
WEIGHTED_REFIT_CELLS = 2**16


class AutoDataGrid(DataAwareGridMechanism):
    """Choose ``auto`` or a 2-D data-aware grid mechanism from six private features (noisy
    total, noisy number of non-empty cells, noisy mass of the heaviest cells, noisy off-peak
    mass, noisy mass on the grid's bounds, noisy mass in its lower corner block) bought with
    ``feature_share`` of epsilon and the workload's boundary (public), by the selector trained on
    public data (module doc)."""

    name = "auto-data"

    PARAMS = (
        Param(
            "feature_share",
            SHARE,
            "share of epsilon spent on the features (noisy total, non-empty cells, mass of the heaviest cells, "
            "off-peak mass, mass on the grid's bounds, mass in its lower corner block)",
            default=0.05,
        ),
        dataclasses.replace(
            WORKLOAD_PARAM,
            doc="the rectangles the data-independent branch is chosen for, whose boundary the selector reads "
            "(release_grid passes its workload)",
        ),
        ORDER_PARAM,
        Param(
            "refit",
            OneOf(("weighted", "never")),
            "what the auto branch releases: 'weighted' auto's least squares moved toward its non-negative refit "
            "by the weight of least estimated error (auto_toward_nonnegative, no exact error bars) on grids of at "
            "most 2^16 cells; 'never' (and larger grids) least squares with its exact error bars",
            default="weighted",
        ),
        *Mechanism.PARAMS,
    )
    feature_share: float
    workload: object
    order: int
    refit: str
    #: The trained selector (None: the one shipped with the package); benchmarks and tests set another.
    selector: Selector | None = None

    def feature_steps(self) -> GridFeatures:
        """The feature steps and shares this one runs on the grid."""
        return GridFeatures(feature_share=self.feature_share, neighbours=self.neighbours)

    def shares(self, epsilon: float) -> tuple[float, float, float, float, float, float, float]:
        """(total, non-empty cells, top mass, off-peak mass, bound mass, corner mass, rest); their
        exact sum is at most epsilon."""
        return self.feature_steps().shares(epsilon)

    def features(self, counts, epsilon: float, rng=None) -> tuple[float, float, float, float, float, float, list[dict]]:
        """(noisy total, noisy non-empty cells, noisy top mass, noisy off-peak mass, noisy bound
        mass, noisy corner mass, their private steps)."""
        return self.feature_steps().features(counts, epsilon, rng)

    def parameters(self) -> dict:
        """As declared, explicit rectangles written as their saved form (shape, lows, highs), which
        the workload parameter reads back."""
        return {
            "feature_share": self.feature_share,
            "workload": saved_workload(self.workload),
            "order": self.order,
            "refit": self.refit,
            **super().parameters(),  # the shared parameters (an override lists its own first)
        }

    def runs(self, chosen: str, shape, epsilon: float) -> GridMechanism:
        """The mechanism a release runs for the selector's choice: :meth:`candidate`, except that
        with ``refit='weighted'`` the choice ``auto`` runs ``auto_toward_nonnegative`` (the same
        measurements, then least squares moved toward the non-negative refit by the weight of
        least estimated error on the workload) on grids of at most WEIGHTED_REFIT_CELLS cells."""
        if chosen == "auto" and self.refit == "weighted" and math.prod(shape) <= WEIGHTED_REFIT_CELLS:
            return AutoTowardNonnegative(
                workload=self.workload, order=self.order, neighbours=self.neighbours, noise=self.noise
            )
        return self.candidate(chosen, shape, epsilon)

    def candidate(self, name: str, shape, epsilon: float) -> GridMechanism:
        """The mechanism a choice names, built from public values only (``auto``: the least exact
        expected error on the release's workload at the epsilon it runs with)."""
        if name == "auto":
            return auto_design(
                shape, epsilon, self.workload, neighbours=self.neighbours, noise=self.noise, order=self.order
            )
        mechanism = CANDIDATE_MECHANISMS.get(name, name)
        if name not in GRID_CANDIDATES or mechanism not in GRID_MECHANISMS:
            raise ParameterError(f"the 2-D auto-data selector names an unknown mechanism {name!r}; retrain it")
        params: dict[str, object] = dict(CANDIDATE_PARAMETERS.get(name, {}))
        if name in WORKLOAD_CANDIDATES:
            params.update(workload=self.workload, order=self.order, noise=self.noise)
        return GRID_MECHANISMS[mechanism].build(neighbours=self.neighbours, **params)

    def buys_features(self) -> bool:
        """Whether a release buys the features: not when the selector is constant (a single leaf),
        whose choice they could not change."""
        return self.constant_choice() is None

    def constant_choice(self) -> str | None:
        """The mechanism the selector names whatever the features, if it is constant (else None)."""
        return (self.selector or shipped_grid()).constant()

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None):
        """Buy the features, choose, run the choice with the rest of epsilon (all of it, with no
        features bought, under a constant selector); the release records the features, the
        choice and every private step (their exact sum at most epsilon)."""
        counts, epsilon = self._check(counts, epsilon, delta)
        source = resolve_rng(rng)
        constant = self.constant_choice()
        features: dict | None = None
        if constant is None:
            total, nonempty, top, offpeak, bound, corner, steps = self.features(counts, epsilon, source)
            rest = self.shares(epsilon)[-1]
            boundary = workload_boundary(self.workload, counts.shape, self.order)
            noisy = (total, nonempty, top, offpeak, bound, corner)
            chosen = choose_grid(*noisy, counts.size, rest, boundary, self.selector)[0]
            features = {
                "total": total,
                "nonempty": nonempty,
                "top": top,
                "offpeak": offpeak,
                "bound": bound,
                "corner": corner,
                "epsilon_left": rest,
                "workload_boundary": boundary,
            }
        else:
            chosen, rest, steps = constant, epsilon, []
        inner = self.runs(chosen, counts.shape, rest)
        released = inner.release(counts, rest, rng=source, domain=domain)
        inner_steps = released.parameters.get("private_steps") or [step("measure", released.epsilon)]
        steps = steps + list(inner_steps)
        if spent(steps) > Fraction(epsilon):
            raise ParameterError("auto-data's private steps spend more than epsilon; report this as a bug")
        record = {
            "mechanism": self.name,
            **self.parameters(),
            "chosen": chosen if chosen in CANDIDATE_MECHANISMS else inner.name,  # a variant by its own name
            "features": features,
            "private_steps": steps,
            "epsilon": min(float_at_least(spent(steps)), epsilon),
        }
        if isinstance(released, GridRelease):  # data-independent: its exact error bars kept, given the choice
            released.selection = record
            return released
        released.provenance = dataclasses.replace(
            released.provenance,
            mechanism=self.name,
            parameters={
                **{k: v for k, v in record.items() if k not in ("mechanism", "epsilon")},
                "chosen_parameters": released.parameters,
            },
            epsilon=record["epsilon"],
            seeded=is_seeded(rng),
        )
        return released


GRID_MECHANISMS.add(
    AutoDataGrid,
    summary="data-aware 2-D choice: a small declared share of epsilon on a noisy total, a noisy count of "
    "non-empty cells, the noisy mass of the heaviest cells, the noisy off-peak mass, the noisy mass on "
    "the grid's bounds and the noisy mass in its lower corner block, then auto or a 2-D "
    "data-aware grid by a selector trained on public data (DPBench 2-D and synthetic shapes) that also reads "
    "the workload's boundary",
    citation=Citation(
        "Kotsogiannis, Machanavajjhala, Hay and Miklau",
        "Pythia: Data Dependent Differentially Private Algorithm Selection",
        "SIGMOD 2017",
    ),
)
