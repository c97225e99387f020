"""The on-disk strategy cache: optimised strategies keyed by workload and template, written 0600,
memory-mapped when large, with the (A^T A)^-1 of dense ones adopted only after a check.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
from scipy import linalg

from ..errors import ParameterError
from ..operators.dense import Explicit
from ..strategies.matrix import MatrixStrategy
from ..workloads.ranges import AllRange, Identity, Prefix, Workload
from .p_identity import (
    CACHE_FILE_MODE,
    CACHE_FOLDER_MODE,
    DENSE_TEMPLATES,
    P_IDENTITY_NORMS,
    Gram,
    OptimizedStrategy,
    VarianceTerms,
    _warn_rejected_inverse,
    strategy_variance_terms,
)

#: Version of the optimisers: part of the cache key, so that a change recomputes.
CACHE_VERSION = 5


def cache_dir() -> Path:
    """Where optimised strategies are kept: $DPRANGE_CACHE_DIR, else $XDG_CACHE_HOME/dprange,
    else ~/.cache/dprange."""
    explicit = os.environ.get("DPRANGE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dprange"


#: The names of the cache's files (:func:`cache_path`, any version) and of the temporary
#: files an interrupted write leaves (:func:`_store`): what :func:`clear_cache` removes.
CACHE_FILE_NAME = re.compile(r"v\d+-[A-Za-z0-9.-]+\.npz")


def cache_files() -> list[Path]:
    """The strategy files in :func:`cache_dir`, largest first ([] where it does not exist);
    other files there are not listed."""
    directory = cache_dir()
    if not directory.is_dir():
        return []
    files = [path for path in directory.iterdir() if CACHE_FILE_NAME.fullmatch(path.name) and path.is_file()]
    return sorted(files, key=lambda path: (-path.stat().st_size, path.name))


def clear_cache() -> tuple[int, int]:
    """Remove the strategy files (:func:`cache_files`): (files removed, bytes freed).  They are
    optimised again when next needed; other files in the directory are left."""
    removed = freed = 0
    for path in cache_files():
        size = path.stat().st_size
        try:
            path.unlink()
        except FileNotFoundError:  # removed meanwhile
            continue
        removed, freed = removed + 1, freed + size
    return removed, freed


def workload_key(workload: Workload) -> str:
    """A name for the workload's Gram matrix: the standard workloads by name, others by hash."""
    if type(workload) in (AllRange, Prefix, Identity):
        return workload.name
    digest = hashlib.sha256(np.ascontiguousarray(workload.gram(), dtype=float).tobytes()).hexdigest()
    return f"gram-{digest[:24]}"


def cache_path(workload: Workload, template: str, p: int, restarts: int) -> Path:
    """The cache file of a strategy: workload, n, template and the optimiser's settings."""
    settings = f"p{p}-r{restarts}" if template in (*P_IDENTITY_NORMS, *DENSE_TEMPLATES) else "dual"
    return cache_dir() / f"v{CACHE_VERSION}-{workload_key(workload)}-n{workload.n}-{template}-{settings}.npz"


def _load(path: Path, matrix: str, n: int, *, nonnegative: bool = False) -> dict | None:
    """The cached arrays, if the file holds ``matrix`` (theta or strategy) over n bins with the
    optimisation time and trace; None when it is absent, unreadable (empty, a corrupt or
    truncated zip) or holds what no optimisation writes: the strategy is then recomputed and
    the file replaced.  ``nonnegative``: the matrix has no negative entry (L1 p-Identity)."""
    try:
        arrays = _read_arrays(path)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    return arrays if _fits(arrays, matrix, n, nonnegative) else None


#: Cached arrays of at least this many bytes are memory-mapped from the file, read-only: the
#: dense strategies and their inverses (134 MB each at 4096 bins).
MAPPED_MIN_BYTES = 8 * 2**20


def _read_arrays(path: Path) -> dict:
    """The arrays of an uncompressed .npz (:func:`_write_arrays`, or np.savez): members of at
    least MAPPED_MIN_BYTES memory-mapped read-only (no copy, the pages read as used; timings:
    docs/optimized.md, "The dense release from the cache"), the others read as np.load reads
    them (their CRC checked).  A mapped member's
    CRC is not checked; :func:`_fits` and the inverse's own check
    (:meth:`~dprange.operators.Explicit.adopt_gram_inverse`) stand in for it."""
    arrays = {}
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        for info in archive.infolist():
            key = info.filename.removesuffix(".npy")
            if info.compress_type == zipfile.ZIP_STORED and info.file_size >= MAPPED_MIN_BYTES:
                arrays[key] = _mapped_member(path, raw, info)
            else:
                with archive.open(info) as member:  # as np.load reads it
                    arrays[key] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def _mapped_member(path: Path, raw, info: zipfile.ZipInfo) -> np.ndarray:
    """The .npy member ``info`` of the uncompressed zip ``path`` (open as ``raw``) as a
    read-only memory map: its data start after the local file header (30 bytes, then the name
    and the extra field, whose lengths are at bytes 26-29) and the .npy header."""
    raw.seek(info.header_offset)
    local = raw.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise ValueError("not a zip member")
    raw.seek(info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little"))
    version = np.lib.format.read_magic(raw)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"unexpected .npy version {version}")
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(raw)
    if dtype.hasobject:
        raise ValueError("object arrays are not cached")
    mapped = np.memmap(path, dtype=dtype, mode="r", offset=raw.tell(), shape=shape, order="F" if fortran else "C")
    if raw.tell() % dtype.alignment:  # a file written without MEMBER_ALIGNMENT: read into memory
        return np.array(mapped)
    return np.asarray(mapped)


def _fits(arrays: dict, matrix: str, n: int, nonnegative: bool) -> bool:
    """Whether cached arrays are what an optimisation writes: the matrix finite and real with n
    columns (non-negative if asked), the time and the trace one finite number each.  The
    sensitivity is computed from the measured strategy whatever the file holds; this keeps a
    damaged file from failing a release or being used in a lossy conversion."""
    if not {matrix, "seconds", "trace"} <= arrays.keys():
        return False
    values = [arrays[matrix], arrays["seconds"], arrays["trace"]]
    if not all(np.issubdtype(v.dtype, np.integer) or np.issubdtype(v.dtype, np.floating) for v in values):
        return False
    if not all(np.all(np.isfinite(v)) for v in values) or arrays["seconds"].size != 1 or arrays["trace"].size != 1:
        return False
    theta = arrays[matrix]
    return theta.ndim == 2 and theta.shape[1] == n and not (nonnegative and np.any(theta < 0))


#: The .npy members of a cache file start at multiples of this many bytes (their data too: the
#: .npy header pads itself to a multiple of 64), so that memory-mapped arrays are aligned (BLAS
#: skips unaligned ones and falls back to a much slower path; docs/optimized.md, "The dense
#: release from the cache").
MEMBER_ALIGNMENT = 64


#: The id of the zip extra field that pads a member's local header to MEMBER_ALIGNMENT (the
#: one Android's zipalign writes; readers skip fields they do not know).
ALIGNMENT_FIELD = 0xD935


def _write_arrays(path: Path | BinaryIO, arrays: dict) -> None:
    """Write ``arrays`` (to ``path``, or a binary file open for writing) as an uncompressed .npz
    that np.load reads, every member's data aligned (MEMBER_ALIGNMENT) by an extra field in its
    local header: 30 bytes, the name, the field, the zip64 field (20 bytes), then the .npy file."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            start = archive.start_dir + 30 + len(info.filename.encode()) + 4 + 20
            pad = -start % MEMBER_ALIGNMENT
            info.extra = struct.pack("<HH", ALIGNMENT_FIELD, pad) + bytes(pad)
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def _store(path: Path, arrays: dict) -> bool:
    """Write atomically, with mode CACHE_FILE_MODE; whether it was written (a cache that cannot
    be written is skipped: it only saves time, and the release says so)."""
    try:
        path.parent.mkdir(mode=CACHE_FOLDER_MODE, parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp.npz")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(partial, flags, CACHE_FILE_MODE)
        with open(descriptor, "wb") as fh:
            os.fchmod(descriptor, CACHE_FILE_MODE)  # a file left by an interrupted write keeps its mode otherwise
            _write_arrays(fh, arrays)
        os.replace(partial, path)
    except OSError:
        return False
    return True


def _store_released_form(path: Path, arrays: dict, strategy: OptimizedStrategy, gram: Gram) -> bool:
    """Store ``arrays`` with what releasing the measured dense strategy needs beyond it:
    (A^T A)^-1 (O(n^3) once; :meth:`~dprange.operators.Explicit.gram_inverse`)
    and its :class:`VarianceTerms` on the workload (O(n^2) from it), which are also set on
    ``strategy``; read back (after :meth:`~dprange.operators.Explicit.adopt_gram_inverse`'s
    check), a release costs O(n^2): the rank check, the error as released, least squares and
    its covariance.  The file is twice the strategy (268 MB at 4096 bins).  Without an inverse
    that would be adopted (an uncertified or ill-conditioned strategy,
    :meth:`~dprange.operators.Explicit.gram_inverse_checks_out`) the terms alone (NaN where
    A^T A is singular), which mark the file complete: it is not written again on every read."""
    kept = {k: v for k, v in arrays.items() if k not in ("gram_inverse", "variance_terms")}
    try:
        strategy.variance_terms = strategy_variance_terms(strategy, gram)  # O(n^2) with the inverse
        terms = np.array(strategy.variance_terms)
    except linalg.LinAlgError:
        terms = np.full(3, np.nan)
    if strategy.block.gram_inverse_checks_out():
        kept["gram_inverse"] = strategy.block.gram_inverse()
    return _store(path, {**kept, "variance_terms": terms})


def _saved_terms(saved: dict) -> VarianceTerms | None:
    """The :class:`VarianceTerms` a cache file holds, None where it holds no three finite numbers."""
    terms = np.asarray(saved.get("variance_terms", np.zeros(0)), dtype=float)
    return VarianceTerms(*(float(v) for v in terms)) if terms.shape == (3,) and np.all(np.isfinite(terms)) else None


#: A dense release read back (:func:`adopt_cached_inverse`) looks for its strategy's inverse in
#: the cache from this many bins; below, computing it (O(n^3)) costs about what finding it
#: does (docs/optimized.md, "Figures by module").
CACHED_INVERSE_MIN_BINS = 1024


def adopt_cached_inverse(block) -> bool:
    """Give ``block`` (the integer strategy of a saved dense release, read back: an
    :class:`~dprange.operators.Explicit`) the (A^T A)^-1 the strategy cache keeps beside the
    same strategy, where it is there: loading the release then costs O(n^2), where computing
    the inverse is O(n^3), most of a load's time (docs/optimized.md, "The dense release from
    the cache").  The candidates are the cache's dense strategies over as many bins
    (:func:`cache_path`'s names, p-Identity files left out); one is used only if, quantised as a
    release quantises it, it equals ``block`` entry for entry, and its inverse passes
    :meth:`~dprange.operators.Explicit.adopt_gram_inverse`'s check (random probes from the
    secure source; one that fails is passed over with a warning).  Nothing is written.
    Whether an inverse was adopted."""
    if not isinstance(block, Explicit):
        raise ParameterError(f"adopt_cached_inverse takes an explicit strategy block, not {type(block).__name__}")
    rows, n = block.shape
    if n < CACHED_INVERSE_MIN_BINS or not isinstance(block.matrix, np.ndarray):
        return False
    marker = f"-n{n}-"
    for path in cache_files():
        name = path.name
        if not name.startswith(f"v{CACHE_VERSION}-") or marker not in name:
            continue
        if name.split(marker, 1)[1].startswith(tuple(P_IDENTITY_NORMS)):
            continue
        saved = _load(path, "strategy", n)
        if saved is None or "gram_inverse" not in saved or saved["strategy"].shape != (rows, n):
            continue
        try:
            measured = MatrixStrategy(saved["strategy"]).block.matrix  # O(rows n): the release's quantisation
        except (ParameterError, ValueError, FloatingPointError):  # a file no optimisation wrote: not this one
            continue
        if not np.array_equal(measured, block.matrix):
            continue
        if block.adopt_gram_inverse(saved["gram_inverse"]):
            return True
        _warn_rejected_inverse(path, "it is computed here instead")
    return False
