"""``fastsubs-index verify``: reading a whole index and checking that it holds together.

Opening an index checks only what is cheap (metadata, magic, version, file size);
this walks every record: each pattern value must parse, its ids must be sorted,
distinct and inside the vocabulary, its scores finite with log-probs <= 0, its
by-score order a permutation that really sorts alpha best first, and its stored
largest back-off weight must match its back-off weights.  Given the model, a sample
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
from fastsubs.query.index import Index, Pattern, parse_pattern

#: Score agreement between the float32 index and the model's decimal text.
SCORE_TOLERANCE = 1e-5


@dataclass
class VerifyReport:
    """What was checked; ``problems`` is empty for a sound index."""

    records: int = 0
    entries: int = 0
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


def verify_records(index: Index, report: VerifyReport, progress: Callable[[str], None]) -> None:
    """Walk every pattern record of every order."""
    _check_unigrams(index, report)
    for order in range(2, index.order + 1):
        key_length = 1 + index.id_bytes * (order - 1)
        for key, value in index.iter_patterns(order):
            report.records += 1
            where = f"{order}-gram pattern {bytes(key).hex()}"
            if len(key) != key_length or key[0] >= order:
                report.problems.append(f"{where}: malformed key")
                continue
            try:
                pattern = parse_pattern(value)
            except DamagedIndexError as error:
                report.problems.append(f"{where}: {error}")
                continue
            report.entries += pattern.count
            if (pattern.beta is not None) != (order < index.order):
                report.problems.append(f"{where}: back-off weights where none belong (or missing)")
            problem = _pattern_problems(pattern, index.vocab_size)
            if problem:
                report.problems.append(f"{where}: {problem}")
            if len(report.problems) >= 20:
                return
        progress(f"checked the {order}-gram patterns ({report.records:,} records so far)")


def verify_against_model(index: Index, model_path: Path, samples: int, report: VerifyReport,
                         progress: Callable[[str], None]) -> None:
    """Look up ``samples`` random n-grams of each order of the model in the index."""
    from fastsubs.indexer.arpa import read_arpa

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
            key = tuple(ids_of.setdefault(w, index.word_id(w)) for w in words)
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
            raise DamagedIndexError(f"{index_path}: damaged index ({type(error).__name__}: {error})") from None
    return report
