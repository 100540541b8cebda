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

A -t record is read whole: it names one target, whose search needs its whole text anyway.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
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


def _token_runs(line: LongLine) -> Iterator[list[bytes]]:
    """The tokens of ``line`` as ``bytes.split()`` cuts them, without ``<s>`` and ``</s>``
    (fastsubs/tokens.py's rule, and kernel/chunk.c's), a piece's worth at a time."""
    rest = b""  # a token that may go on in the next piece
    for piece in line.pieces():
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
    for run in _token_runs(line):
        held.extend(run)
        while len(held) - (position - base) >= size + context:
            lead = position - base
            yield b" ".join(held[:lead + size + context]), (position, lead, context, base == 0, False)
            position += size
            drop = max(position - context - base, 0)
            del held[:drop]
            base += drop
    yield b" ".join(held), (position, position - base, 0, base == 0, True)
