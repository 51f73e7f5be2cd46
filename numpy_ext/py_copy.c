/* py_copy.c: the bytes of DeviceArrays moved: copies between host and device (copy_to_host,
 * copy_to_device, __array__, cuda.to_device, device_array_like), and indexing, whose element reads
 * and writes are copies.
 *
 * Copies: contiguous data of the same order moves as one byte copy. Any other layout moves the
 * byte span the view touches and rearranges it on the host with NumPy (device-to-host: span, then
 * a strided NumPy view is copied out; host-to-device into a strided view: read the span, write the
 * elements into it, write the span back). Host arrays are read as bytes, so unaligned arrays are
 * copied correctly.
 *
 * `stream=0` orders work on the array's own stream (the stream it was made with; the legacy
 * default stream if none) and returns when the copy is complete, as Numba does; an explicit stream
 * makes copies to or from pinned host memory asynchronous. */
#include "py_copy.h"
#include "py_foreign.h"
#include "py_stream.h"

#include <stdio.h>
#include <string.h>

/* ---- copies ---------------------------------------------------------------------------------- */

static int memcpy_htod(cf_stream *s, uint64_t dst, const void *src, size_t n, int sync)
{
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_memcpy_htod(s, dst, src, n, sync);
    cf_context_restore(); /* the array's device may not be the current one (runtime.h) */
    Py_END_ALLOW_THREADS
    return st == CF_OK ? 0 : cf_py_fail(st, "copy to device");
}

static int memcpy_dtoh(cf_stream *s, void *dst, uint64_t src, size_t n, int sync)
{
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_memcpy_dtoh(s, dst, src, n, sync);
    cf_context_restore();
    Py_END_ALLOW_THREADS
    return st == CF_OK ? 0 : cf_py_fail(st, "copy to host");
}

/* The bytes [data+lo, data+hi) of a view, read into a new host buffer (synchronously), and a NumPy
 * view over it with the view's shape and strides (`*elements`, writeable). */
static PyArrayObject *read_span(const cf_array *v, cf_stream *s, PyArrayObject **elements,
                                int64_t *lo_out)
{
    int64_t lo, hi;
    npy_intp len;
    PyArrayObject *buf;
    PyArray_Descr *descr;
    PyObject *view;
    cf_array_byte_bounds(v, &lo, &hi);
    len = (npy_intp)(hi - lo);
    buf = (PyArrayObject *)PyArray_SimpleNew(1, &len, NPY_UINT8);
    if (buf == NULL)
        return NULL;
    if (len > 0 && memcpy_dtoh(s, PyArray_DATA(buf), v->data + (uint64_t)lo, (size_t)len, 1) < 0)
        goto fail;
    descr = cf_py_descr_from_dtype(v->dtype);
    if (descr == NULL)
        goto fail;
    view = PyArray_NewFromDescr(&PyArray_Type, descr, v->ndim, (npy_intp *)v->shape,
                                (npy_intp *)v->strides, (char *)PyArray_DATA(buf) - lo,
                                NPY_ARRAY_WRITEABLE, NULL);
    if (view == NULL)
        goto fail;
    Py_INCREF(buf);
    if (PyArray_SetBaseObject((PyArrayObject *)view, (PyObject *)buf) < 0) {
        Py_DECREF(view);
        goto fail;
    }
    *elements = (PyArrayObject *)view;
    *lo_out = lo;
    return buf;
fail:
    Py_DECREF(buf);
    return NULL;
}

/* Device view -> host array of the same shape and dtype (any layouts on both sides). */
static int copy_d2h(PyArrayObject *dst, const cf_array *src, cf_stream *s, int sync)
{
    int64_t nbytes = cf_array_nbytes(src), lo;
    PyArrayObject *buf, *elements;
    int r;
    if (nbytes == 0)
        return 0;
    if ((cf_array_is_c_contiguous(src) && PyArray_IS_C_CONTIGUOUS(dst)) ||
        (cf_array_is_f_contiguous(src) && PyArray_IS_F_CONTIGUOUS(dst)))
        return memcpy_dtoh(s, PyArray_DATA(dst), src->data, (size_t)nbytes, sync);
    buf = read_span(src, s, &elements, &lo);
    if (buf == NULL)
        return -1;
    r = PyArray_CopyInto(dst, elements);
    Py_DECREF(elements);
    Py_DECREF(buf);
    return r;
}

/* Host array (same shape and dtype) -> device view (any layouts). */
static int copy_h2d(const cf_array *dst, PyArrayObject *src, cf_stream *s, int sync)
{
    int64_t nbytes = cf_array_nbytes(dst), lo;
    PyArrayObject *buf, *elements, *c;
    int r, flags = 0;
    if (nbytes == 0)
        return 0;
    if (cf_array_is_c_contiguous(dst))
        flags = NPY_ARRAY_C_CONTIGUOUS;
    else if (cf_array_is_f_contiguous(dst))
        flags = NPY_ARRAY_F_CONTIGUOUS;
    if (flags) {
        /* No ALIGNED requirement: bytes are copied as bytes. A temporary contiguous copy, when one
         * is made, is pageable memory, which the core has consumed when the call returns. */
        Py_INCREF(PyArray_DESCR(src));
        c = (PyArrayObject *)PyArray_FromArray(src, PyArray_DESCR(src), flags);
        if (c == NULL)
            return -1;
        r = memcpy_htod(s, dst->data, PyArray_DATA(c), (size_t)nbytes, sync);
        Py_DECREF(c);
        return r;
    }
    /* A strided destination: read the span, write the elements into it, write it back. The bytes
     * between the elements are written back unchanged (ordered on the same stream). */
    buf = read_span(dst, s, &elements, &lo);
    if (buf == NULL)
        return -1;
    r = PyArray_CopyInto(elements, src);
    if (r == 0)
        r = memcpy_htod(s, dst->data + (uint64_t)lo, PyArray_DATA(buf), (size_t)PyArray_NBYTES(buf),
                        1);
    Py_DECREF(elements);
    Py_DECREF(buf);
    return r;
}

/* Device view -> device view on the same device (same shape and dtype). */
static int copy_d2d(const cf_array *dst, const cf_array *src, cf_stream *s)
{
    int64_t nbytes = cf_array_nbytes(dst);
    PyArrayObject *tmp;
    PyArray_Descr *descr;
    int r;
    cf_status st;
    if (nbytes == 0)
        return 0;
    if ((cf_array_is_c_contiguous(dst) && cf_array_is_c_contiguous(src)) ||
        (cf_array_is_f_contiguous(dst) && cf_array_is_f_contiguous(src))) {
        if (dst->data == src->data)
            return 0;
        if (!cf_array_may_overlap(dst, src)) {
            st = cf_memcpy_dtod(s, dst->data, src->data, (size_t)nbytes);
            cf_context_restore();
            return st == CF_OK ? 0 : cf_py_fail(st, "device-to-device copy");
        }
    }
    /* Different layouts, or overlapping: through the host (correct; not fast). */
    descr = cf_py_descr_from_dtype(src->dtype);
    if (descr == NULL)
        return -1;
    tmp = (PyArrayObject *)PyArray_Empty(src->ndim, (npy_intp *)src->shape, descr, 0);
    if (tmp == NULL)
        return -1;
    r = copy_d2h(tmp, src, s, 1);
    if (r == 0)
        r = copy_h2d(dst, tmp, s, 1);
    Py_DECREF(tmp);
    return r;
}

/* The stream for an operation on `self` given a checked `stream=` argument: 0 / None means the
 * array's own stream, synchronously. `*resolved` gets a new reference (a Stream or None). The
 * stream is ordered after the work that last wrote self's memory, and, when the operation
 * `writes`, becomes that work's stream. */
static int array_stream(CfPyDeviceArray *self, PyObject *arg, PyObject **resolved, cf_stream **s,
                        int *sync, int writes, const char *argname)
{
    int is_zero = (arg == NULL || arg == Py_None);
    if (!is_zero && PyLong_Check(arg) && !PyBool_Check(arg)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(arg, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        is_zero = (v == 0 && !overflow);
    }
    if (is_zero) {
        *resolved = self->stream ? self->stream : Py_None;
        Py_INCREF(*resolved);
        *sync = 1;
    } else {
        *resolved = cf_py_stream_resolve(arg, self->view.device, argname);
        if (*resolved == NULL)
            return -1;
        *sync = 0;
    }
    if (cf_py_stream_get(*resolved, self->view.device, s) < 0 ||
        cf_py_order_operand((PyObject *)self, self->view.device, *resolved, *s, writes) < 0) {
        Py_CLEAR(*resolved);
        return -1;
    }
    return 0;
}

static int same_shape(const cf_array *a, int ndim, const int64_t *shape)
{
    int i;
    if (a->ndim != ndim)
        return 0;
    for (i = 0; i < ndim; i++)
        if (a->shape[i] != shape[i])
            return 0;
    return 1;
}

/* Equal after dropping extents of 1 (Numba's rule for copy_to_device). */
static int same_squeezed_shape(int na, const int64_t *a, int nb, const int64_t *b)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < na && a[i] == 1)
            i++;
        while (j < nb && b[j] == 1)
            j++;
        if (i == na || j == nb)
            return i == na && j == nb;
        if (a[i] != b[j])
            return 0;
        i++;
        j++;
    }
}

static PyObject *shape_repr(int ndim, const int64_t *shape)
{
    return cf_py_tuple_from_int64(ndim, shape);
}

/* ---- indexing -------------------------------------------------------------------------------- */

enum { IX_INT, IX_SLICE, IX_NONE, IX_ELLIPSIS };

static int classify_index(PyObject *it, int *kind)
{
    if (it == Py_None) {
        *kind = IX_NONE;
        return 0;
    }
    if (it == Py_Ellipsis) {
        *kind = IX_ELLIPSIS;
        return 0;
    }
    if (PySlice_Check(it)) {
        *kind = IX_SLICE;
        return 0;
    }
    if (PyBool_Check(it) || PyArray_IsScalar(it, Bool)) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "boolean indices are not supported on device arrays; copy to the host "
                        "first (copy_to_host())");
        return -1;
    }
    if (PyArray_Check(it)) {
        PyArrayObject *a = (PyArrayObject *)it;
        if (PyArray_NDIM(a) == 0 && PyArray_ISINTEGER(a)) {
            *kind = IX_INT;
            return 0;
        }
        PyErr_SetString(PyExc_NotImplementedError,
                        "array (advanced) indexing is not supported on device arrays; copy to the "
                        "host first (copy_to_host())");
        return -1;
    }
    if (PyList_Check(it) || PyTuple_Check(it) || cf_py_is_device_object(it)) {
        PyErr_SetString(PyExc_NotImplementedError,
                        "sequence or array (advanced) indexing is not supported on device arrays; "
                        "copy to the host first (copy_to_host())");
        return -1;
    }
    if (PyIndex_Check(it)) {
        *kind = IX_INT;
        return 0;
    }
    PyErr_Format(PyExc_IndexError,
                 "only integers, slices (`:`), ellipsis (`...`) and None (`numpy.newaxis`) are "
                 "valid indices of a device array, got %.200s",
                 Py_TYPE(it)->tp_name);
    return -1;
}

/* Apply `key` to `self`'s view. `*is_scalar`: every axis indexed by an integer (NumPy gives a
 * scalar then). */
static int index_view(const cf_array *a, PyObject *key, cf_array *out, int *is_scalar)
{
    PyObject *single[1];
    PyObject **items;
    Py_ssize_t n, k;
    int kinds[2 * CF_MAX_DIMS + 2];
    int n_int = 0, n_slice = 0, n_none = 0, n_ell = 0, src = 0, o = 0, i;
    uint64_t data = a->data;

    if (PyTuple_Check(key)) {
        items = &PyTuple_GET_ITEM(key, 0);
        n = PyTuple_GET_SIZE(key);
    } else {
        single[0] = key;
        items = single;
        n = 1;
    }
    if (n > (Py_ssize_t)(sizeof kinds / sizeof kinds[0])) {
        PyErr_Format(PyExc_IndexError, "too many indices (%zd)", n);
        return -1;
    }
    for (k = 0; k < n; k++) {
        if (classify_index(items[k], &kinds[k]) < 0)
            return -1;
        switch (kinds[k]) {
        case IX_INT: n_int++; break;
        case IX_SLICE: n_slice++; break;
        case IX_NONE: n_none++; break;
        default: n_ell++; break;
        }
    }
    if (n_ell > 1) {
        PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
        return -1;
    }
    if (n_int + n_slice > a->ndim) {
        PyErr_Format(PyExc_IndexError,
                     "too many indices for array: array is %d-dimensional, but %d were indexed",
                     a->ndim, n_int + n_slice);
        return -1;
    }
    if (a->ndim - n_int + n_none > CF_MAX_DIMS) {
        PyErr_Format(PyExc_IndexError, "the result would have more than %d dimensions",
                     CF_MAX_DIMS);
        return -1;
    }
    for (k = 0; k < n; k++) {
        PyObject *it = items[k];
        switch (kinds[k]) {
        case IX_INT: {
            Py_ssize_t idx = PyNumber_AsSsize_t(it, PyExc_IndexError), orig = idx;
            if (idx == -1 && PyErr_Occurred())
                return -1;
            if (idx < 0)
                idx += (Py_ssize_t)a->shape[src];
            if (idx < 0 || idx >= (Py_ssize_t)a->shape[src]) {
                PyErr_Format(PyExc_IndexError,
                             "index %zd is out of bounds for axis %d with size %lld", orig, src,
                             (long long)a->shape[src]);
                return -1;
            }
            data += (uint64_t)((int64_t)idx * a->strides[src]);
            src++;
            break;
        }
        case IX_SLICE: {
            Py_ssize_t start, stop, step, len;
            if (PySlice_Unpack(it, &start, &stop, &step) < 0)
                return -1;
            len = PySlice_AdjustIndices((Py_ssize_t)a->shape[src], &start, &stop, step);
            out->shape[o] = len;
            out->strides[o] = a->strides[src] * step;
            if (len > 0)
                data += (uint64_t)((int64_t)start * a->strides[src]);
            o++;
            src++;
            break;
        }
        case IX_NONE:
            out->shape[o] = 1;
            out->strides[o] = 0;
            o++;
            break;
        default:
            for (i = 0; i < a->ndim - n_int - n_slice; i++, o++, src++) {
                out->shape[o] = a->shape[src];
                out->strides[o] = a->strides[src];
            }
            break;
        }
    }
    for (; src < a->ndim; src++, o++) {
        out->shape[o] = a->shape[src];
        out->strides[o] = a->strides[src];
    }
    out->ndim = o;
    out->data = data;
    out->dtype = a->dtype;
    out->device = a->device;
    *is_scalar = (n_int == a->ndim && n_slice == 0 && n_none == 0 && n_ell == 0);
    return 0;
}

static PyObject *read_scalar(CfPyDeviceArray *self, const cf_array *v)
{
    /* Aligned for every supported dtype. */
    union {
        unsigned char bytes[16];
        double d;
        long long ll;
    } buf;
    cf_stream *s;
    PyObject *resolved;
    int sync;
    if (array_stream(self, NULL, &resolved, &s, &sync, 0, "stream") < 0)
        return NULL;
    Py_DECREF(resolved);
    if (memcpy_dtoh(s, buf.bytes, v->data, cf_dtype_size(v->dtype), 1) < 0)
        return NULL;
    return PyArray_Scalar(buf.bytes, self->descr, NULL);
}

static PyObject *da_subscript(CfPyDeviceArray *self, PyObject *key)
{
    cf_array v;
    int is_scalar;
    if (index_view(&self->view, key, &v, &is_scalar) < 0)
        return NULL;
    if (is_scalar)
        return read_scalar(self, &v);
    return cf_py_devicearray_wrap(&v, self->base, self->stream, self->readonly);
}

static PyObject *da_item(CfPyDeviceArray *self, Py_ssize_t i)
{
    PyObject *key = PyLong_FromSsize_t(i), *r;
    if (key == NULL)
        return NULL;
    r = da_subscript(self, key);
    Py_DECREF(key);
    return r;
}

/* Write `value` (anything NumPy can cast and broadcast, or a device array of the same shape and
 * dtype) into the view v of self. */
static int assign_view(CfPyDeviceArray *self, const cf_array *v, PyObject *value,
                       const char *what)
{
    cf_stream *s;
    PyObject *resolved;
    int sync, r;
    if (self->readonly) {
        PyErr_Format(PyExc_ValueError, "%s: the device array is read-only", what);
        return -1;
    }
    if (cf_py_is_device_object(value)) {
        cf_array src;
        PyObject *keep;
        if (cf_py_device_view(value, &src, &keep, 1, "value") < 0)
            return -1;
        if (src.device != v->device || src.dtype != v->dtype || !same_shape(&src, v->ndim, v->shape)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: a device value must have the destination's device (%d), dtype (%s) "
                         "and shape; copy it to the host to broadcast or cast it",
                         what, v->device, cf_dtype_name(v->dtype));
            Py_DECREF(keep);
            return -1;
        }
        if (array_stream(self, NULL, &resolved, &s, &sync, 1, "stream") < 0) {
            Py_DECREF(keep);
            return -1;
        }
        r = cf_py_order_operand(keep, v->device, resolved, s, 0);
        if (r == 0)
            r = copy_d2d(v, &src, s);
        Py_DECREF(resolved);
        Py_DECREF(keep);
        return r;
    } else {
        PyArrayObject *tmp;
        Py_INCREF(self->descr);
        tmp = (PyArrayObject *)PyArray_Empty(v->ndim, (npy_intp *)v->shape, self->descr, 0);
        if (tmp == NULL)
            return -1;
        if (PyArray_CopyObject(tmp, value) < 0) {
            Py_DECREF(tmp);
            return -1;
        }
        if (array_stream(self, NULL, &resolved, &s, &sync, 1, "stream") < 0) {
            Py_DECREF(tmp);
            return -1;
        }
        r = copy_h2d(v, tmp, s, 1);
        Py_DECREF(resolved);
        Py_DECREF(tmp);
        return r;
    }
}

static int da_ass_subscript(CfPyDeviceArray *self, PyObject *key, PyObject *value)
{
    cf_array v;
    int is_scalar;
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "cannot delete elements of a device array");
        return -1;
    }
    if (index_view(&self->view, key, &v, &is_scalar) < 0)
        return -1;
    return assign_view(self, &v, value, "__setitem__");
}

static Py_ssize_t da_length(CfPyDeviceArray *self)
{
    if (self->view.ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of unsized object");
        return -1;
    }
    return (Py_ssize_t)self->view.shape[0];
}
/* ---- copy methods ---------------------------------------------------------------------------- */

static PyObject *new_host_like(CfPyDeviceArray *self)
{
    int fortran = cf_array_is_f_contiguous(&self->view) && !cf_array_is_c_contiguous(&self->view);
    Py_INCREF(self->descr);
    return PyArray_Empty(self->view.ndim, (npy_intp *)self->view.shape, self->descr, fortran);
}

static PyObject *da_copy_to_host(CfPyDeviceArray *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"ary", "stream", NULL};
    PyObject *ary = Py_None, *stream = NULL, *resolved, *dst;
    cf_stream *s;
    int sync;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:copy_to_host", kwlist, &ary, &stream))
        return NULL;
    if (cf_py_stream_check(stream, "copy_to_host: stream") < 0)
        return NULL;
    if (ary != Py_None) {
        PyArrayObject *a;
        if (!PyArray_Check(ary)) {
            PyErr_Format(PyExc_TypeError, "copy_to_host: ary must be a NumPy array, got %.200s",
                         Py_TYPE(ary)->tp_name);
            return NULL;
        }
        a = (PyArrayObject *)ary;
        if (!PyArray_EquivTypes(PyArray_DESCR(a), self->descr)) {
            PyErr_Format(PyExc_TypeError, "copy_to_host: ary has dtype %R, the device array %R",
                         (PyObject *)PyArray_DESCR(a), (PyObject *)self->descr);
            return NULL;
        }
        if (!same_shape(&self->view, PyArray_NDIM(a), (int64_t *)PyArray_SHAPE(a))) {
            PyObject *hs = shape_repr(PyArray_NDIM(a), (int64_t *)PyArray_SHAPE(a));
            PyObject *ds = shape_repr(self->view.ndim, self->view.shape);
            if (hs && ds)
                PyErr_Format(PyExc_ValueError, "copy_to_host: ary has shape %R, the device array %R",
                             hs, ds);
            Py_XDECREF(hs);
            Py_XDECREF(ds);
            return NULL;
        }
        if (PyArray_FailUnlessWriteable(a, "copy_to_host: ary") < 0)
            return NULL;
        Py_INCREF(ary);
        dst = ary;
    } else {
        dst = new_host_like(self);
        if (dst == NULL)
            return NULL;
    }
    if (cf_py_cuda_init("copy_to_host") < 0 ||
        array_stream(self, stream, &resolved, &s, &sync, 0, "copy_to_host: stream") < 0) {
        Py_DECREF(dst);
        return NULL;
    }
    if (copy_d2h((PyArrayObject *)dst, &self->view, s, sync) < 0) {
        Py_DECREF(resolved);
        Py_DECREF(dst);
        return NULL;
    }
    Py_DECREF(resolved);
    return dst;
}

/* Copy `ary` (host array-like, DeviceArray or CAI object) into all of `self`. */
static int copy_into(CfPyDeviceArray *self, PyObject *ary, PyObject *stream, const char *what)
{
    char argname[64];
    PyObject *resolved;
    cf_stream *s;
    int sync, r;
    snprintf(argname, sizeof argname, "%s: ary", what);
    if (self->readonly) {
        PyErr_Format(PyExc_ValueError, "%s: the device array is read-only", what);
        return -1;
    }
    if (cf_py_is_device_object(ary)) {
        cf_array src;
        PyObject *keep;
        if (cf_py_device_view(ary, &src, &keep, 1, argname) < 0)
            return -1;
        if (src.device != self->view.device) {
            PyErr_Format(PyExc_ValueError,
                         "%s: ary lives on device %d, the destination on device %d; copy through "
                         "the host (ary.copy_to_host())",
                         what, src.device, self->view.device);
            goto dev_fail;
        }
        if (src.dtype != self->view.dtype) {
            PyErr_Format(PyExc_TypeError, "%s: ary has dtype %s, the destination %s", what,
                         cf_dtype_name(src.dtype), cf_dtype_name(self->view.dtype));
            goto dev_fail;
        }
        if (!same_squeezed_shape(src.ndim, src.shape, self->view.ndim, self->view.shape)) {
            PyObject *a = shape_repr(src.ndim, src.shape);
            PyObject *b = shape_repr(self->view.ndim, self->view.shape);
            if (a && b)
                PyErr_Format(PyExc_ValueError, "%s: ary has shape %R, the destination %R",
                             what, a, b);
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto dev_fail;
        }
        if (!same_shape(&src, self->view.ndim, self->view.shape)) {
            /* Only extents of 1 differ: drop and re-insert them (strides of extent-1 axes are
             * irrelevant), which is a view. */
            cf_array re = self->view;
            int i, j = 0;
            for (i = 0; i < re.ndim; i++) {
                if (re.shape[i] == 1) {
                    re.strides[i] = 0;
                    continue;
                }
                while (src.shape[j] == 1)
                    j++;
                re.strides[i] = src.strides[j++];
            }
            re.data = src.data;
            src = re;
        }
        if (array_stream(self, stream, &resolved, &s, &sync, 1, "stream") < 0)
            goto dev_fail;
        r = cf_py_order_operand(keep, src.device, resolved, s, 0);
        if (r == 0)
            r = copy_d2d(&self->view, &src, s);
        Py_DECREF(resolved);
        Py_DECREF(keep);
        return r;
    dev_fail:
        Py_DECREF(keep);
        return -1;
    } else {
        PyArrayObject *host = (PyArrayObject *)PyArray_FROM_O(ary);
        cf_dtype dt;
        if (host == NULL)
            return -1;
        if (cf_py_dtype_from_descr(PyArray_DESCR(host), &dt, argname) < 0)
            goto host_fail;
        if (dt != self->view.dtype) {
            PyErr_Format(PyExc_TypeError, "%s: ary has dtype %s, the destination %s", what,
                         cf_dtype_name(dt), cf_dtype_name(self->view.dtype));
            goto host_fail;
        }
        if (!same_shape(&self->view, PyArray_NDIM(host), (int64_t *)PyArray_SHAPE(host))) {
            PyArray_Dims dims = {(npy_intp *)self->view.shape, self->view.ndim};
            PyObject *re;
            if (!same_squeezed_shape(PyArray_NDIM(host), (int64_t *)PyArray_SHAPE(host),
                                     self->view.ndim, self->view.shape)) {
                PyObject *a = shape_repr(PyArray_NDIM(host), (int64_t *)PyArray_SHAPE(host));
                PyObject *b = shape_repr(self->view.ndim, self->view.shape);
                if (a && b)
                    PyErr_Format(PyExc_ValueError, "%s: ary has shape %R, the destination %R",
                                 what, a, b);
                Py_XDECREF(a);
                Py_XDECREF(b);
                goto host_fail;
            }
            re = PyArray_Newshape(host, &dims, NPY_ANYORDER);
            if (re == NULL)
                goto host_fail;
            Py_DECREF(host);
            host = (PyArrayObject *)re;
        }
        if (cf_py_cuda_init(what) < 0 ||
            array_stream(self, stream, &resolved, &s, &sync, 1, "stream") < 0)
            goto host_fail;
        r = copy_h2d(&self->view, host, s, sync);
        Py_DECREF(resolved);
        Py_DECREF(host);
        return r;
    host_fail:
        Py_DECREF(host);
        return -1;
    }
}

static PyObject *da_copy_to_device(CfPyDeviceArray *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"ary", "stream", NULL};
    PyObject *ary, *stream = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:copy_to_device", kwlist, &ary, &stream))
        return NULL;
    if (cf_py_stream_check(stream, "copy_to_device: stream") < 0)
        return NULL;
    if (copy_into(self, ary, stream, "copy_to_device") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *da_array(CfPyDeviceArray *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None, *host, *r, *empty;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", kwlist, &dtype, &copy))
        return NULL;
    if (copy != Py_None) {
        int c = PyObject_IsTrue(copy);
        if (c < 0)
            return NULL;
        if (!c) {
            PyErr_SetString(PyExc_ValueError,
                            "a device array cannot be viewed as a NumPy array without a copy "
                            "(copy=False was asked); use copy_to_host()");
            return NULL;
        }
    }
    empty = PyTuple_New(0);
    if (empty == NULL)
        return NULL;
    host = da_copy_to_host(self, empty, NULL);
    Py_DECREF(empty);
    if (host == NULL || dtype == Py_None)
        return host;
    r = PyObject_CallMethod(host, "astype", "O", dtype);
    Py_DECREF(host);
    return r;
}

/* ---- module functions ------------------------------------------------------------------------ */

static PyObject *py_device_array(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "dtype", "order", "stream", NULL};
    PyObject *shape_obj, *dtype_obj = Py_None, *order_obj = Py_None, *stream = NULL, *resolved, *r;
    int ndim, device;
    int64_t shape[CF_MAX_DIMS];
    cf_dtype dt;
    char order;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO:device_array", kwlist, &shape_obj,
                                     &dtype_obj, &order_obj, &stream))
        return NULL;
    if (cf_py_parse_shape(shape_obj, &ndim, shape, "device_array: shape") < 0 ||
        cf_py_dtype_from_object(dtype_obj, &dt, NULL, "device_array: dtype") < 0 ||
        cf_py_check_nbytes(ndim, shape, cf_dtype_size(dt), "device_array: shape") < 0 ||
        cf_py_parse_order(order_obj, &order, "device_array: order") < 0 ||
        cf_py_stream_check(stream, "device_array: stream") < 0)
        return NULL;
    if (cf_py_stream_device(stream, &device, "device_array") < 0)
        return NULL;
    resolved = cf_py_stream_resolve(stream, device, "device_array: stream");
    if (resolved == NULL)
        return NULL;
    r = cf_py_devicearray_alloc(ndim, shape, dt, order, device, resolved);
    Py_DECREF(resolved);
    return r;
}

static PyObject *py_device_array_like(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"ary", "stream", NULL};
    PyObject *ary, *stream = NULL, *resolved, *r, *host = NULL;
    cf_array v;
    char order = 'C';
    int device;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:device_array_like", kwlist, &ary, &stream))
        return NULL;
    if (cf_py_stream_check(stream, "device_array_like: stream") < 0)
        return NULL;
    if (cf_py_is_device_object(ary)) {
        PyObject *keep;
        if (cf_py_device_view(ary, &v, &keep, 0, "device_array_like: ary") < 0)
            return NULL;
        Py_DECREF(keep);
        if (cf_array_is_f_contiguous(&v) && !cf_array_is_c_contiguous(&v))
            order = 'F';
    } else {
        PyArrayObject *h;
        host = PyArray_FROM_O(ary);
        if (host == NULL)
            return NULL;
        h = (PyArrayObject *)host;
        if (cf_py_dtype_from_descr(PyArray_DESCR(h), &v.dtype, "device_array_like: ary") < 0) {
            Py_DECREF(host);
            return NULL;
        }
        v.ndim = PyArray_NDIM(h);
        memcpy(v.shape, PyArray_SHAPE(h), sizeof(int64_t) * (size_t)v.ndim);
        if (PyArray_IS_F_CONTIGUOUS(h) && !PyArray_IS_C_CONTIGUOUS(h))
            order = 'F';
        Py_DECREF(host);
    }
    if (cf_py_stream_device(stream, &device, "device_array_like") < 0)
        return NULL;
    resolved = cf_py_stream_resolve(stream, device, "device_array_like: stream");
    if (resolved == NULL)
        return NULL;
    r = cf_py_devicearray_alloc(v.ndim, v.shape, v.dtype, order, device, resolved);
    Py_DECREF(resolved);
    return r;
}

static PyObject *py_to_device(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"ary", "stream", "copy", "to", NULL};
    PyObject *ary, *stream = NULL, *to = Py_None, *resolved, *r;
    PyArrayObject *host;
    int copy = 1, device;
    cf_dtype dt;
    char order;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OpO:to_device", kwlist, &ary, &stream, &copy,
                                     &to))
        return NULL;
    if (cf_py_stream_check(stream, "to_device: stream") < 0)
        return NULL;
    if (to != Py_None) {
        if (!CfPyDeviceArray_Check(to)) {
            PyErr_Format(PyExc_TypeError, "to_device: to must be a device array, got %.200s",
                         Py_TYPE(to)->tp_name);
            return NULL;
        }
        if (copy && copy_into((CfPyDeviceArray *)to, ary, stream, "to_device") < 0)
            return NULL;
        Py_INCREF(to);
        return to;
    }
    if (CfPyDeviceArray_Check(ary)) {
        Py_INCREF(ary);
        return ary;
    }
    if (cf_py_is_device_object(ary))
        return cf_py_as_cuda_array(ary, 1, "to_device: ary");
    host = (PyArrayObject *)PyArray_FROM_O(ary);
    if (host == NULL)
        return NULL;
    if (cf_py_dtype_from_descr(PyArray_DESCR(host), &dt, "to_device: ary") < 0 ||
        cf_py_stream_device(stream, &device, "to_device") < 0) {
        Py_DECREF(host);
        return NULL;
    }
    order = (PyArray_IS_F_CONTIGUOUS(host) && !PyArray_IS_C_CONTIGUOUS(host)) ? 'F' : 'C';
    resolved = cf_py_stream_resolve(stream, device, "to_device: stream");
    if (resolved == NULL) {
        Py_DECREF(host);
        return NULL;
    }
    r = cf_py_devicearray_alloc(PyArray_NDIM(host), (int64_t *)PyArray_SHAPE(host), dt, order,
                                device, resolved);
    if (r != NULL && copy) {
        cf_stream *s;
        int sync = (resolved == Py_None);
        if (cf_py_stream_get(resolved, device, &s) < 0 ||
            copy_h2d(&((CfPyDeviceArray *)r)->view, host, s, sync) < 0)
            Py_CLEAR(r);
    }
    Py_DECREF(resolved);
    Py_DECREF(host);
    return r;
}

PyMethodDef cf_py_copy_array_methods[] = {
    {"copy_to_host", (PyCFunction)(void (*)(void))da_copy_to_host, METH_VARARGS | METH_KEYWORDS,
     "copy_to_host($self, /, ary=None, stream=0)\n"
     "--\n"
     "\n"
     "Copy the array's data to host memory.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "ary : numpy.ndarray, optional\n"
     "    The host array to fill, of the same shape and dtype; a new one when not given.\n"
     CF_PY_DOC_STREAM("copy")
     "\n"
     "Returns\n"
     "-------\n"
     "numpy.ndarray\n"
     "    ``ary``, or a new NumPy array holding the data.\n"},
    {"copy_to_device", (PyCFunction)(void (*)(void))da_copy_to_device,
     METH_VARARGS | METH_KEYWORDS,
     "copy_to_device($self, /, ary, stream=0)\n"
     "--\n"
     "\n"
     "Copy a host or device array of the same shape and dtype into this array.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "ary : array_like\n"
     "    A NumPy array, a device array or an object with ``__cuda_array_interface__``.\n"
     CF_PY_DOC_STREAM("copy")},
    {"__array__", (PyCFunction)(void (*)(void))da_array, METH_VARARGS | METH_KEYWORDS,
     "A host copy, for np.asarray()."},
    {NULL, NULL, 0, NULL},
};

PyMappingMethods cf_py_devicearray_as_mapping = {
    .mp_length = (lenfunc)da_length,
    .mp_subscript = (binaryfunc)da_subscript,
    .mp_ass_subscript = (objobjargproc)da_ass_subscript,
};

PySequenceMethods cf_py_devicearray_as_sequence = {
    .sq_length = (lenfunc)da_length,
    .sq_item = (ssizeargfunc)da_item,
};

PyMethodDef cf_py_copy_methods[] = {
    {"device_array", (PyCFunction)(void (*)(void))py_device_array, METH_VARARGS | METH_KEYWORDS,
     "device_array($module, /, shape, dtype='float64', order='C', stream=0)\n"
     "--\n"
     "\n"
     "Allocate a device array without initialising it.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "shape : int or tuple of int\n"
     "    The shape.\n"
     "dtype : dtype_like, optional\n"
     "    The element type.\n"
     "order : {'C', 'F'}, optional\n"
     "    The memory layout: C (row-major) or Fortran (column-major).\n"
     CF_PY_DOC_STREAM("work")
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The new array, on the current device.\n"},
    {"device_array_like", (PyCFunction)(void (*)(void))py_device_array_like,
     METH_VARARGS | METH_KEYWORDS,
     "device_array_like($module, /, ary, stream=0)\n"
     "--\n"
     "\n"
     "Allocate a device array with another array's shape, dtype and order, uninitialised.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "ary : array_like\n"
     "    A NumPy or device array (its order is kept when it is C or Fortran contiguous).\n"
     CF_PY_DOC_STREAM("work")
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The new array, on the current device.\n"},
    {"to_device", (PyCFunction)(void (*)(void))py_to_device, METH_VARARGS | METH_KEYWORDS,
     "to_device($module, /, ary, stream=0, copy=True, to=None)\n"
     "--\n"
     "\n"
     "Copy a host array to the device.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "ary : array_like\n"
     "    A NumPy array (or anything ``numpy.asarray`` takes); a device array or an object with\n"
     "    ``__cuda_array_interface__`` is returned as a view, not copied.\n"
     CF_PY_DOC_STREAM("work")
     "copy : bool, optional\n"
     "    Copy the data (False: only allocate, as Numba's).\n"
     "to : DeviceNDArray, optional\n"
     "    An existing device array of the same shape and dtype to copy into.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The device array (``to`` when given). The copy is asynchronous when ``ary`` is in\n"
     "    page-locked memory and a stream is given.\n"},
    {NULL, NULL, 0, NULL},
};

