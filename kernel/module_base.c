/* What the files of fastsubs._kernel's glue share: failures as exceptions and Python's
 * arguments as C arrays (module_base.h). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "module_base.h"

static PyObject *NotAnIndexError, *IndexVersionError, *DamagedIndexError;  /* fastsubs.errors */

/* ---------------------------------------------------------------- errors and arguments */

int module_load_errors(void) {
    PyObject *errors = PyImport_ImportModule("fastsubs.errors");
    if (!errors)
        return -1;
    NotAnIndexError = PyObject_GetAttrString(errors, "NotAnIndexError");
    IndexVersionError = PyObject_GetAttrString(errors, "IndexVersionError");
    DamagedIndexError = PyObject_GetAttrString(errors, "DamagedIndexError");
    Py_DECREF(errors);
    return NotAnIndexError && IndexVersionError && DamagedIndexError ? 0 : -1;
}

PyObject *module_raise_failure(PyObject *path, const Failure *failure) {
    switch (failure->code) {
    case FS_EINTERRUPTED:  /* what the signal's handler raised */
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_KeyboardInterrupt, failure->message);
        return NULL;
    case FS_ENOMEM:
        return PyErr_NoMemory();
    case FS_EARGUMENT:
    case FS_ECLOSED:
        PyErr_SetString(PyExc_ValueError, failure->message);
        return NULL;
    case FS_ENOTINDEX:
        PyErr_Format(NotAnIndexError, "%U: %s", path, failure->message);
        return NULL;
    case FS_EVERSION:
        PyErr_Format(IndexVersionError, "%U: %s", path, failure->message);
        return NULL;
    default:
        PyErr_Format(DamagedIndexError, "%U: %s%s", path,
                     strncmp(failure->message, "damaged index", 13) ? "damaged index: " : "", failure->message);
        return NULL;
    }
}

int module_check_open(EngineObject *self) {
    if (!self->opened || self->engine.closed) {
        PyErr_SetString(PyExc_ValueError, self->opened ? "the index is closed" : "the index is not open");
        return -1;
    }
    return 0;
}

/* Reads ``a`` as ``*n`` items of ``size`` bytes (*n < 0: any number, set). */
int module_get_array(PyObject *a, Py_buffer *view, Py_ssize_t size, Py_ssize_t *n, const char *what) {
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

Span *module_byte_spans(PyObject *list, PyObject **held, const char *what) {
    if (!(*held = PyList_AsTuple(list)))  /* another thread may change the list meanwhile */
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(*held);
    Span *spans = PyMem_Malloc((size_t)n * sizeof(Span) + 1);
    for (Py_ssize_t i = 0; spans && i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(*held, i);
        if (!PyBytes_Check(item)) {
            PyErr_Format(PyExc_TypeError, "%s must be bytes", what);
            PyMem_Free(spans);
            Py_CLEAR(*held);
            return NULL;
        }
        spans[i] = (Span){(const uint8_t *)PyBytes_AS_STRING(item), (size_t)PyBytes_GET_SIZE(item)};
    }
    if (!spans) {
        Py_CLEAR(*held);
        PyErr_NoMemory();
    }
    return spans;
}
