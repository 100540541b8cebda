/* What a searching thread keeps of the patterns it has read: a Reader, with its own read
 * transaction and a cache of fixed size.
 *
 * The Reader keeps a 64-byte slot per pattern it met (its key, where its data lies in
 * the map, its count), filled when a look-up first finds the pattern (store.h checks it
 * then, so a flipped byte is never read as an answer), and for big patterns a rank map
 * and the sorted prefix read so far (SlotAids), within a byte budget.  Slots are replaced
 * least recently used first within a set of SLOT_WAYS, and never while the current
 * search uses them: nothing is ever emptied wholesale, and memory does not grow with the
 * text.  Rank maps are shared by the readers of every thread of one open index (MapTable). */
#ifndef FASTSUBS_CACHE_H
#define FASTSUBS_CACHE_H

#include <pthread.h>

#include "store.h"

/* Key bytes a cache slot holds: up to order 11 with 2-byte ids, 8 with 3-byte ids, 6
 * with 4-byte ids; patterns with longer keys are read afresh at every search that needs them. */
#define SLOT_KEY_MAX 22
#define SLOT_WAYS 8

/* 64 words of a rank map: which of them the pattern holds, and how many words before
 * them it holds (the position of the first of them in the pattern's id-sorted arrays).
 * Packed, 12 bytes, not padded to 16: a quarter less memory for the flat maps, which a
 * reader's budget then holds for more patterns (the flat maps of 300 held-out lines,
 * kn4-64k, took 25 MiB of the 24 and were rebuilt over and over: issue 51), for a
 * block that spans two cache lines one time in eight. */
typedef struct __attribute__((packed)) {
    uint64_t bits;
    uint32_t rank;
} RankBlock;

/* SUPER_WORDS words of a two-level rank map: which of their 64 RankBlocks the pattern holds
 * words of, and where the first of those is in the map's RankBlocks. */
typedef struct {
    uint64_t present;
    uint32_t first, unused;
} RankSuper;

#define SUPER_WORDS 4096

/* The RankBlock of ``word`` in a rank map (of two levels when ``supers``: map[0], which is
 * empty, when the directory has no bit for it). */
static inline const RankBlock *map_block(const RankBlock *map, const RankSuper *supers, uint32_t word) {
    size_t at = word >> 6;
    if (supers) {
        RankSuper super = supers[word / SUPER_WORDS];
        uint64_t j = at & 63;
        /* (without a branch: whether a word's RankBlock holds any word is a coin toss) */
        at = (super.first + popcount64(super.present & ((1ull << j) - 1))) & (0 - (super.present >> j & 1));
    }
    return &map[at];
}

/* Position of ``word`` in the id-sorted arrays of a pattern, by ``block``, the RankBlock
 * of ``word`` in its rank map (map_block), or -1.  Without a branch: whether a candidate
 * is in a pattern is a coin toss for the branch predictor. */
static inline int32_t block_rank(const RankBlock *block, uint32_t word) {
    uint64_t bits = block->bits, below = bits & ((1ull << (word & 63)) - 1);
    int32_t held = -(int32_t)(bits >> (word & 63) & 1);  /* -1 when the block holds word, else 0 */
    return ((int32_t)(block->rank + popcount64(below)) & held) | ~held;
}

/* Position of ``word`` in the id-sorted arrays of a pattern by its rank map, or -1. */
static inline int32_t map_rank(const RankBlock *map, const RankSuper *supers, uint32_t word) {
    return block_rank(map_block(map, supers, word), word);
}

typedef struct SlotAids SlotAids;
/* A big pattern's rank map, built once by the first reader that needs it and shared by the
 * readers of every thread of the index while any of them keeps it (it never changes). */
typedef struct SharedMap SharedMap;
/* The rank maps the readers of one index keep, found by their pattern's data. */
typedef struct MapTable MapTable;

MapTable *cache_map_table_new(void);
void cache_map_table_free(MapTable *t);  /* once every reader has released its maps */

/* One pattern as the cache holds it (store.h's DiskPattern, in 64 bytes). */
typedef struct CacheSlot {
    uint64_t hash;              /* of the key; 0: an empty slot */
    uint64_t used;              /* the reader's search that used it last */
    const uint8_t *data;        /* NULL: the model has no such pattern */
    union {
        SlotAids *kept;         /* count > 1: a big pattern's rank map and sorted prefix, or NULL */
        /* count 1: its alpha and beta code, wherever the pattern stores them (format.h):
         * a search reads them from here, and looks up none more than once */
        struct {
            float alpha;
            uint32_t beta_code;
        } one;
    };
    uint32_t count;
    float beta_sup;             /* max(0, largest stored back-off weight) */
    /* the key's bytes; the pattern carries a joint order; its n-grams' order; the width of
     * its beta codes, by its place in FS_BETA_WIDTH_LIST (so that a search reads no byte of
     * a pattern's data to know where its fields lie) */
    uint16_t key_len : 5, has_joint : 1, order : 7, beta_width_place : 3;
    uint8_t key[SLOT_KEY_MAX];
} CacheSlot;
_Static_assert(FS_BETA_WIDTH_COUNT <= 8, "a beta width's place takes 3 bits of a CacheSlot");
_Static_assert(sizeof(CacheSlot) == 64, "a CacheSlot is one cache line");

/* The pattern a present CacheSlot holds, with every field's place. */
void cache_slot_pattern(const Store *s, const CacheSlot *rec, DiskPattern *out);

/* The words of a pattern (the filter) that are also in a big pattern, in the big pattern's
 * score order, as far as a scan of that order has got: the order a pair list reads
 * (lists.c), kept with the big pattern's SlotAids, or by a searcher for one search. */
typedef struct PairOrder {
    const uint8_t *filter;      /* the filter's data: which pattern it is (records never move) */
    uint32_t *words;            /* words[0 .. len): the filter's words among the entries tested */
    float *alphas;              /* their alphas in the big pattern (room for cap) */
    uint32_t len, cap;
    uint32_t scanned;           /* entries of the big pattern's order tested: all of them once complete */
    struct PairOrder *next;
} PairOrder;

/* What a big pattern keeps between searches (see searcher.h, RANK_MIN_COUNT). */
struct SlotAids {
    CacheSlot *owner;
    SharedMap *map;             /* rank map, or NULL until built or taken from another reader */
    uint32_t *sorted_ids;       /* the first sorted_len entries of the sorted list */
    float *sorted_alpha;        /* (room for sorted_cap) */
    uint32_t sorted_len, sorted_cap;
    PairOrder **pair_sets;      /* the pair orders of its filters, chained by the hash of the filter */
    uint32_t n_pair_sets, n_pairs;  /* (a power of 2 sets, or 0; at most one order per set on average) */
    size_t pair_bytes;
    SlotAids *newer, *older;        /* least recently used last */
};

typedef struct Reader {
    const Store *store;
    MapTable *maps;
    MDB_txn *txn;
    MDB_cursor *cursors[FS_MAX_ORDER + 1];  /* per order, opened on first use */
    CheckedRecords *checked;    /* the records whose checksums it found right */
    CacheSlot *slots;              /* n_sets * SLOT_WAYS */
    size_t n_sets;              /* a power of 2 */
    CacheSlot **spilled;           /* this search's records that found no slot */
    int n_spilled, cap_spilled;
    SlotAids *newest, *oldest;
    size_t kept_bytes, kept_budget;
    uint64_t search;            /* counts searches: the current one */
    unsigned long long lookups, misses;
    Failure failure;
    /* Held while the reader fills or empties a slot, and while cache_reader_seed copies the slots:
     * another thread's new reader may copy them while this one searches (the fields that
     * only the reader itself reads, ``used`` and ``kept``, are written without it). */
    pthread_mutex_t slots_lock;
} Reader;

/* A reader with ``records`` cache slots (rounded up to a power of 2, at least
 * SLOT_WAYS) and ``kept_budget`` bytes for rank maps and sorted prefixes; ``maps`` is
 * shared by the readers of the index. */
int cache_reader_init(Reader *r, const Store *s, MapTable *maps, size_t records, size_t kept_budget);
void cache_reader_free(Reader *r);
/* Starts ``r`` (just made, no search yet) with the records ``from`` has met, as ``from``'s
 * slots hold them now (``from`` may be searching in another thread): a reader made for a
 * new thread then does not look up and check again, one by one, what another thread of the
 * same index has read already (records never change, and all readers read one map). */
void cache_reader_seed(Reader *r, Reader *from);
void cache_reader_begin_search(Reader *r);
void cache_reader_end_search(Reader *r);
/* The pattern of order n + 1 whose fixed words are ids[0 .. n) with the slot before
 * ids[slot]; NULL when the model has none, or on a damaged record (r->failure.code set). */
CacheSlot *cache_reader_pattern(Reader *r, int slot, const uint32_t *ids, int n);
/* Prefetches the set of cache slots where cache_reader_pattern looks for that pattern first
 * (that load was 80% of its time in a warm pass at K = 10: a miss at every look-up). */
void cache_reader_prefetch(const Reader *r, int slot, const uint32_t *ids, int n);
/* Position of ``word`` (< V) in the id-sorted arrays of a present slot's pattern, or -1: by
 * the pattern's rank map where the reader keeps one, else by binary search (a look-up of
 * one n-gram in a big pattern, a dozen dependent loads, was 3.5% of a warm pass at K = 10). */
int32_t cache_slot_find(const Store *s, const CacheSlot *rec, uint32_t word);
/* The rank map of a big pattern, built on first use; NULL when the budget has no room
 * for it (the caller then binary-searches). */
const RankBlock *cache_slot_rank_map(Reader *r, CacheSlot *rec, const RankSuper **supers);
/* Makes the sorted prefix of a big pattern hold its first ``need`` entries; NULL when
 * there is no room (the caller reads through the positions by score). */
SlotAids *cache_slot_sorted_prefix(Reader *r, CacheSlot *rec, uint32_t need);
/* The pair order of the pattern whose data is ``filter`` kept with big pattern ``rec`` (made
 * empty when new); NULL when the budget has no room for one. */
PairOrder *cache_slot_pair_order(Reader *r, CacheSlot *rec, const uint8_t *filter);
/* Makes room for ``need`` entries in ``order``, kept with ``rec``: 0, or -1 when the budget has
 * none (the order stays as it was). */
int cache_pair_order_room(Reader *r, CacheSlot *rec, PairOrder *order, uint32_t need);
/* Adds up the pair orders ``r`` keeps: how many, their entries, the room their arrays take
 * (in entries), and how many have room for more than max(16, twice their entries), which a
 * kept order never needs (it grows by doubling from 16, by the words it found); only while
 * ``r`` does not search (for tests). */
void cache_reader_pair_census(const Reader *r, unsigned long long census[4]);
/* Reallocates a list of words and their alphas, two arrays, to ``cap`` entries each: 0, or
 * -1 when out of memory (the entries they held stay, in whichever arrays were moved). */
int cache_resize_words(uint32_t **words, float **alphas, uint32_t cap);

#endif
