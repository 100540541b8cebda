/* fastsubs.indexer._native: the index builder's vocabulary and hot loop in C, reading n-gram lines.
 *
 * Vocabulary() holds a model's words (the unigrams, read first) compactly, since a big
 * model has millions and the building process keeps them all (its memory counts against
 * the build's --memory): the spellings end to end, an offset each, and an open-addressing
 * table of ids, about 30 bytes a word where Python's list, dict and int objects took 150.
 * add(word) gives a word the next id (or says the id it has), find(word) looks one up,
 * and it is a sequence of the words' bytes, by id.
 * Vocabulary.parse(text, n, order, has_beta) parses n n-gram lines of one order at once
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
    char *bytes;                /* every word's spelling, one after another */
    uint64_t *offsets;          /* word i is bytes[offsets[i] .. offsets[i + 1]): count + 1 of them */
    Py_ssize_t count;
    size_t bytes_room, offsets_room;
    int32_t *slots;             /* open addressing: word id, or -1; at most half full */
    uint64_t mask;
} Vocabulary;

static uint64_t hash_word(const char *word, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)word[i]) * 0x100000001b3ull;  /* FNV-1a */
    return h ^ h >> 32;
}

static size_t word_length(const Vocabulary *v, int32_t id) {
    return (size_t)(v->offsets[id + 1] - v->offsets[id]);
}

/* The slot that holds ``word``'s id, or the empty one where it would go. */
static uint64_t word_slot(const Vocabulary *v, const char *word, size_t n) {
    uint64_t at = hash_word(word, n) & v->mask;
    for (int32_t id; (id = v->slots[at]) >= 0; at = (at + 1) & v->mask)
        if (word_length(v, id) == n && !memcmp(v->bytes + v->offsets[id], word, n))
            break;
    return at;
}

static int32_t word_id(const Vocabulary *v, const char *word, size_t n) {
    return v->slots[word_slot(v, word, n)];
}

/* Room for ``slots`` slots, every id placed again: 0, or -1 with MemoryError. */
static int make_slots(Vocabulary *v, uint64_t slots) {
    int32_t *made = PyMem_Malloc(slots * sizeof(int32_t));
    if (!made) {
        PyErr_NoMemory();
        return -1;
    }
    memset(made, 0xFF, slots * sizeof(int32_t));
    PyMem_Free(v->slots);
    v->slots = made;
    v->mask = slots - 1;
    for (int32_t id = 0; id < v->count; id++)
        v->slots[word_slot(v, v->bytes + v->offsets[id], word_length(v, id))] = id;
    return 0;
}

/* ``*room`` grown (doubling) to hold ``need`` items of ``size`` bytes at ``*items``. */
static int make_room(void **items, size_t *room, size_t need, size_t size) {
    if (need <= *room)
        return 0;
    size_t grown = *room ? *room : 16;
    while (grown < need)
        grown *= 2;
    void *moved = PyMem_Realloc(*items, grown * size);
    if (!moved) {
        PyErr_NoMemory();
        return -1;
    }
    *items = moved;
    *room = grown;
    return 0;
}

static PyObject *Vocabulary_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *names[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":Vocabulary", names))
        return NULL;
    Vocabulary *self = (Vocabulary *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    if (make_room((void **)&self->offsets, &self->offsets_room, 1, sizeof(uint64_t)) < 0 || make_slots(self, 16) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->offsets[0] = 0;
    return (PyObject *)self;
}

static void Vocabulary_dealloc(Vocabulary *self) {
    PyMem_Free(self->bytes);
    PyMem_Free(self->offsets);
    PyMem_Free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int as_word(PyObject *word, const char **spelling, size_t *n) {
    if (!PyBytes_Check(word)) {
        PyErr_SetString(PyExc_TypeError, "a word is bytes");
        return -1;
    }
    *spelling = PyBytes_AS_STRING(word);
    *n = (size_t)PyBytes_GET_SIZE(word);
    return 0;
}

/* add(word) -> int */
static PyObject *Vocabulary_add(Vocabulary *self, PyObject *word) {
    const char *spelling;
    size_t n;
    if (as_word(word, &spelling, &n) < 0)
        return NULL;
    int32_t known = word_id(self, spelling, n);
    if (known >= 0)
        return PyLong_FromLong(known);
    if (self->count >= INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "too many words");
        return NULL;
    }
    size_t end = (size_t)self->offsets[self->count];
    if ((uint64_t)(self->count + 1) * 2 > self->mask + 1 && make_slots(self, (self->mask + 1) * 2) < 0)
        return NULL;
    if (make_room((void **)&self->offsets, &self->offsets_room, (size_t)self->count + 2, sizeof(uint64_t)) < 0 ||
        make_room((void **)&self->bytes, &self->bytes_room, end + n, 1) < 0)
        return NULL;
    memcpy(self->bytes + end, spelling, n);
    self->offsets[self->count + 1] = end + n;
    int32_t id = (int32_t)self->count++;
    self->slots[word_slot(self, spelling, n)] = id;
    return PyLong_FromLong(id);
}

/* find(word) -> int */
static PyObject *Vocabulary_find(Vocabulary *self, PyObject *word) {
    const char *spelling;
    size_t n;
    if (as_word(word, &spelling, &n) < 0)
        return NULL;
    return PyLong_FromLong(word_id(self, spelling, n));
}

static Py_ssize_t Vocabulary_length(Vocabulary *self) {
    return self->count;
}

static PyObject *Vocabulary_item(Vocabulary *self, Py_ssize_t id) {
    if (id < 0 || id >= self->count) {
        PyErr_SetString(PyExc_IndexError, "no word has that id");
        return NULL;
    }
    return PyBytes_FromStringAndSize(self->bytes + self->offsets[id], (Py_ssize_t)word_length(self, (int32_t)id));
}

/* The vocabulary qsort orders by (qsort takes no context; the GIL is held). */
static const Vocabulary *sorted_vocabulary;

static int by_spelling(const void *a, const void *b) {
    const Vocabulary *v = sorted_vocabulary;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t m = word_length(v, x), n = word_length(v, y);
    int c = memcmp(v->bytes + v->offsets[x], v->bytes + v->offsets[y], m < n ? m : n);
    return c ? c : (m > n) - (m < n);
}

/* spelling_order() -> bytes */
static PyObject *Vocabulary_spelling_order(Vocabulary *self, PyObject *unused) {
    (void)unused;
    int32_t *ids = PyMem_Malloc(((size_t)self->count + 1) * sizeof(int32_t));
    if (!ids)
        return PyErr_NoMemory();
    for (int32_t id = 0; id < self->count; id++)
        ids[id] = id;
    sorted_vocabulary = self;
    qsort(ids, (size_t)self->count, sizeof(int32_t), by_spelling);
    PyObject *result = PyBytes_FromStringAndSize((const char *)ids, self->count * (Py_ssize_t)sizeof(int32_t));
    PyMem_Free(ids);
    return result;
}

/* spellings() -> (bytes, offsets) */
static PyObject *Vocabulary_spellings(Vocabulary *self, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("(y#y#)", self->bytes ? self->bytes : "", (Py_ssize_t)self->offsets[self->count],
                         (const char *)self->offsets, (self->count + 1) * (Py_ssize_t)sizeof(uint64_t));
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

/* Exact powers of ten: 10^22 is the largest whose double is exact (5^22 < 2^53). */
static const double exact_powers_of_ten[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A plain decimal (a sign, digits, a point, digits: no exponent) of at most 15 digits, as
 * strtod reads it, without strtod: its digits m as an integer are exact in a double, and so
 * is 10^k for its k digits after the point, so one division rounds m / 10^k correctly,
 * which is strtod's answer (Clinger's fast path).  An ARPA model's scores are such numbers
 * ("-1.234567"), and strtod's general method was a tenth of the reading of a billion-n-gram
 * model.  1 when it read ``text[0 .. n)`` so, 0 when the number is not of that form. */
static int read_plain_decimal(const char *text, size_t n, double *value) {
    size_t i = text[0] == '-' || text[0] == '+';
    uint64_t digits = 0;
    int count = 0, after_point = -1;
    for (; i < n; i++) {
        char c = text[i];
        if (c >= '0' && c <= '9') {
            digits = digits * 10 + (uint64_t)(c - '0');
            count++;
            after_point += after_point >= 0;
        } else if (c == '.' && after_point < 0) {
            after_point = 0;
        } else {
            return 0;
        }
    }
    if (count == 0 || count > 15)
        return 0;
    double magnitude = (double)digits / exact_powers_of_ten[after_point < 0 ? 0 : after_point];
    *value = text[0] == '-' ? -magnitude : magnitude;
    return 1;
}

/* The number ``text[0 .. n)`` (``text[n]`` is NUL) as C's strtod reads it in the "C"
 * locale: 0 when it reads the whole of it, -1 when it stops before its end (an underscore,
 * a second point, a NUL, ...) or there is nothing to read. */
static int read_whole(const char *text, size_t n, double *value) {
    if (n > 0 && read_plain_decimal(text, n, value))
        return 0;
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

/* Lines whose fields parse splits, and whose words' look-ups it prefetches, together. */
#define PARSE_LINES 16

/* The fields of one line (p .. line_end): the score, the words, maybe a back-off weight,
 * and whatever follows them, up to ``order`` + 3; their number. */
static int split_fields(const char *p, const char *line_end, int order, const char *field[66][2]) {
    int fields = 0;
    for (const char *c = p; c < line_end;) {
        while (c < line_end && is_space(*c))
            c++;
        if (c == line_end)
            break;
        if (fields == order + 2)
            return fields + 1;
        field[fields][0] = c;
        while (c < line_end && !is_space(*c))
            c++;
        field[fields++][1] = c;
    }
    return fields;
}

/* The fields of the ``lines`` lines from p (split_fields); where the next begins.  Each word's
 * look-up (its first slot, the offset of the id there, that id's spelling) is prefetched in
 * three passes over all the lines' words, each pass's loads independent of one another: a
 * vocabulary of millions misses the cache at each of the three (a model's words follow no
 * order), and one word at a time they wait one after another, ~0.5 us a word at 5.8M words.
 * Hints only: word_id looks each word up as it would without them. */
static const char *split_lines(const Vocabulary *v, const char *p, const char *end, int order, int lines,
                               const char *field[][66][2], int *fields) {
    uint64_t first[PARSE_LINES * 64];
    int words = 0;
    for (int l = 0; l < lines; l++) {
        const char *line_end = memchr(p, '\n', (size_t)(end - p));
        if (!line_end)
            line_end = end;
        fields[l] = split_fields(p, line_end, order, field[l]);
        for (int w = 1; w <= order && w < fields[l]; w++, words++) {
            first[words] = hash_word(field[l][w][0], (size_t)(field[l][w][1] - field[l][w][0])) & v->mask;
            __builtin_prefetch(&v->slots[first[words]]);
        }
        p = line_end < end ? line_end + 1 : end;
    }
    for (int i = 0; i < words; i++)
        if (v->slots[first[i]] >= 0)
            __builtin_prefetch(&v->offsets[v->slots[first[i]]]);
    for (int i = 0; i < words; i++)
        if (v->slots[first[i]] >= 0)
            __builtin_prefetch(v->bytes + v->offsets[v->slots[first[i]]]);
    return p;
}

/* parse(text, n, order, has_beta) -> (ids, alpha, beta) | None */
static PyObject *Vocabulary_parse(Vocabulary *self, PyObject *args) {
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
    /* written in place: the bytes returned, not arrays copied into them (a build parses a
     * billion lines, and each copy is pages that a large allocation faults in afresh) */
    PyObject *ids_bytes = PyBytes_FromStringAndSize(NULL, n * order * (Py_ssize_t)sizeof(int32_t));
    PyObject *alpha_bytes = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(float));
    PyObject *beta_bytes = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(float));
    PyObject *result = NULL;
    if (!ids_bytes || !alpha_bytes || !beta_bytes)
        goto out;
    int32_t *ids = (int32_t *)PyBytes_AS_STRING(ids_bytes);
    float *alpha = (float *)PyBytes_AS_STRING(alpha_bytes), *beta = (float *)PyBytes_AS_STRING(beta_bytes);
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    const char *p = text.buf, *end = p + text.len;
    const char *fields_of[PARSE_LINES][66][2];
    int fields_in[PARSE_LINES];
    for (Py_ssize_t line = 0; ok && line < n; line++) {
        int in_block = (int)(line % PARSE_LINES);
        if (in_block == 0)  /* the next lines' fields, their words' look-ups prefetched */
            p = split_lines(self, p, end, order, n - line < PARSE_LINES ? (int)(n - line) : PARSE_LINES, fields_of,
                            fields_in);
        const char *(*field)[2] = fields_of[in_block];
        int fields = fields_in[in_block];
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
    }
    Py_END_ALLOW_THREADS
    result = ok ? PyTuple_Pack(3, ids_bytes, alpha_bytes, beta_bytes) : Py_NewRef(Py_None);
out:
    Py_XDECREF(ids_bytes);
    Py_XDECREF(alpha_bytes);
    Py_XDECREF(beta_bytes);
    PyBuffer_Release(&text);
    return result;
}

static PyMethodDef Vocabulary_methods[] = {
    {"add", (PyCFunction)Vocabulary_add, METH_O,
     "add(word) -> int\n\nThe id of the bytes ``word``: the next one (its length before) if it is new."},
    {"find", (PyCFunction)Vocabulary_find, METH_O, "find(word) -> int\n\nThe id of ``word``, or -1."},
    {"spelling_order", (PyCFunction)Vocabulary_spelling_order, METH_NOARGS,
     "spelling_order() -> bytes\n\nThe ids (int32 bytes) in the order of their words' bytes."},
    {"spellings", (PyCFunction)Vocabulary_spellings, METH_NOARGS,
     "spellings() -> (bytes, offsets)\n\nEvery word's bytes end to end, and where each starts (uint64\n"
     "bytes, one more than the words: where the last ends)."},
    {"parse", (PyCFunction)Vocabulary_parse, METH_VARARGS,
     "parse(text, n, order, has_beta) -> (ids, alpha, beta) | None\n\n"
     "The n n-gram lines of ``text`` (joined by newlines, none blank, each split on the whitespace\n"
     "bytes.split splits on): their words' ids\n"
     "(int32 bytes, n * order) and scores as the index stores them (float32 bytes; beta 0 where a line\n"
     "has none); None when any line is not one the line-by-line parser would read the same."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Vocabulary_sequence = {
    .sq_length = (lenfunc)Vocabulary_length,
    .sq_item = (ssizeargfunc)Vocabulary_item,
};

static PyTypeObject VocabularyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fastsubs.indexer._native.Vocabulary",
    .tp_basicsize = sizeof(Vocabulary),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Vocabulary()\n\nA model's words (bytes), by id: compact, for a vocabulary of millions.",
    .tp_new = Vocabulary_new,
    .tp_dealloc = (destructor)Vocabulary_dealloc,
    .tp_methods = Vocabulary_methods,
    .tp_as_sequence = &Vocabulary_sequence,
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
    PyModuleDef_HEAD_INIT, "fastsubs.indexer._native", "The index builder's vocabulary and hot loop: parsing n-gram lines.", -1,
    native_functions, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (!c_locale && !(c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0)))
        return PyErr_SetFromErrno(PyExc_OSError);
    if (PyType_Ready(&VocabularyType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&native_module);
    if (module && PyModule_AddType(module, &VocabularyType) < 0)
        Py_CLEAR(module);
    return module;
}
