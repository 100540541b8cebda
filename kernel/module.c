/* fastsubs._kernel: the glue between Python and the C core.  It converts arguments and
 * results and maps failures to exceptions; what an open index is and does lives in
 * engine.c (lifecycle, searchers), store.c (the format), search.c and render.c.
 *
 * ``Engine(path)`` opens and checks an index in one call; fastsubs.core.Core subclasses
 * it with the package's helpers, and fastsubs.index.SubstituteIndex (the public API) holds
 * one.  This file holds the module, the type and the
 * look-ups the tools make; module_search.c the searches and their answers, which run
 * without the GIL; module_format.c the layouts; module_base.c what all of them share.  The
 * calls run one way: this file calls those, none of them calls this one. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "engine.h"
#include "module_base.h"
#include "module_codec.h"
#include "module_format.h"
#include "module_search.h"
#include "render.h"

static PyObject *id_or_none(uint32_t id) {
    return id == FS_NO_WORD ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(id);
}

/* ---------------------------------------------------------------- opening and closing */

static int Engine_init(EngineObject *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"path", NULL};
    PyObject *path;
    if (self->opened || self->path) {
        PyErr_SetString(PyExc_RuntimeError, "the index is already open");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&", names, PyUnicode_FSDecoder, &path))
        return -1;
    self->path = path;
    PyObject *encoded = PyUnicode_EncodeFSDefault(path);
    if (!encoded)
        return -1;
    Failure failure = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = engine_open(&self->engine, PyBytes_AS_STRING(encoded), &failure);
    Py_END_ALLOW_THREADS
    Py_DECREF(encoded);
    if (rc < 0) {
        module_raise_failure(path, &failure);
        return -1;
    }
    self->opened = 1;
    return 0;
}

static void Engine_dealloc(EngineObject *self) {
    if (self->texts) {
        for (uint32_t i = 0; i < self->engine.store.vocab_size; i++)
            Py_XDECREF(self->texts[i]);
        PyMem_Free(self->texts);
    }
    if (self->opened)
        engine_free(&self->engine);
    render_text_free(&self->kept_output);
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Engine_close(EngineObject *self, PyObject *unused) {
    (void)unused;
    if (self->opened)
        engine_close(&self->engine);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- words */

/* word(id) -> bytes: the word with that id, as the model spells it. */
static PyObject *Engine_word(EngineObject *self, PyObject *arg) {
    if (module_check_open(self) < 0)
        return NULL;
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (id >= self->engine.store.vocab_size) {
        PyErr_SetString(PyExc_ValueError, "word id outside the vocabulary");
        return NULL;
    }
    size_t length;
    const char *word = store_word(&self->engine.store, (uint32_t)id, &length);
    return PyBytes_FromStringAndSize(word, (Py_ssize_t)length);
}

/* ids(tokens, unknown) -> bytes of uint32: each token's id, ``unknown`` for those the
 * vocabulary lacks; looked up without the GIL. */
static PyObject *Engine_ids(EngineObject *self, PyObject *args) {
    PyObject *tokens, *held;
    unsigned int unknown;
    if (!PyArg_ParseTuple(args, "O!I:ids", &PyList_Type, &tokens, &unknown))
        return NULL;
    Span *spans = module_byte_spans(tokens, &held, "tokens");
    if (!spans)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(held);
    Failure failure = {0};
    PyObject *result = PyBytes_FromStringAndSize(NULL, n * 4);
    if (result && engine_hold(&self->engine, &failure) < 0) {
        Py_CLEAR(result);
        module_raise_failure(self->path, &failure);
    }
    if (result) {
        uint32_t *ids = (uint32_t *)PyBytes_AS_STRING(result);
        const Store *store = &self->engine.store;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t id = store_word_id(store, (const char *)spans[i].text, spans[i].len);
            ids[i] = id == FS_NO_WORD ? unknown : id;
        }
        Py_END_ALLOW_THREADS
        engine_release(&self->engine);
    }
    PyMem_Free(spans);
    Py_DECREF(held);
    return result;
}

/* ---------------------------------------------------------------- inspecting the index */

static PyObject *Engine_metadata(EngineObject *self, PyObject *unused) {
    (void)unused;
    if (module_check_open(self) < 0)
        return NULL;
    return PyBytes_FromStringAndSize((const char *)self->engine.store.meta, (Py_ssize_t)self->engine.store.meta_len);
}

/* The word ids of a tuple of ints into ``ids`` (at most FS_MAX_ORDER); their number, or -1. */
static int parse_ids(PyObject *tuple, uint32_t *ids) {
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    if (n < 1 || n > FS_MAX_ORDER) {
        PyErr_SetString(PyExc_ValueError, "word ids: 1 ... the largest order");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long id = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(tuple, i));
        if (id == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        ids[i] = id > FS_NO_WORD ? FS_NO_WORD : (uint32_t)id;
    }
    return (int)n;
}

/* pattern(slot, ids) -> None | (ids, alpha, beta or None, positions): a copy of the
 * pattern's fields (uint32, float32, float32, uint32 bytes), checked as a search checks it. */
static PyObject *Engine_pattern(EngineObject *self, PyObject *args) {
    int slot, n;
    PyObject *fixed;
    uint32_t ids[FS_MAX_ORDER];
    if (!PyArg_ParseTuple(args, "iO!:pattern", &slot, &PyTuple_Type, &fixed) || module_check_open(self) < 0 ||
        (n = parse_ids(fixed, ids)) < 0)
        return NULL;
    if (slot < 0 || slot > n) {
        PyErr_SetString(PyExc_ValueError, "slot outside 0 ... the number of fixed words");
        return NULL;
    }
    Failure failure = {0};
    if (engine_hold(&self->engine, &failure) < 0)
        return module_raise_failure(self->path, &failure);
    const Store *s = &self->engine.store;
    DiskPattern p;
    int found = engine_find_pattern(&self->engine, slot, ids, n, &p, &failure);
    PyObject *result = NULL;
    if (found > 0) {
        PyObject *out_ids = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)p.count);
        PyObject *alpha = PyBytes_FromStringAndSize((const char *)p.alpha, 4 * (Py_ssize_t)p.count);
        PyObject *beta = p.beta_table ? PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)p.count) : Py_NewRef(Py_None);
        PyObject *positions = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)p.count);
        if (out_ids && alpha && beta && positions) {
            for (uint32_t i = 0; i < p.count; i++) {
                ((uint32_t *)PyBytes_AS_STRING(out_ids))[i] = pattern_id(s, &p, i);
                ((uint32_t *)PyBytes_AS_STRING(positions))[i] = position_at(&p, i);
                if (p.beta_table)
                    ((float *)PyBytes_AS_STRING(beta))[i] = pattern_beta(&p, i);
            }
            result = PyTuple_Pack(4, out_ids, alpha, beta, positions);
        }
        Py_XDECREF(out_ids);
        Py_XDECREF(alpha);
        Py_XDECREF(beta);
        Py_XDECREF(positions);
    } else if (found == 0) {
        result = Py_NewRef(Py_None);
    } else {
        module_raise_failure(self->path, &failure);
    }
    engine_release(&self->engine);
    return result;
}

/* ngram(ids) -> None | (alpha, beta): the scores of the n-gram ``ids`` (tuple of word ids). */
static PyObject *Engine_ngram(EngineObject *self, PyObject *arg) {
    uint32_t ids[FS_MAX_ORDER];
    int n;
    if (!PyTuple_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "ngram() takes a tuple of word ids");
        return NULL;
    }
    if (module_check_open(self) < 0 || (n = parse_ids(arg, ids)) < 0)
        return NULL;
    double alpha, beta;
    Failure failure = {0};
    int found = engine_ngram(&self->engine, ids, n, &alpha, &beta, &failure);
    if (found < 0)
        return module_raise_failure(self->path, &failure);
    return found ? Py_BuildValue("(dd)", alpha, beta) : Py_NewRef(Py_None);
}

/* unigrams() -> (alpha, beta): copies of every word's unigram scores (float32 bytes). */
static PyObject *Engine_unigrams(EngineObject *self, PyObject *unused) {
    (void)unused;
    if (module_check_open(self) < 0)
        return NULL;
    const Store *s = &self->engine.store;
    return Py_BuildValue("(y#y#)", (const char *)s->unigram_alpha, (Py_ssize_t)(s->vocab_size * sizeof(ix_f32)),
                         (const char *)s->unigram_beta, (Py_ssize_t)(s->vocab_size * sizeof(ix_f32)));
}

/* check_patterns(order) -> (records, patterns, entries): every record of the order read and checked. */
static PyObject *Engine_check_patterns(EngineObject *self, PyObject *arg) {
    long order = PyLong_AsLong(arg);
    if ((order == -1 && PyErr_Occurred()) || module_check_open(self) < 0)
        return NULL;
    PatternCounts counts;
    Failure failure = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = engine_check_patterns(&self->engine, order > FS_MAX_ORDER ? 0 : (int)order, &counts, &failure);
    Py_END_ALLOW_THREADS
    if (rc)
        return module_raise_failure(self->path, &failure);
    return Py_BuildValue("(KKK)", (unsigned long long)counts.records, (unsigned long long)counts.patterns,
                         (unsigned long long)counts.entries);
}

static PyObject *Engine_check_arrays(EngineObject *self, PyObject *unused) {
    (void)unused;
    Failure failure = {0};
    if (module_check_open(self) < 0)
        return NULL;
    if (engine_check_arrays(&self->engine, &failure) < 0)
        return module_raise_failure(self->path, &failure);
    Py_RETURN_NONE;
}

static PyObject *Engine_counters(EngineObject *self, PyObject *unused) {
    (void)unused;
    unsigned long long t[6] = {0};
    if (self->opened)
        engine_counters(&self->engine, t);
    return Py_BuildValue("(KKKKKK)", t[0], t[1], t[2], t[3], t[4], t[5]);
}

/* pair_census(): what the searchers' kept pair orders hold (for tests). */
static PyObject *Engine_pair_census(EngineObject *self, PyObject *unused) {
    (void)unused;
    unsigned long long t[4] = {0};
    if (self->opened)
        engine_pair_census(&self->engine, t);
    return Py_BuildValue("(KKKK)", t[0], t[1], t[2], t[3]);
}

/* set_cache(records, kept_bytes): the cache sizes of searchers (for tests). */
static PyObject *Engine_set_cache(EngineObject *self, PyObject *args) {
    Py_ssize_t records, kept;
    if (!PyArg_ParseTuple(args, "nn:set_cache", &records, &kept) || module_check_open(self) < 0)
        return NULL;
    if (records < 0 || kept < 0) {
        PyErr_SetString(PyExc_ValueError, "cache sizes must not be negative");
        return NULL;
    }
    engine_set_cache(&self->engine, (size_t)records, (size_t)kept);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- attributes */

/* The index's attributes that Engine_get reads, one getter for all (each is a field or two
 * of the open index). */
enum Attribute { ORDER, VOCAB_SIZE, BOS_ID, EOS_ID, UNK_ID, ID_BYTES, COUNTS, RECORDS, SEARCHERS, PATH };

static PyObject *Engine_get(EngineObject *self, void *which) {
    const Store *s = &self->engine.store;
    if (!self->opened) {
        PyErr_SetString(PyExc_ValueError, "the index is not open");
        return NULL;
    }
    switch ((enum Attribute)(intptr_t)which) {
    case ORDER: return PyLong_FromLong(s->order);
    case VOCAB_SIZE: return PyLong_FromUnsignedLong(s->vocab_size);
    case BOS_ID: return id_or_none(s->bos);
    case EOS_ID: return id_or_none(s->eos);
    case UNK_ID: return id_or_none(s->unk);
    case ID_BYTES: return PyLong_FromUnsignedLong(s->id_bytes);
    case COUNTS: {
        PyObject *counts = PyTuple_New(s->order);
        for (int m = 1; counts && m <= s->order; m++)
            PyTuple_SET_ITEM(counts, m - 1, PyLong_FromUnsignedLongLong(s->counts[m]));
        return counts;
    }
    case RECORDS: {
        PyObject *records = PyTuple_New(s->order - 1);
        for (int m = 2; records && m <= s->order; m++)
            PyTuple_SET_ITEM(records, m - 2, PyLong_FromUnsignedLongLong(s->records[m]));
        return records;
    }
    case SEARCHERS: return PyLong_FromLong(self->engine.n_all);
    case PATH: break;
    }
    return Py_NewRef(self->path);
}

static PyObject *Engine_get_closed(EngineObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(!self->opened || self->engine.closed);
}

#define GETTER(name, which, doc) {name, (getter)Engine_get, NULL, doc, (void *)(intptr_t)(which)}
static PyGetSetDef Engine_getset[] = {
    GETTER("order", ORDER, "The model's n-gram order."),
    GETTER("vocab_size", VOCAB_SIZE, "Words in the model's vocabulary, <s> included."),
    GETTER("bos_id", BOS_ID, "The id of <s>, or None."),
    GETTER("eos_id", EOS_ID, "The id of </s>, or None."),
    GETTER("unk_id", UNK_ID, "The id of <unk>, or None."),
    GETTER("id_bytes", ID_BYTES, "Bytes per word id in the index's keys (a pattern's data packs its ids: "
                                 "fastsubs.format.id_bits(vocab_size) bits each)."),
    GETTER("counts", COUNTS, "N-grams per order, 1 ... N."),
    GETTER("records", RECORDS, "Records of each pattern database, orders 2 ... N."),
    GETTER("searchers", SEARCHERS, "Searchers made so far: one per thread that searched while the others were busy."),
    GETTER("path", PATH, "The index's path, as given."),
    {"closed", (getter)Engine_get_closed, NULL, "Whether close() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Engine_methods[] = {
    {"close", (PyCFunction)Engine_close, METH_NOARGS,
     "close(): no more searches; the map is released once none runs (safe from any thread)."},
    {"word", (PyCFunction)Engine_word, METH_O, "word(id) -> bytes: the word with that id."},
    {"ids", (PyCFunction)Engine_ids, METH_VARARGS,
     "ids(tokens: list of bytes, unknown: int) -> bytes of uint32: each token's id (``unknown`` for words\n"
     "the vocabulary lacks)."},
    {"search", (PyCFunction)module_engine_search, METH_VARARGS,
     "search(sentence, first, last, count, mass, excluded, answer=0, record=None) -> list\n\n"
     "The best ``count`` substitutes (at most V - 1; fewer when the -p rule with ``mass``, or None,\n"
     "stops first) of positions first ... last - 1 of ``sentence`` (a uint32 buffer of word ids, <s>\n"
     "and </s> included), never the ``excluded`` words (a uint32 buffer).  ``answer`` says what each\n"
     "position gives: 0 (ids as bytes of uint32, scores as bytes of float64), or 1 a list of\n"
     "``record``(word, score, p / sum p).  Runs without the GIL; any number of threads may search at once."},
    {"search_batch", (PyCFunction)module_engine_search_batch, METH_VARARGS,
     "search_batch(ids, starts, count, mass, excluded, eos) -> (word ids, scores, offsets)\n\n"
     "The substitutes of every position of many sentences (sentence s: ids[starts[s] .. starts[s + 1]),\n"
     "uint32 ids with <s> and </s>; starts int64), searched in one release of the GIL: uint32 ids and\n"
     "float64 scores, position by position, best first, and int64 offsets of the positions' answers."},
    {"render", (PyCFunction)module_engine_render, METH_VARARGS | METH_KEYWORDS,
     "render(sentence, first, last, count, mass, excluded, kind, words, *, line=0, first_position=0,\n"
     "normalize=False, name=None, id=None, draws=0, seed=0) -> bytes\n\n"
     "The output of positions first ... last - 1 (searched as search() does) in one of fastsubs-query's\n"
     "formats (``kind``, kernel/render_layout.h: 0 text lines, 1 fields alone, 2 JSON lines, 3 sample lines,\n"
     "4 samples as JSON), ``words`` (bytes) naming the token of each position, ``line`` the input line\n"
     "(from 1), ``first_position`` the position of the first (from 0), ``name`` and ``id`` a -t record's."},
    {"render_chunk", (PyCFunction)module_engine_render_chunk, METH_VARARGS | METH_KEYWORDS,
     "render_chunk(lines, first_line, count, mass, excluded, kind, *, targets=False, eos=True, normalize=False,\n"
     "draws=0, seed=0, window=None) -> (bytes, done, problem, work)\n\n"
     "fastsubs-query's output for input ``lines`` (bytes; numbered from ``first_line``), in one release\n"
     "of the GIL (kernel/chunk.h): each a sentence (its tokens and, with ``eos``, </s>), or with\n"
     "``targets`` a -t record (kind 1, fields alone, writes the record before them); searched as\n"
     "search() does and written as render() writes.  ``done``: the lines the output covers, all of\n"
     "them unless a -t record cannot be read: then ``problem`` says why (else None) and it is line\n"
     "``first_line + done``.  ``work``: this call's (searches, words evaluated, list entries read,\n"
     "substitutes listed).  ``window``: ``(first_position, lead, trail, at_start, at_end)``, the one\n"
     "line is a window of a longer one (kernel/chunk.h Window)."},
    {"fields", (PyCFunction)module_engine_fields, METH_VARARGS,
     "fields(ids: uint32 array, values: float64 array) -> bytes: ``word value`` fields joined by tabs,\n"
     "each value as ``b\"%.8f\" % value`` would write it."},
    {"metadata", (PyCFunction)Engine_metadata, METH_NOARGS,
     "metadata() -> bytes: the index's msgpack metadata (checked against the header at open)."},
    {"pattern", (PyCFunction)Engine_pattern, METH_VARARGS,
     "pattern(slot, fixed_ids) -> None | (ids, alpha, beta, positions): a copy of one pattern's fields."},
    {"ngram", (PyCFunction)Engine_ngram, METH_O,
     "ngram(ids) -> None | (alpha, beta): the log10 probability and back-off weight of the n-gram ``ids``."},
    {"unigrams", (PyCFunction)Engine_unigrams, METH_NOARGS,
     "unigrams() -> (alpha, beta): copies of every word's unigram log-probability and back-off weight\n"
     "(bytes of float32, by word id)."},
    {"check_patterns", (PyCFunction)Engine_check_patterns, METH_O,
     "check_patterns(order) -> (records, patterns, entries): read and check every record of the order."},
    {"check_arrays", (PyCFunction)Engine_check_arrays, METH_NOARGS,
     "check_arrays(): check that the unigram and spelling orders sort the vocabulary."},
    {"counters", (PyCFunction)Engine_counters, METH_NOARGS,
     "counters() -> (searches, words evaluated, list entries read, substitutes listed, pattern look-ups,\n"
     "look-ups that read the index): totals over every search of this index."},
    {"pair_census", (PyCFunction)Engine_pair_census, METH_NOARGS,
     "pair_census() -> (orders, entries, room, oversized): the pair orders the searchers keep, their words,\n"
     "the entries their arrays have room for, and the orders with room for more than max(16, twice their\n"
     "words) (while no search runs)."},
    {"set_cache", (PyCFunction)Engine_set_cache, METH_VARARGS,
     "set_cache(records, kept_bytes): the cache slots of searchers made from now on, and the bytes of\n"
     "rank maps and sorted prefixes each keeps from its next search (any sizes give the same answers)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs._kernel.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Engine(path)\n\nAn index opened read-only, memory-mapped and checked, with the searchers that read it.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
    .tp_getset = Engine_getset,
};

/* ---------------------------------------------------------------- module functions */

static PyObject *thread_counters(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    unsigned long long work[4];
    engine_thread_work(work);
    return Py_BuildValue("(KKKK)", work[0], work[1], work[2], work[3]);
}

/* normalized(scores: float64 buffer, best first) -> bytes of float64: p / sum p (search.h). */
static PyObject *normalized(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer scores;
    Py_ssize_t n = -1;
    if (module_get_array(arg, &scores, 8, &n, "scores") < 0)
        return NULL;
    PyObject *result = PyBytes_FromStringAndSize(NULL, n * 8);
    if (result)
        search_normalize(scores.buf, n, (double *)PyBytes_AS_STRING(result));
    PyBuffer_Release(&scores);
    return result;
}

/* json_number(value) -> bytes: a finite float as the JSON lines write it (render.h). */
static PyObject *json_number(PyObject *module, PyObject *arg) {
    (void)module;
    double value = PyFloat_AsDouble(arg);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    if (!isfinite(value)) {
        PyErr_SetString(PyExc_ValueError, "json_number() takes a finite number");
        return NULL;
    }
    Text t = {0};
    render_text_repr(&t, value);
    PyObject *result = t.failed ? PyErr_NoMemory() : PyBytes_FromStringAndSize(t.data, (Py_ssize_t)t.len);
    render_text_free(&t);
    return result;
}

static PyMethodDef module_methods[] = {
    {"json_number", json_number, METH_O,
     "json_number(value: float) -> bytes: a finite number as the JSON lines write it (as Python's repr())."},
    {"normalized", normalized, METH_O,
     "normalized(scores: float64 buffer, best first) -> bytes of float64: p / sum p, p = 10^score."},
    {"thread_counters", thread_counters, METH_NOARGS,
     "thread_counters() -> (searches, words evaluated, list entries read, substitutes listed): totals over\n"
     "the searches the calling thread has made, on any index."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernel_module = {
    PyModuleDef_HEAD_INIT, "fastsubs._kernel",
    "The C core: indexes opened, checked and read in place, the exact search, output formatting.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

/* glibc raises its mmap threshold each time a block it mmapped is freed (up to 32 MiB),
 * so the search's cached orders and sorted prefixes, which grow by realloc and are
 * dropped when the reader's budget needs room, come from the heap and fragment it: a
 * worker over the 20,000-line corpus sample at -n 100 held 56.6-57.3 MiB of private
 * memory against 52.3-53.0 with the threshold held at its default 128 KiB (setting it
 * is what stops the raising; held at 1 MiB, 56.1).  Its cost: more blocks mapped and
 * unmapped, +0.06 s of system time in a 3.3 s first pass over 3,000 corpus lines.  A
 * process-wide setting, taken when the core is loaded. */
static void keep_big_blocks_mapped(void) {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

PyMODINIT_FUNC PyInit__kernel(void) {
    keep_big_blocks_mapped();
    if (PyType_Ready(&EngineType) < 0)
        return NULL;
    if (module_load_errors() < 0)
        return NULL;
    PyObject *module = PyModule_Create(&kernel_module);
    if (!module)
        return NULL;
    PyObject *constants = module_format_constants(), *layout = module_render_layout();
    int rc = constants && layout ? PyModule_AddObjectRef(module, "FORMAT", constants) : -1;
    if (rc == 0)
        rc = PyModule_AddObjectRef(module, "RENDER", layout);
    Py_XDECREF(constants);
    Py_XDECREF(layout);
    if (rc == 0)
        rc = PyModule_AddFunctions(module, module_codec_methods);
    if (rc < 0 || PyModule_AddType(module, &EngineType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
