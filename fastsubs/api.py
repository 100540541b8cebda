"""The public Python API: build an index, open it, ask for substitutes.

Example::

    import fastsubs
    fastsubs.build_index("model.arpa.gz", "model.fsidx")
    with fastsubs.open_index("model.fsidx") as index:
        for subs in index.sentence("the cat sat".split(), n=5):
            print([s.word for s in subs])

Words are ``str`` (bytes that are not UTF-8 survive the round trip through
``surrogateescape``).  Each process opens its own index; many processes may open the
same one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from fastsubs.query.engine import Engine, Ranked
from fastsubs.query.output import normalized
from fastsubs.query.search import Limits
from fastsubs.query.sentences import SENTENCE_MARKERS, tokenize

Token = str | bytes


@dataclass(frozen=True)
class Substitute:
    """One substitute: the word, its log10 score lp, and p/Σp over the listed substitutes."""

    word: str
    logprob: float
    probability: float


def _encode(token: Token) -> bytes:
    return token if isinstance(token, bytes) else token.encode("utf-8", "surrogateescape")


class SubstituteIndex:
    """An open index.  Use as a context manager (or call :meth:`close`).

    ``n`` and ``p`` work as the CLI's ``-n``/``-p``: list ``n`` substitutes, or stop
    once they surely hold probability mass ``p``, whichever comes first; neither
    means ``n=100``.  A bad ``n``, ``p`` or position raises :class:`fastsubs.ArgumentError`
    (a FastsubsError, and a ValueError as before).

    >>> with open_index("demo.fsidx") as index:           # doctest: +SKIP
    ...     index.position(["a", "dog", "barks"], 1, n=3)[0].word
    'dog'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._engine = Engine(path)

    @property
    def order(self) -> int:
        """The model's n-gram order."""
        return self._engine.index.order

    @property
    def vocab_size(self) -> int:
        """Words in the model's vocabulary, ``<s>`` included."""
        return self._engine.index.vocab_size

    def close(self) -> None:
        self._engine.close()

    def __enter__(self) -> SubstituteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _substitutes(self, ranked: Ranked) -> list[Substitute]:
        ids, scores = ranked
        probabilities = normalized(scores)
        word = self._engine.vocabulary.word
        return [Substitute(word(i).decode("utf-8", "surrogateescape"), lp, p)
                for i, lp, p in zip(ids.tolist(), scores.tolist(), probabilities.tolist())]

    def position(self, tokens: Sequence[Token], position: int, *, n: int | None = None,
                 p: float | None = None) -> list[Substitute]:
        """Substitutes of ``tokens[position]``; ``position == len(tokens)`` means ``</s>``.

        >>> index.position(["the", "cat", "sat"], 1, n=2)      # doctest: +SKIP
        [Substitute(word='cat', ...), Substitute(word='dog', ...)]
        """
        words = [_encode(t) for t in tokens]
        return self._substitutes(self._engine.position(words, position, Limits.from_options(n, p)))

    def sentence(self, tokens: Sequence[Token] | str, *, n: int | None = None,
                 p: float | None = None) -> list[list[Substitute]]:
        """Substitutes of every token and of the closing ``</s>`` (so ``len(tokens) + 1`` lists).

        A string is split on whitespace; ``<s>``/``</s>`` tokens are dropped.

        >>> [subs[0].word for subs in index.sentence("the cat sat", n=1)]   # doctest: +SKIP
        ['the', 'dog', 'down', '</s>']
        """
        if isinstance(tokens, str):
            words = tokenize(_encode(tokens))
        else:
            words = [w for w in (_encode(t) for t in tokens) if w not in SENTENCE_MARKERS]
        return [self._substitutes(r) for r in self._engine.sentence(words, Limits.from_options(n, p))]

    def sentences(self, sentences: Iterable[Sequence[Token] | str], *, n: int | None = None,
                  p: float | None = None) -> Iterator[list[list[Substitute]]]:
        """:meth:`sentence` for each item, lazily: memory stays bounded for any corpus.

        >>> for subs in index.sentences(open("corpus.txt"), n=10):   # doctest: +SKIP
        ...     ...
        """
        for tokens in sentences:
            yield self.sentence(tokens, n=n, p=p)


def open_index(path: str | os.PathLike[str]) -> SubstituteIndex:
    """Open the index at ``path`` read-only (memory-mapped; near-instant for any model size)."""
    return SubstituteIndex(path)
