/* An open index as the format defines it (format.h): opened, checked and read in place.
 *
 * store_open opens the LMDB environment read-only, reads the header and checks it (its
 * checksum, its fields against each other and against the arrays), checks every
 * whole-vocabulary array and the msgpack metadata against the checksums the header
 * gives, and derives what can be derived (the unigram back-off bound, the ids of <s>,
 * </s> and <unk>, which must agree with the header's).  After it, nothing the search
 * reads from the header or the arrays can be a flipped byte.
 *
 * Pattern records are read where they lie in the map: records_find_pattern looks a
 * pattern up through a cursor of the caller's own (one per thread), checks the record
 * it lands on (checksum, that the look-up landed where its key belongs, the layout) and
 * the pattern it finds (ids strictly increasing, positions a permutation that orders the
 * alphas), so a flipped byte or an inconsistent record is an error, never an answer. */
#ifndef FASTSUBS_STORE_H
#define FASTSUBS_STORE_H

#include <math.h>

#include "codec.h"
#include "lmdb/lmdb.h"

typedef struct {
    float alpha, beta;          /* side by side: one cache line for both */
} UnigramScores;

typedef struct Store {
    MDB_env *env;
    MDB_txn *txn;               /* for the header, the metadata and the arrays */
    MDB_dbi patterns[FS_MAX_ORDER + 1];  /* patterns[m]: order m (2 ... order) */
    int order;
    unsigned id_bytes, key_len; /* a pattern key of order m is 1 + id_bytes (m - 1) bytes */
    unsigned id_bits;           /* of each id of a pattern's data (fs_id_bits) */
    uint32_t id_mask;           /* its low id_bits bits */
    uint32_t vocab_size;
    uint32_t bos, eos, unk;     /* FS_NO_WORD: the model has no such word */
    uint64_t counts[FS_MAX_ORDER + 1], records[FS_MAX_ORDER + 1];  /* n-grams of order m; records of patterns<m> */
    /* in place */
    const ix_f32 *unigram_alpha, *unigram_beta;
    const ix_f32 *beta_values;  /* every order's back-off table, back to back (beta_values_len) */
    const ix_f32 *beta_table[FS_MAX_ORDER + 1];  /* order m's (2 ... order - 1), in beta_values */
    uint32_t beta_table_len[FS_MAX_ORDER + 1];
    uint64_t beta_values_len;
    const ix_u32 *unigram_order, *spelling_order;
    const ix_u64 *word_offsets;
    const char *word_bytes;
    size_t word_bytes_len;
    const uint8_t *meta;        /* the msgpack metadata */
    size_t meta_len;
    /* made at open: each word's scores side by side, and the alphas in unigram_order
     * (the unigram list reads sequentially) */
    UnigramScores *unigram;
    float *sorted_alpha;
    double unigram_beta_sup;    /* max(0, largest unigram back-off weight) */
    uint32_t joint_min;         /* patterns "_ d" of this many words or more carry joint orders */
    double value_bound;         /* at least |v| of every finite stored value (checked as each is read) */
} Store;

/* 0, or -1 with the failure set: FS_ENOTINDEX (no index at ``path``, or an interrupted
 * build), FS_EVERSION (another format version), FS_EDAMAGED, FS_ELMDB, FS_ENOMEM. */
int store_open(Store *s, const char *path, Failure *failure);

/* Sets the failure for LMDB's ``rc`` reading the database ``db_format`` names (a printf
 * format) through ``txn``: "damaged index: DB: LMDB page N: what" when LMDB's checks (mdb.c,
 * "fastsubs:") found damage in this transaction, else "damaged index: DB (LMDB's error)".
 * Returns -1. */
int store_read_failed(Failure *failure, MDB_txn *txn, int rc, const char *db_format, ...)
    __attribute__((format(printf, 4, 5)));

void store_close(Store *s);

/* The spelling of word ``id`` (< vocab_size) in place, and its length in bytes. */
static inline const char *store_word(const Store *s, uint32_t id, size_t *length) {
    uint64_t start = s->word_offsets[id];
    *length = (size_t)(s->word_offsets[id + 1] - start);
    return s->word_bytes + start;
}

/* The id of the word spelled ``word`` (``length`` bytes), or FS_NO_WORD. */
uint32_t store_word_id(const Store *s, const char *word, size_t length);

/* What the data of a pattern of ``order`` holds: PATTERN_HAS_BETA below the model's order. */
static inline unsigned store_beta_flag(const Store *s, int order) {
    return order < s->order ? PATTERN_HAS_BETA : 0;
}

/* Fixed word ``i`` of a pattern key (big-endian ids of ``width`` bytes after the slot). */
static inline uint32_t load_key_id(const uint8_t *key, unsigned i, unsigned width) {
    uint32_t id = 0;
    for (unsigned b = 0; b < width; b++)
        id = id << 8 | key[1 + i * width + b];
    return id;
}

static inline uint32_t pattern_id(const Store *s, const DiskPattern *p, uint32_t i) {
    return load_id(p->ids, i, s->id_bits, s->id_mask);
}

/* The joint key of entry ``i`` of a pattern "_ d" (format.h: computed, not stored). */
static inline float pattern_joint_key(const Store *s, const DiskPattern *p, uint32_t i) {
    return fs_joint_key(s->unigram_alpha[pattern_id(s, p, i)], p->alpha[i]);
}

/* Position of ``word`` in ``count`` (>= 1) ascending ids of ``bits`` bits, or -1.  A
 * branch-free lower bound: no mispredictions, so the CPU overlaps the searches of a
 * batch's words. */
static inline int32_t find_id(const uint8_t *ids, uint32_t count, uint32_t word, unsigned bits, uint32_t mask) {
    uint32_t first = 0, len = count;
    while (len > 1) {
        uint32_t half = len >> 1;
        first += load_id(ids, first + half - 1, bits, mask) < word ? half : 0;
        len -= half;
    }
    return load_id(ids, first, bits, mask) == word ? (int32_t)first : -1;
}

static inline int32_t pattern_find(const Store *s, const DiskPattern *p, uint32_t word) {
    return find_id(p->ids, p->count, word, s->id_bits, s->id_mask);
}

/* Position i of the sorted list: where its word is in the id-sorted arrays. */
static inline uint32_t position_at(const DiskPattern *p, uint32_t i) {
    return p->positions ? load_packed(p->positions, i, p->position_bits) : 0;
}

/* Position i of the joint order (a pattern with one): where its word is in the id-sorted arrays. */
static inline uint32_t joint_at(const DiskPattern *p, uint32_t i) {
    return p->position_bits ? load_packed(p->joint, i, p->position_bits) : 0;
}

/* The key of the pattern of order n + 1 whose fixed words are ids[0 .. n) with the slot
 * before ids[slot], into ``key`` (room: s->key_len of that order); its length, or 0 when a
 * fixed word is outside the vocabulary (NO_WORD: it matches no n-gram). */
size_t records_pattern_key(const Store *s, int slot, const uint32_t *ids, int n, uint8_t *key);

/* The records whose checksums a reader has found right, by where their values lie in the
 * map, direct-mapped: a look-up that lands on one again does not sum its bytes again (the
 * map is read-only and an index never changes once built).  A first pass looks most
 * records up many times: a block holds a hundred patterns, and a pattern of one word
 * outside the last slot looks up the one that holds its values. */
#define CHECKED_RECORDS_BITS 12
#define CHECKED_RECORDS (1 << CHECKED_RECORDS_BITS)
typedef struct {
    const uint8_t *values[CHECKED_RECORDS];
} CheckedRecords;

/* Looks the pattern ``key`` of order ``order`` up through ``cursor`` (opened on
 * s->patterns[order] in the caller's read transaction), skipping the checksums of the
 * records ``checked`` holds (NULL: sums every record it lands on) and adding those it
 * sums: 1 found (*out), 0 the model has no such pattern, -1 with the failure set
 * (FS_EDAMAGED, FS_ELMDB). */
int records_find_pattern(const Store *s, MDB_cursor *cursor, CheckedRecords *checked, int order, const uint8_t *key,
                         size_t key_len, DiskPattern *out, Failure *failure);

/* What verify_patterns counted. */
typedef struct {
    uint64_t records, patterns, entries;
} PatternCounts;

/* Reads every record of order ``order`` in key order and checks all of it (what a
 * look-up checks, and that records chain, keys ascend, scores are finite log-probabilities):
 * 0, or -1 with the failure set.  For fastsubs-index verify. */
int verify_patterns(const Store *s, MDB_txn *txn, int order, PatternCounts *counts, Failure *failure);
/* Checks what the open takes on trust in the arrays: that unigram_order and spelling_order
 * are permutations that sort the unigrams by score and the words by spelling. */
int verify_arrays(const Store *s, Failure *failure);

#endif
