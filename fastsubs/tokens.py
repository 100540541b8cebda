"""Tokens as the index takes them: bytes, split from a line, or given by a user as ``str``.

Input is handled as bytes end to end, so every word is echoed exactly as it was
written (invalid UTF-8 included) and no decoding cost is paid per token; a ``str`` from
the API is encoded with ``surrogateescape``, so bytes that are not UTF-8 survive the
round trip.  Tokens become word ids in the index (:meth:`fastsubs.core.Core.sentence_ids`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fastsubs.errors import ArgumentError

SENTENCE_MARKERS = (b"<s>", b"</s>")

Token = str | bytes


def tokenize(line: bytes) -> list[bytes]:
    """Split on ASCII whitespace and drop ``<s>``/``</s>`` tokens, as the original tool does.
    fastsubs-query splits its lines by this rule in C (``kernel/chunk.c``); a test holds the
    two equal."""
    return [token for token in line.split() if token not in SENTENCE_MARKERS]


def sentence_tokens(sentence: Sequence[Token] | str) -> list[bytes]:
    """The tokens of a sentence given to the API: a string split as :func:`tokenize` splits
    a line, or its tokens as bytes; ``<s>``/``</s>`` tokens dropped either way."""
    if isinstance(sentence, str):
        return tokenize(as_bytes(sentence))
    return [token for token in map(as_bytes, sentence) if token not in SENTENCE_MARKERS]


def as_bytes(token: Token) -> bytes:
    """A token as the index takes it."""
    return token if isinstance(token, bytes) else token.encode("utf-8", "surrogateescape")


def word_list(words: Iterable[Token]) -> tuple[bytes, ...]:
    """``words`` (an ``exclude=`` value) as bytes; ArgumentError for one bare word (a
    string is no list of its characters) or an item that is no word."""
    if isinstance(words, (str, bytes)):
        raise ArgumentError(f"exclude must be a collection of words, not one word: {words!r}")
    listed = tuple(words)
    if not all(isinstance(word, (str, bytes)) for word in listed):
        raise ArgumentError(f"exclude must hold words (str or bytes), got {listed!r}")
    return tuple(as_bytes(word) for word in listed)
