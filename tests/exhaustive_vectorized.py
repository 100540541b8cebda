"""The exhaustive scorer of :mod:`exhaustive`, over every candidate at once with numpy.

Why this exists: the plain oracle scores one candidate at a time with dict look-ups,
about 5 s per position for a 338K-word model; checking a big vocabulary on a few
hundred positions needs the same definition evaluated for all candidates together.
It reads the oracle's own parsed model (``ArpaModel.ngrams``) and shares no code with
``fastsubs``; ``test_big_vocab`` checks it against the plain oracle on a small model.

For a position ``i`` and every term ``j`` of ``lp(x)`` (docs/algorithm.md), the back-off
recursion is run from the shortest context up: contexts too short to reach ``x`` give
one number for every candidate, longer ones give an array (the n-gram's alpha where the
candidate completes it, else the context's back-off weight plus the shorter context's
value).  Which candidates complete an n-gram with a given hole is read from an inverted
table built once per model for the holes the tested sentences need.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from exhaustive import BOS, EOS, ArpaModel

#: (n-gram order, position of the hole, the other words in order)
Hole = tuple[int, int, tuple[str, ...]]


class VectorizedOracle:
    """Scores of every candidate of ``model`` at once, for the sentences given up front."""

    def __init__(self, model: ArpaModel, sentences: Iterable[Sequence[str]]) -> None:
        self.model = model
        self.candidates = model.candidates()
        self._index = {word: c for c, word in enumerate(self.candidates)}
        self._ids = np.arange(len(self.candidates))  # candidates are in file order: by word id
        self._unigram = np.array([model.ngrams[(w,)][0] for w in self.candidates])
        self._fillers = self._invert(
            {hole for tokens in sentences for position in range(len(self._words(tokens)) + 1)
             for hole in self._holes(tokens, position)})

    @staticmethod
    def _words(tokens: Sequence[str]) -> list[str]:
        return [w for w in tokens if w not in (BOS, EOS)]

    def _sentence(self, tokens: Sequence[str]) -> list[str]:
        return [self.model.map_word(w) for w in [BOS, *self._words(tokens), EOS]]

    def _terms(self, tokens: Sequence[str], position: int):
        """``(predicted word or None for x, context with None for x)`` of every term of lp(x)."""
        sentence = self._sentence(tokens)
        i = position + 1
        last = min(i + self.model.order - 1, len(sentence) - 1)
        for j in range(i, last + 1):
            context = [None if k == i else sentence[k] for k in range(max(0, j - self.model.order + 1), j)]
            yield (None if j == i else sentence[j]), context

    def _holes(self, tokens: Sequence[str], position: int) -> Iterable[Hole]:
        """The n-grams with a hole at x whose fillers the position's scores read."""
        for word, context in self._terms(tokens, position):
            for length in range(len(context) + 1):
                suffix = context[len(context) - length:]
                for words in (suffix + [word], suffix):
                    if None in words:
                        yield _hole(words)

    def _invert(self, holes: set[Hole]) -> dict[Hole, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """For each hole: the candidates that fill it, with the n-grams' alphas and betas."""
        found: dict[Hole, list[tuple[int, float, float]]] = {hole: [] for hole in holes}
        orders = {hole[0] for hole in holes}
        for ngram, (alpha, beta) in self.model.ngrams.items():
            if len(ngram) not in orders:
                continue
            for slot, word in enumerate(ngram):
                entries = found.get((len(ngram), slot, ngram[:slot] + ngram[slot + 1:]))
                if entries is not None and word in self._index:
                    entries.append((self._index[word], alpha, beta))
        return {hole: (np.array([e[0] for e in entries], dtype=np.int64),
                       np.array([e[1] for e in entries]), np.array([e[2] for e in entries]))
                for hole, entries in found.items()}

    def scores(self, tokens: Sequence[str], position: int) -> np.ndarray:
        """lp(x) of every candidate (in ``self.candidates`` order) at ``position``."""
        total = np.zeros(len(self.candidates))
        for word, context in self._terms(tokens, position):
            total += self._logprob(word, context)
        return total

    def _logprob(self, word: str | None, context: list[str | None]) -> np.ndarray | float:
        value: np.ndarray | float = self._unigram if word is None else self.model._logprob(word, ())
        for length in range(1, len(context) + 1):
            suffix = context[len(context) - length:]
            if None not in suffix and word is not None:  # x is further back: the same for every candidate
                value = self.model._logprob(word, tuple(suffix))
                continue
            beta = (self._fill(_hole(suffix), 2, 0.0) if None in suffix
                    else self.model.ngrams.get(tuple(suffix), (0.0, 0.0))[1])
            backed_off = beta + value
            alphas = self._fill(_hole(suffix + [word]), 1, np.nan)
            value = np.where(np.isnan(alphas), backed_off, alphas)
        return value

    def _fill(self, hole: Hole, field: int, default: float) -> np.ndarray:
        """A value of every candidate for ``hole``: the n-gram's alpha (1) or beta (2), else ``default``."""
        filled = np.full(len(self.candidates), default)
        entries = self._fillers[hole]
        filled[entries[0]] = entries[field]
        return filled

    def ranking(self, tokens: Sequence[str], position: int) -> Ranking:
        """Every candidate at ``position``, best first (ties: lowest word id first)."""
        scores = self.scores(tokens, position)
        return Ranking(self, scores, np.lexsort((self._ids, -scores)))

    def candidate(self, word: str) -> int:
        """The index of ``word`` in ``candidates`` (and in a score array)."""
        return self._index[word]


class Ranking:
    """The candidates of one position ranked by score, cut like the original tool on demand."""

    def __init__(self, oracle: VectorizedOracle, scores: np.ndarray, order: np.ndarray) -> None:
        self._oracle, self._scores, self._order = oracle, scores, order

    def listed(self, n: int | None, p: float | None) -> list[tuple[str, float]]:
        """What the original tool lists under ``-n n -p p``."""
        words = self._oracle.candidates
        ranked = ((words[c], float(self._scores[c])) for c in self._order)
        return self._oracle.model.cut(ranked, n, p)  # type: ignore[arg-type]  # cut only iterates

    def score(self, word: str) -> float:
        return float(self._scores[self._oracle.candidate(word)])


def _hole(words: list[str | None]) -> Hole:
    slot = words.index(None)
    return len(words), slot, tuple(w for w in words if w is not None)


__all__ = ["VectorizedOracle"]
