/* py_device.c: the driver, devices, device memory accounting and pinned host arrays, from Python. */
#include "py_device.h"
#include "diagnostics.h"
#include "py_stream.h"

#include <string.h>

/* ---- driver and devices ---------------------------------------------------------------------- */

static PyObject *py_is_available(PyObject *self, PyObject *unused)
{
    return PyBool_FromLong(cf_is_available());
}

static PyObject *py_init(PyObject *self, PyObject *unused)
{
    if (cf_py_cuda_init("cufunc") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The reason CUDA cannot be used, or None: init's message without raising. */
static PyObject *py_unavailable_reason(PyObject *self, PyObject *unused)
{
    int count = 0;
    cf_status st = cf_init();
    if (st == CF_OK)
        st = cf_device_count(&count);
    if (st != CF_OK)
        return PyUnicode_FromString(cf_last_error()[0] ? cf_last_error() : cf_status_name(st));
    if (count == 0)
        return PyUnicode_FromString("the CUDA driver loaded but reports no device");
    Py_RETURN_NONE;
}

static PyObject *py_driver_version(PyObject *self, PyObject *unused)
{
    int v = 0;
    cf_status st;
    if (cf_py_cuda_init("driver_version") < 0)
        return NULL;
    st = cf_driver_version(&v);
    if (st != CF_OK)
        return cf_py_raise(st, "driver_version");
    return PyLong_FromLong(v);
}

static PyObject *py_driver_path(PyObject *self, PyObject *unused)
{
    const char *p = cf_driver_path();
    return PyUnicode_DecodeFSDefault(p ? p : "");
}

static PyObject *py_device_count(PyObject *self, PyObject *unused)
{
    int n = 0;
    cf_status st;
    if (cf_py_cuda_init("device_count") < 0)
        return NULL;
    st = cf_device_count(&n);
    if (st != CF_OK)
        return cf_py_raise(st, "device_count");
    return PyLong_FromLong(n);
}

static int parse_device_arg(PyObject *arg, int *device, const char *what)
{
    long v;
    if (arg == NULL || arg == Py_None)
        return cf_py_current_device(device, what);
    if (PyBool_Check(arg) || !PyIndex_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s: device must be an int ordinal, got %.200s", what,
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: device ordinal %ld is negative or too large", what, v);
        return -1;
    }
    *device = (int)v;
    return cf_py_cuda_init(what);
}

static PyObject *py_device_props(PyObject *self, PyObject *arg)
{
    cf_device_props p;
    int device;
    cf_status st;
    if (parse_device_arg(arg, &device, "device_props") < 0)
        return NULL;
    st = cf_device_props_get(device, &p);
    if (st != CF_OK)
        return cf_py_raise(st, "device_props");
    return Py_BuildValue(
        "{s:s,s:i,s:(ii),s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:K,s:s}",
        "name", p.name, "id", p.ordinal, "compute_capability", p.cc_major, p.cc_minor,
        "MULTIPROCESSOR_COUNT", p.multiprocessor_count, "MAX_THREADS_PER_BLOCK",
        p.max_threads_per_block, "MAX_THREADS_PER_MULTI_PROCESSOR",
        p.max_threads_per_multiprocessor, "WARP_SIZE", p.warp_size, "L2_CACHE_SIZE",
        p.l2_cache_bytes, "MAX_SHARED_MEMORY_PER_BLOCK", p.max_shared_per_block,
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", p.max_shared_per_block_optin, "PCI_BUS_ID",
        p.pci_bus_id, "PCI_DEVICE_ID", p.pci_device_id, "PCI_DOMAIN_ID", p.pci_domain_id,
        "MEMORY_POOLS_SUPPORTED", p.memory_pools_supported, "total_memory",
        (unsigned long long)p.total_memory, "uuid", p.uuid);
}

static PyObject *py_get_device(PyObject *self, PyObject *unused)
{
    int device;
    if (cf_py_current_device(&device, "get_device") < 0)
        return NULL;
    return PyLong_FromLong(device);
}

static PyObject *py_set_device(PyObject *self, PyObject *arg)
{
    int device;
    cf_status st;
    if (arg == Py_None) {
        PyErr_SetString(PyExc_TypeError, "set_device: device must be an int ordinal, not None");
        return NULL;
    }
    if (parse_device_arg(arg, &device, "set_device") < 0)
        return NULL;
    st = cf_device_set(device);
    if (st != CF_OK)
        return cf_py_raise(st, "select_device");
    Py_RETURN_NONE;
}

static PyObject *py_device_synchronize(PyObject *self, PyObject *args)
{
    PyObject *arg = Py_None;
    int device;
    cf_status st;
    if (!PyArg_ParseTuple(args, "|O:device_synchronize", &arg))
        return NULL;
    if (parse_device_arg(arg, &device, "synchronize") < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cf_device_synchronize(device);
    Py_END_ALLOW_THREADS
    if (st != CF_OK)
        return cf_py_raise(st, "synchronize");
    Py_RETURN_NONE;
}

static PyObject *py_mem_info(PyObject *self, PyObject *args)
{
    PyObject *arg = Py_None;
    int device;
    size_t free_b = 0, total_b = 0;
    cf_status st;
    if (!PyArg_ParseTuple(args, "|O:mem_info", &arg))
        return NULL;
    if (parse_device_arg(arg, &device, "mem_info") < 0)
        return NULL;
    st = cf_device_mem_info(device, &free_b, &total_b);
    if (st != CF_OK)
        return cf_py_raise(st, "mem_info");
    return Py_BuildValue("(KK)", (unsigned long long)free_b, (unsigned long long)total_b);
}

static PyObject *py_pointer_device(PyObject *self, PyObject *arg)
{
    unsigned long long ptr;
    int device;
    cf_status st;
    ptr = PyLong_AsUnsignedLongLong(arg);
    if (ptr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (cf_py_cuda_init("pointer_device") < 0)
        return NULL;
    st = cf_pointer_device((uint64_t)ptr, &device);
    if (st != CF_OK)
        return cf_py_raise(st, "pointer_device");
    return PyLong_FromLong(device);
}

static PyObject *py_mem_trim(PyObject *self, PyObject *args)
{
    PyObject *arg = Py_None;
    int device;
    cf_status st;
    if (!PyArg_ParseTuple(args, "|O:mem_trim", &arg) || parse_device_arg(arg, &device, "mem_trim") < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    st = cf_mem_trim(device);
    cf_context_restore(); /* another device's trim leaves the current one as it was */
    Py_END_ALLOW_THREADS
    if (st != CF_OK)
        return cf_py_raise(st, "mem_trim");
    Py_RETURN_NONE;
}

static PyObject *py_mem_outstanding(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong((long long)cf_mem_outstanding());
}

/* ---- pinned host memory ---------------------------------------------------------------------- */

/* Owns one cf_host_alloc_pinned block; the NumPy array over it holds this object as its base, so
 * the block is freed when the last array viewing it dies. */
typedef struct {
    PyObject_HEAD
    void *ptr;
    size_t nbytes;
    int managed; /* cuMemAllocManaged memory (cf_mem_free), else cuMemHostAlloc (cf_host_free_pinned) */
    int device;  /* of managed memory */
} PinnedBuffer;

static void pinned_dealloc(PinnedBuffer *self)
{
    if (self->managed) {
        cf_stream *s;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        /* cuMemFree of managed memory waits for the device: no kernel still reads it. */
        if (self->ptr != NULL && cf_py_stream_get(NULL, self->device, &s) == 0)
            cf_mem_free(s, (uint64_t)(uintptr_t)self->ptr);
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
    } else {
        cf_host_free_pinned(self->ptr);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *pinned_repr(PinnedBuffer *self)
{
    return PyUnicode_FromFormat("<cufunc pinned host buffer %zu bytes at %p>", self->nbytes,
                                self->ptr);
}

static PyTypeObject PinnedBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.PinnedBuffer",
    .tp_basicsize = sizeof(PinnedBuffer),
    .tp_dealloc = (destructor)pinned_dealloc,
    .tp_repr = (reprfunc)pinned_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Page-locked host memory owned by a pinned_array.",
};

/* What pinned_array and special_array take alike: shape, dtype and order (argnames[0..2] name
 * them in errors), and the block size they need. Needs the GPU's driver (cf_py_cuda_init). */
typedef struct {
    int ndim;
    npy_intp dims[CF_MAX_DIMS];
    PyArray_Descr *descr; /* owned until host_array_wrap */
    char order;
    size_t nbytes;
} host_array_spec;

static int host_array_parse(PyObject *shape_obj, PyObject *dtype_obj, PyObject *order_obj,
                            const char *const argnames[3], const char *what, host_array_spec *h)
{
    int64_t shape[CF_MAX_DIMS];
    cf_dtype dt;
    h->descr = NULL;
    if (cf_py_parse_shape(shape_obj, &h->ndim, shape, argnames[0]) < 0 ||
        cf_py_parse_order(order_obj, &h->order, argnames[2]) < 0 ||
        cf_py_dtype_from_object(dtype_obj, &dt, &h->descr, argnames[1]) < 0)
        return -1;
    if (cf_py_check_nbytes(h->ndim, shape, cf_dtype_size(dt), argnames[0]) < 0 ||
        cf_py_cuda_init(what) < 0) {
        Py_CLEAR(h->descr);
        return -1;
    }
    h->nbytes = cf_dtype_size(dt);
    for (int i = 0; i < h->ndim; i++) {
        h->nbytes *= (size_t)shape[i];
        h->dims[i] = (npy_intp)shape[i];
    }
    return 0;
}

/* A PinnedBuffer for the spec's block (ptr still NULL), or NULL with the spec's descr released. */
static PinnedBuffer *host_array_buffer(host_array_spec *h, int managed, int device)
{
    PinnedBuffer *buf = PyObject_New(PinnedBuffer, &PinnedBuffer_Type);
    if (buf == NULL) {
        Py_CLEAR(h->descr);
        return NULL;
    }
    buf->ptr = NULL;
    buf->nbytes = h->nbytes;
    buf->managed = managed;
    buf->device = device;
    return buf;
}

/* The NumPy array over buf's block, buf its base. Takes the spec's descr and buf, also on failure
 * (a buffer whose block failed to allocate, st not CF_OK, is raised as `what`'s error). */
static PyObject *host_array_wrap(host_array_spec *h, PinnedBuffer *buf, cf_status st,
                                 const char *what)
{
    if (st != CF_OK) {
        cf_py_raise(st, what);
        Py_CLEAR(h->descr);
        Py_DECREF(buf);
        return NULL;
    }
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, h->descr, h->ndim, h->dims, NULL, buf->ptr,
                                         h->order == 'F' ? NPY_ARRAY_FARRAY : NPY_ARRAY_CARRAY,
                                         NULL);
    h->descr = NULL; /* stolen */
    if (arr == NULL) {
        Py_DECREF(buf);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)buf) < 0) {
        Py_DECREF(arr);
        return NULL; /* SetBaseObject stole buf */
    }
    return arr;
}

static PyObject *py_pinned_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "dtype", "order", NULL};
    static const char *const names[3] = {"pinned_array: shape", "pinned_array: dtype",
                                         "pinned_array: order"};
    PyObject *shape_obj, *dtype_obj = Py_None, *order_obj = Py_None;
    host_array_spec h;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:pinned_array", kwlist, &shape_obj,
                                     &dtype_obj, &order_obj) ||
        host_array_parse(shape_obj, dtype_obj, order_obj, names, "pinned_array", &h) < 0)
        return NULL;
    PinnedBuffer *buf = host_array_buffer(&h, 0, 0);
    if (buf == NULL)
        return NULL;
    /* One byte for empty arrays, so that every pinned_array has a real (freeable) block. */
    cf_status st = cf_host_alloc_pinned(h.nbytes ? h.nbytes : 1, &buf->ptr);
    return host_array_wrap(&h, buf, st, "pinned_array");
}

/* special_array(kind, shape, dtype, order, attach_global) -> (ndarray, device pointer of its first
 * byte): kind 'mapped' (cuMemHostAlloc DEVICEMAP: host memory the device reads and writes in
 * place) or 'managed' (cuMemAllocManaged on the current device, refused up front when larger than
 * the device's free memory). cuda.mapped_array / managed_array wrap the result in their NumPy
 * subclasses. */
static PyObject *py_special_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"kind", "shape", "dtype", "order", "attach_global", NULL};
    static const char *const names[3] = {"shape", "dtype", "order"};
    const char *kind;
    PyObject *shape_obj, *dtype_obj = Py_None, *order_obj = Py_None;
    int attach_global = 1, device = 0;
    uint64_t dptr = 0;
    host_array_spec h;
    cf_status st;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO|OOp:special_array", kwlist, &kind,
                                     &shape_obj, &dtype_obj, &order_obj, &attach_global))
        return NULL;
    int managed = strcmp(kind, "managed") == 0;
    if (!managed && strcmp(kind, "mapped") != 0) {
        PyErr_Format(PyExc_ValueError, "special_array: kind must be 'mapped' or 'managed'");
        return NULL;
    }
    const char *what = managed ? "managed_array" : "mapped_array";
    if (host_array_parse(shape_obj, dtype_obj, order_obj, names, what, &h) < 0)
        return NULL;
    if (cf_py_current_device(&device, "managed_array") < 0) {
        Py_CLEAR(h.descr);
        return NULL;
    }
    PinnedBuffer *buf = host_array_buffer(&h, managed, device);
    if (buf == NULL)
        return NULL;
    if (managed) {
        st = cf_mem_alloc_managed(device, h.nbytes ? h.nbytes : 1, attach_global, &dptr);
        buf->ptr = (void *)(uintptr_t)dptr;
    } else {
        st = cf_host_alloc_mapped(h.nbytes, &buf->ptr, &dptr);
    }
    PyObject *arr = host_array_wrap(&h, buf, st, what);
    return arr ? Py_BuildValue("(NK)", arr, (unsigned long long)dptr) : NULL;
}

/* host_register(ptr, nbytes, mapped) -> whether this call registered the range (False when it was
 * page-locked already: then it must not be unregistered). */
static PyObject *py_host_register(PyObject *self, PyObject *args)
{
    unsigned long long ptr;
    Py_ssize_t nbytes;
    int mapped, registered = 0;
    cf_status st;
    if (!PyArg_ParseTuple(args, "Knp:host_register", &ptr, &nbytes, &mapped))
        return NULL;
    if (cf_py_cuda_init("pinned") < 0)
        return NULL;
    st = cf_host_register((void *)(uintptr_t)ptr, (size_t)nbytes, mapped, &registered);
    if (st != CF_OK)
        return cf_py_raise(st, mapped ? "mapped" : "pinned");
    return PyBool_FromLong(registered);
}

static PyObject *py_host_unregister(PyObject *self, PyObject *arg)
{
    unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
    cf_status st;
    if (ptr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    st = cf_host_unregister((void *)(uintptr_t)ptr);
    if (st != CF_OK)
        return cf_py_raise(st, "unregistering page-locked memory");
    Py_RETURN_NONE;
}

static PyObject *py_host_device_pointer(PyObject *self, PyObject *arg)
{
    unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
    uint64_t d = 0;
    cf_status st;
    if (ptr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    if (cf_py_cuda_init("mapped") < 0)
        return NULL;
    st = cf_host_device_pointer((void *)(uintptr_t)ptr, &d);
    if (st != CF_OK)
        return cf_py_raise(st, "mapped");
    return PyLong_FromUnsignedLongLong((unsigned long long)d);
}

static PyObject *py_host_is_pinned(PyObject *self, PyObject *arg)
{
    const void *ptr;
    if (PyArray_Check(arg)) {
        ptr = PyArray_DATA((PyArrayObject *)arg);
    } else {
        unsigned long long v = PyLong_AsUnsignedLongLong(arg);
        if (v == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
        ptr = (const void *)(uintptr_t)v;
    }
    return PyBool_FromLong(cf_host_is_pinned(ptr));
}

PyMethodDef cf_py_device_methods[] = {
    {"is_available", py_is_available, METH_NOARGS,
     "is_available() -> whether the CUDA driver loads and has at least one device."},
    {"init", py_init, METH_NOARGS, "init(): load the CUDA driver; CudaSupportError if it cannot."},
    {"unavailable_reason", py_unavailable_reason, METH_NOARGS,
     "unavailable_reason() -> why CUDA cannot be used (a str), or None when it can."},
    {"driver_version", py_driver_version, METH_NOARGS,
     "driver_version() -> the driver's CUDA version as an int (13000 for 13.0)."},
    {"driver_path", py_driver_path, METH_NOARGS,
     "driver_path() -> where libcuda was loaded from ('' if not loaded)."},
    {"device_count", py_device_count, METH_NOARGS, "device_count() -> number of CUDA devices."},
    {"device_props", py_device_props, METH_O,
     "device_props(ordinal) -> dict of the device's properties."},
    {"get_device", py_get_device, METH_NOARGS, "get_device() -> this thread's current device."},
    {"set_device", py_set_device, METH_O,
     "set_device(ordinal): make the device's primary context current on this thread."},
    {"device_synchronize", py_device_synchronize, METH_VARARGS,
     "device_synchronize(ordinal=None): wait for all work on the device (default: current)."},
    {"mem_info", py_mem_info, METH_VARARGS,
     "mem_info(ordinal=None) -> (free, total) bytes of device memory."},
    {"pointer_device", py_pointer_device, METH_O,
     "pointer_device(ptr) -> the ordinal of the device owning a device pointer."},
    {"mem_trim", py_mem_trim, METH_VARARGS,
     "mem_trim(device=None) -> None: hand the memory the device's pool keeps for reuse back to the "
     "driver (after the device's work), so other processes can have it."},
    {"mem_outstanding", py_mem_outstanding, METH_NOARGS,
     "mem_outstanding() -> bytes allocated from the device pools and not yet freed."},
    {"pinned_array", (PyCFunction)(void (*)(void))py_pinned_array, METH_VARARGS | METH_KEYWORDS,
     "pinned_array($module, /, shape, dtype='float64', order='C')\n"
     "--\n"
     "\n"
     "Allocate a NumPy array in page-locked host memory.\n"
     "\n"
     "Copies between it and the device are direct DMA, and asynchronous on a stream.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "shape : int or tuple of int\n"
     "    The shape.\n"
     "dtype : dtype_like, optional\n"
     "    The element type.\n"
     "order : {'C', 'F'}, optional\n"
     "    The memory layout.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "numpy.ndarray\n"
     "    The array (uninitialised).\n"},
    {"special_array", (PyCFunction)(void (*)(void))py_special_array, METH_VARARGS | METH_KEYWORDS,
     "special_array(kind, shape, dtype, order, attach_global) -> (ndarray, device pointer): "
     "mapped or managed memory (cuda.mapped_array / managed_array wrap it)."},
    {"host_register", py_host_register, METH_VARARGS,
     "host_register(ptr, nbytes, mapped) -> whether the range was page-locked by this call."},
    {"host_unregister", py_host_unregister, METH_O, "host_unregister(ptr)"},
    {"host_device_pointer", py_host_device_pointer, METH_O,
     "host_device_pointer(ptr) -> the device address of mapped page-locked host memory."},
    {"host_is_pinned", py_host_is_pinned, METH_O,
     "host_is_pinned(ndarray_or_address) -> whether the memory is page-locked."},
    {NULL, NULL, 0, NULL},
};

int cf_py_device_init_module(PyObject *m)
{
    if (PyType_Ready(&PinnedBuffer_Type) < 0)
        return -1;
    return 0;
}
