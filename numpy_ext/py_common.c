/* py_common.c: what every file of the binding uses: the exception of a status code, dtypes (NumPy's
 * and DLPack's), shapes and strides given as Python objects. The bottom of the binding but for
 * py_hooks.c (cufunc.errors' classes), the one other file of numpy_ext it calls
 * (tools/check_cycles.py). */
#define CF_PY_IMPORT_ARRAY /* the NumPy C-API table is defined here */
#include "py_common.h"
#include "dlpack.h"
#include "py_hooks.h"

#include <string.h>

/* The NumPy C-API table, filled once at module init. */
int cf_py_import_numpy(void)
{
    import_array1(-1);
    return 0;
}

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
    case CF_ERR_FORK: return cf_py_hook(CF_PY_HOOK_CudaSupportError);
    case CF_ERR_COMPILE: return cf_py_hook(CF_PY_HOOK_CompileError);
    case CF_ERR_CUDA: return cf_py_hook(CF_PY_HOOK_CudaAPIError);
    case CF_ERR_IO: return PyExc_OSError;
    case CF_ERR_UNSUPPORTED: return PyExc_NotImplementedError;
    case CF_ERR_RANGE: return PyExc_IndexError;
    case CF_ERR_ASSERT: return cf_py_hook(CF_PY_HOOK_DeviceAssertionError);
    default: return PyExc_RuntimeError;
    }
}

PyObject *cf_py_raise(cf_status st, const char *what)
{
    const char *msg = cf_last_error();
    PyObject *cls = cf_py_exception_for(st);
    if (msg == NULL || msg[0] == '\0')
        msg = cf_status_name(st);
    if (cls == NULL) { /* the class's hook is missing: its RuntimeError, with this failure */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_Format(PyExc_RuntimeError, "%S; the failure: %s%s%s", value, what ? what : "",
                     what ? ": " : "", msg);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return NULL;
    }
    if (what != NULL)
        PyErr_Format(cls, "%s: %s", what, msg);
    else
        PyErr_SetString(cls, msg);
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

/* A tuple of byte strides (any sign). */
int cf_py_parse_strides(PyObject *obj, int *n, int64_t *out)
{
    PyObject *seq = PySequence_Fast(obj, "strides must be a sequence of ints");
    Py_ssize_t len, i;
    if (seq == NULL)
        return -1;
    len = PySequence_Fast_GET_SIZE(seq);
    if (len > CF_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "strides: too many dimensions");
        return -1;
    }
    for (i = 0; i < len; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        out[i] = v;
    }
    Py_DECREF(seq);
    *n = (int)len;
    return 0;
}

/* ---- DLPack data types ----------------------------------------------------------------------- */

static DLDataType dl_dtype_of(cf_dtype dt)
{
    DLDataType r;
    r.lanes = 1;
    r.bits = (uint8_t)(cf_dtype_size(dt) * 8);
    switch (cf_dtype_kind(dt)) {
    case 'b': r.code = kDLBool; break;
    case 'i': r.code = kDLInt; break;
    case 'u': r.code = kDLUInt; break;
    case 'f': r.code = dt == CF_BFLOAT16 ? kDLBfloat : kDLFloat; break;
    default: r.code = kDLComplex; break;
    }
    return r;
}

void cf_py_dl_dtype(cf_dtype dt, uint8_t *code, uint8_t *bits)
{
    DLDataType d = dl_dtype_of(dt);
    *code = d.code;
    *bits = d.bits;
}

int cf_py_dtype_from_dl(uint8_t code, uint8_t bits, uint16_t lanes, cf_dtype *out,
                        const char *argname)
{
    DLDataType d = {code, bits, lanes};
    int ok = d.lanes == 1;
    if (ok) {
        switch (d.code) {
        case kDLBool: ok = d.bits == 8; *out = CF_BOOL; break;
        case kDLInt:
            *out = d.bits == 8 ? CF_INT8 : d.bits == 16 ? CF_INT16 : d.bits == 32 ? CF_INT32 : CF_INT64;
            ok = d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
            break;
        case kDLUInt:
            *out = d.bits == 8 ? CF_UINT8 : d.bits == 16 ? CF_UINT16 : d.bits == 32 ? CF_UINT32 : CF_UINT64;
            ok = d.bits == 8 || d.bits == 16 || d.bits == 32 || d.bits == 64;
            break;
        case kDLFloat:
            *out = d.bits == 16 ? CF_FLOAT16 : d.bits == 32 ? CF_FLOAT32 : CF_FLOAT64;
            ok = d.bits == 16 || d.bits == 32 || d.bits == 64;
            break;
        case kDLBfloat: /* torch.bfloat16, JAX's bfloat16 */
            *out = CF_BFLOAT16;
            ok = d.bits == 16;
            break;
        case kDLComplex:
            *out = d.bits == 64 ? CF_COMPLEX64 : CF_COMPLEX128;
            ok = d.bits == 64 || d.bits == 128;
            break;
        default: ok = 0; break;
        }
    }
    if (ok || argname == NULL)
        return ok ? 0 : -1;
    PyErr_Format(PyExc_TypeError,
                 "%s: DLPack dtype (code %d%s, %d bits, %d lanes) is not supported by cufunc",
                 argname, (int)d.code, d.code == kDLBfloat ? " = bfloat" : "", (int)d.bits,
                 (int)d.lanes);
    return -1;
}
