/* The sorted lists of a search, and reading a position's terms into them: see searcher.h. */
#include "lists.h"
#include "joint.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- sorted lists */

/* What a pair order's scan tests each word against (its filter), in locals that stay in
 * registers through the scan's loop. */
typedef struct {
    const uint8_t *flags;       /* Searcher.flags */
    uint8_t member;             /* the filter's membership bit, or 0 */
    const RankBlock *map;       /* else its rank map, or NULL */
    const RankSuper *supers;
    const Store *store;         /* else a binary search in its ids */
    const DiskPattern *data;
} Filter;

static Filter filter_of(const Searcher *searcher, const SearchPattern *p) {
    return (Filter){searcher->flags, p->member, p->map, p->supers, searcher->reader.store, &p->data};
}

/* Is ``word`` (< V) in the filter?  Its membership bit, else a bit of its rank map (the rank
 * itself is not needed), else a binary search. */
static inline int holds(const Filter *f, uint32_t word) {
    if (f->member)
        return f->flags[word] & f->member;
    if (f->map)
        return map_block(f->map, f->supers, word)->bits >> (word & 63) & 1;
    return pattern_find(f->store, f->data, word) >= 0;
}

/* How many entries of its pattern's order a pair list tests per gathering, at most: a
 * filter whose words come late in that order is scanned in steps, a bound all along. */
#define PAIR_SCAN 256

/* Growing a big pattern's sorted prefix (``kept``) may move it: the list that reads the
 * pattern in place follows it (a pair list of the pattern grows the same prefix). */
static void follow_prefix(Searcher *searcher, const SlotAids *kept) {
    for (int l = 0; l < searcher->n_lists; l++) {
        List *list = &searcher->lists[l];
        if (list->big == kept->owner && !list->filter && list->words != list->own_words) {
            list->words = (const ix_u32 *)&kept->sorted_ids[list->ahead_start];
            list->alphas = &kept->sorted_alpha[list->ahead_start];
        }
    }
}

/* ``from``'s entries and progress into ``to``, which has room for them. */
static void copy_order(PairOrder *to, const PairOrder *from) {
    if (from->len) {  /* a new order has no arrays yet: a memcpy from NULL is undefined, even of nothing */
        memcpy(to->words, from->words, from->len * sizeof(uint32_t));
        memcpy(to->alphas, from->alphas, from->len * sizeof(float));
    }
    to->len = from->len;
    to->scanned = from->scanned;
}

/* Room for ``need`` entries in a pair list's order.  A kept order grows within the reader's
 * budget; when the budget has no room, the list goes on with a copy in the searcher's own
 * order of its slot, which lists_start_pair made big enough for all of the pair's words. */
static void order_room(Searcher *searcher, List *list, uint32_t need) {
    PairOrder *kept = list->order, *own = list->own;
    if (kept == own || cache_pair_order_room(&searcher->reader, list->big, kept, need) == 0)
        return;
    copy_order(own, kept);
    list->order = own;
}

/* Tests the next PAIR_SCAN entries (at most) of a pair list's pattern's order against its
 * filter, adding the filter's words among them to the list's order, in that order.  They are
 * gathered here first and the order grown by their number: an order kept by the reader
 * counts against its budget, and room for every entry tested (a tenth of them are the
 * filter's, over corpus text) made the pair orders most of the budget, at the cost of
 * the rank maps and sorted prefixes they pushed out. */
static void extend_order(Searcher *searcher, List *list) {
    const Store *s = searcher->reader.store;
    const DiskPattern *d = list->pattern;
    uint32_t i = list->order->scanned, end = i + PAIR_SCAN < d->count ? i + PAIR_SCAN : d->count;
    SlotAids *kept = list->big ? cache_slot_sorted_prefix(&searcher->reader, list->big, end) : NULL;
    if (kept)
        follow_prefix(searcher, kept);
    Filter filter = filter_of(searcher, list->filter);
    uint32_t words[PAIR_SCAN], found = 0;
    float alphas[PAIR_SCAN];
    for (; i < end; i++) {
        uint32_t at = kept ? 0 : position_at(d, i), word = kept ? kept->sorted_ids[i] : pattern_id(s, d, at);
        if (word < s->vocab_size && holds(&filter, word)) {
            words[found] = word;
            alphas[found++] = kept ? kept->sorted_alpha[i] : list->alpha[at];
        }
    }
    PairOrder *o = list->order;
    if (found) {  /* (an order that found none yet may have no arrays) */
        order_room(searcher, list, o->len + found);
        o = list->order;
        memcpy(&o->words[o->len], words, found * sizeof(uint32_t));
        memcpy(&o->alphas[o->len], alphas, found * sizeof(float));
        o->len += found;
    }
    o->scanned = end;
}

/* A pair list's next entry (List.order); returns 1, or 0 when it has none.  It is the next
 * word of its order, read in place, past those read already through other lists (a tighter
 * sup), the order extended first until it holds one or is complete: its words are those of
 * the filter in the pattern's score order, so the list's sup (the next entry's alpha) bounds
 * the alpha of every word of both that the search has not read.  One entry at a time, each
 * past the words read by then, the list gives the same entries however far its order was
 * extended before (by earlier searches: the order is kept), so the search's work does not
 * depend on the cache.  Once the order is complete and given, ``length`` becomes exact. */
static int64_t gather_pair(Searcher *searcher, List *list) {
    uint32_t count = list->pattern->count;
    for (;;) {
        const PairOrder *o = list->order;
        while (list->scan < o->len && searcher->flags[o->words[list->scan]] & SEEN)
            list->scan++;
        if (list->scan < o->len || o->scanned == count)
            break;
        extend_order(searcher, list);
    }
    const PairOrder *o = list->order;
    int64_t got = list->scan < o->len;
    list->words = (const ix_u32 *)&o->words[list->scan];
    list->alphas = &o->alphas[list->scan];
    list->scan += got;
    if (o->scanned == count && list->scan == o->len)
        list->length = list->depth + got;
    return got;
}

/* Prefetches the ``bytes`` from ``from`` on: the entries of a list's next gathering, which
 * it reads in order while it is read round by round with the other lists (without these the
 * first read of each line of them waited on memory: the CPU's own prefetcher does not follow
 * so many streams, each read a few entries at a time: that load was 2.9% of a warm pass'
 * samples at K = 100, 1.3% with these). */
static inline void prefetch_next(const void *from, size_t bytes) {
    for (size_t at = 0; at < bytes; at += 64)
        __builtin_prefetch((const uint8_t *)from + at);
}

/* Prefetches ``n`` entries from entry ``first`` on of a packed array of ``bits``-bit entries
 * (none when ``array`` is NULL), as prefetch_next. */
static inline void prefetch_next_packed(const uint8_t *array, int64_t first, int64_t n, unsigned bits) {
    if (array)
        prefetch_next(array + (size_t)first * bits / 8, (size_t)n * bits / 8 + 1);
}

/* Makes the list's next entries (words and alphas) from the depth on readable, gathering
 * them when they are not in score order already, and prefetches the words' flags, which
 * the search tests next. */
void lists_gather_ahead(Searcher *searcher, List *list) {
    int64_t n = list->length - list->depth;
    n = n < list->ahead ? n : list->ahead;
    SlotAids *kept = list->big && !list->filter
                         ? cache_slot_sorted_prefix(&searcher->reader, list->big, (uint32_t)(list->depth + n))
                         : NULL;
    if (list->filter) {
        n = gather_pair(searcher, list);
    } else if (kept || list->in_order) {
        list->words = kept ? (const ix_u32 *)&kept->sorted_ids[list->depth] : &list->in_order[list->depth];
        list->alphas = kept ? &kept->sorted_alpha[list->depth] : &list->alpha[list->depth];
        prefetch_next(list->words + n, n * sizeof(uint32_t));
        prefetch_next(list->alphas + n, n * sizeof(float));
    } else if (list->joint) {
        const Store *s = searcher->reader.store;
        for (int64_t i = 0; i < n; i++) {
            uint32_t at = joint_at(list->pattern, (uint32_t)(list->depth + i));
            list->own_words[i] = pattern_id(s, list->pattern, at);
            list->own_alphas[i] = pattern_joint_key(s, list->pattern, at);
        }
        list->words = list->own_words;
        list->alphas = list->own_alphas;
        prefetch_next_packed(list->pattern->joint, list->depth + n, n, list->pattern->position_bits);
    } else {
        const Store *s = searcher->reader.store;
        for (int64_t i = 0; i < n; i++) {
            uint32_t at = position_at(list->pattern, (uint32_t)(list->depth + i));
            list->own_words[i] = pattern_id(s, list->pattern, at);
            list->own_alphas[i] = list->alpha[at];
        }
        list->words = list->own_words;
        list->alphas = list->own_alphas;
        prefetch_next_packed(list->pattern->positions, list->depth + n, n, list->pattern->position_bits);
    }
    for (int64_t i = 0; i < n; i++)
        if (list->words[i] < searcher->reader.store->vocab_size)
            __builtin_prefetch(&searcher->flags[list->words[i]]);
    list->ahead_start = list->depth;
    list->ahead_end = list->depth + n;
    list->ahead = list->ahead * 2 < LIST_AHEAD ? list->ahead * 2 : LIST_AHEAD;
}

/* A list of ``length`` (>= 1) entries, none read yet (a pair list, with a ``filter``: at most
 * ``length``, perhaps none). */
static void start_list(Searcher *searcher, List *list, CacheSlot *big, const ix_u32 *in_order,
                       const DiskPattern *pattern, int joint, const SearchPattern *filter, const ix_f32 *alpha,
                       int64_t length) {
    list->big = big;
    list->in_order = in_order;
    list->pattern = pattern;
    list->joint = joint;
    list->filter = filter;
    list->scan = 0;
    list->alpha = alpha;
    list->depth = 0;
    list->length = length;
    list->ahead = LIST_FIRST_AHEAD;
    lists_gather_ahead(searcher, list);
    list->sup = list->length ? list->alphas[0] : -INFINITY;
}

/* Makes ``order`` (empty, with room for them) whole: the words of ``filter`` (at most
 * PAIR_DIRECT) that are in ``d``, with their alphas there, by alpha descending (ties by lower
 * id, as the pattern's order has them), by a look-up in ``d`` per word of the filter.  The
 * look-ups first, each prefetching its word's alpha, then the insertions that read them:
 * the alphas of a big pattern's scattered words are cache misses, which then overlap. */
static void direct_order(Searcher *searcher, const SearchPattern *d, const SearchPattern *filter, PairOrder *order) {
    const Store *s = searcher->reader.store;
    uint32_t words[PAIR_DIRECT], n = 0;
    int32_t ats[PAIR_DIRECT];
    for (uint32_t i = 0; i < filter->count; i++) {
        uint32_t word = pattern_id(s, &filter->data, i);
        int32_t at = word >= s->vocab_size ? -1 : d->map ? map_rank(d->map, d->supers, word) : pattern_find(s, &d->data, word);
        if (at < 0)
            continue;
        __builtin_prefetch(&d->alpha[at]);
        words[n] = word;
        ats[n++] = at;
    }
    for (uint32_t k = 0; k < n; k++) {
        float alpha = d->alpha[ats[k]];
        uint32_t j = order->len++;  /* (ids ascend: a later word goes after those of its alpha) */
        for (; j > 0 && order->alphas[j - 1] < alpha; j--) {
            order->alphas[j] = order->alphas[j - 1];
            order->words[j] = order->words[j - 1];
        }
        order->alphas[j] = alpha;
        order->words[j] = words[k];
    }
    order->scanned = d->count;
}

/* The searcher's own order of ``slot``, emptied, with room for ``most`` entries: 0, or -1 when
 * out of memory. */
static int own_order(Searcher *searcher, int slot, uint32_t most) {
    PairOrder *own = &searcher->pair_own[slot];
    if (most > own->cap) {
        if (cache_resize_words(&own->words, &own->alphas, most) < 0)
            return -1;
        own->cap = most;
    }
    own->len = own->scanned = 0;
    return 0;
}

void lists_start_pair(Searcher *searcher, int a) {
    const SearchTerm *t0 = &searcher->terms[0], *t1 = &searcher->terms[1];
    const SearchPattern *filter = &searcher->pats[searcher->steps[t0->first + searcher->alts[t0->first_alt + a].n_longer].alpha];
    const SearchPattern *pattern =
        &searcher->pats[searcher->steps[t1->first + searcher->alts[t1->first_alt + searcher->joint_alt].n_longer].alpha];
    uint32_t most = filter->count < pattern->count ? filter->count : pattern->count;
    if (own_order(searcher, a, most) < 0) {
        searcher->pair_lists[a] = NO_PAIR;
        return;
    }
    int l = searcher->pair_lists[a] = searcher->n_lists++;
    List *list = &searcher->lists[l], *d = &searcher->lists[pattern->list];
    PairOrder *kept = d->big ? cache_slot_pair_order(&searcher->reader, d->big, filter->rec->data) : NULL;
    list->big = d->big;  /* (order_room's, before start_list sets it) */
    list->own = &searcher->pair_own[a];
    list->order = kept ? kept : list->own;
    if (!list->order->scanned && filter->count <= PAIR_DIRECT) {
        /* (made in the searcher's own order, which has room for ``most``; a kept one takes
         * only the words found: see extend_order) */
        direct_order(searcher, pattern, filter, list->own);
        if (list->order != list->own && cache_pair_order_room(&searcher->reader, list->big, list->order, list->own->len) == 0)
            copy_order(list->order, list->own);
        else
            list->order = list->own;
    }
    start_list(searcher, list, d->big, NULL, d->pattern, 0, filter, d->alpha, d->length);
    searcher->binds[l] = 0;
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
    /* (room for a pair list per step: joint.c starts at most one per alternative of term 0) */
    int most = *n_pats + 2 + n_steps;
    if (GROW(searcher->lists, searcher->cap_lists, most) < 0 || GROW(searcher->binds, searcher->cap_binds, most) < 0 ||
        GROW(searcher->keep, searcher->cap_keep, most) < 0 ||
        GROW(searcher->binding, searcher->cap_binding, most) < 0 ||
        GROW(searcher->pos, searcher->cap_pos, *n_pats * MAX_BATCH) < 0 ||
        GROW(searcher->held, searcher->cap_held, *n_pats * MAX_BATCH) < 0)
        return -1;
    for (int i = 0; i < n_steps; i++) {
        SearchStep *step = &searcher->steps[i];
        step->alpha_pos = step->alpha == NONE ? NULL : &searcher->pos[step->alpha * MAX_BATCH];
        step->alpha_held = step->alpha == NONE ? NULL : &searcher->held[step->alpha * MAX_BATCH];
        step->alpha_n_held = step->alpha == NONE ? NULL : &searcher->pats[step->alpha].n_held;
        step->alpha_values = step->alpha == NONE ? NULL : searcher->pats[step->alpha].alpha;
        step->beta_pos = step->beta < 0 ? NULL : &searcher->pos[step->beta * MAX_BATCH];
        const DiskPattern *beta = step->beta < 0 ? NULL : &searcher->pats[step->beta].data;
        step->beta_table = beta ? beta->beta_table : NULL;
        step->beta_codes = beta ? beta->beta_codes : NULL;
        step->beta_width = beta ? beta->beta_width : 0;
    }
    for (int i = 0; i < *n_pats; i++) {
        int used = 0;
        for (int j = 0; j < n_steps; j++)
            used |= searcher->steps[j].alpha == i;
        if (used) {
            SearchPattern *p = &searcher->pats[i];
            p->list = n;
            start_list(searcher, &searcher->lists[n++], is_big(p->count, s->vocab_size) ? p->rec : NULL, NULL, &p->data,
                       0, NULL, p->alpha, p->count);
        }
    }
    for (int i = 0; i < n_steps; i++)
        searcher->steps[i].list =
            searcher->steps[i].alpha == NONE ? NONE : searcher->pats[searcher->steps[i].alpha].list;
    int unigram = searcher->unigram_list = n;
    start_list(searcher, &searcher->lists[n++], NULL, s->unigram_order, NULL, 0, NULL, (const ix_f32 *)s->sorted_alpha,
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
        start_list(searcher, &searcher->lists[n++], NULL, NULL, &d->data, 1, NULL, NULL, d->count);
    searcher->n_lists = n;  /* the joint bound's pair lists come after, when it needs them */
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

