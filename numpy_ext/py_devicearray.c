/* py_devicearray.c: DeviceArray (cuda.DeviceNDArray), its memory owner, the copies between host
 * and device, views of foreign device memory (__cuda_array_interface__), and the module functions
 * to_device, device_array, device_array_like, as_cuda_array and is_cuda_array.
 *
 * A DeviceArray is a strided view (cf_array) plus a reference to whatever keeps the memory alive:
 * an Allocation (memory from the device's stream-ordered pool, returned to it when the last view
 * dies) or a foreign object (CuPy, PyTorch, a DLPack owner). Views made by slicing, reshape and
 * transpose share that reference; nothing is copied.
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
#include "py_common.h"
#include "py_interop.h"
#include "py_twins.h"

#include <stdio.h>
#include <string.h>

/* ---- Allocation: the owner of pool memory ---------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    uint64_t ptr;
    size_t nbytes;
    int device;
    PyObject *stream; /* the Stream it was allocated on, or NULL (default stream) */
    /* The stream of the last work queued that writes this memory (at first the stream it was
     * allocated on), or NULL for the legacy default stream. Work on another stream waits for it
     * first (cf_py_order_operand), so no call or copy reads the memory before the work that
     * produced it, whichever streams the two were queued on. */
    PyObject *pending;
    /* Its address was handed out where cufunc cannot follow it (__cuda_array_interface__, DLPack,
     * .ptr, a kernel's captured global): get_ipc_handle must not move it then. */
    int exposed;
    /* The Stream it was allocated on while that stream captured a CUDA graph (an allocation node),
     * else NULL: freed on it while the capture lasts (a free node), since no other stream may
     * touch the capture. */
    PyObject *capture;
} CfPyAllocation;

/* cuda.defer_cleanup(): while its depth is above 0, memory whose last view dies is moved to a new
 * Allocation kept in `deferred`, freed when the outermost block ends (the GIL guards both). */
static int defer_depth;
static PyObject *deferred;

static PyTypeObject CfPyAllocation_Type;

static int defer_free(CfPyAllocation *self)
{
    CfPyAllocation *keep;
    if (defer_depth == 0 || deferred == NULL || cf_py_is_finalizing())
        return 0;
    keep = PyObject_New(CfPyAllocation, &CfPyAllocation_Type);
    if (keep == NULL) {
        PyErr_Clear();
        return 0; /* freed now rather than lost */
    }
    keep->ptr = self->ptr;
    keep->nbytes = self->nbytes;
    keep->device = self->device;
    keep->stream = self->stream;
    keep->pending = self->pending;
    keep->exposed = self->exposed;
    keep->capture = self->capture;
    if (PyList_Append(deferred, (PyObject *)keep) < 0) {
        PyErr_Clear();
        keep->ptr = 0;
        keep->stream = keep->pending = keep->capture = NULL;
        Py_DECREF(keep);
        return 0;
    }
    Py_DECREF(keep); /* the list holds it */
    self->ptr = 0;
    self->stream = self->pending = self->capture = NULL; /* moved */
    return 1;
}

static void allocation_dealloc(CfPyAllocation *self)
{
    PyObject *type, *value, *tb;
    cf_stream *s = NULL;
    PyErr_Fetch(&type, &value, &tb);
    if (self->ptr != 0)
        defer_free(self);
    if (self->ptr != 0) {
        /* Freed in order on the stream it was allocated on when that is a stream cufunc owns (the
         * reference we hold keeps it alive); external streams may already be destroyed by their
         * owner, so their memory, like default-stream memory, is freed on the legacy default
         * stream, after the last write to it (the pending stream, below). Reads queued on other
         * non-blocking streams must be finished (or ordered) by the user before the last
         * reference dies, as with any stream-ordered allocator. */
        PyObject *on = NULL;
        if (self->stream != NULL && ((CfPyStream *)self->stream)->kind == CF_PY_STREAM_OWNED)
            on = self->stream;
        int in_capture = 0;
        if (self->capture != NULL) {
            /* made in a capture still under way: a free node of that capture */
            if (cf_py_capture_status(((CfPyStream *)self->capture)->stream, &in_capture) < 0)
                PyErr_Clear();
            if (in_capture)
                on = self->capture;
        }
        /* A failure is reported as unraisable, except after fork (the memory belongs to the
         * parent) and at interpreter exit (the driver may be gone; the process frees it all). */
        if (cf_py_stream_get(on, self->device, &s) == 0) {
            /* The pool may hand the memory out again at once on `on`: that must come after the
             * last write, wherever it was queued (an error here is reported by the free). */
            cf_status st = CF_OK;
            if (!in_capture && cf_py_stream_usable_later(self->pending) &&
                cf_py_stream_order_after(s, on, self->pending, self->device) < 0)
                PyErr_Clear();
            st = cf_mem_free(s, self->ptr);
            cf_context_restore(); /* a collected array of another device (runtime.h) */
            /* Forgotten whatever the outcome: reporting hands `self` to the unraisable hook,
             * which resurrects it for the report and deallocates it again; a pointer kept would
             * be freed again, fail again (a sticky error fails every time) and recurse. */
            self->ptr = 0;
            /* After a failed device-side assert (CF_ERR_ASSERT) the context is gone and every
             * free fails: the call that met it raised DeviceAssertionError, which says so. */
            if (st != CF_OK && st != CF_ERR_FORK && st != CF_ERR_ASSERT &&
                !cf_py_is_finalizing()) {
                cf_py_raise(st, "freeing device memory");
                PyErr_WriteUnraisable((PyObject *)self);
            }
        } else if (cf_py_is_finalizing()) {
            PyErr_Clear();
        } else {
            self->ptr = 0; /* as above: the report must not make a second free attempt */
            PyErr_WriteUnraisable((PyObject *)self);
        }
    }
    Py_XDECREF(self->stream);
    Py_XDECREF(self->pending);
    Py_XDECREF(self->capture);
    Py_TYPE(self)->tp_free((PyObject *)self);
    PyErr_Restore(type, value, tb);
}

static PyObject *allocation_repr(CfPyAllocation *self)
{
    return PyUnicode_FromFormat("<cufunc device allocation of %zu bytes at 0x%llx on device %d>",
                                self->nbytes, (unsigned long long)self->ptr, self->device);
}

static PyTypeObject CfPyAllocation_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.Allocation",
    .tp_basicsize = sizeof(CfPyAllocation),
    .tp_dealloc = (destructor)allocation_dealloc,
    .tp_repr = (reprfunc)allocation_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Device memory from the stream-ordered pool, freed when the last view dies.",
};

static void format_bytes(char *buf, size_t len, uint64_t n)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, units[u]);
}

/* Allocate nbytes on `device`, ordered on `stream` (a resolved stream). */
static CfPyAllocation *allocation_new_ex(size_t nbytes, int device, PyObject *stream,
                                         const char *what, int ipc);

static CfPyAllocation *allocation_new(size_t nbytes, int device, PyObject *stream,
                                      const char *what)
{
    return allocation_new_ex(nbytes, device, stream, what, 0);
}

/* ipc: cuMemAlloc memory that cuIpcGetMemHandle can export (pool memory cannot be). */
static CfPyAllocation *allocation_new_ex(size_t nbytes, int device, PyObject *stream,
                                         const char *what, int ipc)
{
    CfPyAllocation *a;
    cf_stream *s;
    cf_status st;
    uint64_t ptr = 0;
    if (cf_py_stream_get(stream, device, &s) < 0)
        return NULL;
    st = ipc ? cf_mem_alloc_ipc(s, nbytes, &ptr) : cf_mem_alloc(s, nbytes, &ptr);
    cf_context_restore(); /* memory of another device than the current one (runtime.h) */
    if (st == CF_ERR_DEVICE_NOMEM || st == CF_ERR_NOMEM) {
        /* The message must name the size asked for; the core's does, this makes sure. */
        char human[32], digits[32];
        format_bytes(human, sizeof human, nbytes);
        snprintf(digits, sizeof digits, "%zu", nbytes);
        if (strstr(cf_last_error(), digits) != NULL)
            PyErr_Format(PyExc_MemoryError, "%s: %s", what, cf_last_error());
        else
            PyErr_Format(PyExc_MemoryError, "%s: cannot allocate %zu bytes (%s) on device %d: %s",
                         what, nbytes, human, device, cf_last_error());
        return NULL;
    }
    if (st != CF_OK)
        return (CfPyAllocation *)cf_py_raise(st, what);
    a = PyObject_New(CfPyAllocation, &CfPyAllocation_Type);
    if (a == NULL) {
        cf_mem_free(s, ptr);
        return NULL;
    }
    a->ptr = ptr;
    a->nbytes = nbytes;
    a->device = device;
    a->stream = (stream != NULL && stream != Py_None) ? stream : NULL;
    Py_XINCREF(a->stream);
    a->pending = Py_XNewRef(a->stream); /* the memory is usable after the allocation on it */
    a->exposed = 0;
    a->capture = NULL;
    if (cf_py_capture_gate && s == cf_py_capturing) {
        a->capture = Py_XNewRef(a->stream);
        cf_py_capture_note_allocation((PyObject *)a, s);
    }
    return a;
}

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
    CfPyAllocation *a;
    PyObject *r;
    cf_status st = cf_array_init_contiguous(&v, 0, dt, ndim, shape, order, device);
    if (st != CF_OK)
        return cf_py_raise(st == CF_ERR_RANGE ? CF_ERR_INVALID : st, "device_array: shape");
    a = allocation_new((size_t)cf_array_nbytes(&v), device, stream, "device_array");
    if (a == NULL)
        return NULL;
    v.data = a->ptr;
    r = cf_py_devicearray_wrap(&v, (PyObject *)a, stream, 0);
    Py_DECREF(a);
    return r;
}

/* ---- ordering after the producer ------------------------------------------------------------ */

/* The pending-work slot (CfPyAllocation.pending, or DLPack's owner's) of the memory behind a
 * device operand, or NULL when cufunc does not track it: memory of another library, whose pending
 * work cf_py_device_view ordered before the legacy default stream's when the operand was taken. */
static PyObject **pending_slot(PyObject *obj)
{
    PyObject *base;
    if (!CfPyDeviceArray_Check(obj))
        return NULL;
    base = ((CfPyDeviceArray *)obj)->base;
    if (base != NULL && Py_TYPE(base) == &CfPyAllocation_Type) /* the common case, first */
        return &((CfPyAllocation *)base)->pending;
    /* a view made over another DeviceArray object (an internal copy's source) shares its memory */
    for (int depth = 0; base != NULL && CfPyDeviceArray_Check(base) && depth < 8; depth++)
        base = ((CfPyDeviceArray *)base)->base;
    if (base != NULL && Py_TYPE(base) == &CfPyAllocation_Type)
        return &((CfPyAllocation *)base)->pending;
    return cf_py_dlpack_pending_slot(base);
}

void cf_py_devicearray_mark_exposed(PyObject *obj)
{
    PyObject *base;
    if (!CfPyDeviceArray_Check(obj))
        return;
    base = ((CfPyDeviceArray *)obj)->base;
    for (int depth = 0; base != NULL && CfPyDeviceArray_Check(base) && depth < 8; depth++)
        base = ((CfPyDeviceArray *)base)->base;
    if (base != NULL && Py_TYPE(base) == &CfPyAllocation_Type)
        ((CfPyAllocation *)base)->exposed = 1;
}

PyObject *cf_py_pending_stream(PyObject *obj)
{
    PyObject **slot = pending_slot(obj);
    if (slot != NULL)
        return *slot;
    return CfPyDeviceArray_Check(obj) ? ((CfPyDeviceArray *)obj)->stream : NULL;
}

/* The Allocation behind a DeviceArray, or NULL (foreign memory, DLPack owners). */
static PyObject *allocation_of(PyObject *obj)
{
    PyObject *base = CfPyDeviceArray_Check(obj) ? ((CfPyDeviceArray *)obj)->base : NULL;
    for (int depth = 0; base != NULL && CfPyDeviceArray_Check(base) && depth < 8; depth++)
        base = ((CfPyDeviceArray *)base)->base;
    return base != NULL && Py_TYPE(base) == &CfPyAllocation_Type ? base : NULL;
}

int cf_py_allocation_order(PyObject *allocation, cf_stream *s, PyObject *resolved)
{
    CfPyAllocation *a = (CfPyAllocation *)allocation;
    if (a->ptr == 0 || !cf_py_stream_usable_later(a->pending))
        return 0;
    return cf_py_stream_order_after(s, resolved == Py_None ? NULL : resolved, a->pending,
                                    a->device);
}

void cf_py_allocation_written(PyObject *allocation, PyObject *resolved)
{
    CfPyAllocation *a = (CfPyAllocation *)allocation;
    PyObject *consumer = resolved == Py_None ? NULL : resolved;
    Py_XINCREF(consumer);
    Py_XSETREF(a->pending, consumer);
}

int cf_py_order_operand(PyObject *obj, int device, PyObject *resolved, cf_stream *s, int written)
{
    PyObject **slot = pending_slot(obj);
    PyObject *consumer = resolved == Py_None ? NULL : resolved;
    if (cf_py_capture_gate && s == cf_py_capturing) {
        /* A captured call waits for nothing outside its capture (a wait on an event recorded
         * outside would break it): a graph of cufunc's own is ordered when it is launched
         * (py_graph.c), a PyTorch or CuPy graph as their own kernels are, by the stream it is
         * replayed on. */
        cf_py_capture_note_allocation(allocation_of(obj), s);
        if (written && slot != NULL && *slot != consumer) {
            Py_XINCREF(consumer);
            Py_XSETREF(*slot, consumer);
        }
        return 0;
    }
    /* Untracked (foreign) memory counts as pending on the legacy default stream, after which its
     * producer's work was ordered when the operand was taken. */
    if (cf_py_stream_order_after(s, consumer, slot ? *slot : NULL, device) < 0)
        return -1;
    if (written && slot != NULL && *slot != consumer) {
        Py_XINCREF(consumer);
        Py_XSETREF(*slot, consumer);
    }
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
    if (self->base != NULL && Py_TYPE(self->base) == &CfPyAllocation_Type)
        return PyLong_FromSize_t(((CfPyAllocation *)self->base)->nbytes);
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
    CfPyAllocation *a;
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
    a = allocation_new((size_t)(hi - lo), device, resolved, "DeviceNDArray");
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

/* Written in Python (cufunc/_devarray.py); defined below. */
static PyObject *da_py_view(PyObject *self, PyObject *args, PyObject *kwargs);
static PyObject *da_py_split(PyObject *self, PyObject *args, PyObject *kwargs);
static PyObject *da_py_squeeze(PyObject *self, PyObject *args, PyObject *kwargs);
static PyObject *da_py_get_ipc_handle(PyObject *self, PyObject *args, PyObject *kwargs);

static PyMethodDef da_methods[] = {
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
     "stream : Stream or int, optional\n"
     "    The stream the copy is queued on: a Stream, a CUstream handle (int) or an object\n"
     "    with ``__cuda_stream__``; 0, the default, is the default stream.\n"
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
     "stream : Stream or int, optional\n"
     "    The stream the copy is queued on: a Stream, a CUstream handle (int) or an object\n"
     "    with ``__cuda_stream__``; 0, the default, is the default stream.\n"},
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
     "stream : Stream or int, optional\n"
     "    The stream the copy is queued on: a Stream, a CUstream handle (int) or an object\n"
     "    with ``__cuda_stream__``; 0, the default, is the default stream.\n"
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
    {"view", (PyCFunction)(void (*)(void))da_py_view, METH_VARARGS | METH_KEYWORDS,
     "view($self, /, dtype)\n"
     "--\n"
     "\n"
     "Give a view of the same memory as another dtype, without a copy.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "dtype : dtype_like\n"
     "    The new dtype; the last axis is rescaled as Numba does.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The view.\n"},
    {"split", (PyCFunction)(void (*)(void))da_py_split, METH_VARARGS | METH_KEYWORDS,
     "split($self, /, section, stream=0)\n"
     "--\n"
     "\n"
     "Split a 1-d array into views of ``section`` elements.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "section : int\n"
     "    The number of elements of each view (the last may be shorter).\n"
     "stream : Stream or int, optional\n"
     "    The stream of the views.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "iterator of DeviceNDArray\n"
     "    The views, in order.\n"},
    {"squeeze", (PyCFunction)(void (*)(void))da_py_squeeze, METH_VARARGS | METH_KEYWORDS,
     "squeeze($self, /, axis=None, stream=0)\n"
     "--\n"
     "\n"
     "Give a view without the axes of extent 1.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "axis : int or tuple of int, optional\n"
     "    The axes to remove (each must have extent 1); all of extent 1 when not given.\n"
     "stream : Stream or int, optional\n"
     "    The stream of the view.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "DeviceNDArray\n"
     "    The view.\n"},
    {"get_ipc_handle", (PyCFunction)(void (*)(void))da_py_get_ipc_handle,
     METH_VARARGS | METH_KEYWORDS,
     "get_ipc_handle($self, /)\n"
     "--\n"
     "\n"
     "Export the array's memory for another process (CUDA IPC).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "IpcArrayHandle\n"
     "    A picklable handle; another process opens it to use this memory.\n"},
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
    {"__array__", (PyCFunction)(void (*)(void))da_array, METH_VARARGS | METH_KEYWORDS,
     "A host copy, for np.asarray()."},
    {"__dlpack__", (PyCFunction)(void (*)(void))cf_py_devicearray_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(stream=None, max_version=None, dl_device=None, copy=None) -> a DLPack capsule."},
    {"_order_for", (PyCFunction)cf_py_devicearray_order_for, METH_O,
     "_order_for(stream): make that stream (a DLPack stream handle) wait for the work pending on "
     "this array's memory, as __dlpack__(stream=) does, with no capsule."},
    {"__dlpack_device__", (PyCFunction)cf_py_devicearray_dlpack_device, METH_NOARGS,
     "(2, device_id): kDLCUDA."},
    CF_PY_TWINS_METHODS,
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

static PyMappingMethods da_as_mapping = {
    .mp_length = (lenfunc)da_length,
    .mp_subscript = (binaryfunc)da_subscript,
    .mp_ass_subscript = (objobjargproc)da_ass_subscript,
};

static PySequenceMethods da_as_sequence = {
    .sq_length = (lenfunc)da_length,
    .sq_item = (ssizeargfunc)da_item,
};

/* object.__hash__: by identity */
static Py_hash_t da_hash(PyObject *self) { return PyBaseObject_Type.tp_hash(self); }

PyTypeObject CfPyDeviceArray_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.DeviceArray",
    .tp_basicsize = sizeof(CfPyDeviceArray),
    .tp_dealloc = (destructor)da_dealloc,
    .tp_repr = (reprfunc)da_repr,
    .tp_as_sequence = &da_as_sequence,
    .tp_as_mapping = &da_as_mapping,
    /* operators and comparisons through the GPU twins of NumPy's ufuncs (py_twins.c); == stays
     * element-wise, but the hash is the identity's, as Numba's device arrays have it (dict keys,
     * sets: a lookup finds the same object by identity before == is asked) */
    .tp_as_number = &cf_py_twins_as_number,
    .tp_richcompare = cf_py_twins_richcompare,
    .tp_hash = da_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "An array in GPU memory (cuda.DeviceNDArray): a strided view that keeps its memory "
              "alive. Made by cuda.to_device, cuda.device_array, cuda.as_cuda_array, "
              "cuda.from_dlpack.",
    .tp_weaklistoffset = offsetof(CfPyDeviceArray, weakreflist),
    .tp_methods = da_methods,
    .tp_getset = da_getset,
    .tp_new = da_new,
};

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

/* ---- defer_cleanup, views for the Python-level methods, IPC ---------------------------------- */

/* A tuple of byte strides (any sign). */
static int parse_strides(PyObject *obj, int *n, int64_t *out)
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

static PyObject *py_defer_cleanup_enter(PyObject *self, PyObject *unused)
{
    if (deferred == NULL && (deferred = PyList_New(0)) == NULL)
        return NULL;
    defer_depth++;
    Py_RETURN_NONE;
}

/* Ends one block; the outermost frees what was held (each in stream order, as always). */
static PyObject *py_defer_cleanup_exit(PyObject *self, PyObject *unused)
{
    if (defer_depth > 0 && --defer_depth == 0 && deferred != NULL)
        if (PyList_SetSlice(deferred, 0, PY_SSIZE_T_MAX, NULL) < 0)
            return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_defer_cleanup_count(PyObject *self, PyObject *unused)
{
    return Py_BuildValue("(in)", defer_depth, deferred ? PyList_GET_SIZE(deferred) : 0);
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
        parse_strides(strides_obj, &sndim, strides) < 0)
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

/* devicearray_ipc_export(ary) -> (64-byte handle, offset of ary's data in the allocation, bytes
 * of the allocation). Pool memory cannot be exported by cuIpcGetMemHandle: an array that is the
 * only view of its pool allocation is moved first into IPC-able memory (a device-to-device copy
 * ordered after its last write; ary.ptr changes); one sharing its allocation with other views
 * cannot be moved and is a ValueError. */
static PyObject *py_devicearray_ipc_export(PyObject *self, PyObject *arg)
{
    CfPyDeviceArray *da;
    CfPyAllocation *a, *fresh;
    unsigned char h[CF_IPC_HANDLE_BYTES];
    int pooled = 0;
    cf_status st;
    if (!CfPyDeviceArray_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "get_ipc_handle: not a DeviceNDArray");
        return NULL;
    }
    da = (CfPyDeviceArray *)arg;
    if (da->base == NULL || Py_TYPE(da->base) != &CfPyAllocation_Type) {
        PyErr_SetString(PyExc_ValueError,
                        "get_ipc_handle: only memory allocated by cufunc can be exported (this "
                        "array views memory of another library or an IPC handle)");
        return NULL;
    }
    a = (CfPyAllocation *)da->base;
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
        /* the stream the old memory is freed on (allocation_dealloc's choice) does the copy */
        on = (a->stream != NULL && ((CfPyStream *)a->stream)->kind == CF_PY_STREAM_OWNED)
                 ? a->stream : NULL;
        fresh = allocation_new_ex(a->nbytes, a->device, on, "get_ipc_handle", 1);
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

/* ---- IpcMemory: memory of another process, opened from its IPC handle ----------------------- */

typedef struct {
    PyObject_HEAD
    uint64_t ptr; /* 0 once closed */
    int device;
} CfPyIpcMemory;

static PyObject *ipcmem_close(CfPyIpcMemory *self, PyObject *unused)
{
    if (self->ptr != 0) {
        cf_status st = cf_ipc_close(self->device, self->ptr);
        self->ptr = 0;
        if (st != CF_OK)
            return cf_py_raise(st, "IpcHandle.close");
    }
    Py_RETURN_NONE;
}

static void ipcmem_dealloc(CfPyIpcMemory *self)
{
    if (self->ptr != 0 && !cf_py_is_finalizing())
        cf_ipc_close(self->device, self->ptr);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *ipcmem_get_ptr(CfPyIpcMemory *self, void *c)
{
    return PyLong_FromUnsignedLongLong((unsigned long long)self->ptr);
}

static PyMethodDef ipcmem_methods[] = {
    {"close", (PyCFunction)ipcmem_close, METH_NOARGS, "close(): cuIpcCloseMemHandle."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ipcmem_getset[] = {
    {"ptr", (getter)ipcmem_get_ptr, NULL, "The device address (0 once closed).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CfPyIpcMemory_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.IpcMemory",
    .tp_basicsize = sizeof(CfPyIpcMemory),
    .tp_dealloc = (destructor)ipcmem_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = ipcmem_methods,
    .tp_getset = ipcmem_getset,
    .tp_doc = "Device memory of another process, opened from a CUDA IPC handle.",
};

/* ipc_open(handle, device, offset, shape, strides, dtype) -> (IpcMemory, DeviceNDArray over it). */
static PyObject *py_ipc_open(PyObject *self, PyObject *args)
{
    const char *h;
    Py_ssize_t hlen;
    int device, ndim, sndim;
    unsigned long long offset;
    PyObject *shape_obj, *strides_obj, *dtype_obj, *arr;
    PyArray_Descr *descr = NULL;
    CfPyIpcMemory *mem;
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
        parse_strides(strides_obj, &sndim, v.strides) < 0 ||
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
    mem = PyObject_New(CfPyIpcMemory, &CfPyIpcMemory_Type);
    if (mem == NULL) {
        cf_ipc_close(device, ptr);
        return NULL;
    }
    mem->ptr = ptr;
    mem->device = device;
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

/* Methods written in Python (cufunc/_devarray.py), over devicearray_view and the IPC helpers. */
static PyObject *call_py_method(const char *name, PyObject *self, PyObject *args,
                                PyObject *kwargs)
{
    PyObject *mod = PyImport_ImportModule("cufunc._devarray"), *fn, *full, *r;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (mod == NULL)
        return NULL;
    fn = PyObject_GetAttrString(mod, name);
    Py_DECREF(mod);
    if (fn == NULL)
        return NULL;
    full = PyTuple_New(n + 1);
    if (full == NULL) {
        Py_DECREF(fn);
        return NULL;
    }
    PyTuple_SET_ITEM(full, 0, Py_NewRef(self));
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(full, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    r = PyObject_Call(fn, full, kwargs);
    Py_DECREF(full);
    Py_DECREF(fn);
    return r;
}

#define CF_DA_PY_METHOD(name)                                                                      \
    static PyObject *da_py_##name(PyObject *self, PyObject *args, PyObject *kwargs)                \
    {                                                                                              \
        return call_py_method(#name, self, args, kwargs);                                          \
    }
CF_DA_PY_METHOD(view)
CF_DA_PY_METHOD(split)
CF_DA_PY_METHOD(squeeze)
CF_DA_PY_METHOD(get_ipc_handle)
#undef CF_DA_PY_METHOD

PyMethodDef cf_py_devicearray_methods[] = {
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
     "stream : Stream or int, optional\n"
     "    The stream the work is queued on: a Stream, a CUstream handle (int) or an object\n"
     "    with ``__cuda_stream__``; 0, the default, is the default stream.\n"
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
     "stream : Stream or int, optional\n"
     "    The stream the work is queued on: a Stream, a CUstream handle (int) or an object\n"
     "    with ``__cuda_stream__``; 0, the default, is the default stream.\n"
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
     "stream : Stream or int, optional\n"
     "    The stream the work is queued on: a Stream, a CUstream handle (int) or an object\n"
     "    with ``__cuda_stream__``; 0, the default, is the default stream.\n"
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
    {"defer_cleanup_enter", py_defer_cleanup_enter, METH_NOARGS, NULL},
    {"defer_cleanup_exit", py_defer_cleanup_exit, METH_NOARGS, NULL},
    {"defer_cleanup_count", py_defer_cleanup_count, METH_NOARGS,
     "defer_cleanup_count() -> (depth, allocations held)."},
    {"devicearray_view", py_devicearray_view, METH_VARARGS, NULL},
    {"devicearray_ipc_export", py_devicearray_ipc_export, METH_O, NULL},
    {"ipc_open", py_ipc_open, METH_VARARGS, NULL},
    {"is_cuda_array", py_is_cuda_array, METH_O,
     "is_cuda_array(obj) -> whether obj exposes __cuda_array_interface__."},
    {NULL, NULL, 0, NULL},
};

int cf_py_devicearray_init_module(PyObject *m)
{
    if (PyType_Ready(&CfPyAllocation_Type) < 0 || PyType_Ready(&CfPyDeviceArray_Type) < 0 ||
        PyType_Ready(&CfPyIpcMemory_Type) < 0)
        return -1;
    Py_INCREF(&CfPyDeviceArray_Type);
    if (PyModule_AddObject(m, "DeviceArray", (PyObject *)&CfPyDeviceArray_Type) < 0) {
        Py_DECREF(&CfPyDeviceArray_Type);
        return -1;
    }
    return 0;
}
