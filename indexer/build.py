"""Compiling an ARPA model into an LMDB index (see :mod:`fastsubs.format` for the layout).

The build writes into a temporary directory beside the target and publishes it with
one atomic rename only when every record and the metadata are on disk, so a build that
fails or is killed never leaves a partial index at the target.  What a killed build
leaves beside it (its temporary directory, named with its process id) is removed by
the next build of the same target; a full disk is reported as such.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import lmdb
import msgpack
import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import FastsubsError, IndexExistsError, ModelFormatError
from fastsubs.indexer.arpa import ArpaReader, NgramTable
from fastsubs.indexer.completeness import check_count, check_opens, check_unigram_arrays
from fastsubs.indexer.patterns import check_no_duplicates, iter_records, pattern_records
from fastsubs.indexer.publish import check_replaceable, make_temp_dir, publish, remove_stale_temp_dirs, remove_tree
from fastsubs.indexer.runs import SortedRuns, merged_blocks

#: Subdirectory of the build's temporary directory holding the sorted runs until written.
_RUNS_DIR = "runs"

#: Address space reserved for the LMDB map while building; the file grows only as written.
BUILD_MAP_SIZE = 1 << 40

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildSummary:
    """What a build produced, for the closing summary line."""

    index: Path
    counts: list[int]
    index_bytes: int
    seconds: float


@dataclass
class _SortedModel:
    """A model read once: vocabulary and unigrams in memory, higher orders as sorted runs on disk."""

    words: list[bytes]
    counts: list[int]
    unigrams: NgramTable
    runs: list[SortedRuns]  # orders 2..N

    @property
    def order(self) -> int:
        return len(self.counts)


#: Seconds between two progress lines while one section of the model is read.
READ_PROGRESS_SECONDS = 3.0


def _read_model(model_path: Path, directory: Path, progress: Progress) -> _SortedModel:
    """Parse the model, spilling each higher order to ``directory`` as runs sorted for every slot.

    Reading a big model takes a while (~40 s for 11M n-grams), so progress hears of
    each section as it starts and then every READ_PROGRESS_SECONDS, with the lines
    read so far.
    """
    directory.mkdir()
    reader = ArpaReader(model_path)
    unigram_chunks: list[NgramTable] = []  # a vocabulary past BATCH_LINES words comes in several
    runs: dict[int, SortedRuns] = {}
    section, read, reported = 0, 0, 0.0
    for chunk in reader:
        read = read + len(chunk.lines) if chunk.order == section else len(chunk.lines)
        now = time.monotonic()
        if chunk.order != section or now - reported >= READ_PROGRESS_SECONDS:
            progress(f"reading the {chunk.order}-grams: {read:,} of {reader.counts[chunk.order - 1]:,}")
            section, reported = chunk.order, now
        if chunk.order == 1:
            unigram_chunks.append(chunk)
        else:
            runs.setdefault(chunk.order, SortedRuns(directory, chunk.order)).add(chunk)
    for order_runs in runs.values():
        order_runs.flush()
    return _SortedModel(reader.words, reader.counts, NgramTable.concatenate(unigram_chunks), list(runs.values()))


def default_index_path(model: Path) -> Path:
    """``model.arpa.gz`` -> ``model.fsidx`` beside it."""
    name = model.name
    for suffix in (".gz", ".bz2", ".xz", ".arpa", ".lm"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return model.with_name(name + ".fsidx")


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _silent(_: str) -> None:
    pass


def build_index(
    model_path: str | os.PathLike[str],
    index_path: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    progress: Progress = _silent,
) -> BuildSummary:
    """Build the index of the ARPA model at ``model_path``; returns a summary.

    Raises :class:`IndexExistsError` when ``index_path`` exists and ``force`` is
    false, :class:`TargetNotAnIndexError` when it holds anything but a fastsubs index
    (never replaced, whatever ``force``), :class:`ModelFormatError` for a malformed model.
    """
    started = time.monotonic()
    model_path = Path(model_path)
    target = Path(index_path) if index_path is not None else default_index_path(model_path)
    if target.exists() or target.is_symlink():
        check_replaceable(target)
        if not force:
            raise IndexExistsError(target)
    remove_stale_temp_dirs(target.parent)
    try:
        temp = make_temp_dir(target)
    except OSError as error:
        raise FastsubsError(f"{target}: cannot create the index there ({error.strerror or error})") from None
    try:
        progress(f"reading {model_path}")
        model = _read_model(model_path, temp / _RUNS_DIR, progress)
        progress(f"read {model.order}-gram model: " + ", ".join(
            f"{count:,} {order}-grams" for order, count in enumerate(model.counts, start=1)))
        _write_environment(temp, model, model_path, progress)
        remove_tree(temp / _RUNS_DIR)
        (temp / "lock.mdb").unlink(missing_ok=True)
        check_opens(temp)
        publish(temp, target)
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
    size = sum(f.stat().st_size for f in target.iterdir() if f.is_file())
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


def _write_environment(directory: Path, model: _SortedModel, model_path: Path, progress: Progress) -> None:
    vocab_size = len(model.words)
    id_bytes = fmt.id_bytes_for(vocab_size)
    env = lmdb.open(str(directory), map_size=BUILD_MAP_SIZE, max_dbs=model.order + 3,
                    sync=False, metasync=False, writemap=False)
    try:
        with env.begin(write=True) as txn:
            array_checksums = _write_vocabulary(env, txn, model)
        for runs in model.runs:
            db = env.open_db(fmt.patterns_db_name(runs.order))
            has_beta = runs.order < model.order
            for slot in range(runs.order):
                written = ngrams = 0
                # One transaction per merged block: LMDB's dirty pages stay bounded too.
                for rows in merged_blocks(runs.files[slot], runs.order):
                    ngrams += len(rows)
                    if slot == runs.order - 1:  # the slot last: rows in n-gram order
                        check_no_duplicates(rows, runs.order, str(model_path), model.words)
                    keys, key_length, values, offsets = pattern_records(rows, slot, has_beta, id_bytes)
                    with env.begin(write=True, db=db) as txn, txn.cursor() as cursor:
                        cursor.putmulti(iter_records(keys, key_length, values, offsets), append=True)
                    written += len(offsets) - 1
                check_count(f"{runs.order}-grams with the slot at {slot + 1}", ngrams, model.counts[runs.order - 1])
                progress(f"wrote {written:,} patterns of {runs.order}-grams with the slot at {slot + 1}")
        meta = {**_metadata(model, model_path, vocab_size, id_bytes), fmt.ARRAY_CHECKSUMS: array_checksums}
        with env.begin(write=True, db=env.open_db(fmt.META_DB)) as txn:
            txn.put(fmt.META_KEY, msgpack.packb(meta))
        env.sync(True)
    finally:
        env.close()


def _write_vocabulary(env: lmdb.Environment, txn: lmdb.Transaction, model: _SortedModel) -> dict[str, int]:
    """Write the vocabulary and the whole-vocabulary arrays; returns the arrays' CRC-32s for the metadata."""
    vocab_db = env.open_db(fmt.VOCAB_DB, txn=txn)
    ordered = sorted(range(len(model.words)), key=model.words.__getitem__)
    with txn.cursor(db=vocab_db) as cursor:
        cursor.putmulti(((model.words[i], i.to_bytes(4, "little")) for i in ordered), append=True)
    unigrams = model.unigrams
    alpha = unigrams.alpha.astype(fmt.SCORE_DTYPE)
    arrays = {
        fmt.UNIGRAM_ALPHA: alpha,
        fmt.UNIGRAM_BETA: unigrams.beta.astype(fmt.SCORE_DTYPE),
        fmt.UNIGRAM_ORDER: np.lexsort((np.arange(len(alpha)), -alpha)).astype(fmt.ID_DTYPE),
        fmt.WORD_OFFSETS: np.concatenate(([0], np.cumsum([len(w) for w in model.words]))).astype(fmt.OFFSET_DTYPE),
    }
    check_count("words", len(model.words), model.counts[0])
    check_unigram_arrays(arrays, len(model.words))
    values = {key: array.tobytes() for key, array in arrays.items()}
    values[fmt.WORD_BYTES] = b"".join(model.words)
    arrays_db = env.open_db(fmt.ARRAYS_DB, txn=txn)
    for key, value in values.items():
        txn.put(key, value, db=arrays_db)
    return {key.decode(): zlib.crc32(value) for key, value in values.items()}


def _metadata(model: _SortedModel, model_path: Path, vocab_size: int, id_bytes: int) -> dict[str, object]:
    index_of = {w: i for i, w in enumerate(model.words)}
    unk = index_of.get(b"<unk>")
    stat = model_path.stat()
    return {
        "magic": fmt.MAGIC,
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
        "source": {"name": model_path.name, "size": stat.st_size, "sha256": _file_digest(model_path)},
        "build": {"fastsubs_format": fmt.FORMAT_VERSION, "python": sys.version.split()[0],
                  "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
    }


__all__ = ["BuildSummary", "build_index", "default_index_path", "ModelFormatError"]
