"""Sentences drawn from an n-gram model: test input in the model's own words and word order.

Why this exists: tests of a real model need real-looking text for it, with contexts the
model knows at every order and contexts it has to back off from, and the repository
can hold no held-out text of its own (the project's held-out sentences come from text
under mixed licences; ``../shared/data`` is not part of a clone).  A back-off model
*is* a description of text, so its own n-grams make the text: each word is drawn from
the continuations the model lists for the longest context it knows, with their
probabilities, and the rest of that context's mass backs off to a shorter context (to
the unigrams in the end) — the way the model itself spreads probability, without the
exact back-off weights, which a test input does not need.  Text a model was not trained
on has words its vocabulary lacks, which a model drawing its own words would almost never
give (``<unk>`` is rare in its own text): UNKNOWN_SHARE of the tokens are such words.

Draws come from a seeded ``random.Random``: the same model and seed give the same
sentences on every Python this project supports.
"""

from __future__ import annotations

import bisect
import itertools
import random

from exhaustive import BOS, EOS, UNK, ArpaModel

#: A sentence ends at ``</s>`` or after this many tokens.
LONGEST = 30
#: Tokens that are words the vocabulary lacks (held-out text of a 20K-word model has a few percent).
UNKNOWN_SHARE = 0.03


class _Draws:
    """Words and the running sums of their probabilities, to draw one in O(log n)."""

    def __init__(self, weighted: list[tuple[str, float]]) -> None:
        self.words = [word for word, _ in weighted]
        self.sums = list(itertools.accumulate(weight for _, weight in weighted))

    @property
    def mass(self) -> float:
        return self.sums[-1]

    def draw(self, rng: random.Random) -> str:
        at = bisect.bisect_right(self.sums, rng.random() * self.mass)
        return self.words[min(at, len(self.words) - 1)]


def sampled_sentences(model: ArpaModel, count: int, seed: int) -> list[str]:
    """``count`` sentences (tokens joined by single spaces) drawn from ``model``."""
    grouped: dict[tuple[str, ...], list[tuple[str, float]]] = {}
    for gram, (alpha, _) in model.ngrams.items():
        if len(gram) > 1:
            grouped.setdefault(gram[:-1], []).append((gram[-1], 10.0 ** alpha))
    followers: dict[tuple[str, ...], _Draws] = {}  # made when first met
    unigrams = _Draws([(word, 10.0 ** model.ngrams[(word,)][0]) for word in model.vocab if word != BOS])
    rng = random.Random(seed)

    def next_word(history: list[str]) -> str:
        for length in range(min(len(history), model.order - 1), 0, -1):
            context = tuple(history[-length:])
            if context not in followers and context in grouped:
                followers[context] = _Draws(grouped[context])
            known = followers.get(context)
            if known is not None and rng.random() < known.mass:
                return known.draw(rng)
        return unigrams.draw(rng)

    def unknown_word() -> str:
        while True:
            word = f"unseen{rng.randrange(1000)}"
            if model.map_word(word) != word:
                return word

    sentences = []
    while len(sentences) < count:
        history, tokens = [BOS], []
        while len(tokens) < LONGEST:
            word = next_word(history)
            if word == EOS:
                if tokens:
                    break
                continue  # no empty sentences: draw the first word again
            if word == UNK or rng.random() < UNKNOWN_SHARE:
                word = UNK
                tokens.append(unknown_word())
            else:
                tokens.append(word)
            history.append(word)
        sentences.append(" ".join(tokens))
    return sentences
