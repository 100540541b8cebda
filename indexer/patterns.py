"""Turning one order's n-gram table into pattern records (key bytes, value bytes).

For n-grams of order m and a slot position s, every n-gram ``A x B`` (x at position s)
belongs to the pattern ``A _ B``.  The records of a block of sorted n-grams are built
with whole-array numpy operations, and handed to LMDB through C-level iterators.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import ModelFormatError


def check_no_duplicates(rows: np.ndarray, order: int, path: str, words: list[bytes]) -> None:
    """Raise ModelFormatError naming the line of the first repeated n-gram in ``rows``.

    ``rows`` (see :func:`fastsubs.indexer.runs.row_dtype`) must be sorted with the slot
    last, so that their ids are in n-gram order and a repeat follows its first.
    """
    ids = rows["ids"]
    same = np.all(ids[1:] == ids[:-1], axis=1)
    if same.any():
        at = int(np.flatnonzero(same)[0])
        first, second = sorted(int(line) for line in rows["line"][at:at + 2])
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


def pattern_records(
    rows: np.ndarray, slot: int, has_beta: bool, id_bytes: int,
) -> tuple[bytes, int, bytes, np.ndarray]:
    """The patterns of ``rows`` with the slot at ``slot``, in key order.

    ``rows`` (see :func:`fastsubs.indexer.runs.row_dtype`) are sorted by key and hold
    whole patterns.  Returns ``(keys, key_length, values, value_offsets)``: the keys concatenated
    (each ``key_length`` bytes) and the values concatenated, record ``g``'s value
    being ``values[value_offsets[g]:value_offsets[g + 1]]``.
    """
    other = rows["ids"][:, :-1]
    slot_ids = rows["ids"][:, -1]
    alpha = rows["alpha"]
    beta = rows["beta"]

    starts = _group_starts(other)
    n_rows = len(slot_ids)
    counts = np.diff(np.append(starts, n_rows))
    groups = len(starts)
    group_of_row = np.repeat(np.arange(groups), counts)
    rank = np.arange(n_rows) - starts[group_of_row]

    # Value layout (see fastsubs.format.pattern_value_layout), in 4-byte words.
    hb = 1 if has_beta else 0
    sizes = fmt.pattern_value_words(counts, has_beta)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    words = np.zeros(int(offsets[-1]), dtype=np.uint32)
    base = offsets[:-1]
    if has_beta:
        max_beta = np.maximum.reduceat(beta, starts)
        words[base + 1] = max_beta.view(np.uint32)
    ids_at = base + 1 + hb
    row_ids_at = ids_at[group_of_row] + rank
    words[row_ids_at] = slot_ids
    row_counts = counts[group_of_row]
    words[row_ids_at + row_counts] = alpha.view(np.uint32)
    if has_beta:
        words[row_ids_at + 2 * row_counts] = beta.view(np.uint32)
    # by_score: positions within the group, alpha descending, ties by id.
    multi = row_counts > 1
    # One stable sort of (group, alpha descending) packed in a uint64: rows of a group are in rank order.
    by_score = np.argsort((group_of_row.astype(np.uint64) << np.uint64(32)) | _descending_key(alpha), kind="stable")
    by_score_multi = by_score[multi[by_score]]
    grp = group_of_row[by_score_multi]
    score_rank = np.arange(len(by_score_multi)) - np.searchsorted(grp, grp)
    by_score_at = ids_at[grp] + (2 + hb) * counts[grp] + score_rank
    words[by_score_at] = rank[by_score_multi].astype(np.uint32)

    key_length = 1 + id_bytes * other.shape[1]
    keys = np.empty((groups, key_length), dtype=np.uint8)
    keys[:, 0] = slot
    fixed = other[starts].astype(">u4").view(np.uint8).reshape(groups, -1, 4)
    keys[:, 1:] = fixed[:, :, 4 - id_bytes:].reshape(groups, -1)
    words[offsets[:-1]] = fmt.batch_checksums(words, offsets, keys)
    return keys.tobytes(), key_length, words.astype("<u4").tobytes(), offsets * 4


def iter_records(keys: bytes, key_length: int, values: bytes, offsets: np.ndarray) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` pairs from the concatenated form :func:`pattern_records` returns.

    Built from ``map``/``zip`` over slices, so no Python code runs per record while
    LMDB's ``putmulti`` consumes it (a generator cost about a microsecond a record).
    """
    bounds = offsets.tolist()
    key_bounds = range(0, len(keys) + 1, key_length)
    return zip(map(keys.__getitem__, map(slice, key_bounds, key_bounds[1:])),
               map(values.__getitem__, map(slice, bounds, bounds[1:])))
