"""dprange.api.grid: release_grid checks everything before reading the columns, chooses by exact
error with auto (dprange.release dispatches to it), takes public marginals, and builds named and
optimised k-D mechanisms for the release's workload."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dprange
from dprange import Domain, Hierarchical, KDHierarchy, ParameterError, ProductDomain
from dprange.analysis import grid as grid_analysis
from dprange.analysis.grid import expected_error, select_grid
from dprange.answers.constrained import constrain
from dprange.api import choose_grid_mechanism, release_grid
from dprange.mechanisms.base import Mechanism
from dprange.mechanisms.grid import Kronecker, load_grid_release
from dprange.registry import GRID_MECHANISMS
from dprange.workloads import Rectangles


def test_release_grid_takes_public_marginals_checked_before_the_columns_are_read(rng):
    domain = ProductDomain([Domain.integers(0, 2), Domain.integers(0, 3)])
    columns = [rng.integers(0, 3, 200), rng.integers(0, 4, 200)]
    counts = domain.histogram(columns)
    rel = release_grid(columns, domain, 1.0, mechanism="kronecker", rng=2, public_marginals={(1,): counts.sum(axis=0)})
    np.testing.assert_allclose(rel.marginal(1).value, counts.sum(axis=0), atol=1e-8)
    assert rel.domain == domain and rel.public_marginals[0][0] == (1,)

    class Unreadable:
        def __array__(self, *args, **kwargs):
            raise AssertionError("the columns were read")

        def __len__(self):
            raise AssertionError("the columns were read")

    with pytest.raises(ParameterError, match="disagree with one another"):
        release_grid(
            Unreadable(), domain, 1.0, mechanism="kronecker", public_marginals={(0,): [1, 2, 3], (1,): [1, 1, 1, 1]}
        )
    with pytest.raises(ParameterError, match="kd_hierarchy cannot take public marginals"):
        release_grid(Unreadable(), domain, 1.0, mechanism="kd_hierarchy", public_marginals={(0,): [1, 2, 3]})
    with pytest.raises(ParameterError, match="must have shape"):
        release_grid(Unreadable(), domain, 1.0, mechanism="kronecker", public_marginals={(0,): [1, 2]})
    replaced = Kronecker("identity", neighbours="replace").release(counts, 1.0, rng=1)
    with pytest.raises(ParameterError, match="public total"):
        constrain(replaced, {(0,): counts.sum(axis=1) + 1})  # total 203, the release's public total is 200


def _columns(records=400, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 12, records), rng.integers(0, 9, records)]


DOMAIN = ProductDomain([Domain.integers(0, 11), Domain.integers(0, 8)])


def test_release_grid_auto_uses_the_selection_and_dprange_release_dispatches_to_it():
    columns = _columns()
    chosen = grid_analysis.select_grid(DOMAIN.shape, 0.7, workload="prefix-rectangles").mechanism
    rel = release_grid(columns, DOMAIN, 0.7, workload="prefix-rectangles", rng=5)
    assert rel.mechanism == chosen.name
    assert {k: v for k, v in rel.parameters.items() if k != "strategy"} == chosen.parameters()
    described = chosen.describe_strategy(DOMAIN.shape, 0.7)  # an optimised design's record, None for fixed ones
    assert rel.parameters.get("strategy", {}).get("measured") == (described or {}).get("measured")
    again = dprange.release(columns, DOMAIN, 0.7, workload="prefix-rectangles", rng=5)
    np.testing.assert_array_equal(again.counts, rel.counts)
    named = dprange.release_grid(columns, DOMAIN, 0.7, mechanism="kd_hierarchy", branching=3, rng=5)
    assert named.mechanism == "kd_hierarchy" and named.parameters["branching"] == 3
    exact = DOMAIN.histogram(columns)
    model = KDHierarchy(3).error_model(DOMAIN.shape, 0.7)
    assert named.rectangle([0, 0], [11, 8]).stderr == pytest.approx(
        math.sqrt(model.rectangle_variance([[0, 0]], [[11, 8]])[0])
    )
    assert abs(named.rectangle([0, 0], [11, 8]).value - exact.sum()) < 10 * named.rectangle([0, 0], [11, 8]).stderr


class Untouchable:
    """Columns that fail the test if anything reads them."""

    def __getattr__(self, name):
        raise AssertionError("the data were read before the parameters were checked")

    def __len__(self):
        raise AssertionError("the data were read before the parameters were checked")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"mechanism": "flat"}, "unknown k-D mechanism 'flat'"),
        ({"mechanism": Hierarchical()}, "releases 1-D counts"),
        ({"mechanism": "auto", "branching": 4}, "cannot be given with mechanism='auto'"),
        ({"mechanism": "kronecker", "axes": "tree"}, "axes"),
        ({"inference": "nnls"}, "exact least squares only"),
        ({"workload": "all-range"}, "workload must be one of"),
        ({"neighbours": "replace", "drop_missing": True}, "drop"),
        ({"mechanism": "kronecker", "axes": [2, 2, 2]}, "one axis strategy, or one per axis"),
        ({"mechanism": "quadtree", "domain": ProductDomain([Domain.integers(0, 3)] * 3)}, "2-D grid"),
    ],
)
def test_release_grid_checks_everything_before_reading_the_columns(kwargs, message):
    kwargs = {"epsilon": 1.0, "domain": DOMAIN, **kwargs}
    with pytest.raises(ParameterError, match=message):
        release_grid(Untouchable(), kwargs.pop("domain"), kwargs.pop("epsilon"), **kwargs)


def test_choose_grid_mechanism_keeps_a_k_d_object_and_builds_names():
    mech = Kronecker([4, "identity"], budget="geometric")
    assert choose_grid_mechanism(mech, (8, 8), 1.0) is mech
    built = choose_grid_mechanism("kronecker", (8, 8), 1.0, neighbours="replace", axes="haar")
    assert isinstance(built, Kronecker) and built.axes == "haar" and built.neighbours == "replace"
    assert isinstance(built, Mechanism)
    with pytest.raises(ParameterError, match="conflicts"):
        choose_grid_mechanism(mech, (8, 8), 1.0, neighbours="replace")


@pytest.mark.usefixtures("private_cache")
def test_named_optimised_grid_mechanisms_take_the_release_workload_and_order():
    """mechanism="optimized_kronecker" / "optimized_marginals" by name are optimised for the
    release's workload and order (they kept all rectangles and 2-way marginals whatever was
    asked); a workload the mechanism is not made for is refused, not ignored."""
    shape = (6, 5, 4)
    prefix = choose_grid_mechanism("optimized_kronecker", shape, 1.0, workload="prefix-rectangles")
    assert prefix.workload == "prefix-rectangles"
    one_way = choose_grid_mechanism("optimized_marginals", shape, 1.0, workload="marginals", order=1)
    assert one_way.order == 1
    counts = np.random.default_rng(2).poisson(4, shape)
    domain = ProductDomain([Domain.integers(0, n - 1) for n in shape])
    columns = [np.repeat(axis.ravel(), counts.ravel()) for axis in np.indices(shape)]
    release = release_grid(columns, domain, 1.0, mechanism="optimized_marginals", workload="marginals", order=1)
    assert release.parameters["order"] == 1
    with pytest.raises(ParameterError, match="workload must be one of"):
        choose_grid_mechanism("optimized_kronecker", shape, 1.0, workload="marginals")


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize("workload", ["all-rectangles", "prefix-rectangles"])
@pytest.mark.parametrize(("name", "shape"), [("optimized_marginals", (10, 10, 10)), ("fourier", (6, 5, 4))])
def test_a_named_marginals_mechanism_is_refused_for_rectangles_it_does_not_answer(name, shape, workload):
    """optimized_marginals (2-way marginals of 10^3: the three 2-way tables, no full table) and
    fourier of order 2 on three axes answer no rectangle restricted on all three axes: named
    with a rectangle workload they were accepted and most rectangles had infinite error."""
    with pytest.raises(ParameterError) as exc:
        choose_grid_mechanism(name, shape, 1.0, workload=workload)
    message = str(exc.value)
    assert f"mechanism={name!r} answers marginals of up to 2 axes (workload='marginals', order=2)" in message
    assert f"not every query of workload={workload!r} on this 3-axis grid" in message
    assert "'optimized_kronecker', 'kronecker', 'kd_hierarchy' or 'auto'" in message
    error = expected_error(GRID_MECHANISMS[name].build(), shape, workload, 1.0) if name != "fourier" else math.inf
    assert error == math.inf  # (fourier refuses the family in its error model)
    domain = ProductDomain([Domain.integers(0, n - 1) for n in shape])
    columns = [np.zeros(3, dtype=int)] * 3
    with pytest.raises(ParameterError, match="answers marginals"):
        release_grid(columns, domain, 1.0, mechanism=name, workload=workload)
    assert choose_grid_mechanism(name, shape, 1.0, workload="marginals").name == name


@pytest.mark.usefixtures("private_cache")
def test_a_named_marginals_mechanism_answering_every_rectangle_is_accepted():
    """Where the design answers every rectangle of the workload it is kept: fourier of order 2
    on two axes, optimized_marginals whose optimum is the full table (6 x 5 x 4), explicit
    rectangles restricted on at most the order's axes; others of the Rectangles refuse."""
    assert choose_grid_mechanism("fourier", (6, 5), 1.0, workload="all-rectangles").order == 2
    kept = choose_grid_mechanism("optimized_marginals", (6, 5, 4), 1.0, workload="all-rectangles")
    assert math.isfinite(expected_error(kept, (6, 5, 4), "all-rectangles", 1.0))
    two_axes = Rectangles((6, 5, 4), [[0, 1, 0], [2, 0, 0]], [[5, 3, 3], [4, 4, 3]])
    assert choose_grid_mechanism("fourier", (6, 5, 4), 1.0, workload=two_axes).name == "fourier"
    three_axes = Rectangles((6, 5, 4), [[0, 1, 1]], [[4, 3, 3]])
    with pytest.raises(ParameterError, match="not every query of the Rectangles given as workload"):
        choose_grid_mechanism("fourier", (6, 5, 4), 1.0, workload=three_axes)


@pytest.mark.usefixtures("private_cache")
@pytest.mark.parametrize(("workload", "delta"), [("all-rectangles", 0.0), ("prefix-rectangles", 1e-6)])
def test_release_grid_auto_with_an_optimised_choice_round_trips(workload, delta):
    domain = ProductDomain([Domain.integers(0, 31), Domain.integers(0, 31)])
    rng = np.random.default_rng(7)
    columns = [rng.integers(0, 32, 500), rng.integers(0, 32, 500)]
    release = release_grid(columns, domain, 1.0, delta=delta, workload=workload, rng=2)
    chosen = select_grid((32, 32), 1.0, workload=workload, delta=delta).mechanism
    assert release.mechanism == "optimized_kronecker" and release.parameters["strategy"]["measured"] == "optimised"
    assert {k: v for k, v in release.parameters.items() if k != "strategy"} == chosen.parameters()
    loaded = load_grid_release(release.to_json())
    assert loaded.parameters == release.parameters
    lows, highs = [[0, 0], [5, 9], [31, 0]], [[31, 31], [17, 12], [31, 31]]
    np.testing.assert_allclose(loaded.rectangle(lows, highs).value, release.rectangle(lows, highs).value)
    np.testing.assert_allclose(loaded.rectangle(lows, highs).stderr, release.rectangle(lows, highs).stderr)
    assert loaded.domain == domain


# ----------------------------------------------------------------------------- categories
def test_release_grid_of_categorical_columns_keeps_labels_and_true_counts_at_huge_epsilon():
    """A 2-way table of raw text columns (one categorical, one numeric) with the default
    workload (marginals where an axis is categorical): at epsilon 1e6 the discrete noise is 0
    and the cells equal the true counts; labels survive the JSON round trip."""
    import pandas as pd

    rng = np.random.default_rng(9)
    frame = pd.DataFrame({"sex": rng.choice(["Male", "Female", "n/a"], 600), "age": rng.integers(0, 4, 600)})
    domain = ProductDomain([Domain.categories(["Male", "Female"]), Domain.integers(0, 3)])
    truth = domain.histogram(frame, drop_missing=True)
    rel = release_grid(frame, domain, 1e6, rng=0, drop_missing=True)
    np.testing.assert_allclose(rel.counts, truth, atol=1e-6)
    assert rel.labels == [["Male", "Female"], ["0", "1", "2", "3"]]
    back = load_grid_release(rel.to_json())
    assert back.domain == domain and back.labels == rel.labels
    np.testing.assert_allclose(back.counts, rel.counts)
    np.testing.assert_allclose(back.marginal(0).stderr, rel.marginal(0).stderr)
    with pytest.raises(ParameterError, match="categories are unordered"):
        release_grid(frame, domain, 1.0, workload="prefix-rectangles", drop_missing=True)
    every = ProductDomain([Domain.categories(["Male", "Female"]), Domain.categories(["a", "b"])])
    with pytest.raises(ParameterError, match="clip does not apply to categories"):
        release_grid([["Male"], ["a"]], every, 1.0, clip=True)


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("mechanism", ["auto", "kronecker"])
def test_release_grid_with_a_categorical_axis_is_epsilon_dp_from_the_definition(monkeypatch, relation, mechanism):
    """release_grid of raw records (a category with an other bin, an integer): the measurements
    of every neighbouring dataset (a record added, removed or changed, "z" into the other bin)
    are within epsilon in the worst case over every output, and the bound is tight."""
    from _helpers import laplace_worst_loss

    from dprange.privacy.noise import NoiseSpec

    monkeypatch.setattr(NoiseSpec, "sample", lambda spec, size, rng: np.zeros(size, dtype=np.int64))
    domain = ProductDomain([Domain.categories(["a", "b"], other=True), Domain.integers(0, 1)])
    epsilon, values = 0.9, [(c, v) for c in ("a", "b", "z") for v in (0, 1)]

    def law(records):
        columns = [[r[0] for r in records], [r[1] for r in records]]
        rel = release_grid(columns, domain, epsilon, mechanism=mechanism, neighbours=relation)
        return [(m.noise, np.asarray(m.values, dtype=float)) for m in rel.measurements.measurements]

    def neighbours(records):
        for i in range(len(records)):
            if relation == "add_remove":
                yield records[:i] + records[i + 1 :]
            else:
                yield from (records[:i] + [v] + records[i + 1 :] for v in values if v != records[i])
        if relation == "add_remove":
            yield from ([*records, v] for v in values)

    worst = 0.0
    for records in ([("a", 0)], [("a", 1), ("z", 0), ("b", 1)]):
        base = law(records)
        for other in neighbours(records):
            shifts = []
            for (spec, x), (spec_y, y) in zip(base, law(other)):
                assert spec == spec_y and np.allclose(y - x, np.rint(y - x))
                shifts.extend((spec.scale, int(s)) for s in np.rint(y - x)[y != x])
            worst = max(worst, laplace_worst_loss(shifts))
    assert worst == pytest.approx(epsilon, rel=1e-9)
