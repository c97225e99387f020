"""CSV read in large byte blocks, each parsed by pyarrow on every core (bounded memory).

pyarrow's streaming CSV reader (``open_csv``) parses on one thread; its whole-file reader
(``read_csv``) uses every core but holds the file.  This reader takes the middle way: the
file is read in blocks of ``block_bytes`` bytes, each cut after its last newline (the tail
is carried to the next block), and each block is parsed by ``pyarrow.csv.read_csv`` on an
in-memory buffer with ``use_threads=True``.  Memory is one reused buffer of a block,
pyarrow's copy of the block being parsed and the parsed column of a few blocks, whatever
the file.

Cutting at a newline is exact only where a newline always ends a row: a block holding a
quote character (a quoted field may hold a newline) or a lone carriage return (a row ended
by CR alone) raises :class:`BlockFallback` and the caller reads the file with the streaming
reader instead.  Parse and convert options are those of the streaming reader, so blank
lines, missing markers and conversion failures behave the same; rows are counted per block
so that messages name the row from the file's start (header = row 1).
"""

from __future__ import annotations

from collections.abc import Iterator

#: Bytes per block at the default batch size (16 MiB: about 800,000 rows of a two-column
#: numeric file).  Smaller blocks than the largest let the next block's parse overlap the
#: count of this one over more of the file (measured: docs/engines.md).
DEFAULT_BLOCK_BYTES = 1 << 24


#: The smallest and largest blocks the default rule picks (tests pass smaller ones).
MIN_BLOCK_BYTES = 1 << 20


MAX_BLOCK_BYTES = 1 << 26


class BlockFallback(Exception):
    """The file may hold a newline inside a row (quotes, CR line ends): use the streaming reader."""


class BlockHasNul(Exception):
    """A block holds a NUL byte: the file is not text (the caller refuses it)."""


def default_block_bytes(batch_rows: int) -> int:
    """Block bytes for a batch size in rows: 16 bytes a row, between 1 MiB and 64 MiB."""
    return max(MIN_BLOCK_BYTES, min(MAX_BLOCK_BYTES, 16 * batch_rows))


def _check_cuttable(buf: bytearray, start: int, stop: int) -> None:
    """Raise BlockFallback unless every newline of ``buf[start:stop]`` ends a row, and
    BlockHasNul where it holds a NUL byte (so that a count read in blocks has seen every byte)."""
    if buf.find(b"\x00", start, stop) != -1:  # cost: one memchr pass over the block
        raise BlockHasNul
    if buf.find(b'"', start, stop) != -1:  # cost: one memchr pass over the block
        raise BlockFallback
    if buf.find(b"\r", start, stop) != -1 and buf.count(b"\r", start, stop) != buf.count(b"\r\n", start, stop):
        raise BlockFallback


def raw_blocks(path: str, block_bytes: int) -> Iterator[memoryview]:
    """The file's data rows (after the header line) in blocks of whole lines of at most
    ``block_bytes`` bytes (or one line, where a line is longer); the last may lack its
    newline.  BlockFallback where cutting at newlines could split a row.

    Each block is a view of one reused buffer (no fresh pages per block): it is valid until
    the next block is asked for."""
    if block_bytes < 1:
        raise ValueError("block_bytes must be >= 1")
    buf = bytearray(block_bytes)  # cost: the one buffer of the reader, reused for every block
    view = memoryview(buf)
    filled = 0  # bytes at the front of buf: the carried tail of the previous read
    header_done = False
    with open(path, "rb") as fh:
        while True:
            got = fh.readinto(view[filled:])
            end = filled + got
            if not got:  # end of file: what is left is the last line(s), without newline
                if end:
                    _check_cuttable(buf, 0, end)
                    if header_done:
                        yield view[:end]
                return
            cut = buf.rfind(b"\n", 0, end) + 1
            if cut == 0:  # no newline yet: a line longer than the buffer grows it
                if end == len(buf):
                    buf = bytearray(buf) + bytearray(len(buf))
                    view = memoryview(buf)
                filled = end
                continue
            _check_cuttable(buf, 0, cut)
            start = 0
            if not header_done:
                start = buf.find(b"\n", 0, cut) + 1
                header_done = True
            if cut > start:
                yield view[start:cut]
            tail = bytes(view[cut:end])  # a part of one line
            view[: len(tail)] = tail
            filled = len(tail)


def arrow_owned_copy(block):
    """A copy of ``block`` in a buffer that pyarrow allocates and owns.

    pyarrow's threaded reader may drop its last reference to its input on one of its worker
    threads after ``read_csv`` has returned.  A buffer borrowed from Python (``pa.py_buffer``)
    takes the GIL to be released, and a worker that does so while the interpreter is exiting
    is stopped inside a C++ destructor, which aborts the process (SIGABRT, "terminate called
    without an active exception") after all of its work is done.  A buffer pyarrow owns is
    freed without Python."""
    import pyarrow as pa  # noqa: PLC0415

    owned = pa.allocate_buffer(len(block))
    memoryview(owned).cast("B")[:] = block  # cost: one memcpy of the block
    return owned


def parse_block(block, read_options, parse_options, convert_options):
    """One block parsed by pyarrow on every core: the table of the included column.  The
    block is handed to pyarrow as its own copy (:func:`arrow_owned_copy`)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.csv as pacsv  # noqa: PLC0415

    # cost: the parse of the block, split by pyarrow over its threads (GIL released)
    return pacsv.read_csv(
        pa.BufferReader(arrow_owned_copy(block)),
        read_options=read_options,
        parse_options=parse_options,
        convert_options=convert_options,
    )
