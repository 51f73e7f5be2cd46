/* py_devicearray.c: the DeviceArray object (cuda.DeviceNDArray): a strided view (cf_array) plus a
 * reference to what keeps its memory alive (`base`: a CfPyMemory, py_memory.c, or a foreign
 * object: a CuPy array, a PyTorch tensor). Views made by slicing, reshape and transpose share that
 * reference; nothing is copied. Here: making arrays (cf_py_devicearray_wrap, _alloc, the
 * DeviceArray(...) constructor), the ordering of work on an operand after the last write to its
 * memory (cf_py_order_operand), reshape/ravel/transpose/bind, the attributes and the export of
 * the CUDA Array Interface.
 *
 * The type object is defined here and completed by py_devicearray_type.c at module init: the
 * methods of the files above this one (copies and indexing: py_copy.c; DLPack: py_dlpack.c;
 * operators: py_twins.c; the Python-written ones: cufunc/_devarray.py) are joined to this
 * file's there, so that those files depend on this one and not the other way round.
 *
 * `stream=0` orders work on the array's own stream (the stream it was made with; the legacy
 * default stream if none), as Numba does. */
#include "py_devicearray.h"
#include "py_capturing.h"
#include "py_memory.h"

#include <string.h>

/* ---- views ----------------------------------------------------------------------------------- */

/* The next DeviceArray serial (the GIL is held: every DeviceArray is made under it). */
static uint64_t next_serial(void)
{
    static uint64_t last;
    return ++last;
}

PyObject *cf_py_devicearray_wrap(const cf_array *view, PyObject *base, PyObject *stream,
                                 int readonly)
{
    CfPyDeviceArray *self;
    PyArray_Descr *descr = cf_py_descr_from_dtype(view->dtype);
    if (descr == NULL)
        return NULL;
    self = PyObject_New(CfPyDeviceArray, &CfPyDeviceArray_Type);
    if (self == NULL) {
        Py_DECREF(descr);
        return NULL;
    }
    /* Only the used axes: the tail of the fixed arrays stays unread. */
    self->view.data = view->data;
    self->view.dtype = view->dtype;
    self->view.ndim = view->ndim;
    self->view.device = view->device;
    memcpy(self->view.shape, view->shape, sizeof(int64_t) * (size_t)view->ndim);
    memcpy(self->view.strides, view->strides, sizeof(int64_t) * (size_t)view->ndim);
    self->descr = descr;
    Py_XINCREF(base);
    self->base = base;
    self->stream = (stream != NULL && stream != Py_None) ? stream : NULL;
    Py_XINCREF(self->stream);
    self->readonly = readonly;
    self->weakreflist = NULL;
    self->serial = next_serial();
    return (PyObject *)self;
}

PyObject *cf_py_devicearray_alloc(int ndim, const int64_t *shape, cf_dtype dt, char order,
                                  int device, PyObject *stream)
{
    cf_array v;
    CfPyMemory *a;
    PyObject *r;
    cf_status st = cf_array_init_contiguous(&v, 0, dt, ndim, shape, order, device);
    if (st != CF_OK)
        return cf_py_raise(st == CF_ERR_RANGE ? CF_ERR_INVALID : st, "device_array: shape");
    a = cf_py_memory_alloc((size_t)cf_array_nbytes(&v), device, stream, "device_array", 0);
    if (a == NULL)
        return NULL;
    v.data = a->ptr;
    r = cf_py_devicearray_wrap(&v, (PyObject *)a, stream, 0);
    Py_DECREF(a);
    return r;
}

/* ---- ordering after the producer ------------------------------------------------------------ */

CfPyMemory *cf_py_memory_of(PyObject *obj)
{
    PyObject *base;
    if (!CfPyDeviceArray_Check(obj))
        return NULL;
    base = ((CfPyDeviceArray *)obj)->base;
    if (base != NULL && CfPyMemory_Check(base)) /* the common case, first */
        return (CfPyMemory *)base;
    /* a view made over another DeviceArray object (an internal copy's source) shares its memory */
    for (int depth = 0; base != NULL && CfPyDeviceArray_Check(base) && depth < 8; depth++)
        base = ((CfPyDeviceArray *)base)->base;
    return base != NULL && CfPyMemory_Check(base) ? (CfPyMemory *)base : NULL;
}

void cf_py_devicearray_mark_exposed(PyObject *obj)
{
    CfPyMemory *m = cf_py_memory_of(obj);
    if (m != NULL)
        m->exposed = 1;
}

PyObject *cf_py_pending_stream(PyObject *obj)
{
    CfPyMemory *m = cf_py_memory_of(obj);
    if (m != NULL)
        return m->pending;
    return CfPyDeviceArray_Check(obj) ? ((CfPyDeviceArray *)obj)->stream : NULL;
}

int cf_py_order_operand(PyObject *obj, int device, PyObject *resolved, cf_stream *s, int written)
{
    CfPyMemory *m = cf_py_memory_of(obj);
    PyObject *consumer = resolved == Py_None ? NULL : resolved;
    if (cf_py_capture_gate && s == cf_py_capturing) {
        /* A captured call waits for nothing outside its capture (a wait on an event recorded
         * outside would break it): a graph of cufunc's own is ordered when it is launched
         * (py_graph.c), a PyTorch or CuPy graph as their own kernels are, by the stream it is
         * replayed on. */
        cf_py_capture_note_memory((PyObject *)m, s);
        if (written && m != NULL && m->pending != consumer)
            cf_py_memory_written((PyObject *)m, consumer);
        return 0;
    }
    /* Untracked (foreign) memory counts as pending on the legacy default stream, after which its
     * producer's work was ordered when the operand was taken. */
    if (cf_py_stream_order_after(s, consumer, m ? m->pending : NULL, device) < 0)
        return -1;
    if (written && m != NULL && m->pending != consumer)
        cf_py_memory_written((PyObject *)m, consumer);
    return 0;
}

static void da_dealloc(CfPyDeviceArray *self)
{
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    Py_XDECREF(self->descr);
    Py_XDECREF(self->stream);
    Py_XDECREF(self->base);
    Py_TYPE(self)->tp_free((PyObject *)self);
}
/* ---- reshape, ravel, transpose ----------------------------------------------------------------
 * NumPy's rule (_attempt_nocopy_reshape): groups of old axes that merge into groups of new axes
 * must be laid out contiguously among themselves, in the order asked for. */
static int nocopy_reshape(const cf_array *a, int newnd, const int64_t *newdims, int64_t *newstrides,
                          int is_f_order)
{
    int64_t olddims[CF_MAX_DIMS], oldstrides[CF_MAX_DIMS], np_, op, last_stride;
    int oldnd = 0, oi, oj, ok, ni, nj, nk, i;
    for (i = 0; i < a->ndim; i++) {
        if (a->shape[i] != 1) {
            olddims[oldnd] = a->shape[i];
            oldstrides[oldnd] = a->strides[i];
            oldnd++;
        }
    }
    oi = 0;
    oj = 1;
    ni = 0;
    nj = 1;
    while (ni < newnd && oi < oldnd) {
        np_ = newdims[ni];
        op = olddims[oi];
        while (np_ != op) {
            if (np_ < op)
                np_ *= newdims[nj++];
            else
                op *= olddims[oj++];
        }
        for (ok = oi; ok < oj - 1; ok++) {
            if (is_f_order) {
                if (oldstrides[ok + 1] != olddims[ok] * oldstrides[ok])
                    return 0;
            } else if (oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]) {
                return 0;
            }
        }
        if (is_f_order) {
            newstrides[ni] = oldstrides[oi];
            for (nk = ni + 1; nk < nj; nk++)
                newstrides[nk] = newstrides[nk - 1] * newdims[nk - 1];
        } else {
            newstrides[nj - 1] = oldstrides[oj - 1];
            for (nk = nj - 1; nk > ni; nk--)
                newstrides[nk - 1] = newstrides[nk] * newdims[nk];
        }
        ni = nj++;
        oi = oj++;
    }
    last_stride = ni >= 1 ? newstrides[ni - 1] : (int64_t)cf_dtype_size(a->dtype);
    if (is_f_order && ni >= 1)
        last_stride *= newdims[ni - 1];
    for (nk = ni; nk < newnd; nk++)
        newstrides[nk] = last_stride;
    return 1;
}

/* shape arguments of reshape: (*ints) or one sequence; one -1 is inferred. */
static int parse_new_shape(CfPyDeviceArray *self, PyObject *args, int *ndim, int64_t *shape)
{
    PyObject *seq = args;
    Py_ssize_t n, i;
    int infer = -1;
    int64_t known = 1, size = cf_array_size(&self->view);
    if (PyTuple_GET_SIZE(args) == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, 0)))
        seq = PyTuple_GET_ITEM(args, 0);
    seq = PySequence_Fast(seq, "reshape: shape must be ints or a sequence of ints");
    if (seq == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n > CF_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "reshape: %zd dimensions, more than the %d supported", n,
                     CF_MAX_DIMS);
        goto fail;
    }
    for (i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t e;
        if (PyBool_Check(it) || !PyIndex_Check(it)) {
            PyErr_Format(PyExc_TypeError, "reshape: extent %R is not an integer", it);
            goto fail;
        }
        e = PyNumber_AsSsize_t(it, PyExc_ValueError);
        if (e == -1 && PyErr_Occurred())
            goto fail;
        if (e == -1) {
            if (infer >= 0) {
                PyErr_SetString(PyExc_ValueError, "reshape: can only specify one unknown dimension");
                goto fail;
            }
            infer = (int)i;
            shape[i] = 1;
            continue;
        }
        if (e < 0) {
            PyErr_Format(PyExc_ValueError, "reshape: negative extent %zd", e);
            goto fail;
        }
        shape[i] = e;
        if (e != 0 && known > INT64_MAX / e) {
            PyErr_SetString(PyExc_ValueError, "reshape: the new shape is too large");
            goto fail;
        }
        known *= e;
    }
    if (infer >= 0) {
        if (known == 0 || size % known != 0) {
            PyErr_Format(PyExc_ValueError, "cannot reshape array of size %lld into a shape with "
                         "%lld known elements",
                         (long long)size, (long long)known);
            goto fail;
        }
        shape[infer] = size / known;
        known = size;
    }
    if (known != size) {
        PyObject *t = cf_py_tuple_from_int64((int)n, shape);
        if (t != NULL) {
            PyErr_Format(PyExc_ValueError, "cannot reshape array of size %lld into shape %R",
                         (long long)size, t);
            Py_DECREF(t);
        }
        goto fail;
    }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

static PyObject *reshape_to(CfPyDeviceArray *self, int ndim, const int64_t *shape, char order,
                            const char *what)
{
    cf_array v = self->view;
    int i;
    v.ndim = ndim;
    for (i = 0; i < ndim; i++)
        v.shape[i] = shape[i];
    if (cf_array_size(&self->view) == 0) {
        int64_t acc = (int64_t)cf_dtype_size(v.dtype);
        for (i = 0; i < ndim; i++) {
            int ax = order == 'F' ? i : ndim - 1 - i;
            v.strides[ax] = acc;
            acc *= shape[ax] > 0 ? shape[ax] : 1;
        }
    } else if (!nocopy_reshape(&self->view, ndim, shape, v.strides, order == 'F')) {
        PyObject *st = cf_py_tuple_from_int64(self->view.ndim, self->view.strides);
        if (st != NULL) {
            PyErr_Format(PyExc_NotImplementedError,
                         "%s: the array's layout (strides %R) would need a copy in order '%c'; "
                         "device arrays are only reshaped without copying (copy it to a "
                         "contiguous array first)",
                         what, st, order);
            Py_DECREF(st);
        }
        return NULL;
    }
    return cf_py_devicearray_wrap(&v, self->base, self->stream, self->readonly);
}

static PyObject *da_reshape(CfPyDeviceArray *self, PyObject *args, PyObject *kwargs)
{
    PyObject *order_obj = NULL;
    char order;
    int ndim;
    int64_t shape[CF_MAX_DIMS];
    if (kwargs != NULL) {
        Py_ssize_t nk = PyDict_Size(kwargs);
        order_obj = PyDict_GetItemString(kwargs, "order");
        if (nk > (order_obj != NULL)) {
            PyErr_SetString(PyExc_TypeError, "reshape() takes only the keyword argument 'order'");
            return NULL;
        }
    }
    if (cf_py_parse_order(order_obj, &order, "reshape: order") < 0)
        return NULL;
    if (PyTuple_GET_SIZE(args) == 0) {
        PyErr_SetString(PyExc_TypeError, "reshape() needs a shape");
        return NULL;
    }
    if (parse_new_shape(self, args, &ndim, shape) < 0)
        return NULL;
    return reshape_to(self, ndim, shape, order, "reshape");
}

static PyObject *da_ravel(CfPyDeviceArray *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"order", "stream", NULL};
    PyObject *order_obj = NULL, *stream = NULL;
    char order;
    int64_t n = cf_array_size(&self->view);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:ravel", kwlist, &order_obj, &stream))
        return NULL;
    if (cf_py_parse_order(order_obj, &order, "ravel: order") < 0)
        return NULL;
    return reshape_to(self, 1, &n, order, "ravel");
}

static PyObject *transpose_axes(CfPyDeviceArray *self, PyObject *axes)
{
    cf_array v = self->view;
    int nd = self->view.ndim, i, seen[CF_MAX_DIMS] = {0};
    PyObject *seq;
    if (axes == NULL || axes == Py_None) {
        for (i = 0; i < nd; i++) {
            v.shape[i] = self->view.shape[nd - 1 - i];
            v.strides[i] = self->view.strides[nd - 1 - i];
        }
        return cf_py_devicearray_wrap(&v, self->base, self->stream, self->readonly);
    }
    seq = PySequence_Fast(axes, "transpose: axes must be a sequence of ints");
    if (seq == NULL)
        return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != nd) {
        PyErr_SetString(PyExc_ValueError, "transpose: axes don't match array");
        Py_DECREF(seq);
        return NULL;
    }
    for (i = 0; i < nd; i++) {
        Py_ssize_t ax = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_IndexError);
        if (ax == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (ax < 0)
            ax += nd;
        if (ax < 0 || ax >= nd || seen[ax]) {
            PyErr_SetString(PyExc_ValueError, "transpose: axes don't match array");
            Py_DECREF(seq);
            return NULL;
        }
        seen[ax] = 1;
        v.shape[i] = self->view.shape[ax];
        v.strides[i] = self->view.strides[ax];
    }
    Py_DECREF(seq);
    return cf_py_devicearray_wrap(&v, self->base, self->stream, self->readonly);
}

static PyObject *da_transpose(CfPyDeviceArray *self, PyObject *args)
{
    if (PyTuple_GET_SIZE(args) == 0)
        return transpose_axes(self, NULL);
    if (PyTuple_GET_SIZE(args) == 1 && !PyIndex_Check(PyTuple_GET_ITEM(args, 0)))
        return transpose_axes(self, PyTuple_GET_ITEM(args, 0));
    return transpose_axes(self, args);
}

static PyObject *da_get_T(CfPyDeviceArray *self, void *closure)
{
    return transpose_axes(self, NULL);
}

/* ---- small methods and attributes ------------------------------------------------------------ */

static PyObject *da_is_c_contiguous(CfPyDeviceArray *self, PyObject *unused)
{
    return PyBool_FromLong(cf_array_is_c_contiguous(&self->view));
}

static PyObject *da_is_f_contiguous(CfPyDeviceArray *self, PyObject *unused)
{
    return PyBool_FromLong(cf_array_is_f_contiguous(&self->view));
}

static PyObject *da_bind(CfPyDeviceArray *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream = NULL, *resolved, *r;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:bind", kwlist, &stream))
        return NULL;
    if (cf_py_stream_check(stream, "bind: stream") < 0)
        return NULL;
    resolved = cf_py_stream_resolve(stream, self->view.device, "bind: stream");
    if (resolved == NULL)
        return NULL;
    r = cf_py_devicearray_wrap(&self->view, self->base, resolved, self->readonly);
    Py_DECREF(resolved);
    return r;
}

static PyObject *da_get_shape(CfPyDeviceArray *self, void *c)
{
    return cf_py_tuple_from_int64(self->view.ndim, self->view.shape);
}

static PyObject *da_get_strides(CfPyDeviceArray *self, void *c)
{
    return cf_py_tuple_from_int64(self->view.ndim, self->view.strides);
}

static PyObject *da_get_dtype(CfPyDeviceArray *self, void *c)
{
    Py_INCREF(self->descr);
    return (PyObject *)self->descr;
}

static PyObject *da_get_size(CfPyDeviceArray *self, void *c)
{
    return PyLong_FromLongLong((long long)cf_array_size(&self->view));
}

static PyObject *da_get_ndim(CfPyDeviceArray *self, void *c)
{
    return PyLong_FromLong(self->view.ndim);
}

static PyObject *da_get_nbytes(CfPyDeviceArray *self, void *c)
{
    return PyLong_FromLongLong((long long)cf_array_nbytes(&self->view));
}

static PyObject *da_get_itemsize(CfPyDeviceArray *self, void *c)
{
    return PyLong_FromSize_t(cf_dtype_size(self->view.dtype));
}

static PyObject *da_get_device_id(CfPyDeviceArray *self, void *c)
{
    return PyLong_FromLong(self->view.device);
}

static PyObject *da_get_ptr(CfPyDeviceArray *self, void *c)
{
    cf_py_devicearray_mark_exposed((PyObject *)self);
    return PyLong_FromUnsignedLongLong((unsigned long long)self->view.data);
}

static PyObject *da_get_stream(CfPyDeviceArray *self, void *c)
{
    if (self->stream == NULL)
        return PyLong_FromLong(0);
    Py_INCREF(self->stream);
    return self->stream;
}

static PyObject *da_get_readonly(CfPyDeviceArray *self, void *c)
{
    return PyBool_FromLong(self->readonly);
}

static PyObject *da_get_base(CfPyDeviceArray *self, void *c)
{
    PyObject *b = self->base ? self->base : Py_None;
    Py_INCREF(b);
    return b;
}

static PyObject *da_get_alloc_size(CfPyDeviceArray *self, void *c)
{
    if (self->base != NULL && CfPyMemory_Check(self->base) &&
        ((CfPyMemory *)self->base)->kind == CF_PY_MEM_ALLOC)
        return PyLong_FromSize_t(((CfPyMemory *)self->base)->nbytes);
    return PyLong_FromLongLong((long long)cf_array_nbytes(&self->view));
}

static PyObject *da_get_flags(CfPyDeviceArray *self, void *c)
{
    return Py_BuildValue("{s:O,s:O,s:O}", "C_CONTIGUOUS",
                         cf_array_is_c_contiguous(&self->view) ? Py_True : Py_False,
                         "F_CONTIGUOUS",
                         cf_array_is_f_contiguous(&self->view) ? Py_True : Py_False, "WRITEABLE",
                         self->readonly ? Py_False : Py_True);
}

static PyObject *da_get_device_ctypes_pointer(CfPyDeviceArray *self, void *c)
{
    cf_py_devicearray_mark_exposed((PyObject *)self);
    PyObject *ctypes = PyImport_ImportModule("ctypes"), *r;
    if (ctypes == NULL)
        return NULL;
    r = PyObject_CallMethod(ctypes, "c_void_p", "K", (unsigned long long)self->view.data);
    Py_DECREF(ctypes);
    return r;
}

static PyObject *da_get_cai(CfPyDeviceArray *self, void *c)
{
    cf_py_devicearray_mark_exposed((PyObject *)self);
    char ts[8];
    PyObject *shape = NULL, *strides = NULL, *stream = NULL, *r = NULL;
    cf_dtype_typestr(self->view.dtype, ts);
    shape = cf_py_tuple_from_int64(self->view.ndim, self->view.shape);
    if (shape == NULL)
        goto done;
    if (cf_array_is_c_contiguous(&self->view)) {
        Py_INCREF(Py_None);
        strides = Py_None;
    } else {
        strides = cf_py_tuple_from_int64(self->view.ndim, self->view.strides);
        if (strides == NULL)
            goto done;
    }
    /* CAI v3: the stream the data is pending on (the last write's; the legacy default stream is
     * 1, never 0). That work is also waited for here, on the host: PyTorch reads the interface
     * without honouring its stream (torch.as_tensor(d) then a kernel on a side stream would read
     * the data before our kernel wrote it), and consumers that do honour it (CuPy, Numba)
     * synchronise on the host anyway, for which the wait here leaves nothing to wait for. */
    {
        PyObject *pending = cf_py_pending_stream((PyObject *)self);
        cf_stream *ps;
        cf_status st;
        if (cf_py_stream_get(pending, self->view.device, &ps) < 0)
            goto done;
        Py_BEGIN_ALLOW_THREADS
        st = cf_stream_synchronize(ps);
        Py_END_ALLOW_THREADS
        if (st != CF_OK) {
            cf_py_fail(st, "__cuda_array_interface__");
            goto done;
        }
        stream = PyLong_FromUnsignedLongLong(
            (unsigned long long)cf_py_stream_protocol_handle(pending));
    }
    if (stream == NULL)
        goto done;
    r = Py_BuildValue("{s:O,s:O,s:s,s:(KO),s:i,s:[(ss)],s:O}", "shape", shape, "strides", strides,
                      "typestr", ts, "data", (unsigned long long)self->view.data,
                      self->readonly ? Py_True : Py_False, "version", 3, "descr", "", ts,
                      "stream", stream);
done:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(stream);
    return r;
}

static PyObject *da_repr(CfPyDeviceArray *self)
{
    PyObject *shape = cf_py_tuple_from_int64(self->view.ndim, self->view.shape), *r;
    const char *layout = cf_array_is_c_contiguous(&self->view)   ? "C-contiguous"
                         : cf_array_is_f_contiguous(&self->view) ? "F-contiguous"
                                                                  : NULL;
    char ptr[32];
    if (shape == NULL)
        return NULL;
    snprintf(ptr, sizeof ptr, "0x%llx", (unsigned long long)self->view.data);
    if (layout != NULL) {
        r = PyUnicode_FromFormat("<cufunc DeviceNDArray shape=%R dtype=%s %s device=%d ptr=%s>",
                                 shape, cf_dtype_name(self->view.dtype), layout, self->view.device,
                                 ptr);
    } else {
        PyObject *strides = cf_py_tuple_from_int64(self->view.ndim, self->view.strides);
        if (strides == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        r = PyUnicode_FromFormat("<cufunc DeviceNDArray shape=%R dtype=%s strides=%R device=%d "
                                 "ptr=%s>",
                                 shape, cf_dtype_name(self->view.dtype), strides, self->view.device,
                                 ptr);
        Py_DECREF(strides);
    }
    Py_DECREF(shape);
    return r;
}

/* DeviceArray(shape, strides=None, dtype=float64, stream=0): a new allocation, as Numba's
 * DeviceNDArray(shape, strides, dtype, stream). Strides (bytes) may describe any layout; the
 * allocation covers the span they touch. */
static PyObject *da_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "strides", "dtype", "stream", NULL};
    PyObject *shape_obj, *strides_obj = Py_None, *dtype_obj = Py_None, *stream = NULL;
    PyObject *resolved = NULL, *r = NULL;
    cf_array v;
    int ndim, sndim, device, i;
    int64_t shape[CF_MAX_DIMS], lo, hi;
    cf_dtype dt;
    CfPyMemory *a;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO:DeviceNDArray", kwlist, &shape_obj,
                                     &strides_obj, &dtype_obj, &stream))
        return NULL;
    if (cf_py_parse_shape(shape_obj, &ndim, shape, "DeviceNDArray: shape") < 0 ||
        cf_py_dtype_from_object(dtype_obj, &dt, NULL, "DeviceNDArray: dtype") < 0 ||
        cf_py_check_nbytes(ndim, shape, cf_dtype_size(dt), "DeviceNDArray: shape") < 0 ||
        cf_py_stream_check(stream, "DeviceNDArray: stream") < 0)
        return NULL;
    if (cf_array_init_contiguous(&v, 0, dt, ndim, shape, 'C', 0) != CF_OK)
        return cf_py_raise(cf_last_status(), "DeviceNDArray: shape");
    if (strides_obj != Py_None) {
        int64_t strides[CF_MAX_DIMS];
        PyObject *seq = PySequence_Fast(strides_obj, "DeviceNDArray: strides must be a sequence");
        if (seq == NULL)
            return NULL;
        sndim = (int)PySequence_Fast_GET_SIZE(seq);
        if (sndim != ndim) {
            PyErr_Format(PyExc_ValueError, "DeviceNDArray: strides has %d entries for %d axes",
                         sndim, ndim);
            Py_DECREF(seq);
            return NULL;
        }
        for (i = 0; i < ndim; i++) {
            long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
            if (x == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
            strides[i] = x;
        }
        Py_DECREF(seq);
        memcpy(v.strides, strides, sizeof(int64_t) * (size_t)ndim);
    }
    if (cf_py_stream_device(stream, &device, "DeviceNDArray") < 0)
        return NULL;
    resolved = cf_py_stream_resolve(stream, device, "DeviceNDArray: stream");
    if (resolved == NULL)
        return NULL;
    cf_array_byte_bounds(&v, &lo, &hi);
    a = cf_py_memory_alloc((size_t)(hi - lo), device, resolved, "DeviceNDArray", 0);
    if (a != NULL) {
        v.data = a->ptr - (uint64_t)lo;
        v.device = device;
        r = cf_py_devicearray_wrap(&v, (PyObject *)a, resolved, 0);
        Py_DECREF(a);
        if (r != NULL && type != &CfPyDeviceArray_Type) {
            /* A subclass: move the fields into an instance of it. */
            CfPyDeviceArray *sub = (CfPyDeviceArray *)type->tp_alloc(type, 0), *base_obj;
            base_obj = (CfPyDeviceArray *)r;
            if (sub != NULL) {
                sub->view = base_obj->view;
                sub->descr = base_obj->descr;
                sub->base = base_obj->base;
                sub->stream = base_obj->stream;
                sub->readonly = 0;
                sub->weakreflist = NULL;
                sub->serial = next_serial();
                base_obj->descr = NULL;
                base_obj->base = NULL;
                base_obj->stream = NULL;
            }
            Py_DECREF(r);
            r = (PyObject *)sub;
        }
    }
    Py_DECREF(resolved);
    return r;
}

/* devicearray_view(src, offset, shape, strides, dtype, stream) -> a DeviceArray over src's memory
 * at src.ptr + offset bytes, sharing its owner (and so its pending-write tracking); the new view
 * must lie inside the bytes src touches. For DeviceNDArray.view / split / squeeze. */
static PyObject *py_devicearray_view(PyObject *self, PyObject *args)
{
    PyObject *src_obj, *shape_obj, *strides_obj, *dtype_obj, *stream, *resolved, *r;
    long long offset;
    CfPyDeviceArray *src;
    cf_array v;
    int ndim, sndim;
    int64_t slo, shi, lo, hi, strides[CF_MAX_DIMS];
    PyArray_Descr *descr = NULL;
    if (!PyArg_ParseTuple(args, "O!LOOOO:devicearray_view", &CfPyDeviceArray_Type, &src_obj,
                          &offset, &shape_obj, &strides_obj, &dtype_obj, &stream))
        return NULL;
    src = (CfPyDeviceArray *)src_obj;
    v = src->view;
    if (cf_py_parse_shape(shape_obj, &ndim, v.shape, "shape") < 0 ||
        cf_py_parse_strides(strides_obj, &sndim, strides) < 0)
        return NULL;
    if (cf_py_dtype_from_object(dtype_obj, &v.dtype, &descr, "dtype") < 0)
        return NULL;
    Py_XDECREF(descr);
    if (sndim != ndim) {
        PyErr_SetString(PyExc_ValueError, "devicearray_view: shape and strides differ in length");
        return NULL;
    }
    v.ndim = ndim;
    memcpy(v.strides, strides, sizeof(int64_t) * (size_t)ndim);
    v.data = src->view.data + (uint64_t)offset;
    cf_array_byte_bounds(&src->view, &slo, &shi);
    cf_array_byte_bounds(&v, &lo, &hi);
    if (cf_array_nbytes(&v) > 0 && (offset + lo < slo || offset + hi > shi)) {
        PyErr_SetString(PyExc_ValueError, "devicearray_view: the view runs outside the array");
        return NULL;
    }
    if (cf_py_stream_check(stream, "stream") < 0)
        return NULL;
    if (stream == Py_None || (PyLong_Check(stream) && PyLong_AsLong(stream) == 0)) {
        resolved = Py_NewRef(src->stream ? src->stream : Py_None);
    } else if ((resolved = cf_py_stream_resolve(stream, src->view.device, "stream")) == NULL) {
        return NULL;
    }
    r = cf_py_devicearray_wrap(&v, src->base, resolved, src->readonly);
    Py_DECREF(resolved);
    return r;
}

PyMethodDef cf_py_devicearray_array_methods[] = {
    {"reshape", (PyCFunction)(void (*)(void))da_reshape, METH_VARARGS | METH_KEYWORDS,
     "reshape($self, /, *shape, order='C')\n"
     "--\n"
     "\n"
     "Give a view of the same data with a new shape.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "*shape : int or tuple of int\n"
     "    The new shape (one -1 is inferred), as NumPy's ``reshape``.\n"
     "order : {'C', 'F', 'A'}, optional\n"
     "    The index order, as NumPy's.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The view.\n"
     "\n"
     "Raises\n"
     "------\n"
     "NotImplementedError\n"
     "    Where NumPy would have to copy.\n"},
    {"ravel", (PyCFunction)(void (*)(void))da_ravel, METH_VARARGS | METH_KEYWORDS,
     "ravel($self, /, order='C', stream=0)\n"
     "--\n"
     "\n"
     "Give a 1-d view of the data.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "order : {'C', 'F', 'A', 'K'}, optional\n"
     "    The index order, as NumPy's.\n"
     CF_PY_DOC_STREAM("copy")
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The 1-d view.\n"
     "\n"
     "Raises\n"
     "------\n"
     "NotImplementedError\n"
     "    Where a copy would be needed.\n"},
    {"transpose", (PyCFunction)da_transpose, METH_VARARGS,
     "transpose($self, /, *axes)\n"
     "--\n"
     "\n"
     "Give a view with the axes permuted.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "*axes : int or tuple of int\n"
     "    The permutation; the axes reversed when not given.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The view.\n"},
    {"is_c_contiguous", (PyCFunction)da_is_c_contiguous, METH_NOARGS,
     "is_c_contiguous($self, /)\n"
     "--\n"
     "\n"
     "Tell whether the array is contiguous in C (row-major) order.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "bool\n"
     "    True when its elements are adjacent in C order.\n"},
    {"is_f_contiguous", (PyCFunction)da_is_f_contiguous, METH_NOARGS,
     "is_f_contiguous($self, /)\n"
     "--\n"
     "\n"
     "Tell whether the array is contiguous in Fortran (column-major) order.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "bool\n"
     "    True when its elements are adjacent in Fortran order.\n"},
    {"bind", (PyCFunction)(void (*)(void))da_bind, METH_VARARGS | METH_KEYWORDS,
     "bind($self, /, stream=0)\n"
     "--\n"
     "\n"
     "Give a view whose operations are ordered on a stream.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "stream : Stream or int, optional\n"
     "    The stream.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The view.\n"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef da_getset[] = {
    {"shape", (getter)da_get_shape, NULL,
     "The extent of each axis (a tuple of int).", NULL},
    {"strides", (getter)da_get_strides, NULL,
     "The step in bytes along each axis (a tuple of int).", NULL},
    {"dtype", (getter)da_get_dtype, NULL,
     "The NumPy dtype of the elements.", NULL},
    {"size", (getter)da_get_size, NULL,
     "The number of elements.", NULL},
    {"ndim", (getter)da_get_ndim, NULL,
     "The number of axes.", NULL},
    {"nbytes", (getter)da_get_nbytes, NULL,
     "The number of bytes the elements span (size times itemsize).", NULL},
    {"itemsize", (getter)da_get_itemsize, NULL,
     "The size of one element in bytes.", NULL},
    {"device_id", (getter)da_get_device_id, NULL, "The ordinal of the device holding the data.",
     NULL},
    {"ptr", (getter)da_get_ptr, NULL, "The address of element (0, ..., 0).", NULL},
    {"stream", (getter)da_get_stream, NULL, "The array's stream, or 0 for the default stream.",
     NULL},
    {"readonly", (getter)da_get_readonly, NULL,
     "Whether the array is read-only (writes to it raise).", NULL},
    {"base", (getter)da_get_base, NULL, "The object that owns the memory.", NULL},
    {"alloc_size", (getter)da_get_alloc_size, NULL, "Bytes of the underlying allocation.", NULL},
    {"flags", (getter)da_get_flags, NULL,
     "The flags 'C_CONTIGUOUS', 'F_CONTIGUOUS' and 'WRITEABLE', as a dict.", NULL},
    {"device_ctypes_pointer", (getter)da_get_device_ctypes_pointer, NULL,
     "The data pointer as ctypes.c_void_p (as Numba).", NULL},
    {"T", (getter)da_get_T, NULL, "The transposed view.", NULL},
    {"__cuda_array_interface__", (getter)da_get_cai, NULL, "CUDA Array Interface, version 3.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* object.__hash__: by identity */
static Py_hash_t da_hash(PyObject *self) { return PyBaseObject_Type.tp_hash(self); }

PyTypeObject CfPyDeviceArray_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.DeviceArray",
    .tp_basicsize = sizeof(CfPyDeviceArray),
    .tp_dealloc = (destructor)da_dealloc,
    .tp_repr = (reprfunc)da_repr,
    /* tp_as_sequence, tp_as_mapping (py_copy.c), tp_as_number and tp_richcompare (py_twins.c)
     * and tp_methods are set by py_devicearray_type.c. The hash is the identity's, as Numba's
     * device arrays have it (dict keys, sets: a lookup finds the same object by identity before
     * the element-wise == is asked) */
    .tp_hash = da_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "An array in GPU memory (cuda.DeviceNDArray): a strided view that keeps its memory "
              "alive. Made by cuda.to_device, cuda.device_array, cuda.as_cuda_array, "
              "cuda.from_dlpack.",
    .tp_weaklistoffset = offsetof(CfPyDeviceArray, weakreflist),
    .tp_getset = da_getset,
    .tp_new = da_new,
};

PyMethodDef cf_py_devicearray_methods[] = {
    {"devicearray_view", py_devicearray_view, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
