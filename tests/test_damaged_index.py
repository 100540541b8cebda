"""Opening what is not a sound index gives a clear error saying which, never a crash; damage
to any byte an answer depends on is an error, never a different answer."""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import lmdb
import msgpack
import numpy as np
import pytest

import fastsubs
from conftest import TEST_DATA, demo_text, run_cli
from fastsubs import format as fmt
from fastsubs.bench.reference_terms import TermBuilder
from fastsubs.core import Core
from fastsubs.errors import IndexFileError


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


def test_a_missing_path_and_a_file_say_so(tmp_path: Path) -> None:
    with pytest.raises(fastsubs.NotAnIndexError, match="does not exist"):
        fastsubs.open_index(tmp_path / "nothing")
    assert "nothing: does not exist" in query_error(tmp_path / "nothing")
    (tmp_path / "garbage.txt").write_text("not an index\n")
    assert "garbage.txt: is not a directory" in query_error(tmp_path / "garbage.txt")


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


def test_an_index_of_format_2_is_to_be_rebuilt(tmp_path: Path) -> None:
    """Format 2 kept its shape in a msgpack map and had no header: it is named, with what to do."""
    env = lmdb.open(str(tmp_path), max_dbs=4)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"meta", msgpack.packb({"magic": fmt.META_MAGIC.decode(), "format_version": 2, "order": 3}))
    env.close()
    with pytest.raises(fastsubs.IndexVersionError, match="version 2 is older .* rebuild it"):
        fastsubs.open_index(tmp_path)
    assert "rebuild it" in query_error(tmp_path)


# ---------------------------------------------------------------- where things are in data.mdb

def map_base(env_path: Path) -> int:
    """Where this process maps the first byte of ``env_path``/data.mdb."""
    data_file = str((env_path / "data.mdb").resolve())
    with open("/proc/self/maps") as maps:
        return min(int(line.split("-")[0], 16) for line in maps if line.rstrip().endswith(" " + data_file))


def value_at(index: Path, db: bytes, key: bytes) -> tuple[int, bytes]:
    """Where the value of ``key`` in database ``db`` lies in data.mdb (as LMDB's map shows the
    live copy), and the value."""
    env = lmdb.open(str(index), readonly=True, lock=False, max_dbs=64)
    try:
        with env.begin(buffers=True) as txn:
            value = txn.get(key, db=env.open_db(db, txn=txn, create=False))
            address = np.frombuffer(value, np.uint8).__array_interface__["data"][0]
            return address - map_base(index), bytes(value)
    finally:
        env.close()


def flip_byte(index: Path, offset: int) -> None:
    with open(index / "data.mdb", "r+b") as data:
        data.seek(offset)
        byte = data.read(1)
        data.seek(offset)
        data.write(bytes([byte[0] ^ 0xFF]))


def put(index: Path, db: bytes, key: bytes, value: bytes) -> None:
    """Rewrite one value, as a forger (or a faulty tool) would."""
    env = lmdb.open(str(index), max_dbs=64)
    with env.begin(write=True, db=env.open_db(db)) as txn:
        txn.put(key, value)
    env.close()


#: The queries of the targeted damage: every sentence of the golden input.
SENTENCES = [line.split() for line in (TEST_DATA / "tiny-input.txt").read_text().splitlines()]


def answers(index_path: Path) -> list[list[list[tuple[str, float]]]]:
    with fastsubs.open_index(index_path) as index:
        return [[[(s.word, s.logprob) for s in subs] for subs in index.sentence(tokens, n=5)]
                for tokens in SENTENCES]


# ---------------------------------------------------------------- the header and the metadata

HEADER_FIELDS = {"magic": fmt.H_MAGIC, "version": fmt.H_VERSION, "length": fmt.H_BYTES, "order": fmt.H_ORDER,
                 "vocab_size": fmt.H_VOCAB_SIZE, "id_bytes": fmt.H_ID_BYTES, "bos_id": fmt.H_BOS_ID,
                 "eos_id": fmt.H_EOS_ID, "unk_id": fmt.H_UNK_ID, "meta_bytes": fmt.H_META_BYTES,
                 "meta_checksum": fmt.H_META_CHECKSUM, "first_array": fmt.H_ARRAYS,
                 "counts": fmt.H_COUNTS}


@pytest.mark.parametrize("field", HEADER_FIELDS)
def test_a_flipped_byte_in_any_header_field_is_named(index_copy: Path, field: str) -> None:
    at, header = value_at(index_copy, fmt.META_DB, fmt.HEADER_KEY)
    flip_byte(index_copy, at + HEADER_FIELDS[field])
    with pytest.raises(IndexFileError) as raised:
        answers(index_copy)
    expected = fastsubs.NotAnIndexError if field == "magic" else fastsubs.DamagedIndexError
    assert isinstance(raised.value, expected) and ("checksum" in str(raised.value) or field == "magic")
    assert "damaged index" in query_error(index_copy) or field == "magic"


def test_every_byte_of_the_header_is_covered(index_copy: Path, tmp_path: Path) -> None:
    at, header = value_at(index_copy, fmt.META_DB, fmt.HEADER_KEY)
    for offset in range(len(header)):
        copy = tmp_path / f"header-{offset}.fsidx"
        shutil.copytree(index_copy, copy)
        flip_byte(copy, at + offset)
        with pytest.raises(IndexFileError):
            Core(copy)
        shutil.rmtree(copy)


def forge_header(index: Path, **changes: int) -> None:
    """Change header fields (uint32 at their offsets) and make its checksum right again: what
    the checks of the fields against each other and against the index must catch."""
    _, header = value_at(index, fmt.META_DB, fmt.HEADER_KEY)
    fields = bytearray(header[:-4])
    for name, value in changes.items():
        struct.pack_into("<I", fields, HEADER_FIELDS[name], value)
    put(index, fmt.META_DB, fmt.HEADER_KEY, bytes(fields) + struct.pack("<I", fmt.checksum(b"", fields)))


@pytest.mark.parametrize("change", ["bos is the", "unk is the", "eos is the", "id_bytes", "vocab_size",
                                    "order down", "order up", "no unk"])
def test_header_fields_forged_with_a_valid_checksum_are_caught(index_copy: Path, change: str) -> None:
    with Core(index_copy) as index:
        the, order, vocab_size = index.word_id("the"), index.order, index.vocab_size
    forged = {"bos is the": {"bos_id": the}, "unk is the": {"unk_id": the}, "eos is the": {"eos_id": the},
              "id_bytes": {"id_bytes": 3}, "vocab_size": {"vocab_size": vocab_size - 1},
              "order down": {"order": order - 1}, "order up": {"order": order + 1},
              "no unk": {"unk_id": fmt.NO_WORD}}[change]
    forge_header(index_copy, **forged)
    with pytest.raises(fastsubs.DamagedIndexError):
        fastsubs.open_index(index_copy)
    assert "damaged index" in query_error(index_copy)


@pytest.mark.parametrize("version", [
    3,  # the header, but no joint orders
    4,  # back-off weights as float32, not codes into a table
])
def test_an_index_of_an_older_format_is_to_be_rebuilt(index_copy: Path, version: int) -> None:
    """An index of an earlier format with a header: the one line says to rebuild it."""
    forge_header(index_copy, version=version)
    with pytest.raises(fastsubs.IndexVersionError, match=rf"version {version} is older than this fastsubs reads "
                                                         rf"\({fmt.FORMAT_VERSION}\); rebuild it"):
        fastsubs.open_index(index_copy)
    assert "rebuild it" in query_error(index_copy)


def test_a_newer_format_version_is_named(index_copy: Path) -> None:
    forge_header(index_copy, version=fmt.FORMAT_VERSION + 1)
    with pytest.raises(fastsubs.IndexVersionError, match="newer"):
        fastsubs.open_index(index_copy)
    assert "newer" in query_error(index_copy)


@pytest.mark.parametrize("change", [{"max_unigram_beta": 0.0}, {"bos_id": 4}, {"order": 2}, {"id_bytes": 4},
                                    {"source": {"name": "other.arpa"}}])
def test_changed_metadata_is_named(index_copy: Path, change: dict) -> None:
    """The msgpack map is for people, but checksummed too: a changed field is damage."""
    _, raw = value_at(index_copy, fmt.META_DB, fmt.META_KEY)
    meta = msgpack.unpackb(raw)
    meta.update(change)
    put(index_copy, fmt.META_DB, fmt.META_KEY, msgpack.packb(meta))
    with pytest.raises(fastsubs.DamagedIndexError, match="metadata"):
        answers(index_copy)
    assert "metadata" in query_error(index_copy)


# ---------------------------------------------------------------- the arrays

@pytest.mark.parametrize("array", fmt.ARRAY_NAMES)
def test_a_flipped_byte_in_a_whole_vocabulary_array_is_named(index_copy: Path, array: bytes) -> None:
    """The unigram scores, their order, the words' spellings and their order are checked at open."""
    at, value = value_at(index_copy, fmt.ARRAYS_DB, array)
    flip_byte(index_copy, at + len(value) // 2)
    with pytest.raises(fastsubs.DamagedIndexError, match=f"array {array.decode()} fails its checksum"):
        answers(index_copy)
    assert f"array {array.decode()} fails its checksum" in query_error(index_copy)


def forge_array(index: Path, name: bytes, value: bytes) -> None:
    """Replace an array and its length and checksum in the header, consistently."""
    put(index, fmt.ARRAYS_DB, name, value)
    _, header = value_at(index, fmt.META_DB, fmt.HEADER_KEY)
    fields = fmt.decode_header(header)
    fields["arrays"][fmt.ARRAY_NAMES.index(name)] = (len(value), fmt.checksum(b"", value))
    put(index, fmt.META_DB, fmt.HEADER_KEY, fmt.encode_header(fields))


def test_word_offsets_past_the_word_bytes_are_named(index_copy: Path) -> None:
    """Output lines are written in C straight from ``word_bytes``: offsets reaching past
    it must be refused when the index is opened, not read out of bounds."""
    _, raw = value_at(index_copy, fmt.ARRAYS_DB, b"word_offsets")
    offsets = np.frombuffer(raw, fmt.OFFSET_DTYPE).copy()
    offsets[-1] += 1_000_000
    forge_array(index_copy, b"word_offsets", offsets.tobytes())
    with pytest.raises(fastsubs.DamagedIndexError, match="word_offsets"):
        fastsubs.open_index(index_copy)
    assert "damaged index" in query_error(index_copy)


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e30])
def test_a_back_off_table_value_that_is_no_bounded_number_is_named(index_copy: Path, value: float) -> None:
    """A pattern's back-off weights are entries of its order's table (kernel/format.h), which
    the open checks once, as it does the unigram scores: a value forged (its checksums made
    right) to no number, or past the header's value bound, never reaches a search."""
    name = fmt.ARRAY_NAMES[fmt.ARRAY_BETA_VALUES]
    _, raw = value_at(index_copy, fmt.ARRAYS_DB, name)
    table = np.frombuffer(raw, fmt.SCORE_DTYPE).copy()
    table[-1] = value
    forge_array(index_copy, name, table.tobytes())
    with pytest.raises(fastsubs.DamagedIndexError, match="a back-off table's value is not a number within"):
        fastsubs.open_index(index_copy)
    assert "back-off table" in query_error(index_copy)


def test_back_off_table_lengths_that_give_the_highest_order_a_table_are_named(index_copy: Path) -> None:
    """The header cuts beta_values into the tables of orders 2 ... N - 1; lengths forged to
    give the highest order (which stores no back-off weights) the last entry of the one
    below, the array's length still theirs, are damage, named when the index opens."""
    _, header = value_at(index_copy, fmt.META_DB, fmt.HEADER_KEY)
    fields = fmt.decode_header(header)
    assert fields["beta_tables"][-1] == 0 and fields["beta_tables"][-2] > 1
    fields["beta_tables"][-2] -= 1
    fields["beta_tables"][-1] += 1
    put(index_copy, fmt.META_DB, fmt.HEADER_KEY, fmt.encode_header(fields))
    with pytest.raises(fastsubs.DamagedIndexError, match="back-off table lengths"):
        fastsubs.open_index(index_copy)
    assert "back-off table lengths" in query_error(index_copy)


def test_a_spelling_order_that_does_not_sort_is_caught(index_copy: Path, tmp_path: Path) -> None:
    """Ids by spelling are searched by bisection.  Forged out of order (within the
    vocabulary, checksums made right): reversed, the ids of <s>, </s> and <unk> found by it
    disagree with the header's, so the index does not open; with only its last two ids
    swapped (the tiny vocabulary's "sat" and "the", which the bisections for those three
    never reach) it opens, and verify names it."""
    _, raw = value_at(index_copy, fmt.ARRAYS_DB, b"spelling_order")
    order = np.frombuffer(raw, fmt.ID_DTYPE).copy()
    reversed_copy = tmp_path / "reversed.fsidx"
    shutil.copytree(index_copy, reversed_copy)
    forge_array(reversed_copy, b"spelling_order", order[::-1].tobytes())
    with pytest.raises(fastsubs.DamagedIndexError, match="not the vocabulary's"):
        fastsubs.open_index(reversed_copy)
    order[-2:] = order[-2:][::-1]
    forge_array(index_copy, b"spelling_order", order.tobytes())
    fastsubs.open_index(index_copy).close()
    result = run_cli("fastsubs-index", "verify", index_copy, check=False)
    assert result.returncode == 1 and b"spelling_order does not sort" in result.stderr


# ---------------------------------------------------------------- pattern records

def records_read(index_path: Path) -> list[tuple[int, bytes, int, int, int]]:
    """``(order, LMDB key, offset of the key, offset of the value, length of the value)`` in
    data.mdb of every record the SENTENCES' searches read: those holding the patterns their
    terms look up, present or not (the reference term builder looks up what the core looks
    up).  Records on overflow pages have their key elsewhere (offset -1)."""
    with Core(index_path) as index:
        builder = TermBuilder(index)
        for tokens in SENTENCES:
            ids = tuple(np.frombuffer(index.sentence_ids([t.encode() for t in tokens]), fmt.ID_DTYPE).tolist())
            for target in range(1, len(ids)):
                builder.position_terms(ids, target)
        wanted = [(len(fixed) + 1, fmt.pattern_key(slot, fixed, index.id_bytes))
                  for slot, fixed in builder.patterns if fmt.NO_WORD not in fixed]
    env = lmdb.open(str(index_path), readonly=True, lock=False, max_dbs=64)
    base = map_base(index_path)
    found = {}
    with env.begin(buffers=True) as txn:
        for order, key in wanted:
            cursor = txn.cursor(db=env.open_db(fmt.patterns_db_name(order), txn=txn, create=False))
            assert cursor.set_range(key)
            record_key, value = cursor.key(), cursor.value()
            key_at = np.frombuffer(record_key, np.uint8).__array_interface__["data"][0] - base
            value_at_ = np.frombuffer(value, np.uint8).__array_interface__["data"][0] - base
            inline = key_at + len(record_key) == value_at_
            found[(order, bytes(record_key))] = (key_at if inline else -1, value_at_, len(value))
    env.close()
    return [(order, key, *where) for (order, key), where in found.items()]


def test_a_flipped_byte_in_any_record_the_queries_read_is_named(tiny_index: Path, tmp_path: Path) -> None:
    """Each record the queries read, flipped in its checksum word, in one byte of the rest
    of its value (seeded) and in its key: the queries end in DamagedIndexError, never an answer,
    and again when one open index searches them again (a reader remembers the records whose
    checksums it found right, never one it found wrong)."""
    records = records_read(tiny_index)
    assert {order for order, *_ in records} == {2, 3} and len(records) >= 3
    rng = random.Random(15)
    for number, (_, key, key_at, at, length) in enumerate(records):
        places = [at + rng.randrange(4), at + rng.randrange(4, length)] + ([key_at + rng.randrange(len(key))]
                                                                           if key_at >= 0 else [])
        for where in places:
            copy = tmp_path / f"flip-{number}-{where}.fsidx"
            shutil.copytree(tiny_index, copy)
            flip_byte(copy, where)
            with fastsubs.open_index(copy) as index:
                for _ in range(2):
                    with pytest.raises(fastsubs.DamagedIndexError, match="damaged index"):
                        for tokens in SENTENCES:
                            index.sentence(tokens, n=5)
            if number == 0:  # the command line says it in one line, from a forked worker too
                assert "damaged index" in query_error(copy)
                assert "damaged index" in query_error(copy, "--workers", "2")
            shutil.rmtree(copy)


def delete_record(index: Path, order: int, key: bytes) -> None:
    """Take one record out of its database, as a lost B-tree page would (LMDB keeps the
    rest of the tree sound: only the record is gone)."""
    env = lmdb.open(str(index), max_dbs=64)
    with env.begin(write=True, db=env.open_db(fmt.patterns_db_name(order))) as txn:
        assert txn.delete(key)
    env.close()


def test_a_lost_record_is_named_not_read_as_absence(tiny_index: Path, tmp_path: Path) -> None:
    """Each record the queries read, deleted in turn: their look-ups then land on the record
    after it, whose key of the record before says that they belong elsewhere.  The queries
    end in DamagedIndexError, never in answers that lack the lost patterns."""
    records = records_read(tiny_index)
    assert len(records) >= 3
    for number, (order, key, *_) in enumerate(records):
        copy = tmp_path / f"lost-{number}.fsidx"
        shutil.copytree(tiny_index, copy)
        delete_record(copy, order, key)
        with pytest.raises(fastsubs.DamagedIndexError, match="landed on the wrong record"):
            answers(copy)
        if number == 0:
            assert "landed on the wrong record" in query_error(copy)
        shutil.rmtree(copy)


def test_a_lost_end_record_is_named(tiny_index: Path, tmp_path: Path) -> None:
    """A look-up of a key after every pattern of its database lands on the END record (the
    pattern is absent); with the END record lost it finds no record at all, which is damage,
    not absence.  verify names it too."""
    copy = tmp_path / "no-end.fsidx"
    shutil.copytree(tiny_index, copy)
    with Core(copy) as index:
        order, id_bytes, last = index.order, index.id_bytes, index.vocab_size - 1
        fixed = (last,) * (order - 1)  # the last slot after the last id: the largest pattern key
        assert index.pattern(order - 1, fixed) is None
    delete_record(copy, order, fmt.encode_end(order, id_bytes, None)[0])
    with Core(copy) as index:
        with pytest.raises(fastsubs.DamagedIndexError, match=f"patterns{order} ends before its END record"):
            index.pattern(order - 1, fixed)
    result = run_cli("fastsubs-index", "verify", copy, check=False)
    assert result.returncode == 1 and f"patterns{order} has no END record".encode() in result.stderr


def test_verify_names_a_score_that_is_no_log_probability(demo_index: Path, tmp_path: Path) -> None:
    """A pattern's best score forged above 0 (a probability above 1; still the best, so its
    order holds) with the record's checksum made right: nothing a look-up checks is broken,
    and verify, which checks every score, names it."""
    copy = tmp_path / "positive.fsidx"
    shutil.copytree(demo_index, copy)
    with Core(copy) as index:
        vocab_size, order = index.vocab_size, index.order
    env = lmdb.open(str(copy), max_dbs=64)
    with env.begin(write=True, db=env.open_db(fmt.patterns_db_name(order))) as txn:
        for record_key, value in txn.cursor():
            record = fmt.decode_record(record_key, value, order, vocab_size, False)
            if record["patterns"] and 2 <= (first := record["patterns"][0])["count"] <= 256:
                break
        else:
            raise AssertionError(f"no record of patterns{order} starts with a pattern of 2-256 words")
        first["alpha"][first["positions"][0]] = 0.5
        txn.put(record_key, fmt.encode_record(record_key, record, order, vocab_size))
    env.close()
    result = run_cli("fastsubs-index", "verify", copy, check=False)
    assert result.returncode == 1 and b"holds a score that is no log-probability" in result.stderr


def test_verify_names_a_pattern_key_whose_slot_the_order_has_not(demo_index: Path, tmp_path: Path) -> None:
    """A pattern key's first byte is its slot, below the order.  The last record of
    patterns2 forged so that its last pattern's key has slot 254 (still after every other
    key, before the END record, which names it; checksums made right): verify names it, never
    reads the words of 254 slots of a key of one."""
    copy = tmp_path / "slot.fsidx"
    shutil.copytree(demo_index, copy)
    with Core(copy) as index:
        vocab_size = index.vocab_size
    env = lmdb.open(str(copy), max_dbs=64)
    with env.begin(write=True, db=env.open_db(fmt.patterns_db_name(2))) as txn:
        cursor = txn.cursor()
        assert cursor.last()
        end_key = bytes(cursor.key())
        assert cursor.prev()
        record_key, value = bytes(cursor.key()), bytes(cursor.value())
        record = fmt.decode_record(record_key, value, 2, vocab_size, True)
        forged_key = bytes([254]) + record_key[1:]
        record["patterns"][-1]["key"] = forged_key
        assert txn.delete(record_key)
        txn.put(forged_key, fmt.encode_record(forged_key, record, 2, vocab_size))
        new_end_key, new_end_value = fmt.encode_end(2, fmt.id_bytes(vocab_size), forged_key)
        assert new_end_key == end_key
        txn.put(end_key, new_end_value)
    env.close()
    result = run_cli("fastsubs-index", "verify", copy, check=False)
    assert result.returncode == 1 and f"damaged index: pattern {forged_key.hex()} of patterns2 has no such " \
                                      "slot" in result.stderr.decode(), result.stderr.decode()


@pytest.mark.parametrize("break_it", ["ids", "positions", "order of scores"])
def test_a_record_with_a_valid_checksum_and_broken_fields_is_named(demo_index: Path, tmp_path: Path,
                                                                  break_it: str) -> None:
    """What a checksum cannot vouch for (the builder's work, or a forger's) is checked when a
    pattern is read: ids strictly increasing, positions by score a permutation that sorts the
    scores.  The first pattern of a 4-gram record of the small model with several words is
    broken, its checksum made right; the query that reads it fails, the others do not."""
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(demo_index, copy)
    with Core(copy) as index:
        vocab_size, id_bytes = index.vocab_size, index.id_bytes
    env = lmdb.open(str(copy), max_dbs=64)
    db = env.open_db(fmt.patterns_db_name(4))
    with env.begin(write=True, db=db) as txn:
        for record_key, value in txn.cursor():
            record = fmt.decode_record(record_key, value, 4, vocab_size, False)
            first = record["patterns"][0] if record["kind"] == fmt.BLOCK else {"count": 0}
            if 2 <= first["count"] <= 256:
                break
        key, ids = first["key"], list(first["ids"])
        if break_it == "ids":  # the first two ids swapped
            first["ids"][:2] = first["ids"][1::-1]
        elif break_it == "positions":
            first["positions"][1] = first["positions"][0]
        else:  # the best word's score lowered below the worst
            first["alpha"][first["positions"][0]] = -99.0
        txn.put(record_key, fmt.encode_record(record_key, record, 4, vocab_size))
    env.close()
    with Core(copy) as index, fastsubs.open_index(copy) as api:
        slot, fixed = key[0], tuple(int.from_bytes(key[1 + i * id_bytes:1 + (i + 1) * id_bytes], "big")
                                    for i in range(3))
        with pytest.raises(fastsubs.DamagedIndexError, match="damaged index: pattern"):
            index.pattern(slot, fixed)
        words = [index.word(i).decode() for i in fixed]
        with pytest.raises(fastsubs.DamagedIndexError, match="damaged index: pattern"):
            api.position(words[:slot] + [index.word(ids[0]).decode()] + words[slot:], slot, n=10)
        assert api.position(["the", "cat"], 0, n=10)  # what does not read it still answers
    result = run_cli("fastsubs-index", "verify", copy, check=False)
    assert result.returncode == 1 and b"damaged index: pattern" in result.stderr


@pytest.mark.parametrize("keep", [0, 4096, 0.5])
def test_a_truncated_index_is_named_truncated(demo_index: Path, tmp_path: Path, keep: float) -> None:
    copy = tmp_path / "cut.fsidx"
    shutil.copytree(demo_index, copy)
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


def test_an_index_one_page_short_is_named_truncated(demo_index: Path, tmp_path: Path) -> None:
    copy = tmp_path / "cut.fsidx"
    shutil.copytree(demo_index, copy)
    os.truncate(copy / "data.mdb", (copy / "data.mdb").stat().st_size - 4096)
    with pytest.raises(fastsubs.DamagedIndexError, match="data.mdb is truncated"):
        fastsubs.open_index(copy)
    assert "data.mdb is truncated" in query_error(copy)


def check_flips(source: Path, tmp_path: Path, flips: int, seed: int) -> dict[str, int]:
    """Flip one byte at a time at random offsets: answers stay right, or a clear error, never wrong."""
    text = demo_text(25)
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
@pytest.mark.timeout(300)
def test_flipped_bytes_anywhere_give_a_clear_error_or_the_right_answer(demo_index: Path, tmp_path: Path) -> None:
    """Random offsets of the whole file (most land in records these queries never read):
    every query run ends in the right answer or one clear line, and verify finds some."""
    outcomes = check_flips(demo_index, tmp_path, flips=40, seed=2)
    assert outcomes["clear error"] > 0 and outcomes["verify found it"] > 0, outcomes


def test_flipped_bytes_in_the_tiny_index_give_a_clear_error_or_the_right_answer(tiny_index: Path,
                                                                                tmp_path: Path) -> None:
    """The tiny index is a few pages: every one of its pages' bytes that a flip could reach,
    sampled, never turns into a different answer (B-tree pages included)."""
    check_flips(tiny_index, tmp_path, flips=12, seed=5)
