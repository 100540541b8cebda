/* The exact top-K search of FASTSUBS for one position (the paper's threshold search,
 * with the bound of docs/algorithm.md), in plain C.
 *
 * A Searcher holds everything one search needs and keeps between searches: a Reader
 * (its read transaction and record cache, store.h), the terms of the position
 * (terms.h) and scratch space.  One thread uses a Searcher at a time; an open index has
 * as many as threads search it at once (engine.h). */
#ifndef FASTSUBS_SEARCH_H
#define FASTSUBS_SEARCH_H

#include "terms.h"

typedef struct {
    double score;
    uint32_t word;
} Scored;

/* What a search is asked: the best ``count`` substitutes (at most V - 1; fewer when the
 * -p rule with ``mass`` stops first, if use_mass), never the ``excluded`` words (ids < V),
 * which the cap and the -p rule do not count either. */
typedef struct {
    int64_t count;
    int use_mass;
    double mass;
    const uint32_t *excluded;
    int64_t n_excluded;
} SearchLimits;

struct SearchPattern;
struct SearchStep;
struct SearchTerm;
struct Alt;
struct List;

typedef struct Searcher {
    Reader reader;
    PositionTerms position;
    uint8_t *flags;                  /* per word: SEEN and small-pattern membership bits */
    struct SearchPattern *pats; int cap_pats;
    struct SearchStep *steps; int cap_steps;
    struct SearchTerm *terms; int cap_terms;
    struct List *lists; int cap_lists;
    struct Alt *alts; int cap_alts;
    uint64_t *binds; int cap_binds;  /* per list: binds some term's bound if == bound_stamp */
    double *keep; int cap_keep;      /* per binding list: it binds all those terms while its sup > keep */
    int *binding; int cap_binding, n_binding;  /* the lists that bind, in the order found */
    uint64_t bound_stamp, batch_stamp;  /* count bound() calls and batches: never wrap */
    int unigram_list;                /* index of the unigram list in lists */
    /* the joint bound over terms 0 and 1 (joint.c): the list reading the joint order of
     * term 1's pattern "_ d" (NONE: no joint bound at this position), that pattern's
     * alternative among term 1's, and the rounding slack of the joint sum */
    int joint_list, joint_alt;
    double joint_slack;
    /* per alternative of term 0 but its base: the pair list of its pattern's words that are in
     * "_ d" (NONE: not started), and the lists in use: n_lists, pair lists included; whether
     * this search splits the class at all (joint.c, PAIR_MIN_COUNT) */
    int pair_split;
    int pair_lists[FS_MAX_ORDER];
    int n_lists;
    /* per slot (alternative of term 0): the order a pair list reads when no record keeps one */
    PairOrder pair_own[FS_MAX_ORDER];
    double *term_sup; int cap_term_sup;    /* per term: its bound now */
    double *batch_sup; int cap_batch_sup;  /* per term: its bound before the current batch */
    int32_t *pos; int cap_pos;       /* [pattern][MAX_BATCH]: positions of the batch's words */
    uint8_t *held; int cap_held;     /* [pattern][MAX_BATCH]: the batch columns of those it holds */
    /* each holds at most V entries; pages are touched only as far as searches reach */
    double *top;                     /* min-heap of the best ``count`` scores so far */
    uint32_t *evaluated;
    Scored *pending;
    Scored *listed;                  /* the answer of the last search, best first */
    int64_t n_listed;
    /* totals since the searcher was made: searches, words evaluated, list entries read,
     * substitutes listed */
    unsigned long long n_searches, n_evaluated, n_reads, n_listed_total;
    unsigned long long taken[4];     /* those four when the searcher was last taken (engine.c) */
} Searcher;

/* 0, or -1 with the failure in searcher->reader.failure. */
int search_searcher_init(Searcher *searcher, const Store *s, MapTable *maps, size_t records, size_t kept_budget);
void search_searcher_free(Searcher *searcher);
/* The substitutes of position ``target`` (1 ... n - 1) of ``sentence`` (n word ids, <s>
 * and </s> included) within ``limits``, into searcher->listed[0 .. searcher->n_listed).  0, or -1 with
 * searcher->reader.failure set. */
int search_position(Searcher *searcher, const uint32_t *sentence, int n, int target, const SearchLimits *limits);

/* p / Σp of each of ``n`` substitutes scored ``scores`` (best first), p = 10^score: the
 * original's -z, and the API's probability.  The search gives it with its answers
 * (Answers.probabilities), one function for every output, so text, JSON lines, samples
 * and the API agree to the last bit. */
void search_normalize(const double *scores, int64_t n, double *out);
void search_normalize_scored(const Scored *answers, int64_t n, double *out);

/* The answers of a run of positions: position i's are answers[starts[i] .. starts[i + 1]),
 * with p / sum p (normalize) beside them in ``probabilities`` when ``normalized``. */
typedef struct {
    Scored *answers;
    double *probabilities;
    int64_t *starts;
    int64_t n, cap, n_positions, cap_starts;
    int normalized;
} Answers;

/* Searches positions *target ... last - 1 of ``sentence`` into ``a`` (after what it holds),
 * advancing *target, until they are done or the answers hold ``most`` substitutes: 0, or
 * -1 with searcher->reader.failure set (FS_ENOMEM when out of memory). */
int search_run(Searcher *searcher, const uint32_t *sentence, int n, int *target, int last, const SearchLimits *limits,
               Answers *a, int64_t most);
void search_answers_free(Answers *a);

#endif
