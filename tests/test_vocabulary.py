"""The build's vocabulary (``fastsubs.indexer._native.Vocabulary``) against Python's own containers.

A big model has millions of words, and the building process keeps them all while its jobs
sort (its memory counts against ``--memory``), so the words are held in C, end to end,
with an open-addressing table of ids.  Whatever words it is given, it must answer as a
list and a dict would: ids in the order words were first added, a word found again by
its id, bytes compared as Python compares them (the spelling order of the index's
arrays, which a query's word look-up binary-searches), across the table's growths.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsubs.indexer._native import Vocabulary

#: Words with shared prefixes, empty ones, NULs and high bytes: what a comparison of
#: bytes gets wrong first (a prefix is smaller; a byte is unsigned).
WORDS = st.lists(st.binary(max_size=6) | st.sampled_from([b"a", b"ab", b"abc", b"\x00", b"\xff", b"a\x00"]),
                 max_size=300)


@settings(max_examples=200, deadline=None)
@given(WORDS)
def test_a_vocabulary_answers_as_a_list_and_a_dict(words: list[bytes]) -> None:
    vocabulary = Vocabulary()
    ids: dict[bytes, int] = {}
    for word in words:
        assert vocabulary.add(word) == ids.setdefault(word, len(ids))  # a word again: the id it has
    known = list(ids)
    assert len(vocabulary) == len(known) and list(vocabulary) == known
    assert [vocabulary.find(word) for word in known] == list(range(len(known)))
    assert vocabulary.find(b"not-a-word-here") == -1
    spellings, offsets = vocabulary.spellings()
    assert spellings == b"".join(known)
    assert np.frombuffer(offsets, "<u8").tolist() == np.cumsum([0] + [len(w) for w in known]).tolist()
    assert np.frombuffer(vocabulary.spelling_order(), "<i4").tolist() == sorted(range(len(known)),
                                                                                 key=known.__getitem__)


def test_a_vocabulary_of_a_million_words_finds_each_after_every_growth() -> None:
    """Its table doubles many times on the way (16 slots at first, at most half full)."""
    vocabulary = Vocabulary()
    words = [b"w%d" % number for number in range(1_000_000)]
    assert [vocabulary.add(word) for word in words] == list(range(len(words)))
    assert all(vocabulary.find(word) == number for number, word in enumerate(words))
    assert vocabulary[999_999] == b"w999999" and vocabulary.find(b"w1000000") == -1
