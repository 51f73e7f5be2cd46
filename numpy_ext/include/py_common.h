/* py_common.h: what every C file of the extension cufunc._core uses (py_common.c): the Python and
 * NumPy headers, the public C API (include/cufunc/; the binding never includes src/), the
 * exception of a status code, dtypes, shapes. Each file's own API is in its own header
 * (py_<file>.h, this folder).
 *
 * Conventions: functions returning int give 0 on success and -1 with a Python exception set;
 * functions returning PyObject * give a new reference or NULL with an exception set. Checks of
 * arguments that need no GPU come before the first call that does (cf_py_cuda_init), so bad input
 * is reported as such on a machine without a GPU too. */
#ifndef CF_PY_COMMON_H
#define CF_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* One NumPy C-API table for the whole extension; py_common.c defines CF_PY_IMPORT_ARRAY (the table
 * lives there) and _coremodule.c fills it at init (cf_py_import_numpy), the other files see it
 * through NO_IMPORT_ARRAY. */
#define PY_ARRAY_UNIQUE_SYMBOL cf_py_numpy_api
#ifndef CF_PY_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <stdint.h>
#include <string.h>

#include "cufunc/cufunc.h"

/* Whether the interpreter is shutting down (the driver may already be torn down then). */
#if PY_VERSION_HEX >= 0x030D0000
#define cf_py_is_finalizing() Py_IsFinalizing()
#else
#define cf_py_is_finalizing() _Py_IsFinalizing()
#endif

/* import_array(): the NumPy C-API table filled (module init). 0, or -1 with ImportError. */
int cf_py_import_numpy(void);

/* ---- errors (py_common.c) -------------------------------------------------------------------- */

/* The Python exception class for a status code (borrowed): see the brackets in status.h; those
 * of cufunc.errors are hooks the package registers (py_hooks.h), NULL with RuntimeError when it
 * has not. */
PyObject *cf_py_exception_for(cf_status st);
/* Raise the exception for `st` with cf_last_error()'s message, prefixed by "what: " when `what` is
 * not NULL. Returns NULL so callers can `return cf_py_raise(st, "to_device");`. */
PyObject *cf_py_raise(cf_status st, const char *what);
/* Same, returning -1. */
int cf_py_fail(cf_status st, const char *what);
/* Load the driver (cf_init); CudaSupportError without a usable driver. `what` names the caller. */
int cf_py_cuda_init(const char *what);
/* The calling thread's current device (after cf_py_cuda_init). */
int cf_py_current_device(int *device, const char *what);

/* ---- dtypes (py_common.c) -------------------------------------------------------------------- */

/* The cf_dtype of a NumPy dtype; TypeError naming `argname` and the dtype when cufunc does not
 * support it (object, str, datetime64, structured, long double, non-native byte order). */
int cf_py_dtype_from_descr(PyArray_Descr *descr, cf_dtype *out, const char *argname);
/* Any dtype-like object (np.float32, 'f4', a dtype, None = float64) -> cf_dtype and a new reference
 * to its native NumPy dtype (descr may be NULL if not wanted). */
int cf_py_dtype_from_object(PyObject *obj, cf_dtype *out, PyArray_Descr **descr,
                            const char *argname);
/* The native NumPy dtype of a cf_dtype (new reference). */
PyArray_Descr *cf_py_descr_from_dtype(cf_dtype dt);

/* NumPy's casting= argument (a str; NULL means the ufunc default, 'same_kind'). ValueError with
 * NumPy's wording otherwise. */
int cf_py_parse_casting(PyObject *obj, cf_casting *out);

/* ---- shapes (py_common.c) -------------------------------------------------------------------- */

/* An int or a sequence of ints -> ndim and extents. ValueError naming `argname` for negative
 * extents or more than CF_MAX_DIMS axes, TypeError for non-integers. */
int cf_py_parse_shape(PyObject *obj, int *ndim, int64_t *shape, const char *argname);
/* ValueError naming `argname` if size * itemsize does not fit in 63 bits. */
int cf_py_check_nbytes(int ndim, const int64_t *shape, size_t itemsize, const char *argname);
/* 'C' or 'F' from a str argument; ValueError naming `argname` otherwise. */
int cf_py_parse_order(PyObject *obj, char *order, const char *argname);
/* A tuple of Python ints. */
PyObject *cf_py_tuple_from_int64(int n, const int64_t *v);
/* A sequence of byte strides (any sign, at most CF_MAX_DIMS) -> *n and out. */
int cf_py_parse_strides(PyObject *obj, int *n, int64_t *out);

/* ---- DLPack data types (py_common.c) --------------------------------------------------------- */

/* cufunc's dtype of a DLPack data type (code, bits, lanes); -1 when cufunc has none: a TypeError
 * naming argname, or no exception when argname is NULL. */
int cf_py_dtype_from_dl(uint8_t code, uint8_t bits, uint16_t lanes, cf_dtype *out,
                        const char *argname);
/* The DLPack data type (code, bits; one lane) of cufunc's dtype. */
void cf_py_dl_dtype(cf_dtype dt, uint8_t *code, uint8_t *bits);

/* Copy a view's used axes only: a cf_array holds CF_MAX_DIMS (64) of each, and whole-struct
 * copies (1 KB each) showed up on the per-call path of small ufunc calls. */
static inline void cf_py_view_copy(cf_array *dst, const cf_array *src)
{
    dst->data = src->data;
    dst->dtype = src->dtype;
    dst->ndim = src->ndim;
    dst->device = src->device;
    memcpy(dst->shape, src->shape, sizeof(int64_t) * (size_t)src->ndim);
    memcpy(dst->strides, src->strides, sizeof(int64_t) * (size_t)src->ndim);
}



/* The numpydoc text of parameters that many functions share, in one wording. */
#define CF_PY_DOC_STREAM(what)                                                                    \
    "stream : Stream or int, optional\n"                                                          \
    "    The stream the " what " is queued on: a Stream, a CUstream handle (int) or an object\n"  \
    "    with ``__cuda_stream__``; 0, the default, is the default stream.\n"
#define CF_PY_DOC_CALL_ARGS                                                                       \
    "*inputs : array_like\n"                                                                      \
    "    The inputs of the call (NumPy or device arrays, scalars).\n"                             \
    "**kwargs\n"                                                                                  \
    "    The keywords of the call (``out``, ``dtype``, ``signature``, ...).\n"

#endif
