"""Writing releases: the JSON and npz encodings of a :class:`~dprange.answers.release.Release`,
streamed in chunks and written atomically (a temporary file, then ``os.replace``), with file
modes that follow the umask (releases are meant to be published).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._validation import check_alpha
from ..errors import DataError, ParameterError, excerpt
from .describe import self_description
from .types import NONLINEAR_ERROR_BARS, NONLINEAR_INTERVALS

#: The saved format: 2 keeps the error model, 3 describes the release (input labels, the
#: privacy statement in words, the software, the CDF when asked); files in formats 1 and 2 still load.
FORMAT_VERSION = 3


#: Bins per chunk when writing arrays.
CHUNK = 1 << 16


#: Bins per chunk when computing standard errors: error models do O(bins) work per call (a
#: cumulative sum per level), so chunks are large; memory stays at a few arrays of this size.
STDERR_CHUNK = 1 << 20


_PLACEHOLDER = "\x00dprange-array:{}\x00"


# ----------------------------------------------------------------------------- helpers
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
    if hasattr(release.error_model, "prefix_variances"):  # tree models: all bins in one pass
        bins = release.error_model.prefix_variances().bins
        for start in range(0, release.n, chunk):
            yield np.sqrt(bins[start : start + chunk])
        return
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


def published_mode() -> int:
    """The mode of a release written to a file: 0666 less the umask, as ``open`` creates files
    (a release is meant to be published; ledgers and the strategy cache stay 0600)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


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
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
        os.chmod(temporary, published_mode())  # mkstemp made it 0600
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
def metadata(release, alpha: float, *, cdf: bool = False) -> dict:
    """The release's dictionary without the histogram arrays (small, but for the CDF when asked)."""
    out = _metadata(release, check_alpha(alpha))
    out.update(_description(release))
    if cdf:
        out["cdf"] = _cdf(release, alpha)
    return jsonable(out)


def _description(release) -> dict:
    """Format 3's self-description (:func:`dprange.answers.describe.self_description`)."""
    provenance = release.provenance
    local = getattr(release.measurements, "source", "central") != "central"
    return self_description(release.input_labels, provenance, local=local, data_dependent=provenance.data_dependent)


def _cdf(release, alpha: float) -> dict | None:
    """The CDF at the right edge of every bin, F_j = (records in bins 0..j) / total, with its
    pointwise (1 - alpha) band (None where the CDF is undefined: a non-positive total)."""
    try:
        value = np.asarray(release.cdf().value, dtype=float)
        band = release.cdf_band(alpha) if release.exact_error_bars else None
    except ParameterError:
        return None
    return {
        "at": release.domain.bin_values().tolist(),  # the right edge of each bin (integer domains: its value)
        "value": value.tolist(),
        "lower": None if band is None else np.asarray(band[0], dtype=float).tolist(),
        "upper": None if band is None else np.asarray(band[1], dtype=float).tolist(),
        "alpha": alpha,
        "band": NONLINEAR_INTERVALS if band is None else "pointwise: each bound holds with probability >= 1 - alpha",
    }


def _metadata(release, alpha: float) -> dict:
    """The dictionary of ``Release.to_dict`` without the histogram arrays: the legacy fields of
    format 2 (read by older versions) and the provenance record."""
    provenance = release.provenance
    total = release.total()
    out = {
        "dprange_release": FORMAT_VERSION,
        "mechanism": provenance.mechanism,
        "parameters": provenance.parameters,
        "privacy": {
            "epsilon": provenance.epsilon,
            "delta": provenance.delta,
            "neighbours": provenance.neighbours,
            "noise": provenance.noise,
            "seeded": provenance.seeded,
        },
        "noise_scales": release.noise_scales,
        "inference": provenance.inference,
        "provenance": provenance.to_dict(),
        "domain": release.domain.to_dict(),
        "total": {
            "value": float(total.value),
            "stderr": float(total.stderr) if release.exact_error_bars else None,
            "public": provenance.total is not None,
        },
    }
    out["error_model"] = error_model_dict(release)
    if not release.exact_error_bars:
        out["error_bars"] = DATA_DEPENDENT_ERROR_BARS if provenance.data_dependent else NONLINEAR_ERROR_BARS
    elif out["error_model"] is None:
        out["error_bars"] = UNSAVED_ERROR_BARS
    out["deciles"] = _deciles(release, alpha)
    return out


def _deciles(release, alpha: float) -> dict | None:
    """The nine deciles with their intervals (None where the CDF is undefined, e.g. a
    non-positive estimated total; null intervals for non-linear inference)."""
    deciles = np.linspace(0.1, 0.9, 9)
    try:
        q = release.quantile(deciles)
    except ParameterError:
        return None
    out = {
        "q": deciles.round(2).tolist(),
        "value": np.asarray(q.value).tolist(),
        "interpolated": q.interpolated,
        "placement": np.asarray(q.placement).tolist(),
        "bin_lower": np.asarray(q.bin_lower).tolist(),
        "bin_upper": np.asarray(q.bin_upper).tolist(),
        "point": POINT_RULE,
    }
    if not release.exact_error_bars:
        why = DATA_DEPENDENT_INTERVALS if release.provenance.data_dependent else NONLINEAR_INTERVALS
        out.update({"lower": None, "upper": None, "alpha": alpha, "intervals": why})
        return out
    try:
        lower, upper = q.confidence_interval(alpha, simultaneous=True)
    except ParameterError:
        return None
    out.update(
        {
            "lower": lower.tolist(),
            "upper": upper.tolist(),
            "alpha": alpha,
            "simultaneous": True,
            "interval": (
                "bin edges; all nine hold at once with probability >= 1 - alpha, whatever the data inside a bin"
            ),
        }
    )
    return out


def release_dict(release, alpha: float, *, cdf: bool = False) -> dict:
    """``Release.to_dict``: the metadata and the histogram (values and standard errors)."""
    out = metadata(release, alpha, cdf=cdf)
    out["histogram"] = {
        "value": release.estimate.tolist(),
        "stderr": histogram_stderr(release).tolist() if release.exact_error_bars else None,
    }
    return out


def save_json(release, path, alpha: float, *, cdf: bool = False):
    """``Release.to_json``: the text (no path) or the path written atomically."""
    if path is None:
        return json_text(release, alpha, cdf=cdf)
    check_alpha(alpha)
    return write_atomically(path, lambda fh: write_json(release, fh, alpha, cdf=cdf))


def save_npz(release, path, alpha: float) -> str:
    """``Release.to_npz``: the archive written atomically; returns the path."""
    check_alpha(alpha)
    return write_atomically(path, lambda fh: write_npz(release, fh, alpha), binary=True)


def write_json(release, fh, alpha: float, *, cdf: bool = False) -> None:
    """Stream the JSON of ``release`` (the same content as ``to_dict``) to ``fh``."""
    meta = metadata(release, alpha, cdf=cdf)
    one_line = {}  # lists written on one line, not one line per number
    for name in ("error_model", "noise_scales", "provenance", "deciles", "cdf", "privacy_statement"):
        if meta.get(name) is not None:
            one_line[name] = meta[name]
            meta[name] = _PLACEHOLDER.format(name)
    meta["histogram"] = {
        "value": _PLACEHOLDER.format("value"),
        "stderr": _PLACEHOLDER.format("stderr") if release.exact_error_bars else None,
    }
    text = json.dumps(meta, indent=1, allow_nan=False)
    arrays = {
        "value": lambda: (release.estimate[s : s + CHUNK] for s in range(0, release.n, CHUNK)),
        "stderr": lambda: stderr_chunks(release),
    }
    for name, value in one_line.items():
        text = text.replace(
            json.dumps(_PLACEHOLDER.format(name)), json.dumps(value, separators=(",", ":"), allow_nan=False), 1
        )
    for name, chunks in arrays.items():
        marker = json.dumps(_PLACEHOLDER.format(name))
        if marker not in text:
            continue
        before, text = text.split(marker, 1)
        fh.write(before)
        _write_array(fh, chunks())
    fh.write(text)


def json_text(release, alpha: float, *, cdf: bool = False) -> str:
    import io  # noqa: PLC0415

    buffer = io.StringIO()
    write_json(release, buffer, alpha, cdf=cdf)
    return buffer.getvalue()


def write_npz(release, fh, alpha: float) -> None:
    meta = metadata(release, alpha)
    meta["format"] = {"dprange_npz": FORMAT_VERSION}
    arrays: dict[str, Any] = {"estimate": np.asarray(release.estimate, dtype=float)}
    if release.exact_error_bars:
        arrays["stderr"] = histogram_stderr(release)
    blob = np.frombuffer(json.dumps(meta, allow_nan=False).encode("utf-8"), dtype=np.uint8)
    np.savez(fh, __meta__=blob, **arrays)


def error_model_dict(release) -> dict | None:
    """The compact description of ``release``'s error model (None: non-linear inference, or a
    model that cannot be saved, e.g. one without a closed form here)."""
    if not release.exact_error_bars:
        return None
    to_dict = getattr(release.error_model, "to_dict", None)
    if to_dict is None:
        return None
    try:
        return to_dict()
    except ParameterError:
        return None


#: What a saved release says about the deciles' points (dprange.answers.cdf, the placement rule).
POINT_RULE = (
    "placement per level: exact (a one-value bin), interpolated (a guess inside the bin, as if its values "
    "spread evenly) or concentrated (most of the bin's records sit together: the value is the bin's lower "
    "edge and the answer is the bin, bin_lower to bin_upper)"
)


#: What a saved data-aware release (DAWA, MWEM) says about its error bars and intervals.
DATA_DEPENDENT_ERROR_BARS = (
    "not available: private data-dependent choices (a partition, selected queries) or a non-negative fit "
    "(whole or weighted) bias the estimate; Release.noise_only_stderr gives the noise-only part (DAWA), "
    "which excludes that bias"
)


DATA_DEPENDENT_INTERVALS = "data-aware mechanisms have no quantile intervals with known coverage"


#: What a saved least-squares release without its error model says.
UNSAVED_ERROR_BARS = (
    "the error model of this strategy cannot be saved: the standard errors listed here are "
    "exact, but a loaded copy answers values only"
)
