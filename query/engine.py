"""Substitutes for whole sentences: tokens in, (ids, scores) per position out.

This is what the CLI and the public API share; it owns the per-process state (the
open index, the vocabulary caches and the search's scratch space).
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import ArgumentError
from fastsubs.query.index import Index
from fastsubs.query.search import Limits, Searcher
from fastsubs.query.sentences import Vocabulary

Ranked = tuple[np.ndarray, np.ndarray]


class Engine:
    """An open index with its searcher; create one per process."""

    def __init__(self, index_path: str | os.PathLike[str]) -> None:
        self.index = Index(index_path)
        self.vocabulary = Vocabulary(self.index)
        self.searcher = Searcher(self.index)
        self._excluded: dict[tuple[bytes, ...], bytes] = {}
        self.closed = False

    def close(self) -> None:
        """Unmap the index; the cached patterns point into it, so the engine is done for."""
        self.closed = True
        self.index.close()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("the index is closed")

    def excluded(self, words: tuple[bytes, ...]) -> bytes:
        """The words of ``words`` that can be substitutes, as the search takes them: their
        ids, ascending, packed as ID_DTYPE (words the vocabulary lacks, and ``<s>``, which
        is never a candidate, are left out)."""
        if not words:
            return b""
        packed = self._excluded.get(words)
        if packed is None:
            ids = {self.index.word_id(word) for word in words} - {None, self.index.bos_id}
            packed = self._excluded[words] = np.array(sorted(ids), dtype=fmt.ID_DTYPE).tobytes()
        return packed

    def unknown(self, words: tuple[bytes, ...]) -> list[bytes]:
        """The words of ``words`` that are not in the vocabulary (for a warning)."""
        return [word for word in words if self.index.word_id(word) is None]

    def sentence(self, tokens: list[bytes], limits: Limits, eos: bool = True, excluded: bytes = b"") -> list[Ranked]:
        """Ranked substitutes for every position w1 … wn and (with ``eos``) the closing ``</s>``;
        never the words of ``excluded`` (from :meth:`excluded`)."""
        self._check_open()
        ids = self.vocabulary.sentence_ids(tokens)
        last = len(ids) if eos else len(ids) - 1
        return [self.searcher.search(ids, target, limits, excluded) for target in range(1, last)]

    def position(self, tokens: list[bytes], position: int, limits: Limits, excluded: bytes = b"") -> Ranked:
        """Ranked substitutes for ``tokens[position]`` (``position == len(tokens)`` is ``</s>``)."""
        self._check_open()
        if isinstance(position, bool) or not isinstance(position, numbers.Integral) \
                or not 0 <= position <= len(tokens):
            raise ArgumentError(f"position {position!r} is not a whole number within 0 … {len(tokens)}")
        ids = self.vocabulary.sentence_ids(tokens)
        return self.searcher.search(ids, int(position) + 1, limits, excluded)
