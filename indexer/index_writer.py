"""The building process's writes into the index's LMDB environment, of which it is the one writer.

Each slot's records are appended as soon as their job has made them and every slot before
them in key order is in (:meth:`IndexWriter.append_ready`, called between the chunks the
build reads), so that a job's records file is on disk only until then.  Jobs sort one
order while the next is read; appending only once the whole model was read would keep the
records of every lower order in files at once, beside the index's own pages: more
temporary disk than the index itself at scale (1.27x on a 500M-n-gram model).  An order's
spill is removed as soon as the jobs of all its slots have ended (they alone read it).
Once the model is read, :meth:`IndexWriter.finish` appends the rest, then writes the
whole-vocabulary arrays, the metadata and the header.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lmdb
import msgpack
import numpy as np

from fastsubs import format as fmt
from fastsubs import origin
from fastsubs.indexer._native import Vocabulary
from fastsubs.indexer.completeness import check_count, check_unigram_arrays
from fastsubs.indexer.jobs import Job
from fastsubs.indexer.patterns import largest_magnitude
from fastsubs.indexer.slots import RepeatedNgram, append_records, records_file
from fastsubs.indexer.time_left import TimeLeft

#: Address space reserved for the LMDB map while building; the file grows only as written.
BUILD_MAP_SIZE = 1 << 40
#: Seconds the building process waits between two looks at its jobs' files, once the
#: model is read.
WAIT_SECONDS = 0.2


@dataclass
class _Order:
    """An order whose slots' jobs are running or done, and what was appended of them."""

    order: int
    count: int  # its n-grams, as the model's header says
    jobs: list[Job]  # one per slot, in key order
    spill: Path | None  # its n-grams as read, until every job has ended
    directory: Path  # where its jobs write their records files
    id_bytes: int  # of its pattern keys' ids
    db: Any
    appended: int = 0  # slots appended so far
    files: int = 0  # records files appended of the slot next in key order
    previous: bytes | None = None  # the last pattern key appended
    records: int = 0
    parts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(fmt.PARTS, 0))


@dataclass(frozen=True)
class ModelSummary:
    """What the header and metadata say of the model, beside its patterns."""

    words: Vocabulary
    counts: list[int]
    unigram_alpha: np.ndarray  # float32, by id
    unigram_beta: np.ndarray
    beta_tables: dict[int, np.ndarray]  # order -> its back-off table (orders 2 ... N - 1)
    source: dict[str, object]  # the model file's name, size and SHA-256, as read


class IndexWriter:
    """Appends the slots' records as their jobs end, then the rest of the index."""

    def __init__(self, directory: Path, words: Vocabulary, time_left: TimeLeft,
                 progress: Any) -> None:
        self.env = lmdb.open(str(directory), map_size=BUILD_MAP_SIZE, max_dbs=fmt.MAX_ORDER + 2,
                             sync=False, metasync=False, writemap=False)
        self.words = words  # the vocabulary, complete before any job ends: a repeated n-gram's words
        self.time_left = time_left
        self.progress = progress
        self.orders: list[_Order] = []
        self.value_bound = 0.0
        self.sizes: list[dict[str, int | str]] = []
        # the commit whose code the build runs, asked as it starts: in a clone, HEAD may have
        # moved by the end of a long build (a billion-n-gram build named the next commit)
        self.commit = origin.commit()

    def add(self, order: int, count: int, spill: Path, id_bytes: int, jobs: list[Job]) -> None:
        """The jobs of the next order's slots (in key order), reading its ``spill`` and
        writing their records files beside it, for a vocabulary of ``id_bytes`` ids."""
        db = self.env.open_db(fmt.patterns_db_name(order))
        self.orders.append(_Order(order, count, jobs, spill, spill.parent, id_bytes, db))

    def append_ready(self, block: bool = False) -> None:
        """Append the records files the jobs have finished, each order's in key order, and
        remove the spills no job reads any more; with ``block``, until every job has ended
        (appending each file as it is finished, not each slot when its job ends).  Orders
        are databases of their own: one's slots never wait for another's."""
        while self._append_finished() and block:
            time.sleep(WAIT_SECONDS)

    def _append_finished(self) -> bool:
        """Append what the jobs have finished; whether any slot is still to come."""
        for done in self.orders:
            while done.appended < len(done.jobs):
                job = done.jobs[done.appended]
                ended = job.ready()  # (asked first: the files it finished are all there then)
                self._append_files(done, None)
                if not ended:
                    break
                self._append_slot(done, job)
            if done.spill is not None and all(job.ready() for job in done.jobs):
                done.spill.unlink()
                done.spill = None
        return any(done.appended < len(done.jobs) for done in self.orders)

    def _append_files(self, done: _Order, files: int | None) -> None:
        """Append the slot's records files from the next, up to ``files`` of them (None: those
        its job has finished so far)."""
        while files is None or done.files < files:
            path = records_file(done.directory, done.order, done.appended, done.files)
            if files is None and not path.exists():
                return
            done.previous = append_records(self.env, done.db, path, fmt.key_bytes(done.order, done.id_bytes),
                                           done.previous)
            done.files += 1

    def _append_slot(self, done: _Order, job: Job) -> None:
        """Append the rest of a slot whose job has ended (waiting for it)."""
        try:
            made = job.get()
        except RepeatedNgram as repeat:
            raise repeat.error(self.words) from None
        slot = done.appended
        check_count(f"{done.order}-grams with the slot at {slot + 1}", made.ngrams, done.count)
        self._append_files(done, made.files)
        done.records += made.records
        self.value_bound = max(self.value_bound, made.value_bound)
        for part, size in made.parts.items():
            done.parts[part] += size
        done.appended += 1
        done.files = 0
        self.time_left.wrote(made.ngrams)
        self.progress(f"wrote the {done.order}-grams with the slot at {slot + 1}" + self.time_left.said())
        if done.appended == len(done.jobs):
            self._end_order(done)

    def _end_order(self, done: _Order) -> None:
        """The order's END record, and its line of the size report."""
        end_key, end_value = fmt.encode_end(done.order, done.id_bytes, done.previous)
        with self.env.begin(write=True, db=done.db) as txn:
            txn.put(end_key, end_value, append=True)
        done.parts["structure"] += len(end_key) + len(end_value)
        done.records += 1
        self.sizes.append({"part": f"{done.order}-grams", "ngrams": done.count, "records": done.records,
                           **done.parts, "pages": _pages_bytes(self.env, done.db)})

    def finish(self, model: ModelSummary, joint_min: int) -> None:
        """Append what is left of the slots, then the arrays, the metadata and the header."""
        self.append_ready(block=True)
        check_count("orders of n-grams past the 1-grams", len(self.orders), len(model.counts) - 1)
        vocab_size = len(model.words)
        id_bytes = fmt.id_bytes(vocab_size)
        with self.env.begin(write=True) as txn:
            arrays = _write_arrays(self.env, txn, model)
        arrays_size: dict[str, int | str] = {"part": "arrays", "bytes": sum(length for length, _ in arrays),
                                             "pages": _pages_bytes(self.env, self.env.open_db(fmt.ARRAYS_DB))}
        value_bound = max(self.value_bound, largest_magnitude(model.unigram_alpha),
                          largest_magnitude(model.unigram_beta))
        special = _special_ids(model.words)
        meta = msgpack.packb(_metadata(model, vocab_size, id_bytes, special, [arrays_size, *self.sizes],
                                       self.commit))
        header = fmt.encode_header({
            "order": len(model.counts), "vocab_size": vocab_size, "id_bytes": id_bytes,
            "bos_id": special.get(b"<s>", fmt.NO_WORD), "eos_id": special.get(b"</s>", fmt.NO_WORD),
            "unk_id": special.get(b"<unk>", fmt.NO_WORD), "meta_bytes": len(meta),
            "meta_checksum": fmt.checksum(b"", meta), "arrays": arrays, "counts": model.counts,
            "records": [done.records for done in self.orders], "joint_min": joint_min, "value_bound": value_bound,
            "beta_tables": [len(model.beta_tables.get(order, ())) for order in range(2, len(model.counts) + 1)]})
        with self.env.begin(write=True, db=self.env.open_db(fmt.META_DB)) as txn:
            txn.put(fmt.META_KEY, meta)
            txn.put(fmt.HEADER_KEY, header)
        self.env.sync(True)

    def close(self) -> None:
        self.env.close()


#: The words whose ids the header names.
_SPECIAL_WORDS = (b"<s>", b"</s>", b"<unk>")


def _special_ids(words: Vocabulary) -> dict[bytes, int]:
    """The ids of those of <s>, </s> and <unk> that the vocabulary has."""
    return {word: words.find(word) for word in _SPECIAL_WORDS if words.find(word) >= 0}


def _write_arrays(env: lmdb.Environment, txn: lmdb.Transaction, model: ModelSummary) -> list[tuple[int, int]]:
    """Write the whole-vocabulary arrays; returns each one's (length, checksum) for the header."""
    alpha = model.unigram_alpha
    spellings, offsets = model.words.spellings()
    arrays = {  # by their places in the header (fmt.ARRAY_NAMES)
        fmt.ARRAY_UNIGRAM_ALPHA: alpha,
        fmt.ARRAY_UNIGRAM_BETA: model.unigram_beta,
        # by the stored (float32) alpha, best first, ties by id: np.argsort is stable
        fmt.ARRAY_UNIGRAM_ORDER: np.argsort(-alpha, kind="stable").astype(fmt.ID_DTYPE),
        fmt.ARRAY_WORD_OFFSETS: np.frombuffer(offsets, "<u8"),
        fmt.ARRAY_WORD_BYTES: np.frombuffer(spellings, np.uint8),
        fmt.ARRAY_SPELLING_ORDER: np.frombuffer(model.words.spelling_order(), "<i4"),
        fmt.ARRAY_BETA_VALUES: np.concatenate([np.zeros(0, fmt.SCORE_DTYPE)] + [
            model.beta_tables.get(order, np.zeros(0, fmt.SCORE_DTYPE)) for order in range(2, len(model.counts))]),
    }
    check_count("words", len(model.words), model.counts[0])
    check_unigram_arrays(arrays, len(model.words))
    arrays_db = env.open_db(fmt.ARRAYS_DB, txn=txn)
    sums = []
    for place, (name, dtype) in enumerate(zip(fmt.ARRAY_NAMES, fmt.ARRAY_DTYPES)):
        value = arrays[place].astype(dtype).tobytes()
        txn.put(name, value, db=arrays_db)
        sums.append((len(value), fmt.checksum(b"", value)))
    return sums


def _pages_bytes(env: lmdb.Environment, db: Any) -> int:
    """Bytes of the LMDB pages of database ``db`` (branch, leaf and overflow pages)."""
    with env.begin(db=db) as txn:
        stat = txn.stat(db)
    return stat["psize"] * (stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"])


def _metadata(model: ModelSummary, vocab_size: int, id_bytes: int, special: dict[bytes, int],
              sizes: list[dict[str, int | str]], commit: str | None) -> dict[str, object]:
    """The msgpack map: for people (fastsubs-index info, a run's provenance); the search reads the header.

    ``sizes`` is the size report (``fastsubs-index info``: what the index spends per n-gram,
    and where): the arrays' bytes and pages, then each order's n-grams, records, bytes by
    part (:data:`fastsubs.format.PARTS`: keys and values as written) and the bytes of the
    LMDB pages that hold them (the rest of a page is LMDB's own: page and node headers, and
    room left free); ``commit`` the fastsubs commit the build ran (asked as it started)."""
    unk = special.get(b"<unk>")
    return {
        "magic": fmt.META_MAGIC.decode(),
        "format_version": fmt.FORMAT_VERSION,
        "order": len(model.counts),
        "counts": model.counts,
        "vocab_size": vocab_size,
        "id_bytes": id_bytes,
        "has_unk": unk is not None,
        "unk_id": unk,
        "bos_id": special.get(b"<s>"),
        "eos_id": special.get(b"</s>"),
        # The bound must cover the stored (float32) weights, which can round up from the text.
        "max_unigram_beta": float(model.unigram_beta.max()),
        "source": model.source,
        "build": {"fastsubs": origin.VERSION, "fastsubs_commit": commit,
                  "fastsubs_format": fmt.FORMAT_VERSION, "python": sys.version.split()[0],
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "sizes": sizes,
    }
