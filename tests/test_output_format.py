"""The C writer of output lines (``Words.fields``) against Python's own ``%.8f``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs.query._kernel import Words

#: Short and long words, an empty one, and a short one last (the writer copies short
#: words 16 bytes at a time, unless that would read past the end of the word bytes).
WORDS = [b"a", b"", b"\xff\xfe", b"caf\xc3\xa9", b"x" * 300, b"z"]


def table() -> Words:
    offsets = np.cumsum([0] + [len(w) for w in WORDS]).astype(np.uint64)
    return Words(offsets, b"".join(WORDS))


def expected(ids: list[int], values: list[float]) -> bytes:
    return b"\t".join(WORDS[i] + b" " + b"%.8f" % v for i, v in zip(ids, values))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(WORDS) - 1),
                          st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                    st.floats(-30, 0), st.floats(-1e-7, 1e-7), st.floats(-1e4, 1e4),
                                    st.sampled_from([9999.999999995, -9999.999999999, 1e4, -1e4]),
                                    st.integers(-10**6, 0).map(lambda n: n / 1e8 - 5e-9))),
                max_size=50))
def test_fields_write_what_python_writes(pairs: list[tuple[int, float]]) -> None:
    ids = [i for i, _ in pairs]
    values = [v for _, v in pairs]
    written = table().fields(np.array(ids, dtype=np.uint32), np.array(values, dtype=np.float64))
    assert written == expected(ids, values)


def test_an_id_outside_the_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match="outside the vocabulary"):
        table().fields(np.array([len(WORDS)], dtype=np.uint32), np.array([-1.0]))
