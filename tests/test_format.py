"""The index format has one definition, and one implementation of its bytes.

kernel/format.h spells every constant once, in lists that the core exports
(``fastsubs._kernel.FORMAT``); Python reads them from there and spells none.  kernel/codec.c
writes every record, key and header and parses them for the look-up, ``verify`` and the
reference decoder the tests use.  Here: the export holds every entry of format.h's lists as
format.h writes it (read from its text); no module of the package spells a format constant
again; the rules and the checksum agree with their definitions (docs/index-format.md,
format.h's comments), computed here independently; and every record of real indexes
decodes and encodes back to its very bytes, and decodes to what a look-up reads.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lmdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastsubs
from conftest import beta_tables, pattern_betas
from fastsubs import _kernel
from fastsubs import format as fmt
from fastsubs.core import Core
from fastsubs.indexer.patterns import RecordWriter
from fastsubs.indexer.runs import row_dtype
from generated_models import write_model
from test_forged_joint import by_key, joint_keys

ROOT = Path(__file__).resolve().parent.parent
FORMAT_H = ROOT / "kernel" / "format.h"


def format_h_entries() -> dict[str, str]:
    """Every entry of format.h's X-macro lists (``X(NAME, value)``), by name: its value as written."""
    text = re.sub(r"/\*.*?\*/", "", FORMAT_H.read_text(), flags=re.DOTALL)
    entries = {}
    for macro in ("FS_FORMAT_STRINGS", "FS_FORMAT_INTEGERS", "FS_FORMAT_WORDS", "FS_FORMAT_REALS"):
        body = re.search(rf"#define {macro}\(X\)((?:.*\\\n)*.*)", text).group(1)
        for name, value in re.findall(r"X\((\w+),\s*((?:[^()]|\([^()]*\))+)\)", body):
            entries[name] = value.strip()
    return entries


def test_the_export_holds_every_entry_of_format_h_as_written() -> None:
    entries = format_h_entries()
    assert len(entries) > 40 and {"NO_WORD", "H_VALUE_BOUND", "PATTERN", "HEADER_MAGIC"} <= set(entries)
    for name, written in entries.items():
        exported = _kernel.FORMAT[name]
        if written.startswith('"'):
            assert exported == ast.literal_eval("b" + written), name
        elif re.fullmatch(r"-?(0x[0-9A-Fa-f]+|\d+)u?", written):
            assert exported == int(written.rstrip("u"), 0), name
        elif re.fullmatch(r"-?\d+\.\d*", written):
            assert exported == float(written), name
    assert _kernel.FORMAT["H_COUNTS"] == fmt.H_ARRAYS + len(fmt.ARRAY_NAMES) * fmt.H_ARRAY_ENTRY
    assert _kernel.FORMAT["HEADER_MAGIC_BYTES"] == len(fmt.HEADER_MAGIC)


def package_files() -> list[Path]:
    """Every module of the package (each once, wherever a folder is reached from)."""
    return sorted({path.resolve() for folder in ("fastsubs", "indexer", "query", "bench")
                   for path in (ROOT / folder).rglob("*.py")})


def spellings(source: str) -> list[str]:
    """What ``source`` spells of the format again: a format constant's name given a literal
    value, and a bytes literal of one of the format's strings (a database name, a key, a magic)."""
    names = set(format_h_entries())
    strings = {value for value in _kernel.FORMAT.values() if isinstance(value, bytes)}
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value else []
        value = getattr(node, "value", None)
        found += [f"{target.id} = {value.value!r}" for target in targets if isinstance(target, ast.Name)
                  and target.id in names and isinstance(value, ast.Constant)]
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes) and node.value in strings:
            found.append(repr(node.value))
    return found


def test_no_module_spells_a_format_constant() -> None:
    found = {path.name: spellings(path.read_text()) for path in package_files()}
    assert {name: spelled for name, spelled in found.items() if spelled} == {}


def test_the_reading_of_spellings_finds_one() -> None:
    """The check above sees each kind of second spelling (and no use of the format's own)."""
    assert spellings('NO_WORD = 0xFFFFFFFF\nDB = b"arrays"\nend = fmt.END\n') == ["NO_WORD = 4294967295",
                                                                                  "b'arrays'"]


def test_the_rules_are_their_definitions() -> None:
    """Word ids take the fewest bytes that hold ids 0 ... V - 1 in keys (2 at least), and the
    fewest bits in a pattern's data (16 at least; 32 past 25); a key is the slot and the fixed
    words' ids; the header's length follows from the order (format.h's comments)."""
    for vocab_size in (1, 2, 3, 20003, 65535, 65536, 65537, 16777215, 16777216, 16777217, 33554432, 33554433,
                       4294967294):
        assert fmt.id_bytes(vocab_size) == next(w for w in (2, 3, 4) if vocab_size - 1 < 256 ** w)
        bits = next(b for b in range(1, 33) if vocab_size - 1 < 2 ** b)
        assert fmt.id_bits(vocab_size) == (16 if bits <= 16 else bits if bits <= 25 else 32)
    for rule in (fmt.id_bytes, fmt.id_bits):
        with pytest.raises(ValueError, match="does not fit 32-bit ids"):
            rule(4294967295)
    for order in range(1, 9):
        for width in (2, 3, 4):
            assert fmt.key_bytes(order, width) == 1 + width * (order - 1)
    for count in (1, 2, 3, 4, 5, 255, 256, 257, 65535, 65536, 65537, 4294967295):  # positions 0 ... count - 1
        assert fmt.position_bits(count) == (0 if count == 1 else next(b for b in range(1, 33) if count - 1 < 2 ** b))
    assert len(fmt.encode_header(header_fields(order=5))) == fmt.H_COUNTS + 8 * 5 + 8 * 4 + 4 * 4 + 4


@settings(max_examples=100, deadline=None)
@given(slot=st.integers(0, 5), width=st.sampled_from([2, 3, 4]), data=st.data())
def test_a_pattern_key_is_the_slot_then_big_endian_ids(slot: int, width: int, data) -> None:
    ids = data.draw(st.lists(st.integers(0, 256 ** width - 1), min_size=max(slot, 1), max_size=6))
    assert fmt.pattern_key(slot, ids, width) == bytes([slot]) + b"".join(i.to_bytes(width, "big") for i in ids)


def definition_checksum(key: bytes, body: bytes) -> int:
    """format.h's definition: sum of word_i (2i + 1) VALUE_WEIGHT + key_j (2j + 1) KEY_WEIGHT mod 2^32,
    the body zero-padded to whole little-endian words."""
    padded = body + bytes(-len(body) % 4)
    words = [int.from_bytes(padded[i:i + 4], "little") for i in range(0, len(padded), 4)]
    total = sum(w * (2 * i + 1) * fmt.VALUE_WEIGHT for i, w in enumerate(words))
    total += sum(b * (2 * j + 1) * fmt.KEY_WEIGHT for j, b in enumerate(key))
    return total % 2 ** 32


@settings(max_examples=200, deadline=None)
@given(key=st.binary(max_size=1 + 4 * 5), body=st.binary(max_size=1200))
def test_the_core_checksum_is_its_definition(key: bytes, body: bytes) -> None:
    assert fmt.checksum(key, body) == definition_checksum(key, body)


def test_a_changed_byte_always_changes_the_checksum() -> None:
    """Odd weights: whatever one byte becomes, the sum changes (here: every value of every byte)."""
    key, body = bytes(range(7)), bytes(range(40, 80))
    reference = fmt.checksum(key, body)
    for where in range(len(key) + len(body)):
        for value in range(256):
            changed = bytearray(key + body)
            if changed[where] == value:
                continue
            changed[where] = value
            assert fmt.checksum(bytes(changed[:len(key)]), bytes(changed[len(key):])) != reference


def header_fields(order: int = 3) -> dict:
    return {"order": order, "vocab_size": 70000, "id_bytes": 3, "bos_id": 1, "eos_id": 2, "unk_id": fmt.NO_WORD,
            "joint_min": 64, "meta_bytes": 1234, "meta_checksum": 99, "value_bound": 99.5,
            "arrays": [(8 * a + 4, a + 1) for a in range(len(fmt.ARRAY_NAMES))],
            "counts": list(range(10, 10 + order)), "records": list(range(20, 19 + order)),
            "beta_tables": list(range(30, 29 + order))}


def test_a_header_decodes_to_its_fields_and_encodes_back() -> None:
    fields = header_fields()
    header = fmt.encode_header(fields)
    decoded = fmt.decode_header(header)
    assert {k: decoded[k] for k in fields} == {**fields, "arrays": [tuple(a) for a in fields["arrays"]]}
    assert decoded["version"] == fmt.FORMAT_VERSION and decoded["length"] == len(header)
    assert header[fmt.H_MAGIC:fmt.H_MAGIC + len(fmt.HEADER_MAGIC)] == fmt.HEADER_MAGIC
    assert int.from_bytes(header[-4:], "little") == definition_checksum(b"", header[:-4])
    assert fmt.encode_header(decoded) == header


def every_record(path: Path):
    """(order, record key, value) of every record of the index at ``path``."""
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=80)
    with Core(path) as index:
        order = index.order
    with env.begin() as txn:
        for m in range(2, order + 1):
            for key, value in txn.cursor(db=env.open_db(fmt.patterns_db_name(m), txn=txn, create=False)):
                yield m, order, bytes(key), bytes(value)
    env.close()


@pytest.fixture(scope="module")
def joint_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated order-4 model with patterns of 256+ words, built with joint orders on every
    pattern ``_ d`` of 8+ words (PATTERN records of all kinds, blocks, 1- and 2-byte positions)."""
    folder = tmp_path_factory.mktemp("format")
    write_model(folder / "model.arpa", vocab_size=700, higher=[4000, 4000, 3000], seed=11, hubs=6, hub_fanout=400)
    fastsubs.build_index(folder / "model.arpa", folder / "model.fsidx", joint_min=8)
    return folder / "model.fsidx"


@pytest.mark.parametrize("which", ["demo", "joint"])
def test_every_record_decodes_and_encodes_back_to_its_bytes(which: str, demo_index: Path, joint_index: Path) -> None:
    """decode_record and encode_record are each other's inverse on every record of an index
    (END records, blocks with their restarts, small and big ones, the big ones with patterns
    of 256+ words, PATTERN records with and without joint orders)."""
    path = demo_index if which == "demo" else joint_index
    kinds, vocab_size = set(), Core(path).vocab_size
    for order, model_order, key, value in every_record(path):
        record = fmt.decode_record(key, value, order, vocab_size, order < model_order)
        overflow = 8 + len(key) + len(value) > 2038  # (LMDB keeps it in overflow pages)
        wide = any(pattern["count"] > 255 for pattern in record["patterns"]) and record["kind"] == fmt.BLOCK
        kinds.add((record["kind"], bool(record["flags"] & fmt.HAS_JOINT), overflow, wide))
        assert fmt.encode_record(key, record, order, vocab_size) == value, (order, key.hex())
    both = {(fmt.BLOCK, False, False, False), (fmt.BLOCK, False, True, True), (fmt.PATTERN, True, False, False),
            (fmt.END, False, False, False)}
    assert kinds >= both | ({(fmt.PATTERN, False, False, False), (fmt.PATTERN, True, True, False)}
                            if which == "demo" else set())


def key_ids(key: bytes, id_bytes: int) -> tuple[int, ...]:
    """The fixed words' ids of a pattern key (its slot byte aside)."""
    return tuple(int.from_bytes(key[i:i + id_bytes], "big") for i in range(1, len(key), id_bytes))


def test_a_decoded_record_is_what_a_look_up_reads(joint_index: Path) -> None:
    """Each pattern decode_record finds (walking its record) is the pattern the core's look-up
    finds by its key (a binary search of the block's restarts): ids, scores and positions.  A
    pattern of one word outside the last slot stores no values (format.h): the look-up gives
    its n-gram's, as the pattern of the n-gram's first words (slot last) stores them."""
    tables = beta_tables(joint_index)
    with Core(joint_index) as index:
        vocab_size, id_bytes = index.vocab_size, index.id_bytes
        patterns = {(order, pattern["key"]): pattern for order, model_order, key, value in every_record(joint_index)
                    for pattern in fmt.decode_record(key, value, order, vocab_size, order < model_order)["patterns"]}
        elsewhere = 0
        for (order, key), pattern in patterns.items():
            slot, ids = key[0], key_ids(key, id_bytes)
            holder, at = pattern, slice(None)
            if pattern["alpha"] is None:
                assert pattern["count"] == 1 and slot < order - 1 and pattern["joint"] is None
                ngram = (*ids[:slot], *pattern["ids"], *ids[slot:])
                context = bytes([order - 1]) + b"".join(i.to_bytes(id_bytes, "big") for i in ngram[:-1])
                holder = patterns[order, context]
                place = holder["ids"].index(ngram[-1])
                at = slice(place, place + 1)
                elsewhere += 1
            words, alpha, beta, positions = index.pattern(slot, ids)
            assert np.frombuffer(words, np.uint32).tolist() == pattern["ids"]
            assert np.frombuffer(alpha, np.float32).tolist() == holder["alpha"][at]
            assert (beta is None) == (pattern["beta_codes"] is None) == (order == index.order)
            if beta is not None:
                assert np.frombuffer(beta, np.float32).tolist() == pattern_betas(holder, tables[order])[at]
            if pattern["count"] > 1:
                assert np.frombuffer(positions, np.uint32).tolist() == pattern["positions"]
    assert elsewhere > 1000


def test_an_empty_block_is_written_with_its_two_counts() -> None:
    """A BLOCK of no patterns (a forger's: the writer makes none) is sized for the two u16
    counts it writes after the common part, and read back as such."""
    key_len = fmt.key_bytes(2, 2)
    value = fmt.encode_record(bytes(key_len), {"kind": fmt.BLOCK, "flags": 0, "patterns": []}, 2, 400)
    assert len(value) == -(-(fmt.R_PREVIOUS + key_len + 4) // 4) * 4
    assert value[fmt.R_PREVIOUS + key_len:fmt.R_PREVIOUS + key_len + 4] == bytes(4)


def test_a_record_is_refused_where_a_field_does_not_fit(joint_index: Path) -> None:
    """The encoder never truncates: a position past its width, an id past its, is an error."""
    order, model_order, key, value = next(r for r in every_record(joint_index) if r[0] == 2)
    vocab_size = Core(joint_index).vocab_size
    record = fmt.decode_record(key, value, order, vocab_size, order < model_order)
    pattern = next(p for p in record["patterns"] if 2 <= p["count"] <= 256)
    pattern["positions"][0] = 256
    with pytest.raises(ValueError, match="does not fit its width"):
        fmt.encode_record(key, record, order, vocab_size)
    pattern["positions"][0] = 0
    pattern["ids"][0] = 2 ** fmt.id_bits(vocab_size)
    with pytest.raises(ValueError, match="does not fit its width"):
        fmt.encode_record(key, record, order, vocab_size)


def test_every_joint_order_is_by_the_definition_of_the_key(joint_index: Path) -> None:
    """A joint order lists a pattern's words by joint key descending, ties by lower id, a
    key being the smallest float32 at or above the float64 sum of the word's unigram alpha
    and its alpha in the pattern (format.h), computed here with numpy."""
    with Core(joint_index) as index:
        unigram_alpha = np.frombuffer(index.unigrams()[0], np.float32).copy()
        vocab_size = index.vocab_size
    checked = 0
    for order, model_order, key, value in every_record(joint_index):
        for pattern in fmt.decode_record(key, value, order, vocab_size, order < model_order)["patterns"]:
            if pattern["joint"] is None:
                continue
            assert pattern["joint"] == by_key(joint_keys(unigram_alpha, pattern["ids"], pattern["alpha"]))
            checked += 1
    assert checked > 10


def test_a_batch_whose_words_are_past_the_unigrams_is_refused() -> None:
    """The writer reads each word's unigram alpha for a joint key: a word past the unigrams it
    was given is an error, never a read past them.  (Within them, the joint order is by the
    unigram alphas: word 3 first.)"""
    ids = np.array([[5, 1], [5, 2], [5, 3]], np.uint32)  # the pattern "_ 5" (order 2, slot 0) of words 1, 2, 3
    alpha = np.full(3, -1.0, np.float32)
    table = np.array([-1.0], np.float32)
    unigram_alpha = np.array([0.0, -3.0, -2.0, -1.0, -4.0, -4.0, -4.0, -4.0], np.float32)
    keys, offsets, values, parts, bound, *_ = fmt.encode_patterns(ids, alpha, alpha, order=2, slot=0, has_beta=True,
                                                              vocab_size=8, unigram_alpha=unigram_alpha,
                                                              joint_min=3, beta_index=fmt.beta_index(table))
    record = fmt.decode_record(keys, values, 2, 8, True)
    assert record["flags"] & fmt.HAS_JOINT and record["patterns"][0]["joint"] == [2, 1, 0]
    with pytest.raises(ValueError, match="word id 3 is past the unigrams"):
        fmt.encode_patterns(ids, alpha, alpha, order=2, slot=0, has_beta=True, vocab_size=3,
                            unigram_alpha=np.zeros(3, np.float32), joint_min=3, beta_index=fmt.beta_index(table))


def key_delta(key: bytes, before: bytes | None) -> bytes:
    """A block entry's delta: the key minus the one before as big-endian integers, in the
    fewest bytes that hold it (the whole key at a restart, ``before`` None)."""
    if before is None:
        return key
    difference = int.from_bytes(key, "big") - int.from_bytes(before, "big")
    return difference.to_bytes(max(1, (difference.bit_length() + 7) // 8), "big")


def test_block_entries_take_a_code_nibble_or_an_escaped_head() -> None:
    """A block entry's key is a delta from the one before (whole at a restart); entries pair
    up in each restart's group behind a code byte, low nibble first; a code from the
    order's table (fmt.ENTRY_CODES_BETA here) gives the delta's bytes, the count and the beta
    width, else the code is 15 and a head (delta << 4 | count, each escaped to a byte of its
    own when it does not fit its nibble) and the width follow (format.h).  An order-10 batch
    (19-byte keys) whose keys differ by deltas of 1 to 19 bytes, of 1 ... 20 words, read here
    from the bytes with this docstring's rules, and by decode_record.  (A vocabulary of
    100,000 words: 3-byte ids in keys, 17 bits in a pattern's data.)"""
    order, vocab_size, id_bytes, id_bits = 10, 100_000, 3, 17
    key_len = fmt.key_bytes(order, id_bytes)
    contexts = [[1] * 7 + [2, 3], [1] * 7 + [2, 4], [1] * 7 + [2, 300], [1] * 7 + [5, 1], [1] * 8 + [6], [2] * 9,
                [2] * 8 + [3], [2] * 8 + [4]]
    counts = [1, 15, 1, 16, 3, 20, 2, 1]
    rows = [context + [word] for context, count in zip(contexts, counts) for word in range(10, 10 + count)]
    contexts, counts = zip(*sorted(zip(contexts, counts)))  # the key order (slot 9: the ids' order)
    rows.sort()
    ids = np.array(rows, np.uint32)
    alpha = -np.arange(1, len(rows) + 1, dtype=np.float32) / 8
    beta = np.zeros(len(rows), np.float32)
    index = fmt.beta_index(np.zeros(1, np.float32))
    keys, offsets, values, *_ = fmt.encode_patterns(ids, alpha, beta, order=order, slot=order - 1, has_beta=True,
                                                      vocab_size=vocab_size, beta_index=index)
    assert len(keys) == key_len  # one block, one restart
    record = fmt.decode_record(keys, values, order, vocab_size, True)
    assert record["kind"] == fmt.BLOCK
    expected_keys = [fmt.pattern_key(order - 1, context, id_bytes) for context in contexts]
    deltas = [key_delta(key, before) for key, before in zip(expected_keys, [None, *expected_keys])]
    assert [p["key"] for p in record["patterns"]] == expected_keys
    assert [(p["delta"], p["count"]) for p in record["patterns"]] == [(len(d), c) for d, c in zip(deltas, counts)]
    codes: dict[tuple[int, int, int], int] = {}
    for code, (delta, count, width) in enumerate(fmt.ENTRY_CODES_BETA):
        codes.setdefault((delta or key_len, count, width), code)  # the first code of given fields
    at = fmt.R_PREVIOUS + key_len  # the body: u16 patterns, u16 restarts, the restart table, the entries
    assert int.from_bytes(values[at + 2:at + 4], "little") == 1
    at += 4 + 2
    code_byte = 0
    for i, (delta, count) in enumerate(zip(deltas, counts)):
        if i % 2 == 0:
            code_byte = values[at]
            at += 1
        code = code_byte & 15 if i % 2 == 0 else code_byte >> 4
        assert code == codes.get((len(delta), count, 0), fmt.ENTRY_ESCAPED), (i, len(delta), count)
        if code == fmt.ENTRY_ESCAPED:
            head = values[at]
            assert head >> 4 == min(len(delta), 15) and head & 15 == (count if count < 16 else 0), (delta, count)
            at += 1
            if len(delta) >= 15:
                assert values[at] == len(delta)
                at += 1
        assert values[at:at + len(delta)] == delta
        at += len(delta)
        if code == fmt.ENTRY_ESCAPED:
            if count >= 16:
                assert values[at] == count
                at += 1
            assert values[at] == 0  # the width of its beta codes
            at += 1
        positions = (count * fmt.position_bits(count) + 7) // 8
        at += (count * id_bits + 7) // 8 + 4 * count + positions  # ids, alphas, positions; codes of width 0
    assert values[at:] == bytes(len(values) - at) and len(values) - at < 4  # padding
    used = {len(delta) for delta in deltas}
    assert {1, 2, key_len} <= used and max(counts) >= 16 and fmt.ENTRY_ESCAPED in {
        codes.get((len(d), c, 0), fmt.ENTRY_ESCAPED) for d, c in zip(deltas, counts)}
    assert any(codes.get((len(d), c, 0)) is not None for d, c in zip(deltas[1:], counts[1:]))  # a code, too


def test_a_batch_whose_rows_are_out_of_key_order_is_refused() -> None:
    """Keys are written as deltas from the key before: a batch not sorted by pattern key is an
    error, never a key wrapped around."""
    ids = np.array([[6, 1], [5, 2]], np.uint32)  # the pattern "_ 6" before "_ 5"
    alpha = np.full(2, -1.0, np.float32)
    with pytest.raises(ValueError, match="the rows are not sorted by pattern key"):
        fmt.encode_patterns(ids, alpha, alpha, order=2, slot=0, has_beta=True, vocab_size=400,
                            beta_index=fmt.beta_index(np.array([-1.0], np.float32)))


def test_a_batch_whose_back_off_weight_is_not_in_its_table_is_refused() -> None:
    """Each back-off weight is written as its entry of the order's table, found by its
    float32 bits: one missing from the table (here -0.0 beside 0.0, and 0.5) is an error,
    never a code of another value.  (The patterns "5 _" and "6 _": the slot last, where a
    pattern of one word stores its values too.)"""
    ids = np.array([[5, 1], [5, 2], [6, 3]], np.uint32)
    alpha = np.full(3, -1.0, np.float32)
    index = fmt.beta_index(np.array([0.0, -0.25], np.float32))  # (one for every batch, as a build's slot has)
    for missing in (-0.0, 0.5):
        beta = np.array([0.0, -0.25, missing], np.float32)
        with pytest.raises(ValueError, match=f"back-off weight {missing:g} is not in the order's back-off table"):
            fmt.encode_patterns(ids, alpha, beta, order=2, slot=1, has_beta=True, vocab_size=400, beta_index=index)
    keys, offsets, values, *_ = fmt.encode_patterns(ids, alpha, np.array([0.0, -0.25, -0.25], np.float32), order=2,
                                                      slot=1, has_beta=True, vocab_size=400, beta_index=index)
    record = fmt.decode_record(keys, values, 2, 400, True)
    assert [p["beta_codes"] for p in record["patterns"]] == [[0, 1], [1]]


@pytest.mark.parametrize("given", [None, np.array([-1.0], np.float32), b"not an index"])
def test_a_batch_with_back_off_weights_needs_its_tables_index(given: object) -> None:
    """The codec codes betas through the index that beta_index makes of the order's table
    (once for all of a slot's batches): without one, or given anything else (the table
    itself), the batch is refused with a ValueError, never read as an index."""
    ids = np.array([[5, 1]], np.uint32)
    alpha = np.full(1, -1.0, np.float32)
    with pytest.raises(ValueError, match="needs its beta_index"):
        fmt.encode_patterns(ids, alpha, alpha, order=2, slot=0, has_beta=True, vocab_size=400, beta_index=given)


def slot_records(rows: np.ndarray, splits: list[int], vocab_size: int) -> list[tuple[bytes, bytes]]:
    """The records of a slot whose sorted ``rows`` reach the writer in batches cut at ``splits``."""
    writer = RecordWriter(2, 2, vocab_size)
    records = []
    for batch in np.split(rows, splits):
        records += writer.records(batch, slot=1).items()
    return records + list(writer.finish(slot=1).items())


def test_a_slot_s_records_are_the_same_wherever_its_batches_are_cut() -> None:
    """The writer keeps a slot's last block open for the next batch's rows, and a big block
    whose end the batch's last patterns decided: an index does not depend on where the
    sort's batches fall (--memory, --jobs).  Here the patterns "a _" of 2-grams, mostly of a
    word or a few, a few of hundreds or thousands (each leads a big block, which takes the
    patterns after it), cut into batches between random patterns, give the same records as
    one batch, and those hold big blocks."""
    rng = np.random.default_rng(5)
    vocab_size = 5000
    counts = np.where(rng.random(3000) < 0.02, rng.integers(300, 3000, 3000), rng.integers(1, 4, 3000))
    ids = np.concatenate([np.stack([np.full(c, a), np.sort(rng.choice(vocab_size, c, replace=False))], axis=1)
                          for a, c in enumerate(counts)])
    rows = np.zeros(len(ids), row_dtype(2, 2, False))
    rows["ids"] = ids
    rows["alpha"] = -rng.random(len(ids)).astype(np.float32) * 5
    whole = slot_records(rows, [], vocab_size)
    big = [value for _, value in whole if value[fmt.R_KIND] == fmt.BLOCK and len(value) > 4096]
    assert len(big) >= 20
    starts = np.cumsum(counts)[:-1]  # (a batch holds whole patterns)
    for cuts in range(1, 40):
        splits = sorted(rng.choice(starts, cuts, replace=False).tolist())
        assert slot_records(rows, splits, vocab_size) == whole, splits
