"""External sort of one order's n-grams for each slot: bounded memory whatever the model's size.

Patterns are written in key order, and a key (the fixed words) may gather n-grams from
anywhere in the file, so each order must be sorted once per slot.  Rather than holding
an order in memory, :class:`SortedRuns` sorts it in runs of at most :data:`RUN_ROWS`
rows, spills each run to a file, and :func:`merged_blocks` merges the runs back a
block at a time.  Memory is then a run while reading plus a few blocks while writing.

Rows are stored with their word ids in *key order*: the fixed words left to right,
then the slot word, so sorting the ``ids`` columns lexicographically sorts by key.
Equal rows keep file order (the sorts are stable and runs are merged in file order),
so a repeated n-gram is reported with its first two lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from fastsubs.indexer.arpa import NgramTable

#: Rows per sorted run (~32 bytes each, plus the sort's temporaries).
RUN_ROWS = 1 << 22
#: Rows the merge reads at once, over all runs.
MERGE_ROWS = 1 << 21


def row_dtype(order: int) -> np.dtype:
    """One n-gram as spilled: ids in key order, scores as stored, and its line."""
    return np.dtype([("ids", "<u4", (order,)), ("alpha", "<f4"), ("beta", "<f4"), ("line", "<i8")])


def key_columns(order: int, slot: int) -> list[int]:
    """The columns of an n-gram in key order: the fixed words, then the one at ``slot``."""
    return [c for c in range(order) if c != slot] + [slot]


class SortedRuns:
    """Collects one order's chunks and spills them as runs sorted for every slot."""

    def __init__(self, directory: Path, order: int) -> None:
        self.directory = directory
        self.order = order
        self.files: list[list[Path]] = [[] for _ in range(order)]  # per slot, runs in file order
        self._pending: list[NgramTable] = []
        self._rows = 0

    def add(self, chunk: NgramTable) -> None:
        self._pending.append(chunk)
        self._rows += len(chunk.lines)
        if self._rows >= RUN_ROWS:
            self.flush()

    def flush(self) -> None:
        """Spill what was added since the last run (if anything) as one more run."""
        if not self._pending:
            return
        table = NgramTable.concatenate(self._pending)
        self._pending, self._rows = [], 0
        rows = np.empty(len(table.lines), dtype=row_dtype(self.order))
        rows["alpha"], rows["beta"], rows["line"] = table.alpha, table.beta, table.lines
        for slot in range(self.order):
            rows["ids"] = table.ids[:, key_columns(self.order, slot)]
            order = sort_order(rows["ids"])
            path = self.directory / f"{self.order}-{slot}-{len(self.files[slot])}.rows"
            with open(path, "wb") as stream:  # not tofile(): its errors lose the errno (ENOSPC)
                stream.write(rows[order].data)
            self.files[slot].append(path)


def sort_order(ids: np.ndarray) -> np.ndarray:
    """The stable order that sorts the rows of ``ids`` (uint32 columns) lexicographically.

    When the ids fit, the columns are packed into one uint64 and sorted once: several
    times faster than ``lexsort``'s pass per column (4 columns of 16 bits for 64K words).
    """
    bits = int(ids.max()).bit_length() if ids.size else 0
    if bits * ids.shape[1] > 64:
        return np.lexsort(ids.T[::-1])
    key = np.zeros(len(ids), dtype=np.uint64)
    for column in range(ids.shape[1]):
        key <<= np.uint64(bits)
        key |= ids[:, column]
    return np.argsort(key, kind="stable")


def _lexicographic_le(ids: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Which rows of ``ids`` are <= ``bound``, comparing column by column."""
    less = np.zeros(len(ids), dtype=bool)
    equal = np.ones(len(ids), dtype=bool)
    for column in range(ids.shape[1]):
        less |= equal & (ids[:, column] < bound[column])
        equal &= ids[:, column] == bound[column]
    return less | equal


def merged_blocks(files: list[Path], order: int) -> Iterator[np.ndarray]:
    """The rows of the sorted runs ``files`` in one sorted sequence, a block at a time.

    Every block holds whole patterns (rows with equal fixed words never straddle two
    blocks).  Each step reads more of every run whose block is used up, and emits the
    rows up to the smallest last key of the runs that still have more to read: every
    row after that bound is still to come from some run.
    """
    dtype = row_dtype(order)
    streams = [open(path, "rb") for path in files]
    try:
        per_run = max(MERGE_ROWS // max(len(files), 1), 1 << 12)
        blocks = [np.empty(0, dtype) for _ in files]
        more = [True] * len(files)
        carry = np.empty(0, dtype)  # the last pattern of the previous step, maybe incomplete
        while True:
            for run, stream in enumerate(streams):
                if not len(blocks[run]) and more[run]:
                    blocks[run] = np.fromfile(stream, dtype=dtype, count=per_run)
                    more[run] = len(blocks[run]) == per_run
            open_runs = [run for run in range(len(files)) if more[run]]
            if open_runs:
                bound = min(tuple(blocks[run]["ids"][-1]) for run in open_runs)
                cut = [int(_lexicographic_le(block["ids"], np.array(bound)).sum()) for block in blocks]
            else:
                cut = [len(block) for block in blocks]
            taken = np.concatenate([carry] + [block[:c] for block, c in zip(blocks, cut)])
            blocks = [block[c:] for block, c in zip(blocks, cut)]
            if len(files) > 1:
                taken = taken[sort_order(taken["ids"])]  # stable: equal rows stay in file order
            if not open_runs:
                if len(taken):
                    yield taken
                return
            fixed = taken["ids"][:, :-1]
            last = (fixed == fixed[-1]).all(axis=1) if len(taken) else np.zeros(0, bool)
            keep = int(np.argmax(last)) if len(taken) else 0
            carry = taken[keep:]
            if keep:
                yield taken[:keep]
    finally:
        for stream in streams:
            stream.close()
