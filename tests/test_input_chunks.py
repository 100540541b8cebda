"""How a run's input is cut into chunks: every line once, in order, numbered; whole chunks
first and small ones at the end of a parallel run's input; a line that cannot be read
stops the chunks after every line before it."""

from __future__ import annotations

import gzip
import io

import pytest

from fastsubs.errors import QueryInputError
from fastsubs.query.runner import CHUNK_LINES, TAIL_CHUNK_LINES, InputLines, tail_lines


def _lines(count: int) -> list[bytes]:
    return [b"line %d\n" % i for i in range(count)]


@pytest.mark.parametrize("count", [0, 1, CHUNK_LINES - 1, CHUNK_LINES, 3 * CHUNK_LINES + 5, 10 * CHUNK_LINES])
@pytest.mark.parametrize("tail", [0, tail_lines(2), tail_lines(4)])
def test_chunks_hold_every_line_once_and_shrink_only_in_the_tail(count: int, tail: int) -> None:
    lines = _lines(count)
    chunks = list(InputLines(io.BytesIO(b"".join(lines)), "<test>").chunks(tail_lines=tail))
    assert [item for chunk in chunks for item in chunk] == list(enumerate(lines, start=1))
    sizes = [len(chunk) for chunk in chunks]
    assert all(sizes)
    # the last min(tail, count) lines come in chunks of TAIL_CHUNK_LINES (the very last
    # may be shorter), every chunk before them is whole but for the last of those
    whole, in_tail = list(sizes), 0
    while in_tail < min(tail, count):
        in_tail += whole.pop()
    assert in_tail == min(tail, count)
    assert all(size == TAIL_CHUNK_LINES for size in sizes[len(whole):-1])
    assert all(size == CHUNK_LINES for size in whole[:-1])
    assert all(size <= CHUNK_LINES for size in whole)


def test_a_line_that_cannot_be_read_ends_the_chunks_after_every_line_before_it() -> None:
    lines = _lines(5 * CHUNK_LINES)
    damaged = gzip.compress(b"".join(lines))
    damaged = damaged[:len(damaged) // 2]
    read = InputLines(gzip.GzipFile(fileobj=io.BytesIO(damaged)), "corpus.gz")  # type: ignore[arg-type]
    chunks = list(read.chunks(tail_lines=tail_lines(2)))
    got = [line for chunk in chunks for _, line in chunk]
    assert isinstance(read.failure, QueryInputError)
    assert "corpus.gz" in str(read.failure)
    assert read.failure.line == len(got) + 1  # the first line not read is the one named
    assert got == lines[:len(got)]
