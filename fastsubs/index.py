"""An open index: the one object through which the API, the command line, its workers,
Dask and the tools read an index.

Example::

    import fastsubs
    fastsubs.build_index("model.arpa.gz", "model.fsidx", force=True)
    with fastsubs.open_index("model.fsidx") as index:
        for subs in index.sentence("the cat sat".split(), n=5):
            print([s.word for s in subs])

:class:`SubstituteIndex` *is* the C core's open index (``fastsubs._kernel.Index``, which
opens, maps and checks the index in one call and searches without the GIL), with the
Python API added.  Opening reads nothing in proportion to the model's n-grams: it checks
the header and the whole-vocabulary arrays (start-up grows with the vocabulary alone, a
fraction of a millisecond to a few), and processes that open the same index share one
copy of it in the page cache.  One open index may be used from many threads at once.  ``close()`` is safe
at any moment: later calls raise ValueError, and the map is released once no search
runs.  Open the index in each process that uses it (it must not cross a ``fork``).

Words are ``str`` (bytes that are not UTF-8 survive the round trip through
``surrogateescape``).  Substitutes are vocabulary words, always UTF-8 (the indexer
refuses others), so ``Substitute.word`` never holds a lone surrogate.
"""

from __future__ import annotations

import enum
import numbers
import os
import struct
import warnings
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from fastsubs import format as fmt
from fastsubs._kernel import Index, thread_counters
from fastsubs.errors import ArgumentError
from fastsubs.limits import Limits
from fastsubs.stats import SearchStats
from fastsubs.tokens import Token, as_bytes, sentence_tokens, word_list

if TYPE_CHECKING:
    import numpy as np


class Substitute(NamedTuple):
    """One substitute: the word, its log10 score lp, and p/Σp over the listed substitutes."""

    word: str
    logprob: float
    probability: float


class Batch(NamedTuple):
    """The substitutes of many sentences as arrays (:meth:`SubstituteIndex.batch`).

    Position i (counted over all the sentences, each its tokens then ``</s>``) lists
    ``ids[positions[i]:positions[i + 1]]`` with their log10 scores in ``scores``, best first;
    sentence j is positions ``sentences[j]`` … ``sentences[j + 1] - 1``.  Map ids to words
    with :meth:`SubstituteIndex.words`.
    """

    ids: np.ndarray           #: uint32, the substitutes' word ids
    scores: np.ndarray        #: float64, their log10 scores lp
    positions: np.ndarray     #: int64, where each position's substitutes begin (one more at the end)
    sentences: np.ndarray     #: int64, where each sentence's positions begin (one more at the end)


class Answer(enum.IntEnum):
    """What :meth:`SubstituteIndex.search` gives for each position."""

    ARRAYS = 0                #: (word ids, float64 scores), best first
    SUBSTITUTES = 1           #: a list of :class:`Substitute`


class Render(enum.IntEnum):
    """How :meth:`SubstituteIndex.render` writes each position (``kernel/render.h``)."""

    LINE = 0                  #: ``word<TAB>fields``: fastsubs-query's text
    FIELDS = 1                #: the fields alone (render_chunk writes each -t record before them)
    JSON = 2                  #: a JSON object (``--format jsonl``)
    SAMPLE_LINES = 3          #: ``word<TAB>sub`` per draw (``--sample``)
    SAMPLE_JSON = 4           #: a JSON object listing the draws (``--sample --format jsonl``)
    COLUMNS = 5               #: numbers, not text (``--format parquet``; render_chunk alone)


class Rendered(NamedTuple):
    """What :meth:`SubstituteIndex.render_chunk` made of a chunk of input lines."""

    data: bytes               #: the output of the lines done
    done: int                 #: the lines it covers: all, or those before a -t record that cannot be read
    problem: str | None       #: what is wrong with that record (line ``first_line + done``), or None
    stats: SearchStats        #: the searches it took


class SubstituteIndex(Index):
    """An open index.  Use as a context manager (or call :meth:`close`).

    ``n`` and ``p`` work as the CLI's ``-n``/``-p``: list ``n`` substitutes, or stop once
    the listed ones would hold share ``p`` of the probability mass even if every word
    not listed were as likely as the last one listed (the original tool's rule, which
    lists many more than the fewest words holding ``p``: :class:`fastsubs.limits.Limits`),
    whichever comes first; neither means ``n=100``.  ``exclude`` (words, as ``--exclude``) are never listed: the list
    is the exact top of the other words (and ``p``'s rule counts only those); a word
    the vocabulary lacks is a warning (:class:`UserWarning`), once.  A bad ``n``, ``p``,
    ``exclude`` or position raises :class:`fastsubs.ArgumentError` (a FastsubsError, and
    a ValueError).  Opening raises :class:`fastsubs.NotAnIndexError`,
    :class:`fastsubs.IndexVersionError` or :class:`fastsubs.DamagedIndexError`.

    >>> with open_index("demo.fsidx") as index:           # doctest: +SKIP
    ...     index.position(["a", "dog", "barks"], 1, n=3)[0].word
    'dog'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(os.fspath(path))
        self._excluded: dict[tuple[bytes, ...], bytes] = {}
        self._warned: set[tuple[bytes, ...]] = set()
        self._words: list[str] | None = None
        self._arrow_vocabulary: Any = None

    def __enter__(self) -> SubstituteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @cached_property
    def meta(self) -> dict[str, Any]:
        """The msgpack metadata, for people: source model, build details (``fastsubs-index info``)."""
        import msgpack

        return msgpack.unpackb(self.metadata())  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ words

    def word_id(self, word: Token) -> int | None:
        """Id of ``word``, or None when it is not in the vocabulary."""
        found = int.from_bytes(self.ids([as_bytes(word)], fmt.NO_WORD), "little")
        return None if found == fmt.NO_WORD else found

    def sentence_ids(self, tokens: Sequence[bytes]) -> bytes:
        """``<s> tokens </s>`` as word ids (bytes of uint32, as :meth:`search` takes them);
        unknown words are ``<unk>`` or, without it, a word that matches no n-gram."""
        unknown = self.unk_id
        return self.ids([b"<s>", *tokens, b"</s>"], fmt.NO_WORD if unknown is None else unknown)  # type: ignore

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

    def search(self, ids: bytes, first: int, last: int, limits: Limits,  # type: ignore[override]
               excluded: bytes = b"", answer: Answer = Answer.ARRAYS) -> list[Any]:
        """Substitutes of positions ``first`` … ``last - 1`` of ``ids`` (:meth:`sentence_ids`),
        each as ``answer`` says (:class:`Answer`; arrays as numpy arrays).

        At most V - 1 substitutes (one word is ``<s>``), as the original, even for a
        model without ``<s>``.  ``excluded`` (from :meth:`excluded`) are no candidates:
        the list is the exact top of the other words, and V counts only those for the -p
        rule and the cap.
        """
        record = Substitute if answer == Answer.SUBSTITUTES else None
        found = super().search(ids, first, last, limits.count, limits.mass, excluded, int(answer), record)
        if answer != Answer.ARRAYS:
            return found  # type: ignore[no-any-return]
        import numpy as np

        return [(np.frombuffer(words, fmt.ID_DTYPE), np.frombuffer(scores)) for words, scores in found]

    def render(self, ids: bytes, first: int, last: int, limits: Limits, excluded: bytes,  # type: ignore[override]
               kind: Render, words: list[bytes], **place: Any) -> bytes:
        """fastsubs-query's output for positions ``first`` … ``last - 1`` of a sentence given as
        ``ids``, ``words`` being the tokens shown for them; ``place``: ``line`` (from 1),
        ``first_position`` (from 0), ``normalize`` (-z), ``name`` and ``id`` (-t), ``draws``
        and ``seed`` (--sample).  Searched and written in C as :meth:`render_chunk` does for
        lines of text (the tests and the bench compare and time the output formats with it)."""
        return super().render(ids, first, last, limits.count, limits.mass, excluded, int(kind), words,  # type: ignore
                              **place)

    def render_chunk(self, lines: list[bytes], first_line: int, limits: Limits,  # type: ignore[override]
                     excluded: bytes, kind: Render, **options: Any) -> Rendered:
        """fastsubs-query's output for input ``lines`` (numbered from ``first_line``), made in
        C in one call (``kernel/chunk.h``): each line tokenized, searched and written.
        ``options``: ``targets`` (the lines are -t records), ``eos`` (False: --no-eos),
        ``normalize`` (-z), ``draws`` and ``seed`` (--sample).  Stops before a -t record
        that cannot be read (:class:`Rendered`)."""
        data, done, problem, work = super().render_chunk(lines, first_line, limits.count, limits.mass, excluded,
                                                         int(kind), **options)
        return Rendered(data, done, problem, SearchStats(*work))

    # ------------------------------------------------------------------ the API

    def position(self, tokens: Sequence[Token], position: int, *, n: int | None = None,
                 p: float | None = None, exclude: Iterable[Token] = ()) -> list[Substitute]:
        """Substitutes of ``tokens[position]``; ``position == len(tokens)`` means ``</s>``.

        >>> index.position(["the", "cat", "sat"], 1, n=2)      # doctest: +SKIP
        [Substitute(word='cat', ...), Substitute(word='dog', ...)]
        """
        words = [as_bytes(t) for t in tokens]
        if isinstance(position, bool) or not isinstance(position, numbers.Integral) \
                or not 0 <= position <= len(words):
            raise ArgumentError(f"position {position!r} is not a whole number within 0 … {len(words)}")
        target = int(position) + 1
        return self.search(self.sentence_ids(words), target, target + 1, Limits.from_options(n, p),
                           self._checked_exclusion(exclude), Answer.SUBSTITUTES)[0]  # type: ignore[no-any-return]

    def sentence(self, tokens: Sequence[Token] | str, *, n: int | None = None,
                 p: float | None = None, exclude: Iterable[Token] = ()) -> list[list[Substitute]]:
        """Substitutes of every token and of the closing ``</s>`` (so ``len(tokens) + 1`` lists).

        A string is split on whitespace; ``<s>``/``</s>`` tokens are dropped.

        >>> [subs[0].word for subs in index.sentence("the cat sat", n=1)]   # doctest: +SKIP
        ['the', 'dog', 'down', '</s>']
        """
        words = sentence_tokens(tokens)
        return self.search(self.sentence_ids(words), 1, len(words) + 2, Limits.from_options(n, p),
                           self._checked_exclusion(exclude), Answer.SUBSTITUTES)

    def batch(self, sentences: Iterable[Sequence[Token] | str], *, n: int | None = None, p: float | None = None,
              exclude: Iterable[Token] = (), eos: bool = True) -> Batch:
        """The substitutes of every position of ``sentences`` as numpy arrays (:class:`Batch`):
        for pipelines that want numbers, not objects.  The whole batch is searched in one
        release of the GIL, so threads sharing one open index search at once; no Python
        object is made per substitute.  A string is split on whitespace; ``<s>``/``</s>``
        tokens are dropped; ``eos=False`` leaves out the ``</s>`` positions.

        >>> found = index.batch(["the cat sat", "a dog"], n=10)    # doctest: +SKIP
        >>> words = index.words()
        >>> [words[i] for i in found.ids[found.positions[0]:found.positions[1]]]   # doctest: +SKIP
        ['the', 'a', ...]
        """
        import numpy as np

        limits = Limits.from_options(n, p)
        excluded = self._checked_exclusion(exclude)
        tokens: list[bytes] = []
        starts = [0]
        for sentence in sentences:
            tokens += [b"<s>", *sentence_tokens(sentence), b"</s>"]
            starts.append(len(tokens))
        unknown = self.unk_id
        ids = self.ids(tokens, fmt.NO_WORD if unknown is None else unknown)
        sentence_starts = np.array(starts, dtype=np.int64)
        words, scores, offsets = self.search_batch(ids, sentence_starts.tobytes(), limits.count, limits.mass,
                                                   excluded, eos)
        per_sentence = np.diff(sentence_starts) - (1 if eos else 2)
        return Batch(np.frombuffer(words, fmt.ID_DTYPE), np.frombuffer(scores), np.frombuffer(offsets, np.int64),
                     np.concatenate(([0], np.cumsum(per_sentence))).astype(np.int64))

    def words(self) -> list[str]:
        """Every word of the vocabulary, by id (made once, then kept): maps a :class:`Batch`'s ids."""
        if self._words is None:
            self._words = [self.word(i).decode("utf-8", "surrogateescape") for i in range(self.vocab_size)]
        return self._words

    def arrow_vocabulary(self) -> Any:
        """The words by id as Arrow's string columns are gathered from
        (:class:`fastsubs.parquet.Vocabulary`; made once per open index)."""
        if self._arrow_vocabulary is None:
            from fastsubs.parquet import Vocabulary

            self._arrow_vocabulary = Vocabulary(self)
        return self._arrow_vocabulary

    def table(self, sentences: Iterable[Sequence[Token] | str | bytes], options: Any = None, **fields: Any) -> Any:
        """The rows ``--format parquet`` writes for ``sentences`` (or ``-t`` records, with
        ``targets=True``), as a ``pyarrow.Table``: no file, no text in between
        (:mod:`fastsubs.arrow`).  ``options``: a :class:`fastsubs.QueryOptions`, or its
        fields by name (``n=10, normalize=True``).

        >>> index.table(["the cat sat"], n=10).column("substitutes")   # doctest: +SKIP
        """
        from fastsubs import arrow

        return arrow.table(self, sentences, options, **fields)

    def frame(self, sentences: Iterable[Sequence[Token] | str | bytes], options: Any = None, **fields: Any) -> Any:
        """:meth:`table` as a pandas DataFrame of Arrow-backed columns."""
        from fastsubs import arrow

        return arrow.frame(self, sentences, options, **fields)

    def sentences(self, sentences: Iterable[Sequence[Token] | str], *, n: int | None = None,
                  p: float | None = None, exclude: Iterable[Token] = ()) -> Iterator[list[list[Substitute]]]:
        """:meth:`sentence` for each item, lazily: memory stays bounded for any corpus.

        >>> for subs in index.sentences(open("corpus.txt"), n=10):   # doctest: +SKIP
        ...     ...
        """
        words = word_list(exclude)  # once: ``exclude`` may be an iterator
        for tokens in sentences:
            yield self.sentence(tokens, n=n, p=p, exclude=words)

    def _checked_exclusion(self, exclude: Iterable[Token]) -> bytes:
        """``exclude`` as :meth:`search` takes it; warns of words the vocabulary lacks (once)."""
        words = word_list(exclude)
        if words not in self._warned:
            self._warned.add(words)
            for word in self.unknown(words):
                warnings.warn(f"excluded word {word.decode('utf-8', 'backslashreplace')!r} is not in the "
                              "model's vocabulary", stacklevel=3)
        return self.excluded(words)

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


def open_index(path: str | os.PathLike[str]) -> SubstituteIndex:
    """Open the index at ``path`` read-only (memory-mapped; it checks the vocabulary's arrays,
    nothing in proportion to the n-grams)."""
    return SubstituteIndex(path)

