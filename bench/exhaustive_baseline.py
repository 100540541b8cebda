"""The yardstick: exhaustive scoring of every word with dense numpy vectors.

Each term of lp(x) is evaluated for the whole vocabulary at once: start from the
fall-through (unigram alpha, or the constant base plus back-off weights), then walk
the chain shortest step first, adding each step's back-off weight and overwriting
the words the step's pattern holds with their alpha (scatters of pattern size, so a
term costs O(V) once plus its patterns).  Buffers are preallocated and reused, look-ups
go through the same pattern cache as the search, and the top K come from one
``argpartition``: this is as fast as we could make "score everything".
"""

from __future__ import annotations

import numpy as np

from fastsubs.bench.reference_terms import Pattern, Term, TermBuilder, UnigramBeta
from fastsubs.core import Core


class ExhaustiveScorer:
    """Top-K substitutes by scoring every word; the same answers as the search."""

    def __init__(self, index: Core) -> None:
        self.index = index
        self.patterns = TermBuilder(index)
        self._alpha = self.patterns.unigram_alpha.astype(np.float64)
        self._beta = self.patterns.unigram_beta.astype(np.float64)
        self._total = np.empty(index.vocab_size)
        self._term = np.empty(index.vocab_size)

    def _add_term(self, term: Term) -> None:
        value = self._term
        if term.base is None:
            value[:] = self._alpha
        else:
            value.fill(term.base)
        for step in reversed(term.steps):
            beta = step.beta
            if isinstance(beta, float):
                value += beta
            elif isinstance(beta, UnigramBeta):
                value += self._beta
            else:
                _scatter_add(value, beta)
            if step.alpha is not None:
                value[step.alpha.ids] = step.alpha.alpha
        self._total += value

    def search(self, sentence: tuple[int, ...], target: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """Best ``count`` substitutes for ``sentence[target]``: (word ids, scores), best first."""
        total = self._total
        total.fill(0.0)
        for term in self.patterns.position_terms(sentence, target):
            self._add_term(term)
        if self.index.bos_id is not None:
            total[self.index.bos_id] = -np.inf
        count = min(count, self.index.vocab_size - 1)
        top = np.argpartition(total, len(total) - count)[len(total) - count:]
        top = top[np.argsort(-total[top], kind="stable")]
        return top, total[top]


def _scatter_add(value: np.ndarray, pattern: Pattern) -> None:
    """Back-off weights of ``A x B`` onto the words x that have one (0 for the rest)."""
    value[pattern.ids] += pattern.beta
