"""The records of one order with the slot at one position: made by a job, appended by the build.

A build makes the records of each (order, slot) in a job of its own (:func:`encode_slot`):
it sorts the order's spilled n-grams for that slot, encodes the patterns
(:mod:`fastsubs.indexer.patterns`) and writes the records to files of about FILE_BYTES,
so that jobs run in parallel processes (``--jobs``) while the building process, LMDB's
one writer, appends each file to the index in key order (:func:`append_records`) as soon
as it is whole and the slots before it are in (:mod:`fastsubs.indexer.index_writer`).

A record names the last key of the record before it, which for the first record of a
slot is the last pattern of the slot before: known only once that slot is made, so the
appender writes it into the first record (and makes its checksum right again).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import lmdb
import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import ModelFormatError
from fastsubs.indexer.patterns import Records, RecordWriter, first_repeat
from fastsubs.indexer.runs import RowFile, repeat_places, sorted_blocks


@dataclass(frozen=True)
class SlotJob:
    """What a job needs: the spilled order, its slot, the model's shape, where to write, and
    the rows a sorted run may hold (its share of the build's memory)."""

    spill: Path
    order: int
    slot: int
    model_order: int
    id_bytes: int  # of the spilled rows' ids
    vocab_size: int
    run_rows: int
    directory: Path
    model_path: str
    first_line: int  # the line of the spill's first row, for a repeated n-gram's message
    unigram_alpha: np.ndarray | None = None  # for the joint orders of the patterns "_ d" (order 2, slot 0)
    joint_min: int = fmt.JOINT_MIN_DEFAULT
    beta_table: np.ndarray | None = None  # the order's back-off table (below the model's highest order)


@dataclass(frozen=True)
class SlotRecords:
    """What a job made: how many records files (:func:`records_file`), records, the
    n-grams they hold, where their bytes go (:data:`fastsubs.format.PARTS`), and the largest
    magnitude of a finite value in them."""

    files: int
    records: int
    ngrams: int
    parts: dict[str, int]
    value_bound: float


class RepeatedNgram(Exception):
    """A job found an n-gram twice in the model (at two lines): the building process, which
    holds the vocabulary, names its words (:meth:`error`), so that a job need not."""

    def __init__(self, model_path: str, order: int, ngram: list[int], first: int, second: int) -> None:
        super().__init__(model_path, order, ngram, first, second)
        self.model_path, self.order, self.ngram, self.first, self.second = model_path, order, ngram, first, second

    def error(self, words: Sequence[bytes]) -> ModelFormatError:
        text = b" ".join(words[i] for i in self.ngram).decode("utf-8", "backslashreplace")
        return ModelFormatError(self.model_path, self.second, f"expected each {self.order}-gram once, "
                                                              f"found '{text}' again (first on line {self.first})")


_BATCH = struct.Struct("<QQQ")  # records, bytes of keys, bytes of values

#: Bytes of records a job writes to one file before it starts the next.  The building
#: process appends (and removes) each finished file of the slot next in key order while
#: its job still runs, so that a slot's records are not all on disk at once beside the
#: index (2.4 GB a slot of a 500M-n-gram model's 3-grams).
FILE_BYTES = 64 << 20


def records_file(directory: Path, order: int, slot: int, number: int) -> Path:
    """The ``number``-th records file of a slot; it has its name once it is whole."""
    return directory / f"{order}-{slot}-{number}.records"


def encode_slot(job: SlotJob) -> SlotRecords:
    """Sort the order for the slot and write its records to files of about FILE_BYTES
    (batches of records as :class:`fastsubs.indexer.patterns.Records` holds them), each
    renamed to :func:`records_file`'s name once written."""
    joint = job.order == 2 and job.slot == 0
    has_beta = job.order < job.model_order
    writer = RecordWriter(job.order, job.model_order, job.vocab_size, job.unigram_alpha if joint else None,
                          job.joint_min, job.beta_table)
    writing = job.directory / f"{job.order}-{job.slot}.records.part"
    files, ngrams = 0, 0
    out = open(writing, "wb")
    try:
        for rows in sorted_blocks(job.spill, job.order, job.id_bytes, has_beta, job.slot, job.run_rows,
                                  job.directory):
            ngrams += len(rows)
            if job.slot == job.order - 1:  # the slot last: rows in n-gram order
                check_once(job, has_beta, rows["ids"])
            write_batch(out, writer.records(rows, job.slot))
            if out.tell() >= FILE_BYTES:
                out.close()
                writing.rename(records_file(job.directory, job.order, job.slot, files))
                files += 1
                out = open(writing, "wb")
        write_batch(out, writer.finish(job.slot))
    finally:
        out.close()
    writing.rename(records_file(job.directory, job.order, job.slot, files))
    return SlotRecords(files + 1, writer.written, ngrams, writer.parts, writer.value_bound)


def write_batch(out: BinaryIO, records: Records) -> None:
    """One batch of records to a records file (what :func:`_batches` reads)."""
    out.write(_BATCH.pack(len(records), len(records.keys), len(records.values)))
    out.write(records.keys)
    out.write(np.asarray(records.offsets, dtype="<u8").tobytes())
    out.write(records.values)


def check_once(job: SlotJob, has_beta: bool, ids: np.ndarray) -> None:
    """Raise :class:`RepeatedNgram` for the first n-gram of ``ids`` (sorted with the slot
    last) that the model gives twice, with the lines of its first two rows in the spill."""
    repeat = first_repeat(ids)
    if repeat is not None:
        first, second = repeat_places(job.spill, RowFile(job.order, job.id_bytes, has_beta), repeat)
        raise RepeatedNgram(job.model_path, job.order, repeat.tolist(), job.first_line + first,
                            job.first_line + second)


def _batches(path: Path, key_length: int) -> Iterator[tuple[bytes, list[int], bytes]]:
    """The batches of a records file: keys, value offsets, values."""
    with open(path, "rb") as stream:
        while head := stream.read(_BATCH.size):
            count, key_bytes, value_bytes = _BATCH.unpack(head)
            keys = stream.read(key_bytes)
            offsets = np.frombuffer(stream.read(8 * (count + 1)), "<u8").tolist()
            yield keys, offsets, stream.read(value_bytes)


def append_records(env: lmdb.Environment, db: Any, path: Path, key_length: int,
                   previous: bytes | None) -> bytes | None:
    """Append the records of a job's file to ``db`` (after every key there), the first one
    naming ``previous`` (the last pattern key before it, or None at the start of the
    database); returns the last pattern key appended (``previous`` if none), and removes the file."""
    for keys, offsets, values in _batches(path, key_length):
        if previous is not None and offsets[-1]:
            values = fmt.name_previous(keys[:key_length], values[:offsets[1]], previous) + values[offsets[1]:]
        with env.begin(write=True, db=db) as txn, txn.cursor() as cursor:
            cursor.putmulti(Records(keys, key_length, values, offsets).items(), append=True)
        if offsets[-1]:
            previous = keys[-key_length:]
    path.unlink()
    return previous
