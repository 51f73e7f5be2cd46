/* py_reduce.h: reductions in the extension cufunc._core (py_reduce.c): the Reducer type behind
 * cuda.reduce / cuda.Reduce, and the `reduce` and `accumulate` methods of the UFunc type. */
#ifndef CF_PY_REDUCE_H
#define CF_PY_REDUCE_H

#include "py_common.h"

/* Registers the type cufunc._core.Reducer. */
int cf_py_reduce_init_module(PyObject *m);
extern PyMethodDef cf_py_reduce_methods[];

/* UFunc.reduce(array, axis=0, dtype=None, out=None, keepdims=False, initial=<no value>,
 * where=True, stream=0) and UFunc.accumulate(array, axis=0, dtype=None, out=None, stream=0), for
 * the UFunc type's method table (METH_VARARGS | METH_KEYWORDS). `self` is a CfPyUFunc
 * (py_ufunc.h); its loops give the binary device function. */
PyObject *cf_py_ufunc_reduce(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *cf_py_ufunc_accumulate(PyObject *self, PyObject *args, PyObject *kwargs);
/* UFunc.reduceat(array, indices, axis=0, dtype=None, out=None, stream=0): NumPy's reduceat. */
PyObject *cf_py_ufunc_reduceat(PyObject *self, PyObject *args, PyObject *kwargs);

#endif
