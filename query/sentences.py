"""From text to word ids and back: tokenizing input lines and naming substitutes.

Input is handled as bytes end to end, so every word is echoed exactly as it was
written (invalid UTF-8 included) and no decoding cost is paid per token.
"""

from __future__ import annotations

import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import DamagedIndexError
from fastsubs.query._kernel import Words
from fastsubs.query.index import Index

SENTENCE_MARKERS = (b"<s>", b"</s>")


def tokenize(line: bytes) -> list[bytes]:
    """Split on ASCII whitespace and drop ``<s>``/``</s>`` tokens, as the original tool does."""
    return [token for token in line.split() if token not in SENTENCE_MARKERS]


class Vocabulary:
    """Maps tokens to ids (unknown words to ``<unk>`` or to no word) and ids to words, with caches."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._unknown = index.unk_id if index.unk_id is not None else fmt.NO_WORD
        self._ids: dict[bytes, int] = {}
        self._words: dict[int, bytes] = {}
        try:
            self._table = Words(index.word_offsets, index.word_bytes)
        except ValueError as error:
            raise DamagedIndexError(f"{index.path}: damaged index ({error})") from None

    def sentence_ids(self, tokens: list[bytes]) -> tuple[int, ...]:
        """``<s> tokens </s>`` as ids; markers the model lacks are unknown words like any other.

        A tuple: the search slices it into the keys of its caches."""
        word_id = self.word_id
        return (word_id(b"<s>"), *[word_id(token) for token in tokens], word_id(b"</s>"))

    def word_id(self, token: bytes) -> int:
        wid = self._ids.get(token)
        if wid is None:
            found = self.index.word_id(token)
            wid = self._unknown if found is None else found
            if len(self._ids) > 1_000_000:
                self._ids.clear()
            self._ids[token] = wid
        return wid

    def word(self, word_id: int) -> bytes:
        word = self._words.get(word_id)
        if word is None:
            word = self.index.word(word_id)
            self._words[word_id] = word
        return word

    def fields(self, word_ids: np.ndarray, values: np.ndarray) -> bytes:
        """``word value`` fields (``%.8f``) joined by tabs, written in C straight from the index."""
        return self._table.fields(np.asarray(word_ids, dtype=fmt.ID_DTYPE), values)
