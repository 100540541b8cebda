"""``Index``, the plain Python reader of an index's records.

The query engine (:mod:`fastsubs.query.engine`) reads records in place from C; ``Index``
reads them through py-lmdb as copies, so nothing it hands out points into the map (using
any of it after ``close()`` is safe); it serves ``fastsubs-index info``/``verify``, the
build's completeness check and the tests' and benchmarks' reference scorers, and needs no
compiled code.  Both open an index the same way (:mod:`fastsubs.query.opening`).  An
``Index`` must be opened in the process that uses it (an LMDB environment must not cross
a ``fork``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import lmdb
import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import DamagedIndexError, NotAnIndexError
from fastsubs.query.opening import NOT_AN_INDEX_NO_META, check_array_checksums, decode_meta, open_published


@dataclass(frozen=True)
class Pattern:
    """The words seen in the slot of one pattern ``A _ B``, viewed in place.

    ``ids``/``alpha``/``beta`` are sorted by word id; ``by_score`` gives positions
    into them by alpha descending.  ``beta`` is None for patterns of the highest
    order (such n-grams have no back-off weight) and ``max_beta`` is then 0.
    """

    ids: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray | None
    by_score: np.ndarray
    max_beta: float

    @property
    def count(self) -> int:
        return len(self.ids)

    def entry(self, word: int) -> tuple[float, float] | None:
        """``(alpha, beta)`` of ``A word B``, or None when ``word`` is not in the slot."""
        at = int(np.searchsorted(self.ids, word))
        if at == len(self.ids) or self.ids[at] != word:
            return None
        return float(self.alpha[at]), 0.0 if self.beta is None else float(self.beta[at])


_SINGLE = np.zeros(1, dtype=fmt.ID_DTYPE)


def lmdb_damage(path: Path, error: Exception) -> DamagedIndexError:
    """The error to raise when LMDB itself complains while reading: its file is damaged."""
    return DamagedIndexError(f"{path}: damaged index ({type(error).__name__}: {error})")


def parse_pattern(key: bytes, value: bytes, has_beta: bool, vocab_size: int) -> Pattern:
    """Read a pattern value (layout: :func:`fastsubs.format.pattern_value_layout`), checking its checksum.

    A value whose length fits no count, whose checksum does not match its key and
    contents, or whose ids or positions point outside the vocabulary or the pattern,
    raises DamagedIndexError: a flipped byte never becomes a wrong answer or a crash.
    """
    count = fmt.pattern_count(len(value) // 4, has_beta) if len(value) % 4 == 0 else None
    if count is None:
        raise DamagedIndexError(f"damaged index: a pattern value of {len(value)} bytes fits no layout")
    body = np.frombuffer(value, fmt.ID_DTYPE, offset=4)
    if fmt.record_checksum(bytes(key), body) != int.from_bytes(value[:4], "little"):
        raise DamagedIndexError(f"damaged index: pattern {bytes(key).hex()} fails its checksum (bytes flipped?)")
    # Every field is one 4-byte word per entry: slice the words already read for the
    # checksum, reinterpreting scores as float32.
    fields = {}
    offset = -1  # body starts after the header word
    for name, dtype, length in fmt.pattern_value_layout(count, has_beta):
        if offset >= 0:
            words = body[offset:offset + length]
            fields[name] = words if dtype == fmt.ID_DTYPE else words.view(dtype)
        offset += length
    ids, alpha, beta = fields["ids"], fields["alpha"], fields.get("beta")
    by_score = fields.get("by_score", _SINGLE)
    if (ids >= vocab_size).any() or (by_score >= count).any():
        raise DamagedIndexError(f"damaged index: pattern {bytes(key).hex()}: word id outside the vocabulary "
                                "or position outside the pattern")
    max_beta = float(fields["max_beta"][0]) if has_beta else 0.0
    return Pattern(ids, alpha, beta, by_score, max_beta)


def _open_lmdb(path: str) -> lmdb.Environment:
    """py-lmdb's read-only environment of an index (the OS reads ahead around what is read)."""
    return lmdb.open(path, readonly=True, lock=False, max_dbs=64, readahead=True, subdir=True, create=False)


def _lmdb_pages(env: lmdb.Environment) -> tuple[int, int]:
    return env.info()["last_pgno"], env.stat()["psize"]


class Index:
    """A read-only view of one index directory; use as a context manager or call close()."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._env = open_published(self.path, _open_lmdb, _lmdb_pages, lmdb.Environment.close, lmdb.Error)
        try:
            self._txn = self._env.begin()
            self.meta = decode_meta(self.path, self._get(fmt.META_KEY, self._open_meta_db()))
            self.order: int = self.meta["order"]
            self.vocab_size: int = self.meta["vocab_size"]
            self.id_bytes: int = self.meta["id_bytes"]
            self._vocab_db = self._open_db(fmt.VOCAB_DB)
            arrays_db = self._open_db(fmt.ARRAYS_DB)
            self._pattern_dbs = [None, None] + [
                self._open_db(fmt.patterns_db_name(m)) for m in range(2, self.order + 1)]
            self.unigram_alpha = self._array(arrays_db, fmt.UNIGRAM_ALPHA, fmt.SCORE_DTYPE, self.vocab_size)
            self.unigram_beta = self._array(arrays_db, fmt.UNIGRAM_BETA, fmt.SCORE_DTYPE, self.vocab_size)
            self.unigram_order = self._array(arrays_db, fmt.UNIGRAM_ORDER, fmt.ID_DTYPE, self.vocab_size)
            self.word_offsets = self._array(arrays_db, fmt.WORD_OFFSETS, fmt.OFFSET_DTYPE, self.vocab_size + 1)
            word_bytes = self._txn.get(fmt.WORD_BYTES, db=arrays_db)
            if word_bytes is None:
                raise DamagedIndexError(f"{self.path}: damaged index (array word_bytes is missing)")
            self.word_bytes: bytes = word_bytes
            check_array_checksums(self.path, self.meta, lambda key: self._txn.get(key, db=arrays_db))
        except lmdb.Error as error:
            self._env.close()
            raise lmdb_damage(self.path, error) from None
        except BaseException:
            self._env.close()
            raise
        self.unk_id: int | None = self.meta["unk_id"]
        self.bos_id: int | None = self.meta["bos_id"]
        self.eos_id: int | None = self.meta["eos_id"]
        self.max_unigram_beta: float = self.meta["max_unigram_beta"]

    def iter_patterns(self, order: int):
        """Every ``(key, value)`` record of the order-``order`` patterns, in key order."""
        return self._iter_db(self._pattern_dbs[order])

    def iter_vocabulary(self):
        """Every ``(word, id bytes)`` entry of the vocabulary, in word order."""
        return self._iter_db(self._vocab_db)

    def _iter_db(self, db):
        try:
            with self._txn.cursor(db=db) as cursor:
                yield from cursor
        except lmdb.Error as error:
            raise lmdb_damage(self.path, error) from None

    def _open_meta_db(self):
        try:
            return self._env.open_db(fmt.META_DB, txn=self._txn, create=False)
        except lmdb.Error:
            raise NotAnIndexError(f"{self.path}: {NOT_AN_INDEX_NO_META}") from None

    def _open_db(self, name: bytes):
        try:
            return self._env.open_db(name, txn=self._txn, create=False)
        except lmdb.Error:
            raise DamagedIndexError(f"{self.path}: damaged index (database {name.decode()} is missing)") from None

    def _array(self, db, key: bytes, dtype: str, length: int) -> np.ndarray:
        raw = self._txn.get(key, db=db)
        if raw is None or len(raw) != np.dtype(dtype).itemsize * length:
            raise DamagedIndexError(f"{self.path}: damaged index (array {key.decode()} is missing or truncated)")
        return np.frombuffer(raw, dtype)

    def close(self) -> None:
        """Release the memory map (what this Index handed out are copies: they stay usable)."""
        self._txn.abort()
        self._env.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, key: bytes, db) -> bytes | None:
        """``txn.get``, with LMDB's complaints about a damaged file turned into DamagedIndexError."""
        try:
            return self._txn.get(key, db=db)
        except lmdb.Error as error:
            raise lmdb_damage(self.path, error) from None

    def word_id(self, word: bytes) -> int | None:
        """Id of ``word``, or None when it is not in the vocabulary."""
        raw = self._get(word, self._vocab_db)
        if raw is None:
            return None
        found = int.from_bytes(raw, "little") if len(raw) == 4 else self.vocab_size
        # The id must spell the word back (word_bytes is checksummed): a flipped byte in
        # an entry never maps a word to another word's id.
        if found >= self.vocab_size or self.word(found) != word:
            raise DamagedIndexError(f"{self.path}: damaged index (vocabulary entry of {word!r} is invalid)")
        return found

    def word(self, word_id: int) -> bytes:
        """The word with id ``word_id``, as the model spells it (UTF-8 bytes)."""
        start, end = self.word_offsets[word_id:word_id + 2]
        return bytes(self.word_bytes[start:end])

    def pattern(self, slot: int, ids: tuple[int, ...]) -> Pattern | None:
        """The pattern whose fixed words are ``ids`` with the slot before ``ids[slot]``."""
        order = len(ids) + 1
        if order > self.order or fmt.NO_WORD in ids:
            return None
        key = fmt.pattern_key(slot, ids, self.id_bytes)
        raw = self._get(key, self._pattern_dbs[order])
        if raw is None:
            return None
        try:
            return parse_pattern(key, raw, order < self.order, self.vocab_size)
        except DamagedIndexError as error:
            raise DamagedIndexError(f"{self.path}: {error}") from None

    def ngram(self, ids: tuple[int, ...]) -> tuple[float, float] | None:
        """``(alpha, beta)`` of the n-gram ``ids``, or None when the model lacks it."""
        if fmt.NO_WORD in ids:
            return None
        if len(ids) == 1:
            return float(self.unigram_alpha[ids[0]]), float(self.unigram_beta[ids[0]])
        pattern = self.pattern(len(ids) - 1, ids[:-1])
        return None if pattern is None else pattern.entry(ids[-1])
