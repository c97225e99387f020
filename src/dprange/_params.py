"""Declarative parameters: a class states each parameter once, one function checks them all.

A class lists its parameters in ``PARAMS``, a tuple of :class:`Param` records: the name, the
:class:`Constraint` a value must meet (type, allowed values, interval), the default and a
one-line doc.  :func:`bind` matches a call's arguments to them, checks every value with its
constraint and returns the normalised values; no parameter is validated anywhere else (in
particular not as a side effect of some other computation).  The same records give the
class its signature (:func:`signature`), parse command-line text (:meth:`Constraint.parse`)
and describe the parameters in the generated docs (:meth:`Constraint.describe`).

The idea follows scikit-learn's declared parameter constraints (Buitinck et al., "API design
for machine learning software: experiences from the scikit-learn project", ECML PKDD
Workshop on Languages for Data Mining and Machine Learning, 2013).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import check_positive_int
from .errors import ParameterError


class _Required:
    """The default of a parameter that must be given."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: Marks a parameter without default.
REQUIRED: Any = _Required()


class Constraint:
    """What a parameter's value must be.  Subclasses implement :meth:`check` and :meth:`describe`."""

    def check(self, value, name: str):
        """The normalised value, or ParameterError naming ``name``."""
        raise NotImplementedError

    def describe(self) -> str:
        """The allowed values in a few words (for docs and help)."""
        raise NotImplementedError

    def parse(self, text: str, option: str):
        """The value that command-line ``text`` of ``option`` stands for (checked later by :meth:`check`)."""
        return text


class OneOf(Constraint):
    """One of a list of names; ``values`` may be a function, read at each check (registries grow)."""

    def __init__(self, values: Sequence[str] | Callable[[], Sequence[str]]):
        self._values = values

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(self._values() if callable(self._values) else self._values)

    def check(self, value, name: str):
        if isinstance(value, str) and value in self.values:
            return value
        raise ParameterError(f"{name} must be one of {', '.join(self.values)}, got {value!r}")

    def describe(self) -> str:
        return " | ".join(f"`{v}`" for v in self.values)


class Integer(Constraint):
    """An integer >= ``minimum`` (a float with an integer value is accepted)."""

    def __init__(self, minimum: int = 1):
        self.minimum = minimum

    def check(self, value, name: str):
        return check_positive_int(value, name, minimum=self.minimum)

    def describe(self) -> str:
        return f"integer >= {self.minimum}"

    def parse(self, text: str, option: str):
        try:
            return int(text)
        except ValueError:
            raise ParameterError(f"{option} must be a whole number >= {self.minimum}, got {text!r}") from None


class IntegerOrList(Constraint):
    """An integer >= ``minimum``, or a non-empty list of them (kept as a list of ints)."""

    def __init__(self, minimum: int, item: str, empty: str):
        self.minimum = minimum
        #: How an entry of the list is named in messages ("every branching factor").
        self.item = item
        #: The message for an empty list.
        self.empty = empty

    def check(self, value, name: str):
        if isinstance(value, (list, tuple, np.ndarray)):
            if len(value) == 0:
                raise ParameterError(self.empty)
            return [check_positive_int(v, self.item, minimum=self.minimum) for v in value]
        return check_positive_int(value, name, minimum=self.minimum)

    def describe(self) -> str:
        return f"integer >= {self.minimum}, or a list of them"

    def parse(self, text: str, option: str):
        """``"16"`` is 16; ``"4,16"`` (or ``"16,"``) is a list."""
        parts = [p.strip() for p in text.split(",") if p.strip()]
        try:
            values = [int(p) for p in parts]
        except ValueError:
            values = []
        if not values:
            raise ParameterError(f"{option} must be an integer or a comma-separated list of integers, got {text!r}")
        return values[0] if len(values) == 1 and "," not in text else values


class RuleOrNumbers(Constraint):
    """A rule's name, or a list of numbers (kept as a list of floats; checked further where
    their meaning is known, e.g. a budget list against the levels and epsilon)."""

    def __init__(self, rules: Sequence[str], what: str):
        self.rules = tuple(rules)
        #: What a list holds, for messages ("per-level budgets").
        self.what = what

    def _names(self) -> str:
        return ", ".join(f"'{r}'" for r in self.rules)

    def check(self, value, name: str):
        if isinstance(value, str):
            if value not in self.rules:
                raise ParameterError(f"{name} must be one of {', '.join(self.rules)} or a list, got {value!r}")
            return value
        try:
            return [float(v) for v in value]
        except (TypeError, ValueError):
            raise ParameterError(f"{name} must be {self._names()} or a list of {self.what}, got {value!r}") from None

    def describe(self) -> str:
        return " | ".join(f"`{r}`" for r in self.rules) + f" | list of {self.what}"

    def parse(self, text: str, option: str):
        if text in self.rules:
            return text
        try:
            return [float(p) for p in text.split(",") if p.strip()]
        except ValueError:
            raise ParameterError(
                f"{option} must be {self._names()} or a comma-separated list of numbers, got {text!r}"
            ) from None


class Flag(Constraint):
    """True or False (numpy booleans and the integers 0 and 1 too; not strings such as "no")."""

    def check(self, value, name: str):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, np.integer)) and value in (0, 1):
            return bool(value)
        raise ParameterError(f"{name} must be True or False, got {value!r}")

    def describe(self) -> str:
        return "`True` | `False`"


class Options(Constraint):
    """None or a mapping whose keys are among ``allowed`` (kept as a new dict)."""

    def __init__(self, allowed: Sequence[str], what: str):
        self.allowed = tuple(sorted(allowed))
        #: The options' noun in messages ("inference options").
        self.what = what

    def check(self, value, name: str):
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ParameterError(f"{name} must be a dict with keys among {', '.join(self.allowed)}, got {value!r}")
        unknown = set(value) - set(self.allowed)
        if unknown:
            raise ParameterError(f"unknown {self.what} {sorted(unknown)}; use {', '.join(self.allowed)}")
        return dict(value)

    def describe(self) -> str:
        return "dict with keys " + ", ".join(f"`{k}`" for k in self.allowed)


class Custom(Constraint):
    """A check written as a function ``check(value, name) -> value`` with its description, and
    optionally how command-line text becomes a value (``parse(text, option)``)."""

    def __init__(
        self,
        check: Callable[[Any, str], Any],
        description: str,
        parse: Callable[[str, str], Any] | None = None,
    ):
        self._check = check
        self.description = description
        self._parse = parse

    def check(self, value, name: str):
        return self._check(value, name)

    def describe(self) -> str:
        return self.description

    def parse(self, text: str, option: str):
        return text if self._parse is None else self._parse(text, option)


@dataclass(frozen=True)
class Param:
    """One declared parameter of a class."""

    name: str
    constraint: Constraint
    #: One line: what the parameter means.
    doc: str
    default: Any = REQUIRED
    #: Whether it may be passed by position (positional parameters come first, in order).
    positional: bool = False
    #: The instance attribute that keeps it (default: ``name``).
    attribute: str = ""
    #: Its command-line option ("--branching"; "--root/--no-root" for a flag), or "" for none.
    option: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def key(self) -> str:
        """The attribute name."""
        return self.attribute or self.name


def find(params: Sequence[Param], name: str) -> Param:
    """The parameter called ``name``."""
    for param in params:
        if param.name == name:
            return param
    raise KeyError(name)


def bind(params: Sequence[Param], args: tuple, kwargs: dict, owner: str) -> dict[str, Any]:
    """Match ``args`` and ``kwargs`` to ``params`` and check every value (defaults too).

    Returns {name: normalised value}.  Too many positional arguments, an unknown name, a
    name given twice or a missing required parameter is a ParameterError naming ``owner``."""
    positional = [p.name for p in params if p.positional]
    if len(args) > len(positional):
        raise ParameterError(
            f"{owner} takes at most {len(positional)} positional parameters ({', '.join(positional) or 'none'}), "
            f"got {len(args)}; pass the others by name"
        )
    given = dict(zip(positional, args))
    for name, value in kwargs.items():
        if name in given:
            raise ParameterError(f"{owner} got {name} twice (by position and by name); pass it once")
        given[name] = value
    known = {p.name for p in params}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ParameterError(
            f"{owner} has no parameter {', '.join(unknown)}; its parameters are {', '.join(p.name for p in params)}"
        )
    out = {}
    for param in params:
        if param.name in given:
            value = given[param.name]
        elif param.required:
            raise ParameterError(f"{owner} needs {param.name} ({param.doc})")
        else:
            value = param.default
        out[param.name] = param.constraint.check(value, param.name)
    return out


def signature(params: Sequence[Param]) -> inspect.Signature:
    """The Python signature the parameters describe (for ``help`` and ``inspect``)."""
    kinds = {True: inspect.Parameter.POSITIONAL_OR_KEYWORD, False: inspect.Parameter.KEYWORD_ONLY}
    return inspect.Signature(
        [
            inspect.Parameter(p.name, kinds[p.positional], default=inspect.Parameter.empty if p.required else p.default)
            for p in params
        ]
    )


def current(obj) -> dict[str, Any]:
    """{name: value} of the declared parameters of ``obj`` (its class's ``PARAMS``)."""
    return {p.name: getattr(obj, p.key) for p in type(obj).PARAMS}


def replaced(obj, **changes):
    """A new object of the same class with the same parameters except ``changes`` (checked
    again as any construction is); ``obj`` itself is left as it is."""
    return type(obj)(**{**current(obj), **changes})


def describe_default(param: Param) -> str:
    """The default as the docs show it."""
    if param.required:
        return "required"
    return f"`{param.default!r}`"
