"""``fastsubs-bench synth``: big valid ARPA models, for measuring the index builder at scale.

Real models stay the reference for search speed; what this makes is a model of any size
with a real model's shape, for build time, build memory, index size and start-up.  The
n-grams per order follow the ratios of ``kn4-64k`` (64,003 / 1,493,655 / 4,004,856 /
5,499,606; past order 4 the last ratio goes on), unigram probabilities follow Zipf's law,
and how many continuations a context has follows its probability, so that a few
contexts have thousands and most have one or two, as in a real model (the index's layout
depends on it).  The text is what KenLM writes: tab-separated fields, ``<unk>``, ``<s>``
(log-prob -99) and ``</s>``, a back-off weight on every n-gram below the highest order
(0 where it is no context); back-off weights of both signs, as SRILM's models have.

Nothing is stored: order k's n-grams are the continuations of order k-1's, and order
k-1's are made again from order k-2's whenever needed, from the same seeded rule, a
block at a time with numpy.  Memory is therefore bounded by the block size and the
vocabulary, whatever the number of n-grams (peak 105 MB at 128K words, 135 MB at 512K,
measured at 10M and 100M n-grams), and the same arguments give the same bytes.  It
writes ~1.4M n-grams a second on one core (.gz: ISA-L compressing on a thread of its own),
through :func:`fastsubs.bench.arpa_text.synthesize`.

The rule, for order k (every value a function of the seed and the n-gram's place in its
order, never of a running random state):

* every (k-1)-gram that does not end with ``</s>`` is a context and gets one
  continuation, as nearly all do in an unpruned model (when order k has fewer n-grams
  than there are contexts, none is given one this way); the other n-grams of order k
  are shared out in proportion to the contexts' weights, their probability to the
  power ``GAMMAS[k]``, clipped so no context gets more than MAX_CONTINUATIONS of the
  vocabulary, by rounding their running sum (so the counts add up exactly).
* the j-th continuation of a context is the word at place ``(a*j + b) mod M`` of the
  vocabulary by frequency (M words: all but ``<s>`` and ``<unk>``), ``a`` small and
  coprime to M, ``b`` biased to the frequent words: the continuations of a context are
  distinct words, and every prefix of an n-gram is an n-gram of the model.
* the j-th continuation's probability is Zipf-like in j; its mass is its context's
  times that.

Planning an order takes one or two passes over the order below (the sum of the
weights, and where they must be clipped); writing order k makes orders 1..k once more.
Suffixes are not closed as in a KenLM model (``b c`` need not be a bigram where
``a b c`` is a trigram): a back-off model need not have them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fastsubs.errors import FastsubsError

#: n-grams per order of kn4-64k, whose ratios a synthetic model follows.
KN4_64K = (64_003, 1_493_655, 4_004_856, 5_499_606)
#: The exponent turning a context's probability into its share of the next order's
#: n-grams, by the order of those n-grams (the last one goes on for higher orders):
#: chosen so that pattern sizes come out skewed as kn4-64k's are.
GAMMAS = {2: 0.9, 3: 1.2, 4: 1.35}
#: How strongly a context's continuations start at the most frequent words: their first
#: place is spread ** u ** START_SKEW - 1, u uniform (spread = the places a context's
#: continuations leave free); 1 is log-uniform.
START_SKEW = 2.5
#: Rows of one block: bounds the memory of every step.
BLOCK_ROWS = 1 << 16
#: Most continuations a context may have, as a share of the vocabulary (kn4-64k's most
#: prolific context has 60% of it).
MAX_CONTINUATIONS = 0.6
#: The steps of the affine maps picking continuations, one drawn per context (those
#: that share a factor with M left out): 1, contiguous places, the most likely.
COPRIME_STEPS = (1, 1, 1, 1, 2, 3, 5, 7, 11, 13)
#: Share of the back-off weights that are positive (as SRILM's models have).
POSITIVE_BACKOFFS = 0.07
#: Suffixes of the numbers given on the command line (decimal: kn4-64k's 64K is 64,000 words).
SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}

UNK, BOS, EOS = 0, 1, 2
SPECIALS = (b"<unk>", b"<s>", b"</s>")
#: Purposes of the hashed random values (each gets its own stream).
_WORD_STEP, _WORD_START, _NOISE, _BACKOFF_SIGN, _BACKOFF = range(5)


def parse_count(text: str, what: str) -> int:
    """``text`` as a whole number, with an optional K, M or G (thousand, million, billion)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)\s*", text, re.IGNORECASE)
    value = float(found.group(1)) * SUFFIXES[found.group(2).upper()] if found else -1.0
    if value < 1 or value != int(value):
        raise FastsubsError(f"{what} takes a whole number >= 1, with K, M or G (e.g. 100M), not {text!r}")
    return int(value)


def order_counts(ngrams: int, order: int, vocab: int | None = None) -> list[int]:
    """n-grams per order summing to ``ngrams``, in kn4-64k's ratios.  ``vocab`` unigrams
    when given (the rest shared out in the ratios of the higher orders), else kn4-64k's share."""
    if order < 2:
        raise FastsubsError(f"--order takes 2 or more, not {order}")
    ratios = [float(count) for count in KN4_64K]
    while len(ratios) < order:
        ratios.append(ratios[-1] * KN4_64K[3] / KN4_64K[2])
    ratios = ratios[:order]
    if vocab is None:
        vocab = max(4, round(ngrams * ratios[0] / sum(ratios)))
    if vocab < 4:
        raise FastsubsError(f"--vocab takes 4 or more unigrams (<unk>, <s>, </s> and a word), not {vocab}")
    rest = ngrams - vocab
    if rest < order - 1:
        raise FastsubsError(f"--ngrams {ngrams:,} leaves {max(rest, 0):,} n-grams above the {vocab:,} unigrams; "
                            f"an order-{order} model needs at least {order - 1}")
    # largest remainders: the counts add up to rest exactly
    shares = np.array(ratios[1:]) / sum(ratios[1:]) * rest
    counts = np.maximum(np.floor(shares).astype(np.int64), 1)
    for at in np.argsort(-(shares - np.floor(shares)), kind="stable")[:rest - int(counts.sum())]:
        counts[at] += 1
    while counts.sum() > rest:  # only where the floor of 1 took n-grams from elsewhere
        counts[int(np.argmax(counts))] -= 1
    return [vocab, *map(int, counts)]


# --- random values: a pure function of (seed, order, purpose, place in the order) ----------

def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over a uint64 array."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _uniform(seed: int, order: int, purpose: int, places: np.ndarray) -> np.ndarray:
    """Uniform floats in [0, 1), one per place (int64 array)."""
    key = _mix(np.array([(seed * 0x9E3779B97F4A7C15 + order * 0xD1B54A32D192ED03 + purpose) % 2**64],
                        dtype=np.uint64))
    h = _mix(places.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + key)
    return (h >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


# --- the vocabulary ---------------------------------------------------------------------


@dataclass
class Vocabulary:
    """Word ids: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, then the other words by frequency.

    ``by_frequency`` lists the M words a continuation can be (all but ``<s>`` and
    ``<unk>``), most frequent first, ``</s>`` the third; ``place`` is each id's place
    there (``<s>`` gets ``</s>``'s: a sentence starts as often as one ends).
    """

    size: int
    by_frequency: np.ndarray  # int32 [M]
    place: np.ndarray  # int64 [size]
    chars: np.ndarray  # uint8 [size, width]: each word, padded
    lengths: np.ndarray  # int64 [size]

    @staticmethod
    def make(size: int) -> Vocabulary:
        by_frequency = np.concatenate([np.arange(3, min(5, size)), [EOS], np.arange(5, size)]).astype(np.int32)
        place = np.zeros(size, dtype=np.int64)
        place[by_frequency] = np.arange(len(by_frequency))
        place[BOS], place[UNK] = place[EOS], len(by_frequency)
        # the other words: 1, 2, ... in bijective base 26 (a .. z, aa ..), so the frequent words are short
        lengths = np.array([len(word) for word in SPECIALS] + [0] * (size - 3), dtype=np.int64)
        rank = np.arange(1, size - 2, dtype=np.int64)
        digits = []  # the last letter of each word first
        while rank.any():
            lengths[3:] += rank > 0
            digits.append((rank - 1) % 26 + ord("a"))
            rank = np.where(rank > 0, (rank - 1) // 26, 0)
        chars = np.zeros((size, max(lengths)), dtype=np.uint8)
        for i, word in enumerate(SPECIALS):
            chars[i, :len(word)] = np.frombuffer(word, np.uint8)
        words = np.arange(3, size)
        for back, letters in enumerate(digits):
            has = lengths[3:] > back
            chars[words[has], lengths[3:][has] - 1 - back] = letters[has]
        return Vocabulary(size, by_frequency, place, chars, lengths)

    def zipf_log_mass(self, ids: np.ndarray) -> np.ndarray:
        """Natural log of each word's Zipf probability, 1 / ((place + 1) * H_M)."""
        m = len(self.by_frequency)
        return -np.log((self.place[ids] + 1.0) * _harmonic(np.array([m], dtype=np.float64))[0])


def _harmonic(n: np.ndarray) -> np.ndarray:
    """H_n, the n-th harmonic number, approximately (n >= 1, float array)."""
    return np.log(n) + 0.5772156649 + 0.5 / n


# --- n-grams, a block at a time ----------------------------------------------------------


@dataclass
class Block:
    """Consecutive n-grams of one order, the first being the order's ``first``-th."""

    first: int
    ids: np.ndarray  # int32 [order, rows]: the words of each n-gram, a row per place
    log_mass: np.ndarray  # float64 [rows]: natural log of the n-gram's probability
    alpha: np.ndarray  # float64 [rows]: log10 probability as written
    continuations: np.ndarray | None = None  # int64 [rows]: how many n-grams of the next order extend each
    first_continuation: np.ndarray | None = None  # int64 [rows]: place of the first of them in the next order

    @property
    def order(self) -> int:
        return int(self.ids.shape[0])

    def places(self) -> np.ndarray:
        return np.arange(self.first, self.first + self.ids.shape[1], dtype=np.int64)


@dataclass(frozen=True)
class Plan:
    """How order ``order``'s ``count`` n-grams are shared out among order ``order - 1``'s:
    ``base`` to every context (each (order-1)-gram not ending a sentence), the ``extra``
    others in proportion to the contexts' weights (clipped at ``clip``), rounded by running sum."""

    order: int
    count: int
    base: int
    extra: int
    gamma: float
    clip: float
    scale: float


class Synthesizer:
    """The n-grams of one synthetic model, generated again on every call."""

    def __init__(self, counts: list[int], seed: int) -> None:
        self.counts = counts
        self.seed = seed
        self.vocab = Vocabulary.make(counts[0])
        self.width = len(self.vocab.by_frequency)  # M
        self.most = max(1, int(MAX_CONTINUATIONS * self.width))
        # steps of the affine maps: small numbers coprime to M (1 the most likely)
        self.steps = np.array([s for s in COPRIME_STEPS if math.gcd(s, self.width) == 1], dtype=np.int64)
        self.plans: list[Plan] = []
        for order in range(2, len(counts) + 1):
            self.plans.append(self._plan(order))

    @property
    def order(self) -> int:
        return len(self.counts)

    def blocks(self, order: int) -> Iterator[Block]:
        """The n-grams of ``order`` in file order; with their continuations once that order is planned."""
        made = self._unigrams() if order == 1 else self._continuations(order)
        if len(self.plans) < order:  # the next order (if any) is not planned yet
            yield from made
            return
        plan = self.plans[order - 1]
        running, contexts, shared = 0.0, 0, 0
        for block in made:
            weights = self._weights(block, plan.gamma)
            total = running + np.cumsum(np.minimum(weights, plan.clip))
            running = float(total[-1])
            ends = np.floor(total * plan.scale + 0.5).astype(np.int64)
            if plan.base:
                ends += plan.base * (contexts + np.cumsum(weights > 0))
                contexts += int(np.count_nonzero(weights))
            block.first_continuation = np.concatenate([[shared], ends[:-1]])
            block.continuations = ends - block.first_continuation
            shared = int(ends[-1])
            yield block
        if shared != plan.count:
            raise AssertionError(f"order {order + 1}: shared out {shared} n-grams, planned {plan.count}")

    def backoffs(self, block: Block) -> np.ndarray:
        """The back-off weight (log10) of each n-gram of ``block``, an order below the highest:
        0 where it is no context, else mostly negative (POSITIVE_BACKOFFS of them positive)."""
        assert block.continuations is not None
        places = block.places()
        positive = _uniform(self.seed, block.order, _BACKOFF_SIGN, places) < POSITIVE_BACKOFFS
        size = _uniform(self.seed, block.order, _BACKOFF, places)
        beta = np.where(positive, 0.01 + 0.3 * size, -(0.02 + 0.5 * size ** 3))
        return np.where(block.continuations > 0, beta, 0.0)

    def _weights(self, block: Block, gamma: float) -> np.ndarray:
        """Each n-gram's weight as a context: its probability to the power gamma, 0 if it ends a sentence."""
        last = block.ids[-1]
        return np.where((last == EOS) | (last == UNK), 0.0, np.exp(gamma * block.log_mass))

    def _plan(self, order: int) -> Plan:
        """Share order's n-grams among the (order-1)-grams: one pass for the sum of the
        weights, another when the biggest shares must be clipped to what the vocabulary allows."""
        count = self.counts[order - 1]
        gamma = GAMMAS[min(order, max(GAMMAS))]
        total, top, contexts = 0.0, 0.0, 0
        histogram = np.zeros(_BINS)
        sums = np.zeros(_BINS)
        for block in self.blocks(order - 1):
            weights = self._weights(block, gamma)
            total = total + float(np.cumsum(weights)[-1])
            top = max(top, float(weights.max()))
            positive = weights[weights > 0]
            contexts += len(positive)
            bins = np.clip((np.log(positive) - _LOWEST) * _BINS_PER_UNIT, 0, _BINS - 1).astype(np.int64)
            histogram += np.bincount(bins, minlength=_BINS)
            sums += np.bincount(bins, weights=positive, minlength=_BINS)
        # as in a real model, every context has a continuation, when there are enough
        base = 1 if count >= contexts else 0
        extra = count - base * contexts
        most = self.most * 0.97 - 2 - base  # room for the rounding (checked below)
        if contexts * most < extra:
            raise FastsubsError(
                f"{count:,} {order}-grams cannot be made with {self.counts[0]:,} words: each of the "
                f"{contexts:,} contexts can have at most {self.most:,} continuations; give a bigger --vocab "
                f"or fewer --ngrams")
        if extra / total * top <= most:
            return Plan(order, count, base, extra, gamma, math.inf, extra / total)
        clip = _solve_clip(histogram, sums, extra, most)
        total = 0.0
        for block in self.blocks(order - 1):
            total = total + float(np.cumsum(np.minimum(self._weights(block, gamma), clip))[-1])
        plan = Plan(order, count, base, extra, gamma, clip, extra / total)
        if plan.clip * plan.scale + 1 + base > self.most:
            raise FastsubsError(f"{count:,} {order}-grams are too many for {self.counts[0]:,} words; "
                                f"give a bigger --vocab or fewer --ngrams")
        return plan

    def _unigrams(self) -> Iterator[Block]:
        vocab = self.vocab
        for first in range(0, vocab.size, BLOCK_ROWS):
            ids = np.arange(first, min(first + BLOCK_ROWS, vocab.size), dtype=np.int32)
            log_mass = vocab.zipf_log_mass(ids)
            noise = _uniform(self.seed, 1, _NOISE, ids) - 0.5
            alpha = np.minimum(log_mass / math.log(10) + 0.1 * noise, -1e-3)
            alpha[ids == BOS] = -99.0
            yield Block(first, ids[None, :], log_mass, alpha)

    def _continuations(self, order: int) -> Iterator[Block]:
        """Order's n-grams, made from the (order-1)-grams with their continuation counts."""
        for parent in self.blocks(order - 1):
            assert parent.continuations is not None and parent.first_continuation is not None
            counts = parent.continuations
            if counts.max() > self.most:
                raise AssertionError(f"a context of order {order - 1} got {counts.max()} continuations")
            places = parent.places()
            nonzero = np.maximum(counts, 1).astype(np.float64)
            harmonic = _harmonic(nonzero)
            # the affine map of each context: a step coprime to M, a start biased to frequent words
            step = self.steps[(_uniform(self.seed, order, _WORD_STEP, places) * len(self.steps)).astype(np.int64)]
            spread = np.maximum(self.width / nonzero, 1.0)
            skewed = _uniform(self.seed, order, _WORD_START, places) ** START_SKEW
            start = np.floor(spread ** skewed).astype(np.int64) - 1
            ends = np.cumsum(counts)
            begins = ends - counts
            for low in range(0, int(ends[-1]), BLOCK_ROWS):
                high = min(low + BLOCK_ROWS, int(ends[-1]))
                # the contexts of continuations low .. high-1: each repeated once per continuation
                first_context, last_context = np.searchsorted(ends, [low, high - 1], side="right")
                shares = np.minimum(ends[first_context:last_context + 1], high) - np.maximum(
                    begins[first_context:last_context + 1], low)
                p = first_context + np.repeat(np.arange(len(shares)), shares)
                j = np.arange(low, high) - begins[p]
                ids = np.empty((order, high - low), dtype=np.int32)
                for place in range(order - 1):
                    ids[place] = parent.ids[place][p]
                ids[-1] = self.vocab.by_frequency[(step[p] * j + start[p]) % self.width]
                zipf = np.log((j + 1.0) * harmonic[p])
                first = int(parent.first_continuation[0]) + low
                noise = _uniform(self.seed, order, _NOISE, np.arange(first, first + high - low, dtype=np.int64))
                alpha = np.clip(-0.75 / math.log(10) * zipf - 0.05 - 0.4 * noise, -7.0, -0.05)
                yield Block(first, ids, parent.log_mass[p] - zipf, alpha)


#: Histogram of log-weights for solving the clip: the lowest log (a weight is at most 1,
#: and at least 1e-300 or so), bins per unit of natural log, and how many.
_LOWEST = -720.0
_BINS_PER_UNIT = 32
_BINS = 740 * _BINS_PER_UNIT


def _solve_clip(histogram: np.ndarray, sums: np.ndarray, count: int, most: float) -> float:
    """The clip c (a weight) such that sum(min(w, c)) * most / c = count, from a histogram of the weights."""
    lows = np.exp(_LOWEST + np.arange(_BINS) / _BINS_PER_UNIT)

    def shared(clip: float) -> float:
        below = lows < clip
        return (sums[below].sum() + clip * histogram[~below].sum()) * most / clip

    low, high = math.log(lows[0]), math.log(lows[-1]) + 1
    for _ in range(100):  # shared() falls as the clip grows
        middle = (low + high) / 2
        low, high = (middle, high) if shared(math.exp(middle)) > count else (low, middle)
    return math.exp(high)
