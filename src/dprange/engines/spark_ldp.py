"""Local-DP reports on Spark, the work done inside each partition: parse the report lines into a
protocol aggregator's exact summaries, and check the header lines against the protocol
(:func:`dprange.engines.spark.spark_ldp_aggregate` merges the partitions on the driver).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import numpy as np

from ..errors import DPRangeError, ReportError, excerpt
from ..ldp.reports import Reports, report_fields


def aggregate_partition(rows, protocol, fields) -> Iterator:
    """mapInArrow body for reports: one row per partition with its aggregator's state
    (per level: summary bytes and users) and the header lines it saw."""
    import pyarrow as pa  # noqa: PLC0415

    agg = protocol.aggregator()
    headers: set[str] = set()
    error = None
    for batch in rows:
        lines = batch.column(0).to_pylist()
        per_level: dict[int, list] = {level: [] for level in agg.levels}
        try:
            for line in lines:
                text = (line or "").strip()
                if not text:
                    continue
                if text.startswith("{"):
                    headers.add(text)
                    continue
                row = json.loads(text)
                if not isinstance(row, list) or not row or isinstance(row[0], bool) or row[0] not in per_level:
                    raise ReportError(f"bad report line {excerpt(text, 60)!r}")
                if len(row) != 1 + len(fields[row[0]]):
                    raise ReportError(f"report line {excerpt(text, 60)!r} does not hold the fields {fields[row[0]]}")
                per_level[row[0]].append(row[1:])
            for level, got in per_level.items():
                if got:
                    oracle = agg.levels[level].oracle
                    data = report_fields(list(fields[level]), got, oracle.domain_size)
                    agg.levels[level].add(
                        Reports(oracle.name, oracle.epsilon, oracle.domain_size, data, oracle.params())
                    )
        except (ValueError, DPRangeError) as exc:  # json errors are ValueErrors
            error = f"{excerpt(exc, 160)}"
            break
    arrays = {f"n{level}": np.array([a.n]) for level, a in agg.levels.items()}
    arrays.update({f"s{level}": a.summary for level, a in agg.levels.items() if a.summary is not None})
    state = io.BytesIO()
    np.savez(state, **arrays)  # type: ignore[arg-type]  # exact summaries, no pickling
    yield pa.RecordBatch.from_pydict(
        {"state": [state.getvalue()], "headers": [json.dumps(sorted(headers))], "error": [error]}
    )


def check_header(text: str, expected: dict, fields: dict) -> None:
    """Refuse a report header line that does not describe the aggregating protocol or its fields."""
    try:
        header = json.loads(text)
        protocol = header["protocol"]
    except (ValueError, KeyError, TypeError):
        raise ReportError(f"malformed report header line {excerpt(text, 60)!r}") from None
    if protocol != expected:
        keys = sorted(k for k in set(expected) | set(protocol) if expected.get(k) != protocol.get(k))
        detail = ", ".join(f"{k}={protocol.get(k)!r} (expected {expected.get(k)!r})" for k in keys)
        raise ReportError(f"reports do not match this aggregator: {detail}")
    for level, names in (header.get("fields") or {}).items():
        if tuple(names) != fields.get(int(level)):
            raise ReportError(
                f"report header gives fields {names} for level {level}, expected {list(fields[int(level)])}"
            )
