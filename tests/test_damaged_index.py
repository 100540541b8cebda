"""Opening what is not a sound index gives a clear error saying which, never a crash."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import lmdb
import msgpack
import numpy as np
import pytest

import fastsubs
from conftest import TEST_DATA, run_cli, shared
from fastsubs import format as fmt
from fastsubs.query.engine import Engine
from fastsubs.query.index import Index
from fastsubs.query.terms import TermBuilder


@pytest.fixture()
def index_copy(tiny_index: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy.fsidx"
    shutil.copytree(tiny_index, copy)
    return copy


def query_error(index: Path, *args: str) -> str:
    result = run_cli("fastsubs-query", index, *args, check=False, input=b"the cat\n")
    assert result.returncode == 1 and result.stdout == b""
    message = result.stderr.decode()
    assert message.count("\n") == 1 and "Traceback" not in message
    return message


def test_a_plain_directory_is_not_an_index(tmp_path: Path) -> None:
    with pytest.raises(fastsubs.NotAnIndexError):
        fastsubs.open_index(tmp_path)
    assert "not a fastsubs index" in query_error(tmp_path)


def test_a_random_file_in_place_of_the_data_is_damaged(tmp_path: Path) -> None:
    (tmp_path / "data.mdb").write_bytes(os.urandom(20000))
    with pytest.raises(fastsubs.FastsubsError):
        fastsubs.open_index(tmp_path)
    assert "damaged index" in query_error(tmp_path) or "not a fastsubs index" in query_error(tmp_path)


def test_an_lmdb_environment_without_metadata_is_not_an_index(tmp_path: Path) -> None:
    env = lmdb.open(str(tmp_path), max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(b"key", b"value")
    env.close()
    with pytest.raises(fastsubs.NotAnIndexError, match="no metadata"):
        fastsubs.open_index(tmp_path)


def rewrite_meta(index: Path, **changes: object) -> None:
    env = lmdb.open(str(index), max_dbs=16)
    db = env.open_db(b"meta")
    with env.begin(write=True, db=db) as txn:
        meta = msgpack.unpackb(txn.get(b"meta"))
        meta.update(changes)
        txn.put(b"meta", msgpack.packb(meta))
    env.close()


def test_a_newer_format_version_is_named(index_copy: Path) -> None:
    rewrite_meta(index_copy, format_version=fmt.FORMAT_VERSION + 1)
    with pytest.raises(fastsubs.IndexVersionError, match="newer"):
        fastsubs.open_index(index_copy)
    assert "newer" in query_error(index_copy)


def test_wrong_magic_is_not_an_index(index_copy: Path) -> None:
    rewrite_meta(index_copy, magic="something-else")
    with pytest.raises(fastsubs.NotAnIndexError, match="magic"):
        fastsubs.open_index(index_copy)


def test_word_offsets_past_the_word_bytes_are_named(index_copy: Path) -> None:
    """Output lines are written in C straight from ``word_bytes``: offsets reaching past
    it must be refused when the index is opened, not read out of bounds."""
    env = lmdb.open(str(index_copy), max_dbs=16)
    db = env.open_db(fmt.ARRAYS_DB)
    with env.begin(write=True, db=db) as txn:
        offsets = np.frombuffer(txn.get(fmt.WORD_OFFSETS), fmt.OFFSET_DTYPE).copy()
        offsets[-1] += 1_000_000
        txn.put(fmt.WORD_OFFSETS, offsets.tobytes())
    env.close()
    with pytest.raises(fastsubs.DamagedIndexError, match="word_offsets"):
        fastsubs.open_index(index_copy)
    assert "damaged index" in query_error(index_copy)


def test_ids_outside_the_vocabulary_under_a_valid_checksum_are_named(index_copy: Path) -> None:
    """The kernel indexes memory with a pattern's ids and positions: a record that passes
    its checksum but points outside the vocabulary is refused when parsed, not followed."""
    env = lmdb.open(str(index_copy), max_dbs=16)
    meta = msgpack.unpackb(env.begin(db=env.open_db(b"meta")).get(b"meta"))
    db = env.open_db(fmt.patterns_db_name(2))
    damaged = 0
    with env.begin(write=True, db=db) as txn:
        for key, value in list(txn.cursor()):
            words = np.frombuffer(value, fmt.ID_DTYPE).copy()
            layout = fmt.pattern_value_layout(fmt.pattern_count(len(words), True), True)
            ids_end = sum(length for name, _, length in layout[: [n for n, _, _ in layout].index("ids") + 1])
            words[ids_end - 1] = meta["vocab_size"] + 5  # the largest id: still sorted
            words[0] = fmt.record_checksum(key, words[1:])
            txn.put(key, words.tobytes())
            damaged += 1
    env.close()
    assert damaged
    message = query_error(index_copy)
    assert "damaged index" in message and "outside the vocabulary" in message


@pytest.mark.parametrize("keep", [0, 4096, 0.5])
def test_a_truncated_index_is_named_truncated(small_index: Path, tmp_path: Path, keep: float) -> None:
    copy = tmp_path / "cut.fsidx"
    shutil.copytree(small_index, copy)
    data = copy / "data.mdb"
    size = data.stat().st_size
    os.truncate(data, int(size * keep) if isinstance(keep, float) else keep)
    with pytest.raises(fastsubs.FastsubsError) as raised:
        fastsubs.open_index(copy)
    assert isinstance(raised.value, (fastsubs.DamagedIndexError, fastsubs.NotAnIndexError))
    message = query_error(copy)
    assert "truncated" in message or "damaged" in message
    if keep not in (0, 4096):  # the meta pages are whole: the file is known to be cut
        assert isinstance(raised.value, fastsubs.DamagedIndexError) and "data.mdb is truncated" in message, message


def test_an_index_one_page_short_is_named_truncated(small_index: Path, tmp_path: Path) -> None:
    copy = tmp_path / "cut.fsidx"
    shutil.copytree(small_index, copy)
    os.truncate(copy / "data.mdb", (copy / "data.mdb").stat().st_size - 4096)
    with pytest.raises(fastsubs.DamagedIndexError, match="data.mdb is truncated"):
        fastsubs.open_index(copy)
    assert "data.mdb is truncated" in query_error(copy)


def flip_byte(index: Path, offset: int) -> None:
    with open(index / "data.mdb", "r+b") as data:
        data.seek(offset)
        byte = data.read(1)
        data.seek(offset)
        data.write(bytes([byte[0] ^ 0xFF]))


#: The queries of the targeted flips: every sentence of the golden input.
SENTENCES = [line.split() for line in (TEST_DATA / "tiny-input.txt").read_text().splitlines()]


def answers(index_path: Path) -> list[list[list[tuple[str, float]]]]:
    with fastsubs.open_index(index_path) as index:
        return [[[(s.word, s.logprob) for s in subs] for subs in index.sentence(tokens, n=5)]
                for tokens in SENTENCES]


def records_read(index_path: Path) -> list[tuple[int, bytes, int, int]]:
    """``(order, key, offset in data.mdb, length)`` of the value of every pattern record
    the SENTENCES' searches read: the patterns their terms look up and find (the
    reference term builder looks up what the kernel looks up, and keeps each).  The
    offset is where LMDB's memory map shows the live value (older copies of a page may
    linger in the file)."""
    with Engine(index_path) as engine, Index(index_path) as index:
        builder = TermBuilder(index)
        for tokens in SENTENCES:
            ids = tuple(engine.sentence_ids([t.encode() for t in tokens]).tolist())
            for target in range(1, len(ids)):
                builder.position_terms(ids, target)
        found = [(len(ids) + 1, fmt.pattern_key(slot, ids, engine.meta["id_bytes"]))
                 for (slot, ids), pattern in builder.patterns.items() if pattern is not None]
    data_file = str((index_path / "data.mdb").resolve())
    env = lmdb.open(str(index_path), readonly=True, lock=False, max_dbs=16)
    with open("/proc/self/maps") as maps:  # where the file's first byte is mapped
        base = min(int(line.split("-")[0], 16) for line in maps if line.rstrip().endswith(" " + data_file))
    records = []
    with env.begin(buffers=True) as txn:
        for order, key in found:
            value = txn.get(key, db=env.open_db(fmt.patterns_db_name(order), txn=txn))
            address = np.frombuffer(value, np.uint8).__array_interface__["data"][0]
            records.append((order, key, address - base, len(value)))
    env.close()
    return records


def test_a_flipped_byte_in_any_record_the_queries_read_is_named(tiny_index: Path, tmp_path: Path) -> None:
    """Each pattern record the queries read, flipped in its checksum word and in one
    byte of its fields (seeded): the queries end in DamagedIndexError, never an answer."""
    records = records_read(tiny_index)
    assert {order for order, _, _, _ in records} == {2, 3} and len(records) >= 10
    rng = random.Random(15)
    for number, (_, key, at, length) in enumerate(records):
        for where in (rng.randrange(4), rng.randrange(4, length)):
            copy = tmp_path / f"flip-{number}-{where}.fsidx"
            shutil.copytree(tiny_index, copy)
            flip_byte(copy, at + where)
            with pytest.raises(fastsubs.DamagedIndexError, match=f"damaged index: pattern {key.hex()}"):
                answers(copy)
            if number == 0:  # the command line says it in one line, from a forked worker too
                assert "fails its checksum" in query_error(copy)
                assert "fails its checksum" in query_error(copy, "--workers", "2")
            shutil.rmtree(copy)


def value_offset(index: Path, db: bytes, key: bytes) -> tuple[int, bytes]:
    """Where the value of ``key`` in database ``db`` sits in data.mdb, and the value."""
    env = lmdb.open(str(index), readonly=True, lock=False, max_dbs=16)
    with env.begin() as txn:
        value = bytes(txn.get(key, db=env.open_db(db, txn=txn)))
    env.close()
    data = (index / "data.mdb").read_bytes()
    assert data.count(value) == 1, "the value is not unique in the file: pick another"
    return data.find(value), value


@pytest.mark.parametrize("array", fmt.ARRAY_KEYS)
def test_a_flipped_byte_in_a_whole_vocabulary_array_is_named(tiny_index: Path, tmp_path: Path,
                                                             array: bytes) -> None:
    """The unigram scores, their order and the words' spelling are checked at open (CRC-32s in the metadata)."""
    at, value = value_offset(tiny_index, fmt.ARRAYS_DB, array)
    copy = tmp_path / "copy.fsidx"
    shutil.copytree(tiny_index, copy)
    flip_byte(copy, at + len(value) // 2)
    with pytest.raises(fastsubs.DamagedIndexError, match=f"array {array.decode()} fails its checksum"):
        answers(copy)
    assert f"array {array.decode()} fails its checksum" in query_error(copy)


def test_a_flipped_byte_in_a_vocabulary_entry_is_named(tiny_index: Path, tmp_path: Path) -> None:
    """An entry word -> id whose id no longer spells the word is damage, not another word."""
    env = lmdb.open(str(tiny_index), readonly=True, lock=False, max_dbs=16)
    with env.begin() as txn:
        the = txn.get(b"the", db=env.open_db(fmt.VOCAB_DB, txn=txn))
    env.close()
    data = (tiny_index / "data.mdb").read_bytes()
    at = data.find(b"the" + the)  # LMDB stores a small entry as its key then its value
    assert at >= 0 and int.from_bytes(the, "little") < 4
    copy = tmp_path / "copy.fsidx"
    shutil.copytree(tiny_index, copy)
    with open(copy / "data.mdb", "r+b") as stream:  # another valid id: the low bit flipped
        stream.seek(at + 3)
        stream.write(bytes([the[0] ^ 1]))
    with pytest.raises(fastsubs.DamagedIndexError, match="vocabulary entry of b'the' is invalid"):
        answers(copy)


def check_flips(source: Path, tmp_path: Path, flips: int, seed: int) -> dict[str, int]:
    """Flip one byte at a time at random offsets: answers stay right, or a clear error, never wrong."""
    text = b"\n".join(shared("heldout-dev.txt").read_bytes().split(b"\n")[:25]) + b"\n"
    expected = run_cli("fastsubs-query", source, "-n", "20", input=text).stdout
    size = (source / "data.mdb").stat().st_size
    rng = random.Random(seed)
    outcomes = {"same answers": 0, "clear error": 0, "verify found it": 0}
    for attempt in range(flips):
        copy = tmp_path / f"flip{attempt}.fsidx"
        shutil.copytree(source, copy)
        flip_byte(copy, rng.randrange(size))
        result = run_cli("fastsubs-query", copy, "-n", "20", check=False, input=text)
        if result.returncode == 0:
            assert result.stdout == expected, "a flipped byte changed an answer without an error"
            outcomes["same answers"] += 1
        else:
            message = result.stderr.decode()
            assert result.returncode == 1 and message.count("\n") == 1 and "damaged" in message, message
            outcomes["clear error"] += 1
        verified = run_cli("fastsubs-index", "verify", copy, check=False)
        assert verified.returncode in (0, 1) and b"Traceback" not in verified.stderr
        if verified.returncode == 1:
            outcomes["verify found it"] += 1
        shutil.rmtree(copy)
    return outcomes


@pytest.mark.slow
def test_flipped_bytes_anywhere_give_a_clear_error_or_the_right_answer(small_index: Path, tmp_path: Path) -> None:
    """Random offsets of the whole file (most land in records these queries never read):
    every query run ends in the right answer or one clear line, and verify finds some."""
    outcomes = check_flips(small_index, tmp_path, flips=40, seed=2)
    assert outcomes["clear error"] > 0 and outcomes["verify found it"] > 0, outcomes


def test_verify_finds_a_vocabulary_entry_whose_key_was_flipped(tiny_index: Path, tmp_path: Path) -> None:
    """A flipped key byte makes a word unknown, which no query can tell from a real unknown word."""
    env = lmdb.open(str(tiny_index), readonly=True, lock=False, max_dbs=16)
    with env.begin() as txn:
        the = txn.get(b"the", db=env.open_db(fmt.VOCAB_DB, txn=txn))
    env.close()
    at = (tiny_index / "data.mdb").read_bytes().find(b"the" + the)
    copy = tmp_path / "copy.fsidx"
    shutil.copytree(tiny_index, copy)
    with open(copy / "data.mdb", "r+b") as stream:  # "the" becomes "thf"
        stream.seek(at + 2)
        stream.write(b"f")
    assert run_cli("fastsubs-index", "verify", tiny_index).returncode == 0
    result = run_cli("fastsubs-index", "verify", copy, check=False)
    assert result.returncode == 1 and b"vocabulary entry b'thf' does not spell its word" in result.stderr
