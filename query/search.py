"""The exact top-K search of FASTSUBS, in batches (Fagin's threshold algorithm).

Each round reads further down some of the sorted lists a position uses (the patterns
``A _ B`` with x in an alpha term, and the unigram list), scores every word not yet
scored exactly with numpy, and recomputes the upper bound on every word not yet read
(ALGORITHM.md: back-off weights with x bounded by ``max(0, largest stored)``).  It
stops once the limits are met by words scoring at least that bound.

Only lists that *bind* are read further: a term's bound is the largest of its
alternatives, so reading any other list of the term cannot lower it.  A binding
list's depth doubles each round, the others keep theirs.  The result equals
exhaustive scoring of every candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastsubs.query.index import Index, Pattern
from fastsubs.query.terms import Patterns, Term, UnigramBeta

NEG_INF = float("-inf")
#: Depth of the first round, per substitute asked for, and its floor: the K-th best
#: word usually sits within a few K entries of the lists that bind, and a shallower
#: start costs more rounds than it saves candidates (kn4-64k, K=100: 1K per
#: substitute -> 4.2 rounds, 2K -> 2.9 rounds, same candidates).
FIRST_DEPTH_PER_SUBSTITUTE = 2
MIN_FIRST_DEPTH = 16
#: Patterns at least this long get a dense word -> position map, kept per process: one
#: gather per look-up instead of a binary search (long patterns are the frequent ones).
DENSE_MIN_COUNT = 2048
MAX_DENSE_MAPS = 128


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


class _Locator:
    """Where candidate words sit in a pattern's id-sorted arrays, and whether they are there."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self._maps: dict[int, tuple[Pattern, np.ndarray]] = {}  # id -> (pattern kept alive, map)

    def __call__(self, pattern: Pattern, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if pattern.count >= DENSE_MIN_COUNT:
            pos = self._dense_map(pattern)[ids]
            return pos, pos >= 0
        pos = pattern.ids.searchsorted(ids)
        np.minimum(pos, pattern.count - 1, out=pos)
        return pos, pattern.ids[pos] == ids

    def _dense_map(self, pattern: Pattern) -> np.ndarray:
        entry = self._maps.get(id(pattern))
        if entry is None:
            if len(self._maps) >= MAX_DENSE_MAPS:
                self._maps.clear()
            positions = np.full(self.vocab_size, -1, dtype=np.int32)
            positions[pattern.ids] = np.arange(pattern.count, dtype=np.int32)
            entry = self._maps[id(pattern)] = (pattern, positions)
        return entry[1]


class _Batch:
    """Exact scores of one batch of candidate ids; pattern look-ups shared across terms."""

    def __init__(self, index: Index, locate: _Locator, ids: np.ndarray) -> None:
        self.index = index
        self.locate = locate
        self.ids = ids
        self._found: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _find(self, pattern: Pattern) -> tuple[np.ndarray, np.ndarray]:
        hit = self._found.get(id(pattern))
        if hit is None:
            hit = self._found[id(pattern)] = self.locate(pattern, self.ids)
        return hit

    def beta(self, source: object) -> np.ndarray | float:
        if isinstance(source, float):
            return source
        if isinstance(source, UnigramBeta):
            return self.index.unigram_beta[self.ids]
        pos, found = self._find(source)  # type: ignore[arg-type]
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
                pos, found = self._find(step.alpha)
                value = np.where(found, step.alpha.alpha[pos], value)
        return value

    def total(self, terms: list[Term]) -> np.ndarray:
        total = self.term(terms[0])
        for term in terms[1:]:
            total = total + self.term(term)
        return np.asarray(total, dtype=np.float64)


def _sup_beta(index: Index, source: object) -> float:
    if isinstance(source, float):
        return source
    if isinstance(source, UnigramBeta):
        return max(0.0, index.max_unigram_beta)
    return max(0.0, source.max_beta)  # type: ignore[union-attr]


class _Plan:
    """The sorted lists of one position and, per term, what bounds it.

    List ``i < len(patterns)`` is ``patterns[i]`` read by alpha; the last list is the
    unigram list.  ``chains[t]`` holds, shortest step first, ``(sup of the step's
    back-off weight, list of its alpha or -1)`` and the term's base (None: the
    unigram alpha of x, i.e. the unigram list).
    """

    def __init__(self, index: Index, terms: list[Term]) -> None:
        self.terms = terms
        where: dict[int, int] = {}
        self.patterns: list[Pattern] = []
        self.chains: list[tuple[list[tuple[float, int]], float | None]] = []
        for term in terms:
            chain = []
            for step in reversed(term.steps):
                alpha = step.alpha
                slot = -1
                if alpha is not None:
                    slot = where.get(id(alpha), -1)
                    if slot < 0:
                        slot = where[id(alpha)] = len(self.patterns)
                        self.patterns.append(alpha)
                chain.append((_sup_beta(index, step.beta), slot))
            self.chains.append((chain, term.base))
        self.unigram = len(self.patterns)

    def bound(self, sups: list[float]) -> tuple[float, set[int]]:
        """Upper bound on lp(x) of unread words given each list's ``sups``, and the lists that bind it."""
        total = 0.0
        binding = set()
        unigram = self.unigram
        for chain, base in self.chains:
            if base is None:
                value, arg = sups[unigram], unigram
            else:
                value, arg = base, -1
            for beta_sup, slot in chain:
                value += beta_sup
                if slot >= 0 and sups[slot] > value:
                    value, arg = sups[slot], slot
            total += value
            if arg >= 0:
                binding.add(arg)
        return total, binding


class Searcher:
    """Finds the exact top substitutes of positions; one per process (it keeps scratch space)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.patterns = Patterns(index)
        self._locate = _Locator(index.vocab_size)
        self._seen = np.zeros(index.vocab_size, dtype=bool)
        if index.bos_id is not None:
            self._seen[index.bos_id] = True  # never a candidate; never cleared
        self.stats = SearchStats()
        # The original lists at most V - 1 substitutes (one word is <s>), even for a model without <s>.
        self.max_listed = index.vocab_size - 1

    def search(self, sentence: list[int], target: int, limits: Limits) -> tuple[np.ndarray, np.ndarray]:
        """Best substitutes for ``sentence[target]``: (word ids, log10 scores), best first."""
        index = self.index
        vocab_size = index.vocab_size
        plan = _Plan(index, self.patterns.position_terms(sentence, target))
        patterns = plan.patterns
        unigram = plan.unigram
        count = min(limits.count, self.max_listed)
        limits = Limits(count, limits.mass)
        lengths = [p.count for p in patterns] + [vocab_size]
        depth = [0] * len(lengths)
        first = max(MIN_FIRST_DEPTH, int(FIRST_DEPTH_PER_SUBSTITUTE * count))
        grow = range(len(lengths))
        sups = [0.0] * len(lengths)
        seen = self._seen
        scored_ids = np.empty(0, dtype=np.int64)
        scored = np.empty(0)
        try:
            while True:
                chunks = []
                for i in grow:
                    start = depth[i]
                    end = min(lengths[i], max(first, 2 * start))
                    if end <= start:
                        continue
                    if i == unigram:
                        chunks.append(index.unigram_order[start:end])
                        sups[i] = float(index.unigram_alpha[index.unigram_order[end]]) if end < vocab_size else NEG_INF
                    else:
                        p = patterns[i]
                        chunks.append(p.ids[p.by_score[start:end]])
                        sups[i] = float(p.alpha[p.by_score[end]]) if end < lengths[i] else NEG_INF
                    depth[i] = end
                read = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
                new = np.unique(read[~seen[read]])
                if len(new):
                    seen[new] = True
                    scored_ids = np.concatenate((scored_ids, new))
                    scored = np.concatenate((scored, _Batch(index, self._locate, new).total(plan.terms)))
                self.stats.rounds += 1
                self.stats.evaluated += len(new)
                if depth[unigram] >= vocab_size:  # every word has been read
                    bound, grow = NEG_INF, ()
                else:
                    bound, grow = plan.bound(sups)
                certain = np.flatnonzero(scored >= bound)
                if len(certain) >= count or bound == NEG_INF or limits.mass is not None:
                    ranked = certain[np.argsort(-scored[certain], kind="stable")]
                    n, met = listed_length(scored[ranked], limits, vocab_size)
                    if met or bound == NEG_INF:
                        ranked = ranked[:n]
                        self.stats.positions += 1
                        self.stats.listed += n
                        return scored_ids[ranked], scored[ranked]
        finally:
            seen[scored_ids] = False

