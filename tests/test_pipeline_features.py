"""What users run after fastsubs, built in: --no-eos, --format jsonl, --sample, progress, API."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import pty
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import fastsubs
from conftest import BIN, DEMO_SENTENCES, demo_text, run_cli, run_on_a_terminal
from fastsubs.pipeline.textio import DEFAULT_LEVELS, open_binary
from fastsubs.query.progress import text_size

COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}

TEXT = b"the cat sat\ncat the\n\nthe dog sat\n"


def test_no_eos_is_the_output_without_eos_lines(tiny_index: Path) -> None:
    full = run_cli("fastsubs-query", tiny_index, input=TEXT).stdout.split(b"\n")
    without = run_cli("fastsubs-query", tiny_index, "--no-eos", input=TEXT).stdout.split(b"\n")
    assert without == [line for line in full if not line.startswith(b"</s>\t")]


def test_jsonl_carries_the_same_substitutes_as_text(tiny_index: Path) -> None:
    text = run_cli("fastsubs-query", tiny_index, "-n", "4", input=TEXT).stdout.decode().splitlines()
    records = [json.loads(line) for line in
               run_cli("fastsubs-query", tiny_index, "-n", "4", "--format", "jsonl", input=TEXT).stdout.splitlines()]
    assert len(records) == len(text)
    assert [(r["sentence"], r["position"]) for r in records] == [
        (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1), (2, 2), (3, 0), (4, 0), (4, 1), (4, 2), (4, 3)]
    for record, line in zip(records, text):
        word, *fields = line.split("\t")
        assert record["word"] == word
        assert [f"{s['word']} {s['lp']:.8f}" for s in record["substitutes"]] == fields
        assert abs(sum(s["p"] for s in record["substitutes"]) - 1) < 1e-9


def sample(index: Path, *options: str, text: bytes = TEXT) -> bytes:
    return run_cli("fastsubs-query", index, "--sample", "7", *options, input=text).stdout


def test_sampling_is_reproducible_and_independent_of_workers(demo_index: Path) -> None:
    text = demo_text(40)
    first = sample(demo_index, "--seed", "5", "-n", "20", text=text)
    assert sample(demo_index, "--seed", "5", "-n", "20", text=text) == first
    assert sample(demo_index, "--seed", "5", "-n", "20", "--workers", "2", text=text) == first
    assert sample(demo_index, "--seed", "6", "-n", "20", text=text) != first
    positions = sum(len(line.split()) + 1 for line in text.split(b"\n")[:-1])
    assert first.count(b"\n") == 7 * positions


def test_samples_follow_the_listed_probabilities(tiny_index: Path) -> None:
    """Many draws for one position: frequencies within 4 standard errors of p/Σp."""
    draws = 4000
    out = run_cli("fastsubs-query", tiny_index, "--no-eos", "-n", "5", "--sample", str(draws), "--seed", "1",
                  input=b"sat\n").stdout.decode().splitlines()
    counts = Counter(line.split("\t")[1] for line in out)
    with fastsubs.open_index(tiny_index) as index:
        listed = index.position(["sat"], 0, n=5)
    assert set(counts) <= {s.word for s in listed}
    for sub in listed:
        p = sub.probability
        tolerance = 4 * (p * (1 - p) / draws) ** 0.5 + 1e-9
        assert abs(counts[sub.word] / draws - p) <= tolerance, sub


def test_progress_is_drawn_on_a_terminal_only(demo_index: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(demo_text(60))
    command = [str(BIN / "fastsubs-query"), str(demo_index), "-n", "10", "-i", str(corpus), "-o", str(tmp_path / "o")]
    controller, terminal = pty.openpty()
    try:
        process = subprocess.run(command, stderr=terminal, timeout=300)
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    assert process.returncode == 0
    assert b"positions" in shown and b"/s" in shown and b"100.0%" in shown and b"ETA" in shown
    piped = subprocess.run(command, capture_output=True, timeout=300)
    assert piped.returncode == 0 and piped.stderr == b""


@pytest.mark.parametrize("compression", ["gz", "bz2", "xz"])
def test_a_compressed_input_shows_percent_and_eta_too(tiny_index: Path, tmp_path: Path, compression: str) -> None:
    corpus = tmp_path / f"corpus.txt.{compression}"
    corpus.write_bytes(COMPRESS[compression](TEXT * 200))
    status, shown = run_on_a_terminal("fastsubs-query", tiny_index, "-n", "3", "-i", corpus)
    last = shown.decode().split("\r")[-1]
    assert status == 0 and "100.0%" in last and "ETA" in last, last


@pytest.mark.parametrize("compression", ["gz", "bz2", "xz"])
def test_the_text_of_a_compressed_input_is_estimated_from_the_bytes_read(tmp_path: Path, compression: str) -> None:
    """The compressed bytes read so far and the text they gave, against the file's size."""
    rng = random.Random(7)
    words = [bytes(rng.choices(b"abcdefghij", k=rng.randint(1, 8))) for _ in range(3000)]
    text = b"".join(b" ".join(rng.choices(words, k=15)) + b"\n" for _ in range(40_000))
    corpus = tmp_path / f"corpus.txt.{compression}"
    # xz at its fastest preset: its default one takes 2 s over these 3 MB, all of it the
    # compressor's; a preset changes how much text a compressed byte holds, not how the
    # estimate follows the bytes the decompressor has read
    corpus.write_bytes(lzma.compress(text, preset=0) if compression == "xz" else COMPRESS[compression](text))
    with open_binary(corpus) as stream:
        estimate = text_size(stream)
        assert estimate is not None
        lines = iter(stream)
        for _ in range(30_000):
            next(lines)
        assert abs(estimate() / len(text) - 1) < 0.25  # type: ignore[operator]
        assert sum(1 for _ in lines) == 10_000
        assert estimate() == len(text)


@pytest.mark.parametrize(("compression", "low", "high"), [("gz", 1, 9), ("bz2", 1, 9), ("xz", 0, 9)])
def test_the_compression_level_is_the_one_asked_for(demo_index: Path, tmp_path: Path, compression: str,
                                                    low: int, high: int) -> None:
    """Every level gives the plain output, recorded in OUT.json; a higher level a smaller file;
    a level the format lacks, or a level for a plain output, is one line and no output."""
    corpus = tmp_path / "corpus.txt"
    # 10 KB of text, some 350 KB of output: enough for each format's higher level to make a
    # smaller file (xz's level 9 costs a second whatever the input: its dictionary's set-up)
    corpus.write_bytes(demo_text(DEMO_SENTENCES)[:10_000])
    plain = run_cli("fastsubs-query", demo_index, "-n", "20", "-i", corpus).stdout
    sizes = {}
    for level in (low, high, None):
        out = tmp_path / f"subs-{level}.txt.{compression}"
        run_cli("fastsubs-query", demo_index, "-n", "20", "-i", corpus, "-o", out,
                *(["--compress-level", str(level)] if level is not None else []))
        with open_binary(out) as stream:
            assert stream.read() == plain
        recorded = json.loads(Path(f"{out}.json").read_text())["compression"]
        assert recorded["kind"] == compression and recorded["level"] == (level if level is not None else
                                                                          DEFAULT_LEVELS[compression])
        sizes[level] = out.stat().st_size
    assert sizes[high] < sizes[low]
    for level, target in ((high + 1, f"bad.txt.{compression}"), (low - 1, f"bad.txt.{compression}"),
                          (high, "bad.txt")):
        refused = run_cli("fastsubs-query", demo_index, "-i", corpus, "-o", tmp_path / target,
                          "--compress-level", str(level), check=False)
        assert refused.returncode == 1 and refused.stderr.count(b"\n") == 1 and b"--compress-level" in refused.stderr
        assert not (tmp_path / target).exists()


def test_python_api_streams_sentences_as_frozen_substitutes(tiny_index: Path) -> None:
    with fastsubs.open_index(tiny_index) as index:
        assert index.order == 3 and index.vocab_size == 6
        results = index.sentences(["the cat sat", ["cat", "the"]], n=2)
        first = next(results)
        assert [[s.word for s in subs] for subs in first] == [["the", "cat"], ["cat", "</s>"], ["sat", "the"],
                                                               ["</s>", "the"]]
        sub = first[0][0]
        assert isinstance(sub, fastsubs.Substitute)
        with pytest.raises(AttributeError):  # immutable
            sub.word = "x"  # type: ignore[misc]
        assert sub == (sub.word, sub.logprob, sub.probability) and sub.logprob < 0 < sub.probability <= 1
        assert len(next(results)) == 3
        assert index.position(["the", "cat", "sat"], 3, p=0.5)[0].word == "</s>"
        with pytest.raises(ValueError):
            index.position(["the"], 2)


def test_using_a_closed_index_is_an_error_not_a_crash(tiny_index: Path) -> None:
    index = fastsubs.open_index(tiny_index)
    assert index.sentence("the cat", n=1)
    index.close()
    with pytest.raises(ValueError, match="closed"):
        index.sentence("the cat", n=1)


def test_a_negative_seed_is_a_usage_error(tiny_index: Path) -> None:
    result = run_cli("fastsubs-query", tiny_index, "--sample", "2", "--seed", "-1", check=False, input=b"a\n")
    assert result.returncode == 2 and b"Traceback" not in result.stderr
