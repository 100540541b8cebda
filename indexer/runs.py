"""One order's n-grams on disk, and sorted for each slot: bounded memory whatever the model's size.

Patterns are written in key order, and a key (the fixed words) may gather n-grams from
anywhere in the file, so each order must be sorted once per slot.  Reading the model
spills each order once, in file order (:class:`Spill`); then, slot by slot,
:func:`sorted_blocks` sorts it in runs of at most ``run_rows`` rows, spills each run,
and merges the runs back a block at a time (an order that fits one run is sorted and
encoded in memory, with no file).  Memory is a run while sorting plus a few blocks while
merging; disk is each order once until its slots' jobs have ended (the build then
removes it), and the runs of the slots being sorted.

A row is as small as it can be, in the spill and in the runs alike, since they are most
of a build's temporary disk: word ids as wide as the vocabulary needs (2, 3 or 4 bytes on
disk, :class:`RowFile`; 2 or 4 in memory), the log-probability and, below the model's
highest order, the back-off weight; not its line in the model, which follows from its
place in the spill (an order's lines are consecutive), and which only the message of a
repeated n-gram needs: :func:`repeat_places` finds it again in the spill.  Rows are
sorted with their word ids in *key order*: the fixed words left to right, then the slot
word, so sorting the ``ids`` columns lexicographically sorts by key.  Equal rows keep
file order (the sorts are stable and runs are merged in file order).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

import numpy as np

from fastsubs.indexer.arpa import NgramTable
from fastsubs.indexer.beta_table import BetaTally

#: Rows the merge reads at once, over all runs (the blocks a job encodes at a time), and
#: the fewest it reads of one run at a time however many runs there are.
MERGE_ROWS = 1 << 20
MERGE_RUN_ROWS = 1 << 12
#: Bytes a job needs per row of a run as it sorts it, beyond the row (its ids moved into
#: key order, the sort's key, order and temporaries), and what merging and encoding
#: MERGE_ROWS rows take (measured: docs/performance.md, "Tuning").
SORT_BYTES_PER_ROW = 48
MERGE_BYTES = 200 << 20
#: Rows written at a time from a sorted run (bounds the copy that gathers them).
_WRITE_ROWS = 1 << 18


def run_rows(memory: int, order: int, id_bytes: int, has_beta: bool) -> int:
    """Rows of a sorted run of ``order``-grams that a job may hold in ``memory`` bytes."""
    row = row_dtype(order, id_bytes, has_beta).itemsize
    return max(1 << 16, (memory - MERGE_BYTES) // (row + SORT_BYTES_PER_ROW))


def row_dtype(order: int, id_bytes: int, has_beta: bool) -> np.dtype:
    """One n-gram as spilled and sorted: ids (in file order, or key order once sorted;
    2 bytes wide for a vocabulary that fits, else 4), its log-probability and, with
    ``has_beta`` (an order below the model's highest), its back-off weight, as stored."""
    fields = [("ids", "<u2" if id_bytes <= 2 else "<u4", (order,)), ("alpha", "<f4")]
    return np.dtype(fields + [("beta", "<f4")] if has_beta else fields)


class RowFile:
    """Rows of an order as a spill or a run file holds them: :func:`row_dtype`'s, with ids
    of a 3-byte vocabulary (65,537 to 16.7M words: every big model's) in 3 bytes rather
    than 4, which takes a fifth off a 4-gram's 20 bytes (spills and runs are most of a
    build's temporary disk, and of the bytes it writes and reads)."""

    def __init__(self, order: int, id_bytes: int, has_beta: bool) -> None:
        self.order = order
        self.rows = row_dtype(order, id_bytes, has_beta)
        self.packed = id_bytes == 3
        self.scores = [name for name in self.rows.names or () if name != "ids"]  # the fields after the ids
        self.file = np.dtype([("ids", "u1", (order, 3))] + [(name, "<f4") for name in self.scores]) \
            if self.packed else self.rows

    def write(self, stream: BinaryIO, rows: np.ndarray) -> None:
        if self.packed:
            packed = np.empty(len(rows), self.file)
            for column in range(self.order if len(rows) else 0):  # 4 bytes an id, the 4th overwritten next
                self._id_view(packed, column)[:] = rows["ids"][:, column]
            for name in self.scores:
                packed[name] = rows[name]
            rows = packed
        stream.write(rows.data)  # not tofile(): its errors lose the errno (ENOSPC)

    def read(self, stream: BinaryIO, count: int) -> np.ndarray:
        """Up to ``count`` rows from ``stream`` (none at its end)."""
        packed = np.fromfile(stream, dtype=self.file, count=count)
        if not self.packed:
            return packed
        rows = np.empty(len(packed), self.rows)
        for column in range(self.order if len(packed) else 0):
            rows["ids"][:, column] = self._id_view(packed, column) & 0xFFFFFF
        for name in self.scores:
            rows[name] = packed[name]
        return rows

    def _id_view(self, packed: np.ndarray, column: int) -> np.ndarray:
        """Column ``column``'s 3-byte ids as little-endian uint32 read in place: the 4th byte
        of each is the first of the field after it (a score follows the last id)."""
        return np.ndarray((len(packed),), "<u4", buffer=packed, offset=3 * column, strides=(self.file.itemsize,))


def key_columns(order: int, slot: int) -> list[int]:
    """The columns of an n-gram in key order: the fixed words, then the one at ``slot``."""
    return [c for c in range(order) if c != slot] + [slot]


class Spill:
    """One order's n-grams in file order, appended a chunk at a time to a file; row ``r``
    was read from line ``first_line + r`` of the model.  Below the model's highest order it
    tallies their back-off weights too, for the order's back-off table (:attr:`betas`)."""

    def __init__(self, path: Path, order: int, id_bytes: int, has_beta: bool) -> None:
        self.path = path
        self.order = order
        self.id_bytes = id_bytes
        self.rows = 0
        self.first_line = 0
        self.betas = BetaTally() if has_beta else None
        self.file = RowFile(order, id_bytes, has_beta)
        self._stream = open(path, "wb")

    def add(self, chunk: NgramTable) -> None:
        count = len(chunk.lines)
        if count and not self.rows:
            self.first_line = int(chunk.lines[0])
        if count and (chunk.lines[0] != self.first_line + self.rows or chunk.lines[-1] != chunk.lines[0] + count - 1):
            raise AssertionError(f"the {self.order}-grams' lines are not consecutive: a spill cannot name them")
        rows = np.empty(count, dtype=self.file.rows)
        rows["ids"], rows["alpha"] = chunk.ids, chunk.alpha
        if self.betas is not None:
            rows["beta"] = chunk.beta
            self.betas.add(chunk.beta)
        self.file.write(self._stream, rows)
        self.rows += count

    def close(self) -> None:
        self._stream.close()


def sorted_blocks(spill: Path, order: int, id_bytes: int, has_beta: bool, slot: int, run_rows: int,
                  directory: Path) -> Iterator[np.ndarray]:
    """The rows of the spilled order ``spill`` in key order for ``slot``, a block at a time,
    every block holding whole patterns.  An order that fits one run is sorted in memory; a
    bigger one in runs written to files in ``directory`` (removed at the end)."""
    columns = key_columns(order, slot)
    row_file = RowFile(order, id_bytes, has_beta)
    runs: list[Path] = []
    try:
        with open(spill, "rb") as stream:
            while len(rows := row_file.read(stream, run_rows)):
                rows["ids"] = rows["ids"][:, columns]
                order_of_rows = sort_order(rows["ids"])
                if not runs and len(rows) < run_rows:  # the whole order, in memory
                    sorted_rows = take_rows(rows, order_of_rows)
                    del rows, order_of_rows
                    yield from merged_blocks([_ArrayRun(sorted_rows)], order)
                    return
                path = directory / f"{order}-{slot}-{len(runs)}.run"
                with open(path, "wb") as out:
                    for first in range(0, len(rows), _WRITE_ROWS):
                        row_file.write(out, take_rows(rows, order_of_rows[first:first + _WRITE_ROWS]))
                runs.append(path)
                del rows, order_of_rows
        with ExitStack() as files:
            yield from merged_blocks([_FileRun(files.enter_context(open(path, "rb")), row_file) for path in runs],
                                     order)
    finally:
        for path in runs:
            path.unlink(missing_ok=True)


def repeat_places(spill: Path, row_file: RowFile, ngram: np.ndarray) -> tuple[int, int]:
    """The places in the spill of the first two rows whose ids are ``ngram``: a repeated
    n-gram's two lines, found again only when there is one to name."""
    places: list[int] = []
    first_row = 0
    with open(spill, "rb") as stream:
        while len(places) < 2 and len(rows := row_file.read(stream, MERGE_ROWS)):
            places += (np.flatnonzero((rows["ids"] == ngram).all(axis=1)) + first_row).tolist()
            first_row += len(rows)
    if len(places) < 2:
        raise AssertionError(f"a repeated n-gram is not twice in its spill {spill}")
    return places[0], places[1]


class _FileRun:
    """A sorted run in a file, read a block at a time."""

    def __init__(self, stream: BinaryIO, row_file: RowFile) -> None:
        self.stream, self.row_file = stream, row_file

    def read(self, count: int) -> np.ndarray:
        return self.row_file.read(self.stream, count)


class _ArrayRun:
    """A sorted run held in memory, handed out a block at a time."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows, self.at = rows, 0

    def read(self, count: int) -> np.ndarray:
        block = self.rows[self.at:self.at + count]
        self.at += len(block)
        return block


def take_rows(rows: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``rows[order]`` for contiguous ``rows``, gathered as whole rows of bytes: numpy
    copies a structured row field by field through memmove (~170 ns a row of 12-14
    bytes; ~40 ns this way), and a build gathers every row of every slot at least once
    (the sort of a run, and of each merge step of many)."""
    as_bytes = rows.view(np.uint8).reshape(len(rows), rows.dtype.itemsize)
    return np.take(as_bytes, order, axis=0).view(rows.dtype).reshape(len(order))


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


def _count_at_most(ids: np.ndarray, bound: list[int]) -> int:
    """How many of the sorted rows ``ids`` are at most ``bound`` (lexicographically): a
    binary search of the rows, so that a merge step costs each run a few row reads, not a
    pass over its block (a slot of a billion-n-gram model is merged from ~250 runs whose
    key ranges barely overlap, and each step then takes the rows of one or two of them)."""
    if not len(ids) or ids[0].tolist() > bound:
        return 0
    if ids[-1].tolist() <= bound:
        return len(ids)
    low, high = 0, len(ids) - 1  # ids[low] <= bound < ids[high]
    while high - low > 1:
        middle = (low + high) // 2
        if ids[middle].tolist() <= bound:
            low = middle
        else:
            high = middle
    return high


def merged_blocks(runs: Sequence[_FileRun | _ArrayRun], order: int) -> Iterator[np.ndarray]:
    """The rows of the sorted ``runs`` in one sorted sequence, a block at a time.

    Every block holds whole patterns (rows with equal fixed words never straddle two
    blocks).  Each step reads more of every run whose block is used up, and emits the
    rows up to the smallest last key of the runs that still have more to read: every
    row after that bound is still to come from some run.
    """
    if not runs:
        return
    per_run = max(MERGE_ROWS // len(runs), MERGE_RUN_ROWS)
    blocks = [run.read(0) for run in runs]
    more = [True] * len(runs)
    # each block's first and last rows' ids, as lists: a step compares every run's with the
    # bound, and runs whose rows barely overlap (a slot in file order) make a step of each
    # block, so the steps' work must not be numpy calls for every run
    firsts: list[list[int] | None] = [None] * len(runs)
    lasts: list[list[int]] = [[] for _ in runs]
    carry = blocks[0][:0]  # the last pattern of the previous step, maybe incomplete
    while True:
        for number, run in enumerate(runs):
            if firsts[number] is None and more[number]:
                blocks[number] = block = run.read(per_run)
                more[number] = len(block) == per_run
                if len(block):
                    firsts[number], lasts[number] = block["ids"][0].tolist(), block["ids"][-1].tolist()
        open_runs = [number for number in range(len(runs)) if more[number]]
        bound = min(lasts[number] for number in open_runs) if open_runs else None
        pieces = [carry]
        for number, first in enumerate(firsts):
            if first is None or (bound is not None and first > bound):
                continue
            block = blocks[number]
            count = len(block) if bound is None else _count_at_most(block["ids"], bound)
            pieces.append(block[:count])
            blocks[number] = block = block[count:]
            firsts[number] = block["ids"][0].tolist() if len(block) else None
        taken = np.concatenate(pieces, dtype=carry.dtype)  # dtype: no promotion of the rows' fields
        if len(runs) > 1:
            taken = take_rows(taken, sort_order(taken["ids"]))  # stable: equal rows stay in file order
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
