"""Vocabularies past the reader's chunk size build, open and search exactly.

The reader hands every section over in chunks of ``BATCH_LINES`` rows; a builder that
kept one chunk of the unigrams once published indexes of big-vocabulary models that no
query could open.  These tests build models whose sections cross chunk boundaries (a
real 140,003-word model, and small models read with small chunks and sorted in small
runs), compare every answer with the exhaustive scorer, and show that the checks a
build makes before publishing turn a builder fault into an error with nothing published.
A back-off table past 65,536 values, whose codes take 24 bits, searches exactly too.
"""

from __future__ import annotations

from pathlib import Path

import lmdb
import pytest

import fastsubs
from conftest import run_cli, shared
from exhaustive import ArpaModel
from exhaustive_vectorized import VectorizedOracle
from fastsubs import format as fmt
from fastsubs.bench.arpa_text import synthesize
from fastsubs.bench.synth import order_counts
from fastsubs.core import Core
from fastsubs.errors import BuildCheckError
from fastsubs.indexer import arpa, build, runs, slots
from fastsubs.indexer.publish import TEMP_PREFIX
from generated_models import model_sentences, write_model

TOLERANCE = 1e-6
def assert_equals_exhaustive(index_path: Path, model_path: Path, sentences: list[list[str]],
                             limits: list[tuple[int | None, float | None]]) -> int:
    """Every position of ``sentences`` under every limit equals the exhaustive scorer; returns positions.

    Same length, the same score rank by rank, and every listed word scored as the
    scorer scores it (so only exact ties may come in another order).
    """
    oracle = VectorizedOracle(ArpaModel.from_file(str(model_path)), sentences)
    positions = 0
    with fastsubs.open_index(index_path) as index:
        assert index.vocab_size == len(oracle.model.vocab)
        for tokens in sentences:
            for position in range(len(tokens) + 1):
                positions += 1
                ranking = oracle.ranking(tokens, position)
                for n, p in limits:
                    where = f"{tokens} position {position} n={n} p={p}"
                    expected = ranking.listed(n, p)
                    ours = index.position(tokens, position, n=n, p=p)
                    assert len(ours) == len(expected), f"{where}: {len(ours)} listed, exhaustive {len(expected)}"
                    for rank, (sub, (word, score)) in enumerate(zip(ours, expected)):
                        assert abs(sub.logprob - score) <= TOLERANCE, f"{where}: rank {rank}: {sub} vs {word} {score}"
                        exact = ranking.score(sub.word)
                        assert abs(exact - sub.logprob) <= TOLERANCE, f"{where}: {sub} is scored {exact}"
                    assert len({s.word for s in ours}) == len(ours), f"{where}: a word is listed twice"
    return positions


#: -p alone lists most of a flat random model's vocabulary: the big models cap it with -n.
LIMITS = [(1, None), (10, None), (100, None), (None, 0.9), (5, 0.5)]
BIG_LIMITS = [(1, None), (10, None), (100, None), (300, 0.9), (5, 0.5)]


def test_vectorized_scorer_equals_the_plain_one(tmp_path: Path) -> None:
    """The fast oracle used below scores every candidate exactly as the plain oracle does."""
    model_path = tmp_path / "model.arpa"
    write_model(model_path, 400, [900, 700, 300], seed=1, hubs=3)
    model = ArpaModel.from_file(str(model_path))
    sentences = model_sentences(model, 6, seed=2)
    oracle = VectorizedOracle(model, sentences)
    for tokens in sentences:
        for position in range(len(tokens) + 1):
            plain = model.substitute_scores(tokens, position)
            vectorized = oracle.scores(tokens, position)
            assert [plain[w] for w in oracle.candidates] == vectorized.tolist(), f"{tokens} position {position}"


def test_a_vocabulary_past_the_chunk_size_builds_and_searches_exactly(tmp_path: Path) -> None:
    """140,003 words: the unigram section comes in two chunks and every array must hold them all."""
    vocab_size = arpa.BATCH_LINES + 9_000
    model_path = tmp_path / "big.arpa"
    write_model(model_path, vocab_size, [6_000, 3_000], seed=3)
    summary = fastsubs.build_index(model_path, tmp_path / "big.fsidx")
    assert summary.counts[0] == vocab_size
    model = ArpaModel.from_file(str(model_path))
    sentences = model_sentences(model, 6, seed=4)
    sentences.append(["w140000", "w139999", "w131072", "w131071"])  # words of the second chunk
    assert assert_equals_exhaustive(tmp_path / "big.fsidx", model_path, sentences, BIG_LIMITS) >= 30


def test_back_off_codes_of_24_bits_search_exactly(tmp_path: Path) -> None:
    """A generated model gives every context a random back-off weight: 600K n-grams of order 3
    make a table of over 65,536 2-gram weights, so the big patterns' codes take 24 bits
    (format.h), read by the search's loop of that width and by verify."""
    model_path, index_path = tmp_path / "synth.arpa", tmp_path / "synth.fsidx"
    synthesize(model_path, order_counts(600_000, 3), seed=5)
    fastsubs.build_index(model_path, index_path)
    with Core(index_path) as index:
        vocab_size = index.vocab_size
    env = lmdb.open(str(index_path), readonly=True, lock=False, max_dbs=fmt.MAX_ORDER + 2)
    with env.begin(db=env.open_db(fmt.patterns_db_name(2), create=False)) as txn:
        widths = {pattern["beta_width"] for key, value in txn.cursor() if key[0] != fmt.END_KEY_BYTE
                  for pattern in fmt.decode_record(key, value, 2, vocab_size, True)["patterns"]}
    env.close()
    assert 24 in widths
    model = ArpaModel.from_file(str(model_path))
    trigrams = sorted(gram for gram in model.ngrams if len(gram) == 3 and "<s>" not in gram and "</s>" not in gram)
    sentences = model_sentences(model, 4, seed=6) + [list(gram) for gram in trigrams[::len(trigrams) // 4][:4]]
    assert assert_equals_exhaustive(index_path, model_path, sentences, [(1, None), (10, None), (100, None)]) >= 20
    assert run_cli("fastsubs-index", "verify", index_path, model_path).returncode == 0


def test_a_section_ends_where_it_does_at_every_chunk_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sections end at a run of blank lines (whitespace alone included) or at the next
    section's heading, wherever a chunk starts or ends, even on its last line: chunks of
    every size up to the longest section read the model as the plain parser does."""
    model_path = tmp_path / "model.arpa"
    write_model(model_path, 40, [30, 20], seed=7, hubs=2)
    sections = model_path.read_text().split("\n\\")
    # before the headings of the 1-, 2- and 3-grams and \end\: one blank line, blank lines
    # (some of whitespace alone), and none at all
    gaps = ["\n\n", "\n\n  \n", "\n\t\n\n", "\n"]
    text = sections[0].rstrip("\n") + "".join(gap + "\\" + section.rstrip("\n")
                                               for gap, section in zip(gaps, sections[1:])) + "\n"
    model_path.write_text(text)
    expected = ArpaModel.from_file(str(model_path)).ngrams
    for batch_lines in range(1, 45):
        monkeypatch.setattr(arpa, "BATCH_LINES", batch_lines)
        model = arpa.read_arpa(model_path)
        read = {tuple(model.words[i].decode() for i in row): (alpha, beta) for table in model.tables
                for row, alpha, beta in zip(table.ids.tolist(), table.alpha.tolist(), table.beta.tolist())}
        assert read.keys() == expected.keys(), batch_lines
        for key, (alpha, beta) in read.items():
            assert (alpha, beta) == pytest.approx(expected[key], abs=1e-6), (batch_lines, key)


#: Python 3.12+ warns when a process with threads forks; a pytest-xdist worker has one (its
#: channel's), so the builds below that fork their jobs in the test's own process say so.
FORK_IN_XDIST = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")


@FORK_IN_XDIST
@pytest.mark.parametrize("vocab_size", [700, 70_000])
def test_every_section_read_in_chunks_and_sorted_in_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         vocab_size: int) -> None:
    """Small chunk, run and merge sizes make every section of a small model cross their
    boundaries, in jobs of their own: the index holds what one job's whole-order sort
    writes, record for record (a slot's blocks do not end where its batches do), and
    searches exactly.  With 70,000 words the ids take 3 bytes, packed so in the spills
    and runs."""
    model_path = tmp_path / "model.arpa"
    write_model(model_path, vocab_size, [1_500, 1_200, 800], seed=5, hubs=4)
    fastsubs.build_index(model_path, tmp_path / "whole.fsidx")
    monkeypatch.setattr(arpa, "BATCH_LINES", 97)
    monkeypatch.setattr(build, "run_rows", lambda *_: 211)
    monkeypatch.setattr(runs, "MERGE_ROWS", 300)
    monkeypatch.setattr(runs, "MERGE_RUN_ROWS", 16)  # a slot encoded in batches of a few patterns
    monkeypatch.setattr(slots, "FILE_BYTES", 3000)  # a slot's records in many files, appended as they come
    fastsubs.build_index(model_path, tmp_path / "model.fsidx", jobs=3)
    assert index_records(tmp_path / "model.fsidx") == index_records(tmp_path / "whole.fsidx")
    model = ArpaModel.from_file(str(model_path))
    assert assert_equals_exhaustive(tmp_path / "model.fsidx", model_path, model_sentences(model, 10, seed=6),
                                    LIMITS) >= 20


@FORK_IN_XDIST
def test_a_repeated_ngram_in_another_run_is_named_with_both_lines(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An n-gram given again far from its first line (in another sorted run) is refused
    naming both lines, as within one run."""
    model_path = tmp_path / "model.arpa"
    write_model(model_path, 300, [600, 500], seed=11, hubs=2)
    lines = model_path.read_text().splitlines()
    first = lines.index("\\3-grams:") + 1
    last = lines.index("\\end\\") - 1
    while not lines[last]:
        last -= 1
    score, ngram, *_ = lines[first].split("\t")
    lines[last] = f"{score}\t{ngram}"
    model_path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(build, "run_rows", lambda *_: 97)
    monkeypatch.setattr(runs, "MERGE_ROWS", 60)  # the spill searched again for its lines, in chunks
    with pytest.raises(fastsubs.ModelFormatError) as refused:
        fastsubs.build_index(model_path, tmp_path / "model.fsidx", jobs=2)
    assert str(refused.value) == (f"{model_path}:{last + 1}: expected each 3-gram once, found '{ngram}' again "
                                  f"(first on line {first + 1})")


def index_records(index: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every record of every database but the metadata (whose build details differ)."""
    env = lmdb.open(str(index), readonly=True, lock=False, max_dbs=64)
    try:
        with env.begin() as txn:
            names = [name for name, _ in txn.cursor() if name != b"meta"]
            return {name: list(txn.cursor(db=env.open_db(name, txn=txn, create=False))) for name in names}
    finally:
        env.close()


def assert_build_refused(tmp_path: Path, seed: int, says: str) -> None:
    """Building a small model fails its checks with ``says``; nothing is published, nothing left behind."""
    model_path = tmp_path / "model.arpa"
    write_model(model_path, 300, [400], seed=seed, hubs=1)
    with pytest.raises(BuildCheckError, match=says):
        fastsubs.build_index(model_path, tmp_path / "model.fsidx")
    assert not (tmp_path / "model.fsidx").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)], "a temporary directory is left"


def test_a_builder_that_loses_unigram_chunks_publishes_nothing(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The old fault (only the last chunk of the unigrams kept) is caught before publishing."""
    monkeypatch.setattr(arpa, "BATCH_LINES", 97)
    monkeypatch.setattr(build, "joined", lambda chunks: chunks[-1])
    assert_build_refused(tmp_path, 7, "unigram_alpha, the model.s header declares 300")


def test_a_builder_that_loses_ngrams_publishes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows lost between the sorted runs and the database are counted and refused."""
    sorted_blocks = slots.sorted_blocks

    def without_the_first_row(*args):
        for number, rows in enumerate(sorted_blocks(*args)):
            yield rows[1:] if number == 0 else rows

    monkeypatch.setattr(slots, "sorted_blocks", without_the_first_row)
    assert_build_refused(tmp_path, 8, "399 2-grams with the slot at 1, the model's header declares 400")


def test_an_index_that_would_not_open_is_not_published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A header that disagrees with the arrays fails the final open, so the build publishes nothing."""
    encode_header = build.fmt.encode_header

    def wrong_vocabulary_size(fields):
        return encode_header({**fields, "vocab_size": fields["vocab_size"] + 1})

    monkeypatch.setattr(build.fmt, "encode_header", wrong_vocabulary_size)
    assert_build_refused(tmp_path, 9, "does not open")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_real_chunk_boundary_of_every_section(tmp_path: Path) -> None:
    """A 3-gram model whose every section is longer than the reader's chunk (real sizes)."""
    size = arpa.BATCH_LINES + 5_000
    model_path = tmp_path / "model.arpa"
    write_model(model_path, size, [size, size], seed=10)
    run_cli("fastsubs-index", "build", model_path, "-o", tmp_path / "model.fsidx", "-q")
    model = ArpaModel.from_file(str(model_path))
    assert assert_equals_exhaustive(tmp_path / "model.fsidx", model_path, model_sentences(model, 10, seed=11),
                                    BIG_LIMITS) >= 20


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_kn4_338k_equals_exhaustive_on_held_out_text(tmp_path: Path) -> None:
    """The 338,528-word model against the exhaustive scorer on a few hundred held-out positions."""
    model_path = shared("kn4-338k-pruned.arpa.gz")
    run_cli("fastsubs-index", "build", model_path, "-o", tmp_path / "338k.fsidx", "-q")
    lines = shared("heldout-dev.txt").read_text().splitlines()[:24]
    positions = assert_equals_exhaustive(tmp_path / "338k.fsidx", model_path, [line.split() for line in lines],
                                         [(100, None), (1000, 0.9)])  # -p alone lists ~23K a position
    assert positions >= 250  # 290: a few hundred
