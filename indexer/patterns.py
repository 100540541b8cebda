"""One order's sorted n-grams made into pattern records, by the core's codec (kernel/codec.c).

For n-grams of order m and a slot position s, every n-gram ``A x B`` (x at position s)
belongs to the pattern ``A _ B``.  The build sorts a slot's n-grams by pattern key and hands
them to the core a block of rows at a time (:func:`fastsubs.format.encode_patterns`), which
lays them out as the format says (kernel/format.h: small patterns packed into BLOCK records
sized to fill LMDB's leaf pages, big ones and joint orders in PATTERN records of their own)
and gives back the records' keys and values, handed to LMDB through C-level iterators.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fastsubs import format as fmt


def first_repeat(ids: np.ndarray) -> np.ndarray | None:
    """The first n-gram of ``ids`` (rows sorted with the slot last, so in n-gram order and
    a repeat next to its first) that is there twice, or None."""
    same = np.all(ids[1:] == ids[:-1], axis=1)
    return ids[int(np.argmax(same))] if same.any() else None


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


#: A batch's rows as the codec takes them: ids (``order`` uint32 each), alphas, betas (or None).
Columns = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]


def _joined(before: np.ndarray | None, now: np.ndarray, dtype: np.typing.DTypeLike) -> np.ndarray:
    """``now`` (a field of rows) after ``before``, one contiguous array of ``dtype``."""
    return np.ascontiguousarray(now, dtype) if before is None else np.concatenate([before, now], dtype=dtype)


class RecordWriter:
    """The records of one ``patterns{m}`` database (or of one slot of it), made a block of
    sorted rows at a time, then :meth:`finish`.

    It remembers the last pattern key written, which the next record names as its
    previous one, the room left in the LMDB leaf page of the last record (which the next
    block is sized to fill; a writer's first record is taken to start a page), the rows
    of the last block, still open (they go first in the next call, so the records are the
    same wherever the sort's batches fall: an index does not depend on ``--memory`` or
    ``--jobs``) and their place in their run of small patterns, how many
    records it made (the header counts them), where their bytes
    went (:data:`fastsubs.format.PARTS`) and the largest magnitude of a finite value it
    wrote (the header's value bound).  Given the unigram alphas (for the patterns ``_ d``:
    order 2, the slot first), it gives each pattern of at least ``joint_min`` words its
    joint order.
    """

    def __init__(self, order: int, model_order: int, vocab_size: int, unigram_alpha: np.ndarray | None = None,
                 joint_min: int = fmt.JOINT_MIN_DEFAULT, beta_table: np.ndarray | None = None) -> None:
        self.order = order
        self.has_beta = order < model_order
        # (made once: the codec's hash of a table of millions of values, made for each batch,
        # cost a pass over the table per batch)
        self.beta_index = fmt.beta_index(beta_table) if self.has_beta else None
        self.vocab_size = vocab_size
        self.key_length = fmt.key_bytes(order, fmt.id_bytes(vocab_size))
        self.unigram_alpha = None if unigram_alpha is None else np.ascontiguousarray(unigram_alpha, fmt.SCORE_DTYPE)
        self.joint_min = joint_min
        self.last_key: bytes | None = None
        self.page_room: int = fmt.FRESH_PAGE
        self.run_phase = 0
        self.open_rows: Columns | None = None
        self.written = 0
        self.value_bound = 0.0
        self.parts = dict.fromkeys(fmt.PARTS, 0)

    def records(self, rows: np.ndarray, slot: int) -> Records:
        """The records of ``rows`` (see :func:`fastsubs.indexer.runs.row_dtype`), sorted by
        key, holding whole patterns and following the rows of the calls before, with the
        slot at ``slot``: all but the last block's, which waits for the next call's rows."""
        open_ids, open_alpha, open_beta = self.open_rows or (None, None, None)  # (one block's: a few thousand rows)
        beta = _joined(open_beta, rows["beta"], fmt.SCORE_DTYPE) if self.has_beta else None
        return self._encode((_joined(open_ids, rows["ids"], np.uint32),
                             _joined(open_alpha, rows["alpha"], fmt.SCORE_DTYPE), beta), slot, more=True)

    def finish(self, slot: int) -> Records:
        """The records of the last block's rows, which wait for rows that will not come."""
        if self.open_rows is None:
            return Records(b"", self.key_length, b"", [0])
        return self._encode(self.open_rows, slot, more=False)

    def _encode(self, columns: Columns, slot: int, more: bool) -> Records:
        """The records of ``columns`` after those made so far; with ``more``, the rows of
        their last block are kept for the next call (:func:`fastsubs.format.encode_patterns`)."""
        ids, alpha, beta = columns
        keys, offsets, values, parts, value_bound, self.page_room, self.run_phase, done = fmt.encode_patterns(
            ids, alpha, beta, order=self.order, slot=slot, has_beta=self.has_beta,
            vocab_size=self.vocab_size, previous=self.last_key, unigram_alpha=self.unigram_alpha,
            joint_min=self.joint_min, beta_index=self.beta_index, page_room=self.page_room,
            run_phase=self.run_phase, more=more)
        self.open_rows = None if done == len(alpha) else (ids[done:].copy(), alpha[done:].copy(),
                                                          None if beta is None else beta[done:].copy())
        records = Records(keys, self.key_length, values, np.frombuffer(offsets, "<u8"))
        if len(records):
            self.last_key = keys[-self.key_length:]
        self.value_bound = max(self.value_bound, value_bound)
        self.written += len(records)
        for part, size in parts.items():
            self.parts[part] += size
        return records


def largest_magnitude(values: np.ndarray) -> float:
    """The largest ``|v|`` of the finite float32 ``values`` (0 for none)."""
    finite = np.abs(values.astype(fmt.SCORE_DTYPE)[np.isfinite(values)])
    return float(finite.max()) if len(finite) else 0.0
