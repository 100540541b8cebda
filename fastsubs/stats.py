"""What searches report: the work they did, counted by the C core per index and per thread.

:attr:`fastsubs.core.Core.stats` and ``thread_stats`` give these; ``--stats``
prints a run's totals.
"""

from __future__ import annotations

from dataclasses import dataclass


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

    def since(self, before: SearchStats) -> SearchStats:
        """The work counted between ``before`` and these totals (two snapshots)."""
        return SearchStats(self.positions - before.positions, self.evaluated - before.evaluated,
                           self.list_reads - before.list_reads, self.listed - before.listed)
