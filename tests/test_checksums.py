"""The format's two definitions agree: the C core's (kernel/format.h, as compiled into
fastsubs._kernel) and fastsubs/format.py's; and the three computations of a checksum — the
contract's, the builder's batched one and the C core's that checks every record it reads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs import _kernel
from fastsubs import format as fmt


def test_every_rule_of_the_core_is_the_contracts() -> None:
    """Every constant of kernel/format.h as the core was compiled with it equals
    fastsubs/format.py's; every rule that is a function (header length, position width, id
    width, key length, a pattern's data bytes) gives the same value on both sides of each
    of its boundaries.  A change to one spelling of the format alone fails here."""
    compiled = dict(_kernel.FORMAT)
    rules = compiled.pop("RULES")
    assert set(rules) == {"header_bytes", "position_bytes", "id_bytes_for", "key_length", "pattern_data_bytes",
                          "joint_data_bytes"}
    for name, table in rules.items():
        for arguments, value in table:
            assert getattr(fmt, name)(*arguments) == value, (name, arguments)
    for name, value in compiled.items():
        assert value == getattr(fmt, name), name
    assert fmt.ARRAY_ITEM_BYTES == tuple(np.dtype(dtype).itemsize for dtype in fmt.ARRAY_DTYPES)
    assert fmt.patterns_db_name(7) == compiled["PATTERNS_DB"] % 7 and fmt.is_patterns_db(b"patterns7")
    assert not fmt.is_patterns_db(b"patternsx") and not fmt.is_patterns_db(fmt.META_DB)


def test_the_builder_s_keys_are_the_contract_s() -> None:
    """The writer's vectorized keys and the one-key form agree (the core reads what they make:
    any index the tests build)."""
    fixed = np.array([[0, 70000], [65535, 1], [16777215, 3]], dtype=np.uint32)
    for width in (3, 4):
        keys = fmt.pattern_keys(1, fixed, width)
        assert [bytes(key) for key in keys] == [
            bytes([1]) + b"".join(int(i).to_bytes(width, "big") for i in row) for row in fixed]
        assert keys.shape[1] == fmt.key_length(3, width)


@settings(max_examples=200, deadline=None)
@given(key=st.binary(max_size=1 + 4 * 5), body=st.binary(max_size=1200))
def test_the_core_checksum_is_the_contract_checksum(key: bytes, body: bytes) -> None:
    assert _kernel.checksum(key, body) == fmt.record_checksum(key, body)


def test_a_changed_byte_always_changes_the_checksum() -> None:
    """Odd weights: whatever one byte becomes, the sum changes (here: every value of every byte)."""
    key, body = bytes(range(7)), bytes(range(40, 80))
    reference = fmt.record_checksum(key, body)
    for where in range(len(key) + len(body)):
        for value in range(256):
            changed = bytearray(key + body)
            if changed[where] == value:
                continue
            changed[where] = value
            assert _kernel.checksum(bytes(changed[:len(key)]), bytes(changed[len(key):])) != reference


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(min_size=4, max_size=400).map(lambda b: b[:len(b) // 4 * 4]), min_size=1, max_size=20),
       st.integers(1, 9), st.randoms(use_true_random=False))
def test_the_builder_checksums_are_the_contract_checksum(bodies: list[bytes], key_length: int, rng) -> None:
    keys = np.array([[rng.randrange(256) for _ in range(key_length)] for _ in bodies], dtype=np.uint8)
    records = [np.frombuffer(bytes(4) + body, dtype="<u4") for body in bodies]  # checksum word first
    words = np.concatenate(records)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in records])))
    batched = fmt.batch_checksums(words, offsets, keys)
    assert batched.tolist() == [fmt.record_checksum(bytes(k), b) for k, b in zip(keys, bodies)]
