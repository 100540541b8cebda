"""Compiling an ARPA model into an LMDB index (see :mod:`fastsubs.format` for the layout).

The build writes into a temporary directory beside the target and publishes it with
one atomic rename only when every record and the metadata are on disk, so a build that
fails or is killed never leaves a partial index at the target.  What a killed build
leaves beside it (its temporary directory, named with its process id) is removed by
the next build of the same target; a full disk is reported as such.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb
import msgpack
import numpy as np

from fastsubs import format as fmt
from fastsubs import origin
from fastsubs.errors import FastsubsError, IndexExistsError, ModelFormatError
from fastsubs.indexer.arpa import ArpaReader, NgramTable
from fastsubs.indexer.completeness import check_count, check_opens, check_unigram_arrays
from fastsubs.indexer.jobs import Jobs
from fastsubs.indexer.patterns import largest_magnitude
from fastsubs.indexer.publish import (
    check_replaceable,
    is_empty_directory,
    make_temp_dir,
    publish,
    remove_stale_temp_dirs,
    remove_tree,
    write_tag,
)
from fastsubs.indexer.runs import Spill, run_rows
from fastsubs.indexer.slots import SlotJob, append_records, encode_slot
from fastsubs.indexer.time_left import TimeLeft

#: Subdirectory of the build's temporary directory holding the spilled n-grams and the
#: jobs' runs and records until written.
RUNS_DIR = "runs"

#: Address space reserved for the LMDB map while building; the file grows only as written.
BUILD_MAP_SIZE = 1 << 40

#: Memory a build may use, all its processes together: the jobs' sorted runs are sized
#: to fit their share, beside what the reading and writing process keeps.
DEFAULT_MEMORY = 1 << 30
_MAIN_BYTES = 256 << 20

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildSummary:
    """What a build produced, for the closing summary line."""

    index: Path
    counts: list[int]
    index_bytes: int
    seconds: float


@dataclass
class _ReadModel:
    """A model read once: vocabulary and unigrams in memory, higher orders spilled to disk,
    the jobs that make their records (by order, then slot) started as each order was read."""

    words: list[bytes]
    counts: list[int]
    unigrams: NgramTable
    slots: dict[int, list[Any]]  # order -> one job handle per slot
    spills: dict[int, Path]  # order -> its n-grams as read, until its slots' jobs are done
    beta_tables: dict[int, np.ndarray]  # order -> its back-off table (orders 2 ... N - 1)
    source: dict[str, object]  # the model file's name, size and SHA-256, as read
    time_left: TimeLeft  # the work done so far, for the progress lines' estimate

    @property
    def order(self) -> int:
        return len(self.counts)


#: Seconds between two progress lines while one section of the model is read.
READ_PROGRESS_SECONDS = 3.0


def _read_model(model_path: Path, directory: Path, progress: Progress, jobs: Jobs, memory: int,
                joint_min: int) -> _ReadModel:
    """Parse the model, spilling each higher order to ``directory``, and start the jobs of
    its slots as soon as an order is spilled (they sort and encode it while the next is read).

    Reading a big model takes a while, so progress hears of each section as it starts and
    then every READ_PROGRESS_SECONDS, with the lines read so far.
    """
    directory.mkdir()
    reader = ArpaReader(model_path)
    unigram_chunks: list[NgramTable] = []  # a vocabulary past BATCH_LINES words comes in several
    slots: dict[int, list[Any]] = {}
    spills: dict[int, Path] = {}
    beta_tables: dict[int, np.ndarray] = {}
    spill: Spill | None = None
    section, read, reported = 0, 0, 0.0
    time_left = TimeLeft()

    def start_jobs(done: Spill) -> None:
        done.close()
        drop_read_spills(slots, spills)
        spills[done.order] = done.path
        rows = run_rows(max(memory - _MAIN_BYTES, 0) // jobs.count, done.order, done.id_bytes)
        # the joint orders of "_ d" need the unigrams, which a model gives before the 2-grams
        unigram_alpha = (NgramTable.concatenate(unigram_chunks).alpha.astype(fmt.SCORE_DTYPE)
                         if done.order == 2 else None)
        if done.betas is not None:
            beta_tables[done.order] = done.betas.table()
        slots[done.order] = [jobs.submit(encode_slot, SlotJob(
            done.path, done.order, slot, len(reader.counts), done.id_bytes, rows, directory, str(model_path),
            reader.words, done.first_line, unigram_alpha if slot == 0 else None, joint_min,
            beta_tables.get(done.order))) for slot in range(done.order)]

    for chunk in reader:
        jobs.tend()  # a job process that has ended its job gets the next
        read = read + len(chunk.lines) if chunk.order == section else len(chunk.lines)
        time_left.read(len(chunk.lines), chunk.order, reader.counts)
        now = time.monotonic()
        if chunk.order != section or now - reported >= READ_PROGRESS_SECONDS:
            progress(f"reading the {chunk.order}-grams: {read:,} of {reader.counts[chunk.order - 1]:,}"
                     + time_left.said())
            section, reported = chunk.order, now
        if chunk.order == 1:
            unigram_chunks.append(chunk)
            continue
        if spill is None or spill.order != chunk.order:
            if spill is not None:
                start_jobs(spill)
            spill = Spill(directory / f"{chunk.order}.ngrams", chunk.order, fmt.id_bytes(len(reader.words)),
                          has_beta=chunk.order < len(reader.counts))
        spill.add(chunk)
    if spill is not None:
        start_jobs(spill)
    source = {"name": model_path.name, "size": reader.size, "sha256": reader.sha256}
    return _ReadModel(reader.words, reader.counts, NgramTable.concatenate(unigram_chunks), slots, spills,
                      beta_tables, source, time_left)


def drop_read_spills(slots: dict[int, list[Any]], spills: dict[int, Path]) -> None:
    """Remove the spill of every order whose jobs have all finished (they alone read it):
    a build's temporary disk then holds little more than the spill being read and the
    records not yet written."""
    for order in [order for order in spills if all(job.ready() for job in slots[order])]:
        spills.pop(order).unlink()


def default_index_path(model: Path) -> Path:
    """``model.arpa.gz`` -> ``model.fsidx`` beside it."""
    name = model.name
    for suffix in (".gz", ".bz2", ".xz", ".arpa", ".lm"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return model.with_name(name + ".fsidx")


def _silent(_: str) -> None:
    pass


def build_index(
    model_path: str | os.PathLike[str],
    index_path: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    progress: Progress = _silent,
    jobs: int = 1,
    memory: int = DEFAULT_MEMORY,
    joint_min: int = fmt.JOINT_MIN_DEFAULT,
) -> BuildSummary:
    """Build the index of the ARPA model at ``model_path``; returns a summary.

    ``jobs`` processes sort and encode the records (beside the building process, which
    reads the model and writes the index); ``memory`` (bytes) bounds what the build's
    processes hold together, whatever the model's size (the n-grams are sorted on disk in
    runs that fit).  An empty directory at ``index_path`` is built into.  Raises
    :class:`IndexExistsError` when an index is at ``index_path`` and ``force`` is false
    (when the build starts, or when it publishes: another build's, never replaced then),
    :class:`TargetNotAnIndexError` when it holds anything but a fastsubs index or nothing
    (never replaced, whatever ``force``), :class:`ModelFormatError` for a malformed model.
    Patterns ``_ d`` of at least ``joint_min`` words get joint orders (kernel/format.h; the
    tests lower it so that their small models have some).
    """
    started = time.monotonic()
    model_path = Path(model_path)
    target = Path(index_path) if index_path is not None else default_index_path(model_path)
    if target.exists() or target.is_symlink():
        check_replaceable(target)
        if not force and not is_empty_directory(target):  # an empty directory is no index to keep
            raise IndexExistsError(target)
    remove_stale_temp_dirs(target.parent)
    try:
        temp = make_temp_dir(target)
    except OSError as error:
        raise FastsubsError(f"{target}: cannot create the index there ({error.strerror or error})") from None
    try:
        with Jobs(jobs) as workers:  # forked before anything big is read
            progress(f"reading {model_path}")
            model = _read_model(model_path, temp / RUNS_DIR, progress, workers, memory, joint_min)
            progress(f"read {model.order}-gram model: " + ", ".join(
                f"{count:,} {order}-grams" for order, count in enumerate(model.counts, start=1)))
            _write_environment(temp, model, progress, joint_min)
        remove_tree(temp / RUNS_DIR)
        (temp / "lock.mdb").unlink(missing_ok=True)
        check_opens(temp)
        write_tag(temp)
        # measured before it is published: a concurrent build may replace it at once
        size = sum(f.stat().st_size for f in temp.iterdir() if f.is_file())
        publish(temp, target, force)
    except lmdb.MapFullError:
        remove_tree(temp)
        raise FastsubsError(f"{target}: the index outgrew its LMDB map while building") from None
    except (OSError, lmdb.Error) as error:  # the sorted runs or LMDB
        full = _disk_full(temp)
        remove_tree(temp)
        reason = getattr(error, "strerror", None) or error
        if full:
            raise FastsubsError(f"{target}: cannot write the index: the disk is full ({reason})") from None
        raise FastsubsError(f"{target}: cannot write the index ({reason})") from None
    except BaseException:
        remove_tree(temp)
        raise
    return BuildSummary(target, model.counts, size, time.monotonic() - started)


#: Free space below which a failed LMDB write is reported as a full disk: LMDB turns a
#: short write into EIO, so ENOSPC never reaches us from there.
_NEARLY_FULL = 4 << 20


def _disk_full(directory: Path) -> bool:
    """Whether the filesystem holding ``directory`` has (next to) no space left."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < _NEARLY_FULL


def _write_environment(directory: Path, model: _ReadModel, progress: Progress,
                       joint_min: int) -> None:
    vocab_size = len(model.words)
    id_bytes = fmt.id_bytes(vocab_size)
    env = lmdb.open(str(directory), map_size=BUILD_MAP_SIZE, max_dbs=model.order + 2,
                    sync=False, metasync=False, writemap=False)
    try:
        with env.begin(write=True) as txn:
            arrays = _write_arrays(env, txn, model)
        records: list[int] = []
        sizes = [_array_sizes(env, arrays)]
        value_bound = max(largest_magnitude(model.unigrams.alpha), largest_magnitude(model.unigrams.beta))
        for order in range(2, model.order + 1):
            db = env.open_db(fmt.patterns_db_name(order))
            previous, written = None, 0
            key_length = fmt.key_bytes(order, id_bytes)
            parts = dict.fromkeys(fmt.PARTS, 0)
            for slot, job in enumerate(model.slots[order]):
                made = job.get()
                drop_read_spills(model.slots, model.spills)
                check_count(f"{order}-grams with the slot at {slot + 1}", made.ngrams, model.counts[order - 1])
                previous = append_records(env, db, made, key_length, previous)
                written += made.records
                value_bound = max(value_bound, made.value_bound)
                for part, size in made.parts.items():
                    parts[part] += size
                model.time_left.wrote(made.ngrams)
                progress(f"wrote the {order}-grams with the slot at {slot + 1}" + model.time_left.said())
            end_key, end_value = fmt.encode_end(order, id_bytes, previous)
            with env.begin(write=True, db=db) as txn:
                txn.put(end_key, end_value, append=True)
            parts["structure"] += len(end_key) + len(end_value)
            records.append(written + 1)
            sizes.append(_order_sizes(env, db, order, model.counts[order - 1], written + 1, parts))
        meta = msgpack.packb(_metadata(model, vocab_size, id_bytes, sizes))
        index_of = {w: i for i, w in enumerate(model.words)}
        header = fmt.encode_header({
            "order": model.order, "vocab_size": vocab_size, "id_bytes": id_bytes,
            "bos_id": index_of.get(b"<s>", fmt.NO_WORD), "eos_id": index_of.get(b"</s>", fmt.NO_WORD),
            "unk_id": index_of.get(b"<unk>", fmt.NO_WORD), "meta_bytes": len(meta),
            "meta_checksum": fmt.checksum(b"", meta), "arrays": arrays, "counts": model.counts, "records": records,
            "joint_min": joint_min, "value_bound": value_bound,
            "beta_tables": [len(model.beta_tables.get(order, ())) for order in range(2, model.order + 1)]})
        with env.begin(write=True, db=env.open_db(fmt.META_DB)) as txn:
            txn.put(fmt.META_KEY, meta)
            txn.put(fmt.HEADER_KEY, header)
        env.sync(True)
    finally:
        env.close()


def _write_arrays(env: lmdb.Environment, txn: lmdb.Transaction, model: _ReadModel) -> list[tuple[int, int]]:
    """Write the whole-vocabulary arrays; returns each one's (length, checksum) for the header."""
    unigrams = model.unigrams
    alpha = unigrams.alpha.astype(fmt.SCORE_DTYPE)
    arrays = {  # by their places in the header (fmt.ARRAY_NAMES)
        fmt.ARRAY_UNIGRAM_ALPHA: alpha,
        fmt.ARRAY_UNIGRAM_BETA: unigrams.beta.astype(fmt.SCORE_DTYPE),
        fmt.ARRAY_UNIGRAM_ORDER: np.lexsort((np.arange(len(alpha)), -alpha)).astype(fmt.ID_DTYPE),
        fmt.ARRAY_WORD_OFFSETS: np.concatenate(([0], np.cumsum([len(w) for w in model.words]))).astype(
            fmt.OFFSET_DTYPE),
        fmt.ARRAY_WORD_BYTES: np.frombuffer(b"".join(model.words), np.uint8),
        fmt.ARRAY_SPELLING_ORDER: np.array(sorted(range(len(model.words)), key=model.words.__getitem__),
                                           dtype=fmt.ID_DTYPE),
        fmt.ARRAY_BETA_VALUES: np.concatenate([np.zeros(0, fmt.SCORE_DTYPE)] + [
            model.beta_tables.get(order, np.zeros(0, fmt.SCORE_DTYPE)) for order in range(2, model.order)]),
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


def _array_sizes(env: lmdb.Environment, arrays: list[tuple[int, int]]) -> dict[str, int | str]:
    """The whole-vocabulary arrays' line of the size report: their bytes, and their pages'."""
    return {"part": "arrays", "bytes": sum(length for length, _ in arrays),
            "pages": _pages_bytes(env, env.open_db(fmt.ARRAYS_DB))}


def _order_sizes(env: lmdb.Environment, db: Any, order: int, ngrams: int, records: int,
                 parts: dict[str, int]) -> dict[str, int | str]:
    """One order's line of the size report (``fastsubs-index info``: what the index spends
    per n-gram, and where): its n-grams, records, bytes by part (:data:`fastsubs.format.PARTS`: keys and
    values as written) and the bytes of the LMDB pages that hold them (the rest of a page
    is LMDB's own: page and node headers, and room left free)."""
    return {"part": f"{order}-grams", "ngrams": ngrams, "records": records, **parts,
            "pages": _pages_bytes(env, db)}


def _metadata(model: _ReadModel, vocab_size: int, id_bytes: int,
              sizes: list[dict[str, int | str]]) -> dict[str, object]:
    """The msgpack map: for people (fastsubs-index info, a run's provenance); the search reads the header."""
    index_of = {w: i for i, w in enumerate(model.words)}
    unk = index_of.get(b"<unk>")
    return {
        "magic": fmt.META_MAGIC.decode(),
        "format_version": fmt.FORMAT_VERSION,
        "order": model.order,
        "counts": model.counts,
        "vocab_size": vocab_size,
        "id_bytes": id_bytes,
        "has_unk": unk is not None,
        "unk_id": unk,
        "bos_id": index_of.get(b"<s>"),
        "eos_id": index_of.get(b"</s>"),
        # The bound must cover the stored (float32) weights, which can round up from the text.
        "max_unigram_beta": float(model.unigrams.beta.astype(fmt.SCORE_DTYPE).max()),
        "source": model.source,
        "build": {"fastsubs": origin.VERSION, "fastsubs_commit": origin.commit(),
                  "fastsubs_format": fmt.FORMAT_VERSION, "python": sys.version.split()[0],
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "sizes": sizes,
    }


__all__ = ["BuildSummary", "build_index", "default_index_path", "ModelFormatError"]
