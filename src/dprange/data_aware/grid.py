"""Data-aware mechanisms on 2-D grids: a kd-tree, the hybrid kd-tree / quadtree, and DAWA over
a Hilbert order.

Each spends declared shares of epsilon on private, data-dependent choices (split positions, a
partition) and the rest on noisy counts; the steps and their shares are recorded in the
release (``parameters["private_steps"]``) and their exact rational sum never exceeds epsilon.

* :class:`KDTree`: the kd-tree of Xiao, Xiong and Yuan ("Differentially Private Data Release
  through Multidimensional Partitioning", SDM 2010 workshop on Secure Data Management) with
  its cuts at private medians, ``depth`` levels (axes alternating), then noisy leaf counts
  spread uniformly over each leaf.  Xiao et al. choose their cuts from a first noisy cell
  histogram; the private medians here are those of Cormode et al. (below), so that the
  partition step has an exact exponential-mechanism guarantee per level.
* :class:`HybridTree`: Cormode, Procopiuc, Srivastava, Shen and Yu ("Differentially Private
  Spatial Decompositions", ICDE 2012, the "kd-hybrid"): private medians for the top
  ``kd_levels`` levels, quadtree halving below, noisy counts of every node with geometric
  budgets (growing 2^(1/3) per level towards the leaves) and least squares on the tree.
* :class:`DAWAHilbert`: the 1-D :class:`~dprange.data_aware.dawa.DAWA` run on the cells in the
  order of the Hilbert curve (Li, Hay, Miklau and Wang, PVLDB 2014, section 6), by default with
  a partition share chosen from a noisy total (``ratio="signal"``).

Error bars.  These estimates are biased in a data-dependent way (uniform expansion inside a
private leaf or bucket), so no answer here claims an exact standard error: the answers of a
:class:`DataAwareGridRelease` have NaN standard errors and intervals.  The standard error of
the noise alone, given the private choices, has its own name
(:meth:`DataAwareGridRelease.noise_only_stderr`), and :meth:`DataAwareGridRelease.bootstrap`
re-runs only the public post-processing (least squares, expansion) on re-drawn noise.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import numbers
from fractions import Fraction

import numpy as np

from .._params import Custom, Integer, OneOf, Param
from .._validation import check_delta, check_epsilon, check_positive_int, fit_budget
from ..answers.bootstrap import check_reps, resample_leaves
from ..answers.bounded_json import loads as bounded_loads
from ..answers.bounded_json import sized
from ..answers.describe import Labels, self_description
from ..answers.provenance import Provenance
from ..answers.types import Answer
from ..answers.writers import DATA_DEPENDENT_ERROR_BARS
from ..domain import ProductDomain
from ..errors import DataError, ParameterError
from ..mechanisms.base import GridMechanism, Mechanism, check_grid_counts
from ..privacy.samplers import resolve_rng
from ..registry import GRID_MECHANISMS, Citation
from ..workloads.rectangles import check_rectangles
from .dawa import DAWA
from .hilbert import check_2d, hilbert_sequence
from .spatial_trees import Level, TreeFit, box_sums, kd_level, quad_level, root_level, split_gamma, summed_area
from .steps import SHARE, check_steps_within, data_aware_provenance, laplace_spec, noisy_total, spent, step

#: Largest number of cells x queries of a dense query-weight matrix (noise-only errors).
WEIGHTS_LIMIT = 1 << 26


def rectangle_weights(shape, lows, highs) -> np.ndarray:
    """The (R, cells) indicator weights (C order) of inclusive rectangles."""
    if lows.shape[0] * math.prod(shape) > WEIGHTS_LIMIT:
        raise ParameterError(
            f"noise-only errors of {lows.shape[0]} rectangles on {math.prod(shape)} cells need a "
            f"{lows.shape[0] * math.prod(shape)}-entry weight matrix; ask for fewer rectangles at once"
        )
    rows = np.arange(shape[0])
    cols = np.arange(shape[1])
    in_rows = (rows >= lows[:, :1]) & (rows <= highs[:, :1])
    in_cols = (cols >= lows[:, 1:]) & (cols <= highs[:, 1:])
    return (in_rows[:, :, None] & in_cols[:, None, :]).reshape(lows.shape[0], -1).astype(float)


class DataAwareGridRelease:
    """A 2-D release from a data-aware mechanism: cell estimates, rectangles, marginals and
    dominance counts, without exact error bars (module doc).

    ``noise`` is the post-processing state: an object with ``query_variance(cell_weights)``
    (noise-only variances given the private choices) and ``resample(rng)`` (one replicate of
    the cell estimates from re-drawn noise)."""

    exact_error_bars = False

    def __init__(self, shape, cells: np.ndarray, provenance, noise, *, domain=None, input_labels: Labels | None = None):
        self.shape = tuple(int(n) for n in shape)
        self._cells = np.asarray(cells, dtype=float).reshape(self.shape)
        self.provenance = provenance
        self._noise = noise
        self.domain = domain
        #: Public descriptions of the input (columns, units, file): :class:`~dprange.answers.describe.Labels`.
        self.input_labels = input_labels if input_labels is not None else Labels()

    def with_labels(self, columns=None, units=None, source=None) -> DataAwareGridRelease:
        """This release described (columns, units, input file), saved in its JSON (a copy)."""
        labelled = copy.copy(self)
        labelled.input_labels = Labels.of(columns, units, source)
        return labelled

    mechanism = property(lambda self: self.provenance.mechanism)
    epsilon = property(lambda self: self.provenance.epsilon)
    delta = property(lambda self: self.provenance.delta)
    neighbours = property(lambda self: self.provenance.neighbours)
    parameters = property(lambda self: self.provenance.parameters)
    total = property(lambda self: self.provenance.total)

    @property
    def counts(self) -> np.ndarray:
        """The estimated count of every cell (a 2-D float array)."""
        return self._cells.copy()

    @staticmethod
    def _unknown(shape):
        return lambda: np.full(shape, np.nan)

    def rectangle(self, lows, highs) -> Answer:
        """Estimated counts of inclusive rectangles (one as two length-2 sequences, or (R, 2)
        arrays); their standard errors are NaN (not exact: see :meth:`noise_only_stderr`)."""
        single = np.ndim(lows) == 1 and np.ndim(highs) == 1
        lows, highs = check_rectangles(self.shape, lows, highs)
        table = summed_area(self._cells)
        value = box_sums(table, lows, highs)
        if single:
            return Answer(value[0], np.nan, scalar=True)
        return Answer(value, self._unknown(value.shape))

    def dominance(self, points) -> Answer:
        points = np.asarray(points, dtype=np.int64)
        return self.rectangle(np.zeros_like(points), points)

    def marginal(self, axes) -> Answer:
        """The marginal over ``axes`` (the others summed), standard errors NaN."""
        axes = tuple(int(a) for a in np.atleast_1d(axes))
        if not axes or len(set(axes)) != len(axes) or any(a not in (0, 1) for a in axes):
            raise ParameterError(f"axes must be distinct axis numbers in 0..1, got {list(axes)}")
        value = self._cells if len(axes) == 2 else self._cells.sum(axis=1 - axes[0])
        if axes == (1, 0):
            value = value.T
        return Answer(value, self._unknown(value.shape))

    def noise_only_stderr(self, lows, highs) -> np.ndarray:
        """Standard errors of rectangles due to the measurement noise alone, given the private
        choices (the tree, the partition): they exclude the data-dependent bias of the uniform
        expansion, so they are not the error of the answers.  Cost O(R x cells)."""
        lows, highs = check_rectangles(self.shape, lows, highs)
        return np.sqrt(self._noise.query_variance(rectangle_weights(self.shape, lows, highs)))

    def bootstrap(self, lows, highs, *, reps: int = 200, rng=None) -> np.ndarray:
        """Bootstrap standard errors of rectangles: the measured noise re-drawn around the
        released estimate and only the public post-processing re-run, the private choices
        kept (re-running them would read the data).  Noise-only, like :meth:`noise_only_stderr`."""
        reps = check_reps(reps)
        lows, highs = check_rectangles(self.shape, lows, highs)
        source = resolve_rng(rng)
        answers = np.empty((reps, lows.shape[0]))
        for r in range(reps):
            answers[r] = box_sums(summed_area(self._noise.resample(source)), lows, highs)
        return answers.std(axis=0, ddof=1)

    def to_dict(self) -> dict:
        """What was published: provenance (private steps and shares) and the cell estimates;
        no standard errors (``error_bars`` says why)."""
        return {
            "kind": "data_aware_grid_release",
            "version": 2,  # 2 adds the self-description (dprange.answers.describe); 1 still loads
            "shape": list(self.shape),
            "provenance": self.provenance.to_dict(),
            "error_bars": DATA_DEPENDENT_ERROR_BARS,
            "counts": self._cells.ravel().tolist(),
            "domain": None if self.domain is None else self.domain.to_dict(),
            **self_description(self.input_labels, self.provenance, data_dependent=True),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text) -> DataAwareGridRelease:
        """A saved release (text or dict of :meth:`to_dict`): the same estimates and provenance;
        its noise-only errors and bootstrap need the measurements, which are not saved."""
        data = bounded_loads(text, [("counts",)]) if isinstance(text, str) else text  # counts: counted, then parsed
        if not isinstance(data, dict) or data.get("kind") != "data_aware_grid_release":
            raise DataError("not a saved data-aware grid release (kind 'data_aware_grid_release')")
        try:
            shape = check_2d(data["shape"])
            needs = f"its shape {list(shape)} needs {math.prod(shape)}"
            counts = sized(data["counts"], math.prod(shape), f"the saved release has {{size}} cells, {needs}")
            cells = np.asarray(counts, dtype=float)
            if cells.size != shape[0] * shape[1]:
                raise DataError(f"the saved release has {cells.size} cells, {needs}")
            provenance = Provenance.from_dict(data["provenance"])
            domain = None if data["domain"] is None else ProductDomain.from_dict(data["domain"])
        except (KeyError, TypeError) as exc:
            raise DataError(f"the saved data-aware grid release is incomplete or malformed ({exc!r})") from None
        labels = Labels.from_dict(data.get("input"))
        return cls(shape, cells, provenance, _NotSaved(), domain=domain, input_labels=labels)

    def __repr__(self) -> str:
        return f"DataAwareGridRelease(shape={list(self.shape)}, mechanism={self.mechanism!r}, epsilon={self.epsilon})"


class _NotSaved:
    """The post-processing state of a loaded release: its measurements were not saved."""

    def _refuse(self, *args):
        raise ParameterError(
            "a loaded data-aware grid release has no measurements (only its estimates are saved); "
            "use noise_only_stderr / bootstrap on the release before saving it"
        )

    query_variance = resample = _refuse


class DataAwareGridMechanism(GridMechanism):
    """Base of the 2-D data-aware mechanisms: no data-free design or error model; ``plan``
    checks the parameters and the grid before any count is read."""

    data_aware = True

    def plan(self, shape, epsilon: float):
        check_2d(shape)
        check_epsilon(epsilon)
        if self.inference != "gls":
            raise ParameterError(f"{self.name} has no inference options; pass inference='gls'")
        if self.noise not in ("auto", "discrete_laplace"):
            raise ParameterError(f"{self.name} is pure epsilon-DP with discrete Laplace noise; pass noise='auto'")
        return None

    def measure(self, counts, epsilon, *, delta=0.0, rng=None):
        raise ParameterError(f"{self.name}'s measurements depend on private choices; call release(...)")

    def estimate(self, shape, measurements):
        raise ParameterError(f"{self.name}'s estimate depends on private choices; call release(...)")

    def error_model(self, shape, epsilon, *, delta=0.0):
        raise ParameterError(f"{self.name}'s error depends on the data (private choices); it has no data-free design")

    def _check(self, counts, epsilon, delta):
        counts = check_grid_counts(counts)
        self.plan(counts.shape, epsilon)
        if check_delta(delta) > 0:
            raise ParameterError(f"{self.name} is pure epsilon-DP; pass delta=0")
        return counts, check_epsilon(epsilon)


# ----------------------------------------------------------------------------- trees
class _TreeMechanism(DataAwareGridMechanism):
    """Shared release of the kd-tree and the hybrid tree: private cuts for the top levels,
    then the noisy counts of the measured levels, least squares, uniform expansion."""

    def kd_depth(self) -> int:
        raise NotImplementedError

    def tree_height(self, shape) -> int:
        """Levels below the root on a grid of ``shape``."""
        raise NotImplementedError

    def count_fractions(self, height: int) -> np.ndarray:
        """Relative count budgets of levels 0..height (0: not measured)."""
        raise NotImplementedError

    def budgets(self, epsilon: float, shape) -> tuple[list[float], list[float]]:
        """(per kd level, per tree level) epsilons on a grid of ``shape``; exact sum at most epsilon."""
        kd = self.kd_depth()
        fractions = self.count_fractions(self.tree_height(shape))
        if self.neighbours == "replace":
            fractions = fractions.copy()
            fractions[0] = 0.0  # the total is public
        split = epsilon * self.split_share if kd else 0.0  # type: ignore[attr-defined]
        counts = list((epsilon - split) * fractions / fractions.sum())
        fitted = fit_budget([split / kd] * kd + counts, epsilon) if kd else fit_budget(counts, epsilon)
        return fitted[:kd], fitted[kd:]

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts, epsilon = self._check(counts, epsilon, delta)
        source = resolve_rng(rng)
        split_eps, count_eps = self.budgets(epsilon, counts.shape)
        levels: list[Level] = [root_level(counts.shape)]
        for d in range(self.tree_height(counts.shape)):
            if d < self.kd_depth():
                levels.append(kd_level(counts, levels[-1], d, split_gamma(split_eps[d], self.neighbours), source))
            else:
                levels.append(quad_level(levels[-1]))
        table = summed_area(counts)
        sensitivity = 2 if self.neighbours == "replace" else 1
        measured: list = []
        specs: list = []
        steps = [step("median", e) for e in split_eps]
        for level, eps in zip(levels, count_eps):
            if eps <= 0:
                measured.append(None)
                specs.append(None)
                continue
            spec = laplace_spec(eps, sensitivity)
            exact = box_sums(table, level.lo, level.hi)
            measured.append(exact + spec.sample(exact.shape, source))
            specs.append(spec)
            steps.append(step("counts", eps))
        check_steps_within(steps, epsilon)
        total = float(counts.sum()) if self.neighbours == "replace" else None
        fit = TreeFit(counts.shape, levels, measured, specs, total)
        params = {**self.parameters(), "leaves": int(levels[-1].size)}
        params["leaf_rectangles"] = np.concatenate([levels[-1].lo, levels[-1].hi], axis=1).tolist()
        provenance = data_aware_provenance(self, "discrete_laplace", params, steps, epsilon, 0.0, total, rng)
        return DataAwareGridRelease(counts.shape, fit.cells, provenance, fit, domain=domain)


class KDTree(_TreeMechanism):
    """kd-tree (module doc): ``depth`` levels of private-median cuts (``split_share`` of
    epsilon, equal per level), then noisy leaf counts with the rest, spread uniformly."""

    name = "kd_tree"

    PARAMS = (
        Param("depth", Integer(1), "levels of private-median cuts (up to 2^depth leaves)", default=10),
        Param("split_share", SHARE, "share of epsilon spent on the cuts", default=0.3),
        *Mechanism.PARAMS,
    )
    depth: int
    split_share: float

    def kd_depth(self) -> int:
        return self.depth

    def tree_height(self, shape) -> int:
        return self.depth

    def count_fractions(self, height: int) -> np.ndarray:
        out = np.zeros(height + 1)
        out[-1] = 1.0
        return out


def check_height(value, name: str) -> int | str:
    """ "auto" or an integer >= 1."""
    if value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"{name} must be 'auto' or an integer >= 1, got {value!r}")
    return int(value)


class HybridTree(_TreeMechanism):
    """kd-hybrid (module doc): ``kd_levels`` levels of private-median cuts, quadtree halving
    below to ``height`` levels, noisy counts of every node (geometric or uniform budgets)
    and least squares on the tree."""

    name = "hybrid_tree"

    PARAMS = (
        Param("kd_levels", Integer(0), "top levels cut at private medians", default=2),
        Param(
            "height",
            Custom(check_height, "auto or an integer >= 1"),
            "levels below the root (kd then quadtree); auto: kd_levels + log2 of the longer side, "
            "so that the leaves are single cells",
            default="auto",
        ),
        Param("split_share", SHARE, "share of epsilon spent on the cuts", default=0.1),
        Param("budget", OneOf(("geometric", "uniform")), "count budgets per level", default="geometric"),
        *Mechanism.PARAMS,
    )
    kd_levels: int
    height: int | str
    split_share: float
    budget: str

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Depends on two parameters.
        if self.height != "auto" and self.kd_levels > int(self.height):
            raise ParameterError(f"kd_levels ({self.kd_levels}) must be at most height ({self.height})")

    def kd_depth(self) -> int:
        return self.kd_levels

    def tree_height(self, shape) -> int:
        if self.height == "auto":
            return self.kd_levels + max(1, math.ceil(math.log2(max(shape))))
        return int(self.height)

    def count_fractions(self, height: int) -> np.ndarray:
        levels = np.arange(height + 1, dtype=float)
        return 2.0 ** (levels / 3.0) if self.budget == "geometric" else np.ones(levels.size)


# ----------------------------------------------------------------------------- DAWA, Hilbert order
class HilbertNoise:
    """Post-processing state of DAWA on the Hilbert order: the 1-D release and the order."""

    def __init__(self, inner, sequence: np.ndarray, shape):
        self.inner = inner
        self.sequence = sequence
        self.shape = shape

    def query_variance(self, cell_weights: np.ndarray) -> np.ndarray:
        model = self.inner.noise_only_error_model
        return np.atleast_1d(model.query_variance(np.atleast_2d(cell_weights)[:, self.sequence]))

    def resample(self, rng) -> np.ndarray:
        reduced = getattr(self.inner, "_reduced", None)
        if reduced is None:
            raise ParameterError("this DAWA release has no public post-processing to re-run")
        measurements, method, starts = reduced
        n = self.sequence.size
        sizes = np.append(starts[1:], n) - starts
        totals = np.add.reduceat(self.inner.estimate, starts)
        seq = np.repeat(resample_leaves(measurements, totals, method, rng) / sizes, sizes)
        cells = np.empty(n)
        cells[self.sequence] = seq
        return cells.reshape(self.shape)


#: ``ratio="signal"``: the share of epsilon spent on the noisy total (none under replace).
SIGNAL_TOTAL_SHARE = 0.02
#: ... the partition shares below and from the signal threshold, and the threshold: log10 of
#: N-hat times the epsilon left, over the number of cells.
SIGNAL_RATIOS = (0.25, 0.4)
SIGNAL_THRESHOLD = -0.5


def check_hilbert_ratio(value, name: str = "ratio"):
    """``"signal"`` or a partition share in (0, 1)."""
    if isinstance(value, str):
        if value != "signal":
            raise ParameterError(f"{name} must be 'signal' or a fraction of epsilon in (0, 1), got {value!r}")
        return value
    return SHARE.check(value, name)


def signal_ratio(total: float, epsilon: float, cells: int) -> float:
    """The partition share ``ratio="signal"`` runs with: SIGNAL_RATIOS[1] where log10(N-hat eps /
    cells) is at least SIGNAL_THRESHOLD, else SIGNAL_RATIOS[0] (post-processing of N-hat)."""
    if isinstance(total, bool) or not isinstance(total, numbers.Real) or not math.isfinite(total):
        raise ParameterError(f"the noisy total must be a finite number, got {total!r}")
    signal = max(float(total), 1.0) * check_epsilon(epsilon) / check_positive_int(cells, "cells")
    return SIGNAL_RATIOS[1] if math.log10(signal) >= SIGNAL_THRESHOLD else SIGNAL_RATIOS[0]


class DAWAHilbert(DataAwareGridMechanism):
    """DAWA over the Hilbert order (module doc): the cells read along the Hilbert curve of the
    padded square are a 1-D histogram; :class:`~dprange.data_aware.dawa.DAWA` partitions it
    privately into buckets (runs of the curve: compact regions), measures the buckets and
    spreads them uniformly.  Its parameters are DAWA's, except ``ratio``.

    ``ratio="signal"`` (default): a rectangle cuts a bucket at every run of the curve along its
    perimeter, not at two ends as a 1-D range does, so the partition's accuracy is worth more
    than DAWA's 1-D share buys once the signal per cell is high.  A share SIGNAL_TOTAL_SHARE of
    epsilon buys a noisy total N-hat (discrete Laplace, sensitivity 1; none under replace, where
    N is public), recorded as the step ``total``; DAWA then runs with the rest and partition
    share :func:`signal_ratio` (0.4 where N-hat eps / cells >= 10^-0.5, else 0.25).  The choice
    is post-processing of N-hat, so the release is the fixed-share DAWA's given it.  A number
    fixes the share (no total bought).  ``edge_bins`` defaults to 0: the ends of the curve are
    two corners of the grid, and the 2-D selector was trained on the partition without forced
    splits."""

    name = "dawa_hilbert"

    PARAMS = (
        Param(
            "ratio",
            Custom(check_hilbert_ratio, "'signal' or a fraction of epsilon in (0, 1)"),
            "share of epsilon spent on the partition, or 'signal': 0.25 or 0.4 by a noisy total",
            default="signal",
        ),
        *(dataclasses.replace(p, default=0) if p.name == "edge_bins" else p for p in DAWA.PARAMS[1:]),
    )
    ratio: float | str

    def inner(self, ratio: float | None = None) -> DAWA:
        """The 1-D DAWA run on the Hilbert order, with partition share ``ratio`` (with ``ratio=
        "signal"``, the share of the threshold's high side when none is given)."""
        params = {p.name: getattr(self, p.key) for p in DAWA.PARAMS}
        if ratio is not None:
            params["ratio"] = ratio
        elif params["ratio"] == "signal":
            params["ratio"] = SIGNAL_RATIOS[1]
        return DAWA(**params)

    def signal_budgets(self, epsilon: float) -> tuple[float, float]:
        """(the noisy total's share, the epsilon left for DAWA), exact sum at most epsilon."""
        if self.ratio != "signal" or self.neighbours == "replace":
            return 0.0, epsilon
        first = epsilon * SIGNAL_TOTAL_SHARE
        return tuple(fit_budget([first, epsilon - first], epsilon))  # type: ignore[return-value]

    def plan(self, shape, epsilon: float):
        check_2d(shape)
        check_epsilon(epsilon)
        return None

    def release(self, counts, epsilon, *, delta=0.0, rng=None, domain=None) -> DataAwareGridRelease:  # type: ignore[override]
        counts = check_grid_counts(counts)
        self.plan(counts.shape, epsilon)
        sequence = hilbert_sequence(counts.shape)
        source = resolve_rng(rng)
        steps: list[dict] = []
        extra: dict = {}
        rest = epsilon
        if isinstance(self.ratio, str):  # "signal"
            eps_total, rest = self.signal_budgets(epsilon)
            total, steps = noisy_total(counts, eps_total, source)  # exact under replace (eps_total 0)
            ratio = signal_ratio(total, rest, counts.size)
            extra = {"ratio": "signal", "signal_total": total, "chosen_ratio": ratio}
        else:
            ratio = self.ratio
        inner = self.inner(ratio).release(counts.ravel()[sequence], rest, delta=delta, rng=source)
        cells = np.empty(sequence.size)
        cells[sequence] = inner.estimate
        prov = inner.provenance
        steps = steps + list(prov.parameters["private_steps"])
        if spent(steps) > Fraction(check_epsilon(epsilon)):
            raise ParameterError("the private steps spend more than epsilon; report this as a bug")
        parameters = {**prov.parameters, **extra, "order": "hilbert"}
        provenance = data_aware_provenance(self, prov.noise, parameters, steps, epsilon, prov.delta, prov.total, rng)
        noise = HilbertNoise(inner, sequence, counts.shape)
        return DataAwareGridRelease(counts.shape, cells, provenance, noise, domain=domain)


CORMODE_2012 = Citation(
    "Cormode, Procopiuc, Srivastava, Shen and Yu", "Differentially Private Spatial Decompositions", "ICDE 2012"
)


GRID_MECHANISMS.add(
    KDTree,
    summary="data-aware 2-D: a kd-tree cut at private medians (exponential mechanism), noisy leaf counts "
    "(error bars noise-only, not exact)",
    citation=Citation(
        "Xiao, Xiong and Yuan",
        "Differentially Private Data Release through Multidimensional Partitioning",
        "SDM 2010 (Secure Data Management workshop)",
    ),
)


GRID_MECHANISMS.add(
    HybridTree,
    summary="data-aware 2-D: private-median kd cuts at the top, quadtree below, noisy counts of every node "
    "and tree least squares (error bars noise-only, not exact)",
    citation=CORMODE_2012,
)


GRID_MECHANISMS.add(
    DAWAHilbert,
    summary="data-aware 2-D: DAWA on the cells in Hilbert-curve order (error bars noise-only, not exact)",
    citation=Citation(
        "Li, Hay, Miklau and Wang",
        "A Data- and Workload-Aware Algorithm for Range Queries Under Differential Privacy",
        "PVLDB 2014",
    ),
)
