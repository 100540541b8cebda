"""A progress line on stderr for long runs: positions done, positions/s, and an ETA.

Shown only when stderr is a terminal (a log file or a pipe gets nothing); the percent
and the ETA need the input's size, known for regular files and estimated for compressed
ones.
"""

from __future__ import annotations

import io
import math
import os
import stat
import sys
import time
from collections.abc import Callable
from typing import BinaryIO, TextIO

#: Seconds between redraws.
REDRAW_INTERVAL = 0.25


def text_size(stream: BinaryIO) -> Callable[[], float | None] | None:
    """A function giving the bytes of text in the input, when it is a regular file: its
    size, or for a compressed file (.gz, .bz2, .xz) an estimate, the text read so far
    scaled by the compressed file's size over the compressed bytes read so far (the offset
    of the file under the decompressor).  None for a pipe or a terminal."""
    try:
        descriptor = stream.fileno()
        info = os.fstat(descriptor)
    except (OSError, ValueError, AttributeError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    if isinstance(stream, (io.BufferedReader, io.FileIO)):
        return lambda: info.st_size

    def estimate() -> float | None:
        compressed_read = os.lseek(descriptor, 0, os.SEEK_CUR)
        return stream.tell() * info.st_size / compressed_read if compressed_read else None

    return estimate


def _position(stream: BinaryIO) -> int:
    """Bytes of text already read (a resumed run has skipped its first lines)."""
    try:
        return stream.tell()
    except (OSError, ValueError):
        return 0


class Progress:
    """Redraws ``positions, positions/s, percent, ETA`` on one terminal line, for the rest
    of the input ``stream`` (from where it is now)."""

    def __init__(self, stream: BinaryIO, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.text_size = text_size(stream)
        self.skipped = _position(stream) if self.text_size else 0
        self.started = time.monotonic()
        self._drawn = 0.0
        self.bytes = 0
        self.positions = 0

    @staticmethod
    def wanted(out: TextIO | None = None) -> bool:
        """True when stderr is a terminal."""
        stream = out or sys.stderr
        return hasattr(stream, "isatty") and stream.isatty()

    def advance(self, nbytes: int, positions: int) -> None:
        self.bytes += nbytes
        self.positions += positions
        now = time.monotonic()
        if now - self._drawn >= REDRAW_INTERVAL:
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self.started, 1e-9)
        line = f"{self.positions:,} positions  {self.positions / elapsed:,.0f}/s"
        total = self.text_size() if self.text_size else None
        if total:
            done = min(self.bytes / max(total - self.skipped, 1), 1.0)
            remaining = elapsed * (1 - done) / done if done > 0 else float("nan")
            line += f"  {100 * done:5.1f}%  ETA {_clock(remaining)}"
        self.out.write("\r" + line + "\x1b[K")
        self.out.flush()

    def finish(self) -> None:
        self._draw(time.monotonic())
        self.out.write("\n")
        self.out.flush()


def _clock(seconds: float) -> str:
    if math.isnan(seconds):  # nothing done yet
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"
