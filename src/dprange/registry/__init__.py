"""The registry: every mechanism, inference method, noise kind and workload, registered once.

An :class:`Entry` is a small record: its name, the class or factory that builds it, a
one-line summary, the paper it implements (:class:`Citation`: authors, title, venue), its
declared parameters (:class:`dprange._params.Param`, read from the class's ``PARAMS``) and
whether ``mechanism="auto"`` considers it.  Each kind has one :class:`Registry`:
:data:`MECHANISMS`, :data:`INFERENCE`, :data:`NOISE`, :data:`WORKLOADS`.

Local differential privacy has two more: :data:`LDP_PROTOCOLS` and :data:`FREQUENCY_ORACLES`
(registered by :mod:`dprange.ldp`, which this module never imports).

Everything that lists these names is generated from here: the command line's
``--mechanism``, ``--inference``, ``--noise`` and ``--workload`` choices and their help
(and ``dprange ldp``'s ``--protocol``, ``--oracle`` and ``--inference``),
:func:`dprange.api.common.make_mechanism` and ``dprange.release``'s name lookup,
:func:`dprange.analysis.select`'s default candidates, and ``docs/mechanisms.md``
(``python -m dprange.registry --docs > docs/mechanisms.md``).

Mechanisms register themselves next to their class (``MECHANISMS.add(Flat, ...)`` in
:mod:`dprange.mechanisms.basic`, :mod:`dprange.mechanisms.matrix`), workloads in :mod:`dprange.workloads`;
the inference methods and noise kinds, which are names that :mod:`dprange.inference` and
:mod:`dprange.privacy.noise` interpret, are registered below.  This module imports no other part of
dprange except the parameter declarations, so that every module can register into it.  The
registering modules are imported at the first read of any registry (by name, from the list the
package's lazy ``__init__`` gives :func:`dprange._lazy.import_before_registry_reads`), so that a
registry read is complete whatever was imported before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._lazy import import_registering_modules
from .._params import Param, describe_default
from ..errors import ParameterError


@dataclass(frozen=True)
class Citation:
    """A paper by its authors, title and venue (with year)."""

    authors: str
    title: str
    venue: str

    def __str__(self) -> str:
        return f'{self.authors}, "{self.title}", {self.venue}'


@dataclass(frozen=True)
class Entry:
    """One registered mechanism, inference method, noise kind or workload."""

    kind: str
    name: str
    summary: str
    citation: Citation | None = None
    #: The class or function that builds it (None for names interpreted elsewhere).
    factory: Callable[..., Any] | None = None
    params: tuple[Param, ...] = ()
    #: Mechanisms: whether ``auto`` ranks it; workloads: whether ``auto`` can optimise for it.
    auto: bool = False
    #: Mechanisms: the configurations ``auto`` ranks, ``candidates(n, neighbours=, noise=, fast=)``
    #: (default: one instance with default parameters).
    candidates: Callable[..., list] | None = None
    #: k-D mechanisms optimised for a workload: the configurations ``auto`` ranks for it,
    #: ``workload_candidates(shape, workload=, delta=, order=, neighbours=, noise=)``
    #: (dprange.analysis.grid.grid_candidates calls it when given the workload).
    workload_candidates: Callable[..., list] | None = None

    @property
    def nameable(self) -> bool:
        """Whether the name alone builds it (every parameter has a default)."""
        return self.factory is not None and not any(p.required for p in self.params)

    def declared(self, **values) -> dict:
        """Those of ``values`` whose names this entry declares as parameters (a release's
        workload and order go to the mechanisms optimised for them, and to no other)."""
        names = {p.name for p in self.params}
        return {name: value for name, value in values.items() if name in names}

    def build(self, *args, **params):
        """An instance with ``params`` (checked by the class's declarations)."""
        if self.factory is None:
            raise ParameterError(f"{self.kind} {self.name!r} is a name only; nothing to build")
        return self.factory(*args, **params)

    def auto_candidates(self, n: int, *, neighbours: str, noise: str, fast: bool) -> list:
        """The instances of this mechanism that ``auto`` ranks on n bins."""
        if self.candidates is not None:
            return list(self.candidates(n, neighbours=neighbours, noise=noise, fast=fast))
        return [self.build(neighbours=neighbours, noise=noise)]


class Registry(Mapping[str, Entry]):
    """The registered entries of one kind, in registration order (a read-only mapping)."""

    def __init__(self, kind: str, title: str, order: tuple[str, ...] = ()):
        self.kind = kind
        #: The heading of this kind in the docs.
        self.title = title
        #: The order every listing shows (CLI choices, docs, ``auto``'s ranking, where ties go to
        #: the first): declared here, not the order modules happen to be imported in.  A name not
        #: listed (registered by a user or a test) follows, in registration order.
        self.order = order
        self._entries: dict[str, Entry] = {}

    def __getitem__(self, name: str) -> Entry:
        import_registering_modules()
        return self._entries[name]

    def _ordered(self) -> list[Entry]:
        import_registering_modules()
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(self._entries.values(), key=lambda e: rank.get(e.name, len(rank)))

    def __iter__(self) -> Iterator[str]:
        return iter([e.name for e in self._ordered()])

    def __len__(self) -> int:
        import_registering_modules()
        return len(self._entries)

    def register(self, entry: Entry) -> Entry:
        """Add ``entry``; a name registered twice is an error (unregister it first)."""
        if entry.kind != self.kind:
            raise ParameterError(f"a {entry.kind} cannot be registered as a {self.kind}")
        if entry.name in self._entries:
            raise ParameterError(f"{self.kind} {entry.name!r} is already registered; unregister it first")
        self._entries[entry.name] = entry
        return entry

    def add(self, factory, *, summary: str, citation: Citation | None = None, **fields) -> Entry:
        """Register a class under its ``name`` attribute, with its declared ``PARAMS``."""
        return self.register(
            Entry(
                self.kind,
                factory.name,
                summary,
                citation,
                factory=factory,
                params=tuple(getattr(factory, "PARAMS", ())),
                **fields,
            )
        )

    def unregister(self, name: str) -> Entry:
        """Remove and return the entry called ``name``."""
        import_registering_modules()
        return self._entries.pop(name)

    def names(self, *, auto: bool | None = None, nameable: bool | None = None) -> tuple[str, ...]:
        """Registered names, optionally only those ``auto`` considers / that a name builds."""
        return tuple(
            e.name
            for e in self._ordered()
            if (auto is None or e.auto == auto) and (nameable is None or e.nameable == nameable)
        )

    def subset(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """``names``, declared as a subset of this registry's (ParameterError if one is not registered)."""
        missing = [name for name in names if name not in self._entries]
        if missing:
            raise ParameterError(f"{self.kind} {missing[0]!r} is not registered; register it or leave it out")
        return tuple(names)

    def lookup(self, name, *, also: tuple[str, ...] = ()) -> Entry:
        """The entry called ``name``, or a ParameterError listing the choices (and ``also``)."""
        import_registering_modules()
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        choices = ", ".join(self.names())
        prefix = " or ".join(f"'{a}'" for a in also)
        raise ParameterError(
            f"unknown {self.kind} {name!r}; choose " + (f"{prefix} or one of {choices}" if also else choices)
        )


MECHANISMS = Registry(
    "mechanism",
    "Mechanisms",
    order=("flat", "wavelet", "hierarchical", "matrix", "optimized", "dawa", "mwem", "structure-first", "auto-data"),
)


INFERENCE = Registry("inference method", "Inference methods", order=("gls", "nnls", "l1"))


NOISE = Registry("noise kind", "Noise kinds", order=("discrete_laplace", "laplace_float", "gaussian"))


WORKLOADS = Registry("workload", "Workloads", order=("all-range", "prefix", "identity", "random-ranges"))


#: Quantile methods on raw values (``dprange.quantiles``), registered in dprange.quantile_mechanisms.
QUANTILE_METHODS = Registry("quantile method", "Quantile methods", order=("joint_exp", "approximate", "histogram"))


#: Local-DP range-query protocols (``dprange ldp --protocol``), registered in dprange.ldp.protocols
#: under their option names; each entry builds from ``(domain_size, epsilon, **options)``.
LDP_PROTOCOLS = Registry("protocol", "Local-DP protocols", order=("hierarchical", "haar", "flat"))


#: Local-DP frequency oracles (``dprange ldp --oracle``), registered in dprange.ldp.oracles.
FREQUENCY_ORACLES = Registry("oracle", "Local-DP frequency oracles", order=("grr", "oue", "olh", "hrr"))


#: k-D mechanisms on a product domain (``dprange.release_grid``, ``dprange release`` with several
#: columns), registered beside each class (mechanisms.grid, mechanisms.optimized_grid,
#: mechanisms.fourier, data_aware.grid, data_aware.grids,
#: data_aware.nonnegative_grid, data_aware.support_grid, data_aware.pruned_grid,
#: data_aware.pruned_hilbert).  Kept apart
#: from :data:`MECHANISMS`, whose entries all release 1-D counts.
GRID_MECHANISMS = Registry(
    "k-D mechanism",
    "k-D mechanisms",
    order=(
        "kronecker",
        "kd_hierarchy",
        "quadtree",
        "privelet",
        "fourier",
        "optimized_kronecker",
        "optimized_marginals",
        "kd_tree",
        "hybrid_tree",
        "dawa_hilbert",
        "dawa_pruned",
        "ugrid",
        "agrid",
        "auto_nonnegative",
        "auto_toward_nonnegative",
        "auto_support",
        "auto_pruned",
        "auto-data",
    ),
)


#: k-D workloads (``analysis.grid.expected_error``, ``dprange error --shape``), registered in dprange.mechanisms.grid.
GRID_WORKLOADS = Registry("k-D workload", "k-D workloads", order=("all-rectangles", "prefix-rectangles", "marginals"))


#: Every registry, in the order the docs show them.
REGISTRIES = (
    MECHANISMS,
    INFERENCE,
    NOISE,
    WORKLOADS,
    QUANTILE_METHODS,
    LDP_PROTOCOLS,
    FREQUENCY_ORACLES,
    GRID_MECHANISMS,
    GRID_WORKLOADS,
)


# ------------------------------------------------------------------ inference methods
LEE_2015 = Citation(
    "Lee, Wang and Kifer",
    "Maximum Likelihood Postprocessing for Differential Privacy under Consistency Constraints",
    "KDD 2015",
)


INFERENCE.register(
    Entry(
        "inference method",
        "gls",
        "exact generalised least squares: unbiased, with exact error bars",
        Citation(
            "Hay, Rastogi, Miklau and Suciu",
            "Boosting the Accuracy of Differentially Private Histograms Through Consistency",
            "PVLDB 2010",
        ),
    )
)


INFERENCE.register(
    Entry(
        "inference method",
        "nnls",
        "non-negative least squares by ADMM; error bars by bootstrap",
        LEE_2015,
    )
)


INFERENCE.register(
    Entry(
        "inference method",
        "l1",
        "maximum likelihood under Laplace noise (elastic net, ADMM) with non-negativity; error bars by bootstrap",
        LEE_2015,
    )
)


# ------------------------------------------------------------------ noise kinds
CKS_2020 = Citation("Canonne, Kamath and Steinke", "The Discrete Gaussian for Differential Privacy", "NeurIPS 2020")


NOISE.register(
    Entry(
        "noise kind",
        "discrete_laplace",
        "two-sided geometric noise, sampled exactly; pure epsilon-DP (the default when delta = 0)",
        CKS_2020,
    )
)


NOISE.register(
    Entry(
        "noise kind",
        "laplace_float",
        "continuous Laplace in floating point, to reproduce papers only: not private as implemented (Mironov 2012)",
        Citation(
            "Dwork, McSherry, Nissim and Smith", "Calibrating Noise to Sensitivity in Private Data Analysis", "TCC 2006"
        ),
    )
)


NOISE.register(
    Entry(
        "noise kind",
        "gaussian",
        "the discrete Gaussian, calibrated by zero-concentrated DP; needs delta > 0 (the default when delta > 0)",
        CKS_2020,
    )
)


# ------------------------------------------------------------------ docs
def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _entry_table(registry: Registry) -> list[str]:
    auto_column = registry in (MECHANISMS, WORKLOADS, QUANTILE_METHODS, GRID_MECHANISMS)
    header = "| name | what it is | " + ("auto | " if auto_column else "") + "reference |"
    lines = [header, "|---|---|" + ("---|" if auto_column else "") + "---|"]
    for entry in registry.values():
        auto = ("yes | " if entry.auto else "no | ") if auto_column else ""
        reference = str(entry.citation) if entry.citation else ""
        lines.append(f"| `{entry.name}` | {_cell(entry.summary)} | {auto}{_cell(reference)} |")
    return lines


def _params_table(params: tuple[Param, ...] | list[Param]) -> list[str]:
    lines = ["| parameter | allowed | default | meaning | option |", "|---|---|---|---|---|"]
    for p in params:
        option = f"`{p.option}`" if p.option else ""
        allowed, default = _cell(p.constraint.describe()), _cell(describe_default(p))
        lines.append(f"| `{p.name}` | {allowed} | {default} | {_cell(p.doc)} | {option} |")
    return lines


def _shared(entries: list[Entry]) -> list[Param]:
    """The declarations (the same objects) that two or more entries share, in order."""
    seen: list[Param] = []
    for entry in entries:
        for p in entry.params:
            if not any(p is q for q in seen) and sum(any(p is q for q in e.params) for e in entries) >= 2:
                seen.append(p)
    return seen


def _params_section(registry: Registry) -> list[str]:
    entries = [e for e in registry.values() if e.params]
    if not entries:
        return []
    shared = _shared(entries)
    lines = ["", "### Parameters"]
    if shared:
        lines += ["", "Shared by several entries (each entry below says which it takes):", ""] + _params_table(shared)
    for entry in entries:
        own = [p for p in entry.params if not any(p is q for q in shared)]
        taken = [p.name for p in entry.params if any(p is q for q in shared)]
        builder = getattr(entry.factory, "__qualname__", entry.name)
        lines += ["", f"`{entry.name}` (`{builder}`)" + (f": takes the shared {', '.join(taken)}" if taken else "")]
        if own:
            lines += [""] + _params_table(own)
    return lines


AUTO_NOTES = {
    "Mechanisms": 'auto: whether `mechanism="auto"` (the default) ranks it by exact expected error.',
    "Workloads": 'auto: whether `mechanism="auto"` can optimise for it (`dprange release --workload`).',
    "k-D mechanisms": 'auto: whether `dprange.release_grid(..., mechanism="auto")` ranks it by exact expected error.',
    "Quantile methods": 'auto: whether `dprange.quantiles(..., method="auto")` can choose it (docs/quantiles.md).',
}


def docs_markdown() -> str:
    """The docs page listing every registered entry and its parameters (docs/mechanisms.md)."""
    lines = [
        "# Mechanisms, inference methods, noise kinds and workloads",
        "",
        "<!-- Generated from the registry (src/dprange/registry): do not edit by hand. -->",
        "<!-- Regenerate: python -m dprange.registry --docs > docs/mechanisms.md -->",
        "",
        "Each entry is registered once in `dprange.registry`; the command line's choices, "
        "`make_mechanism`, `dprange.release`'s names, `select`'s candidates and this page are "
        "generated from it. `tests/test_registry.py` fails when this page is out of date.",
    ]
    for registry in REGISTRIES:
        lines += ["", f"## {registry.title}", ""]
        if registry.title in AUTO_NOTES:
            lines += [AUTO_NOTES[registry.title], ""]
        lines += _entry_table(registry) + _params_section(registry)
    return "\n".join(lines) + "\n"
