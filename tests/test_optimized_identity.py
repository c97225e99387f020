"""The identity as released: an optimised strategy is measured quantised (K = 2^k, noise about
the continuous one per unit of sensitivity) where the identity is measured at K = 1 (the
discrete Laplace of sensitivity 1: 1.84 at epsilon 1 against 2, 0.0137 against 0.08 at 5), so
``Optimized`` measures the identity wherever its exact error as released is lower."""

import numpy as np
import pytest
from _helpers import run_cli, short_ranges

from dprange.analysis import expected_error
from dprange.analysis.grid import expected_error as grid_expected_error
from dprange.cli.render import strategy_note
from dprange.errors import DataError
from dprange.mechanisms.basic import Flat
from dprange.mechanisms.grid import Kronecker, load_grid_release
from dprange.mechanisms.optimized import Optimized
from dprange.mechanisms.optimized_grid import OptimizedKronecker
from dprange.workloads import Explicit, make_workload

pytestmark = pytest.mark.usefixtures("private_cache")  # 256-bin strategies stay out of the session cache


def measured(mech, n, epsilon, delta=0.0):
    """The strategy the mechanism measures at (epsilon, delta) (its design's choice)."""
    mech.design(n, epsilon, delta=delta)
    return mech.strategy(n)


def test_short_ranges_measure_the_identity_with_flat_s_error():
    workload = short_ranges()
    mech = Optimized(workload)
    error = expected_error(mech, workload, 1.0)
    assert error == pytest.approx(expected_error(Flat(), workload, 1.0), rel=1e-12)
    described = mech.strategy(256).describe()
    assert described["measured"] == "identity" and described["template"] == "p-identity"
    assert described["quantisation_factor"] == 1 and described["rows"] == 256
    errors = described["mean_error_as_released"]
    assert errors["identity"] == pytest.approx(error, rel=1e-12)
    assert errors["optimised"] == pytest.approx(error / 0.9206369589286394, rel=1e-6)  # 8.6% worse


def test_prefixes_plus_unit_queries_measure_the_identity():
    """Prefixes and the unit queries weighted 16: the optimised strategy as released had
    1 / 0.966 of the identity's error."""
    n = 256
    workload = Explicit(np.vstack([np.tril(np.ones((n, n))), 16 * np.eye(n)]))
    error = expected_error(Optimized(workload), workload, 1.0)
    assert error == pytest.approx(expected_error(Flat(), workload, 1.0), rel=1e-12)


@pytest.mark.parametrize("workload", ["all-range", "prefix"])
def test_at_epsilon_5_the_identity_is_measured_where_it_is_lower(workload):
    """At epsilon 5 the discrete Laplace of sensitivity 1 has 0.0137 where the optimised
    strategy's noise per unit is 0.08: on all ranges of 64 bins the optimised strategy as
    released had 4.1 times Flat's error (1.233 against 0.301)."""
    w = make_workload(workload, 64)
    error = expected_error(Optimized(workload), w, 5.0)
    assert error == pytest.approx(expected_error(Flat(), w, 5.0), rel=1e-12)


def test_all_ranges_at_epsilon_1_keep_the_optimised_strategy():
    mech = Optimized("all-range")
    strategy = measured(mech, 256, 1.0)
    optimised = mech.optimised_strategy(256)
    assert strategy.describe()["measured"] == "optimised"
    np.testing.assert_array_equal(strategy.block.diagonal, optimised.block.diagonal)
    np.testing.assert_array_equal(strategy.block.rows, optimised.block.rows)
    w = make_workload("all-range", 256)
    error = expected_error(mech, w, 1.0)
    assert error == pytest.approx(64.89112, rel=1e-5)  # as before the choice
    assert error < expected_error(Flat(), w, 1.0) / 2.4


def test_epsilon_delta_keeps_the_l2_template_at_epsilon_1_and_measures_the_identity_at_20():
    """The discrete Gaussian's variance per unit is sigma^2 at sigma 4.5 (epsilon 1, delta
    1e-6) but 0.36 of it at sigma 0.32 (epsilon 20)."""
    w = make_workload("all-range", 64)
    kept = Optimized("all-range")
    assert measured(kept, 64, 1.0, 1e-6).describe()["measured"] == "optimised"
    assert expected_error(kept, w, 1.0, delta=1e-6) < expected_error(Flat(), w, 1.0, delta=1e-6) / 4
    fallback = Optimized("all-range")
    error = expected_error(fallback, w, 20.0, delta=1e-6)
    assert error == pytest.approx(expected_error(Flat(), w, 20.0, delta=1e-6), rel=1e-12)
    assert fallback.strategy(64).describe()["template"] == "l2-optimal"  # the identity carries it


def test_the_choice_follows_epsilon_and_is_cached_per_privacy_setting():
    mech = Optimized("all-range")
    assert measured(mech, 64, 1.0).describe()["measured"] == "optimised"
    assert measured(mech, 64, 5.0).describe()["measured"] == "identity"
    assert measured(mech, 64, 1.0).describe()["measured"] == "optimised"
    assert mech.strategy(64).block.rows.shape[0] > 0


def test_replace_neighbours_compare_with_flat():
    w = make_workload("all-range", 64)
    error = expected_error(Optimized("all-range", neighbours="replace"), w, 5.0)
    assert error == pytest.approx(expected_error(Flat(neighbours="replace"), w, 5.0), rel=1e-9)


def test_explicit_dense_and_eigen_templates_fall_back_too():
    w = make_workload("all-range", 32)
    assert expected_error(Optimized("all-range", template="dense"), w, 5.0) == pytest.approx(
        expected_error(Flat(), w, 5.0), rel=1e-12
    )
    eigen = Optimized("all-range", template="eigen")
    assert expected_error(eigen, w, 40.0, delta=1e-6) == pytest.approx(
        expected_error(Flat(), w, 40.0, delta=1e-6), rel=1e-12
    )


def test_the_command_line_note_names_the_identity():
    mech = Optimized("all-range")
    mech.design(64, 5.0)
    note = strategy_note(mech.strategy(64).describe())
    assert note.startswith("strategy: the identity (64 bins), measured in place of the optimised p-identity strategy")


@pytest.mark.parametrize("epsilon", [1.0, 50.0])
def test_also_built_lists_each_other_template_once(epsilon):
    """Template auto with delta > 0 under replace builds the L2 p-Identity strategy and the exact
    L2 optimum; the strategy measured (a copy of the chosen one, or the identity standing in for
    it) lists the other template only, so the time spent is not counted twice.  Under
    add/remove it builds the optimum alone."""
    described = measured(Optimized("all-range", neighbours="replace"), 64, epsilon, 1e-6).describe()
    assert described["measured"] == ("optimised" if epsilon == 1.0 else "identity")
    (other,) = described["also_built"]
    assert {described["template"], other["template"]} == {"p-identity-l2", "l2-optimal"}


@pytest.mark.parametrize(("n", "epsilon", "measured_choice"), [(64, 5.0, "identity"), (64, 1.0, "optimised")])
def test_the_strategy_measured_is_not_listed_as_also_built(n, epsilon, measured_choice):
    """One template (p-identity) builds one strategy: the release names it (or the identity
    measured in its place) and lists nothing else, nor counts its time twice."""
    mech = Optimized("all-range", template="p-identity")
    mech.design(n, epsilon)
    described = mech.strategy(n).describe()
    assert described["measured"] == measured_choice
    assert "also_built" not in described
    note = strategy_note(described)
    assert "also built" not in note and f"optimised in {described['optimisation_seconds']:.2f} s" in note


@pytest.mark.parametrize(("shape", "epsilon"), [((20, 20), 1.0), ((24, 24), 5.0)])
def test_the_optimised_product_falls_back_to_the_identity_product(shape, epsilon):
    """All rectangles of 20 x 20 at epsilon 1: the product of the optimised axes had 106.70
    against the identity product's 99.02."""
    error = grid_expected_error(OptimizedKronecker("all-rectangles"), shape, "all-rectangles", epsilon)
    identity = grid_expected_error(Kronecker("identity"), shape, "all-rectangles", epsilon)
    assert error == pytest.approx(identity, rel=1e-9)


def test_the_optimised_product_is_kept_where_lower():
    mech = OptimizedKronecker("all-rectangles")
    error = grid_expected_error(mech, (32, 32), "all-rectangles", 1.0)
    assert error == pytest.approx(204.8307, rel=1e-5)
    assert any(block.rows.shape[0] for block in mech.plan((32, 32), 1.0).blocks[0].factors)


@pytest.mark.parametrize("neighbours", ["add_remove", "replace"])
def test_an_identity_product_release_round_trips(neighbours):
    counts = np.random.default_rng(1).poisson(5, (20, 20))
    mech = OptimizedKronecker("all-rectangles", neighbours=neighbours)
    release = mech.release(counts, 1.0, rng=3)
    assert not any(f.rows.shape[0] for f in release.measurements.blocks[0].factors)
    loaded = load_grid_release(release.to_json())
    np.testing.assert_array_equal(loaded.estimate.leaves, release.estimate.leaves)


@pytest.mark.parametrize(("n", "saved_identity"), [(20, False), (32, True)])
def test_a_release_measured_with_the_other_product_still_loads(monkeypatch, n, saved_identity):
    """Releases saved before the identity comparison measured the optimised product on 20 x 20
    at epsilon 1 (the current design is the identity product); a release that measured the
    identity product was compared with the optimised axes of its time (the disk cache, another
    optimisation, a later version), where 32 x 32 now keeps the optimised product.  Both load
    as measured, and a tampered noise scale is still refused."""
    counts = np.random.default_rng(1).poisson(5, (n, n))
    with monkeypatch.context() as patch:  # the choice as it was when the release was saved
        patch.setattr(OptimizedKronecker, "identity_is_lower", lambda *args: saved_identity)
        saved = OptimizedKronecker("all-rectangles").release(counts, 1.0, rng=3)
    assert any(f.rows.shape[0] for f in saved.measurements.blocks[0].factors) is not saved_identity
    assert OptimizedKronecker("all-rectangles").measures_identity((n, n), 1.0) is not saved_identity
    loaded = load_grid_release(saved.to_json())
    np.testing.assert_array_equal(loaded.estimate.leaves, saved.estimate.leaves)
    lows, highs = np.array([[0, 0], [3, 5]]), np.array([[n - 1, n - 1], [10, 7]])
    np.testing.assert_array_equal(loaded.rectangle(lows, highs).stderr, saved.rectangle(lows, highs).stderr)
    tampered = saved.to_dict()
    tampered["measurements"][0]["noise"]["scale"] *= 0.5
    with pytest.raises(DataError, match="does not match its design"):
        load_grid_release(tampered)


@pytest.mark.parametrize(("columns", "epsilon", "said"), [(1, 5, True), (2, 5, True), (2, 1, False)])
def test_the_command_line_says_when_the_identity_was_measured(tmp_path, capsys, columns, epsilon, said):
    rng = np.random.default_rng(1)
    path = tmp_path / "data.csv"
    path.write_text("a,b\n" + "".join(f"{a},{b}\n" for a, b in zip(rng.integers(0, 40, 300), rng.integers(0, 40, 300))))
    args = ["release", path, "-c", "a", "--lo", 0, "--hi", 39, "--integers", "-e", epsilon, "--seed", 2]
    if columns == 2:
        args += ["-c", "b", "--lo", 0, "--hi", 39, "-m", "optimized_kronecker"]
    else:
        args += ["-m", "optimized"]
    code, stdout, err = run_cli([*args, "-o", tmp_path / "out.json"], capsys)
    assert code == 0, err
    message = "measured the identity on every axis" if columns == 2 else "strategy: the identity (40 bins)"
    assert (message in stdout) is said
