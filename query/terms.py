"""The terms of lp(x) for one target position, as back-off chains over index patterns.

For the sentence ``s_0 … s_{n+1}`` (``<s> w1 … wn </s>``) and a target position t,
lp(x) is the sum over j = t … min(t+N-1, n+1) of log10 p(s_j | context) with s_t := x
(ALGORITHM.md).  Each such term is a back-off chain: the longest n-gram present gives
its alpha, every shorter step adds a back-off weight.  This module only *describes*
the chains (which pattern, which constant); :mod:`fastsubs.query.search` evaluates
them for batches of candidates and bounds them for words not yet read.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastsubs import format as fmt
from fastsubs.query.index import Index, Pattern


class UnigramBeta:
    """Marker: the back-off weight of the unigram x itself (a dense array)."""


UNIGRAM_BETA = UnigramBeta()

#: Where a step's back-off weight comes from: a constant, the pattern holding ``A x B``
#: (its beta array), or the unigram back-off of x.
BetaSource = float | Pattern | UnigramBeta


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


def logprob(index: Index, word: int, context: tuple[int, ...]) -> float:
    """log10 p(word | context) by the ARPA back-off recursion, for fixed words."""
    total = 0.0
    for start in range(len(context) + 1):
        found = index.ngram(context[start:] + (word,))
        if found is not None:
            return total + found[0]
        if start < len(context):
            backoff = index.ngram(context[start:])
            if backoff is not None:
                total += backoff[1]
    return total + fmt.UNKNOWN_WORD_LOGPROB


def position_terms(index: Index, sentence: list[int], target: int) -> list[Term]:
    """The chains of every term of lp(x) at ``target`` (1 … n+1) of ``sentence`` (with <s>, </s>)."""
    order = index.order
    last = len(sentence) - 1
    terms = []
    for j in range(target, min(target + order - 1, last) + 1):
        start = max(0, j - order + 1)
        if j == target:
            terms.append(_predicting_term(index, tuple(sentence[start:target])))
        else:
            left = tuple(sentence[start:target])
            right = tuple(sentence[target + 1:j])
            terms.append(_context_term(index, left, right, sentence[j]))
    return terms


def _predicting_term(index: Index, history: tuple[int, ...]) -> Term:
    """log10 p(x | history): steps ``history[k:] _`` for k = 0 … len-1, then unigram alpha(x)."""
    steps = []
    for k in range(len(history)):
        context = history[k:]
        found = index.ngram(context)
        steps.append(Step(index.pattern(len(context), context), 0.0 if found is None else found[1]))
    return Term(tuple(steps), None)


def _context_term(index: Index, left: tuple[int, ...], right: tuple[int, ...], word: int) -> Term:
    """log10 p(word | left x right): steps ``left[k:] _ right word``, then x drops out."""
    steps = []
    for k in range(len(left) + 1):
        fixed_left = left[k:]
        slot = len(fixed_left)
        alpha = index.pattern(slot, fixed_left + right + (word,))
        if fixed_left or right:
            beta: BetaSource = index.pattern(slot, fixed_left + right) or 0.0
        else:
            beta = UNIGRAM_BETA
        steps.append(Step(alpha, beta))
    return Term(tuple(steps), logprob(index, word, right))
