"""How a run's input is cut into chunks: every line once, in order, numbered; blocks of
CHUNK_LINES from the first line, the blocks in the last TAIL_LINES lines in small chunks;
the same boundaries when a run resumes at a block boundary; a line that cannot be read
stops the chunks after every line before it."""

from __future__ import annotations

import gzip
import io
from itertools import islice

import pytest

from fastsubs.errors import QueryInputError
from fastsubs.pipeline.lines import CHUNK_LINES, TAIL_CHUNK_LINES, TAIL_LINES, InputLines


def _lines(count: int) -> list[bytes]:
    return [b"line %d\n" % i for i in range(count)]


def boundaries(count: int, skip: int = 0) -> list[int]:
    """Where the chunks of a ``count``-line input end (line numbers), read after ``skip`` lines."""
    read = InputLines(io.BytesIO(b"".join(_lines(count))), "<test>")
    list(islice(read, skip))
    return [chunk[-1][0] for chunk in read.chunks()]


@pytest.mark.parametrize("count", [0, 1, CHUNK_LINES - 1, CHUNK_LINES, 3 * CHUNK_LINES + 5, 10 * CHUNK_LINES,
                                   TAIL_LINES + 5, TAIL_LINES + CHUNK_LINES + 7, 3 * TAIL_LINES + 3])
def test_chunks_hold_every_line_once_in_blocks_and_shrink_only_in_the_tail(count: int) -> None:
    lines = _lines(count)
    chunks = list(InputLines(io.BytesIO(b"".join(lines)), "<test>").chunks())
    assert [item for chunk in chunks for item in chunk] == list(enumerate(lines, start=1))
    for chunk in chunks:
        first, last = chunk[0][0], chunk[-1][0]
        block = (first - 1) // CHUNK_LINES
        assert (last - 1) // CHUNK_LINES == block  # no chunk crosses a block boundary
        in_tail = block * CHUNK_LINES + 1 > count - TAIL_LINES
        if in_tail:
            assert len(chunk) <= TAIL_CHUNK_LINES and (first - 1) % TAIL_CHUNK_LINES == 0
        else:  # a whole block
            assert first == block * CHUNK_LINES + 1 and last == min(count, first + CHUNK_LINES - 1)


@pytest.mark.parametrize("count", [CHUNK_LINES * 3, TAIL_LINES + 70, 3 * TAIL_LINES + 3])
def test_a_run_resumed_at_a_block_boundary_cuts_the_rest_as_an_uninterrupted_run(count: int) -> None:
    """The chunks (so the gzip members of a compressed output) after any block boundary are
    those an uninterrupted run makes there."""
    whole = boundaries(count)
    for skip in range(0, count, CHUNK_LINES):
        assert boundaries(count, skip) == [end for end in whole if end > skip]


def test_a_line_that_cannot_be_read_ends_the_chunks_after_every_line_before_it() -> None:
    lines = _lines(5 * CHUNK_LINES)
    damaged = gzip.compress(b"".join(lines))
    damaged = damaged[:len(damaged) // 2]
    read = InputLines(gzip.GzipFile(fileobj=io.BytesIO(damaged)), "corpus.gz")  # type: ignore[arg-type]
    chunks = list(read.chunks())
    got = [line for chunk in chunks for _, line in chunk]
    assert isinstance(read.failure, QueryInputError)
    assert "corpus.gz" in str(read.failure)
    assert read.failure.line == len(got) + 1  # the first line not read is the one named
    assert got == lines[:len(got)]
