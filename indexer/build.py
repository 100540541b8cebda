"""Compiling an ARPA model into an LMDB index (see :mod:`fastsubs.format` for the layout).

The build writes into a temporary directory beside the target and publishes it with
one atomic rename only when every record and the metadata are on disk, so a build that
fails or is killed never leaves a partial index at the target.  What a killed build
leaves beside it (its temporary directory, named with its process id) is removed by
the next build of the same target; a full disk is reported as such.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lmdb
import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import FastsubsError, IndexExistsError, ModelFormatError
from fastsubs.indexer.arpa import ArpaReader
from fastsubs.indexer.completeness import check_opens
from fastsubs.indexer.index_writer import IndexWriter, ModelSummary
from fastsubs.indexer.jobs import Jobs
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
from fastsubs.indexer.slots import SlotJob, encode_slot
from fastsubs.indexer.time_left import TimeLeft

#: Subdirectory of the build's temporary directory holding the spilled n-grams and the
#: jobs' runs and records until written.
RUNS_DIR = "runs"

#: Memory a build may use, all its processes together: the jobs' sorted runs are sized
#: to fit their share, beside what the reading and writing process keeps.
DEFAULT_MEMORY = 1 << 30
#: What the reading and writing process keeps: a part whatever the model (the
#: interpreter, a batch of lines, LMDB's writes), and a part per word of its vocabulary
#: (the words, their lines and their scores, about 26 bytes a word measured at 5.8M words,
#: where its peak was 250 MiB while the jobs ran: docs/performance.md).
_MAIN_BYTES = 256 << 20
_MAIN_BYTES_PER_WORD = 32


def main_bytes(words: int) -> int:
    """Memory the building process keeps for a vocabulary of ``words`` words."""
    return _MAIN_BYTES + _MAIN_BYTES_PER_WORD * words

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildSummary:
    """What a build produced, for the closing summary line."""

    index: Path
    counts: list[int]
    index_bytes: int
    seconds: float


#: Seconds between two progress lines while one section of the model is read.
READ_PROGRESS_SECONDS = 3.0


def _read_model(model_path: Path, directory: Path, progress: Progress, jobs: Jobs, memory: int,
                joint_min: int, reader: ArpaReader, writer: IndexWriter, time_left: TimeLeft) -> ModelSummary:
    """Parse the model, spilling each higher order to ``directory``, and start the jobs of
    its slots as soon as an order is spilled (they sort and encode it while the next is
    read); ``writer`` appends what they made between the chunks read.

    Reading a big model takes a while, so progress hears of each section as it starts and
    then every READ_PROGRESS_SECONDS, with the lines read so far.
    """
    directory.mkdir()
    # a vocabulary past BATCH_LINES words comes in several chunks; their scores are kept as
    # the index stores them (float32, 8 bytes a word, where a chunk holds 28)
    unigram_alpha: list[np.ndarray] = []
    unigram_beta: list[np.ndarray] = []
    beta_tables: dict[int, np.ndarray] = {}
    spill: Spill | None = None
    section, read, reported = 0, 0, 0.0

    def start_jobs(done: Spill) -> None:
        done.close()
        rows = run_rows(max(memory - main_bytes(len(reader.words)), 0) // jobs.count, done.order, done.id_bytes,
                        done.betas is not None)
        # the joint orders of "_ d" need the unigrams, which a model gives before the 2-grams
        joint_alpha = joined(unigram_alpha) if done.order == 2 else None
        if done.betas is not None:
            beta_tables[done.order] = done.betas.table()
        slot_jobs = [jobs.submit(encode_slot, SlotJob(
            done.path, done.order, slot, len(reader.counts), done.id_bytes, len(reader.words), rows, directory,
            str(model_path),
            done.first_line, joint_alpha if slot == 0 else None, joint_min,
            beta_tables.get(done.order))) for slot in range(done.order)]
        writer.add(done.order, reader.counts[done.order - 1], done.path, done.id_bytes, slot_jobs)
        time_left.submitted(done.order, slot_jobs)

    for chunk in reader:
        jobs.tend()  # a job process that has ended its job gets the next
        writer.append_ready()
        read = read + len(chunk.lines) if chunk.order == section else len(chunk.lines)
        time_left.read(len(chunk.lines), chunk.order, reader.counts)
        now = time.monotonic()
        if chunk.order != section or now - reported >= READ_PROGRESS_SECONDS:
            progress(f"reading the {chunk.order}-grams: {read:,} of {reader.counts[chunk.order - 1]:,}"
                     + time_left.said())
            section, reported = chunk.order, now
        if chunk.order == 1:
            unigram_alpha.append(chunk.alpha.astype(fmt.SCORE_DTYPE))
            unigram_beta.append(chunk.beta.astype(fmt.SCORE_DTYPE))
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
    return ModelSummary(reader.words, reader.counts, joined(unigram_alpha), joined(unigram_beta), beta_tables,
                        source)


def joined(chunks: list[np.ndarray]) -> np.ndarray:
    """One array of the unigram scores read in ``chunks``."""
    return np.concatenate(chunks) if chunks else np.zeros(0, fmt.SCORE_DTYPE)


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
            reader, time_left = ArpaReader(model_path), TimeLeft(jobs)
            writer = IndexWriter(temp, reader.words, time_left, progress)
            try:
                model = _read_model(model_path, temp / RUNS_DIR, progress, workers, memory, joint_min, reader,
                                    writer, time_left)
                progress(f"read {len(model.counts)}-gram model: " + ", ".join(
                    f"{count:,} {order}-grams" for order, count in enumerate(model.counts, start=1)))
                writer.finish(model, joint_min)
            finally:
                writer.close()
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


__all__ = ["BuildSummary", "build_index", "default_index_path", "ModelFormatError"]
