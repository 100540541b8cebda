/* The reader's cache: see cache.h. */
#include "cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pattern holding at least V / FLAT_MAP_RATIO words gets a flat rank map, a RankBlock per
 * 64 vocabulary words (1.5 bits per word: at most 48 bytes per word it holds; V = 64K:
 * 12 KiB); a sparser one a two-level map: a RankSuper per SUPER_WORDS vocabulary words, then
 * a RankBlock per 64 words only where it holds some (at most 16 V / SUPER_WORDS + 12 (count + 1)
 * bytes).  Flat maps read one RankBlock per look-up; two-level maps one more (a RankSuper, from a
 * directory of V / 256 bytes that stays in cache), which costs about nothing
 * (docs/performance.md, "Tuning"), while the memory of a flat map would grow with V. */
#define FLAT_MAP_RATIO 256

void cache_slot_pattern(const Store *s, const CacheSlot *rec, DiskPattern *out) {
    unsigned width = FS_BETA_WIDTH_LIST[rec->beta_width_place];
    codec_pattern_fields(rec->data, rec->count, s->id_bits,
                         store_beta_flag(s, rec->order) | (rec->has_joint ? PATTERN_HAS_JOINT : 0),
                         s->beta_table[rec->order], width, out);
    if (rec->count == 1) {  /* its values as the slot keeps them (its one beta code: 0 of width 0) */
        out->alpha = (const ix_f32 *)&rec->one.alpha;
        out->beta_codes = NULL;
        out->beta_width = 0;
        if (out->beta_table)
            out->beta_table += rec->one.beta_code;
    }
    out->beta_sup = rec->beta_sup;
}

/* The SlotAids a slot keeps, or NULL (a slot of one word keeps its values instead). */
static SlotAids *aids_of(const CacheSlot *rec) {
    return rec->count == 1 ? NULL : rec->kept;
}

/* ---------------------------------------------------------------- rank maps shared by readers */

/* Sets of MAP_WAYS slots of a MapTable: room for the maps of 16,384 patterns, far more
 * than a reader's budget keeps (docs/performance.md, "Tuning").  A map that finds no slot
 * serves its reader alone. */
#define MAP_SETS 2048
#define MAP_WAYS 8

struct SharedMap {
    const uint8_t *value;       /* the data of the pattern it maps */
    RankBlock *map;
    RankSuper *supers;              /* its directory (same allocation), or NULL: flat */
    size_t bytes;
    int refs;                   /* the readers keeping it */
};

struct MapTable {
    pthread_mutex_t lock;
    SharedMap *slots[MAP_SETS * MAP_WAYS];
};

MapTable *cache_map_table_new(void) {
    MapTable *t = calloc(1, sizeof(MapTable));
    if (t && pthread_mutex_init(&t->lock, NULL)) {
        free(t);
        t = NULL;
    }
    return t;
}

void cache_map_table_free(MapTable *t) {
    if (t) {
        pthread_mutex_destroy(&t->lock);
        free(t);
    }
}

static SharedMap **map_set(MapTable *t, const uint8_t *value) {
    return &t->slots[(address_hash(value) >> 40) % MAP_SETS * MAP_WAYS];
}

static void map_free(SharedMap *m) {
    free(m->supers ? (void *)m->supers : (void *)m->map);
    free(m);
}

/* The map in the table of the pattern at ``value``, or NULL (the caller holds the lock). */
static SharedMap *map_find(MapTable *t, const uint8_t *value) {
    SharedMap **set = map_set(t, value);
    for (int w = 0; w < MAP_WAYS; w++)
        if (set[w] && set[w]->value == value)
            return set[w];
    return NULL;
}

/* The map of the pattern at ``value`` if a reader keeps one (now kept by the caller too). */
static SharedMap *map_take(MapTable *t, const uint8_t *value) {
    pthread_mutex_lock(&t->lock);
    SharedMap *found = map_find(t, value);
    if (found)
        found->refs++;
    pthread_mutex_unlock(&t->lock);
    return found;
}

/* Offers a map just built (refs 1) to the other readers; returns the one to keep: ``built``,
 * or the same pattern's map another reader published meanwhile (``built`` is then freed). */
static SharedMap *map_publish(MapTable *t, SharedMap *built) {
    pthread_mutex_lock(&t->lock);
    SharedMap *kept = map_find(t, built->value);
    if (kept) {
        kept->refs++;
    } else {
        kept = built;
        SharedMap **set = map_set(t, built->value);
        for (int w = 0; w < MAP_WAYS; w++) {
            if (!set[w]) {
                set[w] = built;
                break;
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (kept != built)
        map_free(built);
    return kept;
}

/* A reader no longer keeps ``m``: freed with its last reader. */
static void map_release(MapTable *t, SharedMap *m) {
    pthread_mutex_lock(&t->lock);
    int last = --m->refs == 0;
    if (last) {
        SharedMap **set = map_set(t, m->value);
        for (int w = 0; w < MAP_WAYS; w++)
            if (set[w] == m)
                set[w] = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    if (last)
        map_free(m);
}

/* ---------------------------------------------------------------- kept: rank maps, sorted prefixes */

/* What k counts against its reader's budget: a shared map counts for each reader keeping it. */
static size_t kept_size(const SlotAids *k) {
    return (k->map ? k->map->bytes : 0) + (size_t)k->sorted_cap * (sizeof(uint32_t) + sizeof(float)) + k->pair_bytes;
}

static void free_kept(Reader *r, SlotAids *k) {
    if (k->newer) k->newer->older = k->older; else r->newest = k->older;
    if (k->older) k->older->newer = k->newer; else r->oldest = k->newer;
    r->kept_bytes -= kept_size(k);
    k->owner->kept = NULL;
    if (k->map)
        map_release(r->maps, k->map);
    free(k->sorted_ids);
    free(k->sorted_alpha);
    for (uint32_t i = 0; i < k->n_pair_sets; i++)
        for (PairOrder *o = k->pair_sets[i], *next; o; o = next) {
            next = o->next;
            free(o->words);
            free(o->alphas);
            free(o);
        }
    free(k->pair_sets);
    free(k);
}

/* Marks k the most recently used. */
static void touch(Reader *r, SlotAids *k) {
    if (r->newest == k)
        return;
    if (k->newer) k->newer->older = k->older;
    if (k->older) k->older->newer = k->newer; else r->oldest = k->newer;
    k->newer = NULL;
    k->older = r->newest;
    if (r->newest) r->newest->newer = k;
    r->newest = k;
    if (!r->oldest) r->oldest = k;
}

/* Frees what patterns unused by the current search keep, least recently used first,
 * until ``more`` bytes fit; 0 if they cannot. */
static int make_room(Reader *r, size_t more) {
    for (SlotAids *k = r->oldest; k && r->kept_bytes + more > r->kept_budget;) {
        SlotAids *newer = k->newer;
        if (k->owner->used != r->search)
            free_kept(r, k);
        k = newer;
    }
    return r->kept_bytes + more <= r->kept_budget;
}

/* The SlotAids of rec, made when it has none; NULL when out of memory. */
static SlotAids *kept_of(Reader *r, CacheSlot *rec) {
    if (!rec->kept) {
        SlotAids *k = calloc(1, sizeof(SlotAids));
        if (!k)
            return NULL;
        k->owner = rec;
        k->older = r->newest;
        if (r->newest) r->newest->newer = k;
        r->newest = k;
        if (!r->oldest) r->oldest = k;
        rec->kept = k;
    }
    touch(r, rec->kept);
    return rec->kept;
}

/* Bytes of the rank map of a pattern with ``count`` words ``ids`` (ascending): flat, a RankBlock
 * per 64 words of the vocabulary, or two levels (see FLAT_MAP_RATIO), a RankSuper per
 * SUPER_WORDS words and the RankBlocks that hold words of the pattern, after an empty one
 * (map[0]) that the look-up of a word in no RankBlock reads. */
static int flat_map(const Store *s, uint32_t count) { return count >= s->vocab_size / FLAT_MAP_RATIO; }

static size_t n_supers(const Store *s) { return ((size_t)s->vocab_size + SUPER_WORDS - 1) / SUPER_WORDS; }

static size_t map_bytes(const Store *s, const DiskPattern *p) {
    if (flat_map(s, p->count))
        return ((size_t)s->vocab_size + 63) / 64 * sizeof(RankBlock);
    size_t n_blocks = 1;
    for (uint32_t i = 0; i < p->count; i++)  /* ids ascend: count the RankBlocks they fall in */
        n_blocks += i == 0 || pattern_id(s, p, i) >> 6 != pattern_id(s, p, i - 1) >> 6;
    return n_supers(s) * sizeof(RankSuper) + n_blocks * sizeof(RankBlock);
}

TARGET_CLONES static void fill_flat_map(const Store *s, RankBlock *map, size_t n, const DiskPattern *p) {
    for (uint32_t i = 0; i < p->count; i++) {
        uint32_t id = pattern_id(s, p, i);
        map[id >> 6].bits |= 1ull << (id & 63);
    }
    uint32_t rank = 0;
    for (size_t b = 0; b < n; b++) {
        map[b].rank = rank;
        rank += popcount64(map[b].bits);
    }
}

static void fill_two_level_map(const Store *s, RankSuper *supers, RankBlock *map, const DiskPattern *p) {
    size_t b = 0;
    uint32_t previous = 0;
    for (uint32_t i = 0; i < p->count; i++) {
        uint32_t word = pattern_id(s, p, i);
        if (i == 0 || word >> 6 != previous >> 6) {
            RankSuper *super = &supers[word / SUPER_WORDS];
            map[++b].rank = i;
            if (!super->present)
                super->first = (uint32_t)b;
            super->present |= 1ull << (word >> 6 & 63);
        }
        map[b].bits |= 1ull << (word & 63);
        previous = word;
    }
}

/* A new map (refs 1) of rec's pattern, ``bytes`` (map_bytes) long; NULL when out of memory. */
static SharedMap *build_map(const Store *s, const DiskPattern *p, size_t bytes) {
    SharedMap *m = calloc(1, sizeof(SharedMap));
    void *memory = m ? calloc(bytes, 1) : NULL;
    if (!memory) {
        free(m);
        return NULL;
    }
    m->value = p->ids;
    m->bytes = bytes;
    m->refs = 1;
    if (flat_map(s, p->count)) {
        m->map = memory;
        fill_flat_map(s, m->map, bytes / sizeof(RankBlock), p);
    } else {
        m->supers = memory;
        m->map = (RankBlock *)(m->supers + n_supers(s));
        fill_two_level_map(s, m->supers, m->map, p);
    }
    return m;
}

TARGET_CLONES int32_t cache_slot_find(const Store *s, const CacheSlot *rec, uint32_t word) {
    if (rec->count > 1 && rec->kept && rec->kept->map)
        return map_rank(rec->kept->map->map, rec->kept->map->supers, word);
    DiskPattern p;
    cache_slot_pattern(s, rec, &p);
    return pattern_find(s, &p, word);
}

const RankBlock *cache_slot_rank_map(Reader *r, CacheSlot *rec, const RankSuper **supers) {
    SlotAids *k = kept_of(r, rec);
    if (!k)
        return NULL;
    if (!k->map) {
        MapTable *maps = r->maps;
        DiskPattern p;
        cache_slot_pattern(r->store, rec, &p);
        SharedMap *m = map_take(maps, rec->data);
        size_t bytes = m ? m->bytes : map_bytes(r->store, &p);
        if (!make_room(r, bytes)) {
            if (m)
                map_release(maps, m);
            return NULL;
        }
        if (!m) {
            if (!(m = build_map(r->store, &p, bytes)))
                return NULL;
            m = map_publish(maps, m);
        }
        k->map = m;
        r->kept_bytes += bytes;
    }
    *supers = k->map->supers;
    return k->map->map;
}

SlotAids *cache_slot_sorted_prefix(Reader *r, CacheSlot *rec, uint32_t need) {
    SlotAids *k = kept_of(r, rec);
    if (!k)
        return NULL;
    if (need > k->sorted_cap) {
        uint32_t cap = 2 * k->sorted_cap > need ? 2 * k->sorted_cap : need;
        cap = cap < 64 ? 64 : cap > rec->count ? rec->count : cap;
        size_t more = (size_t)(cap - k->sorted_cap) * (sizeof(uint32_t) + sizeof(float));
        if (!make_room(r, more))
            return NULL;
        if (cache_resize_words(&k->sorted_ids, &k->sorted_alpha, cap) < 0)
            return NULL;  /* what it had stays usable */
        r->kept_bytes += more;
        k->sorted_cap = cap;
    }
    DiskPattern p;
    cache_slot_pattern(r->store, rec, &p);
    for (uint32_t i = k->sorted_len; i < need; i++) {
        uint32_t at = position_at(&p, i);
        k->sorted_ids[i] = pattern_id(r->store, &p, at);
        k->sorted_alpha[i] = p.alpha[at];
    }
    if (need > k->sorted_len)
        k->sorted_len = need;
    return k;
}

/* The set of k's pair orders that holds the order of ``filter``. */
static PairOrder **pair_set(const SlotAids *k, const uint8_t *filter) {
    return &k->pair_sets[address_hash(filter) >> 32 & (k->n_pair_sets - 1)];
}

/* Doubles k's sets of pair orders (at least 8) when they would hold more than one each on
 * average: 0, or -1 when the budget or memory has no room. */
static int grow_pair_sets(Reader *r, SlotAids *k) {
    if (k->n_pairs < k->n_pair_sets)
        return 0;
    uint32_t n = k->n_pair_sets ? 2 * k->n_pair_sets : 8;
    size_t more = (size_t)(n - k->n_pair_sets) * sizeof(PairOrder *);
    PairOrder **sets = make_room(r, more) ? calloc(n, sizeof(PairOrder *)) : NULL;
    if (!sets)
        return -1;
    PairOrder **old = k->pair_sets;
    uint32_t n_old = k->n_pair_sets;
    k->pair_sets = sets;
    k->n_pair_sets = n;
    for (uint32_t i = 0; i < n_old; i++)
        for (PairOrder *o = old[i], *next; o; o = next) {
            next = o->next;
            PairOrder **set = pair_set(k, o->filter);
            o->next = *set;
            *set = o;
        }
    free(old);
    k->pair_bytes += more;
    r->kept_bytes += more;
    return 0;
}

PairOrder *cache_slot_pair_order(Reader *r, CacheSlot *rec, const uint8_t *filter) {
    SlotAids *k = kept_of(r, rec);
    if (!k)
        return NULL;
    if (k->n_pair_sets)
        for (PairOrder *o = *pair_set(k, filter); o; o = o->next)
            if (o->filter == filter)
                return o;
    PairOrder *o;
    if (grow_pair_sets(r, k) < 0 || !make_room(r, sizeof(PairOrder)) || !(o = calloc(1, sizeof(PairOrder))))
        return NULL;
    o->filter = filter;
    PairOrder **set = pair_set(k, filter);
    o->next = *set;
    *set = o;
    k->n_pairs++;
    k->pair_bytes += sizeof(PairOrder);
    r->kept_bytes += sizeof(PairOrder);
    return o;
}

void cache_reader_pair_census(const Reader *r, unsigned long long census[4]) {
    for (const SlotAids *k = r->oldest; k; k = k->newer)
        for (uint32_t i = 0; i < k->n_pair_sets; i++)
            for (const PairOrder *o = k->pair_sets[i]; o; o = o->next) {
                census[0]++;
                census[1] += o->len;
                census[2] += o->cap;
                census[3] += o->cap > 2 * o->len && o->cap > 16;
            }
}

int cache_resize_words(uint32_t **words, float **alphas, uint32_t cap) {
    uint32_t *moved = realloc(*words, (size_t)cap * sizeof(uint32_t));
    if (!moved)
        return -1;
    *words = moved;
    float *moved_alphas = realloc(*alphas, (size_t)cap * sizeof(float));
    if (!moved_alphas)
        return -1;
    *alphas = moved_alphas;
    return 0;
}

int cache_pair_order_room(Reader *r, CacheSlot *rec, PairOrder *order, uint32_t need) {
    if (need <= order->cap)
        return 0;
    uint32_t cap = 2 * order->cap > need ? 2 * order->cap : need;
    cap = cap < 16 ? 16 : cap > rec->count ? rec->count : cap;
    size_t more = (size_t)(cap - order->cap) * (sizeof(uint32_t) + sizeof(float));
    if (!make_room(r, more))
        return -1;
    if (cache_resize_words(&order->words, &order->alphas, cap) < 0)
        return -1;  /* what it had stays usable */
    order->cap = cap;
    rec->kept->pair_bytes += more;
    r->kept_bytes += more;
    return 0;
}

/* ---------------------------------------------------------------- readers */

int cache_reader_init(Reader *r, const Store *s, MapTable *maps, size_t records, size_t kept_budget) {
    memset(r, 0, sizeof(*r));
    r->store = s;
    r->maps = maps;
    r->kept_budget = kept_budget;
    size_t sets = 1;
    while (sets * SLOT_WAYS < records)
        sets *= 2;
    r->n_sets = sets;
    if (!(r->slots = calloc(sets * SLOT_WAYS, sizeof(CacheSlot))) || !(r->checked = calloc(1, sizeof(CheckedRecords)))) {
        free(r->slots);
        r->slots = NULL;
        common_fail(&r->failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    if (pthread_mutex_init(&r->slots_lock, NULL)) {
        free(r->slots);
        r->slots = NULL;
        common_fail(&r->failure, FS_ENOMEM, "cannot make a lock");
        return -1;
    }
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &r->txn);
    if (rc) {
        pthread_mutex_destroy(&r->slots_lock);
        free(r->slots);
        r->slots = NULL;
        common_fail(&r->failure, FS_ELMDB, "cannot begin a read transaction (%s)", mdb_strerror(rc));
        return -1;
    }
    return 0;
}

void cache_reader_seed(Reader *r, Reader *from) {
    if (r->store != from->store || r->n_sets != from->n_sets)
        return;  /* sized apart: the sets differ */
    pthread_mutex_lock(&from->slots_lock);
    for (size_t i = 0; i < r->n_sets * SLOT_WAYS; i++) {
        const CacheSlot *have = &from->slots[i];
        CacheSlot *copy = &r->slots[i];
        if (!have->hash)
            continue;
        copy->hash = have->hash;
        copy->data = have->data;
        copy->count = have->count;
        if (have->count == 1)
            copy->one = have->one;
        copy->beta_sup = have->beta_sup;
        copy->key_len = have->key_len;
        copy->has_joint = have->has_joint;
        copy->order = have->order;
        copy->beta_width_place = have->beta_width_place;
        memcpy(copy->key, have->key, have->key_len);
    }
    pthread_mutex_unlock(&from->slots_lock);
}

void cache_reader_end_search(Reader *r) {
    for (int i = 0; i < r->n_spilled; i++) {
        if (aids_of(r->spilled[i]))
            free_kept(r, r->spilled[i]->kept);
        free(r->spilled[i]);
    }
    r->n_spilled = 0;
}

void cache_reader_free(Reader *r) {
    cache_reader_end_search(r);
    while (r->oldest)
        free_kept(r, r->oldest);
    for (int m = 0; m <= FS_MAX_ORDER; m++)
        if (r->cursors[m])
            mdb_cursor_close(r->cursors[m]);
    if (r->txn)
        mdb_txn_abort(r->txn);
    if (r->slots)
        pthread_mutex_destroy(&r->slots_lock);
    free(r->slots);
    free(r->checked);
    free(r->spilled);
    memset(r, 0, sizeof(*r));
}

void cache_reader_begin_search(Reader *r) {
    r->search++;
    r->failure.code = FS_OK;
}

static uint64_t hash_key(const uint8_t *key, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ key[i]) * 0x100000001b3ull;  /* FNV-1a */
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h ? h : 1;
}

/* Looks ``key`` up into rec (checked by the store); 0, or -1 with r->failure set. */
static int read_record(Reader *r, CacheSlot *rec, int order, const uint8_t *key, size_t key_len) {
    const Store *s = r->store;
    rec->data = NULL;
    rec->kept = NULL;
    rec->count = 0;
    rec->beta_sup = 0.0f;
    rec->order = (unsigned)order & 127;
    rec->has_joint = 0;
    rec->beta_width_place = 0;
    if (!r->cursors[order]) {
        int rc = mdb_cursor_open(r->txn, s->patterns[order], &r->cursors[order]);
        if (rc) {
            r->cursors[order] = NULL;
            store_read_failed(&r->failure, r->txn, rc, "patterns%d", order);
            return -1;
        }
    }
    DiskPattern p;
    int found = records_find_pattern(s, r->cursors[order], r->checked, order, key, key_len, &p, &r->failure);
    if (found <= 0)
        return found;
    rec->data = p.ids;
    rec->count = p.count;
    rec->beta_sup = p.beta_sup;
    rec->has_joint = p.joint != NULL;
    rec->beta_width_place = (unsigned)fs_beta_width_place(p.beta_width) & 7;  /* (one of them: checked) */
    if (p.count == 1) {  /* (checked: the code is within the order's table) */
        rec->one.alpha = p.alpha[0];
        rec->one.beta_code = p.beta_table ? (uint32_t)(p.beta_table - s->beta_table[order]) +
                                                beta_code(p.beta_codes, p.beta_width, 0)
                                          : 0;
        rec->beta_width_place = 0;
    }
    return 0;
}

/* The key of the pattern of order n + 1 that cache_reader_pattern looks up, into ``key``:
 * its length, or 0 when the index can hold no such pattern (an order it lacks, or an
 * unknown word, NO_WORD, which matches no n-gram). */
static size_t pattern_key(const Store *s, int slot, const uint32_t *ids, int n, uint8_t *key) {
    return n + 1 >= 2 && n + 1 <= s->order ? records_pattern_key(s, slot, ids, n, key) : 0;
}

/* The SLOT_WAYS slots where a key of hash ``hash`` may be kept. */
static CacheSlot *slot_set(const Reader *r, uint64_t hash) {
    return &r->slots[(hash & (r->n_sets - 1)) * SLOT_WAYS];
}

void cache_reader_prefetch(const Reader *r, int slot, const uint32_t *ids, int n) {
    uint8_t key[1 + 4 * FS_MAX_ORDER];
    size_t key_len = pattern_key(r->store, slot, ids, n, key);
    if (key_len && key_len <= SLOT_KEY_MAX)
        __builtin_prefetch(slot_set(r, hash_key(key, key_len)));
}

CacheSlot *cache_reader_pattern(Reader *r, int slot, const uint32_t *ids, int n) {
    const Store *s = r->store;
    int order = n + 1;
    uint8_t key[1 + 4 * FS_MAX_ORDER];
    size_t key_len = pattern_key(s, slot, ids, n, key);
    if (!key_len)
        return NULL;
    r->lookups++;
    uint64_t hash = hash_key(key, key_len);
    CacheSlot *rec = NULL;
    if (key_len <= SLOT_KEY_MAX) {
        CacheSlot *set = slot_set(r, hash);
        for (int w = 0; w < SLOT_WAYS; w++) {
            CacheSlot *slot_rec = &set[w];
            if (slot_rec->hash == hash && slot_rec->key_len == key_len && !memcmp(slot_rec->key, key, key_len)) {
                slot_rec->used = r->search;
                return slot_rec->data ? slot_rec : NULL;
            }
            /* the victim: an empty slot, else the least recently used one this search does not use */
            if (!slot_rec->hash) {
                if (!rec || rec->hash)
                    rec = slot_rec;
            } else if (slot_rec->used != r->search && (!rec || (rec->hash && slot_rec->used < rec->used))) {
                rec = slot_rec;
            }
        }
        if (rec && aids_of(rec))
            free_kept(r, rec->kept);
    }
    r->misses++;
    if (!rec) {  /* no slot: the record serves this search only */
        if (r->n_spilled == r->cap_spilled) {
            int cap = 2 * r->cap_spilled + 8;
            CacheSlot **grown = realloc(r->spilled, (size_t)cap * sizeof(CacheSlot *));
            if (!grown) {
                common_fail(&r->failure, FS_ENOMEM, "out of memory");
                return NULL;
            }
            r->spilled = grown;
            r->cap_spilled = cap;
        }
        if (!(rec = calloc(1, sizeof(CacheSlot)))) {
            common_fail(&r->failure, FS_ENOMEM, "out of memory");
            return NULL;
        }
        r->spilled[r->n_spilled++] = rec;
        if (read_record(r, rec, order, key, key_len) < 0)
            return NULL;
        rec->hash = hash;
        rec->used = r->search;
        return rec->data ? rec : NULL;
    }
    pthread_mutex_lock(&r->slots_lock);
    rec->hash = 0;
    int rc = read_record(r, rec, order, key, key_len);
    if (rc == 0) {  /* else the slot stays empty */
        rec->hash = hash;
        rec->key_len = (unsigned)key_len & 31;  /* (at most SLOT_KEY_MAX) */
        memcpy(rec->key, key, key_len);
    }
    pthread_mutex_unlock(&r->slots_lock);
    if (rc < 0)
        return NULL;
    rec->used = r->search;
    return rec->data ? rec : NULL;
}
