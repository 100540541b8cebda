"""The search kernel on inputs the engine never gives it: it stays memory-safe and ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fastsubs.query import _kernel
from fastsubs.query.engine import Engine
from fastsubs.query.sentences import tokenize


def test_terms_from_a_generator_give_what_a_list_gives(small_index: Path) -> None:
    """The kernel holds the patterns it uses itself: a one-shot sequence of terms (freed
    as soon as it has been read) must not leave it reading freed arrays."""
    engine = Engine(small_index)
    ids = engine.vocabulary.sentence_ids(tokenize(b"the cat sat on the mat"))
    for target in range(1, len(ids)):
        terms = engine.searcher.patterns.position_terms(ids, target)
        expected = engine.searcher._kernel.search(list(terms), 20, None)
        engine.searcher.patterns._forget()  # the caches no longer hold the patterns
        fresh = engine.searcher.patterns.position_terms(ids, target)
        del terms
        assert engine.searcher._kernel.search((t for t in fresh), 20, None) == expected
    engine.close()


def test_terms_without_the_predicting_term_end_sorted(small_index: Path) -> None:
    """Without a term that predicts x no sorted list lowers the bound: the search must
    read every word (not loop forever) and still list the best first."""
    engine = Engine(small_index)
    ids = engine.vocabulary.sentence_ids(tokenize(b"the cat sat on the mat"))
    terms = engine.searcher.patterns.position_terms(ids, 2)[1:]
    words, scores = engine.searcher._kernel.search(terms, 10, None)
    scores = np.frombuffer(scores)
    assert len(np.frombuffer(words, np.uint32)) == 10 and np.all(np.diff(scores) <= 0)
    engine.close()


def test_kept_maps_and_sorted_prefixes_never_change_an_answer(small_index: Path) -> None:
    """Big patterns keep rank maps and the read part of their sorted lists between
    searches, freed least recently used beyond a budget: searches with room for none (a
    fresh engine: binary searches and the by-score order only), for a few (evicting,
    growing, failing to grow) and for all list the same; so does one engine whose
    budget shrinks under the maps it already keeps."""
    from conftest import shared

    lines = shared("heldout-dev.txt").read_bytes().splitlines()[:20]

    def run(engine: Engine) -> list[tuple[bytes, bytes]]:
        sentences = [engine.vocabulary.sentence_ids(tokenize(line)) for line in lines]
        return [engine.searcher._kernel.search(engine.searcher.patterns.position_terms(ids, target), count, None)
                for ids in sentences for target in range(1, len(ids)) for count in (1, 100, 1000)]

    default = _kernel.set_cache_bytes(0)
    try:
        engine = Engine(small_index)
        expected = run(engine)
        engine.close()
        for budget in (6000, 20000, 1 << 30):  # each on a fresh engine: nothing kept from before
            _kernel.set_cache_bytes(budget)
            engine = Engine(small_index)
            assert run(engine) == expected, f"budget {budget}"
            engine.close()
        engine = Engine(small_index)
        for budget in (1 << 30, 20000, 6000, 0):
            _kernel.set_cache_bytes(budget)
            assert run(engine) == expected, f"budget shrunk to {budget}"
        engine.close()
    finally:
        _kernel.set_cache_bytes(default)


def test_the_term_table_gives_the_terms_position_terms_gives(small_index: Path) -> None:
    """search_at finds a position's terms in a TermTable (building those it lacks); with a
    table that must empty itself every few terms, and with a builder that empties every
    cache while the table is being read (as Patterns does when its pattern cache is
    full), it lists what search lists with the terms of position_terms."""
    engine = Engine(small_index)
    patterns, kernel = engine.searcher.patterns, engine.searcher._kernel
    ids = engine.vocabulary.sentence_ids(tokenize(b"the cat sat on the mat and the dog sat on the cat"))
    expected = [kernel.search(patterns.position_terms(ids, target), 50, None) for target in range(1, len(ids))]

    small = _kernel.TermTable(engine.index.order, 3)
    assert [kernel.search_at(small, patterns.term, ids, target, 50, None)
            for target in range(1, len(ids))] == expected
    assert small.size() <= 3

    calls = []

    def forgetful(left, after):
        calls.append((left, after))
        patterns._forget()
        return patterns.term(left, after)

    for _ in range(2):  # the second time from the table
        got = [kernel.search_at(patterns.table, forgetful, list(ids), target, 50, None)
               for target in range(1, len(ids))]
        assert got == expected
    assert calls and patterns.table.size() > 0
    with pytest.raises(ValueError, match="target outside"):
        kernel.search_at(patterns.table, patterns.term, ids, len(ids), 50, None)
    engine.close()


def test_pattern_entry_agrees_with_a_numpy_lookup(small_index: Path) -> None:
    """PatternView.entry (the C look-up terms are built with) against the arrays it reads."""
    engine = Engine(small_index)
    ids = engine.vocabulary.sentence_ids(tokenize(b"the cat sat on the mat"))
    patterns = {id(p): p for target in range(1, len(ids)) for term in engine.searcher.patterns.position_terms(ids, target)
                for step in term.steps for p in (step.alpha, step.beta) if hasattr(p, "view")}
    assert patterns
    for pattern in patterns.values():
        for word in [0, 1, -1, 2**32 - 1, 2**40, 2**70, *pattern.ids[:50].tolist(), *(pattern.ids[:50] + 1).tolist(),
                     *pattern.ids[:3]]:  # the last ones numpy integers
            at = np.flatnonzero(pattern.ids == word)
            expected = None if not len(at) else (
                float(pattern.alpha[at[0]]), 0.0 if pattern.beta is None else float(pattern.beta[at[0]]))
            assert pattern.entry(word) == expected
    engine.close()


def test_a_search_started_from_inside_a_search_is_refused(small_index: Path) -> None:
    """The kernel's scratch serves one search at a time; a term builder (Python code the
    search calls) that searches with the same kernel gets an error, not freed memory."""
    engine = Engine(small_index)
    patterns, kernel = engine.searcher.patterns, engine.searcher._kernel
    ids = engine.vocabulary.sentence_ids(tokenize(b"the cat sat on the mat"))
    inner = []

    def searching(left, after):
        with pytest.raises(RuntimeError, match="inside another search"):
            kernel.search(patterns.position_terms(ids, 1), 5, None)
        inner.append(True)
        return patterns.term(left, after)

    fresh = _kernel.TermTable(engine.index.order, 100)
    assert kernel.search_at(fresh, searching, ids, 2, 5, None) == kernel.search(patterns.position_terms(ids, 2), 5, None)
    assert inner
    engine.close()
