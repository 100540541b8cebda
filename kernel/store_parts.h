/* What the three files of the open index share (store.h is the public side):
 *
 *   store.c    opening an index and checking its header, arrays and metadata; words;
 *   records.c  pattern records: keys, looking a pattern up, and checking each pattern a
 *              look-up finds (the bytes are parsed by codec.c);
 *   verify.c   the whole-index checks of fastsubs-index verify. */
#ifndef FASTSUBS_STORE_PARTS_H
#define FASTSUBS_STORE_PARTS_H

#include "store.h"

/* -1, with ``failure`` a damaged index (``what`` after "damaged index: "), or an LMDB error. */
int store_damaged(Failure *failure, const char *what);
int store_lmdb_failed(Failure *failure, int rc, const char *what);
/* memcmp order, a prefix first: the builder's sort of the spellings (Python's bytes order). */
int store_compare_spelling(const char *a, size_t a_len, const char *b, size_t b_len);

/* Is |v| within the index's value bound (or v infinite)?  The joint bound's rounding slack
 * is measured in that bound (docs/algorithm.md, "The joint bound"). */
static inline int within_value_bound(const Store *s, float v) {
    return !isfinite(v) || fabs((double)v) <= s->value_bound;
}

int records_key_compare(const uint8_t *a, const uint8_t *b, size_t len);
/* Checks what a checksum cannot vouch for (ids, positions by score) and derives the bound
 * on the back-off weights: 0, or -1 with the failure set. */
int records_check_pattern(const Store *s, DiskPattern *p, int order, Failure *failure, const uint8_t *key,
                          size_t key_len);

#endif
