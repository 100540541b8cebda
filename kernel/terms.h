/* The terms of lp(x) at one position, as back-off chains over pattern records (the C
 * twin of bench/reference_terms.py, the reference the tests and the bench compare with).
 *
 * For the sentence s_0 ... s_{n+1} (<s> w1 ... wn </s>) and a target position t, lp(x)
 * is the sum over j = t ... min(t+N-1, n+1) of log10 p(s_j | context) with s_t := x
 * (docs/algorithm.md, "The score").  Each term is a back-off chain: the longest n-gram present gives its
 * alpha, every shorter step adds a back-off weight. */
#ifndef FASTSUBS_TERMS_H
#define FASTSUBS_TERMS_H

#include "cache.h"

enum { BETA_PATTERN, BETA_CONST, BETA_UNIGRAM };

/* One step of a chain: the pattern whose alpha applies when x is in it (or NULL), and
 * where the back-off weight comes from: beta(A x B) stored in ``beta`` (BETA_PATTERN),
 * a constant, or the unigram back-off of x. */
typedef struct {
    CacheSlot *alpha, *beta;
    int beta_kind;
    double beta_const;
} StepPlan;

/* steps[first .. first + n), longest context first, then the base: the unigram alpha of
 * x (base_unigram) or the constant ``base`` (the probability once x has left the context). */
typedef struct {
    int first, n;
    int base_unigram;
    double base;
} TermPlan;

typedef struct {
    TermPlan *terms;
    StepPlan *steps;
    int n_terms, n_steps, cap_terms, cap_steps;
} PositionTerms;

/* The terms of position ``target`` (1 ... n - 1) of ``sentence`` (n ids, <s> and </s>
 * included): 0, or -1 with r->failure set.  The records they use are pinned for the
 * reader's current search. */
int terms_position(Reader *r, const uint32_t *sentence, int n, int target, PositionTerms *out);
/* Prefetches what terms_position(target) first reads of the reader's cache: called a
 * position ahead, while the search of the one before runs. */
void terms_prefetch(const Reader *r, const uint32_t *sentence, int n, int target);
void terms_position_free(PositionTerms *t);

#define UNKNOWN_WORD_LOGPROB FS_UNKNOWN_WORD_LOGPROB

#endif
