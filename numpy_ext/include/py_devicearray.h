/* py_devicearray.h: the DeviceArray object (py_devicearray.c): the struct and type, making
 * arrays, the pending writes of an operand's memory. The type is completed at init by
 * py_devicearray_type.c */
#ifndef CF_PY_DEVICEARRAY_H
#define CF_PY_DEVICEARRAY_H

#include "py_memory.h"

typedef struct {
    PyObject_HEAD
    cf_array view;         /* data pointer, dtype, shape, strides (bytes), device */
    PyArray_Descr *descr;  /* the NumPy dtype of view.dtype */
    PyObject *base;        /* keeps the memory alive: a CfPyMemory (py_memory.h), or a foreign object */
    PyObject *stream;      /* the Stream work on this array is ordered on, or NULL (default) */
    int readonly;
    PyObject *weakreflist;
    /* This object's number, never reused (0: none). A DeviceArray never changes its view, stream
     * or readonly flag, so a caller that saw this serial before knows the whole array by it: the
     * ufunc fast path repeats a launch on it (py_ufunc.c). */
    uint64_t serial;
} CfPyDeviceArray;


extern PyTypeObject CfPyDeviceArray_Type;
#define CfPyDeviceArray_Check(o) PyObject_TypeCheck((o), &CfPyDeviceArray_Type)

/* A view object over `view` keeping `base` alive (both new references taken; stream may be NULL or
 * Py_None for the default stream). */
PyObject *cf_py_devicearray_wrap(const cf_array *view, PyObject *base, PyObject *stream,
                                 int readonly);
/* A new contiguous array from the device's stream-ordered pool, allocated on `stream` (a resolved
 * stream: a Stream or None). MemoryError naming the size when the device is full. */
PyObject *cf_py_devicearray_alloc(int ndim, const int64_t *shape, cf_dtype dt, char order,
                                  int device, PyObject *stream);
/* Order work on stream `s` (of the resolved stream `resolved`: a Stream or None; on `device`)
 * after the work that last wrote the memory of device operand `obj` (the `keep` of a device view:
 * a DeviceArray, or a foreign object, whose producer cf_py_device_view ordered before the legacy
 * default stream). When the work `written` to the memory, its stream becomes the one to wait for.
 * No driver call when the last writer's stream is `resolved`, or ordered with it by CUDA. */
int cf_py_order_operand(PyObject *obj, int device, PyObject *resolved, cf_stream *s, int written);
/* The resolved stream the memory of `obj` is pending on (borrowed; NULL: the legacy default
 * stream), for the CUDA Array Interface and DLPack exports. */
PyObject *cf_py_pending_stream(PyObject *obj);
/* Record that a DeviceArray's address left cufunc's hands (CAI, DLPack, .ptr, a captured global),
 * so that get_ipc_handle never moves its memory (no-op for other objects). */
void cf_py_devicearray_mark_exposed(PyObject *obj);
/* The memory owner behind a DeviceArray (through views of views), or NULL: foreign memory. */
CfPyMemory *cf_py_memory_of(PyObject *obj);

/* The DeviceArray methods of this file (reshape, ravel, transpose, bind, ...), joined with the
 * others' by py_devicearray_type.c; devicearray_view (module function). */
extern PyMethodDef cf_py_devicearray_array_methods[];
extern PyMethodDef cf_py_devicearray_methods[];

#endif
