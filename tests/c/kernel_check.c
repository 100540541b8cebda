/* kernel_check: the C core driven without Python, so that it can be built and run under
 * AddressSanitizer/UndefinedBehaviorSanitizer (tests/test_kernel_sanitizers.py compiles
 * and runs it).
 *
 *   kernel_check INDEX RECORD_SLOTS KEPT_BYTES THREADS
 *
 * opens INDEX as the Python module does (engine_open: the header, arrays and metadata
 * checked), sizes each Searcher's cache (RECORD_SLOTS, KEPT_BYTES) and searches the
 * queries of standard input from THREADS threads at once, each query line taking a
 * Searcher from the index for its positions and giving it back (so the index's pool,
 * its seeded new Searchers and the shared rank maps run under the sanitizers too).
 * Each line of standard input is a query:
 *
 *   COUNT [-p MASS] [-x ID]... ID ID ...
 *
 * the limits (count, and the -p rule's mass), the excluded words (-x, ids below V, as
 * Core.excluded gives them) and the ids of a whole sentence, <s> and </s>
 * included (as Core.sentence_ids gives them).  For every position 1 ... n - 1,
 * in input order whatever the threads, it writes four lines:
 *
 *   S TARGET N ID SCORE ID SCORE ...      (scores as "%.17g": they read back exactly)
 *   F TARGET FIELDS                       (render_write_fields' text, as it wrote it)
 *   J TARGET JSON                         (the position's --format jsonl line, -t style)
 *   D TARGET JSON                         (its --sample 3 --format jsonl line, seed: the query's number)
 *
 * (J and D show the token SHOWN with the record name NAME and id ID, on line Q + 1 of
 * the input for the Q-th query from 0: render.c, sample.c and Ryu run under the
 * sanitizers too.)
 *
 * and after the last query, once the index is closed, one line
 *
 *   done SEARCHES LOOKUPS MISSES KEPT_PEAK
 *
 * (the Searchers' pattern look-ups and look-ups that read the index, summed, and the most
 * bytes of rank maps and sorted prefixes a Searcher kept after any query).  On a failure
 * (the index is refused, a search meets a damaged record, a line is malformed) it writes
 * "kernel_check: MESSAGE" to standard error, frees what it made and exits with 1. */
#define _POSIX_C_SOURCE 200809L  /* getline */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "render.h"

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

/* One query line: its limits, its excluded words, its sentence, and what it answered. */
typedef struct {
    int number;                 /* from 0, in input order: the rendered line's number - 1 and the seed */
    SearchLimits limits;
    uint32_t *ids, *excluded;
    int n, n_excluded, cap_ids, cap_excluded;
    char *out;                  /* the S, F, J and D lines of its positions */
    size_t out_len, out_cap;
    char error[sizeof(((Failure *)0)->message) + 64];
} Query;

/* The query line into q: 0, or -1 (malformed). */
static int parse_query(char *line, Query *q) {
    static const char *blanks = " \t\r\n";
    long long number;
    char *saved, *token = strtok_r(line, blanks, &saved);
    if (!token || parse_integer(token, 0, INT64_MAX, &number) < 0)
        return -1;
    q->limits.count = number;
    while ((token = strtok_r(NULL, blanks, &saved))) {
        int option = q->n == 0 && (!strcmp(token, "-p") || !strcmp(token, "-x"));
        if (option && token[1] == 'p') {
            if (!(token = strtok_r(NULL, blanks, &saved)) || parse_real(token, &q->limits.mass) < 0)
                return -1;
            q->limits.use_mass = 1;
        } else if (option) {
            if (!(token = strtok_r(NULL, blanks, &saved)) || parse_integer(token, 0, UINT32_MAX, &number) < 0 ||
                append_id(&q->excluded, &q->n_excluded, &q->cap_excluded, (uint32_t)number) < 0)
                return -1;
        } else if (parse_integer(token, 0, UINT32_MAX, &number) < 0 ||
                   append_id(&q->ids, &q->n, &q->cap_ids, (uint32_t)number) < 0) {
            return -1;
        }
    }
    q->limits.excluded = q->excluded;
    q->limits.n_excluded = q->n_excluded;
    return q->n >= 2 ? 0 : -1;
}

/* printf onto the query's output: 0, or -1 when out of memory. */
static int out(Query *q, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int out(Query *q, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int need = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (q->out_len + (size_t)need + 1 > q->out_cap) {
        size_t cap = 2 * (q->out_len + (size_t)need + 1);
        char *grown = realloc(q->out, cap);
        if (!grown)
            return -1;
        q->out = grown;
        q->out_cap = cap;
    }
    va_start(args, format);
    vsnprintf(q->out + q->out_len, (size_t)need + 1, format, args);
    va_end(args);
    q->out_len += (size_t)need;
    return 0;
}

/* The token every rendered position shows, and the -t record's name and id: not UTF-8,
 * with a quote, so that JSON's escapes and base64 fields are written. */
#define SHOWN "t\xff\""
#define NAME "r\"1"
#define ID "i\xfe"
#define DRAWS 3

/* Writes the J and D lines of position p of the answers (at ``target``): its JSON line and
 * its sampled JSON line as fastsubs-query writes them (render.c, sample.c, Ryu), less
 * their newline: 0, or -1 when out of memory. */
static int chunk_render_lines(const Store *store, const Answers *a, int64_t p, int target, Query *q) {
    int64_t start = a->starts[p], n = a->starts[p + 1] - start;
    Place place = {q->number + 1, target - 1, (const uint8_t *)SHOWN, strlen(SHOWN),
                   (const uint8_t *)NAME, (const uint8_t *)ID, strlen(NAME), strlen(ID)};
    int64_t draws[DRAWS];
    double *cumulative = malloc(n ? (size_t)n * sizeof(double) : 1);  /* exactly what the draws need */
    Text json = {0}, sampled = {0};
    Rendering as_json = {RENDER_JSON, 0, 0, 0}, as_samples = {RENDER_SAMPLE_JSON, 0, DRAWS, (uint64_t)q->number};
    render_position(&json, store, &as_json, &place, a->answers + start, a->probabilities + start, n, NULL, NULL);
    if (cumulative)
        render_position(&sampled, store, &as_samples, &place, a->answers + start, a->probabilities + start, n,
                        draws, cumulative);
    int rc = !cumulative || json.failed || sampled.failed ? -1 : 0;
    if (rc == 0)
        rc = out(q, "J %d %.*s\nD %d %.*s\n", target, (int)json.len - 1, json.data, target, (int)sampled.len - 1,
                 sampled.data);
    render_text_free(&json);
    render_text_free(&sampled);
    free(cumulative);
    return rc;
}

/* Writes the S, F, J and D lines of each position of the answers: 0, or -1 with q->error set. */
static int write_answers(const Store *store, const Answers *a, int first, Query *q) {
    for (int64_t p = 0; p < a->n_positions; p++) {
        const Scored *answers = a->answers + a->starts[p];
        int64_t n = a->starts[p + 1] - a->starts[p];
        int rc = out(q, "S %d %" PRId64, first + (int)p, n);
        for (int64_t i = 0; rc == 0 && i < n; i++)
            rc = out(q, " %" PRIu32 " %.17g", answers[i].word, answers[i].score);
        int64_t size = render_fields_size(store, answers, NULL, n);
        char *text = size < 0 ? NULL : malloc((size_t)size);  /* exactly what it asks: ASan sees past it */
        if (size < 0) {
            snprintf(q->error, sizeof(q->error), "a listed word id is outside the vocabulary");
            return -1;
        }
        if (rc < 0 || !text) {
            free(text);
            snprintf(q->error, sizeof(q->error), "out of memory");
            return -1;
        }
        char *end = render_write_fields(store, answers, NULL, n, text);
        if (end < text || end - text > size) {
            snprintf(q->error, sizeof(q->error), "render_write_fields wrote %td bytes, render_fields_size allowed %" PRId64,
                     end - text, size);
            free(text);
            return -1;
        }
        rc = out(q, "\nF %d %.*s\n", first + (int)p, (int)(end - text), text);
        free(text);
        if (rc < 0 || chunk_render_lines(store, a, p, first + (int)p, q) < 0) {
            snprintf(q->error, sizeof(q->error), "out of memory");
            return -1;
        }
    }
    return 0;
}

typedef struct {
    Engine *index;
    Query *queries;
    int n_queries, first, step;
    size_t kept_peak;
} Work;

/* A thread's queries (first, first + step, ...): each takes a Searcher and gives it back. */
static void *search_queries(void *argument) {
    Work *w = argument;
    Answers answers = {0};
    answers.normalized = 1;  /* p / sum p, for the JSON lines */
    for (int i = w->first; i < w->n_queries; i += w->step) {
        Query *q = &w->queries[i];
        Failure failure = {0};
        Searcher *k = engine_take(w->index, &failure);
        if (!k) {
            snprintf(q->error, sizeof(q->error), "%s", failure.message);
            break;
        }
        /* in runs of at most 64 substitutes: search_run's batches end mid-sentence */
        for (int target = 1; target < q->n && !q->error[0];) {
            int first = target;
            answers.n = answers.n_positions = 0;
            if (search_run(k, q->ids, q->n, &target, q->n, &q->limits, &answers, 64) < 0)
                snprintf(q->error, sizeof(q->error), "%s", k->reader.failure.message);
            else
                write_answers(&w->index->store, &answers, first, q);
        }
        if (k->reader.kept_bytes > w->kept_peak)
            w->kept_peak = k->reader.kept_bytes;
        engine_give_back(w->index, k);
        if (q->error[0])
            break;
    }
    search_answers_free(&answers);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 5)
        return failed("usage: kernel_check INDEX RECORD_SLOTS KEPT_BYTES THREADS");
    long long slots, kept, threads;
    if (parse_integer(argv[2], 1, 1LL << 30, &slots) < 0 || parse_integer(argv[3], 0, INT64_MAX, &kept) < 0 ||
        parse_integer(argv[4], 1, 64, &threads) < 0)
        return failed("an argument is not a number in its range");

    Engine index;
    Failure failure = {0};
    if (engine_open(&index, argv[1], &failure) < 0)
        return failed(failure.message);
    engine_set_cache(&index, (size_t)slots, (size_t)kept);

    Query *queries = NULL;
    int n_queries = 0, cap_queries = 0, rc = 0;
    char *line = NULL, message[sizeof(((Query *)0)->error)] = "";
    size_t line_cap = 0;
    for (long number = 1; rc == 0 && getline(&line, &line_cap, stdin) >= 0; number++) {
        if (n_queries == cap_queries) {
            cap_queries = 2 * cap_queries + 16;
            Query *grown = realloc(queries, (size_t)cap_queries * sizeof(Query));
            if (!grown) {
                snprintf(message, sizeof(message), "out of memory");
                rc = 1;
                break;
            }
            queries = grown;
        }
        Query *q = &queries[n_queries];
        memset(q, 0, sizeof(*q));
        q->number = n_queries++;
        if (parse_query(line, q) < 0) {
            snprintf(message, sizeof(message),
                     "line %ld: expected COUNT [-p MASS] [-x ID]... and two or more word ids", number);
            rc = 1;
        }
    }
    free(line);
    Work work[64];
    pthread_t running[64];
    size_t kept_peak = 0;
    int started = 0;
    for (; rc == 0 && started < threads; started++) {
        work[started] = (Work){&index, queries, n_queries, started, (int)threads, 0};
        if (pthread_create(&running[started], NULL, search_queries, &work[started])) {
            snprintf(message, sizeof(message), "cannot start a thread");
            rc = 1;
        }
    }
    for (int t = 0; t < started; t++) {
        pthread_join(running[t], NULL);
        if (work[t].kept_peak > kept_peak)
            kept_peak = work[t].kept_peak;
    }
    for (int i = 0; i < n_queries; i++) {
        if (rc == 0 && queries[i].error[0]) {
            snprintf(message, sizeof(message), "%s", queries[i].error);
            rc = 1;
        }
        if (rc == 0)
            fwrite(queries[i].out, 1, queries[i].out_len, stdout);
        free(queries[i].ids);
        free(queries[i].excluded);
        free(queries[i].out);
    }
    free(queries);
    unsigned long long totals[6];
    engine_counters(&index, totals);
    engine_close(&index);
    Failure after = {0};
    if (rc == 0 && (engine_take(&index, &after) || after.code != FS_ECLOSED)) {
        snprintf(message, sizeof(message), "a closed index gave a Searcher");
        rc = 1;
    }
    if (rc == 0)
        printf("done %llu %llu %llu %zu\n", totals[0], totals[4], totals[5], kept_peak);
    engine_free(&index);
    if (fflush(stdout) != 0 && rc == 0)
        return failed("cannot write the answers");
    return rc ? failed(message) : 0;
}
