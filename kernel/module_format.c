/* fastsubs._kernel.FORMAT: the index format's constants (format.h), every entry of its lists
 * under its name, so that Python reads the format from the core and spells none of it; and
 * fastsubs._kernel.RENDER: the output layouts Python reads (kernel/render_layout.h), which
 * fastsubs/pipeline/parquet.py builds its dtype from and tests/test_render_layout.py compares. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <ctype.h>
#include <stddef.h>

#include "codec.h"
#include "module_format.h"
#include "render_layout.h"

/* Sets ``dict[name]`` to the new reference ``value`` (NULL: the error already set): 0, or -1. */
static int add_item(PyObject *dict, const char *name, PyObject *value) {
    int rc = value ? PyDict_SetItemString(dict, name, value) : -1;
    Py_XDECREF(value);
    return rc;
}

/* A numpy dtype string: little-endian, the item's kind and bytes ("<u4"). */
static PyObject *dtype(int kind, int bytes) {
    return PyUnicode_FromFormat("<%c%d", kind, bytes);
}

typedef struct {
    const char *name;
    int kind, bytes;
} ItemType;

/* ENTRY_CODES_BETA and ENTRY_CODES_TOP: the block entries' code tables (format.h), each a
 * tuple of (delta bytes, count, beta width) in code order. */
static int add_entry_codes(PyObject *constants) {
    static const char *names[2] = {"ENTRY_CODES_TOP", "ENTRY_CODES_BETA"};
    int rc = 0;
    for (int has_beta = 0; rc == 0 && has_beta < 2; has_beta++) {
        PyObject *codes = PyTuple_New(FS_ENTRY_ESCAPED);
        for (unsigned c = 0; codes && c < FS_ENTRY_ESCAPED; c++) {
            FsEntryCode e = fs_entry_code(has_beta, c);
            PyObject *entry = Py_BuildValue("(III)", (unsigned)e.delta, (unsigned)e.count, (unsigned)e.width);
            if (!entry)
                Py_CLEAR(codes);
            else
                PyTuple_SET_ITEM(codes, c, entry);
        }
        rc = add_item(constants, names[has_beta], codes);
    }
    return rc;
}

/* ARRAYS: the arrays in the header's order, each (name, dtype), and ARRAY_<name> the place of
 * each in it; ITEM_TYPES: each item type's dtype by name; PARTS: where a record's bytes go, and
 * FRESH_PAGE: the bytes free in a fresh LMDB leaf page, as the writer packs them (codec.h). */
static int add_tables(PyObject *constants) {
#define ARRAY_ENTRY(name, spelled, type) {spelled, FS_##type##_ITEM_KIND, FS_##type##_ITEM_BYTES},
#define ITEM_TYPE_ENTRY(name, kind, bytes) {#name, kind, bytes},
#define PART_ENTRY(name) #name,
    static const ItemType arrays[] = {FS_ARRAYS(ARRAY_ENTRY)}, types[] = {FS_ITEM_TYPES(ITEM_TYPE_ENTRY)};
    static const char *parts[] = {CODEC_PARTS(PART_ENTRY)};
    PyObject *array_list = PyTuple_New(FS_N_ARRAYS), *type_dict = PyDict_New(), *part_list = PyTuple_New(CODEC_N_PARTS);
    int rc = array_list && type_dict && part_list ? 0 : -1;
    for (int a = 0; rc == 0 && a < FS_N_ARRAYS; a++) {
        PyObject *entry = Py_BuildValue("(yN)", arrays[a].name, dtype(arrays[a].kind, arrays[a].bytes));
        if (entry)
            PyTuple_SET_ITEM(array_list, a, entry);
        rc = entry ? 0 : -1;
    }
    for (size_t i = 0; rc == 0 && i < sizeof(types) / sizeof(types[0]); i++)
        rc = add_item(type_dict, types[i].name, dtype(types[i].kind, types[i].bytes));
    for (int i = 0; rc == 0 && i < CODEC_N_PARTS; i++) {
        PyObject *name = PyUnicode_FromString(parts[i]);
        if (name)
            PyTuple_SET_ITEM(part_list, i, name);
        rc = name ? 0 : -1;
    }
#define ARRAY_PLACE(name, spelled, type) if (rc == 0) rc = add_item(constants, "ARRAY_" #name, PyLong_FromLong(FS_ARRAY_##name));
    FS_ARRAYS(ARRAY_PLACE)
    if (rc == 0)
        rc = PyDict_SetItemString(constants, "ARRAYS", array_list);
    if (rc == 0)
        rc = PyDict_SetItemString(constants, "ITEM_TYPES", type_dict);
    if (rc == 0)
        rc = PyDict_SetItemString(constants, "PARTS", part_list);
    if (rc == 0)
        rc = add_item(constants, "FRESH_PAGE", PyLong_FromUnsignedLong(CODEC_FRESH_PAGE));
    Py_XDECREF(array_list);
    Py_XDECREF(type_dict);
    Py_XDECREF(part_list);
    return rc;
}

PyObject *module_format_constants(void) {
#define ADD_STRING(name, value) || add_item(constants, #name, PyBytes_FromStringAndSize(FS_##name, sizeof(FS_##name) - 1))
#define ADD_INTEGER(name, value) || add_item(constants, #name, PyLong_FromLongLong((long long)FS_##name))
#define ADD_WORD(name, value) || add_item(constants, #name, PyLong_FromUnsignedLong(FS_##name))
#define ADD_REAL(name, value) || add_item(constants, #name, PyFloat_FromDouble(FS_##name))
    PyObject *constants = PyDict_New();
    if (!constants || add_tables(constants) || add_entry_codes(constants) FS_FORMAT_STRINGS(ADD_STRING) FS_FORMAT_INTEGERS(ADD_INTEGER)
                      FS_FORMAT_WORDS(ADD_WORD) FS_FORMAT_REALS(ADD_REAL)) {
        Py_XDECREF(constants);
        return NULL;
    }
    return constants;
}

#define PLACE_FIELD(name) Py_BuildValue("(snn)", #name, (Py_ssize_t)offsetof(PlaceRow, name), \
                                        (Py_ssize_t)sizeof(((PlaceRow *)0)->name))

/* A name of render_layout.h in lower case (``RECORD_IDS``: ``record_ids``). */
static PyObject *lower_name(const char *name) {
    char lower[32] = {0};
    for (size_t i = 0; name[i] && i < sizeof(lower) - 1; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    return PyUnicode_FromString(lower);
}

/* The columns of RENDER_COLUMNS in their order, each (name in lower case, numpy kind, item bytes). */
static PyObject *columns(void) {
#define COLUMN_ENTRY(name, type, kind) {#name, kind, (int)sizeof(type)},
    static const ItemType table[] = {RENDER_COLUMN_LIST(COLUMN_ENTRY)};
    PyObject *list = PyTuple_New(COLUMN_COUNT);
    for (int c = 0; list && c < COLUMN_COUNT; c++) {
        PyObject *entry = Py_BuildValue("(NCi)", lower_name(table[c].name), table[c].kind, table[c].bytes);
        if (!entry)
            Py_CLEAR(list);
        else
            PyTuple_SET_ITEM(list, c, entry);
    }
    return list;
}

PyObject *module_render_layout(void) {
#define KIND_ENTRY(name) #name,
    static const char *kinds[] = {RENDER_KINDS(KIND_ENTRY)};
    PyObject *kind_values = PyDict_New();
    for (size_t k = 0; kind_values && k < sizeof(kinds) / sizeof(kinds[0]); k++)
        if (add_item(kind_values, kinds[k], PyLong_FromSize_t(k)) < 0)
            Py_CLEAR(kind_values);
    PyObject *fields = Py_BuildValue("(NNNNNNNN)", PLACE_FIELD(line), PLACE_FIELD(position), PLACE_FIELD(listed),
                                     PLACE_FIELD(drawn), PLACE_FIELD(word_len), PLACE_FIELD(name_len),
                                     PLACE_FIELD(id_len), PLACE_FIELD(not_utf8));
    PyObject *column_list = columns(), *length = dtype('i', (int)sizeof(ColumnLength));
    if (!kind_values || !fields || !column_list || !length) {
        Py_XDECREF(kind_values);
        Py_XDECREF(fields);
        Py_XDECREF(column_list);
        Py_XDECREF(length);
        return NULL;
    }
    return Py_BuildValue("{sNsNsNsnsN}", "kinds", kind_values, "columns", column_list, "place_row", fields,
                         "place_row_bytes", (Py_ssize_t)sizeof(PlaceRow), "column_length", length);
}
