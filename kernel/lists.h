/* What lists.c gives the rest of the search (searcher.h): reading the sorted lists, and
 * reading a position's terms into the patterns, steps, lists and bound alternatives the
 * search works on. */
#ifndef FASTSUBS_LISTS_H
#define FASTSUBS_LISTS_H

#include <math.h>

#include "searcher.h"

/* Makes the list's next entries readable (see List); lists_read calls it when they run out. */
void lists_gather_ahead(Searcher *searcher, List *list);

/* Reads the next entry of ``list``; returns its word. */
static inline uint32_t lists_read(Searcher *searcher, List *list) {
    if (list->depth >= list->length)  /* nothing left: no word (the caller skips ids >= V) */
        return UINT32_MAX;
    uint32_t word = list->words[list->depth++ - list->ahead_start];
    if (list->depth == list->length) {
        list->sup = -INFINITY;
    } else {
        if (list->depth == list->ahead_end)
            lists_gather_ahead(searcher, list);
        /* (a pair list learns its length only at the end of its scan: perhaps now) */
        list->sup = list->depth < list->length ? list->alphas[list->depth - list->ahead_start] : -INFINITY;
    }
    return word;
}

/* The order of a pair list whose filter has at most this many words is made whole when it
 * is first needed, one look-up per word of the filter, instead of scanning the pattern's order
 * for them. */
#define PAIR_DIRECT 256

/* Starts the pair list of alternative ``a`` of term 0 (joint.c): the words of its pattern P
 * that are also in term 1's "_ d", in the order of "_ d"'s list, into searcher->pair_lists[a]
 * (NO_PAIR when out of memory). */
void lists_start_pair(Searcher *searcher, int a);

/* Reads the position's terms (searcher->position) into searcher->terms/steps/pats/lists
 * and the bound's alternatives.  Returns the number of terms, -1 when out of memory;
 * *n_pats: the patterns added. */
int lists_read_terms(Searcher *searcher, int *n_pats);
/* Gives the smallest patterns without a rank map a membership bit each (as many as
 * there are bits) and marks their words in searcher->flags. */
void lists_mark_members(Searcher *searcher, int n_pats);
/* Clears every flag the search set: the words read, the marked patterns' words and the
 * excluded words. */
void lists_clear_flags(Searcher *searcher, int n_pats, int64_t n_evaluated, const uint32_t *excluded,
                       int64_t n_excluded);

#endif
