/* The searches of fastsubs._kernel's Engine and their answers as Python objects, arrays or
 * finished output text (module.c holds the module and the type).  Every entry reads its
 * limits with one parser (limits_args), the rendering ones their format with another
 * (rendering_args).  search() runs without the GIL in runs of positions, each run's answers
 * made into objects once the GIL is taken again; search_batch(), render() and
 * render_chunk() (fastsubs-query's lines, chunk.h) run whole in one release of the GIL, on
 * one searcher (on_a_searcher).  What it shares with the other files of the glue is
 * below them all, in module_base.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "chunk.h"
#include "engine.h"
#include "module_search.h"

/* The word ``id`` as a str (a new reference), decoded once and kept: the API names the
 * same frequent words again and again. */
static PyObject *word_text(EngineObject *self, uint32_t id) {
    if (!self->texts && !(self->texts = PyMem_Calloc(self->engine.store.vocab_size, sizeof(PyObject *))))
        return PyErr_NoMemory();
    if (!self->texts[id]) {
        size_t length;
        const char *word = store_word(&self->engine.store, id, &length);
        if (!(self->texts[id] = PyUnicode_DecodeUTF8(word, (Py_ssize_t)length, "surrogateescape")))
            return NULL;
    }
    return Py_NewRef(self->texts[id]);
}

/* ---------------------------------------------------------------- answers */

/* ``word value`` fields joined by tabs (render.h) as bytes. */
static PyObject *fields_bytes(EngineObject *self, const Scored *answers, const double *values, Py_ssize_t n) {
    int64_t size = render_fields_size(&self->engine.store, answers, values, n);
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "word id outside the vocabulary");
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (result) {
        char *start = PyBytes_AS_STRING(result);
        char *end = render_write_fields(&self->engine.store, answers, values, n, start);
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
 * API's substitutes.  Each is allocated as tuple's own constructor allocates an instance of
 * a subclass (``cls->tp_alloc``), its three items set in place, without the two argument
 * tuples ``tuple.__new__(cls, items)`` would build and drop; and it is left untracked by
 * the garbage collector, as the collector itself leaves a tuple that holds only strings and
 * floats (nothing it holds can lead back to it): 100 substitutes a position are then no
 * work for the collector's passes.  Together 27-32 -> 11-21 us a position at -n 100 over
 * batch()'s, answers dropped, and 105-116 -> 30-32 us kept (the demo model, 1,500 corpus
 * lines, CPU time). */
static PyObject *answer_records(EngineObject *self, const Scored *answers, const double *probabilities,
                                Py_ssize_t length, PyTypeObject *cls) {
    PyObject *result = PyList_New(length);
    for (Py_ssize_t i = 0; result && i < length; i++) {
        PyObject *record = cls->tp_alloc(cls, 3);
        if (record) {
            PyTuple_SET_ITEM(record, 0, word_text(self, answers[i].word));
            PyTuple_SET_ITEM(record, 1, PyFloat_FromDouble(answers[i].score));
            PyTuple_SET_ITEM(record, 2, PyFloat_FromDouble(probabilities[i]));
            if (!PyTuple_GET_ITEM(record, 0) || !PyTuple_GET_ITEM(record, 1) || !PyTuple_GET_ITEM(record, 2))
                Py_CLEAR(record);  /* (a tuple's items may be NULL: dropped as such) */
            else if (!cls->tp_dictoffset)
                PyObject_GC_UnTrack(record);  /* (an instance with a __dict__ could hold anything) */
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

static PyObject *answer_object(EngineObject *self, const Answers *a, int64_t position, int kind, PyTypeObject *record) {
    int64_t start = a->starts[position], length = a->starts[position + 1] - start;
    if (kind == ANSWER_RECORDS)
        return answer_records(self, a->answers + start, a->probabilities + start, length, record);
    return answer_arrays(a->answers + start, length);
}

/* ---------------------------------------------------------------- arguments */

/* The limits every search takes: ``count`` substitutes, probability mass ``mass`` (None:
 * no -p rule) and the ``excluded`` ids (a uint32 buffer, held in ``view``): 0, or -1 with
 * an exception set (nothing held). */
static int limits_args(SearchLimits *limits, Py_buffer *view, long long count, PyObject *mass, PyObject *excluded) {
    *limits = (SearchLimits){count, mass != Py_None, 0.0, NULL, 0};
    if (limits->use_mass && (limits->mass = PyFloat_AsDouble(mass)) == -1.0 && PyErr_Occurred())
        return -1;
    Py_ssize_t n = -1;
    if (module_get_array(excluded, view, 4, &n, "excluded") < 0)
        return -1;
    limits->excluded = view->buf;
    limits->n_excluded = n;
    return 0;
}

/* A sentence's ids (a uint32 buffer, held in ``view``) and its positions first ... last - 1:
 * its length, or -1 with an exception set (nothing held). */
static Py_ssize_t sentence_args(Py_buffer *view, PyObject *sentence, Py_ssize_t first, Py_ssize_t last) {
    Py_ssize_t n = -1;
    if (module_get_array(sentence, view, 4, &n, "sentence") < 0)
        return -1;
    if (first < 1 || last > n || first > last || n > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "targets outside 1 ... len(sentence) - 1");
        PyBuffer_Release(view);
        return -1;
    }
    return n;
}

/* How the rendering entries write each position: a ``kind`` of render.h (``columns``: may
 * it be RENDER_COLUMNS), -z, and the draws and seed of samples (draws >= 1 for them, >= 0
 * for columns, else ignored): 0, or -1 with an exception set. */
static int rendering_args(Rendering *r, int kind, int columns, int normalize, long long draws,
                          PyObject *seed_object) {
    unsigned long long seed = seed_object ? PyLong_AsUnsignedLongLong(seed_object) : 0;
    if (seed == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    int samples = kind == RENDER_SAMPLE_LINES || kind == RENDER_SAMPLE_JSON;
    if (kind < RENDER_LINE || kind > (columns ? RENDER_COLUMNS : RENDER_SAMPLE_JSON) || (samples && draws < 1) ||
        (kind == RENDER_COLUMNS && draws < 0)) {
        PyErr_SetString(PyExc_ValueError, "a kind of render.h (columns for chunks alone), and draws >= 1 for "
                                          "samples");
        return -1;
    }
    *r = (Rendering){kind, normalize, samples || kind == RENDER_COLUMNS ? draws : 0, seed};
    return 0;
}

/* ---------------------------------------------------------------- searches */

/* What runs on a searcher of the index without the GIL: a count, or -1 with ``failure`` set. */
typedef int64_t (*SearcherWork)(Searcher *searcher, void *context, Failure *failure);

/* Runs ``work`` on a searcher taken from the index, in one release of the GIL: what it
 * returns, or -1 with an exception set.  ``took``: the calling thread's work meanwhile
 * (searches, words evaluated, list entries read, substitutes listed), or NULL. */
static int64_t on_a_searcher(EngineObject *self, SearcherWork work, void *context, unsigned long long took[4]) {
    Failure failure = {0};
    unsigned long long before[4], after[4];
    int64_t result = -1;
    Py_BEGIN_ALLOW_THREADS
    engine_thread_work(before);
    Searcher *searcher = engine_take(&self->engine, &failure);
    if (searcher) {
        result = work(searcher, context, &failure);
        engine_give_back(&self->engine, searcher);
    }
    engine_thread_work(after);
    Py_END_ALLOW_THREADS
    for (int i = 0; took && i < 4; i++)
        took[i] = after[i] - before[i];
    if (result < 0)
        module_raise_failure(self->path, &failure);
    return result;
}

/* Searches are made into Answers without the GIL in runs of at most this many
 * substitutes (one release per run, not per position), then made into Python objects. */
#define SEARCH_RUN_ANSWERS ((int64_t)1 << 16)

PyObject *module_engine_search(EngineObject *self, PyObject *args) {
    PyObject *sentence, *mass, *excluded_object, *record_object = Py_None;
    Py_ssize_t first, last;
    long long count;
    int kind = ANSWER_ARRAYS;
    if (!PyArg_ParseTuple(args, "OnnLOO|iO:search", &sentence, &first, &last, &count, &mass, &excluded_object,
                          &kind, &record_object))
        return NULL;
    int has_record = record_object != Py_None;
    PyTypeObject *record = has_record ? (PyTypeObject *)record_object : NULL;
    if ((kind != ANSWER_ARRAYS && kind != ANSWER_RECORDS) || (kind == ANSWER_RECORDS) != has_record ||
        (has_record && (!PyType_Check(record_object) || !PyType_IsSubtype(record, &PyTuple_Type)))) {
        PyErr_SetString(PyExc_ValueError, "answer: 0 arrays, or 1 records (with a tuple subclass)");
        return NULL;
    }
    SearchLimits limits;
    Py_buffer ids, excluded;
    if (limits_args(&limits, &excluded, count, mass, excluded_object) < 0)
        return NULL;
    Py_ssize_t n = sentence_args(&ids, sentence, first, last);
    if (n < 0) {
        PyBuffer_Release(&excluded);
        return NULL;
    }
    Failure failure = {0};
    Searcher *searcher;
    Py_BEGIN_ALLOW_THREADS
    searcher = engine_take(&self->engine, &failure);
    Py_END_ALLOW_THREADS
    PyObject *results = searcher ? PyList_New(last - first) : module_raise_failure(self->path, &failure);
    Answers run = {0};
    run.normalized = kind == ANSWER_RECORDS;
    for (int target = (int)first; results && target < last;) {
        int run_first = target, rc;
        run.n = run.n_positions = 0;
        Py_BEGIN_ALLOW_THREADS
        rc = search_run(searcher, ids.buf, (int)n, &target, (int)last, &limits, &run, SEARCH_RUN_ANSWERS);
        Py_END_ALLOW_THREADS
        if (rc < 0) {
            module_raise_failure(self->path, &searcher->reader.failure);
            Py_CLEAR(results);
        }
        for (int64_t p = 0; results && p < run.n_positions; p++) {
            PyObject *answer = answer_object(self, &run, p, kind, record);
            if (!answer)
                Py_CLEAR(results);
            else
                PyList_SET_ITEM(results, run_first + p - first, answer);
        }
    }
    if (searcher)
        engine_give_back(&self->engine, searcher);
    search_answers_free(&run);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&excluded);
    return results;
}

/* search_batch(): every position of every sentence into one Answers. */
typedef struct {
    const uint32_t *ids;
    const int64_t *starts;
    Py_ssize_t n_sentences;
    const SearchLimits *limits;
    int eos;
    Answers all;
} Batch;

static int64_t search_sentences(Searcher *searcher, void *context, Failure *failure) {
    Batch *b = context;
    for (Py_ssize_t s = 0; s < b->n_sentences; s++) {
        int n = (int)(b->starts[s + 1] - b->starts[s]), target = 1;
        if (search_run(searcher, b->ids + b->starts[s], n, &target, b->eos ? n : n - 1, b->limits, &b->all,
                       INT64_MAX) < 0) {
            *failure = searcher->reader.failure;
            return -1;
        }
    }
    return 0;
}

/* search_batch(ids, starts, count, mass, excluded, eos) -> (word ids, scores, offsets): the
 * substitutes of every position of every sentence (sentence s is ids[starts[s] ..
 * starts[s + 1]), <s> and </s> included; its positions 1 ... n - 2, and n - 1 (</s>) with
 * ``eos``), searched in one release of the GIL: uint32 and float64 bytes, position by
 * position, best first, and int64 bytes of where each position's begin (one more at the end). */
PyObject *module_engine_search_batch(EngineObject *self, PyObject *args) {
    PyObject *ids_object, *starts_object, *mass, *excluded_object;
    long long count;
    int eos;
    if (!PyArg_ParseTuple(args, "OOLOOp:search_batch", &ids_object, &starts_object, &count, &mass, &excluded_object,
                          &eos))
        return NULL;
    Py_buffer ids, starts, excluded;
    Py_ssize_t n_ids = -1, n_starts = -1;
    SearchLimits limits;
    if (limits_args(&limits, &excluded, count, mass, excluded_object) < 0)
        return NULL;
    if (module_get_array(ids_object, &ids, 4, &n_ids, "ids") < 0) {
        PyBuffer_Release(&excluded);
        return NULL;
    }
    if (module_get_array(starts_object, &starts, 8, &n_starts, "starts") < 0) {
        PyBuffer_Release(&ids);
        PyBuffer_Release(&excluded);
        return NULL;
    }
    const int64_t *start = starts.buf;
    PyObject *result = NULL;
    int ok = n_starts >= 1 && start[0] == 0 && start[n_starts - 1] == n_ids;
    for (Py_ssize_t s = 0; ok && s + 1 < n_starts; s++)
        ok = start[s + 1] - start[s] >= 2 && start[s + 1] - start[s] <= INT_MAX;
    Batch batch = {ids.buf, start, n_starts - 1, &limits, eos, {0}};
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "starts: 0, ..., len(ids), each sentence two ids or more");
    } else if (on_a_searcher(self, search_sentences, &batch, NULL) == 0) {
        const Answers *all = &batch.all;
        PyObject *words = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)all->n * 4);
        PyObject *scores = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)all->n * 8);
        PyObject *offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(all->n_positions + 1) * 8);
        if (words && scores && offsets) {
            for (int64_t i = 0; i < all->n; i++) {
                ((uint32_t *)PyBytes_AS_STRING(words))[i] = all->answers[i].word;
                ((double *)PyBytes_AS_STRING(scores))[i] = all->answers[i].score;
            }
            int64_t *out_offsets = (int64_t *)PyBytes_AS_STRING(offsets);
            out_offsets[0] = 0;
            if (all->n_positions)
                memcpy(out_offsets, all->starts, (size_t)(all->n_positions + 1) * 8);
            result = PyTuple_Pack(3, words, scores, offsets);
        }
        Py_XDECREF(words);
        Py_XDECREF(scores);
        Py_XDECREF(offsets);
    }
    search_answers_free(&batch.all);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&excluded);
    return result;
}

/* ---------------------------------------------------------------- output text */

/* render(): the positions of one sentence given as ids. */
typedef struct {
    const ChunkRequest *request;
    Place place;
    const uint32_t *sentence;
    int n, first, last;
    const Span *words;
    Text out;
} Positions;

static int64_t render_sentence(Searcher *searcher, void *context, Failure *failure) {
    Positions *p = context;
    Scratch scratch;
    if (chunk_scratch_init(&scratch, &p->request->rendering) < 0) {
        common_fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    int rc = chunk_render_positions(searcher, p->request, &p->place, p->sentence, p->n, p->first, p->last, p->words,
                                    &scratch, &p->out, failure);
    chunk_scratch_free(&scratch);
    return rc;
}

PyObject *module_engine_render(EngineObject *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"sentence", "first", "last", "count", "mass", "excluded", "kind", "words", "line",
                            "first_position", "normalize", "name", "id", "draws", "seed", NULL};
    PyObject *sentence, *mass, *excluded_object, *words, *name = Py_None, *id = Py_None, *seed = NULL;
    Py_ssize_t first, last, first_position = 0;
    long long count, line = 0, draws = 0;
    int kind, normalize = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OnnLOOiO!|$LnpOOLO!:render", names, &sentence, &first, &last,
                                     &count, &mass, &excluded_object, &kind, &PyList_Type, &words, &line,
                                     &first_position, &normalize, &name, &id, &draws, &PyLong_Type, &seed))
        return NULL;
    ChunkRequest request = {.eos = 1};
    if (rendering_args(&request.rendering, kind, 0, normalize, draws, seed) < 0)
        return NULL;
    if (PyList_GET_SIZE(words) != last - first || (name == Py_None) != (id == Py_None) ||
        (name != Py_None && (!PyBytes_Check(name) || !PyBytes_Check(id)))) {
        PyErr_SetString(PyExc_ValueError, "render: a word per position, and name and id both bytes or both None");
        return NULL;
    }
    Positions p = {&request, {.line = line, .position = first_position}, NULL, 0, (int)first, (int)last, NULL, {0}};
    if (name != Py_None) {
        p.place.name = (const uint8_t *)PyBytes_AS_STRING(name);
        p.place.name_len = (size_t)PyBytes_GET_SIZE(name);
        p.place.id = (const uint8_t *)PyBytes_AS_STRING(id);
        p.place.id_len = (size_t)PyBytes_GET_SIZE(id);
    }
    Py_buffer ids, excluded;
    PyObject *held, *result = NULL;
    if (limits_args(&request.limits, &excluded, count, mass, excluded_object) < 0)
        return NULL;
    if ((p.n = (int)sentence_args(&ids, sentence, first, last)) < 0) {
        PyBuffer_Release(&excluded);
        return NULL;
    }
    p.sentence = ids.buf;
    Span *spans = module_byte_spans(words, &held, "words");
    if (spans && (p.words = spans, on_a_searcher(self, render_sentence, &p, NULL) == 0))
        result = PyBytes_FromStringAndSize(p.out.data, (Py_ssize_t)p.out.len);
    render_text_free(&p.out);
    PyMem_Free(spans);
    Py_XDECREF(held);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&excluded);
    return result;
}

/* Whether a signal's Python handler raised (SIGINT, SIGTERM: fastsubs.cli.support): run
 * from a search without the GIL, which it takes for the check; the exception stays set
 * for module_engine_render_chunk to return. */
static int signal_raised(void) {
    PyGILState_STATE state = PyGILState_Ensure();
    int raised = PyErr_CheckSignals() < 0;
    PyGILState_Release(state);
    return raised;
}

/* render_chunk(): input lines into output. */
typedef struct {
    const ChunkRequest *request;
    const Span *lines;
    Py_ssize_t n;
    long long first_line;
    Text out, problem;
} Chunk;

static int64_t render_chunk(Searcher *searcher, void *context, Failure *failure) {
    Chunk *c = context;
    return chunk_render_lines(searcher, c->request, c->lines, c->n, c->first_line, &c->out, &c->problem, failure);
}

PyObject *module_engine_render_chunk(EngineObject *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"lines", "first_line", "count", "mass", "excluded", "kind", "targets", "eos",
                            "normalize", "draws", "seed", "window", NULL};
    PyObject *lines, *mass, *excluded_object, *seed = NULL, *window_object = Py_None;
    long long first_line, count, draws = 0;
    int kind, targets = 0, eos = 1, normalize = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!LLOOi|$pppLO!O:render_chunk", names, &PyList_Type, &lines,
                                     &first_line, &count, &mass, &excluded_object, &kind, &targets, &eos,
                                     &normalize, &draws, &PyLong_Type, &seed, &window_object))
        return NULL;
    ChunkRequest request = {.targets = targets, .eos = eos, .interrupted = signal_raised};
    Window window;
    RecordWindow record_window;
    if (window_object != Py_None) {
        if (PyList_GET_SIZE(lines) != 1) {
            PyErr_SetString(PyExc_ValueError, "render_chunk: a window is of one line");
            return NULL;
        }
        if (targets) {
            if (!PyArg_ParseTuple(window_object, "LL:window", &record_window.before, &record_window.after))
                return NULL;
            if (record_window.before < 0 || record_window.after < 0) {
                PyErr_SetString(PyExc_ValueError, "render_chunk: a record's window counts tokens from 0");
                return NULL;
            }
            request.record_window = &record_window;
        } else {
            if (!PyArg_ParseTuple(window_object, "LLLpp:window", &window.first_position, &window.lead,
                                  &window.trail, &window.at_start, &window.at_end))
                return NULL;
            if (window.first_position < 0) {
                PyErr_SetString(PyExc_ValueError, "render_chunk: a window's positions count from 0");
                return NULL;
            }
            request.window = &window;
        }
    }
    if (rendering_args(&request.rendering, kind, 1, normalize, draws, seed) < 0)
        return NULL;
    if (first_line < 1 || (kind == RENDER_FIELDS && !targets)) {
        PyErr_SetString(PyExc_ValueError, "render_chunk: lines from 1, and fields alone only after -t records");
        return NULL;
    }
    Py_buffer excluded;
    if (limits_args(&request.limits, &excluded, count, mass, excluded_object) < 0)
        return NULL;
    PyObject *held, *result = NULL;
    Chunk chunk = {&request, module_byte_spans(lines, &held, "lines"), 0, first_line, self->kept_output, {0}};
    self->kept_output = (Text){0};  /* (another thread's call meanwhile makes its own) */
    chunk.out.len = 0;
    unsigned long long took[4];
    int64_t done = -1;
    if (chunk.lines) {
        chunk.n = PyTuple_GET_SIZE(held);
        done = on_a_searcher(self, render_chunk, &chunk, took);
    }
    if (done >= 0) {
        PyObject *problem = chunk.problem.len ? PyUnicode_DecodeUTF8(chunk.problem.data,
                                                                     (Py_ssize_t)chunk.problem.len, "strict")
                                              : Py_NewRef(Py_None);
        PyObject *data = problem ? PyBytes_FromStringAndSize(chunk.out.data, (Py_ssize_t)chunk.out.len) : NULL;
        if (data)
            result = Py_BuildValue("(NLN(KKKK))", data, (long long)done, problem, took[0], took[1], took[2], took[3]);
        else
            Py_XDECREF(problem);
    }
    if (!chunk.out.failed && chunk.out.cap <= KEPT_OUTPUT_BYTES && !self->kept_output.data)
        self->kept_output = chunk.out;  /* (the GIL is held: no other call takes or gives it now) */
    else
        render_text_free(&chunk.out);
    render_text_free(&chunk.problem);
    PyMem_Free((void *)chunk.lines);
    Py_XDECREF(held);
    PyBuffer_Release(&excluded);
    return result;
}

/* fields(ids, values) -> bytes: ``word value`` fields joined by tabs (render.h). */
PyObject *module_engine_fields(EngineObject *self, PyObject *args) {
    PyObject *ids_object, *values_object, *result = NULL;
    if (!PyArg_ParseTuple(args, "OO:fields", &ids_object, &values_object) || module_check_open(self) < 0)
        return NULL;
    Py_buffer ids, values;
    Py_ssize_t n = -1;
    if (module_get_array(ids_object, &ids, 4, &n, "ids") < 0)
        return NULL;
    if (module_get_array(values_object, &values, 8, &n, "values") < 0) {
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
