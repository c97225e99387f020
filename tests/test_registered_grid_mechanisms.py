"""Every registered k-D mechanism, built from GRID_MECHANISMS, against its dense definition
(the k-D counterpart of tests/test_registered_mechanisms.py).

On small grids (sides 1, 2 and not powers of the branching) and both relations: its blocks
equal their dense matrices (products, adjoints, Gram), its L1 / L2 sensitivity equals the
definition on the budget-weighted dense strategy, its calibrated noise spends at most epsilon
by the definition on the noise-weighted dense strategy, and its error model equals the dense
GLS covariance on every estimable rectangle (x-space of the strategy: Morton order and padding
for k-D trees), and refuses the others.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import box_matrix, every_rectangle, gls_covariance, quadratic_forms

from dprange import ParameterError
from dprange.operators import definition_sensitivity_power
from dprange.registry import GRID_MECHANISMS

SHAPES = ((1, 3), (3, 5), (2, 2, 3))
RELATIONS = ("add_remove", "replace")
EPSILON = 0.7

# Mechanisms whose constructor needs more than a name: an example instance per shape.
EXAMPLES: dict = {}


def build(name: str, shape, neighbours: str):
    entry = GRID_MECHANISMS[name]
    if entry.nameable:
        return entry.build(neighbours=neighbours)
    return EXAMPLES[name](shape, neighbours)


def cases():
    for name in GRID_MECHANISMS:
        for shape in SHAPES:
            for neighbours in RELATIONS:
                yield pytest.param(name, shape, neighbours, id=f"{name}-{'x'.join(map(str, shape))}-{neighbours}")


def test_every_registered_grid_mechanism_is_covered():
    missing = [n for n in GRID_MECHANISMS if not GRID_MECHANISMS[n].nameable and n not in EXAMPLES]
    assert not missing, f"add an example for {missing} to EXAMPLES"
    assert {"kronecker", "kd_hierarchy", "quadtree", "privelet", "fourier"} <= set(GRID_MECHANISMS)


def cell_map(mech, shape) -> np.ndarray:
    """M with x = M vec(counts): the strategy's x of every unit grid."""
    cells = math.prod(shape)
    columns = []
    for i in range(cells):
        unit = np.zeros(cells, dtype=np.int64)
        unit[i] = 1
        columns.append(mech._vector(unit.reshape(shape)))
    return np.array(columns, dtype=float).T


@pytest.mark.parametrize(("name", "shape", "neighbours"), list(cases()))
def test_blocks_sensitivity_calibration_and_error_model_against_dense(name, shape, neighbours):
    mech = build(name, shape, neighbours)
    if getattr(mech, "data_aware", False):
        pytest.skip("data-aware: its measurements and error model depend on the data")
    if name == "quadtree" and len(shape) != 2:
        with pytest.raises(ParameterError, match="2-D grid"):
            mech.plan(shape, EPSILON)
        return
    try:
        plan = mech.plan(shape, EPSILON)
    except ParameterError as exc:  # nothing to measure (every axis of one bin, public total)
        assert "nothing to measure" in str(exc) or math.prod(shape) == 1
        return
    rng = np.random.default_rng(len(shape))
    for block in plan.blocks:
        B = block.dense()
        x, y = rng.normal(size=B.shape[1]), rng.normal(size=B.shape[0])
        np.testing.assert_allclose(block.matvec(x), B @ x, atol=1e-9)
        np.testing.assert_allclose(block.rmatvec(y), B.T @ y, atol=1e-9)
        gram = block.gram()
        np.testing.assert_allclose(gram if isinstance(gram, np.ndarray) else gram.dense(), B.T @ B, atol=1e-9)
    weighted = np.vstack([float(w) * b.dense() for w, b in zip(plan.budget, plan.blocks)])
    for p in (1, 2):
        exact = float(plan.sensitivity_power(p, neighbours))
        assert exact == pytest.approx(definition_sensitivity_power(weighted, p, neighbours), rel=1e-12, abs=1e-12)
    specs = mech._noise(plan, EPSILON, 0.0)
    scaled = np.vstack([b.dense() / s.scale for b, s in zip(plan.blocks, specs)])
    assert definition_sensitivity_power(scaled, 1, neighbours) <= EPSILON * (1 + 1e-12)

    # error model: dense GLS in the strategy's x-space (public total: on the affine space)
    A = np.vstack([b.dense() for b in plan.blocks])
    v = np.concatenate([np.full(b.shape[0], s.variance) for b, s in zip(plan.blocks, specs)])
    cols = A.shape[1]
    total = neighbours == "replace"
    cov = gls_covariance(A.T @ (A / v[:, None]), total, singular=True)
    M = cell_map(mech, shape)
    lows, highs = every_rectangle(shape)
    Q = box_matrix(shape, lows, highs) @ M.T  # the rectangles on x
    rows = np.vstack([A, np.ones((1, cols))]) if total else A
    ok = np.all(np.abs(Q @ np.linalg.pinv(rows) @ rows - Q) < 1e-8, axis=1)
    model = mech.error_model(shape, EPSILON)
    np.testing.assert_allclose(
        model.rectangle_variance(lows[ok], highs[ok]), quadratic_forms(Q[ok], cov), rtol=1e-8, atol=1e-9
    )
    if not ok.all():
        with pytest.raises(ParameterError):
            model.rectangle_variance(lows[~ok], highs[~ok])
