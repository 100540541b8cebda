"""An order's back-off table (kernel/format.h, ``beta_values``): every back-off weight its
n-grams store, once, the most frequent first.

A pattern stores its back-off weights as codes into its order's table, each as wide as the
pattern's largest code needs, and a pattern whose weights are all the table's first value
stores none at all: most back-off weights of a Kneser-Ney model are one value (about 80%
of kn4-64k's 2- and 3-grams), so ranking by frequency makes most codes 0 and most widths
0 or 1 bit.  The table is tallied while the order is read, before any of its patterns is
written (its jobs start as soon as the order is spilled).
"""

from __future__ import annotations

import numpy as np

from fastsubs import format as fmt

#: Distinct values seen in chunks, merged into the tally once this many have piled up: the
#: tally's memory stays near twice the table's, however many chunks an order has.
MERGE_PENDING = 1 << 20


class BetaTally:
    """Counts of each back-off weight (by its float32 bits, so that -0.0 and 0.0 are two
    values, as the records' bits are) of one order, a chunk at a time."""

    def __init__(self, merge_pending: int = MERGE_PENDING) -> None:
        self._merge_pending = merge_pending
        self._bits = np.zeros(0, np.uint32)
        self._counts = np.zeros(0, np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_values = 0

    def add(self, beta: np.ndarray) -> None:
        bits, counts = np.unique(np.ascontiguousarray(beta, fmt.SCORE_DTYPE).view(np.uint32), return_counts=True)
        self._pending.append((bits, counts))
        self._pending_values += len(bits)
        if self._pending_values >= self._merge_pending:
            self._merge()

    def _merge(self) -> None:
        bits = np.concatenate([self._bits] + [b for b, _ in self._pending])
        counts = np.concatenate([self._counts] + [c for _, c in self._pending])
        # the tally and each chunk's values are sorted runs, which a stable sort (timsort)
        # merges in about linear time, where np.unique would sort them all over again
        ranked = np.argsort(bits, kind="stable")
        bits, counts = bits[ranked], counts[ranked]
        starts = np.ones(len(bits), bool)  # where each distinct value's run starts
        starts[1:] = bits[1:] != bits[:-1]
        first = np.flatnonzero(starts)
        self._bits = bits[first]
        self._counts = np.add.reduceat(counts, first) if len(bits) else counts
        self._pending, self._pending_values = [], 0

    def table(self) -> np.ndarray:
        """The values, the most frequent first (ties by their bits), as float32."""
        self._merge()
        ranked = np.lexsort((self._bits, -self._counts))
        return self._bits[ranked].view(fmt.SCORE_DTYPE)
