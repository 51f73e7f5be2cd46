/* py_foreign.h: device memory of other libraries read as DeviceArray views (py_foreign.c):
 * the CUDA Array Interface, the producer's stream ordered, as_cuda_array */
#ifndef CF_PY_FOREIGN_H
#define CF_PY_FOREIGN_H

#include "py_devicearray.h"

/* A DeviceArray, or any object with __cuda_array_interface__, as a view (no copy). `*keepalive`
 * receives a new reference that keeps the memory alive while the view is used. When `sync`, the
 * producer's stream named in the interface is synchronised (CAI v3; PyTorch's current stream,
 * see cf_py_foreign_read), and a producer whose interface names no stream but which speaks
 * DLPack is asked, through the DLPack stream handshake, to order its pending work before the
 * legacy default stream's (cf_py_order_operand
 * then orders a call on another stream after that). TypeError naming `argname` for other
 * objects. Needs the GPU for foreign objects (to find the pointer's device). */
int cf_py_device_view(PyObject *obj, cf_array *out, PyObject **keepalive, int sync,
                      const char *argname);
/* `sync` for a call's operands: a stream named in the interface is ordered before the legacy
 * default stream on the device (an event wait, or nothing for 1 and 2), not synchronised on the
 * host; the call orders itself after that stream (cf_py_args_order). */
#define CF_PY_VIEW_ORDER 2
/* Or'ed into `sync`: an object without a (readable) __cuda_array_interface__ is no error, the
 * answer is 1 (not a device object) with no exception; the interface is read once, not twice
 * as cf_py_is_device_object then cf_py_device_view would (a Python property for PyTorch). */
#define CF_PY_VIEW_OPTIONAL 4
/* Whether obj is a DeviceArray or exposes __cuda_array_interface__ (no GPU needed). */
int cf_py_is_device_object(PyObject *obj);
/* cuda.as_cuda_array's engine: a DeviceArray view of a CAI object (the object itself if it is one). */
PyObject *cf_py_as_cuda_array(PyObject *obj, int sync, const char *argname);

/* as_cuda_array, is_cuda_array */
extern PyMethodDef cf_py_foreign_methods[];

#endif
