/* py_interop.c: foreign device arrays (CuPy, PyTorch, ...) in and out of a call, the hot parts in
 * C. Which types are whose is decided in Python (cufunc/_interop.py: reader_for, wrapper_for; the
 * answers cached here per type); this file reads a tensor's or a CuPy array's view from its
 * attributes without building its __cuda_array_interface__ (cf_py_foreign_read), and makes a
 * torch tensor or a CuPy array over a fresh result (_as_torch, _as_cupy). Every other object is
 * read through its interface by py_devicearray.c's parse_cai, the one parser of the interface.
 *
 * Why not the interface: CuPy's __cuda_array_interface__ builds a dict with dtype.descr (NumPy
 * Python code) and a stream query each time, PyTorch's is a Python property that names no stream
 * (so a call also needed the __dlpack__(stream=1) handshake, a Python method of 14-24 us). The
 * attributes read here are C-level getters of both libraries; the stream is the one each
 * interface (CuPy) or handshake (PyTorch) would name: the library's current stream. */
#include "py_interop.h"
#include "dlpack.h"
#include "py_devicearray.h"
#include "py_dlpack.h"
#include "py_hooks.h"

#include <string.h>

/* ---- the answers of cufunc/_interop.py, cached per type ---------------------------------------
 * Its functions and the output type setting are hooks the package registers (py_hooks.h):
 * interop_wrapper_for(type) fills `wrappers` on a new type, interop_reader_for(type) `readers`,
 * interop_output_type is a ContextVar (None or a code), interop_global_output_type the list
 * [the process-wide code]. */

static PyObject *wrappers; /* dict: an input's type -> the wrapper of its results, or None */
static PyObject *readers;  /* dict: an input's type -> its reader kind (READ_*) as an int */

enum { READ_NONE = 0, READ_TORCH = 1, READ_CUPY = 2 };

/* The dict *cache, made on first use (borrowed). */
static PyObject *type_cache(PyObject **cache)
{
    if (*cache == NULL)
        *cache = PyDict_New();
    return *cache;
}

/* ---- the caller's array type (the rule and the wrappers: cufunc/_interop.py) ------------------ */

/* Objects that never decide the result type: cufunc's own arrays, NumPy's, scalars. */
static inline int never_foreign(PyObject *o)
{
    return CfPyDeviceArray_Check(o) || PyArray_Check(o) || PyFloat_Check(o) || PyLong_Check(o) ||
           PyComplex_Check(o) || PyArray_IsScalar(o, Generic) || o == Py_None;
}

/* The wrapper of inputs of type tp (borrowed from the cache), Py_None for none; NULL: error. One
 * dict lookup once the type was seen. */
static PyObject *wrapper_of(PyTypeObject *tp)
{
    PyObject *cache = type_cache(&wrappers), *wrapper_for;
    if (cache == NULL)
        return NULL;
    PyObject *w = PyDict_GetItemWithError(cache, (PyObject *)tp);
    if (w != NULL || PyErr_Occurred())
        return w;
    if ((wrapper_for = cf_py_hook(CF_PY_HOOK_interop_wrapper_for)) == NULL ||
        (w = PyObject_CallOneArg(wrapper_for, (PyObject *)tp)) == NULL)
        return NULL;
    int r = PyDict_SetItem(cache, (PyObject *)tp, w);
    Py_DECREF(w); /* the cache holds it (types are few: one per foreign array class) */
    return r < 0 ? NULL : w;
}

int cf_py_result_wrapper(PyObject *const *inputs, int n, PyObject **wrapper)
{
    *wrapper = NULL;
    for (int i = 0; i < n; i++) {
        if (inputs[i] == NULL || never_foreign(inputs[i]))
            continue;
        PyObject *w = wrapper_of(Py_TYPE(inputs[i]));
        if (w == NULL)
            return -1;
        if (w == Py_None)
            continue;
        PyObject *var = cf_py_hook(CF_PY_HOOK_interop_output_type), *v;
        PyObject *global = var ? cf_py_hook(CF_PY_HOOK_interop_global_output_type) : NULL;
        if (global == NULL)
            return -1;
        if (!PyContextVar_CheckExact(var) || !PyList_Check(global) ||
            PyList_GET_SIZE(global) != 1) {
            PyErr_SetString(PyExc_SystemError, "cufunc._interop: unexpected output type state");
            return -1;
        }
        if (PyContextVar_Get(var, NULL, &v) < 0)
            return -1;
        long code = PyLong_AsLong(v == Py_None ? PyList_GET_ITEM(global, 0) : v);
        Py_DECREF(v);
        if (code == -1 && PyErr_Occurred())
            return -1;
        if (code == 0)
            *wrapper = w;
        return 0;
    }
    return 0;
}

/* ---- small helpers ---------------------------------------------------------------------------- */

static PyObject *S_dtype, *S_is_cuda, *S_requires_grad, *S_layout, *S_is_conj, *S_is_neg,
    *S_shape, *S_stride, *S_strides, *S_data_ptr, *S_get_device, *S_data, *S_ptr, *S_c_contig,
    *S_cai_version, *S_stream, *S_device_id;

static int names_load(void)
{
    if (S_stream != NULL)
        return 0;
#define NAME(v, s) if ((v = PyUnicode_InternFromString(s)) == NULL) return -1
    NAME(S_dtype, "dtype");
    NAME(S_is_cuda, "is_cuda");
    NAME(S_requires_grad, "requires_grad");
    NAME(S_layout, "layout");
    NAME(S_is_conj, "is_conj");
    NAME(S_is_neg, "is_neg");
    NAME(S_shape, "shape");
    NAME(S_stride, "stride");
    NAME(S_strides, "strides");
    NAME(S_data_ptr, "data_ptr");
    NAME(S_get_device, "get_device");
    NAME(S_data, "data");
    NAME(S_ptr, "ptr");
    NAME(S_c_contig, "_c_contiguous");
    NAME(S_cai_version, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION");
    NAME(S_stream, "stream");
    NAME(S_device_id, "device_id");
#undef NAME
    return 0;
}

static PyObject *call0(PyObject *obj, PyObject *name)
{
    return PyObject_VectorcallMethod(name, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* An attribute that must be True (want 1) or False (want 0): 1 when it is, 0 when not, -1. */
static int attr_is(PyObject *obj, PyObject *name, int want, int method)
{
    PyObject *v = method ? call0(obj, name) : PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int r = v == (want ? Py_True : Py_False);
    Py_DECREF(v);
    return r;
}

/* Fill n extents (or byte strides, each item times `mul`) from a tuple of ints. */
static int ints_from_tuple(PyObject *t, int64_t *out, int n, int64_t mul)
{
    for (int i = 0; i < n; i++) {
        long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
        if (x == -1 && PyErr_Occurred())
            return -1;
        out[i] = (int64_t)x * mul;
    }
    return 0;
}

/* The shape of obj's `shape` attribute (a tuple, torch.Size included) into v; 1: not usable. */
static int read_shape(PyObject *obj, cf_array *v, const char *argname)
{
    PyObject *shape = PyObject_GetAttr(obj, S_shape);
    if (shape == NULL)
        return -1;
    int r = 1;
    if (PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) <= CF_MAX_DIMS) {
        v->ndim = (int)PyTuple_GET_SIZE(shape);
        r = ints_from_tuple(shape, v->shape, v->ndim, 1);
        if (r == 0)
            r = cf_py_check_nbytes(v->ndim, v->shape, cf_dtype_size(v->dtype), argname);
    }
    Py_DECREF(shape);
    return r;
}

static int64_t view_size(const cf_array *v)
{
    int64_t n = 1;
    for (int k = 0; k < v->ndim; k++)
        n *= v->shape[k];
    return n;
}

/* ---- PyTorch ---------------------------------------------------------------------------------- */

static struct {
    PyObject *dtypes;  /* dict: torch.dtype -> cf_dtype (an int) */
    PyObject *strided; /* torch.strided */
    PyObject *raw;     /* torch._C._cuda_getCurrentRawStream, or NULL: no fast reader */
    /* torch.Tensor.__dlpack_c_exchange_api__ (PyTorch >= 2.10), or NULL: the attribute reads */
    const DLPackExchangeAPI *api;
} tr;

static int torch_load(void)
{
    static const struct { const char *name; cf_dtype dt; } T[] = {
        {"bool", CF_BOOL},       {"int8", CF_INT8},       {"int16", CF_INT16},
        {"int32", CF_INT32},     {"int64", CF_INT64},     {"uint8", CF_UINT8},
        {"uint16", CF_UINT16},   {"uint32", CF_UINT32},   {"uint64", CF_UINT64},
        {"float16", CF_FLOAT16}, {"float32", CF_FLOAT32}, {"float64", CF_FLOAT64},
        {"complex64", CF_COMPLEX64}, {"complex128", CF_COMPLEX128}, {"bfloat16", CF_BFLOAT16},
    };
    if (tr.dtypes != NULL)
        return 0;
    PyObject *mods = PyImport_GetModuleDict(); /* borrowed */
    PyObject *m = PyDict_GetItemString(mods, "torch");
    if (m == NULL)
        return 1;
    /* the raw stream query: absent from CPU-only builds, which have no CUDA tensors to read */
    PyObject *C = PyObject_GetAttrString(m, "_C");
    PyObject *raw = C ? PyObject_GetAttrString(C, "_cuda_getCurrentRawStream") : NULL;
    Py_XDECREF(C);
    PyErr_Clear();
    PyObject *strided = PyObject_GetAttrString(m, "strided");
    PyObject *dtypes = strided ? PyDict_New() : NULL;
    if (dtypes == NULL) {
        PyErr_Clear(); /* a PyTorch without these: the interface, as PyTorch gives it */
        Py_XDECREF(raw);
        Py_XDECREF(strided);
        return 1;
    }
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        PyObject *d = PyObject_GetAttrString(m, T[i].name);
        if (d == NULL) { /* an older PyTorch without uint32, say */
            PyErr_Clear();
            continue;
        }
        PyObject *code = PyLong_FromLong((long)T[i].dt);
        int bad = code == NULL || PyDict_SetItem(dtypes, d, code) < 0;
        Py_DECREF(d);
        Py_XDECREF(code);
        if (bad) {
            Py_DECREF(dtypes);
            Py_XDECREF(raw);
            Py_DECREF(strided);
            return -1;
        }
    }
    PyObject *tensor = PyObject_GetAttrString(m, "Tensor");
    tr.api = tensor ? cf_py_exchange_api_for((PyTypeObject *)tensor) : NULL;
    Py_XDECREF(tensor);
    PyErr_Clear();
    tr.raw = raw;
    tr.strided = strided;
    tr.dtypes = dtypes;
    return 0;
}

/* A tensor read through PyTorch's DLPack C exchange API: data, device, dtype, shape and strides
 * in one C call (PyTorch's own arrays, copied out before any other Python runs), the stream from
 * current_work_stream: the ten attribute reads of torch_read in two getters and two C calls.
 * 0: read; 3: not described here (requiring grad, negated or conjugated, not on a CUDA device, a
 * dtype cufunc lacks, or one PyTorch cannot describe: sparse): torch_read's attribute path decides,
 * in PyTorch's words. */
static int torch_read_api(PyObject *t, cf_array *v, int *readonly, int *has_stream,
                          uintptr_t *stream, int any_device, const char *argname)
{
    int ok = attr_is(t, S_requires_grad, 0, 0);
    if (ok > 0)
        ok = attr_is(t, S_is_neg, 0, 1);
    if (ok <= 0)
        return ok < 0 ? -1 : 3;
    DLTensor dl;
    if (tr.api->dltensor_from_py_object_no_sync(t, &dl) != 0) {
        PyErr_Clear();
        return 3;
    }
    int cuda = dl.device.device_type == kDLCUDA;
    if ((!cuda && !(any_device && dl.device.device_type == kDLCPU)) || dl.ndim < 0 ||
        dl.ndim > CF_MAX_DIMS ||
        cf_py_dtype_from_dl(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes, &v->dtype, NULL) < 0)
        return 3;
    int64_t item = (int64_t)cf_dtype_size(v->dtype), acc = item;
    v->ndim = dl.ndim;
    for (int k = dl.ndim - 1; k >= 0; k--) { /* DLPack counts strides in elements */
        v->shape[k] = dl.shape[k];
        v->strides[k] = dl.strides ? dl.strides[k] * item : acc;
        acc *= dl.shape[k] > 0 ? dl.shape[k] : 1;
    }
    v->data = view_size(v) > 0 ? (uint64_t)(uintptr_t)dl.data + dl.byte_offset : 0;
    v->device = cuda ? dl.device.device_id : -1;
    /* the conjugate bit is only ever set on complex tensors (a Python call: after the copy) */
    if (cf_dtype_kind(v->dtype) == 'c' && (ok = attr_is(t, S_is_conj, 0, 1)) <= 0)
        return ok < 0 ? -1 : 3;
    int r = cf_py_check_nbytes(v->ndim, v->shape, (size_t)item, argname);
    if (r != 0)
        return r;
    *readonly = 0;
    *has_stream = 0;
    if (!cuda)
        return 0;
    void *s = NULL;
    if (tr.api->current_work_stream(kDLCUDA, dl.device.device_id, &s) != 0)
        return -1;
    *stream = s ? (uintptr_t)s : 1; /* PyTorch's default stream is the legacy one: 1 */
    *has_stream = 1;
    return 0;
}

/* A tensor as PyTorch's __cuda_array_interface__ describes it, with the stream the DLPack
 * handshake would order after (PyTorch's current stream on the tensor's device). 0: read;
 * 1: not described here (CPU, sparse, requiring grad, lazily conjugated or negated, an unknown
 * dtype): PyTorch's own property answers, or raises, as before; 2: no interface (bfloat16 off
 * the fast path: DLPack carries it). `any_device` (tests): a CPU tensor is read as well, with no
 * stream. */
static int torch_read(PyObject *t, cf_array *v, int *readonly, int *has_stream, uintptr_t *stream,
                      int any_device, const char *argname)
{
    int r = torch_load();
    if (r != 0)
        return r;
    if (tr.api != NULL && !cf_py_exchange_off &&
        (r = torch_read_api(t, v, readonly, has_stream, stream, any_device, argname)) != 3)
        return r;
    PyObject *dt = PyObject_GetAttr(t, S_dtype);
    if (dt == NULL)
        return -1;
    PyObject *code = PyDict_GetItemWithError(tr.dtypes, dt);
    Py_DECREF(dt);
    if (code == NULL)
        return PyErr_Occurred() ? -1 : 1;
    v->dtype = (cf_dtype)PyLong_AsLong(code);
    v->device = -1;
    int cuda = attr_is(t, S_is_cuda, 1, 0);
    if (cuda < 0)
        return -1;
    int ok = (cuda && tr.raw != NULL) || any_device;
    if (ok && (ok = attr_is(t, S_requires_grad, 0, 0)) > 0) {
        PyObject *layout = PyObject_GetAttr(t, S_layout);
        if (layout == NULL)
            return -1;
        ok = layout == tr.strided;
        Py_DECREF(layout);
    }
    /* the conjugate bit is only ever set on complex tensors */
    if (ok > 0 && cf_dtype_kind(v->dtype) == 'c')
        ok = attr_is(t, S_is_conj, 0, 1);
    if (ok > 0)
        ok = attr_is(t, S_is_neg, 0, 1);
    if (ok <= 0)
        return ok < 0 ? -1 : v->dtype == CF_BFLOAT16 ? 2 : 1;
    if ((r = read_shape(t, v, argname)) != 0)
        return r;
    PyObject *st = call0(t, S_stride);
    if (st == NULL)
        return -1;
    r = PyTuple_Check(st) && PyTuple_GET_SIZE(st) == v->ndim
            ? ints_from_tuple(st, v->strides, v->ndim, (int64_t)cf_dtype_size(v->dtype))
            : 1;
    Py_DECREF(st);
    if (r != 0)
        return r;
    v->data = 0;
    if (view_size(v) > 0) { /* as PyTorch's interface: 0 for an empty tensor */
        PyObject *p = call0(t, S_data_ptr);
        if (p == NULL)
            return -1;
        v->data = (uint64_t)PyLong_AsUnsignedLongLong(p);
        Py_DECREF(p);
        if (PyErr_Occurred())
            return -1;
    }
    *readonly = 0;
    *has_stream = 0;
    if (!cuda || tr.raw == NULL)
        return 0;
    PyObject *dev = call0(t, S_get_device);
    PyObject *s = dev ? PyObject_CallOneArg(tr.raw, dev) : NULL;
    if (s != NULL) /* the tensor's device: no pointer query needed */
        v->device = (int)PyLong_AsLong(dev);
    Py_XDECREF(dev);
    if (s == NULL || PyErr_Occurred()) {
        Py_XDECREF(s);
        return -1;
    }
    *stream = (uintptr_t)PyLong_AsUnsignedLongLong(s);
    Py_DECREF(s);
    if (PyErr_Occurred())
        return -1;
    if (*stream == 0)
        *stream = 1; /* PyTorch's default stream is the legacy one: 1 in the interface */
    *has_stream = 1;
    return 0;
}

/* ---- CuPy ------------------------------------------------------------------------------------- */

typedef intptr_t (*cupy_stream_fn)(void);
typedef intptr_t (*cupy_default_fn)(int skip_dispatch);

static struct {
    int state;              /* 0 not loaded, 1 usable, -1 not usable (read the interface) */
    cupy_stream_fn current; /* cupy.cuda.stream.get_current_stream_ptr (Cython's C API) */
    cupy_default_fn deflt;  /* cupy_backends.cuda.stream.get_default_stream_ptr */
    PyObject *util;         /* cupy._util (CUDA_ARRAY_INTERFACE_EXPORT_VERSION, read per call) */
} cp;

/* A C function a Cython module exports (its __pyx_capi__, what `cimport` uses), when its
 * signature is exactly `sig`; NULL (no error) otherwise. */
static void *cython_function(const char *module, const char *name, const char *sig)
{
    PyObject *m = PyImport_ImportModule(module);
    PyObject *capi = m ? PyObject_GetAttrString(m, "__pyx_capi__") : NULL;
    Py_XDECREF(m);
    PyObject *cap = capi && PyDict_Check(capi) ? PyDict_GetItemString(capi, name) : NULL;
    void *fn = cap && PyCapsule_IsValid(cap, sig) ? PyCapsule_GetPointer(cap, sig) : NULL;
    Py_XDECREF(capi);
    PyErr_Clear();
    return fn;
}

static int cupy_load(void)
{
    if (cp.state != 0)
        return cp.state > 0 ? 0 : 1;
    cp.state = -1;
    PyObject *hip = NULL, *rt = PyImport_ImportModule("cupy_backends.cuda.api.runtime");
    if (rt != NULL)
        hip = PyObject_GetAttrString(rt, "is_hip"); /* CuPy on ROCm has no interface */
    Py_XDECREF(rt);
    cp.util = hip == Py_False ? PyImport_ImportModule("cupy._util") : NULL;
    Py_XDECREF(hip);
    cp.current = (cupy_stream_fn)cython_function("cupy.cuda.stream", "get_current_stream_ptr",
                                                 "intptr_t (void)");
    cp.deflt = (cupy_default_fn)cython_function("cupy_backends.cuda.stream",
                                                "get_default_stream_ptr",
                                                "intptr_t (int __pyx_skip_dispatch)");
    PyErr_Clear();
    if (cp.util == NULL || cp.current == NULL || cp.deflt == NULL) {
        Py_CLEAR(cp.util);
        return 1; /* a CuPy this does not know: its interface */
    }
    cp.state = 1;
    return 0;
}

/* The stream CuPy's interface names (version 3): its current stream, or for 0 its default
 * stream (1, or 2 with per-thread default streams). */
static int cupy_stream(uintptr_t *stream)
{
    intptr_t s = cp.current();
    if (s == -1 && PyErr_Occurred())
        return -1;
    if (s == 0 && (s = cp.deflt(0)) == -1 && PyErr_Occurred())
        return -1;
    *stream = (uintptr_t)s;
    return 0;
}

/* A cupy.ndarray's address and device: its MemoryPointer's ptr and device_id. 0 or -1. */
static int cupy_data(PyObject *x, uint64_t *ptr, int *device)
{
    PyObject *mp = PyObject_GetAttr(x, S_data);
    PyObject *p = mp ? PyObject_GetAttr(mp, S_ptr) : NULL;
    PyObject *dev = p ? PyObject_GetAttr(mp, S_device_id) : NULL;
    Py_XDECREF(mp);
    if (dev != NULL) {
        *ptr = (uint64_t)PyLong_AsUnsignedLongLong(p);
        *device = (int)PyLong_AsLong(dev);
    }
    Py_XDECREF(p);
    Py_XDECREF(dev);
    return dev == NULL || PyErr_Occurred() ? -1 : 0;
}

/* A cupy.ndarray as its __cuda_array_interface__ describes it (cupy/_core/core.pyx), from its
 * C-level getters: 0 read, 1 use the interface (a dtype cufunc does not take, or an interface
 * version other than 2 or 3: CuPy's own answer or error). The interface's version is read per
 * call, as CuPy's property does: 2 names no stream (tests use it to read without a device). */
static int cupy_read(PyObject *x, cf_array *v, int *readonly, int *has_stream, uintptr_t *stream,
                     const char *argname)
{
    int r = cupy_load();
    if (r != 0)
        return r;
    PyObject *ver = PyObject_GetAttr(cp.util, S_cai_version);
    if (ver == NULL)
        return -1;
    long version = PyLong_Check(ver) ? PyLong_AsLong(ver) : 0;
    Py_DECREF(ver);
    if (version != 2 && version != 3)
        return PyErr_Occurred() ? -1 : 1;
    PyObject *dt = PyObject_GetAttr(x, S_dtype);
    if (dt == NULL)
        return -1;
    r = PyArray_DescrCheck(dt) ? cf_py_dtype_from_descr((PyArray_Descr *)dt, &v->dtype, argname)
                               : -1;
    Py_DECREF(dt);
    if (r < 0) {
        PyErr_Clear();
        return 1; /* the interface's typestr says it, with the interface's message */
    }
    if ((r = read_shape(x, v, argname)) != 0)
        return r;
    int contiguous = attr_is(x, S_c_contig, 1, 0);
    if (contiguous < 0)
        return -1;
    if (contiguous) { /* the interface says strides=None: C-contiguous strides, as parse_cai */
        int64_t acc = (int64_t)cf_dtype_size(v->dtype);
        for (int k = v->ndim - 1; k >= 0; k--) {
            v->strides[k] = acc;
            acc *= v->shape[k] > 0 ? v->shape[k] : 1;
        }
    } else {
        PyObject *st = PyObject_GetAttr(x, S_strides);
        if (st == NULL)
            return -1;
        r = PyTuple_Check(st) && PyTuple_GET_SIZE(st) == v->ndim
                ? ints_from_tuple(st, v->strides, v->ndim, 1)
                : 1;
        Py_DECREF(st);
        if (r != 0)
            return r;
    }
    v->data = 0;
    v->device = -1;
    /* the allocation's device: no pointer query */
    if (view_size(v) > 0 && cupy_data(x, &v->data, &v->device) < 0)
        return -1;
    *readonly = 0;
    *has_stream = 0;
    if (version == 3) {
        if (cupy_stream(stream) < 0)
            return -1;
        *has_stream = 1;
    }
    return 0;
}

/* ---- reading foreign operands ----------------------------------------------------------------- */

/* The reader kind of type tp (cached per type; _interop.reader_for decides). -1: error. */
static int reader_of(PyTypeObject *tp)
{
    PyObject *cache = type_cache(&readers);
    if (cache == NULL)
        return -1;
    PyObject *k = PyDict_GetItemWithError(cache, (PyObject *)tp);
    if (k == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *reader_for = cf_py_hook(CF_PY_HOOK_interop_reader_for);
        PyObject *name = reader_for ? PyObject_CallOneArg(reader_for, (PyObject *)tp) : NULL;
        if (name == NULL)
            return -1;
        int kind = READ_NONE;
        if (PyUnicode_Check(name))
            kind = PyUnicode_CompareWithASCIIString(name, "torch") == 0  ? READ_TORCH
                   : PyUnicode_CompareWithASCIIString(name, "cupy") == 0 ? READ_CUPY
                                                                          : READ_NONE;
        Py_DECREF(name);
        k = PyLong_FromLong(kind);
        int bad = k == NULL || PyDict_SetItem(cache, (PyObject *)tp, k) < 0;
        Py_XDECREF(k); /* the dict holds it (one entry per foreign array class) */
        if (bad)
            return -1;
    }
    return (int)PyLong_AsLong(k);
}

static int read_fast(PyObject *obj, cf_array *v, int *readonly, int *has_stream,
                     uintptr_t *stream, int test, const char *argname)
{
    if (names_load() < 0)
        return -1;
    int kind = reader_of(Py_TYPE(obj));
    if (kind == READ_TORCH)
        return torch_read(obj, v, readonly, has_stream, stream, test, argname);
    if (kind == READ_CUPY)
        return cupy_read(obj, v, readonly, has_stream, stream, argname);
    return kind < 0 ? -1 : 1;
}

static PyObject *no_interface(PyObject *obj)
{
    PyErr_Format(PyExc_AttributeError, "%.200s has no __cuda_array_interface__ that cufunc reads "
                 "(bfloat16: DLPack carries it)", Py_TYPE(obj)->tp_name);
    return NULL;
}

int cf_py_foreign_read(PyObject *obj, cf_array *v, int *readonly, int *has_stream,
                       uintptr_t *stream, PyObject **cai, const char *argname)
{
    static PyObject *str_cai;
    *cai = NULL;
    int r = read_fast(obj, v, readonly, has_stream, stream, 0, argname);
    if (r == 0 || r < 0)
        return r;
    if (r == 2)
        return no_interface(obj) ? 0 : -1;
    if (str_cai == NULL &&
        (str_cai = PyUnicode_InternFromString("__cuda_array_interface__")) == NULL)
        return -1;
    return (*cai = PyObject_GetAttr(obj, str_cai)) == NULL ? -1 : 1;
}

/* _foreign_interface(obj, test=0): obj's interface as cufunc reads it: the dict the fast
 * reader's view amounts to (version 3, with the stream), or obj's own __cuda_array_interface__.
 * With test=1 the PyTorch reader also reads a CPU tensor (no stream): the readers' fields,
 * checked without a GPU (CuPy's with its interface at version 2, which names no stream). test=2: as 1, but only whether the fast
 * reader read it (True) or not (False), no dict: the read alone, for timing. For tests and
 * diagnostics. */
static PyObject *py_foreign_interface(PyObject *mod, PyObject *args)
{
    PyObject *obj;
    int test = 0, readonly = 0, has_stream = 0, r;
    uintptr_t stream = 0;
    cf_array v;
    if (!PyArg_ParseTuple(args, "O|i:_foreign_interface", &obj, &test))
        return NULL;
    r = read_fast(obj, &v, &readonly, &has_stream, &stream, test != 0, "_foreign_interface");
    if (r < 0)
        return NULL;
    if (test == 2) /* the read alone, timed by bench/prof_interop_cpu.py */
        return PyBool_FromLong(r == 0);
    if (r == 2)
        return no_interface(obj);
    if (r == 1)
        return PyObject_GetAttrString(obj, "__cuda_array_interface__");
    char ts[8];
    cf_dtype_typestr(v.dtype, ts);
    PyObject *shape = cf_py_tuple_from_int64(v.ndim, v.shape);
    PyObject *strides = shape ? cf_py_tuple_from_int64(v.ndim, v.strides) : NULL;
    PyObject *d = strides ? Py_BuildValue("{s:N,s:s,s:(KO),s:N,s:i}", "shape", shape, "typestr",
                                          ts, "data", (unsigned long long)v.data,
                                          readonly ? Py_True : Py_False, "strides", strides,
                                          "version", 3)
                          : NULL;
    if (strides == NULL)
        Py_XDECREF(shape);
    if (d == NULL)
        return NULL;
    PyObject *s = has_stream ? PyLong_FromUnsignedLongLong(stream) : Py_NewRef(Py_None);
    if (s == NULL || PyDict_SetItemString(d, "stream", s) < 0) {
        Py_XDECREF(s);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(s);
    return d;
}

/* ---- results in the caller's type: PyTorch and CuPy ------------------------------------------- */

/* A torch tensor over DeviceArray d through PyTorch's DLPack C exchange API: cufunc's managed
 * tensor (holding d), after PyTorch's current stream of d's device was made to wait for d's
 * pending work, taken by managed_tensor_to_py_object_no_sync in C. On its failure the tensor's
 * ownership is PyTorch's (the specification: it is stolen), so it is not released here. */
static PyObject *torch_from_managed(PyObject *d)
{
    void *s = NULL;
    if (tr.api->current_work_stream(kDLCUDA, ((CfPyDeviceArray *)d)->view.device, &s) != 0)
        return NULL;
    DLManagedTensorVersioned *m = cf_py_dlpack_managed(d, s ? (long long)(uintptr_t)s : 1);
    if (m == NULL)
        return NULL;
    void *t = NULL;
    if (tr.api->managed_tensor_to_py_object_no_sync(m, &t) != 0)
        return NULL;
    return (PyObject *)t;
}

/* _as_torch(d): a torch tensor over DeviceArray d (zero-copy: the capsule holds d), ordered on
 * PyTorch's current stream of d's device through the DLPack handshake, as torch.from_dlpack
 * would do it, less its Python (the stream query through torch.cuda.current_stream). */
static PyObject *py_as_torch(PyObject *mod, PyObject *d)
{
    static PyObject *take;
    if (!CfPyDeviceArray_Check(d))
        return PyErr_Format(PyExc_TypeError, "_as_torch: a DeviceArray, not %.200s",
                            Py_TYPE(d)->tp_name);
    if (torch_load() == 0 && tr.api != NULL && !cf_py_exchange_off)
        return torch_from_managed(d);
    if (PyErr_Occurred())
        return NULL;
    if (take == NULL) {
        PyObject *m = PyImport_ImportModule("torch._C");
        PyObject *t = m ? PyObject_GetAttrString(m, "_from_dlpack") : NULL;
        Py_XDECREF(m);
        if (t == NULL || torch_load() != 0 || tr.raw == NULL) {
            Py_XDECREF(t);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "_as_torch: this PyTorch lacks _C's raw "
                                "stream query");
            return NULL;
        }
        take = t;
    }
    PyObject *dev = PyLong_FromLong(((CfPyDeviceArray *)d)->view.device);
    PyObject *s = dev ? PyObject_CallOneArg(tr.raw, dev) : NULL;
    Py_XDECREF(dev);
    if (s == NULL)
        return NULL;
    if (PyLong_Check(s) && PyLong_AsLongLong(s) == 0) /* the legacy default stream: 1 */
        Py_SETREF(s, PyLong_FromLong(1));
    if (s == NULL)
        return NULL;
    static PyObject *empty;
    PyObject *kw = (empty || (empty = PyTuple_New(0))) ? PyDict_New() : NULL;
    PyObject *cap = kw && PyDict_SetItemString(kw, "stream", s) == 0
                        ? cf_py_devicearray_dlpack(d, empty, kw)
                        : NULL;
    Py_XDECREF(kw);
    Py_DECREF(s);
    if (cap == NULL)
        return NULL;
    PyObject *t = PyObject_CallOneArg(take, cap);
    Py_DECREF(cap);
    return t;
}

/* _as_cupy(d): a cupy.ndarray over DeviceArray d's memory, which CuPy holds as memory it does
 * not own (UnownedMemory keeps d alive), after CuPy's current stream was made to wait for the
 * work pending on d (what the DLPack handshake would do). Non-contiguous or empty results go
 * through cupy.from_dlpack. */
static PyObject *py_as_cupy(PyObject *mod, PyObject *d)
{
    static PyObject *unowned, *pointer, *ndarray, *from_dlpack;
    if (!CfPyDeviceArray_Check(d))
        return PyErr_Format(PyExc_TypeError, "_as_cupy: a DeviceArray, not %.200s",
                            Py_TYPE(d)->tp_name);
    if (from_dlpack == NULL) {
        PyObject *m = PyImport_ImportModule("cupy");
        PyObject *mem = m ? PyImport_ImportModule("cupy.cuda.memory") : NULL;
        PyObject *u = mem ? PyObject_GetAttrString(mem, "UnownedMemory") : NULL;
        PyObject *p = u ? PyObject_GetAttrString(mem, "MemoryPointer") : NULL;
        PyObject *n = p ? PyObject_GetAttrString(m, "ndarray") : NULL;
        PyObject *f = n ? PyObject_GetAttrString(m, "from_dlpack") : NULL;
        Py_XDECREF(m);
        Py_XDECREF(mem);
        if (f == NULL || names_load() < 0) {
            Py_XDECREF(u);
            Py_XDECREF(p);
            Py_XDECREF(n);
            Py_XDECREF(f);
            return NULL;
        }
        unowned = u;
        pointer = p;
        ndarray = n;
        from_dlpack = f;
    }
    CfPyDeviceArray *a = (CfPyDeviceArray *)d;
    int64_t nbytes = view_size(&a->view) * (int64_t)cf_dtype_size(a->view.dtype);
    if (nbytes == 0 || !cf_array_is_c_contiguous(&a->view) || cupy_load() != 0)
        return PyErr_Occurred() ? NULL : PyObject_CallOneArg(from_dlpack, d);
    /* CuPy's current stream of the result's device (CuPy names the runtime's current device's),
     * not of the caller's current device: the result is used there */
    uintptr_t consumer;
    cf_status st = cf_device_enter(a->view.device);
    if (st != CF_OK)
        return cf_py_raise(st, "_as_cupy");
    int got = cupy_stream(&consumer);
    cf_context_restore();
    if (got < 0)
        return NULL;
    PyObject *h = PyLong_FromUnsignedLongLong(consumer);
    PyObject *done = h ? cf_py_devicearray_order_for(d, h) : NULL;
    Py_XDECREF(h);
    if (done == NULL)
        return NULL;
    Py_DECREF(done);
    PyObject *mem = PyObject_CallFunction(unowned, "KLOi", (unsigned long long)a->view.data,
                                          (long long)nbytes, d, a->view.device);
    PyObject *ptr = mem ? PyObject_CallFunction(pointer, "Oi", mem, 0) : NULL;
    Py_XDECREF(mem);
    PyObject *shape = ptr ? cf_py_tuple_from_int64(a->view.ndim, a->view.shape) : NULL;
    PyObject *r = shape ? PyObject_CallFunctionObjArgs(ndarray, shape, (PyObject *)a->descr, ptr,
                                                       NULL)
                        : NULL;
    Py_XDECREF(ptr);
    Py_XDECREF(shape);
    return r;
}

/* ---- results allocated by the caller's library ------------------------------------------------ */

enum { LIB_NONE = 0, LIB_TORCH = 1, LIB_CUPY = 2 };
static int lib_results_off; /* _lib_results(False): DeviceArrays wrapped at delivery (A/B) */
/* PyTorch's allocator for results (managed_tensor_allocator) is off by default: measured against
 * cufunc's pool plus the C API's wrapping, it was 0.5 us slower a call on one host and 0.3 us
 * faster on another (interleaved A/B, bench/INTEROP_NOTES.md); CuPy's was faster on both. */
static int torch_lib_alloc;

static int wrapper_is(PyObject *w, PyCFunction f)
{
    return PyCFunction_Check(w) && PyCFunction_GET_FUNCTION(w) == f;
}

/* Whether handles a and b (protocol handles: 1 legacy, 2 per-thread default) need no wait: the
 * same stream, or the two default streams, which CUDA orders with each other. */
static int streams_ordered(uintptr_t a, uintptr_t b)
{
    return a == b || (a <= 2 && b <= 2);
}

/* The call's stream s (protocol handle `launch`) and another stream of `device` (handle `other`):
 * s waits for the other (launch_waits) or the other for s, unless the two are ordered already.
 * The wait before the launch may repeat one the operands' reading made (a CuPy input names the
 * same current stream); it is kept for the allocator's memory, whose last use may have been
 * queued on that stream after the inputs were read. */
static int wait_between(int device, cf_stream *s, uintptr_t launch, uintptr_t other,
                        int launch_waits)
{
    if (streams_ordered(launch, other))
        return 0;
    cf_stream *theirs = NULL;
    cf_status st = cf_py_stream_wrap_any(device, other, &theirs);
    if (st == CF_OK)
        st = launch_waits ? cf_stream_wait_stream(s, theirs) : cf_stream_wait_stream(theirs, s);
    cf_stream_free(theirs);
    return st == CF_OK ? 0 : cf_py_fail(st, "ordering a result made by the caller's library");
}

int cf_py_lib_alloc_begin(PyObject *wrapper, int device, cf_stream *s, uintptr_t launch,
                          cf_py_lib_alloc *la)
{
    la->kind = LIB_NONE;
    if (wrapper == NULL || lib_results_off)
        return 0;
    uintptr_t h;
    if (wrapper_is(wrapper, (PyCFunction)py_as_torch)) {
        int r = torch_lib_alloc || la->capturing ? torch_load() : 1;
        if (r != 0 || tr.api == NULL || cf_py_exchange_off)
            return r < 0 ? -1 : 0;
        void *st = NULL;
        if (tr.api->current_work_stream(kDLCUDA, device, &st) != 0)
            return -1;
        h = st ? (uintptr_t)st : 1;
        la->kind = LIB_TORCH;
    } else if (wrapper_is(wrapper, (PyCFunction)py_as_cupy)) {
        if (cupy_load() != 0 || names_load() < 0)
            return PyErr_Occurred() ? -1 : 0;
        /* CuPy allocates on, and names the current stream of, the CUDA runtime's current device:
         * the call's device is made current first (the call's end restores the caller's), so a
         * chunk on device 1 called from a thread whose current device is 0 (a Dask worker thread)
         * gets its result from device 1's pool, ordered on device 1's current stream, instead of
         * a block of device 0's pool thrown away */
        cf_status st = cf_device_enter(device);
        if (st != CF_OK)
            return cf_py_fail(st, "a result made by the caller's library");
        if (cupy_stream(&h) < 0)
            return -1;
        la->kind = LIB_CUPY;
    } else {
        return 0;
    }
    la->consumer = h;
    if (la->capturing && !streams_ordered(launch, h)) {
        la->kind = LIB_NONE; /* a wait on a stream outside the capture would break it */
        return 0;
    }
    if (wait_between(device, s, launch, h, 1) < 0) {
        la->kind = LIB_NONE;
        return -1;
    }
    return 1;
}

int cf_py_lib_alloc_end(const cf_py_lib_alloc *la, int device, cf_stream *s, uintptr_t launch)
{
    return la->kind == LIB_NONE ? 0 : wait_between(device, s, launch, la->consumer, 0);
}

/* The allocator's error callback (DLPackManagedTensorAllocator): PyTorch's message. */
static void alloc_error(void *ctx, const char *kind, const char *message)
{
    (void)ctx;
    PyErr_Format(PyExc_RuntimeError, "%s: %s", kind, message);
}

static PyObject *torch_alloc(int ndim, const int64_t *shape, cf_dtype dt, int device,
                             uint64_t *data)
{
    DLTensor proto;
    memset(&proto, 0, sizeof proto);
    proto.device.device_type = kDLCUDA;
    proto.device.device_id = device;
    proto.ndim = ndim;
    cf_py_dl_dtype(dt, &proto.dtype.code, &proto.dtype.bits);
    proto.dtype.lanes = 1;
    proto.shape = (int64_t *)shape;
    DLManagedTensorVersioned *m = NULL;
    if (tr.api->managed_tensor_allocator(&proto, &m, NULL, alloc_error) != 0 || m == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "PyTorch's allocator gave no tensor");
        return NULL;
    }
    *data = (uint64_t)(uintptr_t)m->dl_tensor.data + m->dl_tensor.byte_offset;
    int here = m->dl_tensor.device.device_type == kDLCUDA &&
               m->dl_tensor.device.device_id == device;
    void *t = NULL;
    if (tr.api->managed_tensor_to_py_object_no_sync(m, &t) != 0) /* m is PyTorch's now */
        return NULL;
    if (!here) {
        Py_DECREF((PyObject *)t);
        return PyErr_Format(PyExc_RuntimeError, "PyTorch allocated a result off device %d",
                            device);
    }
    return (PyObject *)t;
}

static PyObject *cupy_alloc(int ndim, const int64_t *shape, cf_dtype dt, int device,
                            uint64_t *data)
{
    static PyObject *ndarray;
    if (ndarray == NULL) {
        PyObject *m = PyImport_ImportModule("cupy");
        ndarray = m ? PyObject_GetAttrString(m, "ndarray") : NULL;
        Py_XDECREF(m);
        if (ndarray == NULL)
            return NULL;
    }
    PyObject *args[2];
    args[0] = cf_py_tuple_from_int64(ndim, shape);
    args[1] = args[0] ? (PyObject *)cf_py_descr_from_dtype(dt) : NULL;
    PyObject *x = args[1] ? PyObject_Vectorcall(ndarray, args, 2, NULL) : NULL;
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    int d = -1;
    if (x != NULL && (cupy_data(x, data, &d) < 0 || d != device))
        Py_CLEAR(x); /* an error, or CuPy's current device is another: not here (no error) */
    return x;
}

PyObject *cf_py_lib_alloc_one(const cf_py_lib_alloc *la, int ndim, const int64_t *shape,
                              cf_dtype dt, int device, uint64_t *data)
{
    return la->kind == LIB_TORCH ? torch_alloc(ndim, shape, dt, device, data)
                                 : cupy_alloc(ndim, shape, dt, device, data);
}

/* _lib_results(flag=None, torch=None) -> (on, torch): whether fresh results of calls on CuPy
 * arrays (and, with torch, on torch tensors) are allocated by that library, else cufunc
 * DeviceArrays wrapped into its type; bools set them (A/B timing, tests). */
static PyObject *py_lib_results(PyObject *mod, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"flag", "torch", NULL};
    PyObject *flag = Py_None, *torch = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:_lib_results", kwlist, &flag, &torch))
        return NULL;
    int on = flag == Py_None ? !lib_results_off : PyObject_IsTrue(flag);
    int t = torch == Py_None ? torch_lib_alloc : PyObject_IsTrue(torch);
    if (on < 0 || t < 0)
        return NULL;
    lib_results_off = !on;
    torch_lib_alloc = t;
    return Py_BuildValue("(OO)", on ? Py_True : Py_False, t ? Py_True : Py_False);
}

/* _interop_c_api() -> whether PyTorch's DLPack C exchange API is used (reading tensors, making
 * results): PyTorch publishes it and the switch is on. _interop_c_api(flag) sets the switch (tests
 * and A/B timing compare both paths) and returns the switch as it was, not whether the API is
 * used: restoring with that value leaves the switch on where PyTorch was not loaded yet. */
static PyObject *py_interop_c_api(PyObject *mod, PyObject *args)
{
    PyObject *flag = Py_None;
    if (!PyArg_ParseTuple(args, "|O:_interop_c_api", &flag))
        return NULL;
    if (flag != Py_None) {
        int on = PyObject_IsTrue(flag);
        if (on < 0)
            return NULL;
        int was_on = !cf_py_exchange_off;
        cf_py_exchange_off = !on;
        return PyBool_FromLong(was_on);
    }
    if (torch_load() < 0)
        return NULL;
    return PyBool_FromLong(tr.api != NULL && !cf_py_exchange_off);
}

PyMethodDef cf_py_interop_methods[] = {
    {"_lib_results", (PyCFunction)(void (*)(void))py_lib_results, METH_VARARGS | METH_KEYWORDS,
     "_lib_results(flag=None, torch=None) -> (on, torch): whether fresh results of calls on CuPy "
     "arrays (and with torch, on torch tensors) are allocated by that library; bools set them "
     "(tests, timing)."},
    {"_interop_c_api", (PyCFunction)py_interop_c_api, METH_VARARGS,
     "_interop_c_api(flag=None) -> whether PyTorch tensors are read and results made through "
     "PyTorch's DLPack C exchange API; a bool turns it off or on (tests, timing) and returns the "
     "switch as it was."},
    {"_foreign_interface", (PyCFunction)py_foreign_interface, METH_VARARGS,
     "_foreign_interface(obj, test=0) -> obj's CUDA Array Interface as cufunc reads it (the "
     "fast readers of PyTorch tensors and CuPy arrays); for tests and diagnostics."},
    {"_as_torch", (PyCFunction)py_as_torch, METH_O,
     "_as_torch(d) -> a torch tensor over DeviceArray d (zero-copy, ordered on PyTorch's current "
     "stream)."},
    {"_as_cupy", (PyCFunction)py_as_cupy, METH_O,
     "_as_cupy(d) -> a cupy.ndarray over DeviceArray d (zero-copy, ordered on CuPy's current "
     "stream)."},
    {NULL, NULL, 0, NULL},
};
