/* py_interop.h: foreign device arrays in and out of a call (py_interop.c): the fast readers of
 * PyTorch tensors and CuPy arrays (cf_py_foreign_read, declared in py_common.h for
 * py_devicearray.c), the choice of the caller's array type for fresh results, and the C wrappers
 * that make a torch tensor or a CuPy array over a result. The type rules live in
 * cufunc/_interop.py (reader_for, wrapper_for); this file caches their answers per type. */
#ifndef CF_PY_INTEROP_H
#define CF_PY_INTEROP_H

#include "py_common.h"

/* The wrapper for fresh device results of a call on `inputs` (n of them; NULL entries skipped):
 * the first input of a foreign device array type decides, unless the output type in effect is
 * "cufunc". *wrapper is borrowed, NULL for DeviceArrays. 0 or -1. */
int cf_py_result_wrapper(PyObject *const *inputs, int n, PyObject **wrapper);

/* _foreign_interface, _as_torch, _as_cupy. */
extern PyMethodDef cf_py_interop_methods[];

#endif
