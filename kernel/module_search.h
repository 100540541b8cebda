/* What module_search.c gives module.c: the Index type's searches and renderings (their
 * arguments are documented there and in module.c's method table). */
#ifndef FASTSUBS_MODULE_SEARCH_H
#define FASTSUBS_MODULE_SEARCH_H

#include "module_base.h"

PyObject *Index_search(Index *self, PyObject *args);
PyObject *Index_search_batch(Index *self, PyObject *args);
PyObject *Index_render(Index *self, PyObject *args, PyObject *kwds);
PyObject *Index_render_chunk(Index *self, PyObject *args, PyObject *kwds);
PyObject *Index_fields(Index *self, PyObject *args);

#endif
