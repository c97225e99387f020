"""Workload errors from sums of variances in O(block) memory (dprange.inference.error_sums; issue
16): the streamed sums equal the listed variances on every tree shape, block size and Haar size,
and ``expected_error`` allocates a few n-vectors at most."""

import tracemalloc

import numpy as np
import pytest

from dprange import Flat, Hierarchical, Wavelet
from dprange.analysis import selection as analysis
from dprange.inference import error_sums
from dprange.inference import tree as tree_module
from dprange.inference.tree import one_pass_variances, tree_error_model
from dprange.inference.wavelet import haar_error_model, one_pass_haar_variances
from dprange.strategies.trees import HaarStrategy, TreeStrategy
from dprange.workloads import AllRange, Identity, Prefix

TREES = [
    # (n, branching, measure_root, known_total, per_node)
    (1, 2, True, False, False),
    (2, 2, True, False, False),
    (11, 2, False, False, True),
    (27, 3, True, False, False),
    (300, 16, False, False, True),
    (40, 16, True, True, False),
    (30, (2, 3, 5), True, False, True),
    (29, (4, 2, 4), False, True, True),
    (50, (64,), False, False, False),  # Flat: one root over every bin (a wide node)
    (37, (40,), True, True, True),
]


def _tree_model(n, branching, measure_root, known_total, per_node):
    rng = np.random.default_rng(n)
    tree = TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    variances: list = [None] * (tree.depth + 1)
    for d in tree.measured_depths:
        size = tree.level_sizes[d]
        variances[d] = rng.uniform(0.3, 4.0, size) if per_node else rng.uniform(0.3, 4.0)
    return tree_error_model(tree, variances, known_total=known_total)


def _listed_sums(model, n):
    """The three sums from the listed variances (the path without streaming)."""
    weights = (n - np.arange(n)).astype(float)
    idx = np.arange(n)
    prefix = model.range_variance(np.zeros(n, dtype=np.int64), idx)
    bins = model.range_variance(idx, idx)
    return prefix.sum(), bins.sum(), float(model.query_variance(weights))


@pytest.mark.parametrize("one_pass_block", [tree_module.ONE_PASS_BLOCK, 1, 5])
@pytest.mark.parametrize("stream_block", [error_sums.STREAM_BLOCK, 1, 7])
@pytest.mark.parametrize("n,branching,measure_root,known_total,per_node", TREES)
def test_tree_sums_equal_listed_variances(
    n, branching, measure_root, known_total, per_node, one_pass_block, stream_block, monkeypatch
):
    monkeypatch.setattr(tree_module, "ONE_PASS_BLOCK", one_pass_block)  # every block boundary, wide nodes split
    monkeypatch.setattr(error_sums, "STREAM_BLOCK", stream_block)
    model = _tree_model(n, branching, measure_root, known_total, per_node)
    weights = (n - np.arange(n)).astype(float)
    got = error_sums.VarianceSums(
        *error_sums.tree_prefix_and_bin_sums(model),
        error_sums.tree_streamed_query_variance(model, lambda a, b: weights[a:b], block=stream_block),
    )
    prefix, bins, weighted = _listed_sums(model, n)
    assert got.prefix == pytest.approx(prefix, rel=1e-12)
    assert got.bins == pytest.approx(bins, rel=1e-12)
    assert got.prefix_total == pytest.approx(weighted, rel=1e-12)
    # all ranges: the sum of every range's variance, listed one by one
    lo, hi = np.triu_indices(n)
    assert got.all_ranges(n) == pytest.approx(model.range_variance(lo, hi).sum(), rel=1e-9)


def test_wide_node_children_in_blocks_equal_one_block(monkeypatch):
    """Flat's root has n children: the top-down pass splits them with a running offset."""
    model = _tree_model(50, (64,), False, False, True)
    whole = one_pass_variances(model)
    monkeypatch.setattr(tree_module, "ONE_PASS_BLOCK", 8)
    split = one_pass_variances(model)
    np.testing.assert_allclose(split.prefix, whole.prefix, rtol=1e-13)
    np.testing.assert_allclose(split.rest, whole.rest, rtol=1e-13)
    np.testing.assert_allclose(split.bins, whole.bins, rtol=1e-13)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 100, 257])
@pytest.mark.parametrize("known_total", [False, True])
@pytest.mark.parametrize("per_node", [False, True])
def test_haar_closed_forms_equal_listed_variances(n, known_total, per_node):
    haar = HaarStrategy(n, known_total=known_total)
    rng = np.random.default_rng(n)
    variances = [rng.uniform(0.5, 2.0)] + [
        rng.uniform(0.5, 3.0, 2 ** (k - 1)) if per_node else rng.uniform(0.5, 3.0) for k in range(1, haar.height + 1)
    ]
    model = haar_error_model(haar, variances, known_total=known_total)
    got = error_sums.haar_variance_sums(model)
    one_pass = one_pass_haar_variances(model)
    weights = (n - np.arange(n)).astype(float)
    assert got.prefix == pytest.approx(one_pass.prefix.sum(), rel=1e-12)
    assert got.bins == pytest.approx(one_pass.bins.sum(), rel=1e-12)
    assert got.prefix_total == pytest.approx(float(model.query_variance(weights)), rel=1e-12)


MECHANISMS = [Flat(), Flat(neighbours="replace"), Hierarchical(4, measure_root=True), Hierarchical(16), Wavelet()]


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=repr)
def test_expected_error_keeps_a_few_n_vectors(mechanism, monkeypatch):
    """The design (zero values) and the model's leaf variances at most: no n-vector of
    variances per query (the listed path held 5-13 n-vectors, Flat's wide root the most)."""
    monkeypatch.setattr(tree_module, "ONE_PASS_BLOCK", 2**12)  # blocks small beside n: the O(n) part
    monkeypatch.setattr(error_sums, "STREAM_BLOCK", 2**12)
    n = 2**17
    for workload in (AllRange(n), Prefix(n), Identity(n)):
        tracemalloc.start()
        try:
            analysis.expected_error(mechanism, workload, 1.0)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 * 8 * n, f"{workload}: {peak / (8 * n):.2f} n-vectors"


def test_a_model_with_replaced_per_query_methods_is_summed_through_them():
    model = Hierarchical(4).error_model(64, 1.0)
    assert error_sums.variance_sums(model) is not None
    model.range_variance = lambda lo, hi: np.full(np.broadcast(np.asarray(lo), np.asarray(hi)).shape, np.nan)
    assert error_sums.variance_sums(model) is None
