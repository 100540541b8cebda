/* What module_format.c gives module.c: fastsubs._kernel's FORMAT (the index format, format.h)
 * and RENDER (the output layouts, render_layout.h), the layouts the core shares with Python. */
#ifndef FASTSUBS_MODULE_FORMAT_H
#define FASTSUBS_MODULE_FORMAT_H

#include <Python.h>

/* New references, or NULL with an exception set. */
PyObject *module_format_constants(void);
PyObject *module_render_layout(void);

#endif
