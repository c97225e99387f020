"""Provenance: where a release came from (mechanism, privacy parameters, noise, inference).

A :class:`Provenance` is a small typed, immutable record that a :class:`~dprange.Release`
keeps beside its estimate and error model.  It says how the release was made, and carries
the public facts that post-processing needs: the public total of the replace relation, the
noise kind and per-level noise scales (the tail factor of discrete-Laplace intervals), the
inference method and its options (the bootstrap reruns it).  It is saved in a release's
JSON (``"provenance"``) and read back by :meth:`Provenance.from_dict`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._validation import NEIGHBOURS
from ..errors import DataError, excerpt

#: The inference methods a release can come from.
INFERENCE_METHODS = ("gls", "nnls", "l1")


@dataclass(frozen=True)
class Provenance:
    """How a release was made: ``mechanism`` (its name) and ``parameters`` (public),
    ``epsilon``, ``delta`` and ``neighbours`` (the privacy guarantee), ``total`` (the public
    number of records under replace neighbours, else None), ``inference`` ("gls", "nnls" or
    "l1") and ``inference_options`` (ADMM options), ``noise`` (the noise kind, None when
    mixed or local), ``seeded`` (True when the noise came from a seeded, predictable
    generator: not for publication), ``noise_scales`` (the scale of every measured level's
    Laplace-type noise, or None) and ``data_dependent`` (True when private choices made from the
    data shaped the estimate, so that its error bars are noise-only, not exact)."""

    mechanism: str
    parameters: dict = field(default_factory=dict)
    epsilon: float = 0.0
    delta: float = 0.0
    neighbours: str = "add_remove"
    total: float | None = None
    inference: str = "gls"
    inference_options: dict = field(default_factory=dict)
    noise: str | None = None
    seeded: bool = False
    #: False when NNLS / L1 (ADMM) stopped at its iteration limit without meeting its tolerance.
    converged: bool = True
    noise_scales: Sequence[float] | None = None  # stored as a tuple
    data_dependent: bool = False
    #: None when one row is one person; else the privacy unit's record
    #: (:meth:`dprange.privacy.units.PrivacyUnit.to_dict`: id column, bounds, relation, row epsilon).
    privacy_unit: dict | None = None

    def __post_init__(self) -> None:
        # Normalise the types once (frozen: through object.__setattr__), so that a record
        # built in memory equals the one read back from JSON.
        object.__setattr__(self, "parameters", dict(self.parameters or {}))
        object.__setattr__(self, "inference_options", dict(self.inference_options or {}))
        object.__setattr__(self, "total", None if self.total is None else float(self.total))
        object.__setattr__(self, "seeded", bool(self.seeded))
        object.__setattr__(self, "converged", bool(self.converged))
        if self.noise_scales is not None:
            object.__setattr__(self, "noise_scales", tuple(float(v) for v in self.noise_scales))

    @property
    def exact_error_bars(self) -> bool:
        """True for least-squares (GLS) releases of data-independent designs, whose standard
        errors are exact."""
        return self.inference == "gls" and not self.data_dependent

    def to_dict(self) -> dict:
        """The record as JSON-friendly types (the inverse of :meth:`from_dict`)."""
        return {
            "mechanism": self.mechanism,
            "parameters": self.parameters,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "neighbours": self.neighbours,
            "total": self.total,
            "inference": self.inference,
            "inference_options": self.inference_options,
            "noise": self.noise,
            "seeded": self.seeded,
            "converged": self.converged,
            "noise_scales": None if self.noise_scales is None else list(self.noise_scales),
            "data_dependent": self.data_dependent,
            **({} if self.privacy_unit is None else {"privacy_unit": self.privacy_unit}),
        }

    @classmethod
    def from_dict(cls, data) -> Provenance:
        """The record saved by :meth:`to_dict`, or DataError (one line) for a malformed one."""
        if not isinstance(data, dict):
            raise DataError("the saved provenance is not a mapping; the file is corrupt")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise DataError(f"the saved provenance has unknown fields {sorted(unknown)}; the file is corrupt")
        return cls(
            mechanism=_name(data.get("mechanism"), "mechanism"),
            parameters=_mapping(data.get("parameters"), "parameters"),
            epsilon=_non_negative(data.get("epsilon"), "epsilon"),
            delta=_non_negative(data.get("delta", 0.0), "delta"),
            neighbours=_choice(data.get("neighbours"), "neighbours", NEIGHBOURS),
            total=None if data.get("total") is None else _finite(data["total"], "total"),
            inference=_choice(data.get("inference"), "inference", INFERENCE_METHODS),
            inference_options=_mapping(data.get("inference_options"), "inference options"),
            noise=None if data.get("noise") is None else _name(data["noise"], "noise kind"),
            seeded=_flag(data.get("seeded", False), "seeded"),
            converged=_flag(data.get("converged", True), "converged"),
            noise_scales=_scales(data.get("noise_scales")),
            data_dependent=_flag(data.get("data_dependent", False), "data_dependent"),
            privacy_unit=None if data.get("privacy_unit") is None else _mapping(data["privacy_unit"], "privacy unit"),
        )


def _corrupt(name: str, value: Any, what: str) -> DataError:
    return DataError(f"the saved {name} {excerpt(value, 30)!r} is not {what}; the file is corrupt")


def _name(value, name: str) -> str:
    if not isinstance(value, str):
        raise _corrupt(name, value, "a name")
    return value


def _mapping(value, name: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _corrupt(name, value, "a mapping")
    return value


def _finite(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _corrupt(name, value, "a finite number")
    return float(value)


def _non_negative(value, name: str) -> float:
    if _finite(value, name) < 0:
        raise _corrupt(name, value, "a non-negative number")
    return value


def _choice(value, name: str, choices) -> str:
    if value not in choices:
        raise _corrupt(name, value, f"one of {', '.join(choices)}")
    return value


def _flag(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise _corrupt(name, value, "true or false")
    return value


def _scales(value) -> tuple[float, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _corrupt("noise scales", value, "a list of numbers")
    return tuple(_finite(v, "noise scale") for v in value)
