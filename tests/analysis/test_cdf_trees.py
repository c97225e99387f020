"""CDF trees (seed 001): exact l-infinity formulas, Theorem IV.2, search, refinement."""

import numpy as np
import pytest
from _helpers import gls_covariance, quadratic_forms

from conftest import range_matrix
from dprange.analysis.cdf_trees import (
    best_structure,
    closed_form_linf,
    direct_linf,
    histogram_linf,
    linf_error,
    prefix_variances,
)
from dprange.strategies.budgets import optimal_budgets
from dprange.strategies.trees import TreeStrategy


def dense_covering_variances(L, branching, budgets, neighbours="replace"):
    """Var(C_j) of the covering estimator from the explicit tree matrix: pick, for every
    prefix, the rows of the fewest nodes tiling it, and sum their noise variances."""
    tree = TreeStrategy(L, branching, measure_root=False)
    delta = 2.0 if neighbours == "replace" else 1.0
    var = {d: 2 * (delta / budgets[d - 1]) ** 2 for d in range(1, tree.depth + 1)}
    out = []
    for j in range(1, L + 1):
        total, pos = 0.0, 0
        while pos < j:
            for d in range(1, tree.depth + 1):
                m = tree.block_sizes[d]
                if pos % m == 0 and (pos + m <= j or (j == L and pos + m > L)):
                    total += var[d]
                    pos += m
                    break
        out.append(total)
    if neighbours == "replace":
        out[-1] = 0.0
    return np.array(out)


@pytest.mark.parametrize("L,branching", [(64, (4, 4, 4)), (60, (3, 4, 5)), (50, (4, 4, 4)), (27, (3, 9))])
def test_covering_prefix_variances_match_dense(L, branching):
    budgets = [0.2, 0.3, 0.5][: len(branching)]
    budgets[-1] = 1.0 - sum(budgets[:-1])
    got = prefix_variances(L, branching, budgets)
    np.testing.assert_allclose(got, dense_covering_variances(L, branching, budgets))
    if np.prod(branching) == L:
        assert got.max() == pytest.approx(closed_form_linf(branching, budgets))


@pytest.mark.parametrize("neighbours", ["replace", "add_remove"])
def test_gls_prefix_variances_match_dense_covariance(neighbours):
    L, branching, budgets = 36, (3, 3, 4), [0.3, 0.3, 0.4]
    tree = TreeStrategy(L, branching, measure_root=False, known_total=neighbours == "replace")
    A = tree.dense()
    delta = 2.0 if neighbours == "replace" else 1.0
    v = np.concatenate([np.full(tree.level_sizes[d], 2 * (delta / budgets[d - 1]) ** 2) for d in tree.measured_depths])
    cov = gls_covariance(A.T @ np.diag(1 / v) @ A, neighbours == "replace")
    exact = quadratic_forms(range_matrix(L, np.zeros(L, dtype=int), np.arange(L)), cov)
    np.testing.assert_allclose(
        prefix_variances(L, branching, budgets, estimator="gls", neighbours=neighbours), exact, rtol=1e-8, atol=1e-8
    )


def test_refinements_are_ordered_and_verified_by_monte_carlo():
    """covering > from_below > two_sided > gls (exact l-inf errors), and the exact variances of
    the from-below and two-sided estimates of C_48 match 4000 simulated trees.  Tolerance:
    the sample variance of r Laplace-noise sums has relative s.d. about sqrt((2 + kurtosis)/r)
    <= sqrt(5/r) = 0.035 (excess kurtosis of a Laplace sum <= 3); we allow 5 of those."""
    L, branching = 64, (4, 4, 4)
    budgets = optimal_budgets(branching, 1.0)
    errs = {e: linf_error(L, branching, budgets, estimator=e) for e in ("covering", "from_below", "two_sided", "gls")}
    assert errs["covering"] > errs["from_below"] > errs["two_sided"] > errs["gls"]
    # Monte-Carlo of the from-below refinement on the covering nodes
    rng = np.random.default_rng(0)
    tree = TreeStrategy(L, branching, measure_root=False, known_total=True)
    var = [None] + [8.0 / e**2 for e in budgets]
    from dprange.inference.tree import tree_error_model, tree_gls

    x = rng.integers(0, 5, L)
    levels = tree.level_sums(x)
    reps, j = 4000, 47  # C_48 = bins 0..47: covered by depth-1 nodes 0, 1, 2 (16 bins each)
    left, right = np.empty(reps), np.empty(reps)
    for r in range(reps):
        values = [None] + [levels[d] + rng.laplace(0, np.sqrt(var[d] / 2), levels[d].size) for d in (1, 2, 3)]
        below = tree_gls(tree, values, var, total=x.sum()).from_below
        left[r] = below[1][:3].sum()  # from-below estimate of C_48
        right[r] = x.sum() - below[1][3]  # n minus the from-below estimate of bins 48..63
    v_left = prefix_variances(L, branching, budgets, estimator="from_below")[j]
    model = tree_error_model(tree, var, known_total=True)
    v_right = float(np.atleast_1d(model.from_below_variance[1])[3])  # exact, not the sample's
    assert right.var(ddof=1) / v_right == pytest.approx(1.0, abs=5 * np.sqrt(5 / reps))
    two_sided = (left / v_left + right / v_right) / (1 / v_left + 1 / v_right)
    v_two = prefix_variances(L, branching, budgets, estimator="two_sided")[j]
    tol = 5 * np.sqrt(5 / reps)
    assert left.var(ddof=1) / v_left == pytest.approx(1.0, abs=tol)
    assert two_sided.var(ddof=1) / v_two == pytest.approx(1.0, abs=tol)
    assert v_two < v_left
    assert left.mean() == pytest.approx(x[:48].sum(), abs=5 * np.sqrt(v_left / reps))
    assert two_sided.mean() == pytest.approx(x[:48].sum(), abs=5 * np.sqrt(v_two / reps))


def test_optimal_budgets_beat_uniform_exactly_as_theorem_iv2():
    for branching in [(2, 4, 8), (16, 16), (3, 5, 7, 2)]:
        eps = 0.7
        opt = optimal_budgets(branching, eps)
        assert sum(opt) == pytest.approx(eps)
        uniform = [eps / len(branching)] * len(branching)
        e_opt = closed_form_linf(branching, opt)
        e_uni = closed_form_linf(branching, uniform)
        theorem = 8 * sum((b - 1) ** (1 / 3) for b in branching) ** 3 / eps**2
        assert e_opt == pytest.approx(theorem)
        assert e_opt <= e_uni
        assert (e_opt < e_uni) == (len(set(branching)) > 1)
        # no small perturbation of the optimum does better
        rng = np.random.default_rng(1)
        for _ in range(50):
            w = np.array(opt) * np.exp(rng.normal(0, 0.05, len(opt)))
            assert closed_form_linf(branching, list(w / w.sum() * eps)) >= e_opt - 1e-9


def test_structure_search_finds_the_best_of_all_factorisations():
    L = 48
    search = best_structure(L, 1.0)

    def ordered_factorisations(m):
        if m == 1:
            yield ()
            return
        for f in range(2, m + 1):
            if m % f == 0:
                for rest in ordered_factorisations(m // f):
                    yield (f,) + rest

    brute = min(closed_form_linf(f, optimal_budgets(f, 1.0)) for f in ordered_factorisations(L))
    assert search.best.error <= brute + 1e-9
    assert search.best.error == pytest.approx(linf_error(L, search.best.branching, search.best.budgets))
    assert all(r.error >= search.best.error for r in search.runners_up)
    # beats the baselines by orders of magnitude at L = 4096
    s = best_structure(4096, 1.0)
    assert s.best.error < histogram_linf(4096, 1.0) / 5 and s.best.error < direct_linf(4096, 1.0) / 5000
    mech = s.mechanism()
    assert mech.budget == s.best.budgets
