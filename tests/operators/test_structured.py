"""Every structured operator (dprange.operators.structured) against its dense matrix: products,
Gram matrix and exact sensitivities (both norms, both relations) against the definition on the
explicit matrix, Kronecker products past 2^53, and weighted blocks."""

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

import dprange.operators.structured as operators_structured
from dprange.errors import ParameterError
from dprange.operators import (
    Explicit,
    HaarLevel,
    Identity,
    Kron,
    Prefix,
    Total,
    TreeLevel,
    VStack,
    Weighted,
    block_answers,
    definition_sensitivity_power,
)
from dprange.strategies.trees import HaarStrategy, TreeStrategy, dense_sensitivity_power


def tree_levels(n, branching, weights=None):
    tree = TreeStrategy(n, branching, measure_root=True)
    blocks = [tree.level_operator(d) for d in range(tree.depth + 1)]
    if weights is not None:
        blocks = [Weighted(b, w) for b, w in zip(blocks, weights)]
    return VStack(blocks)


def haar_levels(n, weights=None):
    haar = HaarStrategy(n)
    blocks = [haar.level_operator(k) for k in range(haar.height + 1)]
    if weights is not None:
        blocks = [Weighted(b, w) for b, w in zip(blocks, weights)]
    return VStack(blocks)


def expected_dense(name):
    """Dense matrices built independently of the operators (loops over rows)."""
    builders = {
        "identity5": lambda: np.eye(5),
        "prefix6": lambda: np.tril(np.ones((6, 6))),
        "total4": lambda: np.ones((1, 4)),
    }
    return builders[name]()


CASES = {
    "identity5": lambda: Identity(5),
    "identity1": lambda: Identity(1),
    "prefix6": lambda: Prefix(6),
    "total4": lambda: Total(4),
    "explicit": lambda: Explicit(np.array([[1, 2, 0, -1], [0, 1, 3, 1], [2, 0, 0, 1]])),
    "explicit-sparse": lambda: Explicit(sp.csr_matrix(np.array([[1.0, 0, 2], [0, -1, 1]]))),
    "tree-level-7-2-d1": lambda: TreeStrategy(7, 2).level_operator(1),
    "tree-level-7-2-d0": lambda: TreeStrategy(7, 2, measure_root=True).level_operator(0),
    "tree-levels-10-[2,5]": lambda: tree_levels(10, [2, 5]),
    "tree-levels-9-3-weighted": lambda: tree_levels(9, 3, [Fraction(1, 3), Fraction(1, 2), 2]),
    "haar-level-6-2": lambda: HaarStrategy(6).level_operator(2),
    "haar-level-5-0": lambda: HaarStrategy(5).level_operator(0),
    "haar-levels-7": lambda: haar_levels(7),
    "haar-levels-5-weighted": lambda: haar_levels(5, [1, Fraction(1, 2), 3, Fraction(5, 4)]),
    "vstack-weighted-mixed": lambda: VStack([Weighted(Identity(4), 2), Weighted(Prefix(4), Fraction(1, 3)), Total(4)]),
    "vstack-row-weights": lambda: VStack([Weighted(Identity(3), [1.0, 2.0, 0.5]), Total(3)]),
    "kron-tree-identity": lambda: Kron([TreeStrategy(4, 2).level_operator(1), Identity(3)]),
    "kron-prefix-explicit": lambda: Kron([Prefix(3), Explicit(np.array([[1, 1], [1, -1], [0, 2]]))]),
    "kron-three": lambda: Kron([Identity(2), Total(3), Prefix(2)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_products_and_gram_match_the_dense_matrix(name):
    op = CASES[name]()
    A = op.dense()
    assert A.shape == op.shape
    rng = np.random.default_rng(len(name))
    x = rng.normal(size=op.shape[1])
    y = rng.normal(size=op.shape[0])
    X = rng.normal(size=(op.shape[1], 3))
    np.testing.assert_allclose(op.matvec(x), A @ x, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(y), A.T @ y, atol=1e-12)
    np.testing.assert_allclose(op.matmat(X), A @ X, atol=1e-12)
    np.testing.assert_allclose(op.H.matvec(y), A.T @ y, atol=1e-12)
    np.testing.assert_allclose(op.gram().dense(), A.T @ A, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("norm", [1, 2])
def test_sensitivity_matches_the_definition(name, relation, norm):
    op = CASES[name]()
    expected = dense_sensitivity_power(op.dense(), relation, norm)
    got = op.sensitivity_power(norm, relation)
    assert float(got) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert op.sensitivity(norm, relation) == pytest.approx(expected ** (1 / norm), rel=1e-12, abs=1e-12)


def test_closed_forms_are_exact_rationals():
    """Scalar Fraction weights on integer levels give an exact Fraction (calibration compares
    it with epsilon in rational arithmetic)."""
    op = tree_levels(9, 3, [Fraction(1, 3), Fraction(1, 2), Fraction(2)])
    assert op.sensitivity_power(2, "add_remove") == Fraction(1, 9) + Fraction(1, 4) + 4
    assert op.sensitivity_power(1, "replace") == 2 * (Fraction(1, 2) + 2)  # the root never differs
    haar = haar_levels(5, [1, Fraction(1, 2), 3, Fraction(5, 4)])
    # lowest common ancestor at depth 1: 2^2 * 9 + 2 * 25/16
    assert haar.sensitivity_power(2, "replace") == 36 + Fraction(25, 8)
    assert Prefix(6).sensitivity_power(1, "add_remove") == 6 and Prefix(6).sensitivity_power(2, "replace") == 5
    assert isinstance(Explicit(np.array([[1, 2], [3, 4]])).sensitivity_power(2, "replace"), int)


def test_kron_add_remove_is_the_product_of_the_factors():
    op = Kron([Explicit(np.array([[1, 2], [0, 1]])), Prefix(3)])
    assert op.sensitivity_power(2, "add_remove") == 5 * 3


def test_kron_replace_l2_from_the_factor_grams_is_exact():
    """Random signed integer factors (three of them): the Gram-matrix form equals the
    definition on the dense product, as an exact int."""
    rng = np.random.default_rng(1)
    for _ in range(10):
        op = Kron([Explicit(rng.integers(-2, 3, (3, 3))), Explicit(rng.integers(-2, 3, (2, 4))), Prefix(2)])
        got = op.sensitivity_power(2, "replace")
        assert isinstance(got, int) and got == dense_sensitivity_power(op.dense(), "replace", 2)


def test_block_answers_keep_integers_and_match_products():
    tree = TreeStrategy(11, [3, 4], measure_root=True)
    haar = HaarStrategy(11)
    blocks = tree.blocks() + haar.blocks() + [Prefix(11)]
    x = np.arange(11, dtype=np.int64)
    for block, answer in zip(blocks, block_answers(blocks, x)):
        if isinstance(block, (TreeLevel, HaarLevel)):
            assert answer.dtype == np.int64
        np.testing.assert_array_equal(answer, block.dense() @ x)


def test_bad_arguments_are_parameter_errors():
    with pytest.raises(ParameterError, match="norm"):
        Identity(3).sensitivity_power(3, "add_remove")
    with pytest.raises(ParameterError, match="neighbours"):
        Identity(3).sensitivity_power(1, "swap")
    with pytest.raises(ParameterError, match="columns"):
        VStack([Identity(3), Identity(4)])
    with pytest.raises(ParameterError, match="row weights"):
        Weighted(Identity(3), [1.0, 2.0])


def exact_replace_l2_power(A: np.ndarray) -> int:
    """max over columns i != j of ||a_i - a_j||^2 in Python integers (the definition)."""
    exact = np.array([[int(v) for v in row] for row in A], dtype=object)
    return max(int(((exact[:, i + 1 :] - exact[:, [i]]) ** 2).sum(axis=0).max()) for i in range(A.shape[1] - 1))


def test_kron_replace_l2_past_2_53_is_exact_or_an_integer_upper_bound(monkeypatch):
    """Integer factors with entries near 2^16 (an L2 axis at the 1-D quantisation): the
    product's squared distances pass 2^53, where floats round.  The value is the definition's
    in integers; past the limit of pairs evaluated again it is an integer upper bound within
    the float rounding error of it."""
    rng = np.random.default_rng(4)
    for _ in range(3):
        op = Kron([Explicit(rng.integers(-(2**16), 2**16, (3, 3))), Explicit(rng.integers(-(2**16), 2**16, (4, 3)))])
        exact = exact_replace_l2_power(np.kron(op.factors[0].dense(), op.factors[1].dense()))
        assert exact > 2**53
        got = op.sensitivity_power(2, "replace")
        assert isinstance(got, int) and got == exact
        monkeypatch.setattr(operators_structured, "EXACT_CANDIDATES_LIMIT", 0)  # where Kron reads it
        bound = Kron(op.factors).sensitivity_power(2, "replace")
        monkeypatch.undo()
        assert isinstance(bound, int) and exact <= bound <= exact * (1 + 2.0**-40)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
@pytest.mark.parametrize("p", [1, 2])
def test_one_weighted_block_has_its_blocks_sensitivity_times_the_weight(neighbours, p):
    matrix = np.random.default_rng(2).integers(-3, 4, (9, 7)).astype(float)
    stacked = VStack([Weighted(Explicit(matrix), 0.5)])
    assert stacked.sensitivity_power(p, neighbours) == pytest.approx(
        definition_sensitivity_power(0.5 * matrix, p, neighbours), rel=1e-12
    )
