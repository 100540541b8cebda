/* Exact scores of a batch of new words: see searcher.h.
 *
 * Scores are summed in float64 from the stored float32 values, in the order the
 * definition sums them (score_term: a chain as the back-off recursion nests; the terms
 * left to right), so they are the exhaustive scorer's bit for bit (docs/algorithm.md,
 * "Rounding"). */
#include "score.h"

#include <string.h>

/* ---------------------------------------------------------------- exact scores */

/* Position of ``word`` in pattern p's id-sorted arrays, or -1, in a pattern without a
 * rank map. */
static inline int32_t locate(const Searcher *searcher, const SearchPattern *p, uint32_t word) {
    if (p->member && !(searcher->flags[word] & p->member))
        return -1;
    return find_id(p->data.ids, p->count, word, searcher->reader.store->id_bits, searcher->reader.store->id_mask);
}

/* Where a step's back-off weight comes from, for step_loop: the kinds of SearchStep.beta,
 * with patterns split by whether they store weights and by the width of their beta codes
 * (a constant in each loop: a load and no branch per word). */
enum {
    FROM_CONST, FROM_UNIGRAM, FROM_CODES_0, FROM_CODES_BITS, FROM_CODES_8, FROM_CODES_16, FROM_CODES_24, FROM_CODES_32,
    FROM_ZERO
};

/* The beta code of entry ``at`` of a step of kind FROM_CODES_*: of 0, 8, 16, 24 or 32 bits (a
 * constant), or of the step's own 1, 2 or 4 bits. */
static inline __attribute__((always_inline)) uint32_t step_code(const SearchStep *step, int from, uint32_t at) {
    if (from == FROM_CODES_BITS)
        return beta_code_bits(step->beta_codes, step->beta_width, at);
    unsigned width = from == FROM_CODES_0    ? 0
                     : from == FROM_CODES_8  ? 8
                     : from == FROM_CODES_16 ? 16
                     : from == FROM_CODES_24 ? 24
                                             : 32;
    return beta_code(step->beta_codes, width, at);
}

/* ``when`` (-1 or 0) ? a : b, by masks: GCC makes the conditional a branch, and whether a
 * pattern holds a candidate is a coin toss for the predictor (a misprediction costs more
 * than the loads both sides take, which locate_live has prefetched). */
static inline double select_double(int32_t when, double a, double b) {
    uint64_t mask = (uint64_t)(int64_t)when, bits_a, bits_b;
    memcpy(&bits_a, &a, sizeof(a));
    memcpy(&bits_b, &b, sizeof(b));
    uint64_t bits = (bits_a & mask) | (bits_b & ~mask);
    double out;
    memcpy(&out, &bits, sizeof(out));
    return out;
}

/* One step for the live words: value = alpha of the step's pattern if it holds x (when
 * the step has one), else beta + value.  Inlined once per (kind, has_alpha) pair, so each
 * loop is of one kind with no dispatch per word.  Every word takes beta + value, its beta
 * chosen by a mask where it comes from a pattern (whether the pattern holds x is a coin
 * toss for the predictor: select_double); then the words the step's pattern holds, which
 * locate_live listed, take its alpha instead (most words of a batch are in few of a term's
 * patterns, so no alpha is read for the others). */
static inline __attribute__((always_inline)) void step_loop(const Searcher *searcher, const SearchStep *step, int from,
                                                            int has_alpha, const uint32_t *words, const int *live,
                                                            int n_live, double *value) {
    const UnigramScores *unigram = searcher->reader.store->unigram;
    for (int j = 0; j < n_live; j++) {
        int c = live[j];
        double beta;
        if (from == FROM_CONST) {
            beta = step->beta_const;
        } else if (from == FROM_UNIGRAM) {
            beta = (double)unigram[words[c]].beta;
        } else if (from != FROM_ZERO) {  /* FROM_CODES_*: the code of x's entry in its order's table */
            int32_t pos = step->beta_pos[c], absent = pos >> 31;
            uint32_t code = step_code(step, from, (uint32_t)(pos & ~absent));
            beta = select_double(absent, 0.0, (double)step->beta_table[code]);
        } else {  /* a pattern without back-off weights: they are 0 */
            beta = 0.0;
        }
        value[c] = beta + value[c];
    }
    if (has_alpha) {  /* then the words the pattern holds take its alpha instead */
        const uint8_t *held = step->alpha_held;
        for (int k = 0, n = *step->alpha_n_held; k < n; k++)
            value[held[k]] = (double)step->alpha_values[step->alpha_pos[held[k]]];
    }
}

/* One term for the live words of a batch (``value`` by batch column), by the back-off
 * recursion from the shortest step up: value(s) = alpha of step s if its pattern holds
 * x, else beta(s) + value(s+1), from the base (unigram alpha of x, or a constant).  So
 * the longest step holding x gives its alpha, plus the back-off weights of the longer
 * steps added shortest first (the order of the exhaustive scorer).  A step at a time
 * over all the words (step_loop). */
static void score_term(const Searcher *searcher, const SearchTerm *t, const uint32_t *words, const int *live,
                       int n_live, double *value) {
    const SearchStep *steps = &searcher->steps[t->first];
    const UnigramScores *unigram = searcher->reader.store->unigram;
    if (t->base_unigram)
        for (int j = 0; j < n_live; j++)
            value[live[j]] = (double)unigram[words[live[j]]].alpha;
    else
        for (int j = 0; j < n_live; j++)
            value[live[j]] = t->base;
    for (int s = t->n - 1; s >= 0; s--) {
        const SearchStep *step = &steps[s];
        unsigned width = step->beta_width;
        int from = step->beta == STEP_CONST     ? FROM_CONST
                   : step->beta == STEP_UNIGRAM ? FROM_UNIGRAM
                   : !step->beta_table          ? FROM_ZERO
                   : width == 0                 ? FROM_CODES_0
                   : width < 8                  ? FROM_CODES_BITS
                   : width == 8                 ? FROM_CODES_8
                   : width == 16                ? FROM_CODES_16
                   : width == 24                ? FROM_CODES_24
                                                : FROM_CODES_32;
        switch (2 * from + (step->alpha_pos != NULL)) {
#define STEP_CASE(kind)                                                          \
    case 2 * kind:                                                               \
        step_loop(searcher, step, kind, 0, words, live, n_live, value);                 \
        break;                                                                   \
    case 2 * kind + 1:                                                           \
        step_loop(searcher, step, kind, 1, words, live, n_live, value);                 \
        break;
            STEP_CASE(FROM_CONST)
            STEP_CASE(FROM_UNIGRAM)
            STEP_CASE(FROM_CODES_0)
            STEP_CASE(FROM_CODES_BITS)
            STEP_CASE(FROM_CODES_8)
            STEP_CASE(FROM_CODES_16)
            STEP_CASE(FROM_CODES_24)
            STEP_CASE(FROM_CODES_32)
            STEP_CASE(FROM_ZERO)
#undef STEP_CASE
        }
    }
}

/* The alpha and back-off arrays of a pattern that locate_live prefetches from, in locals
 * (its stores of bytes may alias anything, so fields read through the pattern would be
 * loaded again for each word). */
typedef struct {
    const ix_f32 *alpha;
    const uint8_t *codes;  /* NULL for a pattern whose one value the slot keeps */
    unsigned width;
} Values;

/* Prefetches the alpha and beta entries of position ``at`` (of an absent word: position 0,
 * so that there is no branch, a coin toss for the predictor), which score_term reads.
 * Always inlined: GCC finds a function that only prefetches "pure" (a prefetch changes no
 * memory), and drops every call of a pure function whose result is unused, so a call that
 * is not inlined before that analysis prefetches nothing (GCC 12 did so here). */
static inline __attribute__((always_inline)) void prefetch_values(const Values *v, int32_t at) {
    uint32_t i = (uint32_t)(at & ~(at >> 31));
    __builtin_prefetch(&v->alpha[i]);
    if (v->codes)
        __builtin_prefetch(&v->codes[(size_t)i * v->width / 8]);
}

/* Appends batch column c to the ``n_held`` columns ``held`` when its word is at position
 * ``at`` of the pattern (at >= 0), without a branch; returns their count. */
static inline int hold(uint8_t *held, int n_held, int c, int32_t at) {
    held[n_held] = (uint8_t)c;
    return n_held + (at >= 0);
}

/* Positions in pattern i of the live words of the current batch, and the batch columns of
 * those it holds, once per batch (live words only get fewer, so those located for an
 * earlier term cover the later ones; a later term may rewrite the value of a word dropped
 * since, which nothing reads), prefetching the alpha and beta entries score_term will read.  The loops' loads are
 * independent across words, so the CPU overlaps their cache misses; with a rank map,
 * in two passes: every word's RankBlock is prefetched before any is read, so the
 * misses on the blocks overlap as well as those on the values (1.05-1.15x CPU time at
 * every K in issue 51's measurements; the same two passes without the prefetch gained
 * 1.00-1.04x). */
TARGET_CLONES static void locate_live(Searcher *searcher, int i, const uint32_t *words, const int *live, int n_live) {
    SearchPattern *p = &searcher->pats[i];
    if (p->located == searcher->batch_stamp)
        return;
    p->located = searcher->batch_stamp;
    int32_t *pos = &searcher->pos[i * MAX_BATCH];
    uint8_t *held = &searcher->held[i * MAX_BATCH];
    int n_held = 0;
    const Values values = {p->alpha, p->data.beta_codes, p->data.beta_width};
    if (p->map) {
        const RankBlock *block[MAX_BATCH];
        for (int j = 0; j < n_live; j++) {
            block[j] = map_block(p->map, p->supers, words[live[j]]);
            __builtin_prefetch(block[j]);
        }
        for (int j = 0; j < n_live; j++) {
            int c = live[j];
            prefetch_values(&values, pos[c] = block_rank(block[j], words[c]));
            n_held = hold(held, n_held, c, pos[c]);
        }
    } else {
        for (int j = 0; j < n_live; j++) {
            int c = live[j];
            prefetch_values(&values, pos[c] = locate(searcher, p, words[c]));
            n_held = hold(held, n_held, c, pos[c]);
        }
    }
    p->n_held = n_held;
}

/* Keeps the live words whose partial sum after term t, plus the later terms' bounds, is
 * at least ``threshold``: the bounds added in the order the score adds the terms
 * themselves (so the sum bounds the score as rounded: upper_term).  A bound at a time
 * over all the words, not the bounds one word at a time: the same sums, in loops the
 * compiler vectorises (they were 5% of a warm pass' instructions at K = 100).  Returns
 * how many are kept, their batch columns first in ``live``. */
static int keep_reachable(int n_terms, int t, const double *sup, double threshold, const double *total, int *live,
                          int n_live) {
    double upper[MAX_BATCH];
    for (int j = 0; j < n_live; j++)
        upper[j] = total[live[j]];
    for (int u = t + 1; u < n_terms; u++)
        for (int j = 0; j < n_live; j++)
            upper[j] += sup[u];
    int kept = 0;
    for (int j = 0; j < n_live; j++) {
        live[kept] = live[j];
        kept += upper[j] >= threshold;
    }
    return kept;
}

/* Exact lp(x) of the n words of a batch, term by term (summed in term order).  ``sup``
 * holds each term's bound from before any of these words was read, so it bounds their
 * terms too; after each term, a word whose partial sum plus the later terms' sups is
 * below ``threshold`` (the count-th best score so far) is dropped: ``count`` words
 * already beat it, so it is never listed, and its other terms need no look-ups (after
 * the last term, it need not wait in the heaps).
 * Returns how many words are kept, their batch columns in ``live``. */
int score_batch(Searcher *searcher, int n_terms, const uint32_t *words, int n, const double *sup,
                       double threshold, double *total, int *live) {
    searcher->batch_stamp++;
    int n_live = n;
    for (int c = 0; c < n; c++)
        live[c] = c;
    for (int t = 0; t < n_terms && n_live; t++) {
        const SearchTerm *term = &searcher->terms[t];
        for (int s = term->first; s < term->first + term->n; s++) {
            if (searcher->steps[s].alpha != NONE)
                locate_live(searcher, searcher->steps[s].alpha, words, live, n_live);
            if (searcher->steps[s].beta >= 0)
                locate_live(searcher, searcher->steps[s].beta, words, live, n_live);
        }
        double value[MAX_BATCH];
        score_term(searcher, term, words, live, n_live, value);
        for (int j = 0; j < n_live; j++) {
            int c = live[j];
            total[c] = t ? total[c] + value[c] : value[c];
        }
        if (!isfinite(threshold))  /* -inf: fewer than count scored yet */
            continue;
        n_live = keep_reachable(n_terms, t, sup, threshold, total, live, n_live);
    }
    return n_live;
}

