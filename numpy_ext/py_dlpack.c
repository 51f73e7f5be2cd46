/* py_dlpack.c: DLPack exchange. DeviceArray.__dlpack__ / __dlpack_device__ export a view without
 * copying (a versioned capsule when the consumer asks with max_version >= (1, 0), the legacy one
 * otherwise); cuda.from_dlpack imports CUDA device memory from any producer without copying.
 *
 * Streams follow the Python array API: the consumer names the stream it will use (None or 1: the
 * legacy default stream, 2: per-thread default, -1: no synchronisation, else a CUstream handle) and
 * the producer makes that stream wait for the work queued on its own. */
#include "py_dlpack.h"
#include "dlpack.h"
#include "py_stream.h"

#include <string.h>

/* ---- export ---------------------------------------------------------------------------------- */

/* One block per export: the managed tensor (one of the two forms), the reference that keeps the
 * memory alive, and the shape and strides arrays. manager_ctx points at the block. */
typedef struct {
    DLManagedTensor legacy;
    DLManagedTensorVersioned versioned;
    PyObject *owner;
    int64_t dims[]; /* shape[ndim], then strides[ndim] */
} dl_export;

static void export_release(dl_export *e)
{
    if (e == NULL)
        return;
    /* The deleter may run on any thread, with or without the GIL, and after finalisation began;
     * the reference can only be dropped while the interpreter is alive. */
    if (e->owner != NULL && Py_IsInitialized()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_DECREF(e->owner);
        PyGILState_Release(g);
    }
    PyMem_RawFree(e);
}

static void deleter_legacy(DLManagedTensor *self)
{
    if (self != NULL)
        export_release((dl_export *)self->manager_ctx);
}

static void deleter_versioned(DLManagedTensorVersioned *self)
{
    if (self != NULL)
        export_release((dl_export *)self->manager_ctx);
}

static void capsule_destructor_legacy(PyObject *cap)
{
    DLManagedTensor *t;
    PyObject *type, *value, *tb;
    if (PyCapsule_IsValid(cap, "used_dltensor"))
        return; /* a consumer owns it now */
    PyErr_Fetch(&type, &value, &tb);
    t = (DLManagedTensor *)PyCapsule_GetPointer(cap, "dltensor");
    if (t == NULL)
        PyErr_WriteUnraisable(cap);
    else if (t->deleter != NULL)
        t->deleter(t);
    PyErr_Restore(type, value, tb);
}

static void capsule_destructor_versioned(PyObject *cap)
{
    DLManagedTensorVersioned *t;
    PyObject *type, *value, *tb;
    if (PyCapsule_IsValid(cap, "used_dltensor_versioned"))
        return;
    PyErr_Fetch(&type, &value, &tb);
    t = (DLManagedTensorVersioned *)PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (t == NULL)
        PyErr_WriteUnraisable(cap);
    else if (t->deleter != NULL)
        t->deleter(t);
    PyErr_Restore(type, value, tb);
}


static int parse_consumer_stream(PyObject *obj, long long *out)
{
    int overflow = 0;
    if (obj == NULL || obj == Py_None) {
        *out = 1; /* the array API: None means the legacy default stream for CUDA */
        return 0;
    }
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "__dlpack__: stream must be None or an int, got %.200s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    if (overflow || *out < -1) {
        PyErr_Format(PyExc_ValueError, "__dlpack__: stream %R is not a CUDA stream", obj);
        return -1;
    }
    if (*out == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "__dlpack__: stream=0 is ambiguous for CUDA and disallowed by the DLPack "
                        "protocol; pass 1 for the legacy default stream");
        return -1;
    }
    return 0;
}

/* Make the consumer's stream wait for the work pending on the array's memory (queued by its last
 * writer, on whichever stream that was: not necessarily the array's own). */
static int order_for_consumer(CfPyDeviceArray *a, long long consumer)
{
    cf_stream *ours, *theirs = NULL;
    cf_status st;
    PyObject *pending = cf_py_pending_stream((PyObject *)a);
    if (consumer == -1 || (uintptr_t)consumer == cf_py_stream_protocol_handle(pending))
        return 0;
    if (cf_py_stream_get(pending, a->view.device, &ours) < 0)
        return -1;
    /* a consumer's stream of another device waits across devices */
    st = cf_py_stream_wrap_any(a->view.device, (uintptr_t)consumer, &theirs);
    if (st == CF_OK)
        st = cf_stream_wait_stream(theirs, ours);
    cf_stream_free(theirs);
    return st == CF_OK ? 0 : cf_py_fail(st, "__dlpack__");
}

/* One export block over DeviceArray a (a new reference to it moves into the block), in the
 * versioned form (minor version `minor`, `flags`) or the legacy one. NULL with BufferError when a
 * stride is no multiple of the item size (DLPack counts strides in elements), or MemoryError. */
static dl_export *export_new(CfPyDeviceArray *a, int versioned, uint32_t minor, uint64_t flags)
{
    int nd = a->view.ndim;
    int64_t itemsize = (int64_t)cf_dtype_size(a->view.dtype);
    for (int i = 0; i < nd; i++) {
        if (a->view.strides[i] % itemsize != 0) {
            PyErr_Format(PyExc_BufferError,
                         "__dlpack__: stride %lld of axis %d is not a multiple of the item size "
                         "%lld, which DLPack cannot express",
                         (long long)a->view.strides[i], i, (long long)itemsize);
            return NULL;
        }
    }
    dl_export *e = PyMem_RawCalloc(1, sizeof(dl_export) +
                                          sizeof(int64_t) * 2 * (size_t)(nd > 0 ? nd : 1));
    if (e == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (int i = 0; i < nd; i++) {
        e->dims[i] = a->view.shape[i];
        e->dims[nd + i] = a->view.strides[i] / itemsize;
    }
    DLTensor *t = versioned ? &e->versioned.dl_tensor : &e->legacy.dl_tensor;
    t->data = (void *)(uintptr_t)a->view.data;
    t->device.device_type = kDLCUDA;
    t->device.device_id = a->view.device;
    t->ndim = nd;
    cf_py_dl_dtype(a->view.dtype, &t->dtype.code, &t->dtype.bits);
    t->dtype.lanes = 1;
    t->shape = e->dims;
    t->strides = e->dims + nd;
    t->byte_offset = 0;
    if (versioned) {
        e->versioned.version.major = DLPACK_MAJOR_VERSION;
        e->versioned.version.minor = minor;
        e->versioned.manager_ctx = e;
        e->versioned.deleter = deleter_versioned;
        e->versioned.flags = flags;
    } else {
        e->legacy.manager_ctx = e;
        e->legacy.deleter = deleter_legacy;
    }
    e->owner = Py_NewRef((PyObject *)a);
    return e;
}

DLManagedTensorVersioned *cf_py_dlpack_managed(PyObject *d, long long consumer)
{
    CfPyDeviceArray *a = (CfPyDeviceArray *)d;
    cf_py_devicearray_mark_exposed(d); /* the consumer keeps the address */
    dl_export *e = export_new(a, 1, DLPACK_MINOR_VERSION,
                              a->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0);
    if (e != NULL && order_for_consumer(a, consumer) < 0) {
        export_release(e);
        return NULL;
    }
    return e ? &e->versioned : NULL;
}

/* d._order_for(stream): make the consumer's stream (a protocol handle, as __dlpack__'s stream=)
 * wait for the work pending on d's memory, without making a capsule: for wrappers that hand
 * cufunc memory to a library by address (cufunc._interop's CuPy wrapper). */
PyObject *cf_py_devicearray_order_for(PyObject *self_obj, PyObject *stream)
{
    long long consumer;
    if (parse_consumer_stream(stream, &consumer) < 0 ||
        order_for_consumer((CfPyDeviceArray *)self_obj, consumer) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *cf_py_devicearray_dlpack(PyObject *self_obj, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    CfPyDeviceArray *self = (CfPyDeviceArray *)self_obj;
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    PyObject *src = NULL, *cap = NULL;
    long long consumer;
    int versioned = 0, want_copy = 0;
    uint32_t minor = DLPACK_MINOR_VERSION;
    cf_py_devicearray_mark_exposed(self_obj); /* the consumer keeps the address */
    dl_export *e = NULL;
    CfPyDeviceArray *a;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OOO:__dlpack__", kwlist, &stream,
                                     &max_version, &dl_device, &copy))
        return NULL;
    if (parse_consumer_stream(stream, &consumer) < 0)
        return NULL;
    if (max_version != Py_None) {
        long major;
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) != 2) {
            PyErr_SetString(PyExc_TypeError, "__dlpack__: max_version must be a (major, minor) tuple");
            return NULL;
        }
        major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
        if (major == -1 && PyErr_Occurred())
            return NULL;
        versioned = major >= 1;
        if (major == 1) {
            /* Minor versions share the ABI; report no more than the consumer knows. */
            long m = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 1));
            if (m == -1 && PyErr_Occurred())
                return NULL;
            if (m >= 0 && m < (long)minor)
                minor = (uint32_t)m;
        }
    }
    if (dl_device != Py_None) {
        long dt, id;
        if (!PyTuple_Check(dl_device) || PyTuple_GET_SIZE(dl_device) != 2) {
            PyErr_SetString(PyExc_TypeError, "__dlpack__: dl_device must be a (type, id) tuple");
            return NULL;
        }
        dt = PyLong_AsLong(PyTuple_GET_ITEM(dl_device, 0));
        id = PyLong_AsLong(PyTuple_GET_ITEM(dl_device, 1));
        if ((dt == -1 || id == -1) && PyErr_Occurred())
            return NULL;
        if (dt != kDLCUDA || id != self->view.device) {
            PyErr_Format(PyExc_BufferError,
                         "__dlpack__: the data is on (kDLCUDA, %d); exporting to device (%ld, %ld) "
                         "would need a cross-device copy, which cufunc does not do here",
                         self->view.device, dt, id);
            return NULL;
        }
    }
    if (copy != Py_None) {
        want_copy = PyObject_IsTrue(copy);
        if (want_copy < 0)
            return NULL;
    }
    if (cf_py_cuda_init("__dlpack__") < 0)
        return NULL;
    if (want_copy) {
        PyObject *r;
        src = cf_py_devicearray_alloc(self->view.ndim, self->view.shape, self->view.dtype, 'C',
                                      self->view.device, self->stream);
        if (src == NULL)
            return NULL;
        r = PyObject_CallMethod(src, "copy_to_device", "O", self_obj);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    } else {
        Py_INCREF(self_obj);
        src = self_obj;
    }
    a = (CfPyDeviceArray *)src;
    e = export_new(a, versioned, minor,
                   (a->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) |
                       (want_copy ? DLPACK_FLAG_BITMASK_IS_COPIED : 0));
    Py_CLEAR(src); /* the export holds its own reference */
    if (e == NULL)
        return NULL;
    if (order_for_consumer(a, consumer) < 0) {
        export_release(e);
        return NULL;
    }
    cap = versioned ? PyCapsule_New(&e->versioned, "dltensor_versioned",
                                    capsule_destructor_versioned)
                    : PyCapsule_New(&e->legacy, "dltensor", capsule_destructor_legacy);
    if (cap == NULL) {
        export_release(e);
        return NULL;
    }
    return cap;
fail:
    Py_XDECREF(src);
    return NULL;
}

PyObject *cf_py_devicearray_dlpack_device(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("(ii)", (int)kDLCUDA, ((CfPyDeviceArray *)self)->view.device);
}

/* ---- import ---------------------------------------------------------------------------------- */

static const char *device_type_name(int t)
{
    switch (t) {
    case kDLCPU: return "CPU";
    case kDLCUDA: return "CUDA";
    case kDLCUDAHost: return "CUDA pinned host memory";
    case kDLOpenCL: return "OpenCL";
    case kDLVulkan: return "Vulkan";
    case kDLMetal: return "Metal";
    case kDLVPI: return "VPI";
    case kDLROCM: return "ROCm";
    case kDLROCMHost: return "ROCm pinned host memory";
    case kDLExtDev: return "an external device";
    case kDLCUDAManaged: return "CUDA managed memory";
    case kDLOneAPI: return "oneAPI";
    case kDLWebGPU: return "WebGPU";
    case kDLHexagon: return "Hexagon";
    case kDLMAIA: return "MAIA";
    default: return "an unknown device";
    }
}

static int wrong_device(int type, const char *argname)
{
    PyErr_Format(PyExc_TypeError,
                 "%s: the data is on DLPack device %s (type %d); from_dlpack takes CUDA device "
                 "memory only (kDLCUDA); use cuda.to_device to copy host data",
                 argname, device_type_name(type), type);
    return -1;
}


/* Take a capsule: validate, rename it as consumed, wrap the tensor. The producer was asked to
 * order its work before `consumer` (a Stream; NULL: the legacy default stream, or, for a bare
 * capsule, nothing known), which becomes the memory's pending stream. */
static PyObject *consume_capsule(PyObject *cap, PyObject *consumer, const char *argname)
{
    DLTensor *t;
    void *managed;
    int versioned, readonly = 0, i;
    cf_array v;
    size_t itemsize;
    CfPyMemory *owner;
    PyObject *r;

    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->version.major > DLPACK_MAJOR_VERSION) {
            PyErr_Format(PyExc_BufferError,
                         "%s: DLPack version %u.%u is newer than the %d.x cufunc understands",
                         argname, m->version.major, m->version.minor, DLPACK_MAJOR_VERSION);
            return NULL;
        }
        versioned = 1;
        managed = m;
        t = &m->dl_tensor;
        readonly = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        versioned = 0;
        managed = m;
        t = &m->dl_tensor;
    } else {
        PyErr_Format(PyExc_ValueError,
                     "%s: not a DLPack capsule, or one that was already consumed", argname);
        return NULL;
    }
    if (t->device.device_type != kDLCUDA) {
        wrong_device(t->device.device_type, argname);
        return NULL;
    }
    if (t->ndim < 0 || t->ndim > CF_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions (at most %d are supported)", argname,
                     (int)t->ndim, CF_MAX_DIMS);
        return NULL;
    }
    if (cf_py_dtype_from_dl(t->dtype.code, t->dtype.bits, t->dtype.lanes, &v.dtype, argname) < 0)
        return NULL;
    itemsize = cf_dtype_size(v.dtype);
    v.ndim = t->ndim;
    v.device = t->device.device_id;
    v.data = (uint64_t)(uintptr_t)t->data + t->byte_offset;
    for (i = 0; i < v.ndim; i++) {
        if (t->shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative extent %lld", argname,
                         (long long)t->shape[i]);
            return NULL;
        }
        v.shape[i] = t->shape[i];
    }
    if (cf_py_check_nbytes(v.ndim, v.shape, itemsize, argname) < 0)
        return NULL;
    if (t->strides == NULL) {
        int64_t acc = (int64_t)itemsize;
        for (i = v.ndim - 1; i >= 0; i--) {
            v.strides[i] = acc;
            acc *= v.shape[i] > 0 ? v.shape[i] : 1;
        }
    } else {
        for (i = 0; i < v.ndim; i++)
            v.strides[i] = t->strides[i] * (int64_t)itemsize;
    }
    owner = cf_py_memory_dlpack(versioned, v.data, v.device, consumer);
    if (owner == NULL)
        return NULL;
    if (PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor") < 0) {
        Py_DECREF(owner);
        return NULL;
    }
    owner->managed = managed;
    r = cf_py_devicearray_wrap(&v, (PyObject *)owner, NULL, readonly);
    Py_DECREF(owner); /* on failure this calls the deleter */
    return r;
}

/* A capsule's destructor for a tensor from the exchange API (exchanged, below): the producer's
 * deleter unless the capsule was consumed. */
static void exchanged_capsule_free(PyObject *cap)
{
    /* the deleter may be Python code (a ctypes callback): not with an exception pending */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m && m->deleter)
            m->deleter(m);
    }
    PyErr_Restore(type, value, tb);
}

/* A tensor taken through its library's DLPack C exchange API (cf_py_exchange_take): the
 * consumer's stream (`stream`'s, else the legacy default stream of the tensor's device) waits on
 * the device for the producer's current stream `producer` (what __dlpack__(stream=) would have
 * the producer do, across devices if need be), then the tensor is imported as a capsule's is. */
static PyObject *exchanged(DLManagedTensorVersioned *m, uintptr_t producer, PyObject *stream,
                           const char *argname)
{
    PyObject *cap = PyCapsule_New(m, "dltensor_versioned", exchanged_capsule_free);
    if (cap == NULL) {
        if (m->deleter)
            m->deleter(m);
        return NULL;
    }
    PyObject *consumer_obj = stream != NULL && CfPyStream_Check(stream) ? stream : NULL;
    if (m->dl_tensor.device.device_type == kDLCUDA) {
        int device = m->dl_tensor.device.device_id;
        uintptr_t consumer = consumer_obj ? cf_py_stream_protocol_handle(consumer_obj) : 1;
        cf_stream *cs = NULL, *ps = NULL;
        PyObject *res = cf_py_cuda_init("from_dlpack") < 0
                            ? NULL
                            : cf_py_stream_resolve(consumer_obj ? consumer_obj : Py_None, device,
                                                   "from_dlpack: stream");
        int bad = res == NULL || cf_py_stream_get(res, device, &cs) < 0;
        Py_XDECREF(res); /* consumer_obj, when given, holds the Stream */
        if (!bad && producer != 0 && producer != consumer && !(producer <= 2 && consumer <= 2)) {
            cf_status st = cf_py_stream_wrap_any(device, producer, &ps);
            if (st == CF_OK)
                st = cf_stream_wait_stream(cs, ps);
            cf_stream_free(ps);
            cf_context_restore();
            bad = st != CF_OK && cf_py_fail(st, argname) < 0;
        }
        if (bad) {
            Py_DECREF(cap);
            return NULL;
        }
    }
    PyObject *r = consume_capsule(cap, consumer_obj, argname); /* refuses host memory */
    Py_DECREF(cap);
    return r;
}

PyObject *cf_py_from_dlpack(PyObject *obj, PyObject *stream)
{
    const char *argname = "from_dlpack: obj";
    PyObject *cap = NULL, *r, *meth, *kw = NULL, *dev, *empty = NULL;
    long long consumer = 1;
    PyObject *consumer_obj = NULL; /* the Stream named as consumer; NULL: the legacy default */

    if (cf_py_stream_check(stream, "from_dlpack: stream") < 0)
        return NULL;
    if (PyCapsule_CheckExact(obj)) {
        if (cf_py_cuda_init("from_dlpack") < 0)
            return NULL;
        return consume_capsule(obj, NULL, argname);
    }
    {
        /* a library with the DLPack C exchange API: its tensors on any device (PyTorch's
         * __dlpack__ refuses a tensor off its current device) */
        DLManagedTensorVersioned *m;
        uintptr_t producer;
        int took = cf_py_exchange_take(obj, &m, &producer);
        if (took < 0)
            return NULL;
        if (took == 0)
            return exchanged(m, producer, stream, argname);
    }
    meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (meth == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: %.200s does not support DLPack (no __dlpack__ method)",
                     argname, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    /* The device first: a host array is refused before anything touches the GPU. */
    dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (dev == NULL)
        goto fail;
    if (!PyTuple_Check(dev) || PyTuple_GET_SIZE(dev) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__() must return (type, id), got %R",
                     argname, dev);
        Py_DECREF(dev);
        goto fail;
    }
    {
        long type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0));
        Py_DECREF(dev);
        if (type == -1 && PyErr_Occurred())
            goto fail;
        if (type != kDLCUDA) {
            wrong_device((int)type, argname);
            goto fail;
        }
    }
    if (cf_py_cuda_init("from_dlpack") < 0)
        goto fail;
    if (stream != NULL && CfPyStream_Check(stream)) {
        consumer = (long long)cf_py_stream_protocol_handle(stream);
        consumer_obj = stream;
    }
    kw = Py_BuildValue("{s:L,s:(ii)}", "stream", consumer, "max_version", DLPACK_MAJOR_VERSION,
                       DLPACK_MINOR_VERSION);
    empty = PyTuple_New(0);
    if (kw == NULL || empty == NULL)
        goto fail;
    cap = PyObject_Call(meth, empty, kw);
    if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* A producer older than DLPack 1.0 does not take max_version. */
        PyErr_Clear();
        if (PyDict_DelItemString(kw, "max_version") < 0)
            goto fail;
        cap = PyObject_Call(meth, empty, kw);
    }
    if (cap == NULL)
        goto fail;
    if (!PyCapsule_CheckExact(cap)) {
        PyErr_Format(PyExc_TypeError, "%s: __dlpack__() returned %.200s, not a capsule", argname,
                     Py_TYPE(cap)->tp_name);
        goto fail;
    }
    r = consume_capsule(cap, consumer_obj, argname);
    Py_DECREF(cap);
    Py_DECREF(kw);
    Py_DECREF(empty);
    Py_DECREF(meth);
    return r;
fail:
    Py_XDECREF(cap);
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    Py_DECREF(meth);
    return NULL;
}

static PyObject *py_from_dlpack(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"obj", "stream", NULL};
    PyObject *obj, *stream = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:from_dlpack", kwlist, &obj, &stream))
        return NULL;
    return cf_py_from_dlpack(obj, stream);
}

PyMethodDef cf_py_dlpack_array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))cf_py_devicearray_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(stream=None, max_version=None, dl_device=None, copy=None) -> a DLPack capsule."},
    {"_order_for", (PyCFunction)cf_py_devicearray_order_for, METH_O,
     "_order_for(stream): make that stream (a DLPack stream handle) wait for the work pending on "
     "this array's memory, as __dlpack__(stream=) does, with no capsule."},
    {"__dlpack_device__", (PyCFunction)cf_py_devicearray_dlpack_device, METH_NOARGS,
     "(2, device_id): kDLCUDA."},
    {NULL, NULL, 0, NULL},
};

PyMethodDef cf_py_dlpack_methods[] = {
    {"from_dlpack", (PyCFunction)(void (*)(void))py_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "from_dlpack($module, /, obj, stream=0)\n"
     "--\n"
     "\n"
     "View CUDA memory exported through DLPack as a device array, without a copy.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "obj : object\n"
     "    An object with ``__dlpack__`` (a PyTorch tensor, a CuPy or JAX array) or a DLPack capsule.\n"
     "stream : Stream or int, optional\n"
     "    The stream that will use the array: the producer orders its pending work before it.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    A view that keeps the producer's memory alive.\n"},
    {NULL, NULL, 0, NULL},
};

/* ---- the DLPack C exchange API (type.__dlpack_c_exchange_api__: PyTorch >= 2.10) ----------- */

int cf_py_exchange_off;

/* The DLPack C exchange API a type publishes (type.__dlpack_c_exchange_api__, a capsule named
 * "dlpack_exchange_api"), at the major version cufunc speaks (a newer table may chain to older
 * ones through prev_api) and with the functions cufunc calls; NULL (no error) otherwise. The
 * table lives as long as the process (the specification), not only the capsule. */
static const DLPackExchangeAPI *exchange_api_of(PyObject *type)
{
    PyObject *cap = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
    const DLPackExchangeAPIHeader *h = NULL;
    if (cap != NULL && PyCapsule_IsValid(cap, "dlpack_exchange_api"))
        h = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
    Py_XDECREF(cap);
    PyErr_Clear();
    for (int depth = 0; h != NULL && depth < 8; h = h->prev_api, depth++) {
        if (h->version.major != DLPACK_MAJOR_VERSION)
            continue;
        const DLPackExchangeAPI *api = (const DLPackExchangeAPI *)h;
        if (api->dltensor_from_py_object_no_sync && api->managed_tensor_to_py_object_no_sync &&
            api->current_work_stream)
            return api;
        return NULL;
    }
    return NULL;
}

/* The exchange API of type tp (cached per type: one dict lookup once seen), NULL for none. */
const DLPackExchangeAPI *cf_py_exchange_api_for(PyTypeObject *tp)
{
    static PyObject *apis; /* dict: type -> the table's address (an int), or None */
    if (apis == NULL && (apis = PyDict_New()) == NULL)
        return NULL;
    PyObject *v = PyDict_GetItemWithError(apis, (PyObject *)tp);
    if (v == NULL) {
        if (PyErr_Occurred())
            return NULL;
        const DLPackExchangeAPI *api = exchange_api_of((PyObject *)tp);
        v = api ? PyLong_FromVoidPtr((void *)api) : Py_NewRef(Py_None);
        if (v == NULL || PyDict_SetItem(apis, (PyObject *)tp, v) < 0) {
            Py_XDECREF(v);
            return NULL;
        }
        Py_DECREF(v); /* the dict holds it (types are few) */
    }
    return v == Py_None ? NULL : (const DLPackExchangeAPI *)PyLong_AsVoidPtr(v);
}

int cf_py_exchange_take(PyObject *obj, struct DLManagedTensorVersioned **m, uintptr_t *stream)
{
    *m = NULL;
    *stream = 0;
    if (cf_py_exchange_off || PyType_Check(obj) || PyCapsule_CheckExact(obj))
        return 1;
    const DLPackExchangeAPI *api = cf_py_exchange_api_for(Py_TYPE(obj));
    if (api == NULL || api->managed_tensor_from_py_object_no_sync == NULL)
        return PyErr_Occurred() ? -1 : 1;
    /* what PyTorch's __dlpack__ refuses, its C export may not: a tensor that requires grad, or
     * whose conjugation or negation is a lazy bit (its memory holds other values): __dlpack__
     * answers, in PyTorch's words */
    static PyObject *S_requires_grad, *S_is_conj, *S_is_neg;
    if (S_is_neg == NULL &&
        ((S_requires_grad = PyUnicode_InternFromString("requires_grad")) == NULL ||
         (S_is_conj = PyUnicode_InternFromString("is_conj")) == NULL ||
         (S_is_neg = PyUnicode_InternFromString("is_neg")) == NULL))
        return -1;
    PyObject *grad = PyObject_GetAttr(obj, S_requires_grad);
    int lazy = grad == Py_True;
    Py_XDECREF(grad);
    PyErr_Clear();
    PyObject *bits[] = {S_is_conj, S_is_neg};
    for (int i = 0; i < 2 && !lazy; i++) {
        PyObject *v = PyObject_HasAttr(obj, bits[i]) ? PyObject_CallMethodNoArgs(obj, bits[i]) : NULL;
        lazy = v == Py_True;
        Py_XDECREF(v);
        PyErr_Clear();
    }
    if (lazy)
        return 1;
    DLManagedTensorVersioned *t = NULL;
    if (api->managed_tensor_from_py_object_no_sync(obj, &t) != 0 || t == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_BufferError, "%.200s: its DLPack C exchange API gave no tensor",
                         Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (t->dl_tensor.device.device_type == kDLCUDA) {
        void *s = NULL;
        if (api->current_work_stream(kDLCUDA, t->dl_tensor.device.device_id, &s) != 0) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            if (t->deleter)
                t->deleter(t);
            PyErr_Restore(type, value, tb);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "the producer's current stream is unknown");
            return -1;
        }
        *stream = s ? (uintptr_t)s : 1; /* NULL: the default stream, the legacy one */
    }
    *m = t;
    return 0;
}

int cf_py_exchange_stream(PyObject *obj, int device, uintptr_t *stream)
{
    if (cf_py_exchange_off || PyArray_Check(obj))
        return 1;
    const DLPackExchangeAPI *api = cf_py_exchange_api_for(Py_TYPE(obj));
    if (api == NULL)
        return PyErr_Occurred() ? -1 : 1;
    void *s = NULL;
    if (api->current_work_stream(kDLCUDA, device, &s) != 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the producer's current stream is unknown");
        return -1;
    }
    *stream = s ? (uintptr_t)s : 1;
    return 0;
}
