"""The output formats beyond the original's text: JSON lines, and sampled substitutes.

* ``jsonl``: one JSON object per position, for tools that would rather not parse tabs.
* ``sample``: the original's separate ``wordsub-n`` step built in: N independent draws
  per position, with replacement, in proportion to 10^lp over the listed substitutes,
  printed as ``word<TAB>sub`` lines.  The random stream of a position depends only on
  the seed, the input line number and the position, so the output is the same for any
  number of workers.
"""

from __future__ import annotations

import json

import numpy as np

from fastsubs.query.output import normalized
from fastsubs.query.sentences import Vocabulary


def _text(word: bytes) -> str:
    """Words as JSON strings; bytes that are not UTF-8 survive as escaped surrogates."""
    return word.decode("utf-8", "surrogateescape")


def jsonl_record(vocabulary: Vocabulary, line: int, position: int, word: bytes,
                 ids: np.ndarray, scores: np.ndarray) -> bytes:
    """One position as a JSON object on one line (newline included)."""
    probabilities = normalized(scores)
    record = {
        "sentence": line,
        "position": position,
        "word": _text(word),
        "substitutes": [{"word": _text(vocabulary.word(i)), "lp": lp, "p": p}
                        for i, lp, p in zip(ids.tolist(), scores.tolist(), probabilities.tolist())],
    }
    return json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n"


def sample_lines(vocabulary: Vocabulary, line: int, position: int, word: bytes, ids: np.ndarray,
                 scores: np.ndarray, draws: int, seed: int) -> bytes:
    """``draws`` lines ``word<TAB>sub`` drawn in proportion to 10^lp (none if nothing is listed)."""
    if not len(ids):
        return b""
    rng = np.random.default_rng([seed, line, position])
    chosen = rng.choice(ids, size=draws, replace=True, p=normalized(scores))
    return b"".join(word + b"\t" + vocabulary.word(i) + b"\n" for i in chosen.tolist())
