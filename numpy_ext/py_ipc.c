/* py_ipc.c: CUDA IPC of DeviceArrays: export (devicearray_ipc_export, for
 * DeviceNDArray.get_ipc_handle: pool memory is moved into exportable memory first) and open
 * (ipc_open: memory of another process, owned by a CfPyMemory of kind CF_PY_MEM_IPC, for
 * IpcArrayHandle.open; cufunc/_devarray.py). */
#include "py_ipc.h"
#include "py_memory.h"
#include "py_stream.h"

#include <string.h>

/* devicearray_ipc_export(ary) -> (64-byte handle, offset of ary's data in the allocation, bytes
 * of the allocation). Pool memory cannot be exported by cuIpcGetMemHandle: an array that is the
 * only view of its pool allocation is moved first into IPC-able memory (a device-to-device copy
 * ordered after its last write; ary.ptr changes); one sharing its allocation with other views
 * cannot be moved and is a ValueError. */
static PyObject *py_devicearray_ipc_export(PyObject *self, PyObject *arg)
{
    CfPyDeviceArray *da;
    CfPyMemory *a, *fresh;
    unsigned char h[CF_IPC_HANDLE_BYTES];
    int pooled = 0;
    cf_status st;
    if (!CfPyDeviceArray_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "get_ipc_handle: not a DeviceNDArray");
        return NULL;
    }
    da = (CfPyDeviceArray *)arg;
    if (da->base == NULL || !CfPyMemory_Check(da->base) ||
        ((CfPyMemory *)da->base)->kind != CF_PY_MEM_ALLOC) {
        PyErr_SetString(PyExc_ValueError,
                        "get_ipc_handle: only memory allocated by cufunc can be exported (this "
                        "array views memory of another library, a DLPack import or an IPC "
                        "handle)");
        return NULL;
    }
    a = (CfPyMemory *)da->base;
    if (!cf_mem_lookup(a->ptr, &pooled, NULL)) {
        PyErr_SetString(PyExc_ValueError, "get_ipc_handle: the allocation is not live");
        return NULL;
    }
    if (pooled) {
        PyObject *on;
        cf_stream *s;
        if (Py_REFCNT(a) != 1 || a->exposed) {
            PyErr_Format(PyExc_ValueError,
                         "get_ipc_handle: the array's memory comes from the stream-ordered pool, "
                         "which CUDA IPC cannot export, and it cannot be moved into exportable "
                         "memory because %s; call get_ipc_handle first, or export a copy "
                         "(e = cuda.device_array_like(d); e.copy_to_device(d); "
                         "e.get_ipc_handle())",
                         a->exposed ? "its address was handed out (__cuda_array_interface__, "
                                      "DLPack, .ptr or a kernel's captured global)"
                                    : "other views share it");
            return NULL;
        }
        /* the stream the old memory is freed on (py_memory.c's choice) does the copy */
        on = (a->stream != NULL && ((CfPyStream *)a->stream)->kind == CF_PY_STREAM_OWNED)
                 ? a->stream : NULL;
        fresh = cf_py_memory_alloc(a->nbytes, a->device, on, "get_ipc_handle", 1);
        if (fresh == NULL || cf_py_stream_get(on, a->device, &s) < 0) {
            Py_XDECREF(fresh);
            return NULL;
        }
        if ((cf_py_stream_usable_later(a->pending) &&
             cf_py_stream_order_after(s, on, a->pending, a->device) < 0)) {
            Py_DECREF(fresh);
            return NULL;
        }
        st = cf_memcpy_dtod(s, fresh->ptr, a->ptr, a->nbytes);
        if (st == CF_OK)
            st = cf_stream_synchronize(s); /* the other process reads it without our streams */
        if (st != CF_OK) {
            Py_DECREF(fresh);
            return cf_py_raise(st, "get_ipc_handle");
        }
        da->view.data = fresh->ptr + (da->view.data - a->ptr);
        Py_SETREF(da->base, (PyObject *)fresh);
        a = fresh;
    }
    st = cf_ipc_get_handle(a->ptr, h);
    if (st != CF_OK)
        return cf_py_raise(st, "get_ipc_handle");
    return Py_BuildValue("(y#KK)", (const char *)h, (Py_ssize_t)CF_IPC_HANDLE_BYTES,
                         (unsigned long long)(da->view.data - a->ptr), (unsigned long long)a->nbytes);
}

/* ipc_open(handle, device, offset, shape, strides, dtype) -> (its DeviceMemory, a DeviceNDArray
 * over it): the memory's close() is IpcArrayHandle.close. */
static PyObject *py_ipc_open(PyObject *self, PyObject *args)
{
    const char *h;
    Py_ssize_t hlen;
    int device, ndim, sndim;
    unsigned long long offset;
    PyObject *shape_obj, *strides_obj, *dtype_obj, *arr;
    PyArray_Descr *descr = NULL;
    CfPyMemory *mem;
    cf_array v;
    cf_status st;
    uint64_t ptr = 0;
    if (!PyArg_ParseTuple(args, "y#iKOOO:ipc_open", &h, &hlen, &device, &offset, &shape_obj,
                          &strides_obj, &dtype_obj))
        return NULL;
    if (hlen != CF_IPC_HANDLE_BYTES) {
        PyErr_Format(PyExc_ValueError, "ipc_open: an IPC handle has %d bytes, not %zd",
                     CF_IPC_HANDLE_BYTES, hlen);
        return NULL;
    }
    memset(&v, 0, sizeof v);
    if (cf_py_parse_shape(shape_obj, &ndim, v.shape, "shape") < 0 ||
        cf_py_parse_strides(strides_obj, &sndim, v.strides) < 0 ||
        cf_py_dtype_from_object(dtype_obj, &v.dtype, &descr, "dtype") < 0)
        return NULL;
    Py_XDECREF(descr);
    if (sndim != ndim) {
        PyErr_SetString(PyExc_ValueError, "ipc_open: shape and strides differ in length");
        return NULL;
    }
    if (cf_py_cuda_init("open_ipc_array") < 0)
        return NULL;
    st = cf_ipc_open(device, (const unsigned char *)h, &ptr);
    if (st != CF_OK)
        return cf_py_raise(st, "IpcHandle.open");
    mem = cf_py_memory_ipc(ptr, device);
    if (mem == NULL) {
        cf_ipc_close(device, ptr);
        return NULL;
    }
    v.ndim = ndim;
    v.device = device;
    v.data = ptr + offset;
    arr = cf_py_devicearray_wrap(&v, (PyObject *)mem, NULL, 0);
    if (arr == NULL) {
        Py_DECREF(mem);
        return NULL;
    }
    return Py_BuildValue("(NN)", (PyObject *)mem, arr);
}

PyMethodDef cf_py_ipc_methods[] = {
    {"devicearray_ipc_export", py_devicearray_ipc_export, METH_O, NULL},
    {"ipc_open", py_ipc_open, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
