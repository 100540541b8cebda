/* What module_search.c gives module.c: the Engine type's searches and renderings (their
 * arguments are documented there and in module.c's method table), named module_engine_*
 * as every function a glue file gives another (docs/development.md, "The kernel's layers"),
 * where module.c's own methods, static, are Engine_*. */
#ifndef FASTSUBS_MODULE_SEARCH_H
#define FASTSUBS_MODULE_SEARCH_H

#include "module_base.h"

PyObject *module_engine_search(EngineObject *self, PyObject *args);
PyObject *module_engine_search_batch(EngineObject *self, PyObject *args);
PyObject *module_engine_render(EngineObject *self, PyObject *args, PyObject *kwds);
PyObject *module_engine_render_chunk(EngineObject *self, PyObject *args, PyObject *kwds);
PyObject *module_engine_fields(EngineObject *self, PyObject *args);

#endif
