/* The searches of fastsubs._kernel's Index and their answers as Python objects, arrays
 * or finished output text (module.c holds the module and the type).  A search runs
 * without the GIL, in runs of positions (search_runs), each run's answers made into
 * objects once the GIL is taken again, or rendered before. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module.h"

/* The word ``id`` as a str (a new reference), decoded once and kept: the API names the
 * same frequent words again and again. */
static PyObject *word_text(Index *self, uint32_t id) {
    if (!self->texts && !(self->texts = PyMem_Calloc(self->index.store.vocab_size, sizeof(PyObject *))))
        return PyErr_NoMemory();
    if (!self->texts[id]) {
        size_t length;
        const char *word = store_word(&self->index.store, id, &length);
        if (!(self->texts[id] = PyUnicode_DecodeUTF8(word, (Py_ssize_t)length, "surrogateescape")))
            return NULL;
    }
    return Py_NewRef(self->texts[id]);
}

/* ---------------------------------------------------------------- answers */

/* ``word value`` fields joined by tabs (output.h) as bytes. */
static PyObject *fields_bytes(Index *self, const Scored *answers, const double *values, Py_ssize_t n) {
    int64_t size = fields_size(&self->index.store, answers, values, n);
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "word id outside the vocabulary");
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (result) {
        char *start = PyBytes_AS_STRING(result);
        char *end = write_fields(&self->index.store, answers, values, n, start);
        if (_PyBytes_Resize(&result, end - start) < 0)
            result = NULL;
    }
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

/* One position's answer as a list of ``cls``(word text, score, p / sum p), best first: the
 * API's substitutes, made by tuple's own constructor (``tuple.__new__(cls, items)``). */
static PyObject *answer_records(Index *self, const Scored *answers, const double *probabilities,
                                Py_ssize_t length, PyTypeObject *cls) {
    PyObject *result = PyList_New(length);
    for (Py_ssize_t i = 0; result && i < length; i++) {
        PyObject *items = PyTuple_New(3), *record = NULL;
        if (items) {
            PyObject *word = word_text(self, answers[i].word);
            PyTuple_SET_ITEM(items, 0, word);
            PyTuple_SET_ITEM(items, 1, PyFloat_FromDouble(answers[i].score));
            PyTuple_SET_ITEM(items, 2, PyFloat_FromDouble(probabilities[i]));
            if (word && PyTuple_GET_ITEM(items, 1) && PyTuple_GET_ITEM(items, 2)) {
                PyObject *pair = PyTuple_Pack(1, items);
                record = pair ? PyTuple_Type.tp_new(cls, pair, NULL) : NULL;
                Py_XDECREF(pair);
            }
            Py_DECREF(items);
        }
        if (!record) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, record);
    }
    return result;
}

/* What search() gives for each position: arrays, or records. */
enum { ANSWER_ARRAYS, ANSWER_RECORDS };

static PyObject *answer_object(Index *self, const Answers *a, int64_t position, int kind, PyTypeObject *record) {
    int64_t start = a->starts[position], length = a->starts[position + 1] - start;
    if (kind == ANSWER_RECORDS)
        return answer_records(self, a->answers + start, a->probabilities + start, length, record);
    return answer_arrays(a->answers + start, length);
}

/* Searches are made into Answers without the GIL in runs of at most this many
 * substitutes (one release per run, not per position), then made into Python objects. */
#define SEARCH_RUN_ANSWERS ((int64_t)1 << 16)

/* The arguments every search takes: a sentence's ids, its positions first ... last - 1, the
 * limits and the excluded ids. */
typedef struct {
    Py_buffer sentence, excluded;
    SearchLimits limits;
    Py_ssize_t n, first, last;
} Query;

static int query_args(Query *q, PyObject *sentence, Py_ssize_t first, Py_ssize_t last, long long count,
                      PyObject *mass, PyObject *excluded) {
    q->limits = (SearchLimits){count, mass != Py_None, 0.0, NULL, 0};
    if (q->limits.use_mass && (q->limits.mass = PyFloat_AsDouble(mass)) == -1.0 && PyErr_Occurred())
        return -1;
    Py_ssize_t n_excluded = -1;
    q->n = -1;
    if (get_array(sentence, &q->sentence, 4, &q->n, "sentence") < 0)
        return -1;
    if (get_array(excluded, &q->excluded, 4, &n_excluded, "excluded") < 0) {
        PyBuffer_Release(&q->sentence);
        return -1;
    }
    q->limits.excluded = q->excluded.buf;
    q->limits.n_excluded = n_excluded;
    q->first = first;
    q->last = last;
    if (first < 1 || last > q->n || first > last || q->n > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "targets outside 1 ... len(sentence) - 1");
        PyBuffer_Release(&q->sentence);
        PyBuffer_Release(&q->excluded);
        return -1;
    }
    return 0;
}

static void query_release(Query *q) {
    PyBuffer_Release(&q->sentence);
    PyBuffer_Release(&q->excluded);
}

/* What to do with a run's answers (positions run_first ...): 0, or -1 (with the GIL: an
 * exception set; without it: the failure of ``context``'s making). */
typedef int (*RunDone)(Index *self, const Answers *run, int run_first, void *context);

/* Searches the query's positions run by run into ``run``, calling ``without_gil`` (if any)
 * while the GIL is released and ``with_gil`` (if any) once it is taken again: 0, or -1
 * with an exception set. */
static int search_runs(Index *self, const Query *q, Answers *run, RunDone without_gil, RunDone with_gil,
                       void *context) {
    Failure failure = {0};
    Searcher *k;
    Py_BEGIN_ALLOW_THREADS
    k = index_take(&self->index, &failure);
    Py_END_ALLOW_THREADS
    if (!k) {
        raise_failure(self->path, &failure);
        return -1;
    }
    int rc = 0;
    for (int target = (int)q->first; rc == 0 && target < q->last;) {
        int run_first = target, done = 0;
        run->n = run->n_positions = 0;
        Py_BEGIN_ALLOW_THREADS
        rc = search_run(k, q->sentence.buf, (int)q->n, &target, (int)q->last, &q->limits, run, SEARCH_RUN_ANSWERS);
        if (rc == 0 && without_gil)
            done = without_gil(self, run, run_first, context);
        Py_END_ALLOW_THREADS
        if (rc < 0)
            raise_failure(self->path, &k->reader.failure);
        else if (done < 0)
            rc = (PyErr_NoMemory(), -1);
        else if (with_gil)
            rc = with_gil(self, run, run_first, context);
    }
    index_give_back(&self->index, k);
    return rc;
}

/* search(): each position's answer made a Python object. */
typedef struct {
    PyObject *results;
    Py_ssize_t first;
    int kind;
    PyTypeObject *record;
} Objects;

static int make_objects(Index *self, const Answers *run, int run_first, void *context) {
    Objects *o = context;
    for (int64_t p = 0; p < run->n_positions; p++) {
        PyObject *answer = answer_object(self, run, p, o->kind, o->record);
        if (!answer)
            return -1;
        PyList_SET_ITEM(o->results, run_first + p - o->first, answer);
    }
    return 0;
}

PyObject *Index_search(Index *self, PyObject *args) {
    PyObject *sentence, *mass, *excluded, *record_object = Py_None;
    Py_ssize_t first, last;
    long long count;
    int kind = ANSWER_ARRAYS;
    if (!PyArg_ParseTuple(args, "OnnLOO|iO:search", &sentence, &first, &last, &count, &mass, &excluded, &kind,
                          &record_object))
        return NULL;
    int has_record = record_object != Py_None;
    PyTypeObject *record = has_record ? (PyTypeObject *)record_object : NULL;
    if ((kind != ANSWER_ARRAYS && kind != ANSWER_RECORDS) || (kind == ANSWER_RECORDS) != has_record ||
        (has_record && (!PyType_Check(record_object) || !PyType_IsSubtype(record, &PyTuple_Type)))) {
        PyErr_SetString(PyExc_ValueError, "answer: 0 arrays, or 1 records (with a tuple subclass)");
        return NULL;
    }
    Query q;
    if (query_args(&q, sentence, first, last, count, mass, excluded) < 0)
        return NULL;
    Answers run = {0};
    run.normalized = kind == ANSWER_RECORDS;
    Objects objects = {PyList_New(last - first), first, kind, record};
    if (objects.results && search_runs(self, &q, &run, NULL, make_objects, &objects) < 0)
        Py_CLEAR(objects.results);
    answers_free(&run);
    query_release(&q);
    return objects.results;
}

/* search_batch(ids, starts, count, mass, excluded, eos) -> (word ids, scores, offsets): the
 * substitutes of every position of every sentence (sentence s is ids[starts[s] ..
 * starts[s + 1]), <s> and </s> included; its positions 1 ... n - 2, and n - 1 (</s>) with
 * ``eos``), searched in one release of the GIL: uint32 and float64 bytes, position by
 * position, best first, and int64 bytes of where each position's begin (one more at the end). */
PyObject *Index_search_batch(Index *self, PyObject *args) {
    PyObject *ids_object, *starts_object, *mass, *excluded_object;
    long long count;
    int eos;
    if (!PyArg_ParseTuple(args, "OOLOOp:search_batch", &ids_object, &starts_object, &count, &mass, &excluded_object,
                          &eos))
        return NULL;
    Py_buffer ids, starts, excluded;
    Py_ssize_t n_ids = -1, n_starts = -1, n_excluded = -1;
    SearchLimits limits = {count, mass != Py_None, 0.0, NULL, 0};
    if (limits.use_mass && (limits.mass = PyFloat_AsDouble(mass)) == -1.0 && PyErr_Occurred())
        return NULL;
    if (get_array(ids_object, &ids, 4, &n_ids, "ids") < 0)
        return NULL;
    if (get_array(starts_object, &starts, 8, &n_starts, "starts") < 0) {
        PyBuffer_Release(&ids);
        return NULL;
    }
    if (get_array(excluded_object, &excluded, 4, &n_excluded, "excluded") < 0) {
        PyBuffer_Release(&ids);
        PyBuffer_Release(&starts);
        return NULL;
    }
    limits.excluded = excluded.buf;
    limits.n_excluded = n_excluded;
    const int64_t *start = starts.buf;
    PyObject *result = NULL;
    int ok = n_starts >= 1 && start[0] == 0 && start[n_starts - 1] == n_ids;
    for (Py_ssize_t s = 0; ok && s + 1 < n_starts; s++)
        ok = start[s + 1] - start[s] >= 2 && start[s + 1] - start[s] <= INT_MAX;
    Failure failure = {0};
    Answers all = {0};
    Searcher *k = NULL;
    int rc = 0;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "starts: 0, ..., len(ids), each sentence two ids or more");
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    if (!(k = index_take(&self->index, &failure)))
        rc = -1;
    for (Py_ssize_t s = 0; rc == 0 && s + 1 < n_starts; s++) {
        int n = (int)(start[s + 1] - start[s]), target = 1;
        rc = search_run(k, (const uint32_t *)ids.buf + start[s], n, &target, eos ? n : n - 1, &limits, &all,
                        INT64_MAX);
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_failure(self->path, k ? &k->reader.failure : &failure);
    } else {
        PyObject *words = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)all.n * 4);
        PyObject *scores = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)all.n * 8);
        PyObject *offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(all.n_positions + 1) * 8);
        if (words && scores && offsets) {
            for (int64_t i = 0; i < all.n; i++) {
                ((uint32_t *)PyBytes_AS_STRING(words))[i] = all.answers[i].word;
                ((double *)PyBytes_AS_STRING(scores))[i] = all.answers[i].score;
            }
            int64_t *out_offsets = (int64_t *)PyBytes_AS_STRING(offsets);
            out_offsets[0] = 0;
            if (all.n_positions)
                memcpy(out_offsets, all.starts, (size_t)(all.n_positions + 1) * 8);
            result = PyTuple_Pack(3, words, scores, offsets);
        }
        Py_XDECREF(words);
        Py_XDECREF(scores);
        Py_XDECREF(offsets);
    }
    if (k)
        index_give_back(&self->index, k);
out:
    answers_free(&all);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&excluded);
    return result;
}

/* render(): the positions' output text, with the places it names. */
typedef struct {
    Text text;
    Rendering rendering;
    PyObject *words;            /* a tuple: the word shown for each position */
    Place place;                /* line, name and id; position and word set per position */
    Py_ssize_t first, first_position;
    int64_t *draws;
    double *cumulative;
} Rendered;

static int render_run(Index *self, const Answers *run, int run_first, void *context) {
    Rendered *r = context;
    const Store *s = &self->index.store;
    for (int64_t p = 0; p < run->n_positions; p++) {
        int64_t start = run->starts[p], n = run->starts[p + 1] - start;
        PyObject *word = PyTuple_GET_ITEM(r->words, run_first + p - r->first);
        r->place.position = r->first_position + run_first + p - r->first;
        r->place.word = (const uint8_t *)PyBytes_AS_STRING(word);
        r->place.word_len = (size_t)PyBytes_GET_SIZE(word);
        if (r->rendering.draws && n > 0) {
            double *cumulative = realloc(r->cumulative, (size_t)n * sizeof(double));
            if (!cumulative)
                return -1;
            r->cumulative = cumulative;
        }
        render_position(&r->text, s, &r->rendering, &r->place, run->answers + start, run->probabilities + start, n,
                        r->draws, r->cumulative);
    }
    return r->text.failed ? -1 : 0;
}

PyObject *Index_render(Index *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"sentence", "first", "last", "count", "mass", "excluded", "kind", "words", "line",
                            "first_position", "normalize", "name", "id", "draws", "seed", NULL};
    PyObject *sentence, *mass, *excluded, *words, *name = Py_None, *id = Py_None, *seed_object = NULL;
    Py_ssize_t first, last, first_position = 0;
    long long count, line = 0, draws = 0;
    int kind, normalize = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OnnLOOiO!|$LnpOOLO!:render", names, &sentence, &first, &last,
                                     &count, &mass, &excluded, &kind, &PyList_Type, &words, &line,
                                     &first_position, &normalize, &name, &id, &draws, &PyLong_Type, &seed_object))
        return NULL;
    unsigned long long seed = seed_object ? PyLong_AsUnsignedLongLong(seed_object) : 0;
    if (seed == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    int samples = kind == RENDER_SAMPLE_LINES || kind == RENDER_SAMPLE_JSON;
    if (kind < RENDER_LINE || kind > RENDER_SAMPLE_JSON || PyList_GET_SIZE(words) != last - first ||
        (samples && draws < 1) || (name == Py_None) != (id == Py_None) ||
        (name != Py_None && (!PyBytes_Check(name) || !PyBytes_Check(id)))) {
        PyErr_SetString(PyExc_ValueError, "render: a kind of render.h, a word per position, draws >= 1 for "
                        "samples, and name and id both bytes or both None");
        return NULL;
    }
    Rendered r = {{0}};
    r.rendering = (Rendering){kind, normalize, samples ? draws : 0, seed};
    r.place.line = line;
    if (name != Py_None) {
        r.place.name = (const uint8_t *)PyBytes_AS_STRING(name);
        r.place.name_len = (size_t)PyBytes_GET_SIZE(name);
        r.place.id = (const uint8_t *)PyBytes_AS_STRING(id);
        r.place.id_len = (size_t)PyBytes_GET_SIZE(id);
    }
    r.first = first;
    r.first_position = first_position;
    if (!(r.words = PyList_AsTuple(words)))  /* another thread may change the list meanwhile */
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(r.words); i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(r.words, i))) {
            Py_DECREF(r.words);
            PyErr_SetString(PyExc_TypeError, "words must be bytes");
            return NULL;
        }
    }
    PyObject *result = NULL;
    Query q;
    if (query_args(&q, sentence, first, last, count, mass, excluded) == 0) {
        Answers run = {0};
        run.normalized = 1;
        if (samples && !(r.draws = malloc((size_t)draws * sizeof(int64_t))))
            PyErr_NoMemory();
        else if (search_runs(self, &q, &run, render_run, NULL, &r) == 0)
            result = PyBytes_FromStringAndSize(r.text.data, (Py_ssize_t)r.text.len);
        answers_free(&run);
        query_release(&q);
    }
    text_free(&r.text);
    free(r.draws);
    free(r.cumulative);
    Py_DECREF(r.words);
    return result;
}

/* fields(ids, values) -> bytes: ``word value`` fields joined by tabs (output.h). */
PyObject *Index_fields(Index *self, PyObject *args) {
    PyObject *ids_object, *values_object, *result = NULL;
    if (!PyArg_ParseTuple(args, "OO:fields", &ids_object, &values_object) || check_open(self) < 0)
        return NULL;
    Py_buffer ids, values;
    Py_ssize_t n = -1;
    if (get_array(ids_object, &ids, 4, &n, "ids") < 0)
        return NULL;
    if (get_array(values_object, &values, 8, &n, "values") < 0) {
        PyBuffer_Release(&ids);
        return NULL;
    }
    Scored *answers = PyMem_Malloc((size_t)n * sizeof(Scored) + 1);
    if (!answers) {
        PyErr_NoMemory();
    } else {
        for (Py_ssize_t i = 0; i < n; i++)
            answers[i] = (Scored){((double *)values.buf)[i], ((uint32_t *)ids.buf)[i]};
        result = fields_bytes(self, answers, NULL, n);
        PyMem_Free(answers);
    }
    PyBuffer_Release(&ids);
    PyBuffer_Release(&values);
    return result;
}
