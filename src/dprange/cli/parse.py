"""Turning command-line options into library objects: domains from --lo/--hi/--bins, k-D grids,
ranges and rectangles files, and the k-D mechanisms' shared options (declared by each mechanism).
"""

from __future__ import annotations

import math
import os

import click
import numpy as np

from .. import api
from .._params import find
from ..api.common import make_mechanism
from ..domain import Domain, ProductDomain
from ..engines.local import expand_inputs
from ..errors import DPRangeError, ParameterError
from ..io import column_names, read_column, read_text_column
from ..registry import GRID_MECHANISMS, GRID_WORKLOADS, MECHANISMS
from ..strategies.trees import TreeStrategy
from ..workloads.ranges import Ranges, Workload
from ..workloads.rectangles import Rectangles
from .options import MAX_QUERIES, check_size, check_tree_size, parse_mechanism_params


def build_domain(lo, hi, bins, integers: bool) -> Domain:
    if lo is None or hi is None:
        raise ParameterError("give the public bounds with --lo and --hi")
    if integers and bins is not None:
        raise ParameterError("give either --integers or --bins, not both")
    if integers:
        domain = Domain.integers(lo, hi)
        check_size(domain.size, f"--integers over [{domain.lo}, {domain.hi}]")
        return domain
    if bins is None:
        raise ParameterError("give --bins N (equal bins over [lo, hi]) or --integers (one bin per integer)")
    if bins > 0:
        check_size(bins, f"--bins {bins}")
    domain = Domain.interval(lo, hi, bins)
    if not math.isfinite(domain.hi - domain.lo):
        raise ParameterError(
            f"--hi - --lo must be a finite number, got {domain.hi:g} - {domain.lo:g}; narrow the bounds"
        )
    return domain


def one_per_column(values: tuple, option: str, columns: int):
    """The value of ``option`` for each of ``columns`` columns (None when not given at all);
    the k-D release takes one value per --column, in order."""
    if not values:
        return None if columns == 1 else (None,) * columns
    if len(values) != columns:
        raise ParameterError(
            f"{option} was given {len(values)} times for {columns} --column; give one {option} per --column, in order"
        )
    return values[0] if columns == 1 else tuple(values)


def build_product_domain(columns, lo, hi, bins, integers: bool, categories=None) -> ProductDomain:
    """One Domain per column: the categorical ones from ``categories`` (:func:`parse_categories`),
    the numeric ones from the repeated --lo/--hi/--bins (one per numeric column, in order) or
    --integers (every numeric column)."""
    k = len(columns)
    if len(set(columns)) != k:
        raise ParameterError(f"--column names a column twice ({', '.join(columns)}); give each column once")
    categories = categories or {}
    numeric = [name for name in columns if name not in categories]
    lows: tuple = ()
    highs: tuple = ()
    sizes: tuple = ()
    if not numeric:
        check_no_bounds(lo, hi, bins, integers, "every --column has --categories")
    else:
        m = len(numeric)
        lows, highs = _per_numeric(one_per_column(lo, "--lo", m), m), _per_numeric(one_per_column(hi, "--hi", m), m)
        if integers and bins:
            raise ParameterError("give either --integers or --bins, not both")
        sizes = (None,) * m if integers else _per_numeric(one_per_column(bins, "--bins", m), m)
    numeric_domains = {}
    for name, a, b, n in zip(numeric, lows, highs, sizes):
        try:
            numeric_domains[name] = build_domain(a, b, n, integers)
        except ParameterError as exc:
            raise ParameterError(f"--column {name}: {exc}") from None
    domain = ProductDomain([categories.get(name) or numeric_domains[name] for name in columns])
    check_size(domain.size, f"the grid {'x'.join(str(n) for n in domain.shape)}")
    return domain


def _per_numeric(values, m: int) -> tuple:
    """:func:`one_per_column`'s answer as a tuple of ``m`` values (it gives a scalar for one)."""
    return (values,) if m == 1 else tuple(values)


def check_no_bounds(lo, hi, bins, integers: bool, why: str) -> None:
    """Categorical columns have no bounds or bins: --lo, --hi, --bins and --integers are refused."""
    options = (("--lo", lo), ("--hi", hi), ("--bins", bins), ("--integers", integers))
    given = [name for name, value in options if value is not None and value is not False and value != ()]
    if given:
        raise ParameterError(f"{why}, which has no bounds or bins; drop {', '.join(given)}")


def parse_categories(pairs, files, columns, other: bool) -> dict[str, Domain]:
    """The categorical domain of each column named by ``--categories COL=a,b,c`` (labels split
    at commas) or ``--categories-file COL=PATH`` (one label per line, blank lines skipped);
    ``other``: a last bin for values outside each list.  The lists are public: they are read
    from the command line and files the user names, never from INPUT."""
    labels: dict[str, list[str]] = {}
    for option, items in (("--categories", pairs), ("--categories-file", files)):
        for item in items:
            name, _, text = item.partition("=")
            name = name.strip()
            if not _ or not name or not text:
                raise ParameterError(
                    f"{option} takes COLUMN=" + ("a,b,c" if option == "--categories" else "PATH") + f", got {item!r}"
                )
            if name not in columns:
                raise ParameterError(f"{option} names {name!r}, which is not a --column ({', '.join(columns)})")
            if name in labels:
                raise ParameterError(
                    f"the categories of {name!r} are given twice; give one --categories or --categories-file per column"
                )
            labels[name] = text.split(",") if option == "--categories" else categories_file(text)
    if other and not labels:
        raise ParameterError(
            "--other adds a bin to categorical columns; name their categories with --categories COL=a,b,c"
        )
    domains = {}
    for name, listed in labels.items():
        try:
            domains[name] = Domain.categories([label.strip() for label in listed], other=other)
        except ParameterError as exc:
            raise ParameterError(f"--categories {name}: {exc}") from None
    return domains


def categories_file(path: str) -> list[str]:
    """The labels of a categories file: UTF-8 text, one label per line, blank lines skipped."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise ParameterError(f"cannot read the categories file {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ParameterError(
            f"the categories file {path!r} is not UTF-8 text; save it as UTF-8, one label per line"
        ) from None
    return [line for line in lines if line.strip()]


def grid_mechanism_params(mechanism: str, given: dict, *, explicit: bool) -> dict:
    """--branching, --budget and --root for a k-D mechanism, as its class declares them
    (``GridMechanism.CLI_OPTIONS``: which option sets which parameter), each parsed by that
    parameter's constraint (kronecker's --branching is its per-axis strategies: 4, or
    4,identity,haar)."""
    if not given:
        return {}
    options = {"branching": "--branching", "budget": "--budget", "measure_root": "--root"}
    named = ", ".join(options[name] for name in given)
    declared = {name: getattr(entry.factory, "CLI_OPTIONS", None) for name, entry in GRID_MECHANISMS.items()}
    taking: dict[str, dict[str, str]] = {name: options for name, options in declared.items() if options}
    if not explicit or mechanism == "auto":
        raise ParameterError(f"{named} with several --column: give --mechanism {' or '.join(taking)}")
    takes = taking.get(mechanism, {})
    params: dict = {}
    for name, value in given.items():
        if name not in takes:
            raise ParameterError(f"{options[name]} is not a parameter of --mechanism {mechanism}")
        param = find(GRID_MECHANISMS[mechanism].params, takes[name])
        params[takes[name]] = value if isinstance(value, bool) else param.constraint.parse(str(value), options[name])
    return params


def grid_workload(workload: str) -> str:
    """The k-D workload of --workload (all-range and prefix read as their k-D counterparts)."""
    mapped = {"all-range": "all-rectangles", "prefix": "prefix-rectangles"}.get(workload, workload)
    if mapped not in GRID_WORKLOADS:
        raise ParameterError(
            f"--workload {workload} is for one column; with several use {', '.join(GRID_WORKLOADS.names(auto=True))}"
        )
    return mapped


def ranges_file(path: str, n: int) -> Ranges:
    """The ranges of ``--ranges FILE`` for one column: columns ``lo`` and ``hi``
    (:func:`ranges_ends`)."""
    lows, highs = ranges_ends(path, [("lo", "hi")], [n])
    return Ranges(lows[:, 0], highs[:, 0], int(n))


def rectangles_file(path: str, columns, shape) -> Rectangles:
    """The rectangles of ``--ranges FILE`` for several columns: ``<column>_lo`` and
    ``<column>_hi`` for each (:func:`ranges_ends`)."""
    lows, highs = ranges_ends(path, [(f"{c}_lo", f"{c}_hi") for c in columns], shape)
    return Rectangles(tuple(shape), lows, highs)


def ranges_ends(path: str, names, shape) -> tuple[np.ndarray, np.ndarray]:
    """(lows, highs), one row per query, of a ``--ranges`` file (CSV or Parquet) whose columns
    ``names`` (a (lo, hi) pair per axis) hold bin indices (0-based, inclusive, as the release
    numbers its bins) on ``shape``.  The queries choose what the strategy is optimised for and
    cost no privacy (the data are never read for them); refused with the file and column (or
    row) named where they do not fit."""
    ends = []
    for name in (name for pair in names for name in pair):
        try:
            column = read_column(path, name)
        except DPRangeError as exc:
            raise ParameterError(f"--ranges {path}: {exc}") from None
        values = np.asarray(column)
        if values.size == 0 or values.size > MAX_QUERIES:
            raise ParameterError(f"--ranges {path}: give 1 to {MAX_QUERIES} ranges, not {values.size}")
        integers = values.dtype.kind == "i" and not np.ma.is_masked(column)  # masked: missing cells
        if not integers and not (
            values.dtype.kind == "f" and np.all(np.isfinite(values)) and np.all(values == np.round(values))
        ):
            raise ParameterError(f"--ranges {path}: column {name!r} must hold bin indices (integers, none missing)")
        ends.append(values.astype(np.int64))
    lows, highs = np.stack(ends[0::2], axis=1), np.stack(ends[1::2], axis=1)
    sides = np.asarray(shape)
    bad = np.flatnonzero(np.any((lows < 0) | (lows > highs) | (highs >= sides), axis=1))
    if bad.size:
        row = int(bad[0])
        raise ParameterError(
            f"--ranges {path}: row {row + 1} ({lows[row].tolist()} to {highs[row].tolist()}) is not a range of bins: "
            f"each needs 0 <= lo <= hi < the bins {list(shape)}"
        )
    return lows, highs


def ranges_axes(path: str, k: int) -> list[str]:
    """The axis names of a --ranges file for ``dprange error --shape`` (no --column there): the
    names of its ``<name>_lo`` columns in header order, each with its ``<name>_hi``, k of them."""
    try:
        names = column_names(path)
    except DPRangeError as exc:
        raise ParameterError(f"--ranges {path}: {exc}") from None
    axes = [name[: -len("_lo")] for name in names if name.endswith("_lo")]
    if len(axes) != k or any(f"{axis}_hi" not in names for axis in axes):
        raise ParameterError(
            f"--ranges {path}: with a {k}-axis --shape it needs <name>_lo and <name>_hi columns for {k} names, "
            f"in axis order (found _lo columns for {axes})"
        )
    return axes


def read_grid_columns(input_path: str, columns, categorical=()) -> list:
    """The k-D command's columns of INPUT: one file, or the files a glob pattern matches (in
    name order, as the 1-D command reads them), each column concatenated over the files; the
    ``categorical`` ones as text (:func:`dprange.io.read_text_column`)."""
    pattern = not os.path.exists(input_path) and any(ch in input_path for ch in "*?[")
    files = expand_inputs(input_path) if pattern else [input_path]
    return [
        concatenate_text([read_text_column(path, name) for path in files])
        if name in categorical
        else concatenate_columns([read_column(path, name) for path in files])
        for name in columns
    ]


def concatenate_text(parts: list):
    """One column of cells from the same text column of several files (object arrays of CSV
    cells, or pyarrow columns of Parquet files)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([np.asarray(p.to_pylist() if hasattr(p, "to_pylist") else p, dtype=object) for p in parts])


def concatenate_columns(parts: list):
    """One column from the same column of several files (read by :func:`dprange.io.read_column`),
    integers kept exact: int64 (masked where missing) unless some value is fractional."""
    if len(parts) == 1:
        return parts[0]
    integral = all(
        p.dtype.kind in "iu" or np.all(np.isnan(p) | ((p == np.floor(p)) & (np.abs(p) < 2.0**63))) for p in parts
    )
    if not integral:  # fractional, infinite or beyond int64 (1e20 would wrap to -2^63): floats
        return np.concatenate([np.ma.filled(np.ma.asarray(p, dtype=float), np.nan) for p in parts])
    as_ints = [  # the floats here are whole numbers below 2^63 or missing (NaN): exact as int64
        p if p.dtype.kind in "iu" else np.ma.masked_array(np.where(np.isnan(p), 0, p).astype(np.int64), np.isnan(p))
        for p in parts
    ]
    if not any(np.ma.is_masked(p) for p in as_ints):
        return np.concatenate([np.ma.getdata(p) for p in as_ints])
    return np.ma.concatenate(as_ints)


def check_privacy(mech, n: int, epsilon: float, delta: float) -> None:
    """Everything about the mechanism that can fail, checked before any data is read: the
    tree's size (the command's limit), then what the library checks before reading
    (:func:`dprange.api.check_release`: epsilon, delta, the per-level noise, inference)."""
    strategy = mech.strategy_at(n, epsilon, delta)
    if isinstance(strategy, TreeStrategy):
        check_tree_size(strategy)
    api.check_release(mech, n, epsilon, delta)


def mechanism_given() -> bool:
    """Whether the running command's --mechanism was given, not left at its default (the
    mechanism options are then checked against it)."""
    return click.get_current_context().get_parameter_source("mechanism") != click.core.ParameterSource.DEFAULT


def chosen_mechanism(mechanism: str, mechanism_params: dict, n: int, epsilon: float, delta: float, **options):
    """The 1-D mechanism a command runs: ``mechanism`` ("auto" or a name) with the mechanism
    options the user gave (None: not given), built by :func:`dprange.api.choose_mechanism` with
    ``options`` (neighbours, workload, inference, noise) and checked by :func:`check_privacy`,
    all before any data is read."""
    given = {name: value for name, value in mechanism_params.items() if value is not None}
    name, params = parse_mechanism_params(MECHANISMS, mechanism, given, explicit=mechanism_given())
    mech = api.choose_mechanism(name, n, epsilon, delta=delta, **options, **params)
    check_privacy(mech, n, epsilon, delta)
    return mech


def check_neighbours_and_missing(neighbours: str, drop_missing: bool) -> None:
    """With replace neighbours the total is published exactly; after dropping missing values
    it would be the number of complete rows, which reveals how many rows were dropped."""
    if neighbours == "replace" and drop_missing:
        raise ParameterError(
            "--drop-missing cannot be used with --neighbours replace: the public total would reveal "
            "how many rows were dropped; clean the missing values first or use --neighbours add_remove"
        )


def parse_shape(text: str) -> tuple[int, ...]:
    """--shape: sides joined by x (64x64, 50x100x7)."""
    parts = str(text).lower().split("x")
    if not all(p.strip().isascii() and p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise ParameterError(f"--shape must be sides >= 1 joined by x, e.g. 64x64 or 50x100x7, got {text!r}")
    sides = tuple(int(p) for p in parts)
    check_size(math.prod(sides), f"--shape {text}")
    return sides


def _parse_candidate(name: str, neighbours: str, noise: str, workload: Workload):
    """One --mechanisms entry: a registered name (any case; optimized is optimised for
    ``workload``), or hB for hierarchical with branching B."""
    lowered = name.lower()
    names = MECHANISMS.names(nameable=True)
    if lowered in names:
        return make_mechanism(
            lowered, neighbours=neighbours, noise=noise, **MECHANISMS[lowered].declared(workload=workload)
        )
    if lowered.startswith("h") and lowered[1:].isascii() and lowered[1:].isdigit():
        return make_mechanism("hierarchical", neighbours=neighbours, noise=noise, branching=int(lowered[1:]))
    raise ParameterError(f"unknown mechanism {name!r} in --mechanisms; use {', '.join(names)} or hB (e.g. h16)")
