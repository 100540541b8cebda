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

_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}

#: What reading a damaged or truncated compressed stream raises.
DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)


def open_binary(path: str | os.PathLike[str], mode: str = "rb") -> BinaryIO:
    """Open ``path`` in binary ``mode`` ("rb" or "wb"), compressing by its extension."""
    opener = _OPENERS.get(os.path.splitext(os.fspath(path))[1].lower())
    if opener is None:
        return open(path, mode)  # type: ignore[return-value]
    return opener(path, mode)  # type: ignore[no-any-return]
