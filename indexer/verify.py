"""``fastsubs-index verify``: reading a whole index and checking that it holds together.

Opening an index checks only what is cheap (metadata, magic, version, file size);
this reads every record and checks its checksum (fastsubs.format.record_checksum:
any flipped byte of a key or value shows), and checks a sample of records field by
field: ids sorted, distinct and inside the vocabulary, scores finite with log-probs
<= 0, the by-score order a permutation that really sorts alpha best first, the stored
largest back-off weight equal to the largest back-off weight.  Given the model, a sample
of n-grams is looked up and compared with the ARPA file.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fastsubs import format as fmt
from fastsubs.errors import DamagedIndexError, FastsubsError
from fastsubs.indexer.arpa import read_arpa
from fastsubs.query.index import Index, Pattern, lmdb_damage, parse_pattern

#: Score agreement between the float32 index and the model's decimal text.
SCORE_TOLERANCE = 1e-5
#: Records checksummed together.
RECORDS_PER_BATCH = 1 << 16
#: Every record at least this long (4-byte words), and this share of the others, is
#: also checked field by field (sorted ids, permutation, maxima): the checksums catch
#: damage, these catch a builder that wrote something wrong.
DEEP_CHECK_WORDS = 4096
DEEP_CHECK_SHARE = 0.01
#: Stop listing after this many problems.
MAX_PROBLEMS = 20


@dataclass
class VerifyReport:
    """What was checked; ``problems`` is empty for a sound index."""

    records: int = 0
    entries: int = 0
    deep_checked: int = 0
    sampled_ngrams: int = 0
    problems: list[str] = field(default_factory=list)


def _pattern_problems(pattern: Pattern, vocab_size: int) -> str | None:
    ids, alpha = pattern.ids, pattern.alpha
    if pattern.count == 0:
        return "empty pattern"
    if np.any(np.diff(ids.astype(np.int64)) <= 0):
        return "ids not strictly increasing"
    if int(ids[-1]) >= vocab_size:
        return "id outside the vocabulary"
    if not np.all(np.isfinite(alpha)) or np.any(alpha > 0):
        return "log-probability not finite or above 0"
    order = pattern.by_score.astype(np.int64)
    if pattern.count > 1:
        if not np.array_equal(np.sort(order), np.arange(pattern.count)):
            return "by-score order is not a permutation"
        if np.any(np.diff(alpha[order]) > 0):
            return "by-score order does not sort log-probabilities"
    if pattern.beta is not None:
        if not np.all(np.isfinite(pattern.beta)):
            return "back-off weight not finite"
        if float(pattern.beta.max()) != pattern.max_beta:
            return "stored largest back-off weight is wrong"
    return None


def _check_unigrams(index: Index, report: VerifyReport) -> None:
    alpha = index.unigram_alpha
    if not np.all(np.isfinite(alpha)) or np.any(alpha > 0) or not np.all(np.isfinite(index.unigram_beta)):
        report.problems.append("unigram scores are not finite log-probabilities")
    order = index.unigram_order.astype(np.int64)
    if not np.array_equal(np.sort(order), np.arange(index.vocab_size)) or np.any(np.diff(alpha[order]) > 0):
        report.problems.append("unigram order does not sort the vocabulary by log-probability")
    offsets = index.word_offsets
    if np.any(np.diff(offsets.astype(np.int64)) <= 0) or int(offsets[-1]) != len(index.word_bytes):
        report.problems.append("word table is inconsistent")


def _check_vocabulary(index: Index, report: VerifyReport) -> None:
    """Every word of the vocabulary database, spelled back by its id: one entry per word.

    Queries check the entries they read, but a flipped byte in an entry's key makes a
    word unknown without any entry being read; only a full pass sees it.
    """
    entries = 0
    for word, raw in index.iter_vocabulary():
        entries += 1
        word_id = int.from_bytes(raw, "little") if len(raw) == 4 else index.vocab_size
        if word_id >= index.vocab_size or index.word(word_id) != bytes(word):
            report.problems.append(f"vocabulary entry {bytes(word)!r} does not spell its word")
            return
    if entries != index.vocab_size:
        report.problems.append(f"vocabulary holds {entries:,} entries for {index.vocab_size:,} words")


def verify_records(index: Index, report: VerifyReport, progress: Callable[[str], None]) -> None:
    """Checksum every pattern record of every order; check the structure of a sample in depth."""
    _check_unigrams(index, report)
    _check_vocabulary(index, report)
    rng = random.Random(0)
    for order in range(2, index.order + 1):
        has_beta = order < index.order
        batch: list[tuple[bytes, bytes]] = []
        for key, value in index.iter_patterns(order):
            batch.append((bytes(key), bytes(value)))
            if len(batch) == RECORDS_PER_BATCH:
                _check_batch(batch, order, has_beta, index, report, rng)
                batch = []
            if len(report.problems) >= MAX_PROBLEMS:
                return
        if batch:
            _check_batch(batch, order, has_beta, index, report, rng)
        progress(f"checked the {order}-gram patterns ({report.records:,} records so far)")


def _check_batch(batch: list[tuple[bytes, bytes]], order: int, has_beta: bool, index: Index,
                 report: VerifyReport, rng: random.Random) -> None:
    key_length = 1 + index.id_bytes * (order - 1)
    where = f"{order}-gram pattern"
    sizes = np.array([len(value) for _, value in batch], dtype=np.int64)
    for (key, _), size in zip(batch, sizes.tolist()):
        if len(key) != key_length or key[0] >= order or size % 4 or fmt.pattern_count(size // 4, has_beta) is None:
            report.problems.append(f"{where} {key.hex()}: malformed key or value length")
            return
    words = np.frombuffer(b"".join(value for _, value in batch), dtype=fmt.ID_DTYPE)
    offsets = np.concatenate(([0], np.cumsum(sizes // 4)))
    keys = np.frombuffer(b"".join(key for key, _ in batch), dtype=np.uint8).reshape(len(batch), key_length)
    wrong = np.flatnonzero(fmt.batch_checksums(words, offsets, keys) != words[offsets[:-1]])
    for g in wrong[:MAX_PROBLEMS].tolist():
        report.problems.append(f"{where} {batch[g][0].hex()}: checksum mismatch (bytes flipped?)")
    report.records += len(batch)
    damaged = set(wrong.tolist())
    for g, (key, value) in enumerate(batch):
        if g in damaged:
            continue
        pattern_words = len(value) // 4
        if pattern_words < DEEP_CHECK_WORDS and rng.random() >= DEEP_CHECK_SHARE:
            continue
        report.deep_checked += 1
        try:
            pattern = parse_pattern(key, value, has_beta, index.vocab_size)
        except DamagedIndexError:
            report.problems.append(f"{where} {key.hex()}: word id or by-score position out of range")
            continue
        problem = _pattern_problems(pattern, index.vocab_size)
        if problem:
            report.problems.append(f"{where} {key.hex()}: {problem}")
    report.entries += int(sum(fmt.pattern_count(len(v) // 4, has_beta) or 0 for _, v in batch))


def verify_against_model(index: Index, model_path: Path, samples: int, report: VerifyReport,
                         progress: Callable[[str], None]) -> None:
    """Look up ``samples`` random n-grams of each order of the model in the index."""
    model = read_arpa(model_path)
    if [len(t.alpha) for t in model.tables] != index.meta["counts"]:
        report.problems.append(f"n-gram counts differ from {model_path}")
        return
    rng = random.Random(0)
    ids_of = {}
    for table in model.tables:
        rows = rng.sample(range(len(table.alpha)), min(samples, len(table.alpha)))
        for row in rows:
            words = tuple(model.words[i] for i in table.ids[row])
            for word in words:
                if word not in ids_of:
                    ids_of[word] = index.word_id(word)
            key = tuple(ids_of[w] for w in words)
            found = None if None in key else index.ngram(key)  # type: ignore[arg-type]
            report.sampled_ngrams += 1
            if found is None:
                report.problems.append(f"{model_path}:{table.lines[row]}: n-gram missing from the index")
            elif (abs(found[0] - table.alpha[row]) > SCORE_TOLERANCE
                  or abs(found[1] - table.beta[row]) > SCORE_TOLERANCE):
                report.problems.append(f"{model_path}:{table.lines[row]}: index holds {found}, model "
                                       f"({table.alpha[row]}, {table.beta[row]})")
        progress(f"compared {len(rows):,} sampled {table.order}-grams with the model")


def verify_index(index_path: Path, model_path: Path | None = None, samples: int = 1000,
                 progress: Callable[[str], None] = lambda _: None) -> VerifyReport:
    """Check ``index_path`` completely (and against ``model_path`` when given)."""
    report = VerifyReport()
    with Index(index_path) as index:
        try:
            verify_records(index, report, progress)
            if model_path is not None and not report.problems:
                verify_against_model(index, model_path, samples, report, progress)
        except FastsubsError:
            raise
        except Exception as error:  # lmdb.CorruptedError and kin: the B-tree itself is damaged
            raise lmdb_damage(index_path, error) from None
    return report
