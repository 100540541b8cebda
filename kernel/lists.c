/* The sorted lists of a search, and reading a position's terms into them: see searcher.h. */
#include "lists.h"
#include "joint.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- sorted lists */

/* Makes the list's next entries (words and alphas) from the depth on readable, gathering
 * them when they are not in score order already, and prefetches the words' flags, which
 * the search tests next. */
void lists_gather_ahead(Searcher *searcher, List *list) {
    int64_t n = list->length - list->depth;
    n = n < list->ahead ? n : list->ahead;
    SlotAids *kept =
        list->big ? cache_slot_sorted_prefix(&searcher->reader, list->big, (uint32_t)(list->depth + n)) : NULL;
    if (kept) {
        list->words = (const ix_u32 *)&kept->sorted_ids[list->depth];
        list->alphas = &kept->sorted_alpha[list->depth];
    } else if (list->in_order) {
        list->words = &list->in_order[list->depth];
        list->alphas = &list->alpha[list->depth];
    } else if (list->joint) {
        const Store *s = searcher->reader.store;
        for (int64_t i = 0; i < n; i++) {
            uint32_t at = joint_at(list->pattern, (uint32_t)(list->depth + i));
            list->own_words[i] = pattern_id(s, list->pattern, at);
            list->own_alphas[i] = list->pattern->joint_key[list->depth + i];
        }
        list->words = list->own_words;
        list->alphas = list->own_alphas;
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
static void start_list(Searcher *searcher, List *list, CacheSlot *big, const ix_u32 *in_order,
                       const DiskPattern *pattern, int joint, const ix_f32 *alpha, int64_t length) {
    list->big = big;
    list->in_order = in_order;
    list->pattern = pattern;
    list->joint = joint;
    list->alpha = alpha;
    list->depth = 0;
    list->length = length;
    list->ahead = LIST_FIRST_AHEAD;
    lists_gather_ahead(searcher, list);
    list->sup = list->alphas[0];
}


/* ---------------------------------------------------------------- reading the terms */

/* Index of the pattern ``rec`` in searcher->pats, adding it when new; -1 when out of memory. */
static int add_pattern(Searcher *searcher, CacheSlot *rec, int *n_pats) {
    for (int i = 0; i < *n_pats; i++)
        if (searcher->pats[i].rec == rec)
            return i;
    if (GROW(searcher->pats, searcher->cap_pats, *n_pats + 1) < 0)
        return -1;
    SearchPattern *p = &searcher->pats[(*n_pats)++];
    memset(p, 0, sizeof(*p));
    p->rec = rec;
    p->list = NONE;
    cache_slot_pattern(searcher->reader.store, rec, &p->data);
    p->alpha = p->data.alpha;
    p->beta = p->data.beta;
    p->count = rec->count;
    p->beta_sup = rec->beta_sup;
    p->map = is_big(rec->count, searcher->reader.store->vocab_size)
                 ? cache_slot_rank_map(&searcher->reader, rec, &p->supers) : NULL;
    if (!p->map)
        p->supers = NULL;
    return *n_pats - 1;
}

/* Reads the position's terms (searcher->position) into searcher->terms/steps/pats/lists.  Returns the
 * number of terms, -1 when out of memory; *n_pats: the patterns added. */
int lists_read_terms(Searcher *searcher, int *n_pats) {
    const PositionTerms *position = &searcher->position;
    const Store *s = searcher->reader.store;
    int n_terms = position->n_terms, n_steps = 0;
    if (GROW(searcher->terms, searcher->cap_terms, n_terms) < 0 ||
        GROW(searcher->steps, searcher->cap_steps, position->n_steps) < 0 ||
        GROW(searcher->term_sup, searcher->cap_term_sup, n_terms) < 0 ||
        GROW(searcher->batch_sup, searcher->cap_batch_sup, n_terms) < 0)
        return -1;
    for (int t = 0; t < n_terms; t++) {
        const TermPlan *spec = &position->terms[t];
        SearchTerm *tc = &searcher->terms[t];
        tc->first = n_steps;
        tc->n = spec->n;
        tc->base_unigram = spec->base_unigram;
        tc->base = spec->base;
        for (int i = spec->first; i < spec->first + spec->n; i++) {
            const StepPlan *step = &position->steps[i];
            SearchStep *sc = &searcher->steps[n_steps++];
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
    if (GROW(searcher->lists, searcher->cap_lists, *n_pats + 2) < 0 ||
        GROW(searcher->binds, searcher->cap_binds, *n_pats + 2) < 0 ||
        GROW(searcher->keep, searcher->cap_keep, *n_pats + 2) < 0 ||
        GROW(searcher->binding, searcher->cap_binding, *n_pats + 2) < 0 ||
        GROW(searcher->pos, searcher->cap_pos, *n_pats * MAX_BATCH) < 0)
        return -1;
    for (int i = 0; i < n_steps; i++) {
        SearchStep *step = &searcher->steps[i];
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
            SearchPattern *p = &searcher->pats[i];
            p->list = n;
            start_list(searcher, &searcher->lists[n++], is_big(p->count, s->vocab_size) ? p->rec : NULL, NULL, &p->data,
                       0, p->alpha, p->count);
        }
    }
    for (int i = 0; i < n_steps; i++)
        searcher->steps[i].list =
            searcher->steps[i].alpha == NONE ? NONE : searcher->pats[searcher->steps[i].alpha].list;
    int unigram = searcher->unigram_list = n;
    start_list(searcher, &searcher->lists[n++], NULL, s->unigram_order, NULL, 0, (const ix_f32 *)s->sorted_alpha,
               s->vocab_size);
    /* Each term's bound alternatives (see bound()), base last. */
    if (GROW(searcher->alts, searcher->cap_alts, n_steps + n_terms) < 0)
        return -1;
    int n_alts = 0;
    for (int t = 0; t < n_terms; t++) {
        SearchTerm *term = &searcher->terms[t];
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
    /* The joint order of term 1's "_ d", read as one more list when the joint bound applies. */
    const SearchPattern *d = joint_plan(searcher, n_terms);
    searcher->joint_list = d ? n : NONE;
    if (d)
        start_list(searcher, &searcher->lists[n++], NULL, NULL, &d->data, 1, NULL, d->count);
    for (int l = 0; l < n; l++)
        searcher->binds[l] = 0;
    return n_terms;
}

/* Gives the smallest patterns without a rank map a membership bit each (as many as
 * there are bits) and marks their words in searcher->flags. */
void lists_mark_members(Searcher *searcher, int n_pats) {
    int next = 0;
    for (int i = 0; i < n_pats && next < MEMBER_BITS; i++) {
        SearchPattern *p = &searcher->pats[i];
        if (p->map || is_big(p->count, searcher->reader.store->vocab_size))
            continue;
        p->member = (uint8_t)(2u << next++);
        for (int64_t j = 0; j < p->count; j++)
            searcher->flags[pattern_id(searcher->reader.store, &p->data, (uint32_t)j)] |= p->member;
    }
}

/* Clears every flag the search set: the words read, the marked patterns' words and the
 * excluded words. */
void lists_clear_flags(Searcher *searcher, int n_pats, int64_t n_evaluated, const uint32_t *excluded,
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

