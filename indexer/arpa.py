"""Reading ARPA back-off language models: the only code that parses ARPA text.

The reader is tolerant where real toolkits (SRILM, KenLM) disagree and strict where
a model would otherwise be silently misread:

* plain, ``.gz``, ``.bz2`` and ``.xz`` files; fields separated by tabs or any run of
  spaces; free text before ``\\data\\``; Windows line endings; scientific notation.
* counts in the ``\\data\\`` header must match the sections, sections must come in
  order 1..N, every n-gram must have its order's number of words, log-probs must be
  finite and <= 0 (``-99`` for ``<s>`` is fine), back-off weights finite (either sign).
* every word of a higher-order n-gram must have a unigram; an n-gram whose lower-order
  prefix is missing is tolerated, as KenLM and SRILM do (its back-off context simply
  has no weight).
* words are bytes; a file that is not UTF-8 is rejected, naming the line.

Errors are :class:`fastsubs.errors.ModelFormatError` naming file and line.
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
        except DECOMPRESSION_ERRORS as error:
            raise self.error(f"file is truncated or not valid compressed data ({error})") from None

    def error(self, message: str, line: int | None = None) -> ModelFormatError:
        return ModelFormatError(self.path, self.number if line is None else line, message)


def _parse_number(text: bytes, lines: _Lines, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise lines.error(f"expected a number for the {what}, found {_show(text)}") from None
    if not math.isfinite(value):
        raise lines.error(f"expected a finite {what}, found {_show(text)}")
    return value


def _show(text: bytes) -> str:
    return repr(text.decode("utf-8", "backslashreplace"))


def _read_header(lines: _Lines, it: Iterator[bytes]) -> list[int]:
    """Skip free text up to ``\\data\\`` and read the ``ngram N=count`` lines."""
    for line in it:
        if line == b"\\data\\":
            break
    else:
        raise lines.error("expected a \\data\\ line; the file has none (is this an ARPA model?)")
    counts: list[int] = []
    for line in it:
        if not line:
            if counts:
                break
            continue
        if line.startswith(b"\\"):
            raise lines.error("expected a blank line after the 'ngram N=count' header lines")
        name, eq, value = line.partition(b"=")
        parts = name.split()
        if not eq or len(parts) != 2 or parts[0] != b"ngram" or not parts[1].isdigit():
            raise lines.error(f"expected 'ngram N=count' in the \\data\\ header, found {_show(line)}")
        if int(parts[1]) != len(counts) + 1:
            raise lines.error(f"expected 'ngram {len(counts) + 1}=count', found {_show(line)}")
        try:
            count = int(value.strip())
        except ValueError:
            raise lines.error(f"expected a whole number of n-grams, found {_show(value)}") from None
        if count < 0:
            raise lines.error(f"expected a non-negative n-gram count, found {count}")
        counts.append(count)
    if not counts:
        raise lines.error("expected 'ngram N=count' lines after \\data\\, found none")
    if counts[0] == 0:
        raise lines.error("expected at least one unigram ('ngram 1=' is 0)")
    return counts


def _next_content(lines: _Lines, it: Iterator[bytes], expected: str) -> bytes:
    for line in it:
        if line:
            return line
    raise lines.error(f"expected {expected}, found the end of the file")


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
        counts = _read_header(lines, it)
        model = ArpaModel(path=path, words=[])
        vocab: dict[bytes, int] = {}
        for order, count in enumerate(counts, start=1):
            heading = _next_content(lines, it, f"the \\{order}-grams: section")
            if heading != b"\\%d-grams:" % order:
                raise lines.error(f"expected the \\{order}-grams: section, found {_show(heading)}")
            has_beta = order < len(counts)
            model.tables.append(_read_section(lines, it, order, count, has_beta, vocab, model.words))
        end = _next_content(lines, it, "\\end\\")
        if end != b"\\end\\":
            raise lines.error(f"expected \\end\\ after the {len(counts)}-grams, found {_show(end)}")
    return model


def _read_section(
    lines: _Lines, it: Iterator[bytes], order: int, count: int, has_beta: bool,
    vocab: dict[bytes, int], words: list[bytes],
) -> NgramTable:
    """Read the ``count`` entries of one section; unigrams also fill ``vocab``/``words``."""
    ids = array("i")
    alphas = array("d")
    betas = array("d")
    line_numbers = array("q")
    short, long_ = order + 1, order + 2
    for line in it:
        if not line:
            break
        if line.startswith(b"\\"):
            raise lines.error(
                f"expected {count} {order}-grams (from the \\data\\ header), found {len(alphas)} "
                f"before {_show(line)}")
        parts = line.split()
        n = len(parts)
        if n == short:
            beta = 0.0
        elif n == long_ and has_beta:
            beta = _parse_number(parts[-1], lines, "back-off weight")
        else:
            want = f"{short} or {long_}" if has_beta else f"{short}"
            raise lines.error(
                f"expected {want} fields for a {order}-gram (log-prob, {order} words"
                f"{', optional back-off' if has_beta else ''}), found {n}")
        alpha = _parse_number(parts[0], lines, "log-probability")
        if alpha > 0:
            raise lines.error(f"expected a log-probability <= 0, found {_show(parts[0])}")
        if order == 1:
            word = parts[1]
            if word in vocab:
                raise lines.error(f"duplicate unigram {_show(word)}")
            try:
                word.decode("utf-8")
            except UnicodeDecodeError:
                raise lines.error("expected UTF-8 text; this word is not valid UTF-8") from None
            vocab[word] = len(words)
            words.append(word)
            ids.append(vocab[word])
        else:
            for word in parts[1:order + 1]:
                wid = vocab.get(word)
                if wid is None:
                    raise lines.error(f"word {_show(word)} of this {order}-gram has no unigram")
                ids.append(wid)
        alphas.append(alpha)
        betas.append(beta)
        line_numbers.append(lines.number)
    else:
        if len(alphas) < count:
            raise lines.error(f"expected {count} {order}-grams, found the end of the file after {len(alphas)}")
    if len(alphas) != count:
        raise lines.error(
            f"expected {count} {order}-grams (from the \\data\\ header), found {len(alphas)}",
            line=lines.number)
    return NgramTable(
        order=order,
        ids=np.frombuffer(ids, dtype=np.int32).reshape(-1, order).copy(),
        alpha=np.frombuffer(alphas, dtype=np.float64).copy(),
        beta=np.frombuffer(betas, dtype=np.float64).copy(),
        lines=np.frombuffer(line_numbers, dtype=np.int64).copy(),
    )
