/* What the files of fastsubs._kernel's glue share, below all of them (module_base.c): the
 * Engine object, failures as exceptions and Python's arguments as C arrays.  module.c holds
 * the module and the Engine type and calls down into module_search.c (searches and their
 * answers) and module_format.c (the layouts); neither of those calls module.c. */
#ifndef FASTSUBS_MODULE_BASE_H
#define FASTSUBS_MODULE_BASE_H

#include <Python.h>

#include "chunk.h"
#include "engine.h"

/* An open index as Python sees it. */
typedef struct {
    PyObject_HEAD
    Engine engine;
    int opened;
    PyObject *path;               /* str, for messages */
    PyObject **texts;             /* per word id: its str, once made (answer_records) */
    /* render_chunk()'s output buffer, kept (under the GIL) for the next call, up to
     * KEPT_OUTPUT_BYTES: a chunk's text is ~700 KB at -n 100, above glibc's 128 KiB
     * threshold (module.c), so a new buffer a chunk was new pages, each a fault */
    Text kept_output;
} EngineObject;

#define KEPT_OUTPUT_BYTES ((size_t)8 << 20)

/* Finds the exceptions of fastsubs.errors that module_raise_failure raises (once, as the module
 * is made): 0, or -1 with an exception set. */
int module_load_errors(void);
/* ``failure`` as the fastsubs exception it is (its message naming ``path``); NULL. */
PyObject *module_raise_failure(PyObject *path, const Failure *failure);
/* 0, or -1 with ValueError when the index is closed or was never opened. */
int module_check_open(EngineObject *self);
/* Reads ``a`` as ``*n`` items of ``size`` bytes (*n < 0: any number, set): 0, or -1. */
int module_get_array(PyObject *a, Py_buffer *view, Py_ssize_t size, Py_ssize_t *n, const char *what);

/* The items of ``list``, each bytes (else TypeError naming ``what``), as spans into the
 * tuple ``*held`` that holds them (another thread may change the list meanwhile): an
 * array to PyMem_Free, or NULL with an exception set (*held NULL). */
Span *module_byte_spans(PyObject *list, PyObject **held, const char *what);

#endif
