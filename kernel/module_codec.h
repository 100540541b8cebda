/* What module_codec.c gives module.c: fastsubs._kernel's functions that make and parse the
 * index format's bytes (codec.c). */
#ifndef FASTSUBS_MODULE_CODEC_H
#define FASTSUBS_MODULE_CODEC_H

#include <Python.h>

extern PyMethodDef module_codec_methods[];

#endif
