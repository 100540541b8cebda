"""The open index as its users and the runner drive it: caches of any size give the
same answers, bad arguments are refused, and nothing reads an unmapped page after
``close()`` — from one thread or many."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import fastsubs
from arpa_gen import BigModelShape
from exhaustive import ArpaModel
from fastsubs import _kernel
from fastsubs import format as fmt
from fastsubs.core import Answer, Core, Substitute
from fastsubs.limits import Limits
from fastsubs.stats import SearchStats
from fastsubs.tokens import tokenize
from test_exactness import assert_exact

SENTENCE = b"the cat sat on the mat and the dog sat on the cat"


def answers(index: Core, lines: list[bytes], counts=(1, 100, 1000)) -> list[bytes]:
    """Every position of every line at each count, as bytes (ids then scores)."""
    found = []
    for line in lines:
        ids = index.sentence_ids(tokenize(line))
        for count in counts:
            found += [words.tobytes() + scores.tobytes() for words, scores in index.search(ids, 1, len(ids) // 4,
                                                                                         Limits(count))]
    return found

#: The default cache sizes (kernel/engine.h).
DEFAULT_SLOTS = 1 << 17
DEFAULT_BUDGET = 24 << 20


def test_cache_sizes_never_change_an_answer(demo_index: Path) -> None:
    """Searchers keep pattern records in a fixed number of slots (replaced least recently
    used, never while the search uses them; a record with no slot serves that search
    alone) and rank maps and sorted prefixes within a byte budget: with 8 slots (every
    search spills), 64, and the default, and budgets from none to all, the answers are
    those of the default; so on one index whose budget shrinks under the maps it keeps."""
    from conftest import demo_text

    lines = demo_text(20).splitlines()
    with Core(demo_index) as index:
        expected = answers(index, lines)
    for slots in (8, 64, DEFAULT_SLOTS):
        for budget in (0, 6000, 20000, 1 << 30):  # each on a fresh index: nothing kept from before
            with Core(demo_index) as index:
                index.set_cache(slots, budget)
                assert answers(index, lines) == expected, f"{slots} slots, budget {budget}"
    with Core(demo_index) as index:
        for budget in (1 << 30, 20000, 6000, 0):
            index.set_cache(DEFAULT_SLOTS, budget)
            assert answers(index, lines) == expected, f"budget shrunk to {budget}"
        lookups, misses = index.cache_counters()
        assert 0 < misses < lookups  # the slots served most look-ups of the later passes


def test_kept_pair_orders_take_room_for_their_words_alone(demo_index: Path) -> None:
    """A pair list's order (the words of a pattern of term 0 in term 1's "_ d", kernel/lists.c)
    is kept with "_ d" within the reader's budget; it takes room for the words it holds,
    grown by doubling from at least 16, not for every entry of "_ d" its scans tested (about
    ten for each word found, over corpus text), which filled most of the budget and pushed
    out the rank maps and sorted prefixes kept beside them."""
    from conftest import demo_text

    lines = demo_text(40).splitlines()
    with Core(demo_index) as index:
        index.set_cache(DEFAULT_SLOTS, 1 << 30)  # nothing dropped: every order the searches made
        answers(index, lines, (100,))
        orders, entries, room, oversized = index.pair_census()
    assert orders > 0 and entries > 0  # (the searches kept pair orders: the checks below say something)
    assert oversized == 0, f"{oversized} of {orders} orders have room for more than max(16, 2 x their words)"
    assert entries <= room <= 2 * entries + 16 * orders


def test_bad_arguments_are_refused_in_one_line(demo_index: Path) -> None:
    with Core(demo_index) as index:
        ids = index.sentence_ids(tokenize(SENTENCE))
        n = len(ids) // 4
        with pytest.raises(ValueError, match="targets outside"):
            index.search(ids, 1, n + 1, Limits(5))
        with pytest.raises(ValueError, match="targets outside"):
            index.search(ids, 0, 2, Limits(5))
        with pytest.raises(ValueError, match="excluded"):
            index.search(ids, 1, 2, Limits(5), np.array([index.vocab_size], dtype=fmt.ID_DTYPE).tobytes())
        with pytest.raises(ValueError, match="4-byte items"):
            index.search(ids[:-1], 1, 2, Limits(5))
        with pytest.raises(ValueError, match="outside the vocabulary"):
            index.word(index.vocab_size)
        with pytest.raises(ValueError, match="tuple subclass"):
            _kernel.Engine.search(index, ids, 1, 2, 5, None, b"", 1, dict)
        with pytest.raises(ValueError, match="tuple subclass"):
            _kernel.Engine.search(index, ids, 1, 2, 5, None, b"", 0, Substitute)
        assert index.search(ids, 2, 2, Limits(5)) == []


def test_records_hold_what_the_arrays_hold(demo_index: Path) -> None:
    """The API's records, made in C, name the words and scores of the arrays, with p/Σp as
    the -z output computes it: proportional to 10^lp (to rounding), summing to 1."""
    with Core(demo_index) as index:
        ids = index.sentence_ids(tokenize(SENTENCE))
        for limits in (Limits(1), Limits(50), Limits.from_options(None, 0.9)):
            ranked = index.search(ids, 1, len(ids) // 4, limits)
            records = index.search(ids, 1, len(ids) // 4, limits, answer=Answer.SUBSTITUTES)
            assert len(records) == len(ranked)
            for (words, scores), subs in zip(ranked, records):
                assert all(type(s) is Substitute for s in subs)
                assert [s.word for s in subs] == [index.word(i).decode() for i in words.tolist()]
                assert [s.logprob for s in subs] == scores.tolist()
                assert [s.probability for s in subs] == np.frombuffer(_kernel.normalized(scores)).tolist()
                odds = np.power(10.0, scores - scores[0])
                np.testing.assert_allclose([s.probability for s in subs], odds / odds.sum(), rtol=1e-12)


def test_nothing_reads_the_map_after_close(demo_index: Path) -> None:
    """Every call after close() raises ValueError; what was handed out before is a copy."""
    index = Core(demo_index)
    ids = index.sentence_ids(tokenize(SENTENCE))
    first = index.search(ids, 1, 2, Limits(5))
    the = index.word_id("the")
    pattern = index.pattern(0, (the,))
    index.close()
    assert index.closed
    for call in (lambda: index.search(ids, 1, 2, Limits(5)), lambda: index.word(1),
                 lambda: index.fields(first[0][0], first[0][1]), lambda: index.word_id(b"the"),
                 lambda: index.pattern(0, (the,)), lambda: index.ngram((the,)), lambda: index.metadata(),
                 lambda: index.check_patterns(2), lambda: index.unigrams()):
        with pytest.raises(ValueError, match="closed"):
            call()
    assert len(first[0][0]) == 5 and pattern is not None and len(pattern[0]) > 0  # copies: still readable
    index.close()  # twice: nothing more happens


def test_threads_share_one_index(demo_index: Path) -> None:
    """Four threads searching one index at once (each search takes a searcher of its
    own, without the GIL) list what one thread lists.  The searchers made for the others
    start with the records the first one read (cache_reader_seed), all of these lines'."""
    from conftest import demo_text

    lines = demo_text(24).splitlines()
    with Core(demo_index) as index:
        expected = [answers(index, [line], (100,)) for line in lines]
        got: dict[int, list[bytes]] = {}

        def work(start: int) -> None:
            for i in range(start, len(lines), 4):
                got[i] = answers(index, [lines[i]], (100,))

        in_four_threads_at_once(index, work)
        assert [got[i] for i in range(len(lines))] == expected


def test_each_thread_counts_its_own_searches(demo_index: Path) -> None:
    """Core.thread_stats() differences count the calling thread's searches
    alone, what one thread searching the same lines alone counts, while three others
    search too (``stats`` counts them all)."""
    from conftest import demo_text

    lines = demo_text(80).splitlines()
    with Core(demo_index) as index:
        alone = []
        for start in range(4):
            before = index.stats
            answers(index, lines[start::4], (50,))
            alone.append(index.stats.since(before))
        together: dict[int, SearchStats] = {}

        def work(start: int) -> None:
            before = Core.thread_stats()
            answers(index, lines[start::4], (50,))
            together[start] = Core.thread_stats().since(before)

        in_four_threads(work)
        assert [together[start] for start in range(4)] == alone


def in_four_threads(work: Callable[[int], None]) -> None:
    """Runs work(0) … work(3) in four threads at once; raises the first error of any."""
    errors: list[BaseException] = []

    def reporting(start: int) -> None:
        try:
            work(start)
        except BaseException as error:  # raised below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=reporting, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def in_four_threads_at_once(index: Core, work: Callable[[int], None], tries: int = 20) -> None:
    """:func:`in_four_threads` until the threads have searched at the same time (``index``
    made a searcher for a second thread): on a busy machine one pass may run them one
    after another, and test nothing of what they share."""
    for _ in range(tries):
        in_four_threads(work)
        if index.searchers > 1:
            return
    raise AssertionError(f"four threads never searched at the same time in {tries} passes")


def test_threads_share_rank_maps_under_any_budget(demo_index: Path) -> None:
    """The rank maps of big patterns are built once per open index and shared by the
    searchers of every thread while any keeps them: four threads whose budgets keep a
    few maps (so they drop and take maps others still hold), with 8 slots (so one search
    may hold the same pattern twice), list what one thread lists."""
    from conftest import demo_text

    lines = demo_text(16).splitlines()
    with Core(demo_index) as index:
        expected = [answers(index, [line], (100,)) for line in lines]
    for budget in (6000, 20000, 1 << 30):
        with Core(demo_index) as index:
            index.set_cache(8, budget)

            def work(start: int, index: Core = index, budget: int = budget) -> None:
                for i in [*range(start, len(lines), 4), *range(len(lines))]:  # a quarter, then all
                    assert answers(index, [lines[i]], (100,)) == expected[i], f"line {i}, budget {budget}"

            in_four_threads(work)


def test_a_new_threads_searcher_starts_with_the_records_met_before(demo_index: Path) -> None:
    """A searcher made for a thread while the others are busy starts from a copy of the
    first searcher's record slots: searching text that one thread has searched already, in
    four threads at once, reads (almost) nothing from the index again, and lists what one
    thread lists."""
    from conftest import demo_text

    lines = demo_text(40).splitlines()
    with Core(demo_index) as index:
        expected = answers(index, lines, (100,))
        _, first_pass_misses = index.cache_counters()
        started = threading.Barrier(4)

        def work(start: int) -> None:
            started.wait()
            order = [*range(start, len(lines)), *range(start)]  # each thread from another line
            got = [answers(index, [lines[i]], (100,)) for i in order]
            assert [answer for i in range(len(lines)) for answer in got[order.index(i)]] == expected

        in_four_threads_at_once(index, work)
        _, misses = index.cache_counters()
        assert misses - first_pass_misses < first_pass_misses / 20


def test_seeded_searchers_keep_the_bounds_of_positive_backoffs(tmp_path: Path) -> None:
    """A searcher made for a thread while the others are busy starts from copies of the
    first searcher's record slots.  Each record carries its pattern's bound on the back-off
    weights the search adds, positive where a weight is: bounded by 0 (the paper's bound,
    docs/algorithm.md) the search misses substitutes.  A model with positive back-off weights and
    big patterns, every position searched by one thread, then by four at once (the new
    searchers seeded): each list is the exhaustive scorer's."""
    shape = BigModelShape(seed=3, order=3, words=1500, has_unk=False, shuffled=True, distinct_alphas=40,
                          positive_backoffs=0.8, rounding=0.5, hubs=3, sentences=4)
    text, _, sentences = shape.build()
    oracle = ArpaModel.from_text(text).stored_as_float32()
    places = [(tokens, at) for tokens in sentences for at in range(len(tokens) + 1)]
    counts = (1, 10, 100)
    expected = {(i, n): oracle.cut(oracle.ranked(oracle.substitute_scores(*places[i])), n)
                for i in range(len(places)) for n in counts}
    (tmp_path / "model.arpa").write_text(text)
    fastsubs.build_index(tmp_path / "model.arpa", tmp_path / "model.fsidx")
    with fastsubs.open_index(tmp_path / "model.fsidx") as index:
        def check(i: int, n: int, who: str) -> None:
            tokens, at = places[i]
            assert_exact(index.position(tokens, at, n=n), expected[i, n], f"{who}: {tokens} position {at} n={n}")

        for i in range(len(places)):
            for n in counts:
                check(i, n, "one thread")
        started = threading.Barrier(4)

        def work(start: int) -> None:
            started.wait()
            for i in [*range(start, len(places)), *range(start)]:
                for n in counts:
                    check(i, n, f"thread {start}")

        in_four_threads_at_once(index._core, work)  # the searchers of the core the API's index holds


def test_close_while_threads_search(demo_index: Path) -> None:
    """close() from another thread while searches run: each running search finishes, the
    next one raises ValueError, and the map goes once the last search has ended."""
    from conftest import demo_text

    lines = demo_text(200).splitlines()
    index = Core(demo_index)
    outcomes: list[str] = []
    started = threading.Barrier(3)

    def work() -> None:
        started.wait()
        try:
            answers(index, lines, (100,))
            outcomes.append("finished")
        except ValueError as error:
            outcomes.append(str(error))

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    started.wait()
    index.close()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 2 and all(o in ("finished", "the index is closed") for o in outcomes)


NO_BOS_MODEL = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-0.5\t</s>
-0.6\ta\t-0.1
-0.7\tb\t-0.2
-0.9\tc

\\2-grams:
-0.3\ta b
-0.4\tb </s>

\\end\\
"""


def test_a_model_without_s_lists_at_most_v_minus_1_words(tmp_path: Path) -> None:
    """The original lists at most V - 1 substitutes (one word is <s>), and so does a model
    that has no <s>, with V counting only the words not excluded: asking for more than the
    vocabulary drops its worst word.  (With <s>, a cap one higher would still list V - 1,
    <s> being no candidate: only such a model can tell; the hypothesis test of exclusions
    meets one only now and then.)"""
    import fastsubs

    (tmp_path / "no-bos.arpa").write_text(NO_BOS_MODEL)
    fastsubs.build_index(tmp_path / "no-bos.arpa", tmp_path / "no-bos.fsidx")
    with fastsubs.open_index(tmp_path / "no-bos.fsidx") as index:
        assert index.vocab_size == 4
        for position in range(3):
            assert len(index.position(["a", "b"], position, n=10)) == 3
            assert len(index.position(["a", "b"], position, n=10, exclude=["c"])) == 2


def test_batch_holds_what_sentence_lists(demo_index: Path) -> None:
    """The array interface lists, position by position, what ``sentence()`` lists: the same
    words and scores, for any limits, exclusions, empty sentences and without ``</s>``."""
    from conftest import demo_sentences

    lines = demo_sentences(12) + ["", "<s> </s>"]
    with fastsubs.open_index(demo_index) as index:
        words = index.words()
        for options in ({"n": 7}, {"p": 0.8}, {"n": 30, "exclude": ["</s>", "the", ","]}):
            for eos in (True, False):
                found = index.batch(lines, eos=eos, **options)
                assert found.ids.dtype == np.uint32 and found.scores.dtype == np.float64
                assert len(found.sentences) == len(lines) + 1 and found.sentences[-1] == len(found.positions) - 1
                for number, line in enumerate(lines):
                    expected = index.sentence(line, **options)[:None if eos else -1]
                    first = found.sentences[number]
                    assert found.sentences[number + 1] - first == len(expected)
                    for offset, subs in enumerate(expected):
                        start, end = found.positions[first + offset:first + offset + 2]
                        assert [words[i] for i in found.ids[start:end]] == [s.word for s in subs]
                        assert found.scores[start:end].tolist() == [s.logprob for s in subs]


def test_substitutes_are_plain_named_tuples_the_collector_need_not_track(demo_index: Path) -> None:
    """sentence()'s substitutes are ``Substitute`` tuples of a word, its log-probability and
    p / sum p, which behave as the class's own constructor makes them (equal, hashed,
    pickled alike); none is tracked by the garbage collector (it holds only a str and two
    floats: nothing that could lead back to it), so that a hundred a position cost the
    collector nothing, and a collection leaves every one whole."""
    import gc
    import pickle

    with fastsubs.open_index(demo_index) as index:
        found = index.sentence("the cat sat on the mat", n=50)
        gc.collect()
    subs = [sub for position in found for sub in position]
    assert len(subs) == 7 * 50
    for sub in subs:
        assert type(sub) is fastsubs.Substitute and not gc.is_tracked(sub)
        made = fastsubs.Substitute(sub.word, sub.logprob, sub.probability)
        assert sub == made and hash(sub) == hash(made) and pickle.loads(pickle.dumps(sub)) == made
        assert (type(sub.word), type(sub.logprob), type(sub.probability)) == (str, float, float)
    assert sum(sub.probability for sub in found[0]) == pytest.approx(1.0)


def test_threads_share_one_index_through_batches(demo_index: Path) -> None:
    """Four threads' batches on one open index give what one thread's give."""
    from conftest import demo_sentences

    lines = demo_sentences(40)
    with fastsubs.open_index(demo_index) as index:
        expected = [index.batch(lines[i::4], n=50) for i in range(4)]
        got: dict[int, object] = {}

        def work(start: int) -> None:
            got[start] = index.batch(lines[start::4], n=50)

        in_four_threads(work)
        for start in range(4):
            assert all(np.array_equal(a, b) for a, b in zip(got[start], expected[start]))


def test_bytes_lines_are_taken_as_str_lines_are(demo_index: Path) -> None:
    """``sentence()``, ``batch()`` and ``position()`` take a line as ``bytes`` (as a binary
    file gives it, its newline too) as they take it as ``str``, as ``table()`` does: split on
    whitespace, never as a sequence of ints; bytes that are not UTF-8 are kept.  A token
    that is neither str nor bytes is an ArgumentError naming it."""
    lines = [b"the cat sat on the mat\n", b"caf\xe9 <s> au lait </s>", b""]
    texts = [line.decode("utf-8", "surrogateescape") for line in lines]
    with fastsubs.open_index(demo_index) as index:
        for line, text in zip(lines, texts):
            listed = index.sentence(text, n=5)
            assert index.sentence(line, n=5) == listed and len(listed) == len(text.split()) + 1 - 2 * ("<s>" in text)
            last = len(listed) - 1  # the </s> position: every token of the line, <s> and </s> left out
            assert index.position(line, last, n=5) == index.position(text, last, n=5) == listed[-1]
            assert index.position(line, 0, n=5) == listed[0]
        assert all(np.array_equal(a, b) for a, b in zip(index.batch(lines, n=5), index.batch(texts, n=5)))
        assert [s[0] for s in index.sentences(iter(lines), n=1)] == [s[0] for s in index.sentences(texts, n=1)]
        for tokens in ([b"the", 7], [b"the", None]):
            with pytest.raises(fastsubs.ArgumentError, match="a token must be str or bytes, not"):
                index.sentence(tokens)
