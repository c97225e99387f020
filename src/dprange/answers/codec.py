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

The metadata (format version ``dprange_release``: 3; files in formats 1 and 2 still load; 3
adds the self-description of :mod:`dprange.answers.describe`, read back as the release's
``labels``) keep what the error model needs, in a
few numbers (``error_model``): for trees (Flat, Hierarchical) the number of bins, the
per-level branching, whether the root is measured, whether the total is public and the noise
variance of every level; for Haar (Wavelet) the bins, the public-total flag and the
per-level variances; for Matrix the measured integer strategy (nonzero triplets; a dense one
of 2^16 entries or more packed as int32, zlib-compressed, base64), the noise variance and the
public-total flag.  The model is rebuilt on load by the same code that
built it, so every standard error is reproduced exactly.  NNLS / L1 releases have no
closed-form model (null).  ``privacy`` keeps the noise kind and ``noise_scales`` the noise
scale of every measured level (the tail factor of discrete-Laplace intervals needs them).
``provenance`` is the release's :class:`~dprange.answers.provenance.Provenance` record (mechanism,
privacy parameters, public total, inference and its options, noise); it was added to format
2 without changing its other fields, so files written before it still load (their
provenance is read from those fields), and on load the record must agree with them.

Both are written atomically: to a temporary file in the target folder, then ``os.replace``,
so a failure never leaves a partial file.  A release is meant to be published: the file's mode
follows the umask (:func:`published_mode`, 0644 under 022), where the session ledger and the
strategy cache stay 0600 whatever the umask.

Loading
-------
:func:`load_release`, ``Release.from_json`` and ``Release.from_dict`` return a
:class:`~dprange.Release` that answers ranges, prefixes, the histogram, the total, the CDF,
CDF bands, quantiles and workloads with the original's values and standard errors.  It has
no measurements: ``bootstrap`` raises ParameterError.  A file of an unknown (newer) format
version, or one whose parts disagree (the saved standard errors of a few bins are checked
against the rebuilt model), raises DataError.  Format-1 files (saved before the error model
was kept) still load; they know the standard errors of single bins and of the total only.
A file is not trusted: no array larger than the saved domain is decoded (an .npz member's
declared size and header are checked first, :func:`_load_npz`; a JSON histogram is counted in
the text before it is parsed, :func:`release_from_json_text`; docs/privacy.md, "Loaded release
files").
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from dataclasses import replace
from typing import Any

import numpy as np

from .._validation import NEIGHBOURS
from ..domain import Domain
from ..errors import DataError, DPRangeError, ParameterError, excerpt
from ..inference.dense import DenseErrorModel
from ..inference.p_identity import PIdentityEstimate
from ..inference.tree import TreeErrorModel
from ..inference.wavelet import HaarEstimate
from ..optimize.cache import adopt_cached_inverse
from . import bounded_json
from .describe import Labels
from .provenance import Provenance
from .types import NO_MEASUREMENTS
from .writers import FORMAT_VERSION, UNSAVED_ERROR_BARS


# ----------------------------------------------------------------------------- loading
class NonlinearErrors:
    """The error model of a loaded NNLS / L1 release: no closed form (NaN), as the original."""

    def range_variance(self, lo, hi):
        return np.full(np.broadcast(np.asarray(lo), np.asarray(hi)).shape, np.nan)

    def query_variance(self, weights):
        return np.full(np.atleast_2d(weights).shape[0], np.nan)


class UnsavedErrors:
    """The error model of a loaded least-squares release whose model was not saved: every
    standard error raises ParameterError with the reason."""

    def __init__(self, reason: str):
        self.reason = reason

    def range_variance(self, lo, hi):
        raise ParameterError(self.reason)

    def query_variance(self, weights):
        raise ParameterError(self.reason)


class SavedBinErrors:
    """The error model of a format-1 file (saved without its error model): the saved standard
    errors of single bins and of the total; a range of several bins raises ParameterError."""

    def __init__(self, stderr: np.ndarray | None, total_variance: float | None):
        self._stderr = stderr
        self._total_variance = total_variance

    def range_variance(self, lo, hi):
        lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
        if self._stderr is None:
            raise ParameterError(f"this saved release has no standard errors; {NO_MODEL}")
        n = self._stderr.size
        variance = np.full(lo.shape, np.nan)
        single = lo == hi
        variance[single] = self._stderr[lo[single]] ** 2
        whole = (lo == 0) & (hi == n - 1) & ~single
        if self._total_variance is not None:
            variance[whole] = self._total_variance
        if np.any(np.isnan(variance)):
            raise ParameterError(
                "a release saved in format 1 knows the standard errors of single bins and of the "
                f"total only; {NO_MODEL}"
            )
        return variance

    def query_variance(self, weights):
        raise ParameterError(f"a release saved in format 1 has no error model for workloads; {NO_MODEL}")


NO_MODEL = "save the release again with this dprange version (format 2 keeps the error model)"


#: What bootstrapping a loaded release says.
LOADED_BOOTSTRAP = NO_MEASUREMENTS


def _model_bins(data) -> object:
    """The number of bins a saved error model claims (read before building it)."""
    if data.get("kind") == "dense_matrix":
        shape = data.get("shape")
        return shape[1] if isinstance(shape, list) and len(shape) == 2 else None
    return data.get("n")


def error_model_from_dict(data, n: int | None = None):
    """The error model described by ``data`` (its ``kind`` picks the class), or DataError;
    with ``n``, the model must be over n bins (checked before anything is built)."""

    kinds: dict[str, Any] = {
        "tree": TreeErrorModel,
        "haar": HaarEstimate,
        "dense_matrix": DenseErrorModel,
        "p_identity": PIdentityEstimate,
    }
    if not isinstance(data, dict) or data.get("kind") not in kinds:
        raise DataError(f"the saved error model is not one of {', '.join(kinds)}; the file is corrupt")
    claimed = _model_bins(data)
    if n is not None and (isinstance(claimed, bool) or claimed != n):
        raise DataError(
            f"the saved error model is over {excerpt(claimed, 20)} bins but the histogram has {n}; the file is corrupt"
        )
    try:
        if data["kind"] == "dense_matrix":  # a large optimised strategy's inverse may be cached
            return DenseErrorModel.from_dict(data, adopt_inverse=adopt_cached_inverse)
        return kinds[data["kind"]].from_dict(data)
    except KeyError as exc:
        raise DataError(
            f"the saved error model lacks the field {excerpt(exc.args[0], 40)!r}; the file is corrupt"
        ) from None
    except (DPRangeError, TypeError, ValueError, OverflowError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"the saved error model is corrupt ({excerpt(message, 100)})") from None


def _float_array(values, name: str, *, allow_missing: bool = False) -> np.ndarray:
    try:
        arr = np.asarray([np.nan if v is None else v for v in values] if allow_missing else values, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"the saved {name} is not an array of numbers") from None
    if arr.ndim != 1:
        raise DataError(f"the saved {name} is not a 1-D array")
    return arr


def _check_version(meta) -> int:
    if not isinstance(meta, dict) or "dprange_release" not in meta:
        raise DataError("this is not a dprange release (no 'dprange_release' format field)")
    version = meta["dprange_release"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise DataError(
            f"the release format version {excerpt(version, 20)!r} is not a positive integer; the file is corrupt"
        )
    if version > FORMAT_VERSION:
        raise DataError(
            f"this release was saved in format {version}, newer than this dprange reads "
            f"(1 to {FORMAT_VERSION}); upgrade dprange to load it"
        )
    return version


def _privacy(meta) -> dict:

    privacy = meta.get("privacy")
    if not isinstance(privacy, dict):
        raise DataError("the saved release lacks its privacy parameters; the file is corrupt")
    epsilon, delta = privacy.get("epsilon"), privacy.get("delta", 0.0)
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise DataError(
                f"the saved {name} {excerpt(value, 30)!r} is not a non-negative number; the file is corrupt"
            )
    if privacy.get("neighbours") not in NEIGHBOURS:
        raise DataError(
            f"the saved neighbours {excerpt(privacy.get('neighbours'), 30)!r} is not one of "
            f"{', '.join(NEIGHBOURS)}; the file is corrupt"
        )
    scales = meta.get("noise_scales")
    if scales is not None:
        scales = _float_array(scales, "noise scales").tolist()
    noise = privacy.get("noise")
    if noise is not None and not isinstance(noise, str):
        raise DataError("the saved noise kind is not a name; the file is corrupt")
    return {
        "epsilon": epsilon,
        "delta": delta,
        "neighbours": privacy["neighbours"],
        "noise": noise,
        "seeded": bool(privacy.get("seeded", False)),
        "noise_scales": scales,
    }


def _public_total(meta):
    total = meta.get("total")
    if not isinstance(total, dict):
        raise DataError("the saved release lacks its total; the file is corrupt")
    if not total.get("public"):
        return None
    value = total.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError("the saved public total is not a number; the file is corrupt")
    return float(value)


def _error_model(meta, version: int, estimate: np.ndarray, stderr, public_total):
    inference = meta.get("inference")
    if not isinstance(inference, str):
        raise DataError("the saved inference is not a name; the file is corrupt")
    if inference != "gls":
        return NonlinearErrors()
    if version == 1:
        total = meta["total"]
        total_variance = (
            0.0 if public_total is not None else (None if total.get("stderr") is None else float(total["stderr"]) ** 2)
        )
        return SavedBinErrors(stderr, total_variance)
    if meta.get("error_model") is None:
        return UnsavedErrors(str(meta.get("error_bars") or UNSAVED_ERROR_BARS))
    model = error_model_from_dict(meta["error_model"], estimate.size)
    _check_saved_stderr(model, stderr, estimate.size)
    return model


def _check_saved_stderr(model, stderr, n: int) -> None:
    """The model's standard errors of a few bins must match the saved ones (else corrupt)."""
    if stderr is None or stderr.size != n or n == 0:
        return
    idx = np.unique(np.linspace(0, n - 1, min(n, 16)).astype(np.int64))
    expected = np.sqrt(np.maximum(np.asarray(model.range_variance(idx, idx), dtype=float), 0.0))
    if not np.allclose(stderr[idx], expected, rtol=1e-9, atol=0.0, equal_nan=True):
        raise DataError("the saved standard errors disagree with the saved error model; the file is corrupt")


def _saved_domain(meta) -> Domain:
    try:
        return Domain.from_dict(meta.get("domain"))
    except (DPRangeError, TypeError, ValueError, OverflowError) as exc:
        raise DataError(f"the saved domain is invalid: {excerpt(exc, 100)}") from None


def release_from_parts(meta, estimate, stderr, cls):
    """A :class:`~dprange.Release` from saved metadata and arrays (JSON or NPZ), or DataError."""

    version = _check_version(meta)
    estimate = _float_array(estimate, "histogram")
    if not np.all(np.isfinite(estimate)):
        raise DataError("the saved histogram holds non-finite values")
    if stderr is not None:
        stderr = _float_array(stderr, "standard errors", allow_missing=True)
        if stderr.shape != estimate.shape:
            raise DataError("the saved standard errors do not match the histogram")
    domain = _saved_domain(meta)
    if domain.size != estimate.size:
        raise DataError(f"the saved domain has {domain.size} bins but the histogram has {estimate.size}")
    privacy = _privacy(meta)
    public_total = _public_total(meta)
    model = _error_model(meta, version, estimate, stderr, public_total)
    provenance = _provenance(meta, version, privacy, public_total)
    labels = Labels.from_dict(meta.get("input")) if version >= 3 else Labels()  # format 3 describes its input
    return cls(estimate, model, provenance, domain=domain, input_labels=labels)


def _provenance(meta, version: int, privacy: dict, public_total) -> Provenance:
    """The provenance of the saved release: from the legacy fields of formats 1 and 2, and
    from the ``provenance`` record when a format-2 file has one (which must agree with them;
    files written before it existed have none; format 1 never had one)."""
    parameters = meta.get("parameters")
    mechanism = meta.get("mechanism")
    if not isinstance(mechanism, str) or not isinstance(parameters, (dict, type(None))):
        raise DataError("the saved mechanism or its parameters are malformed; the file is corrupt")
    options = (parameters or {}).get("inference_options")
    legacy = Provenance(
        mechanism=mechanism,
        parameters=parameters or {},
        epsilon=privacy["epsilon"],
        delta=privacy["delta"],
        neighbours=privacy["neighbours"],
        total=public_total,
        inference=meta["inference"],
        inference_options=options if isinstance(options, dict) else {},
        noise=privacy["noise"],
        seeded=privacy["seeded"],
        noise_scales=privacy["noise_scales"],
    )
    if version < 2 or meta.get("provenance") is None:
        return legacy
    saved = Provenance.from_dict(meta["provenance"])
    # the legacy fields hold the inference options only inside the mechanism's parameters; the
    # convergence of ADMM and the data_dependent flag only in the record
    expected = replace(
        legacy,
        inference_options=saved.inference_options,
        converged=saved.converged,
        data_dependent=saved.data_dependent,
        privacy_unit=saved.privacy_unit,
    )
    if saved != expected:
        raise DataError("the saved provenance disagrees with the saved privacy parameters; the file is corrupt")
    return saved


def release_from_dict(data, cls):
    """The release described by ``Release.to_dict`` (or parsed JSON), or DataError."""
    if not isinstance(data, dict) or not isinstance(data.get("histogram"), dict):
        raise DataError("this is not a dprange release (no histogram)")
    meta = {k: v for k, v in data.items() if k != "histogram"}
    histogram = data["histogram"]
    if histogram.get("value") is None:
        raise DataError("the saved histogram has no values")
    return release_from_parts(meta, histogram["value"], histogram.get("stderr"), cls)


def release_from_json_text(text: str, cls, source: str = "the text"):
    """The release in JSON ``text``, its histogram arrays counted against the saved domain
    before they are parsed (:mod:`dprange.answers.bounded_json`): no array larger than the domain is
    materialised.  The rest (the metadata) is parsed as it stands."""
    try:
        data = bounded_json.loads(text, [("histogram", "value"), ("histogram", "stderr")])
        histogram = data.get("histogram") if isinstance(data, dict) else None
        if isinstance(histogram, dict) and any(isinstance(v, bounded_json.Deferred) for v in histogram.values()):
            _check_version(data)
            bins = _saved_domain(data).size
            for key in ("value", "stderr"):
                message = f"the saved domain has {bins} bins but the histogram's {key} has {{size}} numbers"
                histogram[key] = bounded_json.sized(histogram.get(key), bins, message)
    except json.JSONDecodeError as exc:
        raise DataError(f"{source} is not valid JSON ({excerpt(exc.msg, 60)} at line {exc.lineno})") from None
    return release_from_dict(data, cls)


def release_from_json(text_or_path, cls):
    """``Release.from_json``: from JSON text (a string starting with '{', or UTF-8 bytes) or
    from a file path."""
    if isinstance(text_or_path, (bytes, bytearray)):
        try:
            text_or_path = bytes(text_or_path).decode("utf-8")
        except UnicodeDecodeError:
            raise DataError("the release bytes are not UTF-8 JSON text") from None
    if isinstance(text_or_path, str) and text_or_path.lstrip().startswith("{"):
        return release_from_json_text(text_or_path, cls)
    return load_path(text_or_path, cls)


def _load_json(path: str, cls):
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise DataError(f"{path!r} is not UTF-8 JSON text") from None
    return release_from_json_text(text, cls, repr(path))


#: A compressed member of a release .npz may inflate to at most this many bytes: dprange writes
#: releases uncompressed (a stored member decodes to no more than it takes in the file), and a
#: compressed one can inflate about 1000-fold (docs/privacy.md, "Loaded release files").
INFLATED_MEMBER_MAX_BYTES = 64 << 20


#: The members of a release .npz (others are never read) and what each must hold.
NPZ_META, NPZ_ARRAYS = "__meta__.npy", ("estimate.npy", "stderr.npy")


def _load_npz(path: str, cls):
    """A release from its .npz, every member checked before it is decoded: its size declared in
    the zip against the file (stored) or INFLATED_MEMBER_MAX_BYTES (compressed), and its .npy
    header (dtype, shape, bytes) against that size and against the release's own metadata (the
    histogram and standard errors as many numbers as the saved domain has bins); so no member
    decodes to more than the file or the domain allows."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            if NPZ_META not in members or NPZ_ARRAYS[0] not in members:
                raise DataError(f"{path!r} is an .npz archive but not a dprange release (no __meta__ or estimate)")
            blob = _npz_member(archive, members[NPZ_META], path, None)
            try:
                meta = json.loads(blob.tobytes().decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise DataError(f"{path!r} has unreadable release metadata") from None
            _check_version(meta)
            bins = _saved_domain(meta).size
            estimate, stderr = (
                _npz_member(archive, members[name], path, bins) if name in members else None for name in NPZ_ARRAYS
            )
    except DPRangeError:
        raise
    except (ValueError, OSError, EOFError, KeyError, RuntimeError, NotImplementedError, zipfile.BadZipFile) as exc:
        raise DataError(f"cannot read {path!r}: {excerpt(str(exc) or type(exc).__name__, 100)}") from None
    return release_from_parts(meta, estimate, stderr, cls)


def _npz_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, bins: int | None) -> np.ndarray:
    """The .npy member ``info`` of ``archive``, decoded only after its declared size and header
    pass (:func:`_load_npz`): ``bins`` numbers (the histogram, the standard errors), or bytes
    (None: the metadata).  DataError otherwise, the member never decoded."""
    name = info.filename.removesuffix(".npy")
    stored = info.compress_type == zipfile.ZIP_STORED
    limit = os.path.getsize(path) if stored else INFLATED_MEMBER_MAX_BYTES
    if info.file_size > limit or (stored and info.compress_size != info.file_size):
        raise DataError(
            f"{path!r}: member {name} would decode to {info.file_size} bytes, more than the "
            f"{limit} {'the file holds' if stored else 'a compressed member may take'}; the file is corrupt"
        )
    with archive.open(info) as member:
        shape, dtype, header = _npy_header(member, path, name)
    wanted = "bytes" if bins is None else f"the saved domain's {bins} numbers"
    fits = dtype == np.uint8 if bins is None else dtype.kind in "fiu" and shape == (bins,)
    if not fits or len(shape) != 1 or header + shape[0] * dtype.itemsize != info.file_size:
        raise DataError(
            f"{path!r}: member {name} declares {excerpt(dtype.str, 12)} {excerpt(shape, 40)} in "
            f"{info.file_size} bytes, not {wanted}; the file is corrupt"
        )
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _npy_header(member, path: str, name: str) -> tuple[tuple, np.dtype, int]:
    """(shape, dtype, header bytes) of an .npy stream, read without its data."""
    try:
        version = np.lib.format.read_magic(member)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"unexpected .npy version {version}")
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(member)
    except (ValueError, EOFError, TypeError, SyntaxError) as exc:
        raise DataError(f"{path!r}: member {name} is not a NumPy array ({excerpt(exc, 60)})") from None
    return shape, dtype, member.tell()


def load_path(path, cls):
    """A :class:`~dprange.Release` saved by ``Release.to_json`` or ``Release.to_npz`` (the
    format is chosen by content).  It answers every query of the original with the same
    standard errors (module doc); bootstrap raises ParameterError.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"the release path must be a string or path, got {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"release file {path!r} does not exist or is not a file")
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK\x03\x04"):
        return _load_npz(path, cls)
    return _load_json(path, cls)
