"""The search equals exhaustive scoring: random back-off models against the plain oracle.

Hypothesis draws models of orders 1-6 with back-off weights of both signs, with and
without ``<unk>`` (and sometimes without ``<s>``/``</s>``), words only seen as unigrams
and n-grams whose lower orders are missing; then sentences with unknown words.  For
every position and several limits, the engine's list must equal the oracle's: the oracle
reads the model's numbers as float32, as the index stores them, and sums in float64 in
the definition's order (docs/algorithm.md, "Rounding"), so the lists are equal word for
word and score for score, ties (lowest word id first) included.  Models of 300-3,000 words: test_exactness_at_scale.py.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsubs
from arpa_gen import arpa_models, arpa_text, sentences
from exhaustive import ArpaModel

LIMITS = [(1, None), (3, None), (10, None), (100, None), (None, 0.5), (5, 0.9), (None, 0.99)]


def _bits(score: float) -> bytes:
    return struct.pack("<d", score)


def assert_exact(ours: list[fastsubs.Substitute], expected: list[tuple[str, float]], where: str) -> None:
    """The same words in the same order (ties lowest id first) with the same scores, bit for bit
    (compared as their bytes: ``-0.0 == 0.0`` and NaN != NaN would hide a difference)."""
    got = [(sub.word, sub.logprob) for sub in ours]
    if [(word, _bits(score)) for word, score in got] != [(word, _bits(score)) for word, score in expected]:
        rank = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        raise AssertionError(f"{where}: {len(got)} listed, exhaustive lists {len(expected)}; first difference at "
                             f"rank {rank}: {got[rank:rank + 3]} vs {expected[rank:rank + 3]}")


def check_model(text: str, sentence_list: list[list[str]]) -> None:
    oracle = ArpaModel.from_text(text).stored_as_float32()
    with tempfile.TemporaryDirectory() as tmp:
        model_path = Path(tmp) / "model.arpa"
        model_path.write_text(text)
        fastsubs.build_index(model_path, Path(tmp) / "model.fsidx", joint_min=1)
        with fastsubs.open_index(Path(tmp) / "model.fsidx") as index:
            for tokens in sentence_list:
                for position in range(len(tokens) + 1):
                    ranked = oracle.ranked(oracle.substitute_scores(tokens, position))
                    for n, p in LIMITS:
                        where = f"{tokens} position {position} n={n} p={p}"
                        assert_exact(index.position(tokens, position, n=n, p=p), oracle.cut(ranked, n, p), where)


@st.composite
def model_and_sentences(draw, max_order: int = 6):
    model = draw(arpa_models(max_order=max_order))
    return model, draw(st.lists(sentences(model), min_size=1, max_size=3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_sentences())
def test_search_equals_exhaustive_scoring(case) -> None:
    model, sentence_list = case
    check_model(model.text, sentence_list)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_sentences())
def test_search_equals_exhaustive_scoring_long_run(case) -> None:
    model, sentence_list = case
    check_model(model.text, sentence_list)


def bigram_model(folder: Path, unigrams: list[str], bigrams: list[str]) -> tuple[str, Path]:
    """A small hand-written bigram model's text, and its index built in ``folder``."""
    text = "\n".join(["\\data\\", f"ngram 1={len(unigrams)}", f"ngram 2={len(bigrams)}", "", "\\1-grams:",
                      *unigrams, "", "\\2-grams:", *bigrams, "", "\\end\\", ""])
    (folder / "model.arpa").write_text(text)
    fastsubs.build_index(folder / "model.arpa", folder / "model.fsidx", joint_min=1)
    return text, folder / "model.fsidx"


def fillers(alpha: str, beta: str, count: int = 100) -> list[str]:
    """Unigram lines of words read before the ones a test is about: a search reads at
    least MIN_BATCH (24) words in its first batch, so in a smaller model it would read
    every word and the bound would never be tested."""
    return [f"{alpha}\tf{i}\t{beta}" for i in range(count)]


def test_positive_backoff_weights_are_bounded_correctly(tmp_path: Path) -> None:
    """The paper's bound (beta <= 0) would miss 'b' here: its positive back-off lifts it.

    In "x c", p(c | x) backs off through beta(x).  Word b has the lowest unigram alpha
    (read last) but a large positive beta(b), so lp(b) = alpha(b) + beta(b) + alpha(c)
    = -1.5 beats every other word (c and </s>: -2; the fillers: -2.9; a, whose n-gram
    "a c" is listed but poor: -3.5).  Bounding beta(x) by 0 would stop the search at -2.
    """
    text, index_path = bigram_model(tmp_path, ["-99\t<s>\t0", "-1\t</s>", "-0.5\ta\t0", *fillers("-1.9", "0"),
                                               "-2\tb\t1.5", "-1\tc\t0"],
                                    ["-3\ta c", "-0.5\t<s> a"])
    check_model(text, [["a", "c"], ["c"]])
    with fastsubs.open_index(index_path) as index:
        assert index.position(["a", "c"], 0, n=1)[0].word == "b"


def test_positive_backoff_weights_of_patterns_are_bounded_correctly(tmp_path: Path) -> None:
    """The same for beta(A x B): in "<s> a x c </s>", p(c | a x) backs off through
    beta(a x), stored in the pattern "a _".  b has the poorest n-gram "a b" (read after
    the 100 fillers "a f") but beta(a b) = 3, so lp(b) = alpha(a b) + beta(a b) +
    alpha(c) + const = -1 + const beats every filler (-2 + const).  Bounding beta(a x)
    by 0 would list a filler first."""
    unigrams = ["-99\t<s>\t0", "-1\t</s>", "-1\ta\t0", "-1\tc\t0", *fillers("-1.9", "0"), "-2\tb\t0"]
    bigrams = ["-0.5\t<s> a\t0", *[f"-1\ta f{i}" for i in range(100)], "-3\ta b\t3", "-0.5\tc </s>"]
    trigrams = ["-0.3\t<s> a c"]
    text = "\n".join(["\\data\\", f"ngram 1={len(unigrams)}", f"ngram 2={len(bigrams)}", f"ngram 3={len(trigrams)}",
                      "", "\\1-grams:", *unigrams, "", "\\2-grams:", *bigrams, "", "\\3-grams:", *trigrams, "",
                      "\\end\\", ""])
    (tmp_path / "model.arpa").write_text(text)
    fastsubs.build_index(tmp_path / "model.arpa", tmp_path / "model.fsidx", joint_min=1)
    check_model(text, [["a", "c", "c"]])
    with fastsubs.open_index(tmp_path / "model.fsidx") as index:
        assert index.position(["a", "c", "c"], 1, n=1)[0].word == "b"



def pair_split_model(n_low: int, n_rare: int, n_pad: int = 0) -> tuple[list[str], list[str]]:
    """The unigram and bigram lines of a model where "a _ d" needs the class split: b is in
    both "a _" (below its 100 fillers and above ``n_low`` low words) and "_ d" (below
    ``n_rare`` rare words), and scores -2, above all (the fillers: -4).  ``n_pad`` more
    words, unigrams alone below every other, only make the vocabulary bigger."""
    # (ids in this order: no word of "_ d" but b is next to a word of "a _" in the rank map)
    unigrams = ["-99\t<s>\t0", "-1\t</s>", "-1\ta\t0", *[f"-6\tr{i}\t0" for i in range(n_rare)], "-6\tz\t0",
                "-3\td\t0",
                *fillers("-1.9", "0"), *[f"-6\tg{i}\t0" for i in range(n_low)], "-5\tb\t0",
                *[f"-9\tp{i}\t0" for i in range(n_pad)]]
    bigrams = ["-0.5\t<s> a\t0", *[f"-1\ta f{i}" for i in range(100)], "-1.5\ta b",
               *[f"-4\ta g{i}" for i in range(n_low)], *[f"-0.1\tr{i} d" for i in range(n_rare)], "-0.5\tb d",
               "-2\tz d", "-0.5\td </s>"]
    return unigrams, bigrams


@pytest.mark.parametrize("n_low, n_rare", [(0, 20), (200, 256)])
def test_words_of_a_pattern_in_d_are_bounded_by_their_pair_list(tmp_path: Path, n_low: int, n_rare: int) -> None:
    """The class split of the joint bound (docs/algorithm.md, "The class split"): in "a _ d"
    (pair_split_model), the words of "a _" are bounded in term 1 by its pair list, which
    holds b alone; a pair list without b would bound them by term 1's constant, and once
    the fillers are read the search would list them, b unread.  Without low words the pair
    list's order is made whole by look-ups; with 200 more words in "a _" (below b), it is big
    and "_ d"'s order is scanned against its rank map, b the first entry of the scan's
    second step (z after it), the order kept with "_ d" (under budgets from none to
    ample)."""
    text, index_path = bigram_model(tmp_path, *pair_split_model(n_low, n_rare))
    check_model(text, [["a", "b", "d"]])
    with fastsubs.open_index(index_path) as index:
        for budget in (0, 1 << 11, 1 << 13, 24 << 20):
            index._core.set_cache(1 << 17, budget)
            for _ in range(2):  # the order made, then found kept
                assert index.position(["a", "b", "d"], 1, n=10)[0].word == "b", budget


def test_a_pair_scan_of_a_vocabulary_past_a_million_words_tests_membership_bits(tmp_path: Path) -> None:
    """Past 2^20 words a pattern is big (a rank map, no membership bit) only from V / 4,096
    words on (is_big, searcher.h).  With 1.3M words, "a _" of 301 words is past
    PAIR_DIRECT, so "_ d"'s order is scanned for its words, and not big, so the scan tests
    its membership bit in the search's flags (holds, lists.c): a path that no vocabulary
    under 2^20 words takes.  b, the one word of both, is found by that bit or the search
    lists the fillers (as in the test above; the exhaustive scorer over 1.3M words is too
    slow for the default suite, and b's -2 against the fillers' -4 is the model's own)."""
    n_low, words_of_a = 200, 100 + 200 + 1  # "a _": the fillers, the low words, b
    _, index_path = bigram_model(tmp_path, *pair_split_model(n_low, 256, n_pad=(1 << 20) + (1 << 18)))
    with fastsubs.open_index(index_path) as index:
        assert 256 < words_of_a < index.vocab_size // 4096  # past PAIR_DIRECT, not big
        listed = index.position(["a", "b", "d"], 1, n=10)
    assert (listed[0].word, listed[0].logprob, listed[1].logprob) == ("b", -2.0, -4.0)


def test_unknown_words_back_off_through_their_known_context() -> None:
    """A model without <unk>: in "<s> a b zz </s>" (zz unknown), p(zz | x b) = beta(x b)
    + beta(b) - 100 for every x at the first position.  beta(b) is the same for all x, so
    only the scores, not the order, show whether it was added: the oracle's must be met
    exactly (so also one unknown word after another, and one right after x)."""
    text = arpa_text([["-99\t<s>\t0", "-1\t</s>", "-1\ta\t-0.25", "-1.5\tb\t0.5", "-2\tc\t0"],
                      ["-0.5\t<s> a\t0", "-0.5\ta b\t0.25", "-0.75\tc b\t0"],
                      ["-0.25\t<s> a b"]])
    assert ArpaModel.from_text(text).logprob("zz", ["a", "b"]) == 0.25 + 0.5 - 100  # the case is the one meant
    check_model(text, [["a", "b", "zz"], ["c", "b", "zz", "yy"], ["b", "zz"]])

def test_demo_model_sentences_equal_exhaustive(demo_index: Path) -> None:
    """A real model (the demo's 20K words, Kneser-Ney): every position of a few sentences
    drawn from it, against the oracle."""
    from conftest import demo_oracle, demo_sentences

    oracle = demo_oracle()
    lines = demo_sentences(4)
    with fastsubs.open_index(demo_index) as index:
        for line in lines:
            tokens = line.split()[:12]
            for position in range(len(tokens) + 1):
                ranked = oracle.ranked(oracle.substitute_scores(tokens, position))
                for n, p in [(1, None), (100, None), (1000, None), (None, 0.5)]:
                    assert_exact(index.position(tokens, position, n=n, p=p), oracle.cut(ranked, n, p),
                                 f"{tokens} {position} n={n} p={p}")


def test_bound_covers_float32_rounding_of_positive_backoffs(tmp_path: Path) -> None:
    """beta(b) = 0.3 is stored as 0.30000001192 (float32 rounds it up): the bound on the
    unigram back-off must be the stored maximum, not the decimal one, or b — which ties
    a exactly (-1.19999998808) and has the lower id — is passed over for the single best
    substitute while the fillers (higher unigram alpha, far lower scores) are read."""
    text, index_path = bigram_model(tmp_path, ["-99\t<s>\t0", "-1\t</s>", *fillers("-0.4", "-5"), "-0.5\tb\t0.3",
                                               "-2\ta\t0", "-2\tc\t0"],
                                    ["-0.199999988\t<s> a", "-3\tc </s>"])
    check_model(text, [["a"]])
    with fastsubs.open_index(index_path) as index:
        best = index.position(["a"], 0, n=2)
    assert [s.word for s in best] == ["b", "a"] and best[0].logprob == best[1].logprob


def test_assert_exact_tells_minus_zero_from_zero() -> None:
    """(The check is only as good as its comparison.)"""
    listed = [fastsubs.Substitute("a", -0.0, 1.0)]
    assert_exact(listed, [("a", -0.0)], "same")
    with pytest.raises(AssertionError):
        assert_exact(listed, [("a", 0.0)], "signs differ")


def test_a_score_of_minus_zero_keeps_its_sign_in_the_oracle_and_the_search() -> None:
    """A unigram of log-probability -0.0 (probability 1), alone at the </s> position of a
    unigram model: the definition's sum of one term is that term, -0.0, and so is the
    search's; an oracle adding from 0.0 would say 0.0."""
    text = "\\data\\\nngram 1=4\n\n\\1-grams:\n-0.0\tcat\n-1.0\t</s>\n-99\t<s>\n-2.0\tdog\n\n\\end\\\n"
    oracle = ArpaModel.from_text(text).stored_as_float32()
    scores = oracle.substitute_scores(["dog"], 1)
    assert struct.pack("<d", scores["cat"]) == struct.pack("<d", -0.0)
    check_model(text, [["dog"], ["cat", "dog"]])
