"""Privacy of every optimised strategy against the definition, on tiny domains.

For each optimised mechanism (1-D ``Optimized`` with every template; ``OptimizedKronecker`` on
two and three axes with both templates, including the coarse per-axis quantisation chosen
where the product's noise would not fit; ``OptimizedMarginals``), both neighbouring relations
and both noise kinds, the test reads what a release measures (``measure`` on zero counts: the
integer blocks and their noise) and computes, by brute force in exact arithmetic (Python
integers and fractions, never the library's own sensitivity code), the maximum over every
pair of neighbouring datasets of the change of the measured answers:

* add/remove: a record with value i is added, the answers move by the column a_i;
* replace: a record moves from bin i to bin j, they move by a_i - a_j (every i != j).

Two checks per case (McKenna, Miklau, Hay and Machanavajjhala, VLDB 2018, for the strategies;
the matrix mechanism's sensitivity of Li, Hay, Rastogi, Miklau and McGregor, PODS 2010):

1. the sensitivity the release calibrates to (the plan's ``sensitivity_power`` with the
   blocks' budgets, what :func:`dprange.strategies.calibration.calibrate` reads) is never below the exact
   maximum;
2. the noise as drawn meets the definition: discrete Laplace rows shifted by s lose at most
   |s| / b each, so max over pairs of sum_l ||A_l d||_1 / b_l <= epsilon (in fractions);
   discrete Gaussian rows give rho = max over pairs of sum_l ||A_l d||_2^2 / (2 sigma_l^2)
   zCDP, whose (epsilon, delta) conversion (Canonne, Kamath and Steinke, NeurIPS 2020,
   evaluated here independently over a grid of orders) is at most delta.

``test_the_checks_fail_on_an_understated_sensitivity`` shows that the checks can fail.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dprange.inference.p_identity import DiagonalPlusRows
from dprange.mechanisms.optimized import Optimized
from dprange.mechanisms.optimized_grid import FINEST_AXIS_BITS, OptimizedKronecker, OptimizedMarginals

#: The choices as made, before the fixture below replaces them for the optimised strategies' tests.
RELEASED_STRATEGY, IDENTITY_IS_LOWER = Optimized.released_strategy, OptimizedKronecker.identity_is_lower

pytestmark = pytest.mark.usefixtures("private_cache")  # every test: an empty strategy cache


@pytest.fixture(autouse=True)
def measure_the_optimised_strategies(monkeypatch):
    """The privacy of the optimised strategies themselves: on these small domains the identity
    often has the lower error as released and would be measured instead
    (``Optimized.released_strategy``, ``OptimizedKronecker.identity_is_lower``), which is the
    identity's test again."""
    monkeypatch.setattr(Optimized, "released_strategy", lambda self, optimised, epsilon, delta: optimised)
    monkeypatch.setattr(OptimizedKronecker, "identity_is_lower", lambda self, *args: False)


DELTA = 1e-6


# ----------------------------------------------------------------------------- the definition
def change_powers(A: np.ndarray, p: int, neighbours: str) -> np.ndarray:
    """||A (x' - x)||_p^p for every neighbouring change, exactly: x' - x = e_i (add/remove,
    one per bin) or e_i - e_j (replace, every i != j), in int64 where no sum can reach 2^62,
    else in Python integers."""
    A = np.asarray(A, dtype=float)
    assert np.all(A == np.round(A)), "every measured query must be an integer combination of counts"
    bound = (2 * int(np.abs(A).max())) ** p * A.shape[0]
    exact = A.astype(np.int64).astype(np.int64 if bound < 2**62 else object)
    if neighbours == "add_remove":
        return (abs(exact) ** p).sum(axis=0)
    n = A.shape[1]
    return np.concatenate([(abs(exact[:, [i]] - exact[:, np.arange(n) != i]) ** p).sum(axis=0) for i in range(n)])


def exact_worst(blocks: list[np.ndarray], weights: list[Fraction], p: int, neighbours: str) -> Fraction:
    """max over neighbouring pairs of sum_l weights_l ||A_l (x' - x)||_p^p, exactly (fractions
    over the distinct tuples of per-block changes)."""
    changes = np.stack([change_powers(A, p, neighbours) for A in blocks])
    distinct = {tuple(int(v) for v in column) for column in changes.T}
    return max(sum((w * v for w, v in zip(weights, column)), Fraction(0)) for column in distinct)


def zcdp_delta(rho: float, epsilon: float) -> float:
    """delta(epsilon) of rho-zCDP, inf over orders alpha > 1 of
    exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) (1 - 1 / alpha)^alpha (Canonne, Kamath
    and Steinke, NeurIPS 2020, Proposition 12), on a fine grid of log(alpha - 1)."""
    x = np.exp(np.linspace(-12.0, 12.0, 200001))
    log_delta = x * (rho - epsilon) + x * x * rho - np.log(x) - (1.0 + x) * np.log1p(1.0 / x)
    return float(np.exp(log_delta.min()))


# ----------------------------------------------------------------------------- what is measured
def measured(mech, shape, epsilon: float, delta: float):
    """(the plan measured, [(dense integer block, noise spec)]) of a release on zero counts."""
    counts = np.zeros(shape, dtype=np.int64)
    if len(shape) == 1:
        meas = mech.measure(counts, epsilon, delta=delta, rng=0)
        plan = mech.plan(mech.strategy(shape[0]), epsilon)
    else:
        meas = mech.measure(counts, epsilon, delta=delta, rng=0)
        plan = mech.plan(shape, epsilon)
    blocks = [m.block.dense() for m in meas.measurements]
    for A, planned in zip(blocks, plan.blocks):
        np.testing.assert_array_equal(A, planned.dense())  # the plan is the design measured
    return plan, meas, [(A, m.noise) for A, m in zip(blocks, meas.measurements)]


def check_definition(mech, shape, epsilon: float, delta: float):
    """Checks 1 and 2 of the module doc; returns (library, exact) sensitivity powers."""
    plan, meas, rows = measured(mech, shape, epsilon, delta)
    gaussian = meas.noise_kind == "gaussian"
    p = 2 if gaussian else 1
    budgets = [Fraction(e) for e in plan.budget]
    blocks = [A for A, _ in rows]
    exact = exact_worst(blocks, [w**p for w in budgets], p, mech.neighbours)
    library = Fraction(plan.sensitivity_power(p, mech.neighbours, budgets))
    assert library >= exact, f"calibrated to {float(library)!r}, the definition gives {float(exact)!r}"
    assert meas.epsilon <= epsilon
    if gaussian:
        inverse = [1 / (2 * Fraction(spec.scale) ** 2) for _, spec in rows]  # requested sigma <= sampled
        rho = exact_worst(blocks, inverse, 2, mech.neighbours)
        assert zcdp_delta(float(rho), meas.epsilon) <= delta
    else:
        inverse = [1 / Fraction(spec.scale) for _, spec in rows]  # requested b <= sampled
        assert all(spec.effective_scale >= spec.scale for _, spec in rows)
        assert exact_worst(blocks, inverse, 1, mech.neighbours) <= Fraction(meas.epsilon)
    return library, exact


def is_identity(A: np.ndarray) -> bool:
    return A.shape[0] == A.shape[1] and np.count_nonzero(A - np.diag(np.diag(A))) == 0


# ----------------------------------------------------------------------------- 1-D
#: (workload, n, template): domains where the optimum is not the identity (all ranges from 20
#: bins, prefixes from 9 for the L1 templates; the L2 ones, the eigen-design and the L2 optimum on any).
ONE_D = [
    ("all-range", 24, "p-identity"),
    ("prefix", 12, "p-identity"),
    ("all-range", 8, "p-identity-l2"),
    ("prefix", 6, "eigen"),
    ("all-range", 6, "l2-optimal"),
    ("all-range", 20, "dense"),
    ("prefix", 10, "dense-signed"),
]
ONE_D_CASES = [
    (*case, relation, noise)
    for case in ONE_D
    for relation in ("add_remove", "replace")
    for noise in ("discrete_laplace", "gaussian")
]


@pytest.mark.parametrize(
    "workload,n,template,relation,noise", ONE_D_CASES, ids=["-".join(map(str, c)) for c in ONE_D_CASES]
)
def test_1d_optimised_calibration_is_never_below_the_definition(workload, n, template, relation, noise):
    """Every template, relation and noise kind: the calibrated sensitivity is at least the
    exact maximum over neighbouring pairs on the integer strategy measured (equal: the 1-D
    blocks compute it exactly at these sizes), and the noise meets epsilon (delta)."""
    mech = Optimized(workload, template=template, neighbours=relation, noise=noise)
    ((A, _),) = measured(mech, (n,), 1.0, DELTA if noise == "gaussian" else 0.0)[2]
    assert not is_identity(A)  # an optimised strategy, not the identity's test again
    library, exact = check_definition(mech, (n,), 1.0, DELTA if noise == "gaussian" else 0.0)
    assert library == exact


# ----------------------------------------------------------------------------- k-D
#: (workload, template, shape, epsilon, noise kinds, bits): two axes at the 1-D quantisation;
#: two axes at a small epsilon and three L2 axes, quantised coarser (norm-keeping rounding) so
#: that the noise fits below 2^40 (None: coarser than the 1-D quantisation).
BOTH = ("discrete_laplace", "gaussian")
KD = [
    ("prefix-rectangles", "p-identity", (12, 2), 1.0, BOTH, FINEST_AXIS_BITS),
    ("all-rectangles", "p-identity-l2", (3, 2), 1.0, BOTH, FINEST_AXIS_BITS),
    ("prefix-rectangles", "p-identity", (10, 10), 2.0**-10, BOTH, None),
    ("all-rectangles", "p-identity-l2", (3, 2), 0.01, ("gaussian",), None),
    ("prefix-rectangles", "p-identity-l2", (2, 2, 2), 1.0, ("gaussian",), None),
    ("all-rectangles", "l2-optimal", (3, 2), 1.0, BOTH, FINEST_AXIS_BITS),
    ("prefix-rectangles", "l2-optimal", (2, 2, 2), 1.0, ("gaussian",), None),
]
KD_CASES = [
    (workload, template, shape, epsilon, bits, relation, noise)
    for workload, template, shape, epsilon, kinds, bits in KD
    for relation in ("add_remove", "replace")
    for noise in kinds
]


@pytest.mark.parametrize(
    "workload,template,shape,epsilon,bits,relation,noise",
    KD_CASES,
    ids=[f"{c[0]}-{c[1]}-{'x'.join(map(str, c[2]))}-eps{c[3]:g}-{c[5]}-{c[6]}" for c in KD_CASES],
)
def test_optimised_kronecker_calibration_is_never_below_the_definition(
    workload, template, shape, epsilon, bits, relation, noise
):
    """optimized_kronecker (both templates, both relations, both noise kinds), at the 1-D
    quantisation and at the coarser ones: the sensitivity calibrated on the integer product as
    measured is never below the definition's (L1 replace may be the triangle bound, at most
    twice), and the noise meets epsilon (delta)."""
    delta = DELTA if noise == "gaussian" else 0.0
    mech = OptimizedKronecker(workload, template=template, neighbours=relation, noise=noise)
    mech.follow_delta(delta)
    chosen = mech.quantisation_bits(shape, epsilon)
    if bits is None:
        assert chosen < FINEST_AXIS_BITS  # the coarse quantisation is what is checked
    else:
        assert chosen == bits
    factors = mech.plan(shape, epsilon).blocks[0].factors
    assert all(isinstance(f, DiagonalPlusRows) for f in factors)
    assert any(np.count_nonzero(f.rows) > 0 for f in factors)  # not the identity product
    library, exact = check_definition(mech, shape, epsilon, delta)
    assert library == exact


MARGINAL_CASES = [
    (order, shape, relation, noise)
    for order, shape in ((1, (3, 2, 2)), (2, (8, 8, 8)))
    for relation in ("add_remove", "replace")
    for noise in ("discrete_laplace", "gaussian")
]


@pytest.mark.parametrize(
    "order,shape,relation,noise", MARGINAL_CASES, ids=["-".join(map(str, c)) for c in MARGINAL_CASES]
)
def test_optimised_marginals_calibration_is_never_below_the_definition(order, shape, relation, noise):
    """optimized_marginals (1-way on 3 x 2 x 2, 2-way on 8 x 8 x 8): several blocks with their
    own budgets; the weighted sensitivity calibrated is the definition's and the noise meets
    epsilon (delta)."""
    delta = DELTA if noise == "gaussian" else 0.0
    mech = OptimizedMarginals(order, neighbours=relation, noise=noise)
    assert len(mech.weights(shape)) > 1
    library, exact = check_definition(mech, shape, 1.0, delta)
    assert library == exact


def test_matrix_with_large_integer_entries_calibrates_on_the_exact_sensitivity():
    """An integer strategy with entries near 2^30 (Matrix, measured as given): its squared
    column norms pass 2^53, where float sums were rounded down (by 2 under add/remove and 5
    under replace here); the calibration now takes the definition in integers."""
    from dprange import Matrix

    A = np.array([[2**30 + 1, 3], [1, 2**30]], dtype=float)
    for relation in ("add_remove", "replace"):
        for noise in ("discrete_laplace", "gaussian"):
            mech = Matrix(A, neighbours=relation, noise=noise)
            library, exact = check_definition(mech, (2,), 1.0, DELTA if noise == "gaussian" else 0.0)
            assert library == exact


# ----------------------------------------------------------------------------- the identity measured
IDENTITY_CASES = [
    ((24,), "add_remove", "discrete_laplace"),
    ((24,), "replace", "discrete_laplace"),
    ((24,), "replace", "gaussian"),
    ((20, 20), "add_remove", "discrete_laplace"),
    ((20, 20), "replace", "discrete_laplace"),
]


@pytest.mark.parametrize(
    "shape,relation,noise", IDENTITY_CASES, ids=["x".join(map(str, c[0])) + f"-{c[1]}-{c[2]}" for c in IDENTITY_CASES]
)
def test_the_identity_measured_in_place_of_the_optimum_meets_the_definition(monkeypatch, shape, relation, noise):
    """Where the identity has the lower error as released (all ranges of 24 bins, all
    rectangles of 20 x 20, epsilon 1), what is measured is one count per bin or cell (K = 1),
    calibrated on it: sensitivity 1 (add/remove) or 2 / sqrt(2) (replace), as the definition."""
    monkeypatch.setattr(Optimized, "released_strategy", RELEASED_STRATEGY)
    monkeypatch.setattr(OptimizedKronecker, "identity_is_lower", IDENTITY_IS_LOWER)
    delta = DELTA if noise == "gaussian" else 0.0
    if len(shape) == 1:
        mech = Optimized("all-range", template="p-identity", neighbours=relation, noise=noise)
    else:
        mech = OptimizedKronecker("all-rectangles", template="p-identity", neighbours=relation, noise=noise)
    ((A, _),) = measured(mech, shape, 1.0, delta)[2]
    np.testing.assert_array_equal(A, np.eye(math.prod(shape)))
    library, exact = check_definition(mech, shape, 1.0, delta)
    assert library == exact == (2 if relation == "replace" else 1)


# ----------------------------------------------------------------------------- the checks can fail
def test_the_checks_fail_on_an_understated_sensitivity(monkeypatch):
    """A p-Identity block whose replace sensitivity is understated (the add/remove value, as
    if a_i - a_j never exceeded one column) fails both checks: the calibrated value is below
    the definition's and the noise loses more than epsilon."""
    mech = Optimized("all-range", template="p-identity", neighbours="replace", noise="discrete_laplace")
    original = DiagonalPlusRows._sensitivity_power

    def understated(self, p, neighbours):
        return original(self, p, "add_remove")

    monkeypatch.setattr(DiagonalPlusRows, "_sensitivity_power", understated)
    with pytest.raises(AssertionError, match="calibrated to"):
        check_definition(mech, (24,), 1.0, 0.0)
    plan, meas, rows = measured(mech, (24,), 1.0, 0.0)
    ((A, spec),) = rows
    loss = exact_worst([A], [1 / Fraction(spec.scale)], 1, "replace")
    assert loss > 1.9 * Fraction(meas.epsilon)


def test_zcdp_delta_is_the_conversion():
    """The conversion used above: at rho = 1/2 (sensitivity 1, sigma 1) and epsilon 3 it is
    the value of the formula at its best order (computed here by a fine scan); it rises with
    rho."""
    rho, epsilon = 0.5, 3.0
    scan = min(
        math.exp((a - 1) * (a * rho - epsilon)) / (a - 1) * (1 - 1 / a) ** a for a in np.linspace(1.01, 30.0, 30000)
    )
    assert zcdp_delta(rho, epsilon) == pytest.approx(scan, rel=1e-4)
    assert zcdp_delta(rho, epsilon) < zcdp_delta(2 * rho, epsilon)
