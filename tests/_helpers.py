"""Helpers that test files in several folders share (tests import them with ``from _helpers
import ...``; pyproject puts tests/ on the path): dense GLS references and the Monte-Carlo check of
an exact error model; the in-process command line and its input files; exact privacy losses and
deltas of discrete Laplace and Gaussian rows; the enumerations of data-aware outputs (DAWA's
partition, scripted exponential-mechanism runs); dense rectangle matrices and grid neighbours;
and chi-square p-values.

(conftest.py keeps the fixtures, REPO and SHARED, ``range_matrix``, ``dense_gls`` by the KKT
system and ``weighted_tree_problem``.)"""

from __future__ import annotations

import functools
import itertools
import math
import os
import stat
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from scipy import signal, special, stats

import dprange
from dprange import DAWA, DAWAHilbert, Release
from dprange.answers.provenance import Provenance
from dprange.cli import main
from dprange.cli.ldp import ldp
from dprange.data_aware.hilbert import hilbert_sequence
from dprange.data_aware.partition import (
    GIBBS_BUCKET_PRIOR,
    dyadic_levels,
    gibbs_gamma,
    partition_noise,
    scaled_deviations,
)
from dprange.data_aware.privtree import privtree_noise, tree_levels
from dprange.data_aware.selector import Selector
from dprange.inference.dispatch import NonlinearEstimate
from dprange.measurements import LinearMeasurement, Measurements
from dprange.optimize import cache as optimized
from dprange.privacy.noise import NoiseSpec
from dprange.privacy.samplers import SecureRandom
from dprange.strategies.trees import TreeStrategy
from dprange.workloads import Ranges

#: Relative cut-off of the pseudo-inverses: the normal matrices here are well conditioned on
#: their range, and the null directions (the total, unmeasured Fourier subspaces) are exact zeros.
PINV_RTOL = 1e-10


def gls_covariance(G: np.ndarray, public_total: bool, *, singular: bool = False) -> np.ndarray:
    """Covariance of the GLS estimate whose normal matrix is G = A^T V^-1 A.

    With a public total the estimate lies on the affine space 1^T x = total: the covariance
    is P pinv(P G P) P with P = I - 1 1^T / n, the projection on the sum-zero subspace.
    Otherwise inv(G), or pinv(G) when G is ``singular`` (unmeasured directions; only
    estimable queries of it are meaningful).  O(n^3)."""
    n = G.shape[0]
    if public_total:
        P = np.eye(n) - 1.0 / n
        return P @ np.linalg.pinv(P @ G @ P, rtol=PINV_RTOL, hermitian=True) @ P
    if singular:
        return np.linalg.pinv(G, rtol=PINV_RTOL, hermitian=True)
    return np.linalg.inv(G)


def gls_estimate(A: np.ndarray, y: np.ndarray, v: np.ndarray, total=None, *, singular: bool = False):
    """(x-hat, covariance) of GLS on the dense stacked system y = A x + noise of variances v;
    with a public ``total``, on the affine space 1^T x = total (shifted to it, then the
    sum-zero subspace)."""
    G = A.T @ (A / v[:, None])
    cov = gls_covariance(G, total is not None, singular=singular)
    base = np.zeros(A.shape[1]) if total is None else np.full(A.shape[1], total / A.shape[1])
    return base + cov @ (A.T @ ((y - A @ base) / v)), cov


def quadratic_forms(Q: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """diag(Q cov Q^T): the variance of every query (row of Q)."""
    return np.einsum("ij,jk,ik->i", Q, cov, Q)


def assert_unbiased_with_variance(runs, truth, variance, *, sds: float = 4.0, rtol: float = 0.2) -> None:
    """Monte-Carlo check of an exact error model: ``runs`` (R x queries) of independent
    releases have means within ``sds`` standard errors sqrt(variance / R) of ``truth`` and
    sample variances within ``rtol`` of ``variance`` (the default 0.2 is 3.4 s.d. of the
    sample variance of R = 600 normal draws, relative s.d. sqrt(2 / R))."""
    runs = np.asarray(runs, dtype=float)
    variance = np.asarray(variance, dtype=float)
    se_mean = np.sqrt(variance / runs.shape[0])
    assert np.all(np.abs(runs.mean(axis=0) - truth) < sds * se_mean)
    np.testing.assert_allclose(runs.var(axis=0, ddof=1), variance, rtol=rtol)


def peak_bytes_raising(error, load) -> int:
    """The peak of Python and NumPy allocations (tracemalloc) while ``load()`` raises ``error``:
    what a loader materialised before refusing a file."""
    tracemalloc.start()
    try:
        with pytest.raises(error):
            load()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class Unreadable:
    """Values that fail the test if anything reads them (a refusal before the data are read)."""

    def __array__(self, *args, **kwargs):
        raise AssertionError("the values were read")

    def __len__(self):
        raise AssertionError("the values were read")


def run_cli(args, capsys):
    """Run the command line in this process: (exit status, stdout, stderr); arguments may be
    numbers or paths."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def _cli(args, capsys):
    """Run the command line in this process: (exit status, captured output)."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, capsys.readouterr()


RELEASE = [
    "release",
    "--column",
    "age",
    "--lo",
    "0",
    "--hi",
    "120",
    "--integers",
    "--epsilon",
    "1",
    "--seed",
    "0",
    "--mechanism",
    "hierarchical",
]


def _release(csv_file, *extra):
    return [RELEASE[0], str(csv_file), *RELEASE[1:], *extra]


def write_csv(path, column, extra=None, header="x,y") -> str:
    """A two-column CSV: ``column`` as text cells (None = empty cell), and a second column."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(header + "\n")
        for i, v in enumerate(column):
            fh.write(f"{'' if v is None else v},{i if extra is None else extra}\n")
    return str(path)


def output_probabilities(x, epsilon, penalty, changed):
    """Exact probabilities of DAWA's partition of 4 bins (noise truncated at +-K, tail < 1e-15)."""
    specs = partition_noise(4, epsilon, changed)
    (_, pairs), (_, whole) = scaled_deviations(x, 2), scaled_deviations(x, 4)
    k = np.arange(-400, 401)
    pmf2, pmf4 = specs[0].pmf(k), specs[1].pmf(k)
    assert pmf2[:5].sum() < 1e-15 and pmf4[:5].sum() < 1e-15
    # each half: merged cost (c + z) / 2 + penalty against 2 penalty
    half = []
    for c in pairs:
        merged = np.maximum((c + k) / 2, 0.0) + penalty  # noisy costs are clamped at 0
        half.append((np.minimum(merged, 2 * penalty), merged <= 2 * penalty))
    probs: dict = {}
    root_cost = np.maximum((whole[0] + k) / 4, 0.0) + penalty
    order = np.argsort(root_cost)
    cdf_root = np.cumsum(pmf4[order])
    sorted_cost = root_cost[order]
    for (ca, ma), (cb, mb) in [((half[0][0], half[0][1]), (half[1][0], half[1][1]))]:
        split = ca[:, None] + cb[None, :]
        joint = pmf2[:, None] * pmf2[None, :]
        idx = np.searchsorted(sorted_cost, split, side="right")
        p_root = np.where(idx > 0, cdf_root[np.maximum(idx - 1, 0)], 0.0)
        probs["root"] = float((joint * p_root).sum())
        for a_merged in (True, False):
            for b_merged in (True, False):
                mask = (ma[:, None] == a_merged) & (mb[None, :] == b_merged)
                probs[(a_merged, b_merged)] = float((joint * (1 - p_root) * mask).sum())
    assert sum(probs.values()) == pytest.approx(1.0, abs=1e-12)
    return probs


# ------------------------------------------------------------------------- DAWA release
def counts_example(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = np.zeros(n, dtype=np.int64)
    x[n // 10 : n // 10 + 7] = rng.integers(40, 60, 7)
    x[5 * n // 8 : 5 * n // 8 + 4] = rng.integers(0, 300, 4)
    return x


def integer_strategy(rows: int, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 5, (rows, n)).astype(float)


# ----------------------------------------------------------------------------- what a release builds


def cached_templates() -> set[str]:
    return {path.name.split("-n32-")[1].split("-")[0] for path in optimized.cache_dir().glob("*-n32-*.npz")}


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


class _PerQueryOnly:
    """An error model with the per-query interface only (the path before the one pass)."""

    def __init__(self, model):
        self._model = model

    def range_variance(self, lo, hi):
        return self._model.range_variance(lo, hi)

    def query_variance(self, weights):
        return self._model.query_variance(weights)


def measure(blocks, x, variances, rng, *, total=None, noise=None):
    """Measurements of x through ``blocks`` with Gaussian noise of the given variances."""
    out = []
    assert len(blocks) == len(variances)
    for block, v in zip(blocks, variances):
        values = block.matvec(x) + np.sqrt(v) * rng.standard_normal(block.shape[0])
        out.append(LinearMeasurement(block, values, v, noise))
    return Measurements(out, blocks[0].shape[1], 1.0, total=total)


def chi_square_p(counts, probabilities):
    """p-value of observed ``counts`` against ``probabilities`` (cells with expectation < 5
    pooled)."""
    counts = np.asarray(counts, dtype=float)
    expected = np.asarray(probabilities, dtype=float) * counts.sum()
    order = np.argsort(expected)
    small = expected[order] < 5
    pooled_obs = np.concatenate([[counts[order][small].sum()], counts[order][~small]])
    pooled_exp = np.concatenate([[expected[order][small].sum()], expected[order][~small]])
    if pooled_exp[0] == 0:
        pooled_obs, pooled_exp = pooled_obs[1:], pooled_exp[1:]
    return stats.chisquare(pooled_obs, pooled_exp * pooled_obs.sum() / pooled_exp.sum()).pvalue


def _problem(rng, n, branching, measure_root, known_total):
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    weights: list = [None] * (tree.depth + 1)
    for d in tree.measured_depths:
        size = tree.level_sizes[d]
        weights[d] = rng.uniform(0.2, 3.0, size) if rng.random() < 0.5 else np.full(size, rng.uniform(0.2, 3.0))
    return tree, weights, (50.0 if known_total else None)


def monte_carlo_estimates(oracle, probabilities, users, reps, seed):
    """(estimates over ``reps`` batches, true fractions, stated variance) for a fixed population
    of ``users`` drawn from ``probabilities`` over 6 items (seeded)."""
    rng = np.random.default_rng(seed)
    values = rng.choice(6, users, p=probabilities)
    f = np.bincount(values, minlength=6) / values.size
    est = np.array([oracle.aggregator().add(oracle.randomize(values, rng)).estimate() for _ in range(reps)])
    return est, f, oracle.variance(values.size, f)[:6]


def exp_bounds(eps, bits=256):
    """Rigorous rationals lo <= e^eps <= hi from the Taylor series in integer fixed point,
    independent of the library: terms rounded down sum to a lower bound; terms rounded up,
    plus a tail of at most the last term once eps / k <= 1/2, to an upper bound."""
    a, b = Fraction(eps).as_integer_ratio()
    lo = hi = term_lo = term_hi = 1 << bits
    k = 1
    while term_hi > 1 or k <= 2 * eps:
        term_lo = term_lo * a // (b * k)
        term_hi = -(-term_hi * a // (b * k))
        lo, hi, k = lo + term_lo, hi + term_hi, k + 1
    return Fraction(lo, 1 << bits), Fraction(hi + 2 * term_hi, 1 << bits)


class ScriptedSource(SecureRandom):
    """A random source whose ``integers`` answers each call from a script kept per bound
    (high), so a test can place coins on either side of a threshold.  A float draw
    (``random``, ``standard_normal``), as on the old clients, fails the test."""

    def __init__(self, scripts):
        self.scripts = {bound: list(answers) for bound, answers in scripts.items()}

    def random(self, size=None):
        raise AssertionError("a client drew a float uniform")

    standard_normal = random

    def integers(self, low, high=None, size=None):
        assert low == 0 and np.ndim(high) == 0
        answer = np.asarray(self.scripts[int(high)].pop(0), dtype=np.int64)
        assert answer.shape == np.empty(size).shape and np.all((answer >= 0) & (answer < high))
        return answer

    def finished(self):
        return all(not answers for answers in self.scripts.values())


def _all_ranges(n):
    return np.triu_indices(n)


def _choices(command: str, option: str) -> tuple:
    (param,) = [p for p in ldp.commands[command].params if p.name == option]
    return tuple(param.type.choices)  # type: ignore[attr-defined]


def _squeezed(text: str) -> str:
    return "".join(text.split())


def box_matrix(shape, lows, highs):
    """Dense 0/1 rows of rectangles on a grid (cells in C order)."""
    rows = []
    for lo, hi in zip(np.atleast_2d(lows), np.atleast_2d(highs)):
        mask = np.ones(shape, dtype=bool)
        for a, n in enumerate(shape):
            axis = (np.arange(n) >= lo[a]) & (np.arange(n) <= hi[a])
            mask &= axis.reshape(tuple(n if b == a else 1 for b in range(len(shape))))
        rows.append(mask.ravel().astype(float))
    return np.array(rows)


def assert_variances(got, expected):
    """Equal to rounding (the public total's variance is an exact 0 up to rounding)."""
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10 * float(np.max(expected)))


def every_rectangle(shape):
    per_axis = [[(lo, hi) for lo in range(n) for hi in range(lo, n)] for n in shape]
    pairs = list(itertools.product(*per_axis))
    lows = np.array([[p[a][0] for a in range(len(shape))] for p in pairs])
    highs = np.array([[p[a][1] for a in range(len(shape))] for p in pairs])
    return lows, highs


# ----------------------------------------------------------------------------- inference
def stacked(measurements):
    A = np.vstack([m.block.dense() for m in measurements.measurements])
    y, v = measurements.stacked()
    return A, y, v


# ----------------------------------------------------------------------------- privacy
def grid_neighbours(x, relation):
    """The histograms of the datasets neighbouring x's: one record added or removed
    (add_remove), or one record moved between two cells (replace); never a negative count."""
    flat = x.ravel()
    for i in range(flat.size):
        if relation == "add_remove":
            for s in (1, -1):
                if flat[i] + s >= 0:
                    y = flat.copy()
                    y[i] += s
                    yield y.reshape(x.shape)
        elif flat[i] > 0:
            for j in range(flat.size):
                if j != i:
                    y = flat.copy()
                    y[i] -= 1
                    y[j] += 1
                    yield y.reshape(x.shape)


def gaussian_delta(pairs, epsilon) -> float:
    """delta(epsilon) of the shifted coordinates [(sigma, shift), ...]: exact (one sigma, a
    small lattice), else an upper bound."""
    pairs = [(sigma, s) for sigma, s in pairs if s != 0]
    if not pairs:
        return 0.0
    if max(sigma for sigma, _ in pairs) > PROJECTION_SIGMA:
        return discrete_gaussian_delta_projection(pairs, epsilon)[1]
    sigmas = {sigma for sigma, _ in pairs}
    lattice_size = sum(2 * discrete_gaussian_table(sigma)[0] * abs(s) for sigma, s in pairs)
    if len(sigmas) == 1 and lattice_size <= 2_000_000:
        return discrete_gaussian_delta_lattice(sigmas.pop(), [s for _, s in pairs], epsilon)
    return discrete_gaussian_delta_upper(pairs, epsilon)


# ----------------------------------------------------------------------------- losses


def laplace_worst_loss(shifts) -> float:
    """max over outputs of log P/Q for independent discrete-Laplace rows shifted by s (Q's
    mean minus P's): the sum of per-row maxima of log pmf(k) - log pmf(k - s)."""
    total = 0.0
    for scale, s in shifts:
        k = np.arange(-abs(s) - 3, abs(s) + 4)
        total += float(np.max(discrete_laplace_log_pmf(scale, k) - discrete_laplace_log_pmf(scale, k - s)))
    return total


def linear_privacy_loss(mech, x, relation, noise, eps, delta, vector=np.ravel) -> float:
    """The worst privacy loss of a linear grid mechanism's measurement of x over the neighbours
    of x: the largest Laplace log ratio, or for Gaussian noise the exact delta at eps, of the
    measured rows' shifts (each row integer, so its noise law is the calibrated one)."""
    meas = mech.measure(x, eps, delta=delta if noise == "gaussian" else 0.0, rng=0)
    base = [np.rint(m.block.matvec(vector(x))) for m in meas.measurements]
    worst = 0.0
    for y in grid_neighbours(x, relation):
        shifts = []
        for m, rows in zip(meas.measurements, base):
            diff = np.rint(m.block.matvec(vector(y))) - rows
            shifts.extend((m.noise.scale, int(s)) for s in diff[diff != 0])
        for signed in (shifts, [(scale, -s) for scale, s in shifts]):
            worst = max(worst, gaussian_delta(signed, eps) if noise == "gaussian" else laplace_worst_loss(signed))
    return worst


def assert_linear_privacy(mech, x, relation, noise, eps=0.8, delta=1e-5, vector=np.ravel) -> None:
    """delta at most the stated one (Gaussian), or a worst loss of exactly eps (Laplace: the
    calibration is private and not slack)."""
    worst = linear_privacy_loss(mech, x, relation, noise, eps, delta, vector)
    if noise == "gaussian":
        assert worst <= delta
    else:
        assert worst <= eps * (1 + 1e-12)
        assert worst == pytest.approx(eps, rel=1e-6)  # tight: the calibration is not slack


def grid_args(path, out, *extra):
    return [
        "release", path, "-c", "age", "-c", "hours", "--lo", 18, "--hi", 59, "--lo", 0, "--hi", 49,
        "--integers", "-e", 1, "--seed", 4, "-o", out, *extra,
    ]  # fmt: skip


CASES = [
    # (n, branching, measure_root, known_total)
    (11, 2, True, False),
    (11, 2, False, False),
    (17, 3, True, False),
    (23, 4, True, True),
    (40, 16, True, False),
    (300, 16, False, False),
    (30, (2, 3, 5), True, False),
    (29, (4, 2, 4), False, True),
]


def bounded_ranges(n, k, width, seed=0):
    """k random ranges of width at most ``width``."""
    rng = np.random.default_rng(seed)
    lo = rng.integers(0, n - width + 1, k)
    return Ranges(lo, lo + rng.integers(0, width, k), n)


def short_ranges(n=256, queries=2000, width=16, seed=0):
    rng = np.random.default_rng(seed)
    lo = rng.integers(0, n - width + 1, queries)
    return Ranges(lo, lo + rng.integers(0, width, queries), n)


def measured(mech, n, epsilon, delta=0.0):
    """The strategy the mechanism measures at (epsilon, delta) (its design's choice)."""
    mech.design(n, epsilon, delta=delta)
    return mech.strategy(n)


def indicator(shape, lows, highs):
    grids = np.indices(shape).reshape(len(shape), -1)
    return np.all((grids.T[None] >= lows[:, None]) & (grids.T[None] <= highs[:, None]), axis=2).astype(float)


def product_family(families):
    """Every combination of one (lo, hi) per axis, as (R, k) lows and highs."""
    picks = itertools.product(*(range(lo.size) for lo, _ in families))
    rows = [[(fam[0][i], fam[1][i]) for fam, i in zip(families, pick)] for pick in picks]
    return np.array([[lo for lo, _ in r] for r in rows]), np.array([[hi for _, hi in r] for r in rows])


# ----------------------------------------------------------------------------- pmfs


def discrete_laplace_log_pmf(scale, k):
    """log of (1 - t)/(1 + t) t^|k|, t = exp(-1/scale), in log space (t itself loses precision
    for large scales: a quantised Matrix strategy has scales ~1e6)."""
    return np.log(np.asarray(dprange.privacy.noise.pmf("discrete_laplace", scale, np.asarray(k)), dtype=float))


def sampled_sigma2(sigma) -> float:
    """sigma^2 of the discrete Gaussian actually sampled for a requested sigma (the sampler
    rounds sigma^2 up to a rational); the loss formulas must use it, like the pmf does."""
    return dprange.privacy.noise._gaussian_sigma2(sigma)


def discrete_gaussian_pmf(sigma, k):
    """The pmf of the discrete Gaussian the sampler draws for a requested sigma."""
    return np.asarray(dprange.privacy.noise.pmf("gaussian", sigma, np.asarray(k)), dtype=float)


@functools.lru_cache(maxsize=16)
def discrete_gaussian_table(sigma):
    """(T, pmf on -T..T, cumulative sums, mass outside the window), T = 12 sigma + 8 (the
    missing mass, < 1e-31, is added to every delta so the results stay upper bounds)."""
    T = int(math.ceil(12 * sigma)) + 8
    p = discrete_gaussian_pmf(sigma, np.arange(-T, T + 1))
    cumulative = np.concatenate([[0.0], np.cumsum(p)])
    return T, p, cumulative, max(0.0, 1.0 - float(cumulative[-1]))


def discrete_gaussian_delta_lattice(sigma, shifts, epsilon) -> float:
    """Equal sigmas: the loss is (||s||^2 - 2 Z) / (2 sigma^2) with Z = sum_r s_r k_r on the
    integers; Z's distribution by convolution (exact up to rounding; the window's missing
    mass is added)."""
    T, p, _, missing = discrete_gaussian_table(sigma)
    k = np.arange(-T, T + 1)
    dist, lo = np.ones(1), 0
    for s in shifts:
        term = np.zeros(2 * T * abs(s) + 1)
        term[k * s + T * abs(s)] = p
        dist = np.convolve(dist, term) if min(dist.size, term.size) < 64 else signal.fftconvolve(dist, term)
        dist = np.clip(dist, 0.0, None)
        lo -= T * abs(s)
    z = lo + np.arange(dist.size)
    loss = (sum(s * s for s in shifts) - 2.0 * z) / (2 * sampled_sigma2(sigma))
    return float(np.sum(dist * np.clip(-np.expm1(epsilon - loss), 0.0, None))) + missing * len(shifts)


def coordinate_loss_grid(sigma, s, grid):
    """One coordinate's privacy loss (s^2 - 2 s k) / (2 sigma^2), k ~ discrete Gaussian: the
    integers are cut into blocks over which the loss varies by at most ``grid``, and each
    block's mass is put at the block's largest loss rounded *up* to the grid.  Returns
    (first grid index, masses, missing mass)."""
    T, _, cumulative, missing = discrete_gaussian_table(sigma)
    sigma2 = sampled_sigma2(sigma)
    width = max(1, int(2 * sigma2 * grid / abs(s)))
    starts = np.arange(-T, T + 1, width)
    ends = np.minimum(starts + width - 1, T)
    mass = cumulative[ends + T + 1] - cumulative[starts + T]
    loss = np.maximum(s * s - 2.0 * s * starts, s * s - 2.0 * s * ends) / (2 * sigma2)
    index = np.ceil(loss / grid).astype(np.int64)
    term = np.zeros(int(index.max() - index.min()) + 1)
    np.add.at(term, index - index.min(), mass)
    return int(index.min()), term, missing


def discrete_gaussian_delta_upper(pairs, epsilon, grid=1e-3) -> float:
    """Every coordinate's loss rounded *up* to the grid (:func:`coordinate_loss_grid`); the
    hockey-stick integrand (1 - e^{eps - L})_+ is increasing in the loss, so the result is an
    upper bound on delta (tight to about grid x coordinates in epsilon)."""
    dist, lo, missing = np.ones(1), 0, 0.0
    for sigma, s in pairs:
        first, term, lost = coordinate_loss_grid(sigma, s, grid)
        dist = np.clip(signal.fftconvolve(dist, term), 0.0, None)
        lo += first
        missing += lost
    loss = (lo + np.arange(dist.size)) * grid
    return float(np.sum(dist * np.clip(-np.expm1(epsilon - loss), 0.0, None))) + missing + 1e-12


def _projection_cdf_bounds(sigmas, weights, z):
    """(lower, upper) bounds on P(sum_r w_r K_r < z), K_r independent discrete Gaussians of the
    sampled variances sigmas^2 (:func:`discrete_gaussian_delta_projection`)."""
    mu = math.sqrt(math.fsum((w * s) ** 2 for w, s in zip(weights, sigmas)))
    h = math.fsum(abs(w) for w in weights) / 2  # |w . U| <= h for U uniform on [-1/2, 1/2)^m
    cuts = [10.0 * s for s in sigmas]  # the box B: |v_r| <= T_r = 10 sigma_r
    # log of the density ratio of K + U to N(0, diag sigma^2) on B: |v^2 - k^2| <= T + 1/4,
    # and sqrt(2 pi) sigma / Z_sigma in [1 / (1 + 3 exp(-2 pi^2 sigma^2)), 1] (Poisson summation).
    eta = math.fsum((t + 0.25) / (2 * s * s) + 3 * math.exp(-2 * math.pi**2 * s * s) for t, s in zip(cuts, sigmas))
    # P(K + U outside B) <= sum_r 2 P(K_r >= T_r - 1/2) <= sum_r 2 e^{-t^2 / 2 sigma^2} (1 + sigma^2 / t) / Z_sigma,
    # Z_sigma >= sqrt(2 pi) sigma; P(Y outside B) <= sum_r erfc(T_r / (sigma_r sqrt 2)).
    tail_k = math.fsum(
        2 * math.exp(-((t - 0.5) ** 2) / (2 * s * s)) * (1 + s * s / (t - 0.5)) / (math.sqrt(2 * math.pi) * s)
        for t, s in zip(cuts, sigmas)
    )
    tail_y = math.fsum(math.erfc(t / (s * math.sqrt(2))) for t, s in zip(cuts, sigmas))
    lower = math.exp(-eta) * max(0.0, float(special.ndtr((z - h) / mu)) - tail_y)
    upper = math.exp(eta) * float(special.ndtr((z + h) / mu)) + tail_k
    return lower, min(1.0, upper)


def discrete_gaussian_delta_projection(pairs, epsilon) -> tuple[float, float]:
    """(lower, upper) bounds on delta(epsilon) of independent discrete Gaussians shifted by
    integers [(sigma, shift), ...], for sigmas far beyond the lattice tables (a quantised
    Kronecker strategy: sigma ~ 2e10).

    The loss is a function of one projection: with sigma_r^2 as sampled, mu^2 = sum s_r^2 /
    sigma_r^2 and Z = sum_r (s_r / sigma_r^2) K_r, L = mu^2 / 2 - Z, and under the shifted law
    Z moves by mu^2, so delta = F(mu^2 / 2 - eps) - e^eps F(-mu^2 / 2 - eps), F(z) = P(Z < z).
    F is bracketed by the continuous Gaussian (the 1-D formula of Balle and Wang, ICML 2018,
    at the Mahalanobis norm mu): K + U (U uniform on [-1/2, 1/2)^m) has the density
    prod pmf(round v), within exp(+-eta) of N(0, diag sigma^2) on the box |v_r| <= 10 sigma_r,
    eta = sum (10 sigma_r + 1/4) / (2 sigma_r^2) + tiny; {w.K < z} lies between
    {w.(K + U) < z -+ h}, h = sum |w_r| / 2; the mass outside the box is bounded by its Gaussian
    tail (both are added where they can only widen the bracket).  Relative width of the
    bracket on delta: about 1e-8 at sigma = 2e10, 1e-3 at sigma = 1e5, 30% at sigma = 300."""
    pairs = [(math.sqrt(sampled_sigma2(sigma)), s) for sigma, s in pairs if s != 0]
    if not pairs:
        return 0.0, 0.0
    sigmas = [sigma for sigma, _ in pairs]
    weights = [s / (sigma * sigma) for sigma, s in pairs]
    mu2 = math.fsum((s / sigma) ** 2 for sigma, s in pairs)
    f_lo, f_hi = _projection_cdf_bounds(sigmas, weights, mu2 / 2 - epsilon)
    g_lo, g_hi = _projection_cdf_bounds(sigmas, weights, -mu2 / 2 - epsilon)
    return max(0.0, f_lo - math.exp(epsilon) * g_hi), f_hi - math.exp(epsilon) * g_lo


#: Beyond this sigma the lattice tables (12 sigma entries per coordinate) are too large, and
#: :func:`gaussian_delta` uses the projection bound (relative width about 1e-5 per coordinate there).
PROJECTION_SIGMA = 1e6


# ----------------------------------------------------------------------------- enumeration


def dataset(n):
    return (np.arange(n) % 3 + 1).astype(np.int64)  # every bin holds a record


# ----------------------------------------------------------------------------- linear k-D
def row_loss(spec, s: int) -> float:
    """max over integers k of log pmf(k) / pmf(k - s) for one discrete-Laplace row shifted by
    s, from the pmf as sampled: log pmf is -|k| / b + const, so the ratio is
    (|k - s| - |k|) / b <= |s| / b (triangle inequality), attained at k = 0."""
    k = np.array([0, s, -s, 1, -1])
    return float(np.max(np.log(spec.pmf(k)) - np.log(spec.pmf(k - s))))


# ----------------------------------------------------------------------------- scripted runs
class Script:
    """Enumerates every run of a mechanism: each call of the exponential mechanism's exact
    sampler becomes a choice point.  ``run`` replays the chosen candidates of ``path`` (the
    first candidate past its end), records each point's number of candidates and the chosen
    candidate's exact probability P(r) = exp(-g_r) / sum_s exp(-g_s) from the exact exponents
    g the code passes; noise draws return zeros and are recorded with their spec, or, with
    ``noise_window`` W, each noise value is a choice point too, over -W..W with the pmf of
    the noise as sampled (the runs then cover the noise inside the window only)."""

    def __init__(self, monkeypatch, modules, noise_window: int | None = None):
        self.noise_window = noise_window
        self.path: list[int] = []
        self.options: list[int] = []
        self.log_p = 0.0
        self.draws: list = []
        for module in modules:
            monkeypatch.setattr(module, "exact_choice", self.choose)
        monkeypatch.setattr(NoiseSpec, "sample", lambda spec, size, rng: self.zero_noise(spec, size, rng))

    def pick(self, log_weights) -> int:
        """The next choice point: its candidate from the path, its log-probability recorded."""
        k = len(self.options)
        r = self.path[k] if k < len(self.path) else 0
        self.options.append(len(log_weights))
        top = max(log_weights)
        self.log_p += log_weights[r] - top - math.log(math.fsum(math.exp(w - top) for w in log_weights))
        return r

    def choose(self, sizes, exponents, slack, exact_exponent, rng):
        assert np.all(np.asarray(sizes) == 1)
        g = [exact_exponent(r) for r in range(len(sizes))]
        low = min(g)
        return self.pick([-float(e - low) for e in g]), 0

    def zero_noise(self, spec, size, rng):
        self.draws.append((spec, size))
        if self.noise_window is None:
            return np.zeros(size, dtype=np.int64)
        values = np.arange(-self.noise_window, self.noise_window + 1)
        log_pmf = np.log(spec.pmf(values))
        out = np.zeros(int(np.prod(size)), dtype=np.int64)
        for i in range(out.size):
            r = self.pick(list(log_pmf))
            self.log_p += math.log(math.fsum(np.exp(log_pmf)))  # the pmf itself, not renormalised in the window
            out[i] = values[r]
        return out.reshape(size)

    def enumerate(self, run):
        """[(log P(choices), result of run())] over every sequence of choices (depth first)."""
        out = []
        self.path = []
        while True:
            self.options, self.log_p, self.draws = [], 0.0, []
            result = run()
            out.append((self.log_p, result))
            taken = self.path + [0] * (len(self.options) - len(self.path))
            k = len(taken) - 1
            while k >= 0 and taken[k] + 1 >= self.options[k]:
                k -= 1
            if k < 0:
                return out
            self.path = taken[:k] + [taken[k] + 1]


def joint_worst(law_x, law_y):
    """max over every output (S, c) of |log P_x(S, c) / P_y(S, c)|: per structure, its log-ratio
    plus the worst count loss given it (independent discrete-Laplace rows)."""
    assert law_x.keys() == law_y.keys()
    worst = 0.0
    for key, (lp_x, counts_x) in law_x.items():
        lp_y, counts_y = law_y[key]
        shifts = []
        for (spec, a), (spec_y, b) in zip(counts_x, counts_y):
            assert spec == spec_y and a.shape == b.shape
            shifts.extend((spec.scale, int(s)) for s in (b - a)[b != a])
        loss = laplace_worst_loss(shifts) if shifts else 0.0  # symmetric in the sign of the shifts
        worst = max(worst, lp_x - lp_y + loss, lp_y - lp_x + loss)
    return worst


def worst_over_neighbours(law_of, bases, neighbours_of):
    """(max of :func:`joint_worst`, max log-ratio of the structure alone) over every base x and
    each of its neighbours y; ``law_of(x)``: {structure: (log P, measured rows)}."""
    worst, structure_worst = 0.0, 0.0
    for x in bases:
        law_x = law_of(x)
        for y in neighbours_of(x):
            law_y = law_of(y)
            worst = max(worst, joint_worst(law_x, law_y))
            structure_worst = max(structure_worst, max(abs(law_x[k][0] - law_y[k][0]) for k in law_x))
    return worst, structure_worst


# ----------------------------------------------------------------------------- DAWA, Hilbert order
STARTS_OF = {"root": (0,), (True, True): (0, 2), (True, False): (0, 2, 3), (False, True): (0, 1, 2)}

STARTS_OF[(False, False)] = (0, 1, 2, 3)


def l1_deviation(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.abs(x - x.mean()).sum())


def dyadic_partitions(n: int) -> list[tuple[int, ...]]:
    """Start bins of every partition into aligned dyadic buckets (a node with one child is not
    a bucket of its own), by recursion over the tree."""

    def below(start: int, size: int) -> list[tuple[int, ...]]:
        if size == 1:
            return [(start,)]
        half = size // 2
        if start + half >= n:  # one child: the same bucket
            return below(start, half)
        out = [(start,)] + [a + b for a in below(start, half) for b in below(start + half, half)]
        return out

    top = dyadic_levels(n)[-1] if n > 1 else 1
    return sorted(set(below(0, top)))


def gibbs_law(x, epsilon: float, penalty: float, changed: int, gamma_factor: float = 1.0) -> dict:
    """{starts: P(starts)}: exp(-sum_B ((dev(B) + penalty) gamma + prior)), normalised."""
    n = len(x)
    gamma = float(gibbs_gamma(epsilon, changed)) * gamma_factor
    log_w = {}
    for starts in dyadic_partitions(n):
        ends = list(starts[1:]) + [n]
        log_w[starts] = -sum(
            (l1_deviation(x[a:b]) + penalty) * gamma + float(GIBBS_BUCKET_PRIOR) for a, b in zip(starts, ends)
        )
    top = max(log_w.values())
    z = math.fsum(math.exp(v - top) for v in log_w.values())
    return {k: math.exp(v - top) / z for k, v in log_w.items()}


def assert_draws_follow_law(draw, law: dict, draws: int, seed: int, sharper: dict | None = None) -> None:
    """``draw(rng)`` (start bins of a partition) ``draws`` times: only outcomes of the law
    {starts: P}, each within 5 sd of its expected count.  ``sharper``, the law with less noise,
    must differ visibly at that many draws (so the check can fail)."""
    rng = np.random.default_rng(seed)
    seen: dict = {}
    for _ in range(draws):
        key = tuple(int(s) for s in draw(rng))
        seen[key] = seen.get(key, 0) + 1
    assert set(seen) <= set(law)
    for key, p in law.items():
        sd = math.sqrt(draws * p * (1 - p)) + 1.0
        assert abs(seen.get(key, 0) - draws * p) <= 5 * sd, (key, seen.get(key, 0), draws * p)
    if sharper is not None:
        assert max(abs(sharper[k] - law[k]) for k in law) * draws > 10 * math.sqrt(draws)


def worst_partition_loss(law_of, n: int, top: int, relation: str) -> float:
    """max |log P_x(P) - log P_y(P)| over every vector x of counts 0..``top`` on ``n`` bins, each
    neighbour y under ``relation`` and every partition P; ``law_of(x)``: {starts: P}."""
    worst = 0.0
    for values in itertools.product(range(top + 1), repeat=n):
        x = np.array(values)
        law_x = law_of(x)
        for y in grid_neighbours(x, relation):
            law_y = law_of(y)
            worst = max(worst, max(abs(math.log(law_x[k]) - math.log(law_y[k])) for k in law_x))
    return worst


def median_deviation(x) -> int:
    """min_c sum |x_k - c| by brute force over the values of x (a median is one of them)."""
    x = [int(v) for v in x]
    return min(sum(abs(v - c) for v in x) for c in set(x))


def discrete_laplace_at_least(p: float, m: int) -> float:
    """P(Z >= m) for Z discrete Laplace with P(z) ~ p^|z|: p^m / (1 + p) for m >= 1, else
    1 - p^(1 - m) / (1 + p) (P(Z <= m - 1) = P(Z >= 1 - m) by symmetry)."""
    return p**m / (1 + p) if m >= 1 else 1 - p ** (1 - m) / (1 + p)


def privtree_law(
    x, epsilon: float, threshold: float, changed: int, scale_factor: float = 1.0, edge_bins: int = 0
) -> dict:
    """{starts: P(starts)} of the PrivTree partition written out from its definition: at each
    decision node (two non-empty children) at decision depth k, P(split) = P(Z >= theta - b + 1)
    with b = max(d - b_k, theta - F), Z discrete Laplace of the calibrated scale (times
    ``scale_factor``), P(Z >= m) = p^m / (1 + p) for m >= 1, 1 - p^(1 - m) / (1 + p) else; a
    decision node of at most ``edge_bins`` bins holding the first or last bin splits with
    probability 1 (its children one depth deeper)."""
    n = len(x)
    spec, floor, biases = privtree_noise(epsilon, changed, tree_levels(n))
    p = math.exp(-1.0 / (spec.effective_scale * scale_factor))
    theta = math.ceil(threshold)

    def split(b: int) -> float:
        return discrete_laplace_at_least(p, theta - b + 1)

    def below(start: int, size: int, depth: int) -> dict:
        if size == 1:
            return {(start,): 1.0}
        half = size // 2
        if start + half >= n:  # one child: the same bucket, no decision
            return below(start, half, depth)
        if size <= edge_bins and (start == 0 or start + size >= n):
            q = 1.0
        else:
            q = split(max(median_deviation(x[start : start + size]) - biases[depth], theta - floor))
        out = {(start,): 1 - q} if q < 1 else {}
        for a, pa in below(start, half, depth + 1).items():
            for b, pb in below(start + half, half, depth + 1).items():
                out[a + b] = out.get(a + b, 0.0) + q * pa * pb
        return out

    top = dyadic_levels(n)[-1] if n > 1 else 1
    return below(0, top, 0)


def privtree_probabilities(x, epsilon, penalty, changed, edge_bins=0):
    """:func:`privtree_law` of 4 bins keyed as :func:`output_probabilities` (``STARTS_OF``)."""
    law = privtree_law(np.asarray(x), epsilon, penalty, changed, edge_bins=edge_bins)
    return {key: law.get(starts, 0.0) for key, starts in STARTS_OF.items()}


def gibbs_probabilities(x, epsilon, penalty, changed):
    """:func:`gibbs_law` of 4 bins keyed as :func:`output_probabilities` (``STARTS_OF``)."""
    law = gibbs_law(np.asarray(x), epsilon, penalty, changed)
    return {key: law[starts] for key, starts in STARTS_OF.items()}


def partition_law(step: str, edge_bins: int = 0):
    """The exact 4-bin law of DAWA's partition step ``step``, keyed as ``STARTS_OF``
    (``edge_bins``: PrivTree's forced splits at the ends; the other steps have none)."""
    privtree = functools.partial(privtree_probabilities, edge_bins=edge_bins)
    return {"gibbs": gibbs_probabilities, "privtree": privtree}.get(step, output_probabilities)


def dawa_tail_mass(n_noise: int, scales) -> float:
    """Mass of the cost noise outside +-400 (output_probabilities' window): P(|Z| > K) =
    2 t^(K+1) / (1 + t), t = exp(-1 / b), for each of ``n_noise`` draws at the largest scale."""
    t = math.exp(-1.0 / max(scales))
    return n_noise * 2 * t**401 / (1 + t)


def dawa_outputs(monkeypatch, mech, x, epsilon, relation):
    """{partition: (P_x(partition), [(spec, exact bucket-level counts)])} of a 4-cell DAWA (or
    DAWA on the Hilbert order of a 2 x 2 grid): the partition law (Gibbs, or summed over the cost noise),
    the measurement of each partition read from ``release`` run with that partition."""
    inner = mech.inner() if isinstance(mech, DAWAHilbert) else mech
    eps_partition, eps_measure = inner.budgets(epsilon)
    order = hilbert_sequence(x.shape) if isinstance(mech, DAWAHilbert) else np.arange(x.size)
    seq = np.asarray(x).ravel()[order]
    law = partition_law(inner.partition_step, inner.edge_bins)
    probs = law(seq, eps_partition, 1 / eps_measure, 2 if relation == "replace" else 1)
    out = {}
    for key, p in probs.items():
        if p == 0:  # a partition the forced splits rule out, whatever the data
            continue
        starts = np.array(STARTS_OF[key])
        with monkeypatch.context() as patch:
            patch.setattr(DAWA, "partition", lambda self, counts, e1, e2, rng=None, s=starts: s)
            patch.setattr(NoiseSpec, "sample", lambda self, size, rng: np.zeros(size, dtype=np.int64))
            rel = mech.release(x, epsilon, rng=0)
        meas = (rel._noise.inner if isinstance(mech, DAWAHilbert) else rel)._reduced[0]
        assert rel.parameters["buckets"] == list(STARTS_OF[key])
        out[STARTS_OF[key]] = (p, [(m.noise, np.asarray(m.values, dtype=np.int64)) for m in meas.measurements])
    return out


def dawa_worst(monkeypatch, build, bases, epsilon, relation):
    """(worst log-ratio over every output and neighbour, least partition probability seen)."""
    least, worst = 1.0, 0.0
    for x in bases:
        law_x = dawa_outputs(monkeypatch, build(), x, epsilon, relation)
        flat_neighbours = grid_neighbours(np.asarray(x).reshape(1, -1) if x.ndim == 1 else x, relation)
        for y in flat_neighbours:
            y = y.reshape(x.shape)
            law_y = dawa_outputs(monkeypatch, build(), y, epsilon, relation)
            for key, (p, counts_x) in law_x.items():
                q, counts_y = law_y[key]
                shifts = []
                for (spec, a), (spec_y, b) in zip(counts_x, counts_y):
                    assert spec == spec_y
                    shifts.extend((spec.scale, int(s)) for s in (b - a)[b != a])
                loss = laplace_worst_loss(shifts) if shifts else 0.0
                worst = max(worst, abs(math.log(p / q)) + loss)
                least = min(least, p, q)
    return worst, least


def true_quantiles(values, q):
    """inf{x : #(values <= x) >= q N}: the ceil(q N)-th smallest value (q > 0)."""
    ordered = np.sort(np.asarray(values, dtype=float))
    rank = np.maximum(np.ceil(np.asarray(q) * ordered.size - 1e-9).astype(int), 1)
    return ordered[rank - 1]


def release_args(path, out, *extra):
    return ["release", str(path), "-c", "age", "--lo", "0", "--hi", "15", "--integers", "-e", "1", "--seed", "0"] + [
        "-o",
        str(out),
        *extra,
    ]


def nonlinear_zero_release(n=8):
    """An NNLS release whose estimate is all zeros (its estimated total is 0)."""
    return Release(
        np.zeros(n),
        NonlinearEstimate(np.zeros(n), None, None),
        Provenance("hierarchical", epsilon=0.01, inference="nnls", noise="discrete_laplace"),
    )


def same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _dense_singular_values(gram: np.ndarray) -> np.ndarray:
    return np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None))


def plotted_ages_release():
    """A 1-D release of 2000 integer ages on [0, 100] in 50 bins (hierarchical, epsilon 0.5, seeded):
    the plots' and the report's test release."""
    values = np.random.default_rng(3).integers(18, 90, 2000)
    return dprange.release(values, dprange.Domain.interval(0, 100, 50), 0.5, mechanism="hierarchical", rng=1)


def plotted_grid_release():
    """A 10 x 8 grid release of 800 records (Kronecker, epsilon 1, seeded): the heatmap's test release."""
    rng = np.random.default_rng(4)
    columns = np.column_stack([rng.integers(0, 10, 800), rng.integers(0, 8, 800)])
    domain = dprange.ProductDomain([dprange.Domain.integers(0, 9), dprange.Domain.integers(0, 7)])
    return dprange.release_grid(columns, domain, 1.0, mechanism="kronecker", rng=2)


def split_selector(candidates: tuple[str, str, str]) -> Selector:
    """A two-split tree selector: the third candidate when the merge share (feature 1) is at most
    0.5, else the first when the heaviest bins hold at most half of N, else the second
    (auto-data's tests)."""
    nodes = [
        {"feature": 1, "threshold": 0.5, "left": 1, "right": 2},
        {"leaf": 2},
        {"feature": 3, "threshold": 0.5, "left": 3, "right": 4},
        {"leaf": 0},
        {"leaf": 1},
    ]
    return Selector("tree", candidates, {"nodes": nodes})


def write_table(frame, path):
    """Write a pandas frame as CSV or Parquet by ``path``'s suffix (Parquet skipped without pyarrow)."""
    if str(path).endswith(".csv"):
        frame.to_csv(path, index=False)
    else:
        pytest.importorskip("pyarrow")
        frame.to_parquet(path, index=False)
    return str(path)


def assert_feature_step_exactly_private(mech, epsilon: float, worst_loss) -> None:
    """auto-data's feature step (1-D or grid) from the definition: its shares (the last of
    ``shares`` is the rest) sum to ``feature_share`` of epsilon (no noisy total under replace,
    where N is public), and its worst log-ratio ``worst_loss(mech, epsilon, boost)`` meets that
    budget exactly."""
    *parts, _ = mech.shares(epsilon)
    eps_total, budget = parts[0], sum(parts)
    assert budget == pytest.approx(mech.feature_share * epsilon)
    assert (eps_total == 0) == (mech.neighbours == "replace")
    assert_exactly_private_at(lambda boost: worst_loss(mech, epsilon, boost), budget)


def assert_exactly_private_at(loss, budget: float) -> None:
    """A private step checked from the definition: its worst log-ratio ``loss(1.0)`` is at most
    ``budget`` and within 1% of it (tight: it depends on the data), and with half the noise
    (``loss(2.0)``: every step's epsilon doubled) it exceeds 1.5 ``budget``."""
    worst = loss(1.0)
    assert worst <= budget * (1 + 1e-9)
    assert worst >= 0.99 * budget  # tight: the features do depend on the data
    assert loss(2.0) > 1.5 * budget  # half the noise: not private


def recorded_rules(selector) -> dict:
    """The rules a rules fit records beside its tree (benchmarks/train_auto_data.py and
    train_auto_grid.py, fit_rules); skips the test when the selector is another kind of fit."""
    rules = selector.model.get("rules")
    if rules is None:
        pytest.skip("the shipped fit is not a rules fit")
    return rules


def rule_test_rows(selector, rng, rows: int, columns, placements) -> np.ndarray:
    """Feature rows to test a selector's tree against its recorded rule: column j uniform on
    ``columns[j]`` = (low, high), or drawn from it when it is a list of values; each (threshold,
    candidate columns) of ``placements`` is then set on 40 random rows, in one of those columns;
    the rows clipped to the selector's training range, as it reads them."""
    x = np.column_stack(
        [rng.choice(c, rows) if isinstance(c, list) else rng.uniform(c[0], c[1], rows) for c in columns]
    ).astype(float)
    for threshold, where in placements:
        x[rng.integers(0, rows, 40), rng.choice(where)] = threshold
    return selector.within_training(x)


def assert_bootstrap_follows_releases(make, x, epsilon, lows, highs, rtol, releases=40) -> None:
    """The bootstrap of ``make()``'s release of ``x`` is within ``rtol`` of the spread of its
    rectangles' answers over ``releases`` releases (seeds 0, 1, ...), and the answers claim no
    exact error bars (a data-aware release whose bias depends on the data)."""
    from dprange.data_aware.spatial_trees import box_sums, summed_area

    drawn = [make().release(x, epsilon, rng=seed) for seed in range(releases)]
    spread = np.std([box_sums(summed_area(r.counts), lows, highs) for r in drawn], axis=0)
    np.testing.assert_allclose(drawn[0].bootstrap(lows, highs, reps=200, rng=1), spread, rtol=rtol)
    assert not drawn[0].exact_error_bars and np.isnan(drawn[0].rectangle([0, 0], [3, 3]).stderr)


#: A 16 x 16 grid's side and four rectangles over it (the tests of auto's refits and DAWA's pruning).
HEAVY_SIDE = 16
HEAVY_LOWS = np.array([[0, 0], [2, 3], [0, 0], [9, 1]])
HEAVY_HIGHS = np.array([[HEAVY_SIDE - 1, HEAVY_SIDE - 1], [12, 14], [7, 7], [15, 6]])


def heavy_cells_grid() -> np.ndarray:
    """Six heavy cells (50-400 records) on an empty 16 x 16 grid."""
    rng = np.random.default_rng(0)
    x = np.zeros((HEAVY_SIDE, HEAVY_SIDE), dtype=np.int64)
    x.flat[rng.choice(HEAVY_SIDE * HEAVY_SIDE, 6, replace=False)] = rng.integers(50, 400, 6)
    return x


def heaped_grid() -> np.ndarray:
    """1,000 records on 64 x 64: most in the 4 x 4 corner block, a fiftieth of its density along
    the two bounds (amounts heaped at zero, as on MDSALARY-OVERT or ADULT-2D), 101 cells occupied."""
    p = np.zeros((64, 64))
    p[:4, :4] = 1.0
    p[0, 4:] = p[4:, 0] = 0.02
    return np.random.default_rng(0).multinomial(1000, (p / p.sum()).ravel()).reshape(64, 64)


def dyadic_marks_by_loops(least_squares, model, threshold: float) -> np.ndarray:
    """The cells of the aligned dyadic squares of a square grid whose least-squares sum is below
    ``threshold`` times its exact standard error under ``model``, square by square (the marks of
    auto_support and auto_pruned, written out)."""
    least_squares = np.asarray(least_squares, dtype=float)
    side_of_grid = least_squares.shape[0]
    marked = np.zeros(least_squares.shape, dtype=bool)
    side = 1
    while side <= side_of_grid:
        for i in range(0, side_of_grid, side):
            for j in range(0, side_of_grid, side):
                low, high = np.array([[i, j]]), np.array([[i + side - 1, j + side - 1]])
                sd = float(np.sqrt(model.rectangle_variance(low, high)[0]))
                if least_squares[i : i + side, j : j + side].sum() < threshold * sd:
                    marked[i : i + side, j : j + side] = True
        side *= 2
    return marked
