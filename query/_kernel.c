/* The exact top-K search of FASTSUBS for one position, in C (fastsubs.query._kernel).
 *
 * Python (query/terms.py) describes lp(x) at a position as a list of Term objects,
 * each a back-off chain of Steps over Pattern objects (query/index.py); each Term holds
 * a TermView, its chain as this module reads it (PatternViews of the patterns' arrays,
 * constants), made once when the term is built.  The search reads those views and runs
 * the threshold search of ALGORITHM.md:
 *
 *   - the sorted lists are the patterns some step reads by alpha (``by_score`` order)
 *     and the unigram list (``unigram_order``);
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
 * exhaustive scorer uses (see score_term), so results are bit-for-bit reproducible.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

/* Patterns at least this long ("big") get a rank map (word -> position in one cache
 * line instead of a binary search) and keep the part of their sorted list that searches
 * have read, copied in score order (read again in sequence instead of through
 * ``by_score``, a cache miss per entry).  Both are kept per process, least recently
 * used freed beyond CACHED_BYTES.  kn4-64k has 3,255 patterns this long, 1,573 of them
 * used by 300 held-out lines.  A map's size and the time to build it follow the
 * pattern, not the vocabulary (see rank_map): a pattern is big only if it also holds at
 * least V / SUPER_WORDS words. */
#define RANK_MIN_COUNT 256
/* A pattern holding at least V / FLAT_MAP_RATIO words gets a flat rank map, a Block per
 * 64 vocabulary words (2 bits per word: at most 64 bytes per word it holds; V = 64K:
 * 16 KiB, every big pattern of kn4-64k); a sparser one a two-level map: a Super per
 * SUPER_WORDS vocabulary words, then a Block per 64 words only where it holds some (at
 * most 16 (V / SUPER_WORDS + count + 1) bytes).  Flat maps read one Block per look-up;
 * two-level maps one more (a Super, from a directory of V / 256 bytes that stays in
 * cache): kn4-338k-pruned, K=100, 0.94-1.05x the time of flat maps for all. */
#define FLAT_MAP_RATIO 256
#define SUPER_WORDS 4096
#define CACHED_BYTES ((size_t)24 << 20)
/* Scores and the bound are sums of the same float32 values taken in different orders;
 * raising the bound by this much keeps it an upper bound whatever the rounding. */
#define BOUND_SLACK 1e-9
/* New words are scored in batches of up to this many: the look-ups of a batch are
 * independent loads whose cache misses the CPU overlaps.  A batch is an eighth of the
 * words scored so far (so the search reads at most ~1/8 more than one word at a time
 * would), but at least ``count`` (every search scores at least ``count`` words, so those
 * are never read in vain) and at least MIN_BATCH.  kn4-64k, K=100: 64 reads 1% more
 * words than 32 but takes ~10% less time; 128 reads 2% more, no faster.  Starting at
 * ``count`` rather than 1 word: 8% less time at K=10 and 100, for 0.4–1% more words;
 * MIN_BATCH 8: 7% less time at K=1 for 5% more words (16: slower again). */
#define MAX_BATCH 64
#define MIN_BATCH 8

/* Per-word flags of the current search (one byte per vocabulary word): SEEN marks words
 * read already (and <s>, always); each other bit marks the words of one small pattern,
 * scattered in when the search starts, so "is x in it?" is mostly answered by the byte
 * the SEEN test has just brought into cache, with no search in the pattern. */
#define SEEN 1u
#define MEMBER_BITS 7

/* Arrays read in place from the index: an LMDB value starts wherever its key ends in the
 * page, so these may be unaligned; the types say so, and the compiler emits loads that
 * allow it (on x86-64 the same instructions). */
#if defined(__GNUC__)
typedef uint32_t ix_u32 __attribute__((aligned(1)));
typedef uint64_t ix_u64 __attribute__((aligned(1)));
typedef float ix_f32 __attribute__((aligned(1)));
#else
typedef uint32_t ix_u32;
typedef uint64_t ix_u64;
typedef float ix_f32;
#endif

#define NONE (-1)
#define BETA_CONST (-1)   /* Step.beta is a constant */
#define BETA_UNIGRAM (-2) /* Step.beta is the unigram back-off weight of x */

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

struct PatternView;

typedef struct {
    struct PatternView *view;  /* where it came from: a reference held until the search ends */
    const ix_u32 *ids;       /* sorted by word id */
    const ix_f32 *alpha;
    const ix_f32 *beta;         /* NULL: the pattern stores no back-off weights (they are 0) */
    const ix_u32 *by_score;  /* positions into ids/alpha, alpha descending */
    Py_ssize_t count;
    double beta_sup;           /* max(0, largest stored back-off weight) */
    const Block *map;          /* rank map, or NULL */
    const Super *supers;       /* its directory when it has two levels, else NULL */
    uint8_t member;            /* its bit in Kernel.flags, or 0 */
    int list;                  /* the sorted list reading this pattern by alpha, or NONE */
    uint64_t located;          /* the batch whose live words have their positions in Kernel.pos */
} Pat;

typedef struct {
    int alpha;          /* Pat index whose alpha applies when x is in it, or NONE */
    int list;           /* the sorted list of that pattern (set once the lists are known) */
    int beta;           /* Pat index holding beta(A x B), BETA_CONST or BETA_UNIGRAM */
    double beta_const;  /* the constant, when beta == BETA_CONST */
    double beta_sup;    /* upper bound on the back-off weight over unread x */
    /* for scoring, set once the patterns are known: the alpha pattern's row of batch
     * positions (Kernel.pos) and its alphas, NULL without one; the same for the beta
     * pattern (beta_values NULL: its back-off weights are all 0) */
    const int32_t *alpha_pos, *beta_pos;
    const ix_f32 *alpha_values, *beta_values;
} StepC;

typedef struct {
    int first, n;       /* steps[first .. first+n), longest context first */
    int base_unigram;   /* after the last step: unigram alpha of x (1) or ``base`` (0) */
    double base;
    /* the term's bound (see bound()): the largest of alts[first_alt ..][n_alts] and ``fixed`` */
    int first_alt, n_alts;
    double fixed;       /* base + every beta sup when the base is a constant, else -inf */
    int frozen;         /* no list binds it any more: its bound stays (sups only decrease) */
    int arg;            /* the list its bound came from last time, or NONE: not computed yet */
    double arg_offset;  /* that alternative's offset */
    double arg_keep;    /* that list stays the largest alternative while its sup > arg_keep */
} TermC;

typedef struct {        /* one alternative of a term's bound: lists[list].sup + offset */
    int list;
    double offset;      /* the beta sups of the longer steps (fixed during a search) */
} Alt;

/* A list's next entries are gathered ahead, up to this many at a time: entry i sits at
 * an arbitrary place of the pattern (``by_score`` holds positions), so reading one at a
 * time waits for a cache miss per entry, while gathering many overlaps the misses.
 * Lists already in score order (the unigram list, a big pattern's sorted prefix) are
 * read in place, as many at a time. */
#define LIST_AHEAD 64
#define LIST_FIRST_AHEAD 8

typedef struct {        /* one sorted list */
    struct PatternView *view;  /* a big pattern's view: its sorted prefix serves the reads when it can */
    const ix_u32 *order;  /* entry -> position in ids/alpha: the pattern's by_score, or NULL: the
                             * entry is the position (the unigram list, kept in score order) */
    const ix_u32 *ids;    /* position -> word */
    const ix_f32 *alpha;
    Py_ssize_t depth, length;
    double sup;         /* alpha of the next unread entry; -inf once exhausted */
    /* entries ahead_start .. ahead_end - 1 are words[0 ..] and alphas[0 ..]: in place, or
     * gathered into own_words/own_alphas */
    Py_ssize_t ahead_start, ahead_end;
    const ix_u32 *words;
    const ix_f32 *alphas;
    int ahead;          /* how many to gather next time: doubles up to LIST_AHEAD */
    uint32_t own_words[LIST_AHEAD];
    float own_alphas[LIST_AHEAD];
} List;

typedef struct {
    double score;
    uint32_t word;
} Entry;

typedef struct {
    PyObject_HEAD
    Py_buffer unigram_views[3];
    const ix_f32 *unigram_alpha, *unigram_beta;
    /* copies made at start: each word's alpha and beta side by side (one cache line for
     * both), and the alphas in unigram_order (the unigram list then reads sequentially) */
    struct UnigramScores { float alpha, beta; } *unigram;
    float *sorted_alpha;
    const ix_u32 *unigram_order;
    Py_ssize_t vocab_size;
    double unigram_beta_sup;
    int ready;                       /* __init__ succeeded */
    int busy;                        /* a search is running: Python code it calls may not start another */
    uint8_t *flags;                  /* per word: SEEN and small-pattern membership bits */
    Py_ssize_t bos;                  /* <s>, never a candidate, or -1 */
    /* scratch, grown on demand and reused across searches */
    Pat *pats; int cap_pats;
    StepC *steps; int cap_steps;
    TermC *terms; int cap_terms;
    List *lists; int cap_lists;
    Alt *alts; int cap_alts;
    uint64_t *binds; int cap_binds;  /* per list: binds some term's bound if == bound_stamp */
    double *keep; int cap_keep;      /* per binding list: it binds all those terms while its sup > keep */
    int *binding; int cap_binding, n_binding;  /* the lists that bind, in the order found */
    uint64_t bound_stamp, batch_stamp;  /* count bound() calls and batches: never wrap */
    int unigram_list;                /* index of the unigram list (the last one) in k->lists */
    /* statistics since the kernel was made: searches, words evaluated, list entries read,
     * substitutes listed (Searcher.stats) */
    unsigned long long n_searches, n_evaluated, n_reads, n_listed;
    double *term_sup; int cap_term_sup;    /* per term: its bound now */
    struct TermView **held; int cap_held;  /* the current position's terms (references) */
    uint32_t *words; int cap_words;        /* search_at: the position's words, then a term's key */
    double *batch_sup; int cap_batch_sup;  /* per term: its bound before the current batch */
    double *top;                     /* min-heap of the best ``count`` scores so far (at most V) */
    int32_t *pos; int cap_pos;       /* [pattern][MAX_BATCH]: positions of the batch's words */
    uint32_t *evaluated; Entry *pending; Entry *listed; /* each holds at most V entries */
} Kernel;

static PyObject *str_view;

/* ---------------------------------------------------------------- buffers */

/* View ``array`` (a 1-d C-contiguous buffer of ``length`` items of ``kind``: 'I' uint32,
 * 'Q' uint64, 'f' float32, 'd' float64 or 'B' bytes; length -1: any). */
static int get_view(PyObject *array, Py_buffer *view, char kind, Py_ssize_t length, const char *what) {
    if (PyObject_GetBuffer(array, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *format = view->format ? view->format : "B";
    size_t n = strlen(format);
    Py_ssize_t size = kind == 'd' || kind == 'Q' ? 8 : kind == 'B' ? 1 : 4;
    char last = n ? format[n - 1] : 0;
    int kind_ok = last == kind || (kind == 'Q' && last == 'L' && sizeof(unsigned long) == 8);
    if (view->itemsize != size || !kind_ok || (length >= 0 && view->len != size * length)) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd items of kind '%c'", what, length, kind);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Makes room for ``need`` items of ``size`` bytes in ``*items`` (capacity ``*cap``). */
static int grow(void **items, int *cap, int need, size_t size) {
    if (need <= *cap)
        return 0;
    int cap_ = 2 * need + 8;
    void *grown = PyMem_Realloc(*items, (size_t)cap_ * size);
    if (!grown) {
        PyErr_NoMemory();
        return -1;
    }
    *items = grown;
    *cap = cap_;
    return 0;
}

#define GROW(items, cap, need) grow((void **)&(items), &(cap), (need), sizeof(*(items)))

/* ---------------------------------------------------------------- bit counting */

/* Bits set in x: one instruction where the code is compiled for a CPU that has it (see
 * TARGET_CLONES), a few shifts and adds otherwise. */
static inline uint32_t popcount64(uint64_t x) {
    return (uint32_t)__builtin_popcountll(x);
}

/* The functions that count bits run often enough to be compiled twice on x86-64, with
 * and without the popcnt instruction; the loader picks the one this CPU can run. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define TARGET_CLONES __attribute__((target_clones("popcnt", "default")))
#else
#define TARGET_CLONES
#endif

/* ---------------------------------------------------------------- pattern views, rank maps */

/* What the search needs of one pattern, read once when the pattern is parsed (Python's
 * Pattern.view) instead of at every search: its arrays, held, and its rank map. */
typedef struct PatternView {
    PyObject_HEAD
    Py_buffer buffers[4];        /* ids, alpha, by_score, beta: held while the view lives */
    int n_buffers;
    const ix_u32 *ids;         /* sorted by word id */
    const ix_f32 *alpha;
    const ix_f32 *beta;           /* NULL: the pattern stores no back-off weights (they are 0) */
    const ix_u32 *by_score;    /* positions into ids/alpha, alpha descending */
    Py_ssize_t count, vocab_size;
    double beta_sup;             /* max(0, largest stored back-off weight) */
    /* what big patterns keep between searches (see RANK_MIN_COUNT): */
    Block *map;                  /* rank map, built on first use (see rank_map) */
    Super *supers;               /* its directory (in the same allocation), or NULL: flat */
    size_t map_bytes;
    uint32_t *sorted_ids;        /* the first sorted_len entries of the sorted list: words */
    float *sorted_alpha;         /* and their alphas (room for sorted_cap) */
    Py_ssize_t sorted_len, sorted_cap;
    struct PatternView *newer, *older;  /* in the list of views keeping either, newest first */
    uint64_t used;               /* the last search that used them */
} PatternView;

/* The views keeping a map or a sorted prefix, least recently used freed first: at most
 * ``budget`` bytes in all (CACHED_BYTES unless set_cache_bytes says otherwise), never
 * those the current search uses. */
static struct {
    PatternView *newest, *oldest;
    size_t bytes, budget;
    uint64_t search;             /* the current search (counts searches) */
} cached;

static size_t kept_bytes(const PatternView *v) {
    return (v->map ? v->map_bytes : 0) + (size_t)v->sorted_cap * (sizeof(uint32_t) + sizeof(float));
}

/* Is v in the list?  (Every member but the newest has a newer one.) */
static int listed(const PatternView *v) {
    return cached.newest == v || v->newer;
}

static void forget_cached(PatternView *v) {
    if (!listed(v))
        return;
    if (v->newer) v->newer->older = v->older; else cached.newest = v->older;
    if (v->older) v->older->newer = v->newer; else cached.oldest = v->newer;
    v->newer = v->older = NULL;
    cached.bytes -= kept_bytes(v);
    PyMem_Free(v->supers ? (void *)v->supers : (void *)v->map);
    PyMem_Free(v->sorted_ids);
    PyMem_Free(v->sorted_alpha);
    v->map = NULL;
    v->supers = NULL;
    v->sorted_ids = NULL;
    v->sorted_alpha = NULL;
    v->sorted_len = v->sorted_cap = 0;
}

/* Marks v used by the current search: the newest in the list. */
static void touch(PatternView *v) {
    v->used = cached.search;
    if (cached.newest == v)
        return;
    if (v->newer) {  /* in the list: unlink */
        v->newer->older = v->older;
        if (v->older) v->older->newer = v->newer; else cached.oldest = v->newer;
    }
    v->newer = NULL;
    v->older = cached.newest;
    if (cached.newest) cached.newest->newer = v;
    cached.newest = v;
    if (!cached.oldest) cached.oldest = v;
}

/* Frees what views unused by the current search keep until ``more`` bytes fit; 0 if
 * they cannot. */
static int make_room(size_t more) {
    while (cached.bytes + more > cached.budget && cached.oldest && cached.oldest->used != cached.search)
        forget_cached(cached.oldest);
    return cached.bytes + more <= cached.budget;
}

/* Is the pattern of ``count`` words big (see RANK_MIN_COUNT)? */
static int is_big(Py_ssize_t count, Py_ssize_t vocab_size) {
    return count >= RANK_MIN_COUNT && count >= vocab_size / SUPER_WORDS;
}

/* Builds the flat rank map of v (see FLAT_MAP_RATIO); 0 when there is no room. */
TARGET_CLONES static int build_flat_map(PatternView *v) {
    size_t n = (size_t)((v->vocab_size + 63) / 64);
    if (!make_room(n * sizeof(Block)) || !(v->map = PyMem_Calloc(n, sizeof(Block))))
        return 0;
    for (Py_ssize_t i = 0; i < v->count; i++)
        v->map[v->ids[i] >> 6].bits |= 1ull << (v->ids[i] & 63);
    uint32_t rank = 0;
    for (size_t b = 0; b < n; b++) {
        v->map[b].rank = rank;
        rank += (uint32_t)popcount64(v->map[b].bits);
    }
    v->map_bytes = n * sizeof(Block);
    return 1;
}

/* Builds the two-level rank map of v (see FLAT_MAP_RATIO): its Blocks are those holding
 * words of v, after an empty one (map[0]) that the look-up of a word in no Block reads. */
static int build_two_level_map(PatternView *v) {
    size_t n_supers = (size_t)((v->vocab_size + SUPER_WORDS - 1) / SUPER_WORDS), n_blocks = 1;
    for (Py_ssize_t i = 0; i < v->count; i++)  /* ids ascend: count the Blocks they fall in */
        n_blocks += i == 0 || v->ids[i] >> 6 != v->ids[i - 1] >> 6;
    size_t bytes = n_supers * sizeof(Super) + n_blocks * sizeof(Block);
    if (!make_room(bytes) || !(v->supers = PyMem_Calloc(bytes, 1)))
        return 0;
    v->map = (Block *)(v->supers + n_supers);
    size_t b = 0;
    for (Py_ssize_t i = 0; i < v->count; i++) {
        uint32_t word = v->ids[i];
        if (i == 0 || word >> 6 != v->ids[i - 1] >> 6) {
            Super *super = &v->supers[word / SUPER_WORDS];
            v->map[++b].rank = (uint32_t)i;
            if (!super->present)
                super->first = (uint32_t)b;
            super->present |= 1ull << (word >> 6 & 63);
        }
        v->map[b].bits |= 1ull << (word & 63);
    }
    v->map_bytes = bytes;
    return 1;
}

/* The rank map of a big view, built on first use; NULL when the views the current
 * search uses leave no room (the caller then binary-searches). */
static const Block *rank_map(PatternView *v) {
    touch(v);  /* first: making room must not free what v keeps */
    if (!v->map) {
        if (!(v->count >= v->vocab_size / FLAT_MAP_RATIO ? build_flat_map(v) : build_two_level_map(v)))
            return NULL;
        cached.bytes += v->map_bytes;
    }
    return v->map;
}

/* Makes the sorted prefix of a big view hold its first ``need`` entries (need <= count),
 * copying those not copied yet; 0 when there is no room for them. */
static int sorted_prefix(PatternView *v, Py_ssize_t need) {
    touch(v);  /* first: making room must not free what v keeps */
    if (need > v->sorted_cap) {
        Py_ssize_t cap = 2 * v->sorted_cap > need ? 2 * v->sorted_cap : need;
        cap = cap < 64 ? 64 : cap > v->count ? v->count : cap;
        size_t more = (size_t)(cap - v->sorted_cap) * (sizeof(uint32_t) + sizeof(float));
        if (!make_room(more))
            return 0;
        uint32_t *ids = PyMem_Realloc(v->sorted_ids, (size_t)cap * sizeof(uint32_t));
        if (ids)
            v->sorted_ids = ids;
        float *alpha = ids ? PyMem_Realloc(v->sorted_alpha, (size_t)cap * sizeof(float)) : NULL;
        if (!alpha)
            return 0;  /* what it had stays usable */
        v->sorted_alpha = alpha;
        cached.bytes += more;
        v->sorted_cap = cap;
    }
    for (Py_ssize_t i = v->sorted_len; i < need; i++) {
        uint32_t at = v->by_score[i];
        v->sorted_ids[i] = v->ids[at];
        v->sorted_alpha[i] = v->alpha[at];
    }
    if (need > v->sorted_len)
        v->sorted_len = need;
    return 1;
}

static int PatternView_init(PatternView *v, PyObject *args, PyObject *kwds) {
    static char *names[] = {"ids", "alpha", "beta", "by_score", "max_beta", "vocab_size", NULL};
    PyObject *ids, *alpha, *beta, *by_score;
    double max_beta;
    Py_ssize_t vocab_size;
    if (v->n_buffers) {
        PyErr_SetString(PyExc_RuntimeError, "PatternView is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOdn", names, &ids, &alpha, &beta, &by_score, &max_beta,
                                     &vocab_size))
        return -1;
    Py_ssize_t count = PyObject_Length(ids);
    if (count < 1 || vocab_size < 1 || vocab_size >= (Py_ssize_t)UINT32_MAX) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "empty pattern or bad vocabulary size");
        return -1;
    }
    PyObject *arrays[4] = {ids, alpha, by_score, beta};
    const char kinds[4] = {'I', 'f', 'I', 'f'};
    const char *what[4] = {"ids", "alpha", "by_score", "beta"};
    int n = beta == Py_None ? 3 : 4;
    for (int i = 0; i < n; i++)
        if (get_view(arrays[i], &v->buffers[i], kinds[i], count, what[i]) < 0) {
            while (i--)
                PyBuffer_Release(&v->buffers[i]);
            return -1;
        }
    v->ids = v->buffers[0].buf;
    v->alpha = v->buffers[1].buf;
    v->by_score = v->buffers[2].buf;
    v->beta = n == 4 ? v->buffers[3].buf : NULL;
    v->count = count;
    v->vocab_size = vocab_size;
    v->beta_sup = fmax(0.0, max_beta);
    /* the search indexes memory with these: refuse what would reach outside it */
    int ok = 1;
    for (Py_ssize_t i = 0; i < count && ok; i++)
        ok = v->ids[i] < (uint32_t)vocab_size && v->by_score[i] < (uint32_t)count;
    if (!ok) {
        for (int i = 0; i < n; i++)
            PyBuffer_Release(&v->buffers[i]);
        PyErr_SetString(PyExc_ValueError, "word id outside the vocabulary or position outside the pattern");
        return -1;
    }
    v->n_buffers = n;  /* usable from here on */
    return 0;
}

static void PatternView_dealloc(PatternView *v) {
    forget_cached(v);
    for (int i = 0; i < v->n_buffers; i++)
        PyBuffer_Release(&v->buffers[i]);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

/* Position of ``word`` in the id-sorted ``ids`` (count >= 1), or -1.  A branch-free
 * lower bound: no mispredictions, so the CPU overlaps the searches of a batch's words. */
static inline int32_t find_id(const ix_u32 *ids, Py_ssize_t count, uint32_t word) {
    const ix_u32 *first = ids;
    Py_ssize_t len = count;
    while (len > 1) {
        Py_ssize_t half = len >> 1;
        first += first[half - 1] < word ? half : 0;
        len -= half;
    }
    return *first == word ? (int32_t)(first - ids) : -1;
}

/* entry(word): building a term looks up fixed n-grams one at a time (numpy's
 * searchsorted with a Python int converts the whole id array first). */
static PyObject *PatternView_entry(PatternView *v, PyObject *arg) {
    if (!v->n_buffers) {
        PyErr_SetString(PyExc_RuntimeError, "PatternView.entry before PatternView.__init__ succeeded");
        return NULL;
    }
    PyObject *number = PyNumber_Index(arg);  /* any integer, numpy's too */
    if (!number)
        return NULL;
    int overflow;
    long long word = PyLong_AsLongLongAndOverflow(number, &overflow);
    Py_DECREF(number);
    if (word == -1 && PyErr_Occurred())
        return NULL;
    int32_t at = !overflow && word >= 0 && word <= UINT32_MAX ? find_id(v->ids, v->count, (uint32_t)word) : -1;
    if (at < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(dd)", (double)v->alpha[at], v->beta ? (double)v->beta[at] : 0.0);
}

static PyMethodDef PatternView_methods[] = {
    {"entry", (PyCFunction)PatternView_entry, METH_O,
     "entry(word) -> (alpha, beta) of ``A word B``, or None when word is not in the slot."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PatternViewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.query._kernel.PatternView",
    .tp_basicsize = sizeof(PatternView),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "PatternView(ids, alpha, beta, by_score, max_beta, vocab_size)\n\n"
              "One pattern's arrays as the search kernel reads them (see Pattern.view).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)PatternView_init,
    .tp_dealloc = (destructor)PatternView_dealloc,
    .tp_methods = PatternView_methods,
};

/* ---------------------------------------------------------------- term views */

#define BETA_PATTERN 0    /* StepSpec.beta holds beta(A x B) */

/* One step of a term's back-off chain: the pattern whose alpha applies when x is in it
 * (or NULL), and where the back-off weight comes from. */
typedef struct {
    PatternView *alpha;          /* a reference, or NULL */
    PatternView *beta;           /* a reference when beta_kind == BETA_PATTERN */
    int beta_kind;               /* BETA_PATTERN, BETA_CONST or BETA_UNIGRAM */
    double beta_const;
} StepSpec;

/* A term of lp(x) as the search reads it (Python's Term.view), made once per term so
 * that a search reads one attribute per term instead of walking Step objects. */
typedef struct TermView {
    PyObject_HEAD
    int n_steps;
    int base_unigram;            /* after the last step: unigram alpha of x (1) or ``base`` (0) */
    double base;
    StepSpec *steps;             /* longest context first; NULL until __init__ succeeded */
} TermView;

static void TermView_clear(TermView *tv) {
    for (int s = 0; s < tv->n_steps; s++) {
        Py_XDECREF(tv->steps[s].alpha);
        Py_XDECREF(tv->steps[s].beta);
    }
    PyMem_Free(tv->steps);
    tv->steps = NULL;
    tv->n_steps = -1;
}

/* Sets *view to the PatternView ``object``, a new reference; -1 if it is not one. */
static int pattern_view_arg(PyObject *object, PatternView **view, const char *what) {
    if (PyObject_TypeCheck(object, &PatternViewType) && ((PatternView *)object)->n_buffers) {
        Py_INCREF(object);
        *view = (PatternView *)object;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s must be a PatternView", what);
    return -1;
}

static int TermView_init(TermView *tv, PyObject *args, PyObject *kwds) {
    static char *names[] = {"alphas", "betas", "base", NULL};
    PyObject *alphas, *betas, *base;
    if (tv->steps) {
        PyErr_SetString(PyExc_RuntimeError, "TermView is already initialised");
        return -1;
    }
    tv->n_steps = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O", names, &PyTuple_Type, &alphas, &PyTuple_Type, &betas, &base))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(alphas);
    if (PyTuple_GET_SIZE(betas) != n || n > 64) {
        PyErr_SetString(PyExc_ValueError, "alphas and betas: one of each per step (at most 64 steps)");
        return -1;
    }
    tv->base_unigram = base == Py_None;
    tv->base = tv->base_unigram ? 0.0 : PyFloat_AsDouble(base);
    if (PyErr_Occurred())
        return -1;
    if (!(tv->steps = PyMem_Calloc(n ? (size_t)n : 1, sizeof(StepSpec)))) {
        PyErr_NoMemory();
        return -1;
    }
    tv->n_steps = 0;
    for (Py_ssize_t s = 0; s < n; s++, tv->n_steps++) {
        StepSpec *spec = &tv->steps[s];
        PyObject *alpha = PyTuple_GET_ITEM(alphas, s), *beta = PyTuple_GET_ITEM(betas, s);
        if (alpha != Py_None && pattern_view_arg(alpha, &spec->alpha, "an alpha") < 0)
            break;
        if (beta == Py_None) {
            spec->beta_kind = BETA_UNIGRAM;
        } else if (PyFloat_Check(beta)) {
            spec->beta_kind = BETA_CONST;
            spec->beta_const = PyFloat_AS_DOUBLE(beta);
        } else if (pattern_view_arg(beta, &spec->beta, "a beta") < 0) {
            break;
        } else {
            spec->beta_kind = BETA_PATTERN;
        }
    }
    if (tv->n_steps < n) {
        tv->n_steps++;  /* the step that failed may hold its alpha */
        TermView_clear(tv);
        return -1;
    }
    return 0;
}

static void TermView_dealloc(TermView *tv) {
    TermView_clear(tv);
    Py_TYPE(tv)->tp_free((PyObject *)tv);
}

static PyTypeObject TermViewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.query._kernel.TermView",
    .tp_basicsize = sizeof(TermView),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TermView(alphas, betas, base)\n\n"
              "One term's back-off chain as the search reads it (see Term.view): per step, longest\n"
              "context first, the PatternView whose alpha applies (or None) and the back-off weight\n"
              "(a float, a PatternView holding beta(A x B), or None: the unigram beta of x); ``base``\n"
              "a float, or None for the unigram alpha of x.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TermView_init,
    .tp_dealloc = (destructor)TermView_dealloc,
};

/* ---------------------------------------------------------------- term table */

/* The term of s_j at target t depends on the words around t only: ``left`` =
 * s[max(0, j-N+1) .. t-1] and ``after`` = s[t+1 .. j] (query/terms.py).  A TermTable
 * maps such keys to TermViews, so that a search finds its terms without Python; a key
 * not in it is built by a Python callable (Patterns.term).  Emptied when it reaches
 * ``max_terms`` (the views it drops are rebuilt from cached patterns when met again). */
typedef struct {
    uint64_t hash;         /* 0: an empty slot */
    size_t key;            /* offset of the key's words in TermTable.words */
    uint32_t n_left, n_after;
    TermView *view;        /* a reference */
} TermSlot;

typedef struct {
    PyObject_HEAD
    Py_ssize_t order, max_terms;
    TermSlot *slots;       /* open addressing, linear probing; capacity a power of 2 */
    size_t capacity, count;
    uint32_t *words;       /* every key's words, left then after, back to back */
    size_t n_words, cap_words;
} TermTable;

static uint64_t key_hash(const uint32_t *words, uint32_t n_left, uint32_t n_after) {
    uint64_t h = 0xcbf29ce484222325ull ^ ((uint64_t)n_left << 32 | n_after);
    for (uint32_t i = 0; i < n_left + n_after; i++)
        h = (h ^ words[i]) * 0x100000001b3ull;  /* FNV-1a over words */
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h ? h : 1;
}

static TermSlot *find_slot(const TermTable *table, uint64_t hash, const uint32_t *words, uint32_t n_left,
                           uint32_t n_after) {
    size_t mask = table->capacity - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        TermSlot *slot = &table->slots[i];
        if (!slot->hash || (slot->hash == hash && slot->n_left == n_left && slot->n_after == n_after &&
                            (n_left + n_after == 0 ||
                             !memcmp(&table->words[slot->key], words, (n_left + n_after) * sizeof(uint32_t)))))
            return slot;
    }
}

static void TermTable_empty(TermTable *table) {
    for (size_t i = 0; i < table->capacity; i++)
        if (table->slots[i].hash)
            Py_DECREF(table->slots[i].view);
    if (table->slots)
        memset(table->slots, 0, table->capacity * sizeof(TermSlot));
    table->count = 0;
    table->n_words = 0;
}

/* Adds ``view`` (a new reference, taken) under its key; -1 on error. */
static int table_add(TermTable *table, uint64_t hash, const uint32_t *words, uint32_t n_left, uint32_t n_after,
                     TermView *view) {
    if ((Py_ssize_t)table->count >= table->max_terms)
        TermTable_empty(table);
    if (2 * (table->count + 1) > table->capacity) {  /* load at most 1/2: grow */
        size_t capacity = table->capacity ? 2 * table->capacity : 1024;
        TermSlot *slots = PyMem_Calloc(capacity, sizeof(TermSlot)), *old = table->slots;
        if (!slots) {
            Py_DECREF(view);
            PyErr_NoMemory();
            return -1;
        }
        size_t old_capacity = table->capacity;
        table->slots = slots;
        table->capacity = capacity;
        for (size_t i = 0; i < old_capacity; i++)
            if (old[i].hash) {
                size_t j = old[i].hash & (capacity - 1);
                while (slots[j].hash)
                    j = (j + 1) & (capacity - 1);
                slots[j] = old[i];
            }
        PyMem_Free(old);
    }
    size_t n = n_left + n_after;
    if (table->n_words + n > table->cap_words) {
        size_t cap = 2 * (table->n_words + n) + 1024;
        uint32_t *grown = PyMem_Realloc(table->words, cap * sizeof(uint32_t));
        if (!grown) {
            Py_DECREF(view);
            PyErr_NoMemory();
            return -1;
        }
        table->words = grown;
        table->cap_words = cap;
    }
    TermSlot *slot = find_slot(table, hash, words, n_left, n_after);
    if (slot->hash) {  /* added meanwhile (by the Python code that built it): replace */
        Py_DECREF(slot->view);
        slot->view = view;
        return 0;
    }
    if (n)
        memcpy(&table->words[table->n_words], words, n * sizeof(uint32_t));
    *slot = (TermSlot){hash, table->n_words, n_left, n_after, view};
    table->n_words += n;
    table->count++;
    return 0;
}

/* The TermView of ``term`` (an object with a ``view`` attribute), a new reference; NULL on error. */
static TermView *term_view_of(PyObject *term) {
    PyObject *view = PyObject_GetAttr(term, str_view);
    if (view && (!PyObject_TypeCheck(view, &TermViewType) || !((TermView *)view)->steps)) {
        Py_DECREF(view);
        PyErr_SetString(PyExc_TypeError, "Term.view must be an initialised TermView");
        return NULL;
    }
    return (TermView *)view;
}

static int TermTable_init(TermTable *table, PyObject *args, PyObject *kwds) {
    static char *names[] = {"order", "max_terms", NULL};
    Py_ssize_t order, max_terms;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nn", names, &order, &max_terms))
        return -1;
    if (order < 1 || order > 1000 || max_terms < 1) {
        PyErr_SetString(PyExc_ValueError, "order must be within 1 ... 1000 and max_terms at least 1");
        return -1;
    }
    TermTable_empty(table);
    table->order = order;
    table->max_terms = max_terms;
    return 0;
}

static void TermTable_dealloc(TermTable *table) {
    TermTable_empty(table);
    PyMem_Free(table->slots);
    PyMem_Free(table->words);
    Py_TYPE(table)->tp_free((PyObject *)table);
}

static PyObject *TermTable_clear(TermTable *table, PyObject *unused) {
    (void)unused;
    TermTable_empty(table);
    Py_RETURN_NONE;
}

static PyObject *TermTable_size(TermTable *table, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(table->count);
}

static PyMethodDef TermTable_methods[] = {
    {"clear", (PyCFunction)TermTable_clear, METH_NOARGS, "Drops every term."},
    {"size", (PyCFunction)TermTable_size, METH_NOARGS, "The number of terms held."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TermTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.query._kernel.TermTable",
    .tp_basicsize = sizeof(TermTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "TermTable(order, max_terms)\n\n"
              "The TermViews of the terms met so far, by the words around the target they depend\n"
              "on (see Kernel.search_at); emptied when it holds max_terms.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TermTable_init,
    .tp_dealloc = (destructor)TermTable_dealloc,
    .tp_methods = TermTable_methods,
};

/* ---------------------------------------------------------------- sorted lists */

/* Makes the list's next entries (words and alphas) from the depth on readable, gathering
 * them when they are not in score order already, and prefetches the words' flags, which
 * the search tests next. */
static void gather_ahead(const Kernel *k, List *list) {
    Py_ssize_t n = list->length - list->depth;
    n = n < list->ahead ? n : list->ahead;
    if (list->view && sorted_prefix(list->view, list->depth + n)) {
        list->words = (const ix_u32 *)&list->view->sorted_ids[list->depth];
        list->alphas = &list->view->sorted_alpha[list->depth];
    } else if (!list->order) {
        list->words = &list->ids[list->depth];
        list->alphas = &list->alpha[list->depth];
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t at = list->order[list->depth + i];
            list->own_words[i] = list->ids[at];
            list->own_alphas[i] = list->alpha[at];
        }
        list->words = list->own_words;
        list->alphas = list->own_alphas;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (list->words[i] < k->vocab_size)
            __builtin_prefetch(&k->flags[list->words[i]]);
    list->ahead_start = list->depth;
    list->ahead_end = list->depth + n;
    list->ahead = list->ahead * 2 < LIST_AHEAD ? list->ahead * 2 : LIST_AHEAD;
}

/* A list of ``length`` (>= 1) entries, none read yet. */
static void start_list(const Kernel *k, List *list, PatternView *view, const ix_u32 *order, const ix_u32 *ids,
                       const ix_f32 *alpha, Py_ssize_t length) {
    list->view = view;
    list->order = order;
    list->ids = ids;
    list->alpha = alpha;
    list->depth = 0;
    list->length = length;
    list->ahead = LIST_FIRST_AHEAD;
    gather_ahead(k, list);
    list->sup = list->alphas[0];
}

/* ---------------------------------------------------------------- reading the terms */

/* Index of the pattern ``v`` in k->pats, adding it (and a reference to it) when new;
 * -1 on error. */
static int add_pattern(Kernel *k, PatternView *v, int *n_pats) {
    if (v->vocab_size != k->vocab_size) {
        PyErr_SetString(PyExc_ValueError, "a pattern of another index");
        return -1;
    }
    for (int i = 0; i < *n_pats; i++)
        if (k->pats[i].view == v)
            return i;
    if (GROW(k->pats, k->cap_pats, *n_pats + 1) < 0)
        return -1;
    Pat *p = &k->pats[(*n_pats)++];
    memset(p, 0, sizeof(*p));
    Py_INCREF(v);  /* its arrays and map stay valid during the search */
    p->view = v;
    p->list = NONE;
    p->ids = v->ids;
    p->alpha = v->alpha;
    p->beta = v->beta;
    p->by_score = v->by_score;
    p->count = v->count;
    p->beta_sup = v->beta_sup;
    p->map = is_big(v->count, v->vocab_size) ? rank_map(v) : NULL;
    p->supers = p->map ? v->supers : NULL;
    return *n_pats - 1;
}

/* Drops the references to the views of the search's patterns. */
static void release_pats(Kernel *k, int n_pats) {
    for (int i = 0; i < n_pats; i++)
        Py_DECREF(k->pats[i].view);
}

/* Reads the terms ``views`` (n_terms >= 1 initialised TermViews) into
 * k->terms/steps/pats/lists.  Returns n_terms, -1 on error (the patterns added so far,
 * *n_pats of them, still hold references: release_pats). */
static int read_terms(Kernel *k, TermView *const *views, int n_terms, int *n_pats) {
    int n_steps = 0;
    if (GROW(k->terms, k->cap_terms, n_terms) < 0)
        return -1;
    if (GROW(k->term_sup, k->cap_term_sup, n_terms) < 0 || GROW(k->batch_sup, k->cap_batch_sup, n_terms) < 0)
        return -1;
    for (int t = 0; t < n_terms; t++) {
        const TermView *tv = views[t];
        TermC *tc = &k->terms[t];
        tc->first = n_steps;
        tc->n = tv->n_steps;
        tc->base_unigram = tv->base_unigram;
        tc->base = tv->base;
        int bad = GROW(k->steps, k->cap_steps, n_steps + tv->n_steps) < 0;
        for (int s = 0; s < tv->n_steps && !bad; s++) {
            const StepSpec *spec = &tv->steps[s];
            StepC *sc = &k->steps[n_steps++];
            sc->alpha = spec->alpha ? add_pattern(k, spec->alpha, n_pats) : NONE;
            bad = spec->alpha && sc->alpha < 0;
            if (bad)
                break;
            sc->beta = spec->beta_kind;
            sc->beta_const = spec->beta_const;
            if (spec->beta_kind == BETA_CONST) {
                sc->beta_sup = spec->beta_const;
            } else if (spec->beta_kind == BETA_UNIGRAM) {
                /* beta(x) of any word is at most the largest unigram back-off */
                sc->beta_sup = k->unigram_beta_sup;
            } else if ((sc->beta = add_pattern(k, spec->beta, n_pats)) < 0) {
                bad = 1;
            } else {
                /* beta(A x B) is stored for some x, 0 for the rest (the paper bounds it
                 * by 0, wrong for positive weights: ALGORITHM.md) */
                sc->beta_sup = k->pats[sc->beta].beta_sup;
            }
        }
        if (bad)
            return -1;
    }
    /* The sorted lists: each pattern some step reads by alpha, then the unigram list. */
    int n = 0;
    if (GROW(k->lists, k->cap_lists, *n_pats + 1) < 0 || GROW(k->binds, k->cap_binds, *n_pats + 1) < 0 ||
        GROW(k->keep, k->cap_keep, *n_pats + 1) < 0 || GROW(k->binding, k->cap_binding, *n_pats + 1) < 0 ||
        GROW(k->pos, k->cap_pos, *n_pats * MAX_BATCH) < 0)
        return -1;
    for (int s = 0; s < n_steps; s++) {
        StepC *step = &k->steps[s];
        step->alpha_pos = step->alpha == NONE ? NULL : &k->pos[step->alpha * MAX_BATCH];
        step->alpha_values = step->alpha == NONE ? NULL : k->pats[step->alpha].alpha;
        step->beta_pos = step->beta < 0 ? NULL : &k->pos[step->beta * MAX_BATCH];
        step->beta_values = step->beta < 0 ? NULL : k->pats[step->beta].beta;
    }
    for (int i = 0; i < *n_pats; i++) {
        int used = 0;
        for (int s = 0; s < n_steps; s++)
            used |= k->steps[s].alpha == i;
        if (used) {
            Pat *p = &k->pats[i];
            p->list = n;
            start_list(k, &k->lists[n++], is_big(p->count, k->vocab_size) ? p->view : NULL, p->by_score, p->ids,
                       p->alpha, p->count);
        }
    }
    for (int s = 0; s < n_steps; s++)
        k->steps[s].list = k->steps[s].alpha == NONE ? NONE : k->pats[k->steps[s].alpha].list;
    int unigram = k->unigram_list = n;
    start_list(k, &k->lists[n++], NULL, NULL, k->unigram_order, k->sorted_alpha, k->vocab_size);
    for (int l = 0; l < n; l++)
        k->binds[l] = 0;
    /* Each term's bound alternatives (see bound()), base last. */
    if (GROW(k->alts, k->cap_alts, n_steps + n_terms) < 0)
        return -1;
    int n_alts = 0;
    for (int t = 0; t < n_terms; t++) {
        TermC *term = &k->terms[t];
        double offset = 0.0;
        term->first_alt = n_alts;
        for (int s = term->first; s < term->first + term->n; s++) {
            if (k->steps[s].list != NONE)
                k->alts[n_alts++] = (Alt){k->steps[s].list, offset};
            offset += k->steps[s].beta_sup;
        }
        if (term->base_unigram)
            k->alts[n_alts++] = (Alt){unigram, offset};
        term->fixed = term->base_unigram ? -INFINITY : term->base + offset;
        term->n_alts = n_alts - term->first_alt;
        term->frozen = 0;
        term->arg = NONE;
    }
    return n_terms;
}

/* Gives the smallest patterns without a rank map a membership bit each (as many as
 * there are bits) and marks their words in k->flags. */
static void mark_members(Kernel *k, int n_pats) {
    int next = 0;
    for (int i = 0; i < n_pats && next < MEMBER_BITS; i++) {
        Pat *p = &k->pats[i];
        if (p->map || is_big(p->count, k->vocab_size))
            continue;
        p->member = (uint8_t)(2u << next++);
        for (Py_ssize_t j = 0; j < p->count; j++)
            k->flags[p->ids[j]] |= p->member;
    }
}

/* Clears every flag the search set: the words read, the marked patterns' words and the
 * excluded words. */
static void clear_flags(Kernel *k, int n_pats, Py_ssize_t n_evaluated, const uint32_t *excluded,
                        Py_ssize_t n_excluded) {
    for (Py_ssize_t i = 0; i < n_evaluated; i++)
        k->flags[k->evaluated[i]] = 0;
    for (Py_ssize_t i = 0; i < n_excluded; i++)
        k->flags[excluded[i]] = 0;
    for (int i = 0; i < n_pats; i++)
        if (k->pats[i].member)
            for (Py_ssize_t j = 0; j < k->pats[i].count; j++)
                k->flags[k->pats[i].ids[j]] = 0;
    if (k->bos >= 0)
        k->flags[k->bos] = SEEN;
}

/* ---------------------------------------------------------------- exact scores */

/* Position of ``word`` in pattern p's id-sorted arrays, or -1. */
static inline int32_t locate(const Kernel *k, const Pat *p, uint32_t word) {
    if (p->member && !(k->flags[word] & p->member))
        return -1;
    if (p->map) {
        size_t at = word >> 6;
        if (p->supers) {  /* two levels: the Block of ``word``, or map[0] (empty) */
            Super super = p->supers[word / SUPER_WORDS];
            uint64_t j = at & 63;
            at = super.present >> j & 1 ? super.first + popcount64(super.present & ((1ull << j) - 1)) : 0;
        }
        Block block = p->map[at];
        uint64_t bit = 1ull << (word & 63);
        return block.bits & bit ? (int32_t)(block.rank + popcount64(block.bits & (bit - 1))) : -1;
    }
    return find_id(p->ids, p->count, word);
}

/* Where a step's back-off weight comes from, for step_loop: the kinds of StepC.beta,
 * with patterns split by whether they store weights. */
enum { FROM_CONST, FROM_UNIGRAM, FROM_PATTERN, FROM_ZERO };

/* One step for the live words: value = alpha of the step's pattern if it holds x (when
 * the step has one), else beta + value.  Inlined once per (kind, has_alpha) pair, so
 * each loop is of one kind with no dispatch per word; the choice "is x in this
 * pattern" is a select in the source (which steps hold a word is a coin toss for the
 * predictor; the loads it skips are located and prefetched). */
static inline __attribute__((always_inline)) void step_loop(const Kernel *k, const StepC *step, int from,
                                                            int has_alpha, const uint32_t *words, const int *live,
                                                            int n_live, double *value) {
    for (int j = 0; j < n_live; j++) {
        int c = live[j];
        double beta;
        if (from == FROM_CONST) {
            beta = step->beta_const;
        } else if (from == FROM_UNIGRAM) {
            beta = (double)k->unigram[words[c]].beta;
        } else if (from == FROM_PATTERN) {
            int32_t pos = step->beta_pos[c];
            double stored = (double)step->beta_values[pos < 0 ? 0 : pos];
            beta = pos < 0 ? 0.0 : stored;
        } else {  /* a pattern without back-off weights: they are 0 */
            beta = 0.0;
        }
        double backed_off = beta + value[c];
        if (has_alpha) {
            int32_t pos = step->alpha_pos[c];
            double alpha = (double)step->alpha_values[pos < 0 ? 0 : pos];
            value[c] = pos < 0 ? backed_off : alpha;
        } else {
            value[c] = backed_off;
        }
    }
}

/* One term for the live words of a batch (``value`` by batch column), by the back-off
 * recursion from the shortest step up: value(s) = alpha of step s if its pattern holds
 * x, else beta(s) + value(s+1), from the base (unigram alpha of x, or a constant).  So
 * the longest step holding x gives its alpha, plus the back-off weights of the longer
 * steps added shortest first (the order of the exhaustive scorer).  A step at a time
 * over all the words (step_loop). */
static void score_term(const Kernel *k, const TermC *t, const uint32_t *words, const int *live, int n_live,
                       double *value) {
    const StepC *steps = &k->steps[t->first];
    if (t->base_unigram)
        for (int j = 0; j < n_live; j++)
            value[live[j]] = (double)k->unigram[words[live[j]]].alpha;
    else
        for (int j = 0; j < n_live; j++)
            value[live[j]] = t->base;
    for (int s = t->n - 1; s >= 0; s--) {
        const StepC *step = &steps[s];
        int from = step->beta == BETA_CONST     ? FROM_CONST
                   : step->beta == BETA_UNIGRAM ? FROM_UNIGRAM
                   : step->beta_values          ? FROM_PATTERN
                                                : FROM_ZERO;
        switch (2 * from + (step->alpha_pos != NULL)) {
#define STEP_CASE(kind)                                                          \
    case 2 * kind:                                                               \
        step_loop(k, step, kind, 0, words, live, n_live, value);                 \
        break;                                                                   \
    case 2 * kind + 1:                                                           \
        step_loop(k, step, kind, 1, words, live, n_live, value);                 \
        break;
            STEP_CASE(FROM_CONST)
            STEP_CASE(FROM_UNIGRAM)
            STEP_CASE(FROM_PATTERN)
            STEP_CASE(FROM_ZERO)
#undef STEP_CASE
        }
    }
}

/* Positions in pattern i of the live words of the current batch, once per batch (live
 * words only get fewer, so those located for an earlier term cover the later ones),
 * prefetching the alpha and beta entries score_term will read.  The loop's loads are independent across words: the CPU overlaps their
 * cache misses. */
TARGET_CLONES static void locate_live(Kernel *k, int i, const uint32_t *words, const int *live, int n_live) {
    Pat *p = &k->pats[i];
    if (p->located == k->batch_stamp)
        return;
    p->located = k->batch_stamp;
    int32_t *pos = &k->pos[i * MAX_BATCH];
    for (int j = 0; j < n_live; j++) {
        int c = live[j];
        int32_t at = pos[c] = locate(k, p, words[c]);
        if (at >= 0) {
            __builtin_prefetch(&p->alpha[at]);
            if (p->beta)
                __builtin_prefetch(&p->beta[at]);
        }
    }
}

/* Exact lp(x) of the n words of a batch, term by term (summed in term order).  ``sup``
 * holds each term's bound from before any of these words was read, so it bounds their
 * terms too; after each term, a word whose partial sum plus the later terms' sups is
 * below ``threshold`` (the count-th best score so far) is dropped: ``count`` words
 * already beat it, so it is never listed, and its other terms need no look-ups (after
 * the last term, it need not wait in the heaps).
 * Returns how many words are kept, their batch columns in ``live``. */
static int score_batch(Kernel *k, int n_terms, const uint32_t *words, int n, const double *sup,
                       double threshold, double *total, int *live) {
    k->batch_stamp++;
    int n_live = n;
    for (int c = 0; c < n; c++)
        live[c] = c;
    for (int t = 0; t < n_terms && n_live; t++) {
        const TermC *term = &k->terms[t];
        for (int s = term->first; s < term->first + term->n; s++) {
            if (k->steps[s].alpha != NONE)
                locate_live(k, k->steps[s].alpha, words, live, n_live);
            if (k->steps[s].beta >= 0)
                locate_live(k, k->steps[s].beta, words, live, n_live);
        }
        double value[MAX_BATCH];
        score_term(k, term, words, live, n_live, value);
        for (int j = 0; j < n_live; j++) {
            int c = live[j];
            total[c] = t ? total[c] + value[c] : value[c];
        }
        if (!isfinite(threshold))  /* -inf: fewer than count scored yet */
            continue;
        /* kept: partial sum + rest >= threshold, less the bound's slack for rounding,
         * BOUND_SLACK * (1 + |sum|), here taken for any |sum| up to 3 + 4 |threshold|
         * (larger sums are far above or below the threshold) */
        double cut = threshold - 4.0 * BOUND_SLACK * (1.0 + fabs(threshold));
        for (int u = t + 1; u < n_terms; u++)
            cut -= sup[u];
        int kept = 0;
        for (int j = 0; j < n_live; j++) {
            live[kept] = live[j];
            kept += total[live[j]] >= cut;
        }
        n_live = kept;
    }
    return n_live;
}

/* ---------------------------------------------------------------- the bound */

/* Upper bound on lp(x) of every word not read yet; its terms' bounds go to k->term_sup,
 * and k->binding lists the lists that bind it (reading any other list cannot lower it).
 *
 * A term is the largest of its alternatives: "x in the pattern of step s", bounded by
 * that list's sup plus the beta sups of the longer steps (an unread word is not above
 * the list's next entry, and a word absent from the pattern takes no alpha from it),
 * and the base plus every beta sup.  The sum over terms bounds lp(x).
 *
 * Sups only decrease, so a term whose largest alternative is a constant keeps its bound
 * (frozen), and a binding list keeps binding the same terms while its sup stays above
 * k->keep[list] (the runner-up alternatives): the search reads on without recomputing
 * the bound until then. */
static double bound(Kernel *k, int n_terms) {
    const List *lists = k->lists;
    uint64_t stamp = ++k->bound_stamp;
    double total = 0.0;
    k->n_binding = 0;
    for (int t = 0; t < n_terms; t++) {
        TermC *term = &k->terms[t];
        if (term->frozen) {
            total += k->term_sup[t];
            continue;
        }
        int arg = term->arg;
        double best, keep;
        if (arg != NONE && lists[arg].sup > term->arg_keep) {
            /* the same list is still the largest alternative: the others only fell */
            best = lists[arg].sup + term->arg_offset;
            keep = term->arg_keep;
        } else {
            const Alt *alts = &k->alts[term->first_alt];
            double second = -INFINITY, offset = 0.0;
            best = -INFINITY;
            arg = NONE;
            for (int a = 0; a < term->n_alts; a++) {
                double value = lists[alts[a].list].sup + alts[a].offset;
                if (value > best) {
                    second = best;
                    best = value;
                    arg = alts[a].list;
                    offset = alts[a].offset;
                } else if (value > second) {
                    second = value;
                }
            }
            if (term->fixed > best) {
                best = term->fixed;
                arg = NONE;
            } else if (term->fixed > second) {
                second = term->fixed;
            }
            keep = second - offset;
            term->arg = arg;
            term->arg_offset = offset;
            term->arg_keep = keep;
        }
        total += best;
        k->term_sup[t] = best;
        if (arg == NONE) {
            term->frozen = 1;
            continue;
        }
        if (k->binds[arg] != stamp) {
            k->binds[arg] = stamp;
            k->binding[k->n_binding++] = arg;
            k->keep[arg] = keep;
        } else if (keep > k->keep[arg]) {
            k->keep[arg] = keep;
        }
    }
    /* No list binds only if no term predicts x (never so for position_terms' terms):
     * then reading cannot lower the bound, and exactness needs every word read. */
    if (!k->n_binding) {
        int unigram = k->unigram_list;
        k->binds[unigram] = stamp;
        k->binding[k->n_binding++] = unigram;
        k->keep[unigram] = INFINITY;
    }
    return isfinite(total) ? total + BOUND_SLACK * (1.0 + fabs(total)) : total;
}

/* Reads the next entry of ``list``; returns its word. */
static inline uint32_t read_list(const Kernel *k, List *list) {
    if (list->depth >= list->length)  /* nothing left: no word (the caller skips ids >= V) */
        return UINT32_MAX;
    uint32_t word = list->words[list->depth++ - list->ahead_start];
    if (list->depth == list->length) {
        list->sup = -INFINITY;
    } else {
        if (list->depth == list->ahead_end)
            gather_ahead(k, list);
        list->sup = list->alphas[list->depth - list->ahead_start];
    }
    return word;
}

/* ---------------------------------------------------------------- pending heap */

static inline int before(const Entry *a, const Entry *b) {  /* a ranks before b */
    return a->score > b->score || (a->score == b->score && a->word < b->word);
}

static void heap_push(Entry *heap, Py_ssize_t *n, Entry e) {
    Py_ssize_t i = (*n)++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!before(&e, &heap[parent]))
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static Entry heap_pop(Entry *heap, Py_ssize_t *n) {
    Entry top = heap[0], last = heap[--(*n)];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= *n)
            break;
        if (child + 1 < *n && before(&heap[child + 1], &heap[child]))
            child++;
        if (!before(&heap[child], &last))
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (*n > 0)
        heap[i] = last;
    return top;
}

/* Keeps the best ``size`` scores in the min-heap ``top``. */
static void top_push(double *top, Py_ssize_t *n, Py_ssize_t size, double score) {
    Py_ssize_t i;
    if (*n < size) {
        for (i = (*n)++; i > 0 && top[(i - 1) / 2] > score; i = (i - 1) / 2)
            top[i] = top[(i - 1) / 2];
        top[i] = score;
        return;
    }
    if (score <= top[0])
        return;
    for (i = 0;;) {  /* replace the smallest, sift down */
        Py_ssize_t child = 2 * i + 1;
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

/* The search of one position whose terms are ``views``: (ids, scores) as bytes.  The
 * ``excluded`` words (ids < V) are no candidates: marked SEEN before the search, they are
 * never scored or listed, and the cap and the -p rule count only the other words. */
static PyObject *run_search(Kernel *k, TermView *const *views, int n_views, Py_ssize_t count,
                            PyObject *mass_object, const uint32_t *excluded, Py_ssize_t n_excluded) {
    int use_mass = mass_object != Py_None;
    double mass = use_mass ? PyFloat_AsDouble(mass_object) : 0.0;
    if (use_mass && PyErr_Occurred())
        return NULL;
    /* As the original, the -p rule applies only for P < 1: with P = 1 it would stop once
     * S / (S + p (V - L)) rounds to 1, far down the list but before its end. */
    use_mass = use_mass && mass < 1.0;
    /* The original lists at most V - 1 substitutes (one word is <s>), even for a model
     * without <s>. */
    if (count > k->vocab_size - 1)
        count = k->vocab_size - 1;
    int n_pats = 0;
    cached.search++;
    int n_terms = read_terms(k, views, n_views, &n_pats);
    if (n_terms < 0) {
        release_pats(k, n_pats);
        return NULL;
    }
    mark_members(k, n_pats);
    Py_ssize_t candidates = k->vocab_size;  /* V of the cap and the -p rule: the words not excluded */
    for (Py_ssize_t i = 0; i < n_excluded; i++) {
        if (!(k->flags[excluded[i]] & SEEN)) {  /* <s> (SEEN already) and repeats count once */
            k->flags[excluded[i]] |= SEEN;
            candidates--;
        }
    }
    if (count > candidates - 1)
        count = candidates - 1;
    Py_ssize_t n_evaluated = 0, n_pending = 0, n_listed = 0, reads = 0;
    Py_ssize_t n_top = 0, top_size = count < k->vocab_size ? count : k->vocab_size;
    double mass_sum = 0.0, batch_scores[MAX_BATCH];
    int unigram = k->unigram_list, done = count <= 0, live[MAX_BATCH];
    int need_bound = 1;  /* the binding lists may have changed since the bound was computed */
    int least_batch = count < MIN_BATCH ? MIN_BATCH : count > MAX_BATCH ? MAX_BATCH : (int)count;
    while (!done) {
        /* Read new words into a batch: rounds of one entry from each binding list. */
        uint32_t *batch = &k->evaluated[n_evaluated];
        int n = 0, size = (int)(n_evaluated / 8);
        size = size < least_batch ? least_batch : size > MAX_BATCH ? MAX_BATCH : size;
        while (n < size && k->lists[unigram].depth < k->vocab_size) {
            /* stop reading once the best ``count`` scores so far all beat every unread
             * word: the words of this batch still get scored, no more are needed */
            if (need_bound) {
                need_bound = 0;
                double unread = bound(k, n_terms);
                if (n_top == top_size && unread < k->top[0])
                    break;
            }
            if (n == 0)  /* bounds on the terms of every word the batch will read */
                memcpy(k->batch_sup, k->term_sup, n_terms * sizeof(double));
            /* one entry of each list that binds (its sup is finite, so it has one left) */
            for (int b = 0; b < k->n_binding && n < size; b++) {
                int l = k->binding[b];
                uint32_t word = read_list(k, &k->lists[l]);
                reads++;
                need_bound |= k->lists[l].sup <= k->keep[l];
                if (word < k->vocab_size && !(k->flags[word] & SEEN)) {
                    k->flags[word] |= SEEN;
                    batch[n++] = word;
                    __builtin_prefetch(&k->unigram[word]);
                }
            }
        }
        double threshold = n_top == top_size ? k->top[0] : -INFINITY;
        int kept = score_batch(k, n_terms, batch, n, k->batch_sup, threshold, batch_scores, live);
        for (int j = 0; j < kept; j++) {
            double score = batch_scores[live[j]];
            heap_push(k->pending, &n_pending, (Entry){score, batch[live[j]]});
            top_push(k->top, &n_top, top_size, score);
        }
        n_evaluated += n;
        /* Pending words above the bound on unread words are final, best first. */
        int everything = k->lists[unigram].depth == k->vocab_size;
        double limit = everything ? -INFINITY : bound(k, n_terms);
        need_bound = everything; /* scoring reads no list: the next round can start from this bound */
        while (!done && n_pending && (everything || k->pending[0].score > limit)) {
            Entry e = heap_pop(k->pending, &n_pending);
            k->listed[n_listed++] = e;
            if (use_mass) {  /* the original's -p rule: stop once P <= S / (S + p (V - L)) */
                double p = pow(10.0, e.score);
                mass_sum += p;
                done = mass <= mass_sum / (mass_sum + p * (double)(candidates - n_listed));
            }
            done |= n_listed >= count;
        }
        done |= everything;
    }
    clear_flags(k, n_pats, n_evaluated, excluded, n_excluded);
    release_pats(k, n_pats);

    PyObject *ids = PyBytes_FromStringAndSize(NULL, n_listed * (Py_ssize_t)sizeof(uint32_t));
    PyObject *scores = PyBytes_FromStringAndSize(NULL, n_listed * (Py_ssize_t)sizeof(double));
    if (!ids || !scores) {
        Py_XDECREF(ids);
        Py_XDECREF(scores);
        return NULL;
    }
    uint32_t *out_ids = (uint32_t *)PyBytes_AS_STRING(ids);
    double *out_scores = (double *)PyBytes_AS_STRING(scores);
    for (Py_ssize_t i = 0; i < n_listed; i++) {
        out_ids[i] = k->listed[i].word;
        out_scores[i] = k->listed[i].score;
    }
    k->n_searches++;
    k->n_evaluated += (unsigned long long)n_evaluated;
    k->n_reads += (unsigned long long)reads;
    k->n_listed += (unsigned long long)n_listed;
    return Py_BuildValue("(NN)", ids, scores);
}

static void release_held(Kernel *k, int n) {
    for (int i = 0; i < n; i++)
        Py_DECREF(k->held[i]);
}

/* Starts a search: the kernel's scratch (k->held, the lists...) serves one at a time,
 * and a search runs Python code (Term.view, a term builder, the mass's __float__). */
static int enter(Kernel *k) {
    if (!k->ready) {
        PyErr_SetString(PyExc_RuntimeError, "Kernel search before Kernel.__init__ succeeded");
        return -1;
    }
    if (k->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Kernel search started from inside another search of the same kernel");
        return -1;
    }
    k->busy = 1;
    return 0;
}

/* search(terms, count, mass): the terms given as objects with a TermView ``view``. */
static PyObject *Kernel_search(Kernel *k, PyObject *args) {
    PyObject *terms, *mass_object, *result = NULL;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "OnO:search", &terms, &count, &mass_object) || enter(k) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(terms, "terms must be a sequence");
    if (!seq) {
        k->busy = 0;
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int held = 0;
    if (n < 1 || n > INT_MAX / 2)
        PyErr_SetString(PyExc_ValueError, "no terms");
    else if (GROW(k->held, k->cap_held, (int)n) == 0)
        for (; held < n; held++)
            if (!(k->held[held] = term_view_of(PySequence_Fast_GET_ITEM(seq, held))))
                break;
    if (held == n)
        result = run_search(k, k->held, held, count, mass_object, NULL, 0);
    release_held(k, held);
    Py_DECREF(seq);
    k->busy = 0;
    return result;
}

/* search_at(table, build, sentence, target, count, mass[, excluded]): the terms of position
 * ``target`` of ``sentence`` (word ids, <s> and </s> included), as
 * Patterns.position_terms gives them, looked up in ``table``; a term not there is
 * ``build(left, after)`` (tuples of ids), added to it.  ``excluded``: a buffer of uint32
 * word ids that are no candidates. */
static PyObject *Kernel_search_at(Kernel *k, PyObject *args) {
    TermTable *table;
    PyObject *build, *sentence, *mass_object, *result = NULL;
    Py_ssize_t target, count;
    Py_buffer excluded = {0};
    if (!PyArg_ParseTuple(args, "O!OOnnO|y*:search_at", &TermTableType, &table, &build, &sentence, &target, &count,
                          &mass_object, &excluded))
        return NULL;
    Py_ssize_t n_excluded = excluded.buf ? excluded.len / (Py_ssize_t)sizeof(uint32_t) : 0;
    const uint32_t *excluded_ids = excluded.buf;
    int bad = excluded.buf && excluded.len % (Py_ssize_t)sizeof(uint32_t) != 0;
    for (Py_ssize_t i = 0; i < n_excluded && !bad; i++)
        bad = excluded_ids[i] >= (uint32_t)k->vocab_size;
    if (bad || !table->max_terms || enter(k) < 0) {
        if (bad)
            PyErr_SetString(PyExc_ValueError, "excluded: uint32 word ids below the vocabulary size");
        else if (!table->max_terms)
            PyErr_SetString(PyExc_RuntimeError, "Kernel.search_at before TermTable.__init__ succeeded");
        PyBuffer_Release(&excluded);
        return NULL;
    }
    PyObject *seq = PySequence_Tuple(sentence);  /* a tuple stays as it is while Python code runs */
    if (!seq) {
        PyBuffer_Release(&excluded);
        k->busy = 0;
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq), order = table->order;
    int held = 0;
    if (target < 1 || target >= n) {
        PyErr_SetString(PyExc_ValueError, "target outside 1 ... len(sentence) - 1");
        goto out;
    }
    /* the words the position's terms depend on, s[lo .. hi) (the target's own slot is
     * never read), read once; each term's key is assembled after them */
    Py_ssize_t lo = target - order + 1 > 0 ? target - order + 1 : 0, hi = target + order < n ? target + order : n;
    int n_terms = (int)(hi - target);
    if (GROW(k->words, k->cap_words, (int)(hi - lo + 2 * order)) < 0 || GROW(k->held, k->cap_held, n_terms) < 0)
        goto out;
    uint32_t *window = k->words - lo, *key = k->words + (hi - lo);  /* window[i]: word s_i */
    for (Py_ssize_t i = lo; i < hi; i++) {
        unsigned long word = i == target ? 0 : PyLong_AsUnsignedLong(PyTuple_GET_ITEM(seq, i));
        if (word == (unsigned long)-1 && PyErr_Occurred())
            goto out;
        if (word > UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a word id over 32 bits");
            goto out;
        }
        window[i] = (uint32_t)word;
    }
    for (; held < n_terms; held++) {
        Py_ssize_t j = target + held, first = j - order + 1 > 0 ? j - order + 1 : 0;
        uint32_t n_left = (uint32_t)(target - first), n_after = (uint32_t)(j - target);
        memcpy(key, &window[first], n_left * sizeof(uint32_t));
        memcpy(key + n_left, &window[target + 1], n_after * sizeof(uint32_t));
        uint64_t hash = key_hash(key, n_left, n_after);
        TermSlot *slot = table->capacity ? find_slot(table, hash, key, n_left, n_after) : NULL;
        if (slot && slot->hash) {
            Py_INCREF(slot->view);
            k->held[held] = slot->view;
            continue;
        }
        /* not there: build it (Python code: it may empty or grow the table, so the slot
         * is found again; it cannot start another search of this kernel: enter()) */
        PyObject *left = PyTuple_GetSlice(seq, first, target), *after = PyTuple_GetSlice(seq, target + 1, j + 1);
        PyObject *term = left && after ? PyObject_CallFunctionObjArgs(build, left, after, NULL) : NULL;
        Py_XDECREF(left);
        Py_XDECREF(after);
        TermView *view = term ? term_view_of(term) : NULL;
        Py_XDECREF(term);
        if (!view)
            goto out;
        Py_INCREF(view);
        k->held[held] = view;
        if (table_add(table, hash, key, n_left, n_after, view) < 0) {
            held++;
            goto out;
        }
    }
    result = run_search(k, k->held, n_terms, count, mass_object, excluded_ids, n_excluded);
out:
    release_held(k, held);
    Py_DECREF(seq);
    PyBuffer_Release(&excluded);
    k->busy = 0;
    return result;
}

static PyObject *Kernel_counters(Kernel *k, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("(KKKK)", k->n_searches, k->n_evaluated, k->n_reads, k->n_listed);
}

/* ---------------------------------------------------------------- output */

/* The most bytes append_score writes for |value| < 1e4: "-10000.00000000" (rounded up). */
#define SHORT_SCORE 15

/* Appends ``value`` as Python's ``"%.8f" % value`` would.  Fast path: value * 1e8
 * rounded to an integer.  For |value| < 1e4 the product is below 2^40, so its rounding
 * error is below 2^-13; unless it lies within 1e-3 of a half, it then rounds as the
 * exact product does.  Other values go to Python's own formatter. */
static char *append_score(char *out, double value) {
    double scaled = value * 1e8, rounded = nearbyint(scaled);
    if (fabs(value) < 1e4 && fabs(fabs(scaled - rounded) - 0.5) > 1e-3) {
        static const char pairs[] =
            "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
            "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
            "8081828384858687888990919293949596979899";
        uint64_t digits = (uint64_t)fabs(rounded);
        uint32_t fraction = (uint32_t)(digits % 100000000u);
        uint64_t whole = digits / 100000000u;
        int whole_digits = 1;
        for (uint64_t rest = whole; rest >= 10; rest /= 10)
            whole_digits++;
        if (signbit(value))
            *out++ = '-';
        char *end = out + whole_digits + 9, *p = end;  /* written right to left, in place */
        for (int i = 0; i < 4; i++, fraction /= 100) {  /* two digits at a time */
            p -= 2;
            memcpy(p, &pairs[2 * (fraction % 100)], 2);
        }
        *--p = '.';
        do
            *--p = (char)('0' + whole % 10);
        while ((whole /= 10) != 0);
        return end;
    }
    char *text = PyOS_double_to_string(value, 'f', 8, 0, NULL);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    memcpy(out, text, n);
    PyMem_Free(text);
    return out + n;
}

/* The model's words by id, read in place from the index (``word_offsets``, ``word_bytes``),
 * to write output lines without making a Python object per substitute. */
typedef struct {
    PyObject_HEAD
    Py_buffer offsets_view, bytes_view;
    const ix_u64 *offsets;  /* NULL until __init__ succeeded */
    const char *bytes;
    Py_ssize_t vocab_size;
} Words;

static int Words_init(Words *w, PyObject *args, PyObject *kwds) {
    static char *names[] = {"word_offsets", "word_bytes", NULL};
    PyObject *offsets, *bytes;
    if (w->offsets) {
        PyErr_SetString(PyExc_RuntimeError, "Words is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO", names, &offsets, &bytes))
        return -1;
    if (get_view(offsets, &w->offsets_view, 'Q', -1, "word_offsets") < 0)
        return -1;
    if (get_view(bytes, &w->bytes_view, 'B', -1, "word_bytes") < 0) {
        PyBuffer_Release(&w->offsets_view);
        return -1;
    }
    const ix_u64 *o = w->offsets_view.buf;
    Py_ssize_t v = w->offsets_view.len / 8 - 1;
    int ok = v >= 0 && o[0] == 0 && o[v] <= (uint64_t)w->bytes_view.len;
    for (Py_ssize_t i = 0; ok && i < v; i++)
        ok = o[i] <= o[i + 1];
    if (!ok) {  /* every word must lie inside word_bytes: fields() reads them unchecked */
        PyBuffer_Release(&w->offsets_view);
        PyBuffer_Release(&w->bytes_view);
        PyErr_SetString(PyExc_ValueError, "word_offsets do not describe word_bytes (damaged index?)");
        return -1;
    }
    w->offsets = o;
    w->bytes = w->bytes_view.buf;
    w->vocab_size = v;
    return 0;
}

static void Words_dealloc(Words *w) {
    if (w->offsets) {
        PyBuffer_Release(&w->offsets_view);
        PyBuffer_Release(&w->bytes_view);
    }
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyObject *Words_fields(Words *w, PyObject *args) {
    PyObject *ids_object, *values_object;
    if (!w->offsets) {
        PyErr_SetString(PyExc_RuntimeError, "Words.fields before Words.__init__ succeeded");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO:fields", &ids_object, &values_object))
        return NULL;
    Py_buffer ids_view, values_view;
    if (get_view(ids_object, &ids_view, 'I', -1, "ids") < 0)
        return NULL;
    Py_ssize_t n = ids_view.len / 4;
    if (get_view(values_object, &values_view, 'd', n, "values") < 0) {
        PyBuffer_Release(&ids_view);
        return NULL;
    }
    const ix_u32 *ids = ids_view.buf;
    const double *scores = values_view.buf;
    /* room per field: the word, ' ', '\t' and the score (SHORT_SCORE bytes at most on
     * append_score's fast path, the longest %.8f of a double otherwise) */
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < n && size >= 0; i++)
        size = ids[i] < w->vocab_size ? size + (Py_ssize_t)(w->offsets[ids[i] + 1] - w->offsets[ids[i]]) + 2 +
                                            (fabs(scores[i]) < 1e4 ? SHORT_SCORE : 330)
                                      : -1;
    PyObject *result = size >= 0 ? PyBytes_FromStringAndSize(NULL, size) : NULL;
    char *start = result ? PyBytes_AS_STRING(result) : NULL, *out = start;
    for (Py_ssize_t i = 0; out && i < n; i++) {
        if (i)
            *out++ = '\t';
        uint64_t first = w->offsets[ids[i]];
        size_t length = (size_t)(w->offsets[ids[i] + 1] - first);
        /* most words are short: copy a fixed 16 bytes (the field's room after the word
         * is at least that), the bytes past the word are overwritten next */
        if (length <= 16 && first + 16 <= (uint64_t)w->bytes_view.len)
            memcpy(out, w->bytes + first, 16);
        else
            memcpy(out, w->bytes + first, length);
        out += length;
        *out++ = ' ';
        out = append_score(out, scores[i]);
    }
    PyBuffer_Release(&ids_view);
    PyBuffer_Release(&values_view);
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "word id outside the vocabulary");
        return NULL;
    }
    if (result && !out)  /* Python's formatter failed */
        Py_CLEAR(result);
    if (result && _PyBytes_Resize(&result, out - start) < 0)
        return NULL;
    return result;
}

static PyMethodDef Words_methods[] = {
    {"fields", (PyCFunction)Words_fields, METH_VARARGS,
     "fields(ids: uint32 array, values: float64 array) -> bytes\n\n"
     "``word value`` fields joined by tabs, each value as ``b\"%.8f\" % value`` would write it."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WordsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.query._kernel.Words",
    .tp_basicsize = sizeof(Words),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Words(word_offsets: uint64[V+1], word_bytes: bytes-like)\n\n"
              "The words of an open index by id, for writing output lines.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Words_init,
    .tp_dealloc = (destructor)Words_dealloc,
    .tp_methods = Words_methods,
};

/* ---------------------------------------------------------------- the type */

static int Kernel_init(Kernel *k, PyObject *args, PyObject *kwds) {
    static char *names[] = {"unigram_alpha", "unigram_beta", "unigram_order", "max_unigram_beta",
                            "bos_id", NULL};
    PyObject *alpha, *beta, *order, *bos;
    double max_unigram_beta;
    if (k->unigram_alpha) {  /* tried once already (even if it failed: it holds what it got) */
        PyErr_SetString(PyExc_RuntimeError, "Kernel is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOdO", names, &alpha, &beta, &order, &max_unigram_beta,
                                     &bos))
        return -1;
    Py_ssize_t v = PyObject_Length(alpha);
    if (v < 1 || v >= (Py_ssize_t)UINT32_MAX)
        return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_ValueError, "bad vocabulary size"), -1);
    if (get_view(alpha, &k->unigram_views[0], 'f', v, "unigram_alpha") < 0)
        return -1;
    if (get_view(beta, &k->unigram_views[1], 'f', v, "unigram_beta") < 0) {
        PyBuffer_Release(&k->unigram_views[0]);
        return -1;
    }
    if (get_view(order, &k->unigram_views[2], 'I', v, "unigram_order") < 0) {
        PyBuffer_Release(&k->unigram_views[0]);
        PyBuffer_Release(&k->unigram_views[1]);
        return -1;
    }
    k->unigram_alpha = k->unigram_views[0].buf;
    k->unigram_beta = k->unigram_views[1].buf;
    k->unigram_order = k->unigram_views[2].buf;
    k->vocab_size = v;
    k->unigram = PyMem_Malloc(v * sizeof(*k->unigram));
    k->sorted_alpha = PyMem_Malloc(v * sizeof(float));
    if (!k->unigram || !k->sorted_alpha) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < v; i++) {
        k->unigram[i].alpha = k->unigram_alpha[i];
        k->unigram[i].beta = k->unigram_beta[i];
        if (k->unigram_order[i] >= (uint32_t)v) {  /* the search indexes memory with it */
            PyErr_SetString(PyExc_ValueError, "unigram_order holds a word id outside the vocabulary");
            return -1;
        }
        k->sorted_alpha[i] = k->unigram_alpha[k->unigram_order[i]];
    }
    k->unigram_beta_sup = fmax(0.0, max_unigram_beta);
    k->flags = PyMem_Calloc(v, 1);
    k->evaluated = PyMem_Malloc(v * sizeof(uint32_t));
    k->pending = PyMem_Malloc(v * sizeof(Entry));
    k->listed = PyMem_Malloc(v * sizeof(Entry));
    k->top = PyMem_Malloc(v * sizeof(double));
    if (!k->flags || !k->evaluated || !k->pending || !k->listed || !k->top) {
        PyErr_NoMemory();
        return -1;
    }
    k->bos = -1;
    if (bos != Py_None) {
        Py_ssize_t b = PyLong_AsSsize_t(bos);
        if (b < 0 || b >= v)
            return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_ValueError, "bad bos_id"), -1);
        k->bos = b;
        k->flags[b] = SEEN;  /* never a candidate */
    }
    k->ready = 1;
    return 0;
}

static void Kernel_dealloc(Kernel *k) {
    if (k->unigram_alpha) /* set once all three views are held */
        for (int i = 0; i < 3; i++)
            PyBuffer_Release(&k->unigram_views[i]);
    PyMem_Free(k->unigram);
    PyMem_Free(k->sorted_alpha);
    PyMem_Free(k->flags);
    PyMem_Free(k->evaluated);
    PyMem_Free(k->pending);
    PyMem_Free(k->listed);
    PyMem_Free(k->pats);
    PyMem_Free(k->steps);
    PyMem_Free(k->terms);
    PyMem_Free(k->lists);
    PyMem_Free(k->binds);
    PyMem_Free(k->alts);
    PyMem_Free(k->keep);
    PyMem_Free(k->binding);
    PyMem_Free(k->term_sup);
    PyMem_Free(k->batch_sup);
    PyMem_Free(k->held);
    PyMem_Free(k->words);
    PyMem_Free(k->top);
    PyMem_Free(k->pos);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static PyMethodDef Kernel_methods[] = {
    {"search_at", (PyCFunction)Kernel_search_at, METH_VARARGS,
     "search_at(table, build, sentence, target, count, mass[, excluded]) -> (ids: bytes of uint32, scores: bytes of "
     "float64)\n\n"
     "search() of position ``target`` of ``sentence`` (word ids, <s> and </s> included), its\n"
     "terms looked up in the TermTable ``table``; those not there are ``build(left, after)``.\n"
     "``excluded`` (a buffer of uint32 word ids) are no candidates: never listed, and not counted\n"
     "as vocabulary words by the cap (V - 1) and the -p rule."},
    {"search", (PyCFunction)Kernel_search, METH_VARARGS,
     "search(terms, count, mass) -> (ids: bytes of uint32, scores: bytes of float64)\n\n"
     "The best ``count`` substitutes (at most V - 1; fewer when the -p ``mass`` rule, or\n"
     "None, stops first), best first."},
    {"counters", (PyCFunction)Kernel_counters, METH_NOARGS,
     "counters() -> (searches, words evaluated, list entries read, substitutes listed)\n\n"
     "Totals over every search this kernel ran."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KernelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.query._kernel.Kernel",
    .tp_basicsize = sizeof(Kernel),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Kernel(unigram_alpha, unigram_beta, unigram_order, max_unigram_beta, bos_id)\n\n"
              "Scratch space for the searches of one open index; one per process.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Kernel_init,
    .tp_dealloc = (destructor)Kernel_dealloc,
    .tp_methods = Kernel_methods,
};

/* ---------------------------------------------------------------- record checksums */

/* fastsubs.format.record_checksum, in C: the query checks every pattern it parses, and
 * numpy's per-call overhead made that most of a parse for the many small records. */
static PyObject *checksum(PyObject *module, PyObject *args) {
    PyObject *key_object, *body_object;
    unsigned long value_weight, key_weight;
    (void)module;
    if (!PyArg_ParseTuple(args, "OOkk:checksum", &key_object, &body_object, &value_weight, &key_weight))
        return NULL;
    Py_buffer key, body;
    if (get_view(key_object, &key, 'B', -1, "key") < 0)
        return NULL;
    if (get_view(body_object, &body, 'I', -1, "body") < 0) {
        PyBuffer_Release(&key);
        return NULL;
    }
    uint32_t total = 0, weight = (uint32_t)value_weight, step = 2u * (uint32_t)value_weight;
    const ix_u32 *words = body.buf;
    for (Py_ssize_t i = 0; i < body.len / 4; i++, weight += step)  /* (2i + 1) * w mod 2^32 */
        total += words[i] * weight;
    const uint8_t *bytes = key.buf;
    weight = (uint32_t)key_weight;
    step = 2u * (uint32_t)key_weight;
    for (Py_ssize_t j = 0; j < key.len; j++, weight += step)
        total += bytes[j] * weight;
    PyBuffer_Release(&key);
    PyBuffer_Release(&body);
    return PyLong_FromUnsignedLong(total);
}

static PyObject *set_cache_bytes(PyObject *module, PyObject *arg) {
    (void)module;
    size_t budget = PyLong_AsSize_t(arg);
    if (budget == (size_t)-1 && PyErr_Occurred())
        return NULL;
    size_t previous = cached.budget;
    cached.budget = budget;
    return PyLong_FromSize_t(previous);
}

static PyMethodDef module_methods[] = {
    {"set_cache_bytes", set_cache_bytes, METH_O,
     "set_cache_bytes(n: int) -> int (the previous budget)\n\n"
     "Bytes of rank maps and sorted prefixes this process keeps for big patterns (they only\n"
     "save time: any budget, 0 too, gives the same answers)."},
    {"checksum", checksum, METH_VARARGS,
     "checksum(key: bytes-like, body: uint32 array, value_weight, key_weight) -> int\n\n"
     "fastsubs.format.record_checksum(key, body), given the format's two weights."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "fastsubs.query._kernel",
    "The compiled parts of fastsubs-query: the per-position exact search, and output formatting.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    if (PyType_Ready(&KernelType) < 0 || PyType_Ready(&WordsType) < 0 || PyType_Ready(&PatternViewType) < 0 ||
        PyType_Ready(&TermViewType) < 0 || PyType_Ready(&TermTableType) < 0)
        return NULL;
    if (!(str_view = PyUnicode_InternFromString("view")))
        return NULL;
    cached.budget = CACHED_BYTES;
    PyObject *module = PyModule_Create(&kernel_module);
    if (!module)
        return NULL;
    if (PyModule_AddType(module, &KernelType) < 0 || PyModule_AddType(module, &WordsType) < 0 ||
        PyModule_AddType(module, &PatternViewType) < 0 || PyModule_AddType(module, &TermViewType) < 0 ||
        PyModule_AddType(module, &TermTableType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
