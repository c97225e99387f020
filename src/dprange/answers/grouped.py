"""GroupedRelease: one private distribution per group of a public list of keys, under one epsilon.

``dprange.release(frame, domain, epsilon, column="age", by="sex", groups=["Male", "Female"])``
returns one :class:`~dprange.answers.release.Release` per declared key, in the declared order,
each with its exact error bars as an ungrouped release has.  The keys are public (given by the
user, never read from the data); rows whose key is not declared are dropped, which is
filtering by a public list and costs nothing.  Accounting (docs/privacy.md, "Group-by"): the
groups hold disjoint rows; with a privacy unit every id is bounded to ``max_groups_per_id`` = m
groups, and each group's release runs at epsilon / m, so an id's m groups compose to epsilon
(sequential) and the groups run in parallel; one row per person is m = 1 (each group at
epsilon).  The release's ``epsilon`` is the total; each group's ``Release.epsilon`` its share.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from ..errors import DataError, DPRangeError, ParameterError, excerpt
from . import plot_style as style
from .plot import draw_bars
from .release import Release
from .writers import write_atomically

#: The format version of a saved grouped release.
GROUPED_FORMAT = 1


class GroupedRelease:
    """Per-group releases of one column: ``by`` (the key column), ``keys`` (public, in order),
    ``releases`` (one :class:`Release` per key), ``epsilon`` (the total spent) and
    ``privacy_unit`` (None, one row one person, or the unit's record); ``key_selection``: None
    (public keys) or the record of the private selection of the keys."""

    def __init__(
        self,
        by: str,
        keys: list,
        releases: list[Release],
        epsilon: float,
        privacy_unit: dict | None = None,
        *,
        key_selection: dict | None = None,
    ):
        if len(keys) != len(releases) or (not keys and key_selection is None):
            raise ParameterError("a GroupedRelease needs one release per key, and at least one public key")
        if len({_label(k) for k in keys}) != len(keys):
            raise ParameterError("the group keys must be distinct")
        self.by = by
        self.keys = list(keys)
        self.releases = list(releases)
        self.epsilon = float(epsilon)
        self.privacy_unit = privacy_unit
        self.key_selection = key_selection

    def with_labels(self, column=None, units=None, source=None) -> GroupedRelease:
        """This grouped release with every group's release described (:meth:`Release.with_labels`:
        the column's name, units and input file; a copy, the answers do not change)."""
        labelled = copy.copy(self)
        labelled.releases = [release.with_labels(column, units, source) for release in self.releases]
        return labelled

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator:
        return iter(self.keys)

    def items(self) -> list[tuple[Any, Release]]:
        return list(zip(self.keys, self.releases))

    def __getitem__(self, key) -> Release:
        for k, release in zip(self.keys, self.releases):
            if k == key or _label(k) == _label(key):
                return release
        raise ParameterError(f"{excerpt(repr(key))} is not one of the declared groups of {self.by!r}")

    @property
    def delta(self) -> float:
        """The delta spent: the private key selection's (if any) plus the largest group's."""
        chosen = 0.0 if self.key_selection is None else float(self.key_selection["delta"])
        return chosen + max((r.delta for r in self.releases), default=0.0)

    # ----------------------------------------------------------------- tables and files
    def to_pandas(self, *, alpha: float = 0.05):
        """A long table, one row per (group, bin): group, bin, lo, hi, count, stderr and the
        (1 - alpha) interval of each bin count (stderr and interval NaN where not exact); on a
        categorical domain lo and hi are NaN and a column ``category`` holds the labels."""
        try:
            import pandas as pd  # noqa: PLC0415
        except ImportError:
            raise DPRangeError("to_pandas needs pandas: pip install 'dprange[io]'") from None
        parts = []
        for key, release in self.items():
            hist = release.histogram()
            categorical = release.domain.categorical
            edges = np.full(release.n + 1, np.nan) if categorical else release.domain.edges
            if release.exact_error_bars:
                lower, upper = hist.confidence_interval(alpha)
                stderr = np.asarray(hist.stderr, dtype=float)
            else:
                lower = upper = stderr = np.full(release.n, np.nan)
            parts.append(
                pd.DataFrame(
                    {
                        "group": [key] * release.n,
                        "bin": np.arange(release.n),
                        "lo": edges[:-1],
                        "hi": edges[1:],
                        **({"category": release.domain.bin_labels()} if categorical else {}),
                        "count": np.asarray(hist.value, dtype=float),
                        "stderr": stderr,
                        "lower": lower,
                        "upper": upper,
                    }
                )
            )
        if not parts:  # private keys, none kept
            return pd.DataFrame(columns=["group", "bin", "lo", "hi", "count", "stderr", "lower", "upper"])
        return pd.concat(parts, ignore_index=True)

    def to_dict(self, *, alpha: float = 0.05) -> dict:
        """JSON-ready: the grouping, the total privacy spend and each group's release."""
        out = {
            "dprange_grouped_release": GROUPED_FORMAT,
            "by": self.by,
            "epsilon": self.epsilon,
            "privacy_unit": self.privacy_unit,
            "groups": [{"key": key, "release": r.to_dict(alpha=alpha)} for key, r in self.items()],
        }
        if self.key_selection is not None:
            out["key_selection"] = self.key_selection
        return out

    def to_json(self, path=None, *, alpha: float = 0.05):
        """The JSON text, or write it to ``path`` (atomically) and return the path."""
        text = json.dumps(self.to_dict(alpha=alpha), allow_nan=False)
        if path is None:
            return text
        return write_atomically(os.fspath(path), lambda fh: fh.write(text))

    @classmethod
    def from_dict(cls, data) -> GroupedRelease:
        """The grouped release of :meth:`to_dict`, or DataError (one line) if malformed."""
        if not isinstance(data, dict) or data.get("dprange_grouped_release") != GROUPED_FORMAT:
            raise DataError("this is not a dprange grouped release (format 1)")
        groups = data.get("groups")
        chosen = data.get("key_selection")
        if chosen is not None and not (isinstance(chosen, dict) and _is_probability(chosen.get("delta"))):
            raise DataError("the saved key selection is not a mapping with its delta; the file is corrupt")
        if not isinstance(groups, list) or not (groups or chosen) or not all(isinstance(g, dict) for g in groups):
            raise DataError("the saved grouped release has no groups; the file is corrupt")
        epsilon = data.get("epsilon")
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon):
            raise DataError("the saved grouped release's epsilon is not a number; the file is corrupt")
        unit = data.get("privacy_unit")
        if unit is not None and not isinstance(unit, dict):
            raise DataError("the saved privacy unit is not a mapping; the file is corrupt")
        keys = [g.get("key") for g in groups]
        if not all(isinstance(k, (str, int, float)) for k in keys):
            raise DataError("a saved group key is not a string or a number; the file is corrupt")
        releases = [Release.from_dict(g.get("release")) for g in groups]
        if sum(r.epsilon for r in releases) > epsilon * len(releases) or any(r.epsilon > epsilon for r in releases):
            raise DataError("a saved group spent more than the grouped release's epsilon; the file is corrupt")
        try:
            return cls(str(data.get("by")), keys, releases, float(epsilon), unit, key_selection=chosen)
        except ParameterError as exc:
            raise DataError(f"the saved grouped release is invalid: {exc}") from None

    @classmethod
    def from_json(cls, text_or_path) -> GroupedRelease:
        """Read :meth:`to_json`'s text, or the file at a path."""
        text = str(text_or_path)
        if not text.lstrip().startswith("{"):
            try:
                with open(text, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise DataError(f"cannot read {excerpt(repr(str(text_or_path)), 80)}: {exc.strerror}") from None
        try:
            data = json.loads(text)
        except ValueError:
            raise DataError("the grouped release is not valid JSON") from None
        return cls.from_dict(data)

    # ----------------------------------------------------------------- plot
    def plot(
        self,
        path: str | IO[bytes],
        *,
        alpha: float = 0.05,
        columns: int = 3,
        column: str | None = None,
        units: str | None = None,
    ) -> str | IO[bytes]:
        """Small multiples in the figures' one style (:mod:`dprange.answers.plot_style`): one
        panel per group (its counts per bin with (1 - alpha) error bars), shared axes, the column
        name and units on the value axis, saved as a PNG."""
        plt = style.pyplot()
        first = self.releases[0] if self.releases else None
        column, units = style.describe_column(first, column, units)
        cols = max(1, min(columns, len(self)))
        rows = max(1, -(-len(self) // cols))  # no panel when no private key was kept
        with style.drawing(plt):
            size = (3.4 * cols, 2.6 * rows + 0.6)
            fig, axes = plt.subplots(rows, cols, figsize=size, dpi=style.DPI, sharex=True, sharey=True, squeeze=False)
            for ax, (key, release) in zip(axes.ravel(), self.items()):
                _panel(ax, release, alpha)
                ax.set_title(style.plain(f"{self.by} = {key}"), fontsize=9)
            for ax in axes.ravel()[len(self) :]:
                ax.set_visible(False)
            for ax in axes[-1]:
                ax.set_xlabel(style.axis_label(column, units))
            for ax in axes[:, 0]:
                ax.set_ylabel("estimated count")
            what = f"Histogram of {style.plain(column)}" if column else "Histograms"
            fig.suptitle(f"{what} by {style.plain(self.by)}: {len(self)} groups, ε = {self.epsilon:g} in all")
            note = f"Error bars: {100 * (1 - alpha):g}% intervals."
            fig.text(0.01, 0.01, note, fontsize=8, color=style.CAPTION_COLOUR)
            fig.tight_layout(rect=(0, 0.04, 1, 1))
            fig.savefig(path, format="png")
            plt.close(fig)
        return path

    def __repr__(self) -> str:
        return f"GroupedRelease(by={self.by!r}, groups={len(self)}, epsilon={self.epsilon})"


def _panel(ax, release: Release, alpha: float) -> None:
    hist = release.histogram()
    categorical = release.domain.categorical  # bars on positions, the categories as ticks
    edges = np.arange(release.n + 1) - 0.5 if categorical else np.asarray(release.domain.edges, dtype=float)
    draw_bars(ax, edges, np.asarray(hist.value, dtype=float), hist if release.exact_error_bars else None, alpha)
    if categorical:
        labels = [style.plain(str(label)) for label in release.domain.bin_labels()]
        rotate = len(labels) > 4
        ax.set_xticks(np.arange(release.n), labels, rotation=45 if rotate else 0, ha="right" if rotate else "center")


def _is_probability(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value < 1


def _label(key) -> str:
    return str(key)
