"""dprange.api.units: releases with a privacy unit (privacy_id, max_rows_per_id) and group-by with
public keys, on every in-memory frame and the local streaming engine; the exact counts at
epsilon 1e6 (noise 0), the accounting recorded and charged, and the refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _helpers import write_table

import dprange
from conftest import SHARED
from dprange import Domain, GroupedRelease, ProductDomain, Session
from dprange.errors import DataError, DomainError, ParameterError
from dprange.mechanisms.grid import load_grid_release

DOMAIN = Domain.integers(0, 9)
KEYS = ["north", "south", "east"]


@pytest.fixture(scope="module")
def people():
    """1-6 rows per id, every id in one group (so m = 1 keeps every row), some rows in an
    undeclared group ("west")."""
    rng = np.random.default_rng(8)
    rows = []
    for person in range(120):
        group = rng.choice(KEYS + ["west"])
        for _ in range(rng.integers(1, 7)):
            rows.append((f"p{person}", group, int(rng.integers(0, 10))))
    return pd.DataFrame(rows, columns=["id", "region", "x"])


def truth(frame, key):
    return np.bincount(frame.x[frame.region == key], minlength=10)


def assert_exact(grouped, frame):
    assert isinstance(grouped, GroupedRelease) and grouped.keys == KEYS
    for key in KEYS:
        np.testing.assert_allclose(grouped[key].histogram().value, truth(frame, key), atol=1e-6)


def release_kwargs(**kw):
    base = {
        "column": "x",
        "privacy_id": "id",
        "max_rows_per_id": 6,
        "by": "region",
        "groups": KEYS,
        "mechanism": "hierarchical",
        "rng": 4,
    }
    return base | kw


def files_kwargs(**kw):
    return {k: v for k, v in release_kwargs(**kw).items() if k != "column"}


def test_per_group_histograms_are_exact_at_huge_epsilon_on_every_frame(people):
    assert_exact(dprange.release(people, DOMAIN, 1e6, **release_kwargs()), people)
    pa = pytest.importorskip("pyarrow")
    assert_exact(dprange.release(pa.Table.from_pandas(people), DOMAIN, 1e6, **release_kwargs()), people)
    pl = pytest.importorskip("polars")
    assert_exact(dprange.release(pl.from_pandas(people), DOMAIN, 1e6, **release_kwargs()), people)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_per_group_histograms_are_exact_at_huge_epsilon_on_the_local_engine(people, tmp_path, suffix):
    path = write_table(people, tmp_path / f"people.{suffix}")
    grouped = dprange.release_files(path, "x", DOMAIN, 1e6, **files_kwargs(), batch_rows=37)
    assert_exact(grouped, people)


def test_the_local_engine_gives_the_frame_counts_for_the_same_seed(people, tmp_path):
    path = tmp_path / "people.csv"
    people.to_csv(path, index=False)
    ints = people.assign(id=people.id.str[1:].astype(int))
    ints.to_csv(path, index=False)
    args = release_kwargs(max_rows_per_id=2, rng=9)
    frame = dprange.release(ints, DOMAIN, 1e6, **args)
    files = dprange.release_files(
        str(path), "x", DOMAIN, 1e6, **files_kwargs(max_rows_per_id=2, rng=9), batch_rows=1 << 20
    )
    for key in KEYS:
        np.testing.assert_allclose(frame[key].histogram().value, files[key].histogram().value, atol=1e-6)
        assert frame[key].histogram().value.sum() < truth(people, key).sum()  # k = 2 dropped rows


def test_rows_are_bounded_to_k_per_id_and_m_groups(people):
    k1 = dprange.release(people, DOMAIN, 1e6, **release_kwargs(max_rows_per_id=1))
    for key in KEYS:
        ids = people.id[people.region == key].nunique()
        assert k1[key].histogram().value.sum() == pytest.approx(ids, abs=1e-6)
    one = dprange.release(people, DOMAIN, 1e6, column="x", privacy_id="id", max_rows_per_id=2, rng=1, mechanism="flat")
    assert one.total().value == pytest.approx(people.groupby("id").size().clip(upper=2).sum(), abs=1e-6)


def test_the_release_records_the_unit_and_the_epsilon_of_each_group(people):
    grouped = dprange.release(people, DOMAIN, 1.0, **release_kwargs(max_rows_per_id=3, max_groups_per_id=2))
    assert grouped.epsilon == 1.0
    for release in grouped.releases:
        assert release.epsilon == 0.5
        unit = release.provenance.privacy_unit
        assert unit["relation"] == "add or remove one id with all its rows"
        assert unit["row_epsilon"] * 6 <= 1.0 and unit["max_rows_per_id"] == 3
        assert release.noise_scales[0] >= 6.0  # Hierarchical's per-level scale at row epsilon 1/6


def test_grouped_release_round_trip_table_and_plot(people, tmp_path):
    grouped = dprange.release(people, DOMAIN, 2.0, **release_kwargs(max_rows_per_id=3))
    path = grouped.to_json(tmp_path / "g.json")
    back = GroupedRelease.from_json(path)
    assert back.keys == KEYS and back.epsilon == 2.0 and back.privacy_unit == grouped.privacy_unit
    for key in KEYS:
        np.testing.assert_allclose(back[key].histogram().value, grouped[key].histogram().value)
        np.testing.assert_allclose(back[key].histogram().stderr, grouped[key].histogram().stderr)
        assert back[key].provenance == grouped[key].provenance
    table = grouped.to_pandas()
    assert list(table.columns[:6]) == ["group", "bin", "lo", "hi", "count", "stderr"]
    assert len(table) == 30 and list(table.group.unique()) == KEYS
    row = table[(table.group == "south") & (table.bin == 4)].iloc[0]
    assert row["count"] == pytest.approx(grouped["south"].histogram().value[4])
    assert row["stderr"] == pytest.approx(grouped["south"].histogram().stderr[4])
    pytest.importorskip("matplotlib")
    png = grouped.plot(tmp_path / "g.png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(DataError):
        GroupedRelease.from_json('{"dprange_grouped_release": 1, "groups": []}')


def test_a_session_is_charged_once_the_total_epsilon_before_reading(people):
    session = Session(2.0)
    dprange.release(people, DOMAIN, 1.5, session=session, **release_kwargs(max_rows_per_id=2, max_groups_per_id=2))
    assert len(session.entries) == 1 and session.entries[0].epsilon == 1.5
    assert "privacy unit 'id'" in session.entries[0].what and "3 public groups" in session.entries[0].what
    with pytest.raises(DataError):  # a missing id column is found before the charge
        dprange.release(people, DOMAIN, 0.1, session=session, **release_kwargs(privacy_id="nope"))
    assert len(session.entries) == 1
    dprange.quantiles(
        people, [0.5], 0.25, bounds=(0, 9), column="x", privacy_id="id", max_rows_per_id=2, session=session
    )
    assert len(session.entries) == 2 and session.entries[1].epsilon == 0.25


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"delta": 1e-6}, "delta > 0"),
        ({"neighbours": "replace"}, "add_remove"),
        ({"privacy_id": None}, "needs privacy_id"),
        ({"max_rows_per_id": None}, "needs max_rows_per_id"),
        ({"max_rows_per_id": 0}, "max_rows_per_id"),
        ({"groups": None}, "public list of keys"),
        ({"groups": ["a", "a"]}, "distinct"),
        ({"by": None}, "groups= needs by="),
    ],
)
def test_what_a_privacy_unit_cannot_offer_is_refused_before_reading(people, kwargs, message):
    with pytest.raises(ParameterError, match=message):
        dprange.release(people, DOMAIN, 1.0, **release_kwargs(**kwargs))


def test_a_column_of_values_without_a_table_is_refused():
    with pytest.raises(ParameterError, match="pass a table"):
        dprange.release(np.arange(5), DOMAIN, 1.0, privacy_id="id", max_rows_per_id=2)


def test_group_by_without_a_unit_releases_each_group_at_the_full_epsilon(people):
    grouped = dprange.release(people, DOMAIN, 1e6, column="x", by="region", groups=KEYS, rng=2, mechanism="flat")
    assert_exact(grouped, people)
    assert all(r.epsilon == 1e6 and r.provenance.privacy_unit is None for r in grouped.releases)


ADULT = SHARED / "data" / "adult" / "adult.csv"


@pytest.mark.skipif(not ADULT.exists(), reason="needs ../shared/data/adult/adult.csv")
def test_intervals_cover_the_per_group_truth_on_adult_with_ids():
    """Adult with a synthetic id column (1-20 rows per id), ages by sex, k = 20 and m = 2 (every
    row kept: the truth is the whole data): 95% intervals of 40 random ranges per group over 100
    releases at epsilon 1 cover at their level (8000 intervals, correlated within a release)."""
    frame = pd.read_csv(ADULT, usecols=["age", "sex"], skipinitialspace=True)
    frame["age"] = frame["age"].round()  # one planted 39.5
    rng = np.random.default_rng(21)
    sizes = rng.integers(1, 21, size=len(frame))
    frame["id"] = rng.permutation(np.repeat(np.arange(sizes.size), sizes)[: len(frame)])
    domain = Domain.integers(0, 120)
    lo = rng.integers(0, 121, size=40)
    hi = np.minimum(lo + rng.integers(0, 40, size=40), 120)
    keys = ["Male", "Female"]
    truth = {k: np.cumsum(np.bincount(frame.age[frame.sex == k].astype(int), minlength=121)) for k in keys}
    hits = 0
    for seed in range(100):
        grouped = dprange.release(
            frame,
            domain,
            1.0,
            column="age",
            privacy_id="id",
            max_rows_per_id=20,
            by="sex",
            groups=keys,
            max_groups_per_id=2,
            mechanism="hierarchical",
            rng=seed,
        )
        for key in keys:
            exact = truth[key][hi] - np.where(lo > 0, truth[key][lo - 1], 0)
            low, high = grouped[key].range(lo, hi).confidence_interval(0.05)
            hits += int(np.sum((low <= exact) & (exact <= high)))
    assert 0.93 <= hits / 8000 <= 0.97


def test_grid_release_with_ids_is_exact_at_huge_epsilon_and_records_the_unit(people):
    frame = people.assign(y=people.x % 3)[["x", "y", "id"]]
    domain = ProductDomain([DOMAIN, Domain.integers(0, 2)])
    grid = dprange.release_grid(frame, domain, 1e6, mechanism="kronecker", privacy_id="id", max_rows_per_id=6, rng=1)
    truth = domain.histogram(frame[["x", "y"]])
    np.testing.assert_allclose(grid.counts, truth, atol=1e-6)
    assert grid.epsilon == 1e6 and grid.privacy_unit["max_rows_per_id"] == 6
    assert grid.measurements.epsilon * 6 <= 1e6
    back = load_grid_release(grid.to_json())
    assert back.privacy_unit == grid.privacy_unit and back.epsilon == 1e6
    np.testing.assert_allclose(back.counts, grid.counts)
    one = dprange.release_grid(frame, domain, 1e6, mechanism="kronecker", privacy_id="id", max_rows_per_id=1, rng=1)
    assert one.counts.sum() == pytest.approx(people.id.nunique(), abs=1e-6)
    with pytest.raises(ParameterError, match="delta > 0"):
        dprange.release_grid(frame, domain, 1.0, privacy_id="id", max_rows_per_id=2, delta=1e-6)


def test_small_multiples_draw_each_group_with_its_intervals_and_the_column_on_the_axis(people, tmp_path, monkeypatch):
    """GroupedRelease.plot: one panel per group titled by its key, bars at the group's counts,
    error bars at its 95% intervals, the column (and units) under the value axis."""
    plt = pytest.importorskip("matplotlib.pyplot")
    kept = []
    monkeypatch.setattr(plt, "close", kept.append)  # keep the figure to read it back
    grouped = dprange.release(people, DOMAIN, 2.0, **release_kwargs(max_rows_per_id=3))
    grouped.plot(tmp_path / "g.png", column="x", units="km")
    panels = [ax for ax in kept[0].axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [f"region = {key}" for key in KEYS]
    assert {ax.get_xlabel() for ax in panels} == {"x (km)"}
    for ax, key in zip(panels, KEYS):
        answer = grouped[key].histogram()
        np.testing.assert_allclose([bar.get_height() for bar in ax.patches], answer.value)
        lower, upper = answer.confidence_interval(0.05)
        segments = np.array(ax.collections[0].get_segments())
        np.testing.assert_allclose(segments[:, 0, 1], lower)
        np.testing.assert_allclose(segments[:, 1, 1], upper)


@pytest.mark.parametrize("where", ["frame", "csv", "parquet"])
def test_a_categorical_column_with_ids_is_exact_at_huge_epsilon(people, tmp_path, where):
    """Category labels as values (Domain.categories) with a unit and public groups: the bounded
    counts per category on a frame and on files (read into memory: the streaming engine takes
    numbers only); values outside the list are a DomainError, or the other bin with other=True."""
    labelled = people.assign(x=people.x.map(lambda v: f"c{v}"))
    domain = Domain.categories([f"c{v}" for v in range(10)])
    kwargs = release_kwargs(mechanism="flat")
    if where == "frame":
        grouped = dprange.release(labelled, domain, 1e6, **kwargs)
    else:
        path = write_table(labelled, tmp_path / f"people.{where}")
        grouped = dprange.release_files(path, "x", domain, 1e6, **files_kwargs(mechanism="flat"))
    assert_exact(grouped, people)
    assert grouped["south"].domain.bin_labels() == [f"c{v}" for v in range(10)]
    narrow = Domain.categories([f"c{v}" for v in range(9)])
    with pytest.raises(DomainError, match="not among the 9 public categories"):
        dprange.release(labelled, narrow, 1e6, **kwargs)
    other = dprange.release(labelled, Domain.categories([f"c{v}" for v in range(9)], other=True), 1e6, **kwargs)
    assert_exact(other, people)


def test_saved_releases_with_a_unit_state_the_person_as_the_unit_and_carry_their_labels(people, tmp_path):
    """A release with a privacy unit says, in its saved privacy statement, that it protects one
    person (all rows sharing an id, with the bounds kept) at the id-level epsilon, for every
    group of a grouped release, a single release and a grid; and each group keeps the column's
    name, units and file (a release without a unit still states one record)."""
    import json

    grouped = dprange.release(
        people, DOMAIN, 1.0, units="visits", **release_kwargs(max_rows_per_id=3, max_groups_per_id=2)
    )
    for release in grouped.releases:
        statement = json.loads(release.to_json())["privacy_statement"]
        unit = "one person: all the rows sharing a value of 'id' (at most 3 rows kept per person in each of at most 2 "
        unit += "groups)"
        assert statement["unit"] == unit
        assert statement["statement"].startswith("0.5-differential privacy (central model) for one person")
        assert "under add or remove one id with all its rows" in statement["statement"]
        assert release.input_labels.columns == ("x",) and release.input_labels.units == ("visits",)
    path = tmp_path / "people.csv"
    people.to_csv(path, index=False)
    on_file = dprange.release_files(str(path), "x", DOMAIN, 1.0, **files_kwargs())
    assert all(r.input_labels.source == str(path) and r.input_labels.columns == ("x",) for r in on_file.releases)
    single = dprange.release(people, DOMAIN, 1.0, column="x", privacy_id="id", max_rows_per_id=2, rng=1)
    assert (
        "for one person: all the rows sharing a value of 'id' (at most 2 rows kept per person)"
        in json.loads(single.to_json())["privacy_statement"]["statement"]
    )
    frame = people.assign(y=people.x % 3)[["x", "y", "id"]]
    grid = dprange.release_grid(
        frame, ProductDomain([DOMAIN, Domain.integers(0, 2)]), 1.0, privacy_id="id", max_rows_per_id=4, rng=1
    )
    grid_statement = grid.to_dict()["privacy_statement"]
    assert grid_statement["epsilon"] == 1.0 and grid_statement["statement"].startswith(
        "1-differential privacy (central model) for one person"
    )
    plain = dprange.release(people.x.to_numpy(), DOMAIN, 1.0, rng=1)
    assert json.loads(plain.to_json())["privacy_statement"]["unit"] == "one record (one row of the input)"


def test_the_report_states_the_person_as_the_unit(people):
    """The HTML report's privacy paragraph of a release with a unit names one person and the id
    relation, not one row (without a unit: one record)."""
    from dprange.answers.report import privacy_statement

    single = dprange.release(people, DOMAIN, 1.0, column="x", privacy_id="id", max_rows_per_id=2, rng=1)
    for release in (single, dprange.Release.from_json(single.to_json())):
        paragraphs = privacy_statement(release)
        assert paragraphs[1] == (
            "The unit of privacy is one person: all the rows sharing a value of 'id' (at most 2 rows kept per "
            "person); neighbouring datasets: add or remove one id with all its rows."
        )
    plain = dprange.release(people.x.to_numpy(), DOMAIN, 1.0, rng=1)
    assert privacy_statement(plain)[1].startswith("The unit of privacy is one record")
