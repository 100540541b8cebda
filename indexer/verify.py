"""``fastsubs-index verify``: reading a whole index and checking that it holds together.

Opening an index checks its header, its whole-vocabulary arrays and its metadata (the
checksums the header gives), and a search checks each record it reads.  This reads every
record of every order through the same C core: each record's checksum, that records
chain and keys ascend, and every pattern field by field (ids strictly increasing and in
the vocabulary, positions by score a permutation that sorts the scores, scores finite
log-probabilities); then that the records and n-grams add up to what the header
declares, and that the unigram and spelling orders sort the vocabulary.  Given the model,
a sample of n-grams is looked up and compared with the ARPA file.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fastsubs.core import Core
from fastsubs.errors import DamagedIndexError
from fastsubs.indexer.arpa import read_arpa

#: Score agreement between the float32 index and the model's decimal text.
SCORE_TOLERANCE = 1e-5


@dataclass
class VerifyReport:
    """What was checked; ``problems`` is empty for a sound index."""

    records: int = 0
    patterns: int = 0
    sampled_ngrams: int = 0
    problems: list[str] = field(default_factory=list)


def verify_records(index: Core, report: VerifyReport, progress: Callable[[str], None]) -> None:
    """Check every record of every order, and the arrays the open takes on trust."""
    index.check_arrays()
    for order in range(2, index.order + 1):
        records, patterns, entries = index.check_patterns(order)
        report.records += records
        report.patterns += patterns
        declared_records = index.records[order - 2]
        # each n-gram of the order is in one pattern per slot
        declared_entries = order * index.counts[order - 1]
        if records != declared_records or entries != declared_entries:
            report.problems.append(f"patterns{order} holds {records:,} records and {entries:,} entries; the "
                                   f"header declares {declared_records:,} and {declared_entries:,}")
        progress(f"checked the {order}-gram patterns ({report.records:,} records so far)")


def verify_against_model(index: Core, model_path: Path, samples: int, report: VerifyReport,
                         progress: Callable[[str], None]) -> None:
    """Look up ``samples`` random n-grams of each order of the model in the index."""
    model = read_arpa(model_path)
    if [len(t.alpha) for t in model.tables] != list(index.counts):
        report.problems.append(f"n-gram counts differ from {model_path}")
        return
    rng = random.Random(0)
    ids_of: dict[bytes, int | None] = {}
    for table in model.tables:
        rows = rng.sample(range(len(table.alpha)), min(samples, len(table.alpha)))
        for row in rows:
            words = tuple(model.words[i] for i in table.ids[row])
            for word in words:
                if word not in ids_of:
                    ids_of[word] = index.word_id(word)
            key = tuple(ids_of[w] for w in words)
            found = None if None in key else index.ngram(key)
            report.sampled_ngrams += 1
            if found is None:
                report.problems.append(f"{model_path}:{table.lines[row]}: n-gram missing from the index")
            elif not (_agree(found[0], table.alpha[row]) and _agree(found[1], table.beta[row])):
                report.problems.append(f"{model_path}:{table.lines[row]}: index holds {found}, model "
                                       f"({table.alpha[row]}, {table.beta[row]})")
        progress(f"compared {len(rows):,} sampled {table.order}-grams with the model")


def _agree(stored: float, model: float) -> bool:
    """Whether the index's value is the model's, within SCORE_TOLERANCE: -inf (log10 of 0,
    which KenLM writes) equals only itself, compared as such (-inf minus -inf is NaN, and
    numpy warns of it on stderr)."""
    return bool(stored == model or abs(stored - model) <= SCORE_TOLERANCE)


def verify_index(index_path: Path, model_path: Path | None = None, samples: int = 1000,
                 progress: Callable[[str], None] = lambda _: None) -> VerifyReport:
    """Check ``index_path`` completely (and against ``model_path`` when given).  An index
    that does not even open raises what opening raises.  The problems found are said of
    the index, without its path."""
    report = VerifyReport()
    with Core(index_path) as index:
        try:
            verify_records(index, report, progress)
        except DamagedIndexError as damage:  # named with the index's path, which the report's reader gives
            report.problems.append(str(damage).removeprefix(f"{index_path}: "))
        if model_path is not None and not report.problems:
            verify_against_model(index, model_path, samples, report, progress)
    return report
