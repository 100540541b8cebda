"""What a user reads about damage says what happened, once: a flipped byte in LMDB's own
structures (its meta pages, a node's key length, the header record's key) is named as
damage, not as an index of an older format or the leftover of an interrupted build, and
``verify`` names the index once.

Each test damages a copy of the demo index where LMDB keeps the thing (the layout of
LMDB 0.9's meta page and leaf nodes, as ``kernel/lmdb/mdb.c`` defines them), checks
that the bytes are those it means to change, and reads the copy as a user would.
"""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import lmdb
import numpy as np
import pytest

import fastsubs
from conftest import run_cli
from fastsubs import format as fmt
from test_damaged_index import map_base, query_error, value_at

#: Where MDB_meta keeps the main database's flags, its root page and the transaction id,
#: in each of the two meta pages at the start of data.mdb (64-bit LMDB 0.9).
MAIN_FLAGS, MAIN_ROOT, TXNID = 92, 128, 144
#: What such damage is named: by the LMDB checks of mdb.c where they see it (a meta page or a
#: page that does not hold together), else by the open finding the index's databases
#: without its metadata.
DAMAGED_LMDB = r"damaged index: (its databases are there but not its metadata|LMDB's meta pages: |.*LMDB page \d+: )"


@pytest.fixture()
def copy(demo_index: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy.fsidx"
    shutil.copytree(demo_index, target)
    return target


def meta_pages(index: Path) -> tuple[int, int, int]:
    """The page size, and the offsets of the meta page LMDB reads (the higher transaction
    id) and of the other one."""
    env = lmdb.open(str(index), readonly=True, lock=False)
    size = env.stat()["psize"]
    env.close()
    with open(index / "data.mdb", "rb") as data:
        first, second = (struct.unpack("<Q", (data.seek(page * size + TXNID), data.read(8))[1])[0] for page in (0, 1))
    return (size, 0, size) if first > second else (size, size, 0)


def rewrite(index: Path, offset: int, change) -> None:
    """Replace the bytes at ``offset`` by ``change(old)``."""
    with open(index / "data.mdb", "r+b") as data:
        data.seek(offset)
        old = data.read(8)
        data.seek(offset)
        data.write(change(old))


def flip(old: bytes) -> bytes:
    return bytes([old[0] ^ 0xFF]) + old[1:]


def lowest_bit_cleared(old: bytes) -> bytes:
    """A page number with one bit flipped, to an earlier page (so one that is in the file)."""
    page = struct.unpack("<Q", old)[0]
    return struct.pack("<Q", page & (page - 1))


@pytest.mark.parametrize("where", ["the main database's flags", "the main database's root page",
                                   "the other meta page's transaction id"])
def test_a_flipped_byte_in_lmdbs_meta_pages_is_damage(copy: Path, where: str) -> None:
    """LMDB then looks for the index's databases in the wrong way, on the wrong page, or in
    the build's transaction before its last (which wrote the metadata): the index's other
    databases are there, so it is a damaged index, not one whose build was interrupted
    (builds publish only whole indexes)."""
    _, current, other = meta_pages(copy)
    offset, change = {"the main database's flags": (current + MAIN_FLAGS, flip),
                      "the main database's root page": (current + MAIN_ROOT, lowest_bit_cleared),
                      "the other meta page's transaction id": (other + TXNID + 7, flip)}[where]
    rewrite(copy, offset, change)
    with pytest.raises(fastsubs.DamagedIndexError, match=DAMAGED_LMDB):
        fastsubs.open_index(copy)
    assert re.search(DAMAGED_LMDB, query_error(copy))


def test_a_lost_header_record_is_damage_not_an_older_format(copy: Path) -> None:
    """A flipped byte of the header record's key: the metadata says format 4, whose indexes
    (as those of format 3) always have a header, so the header is lost, not missing from an
    index of an older format."""
    at, _ = value_at(copy, fmt.META_DB, fmt.HEADER_KEY)
    with open(copy / "data.mdb", "rb") as data:
        data.seek(at - len(fmt.HEADER_KEY))
        assert data.read(len(fmt.HEADER_KEY)) == fmt.HEADER_KEY  # the node's key, just before its value
    rewrite(copy, at - 1, flip)
    with pytest.raises(fastsubs.DamagedIndexError, match="its header record is missing"):
        fastsubs.open_index(copy)
    message = query_error(copy)
    assert "damaged index" in message and "older" not in message


def test_verify_names_the_index_once_and_a_key_of_the_wrong_length_by_its_length(copy: Path) -> None:
    """A record whose key length (in its LMDB node) is flipped to 0: verify's lines name the
    index once each, and the record by what is wrong with its key, not by an empty key."""
    env = lmdb.open(str(copy), readonly=True, lock=False, max_dbs=64)
    with env.begin(buffers=True) as txn:
        cursor = txn.cursor(db=env.open_db(fmt.patterns_db_name(3), txn=txn, create=False))
        cursor.first()
        cursor.next()
        key = cursor.key()
        at = np.frombuffer(key, np.uint8).__array_interface__["data"][0] - map_base(copy)
        length = len(key)
    env.close()
    with open(copy / "data.mdb", "rb") as data:
        data.seek(at - 2)
        assert data.read(2) == struct.pack("<H", length)  # the node's key size, just before the key
    rewrite(copy, at - 2, lambda old: b"\0\0" + old[2:])
    result = run_cli("fastsubs-index", "verify", copy, check=False)
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 1 and len(lines) == 2, lines
    assert lines[0] == (f"fastsubs-index: {copy}: damaged index: a record of patterns3 has a key of 0 bytes, "
                        f"not {length} (bytes flipped?)")
    assert lines[1].startswith(f"fastsubs-index: {copy}: DAMAGED (1 problem(s) shown)")
