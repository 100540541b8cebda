"""The search equals exhaustive scoring on models big enough for every path of the kernel.

``tests/test_exactness.py`` draws models of at most ~30 words.  The kernel changes its
ways from 256 words in a pattern on (``RANK_MIN_COUNT`` in ``kernel/search.c``: rank
maps instead of binary searches, the read part of a sorted list kept in score order
between searches, both evicted least recently used beyond a byte budget), reads words
in batches of up to 128, and stops long before V when K is small.  Here hypothesis draws
models of 300-3,000 words whose hub contexts hold 200-900 words in every slot, with
positive and negative back-off weights, few distinct numbers (so many exact ties) and
decimals whose float32 is above them; K runs from 1 to V - 1, with and without ``-p``,
under a cache budget of 0 (no maps, no kept prefixes), a tiny one (evicting between and
during searches) and a large one.

Past 65,536 words a big pattern sparser than V/256 gets a two-level rank map instead:
one model of 70,000 words covers that path.

The oracle reads the model with every number rounded to float32, as the index stores
it, and sums in float64 in the engine's order, so the lists must be *equal*: the same
words in the same order (ties lowest word id first) with the same scores, bit for bit.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsubs
from arpa_gen import BigModelShape, big_models
from exhaustive import ArpaModel
from fastsubs.bench.reference_terms import Pattern, TermBuilder
from fastsubs.core import Core
from fastsubs.tokens import tokenize
from test_exactness import assert_exact

#: The kernel's cache budgets (bytes): none, room for a few rank maps and prefixes of a
#: 3,000-word model (so keeping one evicts another), room for everything.
BUDGETS = {"no cache": 0, "tiny cache": 2500, "large cache": 1 << 30}

#: Patterns from this many words on take the kernel's big-pattern paths (RANK_MIN_COUNT).
BIG_PATTERN = 256
#: The cache slots of a searcher (kernel/engine.h).
DEFAULT_SLOTS = 1 << 17

Limit = tuple[int | None, float | None]


def limits_for(vocab_size: int, drawn_k: int) -> list[Limit]:
    """K = 1, the batch sizes' edges, a drawn K, V - 2 and V - 1 (everything); -p alone
    and with -n."""
    most = vocab_size - 1
    counts = sorted({1, 2, 23, 24, 25, 63, 64, 65, 100, 257, min(drawn_k, most), most - 1, most})
    return [(k, None) for k in counts] + [(None, 0.5), (None, 0.99), (20, 0.9), (most, 0.999)]


def check_big_model(shape: BigModelShape, drawn_k: int, limits: list[Limit] | None = None,
                    built: tuple[str, list[str], list[list[str]]] | None = None,
                    index_path: Path | None = None) -> None:
    """``built``, ``index_path``: what ``shape.build()`` gives and its index, where the caller
    has them already (built with ``joint_min=1``, as here)."""
    text, vocab, sentences = built or shape.build()
    oracle = ArpaModel.from_text(text).stored_as_float32()
    limits = limits or limits_for(len(vocab), drawn_k)
    expected: dict[tuple[int, int, Limit], list[tuple[str, float]]] = {}
    for number, tokens in enumerate(sentences):
        for position in range(len(tokens) + 1):
            ranked = oracle.ranked(oracle.substitute_scores(tokens, position))
            for limit in limits:
                expected[number, position, limit] = oracle.cut(ranked, *limit)
    with tempfile.TemporaryDirectory() as tmp:
        if index_path is None:
            (Path(tmp) / "model.arpa").write_text(text)
            index_path = Path(tmp) / "model.fsidx"
            fastsubs.build_index(Path(tmp) / "model.arpa", index_path, joint_min=1)
        for budget_name, budget in BUDGETS.items():
            # opened afresh: what an earlier budget kept must not serve this one
            with fastsubs.open_index(index_path) as index:
                index._core.set_cache(DEFAULT_SLOTS, budget)  # the core the API searches with
                for (number, position, (n, p)), listed in expected.items():
                    assert_exact(index.position(sentences[number], position, n=n, p=p), listed,
                                 f"{budget_name}, {sentences[number]} position {position} n={n} p={p}")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(big_models(max_words=1500), st.integers(1, 3000))
def test_search_equals_exhaustive_scoring_on_big_models(shape: BigModelShape, drawn_k: int) -> None:
    check_big_model(shape, drawn_k)


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(big_models(), st.integers(1, 3000))
def test_search_equals_exhaustive_scoring_on_big_models_long_run(shape: BigModelShape, drawn_k: int) -> None:
    check_big_model(shape, drawn_k)


def position_pattern_sizes(index_path: Path, lines: list[str]) -> list[list[int]]:
    """Per position of ``lines``, the sizes of the patterns its terms read (the reference
    term builder builds the chains the kernel builds)."""
    with Core(index_path) as index:
        builder = TermBuilder(index)
        found = []
        for line in lines:
            ids = tuple(memoryview(index.sentence_ids(tokenize(line.encode()))).cast("I").tolist())
            found += [[len(pattern.ids) for term in builder.position_terms(ids, target) for step in term.steps
                       for pattern in (step.alpha, step.beta) if isinstance(pattern, Pattern)]
                      for target in range(1, len(ids))]
    return found


def pattern_sizes(index_path: Path, lines: list[str]) -> list[int]:
    return [size for sizes in position_pattern_sizes(index_path, lines) for size in sizes]


def sparse_hub_bigram(text: str, vocab_size: int) -> list[str]:
    """Words ``h x`` of a bigram with a nonzero back-off weight whose pattern ``h _`` holds
    256 words or more but fewer than V/256 (so it gets a two-level rank map), from the
    model's ARPA text."""
    bigrams = text.split("\\2-grams:")[1].split("\\")[0].split("\n")
    fields = [line.split("\t") for line in bigrams if "\t" in line]
    counts = Counter(words.split()[0] for _, words, *_ in fields)
    return next(words.split() for _, words, *weight in fields
                if BIG_PATTERN <= counts[words.split()[0]] < vocab_size // 256 and weight and float(weight[0]) != 0.0
                and not {"<s>", "</s>"} & set(words.split()))


@pytest.mark.parametrize("order", [2, 3])
def test_two_level_rank_maps_equal_exhaustive_scoring(tmp_path: Path, order: int) -> None:
    """Past 65,536 words a big pattern holding fewer than V/256 words gets a two-level
    rank map (kernel/cache.c, FLAT_MAP_RATIO): 70,000 words, hubs of 256-272 words.  At
    order 3 the search of a sentence ``h x y`` reads ``h _`` at x (building its map) and
    then finds the fixed bigram ``h x`` of y's history, and its back-off weight, through
    that map (cache_slot_find)."""
    shape = BigModelShape(seed=7, order=order, words=70000, has_unk=True, shuffled=True, distinct_alphas=5,
                          positive_backoffs=0.5, rounding=0.5, hubs=3, sentences=1, big=(256, 272))
    text, vocab, sentences = shape.build()
    if order == 3:
        sentences = sentences + [sparse_hub_bigram(text, len(vocab)) + [vocab[-1]]]
    (tmp_path / "model.arpa").write_text(text)
    fastsubs.build_index(tmp_path / "model.arpa", tmp_path / "model.fsidx", joint_min=1)
    sizes = set(pattern_sizes(tmp_path / "model.fsidx", [" ".join(sentence) for sentence in sentences]))
    assert any(BIG_PATTERN <= size < len(vocab) // 256 for size in sizes), sorted(sizes)
    check_big_model(shape, 0, [(1, None), (9, None), (65, None), (300, None), (20, 0.9), (None, 0.5)],
                    built=(text, vocab, sentences), index_path=tmp_path / "model.fsidx")


def test_big_models_reach_the_big_pattern_paths(tmp_path: Path) -> None:
    """The generator does what the test needs: most positions of its sentences read a
    pattern of 256+ words (else the test above would only repeat test_exactness.py)."""
    positions = with_big = 0
    for seed in range(6):
        shape = BigModelShape(seed=seed, order=2 + seed % 3, words=300 + 500 * seed, has_unk=seed % 2 == 0,
                              shuffled=True, distinct_alphas=5, positive_backoffs=0.3, rounding=0.5, hubs=2,
                              sentences=2)
        text, _, sentences = shape.build()
        (tmp_path / f"{seed}.arpa").write_text(text)
        fastsubs.build_index(tmp_path / f"{seed}.arpa", tmp_path / f"{seed}.fsidx", joint_min=1)
        for sizes in position_pattern_sizes(tmp_path / f"{seed}.fsidx", [" ".join(t) for t in sentences]):
            positions += 1
            with_big += any(size >= BIG_PATTERN for size in sizes)
    assert with_big >= positions / 2, f"{with_big} of {positions} positions read a pattern of {BIG_PATTERN}+ words"


def test_p_of_one_lists_every_word(tmp_path: Path) -> None:
    """Found by the test above: far down the list p (V - L) is below S's last bit, and
    the kernel's rule, once applied for P = 1 too, ended the list early; the original
    applies the -p rule only for P < 1 (ai-ku/fastsubs fastsubs.c)."""
    shape = BigModelShape(seed=0, order=3, words=1253, has_unk=False, shuffled=True, distinct_alphas=2,
                          positive_backoffs=0.0, rounding=0.0, hubs=1, sentences=1)
    text, vocab, sentences = shape.build()
    (tmp_path / "model.arpa").write_text(text)
    fastsubs.build_index(tmp_path / "model.arpa", tmp_path / "model.fsidx", joint_min=1)
    with fastsubs.open_index(tmp_path / "model.fsidx") as index:
        tokens = sentences[0]
        assert [len(index.position(tokens, at, p=1.0)) for at in range(len(tokens) + 1)] == \
            [len(vocab) - 1] * (len(tokens) + 1)


def test_positions_sixteen_and_seventeen_bits_wide(tmp_path: Path) -> None:
    """A pattern's positions by score take 16 bits up to 65,536 words, 17 beyond (the
    format's fs_position_bits; 2 and 4 bytes in format 4): a bigram model of 70,000 words
    whose contexts "<s> _" and "w0 _" hold 65,536 and 65,537 words.  Positions 0 and 1 of "w0 w5 w7" read them as
    their sorted lists (and locate words in them); every list equals the exhaustive scorer's."""
    import random

    rng = random.Random(11)
    words = [f"w{i}" for i in range(70000)]
    alphas = [f"{-k / 16:.4f}" for k in range(16, 96)]  # few values: many exact ties

    def line(alpha: str, ngram: str, beta: str = "") -> str:
        return f"{alpha}\t{ngram}" + (f"\t{beta}" if beta else "")

    unigrams = [line("-99", "<s>", "-0.5"), line("-1.5", "</s>")]
    unigrams += [line(rng.choice(alphas), w, rng.choice(["-0.25", "0.125", ""])) for w in words]
    bigrams = [line(rng.choice(alphas), f"<s> {w}") for w in words[:65536]]
    bigrams += [line(rng.choice(alphas), f"w0 {w}") for w in words[:65537]]
    text = (f"\\data\\\nngram 1={len(unigrams)}\nngram 2={len(bigrams)}\n\n\\1-grams:\n" + "\n".join(unigrams)
            + "\n\n\\2-grams:\n" + "\n".join(bigrams) + "\n\n\\end\\\n")
    (tmp_path / "model.arpa").write_text(text)
    fastsubs.build_index(tmp_path / "model.arpa", tmp_path / "model.fsidx", joint_min=1)
    with Core(tmp_path / "model.fsidx") as core:
        sizes = {fixed: len(core.pattern(1, (core.word_id(fixed),))[0]) // 4 for fixed in ("<s>", "w0")}
    assert sizes == {"<s>": 65536, "w0": 65537}
    oracle = ArpaModel.from_text(text).stored_as_float32()
    tokens = ["w0", "w5", "w7"]
    with fastsubs.open_index(tmp_path / "model.fsidx") as index:
        for position in (0, 1):
            ranked = oracle.ranked(oracle.substitute_scores(tokens, position))
            for n, p in [(1, None), (10, None), (300, None), (None, 0.5)]:
                assert_exact(index.position(tokens, position, n=n, p=p), oracle.cut(ranked, n, p),
                             f"position {position} n={n} p={p}")
