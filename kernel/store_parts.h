/* What the three files of the open index share (store.h is the public side):
 *
 *   store.c    opening an index and checking its header, arrays and metadata; words;
 *   records.c  pattern records: keys, reading a record and the patterns in it, and
 *              checking each pattern a look-up finds;
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

/* A record as every kind starts: checked against its checksum and its key's length. */
typedef struct {
    int kind, has_previous, has_joint;
    const uint8_t *key, *previous, *body, *end;  /* body: after the common part; end: of the value */
    size_t key_len;             /* of the database's pattern keys */
} DiskRecord;

/* Where a record's entries are, and its restart points. */
typedef struct {
    uint32_t n_patterns, n_restarts;
    const uint8_t *restarts, *entries;
} DiskBlock;

/* A key as hex, for messages (at most the first 32 bytes). */
const char *records_hex(const uint8_t *key, size_t len, char out[65]);
int records_key_compare(const uint8_t *a, const uint8_t *b, size_t len);
/* Bytes of the data of a pattern of ``count`` words. */
uint64_t records_data_bytes(const Store *s, uint64_t count, unsigned flags);
/* Checks what a checksum cannot vouch for (ids, positions by score) and derives the bound
 * on the back-off weights: 0, or -1 with the failure set. */
int records_check_pattern(const Store *s, DiskPattern *p, Failure *failure, const uint8_t *key, size_t key_len);
/* A record checked against its checksum and its key's length: 0, or -1 with the failure set. */
int records_open(const Store *s, int order, const MDB_val *k, const MDB_val *v, DiskRecord *r, Failure *failure);
/* A BLOCK record's entries and restart points: 0, or -1 when its layout is malformed. */
int records_open_block(const DiskRecord *r, DiskBlock *b);
/* Decodes the entry at ``p``; returns where the next starts, or NULL if it does not fit. */
const uint8_t *records_read_entry(const Store *s, const DiskRecord *r, const uint8_t *p, uint8_t *key, uint32_t *count,
                          const uint8_t **data, unsigned has_beta);
/* The pattern of a PATTERN record: 0, or -1 when its layout is malformed. */
int records_alone_pattern(const Store *s, const DiskRecord *r, unsigned has_beta, DiskPattern *out);

#endif
