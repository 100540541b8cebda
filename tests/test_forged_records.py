"""Every check of a pattern record has a record that trips it.

A record's checksum vouches for its bytes, not for the builder's work: ``records_check_pattern``
(kernel/store.c) checks, whenever a search reads a pattern and when ``fastsubs-index
verify`` reads them all, that its ids strictly increase and lie inside the vocabulary, and
that its positions by score are a permutation (none repeated, none past its words) that
orders its scores best first, ties by lower id.  Here each of those is broken in turn in
one pattern, the record's checksum made right again, as a faulty builder (or a forger)
would leave it: in a PATTERN record (a big pattern alone) and in a BLOCK record (an entry
front-coded after the one before it).  The pattern is one that a search of the query's
sentence reads, so the search must end in DamagedIndexError naming the damage, the command
line in one line saying the same, and verify too (exit 1).  Each check is written to be
the one that names its damage, so removing any one of them changes what is reported
(tests/mutations.py removes each).

The index is built here from a generated model (no shared data): a vocabulary of a few
hundred words, with contexts of a hundred continuations and more (PATTERN records, big
blocks) and scores rounded so that many tie.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import lmdb
import numpy as np
import pytest

import fastsubs
from conftest import beta_tables, run_cli
from fastsubs import format as fmt
from fastsubs.bench.reference_terms import TermBuilder
from fastsubs.core import Core
from generated_models import write_model
from test_damaged_index import put


@dataclass(frozen=True)
class Located:
    """One pattern as it lies in its record: the record's order (and whether it holds betas),
    kind and LMDB key, the pattern's key, how many words it holds, and how many bytes its
    key's delta from the entry before it takes (the whole key at a restart; 0 in a PATTERN
    record, whose key is its LMDB key)."""

    order: int
    has_beta: bool
    kind: int
    record_key: bytes
    key: bytes
    count: int
    delta: int


def patterns_of(record_key: bytes, value: bytes, order: int, vocab_size: int, has_beta: bool) -> Iterator[Located]:
    """Every pattern of one record of an index of ``vocab_size`` words, in key order, as the
    core's reference decoder reads it."""
    record = fmt.decode_record(record_key, value, order, vocab_size, has_beta)
    for pattern in record["patterns"]:
        yield Located(order, has_beta, record["kind"], record_key, pattern["key"], pattern["count"],
                      pattern["delta"])


def decoded(value: bytes, where: Located, vocab_size: int) -> tuple[dict, dict]:
    """The record holding ``where`` as the core decodes it, and the pattern's entry in it."""
    record = fmt.decode_record(where.record_key, value, where.order, vocab_size, where.has_beta)
    return record, next(p for p in record["patterns"] if p["key"] == where.key)


def encoded(record: dict, where: Located, vocab_size: int) -> bytes:
    """The record's bytes as the core encodes them (its fields as they are, the checksum made right)."""
    return fmt.encode_record(where.record_key, record, where.order, vocab_size)


@dataclass
class Fields:
    """A pattern's ids, positions by score, alphas and beta codes (their width too), as plain
    lists to forge, and the length of its order's back-off table, for a code to step past."""

    ids: list[int]
    positions: list[int]
    alphas: list[float]
    beta_codes: list[int]
    beta_width: int
    beta_table_len: int


def read_fields(value: bytes, where: Located, vocab_size: int, beta_table_len: int) -> Fields:
    """The fields of a pattern of 2+ words (one word has no positions by score)."""
    _, pattern = decoded(value, where, vocab_size)
    return Fields(pattern["ids"], pattern["positions"], pattern["alpha"], pattern["beta_codes"],
                  pattern["beta_width"], beta_table_len)


def write_fields(value: bytes, where: Located, vocab_size: int, fields: Fields) -> bytes:
    """``value`` with the pattern's fields replaced and the record's checksum made right."""
    record, pattern = decoded(value, where, vocab_size)
    pattern.update(ids=fields.ids, positions=fields.positions, alpha=fields.alphas, beta_codes=fields.beta_codes,
                   beta_width=fields.beta_width)
    return encoded(record, where, vocab_size)


def tied(fields: Fields) -> int | None:
    """The first i whose score by score equals the next one's (a tie, listed by lower id)."""
    a = [fields.alphas[p] for p in fields.positions]
    return next((i for i in range(len(a) - 1) if a[i] == a[i + 1]), None)


def descending(fields: Fields) -> int | None:
    """The first i whose score by score is strictly above the next one's."""
    a = [fields.alphas[p] for p in fields.positions]
    return next((i for i in range(len(a) - 1) if a[i] > a[i + 1]), None)


def swap_positions(fields: Fields, i: int) -> None:
    fields.positions[i], fields.positions[i + 1] = fields.positions[i + 1], fields.positions[i]


# Each forgery breaks one thing the format promises and nothing else the checks read
# before it, and says what records_check_pattern must then report (after "pattern KEY: ").
def ids_not_increasing(fields: Fields, vocab_size: int) -> str:
    fields.ids[0], fields.ids[1] = fields.ids[1], fields.ids[0]
    return "its word ids do not increase (entry 1)"


def id_outside_the_vocabulary(fields: Fields, vocab_size: int) -> str:
    fields.ids[-1] = vocab_size  # the first id past it; the ids still increase
    return f"word id {vocab_size} (entry {len(fields.ids) - 1}) is outside the vocabulary"


def position_repeated(fields: Fields, vocab_size: int) -> str:
    fields.positions[1] = fields.positions[0]
    return f"its positions by score repeat {fields.positions[0]}"


def position_out_of_range(fields: Fields, vocab_size: int) -> str:
    count = len(fields.ids)
    fields.positions[-1] = count  # the first position past the pattern
    return f"its positions by score hold {count}, past its {count} words"


def scores_out_of_order(fields: Fields, vocab_size: int) -> str:
    i = descending(fields)
    assert i is not None
    swap_positions(fields, i)  # the lower score first
    return f"its positions by score do not order its scores (entry {i + 1})"


def tie_out_of_order(fields: Fields, vocab_size: int) -> str:
    i = tied(fields)
    assert i is not None
    swap_positions(fields, i)  # equal scores, the higher id first
    return f"its positions by score put tied scores out of id order (entry {i + 1})"


def beta_code_past_the_table(fields: Fields, vocab_size: int) -> str:
    fields.beta_width = 32  # room for any code
    fields.beta_codes[-1] = fields.beta_table_len  # the first code past the order's table
    return f"its beta code {fields.beta_table_len} (entry {len(fields.ids) - 1}) is past its order's back-off table"


FORGERIES: dict[str, Callable[[Fields, int], str]] = {
    f.__name__.replace("_", " "): f for f in (ids_not_increasing, id_outside_the_vocabulary, position_repeated,
                                               position_out_of_range, scores_out_of_order, tie_out_of_order,
                                               beta_code_past_the_table)}
KINDS = {"PATTERN": fmt.PATTERN, "BLOCK": fmt.BLOCK}


@dataclass(frozen=True)
class Target:
    """A pattern to forge, and a sentence whose search reads it."""

    where: Located
    sentence: list[str]


@dataclass(frozen=True)
class Forgeable:
    path: Path
    vocab_size: int
    id_bytes: int
    targets: dict[int, Target]  # by record kind
    beta_table_len: int  # of the targets' order


def query_sentence(index: Core, where: Located) -> list[str] | None:
    """The words of a sentence ``A x B`` for the pattern ``A _ B``, x any word of the model
    (the look-up of the pattern does not depend on it), checked with the reference term
    builder (which looks up what the C core looks up) to read the pattern; None when no
    sentence can read it (``<s>`` or ``</s>`` inside it)."""
    slot, width = where.key[0], index.id_bytes
    fixed = tuple(int.from_bytes(where.key[1 + i * width:1 + (i + 1) * width], "big")
                  for i in range(where.order - 1))
    left, right = list(fixed[:slot]), list(fixed[slot:])
    if left and left[0] == index.bos_id:
        left = left[1:]
    if right and right[-1] == index.eos_id:
        right = right[:-1]
    if {index.bos_id, index.eos_id} & set(left + right):
        return None
    filler = next(i for i in range(index.vocab_size) if i not in (index.bos_id, index.eos_id, index.unk_id))
    words = [index.word(i).decode() for i in left + [filler] + right]
    builder = TermBuilder(index)
    ids = tuple(np.frombuffer(index.sentence_ids([w.encode() for w in words]), fmt.ID_DTYPE).tolist())
    builder.position_terms(ids, 1 + len(left))
    assert builder.patterns.get((slot, fixed)) is not None, (where, words)
    return words


@pytest.fixture(scope="module")
def forgeable(tmp_path_factory: pytest.TempPathFactory) -> Forgeable:
    """A generated order-3 model's index, and for each record kind a pattern of it to forge:
    a 2-gram's (its back-off weights are codes), with 2+ words (not a power of two: a position
    past them must fit the bits of its positions), a tie and a strict descent in its scores,
    that a sentence can read; in a BLOCK, one whose key is a delta from the one before.  Its
    hubs hold 150 words: PATTERN records that fit their leaf pages (a bigger pattern without a
    joint order leads a big block)."""
    folder = tmp_path_factory.mktemp("forgeable")
    write_model(folder / "model.arpa", vocab_size=400, higher=[3000, 3000], seed=3, hubs=6, hub_fanout=150)
    path = folder / "model.fsidx"
    fastsubs.build_index(folder / "model.arpa", path)
    targets: dict[int, Target] = {}
    with Core(path) as index:
        vocab_size, id_bytes, order = index.vocab_size, index.id_bytes, index.order
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=64)
        with env.begin() as txn:
            for m in [2]:
                for record_key, value in txn.cursor(db=env.open_db(fmt.patterns_db_name(m), txn=txn, create=False)):
                    for where in patterns_of(record_key, value, m, vocab_size, m < order):
                        if where.kind in targets or (where.kind == fmt.BLOCK and where.delta == len(where.key)) \
                                or where.count < 2 or where.count & (where.count - 1) == 0:
                            continue
                        fields = read_fields(value, where, vocab_size, 0)
                        if tied(fields) is None or descending(fields) is None:
                            continue
                        sentence = query_sentence(index, where)
                        if sentence is not None:
                            targets[where.kind] = Target(where, sentence)
        env.close()
        assert set(targets) == set(KINDS.values()), f"no pattern to forge in records of kinds {set(KINDS.values())}"
    with fastsubs.open_index(path) as api:
        for target in targets.values():  # sound, they answer: what fails once forged is the forgery
            assert len(api.sentence(target.sentence, n=5)) == len(target.sentence) + 1
    return Forgeable(path, vocab_size, id_bytes, targets, len(beta_tables(path)[2]))


def query_error(index: Path, sentence: list[str]) -> str:
    """What fastsubs-query says of a damaged index: exit 1, nothing on stdout, one line."""
    result = run_cli("fastsubs-query", index, "-n", "5", input=" ".join(sentence).encode() + b"\n", check=False)
    message = result.stderr.decode()
    assert result.returncode == 1 and result.stdout == b"", (result.returncode, message)
    assert message.count("\n") == 1 and "Traceback" not in message, message
    return message


def forged_copy(forgeable: Forgeable, where: Located, tmp_path: Path, forge: Callable[[Fields], object]) -> Path:
    """A copy of the forgeable index whose pattern ``where`` has had ``forge`` done to its
    fields, its record's checksum made right again."""
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(forgeable.path, copy)
    env = lmdb.open(str(copy), readonly=True, lock=False, max_dbs=64)
    with env.begin() as txn:
        value = txn.get(where.record_key, db=env.open_db(fmt.patterns_db_name(where.order), txn=txn, create=False))
    env.close()
    fields = read_fields(value, where, forgeable.vocab_size, forgeable.beta_table_len)
    forge(fields)
    put(copy, fmt.patterns_db_name(where.order), where.record_key, write_fields(value, where, forgeable.vocab_size,
                                                                                  fields))
    return copy


def assert_named_everywhere(copy: Path, target: Target, expected: str) -> None:
    """The search reading the forged pattern, the command line and verify each name the damage."""
    with fastsubs.open_index(copy) as index:
        with pytest.raises(fastsubs.DamagedIndexError) as raised:
            index.sentence(target.sentence, n=5)
    assert str(raised.value) == f"{copy}: {expected}"
    assert expected in query_error(copy, target.sentence)
    verified = run_cli("fastsubs-index", "verify", copy, check=False)
    assert verified.returncode == 1 and expected.split(" at key ")[0] in verified.stderr.decode(), \
        verified.stderr.decode()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_pattern_is_named_by_the_search_and_by_verify(forgeable: Forgeable, tmp_path: Path, kind: str,
                                                              forgery: str) -> None:
    target = forgeable.targets[KINDS[kind]]
    said: list[str] = []
    copy = forged_copy(forgeable, target.where, tmp_path,
                       lambda fields: said.append(FORGERIES[forgery](fields, forgeable.vocab_size)))
    assert_named_everywhere(copy, target, f"damaged index: pattern {target.where.key.hex()}: {said[0]}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [3, 12, 20, 64])
def test_a_beta_width_the_format_has_not_is_a_malformed_record(forgeable: Forgeable, tmp_path: Path, kind: str,
                                                              width: int) -> None:
    """Beta codes are 0, 1, 2, 4, 8, 16, 24 or 32 bits wide (kernel/format.h): a code of 3
    bits may straddle two bytes, of 12, 20 or 64 it is not read as written.  A pattern forged to
    another width, its codes packed at that width and its record's checksum made right, is a
    record whose layout the reader refuses: the search, the command line and verify say so."""
    target = forgeable.targets[KINDS[kind]]

    def another_width(fields: Fields) -> None:
        fields.beta_width = width
        fields.beta_codes = [code % 2 ** min(width, 32) for code in fields.beta_codes]  # each fits its width

    copy = forged_copy(forgeable, target.where, tmp_path, another_width)
    assert_named_everywhere(copy, target, f"damaged index: a record of patterns{target.where.order} at key "
                                          f"{target.where.record_key.hex()} has a malformed layout")


def entry_offsets(value: bytes, where: Located, vocab_size: int) -> list[int]:
    """Where each entry of the BLOCK record ``value`` starts, counted from the first entry,
    and where the last ends, by format.h's rules (a code byte before the first of each pair,
    a head where no code gives the fields), from the fields decode_record reads."""
    record = fmt.decode_record(where.record_key, value, where.order, vocab_size, where.has_beta)
    key_len, id_bits = len(where.key), fmt.id_bits(vocab_size)
    table = fmt.ENTRY_CODES_BETA if where.has_beta else fmt.ENTRY_CODES_TOP
    given = [(delta or key_len, count, width) for delta, count, width in table]
    offsets, at, in_group = [], 0, 0
    for pattern in record["patterns"]:
        in_group = 0 if pattern["restarts"] else in_group
        offsets.append(at)
        at += in_group % 2 == 0  # the code byte
        width = pattern["beta_width"] or 0
        if (pattern["delta"], pattern["count"], width) not in given:
            at += 1 + (pattern["delta"] >= 15) + (pattern["count"] > 15) + 4 * (pattern["count"] > 255) + where.has_beta
        count = pattern["count"]
        at += pattern["delta"] + (count * id_bits + 7) // 8 + (count * fmt.position_bits(count) + 7) // 8
        if not stores_values_elsewhere(pattern, where.order):  # an alpha and a beta code a word
            at += 4 * count + (count * width + 7) // 8
        in_group += 1
    return offsets + [at]


def stores_values_elsewhere(pattern: dict, order: int) -> bool:
    """A pattern of one word outside its order's last slot, with no joint order, stores no
    values (kernel/format.h): its data is its id."""
    return pattern["count"] == 1 and pattern["key"][0] < order - 1 and pattern["joint"] is None


def padding(used: int, id_last: bool) -> int:
    """The zero bytes after ``used`` bytes of a record: to a whole number of 4-byte words, and
    3 at least after an id that ends it (a reader loads an id as 4 bytes)."""
    tail = 3 if id_last else 0
    return -(used + tail) % 4 + tail


def restart_candidate(forgeable: Forgeable) -> tuple[Located, bytes, list[int], int, list[str]]:
    """A BLOCK entry that a restart could be forged at: one whose fields a code gives (no
    head), that starts a pair but not a group, with a slot-0 key and a sentence that reads
    it; with its record's value, the record's restart table and the entry's place in it."""
    with Core(forgeable.path) as index:
        env = lmdb.open(str(forgeable.path), readonly=True, lock=False, max_dbs=64)
        with env.begin() as txn:
            for m in range(2, index.order + 1):
                has_beta = m < index.order
                table = fmt.ENTRY_CODES_BETA if has_beta else fmt.ENTRY_CODES_TOP
                for record_key, value in txn.cursor(db=env.open_db(fmt.patterns_db_name(m), txn=txn, create=False)):
                    record = fmt.decode_record(record_key, value, m, forgeable.vocab_size, has_beta)
                    if record["kind"] != fmt.BLOCK:
                        continue
                    located = list(patterns_of(record_key, value, m, forgeable.vocab_size, has_beta))
                    key_len = len(located[0].key)
                    coded = {(delta or key_len, count, width) for delta, count, width in table}
                    offsets = entry_offsets(value, located[0], forgeable.vocab_size)
                    group_start = 0
                    for i, (where, pattern) in enumerate(zip(located, record["patterns"])):
                        group_start = i if pattern["restarts"] else group_start
                        if i - group_start >= 2 and (i - group_start) % 2 == 0 and where.key[0] == 0 \
                                and (where.delta, where.count, pattern["beta_width"] or 0) in coded \
                                and (sentence := query_sentence(index, where)) is not None:
                            env.close()
                            restarts = [o for o, p in zip(offsets, record["patterns"]) if p["restarts"]]
                            return where, value, restarts, offsets[i], sentence
        env.close()
    raise AssertionError("no entry to put a restart at")


def test_a_restart_at_an_entry_whose_key_is_a_delta_is_a_malformed_record(forgeable: Forgeable,
                                                                          tmp_path: Path) -> None:
    """A block's restarts are where the look-up's binary search reads whole keys.  A restart
    added at an entry that starts a pair (a code byte, but a code of a delta, not of a whole
    key), the record's checksum made right, is a record the search, the command line and
    verify refuse.  Read as a key, that entry's delta and data (a slot-0 key below it begins
    with a zero byte, a delta never does) would send the search left of the restart, which
    then ends the scan before the pattern looked up: a pattern read as absent."""
    where, value, table, at, sentence = restart_candidate(forgeable)
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(forgeable.path, copy)
    body = fmt.R_PREVIOUS + len(where.key)
    start = body + 4 + 2 * len(table)
    end = entry_offsets(value, where, forgeable.vocab_size)[-1]
    assert int.from_bytes(value[body + 2:body + 4], "little") == len(table)
    last = fmt.decode_record(where.record_key, value, where.order, forgeable.vocab_size, where.has_beta)["patterns"][-1]
    id_last = stores_values_elsewhere(last, where.order)
    assert len(value) == start + end + padding(start + end, id_last)  # the entries end where the padding begins
    forged_table = sorted(table + [at])
    forged = bytearray(value[:body + 2]) + len(forged_table).to_bytes(2, "little")
    forged += b"".join(offset.to_bytes(2, "little") for offset in forged_table) + value[start:start + end]
    forged += bytes(padding(len(forged), id_last))
    forged[:4] = fmt.checksum(where.record_key, bytes(forged[4:])).to_bytes(4, "little")
    put(copy, fmt.patterns_db_name(where.order), where.record_key, bytes(forged))
    assert_named_everywhere(copy, Target(where, sentence), f"damaged index: a record of patterns{where.order} at "
                                                           f"key {where.record_key.hex()} has a malformed layout")


# ---------------------------------------------------------------- values stored elsewhere

def test_every_record_pads_past_an_id_that_ends_it(forgeable: Forgeable) -> None:
    """Readers load a word id as 4 bytes (kernel/common.h, load_narrow), so every id of a
    record is followed by 3 bytes of it at least.  Only a pattern that stores its values
    elsewhere ends with an id; a record that ends with one has that much padding, by
    format.h's rules as this test computes them (entry_offsets), and every other record the
    padding to a whole word alone."""
    seen = {True: 0, False: 0}
    with Core(forgeable.path) as index:
        env = lmdb.open(str(forgeable.path), readonly=True, lock=False, max_dbs=64)
        with env.begin() as txn:
            for m in range(2, index.order + 1):
                for record_key, value in txn.cursor(db=env.open_db(fmt.patterns_db_name(m), txn=txn, create=False)):
                    located = list(patterns_of(record_key, value, m, forgeable.vocab_size, m < index.order))
                    if not located or located[0].kind != fmt.BLOCK:
                        continue
                    record = fmt.decode_record(record_key, value, m, forgeable.vocab_size, m < index.order)
                    id_last = stores_values_elsewhere(record["patterns"][-1], m)
                    restarts = sum(p["restarts"] for p in record["patterns"])
                    start = fmt.R_PREVIOUS + len(located[0].key) + 4 + 2 * restarts
                    used = start + entry_offsets(value, located[0], forgeable.vocab_size)[-1]
                    assert len(value) == used + padding(used, id_last), (m, record_key.hex())
                    seen[id_last] += 1
        env.close()
    assert seen[True] >= 5 and seen[False] >= 5, seen


@dataclass(frozen=True)
class Singleton:
    """An index, a 3-gram pattern of one word in it that stores its values elsewhere (its
    order has beta codes), a sentence whose search reads it, and where its values lie: the
    pattern of its n-gram's first words (the slot last) and the n-gram's place there."""

    path: Path
    vocab_size: int
    id_bytes: int
    beta_table_len: int  # of order 3
    target: Target
    word: int
    holder: Located
    place: int

    def fixed(self) -> tuple[int, ...]:
        return fixed_ids(self.target.where.key, self.id_bytes)

    def ngram(self, word: int) -> tuple[int, ...]:
        return ngram_of(self.target.where.key, word, self.id_bytes)


def fixed_ids(key: bytes, id_bytes: int) -> tuple[int, ...]:
    """The fixed words' ids of the pattern ``key``."""
    return tuple(int.from_bytes(key[i:i + id_bytes], "big") for i in range(1, len(key), id_bytes))


def ngram_of(key: bytes, word: int, id_bytes: int) -> tuple[int, ...]:
    """The n-gram of ``word`` in the pattern ``key``."""
    fixed = fixed_ids(key, id_bytes)
    return (*fixed[:key[0]], word, *fixed[key[0]:])


def holder_key(ngram: tuple[int, ...], id_bytes: int) -> bytes:
    """The key of the pattern that holds the values of ``ngram``'s patterns of one word: its
    first words, the slot last."""
    return bytes([len(ngram) - 1]) + b"".join(i.to_bytes(id_bytes, "big") for i in ngram[:-1])


@pytest.fixture(scope="module")
def singleton(tmp_path_factory: pytest.TempPathFactory) -> Singleton:
    folder = tmp_path_factory.mktemp("singleton")
    write_model(folder / "model.arpa", vocab_size=400, higher=[3000, 3000, 2000], seed=3, hubs=6, hub_fanout=300)
    path = folder / "model.fsidx"
    fastsubs.build_index(folder / "model.arpa", path)
    with Core(path) as index:
        vocab_size, id_bytes = index.vocab_size, index.id_bytes
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=64)
        with env.begin() as txn:
            records = list(txn.cursor(db=env.open_db(fmt.patterns_db_name(3), txn=txn, create=False)))
        env.close()
        located = {where.key: (where, value) for record_key, value in records
                   for where in patterns_of(record_key, value, 3, vocab_size, True)}
        for where, value in located.values():
            _, pattern = decoded(value, where, vocab_size)
            if stores_values_elsewhere(pattern, 3) and (sentence := query_sentence(index, where)) is not None:
                ngram = ngram_of(where.key, pattern["ids"][0], id_bytes)
                holder, holder_value = located[holder_key(ngram, id_bytes)]
                place = decoded(holder_value, holder, vocab_size)[1]["ids"].index(ngram[-1])
                return Singleton(path, vocab_size, id_bytes, len(beta_tables(path)[3]), Target(where, sentence),
                                 pattern["ids"][0], holder, place)
    raise AssertionError("no pattern of one word to forge")


def forge_pattern(copy: Path, where: Located, vocab_size: int, forge: Callable[[dict], object]) -> None:
    """Does ``forge`` to pattern ``where``'s decoded fields in the index at ``copy``, its record's
    checksum made right again."""
    env = lmdb.open(str(copy), readonly=True, lock=False, max_dbs=64)
    with env.begin() as txn:
        value = txn.get(where.record_key, db=env.open_db(fmt.patterns_db_name(where.order), txn=txn, create=False))
    env.close()
    record, pattern = decoded(value, where, vocab_size)
    forge(pattern)
    put(copy, fmt.patterns_db_name(where.order), where.record_key, encoded(record, where, vocab_size))


def test_a_pattern_whose_values_are_missing_where_they_lie_is_named(singleton: Singleton, tmp_path: Path) -> None:
    """A pattern of one word reads its values in the pattern of its n-gram's first words.  Its
    word forged to one whose n-gram the model lacks (the id still in the vocabulary), the
    search and the command line name the missing n-gram, never a value read from another
    entry; verify, which reads each slot's n-grams once and no pattern's values twice, finds
    that the slot no longer holds the n-grams of the last."""
    where = singleton.target.where
    with Core(singleton.path) as index:
        assert index.ngram(singleton.ngram(singleton.word)) is not None
        lacking = next(w for w in range(index.vocab_size) if index.ngram(singleton.ngram(w)) is None)
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(singleton.path, copy)
    forge_pattern(copy, where, singleton.vocab_size, lambda pattern: pattern.update(ids=[lacking]))
    key = holder_key(singleton.ngram(lacking), singleton.id_bytes)
    expected = f"damaged index: pattern {where.key.hex()}: its n-gram is missing from pattern {key.hex()}, which " \
               "holds its values"
    with fastsubs.open_index(copy) as index:
        with pytest.raises(fastsubs.DamagedIndexError) as raised:
            index.sentence(singleton.target.sentence, n=5)
    assert str(raised.value) == f"{copy}: {expected}"
    assert expected in query_error(copy, singleton.target.sentence)
    verified = run_cli("fastsubs-index", "verify", copy, check=False)
    assert verified.returncode == 1 and f"damaged index: the patterns of slot {where.key[0]} of patterns3 do not " \
                                        "hold the n-grams its last slot holds" in verified.stderr.decode()


def test_a_beta_code_past_the_table_where_values_lie_is_named(singleton: Singleton, tmp_path: Path) -> None:
    """The beta code a pattern of one word reads in the pattern that holds its values is
    checked against its order's table when it is read, even where that pattern itself is
    never read whole: the look-up of the one pattern names the damage; verify names it in
    the pattern that holds it."""
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(singleton.path, copy)

    def past_the_table(pattern: dict) -> None:
        pattern["beta_width"] = 32
        pattern["beta_codes"][singleton.place] = singleton.beta_table_len

    forge_pattern(copy, singleton.holder, singleton.vocab_size, past_the_table)
    where = singleton.target.where
    expected = (f"damaged index: pattern {where.key.hex()}: its beta code {singleton.beta_table_len} in pattern "
                f"{singleton.holder.key.hex()} is past its order's back-off table")
    with Core(copy) as index, pytest.raises(fastsubs.DamagedIndexError) as raised:
        index.pattern(where.key[0], singleton.fixed())
    assert str(raised.value) == f"{copy}: {expected}"
    verified = run_cli("fastsubs-index", "verify", copy, check=False)
    named = (f"damaged index: pattern {singleton.holder.key.hex()}: its beta code {singleton.beta_table_len} (entry "
             f"{singleton.place}) is past its order's back-off table")
    assert verified.returncode == 1 and named in verified.stderr.decode(), verified.stderr.decode()


def test_a_record_whose_last_id_lacks_its_tail_is_refused_by_the_look_up(singleton: Singleton,
                                                                          tmp_path: Path) -> None:
    """An id that ends a record is followed by 3 bytes of padding at least (a reader loads an
    id as 4 bytes).  A record of patterns3 whose last pattern stores its values elsewhere,
    cut by 4 bytes of its padding, its checksum made right (a forger's: the writer pads it):
    the look-up of that pattern names a malformed record, and verify too."""
    with Core(singleton.path) as index:
        vocab_size = index.vocab_size
    env = lmdb.open(str(singleton.path), readonly=True, lock=False, max_dbs=64)
    with env.begin() as txn:
        records = list(txn.cursor(db=env.open_db(fmt.patterns_db_name(3), txn=txn, create=False)))
    env.close()
    for record_key, value in records:
        located = list(patterns_of(record_key, value, 3, vocab_size, True))
        if not located or located[0].kind != fmt.BLOCK:
            continue
        record = fmt.decode_record(record_key, value, 3, vocab_size, True)
        restarts = sum(p["restarts"] for p in record["patterns"])
        used = fmt.R_PREVIOUS + len(record_key) + 4 + 2 * restarts + entry_offsets(value, located[0], vocab_size)[-1]
        if stores_values_elsewhere(record["patterns"][-1], 3) and len(value) - used >= 4:
            break
    else:
        raise AssertionError("no record ends with a pattern of one word and 4 bytes of padding or more")
    cut = bytearray(value[:-4])
    cut[:4] = fmt.checksum(record_key, bytes(cut[4:])).to_bytes(4, "little")
    copy = tmp_path / "cut.fsidx"
    shutil.copytree(singleton.path, copy)
    put(copy, fmt.patterns_db_name(3), record_key, bytes(cut))
    last = located[-1].key
    expected = f"damaged index: a record of patterns3 at key {record_key.hex()} has a malformed layout"
    with Core(copy) as index, pytest.raises(fastsubs.DamagedIndexError) as raised:
        index.pattern(last[0], fixed_ids(last, singleton.id_bytes))
    assert str(raised.value) == f"{copy}: {expected}"
    verified = run_cli("fastsubs-index", "verify", copy, check=False)
    assert verified.returncode == 1 and expected in verified.stderr.decode(), verified.stderr.decode()
