"""Substitutes for whole sentences: tokens in, (ids, scores) per position out.

This is what the CLI and the public API share; it owns the per-process state (the
open index, the vocabulary caches and the search's scratch space).
"""

from __future__ import annotations

import os

import numpy as np

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

    def close(self) -> None:
        self.index.close()

    def sentence(self, tokens: list[bytes], limits: Limits) -> list[Ranked]:
        """Ranked substitutes for every position w1 … wn and the closing ``</s>``."""
        ids = self.vocabulary.sentence_ids(tokens)
        return [self.searcher.search(ids, target, limits) for target in range(1, len(ids))]

    def position(self, tokens: list[bytes], position: int, limits: Limits) -> Ranked:
        """Ranked substitutes for ``tokens[position]`` (``position == len(tokens)`` is ``</s>``)."""
        if not 0 <= position <= len(tokens):
            raise ValueError(f"position {position} is outside 0 … {len(tokens)}")
        ids = self.vocabulary.sentence_ids(tokens)
        return self.searcher.search(ids, position + 1, limits)
