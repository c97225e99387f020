"""Engines: how raw values become the int64 counts of a public domain (docs/architecture.md,
"Add an engine").  Everything after the counts (measure, infer, answer) is shared.

* :mod:`dprange.engines.frames`: one column of a pandas / polars / pyarrow table (``column=``).
* :mod:`dprange.engines.local`: CSV / Parquet files, folders and globs counted batch by
  batch in bounded memory (:func:`stream_histogram`).
"""

from .frames import select_column
from .local import DEFAULT_BATCH_ROWS, expand_inputs, file_batches, merge_counts, stream_histogram

__all__ = ["DEFAULT_BATCH_ROWS", "expand_inputs", "file_batches", "merge_counts", "select_column", "stream_histogram"]
