"""The format's two definitions agree: the C core's (kernel/format.h, as compiled into
fastsubs._kernel) and fastsubs/format.py's; and the three computations of a checksum — the
contract's, the builder's batched one and the C core's that checks every record it reads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs import _kernel
from fastsubs import format as fmt


def test_every_constant_of_the_core_is_the_contracts() -> None:
    compiled = dict(_kernel.FORMAT)
    derived = {
        "HEADER_BYTES_2": fmt.header_bytes(2), "HEADER_BYTES_5": fmt.header_bytes(5),
        "POSITION_BYTES_256": fmt.position_bytes(256), "POSITION_BYTES_257": fmt.position_bytes(257),
        "POSITION_BYTES_65537": fmt.position_bytes(65537),
        "PATTERNS_DB": b"patterns%d", "META_DB": fmt.META_DB,
    }
    for name, value in compiled.items():
        expected = derived[name] if name in derived else getattr(fmt, name)
        assert value == expected, name
    assert fmt.patterns_db_name(7) == compiled["PATTERNS_DB"] % 7


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
