/* py_loops.h: the loop resolver (cufunc/loops.h) for the Python package (py_loops.c). */
#ifndef CF_PY_LOOPS_H
#define CF_PY_LOOPS_H

#include "py_common.h"

extern PyMethodDef cf_py_loops_methods[];

#endif
