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
    IN_A_PATTERN_OF_TERM_0,  /* x in a pattern of term 0: that alternative, plus term 1's largest */
    BASE_NOT_IN_D,           /* x takes term 0's unigram base, and any alternative of term 1 but "_ d" */
    BASE_IN_D,               /* x takes the base and is in "_ d": the two alternatives, or J */
    N_CLASSES
};

/* A row of the table: a class's bound, and what binds it: the lists of one alternative of
 * term 0 and one of term 1 (NONE: none), or the joint list alone.  Only the largest class's
 * lists are looked up. */
typedef struct {
    double value;
    int alt0, alt1;
    int joint;
} PairClass;

/* The list of alternative ``a`` of ``term``, NONE for none. */
static int list_of(const Searcher *searcher, const SearchTerm *term, int a) {
    return a == NONE ? NONE : searcher->alts[term->first_alt + a].list;
}

PairBound joint_bound(Searcher *searcher, double *runner_up) {
    SearchTerm *t0 = &searcher->terms[0], *t1 = &searcher->terms[1];
    int base_alt = t0->n_alts - 1, d_alt = searcher->joint_alt;  /* (joint_plan checked the base) */
    /* term 0: its unigram base and the best of the others */
    double base0 = alternative(searcher, t0, base_alt), other0 = -INFINITY;
    int arg0 = NONE;
    for (int a = 0; a < base_alt; a++) {
        double value = alternative(searcher, t0, a);
        if (value > other0) {
            other0 = value;
            arg0 = a;
        }
    }
    /* term 1: "_ d", and the best of the others, its constant alternative included */
    double in_d = alternative(searcher, t1, d_alt), other1 = t1->fixed;
    int arg1 = NONE;
    for (int a = 0; a < t1->n_alts; a++) {
        double value = a == d_alt ? -INFINITY : alternative(searcher, t1, a);
        if (value > other1) {
            other1 = value;
            arg1 = a;
        }
    }
    double all1 = in_d > other1 ? in_d : other1;
    int arg_all1 = in_d > other1 ? d_alt : arg1;
    searcher->term_sup[0] = base0 > other0 ? base0 : other0;
    searcher->term_sup[1] = all1;
    /* J: term 0's constants over term 1's beta sups above "_ d" over the joint list's next
     * key, which bounds alpha(x) + alpha(x d) of every unread word of "_ d", plus the slack
     * (the key is one number where the score has two, each inside its own chain) */
    const List *joint = &searcher->lists[searcher->joint_list];
    double pair = upper_term(&searcher->steps[t0->first], t0->n,
                             upper_term(&searcher->steps[t1->first], searcher->alts[t1->first_alt + d_alt].n_longer,
                                        joint->sup));
    pair = joint->sup == -INFINITY ? -INFINITY : pair + searcher->joint_slack;
    double separate = base0 + in_d;
    PairClass classes[N_CLASSES] = {
        [IN_A_PATTERN_OF_TERM_0] = {other0 + all1, arg0, arg_all1, 0},
        [BASE_NOT_IN_D] = {base0 + other1, base_alt, arg1, 0},
        [BASE_IN_D] = pair < separate ? (PairClass){pair, NONE, NONE, 1} : (PairClass){separate, base_alt, d_alt, 0},
    };
    int best = 0;
    double second = -INFINITY;
    for (int c = 1; c < N_CLASSES; c++) {
        if (classes[c].value > classes[best].value) {
            second = classes[best].value;
            best = c;
        } else if (classes[c].value > second) {
            second = classes[c].value;
        }
    }
    *runner_up = second;
    const PairClass *top = &classes[best];
    return top->joint ? (PairBound){top->value, {searcher->joint_list, NONE}}
                      : (PairBound){top->value, {list_of(searcher, t0, top->alt0), list_of(searcher, t1, top->alt1)}};
}
