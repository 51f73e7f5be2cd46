/* py_interop.h: foreign device arrays in and out of a call (py_interop.c): the fast readers of
 * PyTorch tensors and CuPy arrays (cf_py_foreign_read, for py_foreign.c), the choice of the caller's array type for fresh results, and the C wrappers
 * that make a torch tensor or a CuPy array over a result. The type rules live in
 * cufunc/_interop.py (reader_for, wrapper_for); this file caches their answers per type. */
#ifndef CF_PY_INTEROP_H
#define CF_PY_INTEROP_H

#include "py_stream.h"

/* The wrapper for fresh device results of a call on `inputs` (n of them; NULL entries skipped):
 * the first input of a foreign device array type decides, unless the output type in effect is
 * "cufunc". *wrapper is borrowed, NULL for DeviceArrays. 0 or -1. */
int cf_py_result_wrapper(PyObject *const *inputs, int n, PyObject **wrapper);

/* Fresh results made by the caller's array library (N0 in DLPack's words: the library allocates,
 * cufunc's kernel writes into it), for a call whose results `wrapper` would wrap: PyTorch through
 * its DLPack C exchange API (managed_tensor_allocator; off by default, _lib_results), CuPy
 * through cupy.ndarray(shape, dtype).
 * No DeviceArray and no wrapping per result: the library's own allocator, stream-ordered on its
 * current stream. A cf_py_lib_alloc holds what the call needs to order that memory. */
typedef struct {
    int kind;        /* 0: none (the call allocates DeviceArrays and wraps them) */
    uintptr_t consumer; /* the library's current stream on the device (protocol handle: 1 legacy) */
    int capturing;   /* set by the caller: the call is captured (PyTorch's allocator is then used
                      * whatever _lib_results says: its graph pool keeps the result's address) */
} cf_py_lib_alloc;

/* Whether `wrapper`'s library allocates this call's fresh results (0: no, use DeviceArrays), and
 * the launch stream `s` (protocol handle `launch`) made to wait for the library's current stream
 * when they differ (its allocator may hand out memory whose last use is queued there). 1, 0, -1. */
int cf_py_lib_alloc_begin(PyObject *wrapper, int device, cf_stream *s, uintptr_t launch,
                          cf_py_lib_alloc *la);
/* One fresh C-contiguous result of the library of `la`: the library's array (new reference) and
 * its address in *data. NULL with an exception: an error; NULL without: not on `device` (CuPy
 * allocates on its current device, which may be another), the caller allocates it itself. */
PyObject *cf_py_lib_alloc_one(const cf_py_lib_alloc *la, int ndim, const int64_t *shape,
                              cf_dtype dt, int device, uint64_t *data);
/* After the launch on `s`: the library's current stream waits for it when they differ. 0, -1. */
int cf_py_lib_alloc_end(const cf_py_lib_alloc *la, int device, cf_stream *s, uintptr_t launch);

/* Read foreign device object obj's view, *readonly, and the stream its
 * interface names (*has_stream, *stream) without building its __cuda_array_interface__ where
 * py_interop.c has a reader of its type (PyTorch tensors, CuPy arrays): 0, with v->device the
 * device the library names for non-empty data (a tensor's, a CuPy allocation's), else -1 (the
 * pointer says; an empty array: the current device). Otherwise *cai
 * receives obj's interface (a new reference) for parse_cai: 1. -1 with an exception
 * (AttributeError when obj has no interface). */
int cf_py_foreign_read(PyObject *obj, cf_array *v, int *readonly, int *has_stream,
                       uintptr_t *stream, PyObject **cai, const char *argname);
/* _foreign_interface, _as_torch, _as_cupy, _interop_c_api, _lib_results. */
extern PyMethodDef cf_py_interop_methods[];

#endif
