/* fastsubs.query._kernel: the thin glue between Python and the plain-C kernel.
 *
 * ``Model(path)`` is one open index: the Store (store.h) and the Searchers that search
 * it, one per thread searching at the same time.  A search takes an idle Searcher (or
 * makes one) while holding the GIL, runs without it, and gives it back: any number of
 * threads may search one Model at once, each on its own Searcher, with no lock on the
 * search path.  ``close()`` refuses new work at once; the memory map itself is released
 * once no search runs and no array viewed from the index (``region()``) is alive, so no
 * object can read an unmapped page. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "output.h"
#include "search.h"
#include "store.h"

/* Cache slots of a Searcher (64 bytes each): 131,072 slots, 8 MiB.  Over the
 * 243K-position corpus sample on kn4-64k a search meets ~40 patterns (present or not);
 * the text's patterns fit many times over in a first pass of thousands of lines. */
#define RECORD_SLOTS ((size_t)1 << 17)
/* Bytes of rank maps and sorted prefixes a Searcher keeps (store.h, Kept). */
#define KEPT_BYTES ((size_t)24 << 20)

static size_t record_slots = RECORD_SLOTS, kept_bytes = KEPT_BYTES;
static PyObject *DamagedIndexError;  /* fastsubs.errors.DamagedIndexError */

typedef struct {
    PyObject_HEAD
    Store store;
    PyObject *path;               /* str, for messages */
    int opened, prepared, closed, released;
    int active, exports;          /* searches running, regions alive */
    Searcher **idle; int n_idle, cap_idle;
    Searcher **all; int n_all, cap_all;
    MDB_dbi meta;
    PyObject **texts;             /* per word id: its str, once made (Model_records) */
    uint32_t n_texts;
} Model;

/* ---------------------------------------------------------------- errors */

static PyObject *raise_failure(Model *m, const Failure *failure) {
    switch (failure->code) {
    case FS_ENOMEM:
        return PyErr_NoMemory();
    case FS_EARGUMENT:
        PyErr_SetString(PyExc_ValueError, failure->message);
        return NULL;
    default:
        PyErr_Format(DamagedIndexError, "%U: %s%s", m->path,
                     strncmp(failure->message, "damaged index", 13) ? "damaged index: " : "", failure->message);
        return NULL;
    }
}

/* Releases the map and every Searcher: once closed, with no search running and no region alive. */
static void release_if_done(Model *m) {
    if (!m->closed || m->released || m->active || m->exports)
        return;
    m->released = 1;
    for (int i = 0; i < m->n_all; i++) {
        searcher_free(m->all[i]);
        PyMem_RawFree(m->all[i]);
    }
    m->n_all = m->n_idle = 0;
    if (m->opened)
        store_close(&m->store);
}

static int check_open(Model *m, int need_prepared) {
    if (!m->opened || m->closed) {
        PyErr_SetString(PyExc_ValueError, m->opened ? "the index is closed" : "the index is not open");
        return -1;
    }
    if (need_prepared && !m->prepared) {
        PyErr_SetString(PyExc_RuntimeError, "Model.prepare() has not succeeded");
        return -1;
    }
    return 0;
}

static int grow_list(Searcher ***items, int *cap, int need) {
    if (need <= *cap)
        return 0;
    int cap_ = 2 * need + 4;
    Searcher **grown = PyMem_Realloc(*items, (size_t)cap_ * sizeof(Searcher *));
    if (!grown)
        return -1;
    *items = grown;
    *cap = cap_;
    return 0;
}

/* ---------------------------------------------------------------- searchers */

/* An idle Searcher, or a new one (with the GIL held); NULL with an exception set.  A new
 * one starts with the records the first one has met (a copy of its slots, some
 * milliseconds once per thread): kn4-64k, 1,500 corpus lines in one thread then the same
 * in two, 2 threads ÷ 1 was 1.52-1.80 (median 1.62) with the second Searcher starting
 * empty, 1.66-1.95 (1.85) with it seeded (6 runs each, this 2-core VM). */
static Searcher *take_searcher(Model *m) {
    if (check_open(m, 1) < 0)
        return NULL;
    Searcher *k;
    if (m->n_idle) {
        k = m->idle[--m->n_idle];
    } else {
        if (grow_list(&m->all, &m->cap_all, m->n_all + 1) < 0 || grow_list(&m->idle, &m->cap_idle, m->n_all + 1) < 0)
            return (Searcher *)PyErr_NoMemory();
        if (!(k = PyMem_RawMalloc(sizeof(Searcher))))
            return (Searcher *)PyErr_NoMemory();
        if (searcher_init(k, &m->store, record_slots, kept_bytes) < 0) {
            Failure failure = k->reader.failure;
            searcher_free(k);
            PyMem_RawFree(k);
            return (Searcher *)raise_failure(m, &failure);
        }
        if (m->n_all)  /* the first Searcher has usually met the most (see reader_seed) */
            reader_seed(&k->reader, &m->all[0]->reader);
        m->all[m->n_all++] = k;
    }
    k->reader.kept_budget = kept_bytes;  /* set_cache_bytes applies from the next search */
    m->active++;
    return k;
}

static void give_back(Model *m, Searcher *k) {
    m->idle[m->n_idle++] = k;
    m->active--;
    release_if_done(m);
}

/* The work of the searches the calling thread has made, on any Model: (searches, words
 * evaluated, list entries read, substitutes listed).  Model.counters() sums every
 * Searcher of a Model, and a Searcher serves whichever thread is free, so a difference of
 * those over one thread's stretch of work would count what other threads searched
 * meanwhile; a difference of these counts that thread's work alone. */
static _Thread_local unsigned long long thread_work[4];

static void work_of(const Searcher *k, unsigned long long work[4]) {
    work[0] = k->n_searches;
    work[1] = k->n_evaluated;
    work[2] = k->n_reads;
    work[3] = k->n_listed_total;
}

/* Adds what ``k`` did since ``before`` (work_of) to this thread's work. */
static void add_thread_work(const Searcher *k, const unsigned long long before[4]) {
    unsigned long long after[4];
    work_of(k, after);
    for (int i = 0; i < 4; i++)
        thread_work[i] += after[i] - before[i];
}

/* ---------------------------------------------------------------- Model */

static int Model_init(Model *m, PyObject *args, PyObject *kwds) {
    static char *names[] = {"path", NULL};
    PyObject *path;
    if (m->opened || m->path) {
        PyErr_SetString(PyExc_RuntimeError, "Model is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&", names, PyUnicode_FSDecoder, &path))
        return -1;
    m->path = path;
    PyObject *encoded = PyUnicode_EncodeFSDefault(path);
    if (!encoded)
        return -1;
    Failure failure = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = store_open(&m->store, PyBytes_AS_STRING(encoded), &failure);
    if (rc == 0 && store_dbi(&m->store, "meta", &m->meta, &failure) < 0) {
        store_close(&m->store);
        rc = -3;  /* no metadata database (or LMDB refused to open it) */
    } else if (rc == 0 && (store_dbi(&m->store, "vocab", &m->store.vocab, &failure) < 0 ||
                           store_dbi(&m->store, "arrays", &m->store.arrays, &failure) < 0)) {
        store_close(&m->store);
        rc = -2;
    }
    Py_END_ALLOW_THREADS
    Py_DECREF(encoded);
    if (rc < 0) {
        if (rc == -3 && failure.code == FS_EDAMAGED)  /* no metadata database: not an index */
            PyErr_Format(PyExc_LookupError, "%s", failure.message);
        else
            raise_failure(m, &failure);
        return -1;
    }
    m->opened = 1;
    return 0;
}

static PyObject *Model_info(Model *m, PyObject *unused) {
    (void)unused;
    if (check_open(m, 0) < 0)
        return NULL;
    MDB_envinfo info;
    MDB_stat stat;
    mdb_env_info(m->store.env, &info);
    mdb_env_stat(m->store.env, &stat);
    return Py_BuildValue("(nI)", (Py_ssize_t)info.me_last_pgno, stat.ms_psize);
}

/* The database a get() names: "meta", or one prepare() opened. */
static int named_dbi(Model *m, const char *name, MDB_dbi *dbi) {
    if (!strcmp(name, "meta")) {
        *dbi = m->meta;
        return 0;
    }
    if (!strcmp(name, "vocab")) {
        *dbi = m->store.vocab;
        return 0;
    }
    if (!strcmp(name, "arrays")) {
        *dbi = m->store.arrays;
        return 0;
    }
    if (m->prepared) {
        int order;
        char rest;
        if (sscanf(name, "patterns%d%c", &order, &rest) == 1 && order >= 2 && order <= m->store.order) {
            *dbi = m->store.patterns[order];
            return 0;
        }
    }
    PyErr_Format(PyExc_KeyError, "no database %s", name);
    return -1;
}

/* The value of ``key`` in the database a get()/region() call names, made into an object by
 * ``make``; None when there is no such key. */
static PyObject *look_up(Model *m, PyObject *args, const char *format, PyObject *(*make)(Model *, MDB_val)) {
    const char *name;
    Py_buffer key;
    if (!PyArg_ParseTuple(args, format, &name, &key))
        return NULL;
    MDB_dbi dbi;
    MDB_val value;
    Failure failure = {0};
    PyObject *result = NULL;
    if (check_open(m, 0) == 0 && named_dbi(m, name, &dbi) == 0) {
        int found = store_get(&m->store, dbi, key.buf, (size_t)key.len, &value, &failure);
        if (found < 0)
            raise_failure(m, &failure);
        else
            result = found ? make(m, value) : Py_NewRef(Py_None);
    }
    PyBuffer_Release(&key);
    return result;
}

static PyObject *copy_value(Model *m, MDB_val value) {
    (void)m;
    return PyBytes_FromStringAndSize(value.mv_data, (Py_ssize_t)value.mv_size);
}

/* get(db, key) -> bytes | None: a copy of the value (it outlives the index). */
static PyObject *Model_get(Model *m, PyObject *args) {
    return look_up(m, args, "sy*:get", copy_value);
}

static PyObject *Model_prepare(Model *m, PyObject *args, PyObject *kwds) {
    static char *names[] = {"order", "vocab_size", "id_bytes", "bos_id", "max_unigram_beta", NULL};
    int order, id_bytes;
    unsigned long long vocab_size;
    PyObject *bos_object;
    double max_unigram_beta;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iKiOd:prepare", names, &order, &vocab_size, &id_bytes,
                                     &bos_object, &max_unigram_beta) || check_open(m, 0) < 0)
        return NULL;
    if (m->prepared) {
        PyErr_SetString(PyExc_RuntimeError, "Model.prepare() already succeeded");
        return NULL;
    }
    long long bos = bos_object == Py_None ? -1 : PyLong_AsLongLong(bos_object);
    if (bos == -1 && PyErr_Occurred())
        return NULL;
    if (vocab_size >= UINT32_MAX) {
        PyErr_Format(DamagedIndexError, "%U: damaged index: vocabulary size out of range", m->path);
        return NULL;
    }
    Failure failure = {0};
    if (store_prepare(&m->store, order, (uint32_t)vocab_size, id_bytes, bos, max_unigram_beta, &failure) < 0)
        return raise_failure(m, &failure);
    m->prepared = 1;
    Py_RETURN_NONE;
}

/* Reads ``a`` as ``n`` items of ``size`` bytes (n < 0: any number, set). */
static int get_array(PyObject *a, Py_buffer *view, Py_ssize_t size, Py_ssize_t *n, const char *what) {
    if (PyObject_GetBuffer(a, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len % size || (*n >= 0 && view->len != size * *n)) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd-byte items", what, size);
        PyBuffer_Release(view);
        return -1;
    }
    *n = view->len / size;
    return 0;
}

/* Answers of a run of positions, kept until the GIL is taken again: position i's are
 * answers[starts[i] .. starts[i + 1]), and with ``normalized`` their scores and p / Σp
 * side by side in scores/probabilities (made without the GIL too: the records need them). */
typedef struct {
    Scored *answers;
    double *scores, *probabilities;
    Py_ssize_t *starts;
    Py_ssize_t n, cap, cap_starts;
    int normalized;
} Answers;

#define SEARCH_BATCH_BYTES ((Py_ssize_t)1 << 20)

/* Appends the searcher's answer as position i of the run (no GIL needed): 0, or -2 when out of memory. */
static int keep_answer(Answers *a, const Searcher *k, Py_ssize_t i) {
    if (i + 2 > a->cap_starts) {
        Py_ssize_t cap = 2 * (i + 2) + 16;
        Py_ssize_t *starts = PyMem_RawRealloc(a->starts, (size_t)cap * sizeof(Py_ssize_t));
        if (!starts)
            return -2;
        a->starts = starts;
        a->cap_starts = cap;
    }
    if (a->n + k->n_listed > a->cap) {
        Py_ssize_t cap = 2 * (a->n + (Py_ssize_t)k->n_listed) + 256;
        Scored *answers = PyMem_RawRealloc(a->answers, (size_t)cap * sizeof(Scored));
        if (!answers)
            return -2;
        a->answers = answers;
        if (a->normalized) {
            double *scores = PyMem_RawRealloc(a->scores, (size_t)cap * sizeof(double));
            if (scores)
                a->scores = scores;
            double *probabilities = scores ? PyMem_RawRealloc(a->probabilities, (size_t)cap * sizeof(double)) : NULL;
            if (!probabilities)
                return -2;
            a->probabilities = probabilities;
        }
        a->cap = cap;
    }
    if (i == 0)
        a->starts[0] = 0;
    memcpy(a->answers + a->n, k->listed, (size_t)k->n_listed * sizeof(Scored));
    if (a->normalized) {
        for (int64_t j = 0; j < k->n_listed; j++)
            a->scores[a->n + j] = k->listed[j].score;
        normalize(a->scores + a->n, (int64_t)k->n_listed, a->probabilities + a->n);
    }
    a->n += (Py_ssize_t)k->n_listed;
    a->starts[i + 1] = a->n;
    return 0;
}

/* The word ``id`` as a str (a new reference), decoded once and kept: the API names the
 * same frequent words again and again (V pointers, and the words met). */
static PyObject *word_text(Model *m, uint32_t id) {
    if (!m->texts) {
        if (!(m->texts = PyMem_Calloc(m->store.vocab_size, sizeof(PyObject *))))
            return PyErr_NoMemory();
        m->n_texts = m->store.vocab_size;
    }
    if (!m->texts[id]) {
        size_t length;
        const char *word = store_word(&m->store, id, &length);
        m->texts[id] = PyUnicode_DecodeUTF8(word, (Py_ssize_t)length, "surrogateescape");
        if (!m->texts[id])
            return NULL;
    }
    return Py_NewRef(m->texts[id]);
}

/* Whether ``object`` can make the API's records: a tuple subclass with no state of its own
 * (a NamedTuple), so answer_records can fill one without calling its __new__. */
static int is_record_type(PyObject *object) {
    PyTypeObject *cls = (PyTypeObject *)object;
    if (!PyType_Check(object) || !PyType_IsSubtype(cls, &PyTuple_Type) ||
        cls->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "record must be a tuple subclass without state of its own");
        return 0;
    }
    return 1;
}

/* ``word value`` fields joined by tabs (output.h) as bytes. */
static PyObject *fields_bytes(Model *m, const uint32_t *ids, const double *values, Py_ssize_t n) {
    int64_t size = fields_size(&m->store, ids, values, n);
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "word id outside the vocabulary");
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (result) {
        char *start = PyBytes_AS_STRING(result);
        char *end = write_fields(&m->store, ids, values, n, start);
        if (_PyBytes_Resize(&result, end - start) < 0)
            result = NULL;
    }
    return result;
}

/* One position's answer as the text output's fields: ``word score``, or with
 * ``probabilities`` ``word p/Σp`` down to the first below NORMALIZED_FLOOR (-z); the
 * command line's plain text, made here so that its run needs no array per position. */
static PyObject *answer_fields(Model *m, const Scored *answers, const double *probabilities, Py_ssize_t length) {
    if (probabilities) {
        Py_ssize_t kept = 0;
        while (kept < length && !(probabilities[kept] < NORMALIZED_FLOOR))
            kept++;
        length = kept;
    }
    uint32_t *ids = PyMem_Malloc((size_t)length * sizeof(uint32_t) + 1);
    double *values = PyMem_Malloc((size_t)length * sizeof(double) + 1);
    PyObject *result = NULL;
    if (!ids || !values)
        PyErr_NoMemory();
    else {
        for (Py_ssize_t i = 0; i < length; i++) {
            ids[i] = answers[i].word;
            values[i] = probabilities ? probabilities[i] : answers[i].score;
        }
        result = fields_bytes(m, ids, values, length);
    }
    PyMem_Free(ids);
    PyMem_Free(values);
    return result;
}

/* One position's answer as (ids, scores): bytes of uint32 and of float64, best first. */
static PyObject *answer_arrays(const Scored *answers, Py_ssize_t length) {
    PyObject *ids = PyBytes_FromStringAndSize(NULL, length * 4);
    PyObject *scores = PyBytes_FromStringAndSize(NULL, length * 8);
    PyObject *pair = ids && scores ? PyTuple_Pack(2, ids, scores) : NULL;
    Py_XDECREF(ids);
    Py_XDECREF(scores);
    if (!pair)
        return NULL;
    uint32_t *out_ids = (uint32_t *)PyBytes_AS_STRING(ids);
    double *out_scores = (double *)PyBytes_AS_STRING(scores);
    for (Py_ssize_t i = 0; i < length; i++) {
        out_ids[i] = answers[i].word;
        out_scores[i] = answers[i].score;
    }
    return pair;
}

/* One position's answer as a list of ``cls``(word text, score, p / Σp), best first: the
 * API's substitutes, made here in one go (no __new__ call, no array per position), the
 * largest part of an API search that holds the GIL. */
static PyObject *answer_records(Model *m, const Scored *answers, const double *probabilities, Py_ssize_t length,
                                PyTypeObject *cls) {
    PyObject *result = PyList_New(length);
    for (Py_ssize_t i = 0; result && i < length; i++) {
        PyObject *items[3] = {word_text(m, answers[i].word), PyFloat_FromDouble(answers[i].score),
                              PyFloat_FromDouble(probabilities[i])};
        /* Never tracked by the garbage collector: it holds a str and two floats, which
         * cannot make a cycle (the collector untracks such tuples itself, once it has
         * scanned them; a corpus run makes millions, and scanning them was a third of
         * their cost).  Not tp_alloc, which zeroes the items and tracks. */
        PyObject *record = items[0] && items[1] && items[2] ? (PyObject *)PyObject_GC_NewVar(PyTupleObject, cls, 3)
                                                          : NULL;
        if (!record) {
            for (int j = 0; j < 3; j++)
                Py_XDECREF(items[j]);
            Py_CLEAR(result);
            break;
        }
        for (int j = 0; j < 3; j++)
            PyTuple_SET_ITEM(record, j, items[j]);
        PyList_SET_ITEM(result, i, record);
    }
    return result;
}

/* What search() gives for each position: arrays, text fields (see answer_fields), records. */
enum { ANSWER_ARRAYS, ANSWER_FIELDS_SCORES, ANSWER_FIELDS_PROBABILITIES };

static PyObject *Model_search(Model *m, PyObject *args) {
    PyObject *sentence_object, *mass_object, *excluded_object, *record_object = Py_None;
    Py_ssize_t first, last;
    long long count;
    int fields = ANSWER_ARRAYS;
    if (!PyArg_ParseTuple(args, "OnnLOO|Oi:search", &sentence_object, &first, &last, &count, &mass_object,
                          &excluded_object, &record_object, &fields))
        return NULL;
    PyTypeObject *record = record_object == Py_None ? NULL : (PyTypeObject *)record_object;
    if (record && !is_record_type(record_object))
        return NULL;
    if (fields < ANSWER_ARRAYS || fields > ANSWER_FIELDS_PROBABILITIES || (record && fields)) {
        PyErr_SetString(PyExc_ValueError, "fields: 0, 1 (scores) or 2 (p / sum p), and 0 with a record");
        return NULL;
    }
    int use_mass = mass_object != Py_None;
    double mass = use_mass ? PyFloat_AsDouble(mass_object) : 0.0;
    if (use_mass && PyErr_Occurred())
        return NULL;
    Py_buffer sentence, excluded;
    Py_ssize_t n = -1, n_excluded = -1;
    if (get_array(sentence_object, &sentence, 4, &n, "sentence") < 0)
        return NULL;
    if (get_array(excluded_object, &excluded, 4, &n_excluded, "excluded") < 0) {
        PyBuffer_Release(&sentence);
        return NULL;
    }
    PyObject *results = NULL;
    Searcher *k = NULL;
    unsigned long long before[4];  /* k's work when taken (see add_thread_work) */
    Answers batch = {0};
    batch.normalized = record != NULL || fields == ANSWER_FIELDS_PROBABILITIES;
    if (first < 1 || last > n || first > last || n > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "targets outside 1 ... len(sentence) - 1");
        goto out;
    }
    if (!(k = take_searcher(m)))
        goto out;
    work_of(k, before);
    if (!(results = PyList_New(last - first)))
        goto out;
    /* Positions are searched without the GIL in runs whose answers fit in SEARCH_BATCH_BYTES
     * (one release per run, not per position: fewer hand-overs between threads), then made
     * into Python objects. */
    for (Py_ssize_t target = first; target < last;) {
        Py_ssize_t run_first = target;
        int rc = 0;
        Py_BEGIN_ALLOW_THREADS
        batch.n = 0;
        for (; target < last && rc == 0 && batch.n * (Py_ssize_t)sizeof(Scored) < SEARCH_BATCH_BYTES; target++) {
            rc = search_position(k, sentence.buf, (int)n, (int)target, count, use_mass, mass, excluded.buf,
                                 n_excluded);
            if (rc == 0)
                rc = keep_answer(&batch, k, target - run_first);
        }
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            if (rc == -2)
                PyErr_NoMemory();
            else
                raise_failure(m, &k->reader.failure);
            Py_CLEAR(results);
            goto out;
        }
        for (Py_ssize_t t = run_first; t < target; t++) {
            Py_ssize_t start = batch.starts[t - run_first], length = batch.starts[t - run_first + 1] - start;
            PyObject *answer;
            if (record)
                answer = answer_records(m, &batch.answers[start], &batch.probabilities[start], length, record);
            else if (fields)
                answer = answer_fields(m, &batch.answers[start],
                                       batch.normalized ? &batch.probabilities[start] : NULL, length);
            else
                answer = answer_arrays(&batch.answers[start], length);
            if (!answer) {
                Py_CLEAR(results);
                goto out;
            }
            PyList_SET_ITEM(results, t - first, answer);
        }
    }
out:
    if (k) {
        add_thread_work(k, before);
        give_back(m, k);
    }
    PyMem_RawFree(batch.answers);
    PyMem_RawFree(batch.scores);
    PyMem_RawFree(batch.probabilities);
    PyMem_RawFree(batch.starts);
    PyBuffer_Release(&sentence);
    PyBuffer_Release(&excluded);
    return results;
}

/* fields(ids, values) -> bytes: ``word value`` fields joined by tabs (output.h). */
static PyObject *Model_fields(Model *m, PyObject *args) {
    PyObject *ids_object, *values_object, *result = NULL;
    if (!PyArg_ParseTuple(args, "OO:fields", &ids_object, &values_object) || check_open(m, 1) < 0)
        return NULL;
    Py_buffer ids, values;
    Py_ssize_t n = -1;
    if (get_array(ids_object, &ids, 4, &n, "ids") < 0)
        return NULL;
    if (get_array(values_object, &values, 8, &n, "values") < 0) {
        PyBuffer_Release(&ids);
        return NULL;
    }
    result = fields_bytes(m, ids.buf, values.buf, n);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&values);
    return result;
}

/* word(id) -> bytes */
static PyObject *Model_word(Model *m, PyObject *arg) {
    if (check_open(m, 1) < 0)
        return NULL;
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (id >= m->store.vocab_size) {
        PyErr_SetString(PyExc_ValueError, "word id outside the vocabulary");
        return NULL;
    }
    size_t length;
    const char *word = store_word(&m->store, (uint32_t)id, &length);
    return PyBytes_FromStringAndSize(word, (Py_ssize_t)length);
}

/* ids(tokens, unknown) -> bytes of uint32: each token's id, ``unknown`` for those the
 * vocabulary lacks.  An entry must spell its word back (word_bytes is checksummed): a
 * flipped byte in the vocabulary never maps a word to another word's id.  The look-ups run
 * without the GIL, through a searcher's transaction (one B-tree descent per token: for
 * threads, what the API does around a search should hold the GIL as little as it can). */
static PyObject *Model_ids(Model *m, PyObject *args) {
    PyObject *tokens;
    unsigned int unknown;
    if (!PyArg_ParseTuple(args, "O!I:ids", &PyList_Type, &tokens, &unknown))
        return NULL;
    /* a tuple of the tokens: another thread may change the list while the GIL is released */
    PyObject *held = PyList_AsTuple(tokens);
    if (!held)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(held);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(held, i))) {
            Py_DECREF(held);
            PyErr_SetString(PyExc_TypeError, "tokens must be bytes");
            return NULL;
        }
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, n * 4);
    Searcher *k = result ? take_searcher(m) : NULL;
    if (!k) {
        Py_XDECREF(result);
        Py_DECREF(held);
        return NULL;
    }
    uint32_t *ids = (uint32_t *)PyBytes_AS_STRING(result);
    Py_ssize_t i = 0;
    int found = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < n; i++) {
        PyObject *token = PyTuple_GET_ITEM(held, i);
        found = reader_word_id(&k->reader, PyBytes_AS_STRING(token), (size_t)PyBytes_GET_SIZE(token), &ids[i]);
        if (found < 0)
            break;
        if (!found)
            ids[i] = unknown;
    }
    Py_END_ALLOW_THREADS
    if (found < 0) {
        if (k->reader.failure.code == FS_EDAMAGED)
            PyErr_Format(DamagedIndexError, "%U: damaged index (vocabulary entry of %R is invalid)", m->path,
                         PyTuple_GET_ITEM(held, i));
        else
            raise_failure(m, &k->reader.failure);
        Py_CLEAR(result);
    }
    give_back(m, k);
    Py_DECREF(held);
    return result;
}


static PyObject *thread_counters(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return Py_BuildValue("(KKKK)", thread_work[0], thread_work[1], thread_work[2], thread_work[3]);
}

static PyObject *Model_counters(Model *m, PyObject *unused) {
    (void)unused;
    unsigned long long totals[6] = {0};
    for (int i = 0; i < m->n_all; i++) {
        const Searcher *k = m->all[i];
        totals[0] += k->n_searches;
        totals[1] += k->n_evaluated;
        totals[2] += k->n_reads;
        totals[3] += k->n_listed_total;
        totals[4] += k->reader.lookups;
        totals[5] += k->reader.misses;
    }
    return Py_BuildValue("(KKKKKK)", totals[0], totals[1], totals[2], totals[3], totals[4], totals[5]);
}

static PyObject *Model_close(Model *m, PyObject *unused) {
    (void)unused;
    m->closed = 1;
    release_if_done(m);
    Py_RETURN_NONE;
}

static PyObject *Model_closed(Model *m, void *unused) {
    (void)unused;
    return PyBool_FromLong(m->closed || !m->opened);
}

static void Model_dealloc(Model *m) {
    for (uint32_t i = 0; i < m->n_texts; i++)
        Py_XDECREF(m->texts[i]);
    PyMem_Free(m->texts);
    m->closed = 1;
    m->active = m->exports = 0;
    release_if_done(m);
    PyMem_Free(m->idle);
    PyMem_Free(m->all);
    Py_XDECREF(m->path);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

/* ---------------------------------------------------------------- regions */

/* A value of the index viewed in place (numpy.frombuffer takes it): it keeps the map. */
typedef struct {
    PyObject_HEAD
    Model *model;
    const void *data;
    Py_ssize_t len;
} Region;

static int Region_getbuffer(Region *r, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)r, (void *)r->data, r->len, 1, flags);
}

static void Region_dealloc(Region *r) {
    if (r->model) {
        r->model->exports--;
        release_if_done(r->model);
        Py_DECREF(r->model);
    }
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyBufferProcs Region_as_buffer = {(getbufferproc)Region_getbuffer, NULL};

static PyTypeObject RegionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.query._kernel.Region",
    .tp_basicsize = sizeof(Region),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A value of an open index, viewed in place (read-only buffer); it keeps the index mapped.",
    .tp_dealloc = (destructor)Region_dealloc,
    .tp_as_buffer = &Region_as_buffer,
};

static PyObject *view_value(Model *m, MDB_val value) {
    Region *r = PyObject_New(Region, &RegionType);
    if (r) {
        r->model = (Model *)Py_NewRef(m);
        r->data = value.mv_data;
        r->len = (Py_ssize_t)value.mv_size;
        m->exports++;
    }
    return (PyObject *)r;
}

/* region(db, key) -> Region | None */
static PyObject *Model_region(Model *m, PyObject *args) {
    return look_up(m, args, "sy*:region", view_value);
}

static PyMethodDef Model_methods[] = {
    {"info", (PyCFunction)Model_info, METH_NOARGS, "info() -> (last page number, page size) of the environment."},
    {"get", (PyCFunction)Model_get, METH_VARARGS,
     "get(db, key) -> bytes | None: a copy of the value of ``key`` in database ``db`` (\"meta\",\n"
     "\"vocab\", \"arrays\"; after prepare() also \"patternsN\")."},
    {"region", (PyCFunction)Model_region, METH_VARARGS,
     "region(db, key) -> Region | None: the value viewed in place; the map stays until it is released."},
    {"prepare", (PyCFunction)Model_prepare, METH_VARARGS | METH_KEYWORDS,
     "prepare(order, vocab_size, id_bytes, bos_id, max_unigram_beta): read the arrays, given the metadata."},
    {"search", (PyCFunction)Model_search, METH_VARARGS,
     "search(sentence, first, last, count, mass, excluded, record=None, fields=0) -> [(ids, scores), ...]\n\n"
     "The best ``count`` substitutes (at most V - 1; fewer when the -p rule with ``mass``, or None,\n"
     "stops first) of positions first ... last - 1 of ``sentence`` (a uint32 buffer of word ids, <s>\n"
     "and </s> included): ids as bytes of uint32 and scores as bytes of float64, best first; with\n"
     "``record`` (a NamedTuple class), a list of record(word text, score, p / sum p) instead; with\n"
     "``fields`` 1 or 2, the text output's fields as bytes (as fields() writes them), of the scores\n"
     "or of p / sum p down to the first below 1e-8 (-z).\n"
     "``excluded`` (a uint32 buffer) are no candidates.  Runs without the GIL; any number of\n"
     "threads may search one Model at once."},
    {"fields", (PyCFunction)Model_fields, METH_VARARGS,
     "fields(ids: uint32 array, values: float64 array) -> bytes\n\n"
     "``word value`` fields joined by tabs, each value as ``b\"%.8f\" % value`` would write it."},
    {"word", (PyCFunction)Model_word, METH_O, "word(id) -> bytes: the word with that id."},
    {"ids", (PyCFunction)Model_ids, METH_VARARGS,
     "ids(tokens: list of bytes, unknown: int) -> bytes of uint32: the tokens' word ids (``unknown`` for\n"
     "words the vocabulary lacks)."},
    {"counters", (PyCFunction)Model_counters, METH_NOARGS,
     "counters() -> (searches, words evaluated, list entries read, substitutes listed, pattern look-ups,\n"
     "look-ups that missed the cache): totals over every search of this Model."},
    {"close", (PyCFunction)Model_close, METH_NOARGS,
     "close(): no more searches or reads; the map is released once no search runs and no region lives."},
    {NULL, NULL, 0, NULL},
};

static PyObject *Model_searchers(Model *m, void *unused) {
    (void)unused;
    return PyLong_FromLong(m->n_all);
}

static PyGetSetDef Model_getset[] = {
    {"closed", (getter)Model_closed, NULL, "Whether close() was called (or opening failed).", NULL},
    {"searchers", (getter)Model_searchers, NULL,
     "Searchers made so far: one per thread that searched while all the others were busy.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.query._kernel.Model",
    .tp_basicsize = sizeof(Model),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Model(path)\n\nAn index opened read-only and memory-mapped, with the searchers that read it in place.\n"
              "LookupError: the environment has no metadata database (not an index).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Model_init,
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_methods = Model_methods,
    .tp_getset = Model_getset,
};

/* ---------------------------------------------------------------- module functions */

static PyObject *checksum(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer key, body;
    if (!PyArg_ParseTuple(args, "y*y*:checksum", &key, &body))
        return NULL;
    PyObject *result = NULL;
    if (body.len % 4)
        PyErr_SetString(PyExc_ValueError, "body: whole 4-byte words");
    else
        result = PyLong_FromUnsignedLong(record_checksum(key.buf, (size_t)key.len, body.buf, (size_t)body.len / 4));
    PyBuffer_Release(&key);
    PyBuffer_Release(&body);
    return result;
}

static PyObject *set_budget(size_t *what, PyObject *arg, size_t least) {
    size_t value = PyLong_AsSize_t(arg);
    if (value == (size_t)-1 && PyErr_Occurred())
        return NULL;
    size_t previous = *what;
    *what = value < least ? least : value;
    return PyLong_FromSize_t(previous);
}

static PyObject *set_cache_bytes(PyObject *module, PyObject *arg) {
    (void)module;
    return set_budget(&kept_bytes, arg, 0);
}

static PyObject *set_cache_records(PyObject *module, PyObject *arg) {
    (void)module;
    return set_budget(&record_slots, arg, RECORD_WAYS);
}

/* normalized(scores: float64 buffer, best first) -> bytes of float64: p / Σp (output.h). */
static PyObject *normalized(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer scores;
    Py_ssize_t n = -1;
    if (get_array(arg, &scores, 8, &n, "scores") < 0)
        return NULL;
    PyObject *result = PyBytes_FromStringAndSize(NULL, n * 8);
    if (result)
        normalize(scores.buf, n, (double *)PyBytes_AS_STRING(result));
    PyBuffer_Release(&scores);
    return result;
}

static PyMethodDef module_methods[] = {
    {"normalized", normalized, METH_O,
     "normalized(scores: float64 buffer, best first) -> bytes of float64: p / sum p, p = 10^score."},
    {"set_cache_bytes", set_cache_bytes, METH_O,
     "set_cache_bytes(n: int) -> int (the previous budget)\n\n"
     "Bytes of rank maps and sorted prefixes each searcher keeps for big patterns, from its next\n"
     "search on (they only save time: any budget, 0 too, gives the same answers)."},
    {"set_cache_records", set_cache_records, METH_O,
     "set_cache_records(n: int) -> int (the previous number)\n\n"
     "Pattern records each searcher made from now on keeps in its cache (64 bytes each; at least 8).\n"
     "Any number gives the same answers."},
    {"checksum", checksum, METH_VARARGS,
     "checksum(key: bytes-like, body: bytes-like of uint32) -> int: fastsubs.format.record_checksum."},
    {"thread_counters", thread_counters, METH_NOARGS,
     "thread_counters() -> (searches, words evaluated, list entries read, substitutes listed): totals over\n"
     "the searches the calling thread has made, on any Model (a difference over a stretch of one thread's\n"
     "work counts that work alone, whatever other threads search meanwhile)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "fastsubs.query._kernel",
    "The compiled query engine: indexes read in place, the exact search, output formatting.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void) {
    if (PyType_Ready(&ModelType) < 0 || PyType_Ready(&RegionType) < 0)
        return NULL;
    PyObject *errors = PyImport_ImportModule("fastsubs.errors");
    if (!errors)
        return NULL;
    DamagedIndexError = PyObject_GetAttrString(errors, "DamagedIndexError");
    Py_DECREF(errors);
    if (!DamagedIndexError)
        return NULL;
    PyObject *module = PyModule_Create(&kernel_module);
    if (!module)
        return NULL;
    if (PyModule_AddType(module, &ModelType) < 0 || PyModule_AddType(module, &RegionType) < 0 ||
        PyModule_AddIntConstant(module, "VALUE_WEIGHT", 0x9E3779B1u) < 0 ||
        PyModule_AddIntConstant(module, "KEY_WEIGHT", 0x85EBCA6Bu) < 0 ||
        PyModule_AddIntConstant(module, "RECORD_BYTES", sizeof(Record)) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
