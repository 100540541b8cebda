"""Writing substitutes in the original tool's text format (ai-ku/fastsubs), byte for byte.

``word<TAB>sub1 lp1<TAB>sub2 lp2 …`` with ``%.8f`` scores, best first; with ``-z`` each
score is replaced by p/Σp over the listed substitutes and the list stops at the first
below 1e-8.
"""

from __future__ import annotations

import numpy as np

from fastsubs.query.sentences import Vocabulary

NORMALIZED_FLOOR = 1e-8


def normalized(scores: np.ndarray) -> np.ndarray:
    """p / Σp over the listed substitutes, p = 10^lp (the original's ``-z``)."""
    if not len(scores):
        return scores
    p = np.power(10.0, scores - scores[0])
    return p / p.sum()


def format_substitutes(vocabulary: Vocabulary, ids: np.ndarray, scores: np.ndarray, normalize: bool) -> bytes:
    """The tab-separated ``sub score`` fields of one position (no target word, no newline)."""
    values = scores
    if normalize:
        values = normalized(scores)
        below = np.flatnonzero(values < NORMALIZED_FLOOR)
        if len(below):
            ids, values = ids[: below[0]], values[: below[0]]
    return vocabulary.fields(ids, values)
