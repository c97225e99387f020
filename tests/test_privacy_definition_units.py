"""Privacy of releases with a privacy unit (many rows per id) against the definition.

Tiny data: 3 ids with 1-3 rows each, 3 bins (2 bins and 2 groups for the grouped case).  The
law of a release is enumerated exactly: every id keeps a uniform k-subset of its rows
(itertools.combinations, each with probability 1 / C(rows, k); tests/engines/test_bounding.py
checks that the code draws this law) and then the measured rows of the mechanism get the
noise the code calibrated, read from the release itself (its measurements' blocks and
NoiseSpecs; the exact pmf of :func:`dprange.privacy.noise.pmf`).  P(y | D) is the mixture over
the bounded histograms.  For every id removed (add/remove one id with all its rows), the worst
log ratio over every output y is computed on the box [smallest mean - 1, largest mean + 1] per
measured row: beyond it every component's discrete-Laplace density has the same exponential
tail, so the ratio is constant there and the box holds the supremum.

Each check also runs with contribution bounding switched off in the calibration (k rows kept
but noise calibrated for one row): the loss then exceeds epsilon, so the test can fail.

A data-aware mechanism: StructureFirst's private boundary step (an exponential mechanism over
bucketings), its exact law (every choice enumerated by tests/_helpers.Script) mixed over the
bounding law, against its id-level share; and the whole StructureFirst release (structure and
noisy bucket trees) against epsilon (worst loss 0.63 for epsilon 0.9 at k = 3; 1.89 with the
release calibrated for one row).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from _helpers import Script

import dprange
import dprange.data_aware.steps as data_aware_steps
from dprange import Domain, ProductDomain
from dprange.data_aware.structure_first import StructureFirst
from dprange.privacy.noise import pmf

pytestmark = pytest.mark.usefixtures("private_cache")

EPSILON = 0.9

#: id -> [(group, bin)] of its rows
ROWS = {
    "a": [(0, 0), (0, 0), (1, 1)],
    "b": [(0, 1), (1, 1)],
    "c": [(1, 0)],
}


def frame(rows: dict) -> pd.DataFrame:
    records = [(i, g, b) for i, rs in rows.items() for g, b in rs]
    return pd.DataFrame(records, columns=["id", "g", "x"])


def bounded_law(rows: dict, k: int, groups: int, bins: int, m: int = 1) -> dict:
    """{bounded counts (groups x bins, as a tuple): probability} of keeping, per id, its
    groups' m lowest of a uniform random order and then a uniform k-subset per (id, group)."""
    law: dict = {(0,) * (groups * bins): Fraction(1)}
    for rs in rows.values():
        choices: dict = {}
        own_groups = sorted({g for g, _ in rs})
        group_sets = list(itertools.combinations(own_groups, min(m, len(own_groups))))
        for chosen in group_sets:
            per_group = []
            for g in chosen:
                cells = [b for gg, b in rs if gg == g]
                subsets = list(itertools.combinations(range(len(cells)), min(k, len(cells))))
                per_group.append([([cells[i] for i in s], Fraction(1, len(subsets))) for s in subsets])
            for combo in itertools.product(*per_group):
                counts = np.zeros(groups * bins, dtype=np.int64)
                p = Fraction(1, len(group_sets))
                for g, (cells, q) in zip(chosen, combo):
                    for b in cells:
                        counts[g * bins + b] += 1
                    p *= q
                choices[tuple(counts)] = choices.get(tuple(counts), 0) + p
        new: dict = {}
        for h, p in law.items():
            for c, q in choices.items():
                key = tuple(np.add(h, c))
                new[key] = new.get(key, 0) + p * q
        law = new
    return law


def design(release) -> tuple[np.ndarray, list]:
    """(dense strategy, [(kind, scale)] per measured row) of a release's measurements."""
    blocks, specs = [], []
    for m in release.measurements.measurements:
        dense = m.block.dense()
        blocks.append(dense)
        specs += [(m.noise.kind, m.noise.scale)] * dense.shape[0]
    return np.vstack(blocks), specs


def log_law(law: dict, A: np.ndarray, specs: list, bins: int, grids: list) -> np.ndarray:
    """log P(y) on the product grid for the mixture over bounded counts (groups measured apart)."""
    groups = len(next(iter(law))) // bins
    total = None
    for h, p in law.items():
        h = np.asarray(h).reshape(groups, bins)
        means = np.concatenate([A @ h[g] for g in range(groups)])
        logp = np.asarray(math.log(p))
        for axis, (mean, (kind, scale), grid) in enumerate(zip(means, specs * groups, grids)):
            vals = np.log(pmf(kind, scale, (grid - mean).astype(np.int64)))
            logp = logp[..., None] + vals.reshape((1,) * axis + (-1,))
        total = logp if total is None else np.logaddexp(total, logp)
    return total


def worst_loss(rows: dict, k: int, A, specs, *, groups=1, bins=3, m=1) -> float:
    """max over ids removed and outputs of |log P(y | D) - log P(y | D - id)|."""
    if groups == 1:
        rows = {i: [(0, b) for _, b in rs] for i, rs in rows.items()}
    laws = [bounded_law(rows, k, groups, bins, m)]
    laws += [bounded_law({i: r for i, r in rows.items() if i != gone}, k, groups, bins, m) for gone in rows]
    grids = []
    for g in range(groups):
        means = np.array([A @ np.asarray(h).reshape(groups, bins)[g] for law in laws for h in law])
        grids += [np.arange(lo - 1, hi + 2) for lo, hi in zip(means.min(axis=0), means.max(axis=0))]
    full = log_law(laws[0], A, specs, bins, grids)
    return max(float(np.max(np.abs(full - log_law(law, A, specs, bins, grids)))) for law in laws[1:])


def unit_release(mechanism, k, *, unit=True, **kw):
    bins = kw.pop("bins", 3)
    data = frame(ROWS)
    extra = {"privacy_id": "id", "max_rows_per_id": k} if unit else {}
    return dprange.release(
        data, Domain.integers(0, bins - 1), EPSILON, column="x", mechanism=mechanism, rng=3, **extra, **kw
    )


@pytest.mark.parametrize("mechanism", ["flat", "hierarchical", "optimized"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_unit_release_meets_epsilon_for_one_id(mechanism, k):
    release = unit_release(mechanism, k)
    assert release.epsilon == EPSILON
    assert release.provenance.privacy_unit["relation"] == "add or remove one id with all its rows"
    A, specs = design(release)
    loss = worst_loss(ROWS, k, A, specs)
    assert loss <= EPSILON * (1 + 1e-12)
    if k == 3 and mechanism == "flat":  # id a's three rows can all land in one bin: the bound is met
        assert loss >= EPSILON * (1 - 1e-6)


@pytest.mark.parametrize("mechanism", ["flat", "hierarchical"])
def test_the_loss_exceeds_epsilon_when_the_noise_ignores_the_bound(mechanism):
    """k = 3, the largest number of rows of an id, but noise calibrated for one row."""
    row_level = unit_release(mechanism, 3, unit=False)
    A, specs = design(row_level)
    assert worst_loss(ROWS, 3, A, specs) > 1.5 * EPSILON


def test_grouped_release_meets_epsilon_for_one_id():
    """Two groups, 2 bins, k = 2 rows per id per group, m = 1 group per id: each group's
    release at epsilon / m; the joint output of both groups is epsilon-DP for one id."""
    for m in (1, 2):
        grouped = unit_release("flat", 2, by="g", groups=[0, 1], max_groups_per_id=m, bins=2)
        assert grouped.epsilon == EPSILON
        assert all(r.epsilon * m <= EPSILON for r in grouped.releases)
        A, specs = design(grouped.releases[0])
        assert design(grouped.releases[1])[1] == specs
        loss = worst_loss(ROWS, 2, A, specs, groups=2, bins=2, m=m)
        assert loss <= EPSILON * (1 + 1e-12)
    # m = 2 groups kept per id but each group released at the full epsilon: the loss doubles
    wrong = unit_release("flat", 2, by="g", groups=[0, 1], max_groups_per_id=1, bins=2)
    A, specs = design(wrong.releases[0])
    assert worst_loss(ROWS, 2, A, specs, groups=2, bins=2, m=2) > 1.4 * EPSILON


@pytest.mark.parametrize("k", [1, 3])
def test_unit_quantiles_meet_epsilon_for_one_id(k):
    """The histogram route of dprange.quantiles: rows bounded per id, its release at epsilon / k."""
    result = dprange.quantiles(
        frame(ROWS),
        [0.5],
        EPSILON,
        bounds=(0, 2),
        integer=True,
        method="histogram",
        column="x",
        privacy_id="id",
        max_rows_per_id=k,
        rng=1,
    )
    assert result.epsilon == EPSILON and result.privacy_unit["max_rows_per_id"] == k
    A, specs = design(result.release)
    assert worst_loss(ROWS, k, A, specs) <= EPSILON * (1 + 1e-12)
    unbounded = dprange.quantiles(
        frame(ROWS), [0.5], EPSILON, bounds=(0, 2), integer=True, method="histogram", column="x", rng=1
    )
    A, specs = design(unbounded.release)
    assert worst_loss(ROWS, 3, A, specs) > 1.5 * EPSILON


def test_unit_grid_release_meets_epsilon_for_one_id():
    """release_grid with privacy_id on a 2 x 2 grid (Kronecker): the cells are the bins."""
    data = frame(ROWS).assign(y=lambda f: (f.g + f.x) % 2)[["x", "y", "id"]]
    cells = {i: [(0, 2 * (b % 2) + (g + b) % 2) for g, b in rs] for i, rs in ROWS.items()}
    domain = ProductDomain([Domain.integers(0, 1), Domain.integers(0, 1)])
    for k, unit in ((2, True), (3, True), (3, False)):
        extra = {"privacy_id": "id", "max_rows_per_id": k} if unit else {}
        columns = data if unit else data[["x", "y"]]
        grid = dprange.release_grid(columns, domain, EPSILON, mechanism="kronecker", rng=2, **extra)
        A, specs = design(grid)
        loss = worst_loss(cells, k, A, specs, bins=4)
        assert (loss <= EPSILON * (1 + 1e-12)) == unit


# ----------------------------------------------------------------------------- a data-aware step
def boundary_law(monkeypatch, mech, x, epsilon_step) -> dict:
    """{bucket starts: log P} of StructureFirst's boundary step on counts x, every run of its
    exponential-mechanism choices enumerated with exact probabilities (tests/_helpers.Script)."""
    with monkeypatch.context() as patch:
        script = Script(patch, [data_aware_steps])
        runs = script.enumerate(lambda: tuple(mech.boundaries(np.asarray(x), epsilon_step, rng=0).tolist()))
    return {starts: log_p for log_p, starts in runs}


def mixture_law(monkeypatch, mech, rows, k, bins, epsilon_step) -> dict:
    """{starts: log P(starts | D)}: the boundary law mixed over the exact law of bounded counts."""
    out: dict = {}
    for counts, p in bounded_law(rows, k, 1, bins).items():
        for starts, log_p in boundary_law(monkeypatch, mech, counts, epsilon_step).items():
            term = math.log(p) + log_p
            out[starts] = np.logaddexp(out[starts], term) if starts in out else term
    return out


def boundary_worst_loss(monkeypatch, mech, rows, k, bins, epsilon_step) -> float:
    """max over ids removed and bucket starts of |log P(starts | D) - log P(starts | D - id)|."""
    rows = {i: [(0, b) for _, b in rs] for i, rs in rows.items()}
    full = mixture_law(monkeypatch, mech, rows, k, bins, epsilon_step)
    worst = 0.0
    for gone in rows:
        less = mixture_law(monkeypatch, mech, {i: r for i, r in rows.items() if i != gone}, k, bins, epsilon_step)
        worst = max(worst, max(abs(full[s] - less[s]) for s in full))
    return worst


#: Found by searching 3 ids with 3, 1, 1 rows on 4 bins for the largest loss of the unbounded step.
BOUNDARY_ROWS = {"a": [(0, 1)] * 3, "b": [(0, 0)], "c": [(0, 0)]}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_data_aware_step_meets_its_share_for_one_id(monkeypatch, k):
    """StructureFirst's private boundary step (an exponential mechanism over bucketings, 3 buckets
    on 4 bins, counts clipped at 3) through the ids path: its exact output law, mixed over the
    exact law of contribution bounding, changes by at most the step's id-level share (ratio x
    epsilon) when one id is removed; with the rows bounded to k = 3 but the step calibrated for
    one row (no privacy_id) it exceeds that share (1.2 times)."""
    mech = StructureFirst(buckets=3, max_count=3, grid=1, ratio=0.5)
    seen: list = []
    original = StructureFirst.boundaries

    def boundaries(self, counts, epsilon_step, rng=None):
        seen.append(epsilon_step)
        return original(self, counts, epsilon_step, rng)

    data, domain = frame(BOUNDARY_ROWS), Domain.integers(0, 3)
    with monkeypatch.context() as patch:
        patch.setattr(StructureFirst, "boundaries", boundaries)
        release = dprange.release(data, domain, EPSILON, column="x", mechanism=mech, privacy_id="id", max_rows_per_id=k)
        row_level = dprange.release(data, domain, EPSILON, column="x", mechanism=mech)
    share = EPSILON * 0.5
    assert release.epsilon == EPSILON and seen[0] * k <= share * (1 + 1e-12)
    assert boundary_worst_loss(monkeypatch, mech, BOUNDARY_ROWS, k, 4, seen[0]) <= share * (1 + 1e-12)
    assert row_level.epsilon == EPSILON and seen[1] == pytest.approx(share)
    if k == 3:
        assert boundary_worst_loss(monkeypatch, mech, BOUNDARY_ROWS, k, 4, seen[1]) > 1.15 * share


def structure_first_runs(monkeypatch, mech, counts, row_epsilon) -> dict:
    """{starts: (log P(starts), noiseless measured values, [(kind, scale)] per value)} of a whole
    StructureFirst release on counts: every boundary choice enumerated (Script), noise drawn as
    zeros, so each run's measured values are the exact answers of its bucket trees."""
    with monkeypatch.context() as patch:
        script = Script(patch, [data_aware_steps])
        runs = script.enumerate(lambda: mech.release(np.asarray(counts), row_epsilon, rng=0))
    out = {}
    for log_p, release in runs:
        levels = release._reduced[0].measurements
        values = np.concatenate([level.values for level in levels])
        specs = [(level.noise.kind, level.noise.scale) for level in levels for _ in level.values]
        out[tuple(release.parameters["starts"])] = (log_p, values, specs)
    return out


def structure_first_worst_loss(monkeypatch, mech, rows, k, bins, row_epsilon) -> float:
    """max over ids removed, bucket starts s and noisy measurements y of |log P(s, y | D) -
    log P(s, y | D - id)|, each law the mixture over the bounded counts (box argument of the
    module doc, per structure)."""
    rows = {i: [(0, b) for _, b in rs] for i, rs in rows.items()}
    datasets = [rows] + [{i: r for i, r in rows.items() if i != gone} for gone in rows]
    components = []  # per dataset: {starts: [(log weight, means)]}, and the specs per starts
    specs_of: dict = {}
    for data in datasets:
        parts: dict = {}
        for counts, p in bounded_law(data, k, 1, bins).items():
            for starts, (log_p, values, specs) in structure_first_runs(monkeypatch, mech, counts, row_epsilon).items():
                assert specs_of.setdefault(starts, specs) == specs  # the noise depends on the structure only
                parts.setdefault(starts, []).append((math.log(p) + log_p, values))
        components.append(parts)
    worst = 0.0
    for starts, specs in specs_of.items():
        means = np.array([m for parts in components for _, m in parts[starts]])
        grids = [np.arange(lo - 1, hi + 2) for lo, hi in zip(np.floor(means.min(0)), np.ceil(means.max(0)))]

        def log_density(parts, grids=grids, specs=specs):
            total = None
            for weight, mean in parts:
                logp = np.asarray(weight)
                for axis, (m, (kind, scale), grid) in enumerate(zip(mean, specs, grids)):
                    vals = np.log(pmf(kind, scale, np.round(grid - m).astype(np.int64)))
                    logp = logp[..., None] + vals.reshape((1,) * axis + (-1,))
                total = logp if total is None else np.logaddexp(total, logp)
            return total

        full = log_density(components[0][starts])
        for parts in components[1:]:
            worst = max(worst, float(np.max(np.abs(full - log_density(parts[starts])))))
    return worst


def test_a_whole_data_aware_release_meets_epsilon_for_one_id(monkeypatch):
    """The whole StructureFirst release (boundaries, then noisy bucket trees) through the ids
    path, k = 3 (id a's three rows in one bin): its exact law over (structure, measurements),
    mixed over the bounding law, is epsilon-DP for one id; calibrated for one row it is not."""
    mech = StructureFirst(buckets=3, max_count=3, grid=1, ratio=0.5)
    seen: list = []
    original = StructureFirst.release

    def release(self, counts, epsilon, **kw):
        seen.append(epsilon)
        return original(self, counts, epsilon, **kw)

    data, domain = frame(BOUNDARY_ROWS), Domain.integers(0, 3)
    with monkeypatch.context() as patch:
        patch.setattr(StructureFirst, "release", release)
        dprange.release(data, domain, EPSILON, column="x", mechanism=mech, privacy_id="id", max_rows_per_id=3)
        dprange.release(data, domain, EPSILON, column="x", mechanism=mech)
    assert seen[0] * 3 <= EPSILON and seen[1] == EPSILON
    assert structure_first_worst_loss(monkeypatch, mech, BOUNDARY_ROWS, 3, 4, seen[0]) <= EPSILON * (1 + 1e-12)
    assert structure_first_worst_loss(monkeypatch, mech, BOUNDARY_ROWS, 3, 4, seen[1]) > 1.5 * EPSILON
