"""Opening an index, for every reader of one: the published file, its metadata, its arrays.

Both readers of an index share this: the query engine (:mod:`fastsubs.query.engine`,
which reads records in place from C) and ``Index`` (:mod:`fastsubs.query.index`, the
plain Python reader).  It opens a published index sure of which file was opened
(:func:`open_published`), decodes and checks its metadata (:func:`decode_meta`) and its
whole-vocabulary arrays (:func:`check_array_checksums`).  It needs neither numpy nor
py-lmdb, so the command line's plain text run starts without them.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import msgpack

from fastsubs import format as fmt
from fastsubs.errors import DamagedIndexError, IndexVersionError, NotAnIndexError

#: Times opening is retried when a rebuild swaps the index in at that very moment.
OPEN_ATTEMPTS = 20


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


NOT_AN_INDEX_NO_META = "not a fastsubs index (no metadata; was its build interrupted?)"


def decode_meta(path: Path, raw: bytes | None) -> dict:
    """The metadata map of the index at ``path`` from its raw value, checked: magic, version, keys."""
    if raw is None:
        raise NotAnIndexError(f"{path}: {NOT_AN_INDEX_NO_META}")
    try:
        meta = msgpack.unpackb(bytes(raw))
    except Exception:
        raise DamagedIndexError(f"{path}: damaged index (metadata cannot be decoded)") from None
    if not fmt.has_magic(meta):
        raise NotAnIndexError(f"{path}: not a fastsubs index (wrong magic)")
    version = meta.get("format_version")
    if version != fmt.FORMAT_VERSION:
        newer = isinstance(version, int) and version > fmt.FORMAT_VERSION
        raise IndexVersionError(
            f"{path}: index format version {version} is {'newer' if newer else 'older'} than "
            f"this fastsubs reads ({fmt.FORMAT_VERSION}); rebuild it with this version"
            + (" or upgrade fastsubs" if newer else ""))
    missing = [k for k in fmt.META_KEYS if k not in meta]
    if missing:
        raise DamagedIndexError(f"{path}: damaged index (metadata lacks {', '.join(missing)})")
    return meta


def check_array_checksums(path: Path, meta: Mapping, array: Callable[[bytes], object]) -> None:
    """Compare each whole-vocabulary array (``array(key)``: a bytes-like value or None) with
    its CRC-32 in the metadata (when it has them).

    These arrays hold every word's scores and spelling: a flipped byte there would
    change answers silently, so it is caught at open, before any search.
    """
    expected = meta.get(fmt.ARRAY_CHECKSUMS)
    if expected is None:  # built before the arrays had checksums
        return
    for key in fmt.ARRAY_KEYS:
        if zlib.crc32(array(key) or b"") != expected.get(key.decode()):  # type: ignore[arg-type]
            raise DamagedIndexError(f"{path}: damaged index (array {key.decode()} fails its checksum; "
                                    "bytes flipped?)")


Environment = TypeVar("Environment")


def open_published(path: Path, open_environment: Callable[[str], Environment],
                   pages: Callable[[Environment], tuple[int, int]], close: Callable[[Environment], None],
                   refused: type[Exception]) -> Environment:
    """Open data.mdb read-only with ``open_environment``, sure of which file was opened and that it is whole.

    A rebuild may swap the directory at any moment (indexer/publish.py).  The file is
    identified by its inode before and after opening: equal inodes mean that very file
    was opened (a published index is never put back), so its size can be checked against
    ``pages`` (last page number, page size); a truncated file would make reads past its
    end fault (SIGBUS).  ``refused``: what ``open_environment`` raises for a file that is
    not LMDB.
    """
    data = path / "data.mdb"
    for _ in range(OPEN_ATTEMPTS):
        try:
            before = data.stat()
        except FileNotFoundError:
            raise NotAnIndexError(f"{path}: not a fastsubs index (no data.mdb in it)") from None
        try:
            env = open_environment(str(path))
        except refused as error:
            if _inode(data) != before.st_ino:
                continue
            raise DamagedIndexError(f"{path}: damaged index: data.mdb cannot be read as LMDB "
                                    f"(truncated or overwritten?) ({error})") from None
        after = data.stat() if data.exists() else None
        if after is None or after.st_ino != before.st_ino:
            close(env)
            continue
        last_page, page_size = pages(env)
        needed = (last_page + 1) * page_size
        if after.st_size < needed:
            close(env)
            raise DamagedIndexError(f"{path}: damaged index: data.mdb is truncated "
                                    f"({after.st_size:,} bytes, its pages need {needed:,})")
        return env
    raise NotAnIndexError(f"{path}: the index kept changing while being opened (rebuilt in a loop?)")
