/* The exact top-K search of one position: see search.h.
 *
 * terms.c describes lp(x) at the position as back-off chains over pattern records;
 * read_terms turns them into the lists and steps this file works on, and the search
 * runs the threshold search of docs/algorithm.md:
 *
 *   - the sorted lists are the patterns some step reads by alpha (``by_score`` order)
 *     and the unigram list (``unigram_order``);
 *   - each round reads one entry from every list that binds the upper bound on words
 *     not read yet; the bound is recomputed when the lists that bind may have changed;
 *   - words read for the first time are scored exactly in small batches (look-ups in
 *     the patterns' id-sorted arrays), dropping early those that cannot reach the top
 *     ``count``, and wait in a max-heap ("pending");
 *   - pending words scoring above the bound are final: no unread word can beat them,
 *     so they are the next entries of the answer, in order (score descending, ties by
 *     lowest id);
 *   - the search stops when the answer has ``count`` words, or the -p rule is met, or
 *     every word has been read.
 *
 * Scores are summed in float64 from the stored float32 values, in the order the
 * exhaustive scorer uses (see score_term), so results are bit-for-bit reproducible.
 */
#include "search.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
 * would), but at least ``count`` (every search scores at least ``count`` words, so those
 * are never read in vain) and at least MIN_BATCH (a few more words read at K = 1 cost
 * less than batches too small to overlap their misses).  The measurements that chose
 * these: docs/performance.md, "Tuning". */
#define MAX_BATCH 64
#define MIN_BATCH 8

/* Per-word flags of the current search (one byte per vocabulary word): SEEN marks words
 * read already (and <s>, always); each other bit marks the words of one small pattern,
 * scattered in when the search starts, so "is x in it?" is mostly answered by the byte
 * the SEEN test has just brought into cache, with no search in the pattern. */
#define SEEN 1u
#define MEMBER_BITS 7

#define NONE (-1)

typedef struct Pat {
    Record *rec;             /* where it came from (pinned for the search by the reader) */
    PatternData data;        /* ids sorted by word id, positions by score, alphas, betas */
    const ix_f32 *alpha;
    const ix_f32 *beta;      /* NULL: the pattern stores no back-off weights (they are 0) */
    uint32_t count;
    double beta_sup;         /* max(0, largest stored back-off weight) */
    const Block *map;        /* rank map, or NULL */
    const Super *supers;     /* its directory when it has two levels, else NULL */
    uint8_t member;          /* its bit in Searcher.flags, or 0 */
    int list;                /* the sorted list reading this pattern by alpha, or NONE */
    uint64_t located;        /* the batch whose live words have their positions in Searcher.pos */
} Pat;

typedef struct StepC {
    int alpha;          /* Pat index whose alpha applies when x is in it, or NONE */
    int list;           /* the sorted list of that pattern (set once the lists are known) */
    int beta;           /* Pat index holding beta(A x B), or -1 - BETA_CONST / -1 - BETA_UNIGRAM */
    double beta_const;  /* the constant, when beta == STEP_CONST */
    double beta_sup;    /* upper bound on the back-off weight over unread x */
    /* for scoring, set once the patterns are known: the alpha pattern's row of batch
     * positions (Searcher.pos) and its alphas, NULL without one; the same for the beta
     * pattern (beta_values NULL: its back-off weights are all 0) */
    const int32_t *alpha_pos, *beta_pos;
    const ix_f32 *alpha_values, *beta_values;
} StepC;

#define STEP_CONST (-1 - BETA_CONST)
#define STEP_UNIGRAM (-1 - BETA_UNIGRAM)

typedef struct TermC {
    int first, n;       /* steps[first .. first+n), longest context first */
    int base_unigram;   /* after the last step: unigram alpha of x (1) or ``base`` (0) */
    double base;
    /* the term's bound (see bound()): the largest of alts[first_alt ..][n_alts] and ``fixed`` */
    int first_alt, n_alts;
    double fixed;       /* every beta sup over the constant base, -inf when the base is unigram */
    int frozen;         /* no list binds it any more: its bound stays (sups only decrease) */
    int arg;            /* the alternative (in alts) its bound came from last time, or NONE */
    double runner_up;   /* the largest other alternative then: arg stays the largest while above it */
} TermC;

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
    Record *big;        /* a big pattern's record: its sorted prefix serves the reads when it can */
    const ix_u32 *in_order;    /* the words in score order (the unigram list), or NULL: */
    const PatternData *pattern;  /* those of a pattern, read through its positions by score */
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
static inline double upper_term(const StepC *steps, int n, double inner) {
    while (n)
        inner = steps[--n].beta_sup + inner;
    return inner;
}

/* Is the pattern of ``count`` words big (see RANK_MIN_COUNT)? */
static int is_big(uint32_t count, uint32_t vocab_size) {
    return count >= RANK_MIN_COUNT && count >= vocab_size / SUPER_WORDS;
}

/* ---------------------------------------------------------------- sorted lists */

/* Makes the list's next entries (words and alphas) from the depth on readable, gathering
 * them when they are not in score order already, and prefetches the words' flags, which
 * the search tests next. */
static void gather_ahead(Searcher *searcher, List *list) {
    int64_t n = list->length - list->depth;
    n = n < list->ahead ? n : list->ahead;
    Kept *kept = list->big ? record_sorted_prefix(&searcher->reader, list->big, (uint32_t)(list->depth + n)) : NULL;
    if (kept) {
        list->words = (const ix_u32 *)&kept->sorted_ids[list->depth];
        list->alphas = &kept->sorted_alpha[list->depth];
    } else if (list->in_order) {
        list->words = &list->in_order[list->depth];
        list->alphas = &list->alpha[list->depth];
    } else {
        const Store *s = searcher->reader.store;
        for (int64_t i = 0; i < n; i++) {
            uint32_t at = position_at(list->pattern, (uint32_t)(list->depth + i));
            list->own_words[i] = pattern_id(s, list->pattern, at);
            list->own_alphas[i] = list->alpha[at];
        }
        list->words = list->own_words;
        list->alphas = list->own_alphas;
    }
    for (int64_t i = 0; i < n; i++)
        if (list->words[i] < searcher->reader.store->vocab_size)
            __builtin_prefetch(&searcher->flags[list->words[i]]);
    list->ahead_start = list->depth;
    list->ahead_end = list->depth + n;
    list->ahead = list->ahead * 2 < LIST_AHEAD ? list->ahead * 2 : LIST_AHEAD;
}

/* A list of ``length`` (>= 1) entries, none read yet. */
static void start_list(Searcher *searcher, List *list, Record *big, const ix_u32 *in_order, const PatternData *pattern,
                       const ix_f32 *alpha, int64_t length) {
    list->big = big;
    list->in_order = in_order;
    list->pattern = pattern;
    list->alpha = alpha;
    list->depth = 0;
    list->length = length;
    list->ahead = LIST_FIRST_AHEAD;
    gather_ahead(searcher, list);
    list->sup = list->alphas[0];
}


/* ---------------------------------------------------------------- reading the terms */

/* Index of the pattern ``rec`` in searcher->pats, adding it when new; -1 when out of memory. */
static int add_pattern(Searcher *searcher, Record *rec, int *n_pats) {
    for (int i = 0; i < *n_pats; i++)
        if (searcher->pats[i].rec == rec)
            return i;
    if (GROW(searcher->pats, searcher->cap_pats, *n_pats + 1) < 0)
        return -1;
    Pat *p = &searcher->pats[(*n_pats)++];
    memset(p, 0, sizeof(*p));
    p->rec = rec;
    p->list = NONE;
    record_pattern(searcher->reader.store, rec, &p->data);
    p->alpha = p->data.alpha;
    p->beta = p->data.beta;
    p->count = rec->count;
    p->beta_sup = rec->beta_sup;
    p->map = is_big(rec->count, searcher->reader.store->vocab_size)
                 ? record_rank_map(&searcher->reader, rec, &p->supers) : NULL;
    if (!p->map)
        p->supers = NULL;
    return *n_pats - 1;
}

/* Reads the position's terms (searcher->position) into searcher->terms/steps/pats/lists.  Returns the
 * number of terms, -1 when out of memory; *n_pats: the patterns added. */
static int read_terms(Searcher *searcher, int *n_pats) {
    const PositionTerms *position = &searcher->position;
    const Store *s = searcher->reader.store;
    int n_terms = position->n_terms, n_steps = 0;
    if (GROW(searcher->terms, searcher->cap_terms, n_terms) < 0 ||
        GROW(searcher->steps, searcher->cap_steps, position->n_steps) < 0 ||
        GROW(searcher->term_sup, searcher->cap_term_sup, n_terms) < 0 ||
        GROW(searcher->batch_sup, searcher->cap_batch_sup, n_terms) < 0)
        return -1;
    for (int t = 0; t < n_terms; t++) {
        const TermSpec *spec = &position->terms[t];
        TermC *tc = &searcher->terms[t];
        tc->first = n_steps;
        tc->n = spec->n;
        tc->base_unigram = spec->base_unigram;
        tc->base = spec->base;
        for (int i = spec->first; i < spec->first + spec->n; i++) {
            const StepSpec *step = &position->steps[i];
            StepC *sc = &searcher->steps[n_steps++];
            sc->alpha = step->alpha ? add_pattern(searcher, step->alpha, n_pats) : NONE;
            if (step->alpha && sc->alpha < 0)
                return -1;
            sc->beta_const = step->beta_const;
            if (step->beta_kind == BETA_CONST) {
                sc->beta = STEP_CONST;
                sc->beta_sup = step->beta_const;
            } else if (step->beta_kind == BETA_UNIGRAM) {
                /* beta(x) of any word is at most the largest unigram back-off */
                sc->beta = STEP_UNIGRAM;
                sc->beta_sup = s->unigram_beta_sup;
            } else if ((sc->beta = add_pattern(searcher, step->beta, n_pats)) < 0) {
                return -1;
            } else {
                /* beta(A x B) is stored for some x, 0 for the rest (the paper bounds it
                 * by 0, wrong for positive weights: docs/algorithm.md) */
                sc->beta_sup = searcher->pats[sc->beta].beta_sup;
            }
        }
    }
    /* The sorted lists: each pattern some step reads by alpha, then the unigram list. */
    int n = 0;
    if (GROW(searcher->lists, searcher->cap_lists, *n_pats + 1) < 0 ||
        GROW(searcher->binds, searcher->cap_binds, *n_pats + 1) < 0 ||
        GROW(searcher->keep, searcher->cap_keep, *n_pats + 1) < 0 ||
        GROW(searcher->binding, searcher->cap_binding, *n_pats + 1) < 0 ||
        GROW(searcher->pos, searcher->cap_pos, *n_pats * MAX_BATCH) < 0)
        return -1;
    for (int i = 0; i < n_steps; i++) {
        StepC *step = &searcher->steps[i];
        step->alpha_pos = step->alpha == NONE ? NULL : &searcher->pos[step->alpha * MAX_BATCH];
        step->alpha_values = step->alpha == NONE ? NULL : searcher->pats[step->alpha].alpha;
        step->beta_pos = step->beta < 0 ? NULL : &searcher->pos[step->beta * MAX_BATCH];
        step->beta_values = step->beta < 0 ? NULL : searcher->pats[step->beta].beta;
    }
    for (int i = 0; i < *n_pats; i++) {
        int used = 0;
        for (int j = 0; j < n_steps; j++)
            used |= searcher->steps[j].alpha == i;
        if (used) {
            Pat *p = &searcher->pats[i];
            p->list = n;
            start_list(searcher, &searcher->lists[n++], is_big(p->count, s->vocab_size) ? p->rec : NULL, NULL, &p->data,
                       p->alpha, p->count);
        }
    }
    for (int i = 0; i < n_steps; i++)
        searcher->steps[i].list =
            searcher->steps[i].alpha == NONE ? NONE : searcher->pats[searcher->steps[i].alpha].list;
    int unigram = searcher->unigram_list = n;
    start_list(searcher, &searcher->lists[n++], NULL, s->unigram_order, NULL, (const ix_f32 *)s->sorted_alpha,
               s->vocab_size);
    for (int l = 0; l < n; l++)
        searcher->binds[l] = 0;
    /* Each term's bound alternatives (see bound()), base last. */
    if (GROW(searcher->alts, searcher->cap_alts, n_steps + n_terms) < 0)
        return -1;
    int n_alts = 0;
    for (int t = 0; t < n_terms; t++) {
        TermC *term = &searcher->terms[t];
        term->first_alt = n_alts;
        for (int i = 0; i < term->n; i++)
            if (searcher->steps[term->first + i].list != NONE)
                searcher->alts[n_alts++] = (Alt){searcher->steps[term->first + i].list, i};
        if (term->base_unigram)
            searcher->alts[n_alts++] = (Alt){unigram, term->n};
        term->fixed = term->base_unigram ? -INFINITY : upper_term(&searcher->steps[term->first], term->n, term->base);
        term->n_alts = n_alts - term->first_alt;
        term->frozen = 0;
        term->arg = NONE;
    }
    return n_terms;
}

/* Gives the smallest patterns without a rank map a membership bit each (as many as
 * there are bits) and marks their words in searcher->flags. */
static void mark_members(Searcher *searcher, int n_pats) {
    int next = 0;
    for (int i = 0; i < n_pats && next < MEMBER_BITS; i++) {
        Pat *p = &searcher->pats[i];
        if (p->map || is_big(p->count, searcher->reader.store->vocab_size))
            continue;
        p->member = (uint8_t)(2u << next++);
        for (int64_t j = 0; j < p->count; j++)
            searcher->flags[pattern_id(searcher->reader.store, &p->data, (uint32_t)j)] |= p->member;
    }
}

/* Clears every flag the search set: the words read, the marked patterns' words and the
 * excluded words. */
static void clear_flags(Searcher *searcher, int n_pats, int64_t n_evaluated, const uint32_t *excluded,
                        int64_t n_excluded) {
    for (int64_t i = 0; i < n_evaluated; i++)
        searcher->flags[searcher->evaluated[i]] = 0;
    for (int64_t i = 0; i < n_excluded; i++)
        searcher->flags[excluded[i]] = 0;
    for (int i = 0; i < n_pats; i++)
        if (searcher->pats[i].member)
            for (int64_t j = 0; j < searcher->pats[i].count; j++)
                searcher->flags[pattern_id(searcher->reader.store, &searcher->pats[i].data, (uint32_t)j)] = 0;
    if (searcher->reader.store->bos < searcher->reader.store->vocab_size)
        searcher->flags[searcher->reader.store->bos] = SEEN;
}

/* ---------------------------------------------------------------- exact scores */

/* Position of ``word`` in pattern p's id-sorted arrays, or -1. */
static inline int32_t locate(const Searcher *searcher, const Pat *p, uint32_t word) {
    if (p->member && !(searcher->flags[word] & p->member))
        return -1;
    if (p->map) {
        size_t at = word >> 6;
        if (p->supers) {  /* two levels: the Block of ``word``, or map[0] (empty) */
            Super super = p->supers[word / SUPER_WORDS];
            uint64_t j = at & 63;
            at = super.present >> j & 1 ? super.first + popcount64(super.present & ((1ull << j) - 1)) : 0;
        }
        Block block = p->map[at];
        uint64_t bit = 1ull << (word & 63);
        return block.bits & bit ? (int32_t)(block.rank + popcount64(block.bits & (bit - 1))) : -1;
    }
    return find_id(p->data.ids, p->count, word, searcher->reader.store->id_bytes, searcher->reader.store->id_mask);
}

/* Where a step's back-off weight comes from, for step_loop: the kinds of StepC.beta,
 * with patterns split by whether they store weights. */
enum { FROM_CONST, FROM_UNIGRAM, FROM_PATTERN, FROM_ZERO };

/* One step for the live words: value = alpha of the step's pattern if it holds x (when
 * the step has one), else beta + value.  Inlined once per (kind, has_alpha) pair, so
 * each loop is of one kind with no dispatch per word; the choice "is x in this
 * pattern" is a select in the source (which steps hold a word is a coin toss for the
 * predictor; the loads it skips are located and prefetched). */
static inline __attribute__((always_inline)) void step_loop(const Searcher *searcher, const StepC *step, int from,
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
        } else if (from == FROM_PATTERN) {
            int32_t pos = step->beta_pos[c];
            double stored = (double)step->beta_values[pos < 0 ? 0 : pos];
            beta = pos < 0 ? 0.0 : stored;
        } else {  /* a pattern without back-off weights: they are 0 */
            beta = 0.0;
        }
        double backed_off = beta + value[c];
        if (has_alpha) {
            int32_t pos = step->alpha_pos[c];
            double alpha = (double)step->alpha_values[pos < 0 ? 0 : pos];
            value[c] = pos < 0 ? backed_off : alpha;
        } else {
            value[c] = backed_off;
        }
    }
}

/* One term for the live words of a batch (``value`` by batch column), by the back-off
 * recursion from the shortest step up: value(s) = alpha of step s if its pattern holds
 * x, else beta(s) + value(s+1), from the base (unigram alpha of x, or a constant).  So
 * the longest step holding x gives its alpha, plus the back-off weights of the longer
 * steps added shortest first (the order of the exhaustive scorer).  A step at a time
 * over all the words (step_loop). */
static void score_term(const Searcher *searcher, const TermC *t, const uint32_t *words, const int *live, int n_live,
                       double *value) {
    const StepC *steps = &searcher->steps[t->first];
    const UnigramScores *unigram = searcher->reader.store->unigram;
    if (t->base_unigram)
        for (int j = 0; j < n_live; j++)
            value[live[j]] = (double)unigram[words[live[j]]].alpha;
    else
        for (int j = 0; j < n_live; j++)
            value[live[j]] = t->base;
    for (int s = t->n - 1; s >= 0; s--) {
        const StepC *step = &steps[s];
        int from = step->beta == STEP_CONST     ? FROM_CONST
                   : step->beta == STEP_UNIGRAM ? FROM_UNIGRAM
                   : step->beta_values          ? FROM_PATTERN
                                                : FROM_ZERO;
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
            STEP_CASE(FROM_PATTERN)
            STEP_CASE(FROM_ZERO)
#undef STEP_CASE
        }
    }
}

/* Positions in pattern i of the live words of the current batch, once per batch (live
 * words only get fewer, so those located for an earlier term cover the later ones),
 * prefetching the alpha and beta entries score_term will read.  The loop's loads are
 * independent across words: the CPU overlaps their
 * cache misses. */
TARGET_CLONES static void locate_live(Searcher *searcher, int i, const uint32_t *words, const int *live, int n_live) {
    Pat *p = &searcher->pats[i];
    if (p->located == searcher->batch_stamp)
        return;
    p->located = searcher->batch_stamp;
    int32_t *pos = &searcher->pos[i * MAX_BATCH];
    for (int j = 0; j < n_live; j++) {
        int c = live[j];
        int32_t at = pos[c] = locate(searcher, p, words[c]);
        if (at >= 0) {
            __builtin_prefetch(&p->alpha[at]);
            if (p->beta)
                __builtin_prefetch(&p->beta[at]);
        }
    }
}

/* Exact lp(x) of the n words of a batch, term by term (summed in term order).  ``sup``
 * holds each term's bound from before any of these words was read, so it bounds their
 * terms too; after each term, a word whose partial sum plus the later terms' sups is
 * below ``threshold`` (the count-th best score so far) is dropped: ``count`` words
 * already beat it, so it is never listed, and its other terms need no look-ups (after
 * the last term, it need not wait in the heaps).
 * Returns how many words are kept, their batch columns in ``live``. */
static int score_batch(Searcher *searcher, int n_terms, const uint32_t *words, int n, const double *sup,
                       double threshold, double *total, int *live) {
    searcher->batch_stamp++;
    int n_live = n;
    for (int c = 0; c < n; c++)
        live[c] = c;
    for (int t = 0; t < n_terms && n_live; t++) {
        const TermC *term = &searcher->terms[t];
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
        /* kept: the partial sum plus the later terms' bounds, added in the order the score
         * adds the terms themselves (so it bounds the score as rounded: upper_term), is at
         * least the threshold */
        int kept = 0;
        for (int j = 0; j < n_live; j++) {
            double upper = total[live[j]];
            for (int u = t + 1; u < n_terms; u++)
                upper += sup[u];
            live[kept] = live[j];
            kept += upper >= threshold;
        }
        n_live = kept;
    }
    return n_live;
}

/* ---------------------------------------------------------------- the bound */

/* Upper bound on lp(x) of every word not read yet; its terms' bounds go to searcher->term_sup,
 * and searcher->binding lists the lists that bind it (reading any other list cannot lower it).
 *
 * A term is the largest of its alternatives: "x in the pattern of step s", bounded by
 * that list's sup under the beta sups of the longer steps (an unread word is not above
 * the list's next entry, and a word absent from the pattern takes no alpha from it),
 * and the base under every beta sup.  The sum over terms, in term order, bounds lp(x):
 * every sum is taken in the order the score takes it (upper_term), so the bound holds for
 * the rounded scores too.
 *
 * Sups only decrease, so a term whose largest alternative is a constant keeps its bound
 * (frozen), and an alternative that was the largest stays so while it is at least the
 * runner-up was then.  A binding list keeps binding the same terms while its sup stays
 * above about searcher->keep[list] (where its alternatives fall to the runners-up): the search
 * reads on without recomputing the bound until then (only when to recompute rests on
 * that estimate, never the bound's value). */
static double bound(Searcher *searcher, int n_terms) {
    const List *lists = searcher->lists;
    uint64_t stamp = ++searcher->bound_stamp;
    double total = 0.0;
    searcher->n_binding = 0;
    for (int t = 0; t < n_terms; t++) {
        TermC *term = &searcher->terms[t];
        if (term->frozen) {
            total += searcher->term_sup[t];
            continue;
        }
        const StepC *steps = &searcher->steps[term->first];
        const Alt *alts = &searcher->alts[term->first_alt];
        double best = -INFINITY;
        if (term->arg != NONE)
            best = upper_term(steps, alts[term->arg].n_longer, lists[alts[term->arg].list].sup);
        if (term->arg == NONE || best < term->runner_up) {
            double second = -INFINITY;
            int arg = NONE;
            best = -INFINITY;
            for (int a = 0; a < term->n_alts; a++) {
                double value = upper_term(steps, alts[a].n_longer, lists[alts[a].list].sup);
                if (value > best) {
                    second = best;
                    best = value;
                    arg = a;
                } else if (value > second) {
                    second = value;
                }
            }
            if (term->fixed > best) {
                second = best;
                best = term->fixed;
                arg = NONE;
            } else if (term->fixed > second) {
                second = term->fixed;
            }
            term->arg = arg;
            term->runner_up = second;
        }
        total += best;
        searcher->term_sup[t] = best;
        if (term->arg == NONE) {
            term->frozen = 1;
            continue;
        }
        int list = alts[term->arg].list;
        double keep = isfinite(best) && isfinite(term->runner_up) ? lists[list].sup - (best - term->runner_up)
                                                                  : -INFINITY;
        if (searcher->binds[list] != stamp) {
            searcher->binds[list] = stamp;
            searcher->binding[searcher->n_binding++] = list;
            searcher->keep[list] = keep;
        } else if (keep > searcher->keep[list]) {
            searcher->keep[list] = keep;
        }
    }
    /* No list binds only if no term predicts x (never so for position_terms' terms):
     * then reading cannot lower the bound, and exactness needs every word read. */
    if (!searcher->n_binding) {
        int unigram = searcher->unigram_list;
        searcher->binds[unigram] = stamp;
        searcher->binding[searcher->n_binding++] = unigram;
        searcher->keep[unigram] = INFINITY;
    }
    return total;
}

/* Reads the next entry of ``list``; returns its word. */
static inline uint32_t read_list(Searcher *searcher, List *list) {
    if (list->depth >= list->length)  /* nothing left: no word (the caller skips ids >= V) */
        return UINT32_MAX;
    uint32_t word = list->words[list->depth++ - list->ahead_start];
    if (list->depth == list->length) {
        list->sup = -INFINITY;
    } else {
        if (list->depth == list->ahead_end)
            gather_ahead(searcher, list);
        list->sup = list->alphas[list->depth - list->ahead_start];
    }
    return word;
}

/* ---------------------------------------------------------------- pending heap */

static inline int before(const Scored *a, const Scored *b) {  /* a ranks before b */
    return a->score > b->score || (a->score == b->score && a->word < b->word);
}

static void heap_push(Scored *heap, int64_t *n, Scored e) {
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!before(&e, &heap[parent]))
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static Scored heap_pop(Scored *heap, int64_t *n) {
    Scored top = heap[0], last = heap[--(*n)];
    int64_t i = 0;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= *n)
            break;
        if (child + 1 < *n && before(&heap[child + 1], &heap[child]))
            child++;
        if (!before(&heap[child], &last))
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (*n > 0)
        heap[i] = last;
    return top;
}

/* Keeps the best ``size`` scores in the min-heap ``top``. */
static void top_push(double *top, int64_t *n, int64_t size, double score) {
    int64_t i;
    if (*n < size) {
        for (i = (*n)++; i > 0 && top[(i - 1) / 2] > score; i = (i - 1) / 2)
            top[i] = top[(i - 1) / 2];
        top[i] = score;
        return;
    }
    if (score <= top[0])
        return;
    for (i = 0;;) {  /* replace the smallest, sift down */
        int64_t child = 2 * i + 1;
        if (child >= *n)
            break;
        if (child + 1 < *n && top[child + 1] < top[child])
            child++;
        if (top[child] >= score)
            break;
        top[i] = top[child];
        i = child;
    }
    top[i] = score;
}


/* ---------------------------------------------------------------- the search */

/* The search over the terms searcher->position describes (see search_position). */
static int run_search(Searcher *searcher, int64_t count, int use_mass, double mass, const uint32_t *excluded,
                      int64_t n_excluded) {
    uint32_t vocab_size = searcher->reader.store->vocab_size;
    int n_pats = 0;
    int n_terms = read_terms(searcher, &n_pats);
    if (n_terms < 0) {
        fail(&searcher->reader.failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    mark_members(searcher, n_pats);
    int64_t candidates = vocab_size;  /* V of the cap and the -p rule: the words not excluded */
    for (int64_t i = 0; i < n_excluded; i++) {
        if (!(searcher->flags[excluded[i]] & SEEN)) {  /* <s> (SEEN already) and repeats count once */
            searcher->flags[excluded[i]] |= SEEN;
            candidates--;
        }
    }
    /* The original lists at most V - 1 substitutes (one word is <s>), even for a model
     * without <s>; here V counts the words not excluded. */
    if (count > candidates - 1)
        count = candidates - 1;
    int64_t n_evaluated = 0, n_pending = 0, n_listed = 0, reads = 0;
    int64_t n_top = 0, top_size = count < vocab_size ? count : vocab_size;
    double mass_sum = 0.0, batch_scores[MAX_BATCH];
    int unigram = searcher->unigram_list, done = count <= 0, live[MAX_BATCH];
    int need_bound = 1;  /* the binding lists may have changed since the bound was computed */
    int least_batch = count < MIN_BATCH ? MIN_BATCH : count > MAX_BATCH ? MAX_BATCH : (int)count;
    while (!done) {
        /* Read new words into a batch: rounds of one entry from each binding list. */
        uint32_t *batch = &searcher->evaluated[n_evaluated];
        int n = 0, size = (int)(n_evaluated / 8 < MAX_BATCH ? n_evaluated / 8 : MAX_BATCH);
        size = size < least_batch ? least_batch : size;
        while (n < size && searcher->lists[unigram].depth < vocab_size) {
            /* stop reading once the best ``count`` scores so far all beat every unread
             * word: the words of this batch still get scored, no more are needed */
            if (need_bound) {
                need_bound = 0;
                double unread = bound(searcher, n_terms);
                if (n_top == top_size && unread < searcher->top[0])
                    break;
            }
            if (n == 0)  /* bounds on the terms of every word the batch will read */
                memcpy(searcher->batch_sup, searcher->term_sup, (size_t)n_terms * sizeof(double));
            /* one entry of each list that binds (its sup is finite, so it has one left) */
            for (int b = 0; b < searcher->n_binding && n < size; b++) {
                int l = searcher->binding[b];
                uint32_t word = read_list(searcher, &searcher->lists[l]);
                reads++;
                need_bound |= searcher->lists[l].sup <= searcher->keep[l];
                if (word < vocab_size && !(searcher->flags[word] & SEEN)) {
                    searcher->flags[word] |= SEEN;
                    batch[n++] = word;
                    __builtin_prefetch(&searcher->reader.store->unigram[word]);
                }
            }
        }
        double threshold = n_top == top_size ? searcher->top[0] : -INFINITY;
        int kept = score_batch(searcher, n_terms, batch, n, searcher->batch_sup, threshold, batch_scores, live);
        for (int j = 0; j < kept; j++) {
            double score = batch_scores[live[j]];
            heap_push(searcher->pending, &n_pending, (Scored){score, batch[live[j]]});
            top_push(searcher->top, &n_top, top_size, score);
        }
        n_evaluated += n;
        /* Pending words above the bound on unread words are final, best first. */
        int everything = searcher->lists[unigram].depth == vocab_size;
        double limit = everything ? -INFINITY : bound(searcher, n_terms);
        need_bound = everything; /* scoring reads no list: the next round can start from this bound */
        while (!done && n_pending && (everything || searcher->pending[0].score > limit)) {
            Scored e = heap_pop(searcher->pending, &n_pending);
            searcher->listed[n_listed++] = e;
            if (use_mass) {  /* the original's -p rule: stop once P <= S / (S + p (V - L)) */
                double p = pow(10.0, e.score);
                mass_sum += p;
                done = mass <= mass_sum / (mass_sum + p * (double)(candidates - n_listed));
            }
            done |= n_listed >= count;
        }
        done |= everything;
    }
    clear_flags(searcher, n_pats, n_evaluated, excluded, n_excluded);
    searcher->n_listed = n_listed;
    searcher->n_searches++;
    searcher->n_evaluated += (unsigned long long)n_evaluated;
    searcher->n_reads += (unsigned long long)reads;
    searcher->n_listed_total += (unsigned long long)n_listed;
    return 0;
}

int search_position(Searcher *searcher, const uint32_t *sentence, int n, int target, const SearchLimits *limits) {
    uint32_t vocab_size = searcher->reader.store->vocab_size;
    searcher->n_listed = 0;
    if (target < 1 || target >= n) {
        fail(&searcher->reader.failure, FS_EARGUMENT, "target outside 1 ... len(sentence) - 1");
        return -1;
    }
    for (int64_t i = 0; i < limits->n_excluded; i++)
        if (limits->excluded[i] >= vocab_size) {
            fail(&searcher->reader.failure, FS_EARGUMENT, "excluded: word ids below the vocabulary size");
            return -1;
        }
    /* As the original, the -p rule applies only for P < 1: with P = 1 it would stop once
     * S / (S + p (V - L)) rounds to 1, far down the list but before its end. */
    int use_mass = limits->use_mass && limits->mass < 1.0;
    reader_begin_search(&searcher->reader);
    int rc = position_terms(&searcher->reader, sentence, n, target, &searcher->position);
    if (rc == 0)
        rc = run_search(searcher, limits->count, use_mass, limits->mass, limits->excluded, limits->n_excluded);
    reader_end_search(&searcher->reader);
    return rc;
}

/* p / sum p of ``n`` scores, best first, ``stride`` bytes apart from ``first``. */
static void normalize_strided(const char *first, size_t stride, int64_t n, double *out) {
    double total = 0.0, best = n > 0 ? *(const double *)first : 0.0;
    for (int64_t i = 0; i < n; i++) {  /* relative to the best: no underflow of the sum */
        out[i] = pow(10.0, *(const double *)(first + (size_t)i * stride) - best);
        total += out[i];
    }
    for (int64_t i = 0; i < n; i++)
        out[i] /= total;
}

void normalize(const double *scores, int64_t n, double *out) {
    normalize_strided((const char *)scores, sizeof(double), n, out);
}

/* Appends the searcher's answer to ``a`` as its next position: 0, or -1 when out of memory. */
static int keep_answer(Answers *a, const Searcher *searcher) {
    if (GROW64(a->starts, a->cap_starts, a->n_positions + 2) < 0)
        return -1;
    if (a->n + searcher->n_listed > a->cap) {
        int64_t cap = 2 * (a->n + searcher->n_listed) + 256;
        Scored *answers = realloc(a->answers, (size_t)cap * sizeof(Scored));
        if (!answers)
            return -1;
        a->answers = answers;
        if (a->normalized) {
            double *probabilities = realloc(a->probabilities, (size_t)cap * sizeof(double));
            if (!probabilities)
                return -1;
            a->probabilities = probabilities;
        }
        a->cap = cap;
    }
    if (a->n_positions == 0)
        a->starts[0] = 0;
    memcpy(a->answers + a->n, searcher->listed, (size_t)searcher->n_listed * sizeof(Scored));
    if (a->normalized && searcher->n_listed > 0)
        normalize_strided((const char *)&searcher->listed->score, sizeof(Scored), searcher->n_listed,
                          a->probabilities + a->n);
    a->n += searcher->n_listed;
    a->starts[++a->n_positions] = a->n;
    return 0;
}

int search_run(Searcher *searcher, const uint32_t *sentence, int n, int *target, int last, const SearchLimits *limits,
               Answers *a, int64_t most) {
    for (; *target < last && a->n < most; ++*target) {
        if (search_position(searcher, sentence, n, *target, limits) < 0)
            return -1;
        if (keep_answer(a, searcher) < 0) {
            fail(&searcher->reader.failure, FS_ENOMEM, "out of memory");
            return -1;
        }
    }
    return 0;
}

void answers_free(Answers *a) {
    free(a->answers);
    free(a->probabilities);
    free(a->starts);
    memset(a, 0, sizeof(*a));
}

int searcher_init(Searcher *searcher, const Store *s, MapTable *maps, size_t records, size_t kept_budget) {
    memset(searcher, 0, sizeof(*searcher));
    if (reader_init(&searcher->reader, s, maps, records, kept_budget) < 0)
        return -1;
    size_t v = s->vocab_size;
    searcher->flags = calloc(v, 1);
    searcher->evaluated = malloc(v * sizeof(uint32_t));
    searcher->pending = malloc(v * sizeof(Scored));
    searcher->listed = malloc(v * sizeof(Scored));
    searcher->top = malloc(v * sizeof(double));
    if (!searcher->flags || !searcher->evaluated || !searcher->pending || !searcher->listed || !searcher->top) {
        searcher_free(searcher);
        fail(&searcher->reader.failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    if (s->bos < s->vocab_size)
        searcher->flags[s->bos] = SEEN;  /* never a candidate */
    return 0;
}

void searcher_free(Searcher *searcher) {
    reader_free(&searcher->reader);
    position_terms_free(&searcher->position);
    free(searcher->flags);
    free(searcher->evaluated);
    free(searcher->pending);
    free(searcher->listed);
    free(searcher->top);
    free(searcher->pats);
    free(searcher->steps);
    free(searcher->terms);
    free(searcher->lists);
    free(searcher->binds);
    free(searcher->alts);
    free(searcher->keep);
    free(searcher->binding);
    free(searcher->term_sup);
    free(searcher->batch_sup);
    free(searcher->pos);
    memset(searcher, 0, sizeof(*searcher));
}
