"""The terms of lp(x) for one target position, as back-off chains over index patterns:
the Python reference of the C core's ``kernel/terms.c``.

For the sentence ``s_0 … s_{n+1}`` (``<s> w1 … wn </s>``) and a target position t,
lp(x) is the sum over j = t … min(t+N-1, n+1) of log10 p(s_j | context) with s_t := x
(docs/algorithm.md).  Each such term is a back-off chain: the longest n-gram present gives
its alpha, every shorter step adds a back-off weight.  This module only *describes*
the chains (which pattern, which constant), reading patterns as copies through
:meth:`fastsubs.core.Core.pattern`; the C core builds the same chains for
itself.  The bench's exhaustive scorer and the tests evaluate these, so a mistake in the
core's chains shows as a difference from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import numpy as np

from fastsubs import format as fmt
from fastsubs.core import Core


@dataclass(frozen=True)
class Pattern:
    """The words seen in the slot of one pattern ``A _ B``: ``ids``/``alpha``/``beta``
    sorted by word id (``beta`` None at the highest order), ``by_score`` positions into
    them by alpha descending."""

    ids: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray | None
    by_score: np.ndarray

    @property
    def count(self) -> int:
        return len(self.ids)

    def entry(self, word: int) -> tuple[float, float] | None:
        """``(alpha, beta)`` of ``A word B``, or None when ``word`` is not in the slot."""
        at = int(np.searchsorted(self.ids, word))
        if at == len(self.ids) or self.ids[at] != word:
            return None
        return float(self.alpha[at]), 0.0 if self.beta is None else float(self.beta[at])


def read_pattern(index: Core, slot: int, ids: tuple[int, ...]) -> Pattern | None:
    """The pattern whose fixed words are ``ids`` with the slot before ``ids[slot]``."""
    if len(ids) + 1 > index.order or fmt.NO_WORD in ids:
        return None
    found = index.pattern(slot, ids)
    if found is None:
        return None
    words, alpha, beta, by_score = found
    return Pattern(np.frombuffer(words, fmt.ID_DTYPE), np.frombuffer(alpha, fmt.SCORE_DTYPE),
                   None if beta is None else np.frombuffer(beta, fmt.SCORE_DTYPE),
                   np.frombuffer(by_score, fmt.ID_DTYPE))


class UnigramBeta:
    """Marker: the back-off weight of the unigram x itself (a dense array)."""


UNIGRAM_BETA = UnigramBeta()

#: Where a step's back-off weight comes from: a constant, the pattern holding ``A x B``
#: (its beta array), or the unigram back-off of x.
BetaSource: TypeAlias = float | Pattern | UnigramBeta

_ABSENT = object()


@dataclass(frozen=True)
class Step:
    """One alternative of a chain: use ``alpha`` (pattern ``A _ B w``) if x is in it,
    otherwise add the back-off weight ``beta`` and go on to the next shorter step."""

    alpha: Pattern | None
    beta: BetaSource


@dataclass(frozen=True)
class Term:
    """log10 p(s_j | …) as a function of x: ``steps`` longest first, then ``base``.

    ``base`` is a constant (the probability once x has left the context), or None
    meaning the unigram alpha of x (the term that predicts x itself).
    """

    steps: tuple[Step, ...]
    base: float | None


class TermBuilder:
    """Builds the terms of positions from one open index, reading each pattern once.

    Its caches grow with the text (a reference for tests and benchmarks, not for corpora).
    """

    def __init__(self, index: Core) -> None:
        self.index = index
        alpha, beta = index.unigrams()
        self.unigram_alpha = np.frombuffer(alpha, fmt.SCORE_DTYPE)
        self.unigram_beta = np.frombuffer(beta, fmt.SCORE_DTYPE)
        self.patterns: dict[tuple[int, tuple[int, ...]], Pattern | None] = {}
        self._terms: dict[tuple[tuple[int, ...], tuple[int, ...]], Term] = {}

    def pattern(self, slot: int, ids: tuple[int, ...]) -> Pattern | None:
        """The pattern ``(slot, ids)``, read once (``patterns`` holds every one met)."""
        key = (slot, ids)
        found = self.patterns.get(key, _ABSENT)
        if found is _ABSENT:
            found = self.patterns[key] = read_pattern(self.index, slot, ids)
        return found  # type: ignore[return-value]

    def ngram(self, ids: tuple[int, ...]) -> tuple[float, float] | None:
        """``(alpha, beta)`` of the n-gram ``ids``, or None when the model lacks it (through
        the pattern cache)."""
        if len(ids) == 1:
            return self.index.ngram(ids)  # type: ignore[no-any-return]
        pattern = self.pattern(len(ids) - 1, ids[:-1])
        return None if pattern is None else pattern.entry(ids[-1])

    def logprob(self, word: int, context: tuple[int, ...]) -> float:
        """log10 p(word | context) by the ARPA back-off recursion, for fixed words."""
        found = self.ngram(context + (word,))
        if found is not None:
            return found[0]
        if not context:
            return fmt.UNKNOWN_WORD_LOGPROB
        backoff = self.ngram(context)
        # beta(h) + log10 p(word | h[1:]): summed as the recursion nests (docs/algorithm.md)
        return (0.0 if backoff is None else backoff[1]) + self.logprob(word, context[1:])

    def position_terms(self, sentence: tuple[int, ...], target: int) -> list[Term]:
        """The chains of every term of lp(x) at ``target`` (1 … n+1) of ``sentence`` (with <s>, </s>)."""
        order = self.index.order
        cache = self._terms
        terms = []
        for j in range(target, min(target + order, len(sentence))):
            # the term of s_j depends on the words left of x in its n-gram and those after
            key = (sentence[max(0, j - order + 1):target], sentence[target + 1:j + 1])
            term = cache.get(key)
            if term is None:
                term = cache[key] = self.term(*key)
            terms.append(term)
        return terms

    def term(self, left: tuple[int, ...], after: tuple[int, ...]) -> Term:
        """The term of s_j given the words left of x in its n-gram and those after x up to s_j."""
        return self._context_term(left, after[:-1], after[-1]) if after else self._predicting_term(left)

    def _predicting_term(self, history: tuple[int, ...]) -> Term:
        """log10 p(x | history): steps ``history[k:] _`` for k = 0 … len-1, then unigram alpha(x)."""
        steps = []
        for k in range(len(history)):
            context = history[k:]
            found = self.ngram(context)
            steps.append(Step(self.pattern(len(context), context), 0.0 if found is None else found[1]))
        return Term(tuple(steps), None)

    def _context_term(self, left: tuple[int, ...], right: tuple[int, ...], word: int) -> Term:
        """log10 p(word | left x right): steps ``left[k:] _ right word``, then x drops out."""
        steps = []
        for k in range(len(left) + 1):
            fixed_left = left[k:]
            slot = len(fixed_left)
            alpha = self.pattern(slot, fixed_left + right + (word,))
            if fixed_left or right:
                beta: BetaSource = self.pattern(slot, fixed_left + right) or 0.0
            else:
                beta = UNIGRAM_BETA
            steps.append(Step(alpha, beta))
        return Term(tuple(steps), self.logprob(word, right))
