"""A chunk of input lines through the C core into finished output: the step every run
takes, one chunk at a time, whoever drives it (``fastsubs-query``'s processes and
workers, its ``--dask`` tasks, :mod:`fastsubs.dask`'s partitions).

The chunk is tokenized, searched and written in one call into the core
(:func:`fastsubs.pipeline.formats.render_lines`); the output is finished where it was made
(compressed, or a dataset's part file), so whoever writes it only writes.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from functools import partial
from itertools import takewhile
from typing import TYPE_CHECKING, BinaryIO

from fastsubs.core import Core, Rendered
from fastsubs.errors import QueryInputError, temporary_errors_named
from fastsubs.options import QueryOptions
from fastsubs.pipeline.formats import render_lines, writes_records
from fastsubs.pipeline.lines import Chunk
from fastsubs.pipeline.long_lines import LongLine, record_window, windows
from fastsubs.pipeline.textio import Compressor
from fastsubs.stats import SearchStats

if TYPE_CHECKING:
    from fastsubs.pipeline.parquet import PartFiles


@dataclass
class ChunkResult:
    """What processing a chunk gives back: its finished output (one member, when the output
    is compressed; for a dataset, ``part``, the path of its part file, written under a
    temporary name; for a chunk with a long line, the file ``spilled``), how many of its
    lines that output covers, warnings, and the work it took.

    A bad record that is not to be skipped ends the chunk: ``error`` holds it, and
    ``data`` (``part``) the output of the ``done`` lines before it.
    """

    data: bytes
    done: int
    warnings: list[str]
    stats: SearchStats
    error: QueryInputError | None = None
    part: str | None = None
    spilled: str | None = None  # the file that holds the output instead of ``data`` (a long line's chunk)


class ChunkSink:
    """A chunk's output as it is made: in memory, or once ``spill`` is called (the chunk holds
    a long line) in a file next to that line's, compressed as it goes by ``compress``.  A
    failure to write that file (a full $TMPDIR) is a TemporaryFileError naming its
    directory, not an error of the output."""

    def __init__(self, compress: Compressor | None) -> None:
        self.compress = compress
        self.pieces: list[bytes] = []
        self.path: str | None = None
        self._file: BinaryIO | None = None
        self._member = None
        self._empty = True

    def spill(self, directory: str) -> None:
        if self._file is not None:
            return
        with temporary_errors_named(directory):
            handle, self.path = tempfile.mkstemp(dir=directory, suffix=".out")
        self._file = open(handle, "wb")
        self._member = self.compress.stream() if self.compress is not None else None
        for piece in self.pieces:
            self.add(piece)
        self.pieces = []

    def add(self, data: bytes) -> None:
        self._empty = self._empty and not data
        if self._file is None:
            self.pieces.append(data)
        else:
            with self._errors_named():
                self._file.write(self._member.compress(data) if self._member is not None else data)

    def close(self) -> bytes:
        """The output kept in memory (b"" when it is in the file at ``path``)."""
        if self._file is None:
            data = b"".join(self.pieces)
            return self.compress(data) if self.compress is not None and data else data
        with self._errors_named():
            if self._member is not None and not self._empty:  # no data, no member (as in memory)
                self._file.write(self._member.flush())
            self._file.close()
        return b""

    def abandon(self) -> None:
        if self._file is not None:
            with suppress(OSError):  # what it could not write (a full disk) is dropped
                self._file.close()
            os.unlink(self.path)  # type: ignore[arg-type]

    def _errors_named(self) -> AbstractContextManager[None]:
        return temporary_errors_named(os.path.dirname(self.path or ""))


def process_chunk(index: Core, chunk: Chunk, options: QueryOptions, source: str,
                  compress: Compressor | None = None, parts: PartFiles | None = None) -> ChunkResult:
    """The output of every line of ``chunk`` (consecutive lines), finished as the output file
    takes it (compressed by ``compress``, if any; a part file among ``parts``, for a
    dataset): the process that searched a chunk also formats and compresses it, so the
    writing process only writes.  The chunk is made in one call into the C core (a part,
    in one per row group), and one more after each bad -t record, which is skipped only
    when asked; a long line, in one per window (:mod:`fastsubs.pipeline.long_lines`), a long
    -t record in one, with the window of its text around its target, and the chunk's
    output kept in a file (``ChunkResult.spilled``).  Its stats count this
    thread's searches alone: other threads may search the same index."""
    first = chunk[0][0] if chunk else 1
    lines = [line for _, line in chunk]
    sink = ChunkSink(compress)
    step = parts.row_group_lines if parts is not None else len(lines)
    warnings = []
    stats = SearchStats()
    done = 0
    error = None
    part = None
    try:
        part = parts.writer(index, first) if parts is not None else None  # (made inside: a stop removes it)
        add = part.add if part is not None else sink.add
        add_window = partial(part.add, window=True) if part is not None else sink.add
        while done < len(lines):
            line = lines[done]
            if isinstance(line, LongLine):
                sink.spill(os.path.dirname(line.path))
                if not options.targets:
                    for text, window in windows(line, index.order):
                        rendered = render_lines(index, [text], first + done, options, window)
                        add_window(rendered.data)
                        stats.add(rendered.stats)
                    done += 1
                    continue
                rendered = _long_record(index, line, first + done, options, add)
            else:
                plain = list(takewhile(lambda line: not isinstance(line, LongLine), lines[done:done + step]))
                rendered = render_lines(index, plain, first + done, options)  # type: ignore[arg-type]
                add(rendered.data)
            stats.add(rendered.stats)
            done += rendered.done
            if rendered.problem is None:
                continue
            bad = QueryInputError(source, first + done, rendered.problem)
            if not options.skip_bad_records:
                error = bad
                break
            warnings.append(f"fastsubs-query: warning: skipped {bad}")
            done += 1
    except BaseException:
        sink.abandon()
        if part is not None:
            part.abandon()
        raise
    data = sink.close()
    if part is not None:
        return ChunkResult(b"", done, warnings, stats, error, part.close())
    return ChunkResult(data, done, warnings, stats, error, spilled=sink.path)


def _long_record(index: Core, line: LongLine, number: int, options: QueryOptions,
                 add: Callable[[bytes], None]) -> Rendered:
    """The output of a -t record longer than LONG_LINE_BYTES, given to ``add`` in bounded
    memory: the C core reads its fields and the window of its text around its target
    (:func:`fastsubs.pipeline.long_lines.record_window`); where the output shows the record
    itself, its line is copied here first, a piece at a time, with the newline that
    kernel/chunk.c adds to a record that has none."""
    text, window = record_window(line, index.order)
    rendered = render_lines(index, [text], number, options, window)
    if rendered.done and writes_records(options):
        piece = b""
        for piece in line.pieces():
            add(piece)
        if not piece.endswith(b"\n"):
            add(b"\n")
    add(rendered.data)
    return rendered
