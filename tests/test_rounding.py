"""Scores are the definition's bit for bit, whatever the magnitudes of the model's numbers.

A score is a float64 sum of float32 values, and float64 addition is not associative: summed
in another order, the same numbers can round to another last bit.  So "exact" means the
definition's own order (docs/algorithm.md, "Rounding"): a back-off chain as the recursion
nests, beta(h) + (beta(h') + (... + alpha)), and the terms of a position left to right,
which is how ``tests/exhaustive.py`` sums them.  The search also compares scores with an
upper bound on the words it has not read, and drops words whose partial sums cannot reach
the best K; both are sums too, and both must hold for the scores *as rounded*.

The models here are built so that another order gives another answer: back-off weights of
1e-16 beside log-probabilities of 1 (model A: the fixed context's chain summed longest
first lists the wrong word), back-off weights of +-2**30 whose sum cancels (model B: any
slack taken from the total's size is far too small), and a bound that, summed in another
order than the score, rounds just below the score of a word it must not pass (model C).
The property test draws models of such magnitudes at random (tests/arpa_gen.py,
``adversarial``) and compares every list with the exhaustive scorer, word for word and score
for score.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastsubs
from arpa_gen import arpa_models, sentences
from c_programs import build_program, no_sanitizer_report, run_program
from exhaustive import ArpaModel
from fastsubs.indexer.verify import verify_index
from test_exactness import check_model

#: Model A: "B r1 r2 r3 w".  At the first position, w is predicted through the chain of
#: "x r1 r2 r3": only the 5-gram "A r1 r2 r3 w" exists, every other x backs off through
#: three weights near 1e-16 to alpha(w) = -1.
MODEL_A = """\\data\\
ngram 1=8
ngram 2=1
ngram 3=1
ngram 4=0
ngram 5=1

\\1-grams:
-99\t<s>\t0
-2\t</s>
0\tA
0\tB
0\tr1
0\tr2
-1\tw
0\tr3\t-9.436672966118482e-17

\\2-grams:
-1\tr2 r3\t-8.35125384551579e-17

\\3-grams:
0\tr1 r2 r3\t5.703671050882203e-17

\\4-grams:

\\5-grams:
-1\tA r1 r2 r3 w

\\end\\
"""

#: Model B: "c1 c2 c3 u".  The chain predicting the last word from "c1 c2 c3" adds back-off
#: weights of -2**30 and +2**30 that cancel: the partial sums are 2**30 times the total.
MODEL_B = """\\data\\
ngram 1=11
ngram 2=1
ngram 3=1
ngram 4=1

\\1-grams:
-99\t<s>
0\t</s>\t-10
-0.01\tc1\t-10
-0.01\tc2\t-10
-3\tc3
-0.10000139474868774\tu
-3\te
-0.01\tf1\t-10
-0.01\tf2\t-10
-0.01\tf3\t-10
-0.01\tf4\t-10

\\2-grams:
-1\tc2 c3\t1073741824

\\3-grams:
-1\tc1 c2 c3\t-1073741824

\\4-grams:
-0.10000136494636536\tc1 c2 c3 e

\\end\\
"""

#: Model C: "c1 c2 c3 u".  At the last word, u's score is the chain's tiny weights over
#: alpha(u) = -1, and e is the one 4-gram's alpha, -1: the bound on e's list (read first)
#: must not fall below u's score as the score rounds it.
MODEL_C = """\\data\\
ngram 1=11
ngram 2=1
ngram 3=1
ngram 4=1

\\1-grams:
-99\t<s>
0\t</s>\t-10
-0.5\tc1\t-10
-0.5\tc2\t-10
-3\tc3\t-7.668388853631378e-16
-1\tu
-3\te
-0.5\tf1\t-10
-0.5\tf2\t-10
-0.5\tf3\t-10
-0.5\tf4\t-10

\\2-grams:
-1\tc2 c3\t3.365444805618383e-16

\\3-grams:
-1\tc1 c2 c3\t2.7920201762883707e-16

\\4-grams:
-1\tc1 c2 c3 e

\\end\\
"""


def test_model_a_the_fixed_contexts_chain_nests_as_the_recursion() -> None:
    """w's chain in "x r1 r2 r3 w", for every x but A, is the fixed chain of "r1 r2 r3 w":
    summed longest context first it rounds below -1.0, A's 5-gram; nested as the definition
    sums it, just above, so B, r1 and r2 rank above A."""
    oracle = ArpaModel.from_text(MODEL_A).stored_as_float32()
    betas = [oracle.ngrams[key][1] for key in (("r1", "r2", "r3"), ("r2", "r3"), ("r3",))]
    longest_first = ((betas[0] + betas[1]) + betas[2]) + -1.0
    nested = betas[0] + (betas[1] + (betas[2] + -1.0))
    assert nested > -1.0 > longest_first  # the case is the one meant
    top = oracle.ranked(oracle.substitute_scores(["B", "r1", "r2", "r3", "w"], 0))
    assert top[0][1] > top[3][1] and top[3][0] == "A"
    check_model(MODEL_A, [["B", "r1", "r2", "r3", "w"]])


def test_model_b_back_off_weights_that_cancel() -> None:
    """Partial sums of +-2**30 lose the last bits of -0.1000013...: the answer is the
    definition's, as the definition rounds it, at every position and limit."""
    oracle = ArpaModel.from_text(MODEL_B).stored_as_float32()
    scores = oracle.substitute_scores(["c1", "c2", "c3", "u"], 3)
    assert abs(scores["u"] - scores["e"]) < 1e-7  # the two nearly tie
    check_model(MODEL_B, [["c1", "c2", "c3", "u"]])


@pytest.fixture(scope="module")
def bound_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_program(tmp_path_factory, "bound_check.c")


def test_model_c_an_alternatives_bound_is_the_chain_of_its_best_word(bound_check: Path) -> None:
    """The bound of u's alternative at model C's position (the unigram list, its sup u's alpha
    -1, under the back-off weights of "c1 c2 c3", "c2 c3" and "c3") is the score of u itself,
    summed as the score sums the chain; the weights summed first round below u's score,
    and below e's -1.0.  Whether the search's answers show such a bound depends on when the
    search recomputes it (the search tests of models B and C caught it only while the bound
    was recomputed as soon as another list could bind: KEEP_GAPS 1); this checks the sum."""
    oracle = ArpaModel.from_text(MODEL_C).stored_as_float32()
    context = ("c1", "c2", "c3")
    sups = [oracle.ngrams[context[k:]][1] for k in range(len(context))]
    inner = oracle.ngrams[("u",)][0]
    result = run_program(bound_check, inner.hex(), *(sup.hex() for sup in sups), timeout=60)
    no_sanitizer_report(result)
    bound = float.fromhex(result.stdout.decode().strip())
    assert bound == oracle.logprob("u", context) > -1.0
    assert sum(sups) + inner < -1.0  # the other order: what the search must not take


def test_model_c_the_bound_is_summed_as_the_score() -> None:
    """u's score, as rounded, is above -1.0, e's; a bound summed in another order than the
    score (the tiny weights first, then the list's -1) rounds to -1.0 and lets e pass u."""
    oracle = ArpaModel.from_text(MODEL_C).stored_as_float32()
    ranked = oracle.ranked(oracle.substitute_scores(["c1", "c2", "c3", "u"], 3))
    assert [word for word, _ in ranked[:2]] == ["u", "e"] and ranked[0][1] > ranked[1][1] == -1.0
    check_model(MODEL_C, [["c1", "c2", "c3", "u"]])


#: Model E: the joint bound (docs/algorithm.md, "The joint bound") needs its slack.  In
#: "b x d", x (alpha a = -(2**-53 - 2**-60)) is not in "b _", so its term 0 is beta(b) + a with
#: beta(b) = -1, and it is in "_ d" with alpha(x d) = a: its score, as the definition rounds
#: it, is (-1 + a) + a = -1.0 exactly.  Its joint key a + a is exact in float32, yet -1 + (a +
#: a), the joint sum without slack, rounds to -1 - 2**-52: below x's score.  y ("b y": -1,
#: "y d": 0) ties x at -1.0 with a higher id; w1 ... w64 (alpha 2a, "w d": 0) fill the first
#: batch from the joint order, ahead of x (equal keys, lower ids), and f1 ... f64 (alpha 0)
#: keep x from the top of the unigram list (a first batch takes at least MIN_BATCH, at most
#: MAX_FIRST_BATCH words: kernel/searcher.h).  Without the slack, y is listed above a bound
#: of -1 - 2**-52 before x is read; x must come first.
FILLERS = 64
MODEL_E = f"""\\data\\
ngram 1={6 + 2 * FILLERS}
ngram 2={3 + FILLERS}

\\1-grams:
-99\t<s>
-3\t</s>
-3\tb\t-1
-50\td
""" + "".join(f"0\tf{i}\n" for i in range(1, FILLERS + 1)) + "".join(
    f"-2.203098814490545e-16\tw{i}\n" for i in range(1, FILLERS + 1)) + """-1.1015494072452725e-16\tx
-5\ty

\\2-grams:
-1\tb y
0\ty d
-1.1015494072452725e-16\tx d
""" + "".join(f"0\tw{i} d\n" for i in range(1, FILLERS + 1)) + """
\\end\\
"""


def test_model_e_the_joint_bound_covers_the_rounding_of_both_chains() -> None:
    oracle = ArpaModel.from_text(MODEL_E).stored_as_float32()
    a = oracle.ngrams[("x",)][0]
    assert (-1.0 + a) + a == -1.0 > -1.0 + (a + a)  # the case is the one meant
    ranked = oracle.ranked(oracle.substitute_scores(["b", "x", "d"], 1))
    assert [(word, score) for word, score in ranked[:2]] == [("x", -1.0), ("y", -1.0)]
    check_model(MODEL_E, [["b", "x", "d"]])


@st.composite
def adversarial_model_and_sentences(draw):
    model = draw(arpa_models(max_order=6, adversarial=True))
    return model, draw(st.lists(sentences(model), min_size=1, max_size=3))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_model_and_sentences())
def test_search_equals_exhaustive_scoring_whatever_the_magnitudes(case) -> None:
    """Random models with tiny and huge numbers, repeated values (ties), -99 and positive
    back-off weights, orders 1-6, with and without <unk>: every position, every limit of
    test_exactness (-n and -p), the same words and scores bit for bit."""
    model, sentence_list = case
    check_model(model.text, sentence_list)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_model_and_sentences())
def test_search_equals_exhaustive_scoring_whatever_the_magnitudes_long_run(case) -> None:
    model, sentence_list = case
    check_model(model.text, sentence_list)


#: Model D: "x c d", order 3.  x and y tie at the first position, as rounded (x first: the
#: lower id).  y is read first (its bigram "<s> y"), x in a later batch, from the unigrams
#: (after FILLERS words f0 ... f63 of a higher alpha, more than a first batch takes);
#: x's later terms equal their bounds (its unigram back-off is the largest, nothing else
#: depends on x), so x's partial sum after its first term plus those bounds, summed as the
#: score sums them, is exactly y's score: x must be kept.  Summed in another order, or
#: compared with the threshold less the bounds, that rounds below y's score.
MODEL_D = f"""\\data\\
ngram 1={6 + FILLERS}
ngram 2=2
ngram 3=1

\\1-grams:
-99\t<s>\t0
-5\t</s>
-1\tx\t6.245004513516506e-17
-5\ty\t6.245004513516506e-17
0\tc\t-10
-5\td
""" + "".join(f"-0.5\tf{i}\t-10\n" for i in range(FILLERS)) + """
\\2-grams:
-0.25\t<s> y\t-0.75
-3.3306690738754696e-15\tc d

\\3-grams:
-1\td f1 f2

\\end\\
"""


def test_model_d_a_word_tying_the_kth_score_is_kept() -> None:
    """The words a batch drops after a term are those whose partial sum plus the later terms'
    bounds, summed as the score sums them, stays below the K-th score so far: x's reaches
    y's score exactly, and x, the lower id, is listed first."""
    oracle = ArpaModel.from_text(MODEL_D).stored_as_float32()
    ranked = oracle.ranked(oracle.substitute_scores(["x", "c", "d"], 0))
    assert [word for word, _ in ranked[:2]] == ["x", "y"] and ranked[0][1] == ranked[1][1]  # the case meant
    check_model(MODEL_D, [["x", "c", "d"]])


def test_unigrams_one_float32_apart_only_as_written_are_ordered_by_id(tmp_path: Path) -> None:
    """Two unigrams whose log-probabilities differ as written but round to one float32 (the
    index's) are ordered by id, as the format says (ties by id; verify checks it), not by
    their float64 values, which put the later word first."""
    below, above = np.float64(-1.00000001), np.float64(-1.0)
    assert below < above and np.float32(below) == np.float32(above)  # the premise: one float32
    (tmp_path / "f.arpa").write_text(MODEL_F)
    index = tmp_path / "f.fsidx"
    fastsubs.build_index(tmp_path / "f.arpa", index)
    assert not verify_index(index).problems


#: Model F: "low" (id 3) and "high" (id 4) share one float32 log-probability, "high" the
#: greater as written.
MODEL_F = """\\data\\
ngram 1=5
ngram 2=1

\\1-grams:
-99\t<s>\t0
-2\t</s>
-0.5\tx
-1.00000001\tlow
-1.0\thigh

\\2-grams:
-0.1\tx low

\\end\\
"""
