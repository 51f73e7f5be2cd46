/* _coremodule.c: the module cufunc._core: its init, the mapping of cf_status codes onto Python
 * exceptions, and the dtype and shape helpers every other file of the extension uses. */
#define CF_PY_IMPORT_ARRAY
#include "py_common.h"
#include "py_twins.h"
#include "py_ufunc.h"
#include "py_reduce.h"
#include "py_gufunc.h"
#include "py_call.h"
#include "py_interop.h"
#include "py_loops.h"

#include <string.h>

PyObject *cf_py_CudaSupportError;
PyObject *cf_py_CudaAPIError;
PyObject *cf_py_DeviceAssertionError;
PyObject *cf_py_CompileError;

/* ---- errors ---------------------------------------------------------------------------------- */

PyObject *cf_py_exception_for(cf_status st)
{
    switch (st) {
    case CF_ERR_INVALID: return PyExc_ValueError;
    case CF_ERR_TYPE: return PyExc_TypeError;
    case CF_ERR_NOMEM:
    case CF_ERR_DEVICE_NOMEM: return PyExc_MemoryError;
    case CF_ERR_NO_DRIVER:
    case CF_ERR_NO_DEVICE:
    case CF_ERR_NO_NVRTC:
    case CF_ERR_FORK: return cf_py_CudaSupportError;
    case CF_ERR_COMPILE: return cf_py_CompileError;
    case CF_ERR_CUDA: return cf_py_CudaAPIError;
    case CF_ERR_IO: return PyExc_OSError;
    case CF_ERR_UNSUPPORTED: return PyExc_NotImplementedError;
    case CF_ERR_RANGE: return PyExc_IndexError;
    case CF_ERR_ASSERT: return cf_py_DeviceAssertionError;
    default: return PyExc_RuntimeError;
    }
}

PyObject *cf_py_raise(cf_status st, const char *what)
{
    const char *msg = cf_last_error();
    if (msg == NULL || msg[0] == '\0')
        msg = cf_status_name(st);
    if (what != NULL)
        PyErr_Format(cf_py_exception_for(st), "%s: %s", what, msg);
    else
        PyErr_SetString(cf_py_exception_for(st), msg);
    return NULL;
}

int cf_py_fail(cf_status st, const char *what)
{
    cf_py_raise(st, what);
    return -1;
}

int cf_py_cuda_init(const char *what)
{
    cf_status st = cf_init();
    if (st != CF_OK)
        return cf_py_fail(st, what);
    return 0;
}

int cf_py_current_device(int *device, const char *what)
{
    cf_status st;
    if (cf_py_cuda_init(what) < 0)
        return -1;
    st = cf_device_get(device);
    if (st != CF_OK)
        return cf_py_fail(st, what);
    return 0;
}

/* ---- dtypes ---------------------------------------------------------------------------------- */

int cf_py_parse_casting(PyObject *obj, cf_casting *out)
{
    if (obj == NULL) {
        *out = CF_CAST_SAME_KIND;
        return 0;
    }
    if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        if (s == NULL)
            return -1;
        for (int i = CF_CAST_NO; i <= CF_CAST_UNSAFE; i++)
            if (strcmp(s, cf_casting_name((cf_casting)i)) == 0) {
                *out = (cf_casting)i;
                return 0;
            }
    }
    PyErr_Format(PyExc_ValueError, "casting must be one of 'no', 'equiv', 'safe', 'same_kind', or "
                 "'unsafe' (got %R)", obj);
    return -1;
}

/* Whether a user dtype is ml_dtypes' bfloat16 (its scalar type "ml_dtypes.bfloat16"). */
static int is_bfloat16_descr(PyArray_Descr *descr)
{
    if (descr->type_num < NPY_USERDEF || !descr->typeobj || PyDataType_ELSIZE(descr) != 2)
        return 0;
    const char *name = descr->typeobj->tp_name, *dot = strrchr(name, '.');
    return strcmp(dot ? dot + 1 : name, "bfloat16") == 0;
}

int cf_py_dtype_from_descr(PyArray_Descr *descr, cf_dtype *out, const char *argname)
{
    Py_ssize_t size = (Py_ssize_t)PyDataType_ELSIZE(descr);
    char kind = descr->kind;
    int ok = 1;
    if (PyDataType_HASFIELDS(descr) || PyDataType_HASSUBARRAY(descr))
        ok = 0;
    else if (descr->byteorder == '>' && size > 1)
        goto swapped;
    else if (is_bfloat16_descr(descr))
        *out = CF_BFLOAT16; /* ml_dtypes.bfloat16 (a user dtype of kind 'V') */
    else if (kind == 'b' && size == 1)
        *out = CF_BOOL;
    else if (kind == 'i' && size == 1) *out = CF_INT8;
    else if (kind == 'i' && size == 2) *out = CF_INT16;
    else if (kind == 'i' && size == 4) *out = CF_INT32;
    else if (kind == 'i' && size == 8) *out = CF_INT64;
    else if (kind == 'u' && size == 1) *out = CF_UINT8;
    else if (kind == 'u' && size == 2) *out = CF_UINT16;
    else if (kind == 'u' && size == 4) *out = CF_UINT32;
    else if (kind == 'u' && size == 8) *out = CF_UINT64;
    else if (kind == 'f' && size == 2) *out = CF_FLOAT16;
    else if (kind == 'f' && size == 4) *out = CF_FLOAT32;
    else if (kind == 'f' && size == 8) *out = CF_FLOAT64;
    else if (kind == 'c' && size == 8) *out = CF_COMPLEX64;
    else if (kind == 'c' && size == 16) *out = CF_COMPLEX128;
    else
        ok = 0;
    if (ok)
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "%s: dtype %S is not supported by cufunc (supported: bool, int8..int64, "
                 "uint8..uint64, float16, bfloat16 (ml_dtypes), float32, float64, complex64, "
                 "complex128)",
                 argname, (PyObject *)descr);
    return -1;
swapped:
    PyErr_Format(PyExc_TypeError,
                 "%s: dtype %S has non-native (big-endian) byte order; convert it with "
                 "ary.astype(ary.dtype.newbyteorder('='))",
                 argname, (PyObject *)descr);
    return -1;
}

PyArray_Descr *cf_py_descr_from_dtype(cf_dtype dt)
{
    static const int typenums[CF_NDTYPES] = {
        NPY_BOOL, NPY_INT8, NPY_INT16, NPY_INT32, NPY_INT64, NPY_UINT8, NPY_UINT16, NPY_UINT32,
        NPY_UINT64, NPY_FLOAT16, NPY_FLOAT32, NPY_FLOAT64, NPY_COMPLEX64, NPY_COMPLEX128, -1,
    };
    if ((int)dt < 0 || dt >= CF_NDTYPES) {
        PyErr_Format(PyExc_ValueError, "invalid cf_dtype %d", (int)dt);
        return NULL;
    }
    if (dt == CF_BFLOAT16) {
        /* NumPy has no bfloat16: ml_dtypes' (what JAX uses), imported on first need */
        static PyArray_Descr *bf16 = NULL;
        if (!bf16) {
            PyObject *mod = PyImport_ImportModule("ml_dtypes");
            if (!mod) {
                PyErr_Clear();
                PyErr_SetString(PyExc_TypeError, "bfloat16 arrays need the ml_dtypes package for "
                                "their NumPy dtype (pip install ml_dtypes)");
                return NULL;
            }
            PyObject *t = PyObject_GetAttrString(mod, "bfloat16");
            Py_DECREF(mod);
            PyArray_Descr *d = NULL;
            int ok = t && PyArray_DescrConverter(t, &d);
            Py_XDECREF(t);
            if (!ok)
                return NULL;
            bf16 = d; /* kept for the process */
        }
        Py_INCREF(bf16);
        return bf16;
    }
    return PyArray_DescrFromType(typenums[dt]);
}

int cf_py_dtype_from_object(PyObject *obj, cf_dtype *out, PyArray_Descr **descr,
                            const char *argname)
{
    PyArray_Descr *d = NULL;
    if (obj == Py_None) {
        d = PyArray_DescrFromType(NPY_FLOAT64);
    } else if (!PyArray_DescrConverter(obj, &d)) {
        /* Keep NumPy's explanation but say which argument it was. */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(PyExc_TypeError, "%s: %R is not a dtype (%S)", argname, obj,
                     value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    if (d == NULL)
        return -1;
    if (cf_py_dtype_from_descr(d, out, argname) < 0) {
        Py_DECREF(d);
        return -1;
    }
    if (descr != NULL) {
        /* The native form, so '=f4' and '<f4' give the same object. */
        Py_DECREF(d);
        *descr = cf_py_descr_from_dtype(*out);
        if (*descr == NULL)
            return -1;
    } else {
        Py_DECREF(d);
    }
    return 0;
}

/* ---- shapes ---------------------------------------------------------------------------------- */

static int parse_extent(PyObject *item, int64_t *out, int axis, const char *argname)
{
    PyObject *idx;
    long long v;
    int overflow = 0;
    if (PyBool_Check(item) || PyFloat_Check(item)) {
        PyErr_Format(PyExc_TypeError, "%s: extent %R of axis %d is not an integer", argname, item,
                     axis);
        return -1;
    }
    idx = PyNumber_Index(item);
    if (idx == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: extent %R of axis %d is not an integer", argname, item,
                     axis);
        return -1;
    }
    v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    Py_DECREF(idx);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow > 0) {
        PyErr_Format(PyExc_ValueError, "%s: extent %R of axis %d is too large", argname, item,
                     axis);
        return -1;
    }
    if (overflow < 0 || v < 0) {
        PyErr_Format(PyExc_ValueError, "%s: negative extent %R of axis %d", argname, item, axis);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int cf_py_parse_shape(PyObject *obj, int *ndim, int64_t *shape, const char *argname)
{
    PyObject *seq;
    Py_ssize_t n, i;
    if (PyLong_Check(obj) || (!PySequence_Check(obj) && PyIndex_Check(obj))) {
        *ndim = 1;
        return parse_extent(obj, &shape[0], 0, argname);
    }
    if (PyUnicode_Check(obj) || PyBytes_Check(obj) || !PySequence_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected an int or a tuple of ints, got %.200s",
                     argname, Py_TYPE(obj)->tp_name);
        return -1;
    }
    seq = PySequence_Fast(obj, "shape");
    if (seq == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > CF_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd dimensions, more than the %d supported", argname,
                     n, CF_MAX_DIMS);
        Py_DECREF(seq);
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (parse_extent(PySequence_Fast_GET_ITEM(seq, i), &shape[i], (int)i, argname) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *ndim = (int)n;
    return 0;
}

int cf_py_check_nbytes(int ndim, const int64_t *shape, size_t itemsize, const char *argname)
{
    /* Like NumPy: the product is checked even when an extent is zero, so that (0, 2**62, 2**62)
     * is refused the same way everywhere. */
    uint64_t total = itemsize ? itemsize : 1;
    int i;
    for (i = 0; i < ndim; i++) {
        uint64_t e = (uint64_t)(shape[i] > 0 ? shape[i] : 1);
        if (total > (uint64_t)INT64_MAX / e) {
            PyObject *t = cf_py_tuple_from_int64(ndim, shape);
            if (t == NULL)
                return -1;
            PyErr_Format(PyExc_ValueError,
                         "%s: shape %R with %zu-byte items is too large (its size in bytes "
                         "overflows a 64-bit integer)",
                         argname, t, itemsize);
            Py_DECREF(t);
            return -1;
        }
        total *= e;
    }
    return 0;
}

int cf_py_parse_order(PyObject *obj, char *order, const char *argname)
{
    const char *s;
    if (obj == NULL || obj == Py_None) {
        *order = 'C';
        return 0;
    }
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s: expected 'C' or 'F', got %.200s", argname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    s = PyUnicode_AsUTF8(obj);
    if (s == NULL)
        return -1;
    if ((s[0] == 'C' || s[0] == 'c' || s[0] == 'F' || s[0] == 'f') && s[1] == '\0') {
        *order = (s[0] == 'c' || s[0] == 'C') ? 'C' : 'F';
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "%s: expected 'C' or 'F', got %R", argname, obj);
    return -1;
}

PyObject *cf_py_tuple_from_int64(int n, const int64_t *v)
{
    PyObject *t = PyTuple_New(n);
    int i;
    if (t == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong((long long)v[i]);
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* ---- module-level functions defined here ----------------------------------------------------- */

static PyObject *py_status_name(PyObject *self, PyObject *arg)
{
    int st = PyLong_AsLong(arg);
    if (st == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(cf_status_name(st));
}

/* Raise the exception a status maps to with a given message: lets the tests check the mapping. */
static PyObject *py_raise_status(PyObject *self, PyObject *args)
{
    int st;
    const char *msg;
    if (!PyArg_ParseTuple(args, "is:_raise_status", &st, &msg))
        return NULL;
    PyErr_SetString(cf_py_exception_for(st), msg);
    return NULL;
}

static PyObject *py_test_fail_alloc_after(PyObject *self, PyObject *args)
{
    long long n;
    int sticky = 0;
    if (!PyArg_ParseTuple(args, "L|p:_test_fail_alloc_after", &n, &sticky))
        return NULL;
    cf_test_fail_alloc_after((int64_t)n, sticky);
    Py_RETURN_NONE;
}

static PyObject *py_test_alloc_outstanding(PyObject *self, PyObject *unused)
{
    return PyLong_FromLongLong((long long)cf_test_alloc_outstanding());
}

/* The one entry for test hooks that are not allocation faults: a hook's name and its value. */
static PyObject *py_test_control(PyObject *self, PyObject *args)
{
    const char *name;
    PyObject *value;
    if (!PyArg_ParseTuple(args, "sO:_test_control", &name, &value))
        return NULL;
    if (strcmp(name, "cache_write_pause") == 0) {
        const char *marker = NULL;
        if (value != Py_None && !(marker = PyUnicode_AsUTF8(value)))
            return NULL;
        cf_cache_test_pause_writes(marker);
        Py_RETURN_NONE;
    }
    return PyErr_Format(PyExc_ValueError, "_test_control: no test hook named '%s' (there is "
                        "'cache_write_pause')", name);
}

/* Every CUFUNC_* variable (cf_knob_info): a list of dicts, for `python -m cufunc` and the docs. */
static PyObject *py_knobs(PyObject *self, PyObject *unused)
{
    int n = cf_knob_count();
    PyObject *out = PyList_New(n);
    if (!out)
        return NULL;
    for (int i = 0; i < n; i++) {
        cf_knob_desc d;
        if (cf_knob_info(i, &d) != CF_OK) {
            Py_DECREF(out);
            return cf_py_raise(cf_last_status(), "knobs");
        }
        PyObject *row;
        if (d.is_text)
            row = Py_BuildValue("{s:s,s:s,s:z,s:s}", "name", d.name, "kind", "text", "text",
                                d.text, "doc", d.doc);
        else
            row = Py_BuildValue("{s:s,s:s,s:z,s:l,s:l,s:l,s:l,s:s}", "name", d.name, "kind",
                                d.rule == 1 ? "power of two" : d.rule == 2 ? "multiple of 32"
                                                                           : "int",
                                "text", d.text, "value", d.value, "default",
                                d.default_value, "lowest", d.lowest, "highest", d.highest, "doc",
                                d.doc);
        if (!row) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, row);
    }
    return out;
}

static PyObject *py_dtype_info(PyObject *self, PyObject *arg)
{
    cf_dtype dt;
    char ts[8];
    if (cf_py_dtype_from_object(arg, &dt, NULL, "dtype") < 0)
        return NULL;
    cf_dtype_typestr(dt, ts);
    return Py_BuildValue("{s:i,s:s,s:s,s:n,s:s}", "code", (int)dt, "name", cf_dtype_name(dt),
                         "ctype", cf_dtype_ctype(dt), "itemsize", (Py_ssize_t)cf_dtype_size(dt),
                         "typestr", ts);
}

static PyMethodDef core_methods[] = {
    {"status_name", py_status_name, METH_O, "status_name(code) -> the C name of a cf_status."},
    {"_raise_status", py_raise_status, METH_VARARGS,
     "_raise_status(code, message): raise the exception a cf_status maps to (for tests)."},
    {"_test_fail_alloc_after", py_test_fail_alloc_after, METH_VARARGS,
     "_test_fail_alloc_after(n, sticky=False): make the n-th host allocation of the C core fail "
     "(0 turns it off). For tests only."},
    {"_test_alloc_outstanding", py_test_alloc_outstanding, METH_NOARGS,
     "Host allocations of the C core not yet freed (for leak tests)."},
    {"_test_control", py_test_control, METH_VARARGS,
     "_test_control(name, value): set a test hook of the C core ('cache_write_pause': a path, or "
     "None). For tests only."},
    {"knobs", py_knobs, METH_NOARGS,
     "knobs() -> [dict]: every CUFUNC_* environment variable cufunc reads: name, kind ('int', 'power of two', "
     "'multiple of 32' or 'text'), the text as set (or None), and for integers the value in effect, the default and "
     "the bounds; doc says what it changes."},
    {"dtype_info", py_dtype_info, METH_O,
     "dtype_info(dtype) -> dict(code, name, ctype, itemsize, typestr) of a supported dtype."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    "cufunc._core",
    "The C core of cufunc: devices, streams, device arrays, compilation and kernels.",
    -1,
    core_methods,
};

static int load_exceptions(void)
{
    PyObject *errors = PyImport_ImportModule("cufunc.errors");
    if (errors == NULL)
        return -1;
    cf_py_CudaSupportError = PyObject_GetAttrString(errors, "CudaSupportError");
    cf_py_CudaAPIError = PyObject_GetAttrString(errors, "CudaAPIError");
    cf_py_CompileError = PyObject_GetAttrString(errors, "CompileError");
    cf_py_DeviceAssertionError = PyObject_GetAttrString(errors, "DeviceAssertionError");
    Py_DECREF(errors);
    if (!cf_py_CudaSupportError || !cf_py_CudaAPIError || !cf_py_CompileError ||
        !cf_py_DeviceAssertionError)
        return -1;
    return 0;
}

static int add_status_codes(PyObject *m)
{
    static const struct { const char *name; int value; } codes[] = {
        {"CF_OK", CF_OK}, {"CF_ERR_INVALID", CF_ERR_INVALID}, {"CF_ERR_TYPE", CF_ERR_TYPE},
        {"CF_ERR_NOMEM", CF_ERR_NOMEM}, {"CF_ERR_DEVICE_NOMEM", CF_ERR_DEVICE_NOMEM},
        {"CF_ERR_NO_DRIVER", CF_ERR_NO_DRIVER}, {"CF_ERR_NO_DEVICE", CF_ERR_NO_DEVICE},
        {"CF_ERR_NO_NVRTC", CF_ERR_NO_NVRTC}, {"CF_ERR_COMPILE", CF_ERR_COMPILE},
        {"CF_ERR_CUDA", CF_ERR_CUDA}, {"CF_ERR_FORK", CF_ERR_FORK}, {"CF_ERR_IO", CF_ERR_IO},
        {"CF_ERR_UNSUPPORTED", CF_ERR_UNSUPPORTED}, {"CF_ERR_RANGE", CF_ERR_RANGE},
        {"CF_ERR_ASSERT", CF_ERR_ASSERT},
    };
    size_t i;
    for (i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (PyModule_AddIntConstant(m, codes[i].name, codes[i].value) < 0)
            return -1;
    if (PyModule_AddIntConstant(m, "MAX_DIMS", CF_MAX_DIMS) < 0 ||
        PyModule_AddStringConstant(m, "__version__", CUFUNC_VERSION_STRING) < 0)
        return -1;
    return 0;
}

/* The parts of the module: each C file contributes functions and/or an init that readies and adds
 * its types. Adding a subsystem is one line here (and its declarations in py_common.h). */
static const struct {
    PyMethodDef *methods;
    int (*init)(PyObject *m);
} parts[] = {
    {cf_py_device_methods, cf_py_device_init_module},
    {cf_py_stream_methods, cf_py_stream_init_module},
    {cf_py_graph_methods, cf_py_graph_init_module},
    {cf_py_devicearray_methods, cf_py_devicearray_init_module},
    {cf_py_dlpack_methods, cf_py_dlpack_init_module},
    {cf_py_compile_methods, cf_py_compile_init_module},
    {cf_py_ufunc_methods, cf_py_ufunc_init_module},
    {cf_py_signature_methods, cf_py_signature_init_module},
    {cf_py_reduce_methods, cf_py_reduce_init_module},
    {cf_py_gufunc_methods, cf_py_gufunc_init_module},
    {cf_py_call_methods, NULL},
    {cf_py_interop_methods, NULL},
    {cf_py_at_methods, NULL},
    {cf_py_loops_methods, NULL},
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m;
    size_t i;
    import_array();
    if (load_exceptions() < 0)
        return NULL;
    m = PyModule_Create(&core_module);
    if (m == NULL)
        return NULL;
    if (add_status_codes(m) < 0)
        goto fail;
    for (i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (parts[i].methods != NULL && PyModule_AddFunctions(m, parts[i].methods) < 0)
            goto fail;
        if (parts[i].init != NULL && parts[i].init(m) < 0)
            goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
