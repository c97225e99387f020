"""dprange.ldp.reports: binary and JSON-lines reports round-trip exactly and refuse bytes, types
and garbage they cannot hold."""

import json

import numpy as np
import pytest

from dprange import DomainError, ParameterError, ReportError
from dprange.ldp import GRR, HRR, OLH, OUE, Reports


def test_ldp_reports_from_garbage_bytes_do_not_advise_pickle():
    from dprange.errors import ReportError
    from dprange.ldp.oracles import Reports
    from dprange.ldp.protocols import ProtocolReports

    for cls in (Reports, ProtocolReports):
        with pytest.raises(ReportError) as info:
            cls.from_bytes(b"age\n1\n2\n")
        assert "allow_pickle" not in str(info.value)


def test_reports_round_trip_and_mismatches(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.integers(0, 10, 500)
    for oracle in (GRR(10, 1.0), OUE(10, 1.0), OLH(10, 1.0), HRR(10, 1.0)):
        rep = oracle.randomize(values, rng)
        direct = oracle.aggregator().add(rep).estimate()
        back = Reports.from_bytes(rep.to_bytes())
        np.testing.assert_allclose(oracle.aggregator().add(back).estimate(), direct)
        path = tmp_path / f"{oracle.name}.jsonl"
        rep.to_jsonl(path)
        np.testing.assert_allclose(oracle.aggregator().add(Reports.from_jsonl(path)).estimate(), direct)
        with pytest.raises(ReportError):
            type(oracle)(10, 2.0).aggregator().add(rep)
        with pytest.raises(ReportError):
            type(oracle)(12, 1.0).aggregator().add(rep)
        # merging two halves equals aggregating everything
        a = oracle.aggregator().add(oracle.randomize(values[:200], 1))
        b = oracle.aggregator().add(oracle.randomize(values[200:], 2))
        whole = oracle.aggregator().add(oracle.randomize(values[:200], 1)).add(oracle.randomize(values[200:], 2))
        np.testing.assert_allclose(a.merge(b).estimate(), whole.estimate())
    with pytest.raises(ReportError):
        Reports.from_bytes(b"not a report")
    (tmp_path / "bad.jsonl").write_text("{oops\n")
    with pytest.raises(ReportError):
        Reports.from_jsonl(tmp_path / "bad.jsonl")
    with pytest.raises(DomainError):
        OUE(10, 1.0).randomize([3, 10])
    with pytest.raises(DomainError):
        GRR(10, 1.0).randomize([1.5])
    with pytest.raises(ParameterError):
        OUE(10, 0.0)
    with pytest.raises(ParameterError):
        GRR(1, 1.0)


@pytest.mark.parametrize(
    "oracle",
    [GRR(10, 0.7), OUE(10, 0.7), OUE(13, 0.7), OLH(10, 0.7), OLH(10, 0.7, hash_pool=32), HRR(10, 0.7)],
    ids=lambda o: f"{o.name}{o.domain_size}{o.params() or ''}",
)
def test_serialisation_round_trip_is_exact(oracle, tmp_path):
    """Binary and JSON-lines forms give back the same header and the same arrays (dtype
    kinds included), for a normal and an empty batch; corrupt files raise ReportError."""
    rng = np.random.default_rng(8)
    for values in (rng.integers(0, oracle.domain_size, 257), np.array([], dtype=np.int64)):
        rep = oracle.randomize(values, rng)
        path = tmp_path / "r.jsonl"
        rep.to_jsonl(path)
        for back in (Reports.from_bytes(rep.to_bytes()), Reports.from_jsonl(path)):
            assert back.header() == rep.header() and back.n == values.size
            assert set(back.data) == set(rep.data)
            for key in rep.data:
                np.testing.assert_array_equal(
                    np.asarray(back.data[key]).reshape(np.shape(rep.data[key])), rep.data[key]
                )
            agg = oracle.aggregator().add(back)
            assert agg.n == values.size
            if values.size:
                np.testing.assert_allclose(agg.estimate(), oracle.aggregator().add(rep).estimate())
    blob = rep.to_bytes()
    for bad in (blob[: len(blob) // 2], b"", b"PK\x03\x04garbage"):
        with pytest.raises(ReportError):
            Reports.from_bytes(bad)
    lines = path.read_text().splitlines()
    (tmp_path / "nohdr.jsonl").write_text("\n".join(lines[1:]) + "\n")
    (tmp_path / "text.jsonl").write_text(lines[0] + '\n["x"]\n')
    for name in ("nohdr.jsonl", "text.jsonl"):
        with pytest.raises(ReportError):
            Reports.from_jsonl(tmp_path / name)
    # a file whose header claims another epsilon is read but refused by the aggregator
    other = Reports(rep.oracle, rep.epsilon * 2, rep.domain_size, rep.data, rep.params)
    with pytest.raises(ReportError):
        oracle.aggregator().add(Reports.from_bytes(other.to_bytes()))


# ------------------------------------------------------------------ malformed reports (W8, C6)
def _oue_jsonl(tmp_path, last_row):
    header = {"header": {"oracle": "oue", "epsilon": 1.0, "domain_size": 10, "params": {}}, "fields": ["bits"]}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(map(json.dumps, [header, [[3, 1], [0, 2]][0:1], last_row])) + "\n")
    return path


@pytest.mark.parametrize("bad", [[[256, 0]], [[-1, 0]], [[True, 0]], [[1.5, 0]], [[3]]])
def test_oracle_jsonl_refuses_bad_oue_bytes(tmp_path, bad):
    with pytest.raises(ReportError):
        Reports.from_jsonl(_oue_jsonl(tmp_path, bad))
    assert Reports.from_jsonl(_oue_jsonl(tmp_path, [[255, 3]])).n == 2


def test_binary_reports_with_wrong_types_are_report_errors():
    """Arrays of the wrong dtype in a binary file used to escape as TypeError/ValueError."""
    oue = OUE(10, 1.0)
    reports = oue.randomize(np.arange(10), 1)
    reports.data["bits"] = reports.data["bits"].astype(np.int64)
    with pytest.raises(ReportError, match="packed bytes"):
        oue.aggregator().add(Reports.from_bytes(reports.to_bytes()))
    reports = oue.randomize(np.arange(10), 1)
    reports.data["n"] = np.array(["10"])
    with pytest.raises(ReportError, match="user count"):
        oue.aggregator().add(Reports.from_bytes(reports.to_bytes()))
