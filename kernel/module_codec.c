/* fastsubs._kernel's functions that make and parse the index format's bytes (codec.c): the
 * indexer's batches of records, END records, headers and keys, and the reference encoder and
 * decoder of one record or header that the tests and tools use.  Python hands arrays and gets
 * bytes back; it lays out no byte of the format itself. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "codec.h"
#include "module_base.h"
#include "module_codec.h"

/* ---------------------------------------------------------------- batches (the indexer) */

/* The parts of a batch (codec.h) as a dict of ints. */
static PyObject *parts_dict(const uint64_t parts[CODEC_N_PARTS]) {
#define PART_NAME(name) #name,
    static const char *names[] = {CODEC_PARTS(PART_NAME)};
    PyObject *dict = PyDict_New();
    for (int i = 0; dict && i < CODEC_N_PARTS; i++) {
        PyObject *value = PyLong_FromUnsignedLongLong(parts[i]);
        if (!value || PyDict_SetItemString(dict, names[i], value) < 0)
            Py_CLEAR(dict);
        Py_XDECREF(value);
    }
    return dict;
}

/* A key argument: bytes of ``len`` or None (NULL in ``*key``): 0, or -1 with an exception set. */
static int optional_key(PyObject *arg, size_t len, const uint8_t **key, const char *what) {
    *key = NULL;
    if (arg == Py_None)
        return 0;
    if (!PyBytes_Check(arg) || (size_t)PyBytes_GET_SIZE(arg) != len) {
        PyErr_Format(PyExc_ValueError, "%s: expected None or %zu bytes", what, len);
        return -1;
    }
    *key = (const uint8_t *)PyBytes_AS_STRING(arg);
    return 0;
}

static PyObject *raise_failure(const Failure *failure) {
    PyErr_SetString(failure->code == FS_ENOMEM ? PyExc_MemoryError : PyExc_ValueError, failure->message);
    return NULL;
}

/* An order's rows carry back-off weights (beta: float32, one per row) exactly when it has
 * them; the highest order's rows have none (None), so a build need not spill them. */
static int beta_rows(int has_beta, PyObject *arg, Py_buffer *beta, Py_ssize_t *n) {
    if (has_beta)
        return module_get_array(arg, beta, 4, n, "beta");
    if (arg != Py_None) {
        PyErr_SetString(PyExc_ValueError, "encode_patterns: beta must be None for an order without back-off weights");
        return -1;
    }
    return 0;
}

/* beta_index(table): an order's back-off table made into the hash that encode_patterns codes
 * each batch's betas with (codec.h, CodecBetaIndex), held in a capsule that frees it. */
#define BETA_INDEX_CAPSULE "fastsubs._kernel.beta_index"

static void free_beta_index(PyObject *capsule) {
    CodecBetaIndex *index = PyCapsule_GetPointer(capsule, BETA_INDEX_CAPSULE);
    codec_beta_index_free(index);
    PyMem_Free(index);
}

static PyObject *beta_index(PyObject *module, PyObject *table_arg) {
    Py_buffer table = {0};
    Py_ssize_t len = -1;
    if (module_get_array(table_arg, &table, 4, &len, "beta_table") < 0)
        return NULL;
    if ((uint64_t)len > UINT32_MAX / 2) {
        PyBuffer_Release(&table);
        PyErr_SetString(PyExc_ValueError, "beta_index: a back-off table holds at most 2^31 values");
        return NULL;
    }
    CodecBetaIndex *index = PyMem_Malloc(sizeof(*index));
    Failure failure = {0};
    int rc = -1;
    if (index) {
        Py_BEGIN_ALLOW_THREADS
        rc = codec_beta_index(index, table.buf, (uint32_t)len, &failure);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&table);
    if (rc < 0) {
        PyMem_Free(index);
        return index ? raise_failure(&failure) : PyErr_NoMemory();
    }
    PyObject *capsule = PyCapsule_New(index, BETA_INDEX_CAPSULE, free_beta_index);
    if (!capsule) {
        codec_beta_index_free(index);
        PyMem_Free(index);
    }
    return capsule;
}

static PyObject *encode_patterns(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *names[] = {"ids", "alpha", "beta", "order", "slot", "has_beta", "vocab_size", "previous",
                            "unigram_alpha", "joint_min", "beta_index", "page_room", "run_phase", "more", NULL};
    PyObject *ids_arg, *alpha_arg, *beta_arg, *previous_arg = Py_None, *unigram_arg = Py_None, *index_arg = Py_None;
    int order, slot, has_beta;
    unsigned words, joint_min = FS_JOINT_MIN_DEFAULT, page_room = CODEC_FRESH_PAGE, run_phase = 0;
    int more = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOiipI|OOIOIIp:encode_patterns", names, &ids_arg, &alpha_arg,
                                     &beta_arg, &order, &slot, &has_beta, &words, &previous_arg, &unigram_arg,
                                     &joint_min, &index_arg, &page_room, &run_phase, &more))
        return NULL;
    const CodecBetaIndex *index = NULL;
    if (has_beta && !(index = PyCapsule_GetPointer(index_arg, BETA_INDEX_CAPSULE))) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "encode_patterns: an order with back-off weights needs its beta_index "
                                          "(beta_index(table))");
        return NULL;
    }
    if (order < 2 || order > FS_MAX_ORDER || slot < 0 || slot >= order || words < 1 || words == FS_NO_WORD ||
        joint_min < 1 || page_room > CODEC_FRESH_PAGE) {
        PyErr_SetString(PyExc_ValueError, "encode_patterns: order, slot, vocab_size, joint_min or page_room out of range");
        return NULL;
    }
    unsigned id_bytes = fs_id_bytes(words);
    Py_buffer ids = {0}, alpha = {0}, beta = {0}, unigram = {0};
    Py_ssize_t n = -1, rows_ids = -1, n_unigrams = -1;
    PyObject *result = NULL, *keys = NULL, *offsets = NULL, *values = NULL, *parts = NULL;
    CodecBatch batch = {0};
    CodecRows rows = {.order = order, .slot = slot, .has_beta = has_beta, .id_bytes = id_bytes,
                      .joint_min = joint_min, .page_room = page_room, .run_phase = run_phase, .more = more};
    if (module_get_array(alpha_arg, &alpha, 4, &n, "alpha") < 0)
        return NULL;
    rows_ids = n * order;
    if (module_get_array(ids_arg, &ids, 4, &rows_ids, "ids (order uint32 per row)") < 0 ||
        beta_rows(has_beta, beta_arg, &beta, &n) < 0 ||
        optional_key(previous_arg, fs_key_bytes((unsigned)order, id_bytes), &rows.previous, "previous") < 0 ||
        (unigram_arg != Py_None && module_get_array(unigram_arg, &unigram, 4, &n_unigrams, "unigram_alpha") < 0))
        goto out;
    rows.n = (size_t)n;
    rows.ids = ids.buf;
    rows.alpha = alpha.buf;
    rows.beta = beta.buf;
    rows.beta_index = index;
    rows.unigram_alpha = unigram.buf;
    rows.vocab_size = words;
    rows.n_unigrams = n_unigrams < 0 ? 0 : (uint32_t)n_unigrams;
    Failure failure = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = codec_plan_batch(&batch, &rows, &failure);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        raise_failure(&failure);
        goto out;
    }
    keys = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(batch.n_records * batch.key_len));
    offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((batch.n_records + 1) * sizeof(uint64_t)));
    values = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)batch.values_bytes);
    parts = parts_dict(batch.parts);
    if (!keys || !offsets || !values || !parts)
        goto out;
    common_hint_huge(PyBytes_AS_STRING(keys), (size_t)PyBytes_GET_SIZE(keys));
    common_hint_huge(PyBytes_AS_STRING(values), (size_t)PyBytes_GET_SIZE(values));
    Py_BEGIN_ALLOW_THREADS
    rc = codec_write_batch(&batch, (uint8_t *)PyBytes_AS_STRING(keys), (uint64_t *)PyBytes_AS_STRING(offsets),
                           (uint8_t *)PyBytes_AS_STRING(values), &failure);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        raise_failure(&failure);
    else
        result = Py_BuildValue("(OOOOdIIn)", keys, offsets, values, parts, batch.value_bound, batch.page_room,
                               batch.run_phase, (Py_ssize_t)batch.rows_done);
out:
    codec_free_batch(&batch);
    Py_XDECREF(keys);
    Py_XDECREF(offsets);
    Py_XDECREF(values);
    Py_XDECREF(parts);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&alpha);
    PyBuffer_Release(&beta);
    if (unigram.obj)
        PyBuffer_Release(&unigram);
    return result;
}

static PyObject *encode_end(PyObject *module, PyObject *args) {
    (void)module;
    int order;
    unsigned id_bytes;
    PyObject *previous_arg;
    if (!PyArg_ParseTuple(args, "iIO:encode_end", &order, &id_bytes, &previous_arg))
        return NULL;
    if (order < 2 || order > FS_MAX_ORDER || id_bytes < 2 || id_bytes > 4) {
        PyErr_SetString(PyExc_ValueError, "encode_end: order or id_bytes out of range");
        return NULL;
    }
    size_t key_len = fs_key_bytes((unsigned)order, id_bytes);
    const uint8_t *previous;
    if (optional_key(previous_arg, key_len, &previous, "previous") < 0)
        return NULL;
    PyObject *key = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)key_len + 1);
    PyObject *value = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)codec_end_bytes(key_len));
    if (key && value)
        codec_write_end(key_len, previous, (uint8_t *)PyBytes_AS_STRING(key), (uint8_t *)PyBytes_AS_STRING(value));
    PyObject *result = key && value ? PyTuple_Pack(2, key, value) : NULL;
    Py_XDECREF(key);
    Py_XDECREF(value);
    return result;
}

static PyObject *name_previous(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer key, value, previous;
    if (!PyArg_ParseTuple(args, "y*y*y*:name_previous", &key, &value, &previous))
        return NULL;
    PyObject *result = NULL;
    if (key.len != previous.len || value.len < FS_R_PREVIOUS + key.len || value.len % 4)
        PyErr_SetString(PyExc_ValueError, "name_previous: a record key, a record's value and a key of its length");
    else if ((result = PyBytes_FromStringAndSize(value.buf, value.len)))
        codec_name_previous((uint8_t *)PyBytes_AS_STRING(result), (size_t)value.len, key.buf, (size_t)key.len,
                            previous.buf);
    PyBuffer_Release(&key);
    PyBuffer_Release(&value);
    PyBuffer_Release(&previous);
    return result;
}

/* ---------------------------------------------------------------- one record: the reference codec */

/* ``count`` integers of ``bits`` bits packed at ``at`` (fs_packed_bytes) as a list (empty
 * when ``at`` is NULL or ``bits`` 0). */
static PyObject *packed_list(const uint8_t *at, uint32_t count, unsigned bits) {
    PyObject *list = PyList_New(at && bits ? count : 0);
    for (uint32_t i = 0; list && at && bits && i < count; i++) {
        PyObject *item = PyLong_FromUnsignedLong(load_packed(at, i, bits));
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* ``count`` float32 at ``at`` as a list, or None when ``at`` is NULL. */
static PyObject *float_list(const ix_f32 *at, uint32_t count) {
    if (!at)
        return Py_NewRef(Py_None);
    PyObject *list = PyList_New(count);
    for (uint32_t i = 0; list && i < count; i++) {
        PyObject *item = PyFloat_FromDouble((double)at[i]);
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* ``count`` word ids of ``bits`` bits packed at ``at`` as a list (load_id: as a reader reads them). */
static PyObject *id_list(const uint8_t *at, uint32_t count, unsigned bits) {
    PyObject *list = PyList_New(count);
    uint32_t mask = (uint32_t)((1ull << bits) - 1u);
    for (uint32_t i = 0; list && i < count; i++) {
        PyObject *item = PyLong_FromUnsignedLong(load_id(at, i, bits, mask));
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* One pattern as decode_record gives it (``has_beta``: its order stores beta codes).  A
 * pattern that stores its values elsewhere (format.h) has alpha None and, where its order
 * stores beta codes, none of them: [] of width 0. */
static PyObject *pattern_dict(const uint8_t *key, size_t key_len, int restarts, unsigned delta, const DiskPattern *p,
                              unsigned id_bits, int has_beta) {
    PyObject *joint = p->joint ? packed_list(p->joint, p->count, p->position_bits) : Py_NewRef(Py_None);
    PyObject *codes = Py_None, *width = Py_None;
    if (has_beta && !p->alpha) {
        codes = PyList_New(0);
        width = PyLong_FromLong(0);
    } else if (p->beta_codes) {
        codes = PyList_New(p->count);
        for (uint32_t i = 0; codes && i < p->count; i++) {
            PyObject *item = PyLong_FromUnsignedLong(beta_code(p->beta_codes, p->beta_width, i));
            if (!item)
                Py_CLEAR(codes);
            else
                PyList_SET_ITEM(codes, i, item);
        }
        width = PyLong_FromUnsignedLong(p->beta_width);
    } else {
        Py_INCREF(codes);
        Py_INCREF(width);
    }
    return Py_BuildValue("{sy#sIsOsIsNsNsNsNsNsN}", "key", key, (Py_ssize_t)key_len, "count", p->count,
                         "restarts", restarts ? Py_True : Py_False, "delta", delta,
                         "ids", id_list(p->ids, p->count, id_bits),
                         "positions", packed_list(p->positions, p->count, p->position_bits),
                         "alpha", float_list(p->alpha, p->count), "beta_width", width, "beta_codes", codes,
                         "joint", joint);
}

static PyObject *decode_record(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer key, value;
    int order, has_beta;
    unsigned vocab_size;
    if (!PyArg_ParseTuple(args, "y*y*iIp:decode_record", &key, &value, &order, &vocab_size, &has_beta))
        return NULL;
    PyObject *patterns = NULL, *result = NULL;
    Failure failure = {0};
    DiskRecord r;
    DiskPattern p = {0};
    unsigned beta_flag = has_beta ? PATTERN_HAS_BETA : 0;
    if (order < 2 || order > FS_MAX_ORDER || vocab_size < 1 || vocab_size == FS_NO_WORD || value.len % 4) {
        PyErr_SetString(PyExc_ValueError, "decode_record: order or vocab_size out of range, or a value not of words");
        goto out;
    }
    unsigned id_bits = fs_id_bits(vocab_size);
    size_t key_len = fs_key_bytes((unsigned)order, fs_id_bytes(vocab_size));
    if (codec_open_record(key.buf, (size_t)key.len, value.buf, (size_t)value.len, order, key_len, 1, &r, &failure) < 0) {
        raise_failure(&failure);
        goto out;
    }
    if (!(patterns = PyList_New(0)))
        goto out;
    if (r.kind == FS_PATTERN) {
        PyObject *one = NULL;
        unsigned flags;
        if (codec_alone_pattern(&r, id_bits, beta_flag, NULL, &p, &flags) < 0)
            PyErr_SetString(PyExc_ValueError, "decode_record: a PATTERN record's layout does not fit it");
        else
            one = pattern_dict(r.key, key_len, 0, 0, &p, id_bits, has_beta);
        if (!one || PyList_Append(patterns, one) < 0) {
            Py_XDECREF(one);
            goto out;
        }
        Py_DECREF(one);
    } else if (r.kind == FS_BLOCK) {
        CodecWalk walk;
        int next = codec_walk_block(&walk, &r, id_bits, beta_flag) < 0 ? -1 : 1;
        while (next > 0 && (next = codec_next_entry(&walk)) > 0) {
            codec_pattern_fields(walk.fields.data, walk.fields.count, id_bits, walk.fields.flags, NULL,
                                 walk.fields.beta_width, &p);
            PyObject *one = pattern_dict(walk.key, key_len, walk.restarts, walk.fields.delta, &p, id_bits, has_beta);
            if (!one || PyList_Append(patterns, one) < 0) {
                Py_XDECREF(one);
                goto out;
            }
            Py_DECREF(one);
        }
        if (next < 0) {
            PyErr_SetString(PyExc_ValueError, "decode_record: a BLOCK record's layout does not fit it");
            goto out;
        }
    }
    result = Py_BuildValue("{sisIsy#sO}", "kind", r.kind, "flags", (unsigned)((const uint8_t *)value.buf)[FS_R_FLAGS],
                           "previous", r.previous, (Py_ssize_t)key_len, "patterns", patterns);
out:
    Py_XDECREF(patterns);
    PyBuffer_Release(&key);
    PyBuffer_Release(&value);
    return result;
}

/* What encode_record holds of one pattern while it writes: its fields as C arrays. */
typedef struct {
    PyObject *key;
    uint32_t *ids, *positions, *joint, *beta_codes;
    float *alpha;
} HeldPattern;

static void release_pattern(HeldPattern *h) {
    Py_XDECREF(h->key);
    PyMem_Free(h->ids);
    PyMem_Free(h->positions);
    PyMem_Free(h->joint);
    PyMem_Free(h->alpha);
    PyMem_Free(h->beta_codes);
}

/* The field ``name`` of ``pattern`` (a sequence of ``count`` numbers, or None when ``optional``)
 * as a C array of uint32 or float into ``*out`` (NULL for None): 0, or -1 with an exception set. */
static int field_array(PyObject *pattern, const char *name, Py_ssize_t count, int is_float, int optional,
                       void **out) {
    *out = NULL;
    PyObject *items = PyDict_GetItemString(pattern, name);  /* borrowed */
    if (!items || items == Py_None) {
        if (optional)
            return 0;
        PyErr_Format(PyExc_ValueError, "encode_record: a pattern needs '%s'", name);
        return -1;
    }
    PyObject *seq = PySequence_Fast(items, name);
    if (!seq)
        return -1;
    int rc = -1;
    if (PySequence_Fast_GET_SIZE(seq) != count) {
        PyErr_Format(PyExc_ValueError, "encode_record: '%s' holds %zd items, not the pattern's %zd", name,
                     PySequence_Fast_GET_SIZE(seq), count);
    } else if ((*out = PyMem_Malloc((size_t)count * 4 + 4))) {
        rc = 0;
        for (Py_ssize_t i = 0; rc == 0 && i < count; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            if (is_float) {
                double v = PyFloat_AsDouble(item);
                ((float *)*out)[i] = (float)v;
                rc = v == -1.0 && PyErr_Occurred() ? -1 : 0;
            } else {
                unsigned long v = PyLong_AsUnsignedLong(item);
                rc = v == (unsigned long)-1 && PyErr_Occurred() ? -1 : v > 0xFFFFFFFFul ? -1 : 0;
                if (rc < 0 && !PyErr_Occurred())
                    PyErr_Format(PyExc_OverflowError, "encode_record: '%s' holds %lu, past 32 bits", name, v);
                ((uint32_t *)*out)[i] = (uint32_t)v;
            }
        }
    } else {
        PyErr_NoMemory();
    }
    Py_DECREF(seq);
    return rc;
}

/* One pattern of encode_record's ``patterns`` into ``p`` (its arrays held by ``h``): 0, or -1. */
static int read_pattern(PyObject *pattern, size_t key_len, int order, CodecPattern *p, HeldPattern *h) {
    if (!PyDict_Check(pattern)) {
        PyErr_SetString(PyExc_TypeError, "encode_record: each pattern is a dict, as decode_record gives it");
        return -1;
    }
    PyObject *ids = PyDict_GetItemString(pattern, "ids"), *key = PyDict_GetItemString(pattern, "key");
    PyObject *restarts = PyDict_GetItemString(pattern, "restarts");
    Py_ssize_t count = ids ? PySequence_Size(ids) : -1;
    if (count < 0 || !key || !PyBytes_Check(key) || (size_t)PyBytes_GET_SIZE(key) != key_len) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "encode_record: a pattern needs 'ids' and a 'key' of %zu bytes", key_len);
        return -1;
    }
    h->key = Py_NewRef(key);
    PyObject *joint = PyDict_GetItemString(pattern, "joint");  /* borrowed; one word: [] */
    int has_joint = joint && joint != Py_None;
    /* a pattern that stores its values elsewhere is given none (decode_record's alpha None,
     * and beta codes [] where its order has them) */
    Py_ssize_t values = codec_key_flags((const uint8_t *)PyBytes_AS_STRING(key), order, (uint64_t)count, has_joint)
                            ? 0
                            : count;
    if (field_array(pattern, "ids", count, 0, 0, (void **)&h->ids) < 0 ||
        (fs_position_bits((uint64_t)count) &&
         field_array(pattern, "positions", count, 0, 0, (void **)&h->positions) < 0) ||
        (values && field_array(pattern, "alpha", count, 1, 0, (void **)&h->alpha) < 0) ||
        field_array(pattern, "beta_codes", values, 0, 1, (void **)&h->beta_codes) < 0 ||
        (fs_position_bits((uint64_t)count) && field_array(pattern, "joint", count, 0, 1, (void **)&h->joint) < 0))
        return -1;
    long width = 0;
    if (h->beta_codes) {
        PyObject *given = PyDict_GetItemString(pattern, "beta_width");  /* borrowed */
        width = given ? PyLong_AsLong(given) : -1;
        if (width < 0 || width > 0xFF) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "encode_record: 'beta_codes' need a 'beta_width' of 0 ... 255");
            return -1;
        }
    }
    if (has_joint && !h->joint && !(h->joint = PyMem_Malloc(4))) {
        PyErr_NoMemory();
        return -1;
    }
    *p = (CodecPattern){.key = (const uint8_t *)PyBytes_AS_STRING(key), .count = (uint32_t)count,
                         .restarts = restarts && PyObject_IsTrue(restarts) == 1, .ids = h->ids,
                         .positions = h->positions, .alpha = h->alpha, .beta_codes = h->beta_codes,
                         .beta_width = (unsigned)width, .joint = h->joint};
    return 0;
}

static PyObject *encode_record(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer record_key;
    PyObject *record;
    int order;
    unsigned vocab_size;
    if (!PyArg_ParseTuple(args, "y*O!iI:encode_record", &record_key, &PyDict_Type, &record, &order, &vocab_size))
        return NULL;
    PyObject *result = NULL, *patterns = NULL;
    CodecPattern *fields = NULL;
    HeldPattern *held = NULL;
    Py_ssize_t n = 0;
    if (order < 2 || order > FS_MAX_ORDER || vocab_size < 1 || vocab_size == FS_NO_WORD) {
        PyErr_SetString(PyExc_ValueError, "encode_record: order or vocab_size out of range");
        goto out;
    }
    unsigned id_bits = fs_id_bits(vocab_size);
    size_t key_len = fs_key_bytes((unsigned)order, fs_id_bytes(vocab_size));
    PyObject *kind = PyDict_GetItemString(record, "kind"), *flags = PyDict_GetItemString(record, "flags");
    PyObject *previous_arg = PyDict_GetItemString(record, "previous"), *list = PyDict_GetItemString(record, "patterns");
    const uint8_t *previous;
    if (!kind || !flags || !list) {
        PyErr_SetString(PyExc_ValueError, "encode_record: a record needs 'kind', 'flags' and 'patterns'");
        goto out;
    }
    if (optional_key(previous_arg ? previous_arg : Py_None, key_len, &previous, "previous") < 0 ||
        !(patterns = PySequence_Fast(list, "patterns")))
        goto out;
    n = PySequence_Fast_GET_SIZE(patterns);
    fields = PyMem_Calloc((size_t)n + 1, sizeof(CodecPattern));
    held = PyMem_Calloc((size_t)n + 1, sizeof(HeldPattern));
    if (!fields || !held) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (read_pattern(PySequence_Fast_GET_ITEM(patterns, i), key_len, order, &fields[i], &held[i]) < 0)
            goto out;
    codec_entry_deltas(fields, (uint32_t)n, key_len);
    CodecRecord r = {.kind = (int)PyLong_AsLong(kind), .order = order, .flags = (unsigned)PyLong_AsUnsignedLong(flags),
                      .previous = previous, .patterns = fields, .n_patterns = (uint32_t)n};
    if (PyErr_Occurred())
        goto out;
    Failure failure = {0};
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)codec_record_bytes(&r, key_len, id_bits));
    if (result && codec_write_record(&r, key_len, id_bits, record_key.buf, (size_t)record_key.len,
                                     (uint8_t *)PyBytes_AS_STRING(result), &failure) < 0) {
        Py_CLEAR(result);
        raise_failure(&failure);
    }
out:
    for (Py_ssize_t i = 0; held && i < n; i++)
        release_pattern(&held[i]);
    PyMem_Free(held);
    PyMem_Free(fields);
    Py_XDECREF(patterns);
    PyBuffer_Release(&record_key);
    return result;
}

/* ---------------------------------------------------------------- headers and keys */

/* The header fields as a dict (decode_header) and back (encode_header): the same names. */
static PyObject *header_dict(const CodecHeader *h) {
    PyObject *arrays = PyList_New(FS_N_ARRAYS), *counts = PyList_New(h->order), *records = PyList_New(h->order ? h->order - 1 : 0);
    PyObject *tables = PyList_New(h->order ? h->order - 1 : 0);
    for (int a = 0; arrays && a < FS_N_ARRAYS; a++)
        PyList_SET_ITEM(arrays, a, Py_BuildValue("(KI)", (unsigned long long)h->array_bytes[a], h->array_checksum[a]));
    for (uint32_t m = 1; counts && m <= h->order; m++)
        PyList_SET_ITEM(counts, m - 1, PyLong_FromUnsignedLongLong(h->counts[m]));
    for (uint32_t m = 2; records && m <= h->order; m++)
        PyList_SET_ITEM(records, m - 2, PyLong_FromUnsignedLongLong(h->records[m]));
    for (uint32_t m = 2; tables && m <= h->order; m++)
        PyList_SET_ITEM(tables, m - 2, PyLong_FromUnsignedLong(h->beta_tables[m]));
    if (!arrays || !counts || !records || !tables || PyErr_Occurred()) {
        Py_XDECREF(arrays);
        Py_XDECREF(counts);
        Py_XDECREF(records);
        Py_XDECREF(tables);
        return NULL;
    }
    return Py_BuildValue("{sIsIsIsIsIsIsIsIsIsKsIsdsNsNsNsN}", "version", h->version, "length", h->length,
                         "order", h->order, "vocab_size", h->vocab_size, "id_bytes", h->id_bytes, "bos_id", h->bos,
                         "eos_id", h->eos, "unk_id", h->unk, "joint_min", h->joint_min,
                         "meta_bytes", (unsigned long long)h->meta_bytes, "meta_checksum", h->meta_checksum,
                         "value_bound", h->value_bound, "arrays", arrays, "counts", counts, "records", records,
                         "beta_tables", tables);
}

static PyObject *decode_header(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer bytes;
    if (PyObject_GetBuffer(arg, &bytes, PyBUF_SIMPLE) < 0)
        return NULL;
    CodecHeader h;
    PyObject *result = NULL;
    if (codec_read_header(bytes.buf, (size_t)bytes.len, &h) < 0)
        PyErr_SetString(PyExc_ValueError, "decode_header: not a whole header of this format");
    else
        result = header_dict(&h);
    PyBuffer_Release(&bytes);
    return result;
}

/* The unsigned integer ``name`` of ``fields`` into ``*out``: 0, or -1 with an exception set. */
static int header_number(PyObject *fields, const char *name, unsigned long long limit, unsigned long long *out) {
    PyObject *value = PyDict_GetItemString(fields, name);
    if (!value) {
        PyErr_Format(PyExc_ValueError, "encode_header: no '%s'", name);
        return -1;
    }
    *out = PyLong_AsUnsignedLongLong(value);
    if (*out == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (*out > limit) {
        PyErr_Format(PyExc_OverflowError, "encode_header: '%s' is %llu, past its field", name, *out);
        return -1;
    }
    return 0;
}

/* ``count`` unsigned integers of the sequence ``name`` of ``fields`` into ``out[first ...]``. */
static int header_numbers(PyObject *fields, const char *name, Py_ssize_t count, uint64_t *out, int first) {
    PyObject *items = PyDict_GetItemString(fields, name), *seq = items ? PySequence_Fast(items, name) : NULL;
    int rc = seq && PySequence_Fast_GET_SIZE(seq) == count ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < count; i++) {
        out[first + i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
        rc = PyErr_Occurred() ? -1 : 0;
    }
    if (rc < 0 && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "encode_header: '%s' must hold %zd numbers", name, count);
    Py_XDECREF(seq);
    return rc;
}

static PyObject *encode_header(PyObject *module, PyObject *fields) {
    (void)module;
    if (!PyDict_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "encode_header takes a dict, as decode_header gives it");
        return NULL;
    }
    CodecHeader h = {.version = FS_FORMAT_VERSION};
    unsigned long long v[9];
    static const char *names[] = {"order", "vocab_size", "id_bytes", "bos_id", "eos_id", "unk_id", "joint_min",
                                  "meta_bytes", "meta_checksum"};
    for (int i = 0; i < 9; i++)
        if (header_number(fields, names[i], i == 0 ? FS_MAX_ORDER : i == 7 ? ~0ull : 0xFFFFFFFFull, &v[i]) < 0)
            return NULL;
    h.order = (uint32_t)v[0];
    h.vocab_size = (uint32_t)v[1];
    h.id_bytes = (uint32_t)v[2];
    h.bos = (uint32_t)v[3];
    h.eos = (uint32_t)v[4];
    h.unk = (uint32_t)v[5];
    h.joint_min = (uint32_t)v[6];
    h.meta_bytes = v[7];
    h.meta_checksum = (uint32_t)v[8];
    PyObject *version = PyDict_GetItemString(fields, "version"), *bound = PyDict_GetItemString(fields, "value_bound");
    if (version && header_number(fields, "version", 0xFFFFFFFFull, &v[0]) < 0)
        return NULL;
    if (version)
        h.version = (uint32_t)v[0];
    h.value_bound = bound ? PyFloat_AsDouble(bound) : -1.0;
    if (!bound || (h.value_bound == -1.0 && PyErr_Occurred())) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "encode_header: no 'value_bound'");
        return NULL;
    }
    if (h.order < 1) {
        PyErr_SetString(PyExc_ValueError, "encode_header: 'order' must be at least 1");
        return NULL;
    }
    PyObject *arrays = PyDict_GetItemString(fields, "arrays"), *seq = arrays ? PySequence_Fast(arrays, "arrays") : NULL;
    int rc = seq && PySequence_Fast_GET_SIZE(seq) == FS_N_ARRAYS ? 0 : -1;
    for (int a = 0; rc == 0 && a < FS_N_ARRAYS; a++)
        rc = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, a), "KI", (unsigned long long *)&h.array_bytes[a],
                              &h.array_checksum[a]) ? 0 : -1;
    Py_XDECREF(seq);
    if (rc < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "encode_header: 'arrays' must hold (bytes, checksum) of each array");
        return NULL;
    }
    if (header_numbers(fields, "counts", h.order, h.counts, 1) < 0 ||
        header_numbers(fields, "records", h.order - 1, h.records, 2) < 0)
        return NULL;
    uint64_t tables[FS_MAX_ORDER + 1] = {0};
    if (header_numbers(fields, "beta_tables", h.order - 1, tables, 2) < 0)
        return NULL;
    for (uint32_t m = 2; m <= h.order; m++) {
        if (tables[m] > 0xFFFFFFFFu) {
            PyErr_SetString(PyExc_OverflowError, "encode_header: a 'beta_tables' length is past 32 bits");
            return NULL;
        }
        h.beta_tables[m] = (uint32_t)tables[m];
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)fs_header_bytes(h.order));
    if (result)
        codec_write_header(&h, (uint8_t *)PyBytes_AS_STRING(result));
    return result;
}

static PyObject *pattern_key(PyObject *module, PyObject *args) {
    (void)module;
    int slot;
    PyObject *ids_arg;
    unsigned id_bytes;
    if (!PyArg_ParseTuple(args, "iOI:pattern_key", &slot, &ids_arg, &id_bytes))
        return NULL;
    PyObject *seq = PySequence_Fast(ids_arg, "pattern_key: ids must be a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uint32_t ids[FS_MAX_ORDER];
    uint8_t key[1 + 4 * FS_MAX_ORDER];
    PyObject *result = NULL;
    if (n < 1 || n >= FS_MAX_ORDER || slot < 0 || slot > n || id_bytes < 2 || id_bytes > 4) {
        PyErr_SetString(PyExc_ValueError, "pattern_key: slot, ids or id_bytes out of range");
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long id = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(seq, i));
        if (PyErr_Occurred())
            goto out;
        if (id > width_mask(id_bytes)) {
            PyErr_Format(PyExc_OverflowError, "pattern_key: id %lu does not fit %u bytes", id, id_bytes);
            goto out;
        }
        ids[i] = (uint32_t)id;
    }
    result = PyBytes_FromStringAndSize((const char *)key,
                                       (Py_ssize_t)codec_pattern_key(slot, ids, (int)n, id_bytes, key));
out:
    Py_DECREF(seq);
    return result;
}

/* The vocabulary size ``arg``: 0, or -1 with an exception set (not one that 32-bit ids hold). */
static int vocabulary_size(PyObject *arg, unsigned long long *vocab_size) {
    *vocab_size = PyLong_AsUnsignedLongLong(arg);
    if (*vocab_size == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (*vocab_size < 1 || *vocab_size >= FS_NO_WORD) {
        PyErr_Format(PyExc_ValueError, "a vocabulary of %llu words does not fit 32-bit ids", *vocab_size);
        return -1;
    }
    return 0;
}

static PyObject *id_bytes(PyObject *module, PyObject *arg) {
    (void)module;
    unsigned long long vocab_size;
    return vocabulary_size(arg, &vocab_size) < 0 ? NULL : PyLong_FromUnsignedLong(fs_id_bytes(vocab_size));
}

static PyObject *id_bits(PyObject *module, PyObject *arg) {
    (void)module;
    unsigned long long vocab_size;
    return vocabulary_size(arg, &vocab_size) < 0 ? NULL : PyLong_FromUnsignedLong(fs_id_bits(vocab_size));
}

static PyObject *position_bits(PyObject *module, PyObject *arg) {
    (void)module;
    unsigned long long count = PyLong_AsUnsignedLongLong(arg);
    if (count == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLong(fs_position_bits(count));
}

static PyObject *key_bytes(PyObject *module, PyObject *args) {
    (void)module;
    int order;
    unsigned width;
    if (!PyArg_ParseTuple(args, "iI:key_bytes", &order, &width))
        return NULL;
    if (order < 1 || order > FS_MAX_ORDER || width < 2 || width > 4) {
        PyErr_SetString(PyExc_ValueError, "key_bytes: order or id_bytes out of range");
        return NULL;
    }
    return PyLong_FromSize_t(fs_key_bytes((unsigned)order, width));
}

static PyObject *checksum(PyObject *module, PyObject *args) {
    (void)module;
    Py_buffer key, body;
    if (!PyArg_ParseTuple(args, "y*y*:checksum", &key, &body))
        return NULL;
    PyObject *result = PyLong_FromUnsignedLong(common_checksum(key.buf, (size_t)key.len, body.buf, (size_t)body.len));
    PyBuffer_Release(&key);
    PyBuffer_Release(&body);
    return result;
}

PyMethodDef module_codec_methods[] = {
    {"encode_patterns", (PyCFunction)(void (*)(void))encode_patterns, METH_VARARGS | METH_KEYWORDS,
     "encode_patterns(ids, alpha, beta, order, slot, has_beta, vocab_size, previous=None, unigram_alpha=None,\n"
     "joint_min=JOINT_MIN_DEFAULT, beta_index=None, page_room=FRESH_PAGE, run_phase=0, more=False) -> (keys,\n"
     "offsets, values, parts, value_bound, page_room, run_phase, rows_done): the records of a batch of n-grams\n"
     "sorted by pattern key then word (ids: order\n"
     "uint32 per row, the slot's word last; alpha: float32 per row; beta: float32 per row with has_beta, else\n"
     "None; with has_beta, beta_index: beta_index(the order's back-off table, float32, which holds every\n"
     "beta)), the first naming the pattern key previous and going to\n"
     "an LMDB leaf page with page_room bytes free; keys (each key_bytes long), offsets (uint64, one more than\n"
     "the records) and values as bytes, the bytes of each part (PARTS), the largest |v| written, the\n"
     "bytes free in the leaf page of the last record (the next batch's page_room), and with more (rows of the\n"
     "slot follow) the rows written: the rest, the last block's, start the next batch, at run_phase. A slot's\n"
     "records are then the same however its rows are cut into batches."},
    {"beta_index", beta_index, METH_O,
     "beta_index(table) -> capsule: an order's back-off table (float32) as the hash encode_patterns codes each\n"
     "batch's betas with; made once for all the batches of a slot."},
    {"encode_end", encode_end, METH_VARARGS,
     "encode_end(order, id_bytes, previous) -> (key, value): the END record after the pattern key previous (or None)."},
    {"name_previous", name_previous, METH_VARARGS,
     "name_previous(record_key, value, previous) -> bytes: the record naming previous as the key before it."},
    {"decode_record", decode_record, METH_VARARGS,
     "decode_record(record_key, value, order, vocab_size, has_beta) -> dict: kind, flags, previous and patterns\n"
     "(each: key, count, restarts, delta, ids, positions, alpha, beta_width, beta_codes, joint) of\n"
     "one record, as the\n"
     "reader parses it; ValueError when its checksum or layout fails."},
    {"encode_record", encode_record, METH_VARARGS,
     "encode_record(record_key, record, order, vocab_size) -> bytes: the value of a record given as decode_record\n"
     "gives it (fields written as they are, the checksum made): decode_record's inverse."},
    {"decode_header", decode_header, METH_O, "decode_header(bytes) -> dict: the header's fields."},
    {"encode_header", encode_header, METH_O,
     "encode_header(fields) -> bytes: the header of fields as decode_header gives them (version: this format's\n"
     "when absent), its length and checksum made."},
    {"pattern_key", pattern_key, METH_VARARGS,
     "pattern_key(slot, ids, id_bytes) -> bytes: the key of the pattern of the fixed words ids, the slot before ids[slot]."},
    {"id_bytes", id_bytes, METH_O, "id_bytes(vocab_size) -> int: bytes of each word id of a vocabulary that size in keys."},
    {"id_bits", id_bits, METH_O, "id_bits(vocab_size) -> int: bits of each word id of a vocabulary that size in a pattern's data."},
    {"position_bits", position_bits, METH_O,
     "position_bits(count) -> int: bits of each position of a pattern of count words (by score, joint)."},
    {"key_bytes", key_bytes, METH_VARARGS, "key_bytes(order, id_bytes) -> int: bytes of a pattern key of that order."},
    {"checksum", checksum, METH_VARARGS,
     "checksum(key: bytes-like, body: bytes-like) -> int: the format's checksum of a key and a body."},
    {NULL, NULL, 0, NULL},
};
