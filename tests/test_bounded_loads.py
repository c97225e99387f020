"""Loaded release files are not trusted (issue 30 item 5): the JSON parser that leaves the
large arrays of a release unparsed until the metadata give their sizes (dprange.answers.bounded_json)
against json.loads, and the grid loaders that use it (load_grid_release, the data-aware grid
release) against crafted files whose arrays exceed what the file's own metadata allow.  The
1-D release files (JSON and .npz) are tested in test_serialisation.py."""

import json

import numpy as np
import pytest
from _helpers import peak_bytes_raising

import dprange
from dprange.answers import bounded_json
from dprange.errors import DataError
from dprange.mechanisms.grid import KDHierarchy, load_grid_release

DOCUMENTS = [
    {"a": [1, 2.5, None, -3e-7], "b": {"value": [1, 2], "stderr": None}, "c": "x]y"},
    {"histogram": {"value": [], "stderr": [0.5]}, "histogram2": [[1], [2]]},
    {"measurements": [{"values": [1, 2, 3], "noise": {"kind": "x"}}, {"values": [[1], 2]}], "k": [{"values": [4]}]},
    {"histogram": {"value": ["a", "b"], "stderr": [{"x": 1}]}, "dup": 1},
    {"histogram": [1, 2, 3]},
    {},
]
PATHS = [("histogram", "value"), ("histogram", "stderr"), ("measurements", bounded_json.ANY, "values"), ("a",)]


def parsed(value):
    """``value`` with every Deferred parsed."""
    if isinstance(value, bounded_json.Deferred):
        return value.parse()
    if isinstance(value, dict):
        return {k: parsed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [parsed(v) for v in value]
    return value


@pytest.mark.parametrize("indent", [None, 1])
@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_loads_equals_json_loads_once_the_deferred_arrays_are_parsed(document, indent):
    text = json.dumps(document, indent=indent)
    loaded = bounded_json.loads(text, PATHS)
    assert parsed(loaded) == json.loads(text)
    deferred = []

    def collect(value):
        if isinstance(value, bounded_json.Deferred):
            deferred.append(value)
        elif isinstance(value, (dict, list)):
            for v in value.values() if isinstance(value, dict) else value:
                collect(v)

    collect(loaded)
    assert all(d.size == len(d.parse()) for d in deferred)
    if document is DOCUMENTS[0]:
        assert [d.parse() for d in deferred] == [[1, 2.5, None, -3e-7]]  # "b" is not on a path
    if document is DOCUMENTS[2]:
        assert [d.size for d in deferred] == [3]  # a nested array is parsed, not deferred


def test_repeated_keys_and_invalid_json_behave_as_in_json():
    text = '{"histogram": {"value": [1], "value": [1, 2]}, "x": 1, "x": 2}'
    assert parsed(bounded_json.loads(text, PATHS)) == json.loads(text)
    for bad in ['{"a": 1,}', '{"a" 1}', '{"a": [1,]}', '{"a": 1} x', "{", '{"histogram": {"value": [1, 2}', "[1] 2"]:
        with pytest.raises(json.JSONDecodeError):
            json.loads(bad)
        with pytest.raises(json.JSONDecodeError):  # a deferred array ("a") when it is parsed
            parsed(bounded_json.loads(bad, PATHS))


def test_sized_parses_only_the_expected_size():
    deferred = bounded_json.loads('{"a": [1, 2, 3]}', [("a",)])["a"]
    assert bounded_json.sized(deferred, 3, "{size}") == [1, 2, 3]
    with pytest.raises(DataError, match="^has 3$"):
        bounded_json.sized(deferred, 2, "has {size}")
    assert bounded_json.sized([1], 5, "{size}") == [1]  # an array already in memory is left as it is


MILLION = "[" + ",".join(["0.5"] * 10**6) + "]"


def test_a_grid_release_with_more_values_than_its_design_is_refused_before_parsing():
    """A block's values counted against the rows of the design rebuilt from the file's
    parameters: 10^6 numbers where the design has 7 rows are refused without parsing them
    (32 MB of Python floats before issue 30)."""
    rel = KDHierarchy(2).release(np.arange(16).reshape(4, 4) % 5, 1.0, rng=3)
    data = rel.to_dict()
    rows = len(data["measurements"][0]["values"])
    data["measurements"][0]["values"] = "MILLION"
    text = json.dumps(data).replace('"MILLION"', MILLION)
    with pytest.raises(DataError, match=f"a saved block has 1000000 values, its design {rows} rows"):
        load_grid_release(text)
    assert peak_bytes_raising(DataError, lambda: load_grid_release(text)) < 1 << 20
    np.testing.assert_array_equal(load_grid_release(rel.to_json()).counts, rel.counts)


def test_a_data_aware_grid_release_with_more_counts_than_its_shape_is_refused_before_parsing():
    from dprange.data_aware.grid import DataAwareGridRelease, HybridTree

    domain = dprange.ProductDomain([dprange.Domain.integers(0, 7), dprange.Domain.integers(0, 7)])
    rel = HybridTree(kd_levels=1, height=3).release(np.arange(64).reshape(8, 8) % 3, 1.0, rng=2, domain=domain)
    data = rel.to_dict()
    data["counts"] = "MILLION"
    text = json.dumps(data).replace('"MILLION"', MILLION)
    with pytest.raises(DataError, match=r"the saved release has 1000000 cells, its shape \[8, 8\] needs 64"):
        DataAwareGridRelease.from_json(text)
    assert peak_bytes_raising(DataError, lambda: DataAwareGridRelease.from_json(text)) < 1 << 20
    np.testing.assert_array_equal(DataAwareGridRelease.from_json(rel.to_json()).counts, rel.counts)
