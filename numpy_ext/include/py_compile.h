/* py_compile.h: compiled CUDA modules and RawKernel (py_compile.c) */
#ifndef CF_PY_COMPILE_H
#define CF_PY_COMPILE_H

#include "py_common.h"

int cf_py_compile_init_module(PyObject *m);
extern PyMethodDef cf_py_compile_methods[];

#endif
