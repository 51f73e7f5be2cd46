/* py_twins.h: DeviceArray's operators, rich comparison and __array_ufunc__, forwarded to
 * cufunc._twins (GPU twins of NumPy's ufuncs). Only py_devicearray.c's type table uses these. */
#ifndef CF_PY_TWINS_H
#define CF_PY_TWINS_H

#include "py_common.h"

extern PyNumberMethods cf_py_twins_as_number;
PyObject *cf_py_twins_richcompare(PyObject *a, PyObject *b, int op);
/* ufunc.at engine functions (py_at.c), registered by _coremodule.c */
extern PyMethodDef cf_py_at_methods[];

PyObject *cf_py_twins_array_ufunc(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames);

#define CF_PY_TWINS_METHODS                                                                       \
    {"__array_ufunc__", (PyCFunction)(void (*)(void))cf_py_twins_array_ufunc,                     \
     METH_FASTCALL | METH_KEYWORDS,                                                               \
     "NEP 13: NumPy's ufuncs on DeviceArrays run on the GPU through cufunc's twins of them "      \
     "(TypeError for a ufunc without a twin; np.asarray(d) is the explicit host copy)."}

#endif
