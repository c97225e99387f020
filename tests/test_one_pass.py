"""All error bars of a tree in one top-down pass; integer bucketizing without float64.

The one-pass prefix / suffix / bin variances must equal the per-query O(depth) path
(``range_variance``) and the dense GLS covariance on every tree shape; every caller that
asks for n error bars at once (expected error, CDF standard errors, saved releases) must
give the numbers of the per-query path.  Integer bucketizing must give the counts and the
errors of the straightforward formula.
"""

import numpy as np
import pytest

from conftest import dense_gls
from dprange import DataError, Domain, DomainError, Hierarchical, analysis
from dprange.answers.cdf import CumulativeEstimate
from dprange.inference import tree as tree_module
from dprange.inference.tree import tree_error_model
from dprange.strategies.trees import TreeStrategy
from dprange.workloads import AllRange, Identity, Prefix

SHAPES = [
    # (n, branching, measure_root, known_total, per_node)
    (1, 2, True, False, False),
    (2, 2, True, False, False),
    (16, 2, True, False, False),
    (11, 2, False, False, True),
    (27, 3, True, False, False),
    (17, 3, False, False, True),
    (256, 16, True, False, False),
    (300, 16, False, False, True),
    (40, 16, True, True, False),
    (30, (2, 3, 5), True, False, True),
    (29, (4, 2, 4), False, True, True),
    (37, (2, 3, 7), True, True, False),
]


def _model(rng, n, branching, measure_root, known_total, per_node):
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    variances: list = [None] * (tree.depth + 1)
    for d in tree.measured_depths:
        size = tree.level_sizes[d]
        variances[d] = rng.uniform(0.3, 4.0, size) if per_node else rng.uniform(0.3, 4.0)
    return tree, variances, tree_error_model(tree, variances, known_total=known_total)


def _dense_covariance(tree, variances, known_total):
    rows, v = [], []
    dense = tree.dense()
    start = 0
    for d in range(tree.depth + 1):
        size = tree.level_sizes[d]
        if d in tree.measured_depths:
            rows.append(dense[start : start + size])
            v.append(np.broadcast_to(variances[d], (size,)))
            start += size
    A, v = np.vstack(rows), np.concatenate(v)
    return dense_gls(A, np.zeros(A.shape[0]), v, 0.0 if known_total else None)[1]


def _per_query(model, n):
    idx = np.arange(n)
    prefix = model.range_variance(np.zeros(n, dtype=np.int64), idx)
    rest = np.zeros(n)
    rest[:-1] = model.range_variance(idx[:-1] + 1, np.full(n - 1, n - 1))
    return prefix, rest, model.range_variance(idx, idx), float(model.range_variance(0, n - 1))


@pytest.mark.parametrize("block", [tree_module.ONE_PASS_BLOCK, 1, 5])
@pytest.mark.parametrize("n,branching,measure_root,known_total,per_node", SHAPES)
def test_one_pass_equals_per_query_and_dense(n, branching, measure_root, known_total, per_node, block, monkeypatch):
    monkeypatch.setattr(tree_module, "ONE_PASS_BLOCK", block)  # small blocks: every block boundary
    rng = np.random.default_rng(n)
    tree, variances, model = _model(rng, n, branching, measure_root, known_total, per_node)
    got = model.prefix_variances()
    prefix, rest, bins, total = _per_query(model, n)
    scale = max(1.0, float(prefix.max()))
    np.testing.assert_allclose(got.prefix, prefix, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.rest, rest, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.bins, bins, rtol=1e-12, atol=1e-12 * scale)
    assert got.total == pytest.approx(total, rel=1e-12, abs=1e-12)
    cov = _dense_covariance(tree, variances, known_total)
    lower = np.tril(np.ones((n, n)))
    np.testing.assert_allclose(got.prefix, np.einsum("ij,jk,ik->i", lower, cov, lower), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.bins, np.diag(cov), rtol=1e-9, atol=1e-9)
    upper = 1.0 - lower
    np.testing.assert_allclose(got.rest, np.einsum("ij,jk,ik->i", upper, cov, upper), rtol=1e-9, atol=1e-9)


def test_one_pass_is_computed_once_per_model():
    model = Hierarchical(4).error_model(100, 1.0)
    assert model.prefix_variances() is model.prefix_variances()


class _PerQueryOnly:
    """An error model with the per-query interface only (the path before the one pass)."""

    def __init__(self, model):
        self._model = model

    def range_variance(self, lo, hi):
        return self._model.range_variance(lo, hi)

    def query_variance(self, weights):
        return self._model.query_variance(weights)


@pytest.mark.parametrize("workload", [AllRange(300), Prefix(300), Identity(300)])
@pytest.mark.parametrize("mechanism", [Hierarchical(16), Hierarchical(3, measure_root=False)])
def test_workload_errors_from_one_pass_equal_per_query(workload, mechanism):
    model = mechanism.error_model(300, 0.5)
    reference = _PerQueryOnly(model)
    assert analysis.workload_error(model, workload) == pytest.approx(
        analysis.workload_error(reference, workload), rel=1e-12
    )
    if not isinstance(workload, AllRange):
        np.testing.assert_allclose(
            analysis.query_variances(model, workload), analysis.query_variances(reference, workload), rtol=1e-12
        )


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])  # estimated / public total
def test_cdf_errors_and_deciles_equal_per_query(neighbours):
    counts = np.random.default_rng(3).poisson(20, 500)
    mechanism = Hierarchical(8, neighbours=neighbours)
    rel = mechanism.release(counts, 1.0, rng=4, domain=Domain.interval(0.0, 50.0, 500))
    fast = CumulativeEstimate(rel.estimate, rel.error_model, rel.provenance, rel.domain, rel._one_sided_factor)
    slow = CumulativeEstimate(
        rel.estimate, _PerQueryOnly(rel.error_model), rel.provenance, rel.domain, rel._one_sided_factor
    )
    expected = slow.cdf().stderr
    residue = 1e-6 * expected.max()  # the last bin's exact 0 (F = 1) is rounding residue on both paths
    np.testing.assert_allclose(fast.cdf().stderr, expected, rtol=1e-10, atol=residue)
    np.testing.assert_allclose(rel.cdf().stderr, expected, rtol=1e-10, atol=residue)
    deciles = np.linspace(0.1, 0.9, 9)
    for a, b in zip(fast.quantile(deciles).confidence_interval(0.05), slow.quantile(deciles).confidence_interval(0.05)):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_saved_release_standard_errors_equal_per_query():
    counts = np.random.default_rng(5).poisson(20, 700)
    rel = Hierarchical(16).release(counts, 1.0, rng=6)
    idx = np.arange(rel.n)
    expected = np.sqrt(rel.error_model.range_variance(idx, idx))
    np.testing.assert_allclose(rel.to_dict()["histogram"]["stderr"], expected, rtol=1e-12)
    np.testing.assert_allclose(rel.histogram().stderr, expected, rtol=1e-12)


# ----------------------------------------------------------------------------- integers


def _reference_counts(values, lo, hi, clip=False):
    values = np.asarray(values)
    if clip:
        values = np.clip(values, lo, hi)
    return np.bincount((values - lo).astype(np.int64), minlength=hi - lo + 1)


@pytest.mark.parametrize("chunk", [2**18, 7])
@pytest.mark.parametrize("lo,hi", [(0, 99), (-50, 49), (5, 5), (2**62 - 100, 2**62)])
def test_integer_counts_and_bins_equal_the_formula(lo, hi, chunk, monkeypatch):
    from dprange import domain as domain_module

    monkeypatch.setattr(domain_module, "_INTEGER_CHUNK", chunk)
    dom = Domain.integers(lo, hi)
    values = np.random.default_rng(1).integers(lo, hi + 1, 1000)
    np.testing.assert_array_equal(dom.histogram(values), _reference_counts(values, lo, hi))
    np.testing.assert_array_equal(dom.bucketize(values), values - lo)
    wide = np.concatenate([values, [lo - 3, hi + 4, np.iinfo(np.int64).min, np.iinfo(np.int64).max]])
    np.testing.assert_array_equal(dom.histogram(wide, clip=True), _reference_counts(wide, lo, hi, clip=True))
    np.testing.assert_array_equal(dom.bucketize(wide, clip=True), np.clip(wide, lo, hi) - lo)
    if abs(lo) + abs(hi) < 2**53:
        floats = values.astype(float)
        np.testing.assert_array_equal(dom.histogram(floats), _reference_counts(values, lo, hi))


SMALLEST, LARGEST = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@pytest.mark.parametrize("lo", [0, -(2**62), 2**62 - 10])
@pytest.mark.parametrize(
    "offsets,extremes,outside",
    [
        ([0, 5, -1, 200], [], 2),
        ([3], [SMALLEST], 1),  # value - lo may wrap around in int64: still out of bounds
        ([7], [LARGEST, SMALLEST + 1], 2),
    ],
)
def test_integer_counts_refuse_values_out_of_bounds(lo, offsets, extremes, outside):
    dom = Domain.integers(lo, lo + 10)
    values = np.array([lo + k for k in offsets] + extremes, dtype=np.int64)
    for call in (dom.histogram, dom.bucketize):
        with pytest.raises(DomainError, match=f"^{outside} values lie outside"):
            call(values)


def test_integer_counts_keep_the_input_errors():
    dom = Domain.integers(0, 9)
    with pytest.raises(DomainError, match="non-integer"):
        dom.histogram(np.array([1.0, 2.5, 99.0]))  # non-integers reported before bounds
    with pytest.raises(DomainError, match="missing"):
        dom.histogram(np.array([1.0, np.nan]))
    np.testing.assert_array_equal(dom.histogram(np.array([1.0, np.nan]), drop_missing=True), np.eye(10, dtype=int)[1])
    with pytest.raises(DataError, match="boolean"):
        dom.histogram(np.array([True, False]))
    with pytest.raises(DomainError, match="beyond 2\\^53"):
        Domain.integers(2**60, 2**60 + 5).histogram(np.array([1.0]))
    np.testing.assert_array_equal(dom.histogram(np.array([], dtype=np.int64)), np.zeros(10, dtype=np.int64))
    np.testing.assert_array_equal(
        dom.histogram(np.array([3, 2**64 - 1], dtype=np.uint64), clip=True),
        np.eye(10, dtype=int)[3] + np.eye(10, dtype=int)[9],
    )
    assert dom.histogram(np.arange(10)).dtype == np.int64


def test_one_pass_with_exact_nodes_equals_per_query():
    # Some nodes measured without noise (variance 0), one parent with only exact children.
    tree = TreeStrategy(20, 3, measure_root=True)
    variances: list = [np.random.default_rng(d).uniform(0.5, 2.0, tree.level_sizes[d]) for d in range(tree.depth + 1)]
    variances[-1][[0, 1, 2, 7, 19]] = 0.0
    variances[-2][4] = 0.0
    model = tree_error_model(tree, variances)
    got = model.prefix_variances()
    prefix, rest, bins, _ = _per_query(model, 20)
    np.testing.assert_allclose(got.prefix, prefix, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.rest, rest, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.bins, bins, rtol=1e-12, atol=1e-12)
    assert got.bins[[0, 1, 2, 7, 19]].max() == 0.0
