/* kernel_check: the query kernel's plain-C parts driven without Python, so that they can
 * be built and run under AddressSanitizer/UndefinedBehaviorSanitizer
 * (tests/test_kernel_sanitizers.py compiles and runs it).
 *
 *   kernel_check INDEX ORDER VOCAB_SIZE ID_BYTES BOS_ID MAX_UNIGRAM_BETA RECORD_SLOTS KEPT_BYTES
 *
 * The shape (ORDER ... MAX_UNIGRAM_BETA) is the index's metadata, which is msgpack: the
 * caller decodes it (BOS_ID -1: no <s>).  RECORD_SLOTS and KEPT_BYTES size each of the
 * two Searchers, as the Python glue sizes one per thread: the first serves the odd lines,
 * the second, made at line 2 from a copy of the first's records (reader_seed, as a new
 * thread's is), the even ones.
 *
 * Each line of standard input is a query:
 *
 *   COUNT [-p MASS] [-x ID]... ID ID ...
 *
 * the limits (count, and the -p rule's mass), the excluded words (-x, ids below V, as
 * Engine.excluded gives them) and the ids of a whole sentence, <s> and </s> included
 * (as Engine.sentence_ids gives them).  For every position 1 ... n - 1 it writes two lines:
 *
 *   S TARGET N ID SCORE ID SCORE ...      (scores as "%.17g": they read back exactly)
 *   F TARGET FIELDS                       (write_fields' text, as it wrote it)
 *
 * and after the last query one line
 *
 *   done SEARCHES LOOKUPS MISSES KEPT_PEAK
 *
 * (the readers' pattern look-ups and look-ups that read the index, summed, and the most
 * bytes of rank maps and sorted prefixes a reader kept after any search).  On a failure
 * (the store refuses the index, a search meets a damaged record, a line is malformed) it
 * writes "kernel_check: MESSAGE" to standard error, frees what it made and exits with 1. */
#define _POSIX_C_SOURCE 200809L  /* getline */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "search.h"
#include "store.h"

static int failed(const char *message) {
    fprintf(stderr, "kernel_check: %s\n", message);
    return 1;
}

/* A whole number from ``text``: 0, or -1 when it is not one in [low, high]. */
static int parse_integer(const char *text, long long low, long long high, long long *value) {
    char *end;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (errno || end == text || *end || parsed < low || parsed > high)
        return -1;
    *value = parsed;
    return 0;
}

static int parse_real(const char *text, double *value) {
    char *end;
    errno = 0;
    *value = strtod(text, &end);
    return errno || end == text || *end ? -1 : 0;
}

/* Appends ``value`` to the growing array ``*items``: 0, or -1 when out of memory. */
static int append_id(uint32_t **items, int *n, int *cap, uint32_t value) {
    if (*n == *cap) {
        int grown_cap = 2 * *cap + 16;
        uint32_t *grown = realloc(*items, (size_t)grown_cap * sizeof(uint32_t));
        if (!grown)
            return -1;
        *items = grown;
        *cap = grown_cap;
    }
    (*items)[(*n)++] = value;
    return 0;
}

/* A query's limits, its excluded words and its sentence. */
typedef struct {
    int64_t count;
    int use_mass;
    double mass;
    uint32_t *ids, *excluded;
    int n, n_excluded, cap_ids, cap_excluded;
} Query;

/* One query line (COUNT [-p MASS] [-x ID]... ID ID ...) into q: 0, or -1 (malformed). */
static int parse_query(char *line, Query *q) {
    static const char *blanks = " \t\r\n";
    long long number;
    char *token = strtok(line, blanks);
    q->n = q->n_excluded = q->use_mass = 0;
    if (!token || parse_integer(token, 0, INT64_MAX, &number) < 0)
        return -1;
    q->count = number;
    while ((token = strtok(NULL, blanks))) {
        int option = q->n == 0 && (!strcmp(token, "-p") || !strcmp(token, "-x"));
        if (option && token[1] == 'p') {
            if (!(token = strtok(NULL, blanks)) || parse_real(token, &q->mass) < 0)
                return -1;
            q->use_mass = 1;
        } else if (option) {
            if (!(token = strtok(NULL, blanks)) || parse_integer(token, 0, UINT32_MAX, &number) < 0 ||
                append_id(&q->excluded, &q->n_excluded, &q->cap_excluded, (uint32_t)number) < 0)
                return -1;
        } else if (parse_integer(token, 0, UINT32_MAX, &number) < 0 ||
                   append_id(&q->ids, &q->n, &q->cap_ids, (uint32_t)number) < 0) {
            return -1;
        }
    }
    return q->n >= 2 ? 0 : -1;
}

/* Writes the answer of position ``target`` (its S and F lines): 0, or -1 with ``message`` set. */
static int write_answer(const Store *store, const Searcher *k, int target, char *message, size_t room) {
    int64_t n = k->n_listed;
    uint32_t *ids = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
    double *scores = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!ids || !scores) {
        free(ids);
        free(scores);
        snprintf(message, room, "out of memory");
        return -1;
    }
    printf("S %d %" PRId64, target, n);
    for (int64_t i = 0; i < n; i++) {
        ids[i] = k->listed[i].word;
        scores[i] = k->listed[i].score;
        printf(" %" PRIu32 " %.17g", ids[i], scores[i]);
    }
    putchar('\n');
    int64_t size = fields_size(store, ids, scores, n);
    char *text = size < 0 ? NULL : malloc((size_t)size);  /* exactly what it asks: ASan sees past it */
    int rc = 0;
    if (size < 0) {
        snprintf(message, room, "a listed word id is outside the vocabulary");
        rc = -1;
    } else if (!text) {
        snprintf(message, room, "out of memory");
        rc = -1;
    } else {
        char *end = write_fields(store, ids, scores, n, text);
        if (end < text || end - text > size) {
            snprintf(message, room, "write_fields wrote %td bytes, fields_size allowed %" PRId64, end - text, size);
            rc = -1;
        } else {
            printf("F %d ", target);
            fwrite(text, 1, (size_t)(end - text), stdout);
            putchar('\n');
        }
    }
    free(text);
    free(ids);
    free(scores);
    return rc;
}

/* Adds a Searcher to searchers[*n], seeded from the first when there is one: 0, or -1
 * with *failure set. */
static int make_searcher(const Store *store, Searcher **searchers, int *n, size_t slots, size_t kept,
                         Failure *failure) {
    Searcher *k = malloc(sizeof(Searcher));
    if (!k) {
        snprintf(failure->message, sizeof(failure->message), "out of memory");
        return -1;
    }
    if (searcher_init(k, store, slots, kept) < 0) {
        *failure = k->reader.failure;
        searcher_free(k);
        free(k);
        return -1;
    }
    if (*n)
        reader_seed(&k->reader, &searchers[0]->reader);
    searchers[(*n)++] = k;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 9)
        return failed("usage: kernel_check INDEX ORDER VOCAB_SIZE ID_BYTES BOS_ID MAX_UNIGRAM_BETA RECORD_SLOTS "
                      "KEPT_BYTES");
    long long order, vocab_size, id_bytes, bos, slots, kept;
    double max_unigram_beta;
    if (parse_integer(argv[2], 1, 255, &order) < 0 || parse_integer(argv[3], 1, UINT32_MAX - 1, &vocab_size) < 0 ||
        parse_integer(argv[4], 2, 4, &id_bytes) < 0 || parse_integer(argv[5], -1, UINT32_MAX, &bos) < 0 ||
        parse_real(argv[6], &max_unigram_beta) < 0 || parse_integer(argv[7], 1, 1LL << 30, &slots) < 0 ||
        parse_integer(argv[8], 0, INT64_MAX, &kept) < 0)
        return failed("an argument is not a number in its range");

    Store store;
    Failure failure = {0};
    if (store_open(&store, argv[1], &failure) < 0)
        return failed(failure.message);
    if (store_dbi(&store, "vocab", &store.vocab, &failure) < 0 || store_dbi(&store, "arrays", &store.arrays, &failure) < 0 ||
        store_prepare(&store, (int)order, (uint32_t)vocab_size, (int)id_bytes, bos, max_unigram_beta, &failure) < 0) {
        store_close(&store);
        return failed(failure.message);
    }
    Searcher *searchers[2] = {NULL, NULL};
    int n_searchers = 0;
    if (make_searcher(&store, searchers, &n_searchers, (size_t)slots, (size_t)kept, &failure) < 0) {
        store_close(&store);
        return failed(failure.message);
    }

    char *line = NULL, message[sizeof(failure.message) + 64] = "";
    size_t line_cap = 0;
    Query query = {0};
    size_t kept_peak = 0;
    int rc = 0;
    for (long line_number = 1; rc == 0 && getline(&line, &line_cap, stdin) >= 0; line_number++) {
        if (line_number == 2 &&
            make_searcher(&store, searchers, &n_searchers, (size_t)slots, (size_t)kept, &failure) < 0) {
            snprintf(message, sizeof(message), "%s", failure.message);
            rc = 1;
            break;
        }
        Searcher *searcher = searchers[(line_number - 1) % n_searchers];
        if (parse_query(line, &query) < 0) {
            snprintf(message, sizeof(message),
                     "line %ld: expected COUNT [-p MASS] [-x ID]... and two or more word ids", line_number);
            rc = 1;
            break;
        }
        for (int target = 1; rc == 0 && target < query.n; target++) {
            if (search_position(searcher, query.ids, query.n, target, query.count, query.use_mass, query.mass,
                                query.excluded, query.n_excluded) < 0) {
                snprintf(message, sizeof(message), "%s", searcher->reader.failure.message);
                rc = 1;
            } else if (write_answer(&store, searcher, target, message, sizeof(message)) < 0) {
                rc = 1;
            }
            if (searcher->reader.kept_bytes > kept_peak)
                kept_peak = searcher->reader.kept_bytes;
        }
    }
    unsigned long long searches = 0, lookups = 0, misses = 0;
    for (int i = 0; i < n_searchers; i++) {
        searches += searchers[i]->n_searches;
        lookups += searchers[i]->reader.lookups;
        misses += searchers[i]->reader.misses;
    }
    if (rc == 0)
        printf("done %llu %llu %llu %zu\n", searches, lookups, misses, kept_peak);
    free(line);
    free(query.ids);
    free(query.excluded);
    for (int i = 0; i < n_searchers; i++) {
        searcher_free(searchers[i]);
        free(searchers[i]);
    }
    store_close(&store);
    if (fflush(stdout) != 0 && rc == 0)
        return failed("cannot write the answers");
    return rc ? failed(message) : 0;
}
