"""Privacy of whole 2-D releases against the definition: for every pair of neighbouring datasets
on tiny grids, the exact probability of every output, and max log P_x(o) / P_y(o) <= epsilon.

* Optimised k-D mechanisms (``optimized_kronecker``, ``optimized_marginals``; McKenna, Miklau,
  Hay and Machanavajjhala, VLDB 2018): the output is the vector of noisy integer answers of
  the measured blocks, independent discrete-Laplace (or discrete-Gaussian) rows around the
  exact answers.  The log-ratio of a product law is the sum of the rows' log-ratios, so its
  maximum over all outputs is the sum of the per-row maxima (:func:`row_loss`, from the pmf
  as sampled; delta(epsilon) exactly by ``_helpers.gaussian_delta``).  A small case is
  also enumerated output by output.  The Kronecker's Gaussian template (p-identity-l2) has a
  quantised strategy with sigma ~ 2e10, beyond the lattice sums: its delta(epsilon) is a
  function of one projection of the noise, bracketed to a relative 1e-8
  (``_helpers.discrete_gaussian_delta_projection``).
* Data-aware trees (``hybrid_tree``, Cormode et al., ICDE 2012; ``kd_tree``, Xiao, Xiong and
  Yuan, SDM 2010 workshop) release a data-dependent structure (private-median cuts) and then
  noisy counts of its nodes: an output is (structure S, counts c), P_x(S, c) = P_x(S)
  P_x(c | S).  The structure law is enumerated by running ``release`` itself once per
  sequence of cuts, with the exponential mechanism's sampler replaced by a scripted chooser
  that returns each candidate in turn and records its exact probability from the exponents
  the code passes (:func:`dprange.privacy.exact_choice.exact_choice`'s law; that the sampler
  draws it is tested in tests/data_aware/test_spatial_trees.py), and the count noise replaced by zeros,
  so the counts the code measures and the noise specs it uses are read from the release.
  Then max over (S, c) of log P_x(S, c) / P_y(S, c) = max_S [log P_x(S) / P_y(S) + the
  worst count loss given S] exactly.
* ``auto_nonnegative``, ``auto_toward_nonnegative``, ``auto_support`` and ``auto_pruned`` are ``auto``'s
  measurements (the linear designs' test) and post-processing that reads the counts only through
  them.
* ``dawa_hilbert`` (Li, Hay, Miklau and Wang, PVLDB 2014) on a 2 x 2 grid is DAWA on the 4
  cells in Hilbert order: the buckets' law is its PrivTree partition's, written out exactly
  (``_helpers.privtree_law``); the bucket counts are read from ``release`` run with each
  partition in turn.  ``dawa_pruned`` reads the counts only through that release
  (tests/data_aware/test_pruned_hilbert.py: given another grid's DAWA release, it publishes that
  grid's pruned cells).

Every test also shows it can fail: the same code run with twice the budget (or with a
replace sensitivity under-stated) has a worst loss above epsilon."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _helpers import (
    Script,
    dawa_worst,
    discrete_gaussian_delta_projection,
    gaussian_delta,
    grid_neighbours,
    row_loss,
    sampled_sigma2,
    worst_over_neighbours,
)
from scipy import special

import dprange.data_aware.spatial_trees as spatial_trees_module
from dprange import AutoTowardNonnegative, DAWAHilbert, HybridTree, KDTree, NonnegativeAuto, PrunedAuto, SupportAuto
from dprange.mechanisms.optimized_grid import OptimizedKronecker, OptimizedMarginals
from dprange.operators import definition_sensitivity_power
from dprange.privacy.noise import NoiseSpec

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


EPS = 0.9


@pytest.fixture(autouse=True)
def measure_the_optimised_product(monkeypatch):
    """The privacy of the optimised Kronecker product itself: on these tiny grids its identity
    product often has the lower error as released and would be measured instead
    (``OptimizedKronecker.identity_is_lower``), which is the identity's test again."""
    monkeypatch.setattr(OptimizedKronecker, "identity_is_lower", lambda self, *args: False)


def measured_rows(mech, counts, epsilon, delta):
    """(exact integer answers of every measured row, their specs, the measurements), from
    ``measure`` run with the noise replaced by zeros (the answers the code measures)."""
    original = NoiseSpec.sample
    NoiseSpec.sample = lambda self, size, rng: np.zeros(size, dtype=np.int64)  # type: ignore[method-assign]
    try:
        meas = mech.measure(counts, epsilon, delta=delta, rng=0)
    finally:
        NoiseSpec.sample = original  # type: ignore[method-assign]
    rows = []
    for m in meas.measurements:
        exact = m.block.matvec(mech._vector(np.asarray(counts)).astype(float))
        np.testing.assert_array_equal(m.values, exact)  # integer answers: no rounding hides a shift
        rows.append(np.asarray(m.values, dtype=np.int64))
    return rows, [m.noise for m in meas.measurements], meas


def linear_worst(mech, x, epsilon, delta=0.0, *, against=None, delta_of=gaussian_delta):
    """Worst loss (Laplace) or delta(``against``) (Gaussian, by ``delta_of``; default epsilon)
    over every neighbour y of ``x``, both directions, and the measurements of x.  The
    neighbours' rows are the same blocks (data-independent operators) applied to y."""
    rows_x, specs, meas = measured_rows(mech, x, epsilon, delta)
    worst = 0.0
    for y in grid_neighbours(x, mech.neighbours):
        vector = mech._vector(y).astype(float)
        shifts = []
        for m, spec, a in zip(meas.measurements, specs, rows_x):
            b = m.block.matvec(vector)
            assert np.all(b == np.round(b))
            diff = b.astype(np.int64) - a
            shifts.extend((spec, int(s)) for s in diff[diff != 0])
        assert shifts, "every neighbour moves some measured row"
        if meas.noise_kind == "gaussian":
            for signed in (shifts, [(spec, -s) for spec, s in shifts]):
                worst = max(worst, delta_of([(spec.scale, s) for spec, s in signed], against or epsilon))
        else:
            worst = max(worst, math.fsum(row_loss(spec, s) for spec, s in shifts))
    return worst, meas


LINEAR = [
    ("kron-all", lambda r, z: OptimizedKronecker("all-rectangles", neighbours=r, noise=z)),
    ("kron-prefix", lambda r, z: OptimizedKronecker("prefix-rectangles", neighbours=r, noise=z)),
    ("marginals-1", lambda r, z: OptimizedMarginals(1, neighbours=r, noise=z)),
    ("marginals-2", lambda r, z: OptimizedMarginals(2, neighbours=r, noise=z)),
]
LINEAR_CASES = [(name, build, r) for name, build in LINEAR for r in ("add_remove", "replace")]
#: Tiny grids (1-3 records); 16 x 2: the prefix optimiser's first non-trivial axis (n = 16:
#: an integer strategy quantised by K = 2^16; on n <= 8 it is the identity).
LINEAR_GRIDS = [np.array([[1, 0], [0, 0]]), np.array([[0, 2], [1, 0]]), np.array([[1, 0, 1], [0, 1, 0]])]


LINEAR_GRIDS += [np.array([[1, 0, 1], [0, 1, 0]]).T, np.eye(16, 2, -3, dtype=np.int64) + np.eye(16, 2, dtype=np.int64)]


LINEAR_GRIDS += [np.array([[1, 0, 2]])]  # one axis of one bin (the marginals' replace fallback)


@pytest.mark.parametrize("name,build,relation", LINEAR_CASES, ids=[f"{c[0]}-{c[2]}" for c in LINEAR_CASES])
def test_optimised_kd_laplace_worst_loss_is_epsilon_on_tiny_grids(name, build, relation):
    """2 x 2, 2 x 3, 3 x 2, 16 x 2 and 1 x 3 grids: the exact worst log-ratio over all outputs and all
    neighbours is at most the recorded epsilon (<= the budget) and attains it (the calibration
    is tight); the same code run with twice the budget exceeds epsilon."""
    mech = build(relation, "discrete_laplace")
    for x in LINEAR_GRIDS:
        worst, meas = linear_worst(mech, x, EPS)
        assert meas.noise_kind == "discrete_laplace"
        assert meas.epsilon <= EPS
        assert worst <= meas.epsilon * (1 + 1e-12)
        assert worst == pytest.approx(meas.epsilon, rel=1e-6)
    doubled, _ = linear_worst(mech, LINEAR_GRIDS[-1], 2 * EPS)
    assert doubled > 1.9 * EPS
    for epsilon in (0.2, 3.0):  # a small epsilon grid
        worst, meas = linear_worst(mech, LINEAR_GRIDS[2], epsilon)
        assert worst <= meas.epsilon * (1 + 1e-12) and worst == pytest.approx(meas.epsilon, rel=1e-6)


@pytest.mark.parametrize("refit", [NonnegativeAuto, AutoTowardNonnegative, SupportAuto, PrunedAuto])
@pytest.mark.parametrize("workload", ["all-rectangles", "prefix-rectangles", "marginals"])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_auto_nonnegative_is_post_processing_of_autos_measurements(monkeypatch, refit, workload, relation):
    """``auto_nonnegative``, ``auto_toward_nonnegative`` (data_aware.nonnegative_grid),
    ``auto_support`` (data_aware.support_grid) and ``auto_pruned`` (data_aware.pruned_grid) record
    one step, the measurements of the design ``auto`` chooses: on 2 x 2, 2 x 3 and 3 x 2 grids their
    exact worst loss over every neighbour is at most the recorded epsilon and attains it (at twice
    the budget it exceeds epsilon), and the release reads the counts only through them: with
    ``measure`` returning one fixed set of measurements, the grid and every neighbour give the
    same cells (the error check's probes drawn from the same seed)."""
    mech = refit(workload=workload, neighbours=relation)
    for x in (*LINEAR_GRIDS[:3], LINEAR_GRIDS[3]):
        inner = mech.least_squares_mechanism(x.shape, EPS)
        worst, meas = linear_worst(inner, x, EPS)
        assert meas.noise_kind == "discrete_laplace"
        assert worst <= meas.epsilon * (1 + 1e-12) and worst == pytest.approx(meas.epsilon, rel=1e-6)
        released = mech.release(x, EPS, rng=0)
        assert released.epsilon == meas.epsilon <= EPS
        assert [s["step"] for s in released.parameters["private_steps"]] == ["measure"]
        fixed = inner.measure(x, EPS, rng=4)
        with monkeypatch.context() as patch:
            patch.setattr(type(inner), "measure", lambda self, counts, epsilon, fixed=fixed, **kwargs: fixed)
            cells = {mech.release(y, EPS, rng=0).counts.tobytes() for y in [x, *grid_neighbours(x, relation)]}
        assert len(cells) == 1
    inner = mech.least_squares_mechanism(LINEAR_GRIDS[2].shape, 2 * EPS)
    assert linear_worst(inner, LINEAR_GRIDS[2], 2 * EPS)[0] > 1.9 * EPS


def test_the_prefix_kronecker_strategy_on_16_bins_is_not_the_identity():
    """The 16 x 2 case above measures a quantised optimised strategy with more than one non-zero
    per column (else it would repeat the identity's test)."""
    (strategy, _) = OptimizedKronecker("prefix-rectangles").axis_strategies((16, 2))
    dense = strategy.block.dense()
    assert strategy.factor > 1 and np.count_nonzero(dense[16:]) > 0


@pytest.mark.parametrize("name,build", LINEAR[2:], ids=[c[0] for c in LINEAR[2:]])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_optimised_marginals_gaussian_delta_is_within_delta(name, build, relation):
    """delta > 0 (discrete Gaussian): the exact hockey-stick divergence of every neighbour pair
    on a 2 x 2 and a 2 x 3 grid is at most delta, and positive (not vacuous); calibrated for
    twice the budget, delta(epsilon) exceeds delta."""
    delta = 1e-5
    mech = build(relation, "gaussian")
    for x in (np.array([[1, 0], [0, 1]]), np.array([[0, 1, 0], [2, 0, 0]])):
        worst, meas = linear_worst(mech, x, EPS, delta)
        assert meas.noise_kind == "gaussian" and meas.epsilon <= EPS
        assert 0.0 < worst <= delta
    assert linear_worst(mech, np.array([[1, 0], [0, 1]]), 2 * EPS, delta, against=EPS)[0] > delta


@pytest.mark.parametrize("name,build", LINEAR[:2], ids=[c[0] for c in LINEAR[:2]])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_optimised_kronecker_gaussian_delta_is_within_delta(name, build, relation):
    """The L2 template (delta > 0, discrete Gaussian, sigma ~ 2e10 on the quantised integer
    strategy): on 2 x 2, 3 x 2 and 2 x 3 grids, for every neighbour pair, delta(epsilon) of the
    released rows (upper end of the projection bracket) is at most delta, and equals the
    continuous Gaussian's at mu = Delta_2 / sigma (Delta_2 of the dense integer Kronecker
    product by the definition: the grids' neighbours attain it, the noise is calibrated on
    it); the zCDP calibration leaves it at 0.24 delta.  Calibrated for twice the budget,
    delta(epsilon) (lower end of the bracket) exceeds delta 390-fold."""
    delta = 1e-5
    mech = build(relation, "gaussian")
    for x in (np.array([[1, 0], [0, 1]]), np.array([[0, 1], [2, 0], [0, 1]]), np.array([[0, 1, 0], [2, 0, 0]])):
        worst, meas = linear_worst(mech, x, EPS, delta)
        factors = [s.block.dense() for s in mech.axis_strategies(x.shape)]  # of the template measured
        assert mech._template() == "p-identity-l2" and meas.noise_kind == "gaussian" and meas.epsilon <= EPS
        assert all(np.count_nonzero(f[f.shape[1] :]) > 1 for f in factors)  # not the identity
        assert 0.2 * delta < worst <= delta
        sensitivity = math.sqrt(definition_sensitivity_power(np.kron(*factors), 2, relation))
        mu = sensitivity / math.sqrt(sampled_sigma2(meas.measurements[0].noise.scale))
        continuous = special.ndtr(mu / 2 - EPS / mu) - math.exp(EPS) * special.ndtr(-mu / 2 - EPS / mu)
        assert worst == pytest.approx(continuous, rel=1e-6)
    lower = lambda pairs, e: discrete_gaussian_delta_projection(pairs, e)[0]  # noqa: E731
    assert linear_worst(mech, np.array([[1, 0], [0, 1]]), 2 * EPS, delta, against=EPS, delta_of=lower)[0] > delta


def test_marginal_output_law_enumerated_output_by_output():
    """1-way marginals on a 2 x 2 grid: the joint law of the shifted rows enumerated on every
    output value where a row's log-ratio changes (beyond them each row's ratio is constant),
    from the pmf of the noise as sampled; its maximum equals the per-row sum and epsilon."""
    for relation in ("add_remove", "replace"):
        mech = OptimizedMarginals(1, neighbours=relation, noise="discrete_laplace")
        x = np.array([[1, 0], [0, 1]])
        rows_x, specs, meas = measured_rows(mech, x, EPS, 0.0)
        worst = 0.0
        for y in grid_neighbours(x, relation):
            pair = 0.0
            rows_y, _, _ = measured_rows(mech, y, EPS, 0.0)
            moved = [(spec, int(a), int(b)) for spec, ra, rb in zip(specs, rows_x, rows_y) for a, b in zip(ra, rb)]
            moved = [m for m in moved if m[1] != m[2]]
            assert 1 <= len(moved) <= 4
            axes = [np.arange(min(a, b) - 1, max(a, b) + 2) for _, a, b in moved]
            for out in itertools.product(*axes):
                log_p = sum(math.log(float(spec.pmf(np.array([o - a]))[0])) for (spec, a, _), o in zip(moved, out))
                log_q = sum(math.log(float(spec.pmf(np.array([o - b]))[0])) for (spec, _, b), o in zip(moved, out))
                pair = max(pair, log_p - log_q)
            assert pair <= math.fsum(row_loss(s, b - a) for s, a, b in moved) * (1 + 1e-12)
            worst = max(worst, pair)
        assert worst <= meas.epsilon * (1 + 1e-12)
        assert worst == pytest.approx(meas.epsilon, rel=1e-6)


def tree_outputs(script, mech, x, epsilon):
    """{structure: (log P_x(structure), [(spec, exact counts of a measured level)])} of a tree
    mechanism on ``x``, from its own release."""
    out = {}
    for log_p, rel in script.enumerate(lambda: mech.release(x, epsilon, rng=0)):
        fit = rel._noise
        key = tuple(tuple(np.concatenate([lv.lo, lv.hi], axis=1).ravel().tolist()) for lv in fit.levels)
        assert key not in out  # distinct choices give distinct trees
        counts = [(spec, np.asarray(v, dtype=np.int64)) for spec, v in zip(fit.specs, fit.measured) if spec is not None]
        out[key] = (log_p, counts)
    assert math.fsum(math.exp(lp) for lp, _ in out.values()) == pytest.approx(1.0, abs=1e-12)
    return out


def tree_worst(script, mech, bases, epsilon):
    return worst_over_neighbours(
        lambda x: tree_outputs(script, mech, x, epsilon), bases, lambda x: grid_neighbours(x, mech.neighbours)
    )


TREE_BASES = [np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0]]), np.array([[2, 0, 0], [0, 0, 0], [0, 0, 1]])]


TREE_BASES += [np.array([[0, 1, 0], [0, 1, 0], [1, 0, 0]]), np.array([[0, 0], [1, 0], [0, 1]])]


TREES = [
    ("hybrid-kd1", lambda r: HybridTree(kd_levels=1, split_share=0.4, neighbours=r)),
    ("hybrid-kd2-uniform", lambda r: HybridTree(kd_levels=2, split_share=0.4, budget="uniform", neighbours=r)),
    ("hybrid-kd2-height2", lambda r: HybridTree(kd_levels=2, height=2, split_share=0.4, neighbours=r)),
    ("kd-depth2", lambda r: KDTree(depth=2, split_share=0.4, neighbours=r)),
    ("kd-depth3", lambda r: KDTree(depth=3, split_share=0.4, neighbours=r)),
]
TREE_CASES = [(name, build, r) for name, build in TREES for r in ("add_remove", "replace")]


@pytest.mark.parametrize("name,build,relation", TREE_CASES, ids=[f"{c[0]}-{c[2]}" for c in TREE_CASES])
def test_tree_release_joint_law_of_structure_and_counts_is_epsilon_dp(monkeypatch, name, build, relation):
    """The whole release (cuts, then counts of every measured node) on 3 x 3 and 3 x 2 grids
    with 0-3 records, every neighbour: max log-ratio over every output at most the recorded
    epsilon; the cuts do depend on the data (structure log-ratio > 0), and the count part
    alone is tight, so the same code run at twice the budget exceeds epsilon."""
    script = Script(monkeypatch, [spatial_trees_module])
    mech = build(relation)
    recorded = mech.release(TREE_BASES[1], EPS, rng=0).epsilon
    assert recorded <= EPS
    worst, structure = tree_worst(script, mech, TREE_BASES, EPS)
    assert worst <= recorded + 1e-12
    assert structure > 0.05 * EPS
    assert worst >= (1 - 0.4) * EPS * (1 - 1e-6)  # the counts spend the rest, exactly
    doubled, _ = tree_worst(script, mech, TREE_BASES[1:2], 2 * EPS)
    assert doubled > EPS
    for epsilon in (0.3, 2.5):  # a small epsilon grid, fewer grids
        recorded = mech.release(TREE_BASES[1], epsilon, rng=0).epsilon
        assert tree_worst(script, mech, TREE_BASES[1:3], epsilon)[0] <= recorded + 1e-12


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_tree_test_detects_a_median_that_spends_twice_its_share(monkeypatch, relation):
    """The structure part alone can fail the test: a kd-tree spending 0.9 of epsilon on one level
    of cuts passes, and the same code whose private median uses twice its gamma (spends twice
    its share) reports a loss above epsilon on 3 x 3 grids."""
    script = Script(monkeypatch, [spatial_trees_module])
    mech = KDTree(depth=1, split_share=0.9, neighbours=relation)
    bases = [np.array([[2, 0, 0], [2, 2, 0], [2, 2, 2]]), np.array([[3, 0, 0], [0, 0, 0], [0, 0, 0]])]
    honest, structure = tree_worst(script, mech, bases, EPS)
    assert structure > 0.2 * EPS and honest <= EPS + 1e-12
    honest_gamma = spatial_trees_module.split_gamma
    monkeypatch.setattr("dprange.data_aware.grid.split_gamma", lambda e, n: 2 * honest_gamma(e, n))
    assert tree_worst(script, mech, bases, EPS)[0] > 1.2 * EPS


def test_enumerated_structure_law_is_what_the_release_draws(monkeypatch):
    """The law the scripted runs enumerate is the law of the real release: the hybrid-tree
    structures (two kd levels) of 800 seeded releases of one 3 x 3 grid match it (4 sigma)."""
    x = np.array([[2, 0, 0], [0, 1, 0], [0, 0, 1]])
    for mech in (HybridTree(kd_levels=2, height=2, split_share=0.5),):
        with monkeypatch.context() as patch:
            law = tree_outputs(Script(patch, [spatial_trees_module]), mech, x, 2.0)
        source = np.random.default_rng(12)
        draws = 800
        seen: dict = {}
        for _ in range(draws):
            levels = mech.release(x, 2.0, rng=source)._noise.levels
            key = tuple(tuple(np.concatenate([lv.lo, lv.hi], axis=1).ravel().tolist()) for lv in levels)
            seen[key] = seen.get(key, 0) + 1
        assert set(seen) <= set(law)
        for key, (log_p, _) in law.items():
            p = math.exp(log_p)
            assert abs(seen.get(key, 0) / draws - p) <= 4 * math.sqrt(p * (1 - p) / draws) + 1e-9


@pytest.mark.parametrize("ratio", [0.5, 0.4, 0.25])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_dawa_hilbert_release_joint_law_is_epsilon_dp(monkeypatch, relation, ratio):
    """DAWA on the Hilbert order of 2 x 2 grids (its PrivTree partition at ``ratio`` of epsilon
    4, counts at the rest; 0.25 and 0.4 are the shares ``ratio="signal"`` runs with): the joint
    law of (buckets, noisy bucket-hierarchy counts), every neighbour, is within epsilon (the
    partition's law is written out exactly, no truncation); twice the budget exceeds it."""
    epsilon = 4.0
    build = lambda: DAWAHilbert(ratio=ratio, neighbours=relation)  # noqa: E731
    assert build().inner().partition_step == "privtree"
    bases = [np.array([[1, 0], [0, 0]]), np.array([[2, 0], [0, 1]]), np.array([[0, 1], [1, 1]])]
    worst, least = dawa_worst(monkeypatch, build, bases, epsilon, relation)
    assert least > 1e-6
    assert worst <= epsilon + 1e-9
    assert worst >= (1 - ratio) * epsilon - 1e-9  # the counts spend the rest, exactly
    assert dawa_worst(monkeypatch, build, bases[1:2], 2 * epsilon, relation)[0] > epsilon
