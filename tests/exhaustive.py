"""Exhaustive float64 substitute scorer: the oracle for exactness tests.

Why this exists: the fast engine prunes its search with upper bounds, and the
only convincing evidence that the pruning is exact is agreement with a scorer
that does no pruning at all.  This module therefore scores *every* vocabulary
word at a position, straight from the definition in ``docs/algorithm.md``, with
plain dict look-ups and float64 sums.  It is deliberately simple and shares no
code with ``fastsubs`` so that a bug in the engine cannot hide in both.

Conventions (from ``docs/algorithm.md``):

* A sentence ``w1 … wn`` is scored as ``<s> w1 … wn </s>``; ``<s>``/``</s>``
  tokens inside the input are dropped first (``substitute_scores`` does this
  itself, and ``position`` indexes the tokens left after dropping).
* A word outside the vocabulary is read as ``<unk>`` when the model has one.
  Otherwise it is "unknown": as a predicted word it gets log10 p = -100 (after
  any back-off weights of its context), and as context it matches no n-gram
  (so it also has no back-off weight).  ``<s>`` and ``</s>`` are treated the
  same way if a model happens to lack them.
* Candidates are all vocabulary words except ``<s>``.
"""

from __future__ import annotations

import gzip
import math
import re
import struct
from collections.abc import Iterable, Sequence

#: log10 probability of an unknown predicted word when the model has no <unk>
#: (KenLM's convention).
UNKNOWN_LOGPROB = -100.0

BOS = "<s>"
EOS = "</s>"
UNK = "<unk>"

# Stands for an out-of-vocabulary word in a model without <unk>.  It contains
# spaces, so it can never be a word of an ARPA file: every look-up involving it
# fails, which is exactly the "matches no n-gram" behaviour we want.
_UNKNOWN = " unknown word "

_HEADER_COUNT = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION = re.compile(r"^\\(\d+)-grams:$")


class ArpaFormatError(ValueError):
    """The ARPA text is malformed; the message names the source and line."""


class ArpaModel:
    """A back-off n-gram model held as ``{words: (alpha, beta)}``.

    ``alpha`` is the log10 probability of the n-gram, ``beta`` its log10
    back-off weight (0.0 when the file gives none).  ``vocab`` lists the
    unigrams in file order; ``order`` is the highest n declared in the header.
    """

    def __init__(self, ngrams: dict[tuple[str, ...], tuple[float, float]], order: int):
        self.ngrams = ngrams
        self.order = order
        self.vocab: list[str] = [key[0] for key in ngrams if len(key) == 1]
        self._vocab_set = frozenset(self.vocab)
        self._file_order = {word: i for i, word in enumerate(self.vocab)}
        self.has_unk = UNK in self._vocab_set

    def stored_as_float32(self) -> ArpaModel:
        """The same model with every number rounded to float32, as an index stores it.

        Summed in float64 in the order of :meth:`substitute_scores`, these give the
        engine's scores bit for bit, so lists can be compared exactly, ties included.
        """
        rounded = {key: (_float32(alpha), _float32(beta)) for key, (alpha, beta) in self.ngrams.items()}
        return ArpaModel(rounded, self.order)

    # ------------------------------------------------------------------ reading

    @classmethod
    def from_file(cls, path: str) -> ArpaModel:
        """Read an ARPA file; ``*.gz`` is decompressed."""
        path = str(path)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            return cls._from_lines(f, path)

    @classmethod
    def from_text(cls, text: str) -> ArpaModel:
        """Parse ARPA text held in a string."""
        return cls._from_lines(text.splitlines(), "<text>")

    @classmethod
    def _from_lines(cls, lines: Iterable[str], source: str) -> ArpaModel:
        """Parse ARPA lines.

        Anything before ``\\data\\`` is ignored.  Fields are split on any run of
        whitespace (tabs or spaces), so a line of an ``n``-grams section has
        ``n + 1`` fields (no back-off weight) or ``n + 2`` fields.  Header counts
        are checked against the sections, so a generator bug shows up here.
        """
        declared: dict[int, int] = {}
        seen: dict[int, int] = {}
        ngrams: dict[tuple[str, ...], tuple[float, float]] = {}
        state = "preamble"  # preamble -> header -> ngrams -> end
        n = 0

        def fail(lineno: int, what: str) -> ArpaFormatError:
            return ArpaFormatError(f"{source}:{lineno}: {what}")

        for lineno, raw in enumerate(lines, 1):
            line = raw.strip()
            if state == "preamble":
                if line == "\\data\\":
                    state = "header"
                continue
            if not line:
                continue
            if state == "end":
                continue  # KenLM and SRILM ignore anything after \end\
            if line == "\\end\\":
                state = "end"
                continue
            section = _SECTION.match(line)
            if section:
                n = int(section.group(1))
                if n not in declared:
                    raise fail(lineno, f"section \\{n}-grams: not declared in the header")
                seen[n] = 0
                state = "ngrams"
                continue
            if state == "header":
                count = _HEADER_COUNT.match(line)
                if not count:
                    raise fail(lineno, f"expected 'ngram N=count', got {line!r}")
                declared[int(count.group(1))] = int(count.group(2))
                continue
            fields = line.split()
            if len(fields) not in (n + 1, n + 2):
                raise fail(lineno, f"a {n}-gram line needs {n + 1} or {n + 2} fields: {line!r}")
            try:
                alpha = float(fields[0])
                beta = float(fields[n + 1]) if len(fields) == n + 2 else 0.0
            except ValueError as e:
                raise fail(lineno, f"bad number in {line!r}") from e
            key = tuple(fields[1 : n + 1])
            if key in ngrams:
                raise fail(lineno, f"duplicate n-gram {' '.join(key)!r}")
            ngrams[key] = (alpha, beta)
            seen[n] += 1

        if state == "preamble":
            raise ArpaFormatError(f"{source}: no \\data\\ line")
        if state != "end":
            raise ArpaFormatError(f"{source}: no \\end\\ line")
        for k, expected in declared.items():
            if seen.get(k, 0) != expected:
                raise ArpaFormatError(
                    f"{source}: header says ngram {k}={expected}, found {seen.get(k, 0)}"
                )
        if not declared or declared.get(1, 0) == 0:
            raise ArpaFormatError(f"{source}: no unigrams")
        return cls(ngrams, max(declared))

    # ------------------------------------------------------------ probabilities

    def map_word(self, word: str) -> str:
        """The vocabulary word that stands for ``word`` (``<unk>`` or unknown)."""
        if word in self._vocab_set:
            return word
        return UNK if self.has_unk else _UNKNOWN

    def logprob(self, word: str, context: Sequence[str]) -> float:
        """log10 p(word | context) by the ARPA back-off recursion.

        Words are mapped with :meth:`map_word`; the context is cut to its last
        ``order - 1`` words.
        """
        mapped = [self.map_word(w) for w in context]
        keep = self.order - 1
        mapped = mapped[len(mapped) - keep :] if keep > 0 else []
        return self._logprob(self.map_word(word), tuple(mapped))

    def _logprob(self, word: str, context: tuple[str, ...]) -> float:
        """The recursion of docs/algorithm.md on already mapped, truncated words.

        log10 p(w | h) = alpha(h w)                   if h w is in the model
                       = beta(h) + log10 p(w | h')    otherwise, h' = h[1:]
        and an unknown unigram (no <unk> in the model) gets -100.
        """
        entry = self.ngrams.get(context + (word,))
        if entry is not None:
            return entry[0]
        if not context:
            return UNKNOWN_LOGPROB
        beta = self.ngrams.get(context, (0.0, 0.0))[1]
        return beta + self._logprob(word, context[1:])

    # ------------------------------------------------------------- substitutes

    def candidates(self) -> list[str]:
        """Every vocabulary word except ``<s>``, in file order."""
        return [w for w in self.vocab if w != BOS]

    def substitute_scores(self, tokens: Sequence[str], position: int) -> dict[str, float]:
        """lp(x) for every candidate x at ``position`` of the sentence.

        ``tokens`` is ``w1 … wn`` (``<s>``/``</s>`` tokens are dropped first);
        ``position`` is 0-based in what remains, and ``n`` means the ``</s>``
        position.  With ``s = <s> w1 … wn </s>``, ``i = position + 1`` and
        ``s_i := x``::

            lp(x) = sum_{j=i}^{min(i+N-1, n+1)} log10 p(s_j | s_{max(0,j-N+1)} … s_{j-1})
        """
        words = [w for w in tokens if w not in (BOS, EOS)]
        if not 0 <= position <= len(words):
            raise IndexError(f"position {position} outside 0..{len(words)}")
        sentence = [self.map_word(w) for w in [BOS, *words, EOS]]
        i = position + 1
        last = min(i + self.order - 1, len(sentence) - 1)
        scores: dict[str, float] = {}
        for x in self.candidates():
            s = sentence.copy()
            s[i] = x
            # from the first term, as the definition and the search add (not from 0.0:
            # 0.0 + -0.0 is 0.0, so a term of -0.0 alone would lose its sign)
            terms = [self._logprob(s[j], tuple(s[max(0, j - self.order + 1) : j])) for j in range(i, last + 1)]
            total = terms[0]
            for term in terms[1:]:
                total += term
            scores[x] = total
        return scores

    def top_substitutes(
        self,
        tokens: Sequence[str],
        position: int,
        n: int | None = None,
        p: float | None = None,
    ) -> list[tuple[str, float]]:
        """The best substitutes, best first, cut like the original tool's output
        (:meth:`ranked` then :meth:`cut`)."""
        return self.cut(self.ranked(self.substitute_scores(tokens, position)), n, p)

    def ranked(self, scores: dict[str, float]) -> list[tuple[str, float]]:
        """Every candidate, best first; ties by file order of the unigrams (the word ids
        of an index: fastsubs lists tied words lowest id first, the original tool may
        list them in another order)."""
        return sorted(scores.items(), key=lambda item: (-item[1], self._file_order[item[0]]))

    def cut(self, ranked: list[tuple[str, float]], n: int | None = None,
            p: float | None = None, vocab_size: int | None = None) -> list[tuple[str, float]]:
        """The head of ``ranked`` that ai-ku/fastsubs lists.  Its stopping rules:

        * ``n``: stop after ``n`` substitutes; ``n`` is capped at ``V - 1``,
          where ``V`` is the number of unigrams (``<s>`` included), or
          ``vocab_size`` when given (fastsubs' ``--exclude``: a ranking without
          the excluded words, and V without them).
        * ``p``: after each listed substitute with probability ``q = 10**lp``,
          with ``S`` the running sum of ``q`` and ``L`` the number listed so far,
          stop once ``p <= S / (S + q * (V - L))``.  As in the C code the rule is
          only applied when ``p < 1``.
        * both: stop at whichever comes first; neither: ``n = 100``.
        """
        if vocab_size is None:
            vocab_size = len(self.vocab)
        if n is None and p is None:
            n = 100
        limit = vocab_size - 1 if n is None else min(n, vocab_size - 1)
        listed: list[tuple[str, float]] = []
        psum = 0.0
        for word, lp in ranked:
            if len(listed) >= limit:
                break
            listed.append((word, lp))
            if p is not None and p < 1.0:
                try:
                    q = math.pow(10.0, lp)
                except OverflowError:  # lp > 308 (huge positive back-off weights): C's pow gives inf
                    q = math.inf
                psum += q
                denominator = psum + q * (vocab_size - len(listed))
                # 10**lp underflows to 0 below about -323 (several unknown
                # words in a row), or is inf; the C code then compares with NaN:
                # no stop.
                if denominator > 0 and p <= psum / denominator:
                    break
        return listed


def _float32(value: float) -> float:
    """``value`` rounded to the nearest float32."""
    return struct.unpack("<f", struct.pack("<f", value))[0]
