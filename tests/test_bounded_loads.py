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
from dprange.errors import DataError

MILLION = "[" + ",".join(["0.5"] * 10**6) + "]"


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
