"""Models that KenLM reads: a back-off weight of 0 on the highest order (the no-op its
build_binary accepts) and log-probabilities of ``-inf`` (log10 of 0).

``-inf`` is kept as -inf (never a huge negative number): the search stays exact against
the exhaustive scorer (a score of -inf sorts last, ties by id), the text output writes
``-inf`` as Python's ``%.8f`` does, JSON lines write ``null`` (JSON has no -inf), ``p`` is
0, and ``verify`` takes the stored -inf as the model's."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

import fastsubs
from arpa_gen import arpa_text
from conftest import TEST_DATA, run_cli
from exhaustive import ArpaModel
from fastsubs.core import Core
from generated_models import model_sentences, write_model
from test_exactness import assert_exact

TINY = (TEST_DATA / "tiny.arpa").read_text()


def with_minus_infinity(text: str, rate: float, seed: int) -> str:
    """``text`` with the log-probability of about ``rate`` of its n-grams (not <s>'s) made -inf."""
    rng = random.Random(seed)
    lines = []
    for line in text.split("\n"):
        fields = line.split("\t")
        if len(fields) >= 2 and re.fullmatch(r"-?[\d.]+", fields[0]) and fields[1] != "<s>" and rng.random() < rate:
            fields[0] = "-inf"
        lines.append("\t".join(fields))
    return "\n".join(lines)


def built(tmp_path: Path, name: str, text: str) -> tuple[Path, Path]:
    model = tmp_path / f"{name}.arpa"
    model.write_text(text)
    fastsubs.build_index(model, tmp_path / f"{name}.fsidx")
    return model, tmp_path / f"{name}.fsidx"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_minus_infinity_keeps_the_search_exact(tmp_path: Path, seed: int) -> None:
    """A generated model (ties, back-off weights of both signs, 256+-word patterns) with a
    tenth of its unigrams and n-grams at -inf: every list, to the whole vocabulary, equals
    the exhaustive scorer's, word for word and score for score, -inf ties by id."""
    plain = tmp_path / "plain.arpa"
    write_model(plain, 300, [2500, 1500], seed, hub_fanout=280)
    text = with_minus_infinity(plain.read_text(), 0.1, seed)
    assert text.count("-inf") > 300
    oracle = ArpaModel.from_text(text).stored_as_float32()
    _, index_path = built(tmp_path, "model", text)
    with fastsubs.open_index(index_path) as index:
        whole = index.vocab_size - 1
        for tokens in model_sentences(oracle, 6, seed):
            for position in range(len(tokens) + 1):
                ranked = oracle.ranked(oracle.substitute_scores(tokens, position))
                assert any(score == -math.inf for _, score in ranked)
                for n, p in [(10, None), (None, 0.9), (whole, None)]:
                    assert_exact(index.position(tokens, position, n=n, p=p), oracle.cut(ranked, n, p),
                                 f"{tokens} position {position} n={n} p={p}")


def test_minus_infinity_is_stored_as_such_and_verified(tmp_path: Path) -> None:
    """On a unigram and on n-grams (the 2-grams read in C, in bulk): stored as -inf, and
    verify compares them with the model's without a complaint."""
    text = (TINY.replace("-1.2\tsat\t-0.125", "-inf\tsat\t-0.125")
            .replace("-0.5\tthe cat\t0.5", "-inf\tthe cat\t0.5").replace("-0.1\tthe cat sat", "-Infinity\tthe cat sat"))
    model, index_path = built(tmp_path, "model", text)
    with Core(index_path) as core, fastsubs.open_index(index_path) as index:
        ids = {word: core.word_id(word) for word in ("the", "cat", "sat")}
        assert core.ngram((ids["the"], ids["cat"]))[0] == -math.inf
        assert core.ngram((ids["the"], ids["cat"], ids["sat"]))[0] == -math.inf
        assert [s.logprob for s in index.position(["the", "cat", "sat"], 2, n=5)][-1] == -math.inf
    result = run_cli("fastsubs-index", "verify", index_path, model, "--samples", "100")
    assert b"problem" not in result.stdout.lower() and result.returncode == 0
    assert result.stderr == b""  # (no numpy RuntimeWarning from -inf minus -inf)


def test_minus_infinity_in_every_format(tmp_path: Path) -> None:
    """Text writes -inf as %.8f does; JSON lines null (valid JSON for strict parsers) with
    p 0; the Parquet rows -inf; -z leaves out what has no probability."""
    text = TINY.replace("-1.2\tsat\t-0.125", "-inf\tsat\t-0.125")
    _, index_path = built(tmp_path, "model", text)
    source = tmp_path / "in.txt"
    source.write_bytes(b"the cat sat\n")
    plain = run_cli("fastsubs-query", index_path, "-n", "5", "-i", source).stdout.decode().splitlines()
    assert plain[0].split("\t")[-1] == f"sat {'%.8f' % -math.inf}" == "sat -inf"
    lines = run_cli("fastsubs-query", index_path, "-n", "5", "--format", "jsonl", "-i", source).stdout.splitlines()
    last = json.loads(lines[0], parse_constant=lambda name: pytest.fail(f"not JSON: {name}"))["substitutes"][-1]
    assert last == {"word": "sat", "lp": None, "p": 0.0}
    normalized = run_cli("fastsubs-query", index_path, "-n", "5", "-z", "-i", source).stdout.decode()
    assert "sat" not in normalized.splitlines()[0].split("\t", 1)[1]
    pq = pytest.importorskip("pyarrow.parquet")
    run_cli("fastsubs-query", index_path, "-n", "5", "--format", "parquet", "-i", source, "-o", tmp_path / "out")
    assert pq.read_table(tmp_path / "out").to_pylist()[0]["lp"][-1] == -math.inf


def test_a_position_where_every_score_is_minus_infinity(tmp_path: Path) -> None:
    """Every candidate at -inf (a unigram model of zeros and -infs): listed by id, each p 0."""
    text = arpa_text([["-inf\t<unk>", "-99\t<s>", "-inf\t</s>", "-inf\ta", "-inf\tb"]])
    _, index_path = built(tmp_path, "model", text)
    with fastsubs.open_index(index_path) as index:
        listed = index.position(["a"], 0, n=10)
    assert [(s.word, s.logprob, s.probability) for s in listed] == [
        (word, -math.inf, 0.0) for word in ("<unk>", "</s>", "a", "b")]



def test_sample_draws_nothing_where_every_score_is_minus_infinity(tmp_path: Path) -> None:
    """Where every listed score is -inf, every p / sum p is 0: --sample has no mass to draw
    in proportion to and draws nothing there, in every format, as where nothing is listed
    (not the first substitute, from 0/0); -z lists nothing there (docs/output-formats.md).
    Elsewhere a substitute of -inf among finite ones is never drawn."""
    text = arpa_text([["-inf\t<unk>", "-99\t<s>", "-inf\t</s>", "-inf\ta", "-inf\tb"]])
    _, index_path = built(tmp_path, "model", text)
    source = tmp_path / "in.txt"
    source.write_bytes(b"a b\n")
    sample = ["-n", "3", "--sample", "5", "-i", source]
    assert run_cli("fastsubs-query", index_path, *sample).stdout == b""
    objects = [json.loads(line) for line in run_cli("fastsubs-query", index_path, *sample, "--format", "jsonl")
               .stdout.splitlines()]
    assert [(o["word"], o["samples"]) for o in objects] == [("a", []), ("b", []), ("</s>", [])]
    normalized = run_cli("fastsubs-query", index_path, "-n", "3", "-z", "-i", source).stdout
    assert normalized == b"a\t\nb\t\n</s>\t\n"
    pq = pytest.importorskip("pyarrow.parquet")
    run_cli("fastsubs-query", index_path, *sample, "--format", "parquet", "-o", tmp_path / "out")
    assert [row["samples"] for row in pq.read_table(tmp_path / "out").to_pylist()] == [[], [], []]

    _, partly = built(tmp_path, "partly", TINY.replace("-1.2\tsat\t-0.125", "-inf\tsat\t-0.125"))
    lines = run_cli("fastsubs-query", partly, "-n", "5", "--sample", "200", "-i", source).stdout.splitlines()
    assert len(lines) == 3 * 200 and not [line for line in lines if line.endswith(b"\tsat")]


def zero_weights_on_the_highest_order(text: str) -> str:
    """``text`` with a back-off weight of 0 or -0 (alternately) on every n-gram of its highest order."""
    highest = max(int(n) for n in re.findall(r"^ngram (\d+)=", text, re.M))
    section = re.search(rf"\\{highest}-grams:\n(.*?)\n\n", text, re.S)
    assert section is not None
    lines = section.group(1).split("\n")
    weighted = "\n".join(f"{line}\t{'0' if i % 2 else '-0'}" for i, line in enumerate(lines))
    return text[:section.start(1)] + weighted + text[section.end(1):]


@pytest.mark.parametrize("model", ["tiny", "generated", "unigrams"])
def test_a_zero_weight_on_the_highest_order_is_the_model_without_it(tmp_path: Path, model: str) -> None:
    """The same model with and without 0/-0 weights on its highest order (read in C in
    bulk for 2-grams and up, line by line for a unigram model): the same answers."""
    if model == "tiny":
        text = TINY
    elif model == "generated":
        write_model(tmp_path / "generated.arpa", 200, [1200, 800], 5)
        text = (tmp_path / "generated.arpa").read_text()
    else:
        text = arpa_text([["-1\t<unk>", "-99\t<s>", "-0.5\t</s>", "-0.7\tthe", "-1.5\tcat"]])
    weighted = zero_weights_on_the_highest_order(text)
    assert weighted != text
    _, plain_index = built(tmp_path, "plain", text)
    _, weighted_index = built(tmp_path, "weighted", weighted)
    source = tmp_path / "in.txt"
    source.write_bytes(b"the cat sat\ncat the w1 w2 w3\n<unk> the\n")
    answers = [run_cli("fastsubs-query", index, "-n", "50", "--format", "jsonl", "-i", source).stdout
               for index in (plain_index, weighted_index)]
    assert answers[0] == answers[1] and answers[0]
