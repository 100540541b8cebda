"""fastsubs-bench synth: synthetic ARPA models that the reader and the builder take, of a real model's shape."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fastsubs
from conftest import BIN, run_cli
from fastsubs.bench.arpa_text import synthesize
from fastsubs.bench.synth import KN4_64K, order_counts, parse_count
from fastsubs.errors import FastsubsError
from fastsubs.indexer.arpa import ArpaModel, read_arpa
from fastsubs.indexer.verify import verify_index

#: The models of these tests: (n-grams, order, unigrams).
SHAPES = {"4-gram": (200_000, 4, 5_000), "2-gram": (60_000, 2, 2_000), "5-gram": (150_000, 5, 3_000)}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("synth")
    made = {}
    for name, (ngrams, order, vocab) in SHAPES.items():
        made[name] = folder / f"{name}.arpa"
        synthesize(made[name], order_counts(ngrams, order, vocab), seed=1)
    return made


@pytest.fixture(scope="module")
def parsed(models: dict[str, Path]) -> dict[str, ArpaModel]:
    return {name: read_arpa(path) for name, path in models.items()}


def keys(ids: np.ndarray, vocab: int) -> np.ndarray:
    """One integer per n-gram (rows of word ids)."""
    assert vocab ** ids.shape[1] < 2**63
    return (ids.astype(np.int64) * vocab ** np.arange(ids.shape[1] - 1, -1, -1, dtype=np.int64)).sum(axis=1)


# --- the counts ---------------------------------------------------------------------------


def test_counts_follow_kn4_64k() -> None:
    assert order_counts(sum(KN4_64K), 4) == list(KN4_64K)
    counts = order_counts(100_000_000, 4, 512_000)
    assert sum(counts) == 100_000_000 and counts[0] == 512_000
    assert counts[2] / counts[1] == pytest.approx(KN4_64K[2] / KN4_64K[1], rel=1e-4)
    five = order_counts(1_000_000, 5, 10_000)
    assert sum(five) == 1_000_000 and five[4] / five[3] == pytest.approx(KN4_64K[3] / KN4_64K[2], rel=1e-3)


def test_counts_the_vocabulary_wins() -> None:
    assert order_counts(10_000, 3, 9_000) == [9_000, 272, 728]  # 271.6 and 728.4


@pytest.mark.parametrize("text, value", [("100M", 100_000_000), ("512K", 512_000), ("1.5g", 1_500_000_000),
                                         ("7", 7)])
def test_counts_take_suffixes(text: str, value: int) -> None:
    assert parse_count(text, "--ngrams") == value


@pytest.mark.parametrize("text", ["", "0", "1.5", "10x", "-3", "1.0001K"])
def test_counts_refuse_what_is_no_count(text: str) -> None:
    with pytest.raises(FastsubsError, match="--ngrams takes a whole number"):
        parse_count(text, "--ngrams")


# --- a valid model ------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHAPES)
def test_the_reader_takes_it_with_the_counts_asked(name: str, parsed: dict[str, ArpaModel]) -> None:
    ngrams, order, vocab = SHAPES[name]
    model = parsed[name]
    counts = [len(table.alpha) for table in model.tables]
    assert counts == order_counts(ngrams, order, vocab) and sum(counts) == ngrams and counts[0] == vocab
    assert model.words[:3] == [b"<unk>", b"<s>", b"</s>"]


def assert_every_ngram_once_and_every_prefix_an_ngram(model: ArpaModel) -> None:
    vocab = len(model.words)
    for lower, table in zip(model.tables, model.tables[1:]):
        assert len(np.unique(keys(table.ids, vocab))) == len(table.ids)
        assert np.isin(keys(table.ids[:, :-1], vocab), keys(lower.ids, vocab)).all()


@pytest.mark.parametrize("name", SHAPES)
def test_every_ngram_once_and_every_prefix_an_ngram(name: str, parsed: dict[str, ArpaModel]) -> None:
    assert_every_ngram_once_and_every_prefix_an_ngram(parsed[name])


def test_small_blocks_split_contexts_and_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 1,000 rows: many contexts have their continuations made in two blocks."""
    monkeypatch.setattr("fastsubs.bench.synth.BLOCK_ROWS", 1_000)
    counts = order_counts(40_000, 4, 1_000)
    synthesize(tmp_path / "small-blocks.arpa", counts)
    model = read_arpa(tmp_path / "small-blocks.arpa")
    assert [len(table.alpha) for table in model.tables] == counts
    assert_every_ngram_once_and_every_prefix_an_ngram(model)


@pytest.mark.parametrize("name", SHAPES)
def test_scores_are_plausible_and_backoffs_of_both_signs(name: str, parsed: dict[str, ArpaModel]) -> None:
    model = parsed[name]
    unigrams = model.tables[0]
    assert unigrams.alpha[1] == -99 and unigrams.beta[1] != 0  # <s>, a context
    assert (unigrams.alpha[[0, 2, *range(3, len(unigrams.alpha))]] > -10).all()
    for table in model.tables[1:]:
        assert (table.alpha >= -7.0001).all() and (table.alpha <= -0.0499).all()
    backoffs = np.concatenate([table.beta for table in model.tables[:-1]])
    negative, positive = (backoffs < 0).mean(), (backoffs > 0).mean()
    assert negative > 0.5 and 0.02 < positive < 0.15
    assert not model.tables[-1].beta.any()


def test_lines_are_written_as_kenlm_writes_them(models: dict[str, Path]) -> None:
    lines = models["4-gram"].read_bytes().split(b"\n")
    assert lines[:6] == [b"\\data\\", b"ngram 1=5000", b"ngram 2=26483", b"ngram 3=71007", b"ngram 4=97510", b""]
    assert lines[6] == b"\\1-grams:"
    unk, bos, eos = (line.split(b"\t") for line in lines[7:10])
    assert unk[1:] == [b"<unk>", b"0"] and bos[:2] == [b"-99.00000", b"<s>"] and eos[1:] == [b"</s>", b"0"]
    bigram = lines[lines.index(b"\\2-grams:") + 1].split(b"\t")
    assert len(bigram) == 3 and len(bigram[1].split(b" ")) == 2
    fourgram = lines[lines.index(b"\\4-grams:") + 1].split(b"\t")
    assert len(fourgram) == 2 and len(fourgram[1].split(b" ")) == 4
    assert lines[-3:] == [b"", b"\\end\\", b""]


def test_contexts_are_skewed_as_in_a_real_model(parsed: dict[str, ArpaModel]) -> None:
    """A few contexts with hundreds of continuations, most with one or two."""
    fourgrams = parsed["4-gram"].tables[3]
    _, continuations = np.unique(keys(fourgrams.ids[:, :3], 5_000), return_counts=True)
    assert continuations.max() >= 200 and np.mean(continuations <= 2) > 0.8


# --- the same seed, the same bytes ----------------------------------------------------------


def test_the_same_seed_gives_the_same_bytes(models: dict[str, Path], tmp_path: Path) -> None:
    again, other = tmp_path / "again.arpa", tmp_path / "other.arpa"
    synthesize(again, order_counts(*SHAPES["4-gram"]), seed=1)
    synthesize(other, order_counts(*SHAPES["4-gram"]), seed=2)
    assert again.read_bytes() == models["4-gram"].read_bytes()
    assert other.read_bytes() != again.read_bytes()
    assert read_arpa(other).tables[3].ids.shape == (97_510, 4)


@pytest.mark.parametrize("isal", [True, False], ids=["isal", "zlib"])
def test_gz_is_the_same_text_compressed_the_same_way_every_time(
        isal: bool, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not isal:
        monkeypatch.setitem(sys.modules, "isal", None)  # as where isal is not installed
    first, second = tmp_path / "first.arpa.gz", tmp_path / "second.arpa.gz"
    for path in (first, second):
        synthesize(path, order_counts(*SHAPES["2-gram"]), seed=1)
    assert gzip.decompress(first.read_bytes()) == models["2-gram"].read_bytes()
    assert first.read_bytes() == second.read_bytes()
    assert not list(tmp_path.glob(".*partial"))


# --- the index builder takes it -------------------------------------------------------------


@pytest.mark.parametrize("name", ["4-gram", "5-gram"])
def test_its_index_builds_and_verifies(name: str, models: dict[str, Path], tmp_path: Path) -> None:
    index = tmp_path / f"{name}.fsidx"
    summary = fastsubs.build_index(models[name], index)
    assert summary.counts == order_counts(*SHAPES[name])
    report = verify_index(index, models[name])
    assert report.problems == [] and report.sampled_ngrams > 0


# --- the command ----------------------------------------------------------------------------


def test_the_command_writes_the_model_and_says_so(models: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "model.arpa"
    result = run_cli("fastsubs-bench", "synth", out, "--ngrams", "60K", "--order", "2", "--vocab", "2K")
    assert out.read_bytes() == models["2-gram"].read_bytes()
    line, = result.stderr.decode().splitlines()
    assert line.startswith(f"wrote {out}: 60,000 n-grams (2,000 / 58,000), ")


@pytest.mark.parametrize("arguments, message", [
    (["--ngrams", "12x"], "--ngrams takes a whole number >= 1, with K, M or G (e.g. 100M), not '12x'"),
    (["--ngrams", "1M", "--vocab", "2M"], "--ngrams 1,000,000 leaves 0 n-grams above the 2,000,000 unigrams"),
    (["--ngrams", "1M", "--order", "1"], "--order takes 2 or more, not 1"),
    (["--ngrams", "10M", "--vocab", "100"], "2-grams cannot be made with 100 words"),
])
def test_bad_arguments_are_one_line(arguments: list[str], message: str, tmp_path: Path) -> None:
    out = tmp_path / "model.arpa"
    result = run_cli("fastsubs-bench", "synth", out, *arguments, check=False)
    assert result.returncode == 1
    line, = result.stderr.decode().splitlines()
    assert line.startswith("fastsubs-bench: error: ") and message in line
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    result = run_cli("fastsubs-bench", "synth", tmp_path / "no" / "model.arpa", "--ngrams", "1M", check=False)
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        f"fastsubs-bench: error: {tmp_path / 'no' / 'model.arpa'}: cannot write the model there "
        f"(no directory {tmp_path / 'no'})"]


# --- bounded memory -------------------------------------------------------------------------


def peak_kib(*arguments: str | Path) -> int:
    """Peak resident memory (KiB) of one run of fastsubs-bench, measured by a parent of its own."""
    code = ("import resource, subprocess, sys\n"
            "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    result = subprocess.run([sys.executable, "-c", code, str(BIN / "fastsubs-bench"), *map(str, arguments)],
                            capture_output=True, check=True, timeout=600)
    return int(result.stdout)


@pytest.mark.slow
def test_memory_stays_bounded_whatever_the_size(tmp_path: Path) -> None:
    """Ten times the n-grams, the same memory: nothing grows with the model."""
    small = peak_kib("synth", tmp_path / "small.arpa.gz", "--ngrams", "500K", "--vocab", "64K")
    big = peak_kib("synth", tmp_path / "big.arpa.gz", "--ngrams", "5M", "--vocab", "64K")
    assert big < 256 * 1024, f"peak {big} KiB"
    assert big - small < 32 * 1024, f"peak {small} KiB for 500K n-grams, {big} KiB for 5M"
