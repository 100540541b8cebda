"""The public Python API: build an index, open it, ask for substitutes.

Example::

    import fastsubs
    fastsubs.build_index("model.arpa.gz", "model.fsidx")
    with fastsubs.open_index("model.fsidx") as index:
        for subs in index.sentence("the cat sat".split(), n=5):
            print([s.word for s in subs])

Words are ``str`` (bytes that are not UTF-8 survive the round trip through
``surrogateescape``).  Substitutes are vocabulary words, always UTF-8 (the indexer
refuses others), so ``Substitute.word`` never holds a lone surrogate; the JSON lines of
``fastsubs-query --format jsonl`` write input text that is not UTF-8 by the rule of
:mod:`fastsubs.jsonl` (read back with :func:`fastsubs.field_bytes`).  Each process opens
its own index; many processes may open the same one.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from fastsubs.query.engine import Engine
from fastsubs.query.options import word_list
from fastsubs.query.search import Limits
from fastsubs.query.sentences import SENTENCE_MARKERS, tokenize

Token = str | bytes


class Substitute(NamedTuple):
    """One substitute: the word, its log10 score lp, and p/Σp over the listed substitutes.

    A named tuple: a corpus run makes one per substitute, and a tuple costs a fraction
    of an object with a dict."""

    word: str
    logprob: float
    probability: float


def _encode(token: Token) -> bytes:
    return token if isinstance(token, bytes) else token.encode("utf-8", "surrogateescape")


class SubstituteIndex:
    """An open index.  Use as a context manager (or call :meth:`close`).

    ``n`` and ``p`` work as the CLI's ``-n``/``-p``: list ``n`` substitutes, or stop
    once they surely hold probability mass ``p``, whichever comes first; neither
    means ``n=100``.  ``exclude`` (words, as ``--exclude``) are never listed: the list
    is the exact top of the other words (and ``p``'s rule counts only those); a word
    the vocabulary lacks is a warning (:class:`UserWarning`), once.  A bad ``n``, ``p``,
    ``exclude`` or position raises :class:`fastsubs.ArgumentError` (a FastsubsError, and
    a ValueError as before).

    >>> with open_index("demo.fsidx") as index:           # doctest: +SKIP
    ...     index.position(["a", "dog", "barks"], 1, n=3)[0].word
    'dog'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._engine = Engine(path)
        self._checked: set[tuple[bytes, ...]] = set()

    @property
    def order(self) -> int:
        """The model's n-gram order."""
        return self._engine.order

    @property
    def vocab_size(self) -> int:
        """Words in the model's vocabulary, ``<s>`` included."""
        return self._engine.vocab_size

    def close(self) -> None:
        self._engine.close()

    def __enter__(self) -> SubstituteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _excluded(self, exclude: Iterable[Token]) -> bytes:
        """``exclude`` as the search takes it; warns of words the vocabulary lacks (once)."""
        words = word_list(exclude)
        if words not in self._checked:
            self._checked.add(words)
            for word in self._engine.unknown(words):
                warnings.warn(f"excluded word {word.decode('utf-8', 'backslashreplace')!r} is not in the "
                              "model's vocabulary", stacklevel=3)
        return self._engine.excluded(words)

    def position(self, tokens: Sequence[Token], position: int, *, n: int | None = None,
                 p: float | None = None, exclude: Iterable[Token] = ()) -> list[Substitute]:
        """Substitutes of ``tokens[position]``; ``position == len(tokens)`` means ``</s>``.

        >>> index.position(["the", "cat", "sat"], 1, n=2)      # doctest: +SKIP
        [Substitute(word='cat', ...), Substitute(word='dog', ...)]
        """
        words = [_encode(t) for t in tokens]
        limits = Limits.from_options(n, p)
        return self._engine.position(words, position, limits, self._excluded(exclude), Substitute)  # type: ignore[no-any-return]

    def sentence(self, tokens: Sequence[Token] | str, *, n: int | None = None,
                 p: float | None = None, exclude: Iterable[Token] = ()) -> list[list[Substitute]]:
        """Substitutes of every token and of the closing ``</s>`` (so ``len(tokens) + 1`` lists).

        A string is split on whitespace; ``<s>``/``</s>`` tokens are dropped.

        >>> [subs[0].word for subs in index.sentence("the cat sat", n=1)]   # doctest: +SKIP
        ['the', 'dog', 'down', '</s>']
        """
        if isinstance(tokens, str):
            words = tokenize(_encode(tokens))
        else:
            words = [w for w in (_encode(t) for t in tokens) if w not in SENTENCE_MARKERS]
        return self._engine.sentence(words, Limits.from_options(n, p), excluded=self._excluded(exclude),
                                     record=Substitute)

    def sentences(self, sentences: Iterable[Sequence[Token] | str], *, n: int | None = None,
                  p: float | None = None, exclude: Iterable[Token] = ()) -> Iterator[list[list[Substitute]]]:
        """:meth:`sentence` for each item, lazily: memory stays bounded for any corpus.

        >>> for subs in index.sentences(open("corpus.txt"), n=10):   # doctest: +SKIP
        ...     ...
        """
        words = word_list(exclude)  # once: ``exclude`` may be an iterator
        for tokens in sentences:
            yield self.sentence(tokens, n=n, p=p, exclude=words)


def open_index(path: str | os.PathLike[str]) -> SubstituteIndex:
    """Open the index at ``path`` read-only (memory-mapped; near-instant for any model size)."""
    return SubstituteIndex(path)
