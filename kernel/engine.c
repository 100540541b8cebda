/* The engine of an open index, its Searchers and its lifecycle: see engine.h. */
#include "engine.h"

#include <string.h>

static _Thread_local unsigned long long thread_work[4];

static void work_of(const Searcher *searcher, unsigned long long work[4]) {
    work[0] = searcher->n_searches;
    work[1] = searcher->n_evaluated;
    work[2] = searcher->n_reads;
    work[3] = searcher->n_listed_total;
}

void engine_thread_work(unsigned long long work[4]) {
    memcpy(work, thread_work, sizeof(thread_work));
}

int engine_open(Engine *ix, const char *path, Failure *failure) {
    memset(ix, 0, sizeof(*ix));
    ix->record_slots = ENGINE_RECORD_SLOTS;
    ix->kept_bytes = ENGINE_KEPT_BYTES;
    if (pthread_mutex_init(&ix->lock, NULL)) {
        common_fail(failure, FS_ENOMEM, "cannot make a lock");
        return -1;
    }
    if (store_open(&ix->store, path, failure) < 0) {
        pthread_mutex_destroy(&ix->lock);
        return -1;
    }
    if (!(ix->maps = cache_map_table_new())) {
        store_close(&ix->store);
        pthread_mutex_destroy(&ix->lock);
        common_fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    return 0;
}

/* Frees the Searchers and the map (with the lock held): once closed and no use holds it. */
static void release_if_done(Engine *ix) {
    if (!ix->closed || ix->released || ix->uses)
        return;
    ix->released = 1;
    for (int i = 0; i < ix->n_all; i++) {
        search_searcher_free(ix->all[i]);
        free(ix->all[i]);
    }
    ix->n_all = ix->n_idle = 0;
    cache_map_table_free(ix->maps);
    ix->maps = NULL;
    store_close(&ix->store);
}

static int closed(Engine *ix, Failure *failure) {
    if (!ix->closed)
        return 0;
    common_fail(failure, FS_ECLOSED, "the index is closed");
    return -1;
}

/* A new Searcher, started from the records the first one has met (a copy of its slots,
 * some milliseconds once per thread): a thread's first searches then find the patterns
 * other threads have read already checked, instead of looking each up and checking it
 * again (docs/performance.md, "Tuning"). */
static Searcher *new_searcher(Engine *ix, Failure *failure) {
    if (ix->n_all == ix->cap) {
        int cap = 2 * ix->cap + 4;
        Searcher **all = realloc(ix->all, (size_t)cap * sizeof(Searcher *));
        if (all)
            ix->all = all;
        Searcher **idle = all ? realloc(ix->idle, (size_t)cap * sizeof(Searcher *)) : NULL;
        if (!idle) {
            common_fail(failure, FS_ENOMEM, "out of memory");
            return NULL;
        }
        ix->idle = idle;
        ix->cap = cap;
    }
    Searcher *searcher = malloc(sizeof(Searcher));
    if (!searcher) {
        common_fail(failure, FS_ENOMEM, "out of memory");
        return NULL;
    }
    if (search_searcher_init(searcher, &ix->store, ix->maps, ix->record_slots, ix->kept_bytes) < 0) {
        *failure = searcher->reader.failure;
        search_searcher_free(searcher);
        free(searcher);
        return NULL;
    }
    if (ix->n_all)  /* the first Searcher has usually met the most */
        cache_reader_seed(&searcher->reader, &ix->all[0]->reader);
    ix->all[ix->n_all++] = searcher;
    return searcher;
}

Searcher *engine_take(Engine *ix, Failure *failure) {
    pthread_mutex_lock(&ix->lock);
    Searcher *searcher = NULL;
    if (closed(ix, failure) == 0)
        searcher = ix->n_idle ? ix->idle[--ix->n_idle] : new_searcher(ix, failure);
    if (searcher) {
        searcher->reader.kept_budget = ix->kept_bytes;
        ix->uses++;
    }
    pthread_mutex_unlock(&ix->lock);
    if (searcher)
        work_of(searcher, searcher->taken);
    return searcher;
}

void engine_give_back(Engine *ix, Searcher *searcher) {
    unsigned long long now[4];
    work_of(searcher, now);
    for (int i = 0; i < 4; i++)
        thread_work[i] += now[i] - searcher->taken[i];
    pthread_mutex_lock(&ix->lock);
    ix->idle[ix->n_idle++] = searcher;
    ix->uses--;
    release_if_done(ix);
    pthread_mutex_unlock(&ix->lock);
}

int engine_hold(Engine *ix, Failure *failure) {
    pthread_mutex_lock(&ix->lock);
    int rc = closed(ix, failure);
    if (rc == 0)
        ix->uses++;
    pthread_mutex_unlock(&ix->lock);
    return rc;
}

void engine_release(Engine *ix) {
    pthread_mutex_lock(&ix->lock);
    ix->uses--;
    release_if_done(ix);
    pthread_mutex_unlock(&ix->lock);
}

void engine_close(Engine *ix) {
    pthread_mutex_lock(&ix->lock);
    ix->closed = 1;
    release_if_done(ix);
    pthread_mutex_unlock(&ix->lock);
}

void engine_free(Engine *ix) {
    engine_close(ix);
    free(ix->idle);
    free(ix->all);
    pthread_mutex_destroy(&ix->lock);
    memset(ix, 0, sizeof(*ix));
}

void engine_counters(Engine *ix, unsigned long long totals[6]) {
    memset(totals, 0, 6 * sizeof(unsigned long long));
    pthread_mutex_lock(&ix->lock);
    for (int i = 0; i < ix->n_all; i++) {
        const Searcher *searcher = ix->all[i];
        unsigned long long work[4];
        work_of(searcher, work);
        for (int j = 0; j < 4; j++)
            totals[j] += work[j];
        totals[4] += searcher->reader.lookups;
        totals[5] += searcher->reader.misses;
    }
    pthread_mutex_unlock(&ix->lock);
}

void engine_pair_census(Engine *ix, unsigned long long census[4]) {
    memset(census, 0, 4 * sizeof(unsigned long long));
    pthread_mutex_lock(&ix->lock);
    for (int i = 0; i < ix->n_all; i++)
        cache_reader_pair_census(&ix->all[i]->reader, census);
    pthread_mutex_unlock(&ix->lock);
}

void engine_set_cache(Engine *ix, size_t records, size_t kept_bytes) {
    pthread_mutex_lock(&ix->lock);
    ix->record_slots = records < SLOT_WAYS ? SLOT_WAYS : records;
    ix->kept_bytes = kept_bytes;
    pthread_mutex_unlock(&ix->lock);
}

int engine_find_pattern(Engine *ix, int slot, const uint32_t *ids, int n, DiskPattern *out, Failure *failure) {
    const Store *s = &ix->store;
    uint8_t key[1 + 4 * FS_MAX_ORDER];
    size_t key_len = n >= 1 && n + 1 <= s->order ? records_pattern_key(s, slot, ids, n, key) : 0;
    if (!key_len)
        return 0;
    MDB_txn *txn;
    MDB_cursor *cursor;
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
    if (rc) {
        common_fail(failure, FS_ELMDB, "damaged index (%s)", mdb_strerror(rc));
        return -1;
    }
    int found = -1;
    if ((rc = mdb_cursor_open(txn, s->patterns[n + 1], &cursor)) == 0) {
        found = records_find_pattern(s, cursor, NULL, n + 1, key, key_len, out, failure);
        mdb_cursor_close(cursor);
    } else {
        store_read_failed(failure, txn, rc, "patterns%d", n + 1);
    }
    mdb_txn_abort(txn);
    return found;
}

int engine_ngram(Engine *ix, const uint32_t *ids, int n, double *alpha, double *beta, Failure *failure) {
    const Store *s = &ix->store;
    for (int i = 0; i < n; i++)
        if (ids[i] >= s->vocab_size)
            return 0;
    if (engine_hold(ix, failure) < 0)
        return -1;
    int found = 1;
    if (n == 1) {
        *alpha = s->unigram_alpha[ids[0]];
        *beta = s->unigram_beta[ids[0]];
    } else {
        DiskPattern p;
        found = engine_find_pattern(ix, n - 1, ids, n - 1, &p, failure);
        int32_t at = found > 0 ? pattern_find(s, &p, ids[n - 1]) : -1;
        if (found > 0 && at < 0)
            found = 0;
        if (found > 0) {
            *alpha = p.alpha[at];
            *beta = p.beta_table ? (double)pattern_beta(&p, (uint32_t)at) : 0.0;
        }
    }
    engine_release(ix);
    return found;
}

int engine_check_patterns(Engine *ix, int order, PatternCounts *counts, Failure *failure) {
    if (order < 2 || order > ix->store.order) {
        common_fail(failure, FS_EARGUMENT, "order outside 2 ... the model's order");
        return -1;
    }
    if (engine_hold(ix, failure) < 0)
        return -1;
    MDB_txn *txn;
    int rc = mdb_txn_begin(ix->store.env, NULL, MDB_RDONLY, &txn);
    if (rc) {
        common_fail(failure, FS_ELMDB, "damaged index (%s)", mdb_strerror(rc));
    } else {
        rc = verify_patterns(&ix->store, txn, order, counts, failure);
        mdb_txn_abort(txn);
    }
    engine_release(ix);
    return rc ? -1 : 0;
}

int engine_check_arrays(Engine *ix, Failure *failure) {
    if (engine_hold(ix, failure) < 0)
        return -1;
    int rc = verify_arrays(&ix->store, failure);
    engine_release(ix);
    return rc;
}
