"""The k-D mechanisms with fixed strategies: Kronecker products of 1-D strategies, Privelet in k
dimensions, k-D hierarchies and quadtrees (Qardaji, Yang and Li, PVLDB 2013), and loading a saved
k-D release by rebuilding its design.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import numpy as np

from .._params import Custom, Flag, Integer, OneOf, Param
from .._validation import fit_budget
from ..answers.bounded_json import ANY, sized
from ..answers.bounded_json import loads as bounded_loads
from ..answers.constrained import constrain
from ..answers.describe import Labels
from ..answers.grid import GridRelease, design_digest
from ..domain import ProductDomain
from ..errors import DataError, ParameterError
from ..inference.kron import KronEstimate, MortonTreeEstimate, morton_order
from ..inference.tree import tree_gls
from ..measurements import LinearMeasurement, Measurements
from ..privacy.noise import NoiseSpec
from ..registry import GRID_MECHANISMS, GRID_WORKLOADS, Citation, Entry
from ..strategies.kron import AXIS_KINDS, BUDGET_RULES, KronStrategy, axis_fractions, axis_strategy, check_axes
from ..strategies.trees import Strategy, TreeStrategy
from ..workloads.rectangles import all_rectangles, check_shape, marginals, prefix_rectangles
from .base import GridMechanism, Mechanism


def parse_axes(text: str, option: str):
    """Per-axis strategies from command-line text: "4", "haar" or "4,identity,haar" (one per axis)."""
    parts = [p.strip() for p in str(text).split(",")]
    value = [int(p) if p.isascii() and p.isdigit() else p for p in parts]
    return value[0] if len(value) == 1 else value


class Kronecker(GridMechanism):
    """Kronecker products of 1-D strategies, one per axis (module doc).

    Parameters
    ----------
    axes : one entry per axis: "identity", "haar" or a tree branching b >= 2 (the tree's root
        is not measured, as in :class:`~dprange.Hierarchical`); a single entry is used for
        every axis.
    budget : "uniform" or "geometric" split of every axis' levels (products across axes).
    """

    name = "kronecker"
    CLI_OPTIONS = {"branching": "axes", "budget": "budget"}
    constrainable = True

    PARAMS = (
        Param(
            "axes",
            Custom(
                check_axes,
                "'identity', 'haar' or a branching >= 2, or a list of them (one per axis)",
                parse=parse_axes,
            ),
            "per-axis 1-D strategies",
            default="identity",
            positional=True,
        ),
        Param("budget", OneOf(BUDGET_RULES), "per-axis budget split: uniform or geometric", default="uniform"),
        *Mechanism.PARAMS,
    )
    axes: Any
    budget: str

    def _axis_specs(self, k: int) -> list:
        specs = list(self.axes) if isinstance(self.axes, (list, tuple)) else [self.axes]
        if len(specs) == 1:
            specs = specs * k
        if len(specs) != k:
            raise ParameterError(f"give one axis strategy, or one per axis ({k}), got {len(specs)}")
        return specs

    def _axes(self, shape):
        shape = check_shape(shape)
        levels, fractions = [], []
        for spec, n in zip(self._axis_specs(len(shape)), shape):
            ops, nodes = axis_strategy(spec, n)
            levels.append(ops)
            fractions.append(axis_fractions(nodes, self.budget))
        combos = list(itertools.product(*(range(len(ops)) for ops in levels)))
        return levels, fractions, combos

    def plan(self, shape, epsilon: float) -> KronStrategy:
        levels, fractions, combos = self._axes(shape)
        raw = [epsilon * math.prod(float(fractions[a][level]) for a, level in enumerate(c)) for c in combos]
        return KronStrategy(levels, combos, fit_budget(raw, epsilon), shape=tuple(shape))

    def estimate(self, shape, measurements: Measurements) -> KronEstimate:
        levels, fractions, combos = self._axes(shape)
        weights = [[1.0 / float(f) ** 2 for f in fr] for fr in fractions]
        values = [m.values for m in measurements.measurements]
        variances = [m.variance for m in measurements.measurements]
        return KronEstimate(shape, levels, weights, combos, values, variances, total=measurements.total)


class KDHierarchy(GridMechanism):
    """The k-D hierarchy with fan-out b^k over the grid padded to a cube of side b^h (module
    doc); padded cells hold no records.  Exact tree least squares in Morton order."""

    name = "kd_hierarchy"
    CLI_OPTIONS = {"branching": "branching", "budget": "budget", "measure_root": "measure_root"}

    PARAMS = (
        Param("branching", Integer(minimum=2), "branching per axis (fan-out b^k)", default=2, positional=True),
        Param("budget", OneOf(BUDGET_RULES), "uniform or geometric (Cormode et al. 2012)", default="uniform"),
        Param(
            "measure_root",
            Flag(),
            "add/remove only: measure the root (the total) too; off by default, as in Hierarchical",
            default=False,
        ),
        *Mechanism.PARAMS,
    )
    branching: int
    budget: str
    measure_root: bool

    def _tree(self, shape):
        shape = check_shape(shape)
        b, k = int(self.branching), len(shape)
        side = 1
        while side < max(shape):
            side *= b
        height = round(math.log(side, b)) if side > 1 else 0
        tree = TreeStrategy(
            side**k,
            (b**k,) * height if height else (2,),
            measure_root=self.measure_root,
            known_total=self.neighbours == "replace",
        )
        return shape, side, tree

    def depth_weights(self, tree: TreeStrategy, k: int) -> np.ndarray:
        """uniform, or geometric: depth d gets b^((k - 1) d / 3) (Cormode et al. 2012)."""
        depths = np.array(tree.measured_depths, dtype=float)
        if self.budget == "uniform":
            return np.ones(depths.size)
        return float(self.branching) ** ((k - 1) * depths / 3.0)

    def plan(self, shape, epsilon: float) -> Strategy:
        shape, side, tree = self._tree(shape)
        weights = self.depth_weights(tree, len(shape))
        return Strategy(tree.blocks(), fit_budget(list(epsilon * weights / weights.sum()), epsilon), shape=tree)

    def _vector(self, counts: np.ndarray) -> np.ndarray:
        shape, side, tree = self._tree(counts.shape)
        cube = np.zeros((side,) * len(shape), dtype=np.int64)
        cube[tuple(slice(0, n) for n in shape)] = counts
        x = np.zeros(tree.n, dtype=np.int64)
        x[morton_order(side, int(self.branching), len(shape))] = cube.ravel()
        return x

    def estimate(self, shape, measurements: Measurements) -> MortonTreeEstimate:
        shape, side, tree = self._tree(shape)
        values: list = [None] * (tree.depth + 1)
        variances: list = [None] * (tree.depth + 1)
        for d, m in zip(tree.measured_depths, measurements.measurements):
            values[d], variances[d] = m.values, m.variance
        fitted = tree_gls(tree, values, variances, total=measurements.total)
        return MortonTreeEstimate(shape, side, morton_order(side, int(self.branching), len(shape)), fitted)


class Quadtree(KDHierarchy):
    """The quadtree of Cormode et al. (ICDE 2012): a 2-D hierarchy of branching 2 (fan-out 4)."""

    name = "quadtree"
    CLI_OPTIONS = {"budget": "budget", "measure_root": "measure_root"}

    PARAMS = tuple(p for p in KDHierarchy.PARAMS if p.name != "branching")

    branching = 2

    def _tree(self, shape):
        if len(check_shape(shape)) != 2:
            raise ParameterError("a quadtree needs a 2-D grid; use KDHierarchy for k dimensions")
        return super()._tree(shape)


def _check_privelet_axes(value, name: str):
    axes = check_axes(value, name)
    for spec in axes if isinstance(axes, list) else [axes]:
        if spec not in AXIS_KINDS:
            raise ParameterError(f"every axis of privelet must be 'haar' or 'identity', got {spec!r}")
    return axes


class Privelet(Kronecker):
    """k-D Privelet (Xiao, Wang and Gehrke, "Differential Privacy via Wavelet Transforms",
    ICDE 2010, section V): the Haar transform applied along every axis (or the identity along
    the axes listed as ``"identity"``, Privelet*'s choice for small axes).

    A k-D coefficient c is a product of one 1-D Haar coefficient per axis; its weight is the
    product of the 1-D weights, W(c) = prod_a W_a(c_a) with W_a = 2 m (m leaves per half) for
    a difference and the axis' padded size for its average, so the generalised sensitivity is
    prod_a (1 + h_a) (h_a = ceil(log2 n_a); 1 for an identity axis) and Privelet adds Laplace
    noise of scale lambda / W(c), lambda = prod_a (1 + h_a) / epsilon.  On the integer
    differences d = W(c) c that is the same scale lambda for every product block, i.e. a
    :class:`Kronecker` of per-axis Haar levels with uniform budgets: every block gets
    epsilon / prod_a (1 + h_a).  Estimate: exact least squares by the per-axis factorisation
    (:class:`KronEstimate`); when every side is a power of two the system is square and this
    is Privelet's inverse transform, otherwise it also uses that the padding cells are empty.
    """

    name = "privelet"
    CLI_OPTIONS = {"branching": "axes"}

    PARAMS = (
        Param(
            "axes",
            Custom(_check_privelet_axes, "'haar' or 'identity', or a list of them (one per axis)", parse=parse_axes),
            "per-axis transform: Haar (Privelet) or identity (Privelet*'s untransformed axes)",
            default="haar",
            positional=True,
        ),
        *Mechanism.PARAMS,
    )

    budget = "uniform"


#: Largest padded cube (cells) a k-D hierarchy candidate of ``auto`` may have.
AUTO_CUBE_LIMIT = 1 << 24


def kronecker_candidates(shape, *, neighbours="add_remove", noise="auto", fast=False) -> list:
    """Kronecker configurations ``auto`` ranks: flat (identity), Haar, and trees of branching
    2, 4, 8, 16 on every axis, with uniform and geometric budgets."""
    out = [Kronecker("identity", neighbours=neighbours, noise=noise)]
    out.append(Kronecker("haar", neighbours=neighbours, noise=noise))
    for b in (2, 4, 8, 16) if not fast else (4, 16):
        for rule in BUDGET_RULES:
            out.append(Kronecker(b, budget=rule, neighbours=neighbours, noise=noise))
    return out


def hierarchy_candidates_kd(shape, *, neighbours="add_remove", noise="auto", fast=False) -> list:
    """k-D hierarchies ``auto`` ranks: branching 2, 4, 8 with uniform and geometric budgets,
    those whose padded cube has at most :data:`AUTO_CUBE_LIMIT` cells."""
    shape = check_shape(shape)
    out = []
    for b in (2, 4, 8):
        side = 1
        while side < max(shape):  # the padded cube's side, as KDHierarchy._tree pads it
            side *= b
        if side ** len(shape) > AUTO_CUBE_LIMIT:
            continue
        for rule in BUDGET_RULES:
            out.append(KDHierarchy(b, budget=rule, neighbours=neighbours, noise=noise))
    return out


# ----------------------------------------------------------------------------- saved releases
QARDAJI_2013 = Citation(
    "Qardaji, Yang and Li", "Understanding Hierarchical Methods for Differentially Private Histograms", "PVLDB 2013"
)


GRID_MECHANISMS.add(
    Kronecker,
    summary="Kronecker products of per-axis 1-D strategies (identity = flat, Haar = k-D Privelet, trees) "
    "with exact per-axis least squares",
    citation=Citation(
        "Miklau",
        "Differentially-Private Batch Query Answering: Exploiting the Workload vs. Exploiting the Data",
        "DIMACS 2012",
    ),
    auto=True,
    candidates=kronecker_candidates,
)


GRID_MECHANISMS.add(
    KDHierarchy,
    summary="the k-D hierarchy of fan-out b^k over the padded cube, exact tree least squares in Morton order",
    citation=QARDAJI_2013,
    auto=True,
    candidates=hierarchy_candidates_kd,
)


GRID_MECHANISMS.add(
    Quadtree,
    summary="the 2-D quadtree (kd_hierarchy with branching 2), uniform or geometric budgets",
    citation=Citation(
        "Cormode, Procopiuc, Srivastava, Shen and Yu", "Differentially Private Spatial Decompositions", "ICDE 2012"
    ),
)


GRID_MECHANISMS.add(
    Privelet,
    summary="k-D Privelet: the Haar transform on every axis (or identity on chosen axes), Privelet's "
    "weights, exact least squares per axis",
    citation=Citation("Xiao, Wang and Gehrke", "Differential Privacy via Wavelet Transforms", "ICDE 2010"),
)


for _name, _factory, _summary in (
    ("all-rectangles", all_rectangles, "every rectangle of the grid (products of all ranges per axis)"),
    ("prefix-rectangles", prefix_rectangles, "dominance counts: the k-D CDF, one per cell"),
    ("marginals", marginals, "all k-way marginals (default 2-way): cells of k axes, the others summed"),
):
    GRID_WORKLOADS.register(Entry("k-D workload", _name, _summary, QARDAJI_2013, factory=_factory, auto=True))


def _check_rebuilt_noise(saved: NoiseSpec, rebuilt: NoiseSpec) -> None:
    """Refuse a saved block whose noise differs from its design's calibration as rebuilt here:
    the release was made with another design (e.g. another quantisation of an optimised
    strategy), and its values would be read against the wrong matrix and variance."""
    if saved.kind != rebuilt.kind or not math.isclose(saved.scale, rebuilt.scale, rel_tol=1e-9):
        raise DataError(
            f"the saved release's noise ({saved.kind}, scale {saved.scale:.6g}) does not match its design as "
            f"rebuilt by this version of dprange ({rebuilt.kind}, scale {rebuilt.scale:.6g}): it was made with "
            "another design and cannot be loaded here"
        )


def _check_rebuilt_design(saved, block) -> None:
    """Refuse a saved block whose recorded design digest differs from the block rebuilt here:
    an optimised strategy is rebuilt from the disk cache or optimised again, and another
    strategy (another cache file at the key, another machine's optimisation) can have the
    same noise scale (norm-keeping quantisation gives every such product the same
    sensitivity); its values would be read against the wrong matrix.  Releases saved before
    the digest was recorded have none and are checked by their noise only."""
    if saved is not None and saved != design_digest(block):
        raise DataError(
            "the saved release's measured strategy differs from the one rebuilt here (from the strategy "
            "cache or a new optimisation): its values would be read against the wrong matrix; load it "
            "where its strategy is cached, or with an empty strategy cache (DPRANGE_CACHE_DIR)"
        )


def _measured_with(mech: GridMechanism, plan: Strategy, epsilon: float, delta: float, saved) -> list:
    """The saved blocks as measurements of ``plan``; DataError where they do not fit it."""
    if len(saved) != len(plan.blocks):
        raise DataError(f"the saved release has {len(saved)} measured blocks, its design has {len(plan.blocks)}")
    measured = []
    for block, item, expected in zip(plan.blocks, saved, mech._noise(plan, epsilon, delta)):
        spec = NoiseSpec(item["noise"]["kind"], float(item["noise"]["scale"]))
        _check_rebuilt_noise(spec, expected)
        _check_rebuilt_design(item.get("design"), block)
        rows = block.shape[0]  # in text, counted before they are parsed (answers.bounded_json)
        values = np.asarray(
            sized(item["values"], rows, f"a saved block has {{size}} values, its design {rows} rows"), dtype=float
        )
        if values.shape != (rows,):
            raise DataError(f"a saved block has {values.size} values, its design {rows} rows")
        measured.append(LinearMeasurement(block, values, spec.variance, spec))
    return measured


def _matching_design(mech: GridMechanism, shape, epsilon: float, delta: float, saved) -> list:
    """The saved blocks measured with the first of :meth:`GridMechanism.saved_plans` they fit
    (blocks, rows, noise and the design digest where saved); the current design's refusal where
    none does."""
    plans = mech.saved_plans(shape, epsilon)
    try:
        return _measured_with(mech, plans[0], epsilon, delta, saved)
    except DataError:
        for plan in plans[1:]:  # an earlier design, where the current one does not fit
            try:
                return _measured_with(mech, plan, epsilon, delta, saved)
            except DataError:
                continue
        raise


def load_grid_release(text) -> GridRelease:
    """A :class:`~dprange.answers.grid.GridRelease` from :meth:`GridRelease.to_json` (text or
    dict): the mechanism's design is rebuilt from its parameters, the saved noisy values are
    checked against it (in text, counted against its rows before they are parsed), and the
    estimate and its exact errors are recomputed."""
    data = bounded_loads(text, [("measurements", ANY, "values")]) if isinstance(text, str) else text
    if not isinstance(data, dict) or data.get("kind") != "grid_release":
        raise DataError("not a saved grid release (kind 'grid_release')")
    try:
        cls = cast("type[GridMechanism]", GRID_MECHANISMS[data["mechanism"]].factory)
        parameters = dict(data["parameters"])
        described = parameters.pop("strategy", None)  # how the design was obtained: kept, not rebuilt from
        mech = cls(**parameters)
        shape = check_shape(data["shape"])
        mech.follow_delta(float(data["delta"]))  # a design chosen by delta is rebuilt at the saved one
        saved = data["measurements"]
        measured = _matching_design(mech, shape, float(data["epsilon"]), float(data["delta"]), saved)
        total = None if data["total"] is None else float(data["total"])
        meas = Measurements(
            measured,
            measured[0].block.shape[1],
            float(data["epsilon"]),
            float(data["delta"]),
            data["neighbours"],
            total,
            seeded=bool(data["seeded"]),
        )
        domain = None if data["domain"] is None else ProductDomain.from_dict(data["domain"])
    except (KeyError, TypeError) as exc:
        raise DataError(f"the saved grid release is incomplete or malformed ({exc!r})") from None
    estimate = mech.estimate(shape, meas)
    kept = mech.parameters() | ({} if described is None else {"strategy": described})
    labels = Labels.from_dict(data.get("input"))  # version 2 describes its input; absent in version 1
    release = GridRelease(
        shape, estimate, meas, mechanism=cls.name, parameters=kept, domain=domain, input_labels=labels
    )
    unit = data.get("privacy_unit")
    if unit is not None:
        if not isinstance(unit, dict) or not isinstance(unit.get("epsilon"), (int, float)):
            raise DataError("the saved privacy unit is malformed; the file is corrupt")
        release.privacy_unit = unit
    selection = data.get("selection")  # a private choice before measuring (the 2-D auto-data)
    if selection is not None:
        if not isinstance(selection, dict) or not isinstance(selection.get("epsilon"), (int, float)):
            raise DataError("the saved selection is malformed; the file is corrupt")
        release.selection = selection
    if data.get("public_marginals"):
        try:
            published = {
                tuple(item["axes"]): np.asarray(item["values"], dtype=float) for item in data["public_marginals"]
            }
        except (KeyError, TypeError) as exc:
            raise DataError(f"the saved public marginals are malformed ({exc!r})") from None
        release = constrain(release, published)
    return release
