"""The C core's open index (``fastsubs._kernel.Engine``) with what the library's own
modules, the command line, the tools and the tests ask of it beyond the public API:
searches and output by word id (:meth:`Core.search`, :meth:`Core.render`), a
chunk of input lines in one call (:meth:`Core.render_chunk`), the vocabulary's ids,
the metadata, the counters, and the core's own methods (records, patterns, checks, the
cache's size).

:class:`fastsubs.SubstituteIndex`, the public open index, holds one of these and shows
only what docs/api.md documents.  Code inside the package that needs more opens a
:class:`Core` itself (``fastsubs-query`` and its workers, :mod:`fastsubs.dask`'s
tasks, the indexer's checks, the benchmarks, the tests).

It opens, maps and checks the index in one call and searches without the GIL; one open
index may be used from many threads at once, and ``close()`` is safe at any moment
(later calls raise ValueError; the map is released once no search runs).  Open it in
each process that uses it: it must not cross a ``fork``.
"""

from __future__ import annotations

import enum
import os
import struct
import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any, NamedTuple

from fastsubs import format as fmt
from fastsubs._kernel import RENDER, Engine, thread_counters
from fastsubs.limits import Limits
from fastsubs.stats import SearchStats
from fastsubs.tokens import Token, as_bytes


class Substitute(NamedTuple):
    """One substitute: the word, its log10 score lp, and p/Σp over the listed substitutes
    (public as ``fastsubs.Substitute``; here, where the core's searches make them)."""

    word: str
    logprob: float
    probability: float


class Answer(enum.IntEnum):
    """What :meth:`Core.search` gives for each position."""

    ARRAYS = 0                #: (word ids, float64 scores), best first
    SUBSTITUTES = 1           #: a list of :class:`Substitute`


class Render(enum.IntEnum):
    """How :meth:`Core.render` writes each position: the core's kinds of output, each the
    value the core gives it (``kernel/render_layout.h``, ``RENDER_KINDS``; the names are its
    list's, tests/test_render_layout.py)."""

    LINE = RENDER["kinds"]["LINE"]                  #: ``word<TAB>fields``: fastsubs-query's text
    FIELDS = RENDER["kinds"]["FIELDS"]              #: the fields alone (render_chunk writes each -t record before)
    JSON = RENDER["kinds"]["JSON"]                  #: a JSON object (``--format jsonl``)
    SAMPLE_LINES = RENDER["kinds"]["SAMPLE_LINES"]  #: ``word<TAB>sub`` per draw (``--sample``)
    SAMPLE_JSON = RENDER["kinds"]["SAMPLE_JSON"]    #: a JSON object listing the draws (``--sample --format jsonl``)
    COLUMNS = RENDER["kinds"]["COLUMNS"]            #: numbers, not text (``--format parquet``; render_chunk alone)


class Rendered(NamedTuple):
    """What :meth:`Core.render_chunk` made of a chunk of input lines."""

    data: bytes               #: the output of the lines done
    done: int                 #: the lines it covers: all, or those before a -t record that cannot be read
    problem: str | None       #: what is wrong with that record (line ``first_line + done``), or None
    stats: SearchStats        #: the searches it took


class Core(Engine):
    """An open index, as the package's own code uses it.  Use as a context manager (or call
    :meth:`close`).  Opening raises :class:`fastsubs.NotAnIndexError`,
    :class:`fastsubs.IndexVersionError` or :class:`fastsubs.DamagedIndexError`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(os.fspath(path))
        self._excluded: dict[tuple[bytes, ...], bytes] = {}

    def __enter__(self) -> Core:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @cached_property
    def meta(self) -> dict[str, Any]:
        """The msgpack metadata, for people: source model, build details (``fastsubs-index info``)."""
        import msgpack

        meta: dict[str, Any] = msgpack.unpackb(self.metadata())
        return meta

    # ------------------------------------------------------------------ words

    def word_id(self, word: Token) -> int | None:
        """Id of ``word``, or None when it is not in the vocabulary."""
        found = int.from_bytes(self.ids([as_bytes(word)], fmt.NO_WORD), "little")
        return None if found == fmt.NO_WORD else found

    def token_ids(self, tokens: Sequence[bytes]) -> bytes:
        """``tokens`` as word ids (bytes of uint32, as :meth:`search` takes them); unknown
        words are ``<unk>`` or, without it, a word that matches no n-gram."""
        unknown = self.unk_id
        ids: bytes = self.ids(tokens, fmt.NO_WORD if unknown is None else unknown)
        return ids

    def sentence_ids(self, tokens: Sequence[bytes]) -> bytes:
        """``<s> tokens </s>`` as word ids (:meth:`token_ids`)."""
        return self.token_ids([b"<s>", *tokens, b"</s>"])

    def excluded(self, words: tuple[bytes, ...]) -> bytes:
        """The words of ``words`` that can be substitutes, as :meth:`search` takes them: their
        ids, ascending, as bytes of uint32 (words the vocabulary lacks, and ``<s>``, which is
        never a candidate, are left out)."""
        if not words:
            return b""
        packed = self._excluded.get(words)
        if packed is None:
            found = (self.word_id(word) for word in words)
            ids = sorted({i for i in found if i is not None and i != self.bos_id})
            packed = self._excluded[words] = struct.pack(f"<{len(ids)}I", *ids)
        return packed

    def unknown(self, words: tuple[bytes, ...]) -> list[bytes]:
        """The words of ``words`` that are not in the vocabulary (for a warning)."""
        return [word for word in words if self.word_id(word) is None]

    # ------------------------------------------------------------------ searches by id

    def search(self, ids: bytes, first: int, last: int, limits: Limits,
               excluded: bytes = b"", answer: Answer = Answer.ARRAYS) -> list[Any]:
        """Substitutes of positions ``first`` … ``last - 1`` of ``ids`` (:meth:`sentence_ids`),
        each as ``answer`` says (:class:`Answer`; arrays as numpy arrays).

        At most V - 1 substitutes (one word is ``<s>``), as the original, even for a
        model without ``<s>``.  ``excluded`` (from :meth:`excluded`) are no candidates:
        the list is the exact top of the other words, and V counts only those for the -p
        rule and the cap.
        """
        record = Substitute if answer == Answer.SUBSTITUTES else None
        found: list[Any] = super().search(ids, first, last, limits.count, limits.mass, excluded, int(answer), record)
        if answer != Answer.ARRAYS:
            return found
        import numpy as np

        return [(np.frombuffer(words, fmt.ID_DTYPE), np.frombuffer(scores)) for words, scores in found]

    def render(self, ids: bytes, first: int, last: int, limits: Limits, excluded: bytes,
               kind: Render, words: list[bytes], **place: Any) -> bytes:
        """fastsubs-query's output for positions ``first`` … ``last - 1`` of a sentence given as
        ``ids``, ``words`` being the tokens shown for them; ``place``: ``line`` (from 1),
        ``first_position`` (from 0), ``normalize`` (-z), ``name`` and ``id`` (-t), ``draws``
        and ``seed`` (--sample).  Searched and written in C as :meth:`render_chunk` does for
        lines of text (the tests and the bench compare and time the output formats with it)."""
        return super().render(ids, first, last, limits.count, limits.mass, excluded, int(kind), words,
                              **place)

    def render_chunk(self, lines: list[bytes], first_line: int, limits: Limits,
                     excluded: bytes, kind: Render, **options: Any) -> Rendered:
        """fastsubs-query's output for input ``lines`` (numbered from ``first_line``), made in
        C in one call (``kernel/chunk.h``): each line tokenized, searched and written.
        ``options``: ``targets`` (the lines are -t records), ``eos`` (False: --no-eos),
        ``normalize`` (-z), ``draws`` and ``seed`` (--sample).  Stops before a -t record
        that cannot be read (:class:`Rendered`)."""
        data, done, problem, work = super().render_chunk(lines, first_line, limits.count, limits.mass, excluded,
                                                         int(kind), **options)
        return Rendered(data, done, problem, SearchStats(*work))

    # ------------------------------------------------------------------ counting the work

    @property
    def stats(self) -> SearchStats:
        """Totals over every search of this index so far (a snapshot)."""
        return SearchStats(*self.counters()[:4])

    @staticmethod
    def thread_stats() -> SearchStats:
        """Totals over the searches the calling thread has made, on any open index.  Unlike
        :attr:`stats`, the difference of two of these taken by one thread counts that
        thread's work alone, whatever other threads search meanwhile."""
        return SearchStats(*thread_counters())

    def cache_counters(self) -> tuple[int, int]:
        """(pattern look-ups, look-ups that read the index) over every search so far."""
        lookups, misses = self.counters()[4:]
        return lookups, misses


_process_indexes: dict[str, Core] = {}
# One open index per index path per process, shared by its threads: they search it at once
# (each with a searcher of its own, without the GIL) and share its caches.
_process_indexes_lock = threading.Lock()


def process_index(index_path: str) -> Core:
    """The index at ``index_path`` as this process has it open: opened by the first task
    that needs it, kept for every later task and thread (a Dask worker's:
    :mod:`fastsubs.dask`, :mod:`fastsubs.query.cluster`)."""
    with _process_indexes_lock:
        index = _process_indexes.get(index_path)
        if index is None:
            index = _process_indexes[index_path] = Core(index_path)
        return index
