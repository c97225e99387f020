"""Saving and loading releases: streaming JSON, a binary .npz format, and :func:`load_release`.

Formats
-------
* JSON (``Release.to_json``): the dictionary of :meth:`dprange.Release.to_dict`.  Written
  streaming: the small metadata with ``json``, the histogram values and standard errors in
  chunks (standard errors computed chunk by chunk from the error model), each array on one
  line; non-finite numbers are written as ``null``.  A 2^24-bin release is written without
  building 2^24 Python objects at once.
* NPZ (``Release.to_npz``): a NumPy archive with the arrays ``estimate`` and, for releases
  with exact error bars, ``stderr`` (float64), and ``__meta__``, the JSON metadata (the
  same dictionary without the histogram arrays) as UTF-8 bytes.  Compact and fast.

Both are written atomically: to a temporary file in the target folder, then ``os.replace``,
so a failure never leaves a partial file.

Loading
-------
:func:`load_release` reads either format and returns a :class:`LoadedRelease`, which answers
from the saved data only: range, prefix, histogram and total *values*; the standard errors of
single bins and of the total (saved); the saved metadata (privacy parameters, mechanism,
deciles as published).  It has no error model: the standard error of a range of several
bins (which needs the covariances between bins) raises ParameterError, and CDFs, quantile
intervals and bootstrap need the original :class:`~dprange.Release`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Callable, Iterator

import numpy as np

from .domain import Domain
from .errors import DataError, DPRangeError, ParameterError, excerpt

FORMAT_VERSION = 1
#: Bins per chunk when writing arrays.
CHUNK = 1 << 16
#: Bins per chunk when computing standard errors: error models do O(bins) work per call (a
#: cumulative sum per level), so chunks are large; memory stays at a few arrays of this size.
STDERR_CHUNK = 1 << 20
_PLACEHOLDER = "\x00dprange-array:{}\x00"


# ----------------------------------------------------------------------------- helpers
def check_alpha(alpha) -> float:
    """``alpha`` as a float in (0, 1), or ParameterError."""
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise ParameterError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if not 0.0 < float(alpha) < 1.0:
        raise ParameterError(f"alpha must be in (0, 1), got {alpha!r}")
    return float(alpha)


def jsonable(obj):
    """``obj`` with numpy scalars and arrays as Python values and NaN/inf as None."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    return obj


def stderr_chunks(release, chunk: int | None = None) -> Iterator[np.ndarray]:
    """Standard errors of the histogram bins, ``chunk`` (default STDERR_CHUNK) bins at a time."""
    chunk = STDERR_CHUNK if chunk is None else chunk
    for start in range(0, release.n, chunk):
        idx = np.arange(start, min(release.n, start + chunk), dtype=np.int64)
        variance = np.asarray(release.error_model.range_variance(idx, idx), dtype=float)
        yield np.sqrt(np.maximum(variance, 0.0))


def histogram_stderr(release) -> np.ndarray:
    """All histogram standard errors, computed in chunks."""
    if release.n == 0:
        return np.zeros(0)
    return np.concatenate(list(stderr_chunks(release)))


def _format_chunk(values: np.ndarray) -> str:
    """Comma-separated JSON numbers (shortest round-trip repr; null for NaN/inf)."""
    items = values.tolist()
    if np.all(np.isfinite(values)):
        return repr(items)[1:-1].replace(", ", ",")  # the list's repr: float repr, in C
    return ",".join(repr(v) if math.isfinite(v) else "null" for v in items)


def _write_array(fh, chunks: Iterator[np.ndarray]) -> None:
    fh.write("[")
    first = True
    for chunk in chunks:
        if chunk.size == 0:
            continue
        if not first:
            fh.write(",")
        fh.write(_format_chunk(np.asarray(chunk, dtype=float)))
        first = False
    fh.write("]")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path, write: Callable, *, binary: bool = False) -> str:
    """Run ``write(file)`` on a temporary file next to ``path``, then move it into place."""
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"the output path must be a string or path, got {path!r}")
    path = os.fspath(path)
    if path == "" or os.path.isdir(path):
        raise ParameterError(f"the output path {path!r} is empty or a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise DataError(f"cannot write {path!r}: the folder {folder!r} does not exist")
    try:
        fd, temporary = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    except OSError as exc:
        raise DataError(f"cannot write {path!r}: {excerpt(exc.strerror or exc, 80)}") from None
    try:
        mode = "wb" if binary else "w"
        with os.fdopen(fd, mode, **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise DataError(f"cannot write {path!r}: {excerpt(exc.strerror or exc, 80)}") from None
        raise
    return path


# ----------------------------------------------------------------------------- writing
def metadata(release, alpha: float) -> dict:
    """The release's dictionary without the histogram arrays (small)."""
    return jsonable(release._metadata(check_alpha(alpha)))


def write_json(release, fh, alpha: float) -> None:
    """Stream the JSON of ``release`` (the same content as ``to_dict``) to ``fh``."""
    meta = metadata(release, alpha)
    meta["histogram"] = {
        "value": _PLACEHOLDER.format("value"),
        "stderr": _PLACEHOLDER.format("stderr") if release.exact_error_bars else None,
    }
    text = json.dumps(meta, indent=1, allow_nan=False)
    arrays = {
        "value": lambda: (release.estimate[s : s + CHUNK] for s in range(0, release.n, CHUNK)),
        "stderr": lambda: stderr_chunks(release),
    }
    for name, chunks in arrays.items():
        marker = json.dumps(_PLACEHOLDER.format(name))
        if marker not in text:
            continue
        before, text = text.split(marker, 1)
        fh.write(before)
        _write_array(fh, chunks())
    fh.write(text)


def json_text(release, alpha: float) -> str:
    import io  # noqa: PLC0415

    buffer = io.StringIO()
    write_json(release, buffer, alpha)
    return buffer.getvalue()


def write_npz(release, fh, alpha: float) -> None:
    meta = metadata(release, alpha)
    meta["format"] = {"dprange_npz": FORMAT_VERSION}
    arrays = {"estimate": np.asarray(release.estimate, dtype=float)}
    if release.exact_error_bars:
        arrays["stderr"] = histogram_stderr(release)
    blob = np.frombuffer(json.dumps(meta, allow_nan=False).encode("utf-8"), dtype=np.uint8)
    np.savez(fh, __meta__=blob, **arrays)


# ----------------------------------------------------------------------------- loading
class LoadedRelease:
    """A release read back from JSON or NPZ: answers from the saved data (module doc).

    Attributes: ``domain``, ``estimate``, ``n``, ``metadata`` (the saved dictionary without
    the histogram arrays), ``epsilon``, ``delta``, ``neighbours``, ``mechanism``,
    ``inference``, ``exact_error_bars``.
    """

    def __init__(self, meta: dict, estimate: np.ndarray, stderr: np.ndarray | None):
        self.metadata = meta
        self.domain = Domain.from_dict(meta.get("domain"))
        self.estimate = estimate
        self.n = estimate.size
        if self.domain.size != self.n:
            raise DataError(f"the saved domain has {self.domain.size} bins but the histogram has {self.n}")
        if stderr is not None and stderr.shape != estimate.shape:
            raise DataError("the saved standard errors do not match the histogram")
        self._stderr = stderr
        privacy = meta.get("privacy") or {}
        self.epsilon = privacy.get("epsilon")
        self.delta = privacy.get("delta")
        self.neighbours = privacy.get("neighbours")
        self.mechanism = meta.get("mechanism")
        self.inference = meta.get("inference")
        self.exact_error_bars = stderr is not None
        self._sums = np.concatenate([[0.0], np.cumsum(estimate)])
        total = meta.get("total") or {}
        self._total_value = total.get("value")
        self._total_stderr = total.get("stderr")

    def _check_ranges(self, lo, hi):
        from .release import check_bin_ranges  # noqa: PLC0415

        return check_bin_ranges(lo, hi, self.n)

    def _range_variance(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if self._stderr is None:
            raise ParameterError(
                "this saved release has no standard errors (non-linear inference); the original release's "
                "bootstrap gives them"
            )
        variance = np.full(lo.shape, np.nan)
        single = lo == hi
        variance[single] = self._stderr[lo[single]] ** 2
        whole = (lo == 0) & (hi == self.n - 1) & ~single
        if whole.any() and self._total_stderr is not None and not self.metadata.get("total", {}).get("public"):
            variance[whole] = float(self._total_stderr) ** 2
        elif whole.any() and self.metadata.get("total", {}).get("public"):
            variance[whole] = 0.0
        if np.any(np.isnan(variance)):
            raise ParameterError(
                "a loaded release knows the standard errors of single bins and of the total only; ranges of "
                "several bins need the original Release (its error model has the covariances)"
            )
        return variance

    def range(self, lo, hi):
        """Saved estimate of the count of bins lo..hi (inclusive indices); see the module doc
        for which standard errors are available."""
        from .release import Answer  # noqa: PLC0415

        lo, hi = self._check_ranges(lo, hi)
        scalar = lo.ndim == 0
        value = self._sums[hi + 1] - self._sums[lo]
        tails = "normal" if (self.metadata.get("privacy") or {}).get("noise") == "gaussian" else "laplace"
        return Answer(value, lambda: self._range_variance(lo, hi), scalar=scalar, tails=tails)

    def prefix(self, j):
        """Saved estimate of the count of bins 0..j."""
        return self.range(0, j)

    def histogram(self):
        """Saved estimate of every bin, with the saved standard errors."""
        idx = np.arange(self.n)
        return self.range(idx, idx)

    def total(self):
        """The saved total (public, or estimated with its saved standard error)."""
        if self._total_value is None:
            return self.range(0, self.n - 1)
        from .release import Answer  # noqa: PLC0415

        if (self.metadata.get("total") or {}).get("public"):
            return Answer(float(self._total_value), 0.0, scalar=True)
        stderr = self._total_stderr
        return Answer(float(self._total_value), float("nan") if stderr is None else float(stderr) ** 2, scalar=True)

    def __repr__(self) -> str:
        return (f"LoadedRelease(mechanism={self.mechanism!r}, bins={self.n}, epsilon={self.epsilon}, "
                f"delta={self.delta}, neighbours={self.neighbours!r})")


def _float_array(values, name: str, *, allow_missing: bool = False) -> np.ndarray:
    try:
        arr = np.asarray([np.nan if v is None else v for v in values] if allow_missing else values, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"the saved {name} is not an array of numbers") from None
    if arr.ndim != 1:
        raise DataError(f"the saved {name} is not a 1-D array")
    return arr


def _from_meta(meta, estimate, stderr) -> LoadedRelease:
    if not isinstance(meta, dict) or meta.get("dprange_release") != 1:
        raise DataError("this is not a dprange release (no 'dprange_release': 1 field)")
    estimate = _float_array(estimate, "histogram")
    if not np.all(np.isfinite(estimate)):
        raise DataError("the saved histogram holds non-finite values")
    if stderr is not None:
        stderr = _float_array(stderr, "standard errors", allow_missing=True)
    try:
        return LoadedRelease(meta, estimate, stderr)
    except DPRangeError as exc:
        raise DataError(f"the saved release is inconsistent: {exc}") from None


def _load_json(path: str) -> LoadedRelease:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except UnicodeDecodeError:
        raise DataError(f"{path!r} is not UTF-8 JSON text") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path!r} is not valid JSON ({excerpt(exc.msg, 60)} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("histogram"), dict):
        raise DataError(f"{path!r} is not a dprange release (no histogram)")
    histogram = data.pop("histogram")
    return _from_meta(data, histogram.get("value"), histogram.get("stderr"))


def _load_npz(path: str) -> LoadedRelease:
    from .io import load_npz  # noqa: PLC0415

    contents = load_npz(path)
    if "__meta__" not in contents or "estimate" not in contents:
        raise DataError(f"{path!r} is an .npz archive but not a dprange release (no __meta__ or estimate)")
    try:
        meta = json.loads(bytes(contents["__meta__"].astype(np.uint8)).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise DataError(f"{path!r} has unreadable release metadata") from None
    return _from_meta(meta, contents["estimate"], contents.get("stderr"))


def load_release(path) -> LoadedRelease:
    """A release saved by ``Release.to_json`` or ``Release.to_npz`` (chosen by content).

    Returns a :class:`LoadedRelease` (see the module doc for what it can and cannot do).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"the release path must be a string or path, got {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"release file {path!r} does not exist or is not a file")
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK\x03\x04"):
        return _load_npz(path)
    return _load_json(path)
