/* What module_search.c gives module.c: the Engine type's searches and renderings (their
 * arguments are documented there and in module.c's method table). */
#ifndef FASTSUBS_MODULE_SEARCH_H
#define FASTSUBS_MODULE_SEARCH_H

#include "module_base.h"

PyObject *Engine_search(EngineObject *self, PyObject *args);
PyObject *Engine_search_batch(EngineObject *self, PyObject *args);
PyObject *Engine_render(EngineObject *self, PyObject *args, PyObject *kwds);
PyObject *Engine_render_chunk(EngineObject *self, PyObject *args, PyObject *kwds);
PyObject *Engine_fields(EngineObject *self, PyObject *args);

#endif
