/* The record store: see store.h. */
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* fastsubs.format.VALUE_WEIGHT and KEY_WEIGHT (the module exports them; a test compares). */
#define VALUE_WEIGHT 0x9E3779B1u
#define KEY_WEIGHT 0x85EBCA6Bu
/* A pattern holding at least V / FLAT_MAP_RATIO words gets a flat rank map, a Block per
 * 64 vocabulary words (2 bits per word: at most 64 bytes per word it holds; V = 64K:
 * 16 KiB, every big pattern of kn4-64k); a sparser one a two-level map: a Super per
 * SUPER_WORDS vocabulary words, then a Block per 64 words only where it holds some (at
 * most 16 (V / SUPER_WORDS + count + 1) bytes).  Flat maps read one Block per look-up;
 * two-level maps one more (a Super, from a directory of V / 256 bytes that stays in
 * cache): kn4-338k-pruned, K=100, 0.94-1.05x the time of flat maps for all. */
#define FLAT_MAP_RATIO 256

void fail(Failure *failure, int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(failure->message, sizeof(failure->message), format, args);
    va_end(args);
    failure->code = code;
}

static int lmdb_failed(Failure *failure, int rc, const char *what) {
    fail(failure, FS_ELMDB, "%s (%s)", what, mdb_strerror(rc));
    return -1;
}

/* ---------------------------------------------------------------- records */

uint32_t record_checksum(const uint8_t *key, size_t key_len, const ix_u32 *body, size_t n_words) {
    uint32_t total = 0, weight = VALUE_WEIGHT, step = 2u * VALUE_WEIGHT;
    for (size_t i = 0; i < n_words; i++, weight += step)  /* (2i + 1) * w mod 2^32 */
        total += body[i] * weight;
    weight = KEY_WEIGHT;
    step = 2u * KEY_WEIGHT;
    for (size_t j = 0; j < key_len; j++, weight += step)
        total += key[j] * weight;
    return total;
}

uint32_t pattern_count(size_t words, int has_beta) {
    size_t hb = has_beta ? 1 : 0;
    if (words == 3 + 2 * hb)
        return 1;
    if (words < 1 + hb || (words - 1 - hb) % (3 + hb))
        return 0;
    size_t count = (words - 1 - hb) / (3 + hb);
    return count > 1 && count <= UINT32_MAX ? (uint32_t)count : 0;
}

static const ix_u32 first_position[1] = {0};

const ix_u32 *record_by_score(const Record *r) {
    if (r->count == 1)
        return first_position;
    return (const ix_u32 *)(r->has_beta ? record_beta(r) + r->count : record_alpha(r) + r->count);
}

/* ---------------------------------------------------------------- the store */

/* Is the file shorter than its pages?  Reading a page past its end would fault (SIGBUS),
 * so this is checked before any page beyond the two meta pages is read. */
static int truncated(MDB_env *env, Failure *failure) {
    MDB_envinfo info;
    MDB_stat stat_;
    mdb_filehandle_t fd;
    struct stat file;
    if (mdb_env_info(env, &info) || mdb_env_stat(env, &stat_) || mdb_env_get_fd(env, &fd) || fstat(fd, &file)) {
        fail(failure, FS_EDAMAGED, "damaged index: data.mdb cannot be measured");
        return 1;
    }
    unsigned long long needed = ((unsigned long long)info.me_last_pgno + 1) * stat_.ms_psize;
    if ((unsigned long long)file.st_size < needed) {
        fail(failure, FS_EDAMAGED, "damaged index: data.mdb is truncated (%lld bytes, its pages need %llu)",
             (long long)file.st_size, needed);
        return 1;
    }
    return 0;
}

int store_open(Store *s, const char *path, Failure *failure) {
    memset(s, 0, sizeof(*s));
    s->bos = -1;
    int rc = mdb_env_create(&s->env);
    if (rc)
        return lmdb_failed(failure, rc, "cannot create an LMDB environment");
    mdb_env_set_maxdbs(s->env, 64);
    /* Read-only, no lock file (nothing writes a published index), read transactions
     * not tied to threads (each Reader has one, used by one thread at a time).  The OS
     * reads ahead around the pages a search touches first: on a cold cache 600 held-out
     * lines on kn4-64k took 6.8 s with read-ahead against 10.2 s without. */
    rc = mdb_env_open(s->env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0444);
    if (!rc && truncated(s->env, failure)) {
        mdb_env_close(s->env);
        s->env = NULL;
        return -1;
    }
    if (!rc)
        rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn);
    if (rc) {
        mdb_env_close(s->env);
        s->env = NULL;
        return lmdb_failed(failure, rc, "data.mdb cannot be read as LMDB (truncated or overwritten?)");
    }
    return 0;
}

int store_dbi(Store *s, const char *name, MDB_dbi *dbi, Failure *failure) {
    int rc = mdb_dbi_open(s->txn, name, 0, dbi);
    if (rc == MDB_NOTFOUND) {
        fail(failure, FS_EDAMAGED, "database %s is missing", name);
        return -1;
    }
    return rc ? lmdb_failed(failure, rc, name) : 0;
}

/* store_get through ``txn`` (the store's, or a reader's). */
static int txn_get(MDB_txn *txn, MDB_dbi dbi, const void *key, size_t key_len, MDB_val *value, Failure *failure) {
    MDB_val k = {key_len, (void *)key};
    int rc = key_len ? mdb_get(txn, dbi, &k, value) : MDB_NOTFOUND;  /* LMDB refuses empty keys */
    if (rc == MDB_NOTFOUND)
        return 0;
    return rc ? lmdb_failed(failure, rc, "damaged index") : 1;
}

int store_get(Store *s, MDB_dbi dbi, const void *key, size_t key_len, MDB_val *value, Failure *failure) {
    return txn_get(s->txn, dbi, key, key_len, value, failure);
}

/* The array ``name`` of ``items`` items of ``size`` bytes (items 0: any length, put in *items). */
static const void *array(Store *s, const char *name, size_t size, size_t *items, Failure *failure) {
    MDB_val value;
    int found = store_get(s, s->arrays, name, strlen(name), &value, failure);
    if (found < 0)
        return NULL;
    if (!found || (*items ? value.mv_size != size * *items : value.mv_size % size)) {
        fail(failure, FS_EDAMAGED, "array %s is missing or truncated", name);
        return NULL;
    }
    *items = value.mv_size / size;
    return value.mv_data;
}

/* ---------------------------------------------------------------- rank maps shared by readers */

/* Sets of MAP_WAYS slots of a MapTable: room for the maps of 16,384 patterns (kn4-64k's
 * held-out text uses ~1,600 big patterns per 300 lines; each reader's budget keeps far
 * fewer than this).  A map that finds no slot serves its reader alone. */
#define MAP_SETS 2048
#define MAP_WAYS 8

struct SharedMap {
    const ix_u32 *value;        /* the record of the pattern it maps */
    Block *map;
    Super *supers;              /* its directory (same allocation), or NULL: flat */
    size_t bytes;
    int refs;                   /* the readers keeping it */
};

struct MapTable {
    pthread_mutex_t lock;
    SharedMap *slots[MAP_SETS * MAP_WAYS];
};

static MapTable *map_table_new(void) {
    MapTable *t = calloc(1, sizeof(MapTable));
    if (t && pthread_mutex_init(&t->lock, NULL)) {
        free(t);
        t = NULL;
    }
    return t;
}

static void map_table_free(MapTable *t) {  /* every reader has released its maps */
    if (t) {
        pthread_mutex_destroy(&t->lock);
        free(t);
    }
}

static SharedMap **map_set(MapTable *t, const ix_u32 *value) {
    uint64_t h = (uint64_t)(uintptr_t)value * 0x9E3779B97F4A7C15ull;
    return &t->slots[(h >> 40) % MAP_SETS * MAP_WAYS];
}

static void map_free(SharedMap *m) {
    free(m->supers ? (void *)m->supers : (void *)m->map);
    free(m);
}

/* The map in the table of the pattern at ``value``, or NULL (the caller holds the lock). */
static SharedMap *map_find(MapTable *t, const ix_u32 *value) {
    SharedMap **set = map_set(t, value);
    for (int w = 0; w < MAP_WAYS; w++)
        if (set[w] && set[w]->value == value)
            return set[w];
    return NULL;
}

/* The map of the pattern at ``value`` if a reader keeps one (now kept by the caller too). */
static SharedMap *map_take(MapTable *t, const ix_u32 *value) {
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

int store_prepare(Store *s, int order, uint32_t vocab_size, int id_bytes, int64_t bos, double max_unigram_beta,
                  Failure *failure) {
    if (order < 1 || order > 255 || vocab_size < 1 || vocab_size >= UINT32_MAX || id_bytes < 2 || id_bytes > 4 ||
        bos >= (int64_t)vocab_size) {
        fail(failure, FS_EDAMAGED, "metadata out of range");
        return -1;
    }
    s->order = order;
    s->vocab_size = vocab_size;
    s->id_bytes = id_bytes;
    s->bos = bos < 0 ? -1 : bos;
    s->unigram_beta_sup = max_unigram_beta > 0.0 ? max_unigram_beta : 0.0;
    if (!(s->patterns = calloc((size_t)order + 1, sizeof(MDB_dbi)))) {
        fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    for (int m = 2; m <= order; m++) {
        char name[32];
        snprintf(name, sizeof(name), "patterns%d", m);
        if (store_dbi(s, name, &s->patterns[m], failure) < 0)
            return -1;
    }
    /* Database handles opened in a transaction reach other transactions (the Readers')
     * once it commits: commit, and read on in a new one. */
    int rc = mdb_txn_commit(s->txn);
    s->txn = NULL;
    if (!rc)
        rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn);
    if (rc)
        return lmdb_failed(failure, rc, "cannot begin a read transaction");
    size_t v = vocab_size, v1 = v + 1, any = 0;
    if (!(s->unigram_alpha = array(s, "unigram_alpha", 4, &v, failure)) ||
        !(s->unigram_beta = array(s, "unigram_beta", 4, &v, failure)) ||
        !(s->unigram_order = array(s, "unigram_order", 4, &v, failure)) ||
        !(s->word_offsets = array(s, "word_offsets", 8, &v1, failure)) ||
        !(s->word_bytes = array(s, "word_bytes", 1, &any, failure)))
        return -1;
    s->word_bytes_len = any;
    /* the search and the writer index memory with these: refuse what would reach outside */
    int ok = s->word_offsets[0] == 0 && s->word_offsets[v] <= any;
    for (size_t i = 0; ok && i < v; i++)
        ok = s->word_offsets[i] <= s->word_offsets[i + 1] && s->unigram_order[i] < vocab_size;
    if (!ok) {
        fail(failure, FS_EDAMAGED, "word_offsets or unigram_order out of range");
        return -1;
    }
    s->unigram = malloc(v * sizeof(UnigramScores));
    s->sorted_alpha = malloc(v * sizeof(float));
    s->maps = map_table_new();
    if (!s->unigram || !s->sorted_alpha || !s->maps) {
        fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < v; i++) {
        s->unigram[i].alpha = s->unigram_alpha[i];
        s->unigram[i].beta = s->unigram_beta[i];
        s->sorted_alpha[i] = s->unigram_alpha[s->unigram_order[i]];
    }
    return 0;
}

void store_close(Store *s) {
    if (s->txn)
        mdb_txn_abort(s->txn);
    if (s->env)
        mdb_env_close(s->env);
    free(s->patterns);
    free(s->unigram);
    free(s->sorted_alpha);
    map_table_free(s->maps);
    memset(s, 0, sizeof(*s));
}

/* ---------------------------------------------------------------- kept: rank maps, sorted prefixes */

/* What k counts against its reader's budget: a shared map counts for each reader keeping it. */
static size_t kept_size(const Kept *k) {
    return (k->map ? k->map->bytes : 0) + (size_t)k->sorted_cap * (sizeof(uint32_t) + sizeof(float));
}

static void free_kept(Reader *r, Kept *k) {
    if (k->newer) k->newer->older = k->older; else r->newest = k->older;
    if (k->older) k->older->newer = k->newer; else r->oldest = k->newer;
    r->kept_bytes -= kept_size(k);
    k->owner->kept = NULL;
    if (k->map)
        map_release(r->store->maps, k->map);
    free(k->sorted_ids);
    free(k->sorted_alpha);
    free(k);
}

/* Marks k the most recently used. */
static void touch(Reader *r, Kept *k) {
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
    for (Kept *k = r->oldest; k && r->kept_bytes + more > r->kept_budget;) {
        Kept *newer = k->newer;
        if (k->owner->used != r->search)
            free_kept(r, k);
        k = newer;
    }
    return r->kept_bytes + more <= r->kept_budget;
}

/* The Kept of rec, made when it has none; NULL when out of memory. */
static Kept *kept_of(Reader *r, Record *rec) {
    if (!rec->kept) {
        Kept *k = calloc(1, sizeof(Kept));
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

/* Bytes of the rank map of a pattern with ``count`` words ``ids`` (ascending): flat, a Block
 * per 64 words of the vocabulary, or two levels (see FLAT_MAP_RATIO), a Super per
 * SUPER_WORDS words and the Blocks that hold words of the pattern, after an empty one
 * (map[0]) that the look-up of a word in no Block reads. */
static int flat_map(const Store *s, uint32_t count) { return count >= s->vocab_size / FLAT_MAP_RATIO; }

static size_t n_supers(const Store *s) { return ((size_t)s->vocab_size + SUPER_WORDS - 1) / SUPER_WORDS; }

static size_t map_bytes(const Store *s, const ix_u32 *ids, uint32_t count) {
    if (flat_map(s, count))
        return ((size_t)s->vocab_size + 63) / 64 * sizeof(Block);
    size_t n_blocks = 1;
    for (uint32_t i = 0; i < count; i++)  /* ids ascend: count the Blocks they fall in */
        n_blocks += i == 0 || ids[i] >> 6 != ids[i - 1] >> 6;
    return n_supers(s) * sizeof(Super) + n_blocks * sizeof(Block);
}

TARGET_CLONES static void fill_flat_map(Block *map, size_t n, const ix_u32 *ids, uint32_t count) {
    for (uint32_t i = 0; i < count; i++)
        map[ids[i] >> 6].bits |= 1ull << (ids[i] & 63);
    uint32_t rank = 0;
    for (size_t b = 0; b < n; b++) {
        map[b].rank = rank;
        rank += popcount64(map[b].bits);
    }
}

static void fill_two_level_map(Super *supers, Block *map, const ix_u32 *ids, uint32_t count) {
    size_t b = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t word = ids[i];
        if (i == 0 || word >> 6 != ids[i - 1] >> 6) {
            Super *super = &supers[word / SUPER_WORDS];
            map[++b].rank = i;
            if (!super->present)
                super->first = (uint32_t)b;
            super->present |= 1ull << (word >> 6 & 63);
        }
        map[b].bits |= 1ull << (word & 63);
    }
}

/* A new map (refs 1) of rec's pattern, ``bytes`` (map_bytes) long; NULL when out of memory. */
static SharedMap *build_map(const Store *s, const Record *rec, size_t bytes) {
    SharedMap *m = calloc(1, sizeof(SharedMap));
    void *memory = m ? calloc(bytes, 1) : NULL;
    if (!memory) {
        free(m);
        return NULL;
    }
    const ix_u32 *ids = record_ids(rec);
    m->value = rec->value;
    m->bytes = bytes;
    m->refs = 1;
    if (flat_map(s, rec->count)) {
        m->map = memory;
        fill_flat_map(m->map, bytes / sizeof(Block), ids, rec->count);
    } else {
        m->supers = memory;
        m->map = (Block *)(m->supers + n_supers(s));
        fill_two_level_map(m->supers, m->map, ids, rec->count);
    }
    return m;
}

const Block *record_rank_map(Reader *r, Record *rec, const Super **supers) {
    Kept *k = kept_of(r, rec);
    if (!k)
        return NULL;
    if (!k->map) {
        MapTable *maps = r->store->maps;
        SharedMap *m = map_take(maps, rec->value);
        size_t bytes = m ? m->bytes : map_bytes(r->store, record_ids(rec), rec->count);
        if (!make_room(r, bytes)) {
            if (m)
                map_release(maps, m);
            return NULL;
        }
        if (!m) {
            if (!(m = build_map(r->store, rec, bytes)))
                return NULL;
            m = map_publish(maps, m);
        }
        k->map = m;
        r->kept_bytes += bytes;
    }
    *supers = k->map->supers;
    return k->map->map;
}

Kept *record_sorted_prefix(Reader *r, Record *rec, uint32_t need) {
    Kept *k = kept_of(r, rec);
    if (!k)
        return NULL;
    if (need > k->sorted_cap) {
        uint32_t cap = 2 * k->sorted_cap > need ? 2 * k->sorted_cap : need;
        cap = cap < 64 ? 64 : cap > rec->count ? rec->count : cap;
        size_t more = (size_t)(cap - k->sorted_cap) * (sizeof(uint32_t) + sizeof(float));
        if (!make_room(r, more))
            return NULL;
        uint32_t *ids = realloc(k->sorted_ids, (size_t)cap * sizeof(uint32_t));
        if (ids)
            k->sorted_ids = ids;
        float *alpha = ids ? realloc(k->sorted_alpha, (size_t)cap * sizeof(float)) : NULL;
        if (!alpha)
            return NULL;  /* what it had stays usable */
        k->sorted_alpha = alpha;
        r->kept_bytes += more;
        k->sorted_cap = cap;
    }
    const ix_u32 *by_score = record_by_score(rec), *ids = record_ids(rec);
    const ix_f32 *alpha = record_alpha(rec);
    for (uint32_t i = k->sorted_len; i < need; i++) {
        uint32_t at = by_score[i];
        k->sorted_ids[i] = ids[at];
        k->sorted_alpha[i] = alpha[at];
    }
    if (need > k->sorted_len)
        k->sorted_len = need;
    return k;
}

/* ---------------------------------------------------------------- readers */

int reader_init(Reader *r, const Store *s, size_t records, size_t kept_budget) {
    memset(r, 0, sizeof(*r));
    r->store = s;
    r->kept_budget = kept_budget;
    size_t sets = 1;
    while (sets * RECORD_WAYS < records)
        sets *= 2;
    r->n_sets = sets;
    if (!(r->slots = calloc(sets * RECORD_WAYS, sizeof(Record)))) {
        fail(&r->failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    if (pthread_mutex_init(&r->slots_lock, NULL)) {
        free(r->slots);
        r->slots = NULL;
        fail(&r->failure, FS_ENOMEM, "cannot make a lock");
        return -1;
    }
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &r->txn);
    if (rc) {
        pthread_mutex_destroy(&r->slots_lock);
        free(r->slots);
        r->slots = NULL;
        return lmdb_failed(&r->failure, rc, "cannot begin a read transaction");
    }
    return 0;
}

void reader_seed(Reader *r, Reader *from) {
    if (r->store != from->store || r->n_sets != from->n_sets)
        return;  /* sized apart (set_cache_records between them): the sets differ */
    pthread_mutex_lock(&from->slots_lock);
    for (size_t i = 0; i < r->n_sets * RECORD_WAYS; i++) {
        const Record *have = &from->slots[i];
        Record *copy = &r->slots[i];
        if (!have->hash)
            continue;
        copy->hash = have->hash;
        copy->value = have->value;
        copy->count = have->count;
        copy->beta_sup = have->beta_sup;
        copy->key_len = have->key_len;
        copy->has_beta = have->has_beta;
        memcpy(copy->key, have->key, have->key_len);
    }
    pthread_mutex_unlock(&from->slots_lock);
}

void reader_end_search(Reader *r) {
    for (int i = 0; i < r->n_spilled; i++) {
        if (r->spilled[i]->kept)
            free_kept(r, r->spilled[i]->kept);
        free(r->spilled[i]);
    }
    r->n_spilled = 0;
}

void reader_free(Reader *r) {
    reader_end_search(r);
    while (r->oldest)
        free_kept(r, r->oldest);
    if (r->txn)
        mdb_txn_abort(r->txn);
    if (r->slots)
        pthread_mutex_destroy(&r->slots_lock);
    free(r->slots);
    free(r->spilled);
    memset(r, 0, sizeof(*r));
}

void reader_begin_search(Reader *r) {
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

/* Reads the record of ``key`` into rec (checking it); 0, or -1 with r->failure set. */
static int read_record(Reader *r, Record *rec, int order, const uint8_t *key, size_t key_len) {
    const Store *s = r->store;
    MDB_val k = {key_len, (void *)key}, v;
    int rc = mdb_get(r->txn, s->patterns[order], &k, &v);
    rec->value = NULL;
    rec->kept = NULL;
    rec->count = 0;
    rec->beta_sup = 0.0f;
    rec->has_beta = order < s->order;
    if (rc == MDB_NOTFOUND)
        return 0;
    char hex[2 * 64 + 1];  /* the key, for messages */
    for (size_t i = 0; i < key_len && i < 64; i++) {
        hex[2 * i] = "0123456789abcdef"[key[i] >> 4];
        hex[2 * i + 1] = "0123456789abcdef"[key[i] & 15];
    }
    hex[2 * (key_len < 64 ? key_len : 64)] = 0;
    if (rc) {
        fail(&r->failure, FS_ELMDB, "damaged index (%s)", mdb_strerror(rc));
        return -1;
    }
    const ix_u32 *value = v.mv_data;
    uint32_t count = v.mv_size % 4 ? 0 : pattern_count(v.mv_size / 4, rec->has_beta);
    if (!count) {
        fail(&r->failure, FS_EDAMAGED, "damaged index: a pattern value of %zu bytes fits no layout", v.mv_size);
        return -1;
    }
    if (record_checksum(key, key_len, value + 1, v.mv_size / 4 - 1) != value[0]) {
        fail(&r->failure, FS_EDAMAGED, "damaged index: pattern %s fails its checksum (bytes flipped?)", hex);
        return -1;
    }
    rec->value = value;
    rec->count = count;
    if (rec->has_beta) {
        float max_beta = ((const ix_f32 *)value)[1];
        rec->beta_sup = max_beta > 0.0f ? max_beta : 0.0f;
    }
    /* the search indexes memory with these: refuse what would reach outside it */
    const ix_u32 *ids = record_ids(rec), *by_score = record_by_score(rec);
    int ok = 1;
    for (uint32_t i = 0; i < count && ok; i++)
        ok = ids[i] < s->vocab_size && by_score[i] < count;
    if (!ok) {
        rec->value = NULL;
        fail(&r->failure, FS_EDAMAGED,
             "damaged index: pattern %s: word id outside the vocabulary or position outside the pattern", hex);
        return -1;
    }
    return 0;
}

int reader_word_id(Reader *r, const char *word, size_t length, uint32_t *id) {
    const Store *s = r->store;
    MDB_val value;
    int found = txn_get(r->txn, s->vocab, word, length, &value, &r->failure);
    if (found <= 0)
        return found;
    *id = value.mv_size == 4 ? *(const ix_u32 *)value.mv_data : UINT32_MAX;
    size_t spelled = 0;
    const char *spelling = *id < s->vocab_size ? store_word(s, *id, &spelled) : NULL;
    if (!spelling || spelled != length || memcmp(spelling, word, length)) {
        fail(&r->failure, FS_EDAMAGED, "damaged index (a vocabulary entry is invalid)");
        return -1;
    }
    return 1;
}

Record *reader_pattern(Reader *r, int slot, const uint32_t *ids, int n) {
    const Store *s = r->store;
    int order = n + 1;
    if (order < 2 || order > s->order)
        return NULL;
    uint8_t key[1 + 4 * 255];
    size_t key_len = 1 + (size_t)n * (size_t)s->id_bytes;
    key[0] = (uint8_t)slot;
    uint8_t *out = key + 1;
    for (int i = 0; i < n; i++) {
        if (ids[i] >= s->vocab_size)  /* NO_WORD: an unknown word matches no n-gram */
            return NULL;
        for (int b = s->id_bytes - 1; b >= 0; b--)
            *out++ = (uint8_t)(ids[i] >> (8 * b));
    }
    r->lookups++;
    uint64_t hash = hash_key(key, key_len);
    Record *rec = NULL;
    if (key_len <= RECORD_KEY_MAX) {
        Record *set = &r->slots[(hash & (r->n_sets - 1)) * RECORD_WAYS];
        for (int w = 0; w < RECORD_WAYS; w++) {
            Record *slot_rec = &set[w];
            if (slot_rec->hash == hash && slot_rec->key_len == key_len && !memcmp(slot_rec->key, key, key_len)) {
                slot_rec->used = r->search;
                return slot_rec->value ? slot_rec : NULL;
            }
            /* the victim: an empty slot, else the least recently used one this search does not use */
            if (!slot_rec->hash) {
                if (!rec || rec->hash)
                    rec = slot_rec;
            } else if (slot_rec->used != r->search && (!rec || (rec->hash && slot_rec->used < rec->used))) {
                rec = slot_rec;
            }
        }
        if (rec && rec->kept)
            free_kept(r, rec->kept);
    }
    r->misses++;
    if (!rec) {  /* no slot: the record serves this search only */
        if (r->n_spilled == r->cap_spilled) {
            int cap = 2 * r->cap_spilled + 8;
            Record **grown = realloc(r->spilled, (size_t)cap * sizeof(Record *));
            if (!grown) {
                fail(&r->failure, FS_ENOMEM, "out of memory");
                return NULL;
            }
            r->spilled = grown;
            r->cap_spilled = cap;
        }
        if (!(rec = calloc(1, sizeof(Record)))) {
            fail(&r->failure, FS_ENOMEM, "out of memory");
            return NULL;
        }
        r->spilled[r->n_spilled++] = rec;
        if (read_record(r, rec, order, key, key_len) < 0)
            return NULL;
        rec->hash = hash;
        rec->used = r->search;
        return rec->value ? rec : NULL;
    }
    pthread_mutex_lock(&r->slots_lock);
    rec->hash = 0;
    int rc = read_record(r, rec, order, key, key_len);
    if (rc == 0) {  /* else the slot stays empty */
        rec->hash = hash;
        rec->key_len = (uint8_t)key_len;
        memcpy(rec->key, key, key_len);
    }
    pthread_mutex_unlock(&r->slots_lock);
    if (rc < 0)
        return NULL;
    rec->used = r->search;
    return rec->value ? rec : NULL;
}
