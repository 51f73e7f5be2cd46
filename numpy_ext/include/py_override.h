/* py_override.h: NumPy's ufunc override protocol (NEP 13, __array_ufunc__) for cufunc's UFunc and
 * GUFunc (py_override.c). Each entry point (a ufunc call, outer, reduce, accumulate, at, a gufunc
 * call) asks first whether an argument overrides the call; if one does, the call is handed over
 * as NumPy's own ufuncs hand it over, and the entry returns what the override returns.
 *
 * An argument overrides when its type has an __array_ufunc__ other than NumPy's ndarray's and
 * cufunc's DeviceArray's, and cufunc does not take it as a device array itself (types with
 * __cuda_array_interface__: CuPy, Numba and PyTorch arrays are computed on directly, as today;
 * CuPy's __array_ufunc__ would look the ufunc up by name in CuPy's namespace). Dask arrays are
 * served by cufunc's stand-in for dask's __array_ufunc__ (cufunc/_dask.py's array_ufunc, a hook
 * the package registers: dask finds foreign ufuncs by name, and refuses reduce and accumulate). */
#ifndef CF_PY_OVERRIDE_H
#define CF_PY_OVERRIDE_H

#include "py_devicearray.h"
#include "py_hooks.h"

/* The types the fast check knows to not override: a few pointer comparisons per argument before
 * any attribute lookup (NumPy's "basic Python types" check). */
static inline int cf_py_override_plain(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    return t == &CfPyDeviceArray_Type || t == &PyArray_Type || t == &PyFloat_Type ||
           t == &PyLong_Type || o == Py_None || t == &PyBool_Type || t == &PyComplex_Type;
}

/* Whether an override takes the call. Returns 0: no argument overrides (go on with the call);
 * 1: handed over, *result is the override's answer (new reference); -1: an exception (an
 * operand with __array_ufunc__ = None, every override answered NotImplemented: TypeError as
 * NumPy words it, or the override's own error).
 *
 * `method` is "__call__", "outer", "reduce", "accumulate", "at" (any other name hands over all
 * positional arguments as inputs). `nin` is the function's number of inputs (for "__call__" and
 * "outer"; positional arguments past the inputs are outputs). The arguments as a vectorcall
 * passes them: */
int cf_py_override_vc(PyObject *func, const char *method, int nin, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames, PyObject **result);
/* ... or as a tuple and a dict (kwargs may be NULL). */
int cf_py_override_tp(PyObject *func, const char *method, int nin, PyObject *args,
                      PyObject *kwargs, PyObject **result);

/* For a function that is not a ufunc (cuda.reduce): a dask array as `first` hands the call to
 * the hook `handler` (cufunc._dask's, e.g. CF_PY_HOOK_dask_reduce_all) as
 * handler(func, *args, **kwargs), which builds the lazy graph. Same returns as above; a pointer
 * test when `first` is of a common type. */
int cf_py_override_dask(PyObject *func, cf_py_hook_id handler, PyObject *first, PyObject *args,
                        PyObject *kwargs, PyObject **result);

#endif
