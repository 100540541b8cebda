/* The searcher's private types, shared by the four files of the search (search.h is the
 * public side), each of which declares what it gives the others in its own header:
 *
 *   lists.c   the sorted lists, and reading a position's terms (terms.h) into the patterns,
 *             steps, lists and bound alternatives the search works on (lists.h);
 *   joint.c   the joint bound on terms 0 and 1: whether it applies at a position, its
 *             rounding slack and its value (joint.h);
 *   score.c   exact scores of a batch of new words, and dropping those that cannot make
 *             the top ``count`` (score.h);
 *   search.c  the bound, the threshold search itself and its answers, over all three.
 *
 * See search.c for how the search goes, and docs/algorithm.md for why it is exact. */
#ifndef FASTSUBS_SEARCHER_H
#define FASTSUBS_SEARCHER_H

#include "search.h"

/* Patterns at least this long ("big") get a rank map (word -> position in one cache
 * line instead of a binary search) and keep the part of their sorted list that searches
 * have read, copied in score order (read again in sequence instead of through
 * ``by_score``, a cache miss per entry).  Both are kept per reader within its budget
 * (cache.c).  A map's size and the time to build it follow the pattern, not the
 * vocabulary: a pattern is big only if it also holds at least V / SUPER_WORDS words.
 * (How many patterns of a real model are big: docs/performance.md, "Tuning".) */
#define RANK_MIN_COUNT 256
/* New words are scored in batches of up to this many: the look-ups of a batch are
 * independent loads whose cache misses the CPU overlaps.  A batch is an eighth of the
 * words scored so far (so the search reads at most ~1/8 more than one word at a time
 * would), but at least ``count`` up to MAX_FIRST_BATCH (every search scores at least
 * ``count`` words, so those are never read in vain; a first batch of 128 read 6-10% more
 * words on small models) and at least MIN_BATCH (a few more words read at K = 1 and 10
 * cost less than small batches: each batch computes the bound and walks every pattern of
 * the position's terms once, whatever its size).  The measurements that chose these:
 * docs/performance.md, "Tuning". */
#define MAX_BATCH 128
#define MAX_FIRST_BATCH 64
#define MIN_BATCH 24
_Static_assert(MAX_BATCH <= 256, "a batch column is a byte (Searcher.held)");

/* Per-word flags of the current search (one byte per vocabulary word): SEEN marks words
 * read already (and <s>, always); each other bit marks the words of one small pattern,
 * scattered in when the search starts, so "is x in it?" is mostly answered by the byte
 * the SEEN test has just brought into cache, with no search in the pattern. */
#define SEEN 1u
#define MEMBER_BITS 7

#define NONE (-1)

typedef struct SearchPattern {
    CacheSlot *rec;             /* where it came from (pinned for the search by the reader) */
    DiskPattern data;        /* ids sorted by word id, positions by score, alphas, betas */
    const ix_f32 *alpha;
    uint32_t count;
    double beta_sup;         /* max(0, largest stored back-off weight) */
    const RankBlock *map;        /* rank map, or NULL */
    const RankSuper *supers;     /* its directory when it has two levels, else NULL */
    uint8_t member;          /* its bit in Searcher.flags, or 0 */
    int list;                /* the sorted list reading this pattern by alpha, or NONE */
    uint64_t located;        /* the batch whose live words have their positions in Searcher.pos */
    int n_held;              /* how many of them it holds: their columns in Searcher.held */
} SearchPattern;

typedef struct SearchStep {
    int alpha;          /* SearchPattern index whose alpha applies when x is in it, or NONE */
    int list;           /* the sorted list of that pattern (set once the lists are known) */
    int beta;           /* SearchPattern index holding beta(A x B), or -1 - BETA_CONST / -1 - BETA_UNIGRAM */
    double beta_const;  /* the constant, when beta == STEP_CONST */
    double beta_sup;    /* upper bound on the back-off weight over unread x */
    /* for scoring, set once the patterns are known: the alpha pattern's row of batch
     * positions (Searcher.pos), the columns of those it holds (Searcher.held) and their
     * count, and its alphas, NULL without one; the same for the beta
     * pattern, its beta codes and its order's back-off table (beta_table NULL: its
     * back-off weights are all 0) */
    const int32_t *alpha_pos, *beta_pos;
    const uint8_t *alpha_held;
    const int *alpha_n_held;
    const ix_f32 *alpha_values, *beta_table;
    const uint8_t *beta_codes;
    unsigned beta_width;
} SearchStep;

#define STEP_CONST (-1 - BETA_CONST)
#define STEP_UNIGRAM (-1 - BETA_UNIGRAM)

typedef struct SearchTerm {
    int first, n;       /* steps[first .. first+n), longest context first */
    int base_unigram;   /* after the last step: unigram alpha of x (1) or ``base`` (0) */
    double base;
    /* the term's bound (see bound()): the largest of alts[first_alt ..][n_alts] and ``fixed`` */
    int first_alt, n_alts;
    double fixed;       /* every beta sup over the constant base, -inf when the base is unigram */
    int frozen;         /* no list binds it any more: its bound stays (sups only decrease) */
    int arg;            /* the alternative (in alts) its bound came from last time, or NONE */
    double runner_up;   /* the largest other alternative then: arg stays the largest while above it */
} SearchTerm;

/* One alternative of a term's bound: "x is in the pattern of step ``n_longer``", bounded by
 * its list's sup under the beta sups of the n_longer steps before it, summed as the score
 * sums them (upper_term). */
typedef struct Alt {
    int list;
    int n_longer;
} Alt;

/* A list's next entries are gathered ahead, up to this many at a time: entry i sits at
 * an arbitrary place of the pattern (``by_score`` holds positions), so reading one at a
 * time waits for a cache miss per entry, while gathering many overlaps the misses.
 * Lists already in score order (the unigram list, a big pattern's sorted prefix) are
 * read in place, as many at a time. */
#define LIST_AHEAD 64
#define LIST_FIRST_AHEAD 8

typedef struct List {   /* one sorted list */
    CacheSlot *big;        /* a big pattern's record: its sorted prefix serves the reads when it can */
    const ix_u32 *in_order;    /* the words in score order (the unigram list), or NULL: */
    const DiskPattern *pattern;  /* those of a pattern, read through its positions by score, */
    int joint;          /* or, when set, through its joint order (its sup is then a joint key) */
    /* when set, only the words of ``pattern`` that are also in ``filter``, in the pattern's
     * score order (a pair list: joint.c), read from ``order``; ``scan``: the next entry of the
     * order to give, and ``length`` is only an upper bound until the order is complete */
    const SearchPattern *filter;
    int64_t scan;
    PairOrder *order;   /* a pair list's order: kept with the pattern's record, or ``own`` */
    PairOrder *own;     /* the searcher's own order of the list's slot */
    const ix_f32 *alpha;
    int64_t depth, length;
    double sup;         /* alpha of the next unread entry; -inf once exhausted */
    /* entries ahead_start .. ahead_end - 1 are words[0 ..] and alphas[0 ..]: in place, or
     * gathered into own_words/own_alphas */
    int64_t ahead_start, ahead_end;
    const ix_u32 *words;
    const ix_f32 *alphas;
    int ahead;          /* how many to gather next time: doubles up to LIST_AHEAD */
    uint32_t own_words[LIST_AHEAD];
    float own_alphas[LIST_AHEAD];
} List;


/* An upper bound on a term's value for words that take ``inner`` or less after the first
 * ``n`` steps of ``steps``: beta_sup(0) + (beta_sup(1) + (... + inner)), summed in the
 * order score_term sums a word's back-off weights.  Rounding to nearest is monotone (a <= a'
 * gives fl(a + b) <= fl(a' + b)), so a bound summed in the score's own order is above the
 * score as computed, not only as exact arithmetic has it: no slack for rounding is needed
 * however the magnitudes of the weights differ (docs/algorithm.md, "Rounding"). */
static inline double upper_term(const SearchStep *steps, int n, double inner) {
    while (n)
        inner = steps[--n].beta_sup + inner;
    return inner;
}

/* The bound of alternative ``a`` of ``term``: its list's sup under the beta sups of the steps
 * longer than its own (Alt). */
static inline double alternative(const Searcher *searcher, const SearchTerm *term, int a) {
    const Alt *alt = &searcher->alts[term->first_alt + a];
    return upper_term(&searcher->steps[term->first], alt->n_longer, searcher->lists[alt->list].sup);
}

/* Is the pattern of ``count`` words big (see RANK_MIN_COUNT)? */
static inline int is_big(uint32_t count, uint32_t vocab_size) {
    return count >= RANK_MIN_COUNT && count >= vocab_size / SUPER_WORDS;
}

#endif
