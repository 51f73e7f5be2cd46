/* py_dlpack.h: DLPack (py_dlpack.c): DeviceArray.__dlpack__ and cuda.from_dlpack, and the
 * DLPack C exchange API libraries publish (PyTorch >= 2.10) */
#ifndef CF_PY_DLPACK_H
#define CF_PY_DLPACK_H

#include "py_devicearray.h"

PyObject *cf_py_devicearray_dlpack(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *cf_py_devicearray_order_for(PyObject *self, PyObject *stream);
PyObject *cf_py_devicearray_dlpack_device(PyObject *self, PyObject *unused);
/* A versioned DLPack managed tensor over DeviceArray d (holding a reference to d), after the
 * consumer's stream (a protocol handle: 1 the legacy default stream) was made to wait for the work
 * pending on d: for a library that takes it in C (the DLPack C exchange API). NULL: an error. */
struct DLManagedTensorVersioned *cf_py_dlpack_managed(PyObject *d, long long consumer);

/* The DLPack C exchange API type tp publishes (cached per type), or NULL: none, or one cufunc
 * does not speak. */
struct DLPackExchangeAPI;
const struct DLPackExchangeAPI *cf_py_exchange_api_for(PyTypeObject *tp);
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

/* Nonzero: the exchange API is not used (_interop_c_api(False): tests and A/B timing). */
extern int cf_py_exchange_off;

/* cuda.from_dlpack(obj, stream): a DeviceArray over the memory obj exports (stream NULL: the
 * default, 0). */
PyObject *cf_py_from_dlpack(PyObject *obj, PyObject *stream);

/* __dlpack__, __dlpack_device__, _order_for (joined by py_devicearray_type.c); from_dlpack. */
extern PyMethodDef cf_py_dlpack_array_methods[];
extern PyMethodDef cf_py_dlpack_methods[];

#endif
