"""dprange.answers.provenance: the Provenance record round-trips through JSON with normalised types,
refuses malformed input as a data error, and is checked against a saved release's legacy
fields."""

import json

import pytest

from dprange import DataError, Release
from dprange.answers.provenance import Provenance


# ----------------------------------------------------------------------------- provenance
def test_provenance_round_trips_through_json_and_normalises_types():
    p = Provenance(
        "hierarchical",
        {"branching": 4},
        epsilon=0.5,
        delta=1e-6,
        neighbours="replace",
        total=100,
        inference="l1",
        inference_options={"alpha": 1.0},
        noise="gaussian",
        seeded=True,
        noise_scales=[1.5, 2.0],
    )
    assert p.total == 100.0 and isinstance(p.total, float)
    assert p.noise_scales == (1.5, 2.0)
    assert Provenance.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert not p.exact_error_bars and Provenance("flat").exact_error_bars
    with pytest.raises(AttributeError):
        p.epsilon = 2.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(epsilon=-1), "epsilon"),
        (lambda d: d.update(neighbours="swap"), "neighbours"),
        (lambda d: d.update(inference="mle"), "inference"),
        (lambda d: d.update(noise_scales="1,2"), "noise scales"),
        (lambda d: d.update(seeded="yes"), "seeded"),
        (lambda d: d.update(colour="blue"), "unknown fields"),
        (lambda d: d.update(mechanism=3), "mechanism"),
    ],
)
def test_malformed_provenance_is_a_data_error(change, message):
    data = Provenance("flat", epsilon=1.0).to_dict()
    change(data)
    with pytest.raises(DataError, match=message):
        Provenance.from_dict(data)


def test_provenance_is_saved_and_checked_against_the_legacy_fields(integer_release):
    data = integer_release.to_dict()
    assert data["dprange_release"] == 3  # format 3 (issue 34) keeps the fields of format 2
    assert Provenance.from_dict(data["provenance"]) == Provenance.from_dict(
        json.loads(json.dumps(integer_release.provenance.to_dict()))
    )
    loaded = Release.from_dict(data)
    assert loaded.provenance == Provenance.from_dict(data["provenance"])
    assert loaded.measurements is None
    # a format-2 file written before the record existed still loads, to the same provenance
    older = {k: v for k, v in data.items() if k != "provenance"}
    assert Release.from_dict(older).provenance == loaded.provenance
    # a record that disagrees with the privacy fields is corruption
    data["provenance"]["epsilon"] = 2.0
    with pytest.raises(DataError, match="provenance disagrees"):
        Release.from_dict(data)
