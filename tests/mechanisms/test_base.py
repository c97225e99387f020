"""dprange.mechanisms.base: Mechanism.parameters() is derived from the declared PARAMS (for every
registered mechanism, 1-D and k-D, it is JSON and rebuilds an equal mechanism), error_model is
the dense GLS covariance of the design, and inference= is taken and recorded.  The declarations
themselves: tests/test_params.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import gls_covariance, quadratic_forms

import dprange
from conftest import range_matrix
from dprange import ParameterError, Wavelet
from dprange._params import Integer, Param, current
from dprange.mechanisms.base import Mechanism
from dprange.mechanisms.basic import Flat, Hierarchical
from dprange.mechanisms.matrix import Matrix
from dprange.registry import GRID_MECHANISMS, MECHANISMS
from dprange.strategies.trees import HaarStrategy

#: Shared settings every mechanism is built with, besides its defaults.
SHARED = [
    {},
    {"neighbours": "replace"},
    {"noise": "gaussian"},
    {"inference": "nnls"},
    {"inference": "l1", "inference_options": {"alpha": 0.5, "maxiter": 50}},
]
DAWA_OWN = {
    "ratio": 0.3,
    "partition": "gibbs",
    "edge_bins": 4,
    "second_stage": "best-hierarchy",
    "bucket_branching": 4,
    "bucket_workload": "prefix",
}
#: Non-default values of each mechanism's own parameters.
OWN = {
    "flat": {},
    "wavelet": {},
    "hierarchical": {"branching": [4, 8], "budget": [0.25, 0.5], "measure_root": True},
    "optimized": {"workload": "prefix", "template": "p-identity", "rows": 3, "restarts": 2},
    "dawa": DAWA_OWN,
    "mwem": {
        "rounds": 7,
        "total_share": 0.05,
        "passes": 0,
        "iterate": "average",
        "complements": False,
        "workload": "all-range",
    },
    "structure-first": {
        "buckets": 5,
        "max_count": 50,
        "ratio": 0.2,
        "grid": 2,
        "within": "uniform",
        "tree_branching": 4,
    },
    "auto-data": {"feature_share": 0.1, "tuned_for": "prefix"},
    "kronecker": {"axes": ["haar", 4], "budget": "geometric"},
    "kd_hierarchy": {"branching": 3, "budget": "geometric", "measure_root": True},
    "quadtree": {"budget": "geometric", "measure_root": True},
    "privelet": {"axes": ["haar", "identity"]},
    "fourier": {"order": 1, "budget": "uniform"},
    "optimized_kronecker": {"workload": "prefix-rectangles", "template": "p-identity", "rows": 2},
    "optimized_marginals": {"order": 1},
    "kd_tree": {"depth": 4, "split_share": 0.2},
    "hybrid_tree": {"kd_levels": 1, "height": 3, "split_share": 0.2, "budget": "uniform"},
    "dawa_hilbert": {
        "ratio": 0.3,
        "partition": "gibbs",
        "edge_bins": 8,
        "second_stage": "best-hierarchy",
        "bucket_branching": 4,
        "bucket_workload": "prefix",
    },
    "ugrid": {"c": 4.0, "total_share": 0.05, "layout": "anchored"},
    "agrid": {"c": 4.0, "c2": 3.0, "alpha": 0.4, "min_parts": 4, "total_share": 0.05, "layout": "anchored"},
    "auto_nonnegative": {"workload": "prefix-rectangles", "order": 1, "tol": 1e-4, "maxiter": 500},
    "auto_toward_nonnegative": {"workload": "prefix-rectangles", "order": 1, "tol": 1e-4, "maxiter": 500, "probes": 2},
    "auto_support": {"workload": "prefix-rectangles", "order": 1, "threshold": 2.5, "tol": 1e-4, "maxiter": 500},
    "auto_pruned": {"workload": "prefix-rectangles", "order": 1, "threshold": 2.5, "tol": 1e-4, "maxiter": 500},
}
OWN["dawa_pruned"] = {**OWN["dawa_hilbert"], "threshold": 2.0, "joint": 1.5}
#: Names registered in both registries (the 2-D auto-data): the k-D entry's own values.
GRID_OWN = {"auto-data": {"feature_share": 0.1, "workload": "prefix-rectangles", "order": 1, "refit": "never"}}


def own_values(registry, name: str) -> dict:
    return GRID_OWN[name] if registry is GRID_MECHANISMS and name in GRID_OWN else OWN[name]


def registered():
    for registry in (MECHANISMS, GRID_MECHANISMS):
        for name in registry:
            if name == "matrix":
                continue
            for shared in SHARED:
                for own in ({}, own_values(registry, name)):
                    label = f"{name}-{'own' if own else 'default'}-{'-'.join(map(str, shared.values())) or 'shared'}"
                    yield pytest.param(registry[name], {**own, **shared}, id=label)


def test_every_registered_mechanism_has_examples():
    names = set(MECHANISMS) | set(GRID_MECHANISMS)
    assert names - {"matrix"} == set(OWN), "add the new mechanism's non-default parameters to OWN"
    for registry in (MECHANISMS, GRID_MECHANISMS):
        for name in set(registry) - {"matrix"}:
            entry, own = registry[name], own_values(registry, name)
            declared = {p.name for p in entry.params} - {p.name for p in Mechanism.PARAMS}
            assert set(own) == declared, name  # every own parameter is given a non-default value
            for p in entry.params:
                if p.name in own:
                    assert own[p.name] != p.default, (name, p.name)


@pytest.mark.parametrize(("entry", "kwargs"), list(registered()))
def test_parameters_round_trip_through_json(entry, kwargs):
    mech = entry.build(**kwargs)
    params = mech.parameters()
    text = json.dumps(params)  # plain JSON: no numpy values, no objects
    rebuilt = type(mech)(**json.loads(text))
    assert type(rebuilt) is type(mech)
    assert current(rebuilt) == current(mech)  # every declared value, inference options too
    assert rebuilt.parameters() == params and repr(rebuilt) == repr(mech)
    for name, value in kwargs.items():  # what was asked for is what is recorded
        if name in ("inference", "inference_options") and kwargs.get("inference", "gls") == "gls":
            continue
        assert params[name] == value, name


NAMEABLE = [e for r in (MECHANISMS, GRID_MECHANISMS) for e in r.values() if e.nameable]


@pytest.mark.parametrize("entry", NAMEABLE, ids=lambda e: e.name)
def test_derived_keys_are_the_declared_ones_in_order(entry):
    """Keys in PARAMS order; inference and its options only when not the default GLS (the
    keys releases recorded before parameters() was derived).  Optimized (optimized.py, not
    edited here) still lists its keys by hand, with the same result."""
    own = [p.name for p in entry.params if p.name not in ("inference", "inference_options")]
    assert list(entry.build().parameters()) == own
    l1 = entry.build(inference="l1", inference_options={"rho": 2.0})
    assert list(l1.parameters()) == [*own, "inference", "inference_options"]
    assert "inference_options" not in entry.build(inference="nnls").parameters()


def test_a_new_mechanism_gets_parameters_from_its_declarations():
    """No parameters() of its own: the base lists what PARAMS declares (the hand-written
    copies each class carried are gone)."""

    class Toy(Flat):
        PARAMS = (Param("width", Integer(1), "a toy parameter", default=3), *Mechanism.PARAMS)

    toy = Toy(width=5, neighbours="replace")
    assert "parameters" not in vars(Toy) and "parameters" not in vars(Hierarchical)
    assert toy.parameters() == {"width": 5, "neighbours": "replace", "noise": "auto"}
    assert repr(toy) == "Toy(width=5, neighbours='replace', noise='auto')"


def test_an_override_gets_only_the_shared_keys_from_super():
    """Matrix keeps its own parameters(): the strategy matrix is recorded by shape and
    quantisation factor, and super() adds the shared keys only (not the matrix itself)."""
    strategy = np.vstack([np.eye(4), 0.5 * np.ones((1, 4))])
    mech = Matrix(strategy, neighbours="replace", inference="nnls")
    params = json.loads(json.dumps(mech.parameters()))
    assert params == {
        "strategy_shape": [5, 4],
        "quantisation_factor": mech._strategy.factor,
        "neighbours": "replace",
        "noise": "auto",
        "inference": "nnls",
    }
    shared = {k: v for k, v in params.items() if k not in ("strategy_shape", "quantisation_factor")}
    assert current(Matrix(strategy, **shared)).keys() == current(mech).keys()
    assert Matrix(strategy, **shared).parameters() == mech.parameters()


@pytest.mark.parametrize(
    "mech",
    [dprange.Hierarchical(4, measure_root=True), dprange.Wavelet(neighbours="replace"), dprange.Flat()],
    ids=repr,
)
def test_error_model_is_the_dense_gls_covariance_of_the_design(mech):
    """Mechanism.error_model comes from the same blocks and noise as measure(): its range
    variances are those of dense GLS on the design's stacked matrix and variances."""
    n = 10
    design = mech.design(n, 0.8)
    model = mech.error_model(n, 0.8)
    A = design.operator().dense()
    _, v = design.stacked()
    if isinstance(mech, dprange.Wavelet):
        # Privelet's estimator is GLS on the padded domain (16 bins), restricted to the real bins
        haar = mech.strategy(n)
        padded = HaarStrategy(haar.size, known_total=True)
        A = np.vstack([b.dense() for b in padded.blocks()])
        n_cov = haar.size
    else:
        n_cov = n
    cov = gls_covariance(A.T @ (A / v[:, None]), design.total is not None)
    lo, hi = np.triu_indices(n)
    Q = range_matrix(n_cov, lo, hi)
    np.testing.assert_allclose(model.range_variance(lo, hi), quadratic_forms(Q, cov), rtol=1e-8, atol=1e-9)


def test_mechanisms_accept_inference_and_record_it():
    x = np.zeros(64, dtype=int)
    x[[3, 4, 40]] = [30, 5, 12]
    for mech in (
        Flat(inference="l1"),
        Hierarchical(4, inference="nnls"),
        Wavelet(inference="l1"),
        Hierarchical(4, neighbours="replace", inference="l1", inference_options={"alpha": 1.0, "tol": 1e-6}),
    ):
        rel = mech.release(x, 1.0, rng=0)
        assert rel.inference == mech.inference and not rel.exact_error_bars
        assert rel.histogram().value.min() >= -1e-9
        assert np.isnan(rel.range(0, 3).stderr)
        data = rel.to_dict()
        assert (
            data["inference"] == mech.inference
            and data["histogram"]["stderr"] is None
            and "bootstrap" in data["error_bars"]
        )
        if mech.neighbours == "replace":
            assert rel.histogram().value.sum() == pytest.approx(x.sum(), abs=1e-6)
    with pytest.raises(ParameterError):
        Flat(inference="median")
    with pytest.raises(ParameterError):
        Flat(inference="l1", inference_options={"speed": 3})
