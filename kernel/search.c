/* The exact top-K search of one position: see search.h.
 *
 * terms.c describes lp(x) at the position as back-off chains over pattern records;
 * lists_read_terms (lists.c) turns them into the lists and steps the search works on, and this
 * file runs the threshold search of docs/algorithm.md:
 *
 *   - the sorted lists are the patterns some step reads by alpha (``by_score`` order)
 *     and the unigram list (``unigram_order``), and the joint order of a pattern "_ d"
 *     where the joint bound applies (joint.c);
 *   - each round reads one entry from every list that binds the upper bound on words
 *     not read yet; the bound is recomputed when the lists that bind may have changed;
 *   - words read for the first time are scored exactly in small batches (look-ups in
 *     the patterns' id-sorted arrays), dropping early those that cannot reach the top
 *     ``count``, and wait in a max-heap ("pending");
 *   - pending words scoring above the bound are final: no unread word can beat them,
 *     so they are the next entries of the answer, in order (score descending, ties by
 *     lowest id);
 *   - the search stops when the answer has ``count`` words, or the -p rule is met, or
 *     every word has been read.
 *
 * Scores are summed in float64 from the stored float32 values, in the order the
 * exhaustive scorer uses (score.c), so results are bit-for-bit reproducible.
 */
#include "joint.h"
#include "lists.h"
#include "score.h"
#include "searcher.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the bound */

/* How far below its sup a binding list is read before the bound is recomputed, in gaps
 * between the alternative it binds and the runner-up (see bind).  At 1 the bound is
 * recomputed about when another list would start to bind; reading on a little past that
 * reads a few more words than needed but recomputes the bound less often (the
 * measurements: docs/performance.md, "Tuning"). */
#define KEEP_GAPS 2.0

/* Marks ``list`` as binding the bound computed at ``stamp``, through an alternative worth
 * ``best`` whose runner-up is worth ``runner_up``: it keeps binding while its sup stays above
 * sup - KEEP_GAPS (best - runner_up) (searcher->keep; an estimate of when to recompute the
 * bound, never part of its value). */
static void bind(Searcher *searcher, uint64_t stamp, int list, double best, double runner_up) {
    double sup = searcher->lists[list].sup;
    if (sup == -INFINITY)  /* read to its end: reading it gives nothing */
        return;
    double keep = isfinite(best) && isfinite(runner_up) ? sup - KEEP_GAPS * (best - runner_up) : -INFINITY;
    if (searcher->binds[list] != stamp) {
        searcher->binds[list] = stamp;
        searcher->binding[searcher->n_binding++] = list;
        searcher->keep[list] = keep;
    } else if (keep > searcher->keep[list]) {
        searcher->keep[list] = keep;
    }
}

/* Upper bound on lp(x) of every word not read yet; its terms' bounds go to searcher->term_sup,
 * and searcher->binding lists the lists that bind it (reading any other list cannot lower it).
 *
 * A term is the largest of its alternatives: "x in the pattern of step s", bounded by
 * that list's sup under the beta sups of the longer steps (an unread word is not above
 * the list's next entry, and a word absent from the pattern takes no alpha from it),
 * and the base under every beta sup.  The sum over terms, in term order, bounds lp(x):
 * every sum is taken in the order the score takes it (upper_term), so the bound holds for
 * the rounded scores too.  Where the joint bound applies, terms 0 and 1 are bounded
 * together instead (joint.c, joint_bound), the later terms added to that.
 *
 * Sups only decrease, so a term whose largest alternative is a constant keeps its bound
 * (frozen), and an alternative that was the largest stays so while it is at least the
 * runner-up was then.  A binding list is read on without recomputing the bound while its
 * sup stays above searcher->keep[list] (KEEP_GAPS past where its alternative falls to the
 * runner-up: see bind).  Only when to recompute rests on that estimate, never the
 * bound's value. */
static double bound(Searcher *searcher, int n_terms) {
    uint64_t stamp = ++searcher->bound_stamp;
    double total = 0.0;
    int first = 0;
    searcher->n_binding = 0;
    if (searcher->joint_list != NONE) {  /* terms 0 and 1 bounded together (joint.c) */
        double runner_up;
        PairBound pair;
        while ((pair = joint_bound(searcher, &runner_up)).start != NONE)
            lists_start_pair(searcher, pair.start);
        for (int i = 0; i < 2; i++)
            if (pair.binds[i] != NONE)
                bind(searcher, stamp, pair.binds[i], pair.value, runner_up);
        total = pair.value;
        first = 2;
    }
    for (int t = first; t < n_terms; t++) {
        SearchTerm *term = &searcher->terms[t];
        if (term->frozen) {
            total += searcher->term_sup[t];
            continue;
        }
        const Alt *alts = &searcher->alts[term->first_alt];
        double best = -INFINITY;
        if (term->arg != NONE)
            best = alternative(searcher, term, term->arg);
        if (term->arg == NONE || best < term->runner_up) {
            double second = -INFINITY;
            int arg = NONE;
            best = -INFINITY;
            for (int a = 0; a < term->n_alts; a++) {
                double value = alternative(searcher, term, a);
                if (value > best) {
                    second = best;
                    best = value;
                    arg = a;
                } else if (value > second) {
                    second = value;
                }
            }
            if (term->fixed > best) {
                second = best;
                best = term->fixed;
                arg = NONE;
            } else if (term->fixed > second) {
                second = term->fixed;
            }
            term->arg = arg;
            term->runner_up = second;
        }
        total += best;
        searcher->term_sup[t] = best;
        if (term->arg == NONE) {
            term->frozen = 1;
            continue;
        }
        bind(searcher, stamp, alts[term->arg].list, best, term->runner_up);
    }
    /* No list binds only if no term predicts x (never so for the terms terms_position makes):
     * then reading cannot lower the bound, and exactness needs every word read. */
    if (!searcher->n_binding) {
        int unigram = searcher->unigram_list;
        searcher->binds[unigram] = stamp;
        searcher->binding[searcher->n_binding++] = unigram;
        searcher->keep[unigram] = INFINITY;
    }
    return total;
}

/* ---------------------------------------------------------------- pending heap */

static inline int before(const Scored *a, const Scored *b) {  /* a ranks before b */
    /* (bitwise, without a branch: which of two heap entries ranks first is a coin toss for
     * the branch predictor, and the heaps ask it at every level) */
    return (a->score > b->score) | ((a->score == b->score) & (a->word < b->word));
}

/* Whether a belongs above b in a heap whose root is its best word (``worst_first`` 0: the
 * pending heap of -p) or its worst (1: -n's heap of the best words). */
static inline int above(const Scored *a, const Scored *b, int worst_first) {
    return worst_first ? before(b, a) : before(a, b);
}

/* Takes the hole at the root of a heap of ``size`` words down to the bottom, moving up at
 * each level the child that belongs above the other, with no comparison of the word that
 * will fill it; returns where it ends.  With climb, this is Floyd's way of filling the
 * root's hole with the last leaf: the leaf belongs near the bottom, so it is compared on
 * its way back up (a level or two), not at every level down, where a sift-down compares it
 * twice and leaves by a mispredicted branch. */
static inline int64_t hole_to_bottom(Scored *heap, int64_t size, int worst_first) {
    int64_t i = 0;
    for (int64_t child = 1; child < size; child = 2 * i + 1) {
        /* the next level's first line, whichever child moves: -p's pending heap is big
         * and its levels are cache misses, each waiting on the comparison before it */
        __builtin_prefetch(&heap[2 * child + 1]);
        child += child + 1 < size && above(&heap[child + 1], &heap[child], worst_first);
        heap[i] = heap[child];
        i = child;
    }
    return i;
}

/* Puts e in the hole at i or above it, moving down the parents that e belongs above. */
static inline void climb(Scored *heap, int64_t i, Scored e, int worst_first) {
    for (; i > 0 && above(&e, &heap[(i - 1) / 2], worst_first); i = (i - 1) / 2)
        heap[i] = heap[(i - 1) / 2];
    heap[i] = e;
}

/* The root out, its hole filled by the last leaf Floyd's way (hole_to_bottom, then climb). */
static inline Scored pop_root(Scored *heap, int64_t *n, int worst_first) {
    Scored root = heap[0];
    int64_t size = --*n;
    int64_t hole = hole_to_bottom(heap, size, worst_first);
    climb(heap, hole, heap[size], worst_first);
    return root;
}

static void heap_push(Scored *heap, int64_t *n, Scored e) {
    climb(heap, (*n)++, e, 0);
}

/* The best word out.  -p lists its words one pop at a time, thousands a position: the pops
 * were most of its search (perf of a warm -p 0.9 pass), hence Floyd's way (pop_root). */
static Scored heap_pop(Scored *heap, int64_t *n) {
    return pop_root(heap, n, 0);
}

/* -n alone: the best ``size`` words so far in one heap, the worst of them (the last in the
 * answer's order) at the root, in place of the pending heap and the heap of scores that -p
 * needs (it lists words as they become final, one at a time). */
static void best_sift_down(Scored *heap, int64_t n, int64_t i, Scored e) {
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= n)
            break;
        child += child + 1 < n && before(&heap[child], &heap[child + 1]);  /* the worse child */
        if (!before(&e, &heap[child]))
            break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = e;
}

static void best_push(Scored *heap, int64_t *n, int64_t size, Scored e) {
    if (*n < size) {
        climb(heap, (*n)++, e, 1);
    } else if (before(&e, &heap[0])) {
        best_sift_down(heap, *n, 0, e);
    }
}

/* The words of the heap into ``out``, best first; empties the heap: the root (the worst)
 * goes out and the last leaf, one of the best, fills its hole (pop_root). */
static void best_sorted(Scored *heap, int64_t *n, Scored *out) {
    for (int64_t i = *n - 1; i >= 0; i--)
        out[i] = pop_root(heap, n, 1);
}

/* Keeps the best ``size`` scores in the min-heap ``top``. */
static void top_push(double *top, int64_t *n, int64_t size, double score) {
    int64_t i;
    if (*n < size) {
        for (i = (*n)++; i > 0 && top[(i - 1) / 2] > score; i = (i - 1) / 2)
            top[i] = top[(i - 1) / 2];
        top[i] = score;
        return;
    }
    if (score <= top[0])
        return;
    for (i = 0;;) {  /* replace the smallest, sift down */
        int64_t child = 2 * i + 1;
        if (child >= *n)
            break;
        if (child + 1 < *n && top[child + 1] < top[child])
            child++;
        if (top[child] >= score)
            break;
        top[i] = top[child];
        i = child;
    }
    top[i] = score;
}


/* ---------------------------------------------------------------- the search */

/* The search over the terms searcher->position describes (see search_position). */
static int run_search(Searcher *searcher, int64_t count, int use_mass, double mass, const uint32_t *excluded,
                      int64_t n_excluded) {
    uint32_t vocab_size = searcher->reader.store->vocab_size;
    int n_pats = 0;
    searcher->pair_split = count >= PAIR_MIN_COUNT;
    int n_terms = lists_read_terms(searcher, &n_pats);
    if (n_terms < 0) {
        common_fail(&searcher->reader.failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    lists_mark_members(searcher, n_pats);
    int64_t candidates = vocab_size;  /* V of the cap and the -p rule: the words not excluded */
    for (int64_t i = 0; i < n_excluded; i++) {
        if (!(searcher->flags[excluded[i]] & SEEN)) {  /* <s> (SEEN already) and repeats count once */
            searcher->flags[excluded[i]] |= SEEN;
            candidates--;
        }
    }
    /* The original lists at most V - 1 substitutes (one word is <s>), even for a model
     * without <s>; here V counts the words not excluded. */
    if (count > candidates - 1)
        count = candidates - 1;
    int64_t n_evaluated = 0, n_pending = 0, n_listed = 0, reads = 0;
    int64_t n_top = 0, top_size = count < vocab_size ? count : vocab_size;
    double mass_sum = 0.0, batch_scores[MAX_BATCH];
    int one_heap = !use_mass;  /* -n alone: best_push's heap (n_pending words of pending) */
    /* -p keeps the best ``count`` scores apart (top), for the drop and the stop; with -p alone
     * (count capped at candidates - 1) that heap would fill only once every word but one is
     * scored, too late to drop or stop anything: then it is not kept (n_top stays 0). */
    int keep_top = !one_heap && count < candidates - 1;
    int unigram = searcher->unigram_list, done = count <= 0, live[MAX_BATCH];
    int need_bound = 1;  /* the binding lists may have changed since the bound was computed */
    int least_batch = count < MIN_BATCH ? MIN_BATCH : count > MAX_FIRST_BATCH ? MAX_FIRST_BATCH : (int)count;
    while (!done) {
        /* Read new words into a batch: rounds of one entry from each binding list. */
        /* (the read loop writes each word it reads at batch[n], n < size, new or not: here, not
         * in ``evaluated``, whose V entries all hold words once every word is read) */
        uint32_t batch[MAX_BATCH];
        int n = 0, size = (int)(n_evaluated / 8 < MAX_BATCH ? n_evaluated / 8 : MAX_BATCH);
        size = size < least_batch ? least_batch : size;
        while (n < size && searcher->lists[unigram].depth < vocab_size) {
            /* stop reading once the best ``count`` scores so far all beat every unread
             * word: the words of this batch still get scored, no more are needed */
            if (need_bound) {
                need_bound = 0;
                double unread = bound(searcher, n_terms);
                if (one_heap ? n_pending == count && unread < searcher->pending[0].score
                             : n_top == top_size && unread < searcher->top[0])
                    break;
            }
            if (n == 0)  /* bounds on the terms of every word the batch will read */
                memcpy(searcher->batch_sup, searcher->term_sup, (size_t)n_terms * sizeof(double));
            /* one entry of each list that binds (its sup is finite, so it has one left) */
            for (int b = 0; b < searcher->n_binding && n < size; b++) {
                int l = searcher->binding[b];
                uint32_t word = lists_read(searcher, &searcher->lists[l]);
                reads++;
                need_bound |= searcher->lists[l].sup <= searcher->keep[l];
                /* a new word joins the batch, without a branch (whether a list's next word
                 * was read already is a coin toss): ids >= V (none) stand for word 0 */
                uint32_t known = word < vocab_size ? word : 0;
                unsigned fresh = (word < vocab_size) & !(searcher->flags[known] & SEEN);
                searcher->flags[known] |= (uint8_t)(fresh * SEEN);
                batch[n] = known;
                n += (int)fresh;
                __builtin_prefetch(&searcher->reader.store->unigram[known]);
            }
        }
        double threshold = one_heap ? (n_pending == count ? searcher->pending[0].score : -INFINITY)
                                    : (n_top == top_size ? searcher->top[0] : -INFINITY);
        int kept = score_batch(searcher, n_terms, batch, n, searcher->batch_sup, threshold, batch_scores, live);
        for (int j = 0; j < kept; j++) {
            Scored e = {batch_scores[live[j]], batch[live[j]]};
            if (one_heap) {
                best_push(searcher->pending, &n_pending, count, e);
            } else {
                heap_push(searcher->pending, &n_pending, e);
                if (keep_top)
                    top_push(searcher->top, &n_top, top_size, e.score);
            }
        }
        memcpy(&searcher->evaluated[n_evaluated], batch, (size_t)n * sizeof(uint32_t));
        n_evaluated += n;
        /* Pending words above the bound on unread words are final, best first. */
        int everything = searcher->lists[unigram].depth == vocab_size;
        double limit = everything ? -INFINITY : bound(searcher, n_terms);
        need_bound = everything; /* scoring reads no list: the next round can start from this bound */
        if (one_heap && (everything || (n_pending == count && searcher->pending[0].score > limit))) {
            /* every word of the heap beats every unread one (ties included: strictly above) */
            n_listed = n_pending;
            best_sorted(searcher->pending, &n_pending, searcher->listed);
            done = 1;
        }
        while (!one_heap && !done && n_pending && (everything || searcher->pending[0].score > limit)) {
            Scored e = heap_pop(searcher->pending, &n_pending);
            searcher->listed[n_listed++] = e;
            if (use_mass) {  /* the original's -p rule: stop once P <= S / (S + p (V - L)) */
                double p = pow(10.0, e.score);
                mass_sum += p;
                done = mass <= mass_sum / (mass_sum + p * (double)(candidates - n_listed));
            }
            done |= n_listed >= count;
        }
        done |= everything;
    }
    lists_clear_flags(searcher, n_pats, n_evaluated, excluded, n_excluded);
    searcher->n_listed = n_listed;
    searcher->n_searches++;
    searcher->n_evaluated += (unsigned long long)n_evaluated;
    searcher->n_reads += (unsigned long long)reads;
    searcher->n_listed_total += (unsigned long long)n_listed;
    return 0;
}

int search_position(Searcher *searcher, const uint32_t *sentence, int n, int target, const SearchLimits *limits) {
    uint32_t vocab_size = searcher->reader.store->vocab_size;
    searcher->n_listed = 0;
    if (target < 1 || target >= n) {
        common_fail(&searcher->reader.failure, FS_EARGUMENT, "target outside 1 ... len(sentence) - 1");
        return -1;
    }
    for (int64_t i = 0; i < limits->n_excluded; i++)
        if (limits->excluded[i] >= vocab_size) {
            common_fail(&searcher->reader.failure, FS_EARGUMENT, "excluded: word ids below the vocabulary size");
            return -1;
        }
    /* As the original, the -p rule applies only for P < 1: with P = 1 it would stop once
     * S / (S + p (V - L)) rounds to 1, far down the list but before its end. */
    int use_mass = limits->use_mass && limits->mass < 1.0;
    cache_reader_begin_search(&searcher->reader);
    int rc = terms_position(&searcher->reader, sentence, n, target, &searcher->position);
    if (target + 1 < n)  /* (the next position's look-ups, while this search runs) */
        terms_prefetch(&searcher->reader, sentence, n, target + 1);
    if (rc == 0)
        rc = run_search(searcher, limits->count, use_mass, limits->mass, limits->excluded, limits->n_excluded);
    cache_reader_end_search(&searcher->reader);
    return rc;
}

/* p / sum p of ``n`` scores, best first, ``stride`` bytes apart from ``first``.  A score
 * of -inf (log10 of 0) has p 0; where every score is -inf, none has any mass: each p is 0. */
static void normalize_strided(const char *first, size_t stride, int64_t n, double *out) {
    double total = 0.0, best = n > 0 ? *(const double *)first : 0.0;
    if (best == -INFINITY) {
        for (int64_t i = 0; i < n; i++)
            out[i] = 0.0;
        return;
    }
    for (int64_t i = 0; i < n; i++) {  /* relative to the best: no underflow of the sum */
        out[i] = pow(10.0, *(const double *)(first + (size_t)i * stride) - best);
        total += out[i];
    }
    for (int64_t i = 0; i < n; i++)
        out[i] /= total;
}

void search_normalize(const double *scores, int64_t n, double *out) {
    normalize_strided((const char *)scores, sizeof(double), n, out);
}

void search_normalize_scored(const Scored *answers, int64_t n, double *out) {
    if (n > 0)
        normalize_strided((const char *)&answers->score, sizeof(Scored), n, out);
}

/* Appends the searcher's answer to ``a`` as its next position: 0, or -1 when out of memory. */
static int keep_answer(Answers *a, const Searcher *searcher) {
    if (GROW64(a->starts, a->cap_starts, a->n_positions + 2) < 0)
        return -1;
    if (a->n + searcher->n_listed > a->cap) {
        int64_t cap = 2 * (a->n + searcher->n_listed) + 256;
        Scored *answers = realloc(a->answers, (size_t)cap * sizeof(Scored));
        if (!answers)
            return -1;
        a->answers = answers;
        if (a->normalized) {
            double *probabilities = realloc(a->probabilities, (size_t)cap * sizeof(double));
            if (!probabilities)
                return -1;
            a->probabilities = probabilities;
        }
        a->cap = cap;
    }
    if (a->n_positions == 0)
        a->starts[0] = 0;
    if (searcher->n_listed) {  /* (none listed: a->answers may still be NULL, which memcpy may not be given) */
        memcpy(a->answers + a->n, searcher->listed, (size_t)searcher->n_listed * sizeof(Scored));
        if (a->normalized)
            search_normalize_scored(searcher->listed, searcher->n_listed, a->probabilities + a->n);
    }
    a->n += searcher->n_listed;
    a->starts[++a->n_positions] = a->n;
    return 0;
}

int search_run(Searcher *searcher, const uint32_t *sentence, int n, int *target, int last, const SearchLimits *limits,
               Answers *a, int64_t most) {
    for (; *target < last && a->n < most; ++*target) {
        if (search_position(searcher, sentence, n, *target, limits) < 0)
            return -1;
        if (keep_answer(a, searcher) < 0) {
            common_fail(&searcher->reader.failure, FS_ENOMEM, "out of memory");
            return -1;
        }
    }
    return 0;
}

void search_answers_free(Answers *a) {
    free(a->answers);
    free(a->probabilities);
    free(a->starts);
    memset(a, 0, sizeof(*a));
}

int search_searcher_init(Searcher *searcher, const Store *s, MapTable *maps, size_t records, size_t kept_budget) {
    memset(searcher, 0, sizeof(*searcher));
    if (cache_reader_init(&searcher->reader, s, maps, records, kept_budget) < 0)
        return -1;
    size_t v = s->vocab_size;
    searcher->flags = calloc(v, 1);
    searcher->evaluated = malloc(v * sizeof(uint32_t));
    searcher->pending = malloc(v * sizeof(Scored));
    searcher->listed = malloc(v * sizeof(Scored));
    searcher->top = malloc(v * sizeof(double));
    if (!searcher->flags || !searcher->evaluated || !searcher->pending || !searcher->listed || !searcher->top) {
        search_searcher_free(searcher);
        common_fail(&searcher->reader.failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    if (s->bos < s->vocab_size)
        searcher->flags[s->bos] = SEEN;  /* never a candidate */
    return 0;
}

void search_searcher_free(Searcher *searcher) {
    cache_reader_free(&searcher->reader);
    terms_position_free(&searcher->position);
    free(searcher->flags);
    free(searcher->evaluated);
    free(searcher->pending);
    free(searcher->listed);
    free(searcher->top);
    free(searcher->pats);
    free(searcher->steps);
    free(searcher->terms);
    free(searcher->lists);
    free(searcher->binds);
    free(searcher->alts);
    free(searcher->keep);
    free(searcher->binding);
    free(searcher->term_sup);
    free(searcher->batch_sup);
    free(searcher->pos);
    free(searcher->held);
    for (int i = 0; i < FS_MAX_ORDER; i++) {
        free(searcher->pair_own[i].words);
        free(searcher->pair_own[i].alphas);
    }
    memset(searcher, 0, sizeof(*searcher));
}

