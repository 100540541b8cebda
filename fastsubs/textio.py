"""Opening files by extension: ``.gz``, ``.bz2`` and ``.xz`` are (de)compressed transparently.

Both the indexer (ARPA models) and the query side (corpora in, substitutes out) open
files through here, always in binary mode.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import zlib
from typing import BinaryIO

#: The opener of each compressed format, by the extension that asks for it.
_OPENERS = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}

#: What reading a damaged or truncated compressed stream raises.
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


def compression(path: str | os.PathLike[str]) -> str | None:
    """The compressed format ``path``'s name asks for ("gz", "bz2", "xz"), or None for a plain file."""
    extension = os.path.splitext(os.fspath(path))[1][1:].lower()  # "" or what follows the dot
    return extension if extension in _OPENERS else None


def open_binary(path: str | os.PathLike[str], mode: str = "rb") -> BinaryIO:
    """Open ``path`` in binary ``mode`` ("rb" or "wb"), compressing by its extension."""
    kind = compression(path)
    if kind is None:
        return open(path, mode)  # type: ignore[return-value]
    return _OPENERS[kind](path, mode)  # type: ignore[no-any-return]


def compressing_writer(raw: BinaryIO, like: str | os.PathLike[str]) -> BinaryIO | None:
    """A writer compressing into the open file ``raw`` in the format ``like``'s name asks for.

    Each writer makes one self-contained gzip member, bz2 stream or xz stream, ended by
    its ``close()``, which leaves ``raw`` open: members written one after the other form
    one valid file, which is how a long output is written in pieces that can be resumed.
    Nothing varies between runs (a gzip header carries no name and no time, as with
    ``gzip -n``), so the same data gives the same bytes whatever the file is called.  None for a plain file: write to ``raw`` itself.
    """
    kind = compression(like)
    if kind == "gz":
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
    if kind == "bz2":
        return bz2.BZ2File(raw, "wb")  # type: ignore[return-value]
    if kind == "xz":
        return lzma.LZMAFile(raw, "wb")  # type: ignore[return-value]
    return None


def read_failure(error: BaseException) -> str:
    """What went wrong reading a file, in words, for an error line that names the file and line."""
    if isinstance(error, EOFError):
        return "the compressed data ends too early (truncated file?)"
    if isinstance(error, (zlib.error, lzma.LZMAError, gzip.BadGzipFile)) or (
            isinstance(error, OSError) and error.errno is None):
        return f"the compressed data is damaged ({error})"
    return f"cannot read ({getattr(error, 'strerror', None) or error})"
