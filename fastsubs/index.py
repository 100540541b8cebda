"""An open index, as the Python API shows it (docs/api.md).

Example::

    import fastsubs
    fastsubs.build_index("model.arpa.gz", "model.fsidx", force=True)
    with fastsubs.open_index("model.fsidx") as index:
        for subs in index.sentence("the cat sat".split(), n=5):
            print([s.word for s in subs])

:class:`SubstituteIndex` holds the C core's open index (:class:`fastsubs.core.Core`,
which opens, maps and checks the index in one call and searches without the GIL) and
shows what docs/api.md documents, and nothing more (tests/test_api_surface.py compares
them): the core's own methods stay the package's.  Each call is one call into the core,
for any number of positions.  Opening reads nothing in proportion to the model's n-grams:
it checks the header and the whole-vocabulary arrays (start-up grows with the vocabulary
alone, a fraction of a millisecond to a few), and processes that open the same index
share one copy of it in the page cache.  One open index may be used from many threads at
once.  ``close()`` is safe at any moment: later calls raise ValueError, and the map is
released once no search runs.  Open the index in each process that uses it (it must not
cross a ``fork``).

Words are ``str`` (bytes that are not UTF-8 survive the round trip through
``surrogateescape``).  Substitutes are vocabulary words, always UTF-8 (the indexer
refuses others), so ``Substitute.word`` never holds a lone surrogate.
"""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from fastsubs import format as fmt
from fastsubs.core import Answer, Core, Substitute
from fastsubs.errors import ArgumentError
from fastsubs.limits import Limits
from fastsubs.tokens import Token, sentence_tokens, token_list, word_list

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Batch", "Substitute", "SubstituteIndex", "open_index"]


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


class SubstituteIndex:
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
        self._core = Core(path)
        self._warned: set[tuple[bytes, ...]] = set()
        self._words: list[str] | None = None

    def __enter__(self) -> SubstituteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the index: later calls raise ValueError; searches already running finish first."""
        self._core.close()

    @property
    def order(self) -> int:
        """The model's n-gram order."""
        order: int = self._core.order
        return order

    @property
    def vocab_size(self) -> int:
        """Words in the model's vocabulary, ``<s>`` included."""
        size: int = self._core.vocab_size
        return size

    # ------------------------------------------------------------------ the API

    def position(self, tokens: Sequence[Token] | Token, position: int, *, n: int | None = None,
                 p: float | None = None, exclude: Iterable[Token] = ()) -> list[Substitute]:
        """Substitutes of ``tokens[position]``; ``position == len(tokens)`` means ``</s>``.
        A line (``str`` or ``bytes``) is split on whitespace, ``<s>``/``</s>`` dropped, as
        :meth:`sentence` splits it; a sequence's tokens are taken as they are.

        >>> index.position(["the", "cat", "sat"], 1, n=2)      # doctest: +SKIP
        [Substitute(word='cat', ...), Substitute(word='dog', ...)]
        """
        words = token_list(tokens)
        if isinstance(position, bool) or not isinstance(position, numbers.Integral) \
                or not 0 <= position <= len(words):
            raise ArgumentError(f"position {position!r} is not a whole number within 0 … {len(words)}")
        target = int(position) + 1
        return self._search(words, target, target + 1, Limits.from_options(n, p), self._checked_exclusion(exclude))[0]

    def sentence(self, tokens: Sequence[Token] | Token, *, n: int | None = None,
                 p: float | None = None, exclude: Iterable[Token] = ()) -> list[list[Substitute]]:
        """Substitutes of every token and of the closing ``</s>`` (so ``len(tokens) + 1`` lists).

        A line (``str``, or ``bytes`` as a binary file gives it) is split on whitespace;
        ``<s>``/``</s>`` tokens are dropped.

        >>> [subs[0].word for subs in index.sentence("the cat sat", n=1)]   # doctest: +SKIP
        ['the', 'dog', 'down', '</s>']
        """
        words = sentence_tokens(tokens)
        return self._search(words, 1, len(words) + 2, Limits.from_options(n, p), self._checked_exclusion(exclude))

    def batch(self, sentences: Iterable[Sequence[Token] | Token], *, n: int | None = None, p: float | None = None,
              exclude: Iterable[Token] = (), eos: bool = True) -> Batch:
        """The substitutes of every position of ``sentences`` as numpy arrays (:class:`Batch`):
        for pipelines that want numbers, not objects.  The whole batch is searched in one
        release of the GIL, so threads sharing one open index search at once; no Python
        object is made per substitute.  A line (``str`` or ``bytes``) is split on whitespace;
        ``<s>``/``</s>`` tokens are dropped; ``eos=False`` leaves out the ``</s>`` positions.

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
        core = self._core
        ids = core.token_ids(tokens)
        sentence_starts = np.array(starts, dtype=np.int64)
        words, scores, offsets = core.search_batch(ids, sentence_starts.tobytes(), limits.count, limits.mass,
                                                   excluded, eos)
        per_sentence = np.diff(sentence_starts) - (1 if eos else 2)
        return Batch(np.frombuffer(words, fmt.ID_DTYPE), np.frombuffer(scores), np.frombuffer(offsets, np.int64),
                     np.concatenate(([0], np.cumsum(per_sentence))).astype(np.int64))

    def words(self) -> list[str]:
        """Every word of the vocabulary, by id (made once, then kept): maps a :class:`Batch`'s ids."""
        if self._words is None:
            word = self._core.word
            self._words = [word(i).decode("utf-8", "surrogateescape") for i in range(self.vocab_size)]
        return self._words

    def table(self, sentences: Iterable[Sequence[Token] | str | bytes], options: Any = None, **fields: Any) -> Any:
        """The rows ``--format parquet`` writes for ``sentences`` (or ``-t`` records, with
        ``targets=True``), as a ``pyarrow.Table``: no file, no text in between
        (:mod:`fastsubs.pipeline.arrow`).  ``options``: a :class:`fastsubs.QueryOptions`, or its
        fields by name (``n=10, normalize=True``).

        >>> index.table(["the cat sat"], n=10).column("substitutes")   # doctest: +SKIP
        """
        from fastsubs.pipeline import arrow

        return arrow.table(self._core, sentences, arrow.options_of(options, fields), "index.table()")

    def frame(self, sentences: Iterable[Sequence[Token] | str | bytes], options: Any = None, **fields: Any) -> Any:
        """:meth:`table` as a pandas DataFrame of Arrow-backed columns."""
        from fastsubs.pipeline import arrow

        return arrow.frame(self._core, sentences, arrow.options_of(options, fields), "index.frame()")

    def sentences(self, sentences: Iterable[Sequence[Token] | Token], *, n: int | None = None,
                  p: float | None = None, exclude: Iterable[Token] = ()) -> Iterator[list[list[Substitute]]]:
        """:meth:`sentence` for each item, lazily: memory stays bounded for any corpus.

        >>> for subs in index.sentences(open("corpus.txt"), n=10):   # doctest: +SKIP
        ...     ...
        """
        words = word_list(exclude)  # once: ``exclude`` may be an iterator
        for tokens in sentences:
            yield self.sentence(tokens, n=n, p=p, exclude=words)

    def _checked_exclusion(self, exclude: Iterable[Token]) -> bytes:
        """``exclude`` as the core's searches take it; warns of words the vocabulary lacks
        (once), at the caller of the public method."""
        words = word_list(exclude)
        if words not in self._warned:
            self._warned.add(words)
            for word in self._core.unknown(words):
                warnings.warn(f"excluded word {word.decode('utf-8', 'backslashreplace')!r} is not in the "
                              "model's vocabulary", stacklevel=3)
        return self._core.excluded(words)

    def _search(self, words: list[bytes], first: int, last: int, limits: Limits,
                excluded: bytes) -> list[list[Substitute]]:
        """The substitutes of positions ``first`` … ``last - 1`` of ``<s> words </s>``, in one call into the core."""
        core = self._core
        found: list[list[Substitute]] = core.search(core.sentence_ids(words), first, last, limits, excluded,
                                                    Answer.SUBSTITUTES)
        return found


def open_index(path: str | os.PathLike[str]) -> SubstituteIndex:
    """Open the index at ``path`` read-only (memory-mapped; it checks the vocabulary's arrays,
    nothing in proportion to the n-grams)."""
    return SubstituteIndex(path)

