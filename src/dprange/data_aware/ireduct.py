"""iReduct: counting queries answered with budgets shifted towards small answers, for low
*relative* error (Xiao, Bender, Hay and Gehrke, "iReduct: Differential Privacy with Reduced
Relative Errors", SIGMOD 2011).

Every query starts with a small share of epsilon; then, one at a time, the query whose
estimated relative error (noise standard error over max(|noisy answer|, sanity bound)) is
largest gets a larger share, while the whole stays epsilon-DP; a query whose increase would
exceed epsilon is frozen.  Its answer is then *noised down*: re-drawn with less noise,
correlated with the answer already published so that only the final noise level counts.

Noise-down.  For discrete Laplace noise of decays p_c = exp(-1/b_c) > p_f = exp(-1/b_f)
(coarse and fine scales), V_c = V_f + W with V_f of scale b_f and W independent,

    W = 0 with probability pi_0 = (p_f / p_c) ((1 - p_c) / (1 - p_f))^2, else discrete
    Laplace of scale b_c,

has exactly the discrete Laplace law of scale b_c: the generating functions satisfy
G_c(z) / G_f(z) = pi_0 + (1 - pi_0) G_c(z), with G(z) = (1 - p)^2 / ((1 - p z)(1 - p / z)).
This is the discrete counterpart of the Laplace noise-down of Koufogiannis, Han and Pappas
("Optimality of the Laplace Mechanism in Differential Privacy", arXiv 1504.00065, 2015;
iReduct's NoiseDown is the same idea for continuous Laplace).  So the coarse-to-fine
answers of a query form a Markov chain in which every coarser answer is the finer one plus
data-independent noise: publishing the answers up to level j is post-processing of level j
alone, and the privacy loss of the whole run is that of the final levels (Xiao et al.,
section 4).  Drawing the chain from the finest level upwards before the run gives the same
joint law as sampling each finer answer from its conditional given the coarser ones, with
exact samplers only: W's Bernoulli draws are exact (Canonne, Kamath and Steinke, NeurIPS
2020, Algorithm 1) and (1 - p_c) / (1 - p_f) is drawn by a loop of two such Bernoullis.

Accounting.  Query q gets epsilon u_q / U for integer units u_q and discrete-Laplace noise
calibrated to exactly that share (sensitivity 1).  A record changes the queries that contain
its cell by 1 each, so the run is (epsilon / U) max_cell sum_{q contains cell} u_q -DP under
add/remove; under replace it is charged twice that (an upper bound: the record leaves one
cell and enters another).  The constraint is checked in integers; the release records the
exact spend.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from .._validation import check_epsilon, float_at_least
from ..errors import ParameterError
from ..privacy.noise import NoiseSpec
from ..privacy.samplers import _bernoulli_exp, _laplace_rational, resolve_rng, sample_discrete_laplace
from ..strategies.calibration import is_seeded
from .steps import laplace_spec


# ----------------------------------------------------------------------------- noise-down
def decay_exponent(spec: NoiseSpec) -> Fraction:
    """1 / b as an exact fraction for the discrete Laplace scale b actually sampled (p = exp(-1/b))."""
    t, s = _laplace_rational(spec.scale)
    return Fraction(s, t)


def _bernoulli_exp_fraction(exponent: Fraction, count: int, rng) -> np.ndarray:
    """``count`` exact draws of Bernoulli(exp(-exponent)), exponent >= 0 rational."""
    num = np.full(count, exponent.numerator, dtype=object if exponent.numerator > 2**62 else np.int64)
    return _bernoulli_exp(num, exponent.denominator, rng)


def _bernoulli_ratio(coarse: Fraction, fine: Fraction, count: int, rng) -> np.ndarray:
    """Exact Bernoulli((1 - p_c) / (1 - p_f)) with p = exp(-exponent), p_f < p_c: repeat
    {True if not Bernoulli(p_c); False if not Bernoulli(p_f / p_c)}, so that
    P = (1 - p_c) + p_f P."""
    out = np.zeros(count, dtype=bool)
    pending = np.arange(count)
    while pending.size:
        stop_true = ~_bernoulli_exp_fraction(coarse, pending.size, rng)
        out[pending[stop_true]] = True
        pending = pending[~stop_true]
        go_on = _bernoulli_exp_fraction(fine - coarse, pending.size, rng)
        pending = pending[go_on]
    return out


def noise_up(fine: NoiseSpec, coarse: NoiseSpec, size: int, rng) -> np.ndarray:
    """W such that V_f + W has the discrete Laplace law of ``coarse`` when V_f has that of
    ``fine`` (module doc): 0 with probability pi_0, else discrete Laplace of ``coarse``."""
    g_c, g_f = decay_exponent(coarse), decay_exponent(fine)
    if not g_f > g_c:
        raise ParameterError("noise_up needs a fine scale strictly below the coarse one")
    zero = _bernoulli_exp_fraction(g_f - g_c, size, rng)
    zero &= _bernoulli_ratio(g_c, g_f, size, rng)
    zero &= _bernoulli_ratio(g_c, g_f, size, rng)
    laplace = sample_discrete_laplace(coarse.scale, size, rng)
    return np.where(zero, 0, laplace)


def noise_up_pmf(fine: NoiseSpec, coarse: NoiseSpec, k) -> np.ndarray:
    """P(W = k) of :func:`noise_up` (floats; for tests and analysis)."""
    p_c, p_f = math.exp(-float(decay_exponent(coarse))), math.exp(-float(decay_exponent(fine)))
    pi0 = (p_f / p_c) * ((1 - p_c) / (1 - p_f)) ** 2
    k = np.asarray(k)
    return (1 - pi0) * coarse.pmf(k) + pi0 * (k == 0)


# ----------------------------------------------------------------------------- queries
def marginal_queries(shape, axes) -> sp.csr_matrix:
    """The counting queries of a marginal of a grid histogram (cells in C order): one row per
    cell of the marginal over ``axes``, 1 on the grid cells it sums."""
    shape = tuple(int(n) for n in shape)
    axes = tuple(int(a) for a in np.atleast_1d(axes))
    if not axes or len(set(axes)) != len(axes) or any(a < 0 or a >= len(shape) for a in axes):
        raise ParameterError(f"axes must be distinct axis numbers in 0..{len(shape) - 1}, got {list(axes)}")
    coords = np.indices(shape).reshape(len(shape), -1)
    rows = np.ravel_multi_index(tuple(coords[a] for a in axes), tuple(shape[a] for a in axes))
    size = math.prod(shape[a] for a in axes)
    return sp.csr_matrix((np.ones(coords.shape[1]), (rows, np.arange(coords.shape[1]))), shape=(size, coords.shape[1]))


def check_queries(queries, cells: int) -> sp.csr_matrix:
    if queries is None:
        return sp.identity(cells, format="csr")
    matrix = sp.csr_matrix(queries)
    if matrix.shape[1] != cells or matrix.shape[0] < 1:
        raise ParameterError(f"queries must be a (queries x {cells}) 0/1 matrix over the histogram's cells")
    if matrix.nnz and not np.all(matrix.data == 1):
        raise ParameterError("queries must be counting queries: a 0/1 matrix over the cells")
    return matrix


def unit_levels(initial: int, units: int, growth: float) -> list[int]:
    """Budget levels (integer units of epsilon / units) from ``initial`` up to ``units``,
    multiplied by ``growth`` (at least +1) each step."""
    out = [initial]
    while out[-1] < units:
        out.append(min(units, max(out[-1] + 1, math.ceil(out[-1] * growth))))
    return out


# ----------------------------------------------------------------------------- iReduct
@dataclass
class IReductResult:
    """Noisy answers of the queries, each with its final share of epsilon, its noise scale and
    standard error, and its *estimated* relative error (standard error over
    max(|answer|, sanity)): an estimate from the noisy answer, not a bound with coverage."""

    answers: np.ndarray
    epsilons: np.ndarray
    scales: np.ndarray
    stderr: np.ndarray
    estimated_relative_error: np.ndarray
    epsilon: float
    neighbours: str
    seeded: bool
    raises: int
    private_steps: list = field(default_factory=list)


def share(epsilon: float, u: int, units: int) -> float:
    """The float nearest below epsilon u / units (a query's share; never above the exact one)."""
    value = epsilon * u / units
    while Fraction(value) > Fraction(epsilon) * Fraction(u, units):
        value = math.nextafter(value, 0.0)
    return value


def _score(spec: NoiseSpec, answer: float, sanity: float) -> float:
    return math.sqrt(spec.variance) / max(abs(answer), sanity)


def ireduct(
    counts,
    queries,
    epsilon,
    *,
    sanity: float = 1.0,
    initial: float | None = None,
    growth: float = 1.25,
    units: int = 1000,
    target: float | None = None,
    neighbours: str = "add_remove",
    rng=None,
) -> IReductResult:
    """iReduct (module doc) on the histogram ``counts`` (any shape, cells in C order) for the
    counting ``queries`` (a 0/1 matrix queries x cells, dense or sparse; None: every cell;
    :func:`marginal_queries` for a marginal).

    ``sanity``: the public bound delta of the relative error's denominator; ``initial``: the
    share of epsilon (of epsilon / 2 under replace) every query starts with (default:
    half the even split, 1 / (2 c) for at most c queries on one cell); ``growth``: the factor of a query's share at each
    noise-down; ``units``: the resolution of the shares; ``target``: stop raising a query once
    its estimated relative error is at most this.  Cost O(queries x levels log queries)."""
    epsilon = check_epsilon(epsilon)
    if neighbours not in ("add_remove", "replace"):
        raise ParameterError(f"neighbours must be add_remove or replace, got {neighbours!r}")
    if not (isinstance(sanity, (int, float)) and sanity > 0 and math.isfinite(sanity)):
        raise ParameterError(
            f"sanity must be a positive number (the relative error's smallest denominator), got {sanity!r}"
        )
    if not (isinstance(growth, (int, float)) and growth > 1):
        raise ParameterError(f"growth must be a number > 1, got {growth!r}")
    if isinstance(units, bool) or not isinstance(units, (int, np.integer)) or units < 2:
        raise ParameterError(f"units must be an integer >= 2, got {units!r}")
    x = np.asarray(counts)
    if x.size == 0 or x.dtype.kind not in "biu" or np.any(x < 0):
        raise ParameterError("counts must be a non-negative integer histogram")
    matrix = check_queries(queries, x.size)
    capacity = int(units) if neighbours == "add_remove" else int(units) // 2
    overlap = max(1, int(np.asarray(matrix.sum(axis=0)).max()))
    if initial is None:
        initial = 1.0 / (2 * overlap)
    if not (isinstance(initial, (int, float)) and 0 < initial <= 1):
        raise ParameterError(f"initial must be a share of epsilon in (0, 1], got {initial!r}")
    start = max(1, math.floor(initial * capacity))
    if overlap * start > capacity:
        raise ParameterError(
            f"the starting shares spend more than epsilon ({overlap} queries share a cell); lower initial"
        )
    levels = unit_levels(start, capacity, float(growth))
    specs = [laplace_spec(share(epsilon, u, int(units)), 1) for u in levels]
    source = resolve_rng(rng)
    true = np.asarray(matrix @ x.ravel().astype(np.int64)).astype(np.int64)
    m = true.size
    # the noise chains, finest level first (module doc): chain[j] has the law of level j
    chain = [np.zeros(m, dtype=np.int64) for _ in levels]
    chain[-1] = np.asarray(specs[-1].sample((m,), source), dtype=np.int64)
    for j in range(len(levels) - 2, -1, -1):
        chain[j] = chain[j + 1] + np.asarray(noise_up(specs[j + 1], specs[j], m, source), dtype=np.int64)
    level = np.zeros(m, dtype=np.int64)
    answers = (true + chain[0]).astype(float)
    column_units = np.asarray(matrix.T @ np.full(m, start)).astype(np.int64)  # units spent per cell
    rows = [matrix.indices[matrix.indptr[i] : matrix.indptr[i + 1]] for i in range(m)]
    heap = [(-_score(specs[0], answers[i], sanity), i) for i in range(m)]
    heapq.heapify(heap)
    raises = 0
    while heap:
        negative, i = heapq.heappop(heap)
        if target is not None and -negative <= target:
            break  # every remaining query is at or below the target
        j = int(level[i])
        if j + 1 >= len(levels):
            continue
        step_units = levels[j + 1] - levels[j]
        cells = rows[i]
        if cells.size and int(column_units[cells].max()) + step_units > capacity:
            continue  # frozen: its noise-down would spend more than epsilon
        column_units[cells] += step_units
        level[i] = j + 1
        answers[i] = float(true[i] + chain[j + 1][i])
        raises += 1
        heapq.heappush(heap, (-_score(specs[j + 1], answers[i], sanity), i))
    spent_units = int(column_units.max()) * (1 if neighbours == "add_remove" else 2)
    if spent_units > units:
        raise ParameterError("iReduct spent more than epsilon; report this as a bug")
    spent = Fraction(epsilon) * Fraction(spent_units, int(units))
    final = [specs[j] for j in level]
    stderr = np.array([math.sqrt(s.variance) for s in final])
    return IReductResult(
        answers=answers,
        epsilons=np.array([share(epsilon, levels[j], int(units)) for j in level]),
        scales=np.array([s.effective_scale for s in final]),
        stderr=stderr,
        estimated_relative_error=stderr / np.maximum(np.abs(answers), sanity),
        epsilon=min(float_at_least(spent), epsilon),
        neighbours=neighbours,
        seeded=is_seeded(rng),
        raises=raises,
        private_steps=[
            {"step": "answers (final noise levels; noise-down)", "epsilon": float_at_least(spent), "times": 1}
        ],
    )
