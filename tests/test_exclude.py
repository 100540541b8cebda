"""--exclude / exclude=: excluded words are never substitutes, and each list is still the exact
top of the other words, -p included: compared with the exhaustive scorer's ranking with the
excluded words taken out (and V counting only the others, as the -p rule and the cap do)."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsubs
from arpa_gen import arpa_models, sentences
from conftest import demo_oracle, demo_sentences, run_cli
from exhaustive import BOS, ArpaModel
from test_exactness import assert_exact

LIMITS = [(1, None), (3, None), (100, None), (None, 0.5), (5, 0.9), (None, 0.99)]


def restricted(oracle: ArpaModel, tokens: list[str], position: int, excluded: set[str],
               limits: list[tuple[int | None, float | None]]) -> list[list[tuple[str, float]]]:
    """The oracle's list over the words not excluded, for each of ``limits`` (n, p): the
    position scored once, its ranking cut for each."""
    ranked = [item for item in oracle.ranked(oracle.substitute_scores(tokens, position)) if item[0] not in excluded]
    others = len(oracle.vocab) - len(excluded & set(oracle.vocab) - {BOS})
    return [oracle.cut(ranked, n, p, vocab_size=others) for n, p in limits]


@st.composite
def model_sentences_and_exclusions(draw):
    model = draw(arpa_models(max_order=4))
    tokens = draw(st.lists(sentences(model), min_size=1, max_size=2))
    excluded = draw(st.sets(st.sampled_from(model.vocab + ["not-a-word"]), max_size=len(model.vocab)))
    return model, tokens, excluded


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_sentences_and_exclusions())
def test_excluded_words_are_skipped_by_the_search(case) -> None:
    model, sentence_list, excluded = case
    oracle = ArpaModel.from_text(model.text).stored_as_float32()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "model.arpa").write_text(model.text)
        fastsubs.build_index(Path(tmp) / "model.arpa", Path(tmp) / "model.fsidx")
        with fastsubs.open_index(Path(tmp) / "model.fsidx") as index, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "not-a-word"
            for tokens in sentence_list:
                for position in range(len(tokens) + 1):
                    expected = restricted(oracle, tokens, position, excluded, LIMITS)
                    for (n, p), listed in zip(LIMITS, expected):
                        assert_exact(index.position(tokens, position, n=n, p=p, exclude=sorted(excluded)), listed,
                                     f"{tokens} position {position} n={n} p={p} excluding {sorted(excluded)}")


def test_demo_model_without_its_best_words_equals_exhaustive(demo_index: Path) -> None:
    """A real model, every position of a sentence, without the markers, punctuation and the
    five best words of the first position (so the exclusion bites where the search starts)."""
    oracle = demo_oracle()
    tokens = next(line.split() for line in demo_sentences(20) if len(line.split()) >= 10)[:10]
    best = [word for word, _ in oracle.ranked(oracle.substitute_scores(tokens, 0))[:5]]
    excluded = {"</s>", "<unk>", ".", ",", "the", *best}
    with fastsubs.open_index(demo_index) as index:
        limits = [(1, None), (100, None), (None, 0.5), (50, 0.9)]
        for position in range(len(tokens) + 1):
            expected = restricted(oracle, tokens, position, excluded, limits)
            for (n, p), listed in zip(limits, expected):
                ours = index.position(tokens, position, n=n, p=p, exclude=excluded)
                assert not excluded & {s.word for s in ours}
                assert_exact(ours, listed, f"{tokens} {position} n={n} p={p}")


def test_cli_exclude_options_equal_the_api(demo_index: Path, tmp_path: Path) -> None:
    lines = demo_sentences(4)
    listed = tmp_path / "excluded.txt"
    listed.write_text("<unk>\n\n  .  \n,\nno-such-word\n")
    result = run_cli("fastsubs-query", demo_index, "-n", "20", "--exclude", "</s>", "--exclude", "the",
                     "--exclude-from", listed, input="\n".join(lines).encode() + b"\n")
    assert result.stderr.decode().splitlines() == [
        "fastsubs-query: warning: excluded word 'no-such-word' is not in the model's vocabulary"]
    excluded = ["</s>", "the", "<unk>", ".", ",", "no-such-word"]
    with fastsubs.open_index(demo_index) as index, pytest.warns(UserWarning, match="'no-such-word'"):
        expected = [[f"{s.word} {s.logprob:.8f}" for s in subs]
                    for line in lines for subs in index.sentence(line, n=20, exclude=excluded)]
    rows = [row.split("\t")[1:] for row in result.stdout.decode().splitlines()]
    assert rows == expected and all(len(row) == 20 for row in rows)


def test_a_bad_exclude_file_is_one_line_naming_it(tiny_index: Path, tmp_path: Path) -> None:
    listed = tmp_path / "excluded.txt"
    listed.write_text("cat\nthe sat\n")
    result = run_cli("fastsubs-query", tiny_index, "--exclude-from", listed, input=b"the cat\n", check=False)
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode().splitlines() == [f"fastsubs-query: error: {listed}:2: expected one word, found 2"]
    missing = run_cli("fastsubs-query", tiny_index, "--exclude-from", tmp_path / "none.txt", input=b"the\n",
                      check=False)
    assert missing.returncode == 1 and len(missing.stderr.decode().splitlines()) == 1
    assert "none.txt" in missing.stderr.decode()


def test_excluding_every_word_lists_nothing(tiny_index: Path) -> None:
    with fastsubs.open_index(tiny_index) as index:
        vocabulary = ["<unk>", "<s>", "</s>", "the", "cat", "sat"]
        assert index.sentence("the cat", exclude=vocabulary) == [[], [], []]
        assert [s.word for s in index.position(["the"], 0, n=10, exclude=vocabulary[:-1])] == ["sat"]
        # the next search, without exclusions, has every word back
        assert len(index.position(["the"], 0, n=10)) == len(vocabulary) - 1
