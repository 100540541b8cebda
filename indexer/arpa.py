"""Reading ARPA back-off language models: the only code that parses ARPA text.

The reader is tolerant where real toolkits (SRILM, KenLM) disagree and strict where
a model would otherwise be silently misread:

* plain, ``.gz``, ``.bz2`` and ``.xz`` files; fields separated by tabs or any run of
  spaces; free text before ``\\data\\`` (skipped unread, so it may be in any encoding);
  a UTF-8 byte-order mark; Windows line endings; scientific notation.
* the blank line that ends the header and each section may be missing: a line
  starting with ``\\`` ends them too.  Text after ``\\end\\`` is ignored (but a compressed
  file must still decompress to its end: a lost or corrupt end of it is an error).
* counts in the ``\\data\\`` header must match the sections, sections must come in
  order 1..N, every n-gram must have its order's number of words, log-probs must be
  finite and <= 0 (``-99`` for ``<s>`` is fine), back-off weights finite (either sign).
  A back-off weight on the highest order is rejected (it would be silently unused).
* every n-gram and every unigram may be given only once.
* every word of a higher-order n-gram must have a unigram; an n-gram whose lower-order
  prefix is missing is tolerated, as KenLM and SRILM do (its back-off context simply
  has no weight).
* words are bytes; a word that is not valid UTF-8 is rejected, naming the line, and so
  is a word longer than 511 bytes (LMDB's key limit, the vocabulary being keyed by word).

Errors are :class:`fastsubs.errors.ModelFormatError` naming file and line and saying
what was expected there.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from fastsubs.errors import ModelFormatError
from fastsubs.textio import DECOMPRESSION_ERRORS, open_binary

#: Longest word the index can hold: LMDB's maximum key size.
MAX_WORD_BYTES = 511

_BOM = b"\xef\xbb\xbf"


@dataclass
class NgramTable:
    """All n-grams of one order, as parallel arrays (rows in file order)."""

    order: int
    ids: np.ndarray  # int32 [count, order]
    alpha: np.ndarray  # float64 [count]
    beta: np.ndarray  # float64 [count]; 0 where the file gives none
    lines: np.ndarray  # int64 [count]: line number of each row, for error messages


@dataclass
class ArpaModel:
    """A parsed model: the vocabulary (unigram order) and one table per order."""

    path: str
    words: list[bytes]
    tables: list[NgramTable] = field(default_factory=list)  # tables[0] is the unigrams

    @property
    def order(self) -> int:
        return len(self.tables)


class _Lines:
    """Numbered, stripped lines of a model file, with compression errors made readable."""

    def __init__(self, path: str, stream: BinaryIO) -> None:
        self.path = path
        self._stream = stream
        self.number = 0

    def __iter__(self) -> Iterator[bytes]:
        try:
            for raw in self._stream:
                self.number += 1
                yield raw.strip()
        except EOFError as error:
            raise self.error(f"expected more compressed data: the file is truncated ({error})",
                             line=self.number + 1) from None
        except DECOMPRESSION_ERRORS as error:
            kind = os.path.splitext(self.path)[1] or "compressed"
            raise self.error(f"expected {kind} compressed data, found data that is damaged or in another "
                             f"format ({error})", line=self.number + 1) from None

    def error(self, message: str, line: int | None = None) -> ModelFormatError:
        return ModelFormatError(self.path, self.number if line is None else line, message)


@dataclass
class _Header:
    counts: list[int]
    lines: list[int]  # line number of each 'ngram N=count'

    def says(self, order: int) -> str:
        return f"'ngram {order}={self.counts[order - 1]}' on line {self.lines[order - 1]}"


def _is_number(text: bytes) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_number(text: bytes, lines: _Lines, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise lines.error(f"expected a number for the {what}, found {_show(text)}") from None
    if not math.isfinite(value):
        raise lines.error(f"expected a finite {what}, found {_show(text)}")
    return value


def _show(text: bytes) -> str:
    """``text`` quoted for a message: bytes that are not UTF-8 as ``\\xNN``, tabs as ``\\t``."""
    return "'" + text.decode("utf-8", "backslashreplace").replace("\t", "\\t") + "'"


def _ngram_shape(order: int, has_beta: bool) -> str:
    words = "1 word" if order == 1 else f"{order} words"
    optional = ", optional back-off weight" if has_beta else ""
    return f"a {order}-gram (log-prob, {words}{optional})"


def _read_header(lines: _Lines, it: Iterator[bytes]) -> tuple[_Header, bytes | None]:
    """Skip free text up to ``\\data\\`` and read the ``ngram N=count`` lines.

    Returns the header and the line that ended it when that was not a blank line.
    """
    for line in it:
        if lines.number == 1 and line.startswith(_BOM):
            line = line[len(_BOM):].strip()
        if line == b"\\data\\":
            break
    else:
        if lines.number == 0:
            raise lines.error("expected an ARPA model, found an empty file", line=1)
        raise lines.error("expected a \\data\\ line; the file has none (is this an ARPA model?)")
    header = _Header([], [])
    pending = None
    for line in it:
        if not line:
            if header.counts:
                break
            continue
        if line.startswith(b"\\"):
            if not header.counts:
                raise lines.error(f"expected 'ngram 1=count' after \\data\\, found {_show(line)}")
            pending = line
            break
        name, eq, value = line.partition(b"=")
        parts = name.split()
        if not eq or len(parts) != 2 or parts[0] != b"ngram" or not parts[1].isdigit():
            raise lines.error(f"expected 'ngram N=count' in the \\data\\ header, found {_show(line)}")
        expected = len(header.counts) + 1
        if int(parts[1]) != expected:
            raise lines.error(f"expected 'ngram {expected}=count', found {_show(line)}")
        try:
            count = int(value.strip())
        except ValueError:
            raise lines.error(f"expected a whole number of n-grams, found {_show(value.strip())}") from None
        if count < 0:
            raise lines.error(f"expected a non-negative n-gram count, found {count}")
        if expected == 1 and count == 0:
            raise lines.error("expected at least one unigram, found 'ngram 1=0'")
        header.counts.append(count)
        header.lines.append(lines.number)
    if not header.counts:
        raise lines.error("expected 'ngram N=count' lines after \\data\\, found the end of the file")
    return header, pending


def _next_content(lines: _Lines, it: Iterator[bytes], pending: bytes | None, expected: str) -> bytes:
    """The next non-blank line (``pending`` when a section already read it)."""
    if pending is not None:
        return pending
    for line in it:
        if line:
            return line
    raise lines.error(f"expected {expected}, found the end of the file", line=max(lines.number, 1))


def read_arpa(path: str | os.PathLike[str]) -> ArpaModel:
    """Parse the ARPA file at ``path`` completely, or raise ModelFormatError."""
    path = os.fspath(path)
    try:
        stream = open_binary(path)
    except OSError as error:
        raise ModelFormatError(path, None, f"cannot open the model: {error.strerror or error}") from None
    with stream:
        lines = _Lines(path, stream)
        it = iter(lines)
        header, pending = _read_header(lines, it)
        model = ArpaModel(path=path, words=[])
        vocab: dict[bytes, int] = {}
        highest = len(header.counts)
        for order in range(1, highest + 1):
            heading = _next_content(lines, it, pending, f"the \\{order}-grams: section")
            if heading != b"\\%d-grams:" % order:
                raise lines.error(f"expected the \\{order}-grams: section, found {_show(heading)}")
            table, pending = _read_section(lines, it, order, header, vocab, model.words)
            model.tables.append(table)
        end = _next_content(lines, it, pending, f"\\end\\ after the {highest}-grams")
        if end != b"\\end\\":
            raise lines.error(f"expected \\end\\ after the {highest}-grams (the \\data\\ header declares "
                              f"{highest} orders), found {_show(end)}")
        for _ in it:  # ignored, but read: a truncated or corrupt compressed file fails its check
            pass
    return model


def _read_section(
    lines: _Lines, it: Iterator[bytes], order: int, header: _Header,
    vocab: dict[bytes, int], words: list[bytes],
) -> tuple[NgramTable, bytes | None]:
    """Read the entries of one section; unigrams also fill ``vocab``/``words``.

    Returns the table and the line that ended the section when it was not blank.
    """
    count = header.counts[order - 1]
    has_beta = order < len(header.counts)
    ids = array("i")
    alphas = array("d")
    betas = array("d")
    line_numbers = array("q")
    short, long_ = order + 1, order + 2
    found = 0
    pending = None
    ended = "a blank line"
    for line in it:
        if not line:
            break
        if line[:1] == b"\\":
            pending = line
            ended = _show(line)
            break
        if found == count:
            raise lines.error(f"expected only {count} {order}-grams ({header.says(order)}), found more")
        parts = line.split()
        n = len(parts)
        if n == short:
            beta = 0.0
        elif n == long_ and has_beta:
            if not _is_number(parts[-1]):
                raise lines.error(
                    f"expected a number for the back-off weight, found {_show(parts[-1])} "
                    f"(is this a {order + 1}-gram in the \\{order}-grams: section?)")
            beta = _parse_number(parts[-1], lines, "back-off weight")
        elif n == long_ and _is_number(parts[-1]):
            raise lines.error(f"expected no back-off weight on a {order}-gram, found {_show(parts[-1])} "
                              f"({order} is the model's highest order)")
        else:
            raise lines.error(f"expected {_ngram_shape(order, has_beta)}, found {n} field{'s' * (n != 1)}")
        alpha = _parse_number(parts[0], lines, "log-probability")
        if alpha > 0:
            raise lines.error(f"expected a log-probability <= 0, found {_show(parts[0])}")
        if order == 1:
            word = parts[1]
            if word in vocab:
                raise lines.error(f"expected each word to have one unigram, found {_show(word)} again "
                                  f"(first on line {line_numbers[vocab[word]]})")
            try:
                word.decode("utf-8")
            except UnicodeDecodeError:
                raise lines.error(f"expected UTF-8 text, found a word that is not: {_show(word)}") from None
            if len(word) > MAX_WORD_BYTES:
                raise lines.error(f"expected a word of at most {MAX_WORD_BYTES} bytes, "
                                  f"found one of {len(word)} bytes")
            vocab[word] = len(words)
            words.append(word)
            ids.append(vocab[word])
        else:
            for position in range(1, short):
                wid = vocab.get(parts[position])
                if wid is None:
                    raise lines.error(_no_unigram_message(parts, position, order))
                ids.append(wid)
        alphas.append(alpha)
        betas.append(beta)
        line_numbers.append(lines.number)
        found += 1
    else:
        ended = "the end of the file"
    if found != count:
        raise lines.error(f"expected {count} {order}-grams ({header.says(order)}), "
                          f"found only {found} before {ended}")
    table = NgramTable(
        order=order,
        ids=np.frombuffer(ids, dtype=np.int32).reshape(-1, order).copy(),
        alpha=np.frombuffer(alphas, dtype=np.float64).copy(),
        beta=np.frombuffer(betas, dtype=np.float64).copy(),
        lines=np.frombuffer(line_numbers, dtype=np.int64).copy(),
    )
    return table, pending


def _no_unigram_message(parts: list[bytes], position: int, order: int) -> str:
    word = parts[position]
    message = f"expected every word of a {order}-gram to have a unigram, found {_show(word)} that has none"
    if position == len(parts) - 1 and _is_number(word) and order > 1:
        message += f" (is this a {order - 1}-gram with a back-off weight in the \\{order}-grams: section?)"
    return message
