"""``--format parquet``: the substitutes as a dataset that pandas, Dask, DuckDB, Polars and
Spark read directly, written in part files by the processes that search.

The C core makes a chunk's positions into numbers, not text (``Render.COLUMNS``:
``kernel/render_layout.h``'s columns, packed as ``kernel/chunk.h`` says), and this module hands
them to Apache Arrow (``pyarrow``, the reference implementation of Parquet that the other
readers agree with) without a Python loop per position: one row per position, its
substitutes as list columns.  A chunk of the input (a block of :data:`PART_BLOCKS`'s lines)
is one part file, ``part-<first input line>.parquet``, written by the process that searched
it, a row group per :data:`ROW_GROUP_LINES` input lines so that what a worker holds stays
small; the writing process only publishes the finished parts in input order
(:class:`fastsubs.query.output_files.PartDirectory`, by the names of :mod:`fastsubs.pipeline.parts`).
The schema and how to read it back are in docs/output-formats.md.

Encodings: the words through a dictionary (each distinct word once per row group), the
float64 scores split into byte streams before zstd (the bytes of equal significance
together, which compresses what a float's low bytes share), all columns zstd.

pyarrow is an optional extra (``pip install '.[parquet]'``): only this module imports it,
and only a parquet run imports this module.
"""

from __future__ import annotations

import ctypes
import os
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from fastsubs._kernel import RENDER
from fastsubs.core import Core
from fastsubs.errors import errors_named, missing_extra
from fastsubs.options import QueryOptions
from fastsubs.pipeline.lines import Blocks
from fastsubs.pipeline.parts import PART_NAME, PART_TEMPORARY_PREFIX

# Arrow's allocator is chosen as its library loads: the C library's malloc, not mimalloc,
# which keeps what it has freed in each process (keep_memory_small; a choice made in the
# environment stays).
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as error:  # the run stops before it starts: see require_pyarrow
    pa = pq = None
    _MISSING = str(error)

#: A part file holds a block of 1,024 input lines (about 12,000 positions, a few MB at
#: -n 100), so a corpus of 100M tokens is a few thousand parts; the blocks that start
#: within the last 2,048 lines are cut into 128-line parts, so that the processes of a
#: parallel run finish together.
PART_BLOCKS = Blocks(lines=1024, tail_lines=2048, tail_chunk_lines=128)
#: Input lines per row group: what a process holds of a part before writing it out.
ROW_GROUP_LINES = 128

#: Positions a row group of a long line's windows holds at least (fastsubs/pipeline/long_lines.py): a
#: row group a window (512 positions) would be 20,000 in the part of a 50 MB line, and the
#: writer keeps a few KiB for each until the part is closed (3 KiB for a 3-column table,
#: measured); these hold some 8 MB of numbers at -n 100 while they gather.
LONG_LINE_ROW_GROUP_ROWS = 4096

#: Words gathered at a time into a string column (Vocabulary.strings).
GATHER_IDS = 16384
#: glibc's mallopt() parameter of the size from which malloc maps a block on its own.
M_MMAP_THRESHOLD = -3

#: One position of the places column: kernel/render_layout.h's ``PlaceRow`` (signed integer fields),
#: each field at the offset and of the size the core has it (``fastsubs._kernel.RENDER``).
PLACE_ROW = np.dtype({"names": [name for name, _, _ in RENDER["place_row"]],
                      "formats": [f"=i{size}" for _, _, size in RENDER["place_row"]],
                      "offsets": [offset for _, offset, _ in RENDER["place_row"]],
                      "itemsize": RENDER["place_row_bytes"]})
#: The packed columns in kernel/render_layout.h's order, with their item types, as the core has
#: them (``RENDER["columns"]``: name, numpy kind, item bytes; kind ``V`` is a place row).
COLUMNS: tuple[tuple[str, np.dtype], ...] = tuple(
    (name, PLACE_ROW if kind == "V" else np.dtype(f"<{kind}{size}")) for name, kind, size in RENDER["columns"])
#: The length of each column, in bytes, that frames a chunk's columns (before them, in their order).
COLUMN_LENGTH = np.dtype(RENDER["column_length"])


def keep_memory_small() -> None:
    """What a parquet run's processes allocate goes back to the system once freed, so each
    stays near a text run's (the memory figures under "Parquet datasets" in
    docs/performance.md): Arrow
    allocates from the C library's malloc (set above, before it loads), and glibc's malloc
    maps every block over 128 KiB on its own (its threshold otherwise grows as blocks are
    freed, which then stay in its heap).  For the process and the workers it forks."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    except (OSError, AttributeError):
        pass  # not glibc: its own policy


#: How the command line asks for a dataset: what its message says when pyarrow is missing.
FORMAT_FLAG = "--format parquet"


def require_pyarrow(asked_by: str, extra: str) -> None:
    """A one-line error when pyarrow is missing, naming what the user asked for it with
    (``--format parquet``, ``index.table()``: a user who called a function was never
    told of the flag) and the install line of the extra that its documents name."""
    if pa is None:
        raise missing_extra(f"{asked_by} needs pyarrow", extra, _MISSING)


def schema(options: QueryOptions) -> Any:
    """The columns of a dataset written with ``options`` (docs/output-formats.md).  Text
    fields are strings where the input's bytes are UTF-8, as JSON lines writes them
    otherwise (each undecodable byte as ``\\xHH``), with the bytes themselves in
    ``<field>_bytes`` (null where the text is UTF-8)."""
    fields = [pa.field("sentence", pa.int64(), nullable=False)]
    if options.targets:
        fields += [pa.field("name", pa.string()), pa.field("name_bytes", pa.binary()),
                   pa.field("id", pa.string()), pa.field("id_bytes", pa.binary())]
    fields += [pa.field("position", pa.int64(), nullable=False),
               pa.field("word", pa.string()), pa.field("word_bytes", pa.binary()),
               pa.field("substitutes", pa.list_(pa.string())), pa.field("lp", pa.list_(pa.float64()))]
    if options.normalize:
        fields.append(pa.field("p", pa.list_(pa.float64())))
    if options.sample is not None:
        fields.append(pa.field("samples", pa.list_(pa.string())))
    return pa.schema(fields)


def _unpacked(data: bytes) -> dict[str, np.ndarray]:
    """The columns of a chunk's packed numbers (kernel/chunk.h), as numpy views of ``data``."""
    lengths = np.frombuffer(data, COLUMN_LENGTH, len(COLUMNS))
    columns, at = {}, lengths.nbytes
    for (name, dtype), length in zip(COLUMNS, lengths.tolist()):
        columns[name] = np.frombuffer(data, dtype, offset=at, count=length // dtype.itemsize)
        at += length
    return columns


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """Arrow offsets (int32) of consecutive items of these lengths."""
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _strings(offsets: np.ndarray, data: np.ndarray | bytes, kind: Any = None, valid: np.ndarray | None = None) -> Any:
    """An Arrow string (``kind``) array of UTF-8 ``data`` cut at ``offsets`` (no copy, no
    check), null where ``valid`` is False.

    Every array here is built from its buffers, never by pyarrow's converters (``pa.array``)
    or compute functions (take, cast): the first call of either makes a process keep
    memory for good, more than it searches with (docs/performance.md, "Tuning")."""
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(kind or pa.string(), len(offsets) - 1,
                                 [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)])


def _numbers(values: np.ndarray, kind: Any) -> Any:
    """An Arrow array of ``kind`` holding ``values`` (numpy's of the same item type)."""
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])


def _text(raw: np.ndarray, lengths: np.ndarray, not_utf8: np.ndarray) -> tuple[Any, Any]:
    """A text field's string column and its ``_bytes`` column (null where the text is UTF-8)."""
    count = len(lengths)
    offsets = _offsets(lengths)
    if not not_utf8.any():
        return _strings(offsets, raw), pa.nulls(count, pa.binary())
    values = [raw[start:end].tobytes() for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    shown = [value.decode("utf-8", "backslashreplace").encode() for value in values]
    bad = not_utf8 != 0
    kept = [value for value, odd in zip(values, bad.tolist()) if odd]
    kept_lengths = np.zeros(count, np.int64)
    kept_lengths[bad] = [len(value) for value in kept]
    return (_strings(_offsets(np.array([len(value) for value in shown], np.int64)), b"".join(shown)),
            _strings(_offsets(kept_lengths), b"".join(kept), pa.binary(), bad))


class Vocabulary:
    """The index's words by id, as the bytes and offsets the substitutes' string columns
    are gathered from with numpy."""

    def __init__(self, index: Core) -> None:
        words = [index.word(i) for i in range(index.vocab_size)]
        self.lengths = np.array([len(word) for word in words], np.int64)
        self.starts = np.zeros(len(words) + 1, np.int64)
        np.cumsum(self.lengths, out=self.starts[1:])
        self.data = np.frombuffer(b"".join(words), np.uint8)

    def strings(self, ids: np.ndarray) -> Any:
        """The words of ``ids``, as an Arrow string array.  Gathered GATHER_IDS words at a
        time: the index arrays of a gather take 16 bytes per byte gathered."""
        lengths = self.lengths[ids]
        offsets = _offsets(lengths)
        data = np.empty(int(offsets[-1]), np.uint8)
        for first in range(0, len(ids), GATHER_IDS):
            last = min(first + GATHER_IDS, len(ids))
            begin, end = int(offsets[first]), int(offsets[last])
            # byte k of the result is byte k - offsets[i] + starts[ids[i]] of the vocabulary, for its word i
            shift = np.repeat(self.starts[ids[first:last]] - offsets[first:last], lengths[first:last])
            data[begin:end] = self.data[np.arange(begin, end, dtype=np.int64) + shift]
        return _strings(offsets, data)


#: Each open index's Vocabulary, kept as long as the index is (:func:`vocabulary_of`).
_vocabularies: weakref.WeakKeyDictionary[Core, Vocabulary] = weakref.WeakKeyDictionary()


def vocabulary_of(index: Core) -> Vocabulary:
    """The :class:`Vocabulary` of ``index``, made once per open index: for every part a
    process writes with it, every table made from it."""
    found = _vocabularies.get(index)
    if found is None:
        found = _vocabularies[index] = Vocabulary(index)
    return found


def table(data: bytes, vocabulary: Vocabulary, options: QueryOptions) -> Any:
    """A chunk's rows (``Render.COLUMNS`` output) as an Arrow table of :func:`schema`."""
    columns = _unpacked(data)
    places = columns["places"]
    listed = pa.py_buffer(_offsets(places["listed"]))
    count = len(places)

    def word_lists(ids: np.ndarray, offsets: Any) -> Any:
        return pa.ListArray.from_buffers(pa.list_(pa.string()), count, [None, offsets],
                                         children=[vocabulary.strings(ids)])

    def number_lists(values: np.ndarray) -> Any:
        return pa.ListArray.from_buffers(pa.list_(pa.float64()), count, [None, listed],
                                         children=[_numbers(values, pa.float64())])

    row: dict[str, Any] = {"sentence": _numbers(places["line"], pa.int64())}
    if options.targets:
        row["name"], row["name_bytes"] = _text(columns["names"], places["name_len"], places["not_utf8"] & 2)
        row["id"], row["id_bytes"] = _text(columns["record_ids"], places["id_len"], places["not_utf8"] & 4)
    row["position"] = _numbers(places["position"], pa.int64())
    row["word"], row["word_bytes"] = _text(columns["words"], places["word_len"], places["not_utf8"] & 1)
    row["substitutes"] = word_lists(columns["substitutes"], listed)
    row["lp"] = number_lists(columns["scores"])
    if options.normalize:
        row["p"] = number_lists(columns["probabilities"])
    if options.sample is not None:
        row["samples"] = word_lists(columns["draws"], pa.py_buffer(_offsets(places["drawn"])))
    return pa.Table.from_arrays(list(row.values()), schema=schema(options))


class PartFiles:
    """Where the processes of a run write their parts: the dataset's directory being built
    (OUT.partial).  Each process that searches keeps one, with its index's vocabulary."""

    def __init__(self, directory: str | os.PathLike[str], options: QueryOptions) -> None:
        require_pyarrow(FORMAT_FLAG, "parquet")
        keep_memory_small()
        self.directory = Path(directory)
        self.options = options
        self.schema = schema(options)
        self.row_group_lines = ROW_GROUP_LINES
        self._vocabulary: Vocabulary | None = None

    def writer(self, index: Core, first_line: int) -> PartWriter:
        self._vocabulary = vocabulary_of(index)
        return PartWriter(self, first_line)


class PartWriter:
    """One part, written under a temporary name: row groups as they are searched, then
    closed and flushed to disk whole (:meth:`close` gives its temporary path)."""

    def __init__(self, parts: PartFiles, first_line: int) -> None:
        self.parts = parts
        self.name = PART_NAME.format(first_line)
        self.path = parts.directory / f"{PART_TEMPORARY_PREFIX}{self.name}"
        try:  # a stop signal while the writer starts (its file made, itself not yet ours to abandon)
            self._writer = pq.ParquetWriter(self.path, parts.schema, compression="zstd", use_dictionary=[
                "word", "name", "id", "substitutes.list.element", "samples.list.element"],
                use_byte_stream_split=["lp.list.element", "p.list.element"], store_schema=False)
        except BaseException:
            self._remove()
            raise
        self._held: list[Any] = []  # a long line's windows' rows not yet written
        self._held_rows = 0

    def add(self, data: bytes, window: bool = False) -> None:
        """The rows of ``Render.COLUMNS`` output, as a row group (none: nothing to add); those
        of a long line's ``window`` are held until LONG_LINE_ROW_GROUP_ROWS are."""
        assert self.parts._vocabulary is not None
        rows = table(data, self.parts._vocabulary, self.parts.options)
        if window:
            self._held.append(rows)
            self._held_rows += rows.num_rows
            if self._held_rows >= LONG_LINE_ROW_GROUP_ROWS:
                self._write_held()
            return
        self._write_held()
        self._write(rows)

    def _write_held(self) -> None:
        if self._held:
            self._write(pa.concat_tables(self._held))
        self._held, self._held_rows = [], 0

    def _write(self, rows: Any) -> None:
        if rows.num_rows:
            with errors_named(str(self.path)):  # a full disk, say: named, as every output's errors are
                self._writer.write_table(rows)

    def close(self) -> str:
        self._write_held()
        with errors_named(str(self.path)):
            self._writer.close()
            descriptor = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        return str(self.path)

    def abandon(self) -> None:
        """Drop the part (the run stops with an error)."""
        try:
            self._writer.close()
        finally:
            self._remove()

    def _remove(self) -> None:
        self.path.unlink(missing_ok=True)

