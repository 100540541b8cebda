/* The joint bound on terms 0 and 1 (docs/algorithm.md, "The joint bound"), all of it: when it
 * applies and its rounding slack (joint_plan), and its value over the classes of unread words
 * (joint_bound).  See joint.h.
 *
 * The bound of search.c adds one maximum per term, and the maxima of terms 0 and 1 belong to
 * different words: term 0 (p(x | ...)) is largest for frequent words, term 1 (p(d | ... x)) for
 * the rare words that top the list of "_ d".  Index format 4 keeps, for such a pattern, its
 * words by the joint key alpha(x) + alpha(x d) (rounded up to float32), and the search reads
 * that order as one more list, which bounds both terms of the words of "_ d" at once. */
#include "joint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- the plan */

/* Stops the process unless ``holds``: an invariant of the search's own making is broken
 * (see joint_plan).  Python's builds define NDEBUG, which leaves assert() out; this stays. */
static void require(int holds, const char *what) {
    if (!holds) {
        fprintf(stderr, "fastsubs: kernel/joint.c: the joint bound's invariant does not hold: %s\n", what);
        abort();
    }
}

/* The slack that J (joint_bound) adds for the rounding of both chains: the score's two
 * chains have at most 2N leaves (N the order), each within M' = max(M, 100) (M the index's
 * value bound, 100 the unknown word's -100), and docs/algorithm.md, "The joint bound",
 * derives (16 N^2 + 4) u M' (u = 2^-53) as a bound on their rounding, on that of J's own
 * sum, and on that of the slack's addition: about 2.9e-12 for a 4-gram model. */
static double slack(const Store *s) {
    double magnitude = s->value_bound > -UNKNOWN_WORD_LOGPROB ? s->value_bound : -UNKNOWN_WORD_LOGPROB;
    return (16.0 * s->order * s->order + 4.0) * 0x1p-53 * magnitude;
}

const SearchPattern *joint_plan(Searcher *searcher, int n_terms) {
    if (n_terms < 2)
        return NULL;
    const SearchTerm *t0 = &searcher->terms[0], *t1 = &searcher->terms[1];
    /* Term 0 predicts x: its contexts hold no x, so its back-off weights are constants
     * (terms.c), down to the unigram alpha of x, read from the unigram list: the pairs of
     * joint_bound take its last alternative for that base, and its key's alpha(x) for it. */
    const Alt *last = t0->n_alts ? &searcher->alts[t0->first_alt + t0->n_alts - 1] : NULL;
    require(t0->base_unigram && last && last->list == searcher->unigram_list && last->n_longer == t0->n,
            "term 0's last alternative is not its unigram base");
    /* Term 1 has x in its contexts: its base is a constant (the probability once x has left
     * them), so each of its alternatives is a step's pattern. */
    require(!t1->base_unigram, "term 1's base is not a constant");
    for (int a = 0; a < t1->n_alts; a++) {
        int step = searcher->alts[t1->first_alt + a].n_longer;
        const SearchPattern *d = &searcher->pats[searcher->steps[t1->first + step].alpha];
        if (d->data.joint) {
            searcher->joint_alt = a;
            searcher->joint_slack = slack(searcher->reader.store);
            for (int p = 0; p < t0->n_alts; p++)
                searcher->pair_lists[p] = searcher->pair_split ? NONE : NO_PAIR;
            return d;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- the bound */

/* An unread x takes one alternative in each of terms 0 and 1, so the pairs (alternative of
 * term 0, alternative of term 1) split the unread words into these classes; a bound on each
 * class, the largest bounds them all. */
enum {
    IN_A_PATTERN_OF_TERM_0,  /* x in a pattern P of term 0: that alternative, plus term 1's bound on P's words */
    BASE_NOT_IN_D,           /* x takes term 0's unigram base, and any alternative of term 1 but "_ d" */
    BASE_IN_D,               /* x takes the base and is in "_ d": the two alternatives, or J */
    N_CLASSES
};

/* The list of alternative ``a`` of ``term``, NONE for none. */
static int list_of(const Searcher *searcher, const SearchTerm *term, int a) {
    return a == NONE ? NONE : searcher->alts[term->first_alt + a].list;
}

/* Term 1's alternatives as joint_bound splits them: "_ d" (in_d, its list d_list), and the
 * largest of the others, its constant included (other, the list of arg: NONE for the constant). */
typedef struct {
    double in_d, other;
    int d_list, other_list;
} Term1;

/* The class "x in a pattern P of term 0" (IN_A_PATTERN_OF_TERM_0), split by each P: an unread
 * word of P is at most P's alternative in term 0, and in term 1 at most its largest other
 * alternative, or, when it is in "_ d" too, "_ d"'s alternative over the pair list of P (the
 * words of P in "_ d", by alpha(x d): its next entry bounds alpha(x d) of every unread one).
 * Sums summed as the score sums them (upper_term, then t_0 + t_1), so no slack is needed.
 * Until P's pair list is started, "_ d"'s own list bounds those words; *unsplit: the largest
 * P's alternative then (NONE when the largest is split, or needs no "_ d").  *max0: the
 * largest alternative of term 0 but its base. */
static PairBound in_a_pattern(Searcher *searcher, const Term1 *t1, double *max0, int *unsplit) {
    const SearchTerm *t0 = &searcher->terms[0], *term1 = &searcher->terms[1];
    const SearchStep *steps1 = &searcher->steps[term1->first];
    int above_d = searcher->alts[term1->first_alt + searcher->joint_alt].n_longer;
    PairBound best = {-INFINITY, {NONE, NONE}, NONE};
    double all1 = t1->in_d > t1->other ? t1->in_d : t1->other;
    *max0 = -INFINITY;
    *unsplit = NONE;
    for (int a = 0; a < t0->n_alts - 1; a++) {
        double alone = alternative(searcher, t0, a);
        *max0 = alone > *max0 ? alone : *max0;
        if (alone + all1 <= best.value)
            continue;  /* (the split lowers only term 1's part, at most all1: it cannot win) */
        /* (the pair list may stand above "_ d"'s own, which the search reads too: both bound) */
        int pair = searcher->pair_lists[a];
        double split = pair < 0 ? INFINITY : upper_term(steps1, above_d, searcher->lists[pair].sup);
        int d_list = split < t1->in_d ? pair : t1->d_list;
        double in_d = split < t1->in_d ? split : t1->in_d;
        int by_d = in_d > t1->other;
        double value = alone + (by_d ? in_d : t1->other);
        if (value > best.value) {
            best = (PairBound){value, {list_of(searcher, t0, a), by_d ? d_list : t1->other_list}, NONE};
            *unsplit = by_d && pair == NONE ? a : NONE;
        }
    }
    return best;
}

PairBound joint_bound(Searcher *searcher, double *runner_up) {
    SearchTerm *t0 = &searcher->terms[0], *t1 = &searcher->terms[1];
    int base_alt = t0->n_alts - 1, d_alt = searcher->joint_alt;  /* (joint_plan checked the base) */
    double base0 = alternative(searcher, t0, base_alt);
    /* term 1: "_ d", and the best of the others, its constant alternative included */
    Term1 one = {alternative(searcher, t1, d_alt), t1->fixed, list_of(searcher, t1, d_alt), NONE};
    for (int a = 0; a < t1->n_alts; a++) {
        double value = a == d_alt ? -INFINITY : alternative(searcher, t1, a);
        if (value > one.other) {
            one.other = value;
            one.other_list = list_of(searcher, t1, a);
        }
    }
    searcher->term_sup[1] = one.in_d > one.other ? one.in_d : one.other;
    /* J: term 0's constants over term 1's beta sups above "_ d" over the joint list's next
     * key, which bounds alpha(x) + alpha(x d) of every unread word of "_ d", plus the slack
     * (the key is one number where the score has two, each inside its own chain) */
    const List *joint = &searcher->lists[searcher->joint_list];
    double pair = upper_term(&searcher->steps[t0->first], t0->n,
                             upper_term(&searcher->steps[t1->first], searcher->alts[t1->first_alt + d_alt].n_longer,
                                        joint->sup));
    pair = joint->sup == -INFINITY ? -INFINITY : pair + searcher->joint_slack;
    double separate = base0 + one.in_d;
    int unigram = list_of(searcher, t0, base_alt);
    PairBound classes[N_CLASSES] = {
        [BASE_NOT_IN_D] = {base0 + one.other, {unigram, one.other_list}, NONE},
        [BASE_IN_D] = pair < separate ? (PairBound){pair, {searcher->joint_list, NONE}, NONE}
                                      : (PairBound){separate, {unigram, one.d_list}, NONE},
    };
    int best, unsplit;
    double max0;
    classes[IN_A_PATTERN_OF_TERM_0] = in_a_pattern(searcher, &one, &max0, &unsplit);
    best = 0;
    for (int c = 1; c < N_CLASSES; c++)
        best = classes[c].value > classes[best].value ? c : best;
    /* The pair list of the pattern whose class would bind is started only then (most are
     * never needed), and the bound computed again. */
    classes[best].start = best == IN_A_PATTERN_OF_TERM_0 ? unsplit : NONE;
    searcher->term_sup[0] = base0 > max0 ? base0 : max0;
    double second = -INFINITY;
    for (int c = 0; c < N_CLASSES; c++)
        if (c != best && classes[c].value > second)
            second = classes[c].value;
    *runner_up = second;
    return classes[best];
}
