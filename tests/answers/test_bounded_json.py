"""The JSON parser that leaves the large arrays of a release unparsed until the metadata give their
sizes (dprange.answers.bounded_json) against json.loads: loaded release files are not trusted
(issue 30, item 5).  The loaders that use it: tests/mechanisms/test_grid.py and
tests/data_aware/test_grid.py."""

import json

import pytest

from dprange.answers import bounded_json
from dprange.errors import DataError

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
