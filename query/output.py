"""What the substitutes of one position look like in each output format.

* ``text`` (the original tool's, ai-ku/fastsubs, byte for byte):
  ``word<TAB>sub1 lp1<TAB>sub2 lp2 …`` with ``%.8f`` scores, best first; with ``-z`` each
  score is replaced by p/Σp over the listed substitutes and the list stops at the first
  below 1e-8.  The C core writes the fields (:class:`fastsubs.index.Answer`).
* ``jsonl``: one JSON object per position, for tools that would rather not parse tabs:
  ``sentence`` (the input line, from 1), with ``-t`` the record's ``name`` and ``id``,
  ``position`` (the token, from 0; the token count is ``</s>``), ``word``, and
  ``substitutes`` (``word``, ``lp``, ``p``), best first.  Valid UTF-8 JSON for any input
  bytes: text that is not UTF-8 follows the rule of :mod:`fastsubs.jsonl`.
* ``sample``: the original's separate ``wordsub-n`` step built in: N independent draws
  per position, with replacement, in proportion to 10^lp over the listed substitutes,
  printed as ``word<TAB>sub`` lines (``name<TAB>id<TAB>word<TAB>sub`` with ``-t``), or
  with ``jsonl`` as one object per position whose ``samples`` lists the draws.  The
  random stream of a position depends only on the seed, the input line number and the
  position, so the output is the same for any number of workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from fastsubs._kernel import normalized as kernel_normalized
from fastsubs.jsonl import text_fields

if TYPE_CHECKING:  # numpy is imported by the functions that use it: the text format needs none
    import numpy as np


class Vocabulary(Protocol):
    """Where output finds the words of ids (an open :class:`fastsubs.index.SubstituteIndex`)."""

    def word(self, word_id: int) -> bytes: ...


def normalized(scores: np.ndarray) -> np.ndarray:
    """p / Σp over the listed substitutes (best first), p = 10^lp (the original's ``-z``):
    computed by the kernel, which gives the API's ``Substitute.probability`` and the text
    format's ``-z`` fields the same way."""
    import numpy as np

    return np.frombuffer(kernel_normalized(np.ascontiguousarray(scores, dtype=np.float64)))


@dataclass(frozen=True)
class Place:
    """Where substitutes were asked for: the input line (from 1), the token position (from
    0), the word there, and for a ``-t`` record its name and id."""

    line: int
    position: int
    word: bytes
    name: bytes | None = None
    id: bytes | None = None

    def json_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"sentence": self.line}
        if self.name is not None and self.id is not None:
            fields.update(text_fields("name", self.name))
            fields.update(text_fields("id", self.id))
        fields["position"] = self.position
        fields.update(text_fields("word", self.word))
        return fields

    def text_prefix(self) -> bytes:
        """``name<TAB>id<TAB>`` of a ``-t`` record, else nothing."""
        return b"" if self.name is None or self.id is None else self.name + b"\t" + self.id + b"\t"


def _json_line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


def jsonl_record(vocabulary: Vocabulary, place: Place, ids: np.ndarray, scores: np.ndarray) -> bytes:
    """One position as a JSON object on one line (newline included)."""
    probabilities = normalized(scores)
    record = place.json_fields()
    record["substitutes"] = [{"word": _vocabulary_text(vocabulary.word(i)), "lp": lp, "p": p}
                             for i, lp, p in zip(ids.tolist(), scores.tolist(), probabilities.tolist())]
    return _json_line(record)


def _vocabulary_text(word: bytes) -> str:
    """A vocabulary word as a plain string: vocabulary words are UTF-8 (the indexer refuses
    others), so they never need the rule of :mod:`fastsubs.jsonl`."""
    return word.decode("utf-8", "backslashreplace")


def _draws(place: Place, ids: np.ndarray, scores: np.ndarray, draws: int, seed: int) -> list[int]:
    """``draws`` word ids drawn in proportion to 10^lp (none if nothing is listed)."""
    if not len(ids):
        return []
    import numpy as np

    rng = np.random.default_rng([seed, place.line, place.position])
    return rng.choice(ids, size=draws, replace=True, p=normalized(scores)).tolist()  # type: ignore[no-any-return]


def sample_lines(vocabulary: Vocabulary, place: Place, ids: np.ndarray, scores: np.ndarray,
                 draws: int, seed: int) -> bytes:
    """``draws`` lines ``word<TAB>sub`` (``name<TAB>id<TAB>word<TAB>sub`` for a -t record)."""
    head = place.text_prefix() + place.word + b"\t"
    return b"".join(head + vocabulary.word(i) + b"\n" for i in _draws(place, ids, scores, draws, seed))


def sample_jsonl(vocabulary: Vocabulary, place: Place, ids: np.ndarray, scores: np.ndarray,
                 draws: int, seed: int) -> bytes:
    """The draws of one position as a JSON object: its fields and ``samples``, the drawn words
    (the same draws as :func:`sample_lines`)."""
    record = place.json_fields()
    record["samples"] = [_vocabulary_text(vocabulary.word(i)) for i in _draws(place, ids, scores, draws, seed)]
    return _json_line(record)
