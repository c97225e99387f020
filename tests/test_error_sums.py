"""Workload errors from sums of variances in O(block) memory; candidates ranked on threads (issue 16).

The streamed sums must equal the listed variances (one pass, per query, the weighted query)
on every tree shape, block size and Haar size; ``expected_error`` must allocate a few
n-vectors at most; ranking on threads must give the serial table exactly."""

from dprange.analysis import selection as analysis


def test_threaded_ranking_equals_serial(monkeypatch):
    n = 3000
    serial = analysis.select("all-range", n, 0.5, optimize_budget=False)
    monkeypatch.setattr(analysis, "PARALLEL_RANK_MIN_N", 1)
    monkeypatch.setattr(analysis, "RANK_WORKERS", 2)
    monkeypatch.setattr(analysis.os, "cpu_count", lambda: 2)
    calls = []
    real = analysis.ThreadPoolExecutor

    class Counting(real):
        def __init__(self, *args, **kwargs):
            calls.append(kwargs.get("max_workers"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(analysis, "ThreadPoolExecutor", Counting)
    threaded = analysis.select("all-range", n, 0.5, optimize_budget=False)
    assert calls == [2]
    assert [repr(c.mechanism) for c in threaded.table] == [repr(c.mechanism) for c in serial.table]
    assert [c.error for c in threaded.table] == [c.error for c in serial.table]
    assert [(repr(m), reason) for m, reason in threaded.excluded] == [(repr(m), r) for m, r in serial.excluded]
