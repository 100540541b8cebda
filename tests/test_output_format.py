"""The C writer of output lines (``Core.fields``) against Python's own ``%.8f``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastsubs
from fastsubs.core import Core

#: Short and long words, and a short one last (the writer copies short words 16 bytes at
#: a time, unless that would read past the end of the word bytes), in the order of the
#: model's unigram section: their ids.
WORDS = [b"<s>", b"</s>", b"a", b"caf\xc3\xa9", b"x" * 300, b"z"]


@pytest.fixture(scope="module")
def words_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("words")
    unigrams = "".join(f"-1.0\t{w.decode()}\n" for w in WORDS)
    model = directory / "words.arpa"
    model.write_text(f"\\data\\\nngram 1={len(WORDS)}\n\n\\1-grams:\n{unigrams}\n\\end\\\n", encoding="utf-8")
    fastsubs.build_index(model, directory / "words.fsidx")
    return directory / "words.fsidx"


@pytest.fixture
def table(words_index: Path) -> Iterator[Core]:
    with Core(words_index) as engine:
        yield engine


def expected(ids: list[int], values: list[float]) -> bytes:
    return b"\t".join(WORDS[i] + b" " + b"%.8f" % v for i, v in zip(ids, values))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(WORDS) - 1),
                          st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                    st.floats(-30, 0), st.floats(-1e-7, 1e-7), st.floats(-1e4, 1e4),
                                    st.sampled_from([9999.999999995, -9999.999999999, 1e4, -1e4]),
                                    st.integers(-10**6, 0).map(lambda n: n / 1e8 - 5e-9))),
                max_size=50))
def test_fields_write_what_python_writes(words_index: Path, pairs: list[tuple[int, float]]) -> None:
    ids = [i for i, _ in pairs]
    values = [v for _, v in pairs]
    with Core(words_index) as table:
        written = table.fields(np.array(ids, dtype=np.uint32), np.array(values, dtype=np.float64))
    assert written == expected(ids, values)


def test_an_id_outside_the_vocabulary_is_refused(table: Core) -> None:
    with pytest.raises(ValueError, match="outside the vocabulary"):
        table.fields(np.array([len(WORDS)], dtype=np.uint32), np.array([-1.0]))
