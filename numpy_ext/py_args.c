/* py_args.c: see py_args.h. */
#include "py_args.h"
#include "py_dlpack.h"

void cf_py_arg_reset(cf_py_arg *a, PyObject *obj)
{
    a->kind = CF_PY_ARG_SCALAR;
    a->view.ndim = 0;
    a->view.data = 0;
    a->view.device = -1;
    a->keep = NULL;
    a->dtype = CF_FLOAT64;
    a->weak = 0;
    a->pyscalar = 0;
    a->value = obj;
}

void cf_py_arg_clear(cf_py_arg *a) { Py_CLEAR(a->keep); }

int cf_py_arg_classify(PyObject *obj, cf_py_arg *a, const char *argname)
{
    cf_py_arg_reset(a, obj);
    /* a device array: cufunc's, or a foreign one through __cuda_array_interface__ (read once);
     * plain NumPy arrays and Python and NumPy scalars have none, so they skip the lookup. NumPy
     * subclasses are asked, by cf_py_is_device_object's rule: mapped and managed arrays are
     * device operands (used in place, fresh results stay DeviceArrays, as in Numba) */
    if (CfPyDeviceArray_Check(obj) ||
        !(PyArray_CheckExact(obj) || PyFloat_Check(obj) || PyLong_Check(obj) ||
          PyComplex_Check(obj) || PyArray_IsScalar(obj, Generic))) {
        int r = cf_py_device_view(obj, &a->view, &a->keep, CF_PY_VIEW_ORDER | CF_PY_VIEW_OPTIONAL,
                                  argname);
        if (r < 0)
            return -1;
        if (r == 0) {
            a->kind = CF_PY_ARG_DEVICE;
            a->dtype = a->view.dtype;
            return 0;
        }
    }
    /* NumPy scalars first: np.float64 and np.complex128 are also Python floats and complexes,
     * but they are strong (NEP 50), not weak */
    if (PyArray_IsScalar(obj, Generic)) {
        PyArray_Descr *d = PyArray_DescrFromScalar(obj);
        if (d == NULL)
            return -1;
        int r = cf_py_dtype_from_descr(d, &a->dtype, argname);
        Py_DECREF(d);
        return r;
    }
    if (PyBool_Check(obj)) {
        a->dtype = CF_BOOL;
        return 0;
    }
    if (PyLong_Check(obj) || PyFloat_Check(obj) || PyComplex_Check(obj)) {
        a->dtype = PyLong_Check(obj) ? CF_INT64 : PyFloat_Check(obj) ? CF_FLOAT64 : CF_COMPLEX128;
        a->weak = a->pyscalar = 1;
        return 0;
    }
    if (!PyArray_Check(obj) && PyObject_HasAttrString(obj, "__dlpack__")) {
        PyObject *dev = cf_py_from_dlpack(obj, NULL);
        if (dev == NULL)
            return -1;
        int r = cf_py_device_view(dev, &a->view, &a->keep, 0, argname);
        Py_DECREF(dev);
        if (r < 0)
            return -1;
        a->kind = CF_PY_ARG_DEVICE;
        a->dtype = a->view.dtype;
        return 0;
    }
    PyArrayObject *arr = (PyArrayObject *)PyArray_FROM_O(obj);
    if (arr == NULL)
        return -1;
    if (cf_py_dtype_from_descr(PyArray_DESCR(arr), &a->dtype, argname) < 0) {
        Py_DECREF(arr);
        return -1;
    }
    a->keep = (PyObject *)arr;
    if (PyArray_NDIM(arr) == 0) {
        a->value = (PyObject *)arr; /* a 0-d array is a strong scalar: its value is a parameter */
        return 0;
    }
    cf_py_arg_host_view(a, arr);
    return 0;
}

void cf_py_arg_host_view(cf_py_arg *a, PyArrayObject *arr)
{
    a->kind = CF_PY_ARG_HOST;
    a->view.data = (uint64_t)(uintptr_t)PyArray_DATA(arr);
    a->view.dtype = a->dtype;
    a->view.ndim = PyArray_NDIM(arr);
    a->view.device = -1;
    for (int k = 0; k < a->view.ndim; k++) {
        a->view.shape[k] = PyArray_DIM(arr, k);
        a->view.strides[k] = PyArray_STRIDE(arr, k);
    }
}

/* Whether a Python int fits integer dtype t (NEP 50's check). -1 with an exception on error. */
static int int_fits(PyObject *v, cf_dtype t)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0)
        return 0;
    if (overflow > 0) {
        if (t != CF_UINT64)
            return 0;
        PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        return 1;
    }
    switch (t) {
    case CF_INT8: return x >= -128 && x <= 127;
    case CF_INT16: return x >= -32768 && x <= 32767;
    case CF_INT32: return x >= INT32_MIN && x <= INT32_MAX;
    case CF_INT64: return 1;
    case CF_UINT8: return x >= 0 && x <= 255;
    case CF_UINT16: return x >= 0 && x <= 65535;
    case CF_UINT32: return x >= 0 && x <= (long long)UINT32_MAX;
    default: return x >= 0;
    }
}

int cf_py_arg_scalar(const cf_py_arg *a, cf_dtype t, cf_operand *op, const char *fname, int pos)
{
    memset(op, 0, sizeof *op);
    op->is_scalar = 1;
    cf_dtype as = a->pyscalar ? t : a->dtype;
    op->scalar_dtype = as;
    char kind = cf_dtype_kind(t);
    if (a->pyscalar && PyLong_Check(a->value) && (kind == 'i' || kind == 'u')) {
        int fits = int_fits(a->value, t);
        if (fits < 0)
            return -1;
        if (!fits) {
            PyErr_Format(PyExc_OverflowError, "Python integer %R out of bounds for %s (argument "
                         "%d of '%s')", a->value, cf_dtype_name(t), pos + 1, fname);
            return -1;
        }
    }
    /* the value converted through NumPy, which gives NEP 50's results (inf on float overflow) */
    PyArray_Descr *d = cf_py_descr_from_dtype(as);
    if (d == NULL)
        return -1;
    PyObject *arr = PyArray_FromAny(a->value, d, 0, 0, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST, NULL);
    if (arr == NULL)
        return -1;
    memcpy(op->scalar, PyArray_DATA((PyArrayObject *)arr), cf_dtype_size(as));
    Py_DECREF(arr);
    return 0;
}

int cf_py_arg_upload(cf_py_arg *a, cf_dtype as, int device, PyObject *stream, cf_stream *s)
{
    PyArray_Descr *d = cf_py_descr_from_dtype(as);
    if (d == NULL)
        return -1;
    PyArrayObject *c = (PyArrayObject *)PyArray_FromAny(
        a->keep, d, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST, NULL);
    if (c == NULL)
        return -1;
    int64_t shape[CF_MAX_DIMS];
    for (int k = 0; k < PyArray_NDIM(c); k++)
        shape[k] = PyArray_DIM(c, k);
    PyObject *dev = cf_py_devicearray_alloc(PyArray_NDIM(c), shape, as, 'C', device, stream);
    if (dev == NULL) {
        Py_DECREF(c);
        return -1;
    }
    CfPyDeviceArray *da = (CfPyDeviceArray *)dev;
    cf_status st = CF_OK;
    Py_BEGIN_ALLOW_THREADS
    st = cf_memcpy_htod(s, da->view.data, PyArray_DATA(c), (size_t)PyArray_NBYTES(c), 0);
    Py_END_ALLOW_THREADS
    Py_DECREF(c);
    if (st != CF_OK) {
        Py_DECREF(dev);
        return cf_py_fail(st, "copying an input to the device");
    }
    cf_py_view_copy(&a->view, &da->view);
    a->dtype = as;
    Py_SETREF(a->keep, dev);
    a->kind = CF_PY_ARG_DEVICE;
    return 0;
}

int cf_py_arg_copy(cf_py_arg *a, int device, PyObject *stream)
{
    PyObject *dev = cf_py_devicearray_alloc(a->view.ndim, a->view.shape, a->dtype, 'C', device,
                                            stream);
    if (dev == NULL)
        return -1;
    PyObject *src = cf_py_devicearray_wrap(&a->view, a->keep, stream, 1);
    PyObject *r = src ? PyObject_CallMethod(dev, "copy_to_device", "OO", src,
                                            stream ? stream : Py_None)
                      : NULL;
    Py_XDECREF(src);
    if (r == NULL) {
        Py_DECREF(dev);
        return -1;
    }
    Py_DECREF(r);
    cf_py_view_copy(&a->view, &((CfPyDeviceArray *)dev)->view);
    Py_SETREF(a->keep, dev);
    return 0;
}

int cf_py_args_order(cf_py_arg *in, int nin, cf_py_arg *out, int nout, const cf_py_arg *extra,
                     int device, PyObject *resolved, cf_stream *s)
{
    for (int i = 0; i < nin; i++)
        if (in[i].kind == CF_PY_ARG_DEVICE && in[i].keep != NULL &&
            cf_py_order_operand(in[i].keep, device, resolved, s, 0) < 0)
            return -1;
    if (extra != NULL && extra->kind == CF_PY_ARG_DEVICE && extra->keep != NULL &&
        cf_py_order_operand(extra->keep, device, resolved, s, 0) < 0)
        return -1;
    for (int o = 0; o < nout; o++)
        if (out[o].kind == CF_PY_ARG_DEVICE && out[o].keep != NULL &&
            cf_py_order_operand(out[o].keep, device, resolved, s, 1) < 0)
            return -1;
    return 0;
}

int cf_py_arrays_order(const CfPyDeviceArray *const *arr, int nin, int n, cf_stream *s)
{
    /* A DeviceArray is only read through, its memory's pending slot is what changes. */
    for (int i = 0; i < n; i++)
        if (cf_py_order_operand((PyObject *)arr[i], arr[i]->view.device, Py_None, s, i >= nin) < 0)
            return -1;
    return 0;
}

int cf_py_host_inputs_ready(int device)
{
    cf_stream *legacy;
    cf_status st;
    if (cf_py_stream_get(Py_None, device, &legacy) < 0)
        return -1;
    Py_BEGIN_ALLOW_THREADS
    st = cf_stream_synchronize_queued(legacy);
    Py_END_ALLOW_THREADS
    return st == CF_OK ? 0 : cf_py_fail(st, "waiting for the work that writes the host inputs");
}

int cf_py_call_positional(PyObject *const *args, Py_ssize_t n, int nin, int nout, const char *prefix,
                          const char *name, PyObject **inputs, PyObject **outs)
{
    if (n < nin || n > nin + nout) {
        PyErr_Format(PyExc_TypeError, "%s%s() takes from %d to %d positional arguments but %zd "
                     "were given", prefix, name, nin, nin + nout, n);
        return -1;
    }
    for (int i = 0; i < nin; i++)
        inputs[i] = args[i];
    for (Py_ssize_t i = nin; i < n; i++)
        outs[i - nin] = args[i];
    return 0;
}

int cf_py_call_out(PyObject *value, Py_ssize_t npos, int nin, int nout, const char *what,
                   const char *name, PyObject **outs)
{
    if (npos > nin) {
        PyErr_SetString(PyExc_TypeError, "cannot specify 'out' as both a positional and keyword "
                        "argument");
        return -1;
    }
    if (PyTuple_Check(value)) {
        if (PyTuple_GET_SIZE(value) != nout) {
            PyErr_Format(PyExc_ValueError, "The 'out' tuple must have exactly %d entries: one per "
                         "%s output", nout, what);
            return -1;
        }
        for (int o = 0; o < nout; o++)
            outs[o] = PyTuple_GET_ITEM(value, o);
        return 0;
    }
    if (nout == 1) {
        outs[0] = value;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "'out' must be a tuple of %d arrays for %s '%s'", nout, what,
                 name);
    return -1;
}

/* ---- NEP 50: which Python scalars stay weak (shared by every engine's loop resolution) ---- */

/* 0 bool, 1 integer (signed or unsigned), 2 float, 3 complex: NumPy's kinds, ordered (dtype.c's
 * kind order with signed and unsigned integers as one kind, as NEP 50 treats a Python int). */
void cf_py_args_nep50(cf_py_arg *in, int n)
{
    /* the rule is cf_loops_nep50 (cufunc/loops.h); a call has at most CF_SIG_MAX_ARGS inputs */
    cf_dtype dt[CF_SIG_MAX_ARGS];
    unsigned char weak[CF_SIG_MAX_ARGS];
    if (n > CF_SIG_MAX_ARGS)
        n = CF_SIG_MAX_ARGS;
    for (int i = 0; i < n; i++) {
        dt[i] = in[i].dtype;
        weak[i] = in[i].weak != 0;
    }
    cf_loops_nep50(n, dt, weak);
    for (int i = 0; i < n; i++)
        if (!weak[i])
            in[i].weak = 0; /* dtype is already int64, float64 or complex128 */
}

void cf_py_args_numba(cf_py_arg *in, int n)
{
    for (int i = 0; i < n; i++) {
        cf_py_arg *a = &in[i];
        int scalar = a->kind == CF_PY_ARG_SCALAR && a->value != NULL &&
                     (a->pyscalar || PyBool_Check(a->value) || PyArray_IsScalar(a->value, Number));
        a->weak = scalar;
        a->pyscalar |= scalar;
    }
}
