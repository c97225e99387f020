"""dprange.operators.dense: Explicit's cached, read-only (A^T A)^-1 (gram_inverse,
adopt_gram_inverse) and its exact integer answers by BLAS below 2^53 and in integers above."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import integer_strategy

from dprange.operators import Explicit

# ----------------------------------------------------------------------------- the cached inverse


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("sparse", [False, True])
def test_gram_inverse_is_the_inverse_computed_once_and_read_only(sparse):
    A = integer_strategy(30, 12, 0)
    block = Explicit(sp.csr_matrix(A) if sparse else A)
    inverse = block.gram_inverse()
    np.testing.assert_allclose(inverse, np.linalg.inv(A.T @ A), rtol=1e-10)
    assert block.gram_inverse() is inverse and not inverse.flags.writeable
    gram = A.T @ A
    assert block.inverse_condition_bound() >= np.linalg.cond(gram)  # a bound on the 2-norm condition
    assert block.inverse_condition_bound() == pytest.approx(np.trace(gram) * np.trace(np.linalg.inv(gram)), rel=1e-9)


@pytest.mark.usefixtures("private_cache")
def test_gram_inverse_is_none_for_a_rank_deficient_matrix():
    differences = np.eye(6)[:-1] - np.eye(6)[1:]
    block = Explicit(differences)
    assert block.gram_inverse() is None
    assert block.inverse_condition_bound() == math.inf


@pytest.mark.usefixtures("private_cache")
def test_adopt_gram_inverse_takes_only_the_inverse_of_this_matrix():
    A = integer_strategy(30, 12, 1)
    inverse = np.linalg.inv(A.T @ A)
    other = np.linalg.inv(integer_strategy(30, 12, 2).T @ integer_strategy(30, 12, 2))
    perturbed = inverse.copy()
    perturbed[3, 4] *= 1.001
    with_nan = inverse.copy()
    with_nan[0, 0] = np.nan
    for wrong in (other, perturbed, with_nan, inverse[:-1, :-1], inverse.astype(np.int64), np.zeros((12, 12))):
        block = Explicit(A)
        assert not block.adopt_gram_inverse(wrong)
        assert block._gram_inverse_known is False  # nothing adopted: computed when asked
    block = Explicit(A)
    assert block.adopt_gram_inverse(inverse)
    assert block._dense_gram is None  # adopted, not computed
    np.testing.assert_array_equal(block.gram_inverse(), inverse)


# ----------------------------------------------------------------------------- exact answers, sensitivities


def exact_answers(A: np.ndarray, x: np.ndarray) -> list[int]:
    return [sum(int(a) * int(b) for a, b in zip(row, x)) for row in A]


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("sparse", [False, True])
def test_integer_answers_are_exact_by_blas_below_2_53_and_in_integers_above(sparse):
    rng = np.random.default_rng(6)
    A = rng.integers(-(2**20), 2**20, (8, 6)).astype(float)
    small = rng.integers(0, 1000, 6)
    block = Explicit(sp.csr_matrix(A) if sparse else A)
    out = block.answers(small)
    assert out.dtype == np.int64 and [int(v) for v in out] == exact_answers(A, small)
    large = np.full(6, 2**40, dtype=np.int64)  # sums near 2^62: past 2^53, float sums would round
    out = block.answers(large)
    assert [int(v) for v in out] == exact_answers(A, large)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("total", [2**40, 2**53])
def test_explicit_integer_answers_are_exact_beyond_float_precision(sparse, total):
    """An integer matrix with entries near 2^16 on counts totalling 2^40 (answers near 2^56)
    and 2^53 (near 2^69, past int64): the float product rounds them, by an amount the
    sensitivity does not cover; answers() gives the exact integers (int64 below 2^62, Python
    integers above)."""
    rng = np.random.default_rng(4)
    A = rng.integers(0, 2**16, size=(7, 5)).astype(float)
    counts = rng.multinomial(total, np.full(5, 0.2)).astype(np.int64)
    exact = A.astype(np.int64).astype(object).dot(counts.astype(object))
    op = Explicit(sp.csr_matrix(A) if sparse else A)
    answers = op.answers(counts)
    assert answers.dtype == (np.int64 if total < 2**45 else object)
    assert [int(v) for v in answers] == list(exact)
    assert any(int(v) != e for v, e in zip(op.matvec(counts), exact))  # the float product rounds
