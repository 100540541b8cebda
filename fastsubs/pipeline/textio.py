"""Opening files by extension: ``.gz``, ``.bz2`` and ``.xz`` are (de)compressed transparently.

Both the indexer (ARPA models) and the query side (corpora in, substitutes out) open
files through here, always in binary mode; a query's compressed output is written in
members (:class:`Compressor`).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

#: The compressed formats, by the extension that asks for them.
_FORMATS = ("gz", "bz2", "xz")


def compression(path: str | os.PathLike[str]) -> str | None:
    """The compressed format ``path``'s name asks for ("gz", "bz2", "xz"), or None for a plain file."""
    extension = os.path.splitext(os.fspath(path))[1][1:].lower()  # "" or what follows the dot
    return extension if extension in _FORMATS else None


def _isal() -> Any:
    """ISA-L's gzip (``isal``), or None where it is not installed."""
    try:
        import isal.igzip

        return isal
    except ImportError:
        return None


#: The reader of each compressed format (of a path, or of a file already open).  gzip
#: through zlib, not ISA-L: on a cut file ISA-L's reader raises before it hands out the
#: text it did decompress, so the error could not name the line the damage is at.
_READERS: dict[str, Callable[..., Any]] = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}


def open_binary(path: str | os.PathLike[str], opened: BinaryIO | None = None) -> BinaryIO:
    """Open ``path`` for reading in binary, decompressing by its extension; with ``opened``,
    read its bytes from that stream (which the caller closes), not from a file of its own."""
    kind = compression(path)
    if kind is None:
        return opened if opened is not None else open(path, "rb")
    return _READERS[kind](opened if opened is not None else path, "rb")


#: What reading a damaged or truncated compressed stream raises.
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


#: Each compressed format's levels, and the one an output gets unless asked: gzip's 6 (a
#: third of level 9's time for the same size on fastsubs-query's output), bz2's 9 (its
#: time hardly depends on the level), xz's 6.
LEVELS = {"gz": range(1, 10), "bz2": range(1, 10), "xz": range(0, 10)}
DEFAULT_LEVELS = {"gz": 6, "bz2": 9, "xz": 6}


@dataclass(frozen=True)
class Compressor:
    """Makes one complete gzip member (bz2, xz stream) of some bytes: members written one
    after the other form one valid file, which is how the processes of a run each compress
    their part of the output.  Nothing varies between runs (a gzip header carries no name
    and no time), so the same data gives the same bytes in any process.

    gzip goes through ISA-L's igzip where the ``isal`` package is installed (a dependency
    where it has wheels: ~10x zlib's speed on this output at level 6's size) for levels
    1-6, else zlib (and for 7-9, which ask for more than ISA-L's smallest output: zlib's
    own); the two write different bytes for the same text, so ``library`` names the one
    used (a resumed run must use the same, OUT.json records it).
    """

    kind: str
    level: int
    library: str

    def __call__(self, data: bytes) -> bytes:
        if self.kind == "bz2":
            return bz2.compress(data, self.level)
        if self.kind == "xz":
            return lzma.compress(data, preset=self.level)
        if self.library.startswith("isal"):
            from isal import igzip

            return igzip.compress(data, _ISAL_LEVELS[self.level], mtime=0)
        member = zlib.compressobj(self.level, zlib.DEFLATED, 31)  # a gzip member with time 0
        return member.compress(data) + member.flush()

    def stream(self) -> Any:
        """An object whose ``compress(data)`` pieces and ``flush()`` make the member that this
        compressor makes of all the data at once, the same bytes (a chunk too long to hold)."""
        if self.kind == "bz2":
            return bz2.BZ2Compressor(self.level)
        if self.kind == "xz":
            return lzma.LZMACompressor(preset=self.level)
        if self.library.startswith("isal"):
            from isal import isal_zlib

            return isal_zlib.compressobj(_ISAL_LEVELS[self.level], isal_zlib.DEFLATED, 31)
        return zlib.compressobj(self.level, zlib.DEFLATED, 31)


#: ISA-L's levels 1-3 for gzip's 1-6 (its 3 writes about what zlib's 5-6 write, its 1
#: about zlib's 1-2); 7-9 are zlib's.
_ISAL_LEVELS = {1: 1, 2: 1, 3: 2, 4: 2, 5: 2, 6: 3}


def compressor(path: str | os.PathLike[str], level: int | None = None) -> Compressor | None:
    """The compressor of the format ``path``'s name asks for (None for a plain file), at
    ``level`` (None: the format's default); ValueError for a level the format lacks."""
    kind = compression(path)
    if kind is None:
        return None
    level = DEFAULT_LEVELS[kind] if level is None else level
    if level not in LEVELS[kind]:
        levels = LEVELS[kind]
        raise ValueError(f"a .{kind} output takes a compression level within {levels[0]} … {levels[-1]}")
    if kind != "gz":
        return Compressor(kind, level, {"bz2": "bz2", "xz": "lzma"}[kind])
    isal = _isal() if level in _ISAL_LEVELS else None
    if isal is not None:
        return Compressor(kind, level, f"isal {isal.__version__}")
    return Compressor(kind, level, f"zlib {zlib.ZLIB_RUNTIME_VERSION}")


def read_failure(error: BaseException) -> str:
    """What went wrong reading a file, in words, for an error line that names the file and line."""
    if isinstance(error, EOFError):
        return "the compressed data ends too early (truncated file?)"
    if isinstance(error, (zlib.error, lzma.LZMAError, gzip.BadGzipFile)) or (
            isinstance(error, OSError) and error.errno is None):
        return f"the compressed data is damaged ({error})"
    return f"cannot read ({getattr(error, 'strerror', None) or error})"


class DigestingReader(io.RawIOBase):
    """A file read once, its bytes counted and hashed (SHA-256) on the way: the provenance
    of a model that may be a pipe (a FIFO, a shell's ``<(xzcat model.arpa.xz)``), which a
    second read would block on or find empty.

    It takes a file already open, unbuffered: opening a FIFO waits for its writer, and a
    stop (Ctrl-C) that lands in that wait must not leave a half-made reader whose
    finaliser then fails on a file it never had."""

    def __init__(self, file: io.RawIOBase) -> None:
        self._file = file
        self._digest = hashlib.sha256()
        self.size = 0  # bytes read so far

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._file.readinto(buffer)
        if count:
            self._digest.update(memoryview(buffer)[:count])
            self.size += count
        return count

    def close(self) -> None:
        self._file.close()
        super().close()

    def sha256(self) -> str:
        """The hex SHA-256 of the bytes read so far (of the file, once it is read to its end)."""
        return self._digest.hexdigest()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes as they are on disk (hex), read a MiB at a time: the
    model a build read, a dataset's part a run wrote."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
