"""Local-DP range-query protocols: hierarchical histograms and HaarHRR (Cormode, Kulkarni,
Srivastava, "Answering Range Queries Under Local Differential Privacy", PVLDB 2019, section 4).

``HierarchicalHistogram(D, branching, oracle)`` (HH_B): a level-uniform tree over the D
values; every user samples one level l = 1..h (uniformly, or with given probabilities) and
reports the index of her node at that level through a frequency oracle.  The root is the
number of users N, which is public.  The aggregator estimates every level's node
frequencies from the N_l users who chose it (per-node variance ~ V_F / N_l with the
*realised* N_l), and post-processes them by **exact weighted least squares** on the tree
(:func:`dprange.inference.tree.tree_gls`, with the known root) — the consistency step of
section 4.5 done exactly rather than by the two-stage heuristic.

``HaarHRR(D)``: every user samples a level of the Haar tree and reports her (signed, one-hot)
coefficient vector at that level with HRR; the aggregator inverts the Haar transform with
the root coefficient fixed to N (:func:`dprange.inference.wavelet.haar_estimate`).

``Flat(D, oracle)``: one oracle over the D values (a tree of one level below the root).

Every protocol's aggregator builds :class:`~dprange.measurements.Measurements` (one
:class:`~dprange.measurements.LinearMeasurement` per reported level: a ``TreeLevel`` or
``HaarLevel`` block, the level's estimated counts, their per-node variance; the public total
N, replace neighbours) and the estimate is :func:`dprange.inference.infer` of them: "gls"
(exact standard errors), or "nnls" / "l1" by ADMM (Lee, Wang, Kifer, KDD 2015) with
parametric-bootstrap standard errors (:meth:`dprange.Release.bootstrap`: normal noise with the
levels' variances around the estimate, the same inference rerun).

Releases are in counts (N times fractions).  The oracle variances depend on the true node
frequencies f (module doc of :mod:`.oracles`); releases weight and report with the plug-in f
(the clipped estimate), so their standard errors are exact up to that plug-in;
``error_model(N)`` (data-independent analysis) uses the f-independent part and
``error_model(N, counts)`` the exact variances for a known population.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping

import numpy as np

from .._params import Custom, Integer, Param, bind, signature
from .._validation import check_epsilon
from ..answers.provenance import Provenance
from ..answers.release import Release
from ..domain import Domain
from ..errors import ParameterError, ReportError
from ..inference.dispatch import METHODS, check_options, design_error_model, infer
from ..io import load_npz
from ..measurements import LinearMeasurement, Measurements
from ..operators.base import Operator
from ..privacy.samplers import resolve_rng
from ..registry import FREQUENCY_ORACLES, LDP_PROTOCOLS, Citation, Entry
from .coins import ONE, check_values, coins
from .frequency import Aggregator
from .reports import Reports, report_fields


def _epsilon_or_none(value, name: str):
    return None if value is None else check_epsilon(value, name)


def _probabilities_or_none(value, name: str):
    """None, or the numbers as a float array (their count and sum are checked against the levels)."""
    if value is None:
        return None
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a list of non-negative numbers summing to 1, got {value!r}") from None


def _registered_oracle(value, name: str) -> str:
    return FREQUENCY_ORACLES.lookup(value).name


def _oracle_options(value, name: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParameterError(
            f"{name} must be a dict of the oracle's options (e.g. {{'hash_pool': 4096}}), got {value!r}"
        )
    return dict(value)


#: Parameters the protocols share (the same declarations, so the docs list them once).
DOMAIN_SIZE = Param("domain_size", Integer(2), "the number of values D (bins) users hold", positional=True)


EPSILON = Param(
    "epsilon",
    Custom(_epsilon_or_none, "positive finite number, or None (give one with with_epsilon)"),
    "each user's privacy budget (local DP)",
    default=None,
    option="--epsilon",
)


LEVEL_PROBABILITIES = Param(
    "level_probabilities",
    Custom(_probabilities_or_none, "None (uniform) or one probability per level, summing to 1"),
    "the probability that a user reports each level, top down",
    default=None,
)


ORACLE = Param(
    "oracle",
    Custom(_registered_oracle, "a registered frequency oracle (see Local-DP frequency oracles)"),
    "the frequency oracle every level reports through",
    default="oue",
    positional=True,
    option="--oracle",
)


ORACLE_OPTIONS = Param(
    "oracle_options",
    Custom(_oracle_options, "None or a dict of the oracle's own parameters"),
    "passed to the oracle, e.g. OLH's g or hash_pool",
    default=None,
)


class Protocol:
    """Shared plumbing: level sampling, report containers, aggregation, release.

    Every constructor parameter is declared once in the class's ``PARAMS``
    (:mod:`dprange._params`) and checked by one :func:`~dprange._params.bind` call; a
    subclass builds its structure from the checked values in :meth:`_configure`."""

    name = "protocol"

    PARAMS: tuple[Param, ...] = (DOMAIN_SIZE, EPSILON, LEVEL_PROBABILITIES)

    def __init__(self, *args, **kwargs):
        values = bind(type(self).PARAMS, args, kwargs, type(self).__name__)
        self.domain_size = values["domain_size"]
        self.epsilon = values["epsilon"]
        self._configure(values)
        self.level_probabilities = self._level_probabilities(values.get("level_probabilities"))
        if self.epsilon is not None:
            self._check_oracles()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__signature__ = signature(cls.PARAMS)  # type: ignore[attr-defined]

    def _configure(self, values: dict) -> None:
        """Build the protocol's structure (tree, oracle) from the checked parameters."""
        raise NotImplementedError

    def _level_probabilities(self, given) -> np.ndarray:
        """The given level probabilities checked against the levels, or uniform ones."""
        levels = self.levels
        if given is None:
            return np.full(levels, 1.0 / levels)
        if given.shape != (levels,) or np.any(given < 0) or not np.isclose(given.sum(), 1.0):
            raise ParameterError(f"level_probabilities must be {levels} non-negative numbers summing to 1")
        return given

    @classmethod
    def from_options(cls, domain_size: int, epsilon: float, *, oracle: str = "oue", branching=4) -> Protocol:
        """The protocol of the ``dprange ldp`` options (each class takes those it uses; the
        registered builder of :data:`dprange.registry.LDP_PROTOCOLS`)."""
        raise NotImplementedError

    @classmethod
    def from_header(cls, header: dict) -> Protocol:
        """The protocol a report file's header describes (a missing key is a KeyError)."""
        raise NotImplementedError

    # ------------------------------------------------- what each protocol contributes
    #: The frequency oracle's name (the release's noise is ``local:<oracle_name>``).
    oracle_name = "protocol"

    def _report_level(self, level: int, values: np.ndarray, source):
        """One level's reports for the users who sampled it."""
        raise NotImplementedError

    def level_size(self, level: int) -> int:
        """The number of real nodes (estimated counts) at ``level``."""
        raise NotImplementedError

    def node_frequencies(self, counts: np.ndarray, n_users) -> dict:
        """The fraction of users in every node of every level, for a known histogram."""
        raise NotImplementedError

    def level_block(self, level: int) -> Operator:
        """The linear queries whose answers level ``level``'s oracle estimates."""
        raise NotImplementedError

    def _check_users(self, users: dict) -> None:
        """Refuse aggregates whose levels cannot give an estimate (default: the leaves
        must have been reported)."""
        if users[self.levels] == 0:
            raise ReportError("no user reported the leaf level; collect more reports")

    def _plug_in_frequencies(self, values: list, users: dict, n: int) -> dict:
        """Node frequencies for the f-dependent variance terms, from the level estimates
        (default: each reported level's estimate clipped to [0, 1])."""
        return {level: np.clip(v / n, 0.0, 1.0) for level, v in enumerate(values) if v is not None}

    # ------------------------------------------------- the shared path
    def level_variances(self, users_per_level, n_total, frequencies=None) -> list:
        """Count variances per node at each level from the users who reported there
        (None for a level nobody reported).

        ``frequencies[l]``: node frequencies at level l for the exact (f-dependent) variance;
        without them, the f-independent part (one number per level, the same for every node)."""
        out: list = [None] * (self.levels + 1)
        for level in range(1, self.levels + 1):
            users = users_per_level[level]
            if users > 0:
                oracle = self.oracle(level)
                f = None if frequencies is None else _padded(frequencies[level], oracle.estimate_size)
                var = oracle.variance(users, f)[: self.level_size(level)] * n_total**2
                out[level] = float(var[0]) if frequencies is None else var
        return out

    def level_estimates(self, agg: ProtocolAggregator) -> list:
        """Every reported level's estimated node counts (frequencies x N); None elsewhere."""
        n = agg.n
        values: list = [None] * (self.levels + 1)
        for level, a in agg.levels.items():
            if a.n > 0:
                values[level] = a.estimate()[: self.level_size(level)] * n
        return values

    def level_measurements(self, values: list, variances: list, n_users) -> Measurements:
        """One :class:`LinearMeasurement` per reported level (its block, its estimated counts,
        their per-node variance), the N users being the public total (replace relation)."""
        parts = [
            LinearMeasurement(self.level_block(level), np.asarray(values[level], dtype=float), variances[level])
            for level in range(1, self.levels + 1)
            if values[level] is not None and variances[level] is not None
        ]
        return Measurements(
            parts,
            n=self.domain_size,
            epsilon=self._eps(),
            neighbours="replace",
            total=float(n_users),
            source=f"local:{self.oracle_name}",
        )

    def measurements(self, agg: ProtocolAggregator) -> Measurements:
        """The aggregator's level estimates as measurements, each level weighted with its
        realised users and the plug-in node frequencies (module doc)."""
        n = agg.n
        if n == 0:
            raise ReportError("no reports were aggregated")
        users = {l: a.n for l, a in agg.levels.items()}
        self._check_users(users)
        values = self.level_estimates(agg)
        variances = self.level_variances(users, n, self._plug_in_frequencies(values, users, n))
        return self.level_measurements(values, variances, n)

    def _release(self, agg: ProtocolAggregator, domain, inference: str = "gls", options=None) -> Release:
        """The release from aggregated reports: measurements, then ``infer``."""
        if inference not in METHODS:
            raise ParameterError(f"inference must be one of {', '.join(METHODS)}, got {inference!r}")
        options = check_options(options)
        measurements = self.measurements(agg)
        estimate = infer(measurements, inference, options)
        users = {l: a.n for l, a in agg.levels.items()}
        return self._local_release(measurements, estimate, domain, users, inference, options)

    def error_model(self, n_users: int, counts=None):
        """Exact error model (counts) with the expected number of users per level; with the
        true ``counts`` the f-dependent variance terms are included."""
        users = {l: n_users * self.level_probabilities[l - 1] for l in range(1, self.levels + 1)}
        freqs = None if counts is None else self.node_frequencies(np.asarray(counts, float), n_users)
        variances = self.level_variances(users, n_users, freqs)
        zeros = [None if v is None else np.zeros(self.level_size(level)) for level, v in enumerate(variances)]
        return design_error_model(self.level_measurements(zeros, variances, n_users))

    def _check_oracles(self) -> None:
        """Build every level's oracle once: each checks that it supports this epsilon."""
        for level in range(1, self.levels + 1):
            self.oracle(level)

    @property
    def levels(self) -> int:
        raise NotImplementedError

    def with_epsilon(self, epsilon):
        clone = self.__class__.__new__(self.__class__)
        clone.__dict__.update(self.__dict__)
        clone.epsilon = check_epsilon(epsilon)
        clone._check_oracles()
        return clone

    def _local_release(
        self, measurements: Measurements, estimate, domain, users: dict, inference: str, options: dict
    ) -> Release:
        """The Release of a local estimate: the N users present are the public total (each user
        reports once, so the relation is replace), ``users`` the realised users per level.
        Its bootstrap re-draws normal noise with the measurements' variances around the
        estimate and reruns the same inference (:func:`dprange.answers.bootstrap.bootstrap`)."""
        parameters = {**self.describe(), "users_per_level": users}
        if inference != "gls":
            parameters["inference"] = inference
            if options:
                parameters["inference_options"] = options
        provenance = Provenance(
            mechanism=self.name,
            parameters=parameters,
            epsilon=measurements.epsilon,
            neighbours="replace",
            total=measurements.total,
            inference=inference,
            inference_options=options or {},
            noise=measurements.source,
            converged=bool(getattr(estimate, "converged", True)),
        )
        return Release(estimate.leaves, estimate, provenance, domain=domain, measurements=measurements)

    def _eps(self) -> float:
        if self.epsilon is None:
            raise ParameterError("give the protocol an epsilon (epsilon=...) before randomising or aggregating")
        return self.epsilon

    def oracle(self, level: int):
        raise NotImplementedError

    def describe(self) -> dict:
        return {
            "protocol": self.name,
            "domain_size": self.domain_size,
            "epsilon": self.epsilon,
            "level_probabilities": self.level_probabilities.tolist(),
        }

    # ------------------------------------------------------------------ client
    def level_thresholds(self) -> np.ndarray:
        """floor(2^62 c_l) for the cumulative level probabilities c_l (int64): a user whose
        uniform integer U on [0, 2^62) lies in [T_(l-1), T_l) takes level l (the last level
        also takes U >= T_h, where float rounding leaves c_h a little below 1)."""
        cum = np.cumsum(self.level_probabilities)
        return np.floor(cum * float(ONE)).astype(np.int64)

    def sample_levels(self, n: int, source) -> np.ndarray:
        """Each user's level, from one uniform integer on [0, 2^62) (no float draws)."""
        draws = coins(source, n)
        return np.minimum(np.searchsorted(self.level_thresholds(), draws, side="right"), self.levels - 1) + 1

    def randomize(self, values, rng=None) -> ProtocolReports:
        """Client side for a batch of users: each samples a level and reports it."""
        v = check_values(values, self.domain_size)
        source = resolve_rng(rng)
        level = self.sample_levels(v.size, source)
        parts = {}
        for l in range(1, self.levels + 1):
            mine = v[level == l]
            parts[l] = self._report_level(l, mine, source)
        return ProtocolReports(self.describe(), parts)

    # ------------------------------------------------------------------ server
    def aggregator(self) -> ProtocolAggregator:
        return ProtocolAggregator(self)


class ProtocolReports:
    """Reports of one protocol, grouped by level; compact binary serialisation."""

    def __init__(self, header: dict, parts: dict):
        self.header = header
        self.parts = parts

    @property
    def n(self) -> int:
        return sum(p.n for p in self.parts.values())

    def to_bytes(self) -> bytes:
        arrays = {}
        meta = {"protocol": self.header, "levels": {}}
        for level, rep in self.parts.items():
            meta["levels"][str(level)] = rep.header()
            for key, value in rep.data.items():
                arrays[f"L{level}__{key}"] = value
        buf = io.BytesIO()
        np.savez_compressed(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> ProtocolReports:
        try:
            with load_npz(blob) as z:
                meta = json.loads(bytes(z["__meta__"]).decode())
                parts = {}
                for level, head in meta["levels"].items():
                    prefix = f"L{level}__"
                    data = {k[len(prefix) :]: z[k] for k in z.files if k.startswith(prefix)}
                    parts[int(level)] = Reports(
                        head["oracle"], float(head["epsilon"]), int(head["domain_size"]), data, head.get("params", {})
                    )
            return cls(meta["protocol"], parts)
        except Exception as exc:  # noqa: BLE001 - any decoding failure means a malformed file
            raise ReportError(f"malformed protocol reports: {exc}") from None

    def to_jsonl(self, path) -> None:
        """JSON lines: a header line (protocol, each level's oracle header and fields), then
        one line per user: ``[level, field values...]`` (OUE bits as packed bytes)."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(self.jsonl_text())

    def jsonl_text(self) -> str:
        """The JSON-lines form (see :meth:`to_jsonl`) as one string."""
        levels = {str(l): rep.header() for l, rep in self.parts.items()}
        fields = {str(l): [k for k in rep.data if k != "n"] for l, rep in self.parts.items()}
        lines = [json.dumps({"protocol": self.header, "levels": levels, "fields": fields})]
        for level, rep in self.parts.items():
            columns = [rep.data[k].tolist() for k in fields[str(level)]]
            lines.extend(json.dumps([level, *row]) for row in zip(*columns))
        return "\n".join(lines) + "\n"

    def encoded(self, path) -> bytes:
        """The bytes :meth:`save` writes to ``path`` (JSON lines for .jsonl/.json, else binary)."""
        if str(path).endswith((".jsonl", ".json")):
            return self.jsonl_text().encode("utf-8")
        return self.to_bytes()

    @classmethod
    def from_jsonl(cls, path) -> ProtocolReports:
        try:
            with open(path, encoding="utf-8") as fh:
                first = json.loads(fh.readline())
                header, levels, fields = first["protocol"], first["levels"], first["fields"]
                rows: dict = {int(l): [] for l in levels}
                for line in fh:
                    if line.strip():
                        row = json.loads(line)
                        if (
                            not isinstance(row, list)
                            or not row
                            or isinstance(row[0], bool)
                            or len(row) != 1 + len(fields[str(row[0])])
                        ):
                            raise ValueError(f"bad report line {line.strip()[:60]!r}")
                        rows[int(row[0])].append(row[1:])
            parts = {}
            for level, head in levels.items():
                data = report_fields(fields[level], rows[int(level)], int(head["domain_size"]))
                parts[int(level)] = Reports(
                    head["oracle"], float(head["epsilon"]), int(head["domain_size"]), data, head.get("params", {})
                )
            return cls(header, parts)
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError) as exc:
            raise ReportError(f"malformed JSON-lines reports in {str(path)!r}: {exc}") from None

    def save(self, path) -> None:
        """Write JSON lines if ``path`` ends in .jsonl or .json, else the compact binary form."""
        with open(path, "wb") as fh:
            fh.write(self.encoded(path))

    @classmethod
    def load(cls, path) -> ProtocolReports:
        """Read either form (told apart by the first byte: '{' for JSON lines)."""
        try:
            with open(path, "rb") as fh:
                blob = fh.read()
        except OSError as exc:
            raise ReportError(f"cannot read reports {str(path)!r}: {exc.strerror}") from None
        if blob.lstrip()[:1] == b"{":
            return cls.from_jsonl(path)
        return cls.from_bytes(blob)


class ProtocolAggregator:
    """Server side of a protocol: per-level oracle aggregators; ``add``, ``merge``, ``release``."""

    def __init__(self, protocol: Protocol):
        self.protocol = protocol
        self.levels = {l: Aggregator(protocol.oracle(l)) for l in range(1, protocol.levels + 1)}

    @property
    def n(self) -> int:
        return sum(a.n for a in self.levels.values())

    def add(self, reports: ProtocolReports) -> ProtocolAggregator:
        mine = self.protocol.describe()
        theirs = reports.header
        if not isinstance(theirs, dict):
            raise ReportError("malformed report header: the protocol description is not a JSON object")
        if mine != theirs:
            keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            detail = ", ".join(f"{k}={theirs.get(k)!r} (expected {mine.get(k)!r})" for k in keys)
            raise ReportError(f"reports do not match this aggregator: {detail}")
        for level, rep in reports.parts.items():
            if level not in self.levels:
                raise ReportError(f"reports name level {level}, which this protocol does not have")
            self.levels[level].add(rep)
            self._check_level_sampled(level)
        return self

    def merge(self, other: ProtocolAggregator) -> ProtocolAggregator:
        if other.protocol.describe() != self.protocol.describe():
            raise ReportError("cannot merge aggregators of different protocols")
        for level, agg in other.levels.items():
            self.levels[level].merge(agg)
            self._check_level_sampled(level)
        return self

    def _check_level_sampled(self, level: int) -> None:
        """Refuse reports at a level the protocol gives probability 0: no user of this protocol
        reports there, so the reports and their header disagree (a malformed or forged file)."""
        if self.levels[level].n > 0 and self.protocol.level_probabilities[level - 1] == 0:
            raise ReportError(
                f"reports at level {level}, whose level probability is 0 in the protocol: no user samples "
                "that level; the reports do not match their header"
            )

    def measurements(self) -> Measurements:
        """The level estimates as :class:`~dprange.measurements.Measurements` (see
        :meth:`Protocol.measurements`)."""
        return self.protocol.measurements(self)

    def release(
        self, domain: Domain | None = None, inference: str = "gls", inference_options: dict | None = None
    ) -> Release:
        """The release: ``inference`` is "gls" (exact standard errors), "nnls" or "l1" (ADMM,
        Lee, Wang and Kifer, KDD 2015; NaN analytic standard errors, use
        :meth:`dprange.Release.bootstrap`); ``inference_options`` are ADMM's options."""
        return self.protocol._release(self, domain, inference, inference_options)


# ------------------------------------------------------------------ the registry
def register_protocol(cls: type[Protocol], option: str, *, summary: str, citation: Citation | None = None) -> Entry:
    """Register protocol class ``cls`` as ``dprange ldp --protocol option``: the entry builds
    it with :meth:`Protocol.from_options`, and reports whose header names ``cls.name`` are
    read back with :meth:`Protocol.from_header` (:func:`protocol_class`)."""
    return LDP_PROTOCOLS.register(
        Entry(
            LDP_PROTOCOLS.kind,
            option,
            summary,
            citation,
            factory=cls.from_options,
            params=tuple(getattr(cls, "PARAMS", ())),
        )
    )


def registered_class(entry: Entry) -> type[Protocol] | None:
    """The protocol class a registered entry builds (None for a builder of another kind)."""
    owner = getattr(entry.factory, "__self__", None)
    return owner if isinstance(owner, type) and issubclass(owner, Protocol) else None


def protocol_class(header_name) -> type[Protocol]:
    """The registered protocol class whose reports carry ``header_name`` (ReportError if none)."""
    for entry in LDP_PROTOCOLS.values():
        cls = registered_class(entry)
        if cls is not None and cls.name == header_name:
            return cls
    raise ReportError(f"unknown protocol {header_name!r} in the reports")


def _padded(values, size) -> np.ndarray:
    out = np.zeros(size)
    values = np.asarray(values, dtype=float)[:size]
    out[: values.size] = values
    return out
