"""Local-DP reports on disk and in memory: the records users send, read back with checks."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np

from ..errors import ReportError
from ..io import load_npz


@dataclass
class Reports:
    """A batch of randomised reports, with what is needed to check them on arrival."""

    oracle: str
    epsilon: float
    domain_size: int
    data: dict
    params: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.data["n"][0]) if "n" in self.data else 0

    def header(self) -> dict:
        return {"oracle": self.oracle, "epsilon": self.epsilon, "domain_size": self.domain_size, "params": self.params}

    def to_bytes(self) -> bytes:
        """Compact binary form (numpy .npz with a JSON header)."""
        buf = io.BytesIO()
        np.savez_compressed(
            buf, __header__=np.frombuffer(json.dumps(self.header()).encode(), dtype=np.uint8), **self.data
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> Reports:
        try:
            with load_npz(blob) as z:
                header = json.loads(bytes(z["__header__"]).decode())
                data = {k: z[k] for k in z.files if k != "__header__"}
            return cls(
                header["oracle"], float(header["epsilon"]), int(header["domain_size"]), data, header.get("params", {})
            )
        except Exception as exc:  # noqa: BLE001 - any decoding failure is a malformed file
            raise ReportError(f"malformed binary reports: {exc}") from None

    def to_jsonl(self, path) -> None:
        """JSON lines: a header line, then one line per report."""
        keys = [k for k in self.data if k != "n"]
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"header": self.header(), "fields": keys}) + "\n")
            columns = [self.data[k].tolist() for k in keys]
            for row in zip(*columns):
                fh.write(json.dumps(row) + "\n")

    @classmethod
    def from_jsonl(cls, path) -> Reports:
        try:
            with open(path, encoding="utf-8") as fh:
                first = json.loads(fh.readline())
                header, keys = first["header"], first["fields"]
                rows = [json.loads(line) for line in fh if line.strip()]
            bad = [r for r in rows if not isinstance(r, list) or len(r) != len(keys)]
            if bad:
                raise ValueError(f"{len(bad)} report line(s) do not hold exactly the fields {keys}, e.g. {bad[0]!r}")
            data = report_fields(keys, rows, int(header["domain_size"]))
            return cls(
                header["oracle"], float(header["epsilon"]), int(header["domain_size"]), data, header.get("params", {})
            )
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise ReportError(f"malformed JSON-lines reports in {path!r}: {exc}") from None


def report_fields(keys, rows, domain_size: int) -> dict:
    """Report arrays from JSON rows (one list of field values per user): every field holds
    integers (JSON true/false are not integers), OUE's ``bits`` packed bytes 0..255 with
    ceil(D / 8) per user; adds the user count ``n``.  Raises ValueError on anything else."""
    data = {}
    for i, key in enumerate(keys):
        column = [r[i] for r in rows]
        if any(isinstance(v, bool) for v in _flat(column)):
            raise ValueError(f"field {key!r} must hold integers, not true/false")
        arr = np.asarray(column) if rows else np.zeros(0, dtype=np.int64)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"field {key!r} must hold integers")
        data[key] = arr
    if "bits" in data:  # OUE: packed bytes, one row of ceil(D / 8) per user
        bits = data["bits"]
        if bits.size and (bits.min() < 0 or bits.max() > 255):
            raise ValueError("field 'bits' must hold packed bytes (integers 0..255)")
        data["bits"] = bits.astype(np.uint8).reshape(len(rows), (domain_size + 7) // 8)
    data["n"] = np.array([len(rows)])
    return data


def _flat(column):
    for value in column:
        if isinstance(value, list):
            yield from _flat(value)
        else:
            yield value
