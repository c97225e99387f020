"""All error bars of the Haar (Privelet) estimate in one pass over the levels.

The one-pass prefix / suffix / bin variances must equal the per-query path
(``range_variance``) and the covariance of the inverse transform built densely from unit
measurements, for n a power of two and not, public and estimated total, per-level and
per-node variances; every caller that asks for n error bars at once must give the numbers
of the per-query path.
"""

import numpy as np
import pytest

from dprange import Domain, Wavelet, analysis
from dprange.answers.cdf import CumulativeEstimate
from dprange.inference.wavelet import haar_error_model
from dprange.strategies.trees import HaarStrategy
from dprange.workloads import AllRange, Identity, Prefix

SHAPES = [
    # (n, known_total, per_node)
    (1, False, False),
    (2, False, False),
    (2, True, False),
    (16, False, False),
    (16, True, True),
    (13, False, True),
    (13, True, False),
    (37, False, False),
    (64, True, True),
    (100, True, False),
]


def _model(n, known_total, per_node):
    rng = np.random.default_rng(n + 7 * known_total)
    haar = HaarStrategy(n, known_total=known_total)
    variances: list = [None if known_total else float(rng.uniform(0.3, 4.0))]
    for level in range(1, haar.height + 1):
        size = 2 ** (level - 1)
        variances.append(rng.uniform(0.3, 4.0, size) if per_node else float(rng.uniform(0.3, 4.0)))
    return haar, variances, haar_error_model(haar, variances, known_total=known_total)


def _dense_covariance(haar, variances):
    """Cov of the padded estimate: the inverse transform's column for each unit measurement."""
    columns, noise = [], []
    for level in range(haar.height + 1):
        if variances[level] is None:
            continue
        size = 1 if level == 0 else 2 ** (level - 1)
        for i in range(size):
            levels = [np.zeros(1 if k == 0 else 2 ** (k - 1)) for k in range(haar.height + 1)]
            levels[level][i] = 1.0
            columns.append(haar.reconstruct(levels))
            noise.append(np.broadcast_to(variances[level], (size,))[i])
    R = np.array(columns).T[: haar.n]
    return R @ np.diag(noise) @ R.T


def _per_query(model, n):
    idx = np.arange(n)
    prefix = model.range_variance(np.zeros(n, dtype=np.int64), idx)
    rest = np.zeros(n)
    rest[:-1] = model.range_variance(idx[:-1] + 1, np.full(n - 1, n - 1))
    return prefix, rest, model.range_variance(idx, idx), float(model.range_variance(0, n - 1))


@pytest.mark.parametrize("n,known_total,per_node", SHAPES)
def test_haar_one_pass_equals_per_query_and_dense(n, known_total, per_node):
    haar, variances, model = _model(n, known_total, per_node)
    got = model.prefix_variances()
    prefix, rest, bins, total = _per_query(model, n)
    scale = max(1.0, float(prefix.max()))
    np.testing.assert_allclose(got.prefix, prefix, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.rest, rest, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(got.bins, bins, rtol=1e-12, atol=1e-12 * scale)
    assert got.total == pytest.approx(total, rel=1e-12, abs=1e-12)
    cov = _dense_covariance(haar, variances)
    lower = np.tril(np.ones((n, n)))
    np.testing.assert_allclose(got.prefix, np.einsum("ij,jk,ik->i", lower, cov, lower), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got.bins, np.diag(cov), rtol=1e-9, atol=1e-9)
    upper = 1.0 - lower
    np.testing.assert_allclose(got.rest, np.einsum("ij,jk,ik->i", upper, cov, upper), rtol=1e-9, atol=1e-9)


def test_haar_one_pass_closed_form_two_bins():
    """n = 2, total variance t, difference variance v: Var(x_0) = (t + v) / 4, and the
    suffix x_1 has the same variance; the prefix x_0 + x_1 is the total itself."""
    haar = HaarStrategy(2)
    got = haar_error_model(haar, [3.0, 5.0]).prefix_variances()
    np.testing.assert_allclose(got.prefix, [2.0, 3.0], rtol=1e-15)
    np.testing.assert_allclose(got.bins, [2.0, 2.0], rtol=1e-15)
    np.testing.assert_allclose(got.rest, [2.0, 0.0], rtol=1e-15)
    assert got.total == pytest.approx(3.0, rel=1e-15)


def test_haar_one_pass_is_computed_once_per_model():
    model = Wavelet().error_model(100, 1.0)
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
@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_wavelet_workload_errors_equal_per_query(workload, neighbours):
    model = Wavelet(neighbours=neighbours).error_model(300, 0.5)
    reference = _PerQueryOnly(model)
    assert analysis.workload_error(model, workload) == pytest.approx(
        analysis.workload_error(reference, workload), rel=1e-12
    )


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_wavelet_cdf_errors_equal_per_query(neighbours):
    counts = np.random.default_rng(3).poisson(20, 300)
    rel = Wavelet(neighbours=neighbours).release(counts, 1.0, rng=4, domain=Domain.interval(0.0, 30.0, 300))
    fast = CumulativeEstimate(rel.estimate, rel.error_model, rel.provenance, rel.domain, rel._one_sided_factor)
    slow = CumulativeEstimate(
        rel.estimate, _PerQueryOnly(rel.error_model), rel.provenance, rel.domain, rel._one_sided_factor
    )
    expected = slow.cdf().stderr
    residue = 1e-6 * expected.max()
    np.testing.assert_allclose(fast.cdf().stderr, expected, rtol=1e-10, atol=residue)


@pytest.mark.parametrize(
    "n,branching,measure_root,known_total",
    [
        (1, [], True, True),
        (16, 2, True, False),
        (11, 2, False, False),
        (300, 16, False, True),
        (29, (4, 2, 4), True, True),
    ],
)
def test_tree_error_model_needs_no_estimate_and_equals_gls_on_zeros(
    n, branching, measure_root, known_total, monkeypatch
):
    """The variance-only tree model (what select ranks) equals the model of GLS on zeros."""
    from dprange.inference import dispatch
    from dprange.inference import tree as tree_module

    tree = tree_module.TreeStrategy(n, branching, measure_root=measure_root, known_total=known_total)
    rng = np.random.default_rng(n)
    variances = [
        rng.uniform(0.3, 4.0, tree.level_sizes[d]) if d in tree.measured_depths else None for d in range(tree.depth + 1)
    ]
    zeros = [None if v is None else np.zeros(tree.level_sizes[d]) for d, v in enumerate(variances)]
    reference = tree_module.tree_gls(tree, zeros, variances, total=0.0 if known_total else None)

    def no_estimate(*args, **kwargs):
        raise AssertionError("the error model must not run the GLS estimate")

    monkeypatch.setattr(tree_module, "tree_gls", no_estimate)
    monkeypatch.setattr(dispatch, "tree_gls", no_estimate)
    model = tree_module.tree_error_model(tree, variances, known_total=known_total)
    assert model.root_variance == pytest.approx(reference.root_variance, rel=1e-15, abs=1e-300)
    for got, want in zip(model.from_below_variance, reference.from_below_variance):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    for got, want in zip(model._child_variance_sums, reference._child_variance_sums):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    idx = np.arange(n)
    np.testing.assert_allclose(model.range_variance(0, idx), reference.range_variance(0, idx), rtol=1e-14)


def test_hierarchical_error_model_skips_the_estimate(monkeypatch):
    from dprange import Hierarchical
    from dprange.inference import dispatch

    def no_estimate(*args, **kwargs):
        raise AssertionError("the error model must not run the GLS estimate")

    expected = Hierarchical(4).error_model(200, 1.0).range_variance(3, 150)
    monkeypatch.setattr(dispatch, "tree_gls", no_estimate)
    assert Hierarchical(4).error_model(200, 1.0).range_variance(3, 150) == pytest.approx(expected, rel=1e-15)
