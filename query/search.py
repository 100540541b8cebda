"""The exact top-K search of FASTSUBS, in batches (Fagin's threshold algorithm).

Each round reads the next ``depth`` entries of every sorted list a position uses (the
patterns ``A _ B`` with x in an alpha term, and the unigram list), scores every word
not yet scored exactly with numpy, and recomputes the upper bound on every word not
yet read (ALGORITHM.md: back-off weights with x bounded by ``max(0, largest stored)``).
It stops once the limits are met by words scoring at least that bound; the depth
doubles between rounds.  The result equals exhaustive scoring of every candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fastsubs.query.index import Index, Pattern
from fastsubs.query.terms import Term, UnigramBeta, position_terms

NEG_INF = float("-inf")
FIRST_DEPTH = 32


@dataclass
class SearchStats:
    """Counters over a run, for ``--stats``: how much work the bound saved."""

    positions: int = 0
    evaluated: int = 0
    rounds: int = 0
    listed: int = 0

    def add(self, other: SearchStats) -> None:
        self.positions += other.positions
        self.evaluated += other.evaluated
        self.rounds += other.rounds
        self.listed += other.listed


@dataclass(frozen=True)
class Limits:
    """When to stop listing: ``count`` substitutes, or probability mass ``mass`` (-p)."""

    count: int
    mass: float | None = None


def listed_length(scores: np.ndarray, limits: Limits, vocab_size: int) -> tuple[int, bool]:
    """How many of ``scores`` (sorted best first) the limits list, and whether they are met.

    The -p rule is the original tool's: after substitute L with p = 10^lp and running
    sum S, stop once P <= S / (S + p (V - L)).
    """
    n = len(scores)
    if n >= limits.count:
        n, met = limits.count, True
    else:
        met = False
    if limits.mass is not None and n:
        p = np.power(10.0, scores[:n])
        total = np.cumsum(p)
        listed = np.arange(1, n + 1)
        with np.errstate(invalid="ignore", divide="ignore"):  # p underflows to 0: never met, as the original
            reached = np.flatnonzero(limits.mass <= total / (total + p * (vocab_size - listed)))
        if len(reached):
            return int(reached[0]) + 1, True
    return n, met


class _Batch:
    """Exact scores of one batch of candidate ids; pattern look-ups shared across terms."""

    def __init__(self, index: Index, ids: np.ndarray) -> None:
        self.index = index
        self.ids = ids
        self._found: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _locate(self, pattern: Pattern) -> tuple[np.ndarray, np.ndarray]:
        hit = self._found.get(id(pattern))
        if hit is None:
            pos = np.searchsorted(pattern.ids, self.ids)
            np.minimum(pos, pattern.count - 1, out=pos)
            hit = (pos, pattern.ids[pos] == self.ids)
            self._found[id(pattern)] = hit
        return hit

    def beta(self, source: object) -> np.ndarray | float:
        if isinstance(source, float):
            return source
        if isinstance(source, UnigramBeta):
            return self.index.unigram_beta[self.ids].astype(np.float64)
        pos, found = self._locate(source)  # type: ignore[arg-type]
        return np.where(found, source.beta[pos], 0.0)  # type: ignore[union-attr]

    def term(self, term: Term) -> np.ndarray | float:
        value: np.ndarray | float
        if term.base is None:
            value = self.index.unigram_alpha[self.ids].astype(np.float64)
        else:
            value = term.base
        for step in reversed(term.steps):
            value = self.beta(step.beta) + value
            if step.alpha is not None:
                pos, found = self._locate(step.alpha)
                value = np.where(found, step.alpha.alpha[pos], value)
        return value


def _sup_beta(index: Index, source: object) -> float:
    if isinstance(source, float):
        return source
    if isinstance(source, UnigramBeta):
        return max(0.0, index.max_unigram_beta)
    return max(0.0, source.max_beta)  # type: ignore[union-attr]


class Searcher:
    """Finds the exact top substitutes of positions; one per process (it keeps scratch space)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._seen = np.zeros(index.vocab_size, dtype=bool)
        self.stats = SearchStats()
        # The original lists at most V - 1 substitutes (one word is <s>), even for a model without <s>.
        self.max_listed = index.vocab_size - 1

    def search(self, sentence: list[int], target: int, limits: Limits) -> tuple[np.ndarray, np.ndarray]:
        """Best substitutes for ``sentence[target]``: (word ids, log10 scores), best first."""
        index = self.index
        terms = position_terms(index, sentence, target)
        lists = [step.alpha for term in terms for step in term.steps if step.alpha is not None]
        depth_reached = 0
        depth = FIRST_DEPTH
        scored_ids: list[np.ndarray] = []
        scored: list[np.ndarray] = []
        seen = self._seen
        bos = index.bos_id
        count = min(limits.count, self.max_listed)
        limits = Limits(count, limits.mass)
        try:
            while True:
                chunks = [p.ids[p.by_score[depth_reached:depth]] for p in lists]
                chunks.append(index.unigram_order[depth_reached:depth])
                new = np.unique(np.concatenate(chunks))
                new = new[~seen[new]]
                seen[new] = True
                if bos is not None:
                    new = new[new != bos]
                if len(new):
                    batch = _Batch(index, new)
                    total = sum(batch.term(term) for term in terms)
                    scored_ids.append(new)
                    scored.append(np.asarray(total, dtype=np.float64))
                self.stats.rounds += 1
                self.stats.evaluated += len(new)
                bound = self._bound(terms, depth)
                if len(scored) != 1:
                    scored = [np.concatenate(scored) if scored else np.empty(0)]
                    scored_ids = [np.concatenate(scored_ids) if scored_ids else np.empty(0, np.int64)]
                all_scores = scored[0]
                certain = np.flatnonzero(all_scores >= bound)
                if len(certain) >= count or bound == NEG_INF or limits.mass is not None:
                    ranked = certain[np.argsort(-all_scores[certain], kind="stable")]
                    n, met = listed_length(all_scores[ranked], limits, index.vocab_size)
                    if met or bound == NEG_INF:
                        ranked = ranked[:n]
                        self.stats.positions += 1
                        self.stats.listed += n
                        return scored_ids[0][ranked], all_scores[ranked]
                depth_reached = depth
                depth *= 2
        finally:
            for ids in scored_ids:
                seen[ids] = False

    def _bound(self, terms: list[Term], depth: int) -> float:
        """Upper bound on lp(x) for every word outside the first ``depth`` entries of each list."""
        index = self.index
        if depth < index.vocab_size:
            unigram_sup = float(index.unigram_alpha[index.unigram_order[depth]])
        else:
            unigram_sup = NEG_INF
        total = 0.0
        for term in terms:
            value = unigram_sup if term.base is None else term.base
            for step in reversed(term.steps):
                value = _sup_beta(index, step.beta) + value
                pattern = step.alpha
                if pattern is not None and depth < pattern.count:
                    value = max(value, float(pattern.alpha[pattern.by_score[depth]]))
            total += value
        return total
