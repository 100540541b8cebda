"""Lines of any length in bounded memory.

A plain input line longer than LONG_LINE_BYTES is never held whole: the reading thread
copies it, in pieces, into a file of its own (:func:`spill`), and the process that searches
its chunk reads it back a piece at a time and searches it in windows of WINDOW_POSITIONS
positions (:func:`windows`).  A position's terms read the order - 1 tokens on each side of
it and no more (docs/algorithm.md), so each window is handed to the C core with that many
tokens of context before and after its own (``<s>`` before the line's first, ``</s>`` after
its last), and its output is the whole line's, byte for byte.  The chunk's output goes to a
file as it is made, compressed as it goes (:class:`fastsubs.pipeline.chunks.ChunkSink`), and
is copied to the output a piece at a time; the line is counted (progress, --resume's record)
once, when the last piece of its chunk is written.

A -t record longer than LONG_LINE_BYTES is kept in a file too.  It names one target, whose
terms read the order - 1 tokens on each side of it, so the C core is given the record's
fields with those tokens of its text and the count of the others (:func:`record_window`);
the record's line, which the original's format writes before the substitutes, is copied a
piece at a time.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import BinaryIO

from fastsubs.errors import temporary_errors_named

#: A plain line longer than this is read into a file and searched in windows.  The
#: environment variable lets the tests make long lines of a few thousand bytes.
LONG_LINE_BYTES = int(os.environ.get("FASTSUBS_LONG_LINE_BYTES", 1 << 20))
#: Positions searched in one call into C for a long line: its output (some 7 KiB a
#: position at -n 100 in JSON lines) is what a process holds at once.
WINDOW_POSITIONS = int(os.environ.get("FASTSUBS_WINDOW_POSITIONS", 512))
#: Bytes read or written at once when a long line or its output is copied (a piece of a
#: line is some 50,000 tokens, some 3 MB as Python bytes objects).
PIECE_BYTES = 1 << 18
#: The start of the name of a run's temporary directory in $TMPDIR; the pid of its run follows.
SPILL_PREFIX = "fastsubs-lines-"

_MARKERS = (b"<s>", b"</s>")


@dataclass(frozen=True)
class LongLine:
    """An input line kept in the file ``path`` (``size`` bytes, its newline included)."""

    path: str
    size: int

    def __len__(self) -> int:
        return self.size

    def pieces(self) -> Iterator[bytes]:
        with open(self.path, "rb") as stream:
            while piece := stream.read(PIECE_BYTES):
                yield piece


Line = bytes | LongLine


def line_pieces(line: Line) -> Iterator[bytes]:
    """The bytes of an input line, a piece at a time."""
    if isinstance(line, LongLine):
        yield from line.pieces()
    else:
        yield line


class SpillDirectory:
    """Where a run keeps its long lines: a temporary directory in ``$TMPDIR`` made when the
    first is met (a run without one, even one killed, leaves nothing behind), removed with
    ``stack`` however the run ends.  Only SIGKILL (or a power loss) leaves one: its name holds
    the pid of its run, which holds a lock on it while it runs, and the next run removes it
    once both are gone (:func:`remove_abandoned`)."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._path: str | None = None

    def __call__(self) -> str:
        if self._path is None:
            self._path = self._stack.enter_context(_held_directory())
        return self._path


@contextmanager
def _held_directory() -> Iterator[str]:
    """A new temporary directory, locked (``flock``, which its run's end drops however it
    ends) for as long as the block runs, then removed."""
    parent = tempfile.gettempdir()
    with temporary_errors_named(parent):
        path = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-")
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with suppress(OSError):  # a file system without flock: the pid alone keeps it from other runs
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(descriptor)


def remove_abandoned() -> None:
    """Removes from ``$TMPDIR`` the temporary directories of runs killed by SIGKILL: those
    whose run's pid is gone and whose lock is free (a run on another machine that shares
    the directory holds its lock; one that has just made its directory has its pid)."""
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return  # no $TMPDIR to look in: nothing to remove
    for entry in entries:
        pid = entry.name.removeprefix(SPILL_PREFIX).split("-")[0]
        if entry.name.startswith(SPILL_PREFIX) and pid.isdigit() and not _running(int(pid)):
            _remove_unless_held(entry.path)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's
        return True
    return True


def _remove_unless_held(path: str) -> None:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # not a directory, or gone
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass  # held: its run is alive
    finally:
        os.close(descriptor)


def spill(start: bytes, stream: BinaryIO, directory: str) -> LongLine:
    """The line that begins with ``start`` (a full LONG_LINE_BYTES read from ``stream``, no
    newline yet) read to its end into a new file in ``directory``."""
    with temporary_errors_named(directory):
        handle, path = tempfile.mkstemp(dir=directory, suffix=".line")
    copy = open(handle, "wb")
    size = 0
    try:
        piece = start
        while piece:
            with temporary_errors_named(directory):  # not the reading: an input's errors are its own
                copy.write(piece)
            size += len(piece)
            if piece.endswith(b"\n"):
                break
            piece = stream.readline(PIECE_BYTES)
        with temporary_errors_named(directory):
            copy.close()
    finally:
        with suppress(OSError):
            copy.close()  # after a failed write (the run stops), what it holds is dropped
    return LongLine(path, size)


def _token_runs(pieces: Iterable[bytes]) -> Iterator[list[bytes]]:
    """The tokens of the text in ``pieces`` as ``bytes.split()`` cuts them, without ``<s>``
    and ``</s>`` (fastsubs/tokens.py's rule, and kernel/chunk.c's), a piece's worth at a time."""
    rest = b""  # a token that may go on in the next piece
    for piece in pieces:
        data = rest + piece
        tokens = data.split()
        rest = tokens.pop() if tokens and not data[-1:].isspace() else b""
        yield [token for token in tokens if token not in _MARKERS]
    if rest and rest not in _MARKERS:
        yield [rest]


Window = tuple[int, int, int, bool, bool]


def windows(line: LongLine, order: int, size: int = WINDOW_POSITIONS) -> Iterator[tuple[bytes, Window]]:
    """The windows of ``line`` in order, each as the text the C core reads (its tokens
    joined by spaces) and ``(first_position, lead, trail, at_start, at_end)``
    (kernel/chunk.h ``Window``): ``size`` positions with the ``order - 1`` tokens of context
    on each side, the last holding the rest and the closing ``</s>``."""
    context = order - 1
    held: list[bytes] = []  # tokens from ``base`` on: context, then tokens not yet searched
    base = position = 0  # the line's token held[0], and the next position to search
    for run in _token_runs(line.pieces()):
        held.extend(run)
        while len(held) - (position - base) >= size + context:
            lead = position - base
            yield b" ".join(held[:lead + size + context]), (position, lead, context, base == 0, False)
            position += size
            drop = max(position - context - base, 0)
            del held[:drop]
            base += drop
    yield b" ".join(held), (position, position - base, 0, base == 0, True)


#: A long -t record's window (kernel/chunk.h ``RecordWindow``): the tokens of its text
#: before and after those it holds.
RecordWindow = tuple[int, int]


def record_window(line: LongLine, order: int) -> tuple[bytes, RecordWindow]:
    """The -t record ``line`` as the C core reads it in bounded memory (kernel/chunk.h
    ``RecordWindow``): its first three fields (name, id, index: held, as each of its
    positions writes them), then of its text the tokens that its target's terms read, the
    ``order - 1`` on each side of it, and the number of the text's tokens before and after
    those.  The target is the index read as the core reads it (Python's ``int()``); one that
    is no whole number, or is outside the text, keeps no token, and the core says what is
    wrong.  A line of fewer than four fields is given as its tabs alone: all the core says
    of it is their number."""
    tabs, text_starts = _fields_before_text(line)
    if text_starts < 0:
        return b"\t" * tabs, (0, 0)
    with open(line.path, "rb") as stream:
        head = stream.read(text_starts)
        target = _whole_number(head.split(b"\t")[2])
        reach = order - 1  # the tokens its target's terms read on each side
        kept: list[bytes] = []
        count = 0  # tokens of the text so far
        for run in _token_runs(iter(partial(stream.read, PIECE_BYTES), b"")):
            if target is not None:
                kept.extend(run[max(target - reach - count, 0):max(target + reach + 1 - count, 0)])
            count += len(run)
    before = min(max(target - reach, 0), count) if target is not None else 0
    return head + b" ".join(kept), (before, count - before - len(kept))


def _fields_before_text(line: LongLine) -> tuple[int, int]:
    """The tabs of ``line`` up to the third, and where its fourth field (the text) starts:
    just after that tab, or -1 when the line has fewer."""
    tabs = offset = 0
    for piece in line.pieces():
        at = -1
        while tabs < 3 and (at := piece.find(b"\t", at + 1)) >= 0:
            tabs += 1
        if tabs == 3:
            return tabs, offset + at + 1
        offset += len(piece)
    return tabs, -1


def _whole_number(field: bytes) -> int | None:
    """A record's index as the core reads it (kernel/chunk.c's ``whole_number`` follows
    Python's ``int()``), or None where it is no whole number."""
    try:
        return int(field)
    except ValueError:
        return None
