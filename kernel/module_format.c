/* fastsubs._kernel.FORMAT: the index format's constants and rules as the core was compiled
 * with them (kernel/format.h), for tests/test_checksums.py to compare with
 * fastsubs/format.py, so that neither spelling of the format changes alone; and
 * fastsubs._kernel.RENDER: the output layouts Python reads (kernel/render_layout.h), which
 * fastsubs/parquet.py builds its dtype from and tests/test_render_layout.py compares. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <ctype.h>
#include <stddef.h>

#include "format.h"
#include "module_format.h"
#include "render_layout.h"

/* The format's constants as the core was compiled with them (a test compares them with
 * fastsubs/format.py). */
static int add_number(PyObject *dict, const char *name, PyObject *value) {
    int rc = value ? PyDict_SetItemString(dict, name, value) : -1;
    Py_XDECREF(value);
    return rc;
}

#define ADD_INT(name) (add_number(constants, #name, PyLong_FromLongLong((long long)FS_##name)) < 0)

/* The format's rules that are functions (format.h's macros), as lists of ((arguments),
 * value) over arguments on both sides of every boundary: the test applies
 * fastsubs/format.py's functions of the same names to the same arguments. */
static int add_rule(PyObject *table, PyObject *args, unsigned long long value) {
    PyObject *pair = args ? Py_BuildValue("(NK)", args, value) : NULL;
    int rc = pair ? PyList_Append(table, pair) : -1;
    Py_XDECREF(pair);
    return rc;
}

static PyObject *rule_tables(void) {
    static const unsigned long long counts[] = {1, 2, 255, 256, 257, 65535, 65536, 65537, 4294967295ull};
    static const unsigned long long vocab[] = {1, 65535, 65536, 65537, 16777215, 16777216, 16777217,
                                               4294967294ull};
    PyObject *header = PyList_New(0), *positions = PyList_New(0), *ids = PyList_New(0), *keys = PyList_New(0),
             *data = PyList_New(0), *joint = PyList_New(0), *tables = NULL;
    int rc = header && positions && ids && keys && data && joint ? 0 : -1;
    for (int order = 1; rc == 0 && order <= 8; order++) {
        rc = add_rule(header, Py_BuildValue("(i)", order), FS_HEADER_BYTES(order));
        for (unsigned width = 2; rc == 0 && width <= 4; width++)
            rc = add_rule(keys, Py_BuildValue("(iI)", order, width), FS_KEY_BYTES((unsigned)order, width));
    }
    for (size_t c = 0; rc == 0 && c < sizeof(counts) / sizeof(counts[0]); c++) {
        rc = add_rule(positions, Py_BuildValue("(K)", counts[c]), FS_POSITION_BYTES(counts[c]));
        if (rc == 0)
            rc = add_rule(joint, Py_BuildValue("(K)", counts[c]), FS_JOINT_DATA_BYTES(counts[c]));
        for (unsigned width = 2; rc == 0 && width <= 4; width++)
            for (int has_beta = 0; rc == 0 && has_beta <= 1; has_beta++)
                rc = add_rule(data, Py_BuildValue("(KIO)", counts[c], width, has_beta ? Py_True : Py_False),
                              FS_PATTERN_DATA_BYTES(counts[c], width, has_beta));
    }
    for (size_t v = 0; rc == 0 && v < sizeof(vocab) / sizeof(vocab[0]); v++)
        rc = add_rule(ids, Py_BuildValue("(K)", vocab[v]), FS_ID_BYTES(vocab[v]));
    if (rc == 0)
        tables = Py_BuildValue("{sOsOsOsOsOsO}", "header_bytes", header, "position_bytes", positions, "id_bytes_for",
                               ids, "key_length", keys, "pattern_data_bytes", data, "joint_data_bytes", joint);
    Py_XDECREF(header);
    Py_XDECREF(positions);
    Py_XDECREF(ids);
    Py_XDECREF(keys);
    Py_XDECREF(data);
    Py_XDECREF(joint);
    return tables;
}

PyObject *format_constants(void) {
    static const char *arrays[] = FS_ARRAY_NAMES;
    static const unsigned item_bytes[] = FS_ARRAY_ITEM_BYTES;
    PyObject *constants = PyDict_New(), *names = PyTuple_New(FS_N_ARRAYS), *items = PyTuple_New(FS_N_ARRAYS);
    if (!constants || !names || !items)
        goto failed;
    for (int a = 0; a < FS_N_ARRAYS; a++) {
        PyObject *name = PyBytes_FromString(arrays[a]), *size = PyLong_FromUnsignedLong(item_bytes[a]);
        if (!name || !size) {
            Py_XDECREF(name);
            Py_XDECREF(size);
            goto failed;
        }
        PyTuple_SET_ITEM(names, a, name);
        PyTuple_SET_ITEM(items, a, size);
    }
    if (add_number(constants, "RULES", rule_tables()) < 0 ||
        PyDict_SetItemString(constants, "ARRAY_NAMES", names) < 0 ||
        PyDict_SetItemString(constants, "ARRAY_ITEM_BYTES", items) < 0 ||
        add_number(constants, "HEADER_MAGIC", PyBytes_FromStringAndSize(FS_HEADER_MAGIC, FS_HEADER_MAGIC_BYTES)) < 0 ||
        add_number(constants, "MAGIC", PyUnicode_FromString(FS_META_MAGIC)) < 0 ||
        add_number(constants, "META_DB", PyBytes_FromString(FS_META_DB)) < 0 ||
        add_number(constants, "HEADER_KEY", PyBytes_FromString(FS_HEADER_KEY)) < 0 ||
        add_number(constants, "META_KEY", PyBytes_FromString(FS_META_KEY)) < 0 ||
        add_number(constants, "ARRAYS_DB", PyBytes_FromString(FS_ARRAYS_DB)) < 0 ||
        add_number(constants, "PATTERNS_DB", PyBytes_FromString(FS_PATTERNS_DB)) < 0 ||
        add_number(constants, "UNKNOWN_WORD_LOGPROB", PyFloat_FromDouble(FS_UNKNOWN_WORD_LOGPROB)) < 0 ||
        ADD_INT(FORMAT_VERSION) || ADD_INT(HEADER_SINCE) || ADD_INT(H_MAGIC) || ADD_INT(H_VERSION) || ADD_INT(H_BYTES) || ADD_INT(H_ORDER) ||
        ADD_INT(H_VOCAB_SIZE) || ADD_INT(H_ID_BYTES) || ADD_INT(H_BOS_ID) || ADD_INT(H_EOS_ID) || ADD_INT(H_UNK_ID) ||
        ADD_INT(H_META_BYTES) || ADD_INT(H_META_CHECKSUM) || ADD_INT(H_JOINT_MIN) || ADD_INT(H_VALUE_BOUND) || ADD_INT(H_ARRAYS) || ADD_INT(H_ARRAY_ENTRY) ||
        ADD_INT(H_COUNTS) || ADD_INT(MAX_ORDER) || ADD_INT(R_CHECKSUM) || ADD_INT(R_KIND) || ADD_INT(R_FLAGS) ||
        ADD_INT(R_PREVIOUS) || ADD_INT(HAS_PREVIOUS) || ADD_INT(HAS_JOINT) || ADD_INT(JOINT_MIN_DEFAULT) || ADD_INT(BLOCK) || ADD_INT(PATTERN) || ADD_INT(END) ||
        ADD_INT(BLOCK_RESTART) || ADD_INT(BLOCK_MAX_COUNT) || ADD_INT(BLOCK_PATTERNS) || ADD_INT(BLOCK_RESTARTS) ||
        ADD_INT(BLOCK_RESTART_TABLE) || ADD_INT(RESTART_BYTES) || ADD_INT(ENTRY_SHARED_BYTES) ||
        ADD_INT(ENTRY_COUNT_BYTES) || ADD_INT(PATTERN_COUNT) || ADD_INT(PATTERN_DATA) || ADD_INT(END_KEY_BYTE) || ADD_INT(VALUE_WEIGHT) ||
        ADD_INT(KEY_WEIGHT) || ADD_INT(NO_WORD))
        goto failed;
    Py_DECREF(names);
    Py_DECREF(items);
    return constants;
failed:
    Py_XDECREF(names);
    Py_XDECREF(items);
    Py_XDECREF(constants);
    return NULL;
}

/* A name of render_layout.h (``RENDER_JSON``'s ``JSON``) and its value. */
typedef struct {
    const char *name;
    int value;
} Named;

#define KIND(name) {#name, RENDER_##name}
#define COLUMN(name) {#name, COLUMN_##name}
#define PLACE_FIELD(name) Py_BuildValue("(snn)", #name, (Py_ssize_t)offsetof(PlaceRow, name), \
                                        (Py_ssize_t)sizeof(((PlaceRow *)0)->name))

/* The columns of RENDER_COLUMNS in their order, each named in lower case
 * (``COLUMN_RECORD_IDS``: ``record_ids``). */
static PyObject *column_names(void) {
    static const Named columns[] = {COLUMN(PLACES), COLUMN(SCORES), COLUMN(PROBABILITIES), COLUMN(SUBSTITUTES),
                                    COLUMN(DRAWS), COLUMN(WORDS), COLUMN(NAMES), COLUMN(RECORD_IDS)};
    _Static_assert(sizeof(columns) / sizeof(columns[0]) == COLUMN_COUNT,
                   "every column of render_layout.h is named here");
    PyObject *names = PyTuple_New(COLUMN_COUNT);
    for (int c = 0; names && c < COLUMN_COUNT; c++) {
        char lower[32] = {0};
        for (size_t i = 0; columns[c].name[i] && i < sizeof(lower) - 1; i++)
            lower[i] = (char)tolower((unsigned char)columns[c].name[i]);
        PyObject *name = columns[c].value == c ? PyUnicode_FromString(lower) : NULL;
        if (!name) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_SystemError, "module_format.c names render_layout.h's column %s out of its order",
                             lower);
            Py_CLEAR(names);
            break;
        }
        PyTuple_SET_ITEM(names, c, name);
    }
    return names;
}

PyObject *render_layout(void) {
    static const Named kinds[] = {KIND(LINE), KIND(FIELDS), KIND(JSON), KIND(SAMPLE_LINES), KIND(SAMPLE_JSON),
                                  KIND(COLUMNS)};
    PyObject *kind_values = PyDict_New();
    for (size_t k = 0; kind_values && k < sizeof(kinds) / sizeof(kinds[0]); k++)
        if (add_number(kind_values, kinds[k].name, PyLong_FromLong(kinds[k].value)) < 0)
            Py_CLEAR(kind_values);
    PyObject *fields = Py_BuildValue("(NNNNNNNN)", PLACE_FIELD(line), PLACE_FIELD(position), PLACE_FIELD(listed),
                                     PLACE_FIELD(drawn), PLACE_FIELD(word_len), PLACE_FIELD(name_len),
                                     PLACE_FIELD(id_len), PLACE_FIELD(not_utf8));
    PyObject *columns = column_names();
    if (!kind_values || !fields || !columns) {
        Py_XDECREF(kind_values);
        Py_XDECREF(fields);
        Py_XDECREF(columns);
        return NULL;
    }
    return Py_BuildValue("{sNsNsNsn}", "kinds", kind_values, "columns", columns, "place_row", fields,
                         "place_row_bytes", (Py_ssize_t)sizeof(PlaceRow));
}
