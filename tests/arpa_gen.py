"""Hypothesis strategies for random, valid back-off ARPA models and sentences.

Why this exists: the KenLM models of the shared data folder are all well-behaved
(``<unk>`` present, every back-off weight <= 0, every n-gram's prefix and suffix
present).  The exact search must also be right on the models those files never
show, above all models with *positive* back-off weights, the case the original
paper's bound gets wrong (see ``docs/algorithm.md``).  These strategies produce small
models that hit those corners often, so the engine can be compared against the
exhaustive oracle in ``tests/exhaustive.py``.

What a generated model looks like:

* order 1..``max_order``; 1..27 plain words (``a``…``h``, ``w0``…``w18``);
  ``<s>`` and ``</s>`` usually present (``always_markers=True`` forces them);
  ``<unk>`` present in about half of the models, missing in the rest;
* ``<s>`` has log-prob -99 and, when the order is > 1, a back-off weight;
* some plain words occur only as unigrams;
* higher-order n-grams are built by extending a lower-order n-gram on the
  right or on the left (so some have their prefix but not their suffix, or the
  reverse), by changing one word of an n-gram of the same order (so a pattern
  ``A _ B`` holds several words), or at random (neither present); ``<s>``
  only first, ``</s>`` only last, every word a unigram, no duplicates;
* log-probs are multiples of 1/64 in [-6, 0], back-off weights multiples of
  1/64 in [-2, 2] (about half of the non-zero ones positive), present on about
  half the n-grams of order < N and never on the highest order or on n-grams
  ending in ``</s>``.  Multiples of 1/64 are exact in float32, and are printed
  exactly, so a float32 index and a float64 oracle agree to about 1e-9;
* fields are separated by a tab (KenLM) or by one or more spaces; sometimes
  free text precedes ``\\data\\``.

This module imports nothing from ``fastsubs`` on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

BOS = "<s>"
EOS = "</s>"
UNK = "<unk>"

#: The plain tokens a vocabulary is drawn from.
PLAIN_WORDS: tuple[str, ...] = tuple("abcdefgh") + tuple(f"w{i}" for i in range(19))

#: Tokens that are never in any generated vocabulary.
UNKNOWN_WORDS: tuple[str, ...] = ("zzz", "qq")

#: log10 probability KenLM and SRILM write for the unigram <s>.
BOS_LOGPROB = -99.0

GRID = 64  # every number is a multiple of 1/GRID
MAX_NGRAMS_PER_ORDER = 20

_logprobs = st.integers(-6 * GRID, 0).map(lambda k: k / GRID)
_backoffs = st.integers(-2 * GRID, 2 * GRID).map(lambda k: k / GRID)


def _float32_values(low_exponent: int, high_exponent: int) -> st.SearchStrategy[float]:
    """Positive numbers m * 2**e exact in float32 (m < 2**24), from 2**low_exponent up to
    about 2**(high_exponent + 24)."""
    return st.builds(lambda m, e: m * 2.0 ** e, st.integers(1, 2**24 - 1), st.integers(low_exponent, high_exponent))


@st.composite
def _adversarial_pool(draw, signs: tuple[int, ...]) -> st.SearchStrategy[float]:
    """A model's few numbers of wildly different magnitudes, drawn again and again (so
    scores tie, or tie but for the last bit): the grid's, tiny ones (1e-25 ... 1e-5),
    ones near 1 with all 24 bits in use, huge ones (up to 2**31), 0, -1 and -99."""
    magnitude = st.one_of(
        st.integers(0, 6 * GRID).map(lambda k: k / GRID),
        _float32_values(-107, -41),
        _float32_values(-24, -23),
        _float32_values(-17, 7),
        st.sampled_from([0.0, 1.0, 99.0]),
    )
    pool = draw(st.lists(st.tuples(st.sampled_from(signs), magnitude), min_size=1, max_size=6))
    return st.sampled_from([sign * value for sign, value in pool])


@dataclass(frozen=True)
class GeneratedModel:
    """A generated model: its ARPA ``text`` and what it was made from.

    ``ngrams`` maps each n-gram to ``(log-prob, back-off or None)``; ``vocab``
    lists the unigrams in file order.
    """

    text: str
    order: int
    vocab: list[str]
    ngrams: dict[tuple[str, ...], tuple[float, float | None]] = field(repr=False)

    def __repr__(self) -> str:
        # Hypothesis prints this for a failing example: show the file as is.
        return f"GeneratedModel(order={self.order}, vocab={self.vocab!r}, text=\n{self.text})"


def _valid(ngram: tuple[str, ...], allowed: frozenset[str]) -> bool:
    """<s> only first, </s> only last, every word allowed in n-grams."""
    last = len(ngram) - 1
    return all(
        w in allowed and (w != BOS or i == 0) and (w != EOS or i == last)
        for i, w in enumerate(ngram)
    )


def _slot_words(index: int, size: int, words: list[str]) -> list[str]:
    """Words that may fill position ``index`` of a ``size``-gram."""
    return [
        w
        for w in words
        if (w != BOS or index == 0) and (w != EOS or index == size - 1)
    ]


def _fresh_ngram(draw, size: int, words: list[str]) -> tuple[str, ...]:
    """An n-gram drawn slot by slot, whatever its lower orders hold."""
    return tuple(draw(st.sampled_from(_slot_words(i, size, words))) for i in range(size))


def _number(value: float, style: str) -> str:
    """Print ``value`` exactly: fixed 6 decimals or Python's shortest repr."""
    if style == "fixed":
        return f"{value:.6f}"  # a multiple of 1/64 has at most 6 decimals
    return repr(value)


def arpa_text(sections: list[list[str]], preamble: str = "") -> str:
    """An ARPA file whose m-gram section holds the lines ``sections[m - 1]`` (each
    "log-prob, words[, back-off]"), with the header that counts them; ``preamble`` is
    free text before ``\\data\\``.  Every generator here (and ``generated_models``) writes
    its model through this."""
    lines = [preamble + "\\data\\"]
    lines += [f"ngram {m}={len(section)}" for m, section in enumerate(sections, 1)]
    for m, section in enumerate(sections, 1):
        lines += ["", f"\\{m}-grams:", *section]
    lines += ["", "\\end\\", ""]
    return "\n".join(lines)


def ngram_sections(ngrams: dict[tuple[str, ...], tuple[str, str | None]], order: int,
                   sep: str = "\t") -> list[list[str]]:
    """The lines of ``ngrams`` (words: log-prob and back-off weight, both as printed),
    order by order, in the dict's order, as :func:`arpa_text` takes them."""
    sections: list[list[str]] = [[] for _ in range(order)]
    for key, (alpha, beta) in ngrams.items():
        sections[len(key) - 1].append(sep.join([alpha, " ".join(key)] + ([beta] if beta is not None else [])))
    return sections


@st.composite
def arpa_models(
    draw,
    max_order: int = 6,
    min_order: int = 1,
    always_markers: bool = False,
    adversarial: bool = False,
) -> GeneratedModel:
    """Strategy for random valid back-off ARPA models (see the module doc).

    ``adversarial``: numbers of wildly different magnitudes instead of the grid's (see
    ``_adversarial_pool``), printed as Python's shortest repr, and sometimes up to 60
    unigram-only filler words, so that the search stops on its bound before it has read
    every word; made to find where sums in different orders round differently."""
    order = draw(st.integers(min_order, max_order))
    plain = draw(st.lists(st.sampled_from(PLAIN_WORDS), min_size=1, max_size=27, unique=True))
    logprobs, backoffs = _logprobs, _backoffs
    if adversarial:
        logprobs, backoffs = draw(_adversarial_pool((-1,))), draw(_adversarial_pool((-1, 1)))
        fillers = [f"f{i}" for i in range(draw(st.sampled_from([0, 0, 20, 60])))]
    else:
        fillers = []
    usually = st.integers(0, 9).map(lambda k: k != 9)
    has_bos = always_markers or draw(usually)
    has_eos = always_markers or draw(usually)
    has_unk = draw(st.booleans())
    specials = [w for w, present in ((UNK, has_unk), (BOS, has_bos), (EOS, has_eos)) if present]
    vocab = specials + plain + fillers
    if draw(st.booleans()):  # KenLM writes the specials first; others need not
        vocab = draw(st.permutations(vocab))

    # Some plain words stay unigram-only; at least one plain word is left for
    # n-grams so that every slot of every n-gram has a candidate.
    unigram_only = draw(st.sets(st.sampled_from(plain), max_size=len(plain) - 1))
    ngram_words = [w for w in vocab if w not in unigram_only and w not in fillers]
    allowed = frozenset(ngram_words)

    ngrams: dict[tuple[str, ...], tuple[float, float | None]] = {}
    for w in vocab:
        alpha = BOS_LOGPROB if w == BOS else draw(logprobs)
        if order == 1 or w == EOS:
            beta = None
        elif w == BOS:
            beta = draw(backoffs)
        else:
            beta = draw(backoffs) if draw(st.booleans()) else None
        ngrams[(w,)] = (alpha, beta)

    previous: list[tuple[str, ...]] = [(w,) for w in ngram_words]
    for size in range(2, order + 1):
        level: list[tuple[str, ...]] = []
        for _ in range(draw(st.integers(1, MAX_NGRAMS_PER_ORDER))):
            how = draw(st.sampled_from(["right", "left", "vary", "fresh"]))
            if how == "right":  # prefix present, suffix maybe not
                parent = draw(st.sampled_from(previous))
                ngram = parent + (draw(st.sampled_from(_slot_words(size - 1, size, ngram_words))),)
            elif how == "left":  # suffix present, prefix maybe not
                parent = draw(st.sampled_from(previous))
                ngram = (draw(st.sampled_from(_slot_words(0, size, ngram_words))),) + parent
            elif how == "vary" and level:  # another word in an existing A _ B
                base = draw(st.sampled_from(level))
                i = draw(st.integers(0, size - 1))
                word = draw(st.sampled_from(_slot_words(i, size, ngram_words)))
                ngram = base[:i] + (word,) + base[i + 1 :]
            else:  # neither prefix nor suffix need be present
                ngram = _fresh_ngram(draw, size, ngram_words)
            if not _valid(ngram, allowed) or ngram in ngrams:
                continue
            alpha = draw(logprobs)
            has_beta = size < order and ngram[-1] != EOS and draw(st.booleans())
            ngrams[ngram] = (alpha, draw(backoffs) if has_beta else None)
            level.append(ngram)
        if not level:  # keep every declared order non-empty
            ngram = _fresh_ngram(draw, size, ngram_words)
            ngrams[ngram] = (draw(logprobs), None)
            level.append(ngram)
        previous = level

    sep = draw(st.sampled_from(["\t", " ", "  "]))
    style = "repr" if adversarial else draw(st.sampled_from(["fixed", "repr"]))
    preamble = draw(st.sampled_from(["", "This is a generated model.\n\n"]))
    printed = {key: (_number(alpha, style), None if beta is None else _number(beta, style))
               for key, (alpha, beta) in ngrams.items()}
    text = arpa_text(ngram_sections(printed, order, sep), preamble)
    return GeneratedModel(text=text, order=order, vocab=list(vocab), ngrams=ngrams)


@st.composite
def sentences(draw, model: GeneratedModel, max_size: int = 8) -> list[str]:
    """Strategy for token lists (0..``max_size`` tokens) to score under ``model``.

    Tokens are vocabulary words (never ``<s>``/``</s>``), sometimes unknown
    words from ``UNKNOWN_WORDS``; pieces of the model's n-grams are spliced in
    so that high-order n-grams actually match.
    """
    words = [w for w in model.vocab if w not in (BOS, EOS)]
    pieces = [
        [w for w in key if w not in (BOS, EOS)]
        for key in model.ngrams
        if len(key) > 1
    ]
    pieces = [p for p in pieces if p]
    tokens: list[str] = []
    while len(tokens) < max_size and draw(st.integers(0, 4)) != 0:
        kind = draw(st.integers(0, 5))
        if kind == 0:
            tokens.append(draw(st.sampled_from(UNKNOWN_WORDS)))
        elif kind <= 2 and pieces:
            tokens += draw(st.sampled_from(pieces))
        else:
            tokens.append(draw(st.sampled_from(words)))
    return tokens[:max_size]


# --------------------------------------------------------------------------- big models
#
# The strategies above draw at most 27 plain words, far below the size at which the
# search kernel changes its ways (RANK_MIN_COUNT = 256 words in one pattern: rank maps,
# sorted prefixes kept between searches and evicted beyond a byte budget, batches of up
# to 128 words, K much smaller than V).  ``big_models`` draws the *shape* of a model with
# 300-3,000 words (order, size, how many distinct numbers, how many positive back-offs,
# how many "hub" contexts whose patterns hold 256+ words) and a seed; the model itself
# is filled in by ``random.Random(seed)``, so an example is a few dozen numbers for
# hypothesis to shrink, not tens of thousands.

#: Decimal log-probs and back-off weights whose float32 is *above* the decimal value
#: (the index stores float32: a bound taken from the decimals would be too low), and
#: multiples of 1/64 (exact in float32).
def _float32(value: float) -> float:
    import struct

    return struct.unpack("<f", struct.pack("<f", value))[0]


ROUNDING_UP: tuple[str, ...] = tuple(
    text for text in (f"{k / 100:.2f}" for k in range(-600, 201) if k % 25) if _float32(float(text)) > float(text)
)
ON_GRID: tuple[str, ...] = tuple(f"{k / 64:.6f}" for k in range(-6 * GRID, 2 * GRID + 1))


@dataclass(frozen=True)
class BigModelShape:
    """What ``big_models`` draws; :meth:`build` makes the model (same shape, same model)."""

    seed: int
    order: int
    words: int              # plain words (the vocabulary adds the markers and maybe <unk>)
    has_unk: bool
    shuffled: bool          # markers somewhere in the file, not first: ids are file order
    distinct_alphas: int    # how many log-probs the model uses: few means many exact ties
    positive_backoffs: float  # the share of back-off weights above 0
    rounding: float         # the share of numbers taken from ROUNDING_UP
    hubs: int               # contexts whose patterns hold 200-900 words in every slot, per order
    sentences: int
    big: tuple[int, int] = (256, 900)  # the sizes of the hubs' big patterns (a quarter are 200-255)

    def build(self) -> tuple[str, list[str], list[list[str]]]:
        """The model's ARPA text, its vocabulary in file order and the sentences to query."""
        return _build_big_model(self)


def _numbers(rng, count: int, rounding: float, low: float, high: float) -> list[str]:
    """``count`` distinct-ish numbers in [low, high], a share ``rounding`` of them rounding up."""
    pool = []
    for _ in range(count):
        source = ROUNDING_UP if rng.random() < rounding else ON_GRID
        choices = [t for t in source if low <= float(t) <= high]
        pool.append(rng.choice(choices))
    return pool


def _build_big_model(shape: BigModelShape) -> tuple[str, list[str], list[list[str]]]:
    import random

    rng = random.Random(shape.seed)
    order = shape.order
    plain = [f"w{i}" for i in range(shape.words)]
    vocab = ([UNK] if shape.has_unk else []) + [BOS, EOS] + plain
    if shape.shuffled:
        rng.shuffle(vocab)
    alphas = _numbers(rng, shape.distinct_alphas, shape.rounding, -6.0, -0.01)
    # back-off weights: as many positive as asked, the rest negative or zero
    positive = _numbers(rng, 6, shape.rounding, 0.01, 2.0)
    negative = _numbers(rng, 6, shape.rounding, -2.0, 0.0)

    def alpha() -> str:
        return rng.choice(alphas)

    def beta() -> str:
        return rng.choice(positive if rng.random() < shape.positive_backoffs else negative)

    ngrams: dict[tuple[str, ...], tuple[str, str | None]] = {}
    allowed = frozenset(vocab)

    def add(ngram: tuple[str, ...]) -> bool:
        if ngram in ngrams or not _valid(ngram, allowed):
            return False
        with_beta = len(ngram) < order and ngram[-1] != EOS and rng.random() < 0.5
        ngrams[ngram] = (alpha(), beta() if with_beta else None)
        return True

    for w in vocab:
        has_beta = order > 1 and w != EOS and (w == BOS or rng.random() < 0.6)
        ngrams[(w,)] = (str(BOS_LOGPROB) if w == BOS else alpha(), beta() if has_beta else None)

    hubs = [BOS] + rng.sample(plain, min(shape.hubs, len(plain)))
    for size in range(2, order + 1):
        shorter = [key for key in ngrams if len(key) == size - 1]
        # big patterns: for a context of size - 1 words, the candidate in each slot
        contexts = [key for key in shorter if key[0] in hubs or key[-1] in hubs] or shorter
        for context in rng.sample(contexts, min(len(contexts), shape.hubs + 1)):
            # mostly big, sometimes just below the size that makes a pattern big
            fan_out = rng.randint(200, 255) if rng.random() < 0.25 else \
                rng.randint(shape.big[0], min(len(plain), shape.big[1]))
            for slot in range(size):
                for x in rng.sample(vocab, fan_out):
                    add(context[:slot] + (x,) + context[slot:])
        # sparse n-grams: extend a shorter one on the right or the left, or at random
        for _ in range(len(plain) if size == 2 else len(plain) // 2):
            parent = rng.choice(shorter)
            x = rng.choice(vocab)
            how = rng.random()
            add(parent + (x,) if how < 0.4 else (x,) + parent if how < 0.8
                else tuple(rng.choice(vocab) for _ in range(size)))

    text = arpa_text(ngram_sections(ngrams, order))

    # sentences around the hubs, so the big patterns are the ones the search reads
    pieces = [[w for w in key if w not in (BOS, EOS)] for key in ngrams
              if len(key) > 1 and any(w in hubs for w in key)]
    pieces = [p for p in pieces if p]
    words = [w for w in vocab if w not in (BOS, EOS)]
    sentences = []
    for _ in range(shape.sentences):
        tokens: list[str] = []
        while len(tokens) < 6:
            kind = rng.random()
            if kind < 0.1:
                tokens.append(rng.choice(UNKNOWN_WORDS))
            elif kind < 0.4:
                tokens += rng.choice(pieces)
            elif kind < 0.85:
                tokens.append(rng.choice([h for h in hubs if h != BOS] or words))
            else:
                tokens.append(rng.choice(words))
        sentences.append(tokens[:rng.randint(1, 6)])
    return text, vocab, sentences


@st.composite
def big_models(draw, max_words: int = 3000) -> BigModelShape:
    """Strategy for the shapes of big models (see the comment above ``BigModelShape``)."""
    return BigModelShape(
        seed=draw(st.integers(0, 2**32 - 1)),
        order=draw(st.integers(2, 4)),
        words=draw(st.integers(300, max_words)),
        has_unk=draw(st.booleans()),
        shuffled=draw(st.booleans()),
        distinct_alphas=draw(st.sampled_from([1, 2, 3, 5, 8, 20, 60])),
        positive_backoffs=draw(st.sampled_from([0.0, 0.3, 0.7, 1.0])),
        rounding=draw(st.sampled_from([0.0, 0.5, 1.0])),
        hubs=draw(st.integers(1, 3)),
        sentences=draw(st.integers(1, 2)),
    )
