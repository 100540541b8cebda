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


def token_list(tokens: Sequence[Token] | Token) -> list[bytes]:
    """Tokens given to the API: a line (``str`` or ``bytes``, as a binary file gives it) split
    as :func:`tokenize` splits one, or the tokens of a sequence as bytes, as they are.  A line
    is taken whole before it could be taken for a sequence: ``bytes`` is a sequence of
    ints, ``str`` one of characters."""
    if isinstance(tokens, (str, bytes)):
        return tokenize(as_bytes(tokens))
    return [as_bytes(token) for token in tokens]


def sentence_tokens(sentence: Sequence[Token] | Token) -> list[bytes]:
    """The tokens of a sentence given to the API (:func:`token_list`), ``<s>``/``</s>`` dropped."""
    return [token for token in token_list(sentence) if token not in SENTENCE_MARKERS]


def as_bytes(token: Token) -> bytes:
    """A token as the index takes it; ArgumentError for anything but ``str`` and ``bytes``."""
    if isinstance(token, bytes):
        return token
    if not isinstance(token, str):
        raise ArgumentError(f"a token must be str or bytes, not {type(token).__name__}: {token!r}")
    return token.encode("utf-8", "surrogateescape")


def word_list(words: Iterable[Token]) -> tuple[bytes, ...]:
    """``words`` (an ``exclude=`` value) as bytes; ArgumentError for one bare word (a
    string is no list of its characters) or an item that is no word."""
    if isinstance(words, (str, bytes)):
        raise ArgumentError(f"exclude must be a collection of words, not one word: {words!r}")
    listed = tuple(words)
    if not all(isinstance(word, (str, bytes)) for word in listed):
        raise ArgumentError(f"exclude must hold words (str or bytes), got {listed!r}")
    return tuple(as_bytes(word) for word in listed)
