"""What a search is asked (:class:`Limits`); what searches report is :mod:`fastsubs.stats`.

The search itself is FASTSUBS' exact top-K threshold search with the bound of
docs/algorithm.md, run per position by the C core (``kernel/search.c``, through
:class:`fastsubs.core.Core`): it reads the sorted lists in rounds of one entry
from every list that binds the upper bound, scores new words exactly, and lists words
once they score above the bound on every word not yet read.  The result equals
exhaustive scoring of every candidate; ties come lowest word id first.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from fastsubs.errors import ArgumentError

#: Substitutes listed when neither -n nor -p is given.
DEFAULT_COUNT = 100
#: The count of -p alone: no limit of its own.
NO_COUNT_LIMIT = 2**62


@dataclass(frozen=True)
class Limits:
    """When to stop listing: ``count`` substitutes, or probability mass ``mass`` (-p).

    The -p rule is the original tool's: after substitute L with p = 10^lp and running
    sum S, stop once P <= S / (S + p (V - L)), V the vocabulary size (less the excluded
    words).  That is the share the listed words would hold if every
    word not listed were as likely as the last one listed, a lower bound of their true
    share: it stops later than the fewest words holding P would.
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
