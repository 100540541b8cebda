"""The input of a run: numbered lines, read in chunks (a -t record is read in C, with the
rest of its chunk: :mod:`fastsubs.pipeline.formats`).

A run's input is handed out in chunks whose boundaries depend on the input alone, not on
the number of workers: blocks of CHUNK_LINES lines counted from the first line, except
that the blocks that start within the last TAIL_LINES lines are handed out
TAIL_CHUNK_LINES lines at a time (a Parquet dataset's parts are chunks too, with sizes of
their own: :data:`fastsubs.pipeline.parquet.PART_BLOCKS`), so that at the end of a parallel run every process has
small chunks left to take and they finish together.  Each chunk's output is one piece of
the output file (one gzip member of a compressed one), so the output's bytes are the same
for any ``--workers``; a resumed run starts at a block boundary (its partial output records
only those), so its chunks, and its bytes, are those of an uninterrupted run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import BinaryIO

from fastsubs.errors import QueryInputError
from fastsubs.pipeline.long_lines import LONG_LINE_BYTES, Line, spill
from fastsubs.pipeline.textio import DECOMPRESSION_ERRORS, read_failure

#: Input lines in a chunk.
CHUNK_LINES = 32
#: Lines at the end of an input given out in chunks of TAIL_CHUNK_LINES, so that the
#: processes of a parallel run finish together instead of waiting for one worker's last
#: whole chunk (docs/performance.md, "Tuning"); 128 lines are two small chunks each for 16
#: processes.  The input is read this far ahead, so output from a pipe that is still open
#: lags it by as many lines.
TAIL_LINES = 128
TAIL_CHUNK_LINES = 4
#: What some editors write at the start of a UTF-8 file.
UTF8_BOM = b"\xef\xbb\xbf"

Chunk = list[tuple[int, Line]]


@dataclass(frozen=True)
class Blocks:
    """How an input is cut into chunks: blocks of ``lines`` lines, those that start within
    the last ``tail_lines`` lines cut into ``tail_chunk_lines``."""

    lines: int = CHUNK_LINES
    tail_lines: int = TAIL_LINES
    tail_chunk_lines: int = TAIL_CHUNK_LINES


#: The chunks of the text outputs.
TEXT_BLOCKS = Blocks()


@dataclass
class InputLines:
    """The lines of an input, numbered from 1, without the UTF-8 byte-order mark an editor
    may have put at its start (it would be part of the first token, a word the model lacks);
    reading stops at the first line that cannot be read (damaged compressed data), which
    :meth:`chunks` keeps in ``failure`` so that every line before it is still processed and
    written.  With ``spill`` (which gives a
    directory), a line longer than LONG_LINE_BYTES is read into a file there, not into
    memory (:mod:`fastsubs.pipeline.long_lines`)."""

    stream: BinaryIO
    source: str
    blocks: Blocks = TEXT_BLOCKS
    read: int = 0
    spill: Callable[[], str] | None = None
    failure: QueryInputError | None = field(default=None, init=False)

    def __iter__(self) -> Iterator[tuple[int, Line]]:
        while True:
            try:
                start = self.stream.readline(LONG_LINE_BYTES)
                long = len(start) == LONG_LINE_BYTES and not start.endswith(b"\n")
                if self.read == 0:
                    start = start.removeprefix(UTF8_BOM)
                line: Line = start
                if long:
                    line = spill(start, self.stream, self.spill()) if self.spill else start + self.stream.readline()
            except DECOMPRESSION_ERRORS as error:
                raise QueryInputError(self.source, self.read + 1, read_failure(error)) from None
            if not line:
                return
            self.read += 1
            yield self.read, line

    def first(self, count: int) -> Iterator[Line]:
        """The next ``count`` lines (fewer at the end), for checking a resumed run's input."""
        return (line for _, line in islice(self, count))

    def chunks(self) -> Iterator[Chunk]:
        """The rest of the lines in chunks (see the module's docstring), from a block's start
        or (a dataset resumed after one of its tail's parts) from within a block: its rest is
        the first block, so the blocks after it start where an uninterrupted run's do.

        The input is read up to a block and a tail's lines ahead of the chunks given out,
        so the end is seen coming.
        """
        size, tail, tail_size = self.blocks.lines, self.blocks.tail_lines, self.blocks.tail_chunk_lines
        numbered = iter(self)
        ahead: deque[tuple[int, Line]] = deque()
        ended = False
        block_size = size - self.read % size  # the rest of the block the next line is in
        while True:
            while not ended and len(ahead) < size + tail:
                try:
                    ahead.append(next(numbered))
                except StopIteration:
                    ended = True
                except QueryInputError as error:
                    self.failure = error
                    ended = True
            if not ahead:
                return
            block = [ahead.popleft() for _ in range(min(block_size, len(ahead)))]
            block_size = size
            if ended and len(block) + len(ahead) <= tail:
                for first in range(0, len(block), tail_size):
                    yield block[first:first + tail_size]
            else:
                yield block


def numbered_chunks(stream: BinaryIO, source: str = "<input>", blocks: Blocks = TEXT_BLOCKS) -> Iterator[Chunk]:
    """Lines of ``stream`` (any length) with 1-based numbers, in chunks; a line that cannot
    be read raises QueryInputError after the chunks before it."""
    lines = InputLines(stream, source, blocks)
    yield from lines.chunks()
    if lines.failure is not None:
        raise lines.failure
