/* The engine of one open index: the Store (store.h) and the Searchers that search it, one per thread
 * searching at the same time, with its lifecycle.  Plain C: the Python glue (module.c)
 * only converts, and tests/c/kernel_check.c drives this with threads under the sanitizers.
 *
 * A search takes an idle Searcher (or makes one, starting from a copy of the first one's
 * cache), runs, and gives it back; any number of threads may search one index at once,
 * each on its own Searcher, with a lock only around taking and giving back.  engine_close
 * refuses new work at once; the map itself is released when the last use that holds it
 * ends, so nothing ever reads an unmapped page. */
#ifndef FASTSUBS_ENGINE_H
#define FASTSUBS_ENGINE_H

#include <pthread.h>

#include "search.h"

/* Cache slots of a Searcher (64 bytes each): 2^17 slots, 8 MiB.  A search meets a few tens
 * of patterns (present or not), about 5 of them new in a first pass over corpus text, so
 * the slots hold the patterns of some thousands of lines; most look-ups that miss them
 * are of patterns never met before, which no number of slots saves (measured:
 * docs/performance.md, "Tuning"). */
#define ENGINE_RECORD_SLOTS ((size_t)1 << 17)
/* Bytes of rank maps and sorted prefixes a Searcher keeps (cache.h, SlotAids). */
#define ENGINE_KEPT_BYTES ((size_t)24 << 20)

typedef struct {
    Store store;
    MapTable *maps;             /* the rank maps the Searchers share */
    pthread_mutex_t lock;       /* guards what follows */
    Searcher **idle, **all;
    int n_idle, n_all, cap;     /* both lists have room for ``cap`` */
    int uses;                   /* searches and other reads of the map running */
    int closed, released;
    size_t record_slots, kept_bytes;  /* the cache of each Searcher from its next search */
} Engine;

/* Opens and checks the index at ``path`` (store_open): 0, or -1 with the failure set. */
int engine_open(Engine *ix, const char *path, Failure *failure);
/* A Searcher for one search, the index held until it is given back: NULL with the
 * failure set (FS_ECLOSED once closed, FS_ENOMEM, or what a new Searcher met). */
Searcher *engine_take(Engine *ix, Failure *failure);
/* Gives ``searcher`` back and adds the work it did since it was taken to the calling thread's. */
void engine_give_back(Engine *ix, Searcher *searcher);
/* Holds the index for a read that needs no Searcher (words, checks): 0, or -1 (FS_ECLOSED). */
int engine_hold(Engine *ix, Failure *failure);
void engine_release(Engine *ix);
/* No new work from now on; the map goes once no use holds it. */
void engine_close(Engine *ix);
/* Frees everything; the owner is done with the index (no use may be running). */
void engine_free(Engine *ix);
/* Totals over every Searcher: searches, words evaluated, list entries read, substitutes
 * listed, pattern look-ups, look-ups that read the index. */
void engine_counters(Engine *ix, unsigned long long totals[6]);
/* cache_reader_pair_census over every searcher: only while none searches. */
void engine_pair_census(Engine *ix, unsigned long long census[4]);
/* The cache sizes of Searchers (records: made from now on; kept bytes: from their next
 * search); any sizes give the same answers. */
void engine_set_cache(Engine *ix, size_t records, size_t kept_bytes);
/* For the tools (verify, the tests, the bench), not the search, which keeps its own cursors:
 * the pattern of order n + 1 whose fixed words are ``ids`` (slot before ids[slot]), through a
 * read transaction of its own: 1 found (*out, valid while the caller holds the index), 0
 * absent, -1 with the failure set. */
int engine_find_pattern(Engine *ix, int slot, const uint32_t *ids, int n, DiskPattern *out, Failure *failure);
/* The scores of the n-gram ids[0 .. n): 1 found, 0 absent, -1 with the failure set. */
int engine_ngram(Engine *ix, const uint32_t *ids, int n, double *alpha, double *beta, Failure *failure);
/* verify_patterns and verify_arrays, the index held meanwhile: 0, or -1. */
int engine_check_patterns(Engine *ix, int order, PatternCounts *counts, Failure *failure);
int engine_check_arrays(Engine *ix, Failure *failure);
/* The work of the searches the calling thread has made, on any index: searches, words
 * evaluated, list entries read, substitutes listed.  engine_counters sums every Searcher, and
 * a Searcher serves whichever thread is free, so a difference of those over one thread's
 * stretch of work would count what other threads searched meanwhile; a difference of
 * these counts that thread's work alone. */
void engine_thread_work(unsigned long long work[4]);

#endif
