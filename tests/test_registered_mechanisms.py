"""Every registered mechanism, built from the registry, against its dense definition.

For each mechanism in :data:`dprange.registry.MECHANISMS` on small domains (sizes that are
and are not powers of the branching) and both neighbouring relations: the operator blocks
of its measurement design equal their dense matrices (products, adjoints, Gram), its L1 / L2
sensitivity equals the definition on the dense strategy (max column norm, or max norm of a
column difference under replace), its calibrated noise spends at most epsilon by the
definition on the noise-weighted dense strategy, and (linear inference) its error model
equals the dense GLS covariance W (A^T V^-1 A)^-1 W^T on every range and on random queries.

A mechanism that cannot be built from its name alone needs an example here: the test that
every registered mechanism is covered fails until one is added.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import gls_covariance

from dprange.registry import MECHANISMS
from dprange.strategies.trees import HaarStrategy, dense_sensitivity_power

SIZES = (1, 5, 8, 13)
RELATIONS = ("add_remove", "replace")
EPSILON = 0.7

# Mechanisms whose constructor needs more than a name: an example instance per domain size.
EXAMPLES = {
    "matrix": lambda n, neighbours: MECHANISMS["matrix"].build(
        np.vstack([np.tril(np.ones((n, n))), np.ones((1, n))]), neighbours=neighbours
    ),
}


def build(name: str, n: int, neighbours: str):
    entry = MECHANISMS[name]
    if entry.nameable:
        return entry.build(neighbours=neighbours)
    return EXAMPLES[name](n, neighbours)


def cases():
    for name in MECHANISMS:
        for n in SIZES:
            for neighbours in RELATIONS:
                yield pytest.param(name, n, neighbours, id=f"{name}-n{n}-{neighbours}")


def test_every_registered_mechanism_is_covered():
    missing = [name for name in MECHANISMS if not MECHANISMS[name].nameable and name not in EXAMPLES]
    assert not missing, f"add an example for {missing} to EXAMPLES"
    assert {"flat", "hierarchical", "wavelet", "matrix"} <= set(MECHANISMS)


def dense_design(design):
    """The stacked dense strategy and the per-row noise variances and scales."""
    blocks = [m.block.dense() for m in design.measurements]
    A = np.vstack(blocks) if blocks else np.zeros((0, design.n))
    variances = np.concatenate([np.broadcast_to(m.variance, (m.block.shape[0],)) for m in design.measurements])
    scales = np.concatenate([np.full(m.block.shape[0], m.noise.effective_scale) for m in design.measurements])
    return A, variances, scales


@pytest.mark.parametrize(("name", "n", "neighbours"), list(cases()))
def test_operators_sensitivity_and_error_model_against_dense(name, n, neighbours):
    if getattr(MECHANISMS[name].factory, "data_aware", False):
        pytest.skip("data-aware: its measurements and error model depend on the data (tests/data_aware/)")
    mech = build(name, n, neighbours)
    design = mech.design(n, EPSILON)
    rng = np.random.default_rng(n)
    for m in design.measurements:
        B = m.block.dense()
        x = rng.normal(size=B.shape[1])
        y = rng.normal(size=B.shape[0])
        np.testing.assert_allclose(m.block.matvec(x), B @ x, atol=1e-9)
        np.testing.assert_allclose(m.block.rmatvec(y), B.T @ y, atol=1e-9)
        gram = m.block.gram()
        np.testing.assert_allclose(gram if isinstance(gram, np.ndarray) else gram.dense(), B.T @ B, atol=1e-9)
        for p in (1, 2):
            assert float(m.block.sensitivity_power(p, neighbours)) == pytest.approx(
                float(dense_sensitivity_power(B, neighbours, p)), rel=1e-12, abs=1e-12
            )
    if not design.measurements:  # one bin under replace: the public total answers it exactly
        assert n == 1 and design.total is not None
        assert mech.error_model(n, EPSILON).range_variance(0, 0) == 0.0
        return
    A, variances, scales = dense_design(design)

    # The mechanism's (unweighted) sensitivity is the definition on its dense strategy.
    if design.n == n:
        l1, l2 = mech.sensitivity(n)
        assert l1 == pytest.approx(float(dense_sensitivity_power(A, neighbours, 1)), rel=1e-12)
        assert l2 == pytest.approx(float(dense_sensitivity_power(A, neighbours, 2)) ** 0.5, rel=1e-12)

    # Calibration: the noise-weighted strategy has L1 sensitivity at most epsilon (Laplace-type
    # noise: the privacy loss of the worst neighbouring pair is sum_r |A_r (e_i - e_j)| / b_r).
    loss = float(dense_sensitivity_power(A / scales[:, None], neighbours, 1))
    assert loss <= EPSILON * (1 + 1e-12)

    # Error model: dense GLS on the design (with the public total as a constraint).  Privelet
    # (Wavelet) off a power of two estimates its padding bins instead of taking them as empty:
    # its estimator is GLS on the padded domain restricted to the real bins (docs/design-notes.md).
    shape = mech.strategy(n)
    if isinstance(shape, HaarStrategy) and shape.size > n:
        padded = HaarStrategy(shape.size, known_total=shape.known_total)
        A = np.vstack([block.dense() for block in padded.blocks()])
    cov = gls_covariance(A.T @ (A / variances[:, None]), design.total is not None)
    cov = cov[:n, :n]  # a padded design (Haar off a power of two): the real bins
    model = mech.error_model(n, EPSILON)
    lo, hi = np.triu_indices(n)
    idx = np.arange(n)
    Q = ((idx >= lo[:, None]) & (idx <= hi[:, None])).astype(float)
    np.testing.assert_allclose(model.range_variance(lo, hi), np.einsum("ij,jk,ik->i", Q, cov, Q), rtol=1e-8, atol=1e-9)
    W = rng.normal(size=(4, n))
    np.testing.assert_allclose(model.query_variance(W), np.einsum("ij,jk,ik->i", W, cov, W), rtol=1e-8, atol=1e-9)
