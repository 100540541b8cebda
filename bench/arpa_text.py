"""The ARPA text of a synthetic model (``fastsubs-bench synth``), a block of n-grams at a time.

:class:`Writer` turns the blocks of a :class:`~fastsubs.bench.synth.Synthesizer` into the
lines KenLM writes: log10 probability, tab, the words separated by spaces, and a tab and
the back-off weight below the highest order; ``open_output`` opens the file, gzip-compressed
for ``.gz``, and :func:`synthesize` writes a whole model into it (``fastsubs-bench synth``).
The numbers come from the synthesizer; only their text is made here.

Formatting is vectorised with numpy because a model of 100M n-grams is 100M lines: one
``%``-format or f-string per line would make the text, not the model, the slow part.
A block's lines are made as arrays instead: each field padded to whole 8-byte lanes
(fixed-width numbers from tables of digit strings, each word and the byte after it as one
uint64), the fields put side by side, and the padding dropped in one ``np.compress``.
The same arguments give the same bytes on every run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np

from fastsubs.bench.synth import Block, Synthesizer
from fastsubs.errors import FastsubsError

TAB, SPACE, NEWLINE = ord("\t"), ord(" "), ord("\n")


#: "000" to "999" and "0000" to "9999", each string in the low bytes of one little-endian
#: integer: gathering whole integers is many times faster than gathering rows of bytes.
_DIGITS3 = np.array([int.from_bytes(b"%03d" % i, "little") for i in range(1000)], dtype="<u4")
_DIGITS4 = np.array([int.from_bytes(b"%04d" % i, "little") for i in range(10000)], dtype="<u4")


def _bytes_of(values: np.ndarray) -> np.ndarray:
    """The bytes of each of ``values`` (a little-endian integer array), a row each."""
    return values.view(np.uint8).reshape(len(values), values.itemsize)


def _six_digits(number: np.ndarray, chars: np.ndarray) -> None:
    """Write the last six decimal digits of each ``number`` (int32 >= 0) into the rows of ``chars``."""
    chars[:, 2:] = _bytes_of(_DIGITS4[number % 10000])
    chars[:, :2] = _bytes_of(_DIGITS3[number // 10000 % 100])[:, 1:3]


def _log_probs(values: np.ndarray) -> np.ndarray:
    """Negative ``values`` (> -100) as 9 characters each: -d.dddddd, or -dd.ddddd from -10 on."""
    if len(values) and not (values.min() > -99.999995 and values.max() < 0):
        raise AssertionError("a log-probability out of (-100, 0)")
    micro = np.rint(values * -1e6).astype(np.int32)
    chars = np.empty((len(values), 9), dtype=np.uint8)
    chars[:, 0] = ord("-")
    chars[:, 1] = micro // 10**6 % 10 + ord("0")
    chars[:, 2] = ord(".")
    _six_digits(micro, chars[:, 3:])
    wide = np.flatnonzero(micro >= 10**7)  # <s>'s -99, or a rare word of a vocabulary past 10^8 words
    if len(wide):
        centi = np.rint(values[wide] * -1e5).astype(np.int32)
        chars[wide, 1:3] = _bytes_of(_DIGITS3[centi // 10**5 % 100])[:, 1:3]
        chars[wide, 3] = ord(".")
        six = np.empty((len(wide), 6), dtype=np.uint8)
        _six_digits(centi, six)
        chars[wide, 4:] = six[:, 1:]
    return chars


def _backoffs(values: np.ndarray, end: int) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (|v| < 10) with 6 decimals, "0" for zero, then the byte ``end``: padded rows and their lengths."""
    micro = np.rint(np.abs(values) * 1e6).astype(np.int32)
    negative = (values < 0) & (micro > 0)
    chars = np.empty((len(values), 16), dtype=np.uint8)
    chars[:, 0] = ord("-")
    chars[:, 1] = micro // 10**6 % 10 + ord("0")
    chars[:, 2] = ord(".")
    _six_digits(micro, chars[:, 3:9])
    chars[:, 9] = end
    positive = np.flatnonzero(~negative)
    chars[positive, :9] = chars[positive, 1:10]  # no sign: one byte to the left
    zero = np.flatnonzero(micro == 0)
    chars[zero, 0] = ord("0")
    chars[zero, 1] = end
    return chars.view("<u8"), np.where(micro == 0, 2, np.where(negative, 10, 9))


#: For k = 0 .. 8, the 8 bytes whose first k are 1 and the others 0, as one integer.
_FIRST_BYTES = np.array([int.from_bytes(b"\x01" * k, "little") for k in range(9)], dtype="<u8")


def _join(fields: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Lines made of ``fields``, each given as rows of bytes padded to whole 8-byte lanes
    (uint64 [rows, lanes]) and the length of each row's field: the rows side by side,
    then only the bytes within each field's length kept."""
    rows = len(fields[0][0])
    width = sum(lanes.shape[1] for lanes, _ in fields)
    padded = np.empty((rows, width), dtype="<u8")
    keep = np.empty((rows, width), dtype="<u8")
    at = 0
    for lanes, lengths in fields:
        for lane in range(lanes.shape[1]):
            padded[:, at] = lanes[:, lane]
            keep[:, at] = _FIRST_BYTES[np.clip(lengths - 8 * lane, 0, 8)]
            at += 1
    return np.compress(keep.view(bool).ravel(), padded.view(np.uint8).ravel())


class Writer:
    """Formats a :class:`Synthesizer`'s blocks as ARPA lines."""

    def __init__(self, synth: Synthesizer) -> None:
        self.synth = synth
        vocab = synth.vocab
        # each word and the byte after it, padded to 8 bytes: one uint64 per word
        self.lengths = vocab.lengths + 1
        self.words: dict[int, np.ndarray] = {}
        for end in (SPACE, TAB, NEWLINE):
            table = np.zeros((vocab.size, 8), dtype=np.uint8)
            table[:, :vocab.chars.shape[1]] = vocab.chars
            table[np.arange(vocab.size), vocab.lengths] = end
            self.words[end] = table.view("<u8").ravel()

    def header(self) -> bytes:
        counts = "".join(f"ngram {order}={count}\n" for order, count in enumerate(self.synth.counts, 1))
        return f"\\data\\\n{counts}\n".encode()

    def lines(self, block: Block) -> np.ndarray:
        synth = self.synth
        order = block.order
        first = np.empty((block.ids.shape[1], 16), dtype=np.uint8)
        first[:, :9] = _log_probs(block.alpha)
        first[:, 9] = TAB
        fields = [(first.view("<u8"), np.full(len(first), 10))]
        for column in range(order):
            last = column == order - 1
            end = SPACE if not last else TAB if order < synth.order else NEWLINE
            ids = block.ids[column]
            fields.append((self.words[end][ids][:, None], self.lengths[ids]))
        if order < synth.order:
            fields.append(_backoffs(synth.backoffs(block), NEWLINE))
        return _join(fields)

    def write(self, stream: BinaryIO) -> None:
        stream.write(self.header())
        for order in range(1, self.synth.order + 1):
            stream.write(b"\\%d-grams:\n" % order)
            for block in self.synth.blocks(order):
                stream.write(self.lines(block).data)
            stream.write(b"\n")
        stream.write(b"\\end\\\n")


def open_output(path: Path, compressed: bool) -> BinaryIO:
    """``path`` for writing, gzip-compressed at a low level if ``compressed`` (ISA-L where
    installed, on a thread of its own); the same bytes on every run."""
    if not compressed:
        return open(path, "wb")
    try:
        from isal import igzip_threaded
    except ImportError:
        import gzip

        return cast(BinaryIO, gzip.GzipFile(filename="", mode="wb", compresslevel=1, fileobj=open(path, "wb"),
                                            mtime=0))
    return igzip_threaded.open(path, "wb", compresslevel=1, threads=1)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SynthSummary:
    path: Path
    counts: list[int]
    bytes: int
    seconds: float


def synthesize(path: str | os.PathLike[str], counts: list[int], seed: int = 1) -> SynthSummary:
    """Write the synthetic model of ``counts`` n-grams per order to ``path`` (.gz: compressed).

    The model is written beside ``path`` under a temporary name and renamed when complete.
    """
    started = time.monotonic()
    path = Path(path)
    if not path.parent.is_dir():
        raise FastsubsError(f"{path}: cannot write the model there (no directory {path.parent})")
    writer = Writer(Synthesizer(counts, seed))
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        try:
            stream = open_output(partial, path.suffix == ".gz")
        except OSError as error:
            raise FastsubsError(f"{path}: cannot write the model there ({error.strerror or error})") from None
        with stream:
            writer.write(stream)
        os.replace(partial, path)
    finally:
        if partial.exists():
            partial.unlink()
    return SynthSummary(path, counts, path.stat().st_size, time.monotonic() - started)
