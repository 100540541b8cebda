"""``--exclude WORD`` and ``--exclude-from FILE``: the words a query run excludes, as the
command line gives them (:attr:`fastsubs.QueryOptions.exclude` takes the result)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from fastsubs.errors import QueryInputError
from fastsubs.pipeline.lines import UTF8_BOM


def read_word_list(path: str | os.PathLike[str]) -> list[str]:
    """The words of ``--exclude-from FILE``: one per line (a UTF-8 byte-order mark at its
    start is not part of the first); blank lines are skipped, a line with two words is an
    error naming it."""
    words: list[str] = []
    with open(path, "rb") as stream:
        for number, line in enumerate(stream, start=1):
            fields = (line.removeprefix(UTF8_BOM) if number == 1 else line).split()
            if len(fields) > 1:
                raise QueryInputError(os.fspath(path), number, f"expected one word, found {len(fields)}")
            words.extend(field.decode("utf-8", "surrogateescape") for field in fields)
    return words


def joined(*lists: Iterable[str]) -> tuple[str, ...]:
    """The words of several lists, each once, in the order first given."""
    return tuple(dict.fromkeys(word for words in lists for word in words))
