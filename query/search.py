"""The exact top-K search of FASTSUBS (the paper's threshold search, with the bound of
ALGORITHM.md), run per position by the C kernel ``fastsubs.query._kernel``.

Python describes the position (:mod:`fastsubs.query.terms` builds its terms from cached
patterns); the kernel reads the sorted lists in rounds of one entry from every list
that binds the upper bound, scores new words exactly, and lists words once they score
above the bound on every word not yet read.  See ``query/_kernel.c`` for why each
bound holds.  The result equals exhaustive scoring of every candidate; ties come
lowest word id first.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import ArgumentError, DamagedIndexError
from fastsubs.query._kernel import Kernel
from fastsubs.query.index import Index
from fastsubs.query.terms import Patterns


@dataclass
class SearchStats:
    """Counters over a run, for ``--stats``: how much work the bound saved.

    ``evaluated`` counts words read and scored (some only until their partial score
    showed they cannot be listed); ``list_reads`` counts sorted-list entries read.
    """

    positions: int = 0
    evaluated: int = 0
    list_reads: int = 0
    listed: int = 0

    def add(self, other: SearchStats) -> None:
        self.positions += other.positions
        self.evaluated += other.evaluated
        self.list_reads += other.list_reads
        self.listed += other.listed


#: Substitutes listed when neither -n nor -p is given.
DEFAULT_COUNT = 100
#: The count of -p alone: no limit of its own.
NO_COUNT_LIMIT = 2**62


@dataclass(frozen=True)
class Limits:
    """When to stop listing: ``count`` substitutes, or probability mass ``mass`` (-p).

    The -p rule is the original tool's: after substitute L with p = 10^lp and running
    sum S, stop once P <= S / (S + p (V - L)), V the vocabulary size.
    """

    count: int
    mass: float | None = None

    @classmethod
    def from_options(cls, n: int | None, p: float | None) -> Limits:
        """The limits of ``-n``/``-p``: neither means 100 substitutes (the original listed
        the whole vocabulary); ``-p`` alone sets no count (the search caps it at V - 1)."""
        if n is None and p is None:
            n = DEFAULT_COUNT
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
            raise ArgumentError(f"n must be a whole number of at least 1, got {n!r}")
        if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0):
            raise ArgumentError(f"p must be a number within 0 … 1, got {p!r}")
        return cls(int(n) if n is not None else NO_COUNT_LIMIT, None if p is None else float(p))


class Searcher:
    """Finds the exact top substitutes of positions; one per process (the kernel keeps scratch space)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.patterns = Patterns(index)
        self._build_term = self.patterns.term
        try:
            self._kernel = Kernel(index.unigram_alpha, index.unigram_beta, index.unigram_order,
                                  index.max_unigram_beta, index.bos_id)
        except ValueError as error:
            raise DamagedIndexError(f"{index.path}: damaged index ({error})") from None

    @property
    def stats(self) -> SearchStats:
        """Totals over every search so far (the kernel counts; this is a snapshot)."""
        return SearchStats(*self._kernel.counters())

    def search(self, sentence: tuple[int, ...], target: int, limits: Limits,
               excluded: bytes = b"") -> tuple[np.ndarray, np.ndarray]:
        """Best substitutes for ``sentence[target]``: (word ids, log10 scores), best first.

        At most V - 1 substitutes (one word is ``<s>``), as the original, even for a
        model without ``<s>``.  ``excluded`` (word ids, ascending, packed as ID_DTYPE)
        are no candidates: the search passes them over, so the list is the exact top of
        the other words, and V counts only those for the -p rule and the cap.
        """
        ids, scores = self._kernel.search_at(self.patterns.table, self._build_term, sentence, target,
                                             limits.count, limits.mass, excluded)
        return np.frombuffer(ids, fmt.ID_DTYPE), np.frombuffer(scores)
