/* fastsubs.indexer._native: the index builder's hot loop in C, reading n-gram lines.
 *
 * WordTable(words) maps a model's vocabulary (the unigrams, read first) to word ids;
 * WordTable.parse(text, n, order, has_beta) parses n n-gram lines of one order at once
 * (arpa.py's bulk parser, _parse_bulk, which it replaces): the ids of their words and
 * their scores as the index stores them (float32).  It is a fast path only: it accepts
 * exactly the lines the line-by-line parser of arpa.py accepts, and returns None for a
 * batch with anything else in it (a word that is no unigram, a number it does not take, a
 * score out of range, a wrong number of fields), so that the line-by-line parser reads
 * that batch again and names the fault.
 *
 * read_number(token) is how both parsers read a number: C's strtod over the whole token,
 * in the "C" locale whatever the process's (Python's float() also takes "1_0", which KenLM
 * and SRILM refuse, and an API user's setlocale() would change strtod's decimal point). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#ifdef __APPLE__
#include <xlocale.h>  /* strtod_l */
#endif

/* The "C" locale, made once at import: the numbers' syntax, whatever setlocale() says. */
static locale_t c_locale;

typedef struct {
    PyObject_HEAD
    PyObject *words;            /* a tuple of bytes: the vocabulary, by id */
    int32_t *slots;             /* open addressing: word id, or -1 */
    uint64_t mask;
} WordTable;

static uint64_t hash_word(const char *word, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)word[i]) * 0x100000001b3ull;  /* FNV-1a */
    return h ^ h >> 32;
}

static int32_t word_id(const WordTable *t, const char *word, size_t n) {
    for (uint64_t at = hash_word(word, n) & t->mask;; at = (at + 1) & t->mask) {
        int32_t id = t->slots[at];
        if (id < 0)
            return -1;
        PyObject *known = PyTuple_GET_ITEM(t->words, id);
        if ((size_t)PyBytes_GET_SIZE(known) == n && !memcmp(PyBytes_AS_STRING(known), word, n))
            return id;
    }
}

static int WordTable_init(WordTable *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"words", NULL};
    PyObject *words;
    if (self->words || !PyArg_ParseTupleAndKeywords(args, kwds, "O", names, &words))
        return self->words ? (PyErr_SetString(PyExc_RuntimeError, "already made"), -1) : -1;
    if (!(self->words = PySequence_Tuple(words)))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(self->words);
    if (n >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "too many words");
        return -1;
    }
    uint64_t size = 16;
    while (size < 2 * (uint64_t)n)
        size *= 2;
    if (!(self->slots = PyMem_Malloc(size * sizeof(int32_t)))) {
        PyErr_NoMemory();
        return -1;
    }
    memset(self->slots, 0xFF, size * sizeof(int32_t));
    self->mask = size - 1;
    for (Py_ssize_t id = 0; id < n; id++) {
        PyObject *word = PyTuple_GET_ITEM(self->words, id);
        if (!PyBytes_Check(word)) {
            PyErr_SetString(PyExc_TypeError, "words must be bytes");
            return -1;
        }
        uint64_t at = hash_word(PyBytes_AS_STRING(word), (size_t)PyBytes_GET_SIZE(word)) & self->mask;
        while (self->slots[at] >= 0)
            at = (at + 1) & self->mask;
        self->slots[at] = (int32_t)id;  /* (arpa.py refuses a word given twice before this is made) */
    }
    return 0;
}

static void WordTable_dealloc(WordTable *self) {
    Py_XDECREF(self->words);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

/* The number ``text[0 .. n)`` (``text[n]`` is NUL) as C's strtod reads it in the "C"
 * locale: 0 when it reads the whole of it, -1 when it stops before its end (an underscore,
 * a second point, a NUL, ...) or there is nothing to read. */
static int read_whole(const char *text, size_t n, double *value) {
    char *stop;
    *value = strtod_l(text, &stop, c_locale);
    return n > 0 && stop == text + n ? 0 : -1;
}

/* A score of a line, from the token [start, end): 0 for a finite number, or for -inf
 * written as such (log10 of 0, as KenLM writes it: the careful parser's MINUS_INFINITY);
 * -1 for anything else, a number that overflows to -inf (-1e400) included, which the
 * line-by-line parser then names. */
static int parse_number(const char *start, const char *end, double *value) {
    char text[64];
    size_t n = (size_t)(end - start);
    if (n == 0 || n >= sizeof(text))
        return -1;
    if ((n == 4 && strncasecmp(start, "-inf", 4) == 0) || (n == 9 && strncasecmp(start, "-infinity", 9) == 0)) {
        *value = -INFINITY;
        return 0;
    }
    memcpy(text, start, n);
    text[n] = 0;
    return read_whole(text, n, value) == 0 && isfinite(*value) ? 0 : -1;
}

/* read_number(token) -> float | None */
static PyObject *read_number(PyObject *module, PyObject *token) {
    (void)module;
    double value;
    if (!PyBytes_Check(token)) {
        PyErr_SetString(PyExc_TypeError, "read_number takes bytes");
        return NULL;
    }
    if (read_whole(PyBytes_AS_STRING(token), (size_t)PyBytes_GET_SIZE(token), &value) < 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(value);
}

/* parse(text, n, order, has_beta) -> (ids, alpha, beta) | None */
static PyObject *WordTable_parse(WordTable *self, PyObject *args) {
    Py_buffer text;
    Py_ssize_t n;
    int order, has_beta;
    if (!PyArg_ParseTuple(args, "y*nip:parse", &text, &n, &order, &has_beta))
        return NULL;
    if (order < 2 || order > 64 || n < 0) {
        PyBuffer_Release(&text);
        PyErr_SetString(PyExc_ValueError, "order 2 ... 64, n >= 0");
        return NULL;
    }
    int32_t *ids = PyMem_Malloc((size_t)(n * order + 1) * sizeof(int32_t));
    float *alpha = PyMem_Malloc((size_t)(n + 1) * sizeof(float)), *beta = PyMem_Malloc((size_t)(n + 1) * sizeof(float));
    PyObject *result = NULL;
    if (!ids || !alpha || !beta) {
        PyErr_NoMemory();
        goto out;
    }
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    const char *p = text.buf, *end = p + text.len;
    for (Py_ssize_t line = 0; ok && line < n; line++) {
        /* fields of one line: the score, order words, maybe a back-off weight */
        const char *line_end = memchr(p, '\n', (size_t)(end - p));
        if (!line_end)
            line_end = end;
        const char *field[66][2];
        int fields = 0;
        for (const char *c = p; c < line_end;) {
            while (c < line_end && is_space(*c))
                c++;
            if (c == line_end)
                break;
            if (fields == order + 2) {
                fields++;
                break;
            }
            field[fields][0] = c;
            while (c < line_end && !is_space(*c))
                c++;
            field[fields++][1] = c;
        }
        double a, b = 0.0;
        ok = (fields == order + 1 || fields == order + 2) && parse_number(field[0][0], field[0][1], &a) == 0 &&
             (fields == order + 1 || parse_number(field[order + 1][0], field[order + 1][1], &b) == 0);
        ok = ok && (fields == order + 1 || has_beta || b == 0.0);  /* the highest order: a weight of 0 alone */
        for (int w = 0; ok && w < order; w++) {
            int32_t id = word_id(self, field[w + 1][0], (size_t)(field[w + 1][1] - field[w + 1][0]));
            ids[line * order + w] = id;
            ok = id >= 0;
        }
        if (ok) {  /* finite, a log-probability, and finite once narrowed as the index stores it */
            float a32 = (float)a, b32 = (float)b;
            ok = (a == -INFINITY || (isfinite(a) && isfinite(a32))) && a <= 0.0 && isfinite(b) && isfinite(b32);
            alpha[line] = a32;
            beta[line] = b32;
        }
        p = line_end + 1;
    }
    Py_END_ALLOW_THREADS
    if (!ok) {
        result = Py_NewRef(Py_None);
        goto out;
    }
    result = Py_BuildValue("(y#y#y#)", (const char *)ids, (Py_ssize_t)(n * order * 4), (const char *)alpha,
                           (Py_ssize_t)(n * 4), (const char *)beta, (Py_ssize_t)(n * 4));
out:
    PyMem_Free(ids);
    PyMem_Free(alpha);
    PyMem_Free(beta);
    PyBuffer_Release(&text);
    return result;
}

static PyMethodDef WordTable_methods[] = {
    {"parse", (PyCFunction)WordTable_parse, METH_VARARGS,
     "parse(text, n, order, has_beta) -> (ids, alpha, beta) | None\n\n"
     "The n n-gram lines of ``text`` (joined by newlines, stripped, none blank): their words' ids\n"
     "(int32 bytes, n * order) and scores as the index stores them (float32 bytes; beta 0 where a line\n"
     "has none); None when any line is not one the line-by-line parser would read the same."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WordTableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.indexer._native.WordTable",
    .tp_basicsize = sizeof(WordTable),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WordTable(words)\n\nA vocabulary (bytes, by id), for parsing n-gram lines.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)WordTable_init,
    .tp_dealloc = (destructor)WordTable_dealloc,
    .tp_methods = WordTable_methods,
};

static PyMethodDef native_functions[] = {
    {"read_number", read_number, METH_O,
     "read_number(token) -> float | None\n\n"
     "The bytes ``token`` as C's strtod reads them in the \"C\" locale, when it reads all of them\n"
     "(decimal and hexadecimal numbers, inf, infinity and nan in any case, with a sign); else None.\n"
     "How an ARPA model's numbers are read (no underscores, which KenLM and SRILM refuse)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "fastsubs.indexer._native", "The index builder's hot loop: parsing n-gram lines.", -1,
    native_functions, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (!c_locale && !(c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0)))
        return PyErr_SetFromErrno(PyExc_OSError);
    if (PyType_Ready(&WordTableType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&native_module);
    if (module && PyModule_AddType(module, &WordTableType) < 0)
        Py_CLEAR(module);
    return module;
}
