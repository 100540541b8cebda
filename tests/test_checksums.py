"""The three computations of a record checksum agree: the contract's (format.py), the
builder's batched one, and the query's C one that checks every pattern it parses."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs import format as fmt
from fastsubs.query._kernel import KEY_WEIGHT, VALUE_WEIGHT, checksum


def words32(min_size: int = 0) -> st.SearchStrategy[np.ndarray]:
    return st.lists(st.integers(0, 2**32 - 1), min_size=min_size, max_size=300).map(
        lambda w: np.array(w, dtype=np.uint32))


@settings(max_examples=200, deadline=None)
@given(key=st.binary(min_size=1, max_size=1 + 4 * 5), body=words32())
def test_the_query_checksum_is_the_contract_checksum(key: bytes, body: np.ndarray) -> None:
    assert checksum(key, body) == fmt.record_checksum(key, body)


def test_the_query_weights_are_the_contract_weights() -> None:
    assert (VALUE_WEIGHT, KEY_WEIGHT) == (fmt.VALUE_WEIGHT, fmt.KEY_WEIGHT)


@settings(max_examples=50, deadline=None)
# a record's body is never shorter than one word id and its alpha
@given(st.lists(words32(min_size=2), min_size=1, max_size=20), st.integers(1, 9), st.randoms(use_true_random=False))
def test_the_builder_checksums_are_the_contract_checksum(bodies: list[np.ndarray], key_length: int, rng) -> None:
    keys = np.array([[rng.randrange(256) for _ in range(key_length)] for _ in bodies], dtype=np.uint8)
    records = [np.concatenate(([0], body)).astype(np.uint32) for body in bodies]  # header word first
    words = np.concatenate(records)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in records])))
    batched = fmt.batch_checksums(words, offsets, keys)
    assert batched.tolist() == [fmt.record_checksum(bytes(k), b) for k, b in zip(keys, bodies)]
