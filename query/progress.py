"""A progress line on stderr for long runs: positions done, positions/s, and an ETA.

Shown only when stderr is a terminal (a log file or a pipe gets nothing); the ETA needs
the input's size, known for regular files.
"""

from __future__ import annotations

import io
import math
import os
import stat
import sys
import time
from typing import BinaryIO, TextIO

#: Seconds between redraws.
REDRAW_INTERVAL = 0.25


def input_size(stream: BinaryIO) -> int | None:
    """Bytes in the input when it is a regular file (not a pipe, not compressed)."""
    if not isinstance(stream, (io.BufferedReader, io.FileIO)):
        return None  # compressed: the bytes read are not the bytes on disk
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


class Progress:
    """Redraws ``positions, positions/s, percent, ETA`` on one terminal line."""

    def __init__(self, total_bytes: int | None, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.total_bytes = total_bytes
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
        if self.total_bytes:
            done = min(self.bytes / self.total_bytes, 1.0)
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
