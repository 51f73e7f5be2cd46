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

/* obj's tensor taken through the DLPack C exchange API its type publishes
 * (type.__dlpack_c_exchange_api__: PyTorch >= 2.10), which, unlike PyTorch's __dlpack__, serves
 * a tensor on any device whatever the library's current device. 0: *m is the caller's (its
 * deleter releases it) and *stream the library's current work stream on the tensor's device (a
 * protocol handle: 1 the legacy default stream; 0 for a host tensor); 1: no such API, or one
 * cufunc does not take (off by _interop_c_api(False), or a tensor that requires grad, which its
 * __dlpack__ refuses in its own words): the caller exports through __dlpack__; -1: error. */
struct DLManagedTensorVersioned;
int cf_py_exchange_take(PyObject *obj, struct DLManagedTensorVersioned **m, uintptr_t *stream);

/* The current work stream on `device` of obj's library, through the exchange API its type
 * publishes (protocol handle, 1 the legacy default stream): 0; 1 no such API; -1 error. */
int cf_py_exchange_stream(PyObject *obj, int device, uintptr_t *stream);

/* _foreign_interface, _as_torch, _as_cupy, _interop_c_api, _lib_results. */
extern PyMethodDef cf_py_interop_methods[];

#endif
