/* Reading an index's records in place: the LMDB environment (Store, one per open index,
 * shared by every thread) and a Reader per thread, which finds pattern records through
 * its own read transaction and keeps what it learnt of them in a cache of fixed size.
 *
 * A pattern record is read where it lies in the memory map: the Reader keeps a 64-byte
 * slot per pattern it met (its key, a pointer to the record, its count), checks the
 * record's checksum when it enters the cache (so a flipped byte is never read as an
 * answer), and, for big patterns, a rank map and the sorted prefix read so far (Kept),
 * within a byte budget.  Slots are replaced least recently used first within a set of
 * RECORD_WAYS, and never while the current search uses them: nothing is ever emptied
 * wholesale, and memory does not grow with the text. */
#ifndef FASTSUBS_STORE_H
#define FASTSUBS_STORE_H

#include <pthread.h>

#include "common.h"
#include "lmdb/lmdb.h"

/* Key bytes a cache slot holds: slot position + the fixed words' ids (fastsubs.format.
 * pattern_key).  Up to order 8 with 3-byte ids (V <= 16M), order 6 with 4-byte ids;
 * patterns with longer keys are read afresh at every search that needs them. */
#define RECORD_KEY_MAX 22
#define RECORD_WAYS 8

/* 64 words of a rank map: which of them the pattern holds, and how many words before
 * them it holds (the position of the first of them in the pattern's id-sorted arrays). */
typedef struct {
    uint64_t bits;
    uint32_t rank, unused;
} Block;

/* SUPER_WORDS words of a two-level rank map: which of their 64 Blocks the pattern holds
 * words of, and where the first of those is in the map's Blocks. */
typedef struct {
    uint64_t present;
    uint32_t first, unused;
} Super;

#define SUPER_WORDS 4096

typedef struct Kept Kept;
/* A big pattern's rank map, built once by the first reader that needs it and shared by the
 * readers of every thread of the store while any of them keeps it (it never changes):
 * a second thread does not build again the maps the first has built. */
typedef struct SharedMap SharedMap;
/* The store's SharedMaps, found by their pattern's record (see store.c). */
typedef struct MapTable MapTable;

/* One pattern as the cache holds it.  ``value`` points at its record in the map:
 * header word, [max_beta], ids[count], alpha[count], [beta[count]], [by_score[count]]
 * (fastsubs.format.pattern_value_layout). */
typedef struct Record {
    uint64_t hash;              /* of the key; 0: an empty slot */
    uint64_t used;              /* the reader's search that used it last */
    const ix_u32 *value;        /* NULL: the model has no such pattern */
    Kept *kept;                 /* a big pattern's rank map and sorted prefix, or NULL */
    uint32_t count;
    float beta_sup;             /* max(0, largest stored back-off weight) */
    uint8_t key_len, has_beta;
    uint8_t key[RECORD_KEY_MAX];
} Record;

/* What a big pattern keeps between searches (see search.c, RANK_MIN_COUNT). */
struct Kept {
    Record *owner;
    SharedMap *map;             /* rank map, or NULL until built or taken from another reader */
    uint32_t *sorted_ids;       /* the first sorted_len entries of the sorted list */
    float *sorted_alpha;        /* (room for sorted_cap) */
    uint32_t sorted_len, sorted_cap;
    Kept *newer, *older;        /* least recently used last */
};

static inline const ix_u32 *record_ids(const Record *r) { return r->value + 1 + r->has_beta; }
static inline const ix_f32 *record_alpha(const Record *r) { return (const ix_f32 *)(record_ids(r) + r->count); }
static inline const ix_f32 *record_beta(const Record *r) {
    return r->has_beta ? record_alpha(r) + r->count : NULL;
}
/* Positions into ids/alpha by alpha descending (a one-word pattern stores none: position 0). */
const ix_u32 *record_by_score(const Record *r);

/* Position of ``word`` in the id-sorted ``ids`` (count >= 1), or -1.  A branch-free
 * lower bound: no mispredictions, so the CPU overlaps the searches of a batch's words. */
static inline int32_t find_id(const ix_u32 *ids, uint32_t count, uint32_t word) {
    const ix_u32 *first = ids;
    uint32_t len = count;
    while (len > 1) {
        uint32_t half = len >> 1;
        first += first[half - 1] < word ? half : 0;
        len -= half;
    }
    return *first == word ? (int32_t)(first - ids) : -1;
}

typedef struct {
    float alpha, beta;          /* side by side: one cache line for both */
} UnigramScores;

typedef struct Store {
    MDB_env *env;
    MDB_txn *txn;               /* for the metadata, the vocabulary and the arrays */
    MDB_dbi meta, vocab, arrays, *patterns;  /* patterns[m]: order m (2 ... order) */
    int order, id_bytes;
    uint32_t vocab_size;
    int64_t bos;                /* <s>, never a candidate, or -1 */
    /* in place */
    const ix_f32 *unigram_alpha, *unigram_beta;
    const ix_u32 *unigram_order;
    const ix_u64 *word_offsets;
    const char *word_bytes;
    size_t word_bytes_len;
    /* copies made at open: each word's scores side by side, and the alphas in
     * unigram_order (the unigram list reads sequentially) */
    UnigramScores *unigram;
    float *sorted_alpha;
    double unigram_beta_sup;
    MapTable *maps;             /* the rank maps the readers keep (made by store_prepare) */
} Store;

/* The spelling of word ``id`` (< vocab_size) in place, and its length in bytes. */
static inline const char *store_word(const Store *s, uint32_t id, size_t *length) {
    uint64_t start = s->word_offsets[id];
    *length = (size_t)(s->word_offsets[id + 1] - start);
    return s->word_bytes + start;
}

int store_open(Store *s, const char *path, Failure *failure);
/* Reads the arrays once the metadata (decoded by the caller) gave the shape. */
int store_prepare(Store *s, int order, uint32_t vocab_size, int id_bytes, int64_t bos, double max_unigram_beta,
                  Failure *failure);
void store_close(Store *s);
/* Opens the named database: 0, or -1 with the failure set. */
int store_dbi(Store *s, const char *name, MDB_dbi *dbi, Failure *failure);
/* The value of ``key`` in ``dbi`` (read through the store's own transaction): 1 found,
 * 0 not (an empty key is in no database), -1 on error. */
int store_get(Store *s, MDB_dbi dbi, const void *key, size_t key_len, MDB_val *value, Failure *failure);

typedef struct Reader {
    const Store *store;
    MDB_txn *txn;
    Record *slots;              /* n_sets * RECORD_WAYS */
    size_t n_sets;              /* a power of 2 */
    Record **spilled;           /* this search's records that found no slot */
    int n_spilled, cap_spilled;
    Kept *newest, *oldest;
    size_t kept_bytes, kept_budget;
    uint64_t search;            /* counts searches: the current one */
    unsigned long long lookups, misses;
    Failure failure;
    /* Held while the reader fills or empties a slot, and while reader_seed copies the slots:
     * another thread's new reader may copy them while this one searches (the fields that
     * only the reader itself reads, ``used`` and ``kept``, are written without it). */
    pthread_mutex_t slots_lock;
} Reader;

/* A reader with ``records`` cache slots (rounded up to a power of 2, at least
 * RECORD_WAYS) and ``kept_budget`` bytes for rank maps and sorted prefixes. */
int reader_init(Reader *r, const Store *s, size_t records, size_t kept_budget);
void reader_free(Reader *r);
/* Starts ``r`` (just made, no search yet) with the records ``from`` has met, as ``from``'s
 * slots hold them now (``from`` may be searching in another thread): a reader made for a
 * new thread then does not look up and check again, one by one, what another thread of the
 * same store has read already (records never change, and all readers of a store read one
 * map).  Rank maps are shared through the store anyway; sorted prefixes stay per reader. */
void reader_seed(Reader *r, Reader *from);
void reader_begin_search(Reader *r);
void reader_end_search(Reader *r);
/* The id of the word spelled ``word`` (``length`` bytes), looked up through the reader's own
 * transaction (so any number of threads look words up at once): 1 found, 0 not in the
 * vocabulary, -1 on a damaged index (r->failure set; FS_EDAMAGED: the entry names a word
 * spelled otherwise). */
int reader_word_id(Reader *r, const char *word, size_t length, uint32_t *id);
/* The pattern of order n + 1 whose fixed words are ids[0 .. n) with the slot before
 * ids[slot]; NULL when the model has none, or on a damaged record (r->failure.code set). */
Record *reader_pattern(Reader *r, int slot, const uint32_t *ids, int n);
/* The rank map of a big pattern, built on first use; NULL when the budget has no room
 * for it (the caller then binary-searches). */
const Block *record_rank_map(Reader *r, Record *rec, const Super **supers);
/* Makes the sorted prefix of a big pattern hold its first ``need`` entries; NULL when
 * there is no room (the caller reads through by_score). */
Kept *record_sorted_prefix(Reader *r, Record *rec, uint32_t need);
/* fastsubs.format.record_checksum. */
uint32_t record_checksum(const uint8_t *key, size_t key_len, const ix_u32 *body, size_t n_words);
/* Number of words of a pattern whose value is ``words`` long, or 0: no such length
 * (fastsubs.format.pattern_count). */
uint32_t pattern_count(size_t words, int has_beta);

#endif
