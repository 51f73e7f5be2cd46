/* py_foreign.c: device memory of other libraries read as a DeviceArray view, without a copy:
 * the CUDA Array Interface (parse_cai, the one parser of the interface; PyTorch tensors and CuPy
 * arrays through py_interop.c's fast readers), the producer's stream ordered before the call's
 * (CAI v3, the DLPack stream handshake), and cuda.as_cuda_array / is_cuda_array. */
#include "py_foreign.h"
#include "py_capturing.h"
#include "py_dlpack.h"
#include "py_interop.h"
#include "py_stream.h"

#include <string.h>

/* ---- foreign device memory: __cuda_array_interface__ ----------------------------------------- */

int cf_py_is_device_object(PyObject *obj)
{
    PyObject *cai;
    if (CfPyDeviceArray_Check(obj))
        return 1;
    /* NumPy arrays are host data, except subclasses that declare a device view: mapped and
     * managed arrays (cuda.mapped_array, managed_array), used in place, as Numba does. */
    if (PyArray_CheckExact(obj) || (PyArray_Check(obj) &&
                                    !PyObject_HasAttrString(obj, "__cuda_array_interface__")))
        return 0;
    cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
    if (cai == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(cai);
    return 1;
}

static int cai_int(PyObject *o, long long *out, const char *field, const char *argname)
{
    int overflow = 0;
    if (o == NULL || !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__['%s'] must be an int, got %R",
                     argname, field, o ? o : Py_None);
        return -1;
    }
    *out = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "%s: __cuda_array_interface__['%s'] is out of range: %R",
                     argname, field, o);
        return -1;
    }
    return 0;
}

/* Parse a CAI dict into a view (device left unset) without touching the GPU. */
static int parse_cai(PyObject *cai, cf_array *v, int *readonly, int *has_stream,
                     uintptr_t *stream, const char *argname)
{
    PyObject *shape, *typestr, *data, *strides, *mask, *st, *ptr_obj;
    PyArray_Descr *descr = NULL;
    unsigned long long ptr;
    Py_ssize_t i, n;
    long long x;

    /* The keys, interned once; and typestr -> dtype, remembered: NumPy's parse of a dtype
     * string costs about as much as the rest of a call's work on a foreign operand. */
    static PyObject *k_shape, *k_typestr, *k_data, *k_strides, *k_mask, *k_stream, *dtypes;
    if (dtypes == NULL) {
        if ((k_shape = PyUnicode_InternFromString("shape")) == NULL ||
            (k_typestr = PyUnicode_InternFromString("typestr")) == NULL ||
            (k_data = PyUnicode_InternFromString("data")) == NULL ||
            (k_strides = PyUnicode_InternFromString("strides")) == NULL ||
            (k_mask = PyUnicode_InternFromString("mask")) == NULL ||
            (k_stream = PyUnicode_InternFromString("stream")) == NULL ||
            (dtypes = PyDict_New()) == NULL)
            return -1;
    }
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__ must be a dict, got %.200s",
                     argname, Py_TYPE(cai)->tp_name);
        return -1;
    }
    shape = PyDict_GetItemWithError(cai, k_shape);
    typestr = shape ? PyDict_GetItemWithError(cai, k_typestr) : NULL;
    data = typestr ? PyDict_GetItemWithError(cai, k_data) : NULL;
    strides = data ? PyDict_GetItemWithError(cai, k_strides) : NULL;
    mask = data ? PyDict_GetItemWithError(cai, k_mask) : NULL;
    st = data ? PyDict_GetItemWithError(cai, k_stream) : NULL;
    if (PyErr_Occurred())
        return -1;
    if (shape == NULL || !PyTuple_Check(shape)) {
        PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__['shape'] must be a tuple",
                     argname);
        return -1;
    }
    if (typestr == NULL || !PyUnicode_Check(typestr)) {
        PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__['typestr'] must be a str",
                     argname);
        return -1;
    }
    if (data == NULL || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%s: __cuda_array_interface__['data'] must be a (pointer, readonly) tuple",
                     argname);
        return -1;
    }
    if (mask != NULL && mask != Py_None) {
        PyErr_Format(PyExc_NotImplementedError,
                     "%s: masked arrays (__cuda_array_interface__['mask']) are not supported",
                     argname);
        return -1;
    }
    PyObject *known = PyDict_GetItemWithError(dtypes, typestr);
    if (known != NULL) {
        v->dtype = (cf_dtype)PyLong_AsLong(known);
    } else {
        if (PyErr_Occurred() || cf_py_dtype_from_object(typestr, &v->dtype, &descr, argname) < 0)
            return -1;
        Py_DECREF(descr);
        PyObject *code = PyLong_FromLong((long)v->dtype);
        int bad = code == NULL || (PyDict_GET_SIZE(dtypes) < 256 &&
                                   PyDict_SetItem(dtypes, typestr, code) < 0);
        Py_XDECREF(code);
        if (bad)
            return -1;
    }
    n = PyTuple_GET_SIZE(shape);
    if (n > CF_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd dimensions, more than the %d supported", argname,
                     n, CF_MAX_DIMS);
        return -1;
    }
    v->ndim = (int)n;
    for (i = 0; i < n; i++) {
        if (cai_int(PyTuple_GET_ITEM(shape, i), &x, "shape", argname) < 0)
            return -1;
        if (x < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative extent %lld in __cuda_array_interface__",
                         argname, x);
            return -1;
        }
        v->shape[i] = x;
    }
    if (cf_py_check_nbytes(v->ndim, v->shape, cf_dtype_size(v->dtype), argname) < 0)
        return -1;
    if (strides == NULL || strides == Py_None) {
        int64_t acc = (int64_t)cf_dtype_size(v->dtype);
        for (i = n - 1; i >= 0; i--) {
            v->strides[i] = acc;
            acc *= v->shape[i] > 0 ? v->shape[i] : 1;
        }
    } else {
        if (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != n) {
            PyErr_Format(PyExc_TypeError,
                         "%s: __cuda_array_interface__['strides'] must be None or a tuple of %zd "
                         "ints",
                         argname, n);
            return -1;
        }
        for (i = 0; i < n; i++) {
            if (cai_int(PyTuple_GET_ITEM(strides, i), &x, "strides", argname) < 0)
                return -1;
            v->strides[i] = x;
        }
    }
    ptr_obj = PyTuple_GET_ITEM(data, 0);
    if (ptr_obj == Py_None) {
        ptr = 0;
    } else {
        if (!PyLong_Check(ptr_obj)) {
            PyErr_Format(PyExc_TypeError, "%s: the data pointer must be an int, got %R", argname,
                         ptr_obj);
            return -1;
        }
        ptr = PyLong_AsUnsignedLongLong(ptr_obj);
        if (ptr == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
    }
    v->data = (uint64_t)ptr;
    *readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (*readonly < 0)
        return -1;
    *has_stream = 0;
    if (st != NULL && st != Py_None) {
        if (cai_int(st, &x, "stream", argname) < 0)
            return -1;
        if (x == 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: __cuda_array_interface__['stream'] is 0, which the interface "
                         "(version 3) forbids as ambiguous",
                         argname);
            return -1;
        }
        *has_stream = 1;
        *stream = (uintptr_t)x;
    }
    return 0;
}

/* Ask the producer of a foreign array whose interface names no stream to order its pending work
 * before the legacy default stream's, through the DLPack stream handshake: obj.__dlpack__(stream=1)
 * makes the legacy default stream wait for the producer's current stream; the capsule is then
 * dropped unused. PyTorch is the case in point: its __cuda_array_interface__ never names a
 * stream, so a tensor made on a side stream (`with torch.cuda.stream(s): x = ...`) would be read
 * before the side stream's kernels ran. The legacy default stream is the right one to name: a call
 * that runs there, or on a blocking stream (cuda.stream(), the per-thread default stream), is
 * ordered after it by CUDA, and a call on any other stream is made to wait for it
 * (cf_py_order_operand). Objects without __dlpack__ have nothing more to say (no stream: ready). */
static int legacy_waits(int device, uintptr_t stream, const char *argname);

static int handshake_legacy(PyObject *obj, int device, const char *argname)
{
    PyObject *meth, *kw, *empty, *cap;
    if (PyArray_Check(obj))
        return 0; /* mapped or managed host arrays (cuda.mapped_array): no producer stream */
    /* a library with the DLPack C exchange API names its current stream on the data's device
     * itself: no export (PyTorch's __dlpack__ refuses a tensor off its current device) */
    uintptr_t producer;
    int r = cf_py_exchange_stream(obj, device, &producer);
    if (r <= 0)
        return r < 0 ? -1 : legacy_waits(device, producer, argname);
    meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (meth == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    kw = Py_BuildValue("{s:i}", "stream", 1);
    empty = PyTuple_New(0);
    cap = (kw && empty) ? PyObject_Call(meth, empty, kw) : NULL;
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    Py_DECREF(meth);
    if (cap == NULL) {
        /* A producer whose __dlpack__ takes no stream cannot be asked; it promises nothing, as its
         * interface does not. Any other failure is the caller's to see. */
        if (!PyErr_ExceptionMatches(PyExc_TypeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(cap); /* unconsumed: its destructor releases the producer's tensor */
    (void)argname;
    return 0;
}

/* Host memory mapped into the device (cuda.mapped / mapped_array) has no device of its own: it
 * is used on the current device, at the address the driver maps it to (with unified addressing,
 * the host address itself). 0 when ptr is such memory. */
static int mapped_host_device(uint64_t ptr, int *device)
{
    uint64_t d = 0;
    if (cf_host_device_pointer((void *)(uintptr_t)ptr, &d) != CF_OK || d != ptr)
        return -1;
    return cf_device_get(device) == CF_OK ? 0 : -1;
}

/* The legacy default stream of `device` waits (on the device) for a producer's stream (protocol
 * handle): nothing for the legacy stream itself (1) or the per-thread default stream (2, which
 * CUDA orders with it). */
static int legacy_waits(int device, uintptr_t stream, const char *argname)
{
    if (stream == 1 || stream == 2)
        return 0;
    cf_stream *legacy, *s = NULL;
    int capturing = 0;
    if (cf_py_stream_get(NULL, device, &legacy) < 0)
        return -1;
    /* CuPy names its current device's stream, which may be another device's than the data's:
     * waited for across devices. A stream capturing a graph (inside torch.cuda.graph, CuPy's
     * begin_capture) is not waited for: the call is captured on it instead
     * (cf_py_capture_default). */
    cf_status st = cf_py_stream_wrap_any(device, stream, &s);
    if (st == CF_OK && cf_py_capture_note_foreign(s, &capturing) < 0) {
        cf_stream_free(s);
        return -1;
    }
    if (st == CF_OK && !capturing)
        st = cf_stream_wait_stream(legacy, s);
    cf_stream_free(s);
    return st == CF_OK ? 0 : cf_py_fail(st, argname);
}

static int device_view_ex(PyObject *obj, cf_array *out, PyObject **keepalive, int sync,
                          const char *argname, int *readonly)
{
    PyObject *cai;
    int has_stream, device = 0;
    uintptr_t stream = 0;
    cf_status st;

    if (CfPyDeviceArray_Check(obj)) {
        CfPyDeviceArray *a = (CfPyDeviceArray *)obj;
        cf_py_view_copy(out, &a->view);
        *readonly = a->readonly;
        Py_INCREF(obj);
        *keepalive = obj;
        return 0;
    }
    int optional = sync & CF_PY_VIEW_OPTIONAL;
    sync &= ~CF_PY_VIEW_OPTIONAL;
    int got = cf_py_foreign_read(obj, out, readonly, &has_stream, &stream, &cai, argname);
    if (got < 0) {
        if (optional) { /* not a device object, as cf_py_is_device_object would say */
            PyErr_Clear();
            return 1;
        }
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s: %.200s is not a device array (it has no __cuda_array_interface__)",
                     argname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (got == 1) { /* no reader of its own: the interface, parsed */
        int bad = parse_cai(cai, out, readonly, &has_stream, &stream, argname) < 0;
        Py_DECREF(cai);
        if (bad)
            return -1;
        out->device = -1;
    }
    if (cf_py_cuda_init(argname) < 0)
        return -1;
    if (out->device >= 0 && out->data != 0) {
        device = out->device; /* the library named it (py_interop.c): no pointer query */
    } else if (cf_array_size(out) == 0 && out->data == 0) {
        if (cf_py_current_device(&device, argname) < 0)
            return -1;
    } else {
        st = cf_pointer_device(out->data, &device);
        if (st != CF_OK && mapped_host_device(out->data, &device) == 0)
            st = CF_OK;
        if (st != CF_OK) {
            PyErr_Format(PyExc_ValueError,
                         "%s: pointer 0x%llx of %.200s is not device memory known to the CUDA "
                         "driver (%s)",
                         argname, (unsigned long long)out->data, Py_TYPE(obj)->tp_name,
                         cf_last_error());
            return -1;
        }
    }
    out->device = device;
    if (sync == CF_PY_VIEW_ORDER && has_stream) {
        /* A call's operand: CAI v3's promise kept on the device, not the host. The call takes
         * foreign memory as pending on the legacy default stream (cf_py_order_operand), so that
         * stream only has to wait for the producer's: nothing for the legacy stream itself (1)
         * or the per-thread default stream (2, which CUDA orders with it), an event wait for any
         * other. A host synchronisation per operand (CuPy names its current stream in every
         * interface) would stall every call on CuPy arrays until the GPU drained. */
        if (legacy_waits(device, stream, argname) < 0)
            return -1;
    } else if (sync && has_stream) {
        /* CAI v3: the consumer synchronises on the producer's stream before using the data. */
        cf_stream *s = NULL;
        st = cf_py_stream_wrap_any(device, stream, &s); /* the stream's own device (above) */
        if (st == CF_OK) {
            Py_BEGIN_ALLOW_THREADS
            st = cf_stream_synchronize(s);
            Py_END_ALLOW_THREADS
        }
        cf_stream_free(s);
        if (st != CF_OK)
            return cf_py_fail(st, argname);
    } else if (sync && handshake_legacy(obj, device, argname) < 0) {
        return -1;
    }
    Py_INCREF(obj);
    *keepalive = obj;
    return 0;
}

int cf_py_device_view(PyObject *obj, cf_array *out, PyObject **keepalive, int sync,
                      const char *argname)
{
    int readonly;
    return device_view_ex(obj, out, keepalive, sync, argname, &readonly);
}

PyObject *cf_py_as_cuda_array(PyObject *obj, int sync, const char *argname)
{
    cf_array v;
    PyObject *keep, *r;
    int readonly = 0;
    if (CfPyDeviceArray_Check(obj)) {
        Py_INCREF(obj);
        return obj;
    }
    if (device_view_ex(obj, &v, &keep, sync, argname, &readonly) < 0)
        return NULL;
    r = cf_py_devicearray_wrap(&v, keep, NULL, readonly);
    Py_DECREF(keep);
    return r;
}

static PyObject *py_as_cuda_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"obj", "sync", NULL};
    PyObject *obj;
    int sync = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:as_cuda_array", kwlist, &obj, &sync))
        return NULL;
    return cf_py_as_cuda_array(obj, sync, "as_cuda_array: obj");
}

static PyObject *py_is_cuda_array(PyObject *self, PyObject *obj)
{
    return PyBool_FromLong(cf_py_is_device_object(obj));
}

PyMethodDef cf_py_foreign_methods[] = {
    {"as_cuda_array", (PyCFunction)(void (*)(void))py_as_cuda_array, METH_VARARGS | METH_KEYWORDS,
     "as_cuda_array($module, /, obj, sync=True)\n"
     "--\n"
     "\n"
     "View an object that exposes ``__cuda_array_interface__`` as a device array, without a copy.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "obj : object\n"
     "    A CuPy array, a PyTorch CUDA tensor, a Numba device array or any object with the CUDA\n"
     "    Array Interface.\n"
     "sync : bool, optional\n"
     "    Synchronise the stream the interface names before returning.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    A view of the same memory that keeps ``obj`` alive.\n"},
    {"is_cuda_array", py_is_cuda_array, METH_O,
     "is_cuda_array(obj) -> whether obj exposes __cuda_array_interface__."},
    {NULL, NULL, 0, NULL},
};
