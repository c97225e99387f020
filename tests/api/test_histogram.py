"""dprange.api.histogram: dprange.release bucketizes, names or chooses the mechanism (auto goes
through ``select``), passes the neighbouring relation, and refuses what cannot be released
(replace with drop_missing, workloads on another number of bins, nothing to fit)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import Unreadable

import dprange
from dprange import Domain, Flat, Hierarchical, ParameterError, Wavelet, api
from dprange._params import replaced
from dprange.analysis import auto_mechanism, expected_error, select
from dprange.answers.describe import Labels
from dprange.api import choose_mechanism
from dprange.registry import MECHANISMS
from dprange.workloads import Explicit, Ranges


def test_release_auto_uses_selection():
    values = np.random.default_rng(0).integers(0, 100, 1000)
    rel = dprange.release(values, dprange.Domain.integers(0, 99), 1.0, mechanism="auto", workload="identity", rng=0)
    assert rel.mechanism == "flat"


def test_release_convenience_bucketizes():
    values = np.array([0.5, 1.5, 1.7, 9.9])
    rel = dprange.release(values, Domain.interval(0, 10, 10), 2.0, mechanism="flat", rng=3)
    assert rel.n == 10 and rel.mechanism == "flat"
    with pytest.raises(dprange.DomainError):
        dprange.release([11.0], Domain.interval(0, 10, 10), 1.0)
    with pytest.raises(ParameterError):
        dprange.release(values, Domain.interval(0, 10, 10), 1.0, mechanism="bogus")


def test_release_neighbours_has_one_source_of_truth():
    """P5: neighbours= reaches named mechanisms (it used to be ignored unless "auto"), None
    means the mechanism object's, and a conflict is an error."""
    values, domain = np.arange(8) % 4, Domain.integers(0, 3)
    for name in ("flat", "hierarchical", "wavelet", None, "auto"):
        rel = dprange.release(values, domain, 1.0, mechanism=name, neighbours="replace", rng=0)
        assert rel.neighbours == "replace" and rel.public_total == 8.0
        assert dprange.release(values, domain, 1.0, mechanism=name, rng=0).neighbours == "add_remove"
    assert dprange.release(values, domain, 1.0, mechanism=Flat(neighbours="replace"), rng=0).neighbours == "replace"
    with pytest.raises(ParameterError, match="conflicts"):
        dprange.release(values, domain, 1.0, mechanism=Flat(neighbours="replace"), neighbours="add_remove")
    with pytest.raises(ParameterError, match="conflicts"):
        dprange.release(values, domain, 1.0, mechanism=Wavelet(), neighbours="replace")


def test_replace_with_drop_missing_is_refused():
    """P4: the public total of the replace model would be counted after dropping, publishing
    the number of missing values exactly."""
    values = np.array([0.0, 1.0, np.nan, 2.0])
    with pytest.raises(ParameterError, match="how many values were missing"):
        dprange.release(values, Domain.integers(0, 2), 1.0, neighbours="replace", drop_missing=True)
    with pytest.raises(ParameterError, match="how many values were missing"):
        dprange.release(values, Domain.integers(0, 2), 1.0, mechanism=Flat(neighbours="replace"), drop_missing=True)
    rel = dprange.release(values, Domain.integers(0, 2), 1.0, drop_missing=True, rng=0)
    assert rel.public_total is None


# ------------------------------------------------------------------ the facade the CLI calls
def test_choose_mechanism_auto_names_and_objects():
    auto = api.choose_mechanism("auto", 64, 1.0, workload="prefix", inference="nnls")
    again = api.choose_mechanism(None, 64, 1.0, workload="prefix")
    assert auto.inference == "nnls" and again.inference == "gls"  # the cached choice is not mutated
    assert repr(replaced(auto, inference="gls")) == repr(again) == repr(auto_mechanism("prefix", 64, 1.0))
    named = api.choose_mechanism("hierarchical", 64, 1.0, neighbours="replace", branching=4, inference="l1")
    assert (named.branching, named.neighbours, named.inference) == (4, "replace", "l1")
    given = Flat(neighbours="replace")
    assert api.choose_mechanism(given, 64, 1.0) is given
    with pytest.raises(ParameterError, match="cannot be given with mechanism='auto'"):
        api.choose_mechanism("auto", 64, 1.0, branching=4)
    with pytest.raises(ParameterError, match="unknown mechanism 'bogus'; choose 'auto' or one of flat, wavelet"):
        api.choose_mechanism("bogus", 64, 1.0)
    with pytest.raises(ParameterError, match="Flat keeps the parameters it was built with"):
        api.choose_mechanism(given, 64, 1.0, branching=4)
    with pytest.raises(ParameterError, match="inference must be one of"):
        api.choose_mechanism(given, 64, 1.0, inference="bogus")


@pytest.mark.parametrize("mechanism", ["hierarchical", "wavelet"])
@pytest.mark.parametrize("inference", ["nnls", "l1"])
def test_nothing_to_fit_is_a_parameter_error_in_the_library(mechanism, inference):
    """One bin whose count is public (replace) measures nothing: dprange.release used to fail
    with a bare ValueError from numpy ("need at least one array to concatenate")."""
    with pytest.raises(ParameterError, match="nothing to fit; use inference='gls'"):
        dprange.release(
            [3, 3], Domain.integers(3, 3), 1.0, mechanism=mechanism, neighbours="replace", inference=inference
        )


@pytest.mark.parametrize(
    "workload", [Ranges([0, 5], [9, 30], 50), Explicit(np.ones((2, 50)))], ids=["ranges", "explicit"]
)
def test_a_workload_on_another_number_of_bins_is_refused_for_every_mechanism(workload):
    """A named mechanism (or a mechanism object) given a Ranges / Explicit workload defined on
    another number of bins than the domain's was accepted, the workload ignored; auto and
    optimized refused it in their own words.  Every mechanism now refuses it, giving both numbers."""
    counts, domain = np.ones(100, dtype=int), Domain.integers(0, 99)
    message = "the workload is defined on 50 bins but the domain has 100"
    for mechanism in (*MECHANISMS.names(nameable=True), "auto", Hierarchical(4)):
        with pytest.raises(ParameterError, match=message):
            choose_mechanism(mechanism, 100, 1.0, workload=workload)
        with pytest.raises(ParameterError, match=message):
            dprange.release(counts, domain, 1.0, mechanism=mechanism, workload=workload)
    with pytest.raises(ParameterError, match="the workload is defined on 50 bins but n = 100"):
        select(workload, 100, 1.0)
    with pytest.raises(ParameterError, match="the workload is defined on 50 bins but n = 100"):
        expected_error(Hierarchical(4), workload, 1.0, n=100)
    on_domain = Ranges([0, 5], [9, 30], 100)
    release = dprange.release(counts, domain, 1.0, mechanism="hierarchical", workload=on_domain, rng=0)
    assert release.answer(on_domain).value.shape == (2,)


# ----------------------------------------------------------------------------- categories
def category_neighbours(records, relation, values=("a", "b", "z")):
    """The datasets neighbouring ``records`` (lists of raw values): one record added or
    removed, or one record's value replaced by another (``z`` is outside the list)."""
    for i in range(len(records)):
        if relation == "add_remove":
            yield records[:i] + records[i + 1 :]
        else:
            for v in values:
                if v != records[i]:
                    yield records[:i] + [v] + records[i + 1 :]
    if relation == "add_remove":
        for v in values:
            yield [*records, v]


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("mechanism", ["flat", "hierarchical", "auto"])
def test_categorical_release_is_epsilon_dp_from_the_definition(monkeypatch, relation, mechanism):
    """dprange.release of raw categories on ["a", "b"] + other: the noisy measurements of every
    neighbouring dataset (a record added, removed or recategorised, "z" going to the other bin)
    are within epsilon in the worst case over every output, and the bound is tight."""
    from _helpers import laplace_worst_loss

    from dprange.privacy.noise import NoiseSpec

    monkeypatch.setattr(NoiseSpec, "sample", lambda spec, size, rng: np.zeros(size, dtype=np.int64))
    domain, epsilon = Domain.categories(["a", "b"], other=True), 0.7

    def law(records):
        rel = dprange.release(records, domain, epsilon, mechanism=mechanism, neighbours=relation)
        return [(m.noise, np.rint(np.asarray(m.values)).astype(np.int64)) for m in rel.measurements.measurements]

    worst = 0.0
    for records in (["a"], ["a", "b", "z"], ["z", "z", "b"]):
        base = law(records)
        for other in category_neighbours(records, relation):
            shifts = []
            for (spec, x), (spec_y, y) in zip(base, law(other)):
                assert spec == spec_y
                shifts.extend((spec.scale, int(s)) for s in (y - x)[y != x])
            worst = max(worst, laplace_worst_loss(shifts))
    assert worst == pytest.approx(epsilon, rel=1e-9)
    assert worst <= epsilon * (1 + 1e-12)


def test_categorical_release_answers_by_label_with_exact_errors():
    domain = Domain.categories(["Male", "Female", "?"], other=True)
    values = ["Male"] * 30 + ["Female"] * 20 + ["x"] * 5
    rel = dprange.release(values, domain, 1.0, mechanism="hierarchical", rng=4)
    assert rel.labels == ["Male", "Female", "?", "other"]
    est = rel.estimate
    from _helpers import stacked

    from conftest import dense_gls

    A, y, v = stacked(rel.measurements)
    reference, cov = dense_gls(A, y, v)  # the explicit GLS formula
    assert est == pytest.approx(reference)
    both = rel.count_of(["Male", "other"])  # bins 0 and 3: not a range
    weights = np.array([1.0, 0, 0, 1.0])
    assert both.value == pytest.approx(est[0] + est[3])
    assert both.stderr == pytest.approx(float(np.sqrt(weights @ cov @ weights)))
    assert rel.count_of("Female").value == pytest.approx(est[1])
    assert rel.count_of(["Female", "Male"]).stderr == pytest.approx(rel.range(0, 1).stderr)
    for ask in (rel.cdf, lambda: rel.quantile(0.5), lambda: rel.count_between(0, 1)):
        with pytest.raises(ParameterError, match="unordered"):
            ask()
    with pytest.raises(ParameterError, match="'Dentist' is not a category"):
        rel.count_of("Dentist")


def test_categorical_release_defaults_to_the_identity_workload_and_refuses_prefix():
    domain = Domain.categories([str(i) for i in range(64)])
    values = [str(i % 64) for i in range(500)]
    assert dprange.release(values, domain, 1.0, rng=0).mechanism == "flat"
    with pytest.raises(ParameterError, match="categories are unordered; use 'identity'"):
        dprange.release(values, domain, 1.0, workload="prefix")
    with pytest.raises(ParameterError, match="clip does not apply to categories"):
        dprange.release(values, domain, 1.0, clip=True)


def test_releases_are_labelled_with_the_column_and_units_given(tmp_path):
    """issue 34: the column's name (column=, or a Series' name), units= and the files of
    release_files are saved in the release's JSON; a bad unit is refused before the values are read."""
    pd = pytest.importorskip("pandas")
    domain = dprange.Domain.integers(0, 9)
    series = pd.Series(np.arange(10).repeat(3), name="age")
    labelled = dprange.release(series, domain, 1.0, units="years", rng=1)
    assert json.loads(labelled.to_json())["input"] == {"columns": ["age"], "units": ["years"], "source": None}
    frame = pd.DataFrame({"a": np.arange(10), "b": np.arange(10)})
    assert dprange.release(frame, domain, 1.0, column="b", rng=1).input_labels.columns == ("b",)
    assert dprange.release(np.arange(10), domain, 1.0, rng=1).input_labels == Labels()
    assert dprange.release(np.arange(10), domain, 1.0, units="cm", rng=1).input_labels.axis_label() == "value (cm)"
    with pytest.raises(ParameterError, match="units must be strings"):
        dprange.release(Unreadable(), domain, 1.0, units=5)
    path = tmp_path / "d.csv"
    path.write_text("x\n" + "\n".join(str(v) for v in range(10)) + "\n")
    from_files = dprange.api.release_files(str(path), "x", domain, 1.0, units="kg", rng=1)
    assert from_files.input_labels == Labels(("x",), ("kg",), str(path))
