"""Every check of a joint order has a record that trips it.

A pattern ``_ d`` of at least the header's ``joint_min`` words carries, in its PATTERN
record, its words by joint key (the unigram alpha plus the pattern's alpha, rounded up to
float32; format 5 stores the order, not the keys, which the reader computes).  The search
bounds unread words by those keys, so an order that is not theirs would be a wrong
answer, not an error: ``records_check_pattern`` (kernel/records.c) checks the order
against the keys whenever a search reads the pattern, and ``fastsubs-index verify`` also
checks that exactly the patterns the threshold names carry one.  Here each promise is
broken in turn in one joint order, the record's checksum made right again, as a faulty
builder (or a forger) would leave it; the search must end in DamagedIndexError naming
the damage, and verify too (exit 1).  The header's value bound (the joint bound's
rounding slack is measured in it) is forged the same way.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lmdb
import numpy as np
import pytest

import fastsubs
from conftest import run_cli
from fastsubs import format as fmt
from fastsubs.core import Core
from generated_models import write_model
from test_damaged_index import put
from test_forged_records import Located, decoded, encoded, patterns_of, query_error, query_sentence


def joint_keys(unigram_alpha: np.ndarray, ids: list[int], alphas: list[float]) -> np.ndarray:
    """Each word's joint key, by position: the smallest float32 at or above the float64 sum
    of its unigram alpha and its alpha in the pattern (format.h), computed here with numpy."""
    exact = unigram_alpha[ids].astype(np.float64) + np.asarray(alphas, np.float32).astype(np.float64)
    keys = exact.astype(np.float32)
    return np.where(keys.astype(np.float64) < exact, np.nextafter(keys, np.float32(np.inf)), keys)


def by_key(keys: np.ndarray) -> list[int]:
    """Positions by key descending, ties by lower position (the format's orders)."""
    return sorted(range(len(keys)), key=lambda i: (-keys[i], i))


@dataclass
class Joint:
    """A pattern's joint order and what its keys come from, as plain lists to forge:
    positions into the pattern's ids, the alphas, the positions by score (which follow the
    alphas), and the unigram alphas of the model."""

    positions: list[int]
    ids: list[int]
    alphas: list[float]
    by_score: list[int]
    unigram_alpha: np.ndarray

    def keys(self) -> np.ndarray:
        """The joint keys in joint order."""
        return joint_keys(self.unigram_alpha, self.ids, self.alphas)[self.positions]


def read_joint(value: bytes, where: Located, vocab_size: int, unigram_alpha: np.ndarray) -> Joint:
    _, pattern = decoded(value, where, vocab_size)
    return Joint(pattern["joint"], pattern["ids"], pattern["alpha"], pattern["positions"], unigram_alpha)


def write_joint(value: bytes, where: Located, vocab_size: int, joint: Joint) -> bytes:
    """``value`` with the joint order (and the alphas, positions by score) replaced and the
    record's checksum made right."""
    record, pattern = decoded(value, where, vocab_size)
    pattern.update(joint=joint.positions, alpha=joint.alphas, positions=joint.by_score)
    return encoded(record, where, vocab_size)


def first(pairs: list[tuple[float, float]], relation: Callable[[float, float], bool]) -> int:
    """The first i whose key and the next one's stand in ``relation``."""
    return next(i for i, (a, b) in enumerate(pairs) if relation(a, b))


# Each forgery breaks one promise of the joint order and says what records_check_pattern reports.
def joint_position_repeated(joint: Joint) -> str:
    joint.positions[1] = joint.positions[0]
    return f"its positions by joint key repeat {joint.positions[0]}"


def joint_position_out_of_range(joint: Joint) -> str:
    count = len(joint.positions)
    joint.positions[-1] = count
    return f"its positions by joint key hold {count}, past its {count} words"


def joint_keys_out_of_order(joint: Joint) -> str:
    keys = joint.keys()
    i = first(list(zip(keys, keys[1:])), lambda a, b: a > b)
    joint.positions[i], joint.positions[i + 1] = joint.positions[i + 1], joint.positions[i]
    return f"its positions by joint key do not order its joint keys (entry {i + 1})"


def joint_tie_out_of_order(joint: Joint) -> str:
    """Entries 0 and 1 made a tie (entry 1's alpha raised until its key is entry 0's, the
    positions by score sorted again: the only fault is in the joint order), the higher id
    first."""
    top, second = joint.positions[0], joint.positions[1]
    target = joint.keys()[0]
    alpha = np.float32(joint.alphas[second])
    while joint_keys(joint.unigram_alpha, [joint.ids[second]], [alpha])[0] < target:
        alpha = np.nextafter(alpha, np.float32(np.inf))
    joint.alphas[second] = float(alpha)
    assert joint_keys(joint.unigram_alpha, [joint.ids[second]], [alpha])[0] == target
    joint.by_score = by_key(np.asarray(joint.alphas, np.float32))
    joint.positions = by_key(joint_keys(joint.unigram_alpha, joint.ids, joint.alphas))
    assert set(joint.positions[:2]) == {top, second}
    joint.positions[0], joint.positions[1] = max(top, second), min(top, second)
    return "its positions by joint key put tied joint keys out of id order (entry 1)"


FORGERIES = {f.__name__.replace("_", " "): f for f in (
    joint_position_repeated, joint_position_out_of_range, joint_keys_out_of_order, joint_tie_out_of_order)}


@dataclass(frozen=True)
class JointIndex:
    path: Path
    vocab_size: int
    where: Located  # a pattern "_ d" with a joint order that a search reads
    sentence: list[str]
    block: Located  # a pattern of order 2 in a BLOCK record
    block_sentence: list[str]
    unigram_alpha: np.ndarray


@pytest.fixture(scope="module")
def joint_index(tmp_path_factory: pytest.TempPathFactory) -> JointIndex:
    """A generated order-3 model built with joint orders on every pattern ``_ d`` of 8+
    words: one of them with a descent among its keys, and a small pattern of order 2 in a
    BLOCK record, each with a sentence whose search reads it."""
    folder = tmp_path_factory.mktemp("joint")
    write_model(folder / "model.arpa", vocab_size=400, higher=[3000, 3000], seed=3, hubs=6, hub_fanout=300)
    path = folder / "model.fsidx"
    fastsubs.build_index(folder / "model.arpa", path, joint_min=8)
    found: dict[str, tuple[Located, list[str]]] = {}
    with Core(path) as index:
        vocab_size = index.vocab_size
        unigram_alpha = np.frombuffer(index.unigrams()[0], np.float32).copy()
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=64)
        with env.begin() as txn:
            for record_key, value in txn.cursor(db=env.open_db(fmt.patterns_db_name(2), txn=txn, create=False)):
                for where in patterns_of(record_key, value, 2, vocab_size, True):
                    if where.key[0] != 0 or where.count < 2 or where.count == 256:
                        continue
                    if fmt.decode_record(record_key, value, 2, vocab_size, True)["flags"] & fmt.HAS_JOINT \
                            and "joint" not in found:
                        keys = read_joint(value, where, vocab_size, unigram_alpha).keys()
                        if not any(a > b for a, b in zip(keys, keys[1:])):
                            continue
                        name = "joint"
                    elif where.kind == fmt.BLOCK and "block" not in found:
                        name = "block"
                    else:
                        continue
                    sentence = query_sentence(index, where)
                    if sentence is not None:
                        found[name] = (where, sentence)
        env.close()
    assert set(found) == {"joint", "block"}, found
    return JointIndex(path, vocab_size, *found["joint"], *found["block"], unigram_alpha)


def record_of(index: Path, where: Located) -> bytes:
    env = lmdb.open(str(index), readonly=True, lock=False, max_dbs=64)
    with env.begin() as txn:
        value = txn.get(where.record_key, db=env.open_db(fmt.patterns_db_name(where.order), txn=txn, create=False))
    env.close()
    return value


def assert_named(copy: Path, sentence: list[str], expected: str) -> None:
    """The search, the command line and verify all name ``expected``."""
    with fastsubs.open_index(copy) as index:
        with pytest.raises(fastsubs.DamagedIndexError) as raised:
            index.sentence(sentence, n=5)
    assert str(raised.value) == f"{copy}: {expected}"
    assert expected in query_error(copy, sentence)
    verified = run_cli("fastsubs-index", "verify", copy, check=False)
    assert verified.returncode == 1 and expected in verified.stderr.decode(), verified.stderr.decode()


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_joint_order_is_named_by_the_search_and_by_verify(joint_index: JointIndex, tmp_path: Path,
                                                                   forgery: str) -> None:
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(joint_index.path, copy)
    where = joint_index.where
    value = record_of(copy, where)
    joint = read_joint(value, where, joint_index.vocab_size, joint_index.unigram_alpha)
    damage = FORGERIES[forgery](joint)
    put(copy, fmt.patterns_db_name(2), where.record_key, write_joint(value, where, joint_index.vocab_size, joint))
    assert_named(copy, joint_index.sentence, f"damaged index: pattern {where.key.hex()}: {damage}")


def test_a_joint_flag_on_a_block_is_a_malformed_record(joint_index: JointIndex, tmp_path: Path) -> None:
    """Only a PATTERN record of a pattern ``_ d`` may carry a joint order: the flag on a
    BLOCK would have the reader look for one where entries lie."""
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(joint_index.path, copy)
    where = joint_index.block
    record, _ = decoded(record_of(copy, where), where, joint_index.vocab_size)
    record["flags"] |= fmt.HAS_JOINT
    put(copy, fmt.patterns_db_name(2), where.record_key, encoded(record, where, joint_index.vocab_size))
    assert_named(copy, joint_index.block_sentence,
                 "damaged index: a record of patterns2 has a malformed key or kind")


def test_verify_names_a_pattern_whose_joint_order_is_missing(joint_index: JointIndex, tmp_path: Path) -> None:
    """A joint order dropped (flag cleared, bytes cut) leaves a record the search reads
    soundly, without the joint bound; verify holds the builder to the header's threshold."""
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(joint_index.path, copy)
    where = joint_index.where
    record, pattern = decoded(record_of(copy, where), where, joint_index.vocab_size)
    pattern.update(joint=None)
    record["flags"] &= ~fmt.HAS_JOINT
    put(copy, fmt.patterns_db_name(2), where.record_key, encoded(record, where, joint_index.vocab_size))
    with fastsubs.open_index(joint_index.path) as index:
        expected = [[(s.word, s.logprob) for s in position] for position in index.sentence(joint_index.sentence, n=5)]
    with fastsubs.open_index(copy) as index:
        got = [[(s.word, s.logprob) for s in position] for position in index.sentence(joint_index.sentence, n=5)]
    assert got == expected
    verified = run_cli("fastsubs-index", "verify", copy, check=False)
    assert verified.returncode == 1, verified.stderr.decode()
    assert (f"pattern {where.key.hex()} lacks a joint order, against the header's threshold of 8 words"
            in verified.stderr.decode())


def forge_value_bound(index: Path, bound: float) -> None:
    """The header's value bound replaced, its checksum made right."""
    env = lmdb.open(str(index), max_dbs=64)
    with env.begin(write=True, db=env.open_db(fmt.META_DB)) as txn:
        header = fmt.decode_header(txn.get(fmt.HEADER_KEY))
        header["value_bound"] = bound
        txn.put(fmt.HEADER_KEY, fmt.encode_header(header))
    env.close()


def test_a_value_bound_below_a_unigram_is_named_at_open(joint_index: JointIndex, tmp_path: Path) -> None:
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(joint_index.path, copy)
    forge_value_bound(copy, 0.0)
    with pytest.raises(fastsubs.DamagedIndexError, match="a unigram's value is beyond the header's value bound"):
        fastsubs.open_index(copy)


def test_a_value_beyond_the_bound_is_named_where_it_is_read(joint_index: JointIndex, tmp_path: Path) -> None:
    """A bound that covers the unigrams but not a pattern's values: named when the pattern
    is read (the rounding slack would be too small for sums of those values)."""
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(joint_index.path, copy)
    where = joint_index.where
    env = lmdb.open(str(copy), readonly=True, lock=False, max_dbs=64)
    with env.begin(db=env.open_db(fmt.META_DB, create=False)) as txn:
        bound = fmt.decode_header(txn.get(fmt.HEADER_KEY))["value_bound"]
    env.close()
    record, pattern = decoded(record_of(copy, where), where, joint_index.vocab_size)
    pattern["alpha"][0] = -2 * bound - 1
    put(copy, fmt.patterns_db_name(2), where.record_key, encoded(record, where, joint_index.vocab_size))
    assert_named(copy, joint_index.sentence, f"damaged index: pattern {where.key.hex()}: a value of entry 0 is "
                                             "beyond the header's value bound")


def test_a_value_a_hair_beyond_the_bound_is_named(joint_index: JointIndex, tmp_path: Path) -> None:
    """A bound between two floats, just under a value's magnitude: the check, made in float
    (kernel/records.c, beyond_bound), rounds the bound down, never up to the value."""
    copy = tmp_path / "forged.fsidx"
    shutil.copytree(joint_index.path, copy)
    where = joint_index.where
    record, pattern = decoded(record_of(copy, where), where, joint_index.vocab_size)
    magnitude = float(np.float32(1000.0))
    pattern["alpha"][0] = -magnitude
    put(copy, fmt.patterns_db_name(2), where.record_key, encoded(record, where, joint_index.vocab_size))
    forge_value_bound(copy, math.nextafter(magnitude, 0.0))  # rounds to ``magnitude`` as a float
    assert_named(copy, joint_index.sentence, f"damaged index: pattern {where.key.hex()}: a value of entry 0 is "
                                             "beyond the header's value bound")
