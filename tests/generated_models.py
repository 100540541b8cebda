"""Models of any size written straight to ARPA files, for tests that need big vocabularies.

Hypothesis strategies (``arpa_gen``) draw small models, and shapes of models up to a
few thousand words that hypothesis can shrink (``big_models``, aimed at the search's
big-pattern paths); these are made with a seeded generator instead, to sizes given
exactly (the vocabulary, the n-grams of each order: the reader's chunk boundaries and
the build's count checks depend on them), fast at 100,000+ words, with the features
the search must handle: exact ties, back-off weights of both signs, and contexts with
256+ continuations.  Both write their ARPA text through ``arpa_gen.arpa_text``.
"""

from __future__ import annotations

import random
from pathlib import Path

from arpa_gen import arpa_text
from exhaustive import ArpaModel

SPECIALS = ["<s>", "</s>", "<unk>"]


def write_model(path: Path, vocab_size: int, higher: list[int], seed: int, hubs: int = 12,
                hub_fanout: int = 300) -> None:
    """An ARPA model of ``vocab_size`` words and ``higher[m - 2]`` m-grams for m = 2, 3, ...

    Scores are rounded so many are exactly equal (ties); back-off weights take both
    signs.  A few contexts ("hubs") get ``hub_fanout`` continuations each, so their
    patterns hold 256+ words (the search's rank maps and sorted prefixes); every
    m-gram's prefix is an (m-1)-gram of the model.
    """
    rng = random.Random(seed)
    order = len(higher) + 1
    words = SPECIALS + [f"w{i}" for i in range(vocab_size - len(SPECIALS))]
    fillers = words[1:]  # any word but <s> may follow a context

    def beta(m: int) -> str:
        return f"\t{round(rng.uniform(-1.2, 0.5), 3)}" if m < order else ""

    sections = [[f"{-99 if w == '<s>' else round(rng.uniform(-7, -1.5), 2)}\t{w}{beta(1)}" for w in words]]
    previous = [(w,) for w in words]
    for m, count in enumerate(higher, start=2):
        grams: set[tuple[str, ...]] = set()
        for context in rng.sample(previous, min(hubs, len(previous))):
            grams.update(context + (w,) for w in rng.sample(fillers, min(hub_fanout, count - len(grams), len(fillers))))
        while len(grams) < count:
            grams.add(rng.choice(previous) + (rng.choice(fillers),))
        ordered = sorted(grams)
        sections.append([f"{round(rng.uniform(-4, -0.2), 2)}\t{' '.join(g)}{beta(m)}" for g in ordered])
        previous = ordered
    path.write_text(arpa_text(sections))


def model_sentences(oracle: ArpaModel, count: int, seed: int) -> list[list[str]]:
    """Sentences made of the words the model's higher orders know (so patterns are read), and unknown words."""
    rng = random.Random(seed)
    known = sorted({w for gram in oracle.ngrams if len(gram) > 1 for w in gram if w not in ("<s>", "</s>")})
    return [[rng.choice(known) if rng.random() < 0.9 else "never-seen" for _ in range(rng.randint(1, 8))]
            for _ in range(count)]
