"""JSON whose large arrays are counted before they are parsed.

A saved release holds a few arrays of numbers whose sizes its own metadata fix: the histogram
and its standard errors (the domain's bins), a grid release's measured values (its design's
rows), a data-aware grid release's counts (its shape's cells).  ``json.loads`` materialises
every array before any check can run, in several times the memory of its text, and a file
is not trusted (docs/privacy.md, "Loaded release files").  :func:`loads` leaves the flat arrays
at chosen paths unparsed (:class:`Deferred`), so that the loader reads the metadata first,
derives each array's size from them, and parses an array only where it holds that many numbers
(:func:`sized`).  Everything else is parsed by the json module as it stands (memory
proportional to its length).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any, NamedTuple

from ..errors import DataError

#: A path element that matches any key of an object or any index of an array.
ANY = None


_DECODER = json.JSONDecoder()


_SPACE = re.compile(r"[ \t\n\r]*")


class Deferred(NamedTuple):
    """A flat JSON array (numbers and nulls, no strings or containers) at text[start:end],
    located but not parsed."""

    text: str
    start: int
    end: int

    @property
    def size(self) -> int:
        """How many values it holds (its commas, counted in the text)."""
        if _space(self.text, self.start + 1) == self.end - 1:
            return 0
        return self.text.count(",", self.start, self.end) + 1

    def parse(self) -> list:
        return _DECODER.raw_decode(self.text, self.start)[0]


def sized(value, expected: int, message: str):
    """``value`` parsed where it is a :class:`Deferred` of ``expected`` values, DataError with
    ``message`` (its ``{size}`` the number it holds) where it is not; any other value as it is."""
    if not isinstance(value, Deferred):
        return value
    if value.size != expected:
        raise DataError(message.format(size=value.size))
    return value.parse()


def loads(text: str, deferred: Collection[tuple]) -> Any:
    """``json.loads(text)``, except that a flat array at one of the ``deferred`` paths (tuples
    of keys and indices, :data:`ANY` for any) is a :class:`Deferred`.  Invalid JSON raises
    json.JSONDecodeError as json does."""
    value, end = _value(text, _space(text, 0), (), tuple(deferred))
    end = _space(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _space(text: str, pos: int) -> int:
    """The first position from ``pos`` on that is not JSON white space."""
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _matches(path: tuple, pattern: tuple) -> bool:
    return all(p is ANY or p == q for q, p in zip(path, pattern))


def _value(text: str, pos: int, path: tuple, deferred: tuple) -> tuple[Any, int]:
    """The JSON value at ``pos`` (no white space before it) and where it ends."""
    if any(len(p) == len(path) and _matches(path, p) for p in deferred) and text.startswith("[", pos):
        close = text.find("]", pos)
        if close > 0 and all(text.find(c, pos + 1, close) < 0 for c in '[{"'):
            return Deferred(text, pos, close + 1), close + 1
    below = [p for p in deferred if len(p) > len(path) and _matches(path, p)]
    if below and text.startswith("{", pos) and any(p[len(path)] is ANY or isinstance(p[len(path)], str) for p in below):
        return _container(text, pos, path, below, "}")
    if below and text.startswith("[", pos) and any(p[len(path)] is ANY or isinstance(p[len(path)], int) for p in below):
        return _container(text, pos, path, below, "]")
    return _DECODER.raw_decode(text, pos)


def _container(text: str, pos: int, path: tuple, deferred: list, close: str) -> tuple[Any, int]:
    """The object ("}") or array ("]") at ``pos`` and where it ends, each member read by
    :func:`_value` (the last of repeated keys wins, as in json)."""
    is_object = close == "}"
    members: Any = {} if is_object else []
    pos = _space(text, pos + 1)
    if text.startswith(close, pos):
        return members, pos + 1
    while True:
        if is_object:
            if not text.startswith('"', pos):
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _space(text, pos)
            if not text.startswith(":", pos):
                raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
            members[key], pos = _value(text, _space(text, pos + 1), (*path, key), tuple(deferred))
        else:
            item, pos = _value(text, pos, (*path, len(members)), tuple(deferred))
            members.append(item)
        pos = _space(text, pos)
        if text.startswith(close, pos):
            return members, pos + 1
        if not text.startswith(",", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _space(text, pos + 1)
