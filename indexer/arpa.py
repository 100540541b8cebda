"""Reading ARPA back-off language models: the only code that parses ARPA text.

The reader is tolerant where real toolkits (SRILM, KenLM) disagree and strict where
a model would otherwise be silently misread:

* plain, ``.gz``, ``.bz2`` and ``.xz`` files; fields separated by tabs or any run of
  spaces; free text before ``\\data\\`` (skipped unread, so it may be in any encoding);
  a UTF-8 byte-order mark; Windows line endings; numbers as C's ``strtod`` reads them
  (scientific notation, a sign, hexadecimal): ``-1_0``, which Python's ``float()`` reads
  as -10 and KenLM and SRILM refuse, is an error.
* the blank line that ends the header and each section may be missing: a line
  starting with ``\\`` ends them too.  Text after ``\\end\\`` is ignored (but a compressed
  file must still decompress to its end: a lost or corrupt end of it is an error).
* counts in the ``\\data\\`` header must match the sections, sections must come in
  order 1..N, every n-gram must have its order's number of words, log-probs must be
  <= 0 and finite or ``-inf`` (log10 of 0, as KenLM writes and reads it, e.g. on ``<s>``;
  ``-99`` is fine too), back-off weights finite (either sign), and every number must fit
  a 32-bit float (the index stores float32; ``-1e39`` is refused, not read as ``-inf``).
  A back-off weight on the highest order is rejected (it would be silently unused),
  unless it is 0 (or -0): the no-op KenLM's ``build_binary`` accepts there too.
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

import contextlib
import io
import itertools
import math
import os
from array import array
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from fastsubs.errors import ModelFormatError
from fastsubs.indexer._native import Vocabulary, read_number
from fastsubs.pipeline.textio import DECOMPRESSION_ERRORS, DigestingReader, open_binary

#: Largest magnitude a score may have: the index stores float32.
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: Longest word the index can hold: LMDB's maximum key size.
MAX_WORD_BYTES = 511

_BOM = b"\xef\xbb\xbf"


#: Lines parsed at once by the bulk parser: bounds its arrays, and the Python objects
#: (~6 a line) of the lines taken one by one where a section ends.
BATCH_LINES = 1 << 17
#: Decompressed bytes read at once (in the stream's own small reads, see :class:`_Lines`).
READ_BYTES = 1 << 23


@dataclass
class NgramTable:
    """N-grams of one order (all of them, or a chunk), as parallel arrays (rows in file order).

    Scores are float64 for unigrams (the metadata keeps their full precision) and
    float32 for higher orders: what the index stores, at half the memory.
    """

    order: int
    ids: np.ndarray  # int32 [count, order]
    alpha: np.ndarray  # float [count]
    beta: np.ndarray  # float [count]; 0 where the file gives none
    lines: np.ndarray  # int64 [count]: line number of each row, for error messages

    @staticmethod
    def concatenate(chunks: list[NgramTable]) -> NgramTable:
        """One table of the rows of ``chunks`` (of one order), in their order."""
        return NgramTable(chunks[0].order, *(np.concatenate([getattr(c, name) for c in chunks])
                                             for name in ("ids", "alpha", "beta", "lines")))


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
    """Numbered, stripped lines of a model file, with compression errors made readable.

    Lines come one at a time (iterate), in batches (:meth:`take`), or as their text
    unstripped (:meth:`take_text`, for the bulk parser, which splits fields on the same
    whitespace as ``bytes.split``); all read from one block of text, read at once, whose
    lines become objects only when asked for one by one.  A compression error is held
    back until every complete line before it has been handed out, so an error in those
    lines is still the one reported, and the damage is reported at the line after them.
    """

    def __init__(self, path: str, stream: BinaryIO) -> None:
        self.path = path
        self._stream = stream
        self.number = 0  # lines handed out so far
        self._text = b""  # the block read: its complete lines, then maybe the start of the next
        self._ends: list[int] = []  # where each line of _text ends (its newline, or the text's end)
        self._next = 0
        self._partial = b""  # the start of a line the last block cut
        self._failure: BaseException | None = None
        self._at_end = False

    def _fill(self) -> bool:
        """Read the next block; False at the end of the file."""
        if self._failure is not None:
            raise self._readable(self._failure)
        if self._at_end:
            return False
        blocks = [self._partial]
        size = 0
        try:
            while size < READ_BYTES:
                # read1: one small read of the decompressor, so an error loses little text.
                # (every stream open_binary gives has read1, though BinaryIO does not say so)
                block = self._stream.read1()  # type: ignore[attr-defined]
                if not block:
                    self._at_end = True
                    break
                blocks.append(block)
                size += len(block)
        except DECOMPRESSION_ERRORS as error:
            self._failure = error
        text = b"".join(blocks)
        # Unless the file ended there, what follows the last newline is an incomplete line,
        # kept for the next block (or lost with the damage that cut it).
        complete = len(text) if self._at_end and self._failure is None else text.rfind(b"\n") + 1
        self._partial = b"" if self._at_end or self._failure is not None else text[complete:]
        self._text = text  # read up to its last complete line only (not copied without the rest)
        ends = np.flatnonzero(np.frombuffer(text, np.uint8, count=complete) == ord("\n")).tolist()
        if complete and text[complete - 1] != ord("\n"):
            ends.append(complete)  # the file's last line, with no newline
        self._ends = ends
        self._next = 0
        return bool(ends) or self._fill()

    def _start(self, line: int) -> int:
        return self._ends[line - 1] + 1 if line else 0

    def _stripped(self, first: int, stop: int) -> list[bytes]:
        """Lines ``first`` .. ``stop`` - 1 of the block, stripped."""
        text, ends = self._text, self._ends
        starts = [self._start(first), *(end + 1 for end in ends[first:stop - 1])]
        return [text[start:end].strip() for start, end in zip(starts, ends[first:stop])]

    def _readable(self, error: BaseException) -> ModelFormatError:
        if isinstance(error, EOFError):
            return self.error(f"expected more compressed data: the file is truncated ({error})",
                              line=self.number + 1)
        kind = os.path.splitext(self.path)[1] or "compressed"
        return self.error(f"expected {kind} compressed data, found data that is damaged or in another "
                          f"format ({error})", line=self.number + 1)

    def __iter__(self) -> Iterator[bytes]:
        while self._next < len(self._ends) or self._fill():
            line = self._text[self._start(self._next):self._ends[self._next]].strip()
            self._next += 1
            self.number += 1
            yield line

    def _advance(self, limit: int) -> tuple[int, int]:
        """Hand out the next lines of the block, at most ``limit`` (at least one unless the
        file has ended): where they are, first and stop."""
        if self._next == len(self._ends) and not self._fill():
            return 0, 0
        first = self._next
        self._next = min(first + limit, len(self._ends))
        self.number += self._next - first
        return first, self._next

    def take(self, limit: int) -> list[bytes]:
        """The next lines, at most ``limit`` (at least one unless the file has ended)."""
        return self._stripped(*self._advance(limit))

    def take_text(self, limit: int) -> tuple[memoryview, int]:
        """The next lines' text, unstripped, joined by their newlines (a view of the block,
        not a copy), and how many they are: at most ``limit`` (at least one unless the
        file has ended)."""
        first, stop = self._advance(limit)
        if first == stop:
            return memoryview(b""), 0
        return memoryview(self._text)[self._start(first):self._ends[stop - 1]], stop - first

    def put_back(self, count: int) -> None:
        """Un-read the last ``count`` lines :meth:`take` or :meth:`take_text` returned."""
        self._next -= count
        self.number -= count

    def error(self, message: str, line: int | None = None) -> ModelFormatError:
        return ModelFormatError(self.path, self.number if line is None else line, message)


@dataclass
class _Header:
    counts: list[int]
    lines: list[int]  # line number of each 'ngram N=count'

    def says(self, order: int) -> str:
        return f"'ngram {order}={self.counts[order - 1]}' on line {self.lines[order - 1]}"


def _is_number(text: bytes) -> bool:
    return read_number(text) is not None


#: How a log-probability of log10(0) is written (as strtod reads it: any case).
MINUS_INFINITY = (b"-inf", b"-infinity")


def _parse_number(text: bytes, lines: _Lines, what: str, minus_infinity: bool = False) -> float:
    """The number ``text``, finite and within float32's range; with ``minus_infinity``,
    ``-inf`` written as such (:data:`MINUS_INFINITY`) too."""
    value = read_number(text)
    if value is None:
        raise lines.error(f"expected a number for the {what}, found {_show(text)}")
    if minus_infinity and text.lower() in MINUS_INFINITY:
        return value
    if not math.isfinite(value):
        raise lines.error(f"expected a finite {what}{' or -inf' * minus_infinity}, found {_show(text)}")
    if abs(value) > FLOAT32_MAX:
        raise lines.error(f"expected a {what} within ±3.4e38 (the index stores 32-bit floats), found {_show(text)}")
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
        count = _whole_number(value.strip())
        if count is None:
            raise lines.error(f"expected a whole number of n-grams, found {_show(value.strip())}")
        if count < 0:
            raise lines.error(f"expected a non-negative n-gram count, found {count}")
        if expected == 1 and count == 0:
            raise lines.error("expected at least one unigram, found 'ngram 1=0'")
        header.counts.append(count)
        header.lines.append(lines.number)
    if not header.counts:
        raise lines.error("expected 'ngram N=count' lines after \\data\\, found the end of the file")
    return header, pending


def _whole_number(text: bytes) -> int | None:
    """``text`` as a count (ASCII digits, maybe a sign: what C's strtol reads whole), or None;
    not as Python's int() reads it, which also takes "1_000"."""
    digits = text[1:] if text[:1] in (b"+", b"-") else text
    return int(text) if digits.isdigit() else None


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
    reader = ArpaReader(path)
    by_order: dict[int, list[NgramTable]] = {}
    for chunk in reader:
        by_order.setdefault(chunk.order, []).append(chunk)
    return ArpaModel(path=reader.path, words=list(reader.words),
                     tables=[NgramTable.concatenate(chunks) for chunks in by_order.values()])


class ArpaReader:
    """The n-grams of an ARPA file chunk by chunk, so that a reader's memory need not grow with the model.

    Iterating parses the file and yields :class:`NgramTable` chunks in file order, each
    order in chunks of at most :data:`BATCH_LINES` rows, at least one (maybe empty) per
    order: the unigrams first (``words`` is complete once the first higher-order chunk
    comes), then each higher order.  A consumer must join the chunks of every order,
    the unigrams included: a vocabulary past BATCH_LINES words comes in several.
    A malformed file raises ModelFormatError when the iteration reaches the fault.
    The file is read once, to its end: ``size`` and ``sha256`` are then its bytes' (the
    model may be a pipe, which could not be read again to hash it).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.words = Vocabulary()  # bytes by id, compact (a big model has millions)
        self.counts: list[int] = []  # from the \\data\\ header
        self.size = 0
        self.sha256 = ""

    def __iter__(self) -> Iterator[NgramTable]:
        try:
            raw = DigestingReader(open(self.path, "rb", buffering=0))
        except OSError as error:
            raise ModelFormatError(self.path, None, f"cannot open the model: {error.strerror or error}") from None
        with contextlib.ExitStack() as opened:
            buffered = opened.enter_context(io.BufferedReader(raw, READ_BYTES))
            stream = opened.enter_context(open_binary(self.path, buffered))
            lines = _Lines(self.path, stream)
            it = iter(lines)
            header, pending = _read_header(lines, it)
            self.counts = header.counts
            vocab = _Vocabulary(self.words)
            highest = len(header.counts)
            for order in range(1, highest + 1):
                heading = _next_content(lines, it, pending, f"the \\{order}-grams: section")
                if heading != b"\\%d-grams:" % order:
                    raise lines.error(f"expected the \\{order}-grams: section, found {_show(heading)}")
                pending = yield from _read_section(lines, it, order, header, vocab)
            end = _next_content(lines, it, pending, f"\\end\\ after the {highest}-grams")
            if end != b"\\end\\":
                raise lines.error(f"expected \\end\\ after the {highest}-grams (the \\data\\ header declares "
                                  f"{highest} orders), found {_show(end)}")
            for _ in it:  # ignored, but read: a truncated or corrupt compressed file fails its check
                pass
            self.size, self.sha256 = raw.size, raw.sha256()


@dataclass
class _Vocabulary:
    """The unigrams read so far (their words by id, which also parse the higher orders in
    C) and the line of each id (for duplicate errors)."""

    words: Vocabulary
    lines: array = field(default_factory=lambda: array("q"))


def _read_section(
    lines: _Lines, it: Iterator[bytes], order: int, header: _Header, vocab: _Vocabulary,
) -> Generator[NgramTable, None, bytes | None]:
    """Yield the entries of one section in chunks; unigrams also fill ``vocab``.

    Each chunk of lines is parsed in bulk when it can be: straight from the text read
    (:func:`_parse_text`), or, where the section ends among its lines, up to that end
    (:func:`_parse_bulk`).  Lines the bulk parser turns down (a fault among them, or
    unigrams) are parsed one by one, which raises the error naming the line.  Returns
    the line that ended the section when it was not blank.
    """
    count = header.counts[order - 1]
    has_beta = order < len(header.counts)
    found = 0
    pending = None
    ended = "the end of the file"
    while True:
        if order > 1:  # most of a section: its text parsed in bulk as read, no line an object
            table = _parse_text(lines, order, has_beta, vocab.words, count - found)
            if table is not None:
                found += len(table.lines)
                yield table
                continue
        # the section's end (or a fault) is among the next lines: taken one by one
        batch = lines.take(BATCH_LINES)
        if not batch:
            break
        text = b"\n".join(batch)  # once: both the section's end and the bulk parser read it
        cut = _section_end(text)
        end = None
        if cut is not None:
            end = text.count(b"\n", 0, cut)
            lines.put_back(len(batch) - end)
            batch, text = batch[:end], text[:max(cut - 1, 0)]
        if batch:
            table = None
            if order > 1 and found + len(batch) <= count:
                table = _parse_bulk(text, len(batch), order, has_beta, vocab.words, lines.number - len(batch) + 1)
            if table is None:
                lines.put_back(len(batch))
                table = _parse_lines(lines, it, len(batch), order, header, found, vocab)
            found += len(table.lines)
            yield table
        if end is not None:
            line = next(it)
            pending = line or None
            ended = _show(line) if line else "a blank line"
            break
    if found != count:
        raise lines.error(f"expected {count} {order}-grams ({header.says(order)}), "
                          f"found only {found} before {ended}")
    if count == 0:
        yield NgramTable(order, np.zeros((0, order), np.int32), np.zeros(0, np.float32),
                         np.zeros(0, np.float32), np.zeros(0, np.int64))
    return pending


def _section_end(text: bytes) -> int | None:
    """Where, in ``text`` (a batch's lines joined by newlines), the first line that ends a
    section starts (a blank line, or one starting with ``\\``); None if no line does."""
    if text[:1] in (b"", b"\n", b"\\"):
        return 0
    cuts = [at + 1 for at in (text.find(b"\n\n"), text.find(b"\n\\")) if at >= 0]
    if text.endswith(b"\n"):  # the last line is blank
        cuts.append(len(text))
    return min(cuts, default=None)


def _parse_text(lines: _Lines, order: int, has_beta: bool, words: Vocabulary, room: int) -> NgramTable | None:
    """The next lines of the section, parsed in bulk from their text as read, if every one is
    an n-gram of it (none blank or a heading, none faulty, no more than the ``room`` left
    in the section); else None, with nothing taken."""
    text, n = lines.take_text(BATCH_LINES)
    table = _parse_bulk(text, n, order, has_beta, words, lines.number - n + 1) if 0 < n <= room else None
    if table is None:
        lines.put_back(n)
    return table


def _parse_bulk(text: bytes | memoryview, n: int, order: int, has_beta: bool, words: Vocabulary,
                first_line: int) -> NgramTable | None:
    """Parse ``n`` n-gram lines (order > 1, none blank), joined by newlines in ``text``, all at
    once in C; None if any line is faulty.

    It accepts exactly what :func:`_parse_lines` accepts (the same numbers, the same
    checks), so turning a batch down only means the line-by-line parser runs and names
    the fault (``fastsubs.indexer._native``).
    """
    parsed = words.parse(text, n, order, has_beta)
    if parsed is None:
        return None
    ids, alpha, beta = parsed
    return NgramTable(order, np.frombuffer(ids, np.int32).reshape(n, order), np.frombuffer(alpha, np.float32),
                      np.frombuffer(beta, np.float32), np.arange(first_line, first_line + n, dtype=np.int64))


def _parse_lines(
    lines: _Lines, it: Iterator[bytes], n: int, order: int, header: _Header, found: int, vocab: _Vocabulary,
) -> NgramTable:
    """Parse the next ``n`` lines of a section (none blank) one by one: the careful
    parser, whose errors name the faulty line.  ``found`` n-grams came before them."""
    count = header.counts[order - 1]
    has_beta = order < len(header.counts)
    ids = array("i")
    alphas = array("d")
    betas = array("d")
    line_numbers = array("q")
    short, long_ = order + 1, order + 2
    for line in itertools.islice(it, n):
        if found == count:
            raise lines.error(f"expected only {count} {order}-grams ({header.says(order)}), found more")
        parts = line.split()
        fields = len(parts)
        if fields == short:
            beta = 0.0
        elif fields == long_ and has_beta:
            if not _is_number(parts[-1]):
                raise lines.error(
                    f"expected a number for the back-off weight, found {_show(parts[-1])} "
                    f"(is this a {order + 1}-gram in the \\{order}-grams: section?)")
            beta = _parse_number(parts[-1], lines, "back-off weight")
        elif fields == long_ and read_number(parts[-1]) == 0.0:
            beta = 0.0  # the no-op weight KenLM accepts on the highest order
        elif fields == long_ and _is_number(parts[-1]):
            raise lines.error(f"expected no back-off weight on a {order}-gram, found {_show(parts[-1])} "
                              f"({order} is the model's highest order)")
        else:
            raise lines.error(f"expected {_ngram_shape(order, has_beta)}, found {fields} field{'s' * (fields != 1)}")
        alpha = _parse_number(parts[0], lines, "log-probability", minus_infinity=True)
        if alpha > 0:
            raise lines.error(f"expected a log-probability <= 0, found {_show(parts[0])}")
        if order == 1:
            ids.append(_add_word(lines, parts[1], vocab))
        else:
            for position in range(1, short):
                wid = vocab.words.find(parts[position])
                if wid < 0:
                    raise lines.error(_no_unigram_message(parts, position, order))
                ids.append(wid)
        alphas.append(alpha)
        betas.append(beta)
        line_numbers.append(lines.number)
        found += 1
    scores = np.float64 if order == 1 else np.float32
    return NgramTable(
        order=order,
        ids=np.frombuffer(ids, dtype=np.int32).reshape(-1, order).copy(),
        alpha=np.frombuffer(alphas, dtype=np.float64).astype(scores),
        beta=np.frombuffer(betas, dtype=np.float64).astype(scores),
        lines=np.frombuffer(line_numbers, dtype=np.int64).copy(),
    )


def _add_word(lines: _Lines, word: bytes, vocab: _Vocabulary) -> int:
    """Give the unigram ``word`` the next id, checking it can be one."""
    first = vocab.words.find(word)
    if first >= 0:
        raise lines.error(f"expected each word to have one unigram, found {_show(word)} again "
                          f"(first on line {vocab.lines[first]})")
    try:
        word.decode("utf-8")
    except UnicodeDecodeError:
        raise lines.error(f"expected UTF-8 text, found a word that is not: {_show(word)}") from None
    if len(word) > MAX_WORD_BYTES:
        raise lines.error(f"expected a word of at most {MAX_WORD_BYTES} bytes, found one of {len(word)} bytes")
    vocab.lines.append(lines.number)
    return vocab.words.add(word)


def _no_unigram_message(parts: list[bytes], position: int, order: int) -> str:
    word = parts[position]
    message = f"expected every word of a {order}-gram to have a unigram, found {_show(word)} that has none"
    if position == len(parts) - 1 and _is_number(word) and order > 1:
        message += f" (is this a {order - 1}-gram with a back-off weight in the \\{order}-grams: section?)"
    return message
