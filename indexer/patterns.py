"""Turning one order's sorted n-grams into pattern records (the layout of :mod:`fastsubs.format`).

For n-grams of order m and a slot position s, every n-gram ``A x B`` (x at position s)
belongs to the pattern ``A _ B``.  Patterns come in key order; small ones are packed
into BLOCK records that fill half an LMDB page each (two per page, no overflow pages),
big ones get PATTERN records of their own, and :func:`end_record` closes the
database.  Everything is built with whole-array numpy operations over a block of rows
at a time, and handed to LMDB through C-level iterators.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import ModelFormatError

#: The largest value LMDB keeps inside a 4 KiB leaf page (its ``me_nodemax``, 2038, less
#: a node's 8 bytes of header); a record longer than that goes to pages of its own.
#: A block's value and its key fit this, so two blocks fill a page.
INLINE_BYTES = 2030
#: A pattern whose entry (key, count and data) is longer than this gets a PATTERN record
#: of its own: blocks then end within a few bytes of INLINE_BYTES.
ENTRY_MAX = 480
#: Bytes of a record before what its kind adds: checksum, kind, flags (the previous key follows).
_COMMON = fmt.R_PREVIOUS

#: Where the bytes of the records go (``RecordWriter.parts``, reported by
#: ``fastsubs-index info``): the patterns' ids, ``by_score`` positions, alphas and betas,
#: the joint orders of patterns ``_ d`` (positions and keys);
#: their keys (LMDB's key of each record, and the front-coded keys of a block's entries);
#: and the structure around them (every record's checksum, kind, flags and previous key,
#: a block's counts and restart offsets, each entry's shared-bytes and count bytes, a
#: PATTERN's count, padding to whole words).
PARTS = ("ids", "positions", "alpha", "beta", "joint", "keys", "structure")


def check_no_duplicates(rows: np.ndarray, order: int, path: str, words: list[bytes], first_line: int) -> None:
    """Raise ModelFormatError naming the line of the first repeated n-gram in ``rows``.

    ``rows`` (see :func:`fastsubs.indexer.runs.row_dtype`) must be sorted with the slot
    last, so that their ids are in n-gram order and a repeat follows its first; row
    ``place`` p of the order was read from line ``first_line + p``.
    """
    ids = rows["ids"]
    same = np.all(ids[1:] == ids[:-1], axis=1)
    if same.any():
        at = int(np.flatnonzero(same)[0])
        first, second = sorted(first_line + int(place) for place in rows["place"][at:at + 2])
        text = b" ".join(words[i] for i in ids[at]).decode("utf-8", "backslashreplace")
        raise ModelFormatError(path, second, f"expected each {order}-gram once, found '{text}' again "
                                             f"(first on line {first})")


def _group_starts(keys: np.ndarray) -> np.ndarray:
    """Start row of every run of equal rows in the row-sorted 2-D array ``keys``."""
    if keys.shape[1] == 0:
        return np.zeros(1, dtype=np.int64)
    change = np.any(keys[1:] != keys[:-1], axis=1)
    return np.concatenate(([0], np.flatnonzero(change) + 1)).astype(np.int64)


def _descending_key(scores: np.ndarray) -> np.ndarray:
    """uint64 keys of float32 ``scores`` that sort ascending as the scores sort descending."""
    bits = (scores + np.float32(0)).view(np.uint32)  # + 0: -0.0 becomes 0.0, equal as a float
    ascending = np.where(bits & np.uint32(0x80000000), ~bits, bits | np.uint32(0x80000000))
    return (~ascending).astype(np.uint64)


def _put(buffer: np.ndarray, at: np.ndarray, values: np.ndarray, width: int) -> None:
    """Write ``values`` (unsigned integers) little-endian, ``width`` bytes each, at byte offsets ``at``."""
    values = values.astype(np.uint64)
    for lane in range(width):
        buffer[at + lane] = (values >> np.uint64(8 * lane)) & np.uint64(0xFF)


def _put_order(buffer: np.ndarray, group_of_row: np.ndarray, rank: np.ndarray, keys: np.ndarray,
               at_of_group: np.ndarray, width_of_group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Write, for each pattern, the positions (``rank``: each row's place in the pattern's
    id-sorted arrays) of its rows ordered by ``keys`` descending, ties by id, from
    ``at_of_group`` with ``width_of_group`` bytes each (none for a pattern of one word);
    returns that order of the rows and each row's place in it.  One stable sort of
    (pattern, key descending) packed in a uint64: the rows of a pattern come in id order."""
    order = np.argsort((group_of_row.astype(np.uint64) << np.uint64(32)) | _descending_key(keys), kind="stable")
    group = group_of_row[order]
    place = np.arange(len(order)) - np.searchsorted(group, group)
    width = width_of_group[group]
    at = at_of_group[group] + place * width
    for size in (1, 2, 4):
        chosen = width == size
        _put(buffer, at[chosen], rank[order][chosen], size)
    return order, place


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For runs of ``lengths`` items starting at ``starts``: the run of each item and its place in the run."""
    run = np.repeat(np.arange(len(lengths)), lengths)
    before = np.cumsum(lengths) - lengths
    return run, np.arange(int(lengths.sum())) - before[run]


@dataclass
class Records:
    """Records in key order: keys concatenated (``key_length`` bytes each) and values
    concatenated, record g's value being ``values[offsets[g]:offsets[g + 1]]``."""

    keys: bytes
    key_length: int
    values: bytes
    offsets: np.ndarray | list[int]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs built from ``map``/``zip`` over slices, so no Python code
        runs per record while LMDB's ``putmulti`` consumes them."""
        bounds = self.offsets.tolist() if isinstance(self.offsets, np.ndarray) else self.offsets
        key_bounds = range(0, len(self.keys) + 1, self.key_length)
        return zip(map(self.keys.__getitem__, map(slice, key_bounds, key_bounds[1:])),
                   map(self.values.__getitem__, map(slice, bounds, bounds[1:])))


class RecordWriter:
    """The records of one ``patterns{m}`` database (or of one slot of it), made a block of
    sorted rows at a time.

    It remembers the last pattern key written, which the next record names as its
    previous one, how many records it made (the header counts them) and the largest
    magnitude of a finite value it wrote (the header's value bound).  Given the unigram
    alphas (for the patterns ``_ d``: order 2, the slot first), it gives each pattern of at
    least ``joint_min`` words its joint order.
    """

    def __init__(self, order: int, model_order: int, id_bytes: int, unigram_alpha: np.ndarray | None = None,
                 joint_min: int = fmt.JOINT_MIN_DEFAULT) -> None:
        self.order = order
        self.has_beta = order < model_order
        self.id_bytes = id_bytes
        self.key_length = fmt.key_length(order, id_bytes)
        self.unigram_alpha = unigram_alpha
        self.joint_min = joint_min
        self.last_key: bytes | None = None
        self.written = 0
        self.value_bound = 0.0
        self.parts = dict.fromkeys(PARTS, 0)

    def records(self, rows: np.ndarray, slot: int) -> Records:
        """The records of ``rows`` (see :func:`fastsubs.indexer.runs.row_dtype`), sorted by
        key and holding whole patterns, with the slot at ``slot``."""
        patterns = _Patterns(rows, slot, self)
        records = patterns.encode(self.last_key)
        self.value_bound = max(self.value_bound, largest_magnitude(rows["alpha"]),
                               largest_magnitude(rows["beta"]) if self.has_beta else 0.0)
        self.last_key = bytes(patterns.keys[-1])
        self.written += len(records)
        for part, size in patterns.parts.items():
            self.parts[part] += size
        return records


def largest_magnitude(values: np.ndarray) -> float:
    """The largest ``|v|`` of the finite float32 ``values`` (0 for none)."""
    finite = np.abs(values.astype(fmt.SCORE_DTYPE)[np.isfinite(values)])
    return float(finite.max()) if len(finite) else 0.0


def joint_keys(unigram_alpha: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The joint keys of words with ``unigram_alpha`` and pattern ``alpha`` (float32 both):
    the smallest float32 at or above the float64 sum of the two (kernel/format.h)."""
    exact = unigram_alpha.astype(np.float64) + alpha.astype(np.float64)
    keys = exact.astype(np.float32)
    below = keys.astype(np.float64) < exact
    keys[below] = np.nextafter(keys[below], np.float32(np.inf))
    return keys


def end_record(order: int, id_bytes: int, previous: bytes | None) -> tuple[bytes, bytes]:
    """The END record closing the database of ``order`` after the pattern key ``previous``."""
    key_length = fmt.key_length(order, id_bytes)
    value = np.zeros(_padded(_COMMON + key_length), dtype=np.uint8)
    _common(value, np.zeros(1, np.int64), fmt.END, previous, np.zeros((0, key_length), np.uint8), key_length)
    key = fmt.end_key(order, id_bytes)
    value[:4] = np.frombuffer(np.uint32(fmt.record_checksum(key, value[4:].tobytes())).tobytes(), np.uint8)
    return key, value.tobytes()


def _padded(size):
    """``size`` rounded up to whole 4-byte words (a number or an array)."""
    return (size + 3) // 4 * 4


def _common(buffer: np.ndarray, starts: np.ndarray, kinds: np.ndarray | int, before: bytes | None,
            last_keys: np.ndarray, key_length: int) -> None:
    """The part every record starts with, for records at ``starts``: kind, flags and the
    previous record's last key (``before`` for the first, then ``last_keys[r - 1]``)."""
    buffer[starts + fmt.R_KIND] = kinds
    previous = np.empty((len(starts), key_length), dtype=np.uint8)
    previous[0] = np.frombuffer(before, np.uint8) if before is not None else 0
    previous[1:] = last_keys[:len(starts) - 1]
    flags = np.full(len(starts), fmt.HAS_PREVIOUS, dtype=np.uint8)
    if before is None:
        flags[0] = 0
    buffer[starts + fmt.R_FLAGS] = flags
    columns = np.arange(key_length)
    buffer[(starts + fmt.R_PREVIOUS)[:, None] + columns] = previous


class _Patterns:
    """The patterns of one block of rows, and how they are laid out in records."""

    def __init__(self, rows: np.ndarray, slot: int, writer: RecordWriter) -> None:
        self.writer = writer
        other = rows["ids"][:, :-1]
        self.words = rows["ids"][:, -1]
        self.alpha = rows["alpha"]
        self.beta = rows["beta"]
        self.starts = _group_starts(other)
        self.counts = np.diff(np.append(self.starts, len(self.words)))
        groups = len(self.starts)
        key_length = writer.key_length
        self.keys = fmt.pattern_keys(slot, other[self.starts], writer.id_bytes)
        counts = self.counts
        self.position_bytes = fmt.position_bytes(counts)
        self.data_bytes = fmt.pattern_data_bytes(counts, writer.id_bytes, writer.has_beta)
        # front coding: the leading key bytes each pattern shares with the one before
        same = np.zeros((groups, key_length), dtype=bool)
        same[1:] = self.keys[1:] == self.keys[:-1]
        self.shared = np.cumprod(same, axis=1).sum(axis=1)
        entry = fmt.ENTRY_SHARED_BYTES + key_length + fmt.ENTRY_COUNT_BYTES + self.data_bytes
        self.joint = (counts >= writer.joint_min) if writer.unigram_alpha is not None else np.zeros(groups, bool)
        self.joint_bytes = np.where(self.joint, fmt.joint_data_bytes(counts), 0)
        self.alone = (counts > fmt.BLOCK_MAX_COUNT) | (entry > ENTRY_MAX) | self.joint

    def encode(self, before: bytes | None) -> Records:
        first, last, kinds = self._records()
        key_length = self.writer.key_length
        n_records = len(first)
        block = kinds == fmt.BLOCK
        # where each pattern's entry starts in its record, and which entries restart the keys
        record_of = np.repeat(np.arange(n_records), last - first)
        restart = self.periodic.copy()
        restart[first] = True
        shared = np.where(restart, 0, self.shared)
        entry_bytes = fmt.ENTRY_SHARED_BYTES + (key_length - shared) + fmt.ENTRY_COUNT_BYTES + self.data_bytes
        restarts = np.add.reduceat(restart.astype(np.int64), first)
        entries_before = np.cumsum(entry_bytes) - entry_bytes
        entries_bytes = np.add.reduceat(entry_bytes, first)
        head = _COMMON + key_length
        sizes = np.where(block, head + fmt.BLOCK_RESTART_TABLE + fmt.RESTART_BYTES * restarts + entries_bytes,
                         head + fmt.PATTERN_DATA + self.data_bytes[first] + self.joint_bytes[first])
        sizes = _padded(sizes)
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        buffer = np.zeros(int(offsets[-1]), dtype=np.uint8)
        starts = offsets[:-1]
        last_keys = self.keys[last - 1]
        _common(buffer, starts, kinds, before, last_keys, key_length)
        buffer[starts[~block] + fmt.R_FLAGS] |= np.where(self.joint[first[~block]], fmt.HAS_JOINT, 0).astype(np.uint8)
        # blocks: counts of patterns and restarts, restart offsets, entries
        body = starts + head
        _put(buffer, body[block] + fmt.BLOCK_PATTERNS, (last - first)[block], 2)
        _put(buffer, body[block] + fmt.BLOCK_RESTARTS, restarts[block], 2)
        entries_start = body + fmt.BLOCK_RESTART_TABLE + fmt.RESTART_BYTES * restarts
        in_block = block[record_of]
        entry_at = entries_start[record_of] + entries_before - entries_before[first][record_of]
        entry_offset = entry_at - entries_start[record_of]
        restarts_so_far = np.cumsum(restart)
        restart_rank = restarts_so_far - restarts_so_far[first][record_of]
        chosen = in_block & restart
        _put(buffer, body[record_of[chosen]] + fmt.BLOCK_RESTART_TABLE + fmt.RESTART_BYTES * restart_rank[chosen],
             entry_offset[chosen], fmt.RESTART_BYTES)
        buffer[entry_at[in_block]] = shared[in_block]
        suffix = (key_length - shared)[in_block]
        run, place = _ranges(entry_at[in_block], suffix)
        keys_in_block = self.keys[in_block]
        key_at = entry_at[in_block][run] + fmt.ENTRY_SHARED_BYTES
        buffer[key_at + place] = keys_in_block[run, shared[in_block][run] + place]
        count_at = entry_at[in_block] + fmt.ENTRY_SHARED_BYTES + suffix
        buffer[count_at] = self.counts[in_block]
        # patterns alone: their count
        alone_at = body[~block]
        _put(buffer, alone_at + fmt.PATTERN_COUNT, self.counts[first[~block]], 4)
        data_at = np.empty(len(self.counts), dtype=np.int64)
        data_at[in_block] = count_at + fmt.ENTRY_COUNT_BYTES
        data_at[first[~block]] = alone_at + fmt.PATTERN_DATA
        self._write_data(buffer, data_at)
        self._write_joint(buffer, data_at + self.data_bytes)
        words = buffer.view("<u4")
        checksums = fmt.batch_checksums(words, offsets // 4, last_keys)
        words[offsets[:-1] // 4] = checksums
        self._count_parts(n_records * key_length, int((key_length - shared)[in_block].sum()), int(offsets[-1]))
        return Records(last_keys.tobytes(), key_length, buffer.tobytes(), offsets)

    def _count_parts(self, record_keys: int, entry_keys: int, values: int) -> None:
        """Where the bytes of the records just made go (:data:`PARTS`), into ``self.parts``:
        ``record_keys`` bytes of LMDB keys, ``values`` bytes of values of which ``entry_keys``
        are the keys of entries in blocks."""
        writer = self.writer
        rows = len(self.words)
        self.parts = {"ids": rows * writer.id_bytes, "positions": int((self.counts * self.position_bytes).sum()),
                      "alpha": 4 * rows, "beta": 4 * rows * writer.has_beta, "joint": int(self.joint_bytes.sum()),
                      "keys": record_keys + entry_keys}
        self.parts["structure"] = record_keys + values - sum(self.parts.values())

    def _records(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The first and last + 1 pattern of each record, and its kind: each pattern that is
        alone a PATTERN record, the others packed into blocks as full as INLINE_BYTES allows."""
        key_length = self.writer.key_length
        n = len(self.counts)
        # bytes each entry takes in a block, counting its restart offset when it restarts
        # where runs of 16 begin in its stretch of small patterns (a block's first entry
        # restarts too: _block_end adds what that costs)
        stretch_start = np.flatnonzero(np.concatenate(([True], self.alone[1:] | self.alone[:-1])))
        stretch_of = np.searchsorted(stretch_start, np.arange(n), side="right") - 1
        periodic = self.periodic = (np.arange(n) - stretch_start[stretch_of]) % fmt.BLOCK_RESTART == 0
        shared = np.where(periodic, 0, self.shared)
        sizes = (fmt.ENTRY_SHARED_BYTES + (key_length - shared) + fmt.ENTRY_COUNT_BYTES + self.data_bytes
                 + fmt.RESTART_BYTES * periodic)
        total = np.concatenate(([0], np.cumsum(sizes)))
        room = (INLINE_BYTES - key_length) // 4 * 4 - (_COMMON + key_length + fmt.BLOCK_RESTART_TABLE)
        # where each stretch of small patterns ends: at the next pattern alone
        alone_at = np.flatnonzero(self.alone)
        stretch_end = np.append(alone_at, n)[np.searchsorted(alone_at, np.arange(n))].tolist()
        first, last, kinds = [], [], []
        alone = self.alone.tolist()
        # a block's first entry restarts: its shared bytes come back, and it takes a restart offset
        extra = np.where(periodic, 0, self.shared + fmt.RESTART_BYTES).tolist()
        limit = (total[:-1] + room - np.array(extra)).tolist()
        i = 0
        while i < n:
            if alone[i]:
                end, kind = i + 1, fmt.PATTERN
            else:
                end = int(np.searchsorted(total, limit[i], side="right")) - 1
                end = min(max(end, i + 1), stretch_end[i])
                kind = fmt.BLOCK
            first.append(i)
            last.append(end)
            kinds.append(kind)
            i = end
        return np.array(first, np.int64), np.array(last, np.int64), np.array(kinds, np.int64)

    def _write_data(self, buffer: np.ndarray, data_at: np.ndarray) -> None:
        """Every pattern's ids, positions by score, alphas and betas, starting at ``data_at``."""
        writer = self.writer
        counts = self.counts
        n_rows = len(self.words)
        group_of_row = np.repeat(np.arange(len(counts)), counts)
        rank = np.arange(n_rows) - self.starts[group_of_row]
        row_counts = counts[group_of_row]
        row_data = data_at[group_of_row]
        position_bytes = self.position_bytes[group_of_row]
        _put(buffer, row_data + rank * writer.id_bytes, self.words, writer.id_bytes)
        positions_at = row_data + row_counts * writer.id_bytes
        alpha_at = positions_at + row_counts * position_bytes
        _put(buffer, alpha_at + 4 * rank, self.alpha.astype("<f4").view("<u4"), 4)
        if writer.has_beta:
            _put(buffer, alpha_at + 4 * row_counts + 4 * rank, self.beta.astype("<f4").view("<u4"), 4)
        _put_order(buffer, group_of_row, rank, self.alpha, data_at + counts * writer.id_bytes, self.position_bytes)

    def _write_joint(self, buffer: np.ndarray, joint_at: np.ndarray) -> None:
        """The joint order of each pattern that has one, starting at ``joint_at``: its
        positions by joint key descending (ties by id), then the keys in that order."""
        chosen = np.repeat(self.joint, self.counts)
        unigram_alpha = self.writer.unigram_alpha
        if unigram_alpha is None or not chosen.any():
            return
        every_group = np.repeat(np.arange(len(self.counts)), self.counts)
        group_of_row = every_group[chosen]
        rank = (np.arange(len(self.words)) - self.starts[every_group])[chosen]
        keys = joint_keys(unigram_alpha[self.words[chosen]], self.alpha[chosen])
        by_key, key_rank = _put_order(buffer, group_of_row, rank, keys, joint_at, self.position_bytes)
        group = group_of_row[by_key]
        at = joint_at[group] + self.counts[group] * self.position_bytes[group] + 4 * key_rank
        _put(buffer, at, keys[by_key].astype("<f4").view("<u4"), 4)
