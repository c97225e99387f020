"""Product domains: several public 1-D domains crossed into a k-D grid of cells.

A record with values (v_1, ..., v_k) lies in the cell (i_1, ..., i_k) where i_a is the bin of
v_a in the a-th :class:`~dprange.domain.Domain`.  The histogram is a k-D int64 array of shape
(n_1, ..., n_k); flattened in C order it is the x of the k-D mechanisms
(:mod:`dprange.multidim`).  Bad inputs follow the 1-D rules: values outside the bounds are a
DomainError unless ``clip=True``; a record with a missing value in any column is a DomainError
unless ``drop_missing=True``, which drops the whole record (from every column at once).
"""

from __future__ import annotations

import math

import numpy as np

from .domain import Domain, column_array
from .errors import DataError, DomainError, ParameterError, private

__all__ = ["ProductDomain"]


def _missing_mask(arr) -> tuple[np.ndarray, np.ndarray]:
    """(values, missing mask) of one column as :func:`column_array` gives it."""
    if isinstance(arr, np.ma.MaskedArray):
        return np.ma.getdata(arr), np.ma.getmaskarray(arr)
    if arr.dtype.kind == "f":
        return arr, np.isnan(arr)
    return arr, np.zeros(arr.shape, dtype=bool)


def _split_columns(columns, k: int) -> list:
    """The k columns of a pandas DataFrame, a pyarrow Table, a (records x k) array, or a
    sequence of columns (numpy, pandas, pyarrow)."""
    if hasattr(columns, "columns") and hasattr(columns, "iloc"):  # pandas DataFrame
        return [columns.iloc[:, a] for a in range(columns.shape[1])]
    if hasattr(columns, "column_names") and hasattr(columns, "column"):  # pyarrow Table
        return [columns.column(a) for a in range(columns.num_columns)]
    if isinstance(columns, np.ndarray) and columns.ndim == 2:
        return [columns[:, a] for a in range(columns.shape[1])]
    if isinstance(columns, (list, tuple)):
        return list(columns)
    raise ParameterError(
        f"give the {k} columns as a list of arrays, a (records x {k}) array or a DataFrame, "
        f"got {type(columns).__name__}"
    )


class ProductDomain:
    """The cross product of 1-D domains (one per column), C order: the last axis varies fastest."""

    def __init__(self, domains):
        self.domains = list(domains)
        if not self.domains:
            raise ParameterError("a product domain needs at least one 1-D domain")
        for d in self.domains:
            if not isinstance(d, Domain):
                raise ParameterError(f"every axis must be a dprange.Domain, got {type(d).__name__}")

    @property
    def ndim(self) -> int:
        return len(self.domains)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.domains)

    @property
    def size(self) -> int:
        """Number of cells."""
        return math.prod(self.shape)

    def bucketize(self, columns, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """The cell index of every record: an int64 array (k, records), row a the bin on axis a."""
        for name, flag in (("clip", clip), ("drop_missing", drop_missing)):
            if not isinstance(flag, (bool, np.bool_)):
                raise ParameterError(f"{name} must be True or False, got {flag!r}")
        parts = _split_columns(columns, self.ndim)
        if len(parts) != self.ndim:
            raise ParameterError(f"this product domain has {self.ndim} axes, got {len(parts)} columns")
        arrays = [_missing_mask(column_array(c)) for c in parts]
        lengths = {values.shape[0] for values, _ in arrays}
        if len(lengths) > 1:
            raise DataError(f"the columns have different lengths {sorted(lengths)}; give one value per record in each")
        missing = np.zeros(arrays[0][0].shape[0], dtype=bool)
        for _, mask in arrays:
            missing |= mask
        if missing.any() and not drop_missing:
            raise DomainError(
                f"{private(int(missing.sum()))} records have a missing value (NaN/None); clean them or "
                "pass drop_missing=True to drop those records"
            )
        keep = ~missing
        index = []
        for axis, (d, (values, _)) in enumerate(zip(self.domains, arrays)):
            try:
                index.append(d.bucketize(values[keep], clip=clip))
            except DomainError as exc:  # say which column: the bounds alone may not tell
                raise DomainError(f"axis {axis}: {exc}") from None
        return np.stack(index) if index[0].size else np.zeros((self.ndim, 0), dtype=np.int64)

    def histogram(self, columns, *, clip: bool = False, drop_missing: bool = False) -> np.ndarray:
        """Exact (private!) cell counts as a k-D int64 array: feed them to a mechanism."""
        index = self.bucketize(columns, clip=clip, drop_missing=drop_missing)
        flat = np.ravel_multi_index(tuple(index), self.shape) if index.shape[1] else np.zeros(0, dtype=np.int64)
        return np.bincount(flat, minlength=self.size).astype(np.int64).reshape(self.shape)

    def to_dict(self) -> dict:
        return {"kind": "product", "domains": [d.to_dict() for d in self.domains]}

    @classmethod
    def from_dict(cls, data: dict) -> ProductDomain:
        if not isinstance(data, dict) or data.get("kind") != "product" or not isinstance(data.get("domains"), list):
            raise DataError("a product domain must be a mapping with kind 'product' and a list of domains")
        return cls([Domain.from_dict(d) for d in data["domains"]])

    def __eq__(self, other) -> bool:
        return isinstance(other, ProductDomain) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"ProductDomain([{', '.join(repr(d) for d in self.domains)}])"
