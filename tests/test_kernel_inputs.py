"""The search kernel on inputs the engine never gives it: it stays memory-safe and ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
