/* cache_check: the lifetimes of what the reader's cache (kernel/cache.c) hands out, checked
 * deterministically on a real index, with no search and no Python in between
 * (tests/test_cache_lifetimes.py builds a small index, compiles this under
 * AddressSanitizer/UndefinedBehaviorSanitizer and runs it).
 *
 *   cache_check INDEX
 *
 * A search holds what the cache gave it (a CacheSlot, a rank map or sorted prefix of its
 * SlotAids, a rank map another reader built, the open index itself) until it ends; a bug
 * that frees or reuses one of them early shows in a full search only when a later
 * allocation or miss happens to land on it.  Here each is forced: a cache of one set of
 * SLOT_WAYS slots overflowed while the search holds a hit and its misses, a kept budget
 * that fits one SlotAids asked for a second while the first is in use, a shared rank map
 * released by the reader that built it while another keeps it, an index closed while a
 * search holds it.  Every check compares what the cache hands back with what the store
 * reads afresh (keys, data in the map, counts, sorted prefixes, rank maps) or with a count
 * that follows from the cache's shape (SLOT_WAYS), before anything that might have been
 * freed is read; each difference is written as "cache_check: WHAT" on standard error and
 * the run exits with 1.  On success it writes "cache_check: N checks" and exits with 0. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static int checks, failures;

/* Counts a check; when it failed, says what differs.  Returns ``ok``. */
static int check(int ok, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int check(int ok, const char *format, ...) {
    checks++;
    if (!ok) {
        va_list args;
        va_start(args, format);
        fputs("cache_check: ", stderr);
        vfprintf(stderr, format, args);
        fputc('\n', stderr);
        va_end(args);
        failures++;
    }
    return ok;
}

/* Ends the run after a failed check past which what the cache handed out may have been
 * freed: releasing it again would only add a sanitizer's report to what the check said. */
static _Noreturn void stop(void) {
    fprintf(stderr, "cache_check: %d of %d checks failed (stopped)\n", failures, checks);
    _Exit(1);  /* no exit handlers: LeakSanitizer's would report what the failure left */
}

/* A pattern "w _" of the model (order 2) as the store reads it afresh. */
typedef struct {
    uint32_t word;
    uint8_t key[1 + 4];
    size_t key_len;
    DiskPattern data;
} Known;

static CacheSlot *look_up(Reader *r, const Known *known) {
    return cache_reader_pattern(r, 1, &known->word, 1);
}

/* Whether ``rec`` is one of the reader's slots (else a record that found none). */
static int in_slots(const Reader *r, const CacheSlot *rec) {
    return (uintptr_t)rec - (uintptr_t)r->slots < r->n_sets * SLOT_WAYS * sizeof(CacheSlot);
}

/* Whether ``rec`` holds the pattern ``known``: its data where the store finds it, its count
 * (and, for a slot, its key: a record that found no slot serves one search and keeps none). */
static int holds(const Reader *r, const CacheSlot *rec, const Known *known) {
    return rec->data == known->data.ids && rec->count == known->data.count &&
           (!in_slots(r, rec) || (rec->key_len == known->key_len && !memcmp(rec->key, known->key, known->key_len)));
}

/* Every pattern "w _" the model has, in word order. */
static Known *known_patterns(const Store *s, int *n) {
    Known *known = calloc(s->vocab_size, sizeof(Known));
    MDB_txn *txn;
    MDB_cursor *cursor;
    *n = 0;
    if (!known || mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn)) {
        free(known);
        return NULL;
    }
    if (mdb_cursor_open(txn, s->patterns[2], &cursor) == 0) {
        for (uint32_t w = 0; w < s->vocab_size; w++) {
            Known *k = &known[*n];
            Failure failure = {0};
            k->word = w;
            k->key_len = records_pattern_key(s, 1, &w, 1, k->key);
            int found = records_find_pattern(s, cursor, NULL, 2, k->key, k->key_len, &k->data, &failure);
            check(found >= 0, "the look-up of pattern %u _ failed: %s", w, failure.message);
            *n += found == 1;
        }
        mdb_cursor_close(cursor);
    }
    mdb_txn_abort(txn);  /* the data stays where it is: the store's own transaction keeps the map */
    return known;
}

/* ---------------------------------------------------------------- slots */

/* A reader of one set: a search holds a hit (read by the search before) and then misses
 * SLOT_WAYS patterns more.  The held slot and the slots those misses filled must keep
 * their records; the misses that find no free slot are served apart ("spilled"), exactly
 * those beyond the slots the search does not hold. */
static void held_slots_outlive_a_full_set(const Store *s, const Known *known) {
    MapTable *maps = cache_map_table_new();
    Reader r;
    if (!check(maps && cache_reader_init(&r, s, maps, SLOT_WAYS, 0) == 0, "cannot make a reader of %d slots",
               SLOT_WAYS)) {
        cache_map_table_free(maps);
        return;
    }
    check(r.n_sets == 1, "a reader of %d slots has %zu sets, not 1", SLOT_WAYS, r.n_sets);
    cache_reader_begin_search(&r);  /* the first search fills the set */
    for (int i = 0; i < SLOT_WAYS; i++) {
        CacheSlot *rec = look_up(&r, &known[i]);
        check(rec && holds(&r, rec, &known[i]), "search 1: look-up %d does not hold pattern %u _", i,
              known[i].word);
    }
    check(r.n_spilled == 0, "search 1: %d of %d look-ups found no slot in an empty set", r.n_spilled, SLOT_WAYS);
    cache_reader_end_search(&r);

    unsigned long long misses = r.misses;
    cache_reader_begin_search(&r);
    CacheSlot *held = look_up(&r, &known[0]), *got[SLOT_WAYS];
    check(r.misses == misses && held && in_slots(&r, held),
          "search 2: pattern %u _, read by search 1, was not a hit in its slot", known[0].word);
    for (int j = 0; j < SLOT_WAYS; j++)
        got[j] = look_up(&r, &known[SLOT_WAYS + j]);
    int free_slots = SLOT_WAYS - 1;  /* every slot but the held one */
    check(r.misses == misses + SLOT_WAYS, "search 2: %llu misses, expected %d", r.misses - misses, SLOT_WAYS);
    check(r.n_spilled == SLOT_WAYS - free_slots, "search 2: %d records spilled, expected %d", r.n_spilled,
          SLOT_WAYS - free_slots);
    check(held && holds(&r, held, &known[0]), "search 2: the held slot of pattern %u _ now holds another record",
          known[0].word);
    for (int j = 0; j < SLOT_WAYS; j++)
        check(got[j] && holds(&r, got[j], &known[SLOT_WAYS + j]),
              "search 2: miss %d (pattern %u _) no longer holds its record after the later misses", j,
              known[SLOT_WAYS + j].word);
    cache_reader_end_search(&r);
    check(r.n_spilled == 0, "the spilled records outlived their search");
    cache_reader_free(&r);
    cache_map_table_free(maps);
}

/* ---------------------------------------------------------------- kept: rank maps and sorted prefixes */

/* Entries of a sorted prefix asked for. */
#define NEED 2

/* Whether the sorted prefix holds the pattern's first NEED entries by score, as the store reads them. */
static int prefix_ok(const Store *s, const SlotAids *k, const Known *known) {
    if (k->sorted_len < NEED)
        return 0;
    for (uint32_t i = 0; i < NEED; i++) {
        uint32_t at = position_at(&known->data, i);
        if (k->sorted_ids[i] != pattern_id(s, &known->data, at) || k->sorted_alpha[i] != known->data.alpha[at])
            return 0;
    }
    return 1;
}

/* Whether the rank map (flat: ``supers`` NULL, else two levels) gives every word of the
 * pattern its position, as the search's locate() reads it. */
static int map_ok(const Store *s, const RankBlock *map, const RankSuper *supers, const Known *known) {
    for (uint32_t i = 0; i < known->data.count; i++) {
        uint32_t word = pattern_id(s, &known->data, i);
        RankBlock block;
        if (supers) {
            RankSuper super = supers[word / SUPER_WORDS];
            uint32_t j = word >> 6 & 63;
            if (!(super.present >> j & 1))
                return 0;
            block = map[super.first + popcount64(super.present & ((1ull << j) - 1))];
        } else {
            block = map[word >> 6];
        }
        uint64_t bit = 1ull << (word & 63);
        if (!(block.bits & bit) || block.rank + popcount64(block.bits & (bit - 1)) != i)
            return 0;
    }
    return 1;
}

typedef enum { SORTED_PREFIX, RANK_MAP } KeptKind;
static const char *const KEPT_NAMES[] = {"sorted prefix", "rank map"};

/* The rank map of the pattern (looked up), or NULL. */
static const RankBlock *rank_map_of(Reader *r, const Known *known, const RankSuper **supers) {
    CacheSlot *rec = look_up(r, known);
    return rec ? cache_slot_rank_map(r, rec, supers) : NULL;
}

/* Asks for a SlotAids of ``rec``: 1 given (and right), 0 refused for want of room (or no ``rec``). */
static int keep(Reader *r, CacheSlot *rec, KeptKind kind, const Known *known) {
    if (!rec)
        return 0;
    if (kind == SORTED_PREFIX) {
        SlotAids *k = cache_slot_sorted_prefix(r, rec, NEED);
        return k ? check(prefix_ok(r->store, k, known), "the sorted prefix of pattern %u _ is wrong", known->word)
                 : 0;
    }
    const RankSuper *supers;
    const RankBlock *map = cache_slot_rank_map(r, rec, &supers);
    return map ? check(map_ok(r->store, map, supers, known), "the rank map of pattern %u _ is wrong", known->word)
               : 0;
}

/* A kept budget that fits the SlotAids of one of two patterns, not both: in one search the
 * second is refused (the first is in use: freeing it would pull it from under the search);
 * in the next, the first is unused and makes room for the second. */
static void kept_in_use_outlives_a_full_budget(const Store *s, const Known *one, const Known *two, KeptKind kind) {
    const char *name = KEPT_NAMES[kind];
    MapTable *maps = cache_map_table_new();
    Reader r;
    size_t cost[2];
    /* what each costs, with no limit (a shared map counts for each reader keeping it) */
    if (!check(maps && cache_reader_init(&r, s, maps, 64, SIZE_MAX) == 0, "cannot make a reader")) {
        cache_map_table_free(maps);
        return;
    }
    cache_reader_begin_search(&r);
    check(keep(&r, look_up(&r, one), kind, one), "no %s of pattern %u _ under no limit", name, one->word);
    cost[0] = r.kept_bytes;
    check(keep(&r, look_up(&r, two), kind, two), "no %s of pattern %u _ under no limit", name, two->word);
    cost[1] = r.kept_bytes - cost[0];
    cache_reader_end_search(&r);
    cache_reader_free(&r);
    size_t budget = cost[0] > cost[1] ? cost[0] : cost[1];
    if (!check(cost[0] && cost[1], "a %s costs no bytes", name) ||
        !check(cache_reader_init(&r, s, maps, 64, budget) == 0, "cannot make a reader")) {
        cache_map_table_free(maps);
        return;
    }

    cache_reader_begin_search(&r);
    CacheSlot *first = look_up(&r, one);
    check(first && keep(&r, first, kind, one), "search 1: no %s of pattern %u _ within a budget of %zu bytes", name,
          one->word, budget);
    SlotAids *kept = first ? first->kept : NULL;
    CacheSlot *second = look_up(&r, two);
    check(second && !keep(&r, second, kind, two),
          "search 1: a %s of pattern %u _ was made beside one in use, within a budget that fits one", name,
          two->word);
    if (check(first && first->kept == kept && kept, "search 1: the %s of pattern %u _ was freed while in use", name,
              one->word))
        check(keep(&r, first, kind, one), "search 1: the %s of pattern %u _ in use is lost", name, one->word);
    check(r.kept_bytes == cost[0], "search 1: %zu bytes kept, expected %zu", r.kept_bytes, cost[0]);
    cache_reader_end_search(&r);

    cache_reader_begin_search(&r);
    second = look_up(&r, two);
    check(second && keep(&r, second, kind, two), "search 2: no room made for a %s of pattern %u _", name, two->word);
    check(first && !first->kept, "search 2: the unused %s of pattern %u _ was kept past the budget", name,
          one->word);
    check(r.kept_bytes == cost[1], "search 2: %zu bytes kept, expected %zu", r.kept_bytes, cost[1]);
    cache_reader_end_search(&r);
    cache_reader_free(&r);
    cache_map_table_free(maps);
}

/* Reader A builds a pattern's rank map, reader B takes it from the table, A lets it go:
 * B still keeps it, so a third reader C must be given the very same map (a map counted
 * for B alone would be freed with A, and C would have to build another). */
static void a_shared_map_outlives_its_builder(const Store *s, const Known *known) {
    MapTable *maps = cache_map_table_new();
    Reader a, b, c;
    const RankSuper *supers;
    if (!check(maps && cache_reader_init(&a, s, maps, 64, SIZE_MAX) == 0 &&
                   cache_reader_init(&b, s, maps, 64, SIZE_MAX) == 0 &&
                   cache_reader_init(&c, s, maps, 64, SIZE_MAX) == 0,
               "cannot make three readers"))
        stop();
    cache_reader_begin_search(&a);
    const RankBlock *built = rank_map_of(&a, known, &supers);
    cache_reader_begin_search(&b);
    const RankBlock *taken = rank_map_of(&b, known, &supers);
    check(built && taken == built, "reader B built a rank map of its own, not the one A published");
    cache_reader_end_search(&a);
    cache_reader_free(&a);
    cache_reader_begin_search(&c);
    const RankBlock *again = rank_map_of(&c, known, &supers);
    if (!check(taken && again == taken, "the rank map reader B keeps left the table with reader A (freed?)"))
        stop();  /* B's release of it would free it again */
    check(map_ok(s, taken, supers, known), "the rank map reader B keeps is wrong");
    cache_reader_end_search(&b);
    cache_reader_end_search(&c);
    cache_reader_free(&b);
    cache_reader_free(&c);
    cache_map_table_free(maps);
}

/* ---------------------------------------------------------------- the open index */

/* engine_close while a search holds a Searcher: new work is refused at once, but the
 * Searcher, its cache and the map stay until it is given back. */
static void a_closed_index_outlives_its_search(const char *path, const Known *known) {
    Engine ix;
    Failure failure = {0};
    if (!check(engine_open(&ix, path, &failure) == 0, "engine_open: %s", failure.message))
        return;
    Searcher *k = engine_take(&ix, &failure);
    if (!check(k != NULL, "engine_take: %s", failure.message)) {
        engine_free(&ix);
        return;
    }
    engine_close(&ix);
    if (check(!ix.released && ix.store.env && ix.maps, "the index was released at close while a search held it")) {
        cache_reader_begin_search(&k->reader);
        CacheSlot *rec = look_up(&k->reader, known);
        check(rec && rec->count == known->data.count &&
              !memcmp(rec->data, known->data.ids, fs_packed_bytes(known->data.count, ix.store.id_bits)),
              "a search holding a closed index does not read pattern %u _", known->word);
        cache_reader_end_search(&k->reader);
        Failure refused = {0};
        check(!engine_take(&ix, &refused) && refused.code == FS_ECLOSED, "a closed index gave another Searcher");
        engine_give_back(&ix, k);
        check(ix.released, "the index was not released when its last search ended");
    }  /* else k was freed with the index: giving it back would write freed memory */
    engine_free(&ix);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fputs("usage: cache_check INDEX\n", stderr);
        return 2;
    }
    Store s;
    Failure failure = {0};
    if (store_open(&s, argv[1], &failure) < 0) {
        fprintf(stderr, "cache_check: %s\n", failure.message);
        return 1;
    }
    int n;
    Known *known = known_patterns(&s, &n);
    if (check(known && n >= 2 * SLOT_WAYS, "the model has %d patterns w _, not the %d needed", n, 2 * SLOT_WAYS)) {
        /* the two biggest patterns for the SlotAids */
        const Known *one = &known[0], *two = &known[1];
        for (int i = 0; i < n; i++) {
            if (known[i].data.count > one->data.count) {
                two = one;
                one = &known[i];
            } else if (&known[i] != one && known[i].data.count > two->data.count) {
                two = &known[i];
            }
        }
        if (check(two->data.count >= NEED, "no two patterns of %d words", NEED)) {
            held_slots_outlive_a_full_set(&s, known);
            kept_in_use_outlives_a_full_budget(&s, one, two, SORTED_PREFIX);
            kept_in_use_outlives_a_full_budget(&s, one, two, RANK_MAP);
            a_shared_map_outlives_its_builder(&s, one);
            a_closed_index_outlives_its_search(argv[1], one);
        }
    }
    free(known);
    store_close(&s);
    if (failures) {
        fprintf(stderr, "cache_check: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("cache_check: %d checks\n", checks);
    return 0;
}
