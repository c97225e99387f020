"""The privacy of every central mechanism, computed exactly from the mechanism as implemented.

For a small dataset and every neighbour (add/remove: one record added to or removed from any
bin; replace: one record moved between any two bins), ``measure()`` gives the exact value of
every measured row, and the worst privacy loss (Laplace) or delta (Gaussian) follows from the
noise pmfs; it must be at most the budget recorded.  The delta computations are checked against
brute force first."""

import math
from fractions import Fraction

import numpy as np
import pytest
from _helpers import (
    dataset,
    discrete_gaussian_delta_lattice,
    discrete_gaussian_delta_projection,
    discrete_gaussian_delta_upper,
    discrete_gaussian_pmf,
    discrete_gaussian_table,
    gaussian_delta,
    laplace_worst_loss,
    sampled_sigma2,
)
from scipy import special

import dprange
from dprange import Domain, Flat, Hierarchical, ParameterError, Wavelet
from dprange.mechanisms.matrix import Matrix
from dprange.mechanisms.optimized import Optimized
from dprange.mechanisms.tables import release_table

EPS = 0.8
DELTA = 1e-5


def _window(sigma, shifts):
    return int(math.ceil(40 * sigma)) + 2 * max(abs(s) for s in shifts) + 2


def brute_force_delta(pairs, epsilon) -> float:
    """Two discrete-Gaussian coordinates: sum over the 2-D lattice of P (1 - e^eps Q/P)_+."""
    (s1, sh1), (s2, sh2) = pairs
    T = int(max(_window(s1, [sh1]), _window(s2, [sh2])))
    k = np.arange(-T, T + 1)
    p1, p2 = discrete_gaussian_pmf(s1, k), discrete_gaussian_pmf(s2, k)
    q1, q2 = discrete_gaussian_pmf(s1, k - sh1), discrete_gaussian_pmf(s2, k - sh2)
    P = p1[:, None] * p2[None, :]
    Q = q1[:, None] * q2[None, :]
    return float(np.sum(np.clip(P - math.exp(epsilon) * Q, 0.0, None)))


def test_discrete_gaussian_delta_matches_brute_force_on_a_2d_lattice():
    """The lattice computation equals brute force for equal sigmas; the rounded-up privacy
    loss distribution bounds it from above, tightly, for unequal ones."""
    for eps, sigma, shifts in [(0.5, 1.3, (1, 2)), (1.0, 2.0, (2, 2)), (0.2, 0.9, (1, -1))]:
        brute = brute_force_delta([(sigma, shifts[0]), (sigma, shifts[1])], eps)
        assert brute > 1e-4
        assert discrete_gaussian_delta_lattice(sigma, list(shifts), eps) == pytest.approx(brute, rel=1e-9)
    for eps, pairs in [(0.5, [(1.1, 1), (2.3, 2)]), (1.0, [(0.8, -1), (1.7, 1)])]:
        brute = brute_force_delta(pairs, eps)
        upper = discrete_gaussian_delta_upper(pairs, eps)
        assert brute <= upper <= brute * 1.02 + 1e-9
    # large sigmas and shifts (a quantised Matrix): blocks of integers, still an upper bound
    for eps, sigma, shifts in [(0.5, 40.0, (30, 50)), (0.8, 120.0, (-100, 160))]:
        lattice = discrete_gaussian_delta_lattice(sigma, list(shifts), eps)
        upper = discrete_gaussian_delta_upper([(sigma, shifts[0]), (sigma, shifts[1])], eps)
        assert lattice > 1e-4 and lattice <= upper <= lattice * 1.02
    assert discrete_gaussian_delta_lattice(15.0, [10, 20], 0.5) == pytest.approx(
        brute_force_delta([(15.0, 10), (15.0, 20)], 0.5), rel=1e-9
    )


def exact_delta_two_coordinates(pairs, epsilon) -> tuple[float, float]:
    """(delta(epsilon), its error bound) of two shifted discrete-Gaussian coordinates with any
    sigmas, exactly: F(z) = P(w_1 K_1 + w_2 K_2 < z) = sum_k2 pmf_2(k2) P(K_1 <= ceil((z - w_2 k2)
    / w_1) - 1) from the cumulative table of K_1 (O(sigma) per F, where the lattice is
    O(sigma shift)); the tables' missing mass bounds the error."""
    (r1, s1), (r2, s2) = pairs if pairs[0][1] > 0 else [(r, -s) for r, s in pairs]
    v1, v2 = sampled_sigma2(r1), sampled_sigma2(r2)
    T1, _, cumulative, missing1 = discrete_gaussian_table(r1)
    T2, p2, _, missing2 = discrete_gaussian_table(r2)
    k2 = np.arange(-T2, T2 + 1)

    def cdf(z):
        j = np.clip(np.ceil((z - s2 / v2 * k2) / (s1 / v1)) - 1, -T1 - 1, T1).astype(np.int64)
        return math.fsum(p2 * cumulative[j + T1 + 1])

    mu2 = s1 * s1 / v1 + s2 * s2 / v2
    delta = cdf(mu2 / 2 - epsilon) - math.exp(epsilon) * cdf(-mu2 / 2 - epsilon)
    return delta, (1 + math.exp(epsilon)) * (missing1 + missing2)


def test_projection_bound_brackets_the_exact_delta_for_large_sigmas():
    """The projection bracket (used beyond the lattice tables, sigma ~ 2e10 for a quantised
    Kronecker strategy) contains the exact delta of two coordinates with unequal sigmas
    4e4 and 6e4 (and equal ones), and is tight (relative width below 5e-3), as is the grid
    bound gaussian_delta uses below PROJECTION_SIGMA (within 2%); at sigma = 2e10 it
    is the continuous Gaussian's delta to 1e-7 and its width is below 1e-7 of it."""
    for eps, pairs in [(0.5, [(4e4, 16000), (6e4, -28000)]), (1.0, [(3e4, 34000), (3e4, 11000)])]:
        exact, error = exact_delta_two_coordinates(pairs, eps)
        lower, upper = discrete_gaussian_delta_projection(pairs, eps)
        assert exact > 0.05 and error < 1e-9
        assert lower <= exact + error and exact - error <= upper
        assert upper - lower <= 5e-3 * exact
        assert exact - error <= gaussian_delta(pairs, eps) <= 1.02 * exact  # below PROJECTION_SIGMA: the grid bound
    pairs, eps = [(2e10, 3_000_000_000), (2e10, -2_000_000_000)], 0.5
    lower, upper = discrete_gaussian_delta_projection(pairs, eps)
    mu = math.sqrt(sum(s * s / sampled_sigma2(sigma) for sigma, s in pairs))
    continuous = special.ndtr(mu / 2 - eps / mu) - math.exp(eps) * special.ndtr(-mu / 2 - eps / mu)
    assert lower <= continuous * (1 + 1e-7) and upper >= continuous * (1 - 1e-7)
    assert 0 < upper - lower <= 1e-7 * upper and gaussian_delta(pairs, eps) == upper


def neighbours(x, relation):
    n = x.size
    for i in range(n):
        if relation == "add_remove":
            e = np.zeros(n, dtype=np.int64)
            e[i] = 1
            yield x + e
            yield x - e
        else:
            for j in range(n):
                if j != i:
                    y = x.copy()
                    y[i] -= 1
                    y[j] += 1
                    yield y


def measured_rows(mech, strategy, counts):
    """Exact value of every measured row, by level (as measure() computes them)."""
    return mech._exact_levels(strategy, np.asarray(counts))


def shifted_rows(meas, rows_x, rows_y):
    """[(scale, shift)] of every measured row whose exact value differs."""
    out = []
    for depth, spec in enumerate(meas.noise):
        if spec is None:
            continue
        diff = np.asarray(rows_y[depth]) - np.asarray(rows_x[depth])
        assert np.all(diff == np.round(diff)), "every measured query must be integer-valued"
        out.extend((spec.scale, int(s)) for s in diff[diff != 0])
    return out


def worst_case(mech, n, epsilon, delta):
    """(measurements, worst loss or delta) over all neighbours of dataset(n), both orders."""
    x = dataset(n)
    meas = mech.measure(x, epsilon, delta=delta, rng=0)
    strategy = mech.strategy(n)
    rows_x = measured_rows(mech, strategy, x)
    measured = [d for d, spec in enumerate(meas.noise) if spec is not None]
    for depth in measured:  # integer noise on an integer query reveals nothing more
        assert np.all(np.asarray(rows_x[depth]) == np.round(rows_x[depth]))
    dense = strategy.dense() if hasattr(strategy, "dense") else strategy.explicit()
    np.testing.assert_array_equal(
        np.concatenate([np.ravel(rows_x[d]) for d, s in enumerate(meas.noise) if s is not None]), dense @ x
    )
    worst, seen = 0.0, set()
    for y in neighbours(x, mech.neighbours):
        shifts = shifted_rows(meas, rows_x, measured_rows(mech, strategy, y))
        for signed in (shifts, [(scale, -s) for scale, s in shifts]):
            key = tuple(sorted(signed))
            if key in seen:
                continue
            seen.add(key)
            if meas.noise_kind == "gaussian":
                worst = max(worst, gaussian_delta(signed, meas.epsilon))
            else:
                worst = max(worst, laplace_worst_loss(signed))
    return meas, worst


def hierarchical_list(branching, root=True, neighbours="add_remove", noise="auto"):
    """A Hierarchical whose explicit budget list (decreasing toward the root) sums to 99.9% of EPS."""

    def build(n):
        probe = Hierarchical(branching, measure_root=root, neighbours=neighbours).strategy(n)
        weights = np.arange(1, len(probe.measured_depths) + 1, dtype=float)
        return Hierarchical(
            branching,
            list(0.999 * EPS * weights / weights.sum()),
            measure_root=root,
            neighbours=neighbours,
            noise=noise,
        )

    return build


def real_matrix(neighbours="add_remove", noise="auto"):
    def build(n):
        A = np.random.default_rng(n).uniform(0.1, 1.0, (n + 2, n))
        return Matrix(A, neighbours=neighbours, noise=noise)

    return build


def integer_matrix(neighbours="add_remove", noise="auto"):
    def build(n):
        A = np.vstack([np.eye(n), np.triu(np.ones((n, n)))[:2], 2 * np.eye(n)[::-1][:1]])
        return Matrix(A, neighbours=neighbours, noise=noise)

    return build


def fixed(cls, *args, **kwargs):
    return lambda n: cls(*args, **kwargs)


def mechanisms(relation, noise):
    kw = {"neighbours": relation, "noise": noise}
    out = [
        ("flat", fixed(Flat, **kw)),
        ("H2", fixed(Hierarchical, 2, **kw)),
        ("H3-geometric", fixed(Hierarchical, 3, "geometric", **kw)),
        ("H[3,2]", fixed(Hierarchical, [3, 2, 2], **kw)),
        ("H4-list", hierarchical_list(4, neighbours=relation, noise=noise)),
        ("wavelet", fixed(Wavelet, **kw)),
        ("matrix-int", integer_matrix(relation, noise)),
        ("matrix-real", real_matrix(relation, noise)),
        ("optimized", lambda n: Optimized("all-range", **kw)),  # p-identity (Laplace), eigen (Gaussian)
    ]
    if relation == "add_remove":
        out += [
            ("H2-no-root", fixed(Hierarchical, 2, measure_root=False, **kw)),
            ("H3-geometric-no-root", fixed(Hierarchical, 3, "geometric", measure_root=False, **kw)),
            ("H2-list-no-root", hierarchical_list(2, root=False, noise=noise)),
        ]
    return out


CASES = [
    (relation, noise, name, build)
    for relation in ("add_remove", "replace")
    for noise in ("discrete_laplace", "gaussian")
    for name, build in mechanisms(relation, noise)
]


@pytest.mark.parametrize("relation,noise,name,build", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
@pytest.mark.slow
def test_worst_case_privacy_loss_is_at_most_the_budget(relation, noise, name, build):
    """On 2-9 bins: the exact worst-case loss (Laplace) is at most the epsilon recorded, which
    is at most the budget, and attains it (the calibration is not loose); the exact
    delta(epsilon) (Gaussian, the discrete Gaussian as sampled) is at most delta."""
    delta = DELTA if noise == "gaussian" else 0.0
    for n in range(2, 10):
        mech = build(n)
        meas, worst = worst_case(mech, n, EPS, delta)
        assert meas.noise_kind == noise
        assert meas.epsilon <= EPS
        if noise == "gaussian":
            assert worst <= delta
        else:
            assert worst <= meas.epsilon * (1 + 1e-12)
            assert worst == pytest.approx(meas.epsilon, rel=1e-6)  # tight (the samplers may round a scale up slightly)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_epsilon_recorded_is_the_budget_list_sum(relation):
    """P8: a list summing to less than epsilon is accepted and the release records its exact
    sum (rounded up), which is what the worst-case loss attains."""
    mech = Hierarchical(2, [0.125, 0.25, 0.25], measure_root=True, neighbours=relation)  # 3 measured levels on 4 bins
    if relation == "replace":
        mech = Hierarchical(2, [0.25, 0.375], neighbours=relation)
    meas, worst = worst_case(mech, 4, 1.0, 0.0)
    assert meas.epsilon == (0.625 if relation == "add_remove" else 0.625)
    assert worst == pytest.approx(0.625, rel=1e-6)
    assert mech.release(dataset(4), 1.0, rng=0).epsilon == 0.625


def test_wavelet_replace_gaussian_two_bins_meets_delta():
    """P2: moving a record between the two halves of a node changes its difference L - R by 2,
    so the L2 sensitivity is 2 at n = 2 (the old sqrt 2 gave delta 8e-4 at epsilon 1)."""
    meas, worst = worst_case(Wavelet(neighbours="replace", noise="gaussian"), 2, 1.0, 1e-5)
    assert worst <= 1e-5
    assert Wavelet(neighbours="replace").strategy(2).sensitivity("replace", 2) == 2.0


def test_tiny_epsilon_is_refused_by_every_mechanism():
    """P1: below a per-level epsilon of ~5.5e-17 discrete Laplace noise is exactly 0; every
    mechanism and mechanism="auto" refuse such an epsilon before touching the data, with a
    message about epsilon (M3: no longer "the leaves of the tree must be measured")."""
    x = dataset(6)
    for mech in (
        Flat(),
        Hierarchical(2),
        Hierarchical(2, neighbours="replace"),
        Wavelet(),
        Wavelet(neighbours="replace"),
        Matrix(np.eye(6)),
        Matrix(np.random.default_rng(0).uniform(0, 1, (7, 6))),
    ):
        with pytest.raises(ParameterError, match="epsilon is too small"):
            mech.measure(x, 1e-300, rng=0)
        with pytest.raises(ParameterError, match="epsilon is too small"):
            mech.error_model(6, 1e-300)
    with pytest.raises(ParameterError, match="epsilon is too small"):
        dprange.release(np.arange(6), Domain.integers(0, 5), 1e-300, mechanism="auto", rng=0)
    with pytest.raises(ParameterError, match="epsilon is too small"):
        release_table(np.ones((2, 2), dtype=int), 1e-300)


def test_noise_scale_rounding_never_exceeds_epsilon():
    """Scales are rounded up until the loss is at most epsilon in exact rational arithmetic:
    for a flat release the loss is 1/scale per bin."""
    rng = np.random.default_rng(11)
    for eps in rng.uniform(0.01, 5.0, 200):
        (spec,) = [s for s in Flat().measure(dataset(2), float(eps), rng=0).noise if s is not None]
        assert 1 / Fraction(spec.scale) <= Fraction(float(eps))
        assert spec.scale == pytest.approx(1 / eps, rel=1e-15)


def test_seeded_releases_are_marked():
    """P9: a release whose noise came from a seed says so in to_dict()["privacy"]."""
    x = dataset(4)
    for rng, seeded in (
        (0, True),
        (np.random.default_rng(1), True),
        (None, False),
        (dprange.privacy.samplers.SecureRandom(), False),
    ):
        rel = Hierarchical(2).release(x, 1.0, rng=rng)
        assert rel.seeded is seeded and rel.to_dict()["privacy"]["seeded"] is seeded
        assert release_table(np.ones((2, 2), dtype=int), 1.0, rng=rng).seeded is seeded


def test_table_release_loss_is_epsilon():
    """release_table, add/remove: one record changes one cell by 1; the exact worst loss from
    the pmf of the noise it used is epsilon."""
    table = np.array([[3, 0, 2], [1, 4, 1]])
    for eps in (0.3, 1.0, 2.5):
        rel = release_table(table, eps, public_marginals={(): float(table.sum())}, rng=0)
        assert rel.noise.kind == "discrete_laplace"
        loss = laplace_worst_loss([(rel.noise.scale, 1)])
        assert loss <= eps * (1 + 1e-12) and loss == pytest.approx(eps, rel=1e-6)
