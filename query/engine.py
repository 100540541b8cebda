"""The query engine: one object per open index, from tokens to ranked substitutes.

``Engine`` opens an index through the compiled kernel (``fastsubs.query._kernel.Model``),
which maps it read-only and reads every record in place: start-up reads the metadata and
checks the whole-vocabulary arrays, processes that open the same index share one copy of
it in the page cache, and what a process keeps for itself is the kernel's fixed-size
caches (record slots, rank maps), not objects per pattern.  The search runs without the
GIL: one Engine may be used from many threads at once (each search takes a searcher of
its own).  ``close()`` is safe at any time: later calls raise ValueError, and the map is
released once no search runs.  An Engine must be opened in the process that uses it (the
map must not cross a ``fork``).
"""

from __future__ import annotations

import enum
import numbers
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from fastsubs import format as fmt
from fastsubs.errors import ArgumentError, DamagedIndexError, NotAnIndexError
from fastsubs.query._kernel import Model, thread_counters
from fastsubs.query.opening import NOT_AN_INDEX_NO_META, check_array_checksums, decode_meta, open_published
from fastsubs.query.search import Limits, SearchStats

if TYPE_CHECKING:
    import numpy as np

Record = TypeVar("Record", bound=tuple)


class Fields(enum.IntEnum):
    """A search's answers as the text output's fields, written by the kernel: the
    command line's plain text needs no array per position, and no numpy (its start-up)."""

    SCORES = 1         #: ``word score`` fields
    PROBABILITIES = 2  #: ``word p/Σp`` fields, down to the first p/Σp below 1e-8 (-z)


def _open_model(path: str) -> Model:
    try:
        return Model(path)
    except LookupError:  # an LMDB environment without the metadata database
        raise NotAnIndexError(f"{path}: {NOT_AN_INDEX_NO_META}") from None


class Engine:
    """An open index and its searches."""

    def __init__(self, index_path: str | os.PathLike[str]) -> None:
        self.path = Path(index_path)
        # Model raises DamagedIndexError for a file LMDB refuses: open_published tells a
        # swap in progress from damage by the inode.
        self._model = open_published(self.path, _open_model, Model.info, Model.close, DamagedIndexError)
        try:
            self.meta = decode_meta(self.path, self._model.get("meta", fmt.META_KEY))
            self.order: int = self.meta["order"]
            self.vocab_size: int = self.meta["vocab_size"]
            self.bos_id: int | None = self.meta["bos_id"]
            self.unk_id: int | None = self.meta["unk_id"]
            check_array_checksums(self.path, self.meta, lambda key: self._model.region("arrays", key))
            self._model.prepare(self.order, self.vocab_size, self.meta["id_bytes"], self.bos_id,
                                self.meta["max_unigram_beta"])
        except BaseException:
            self._model.close()
            raise
        self._unknown = self.unk_id if self.unk_id is not None else fmt.NO_WORD
        self._excluded: dict[tuple[bytes, ...], bytes] = {}

    @property
    def closed(self) -> bool:
        return self._model.closed

    def close(self) -> None:
        """No more searches; the map is released once none runs (safe from any thread)."""
        self._model.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stats(self) -> SearchStats:
        """Totals over every search so far (the kernel counts; this is a snapshot)."""
        return SearchStats(*self._model.counters()[:4])

    @staticmethod
    def thread_stats() -> SearchStats:
        """Totals over the searches the calling thread has made, on any open index.  Unlike
        :attr:`stats`, the difference of two of these taken by one thread counts that
        thread's work alone, whatever other threads search meanwhile."""
        return SearchStats(*thread_counters())

    def cache_counters(self) -> tuple[int, int]:
        """(pattern look-ups, look-ups that read the index) over every search so far."""
        lookups, misses = self._model.counters()[4:]
        return lookups, misses

    # ------------------------------------------------------------------ words

    def word_id(self, word: bytes) -> int | None:
        """Id of ``word``, or None when it is not in the vocabulary."""
        found = int.from_bytes(self._model.ids([word], fmt.NO_WORD), "little")
        return None if found == fmt.NO_WORD else found

    def word(self, word_id: int) -> bytes:
        """The word with id ``word_id``, as the model spells it (UTF-8 bytes)."""
        return self._model.word(word_id)

    def fields(self, word_ids: np.ndarray, values: np.ndarray) -> bytes:
        """``word value`` fields (``%.8f``) joined by tabs, written in C straight from the index."""
        import numpy as np

        return self._model.fields(np.ascontiguousarray(word_ids, dtype=fmt.ID_DTYPE),
                                  np.ascontiguousarray(values, dtype=np.float64))

    def _ids(self, tokens: list[bytes]) -> bytes:
        """``<s> tokens </s>`` as ids (bytes of uint32, as the search takes them); unknown
        words (markers the model lacks too) are ``<unk>`` or, without it, a word that
        matches no n-gram."""
        return self._model.ids([b"<s>", *tokens, b"</s>"], self._unknown)  # type: ignore[no-any-return]

    def sentence_ids(self, tokens: list[bytes]) -> np.ndarray:
        """``<s> tokens </s>`` as an array of ids (see :meth:`_ids`)."""
        import numpy as np

        return np.frombuffer(self._ids(tokens), fmt.ID_DTYPE)

    def excluded(self, words: tuple[bytes, ...]) -> bytes:
        """The words of ``words`` that can be substitutes, as the search takes them: their
        ids, ascending, as bytes of uint32 (words the vocabulary lacks, and ``<s>``, which
        is never a candidate, are left out)."""
        if not words:
            return b""
        packed = self._excluded.get(words)
        if packed is None:
            ids = sorted({i for i in map(self.word_id, words) if i is not None and i != self.bos_id})
            packed = self._excluded[words] = struct.pack(f"<{len(ids)}I", *ids)
        return packed

    def unknown(self, words: tuple[bytes, ...]) -> list[bytes]:
        """The words of ``words`` that are not in the vocabulary (for a warning)."""
        return [word for word in words if self.word_id(word) is None]

    # ------------------------------------------------------------------ searches

    def search(self, ids: bytes | np.ndarray, first: int, last: int, limits: Limits, excluded: bytes = b"",
               record: type[Record] | None = None, fields: Fields | None = None) -> list[Any]:
        """Ranked substitutes of positions ``first`` … ``last - 1`` of ``ids`` (uint32 word
        ids with <s> and </s>: :meth:`sentence_ids`).

        At most V - 1 substitutes (one word is ``<s>``), as the original, even for a
        model without ``<s>``.  ``excluded`` (from :meth:`excluded`) are no candidates:
        the list is the exact top of the other words, and V counts only those for the -p
        rule and the cap.  Each position's answer is a pair of arrays (ids, float64 scores); with
        ``record`` (a NamedTuple class) a list of ``record(word text, score, p/Σp)``,
        made in C (the API makes one per substitute of a corpus); with ``fields``, the
        text output's fields as bytes (see :class:`Fields`).
        """
        found = self._model.search(ids, first, last, limits.count, limits.mass, excluded, record, fields or 0)
        if record is not None or fields is not None:
            return found  # type: ignore[no-any-return]
        import numpy as np

        return [(np.frombuffer(words, fmt.ID_DTYPE), np.frombuffer(scores)) for words, scores in found]

    def sentence(self, tokens: list[bytes], limits: Limits, eos: bool = True, excluded: bytes = b"",
                 record: type[Record] | None = None, fields: Fields | None = None) -> list[Any]:
        """Substitutes (as :meth:`search` gives them) for every position w1 … wn and (with
        ``eos``) the closing ``</s>``; never the words of ``excluded`` (from :meth:`excluded`)."""
        ids = self._ids(tokens)
        return self.search(ids, 1, len(tokens) + 2 if eos else len(tokens) + 1, limits, excluded, record, fields)

    def position(self, tokens: list[bytes], position: int, limits: Limits, excluded: bytes = b"",
                 record: type[Record] | None = None, fields: Fields | None = None) -> Any:
        """Substitutes (as :meth:`search` gives them) for ``tokens[position]``
        (``position == len(tokens)`` is ``</s>``)."""
        if isinstance(position, bool) or not isinstance(position, numbers.Integral) \
                or not 0 <= position <= len(tokens):
            raise ArgumentError(f"position {position!r} is not a whole number within 0 … {len(tokens)}")
        ids = self._ids(tokens)
        return self.search(ids, int(position) + 1, int(position) + 2, limits, excluded, record, fields)[0]
