/* py_memory.c: CfPyMemory, the one owner of a piece of device memory behind DeviceArrays: memory
 * cufunc allocated (the device's stream-ordered pool, or exportable memory for CUDA IPC), memory
 * imported through DLPack (the producer's managed tensor), and memory of another process opened
 * from a CUDA IPC handle. Whatever the kind, it keeps what ordering and IPC need to know of the
 * memory: the stream of the last work queued that writes it (`pending`), whether its address left
 * cufunc's hands (`exposed`), and the capture it was allocated in. It is released when the last
 * view dies: returned to the pool in stream order, the producer's deleter called, or the IPC
 * mapping closed.
 *
 * cuda.defer_cleanup() (defer_cleanup_enter/exit): while its depth is above 0, allocations whose
 * last view dies are kept and freed when the outermost block ends. */
#include "py_memory.h"
#include "py_capturing.h"
#include "dlpack.h"

#include <stdio.h>
#include <string.h>

/* cuda.defer_cleanup(): while its depth is above 0, memory whose last view dies is moved to a new
 * owner kept in `deferred`, freed when the outermost block ends (the GIL guards both). */
static int defer_depth;
static PyObject *deferred;

static CfPyMemory *memory_new(int kind, uint64_t ptr, size_t nbytes, int device)
{
    CfPyMemory *m = PyObject_New(CfPyMemory, &CfPyMemory_Type);
    if (m == NULL)
        return NULL;
    m->ptr = ptr;
    m->nbytes = nbytes;
    m->device = device;
    m->kind = kind;
    m->stream = m->pending = m->capture = NULL;
    m->exposed = 0;
    m->managed = NULL;
    m->versioned = 0;
    return m;
}

static int defer_free(CfPyMemory *self)
{
    CfPyMemory *keep;
    if (defer_depth == 0 || deferred == NULL || cf_py_is_finalizing())
        return 0;
    keep = memory_new(CF_PY_MEM_ALLOC, self->ptr, self->nbytes, self->device);
    if (keep == NULL) {
        PyErr_Clear();
        return 0; /* freed now rather than lost */
    }
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

/* Memory cufunc allocated: back to the pool (or cuMemFree) in stream order. */
static void release_allocation(CfPyMemory *self)
{
    cf_stream *s = NULL;
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
}

/* Memory imported through DLPack: the producer's deleter. */
static void release_dlpack(CfPyMemory *self)
{
    if (self->managed == NULL)
        return;
    if (self->versioned) {
        DLManagedTensorVersioned *m = self->managed;
        if (m->deleter)
            m->deleter(m);
    } else {
        DLManagedTensor *m = self->managed;
        if (m->deleter)
            m->deleter(m);
    }
    self->managed = NULL;
}

static void memory_dealloc(CfPyMemory *self)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    switch (self->kind) {
    case CF_PY_MEM_ALLOC:
        release_allocation(self);
        break;
    case CF_PY_MEM_DLPACK:
        release_dlpack(self);
        break;
    case CF_PY_MEM_IPC:
        if (self->ptr != 0 && !cf_py_is_finalizing())
            cf_ipc_close(self->device, self->ptr);
        break;
    }
    Py_XDECREF(self->stream);
    Py_XDECREF(self->pending);
    Py_XDECREF(self->capture);
    Py_TYPE(self)->tp_free((PyObject *)self);
    PyErr_Restore(type, value, tb);
}

static PyObject *memory_repr(CfPyMemory *self)
{
    static const char *what[] = {"device allocation", "DLPack import", "IPC mapping"};
    return PyUnicode_FromFormat("<cufunc %s of %zu bytes at 0x%llx on device %d>",
                                what[self->kind], self->nbytes, (unsigned long long)self->ptr,
                                self->device);
}

/* close(): for memory opened from an IPC handle, cuIpcCloseMemHandle now (IpcArrayHandle.close);
 * views of it must not be used afterwards. */
static PyObject *memory_close(CfPyMemory *self, PyObject *unused)
{
    if (self->kind != CF_PY_MEM_IPC) {
        PyErr_SetString(PyExc_ValueError, "close: only memory opened from an IPC handle is "
                        "closed by hand; other memory is released when its last view dies");
        return NULL;
    }
    if (self->ptr != 0) {
        cf_status st = cf_ipc_close(self->device, self->ptr);
        self->ptr = 0;
        if (st != CF_OK)
            return cf_py_raise(st, "IpcHandle.close");
    }
    Py_RETURN_NONE;
}

static PyObject *memory_get_ptr(CfPyMemory *self, void *c)
{
    return PyLong_FromUnsignedLongLong((unsigned long long)self->ptr);
}

static PyMethodDef memory_methods[] = {
    {"close", (PyCFunction)memory_close, METH_NOARGS,
     "close(): cuIpcCloseMemHandle, for memory opened from an IPC handle."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef memory_getset[] = {
    {"ptr", (getter)memory_get_ptr, NULL, "The device address (0 once released).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject CfPyMemory_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.DeviceMemory",
    .tp_basicsize = sizeof(CfPyMemory),
    .tp_dealloc = (destructor)memory_dealloc,
    .tp_repr = (reprfunc)memory_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = memory_methods,
    .tp_getset = memory_getset,
    .tp_doc = "Device memory behind DeviceArrays (allocated by cufunc, imported through DLPack, "
              "or opened from a CUDA IPC handle), released when the last view dies; it keeps "
              "the stream of the last write to the memory.",
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

/* ipc: cuMemAlloc memory that cuIpcGetMemHandle can export (pool memory cannot be). */
CfPyMemory *cf_py_memory_alloc(size_t nbytes, int device, PyObject *stream, const char *what,
                               int ipc)
{
    CfPyMemory *a;
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
        return (CfPyMemory *)cf_py_raise(st, what);
    a = memory_new(CF_PY_MEM_ALLOC, ptr, nbytes, device);
    if (a == NULL) {
        cf_mem_free(s, ptr);
        return NULL;
    }
    a->stream = (stream != NULL && stream != Py_None) ? stream : NULL;
    Py_XINCREF(a->stream);
    a->pending = Py_XNewRef(a->stream); /* the memory is usable after the allocation on it */
    if (cf_py_capture_gate && s == cf_py_capturing) {
        a->capture = Py_XNewRef(a->stream);
        cf_py_capture_note_memory((PyObject *)a, s);
    }
    return a;
}

CfPyMemory *cf_py_memory_dlpack(int versioned, uint64_t ptr, int device, PyObject *pending)
{
    CfPyMemory *m = memory_new(CF_PY_MEM_DLPACK, ptr, 0, device);
    if (m == NULL)
        return NULL;
    m->versioned = versioned;
    m->pending = Py_XNewRef(pending);
    return m;
}

CfPyMemory *cf_py_memory_ipc(uint64_t ptr, int device)
{
    return memory_new(CF_PY_MEM_IPC, ptr, 0, device);
}

/* ---- the pending writes ------------------------------------------------------------------- */

int cf_py_memory_order(PyObject *memory, cf_stream *s, PyObject *resolved)
{
    CfPyMemory *a = (CfPyMemory *)memory;
    if (a->ptr == 0 || !cf_py_stream_usable_later(a->pending))
        return 0;
    return cf_py_stream_order_after(s, resolved == Py_None ? NULL : resolved, a->pending,
                                    a->device);
}

void cf_py_memory_written(PyObject *memory, PyObject *resolved)
{
    CfPyMemory *a = (CfPyMemory *)memory;
    PyObject *consumer = resolved == Py_None ? NULL : resolved;
    Py_XINCREF(consumer);
    Py_XSETREF(a->pending, consumer);
}

/* ---- cuda.defer_cleanup --------------------------------------------------------------------- */

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


PyMethodDef cf_py_memory_methods[] = {
    {"defer_cleanup_enter", py_defer_cleanup_enter, METH_NOARGS, NULL},
    {"defer_cleanup_exit", py_defer_cleanup_exit, METH_NOARGS, NULL},
    {"defer_cleanup_count", py_defer_cleanup_count, METH_NOARGS,
     "defer_cleanup_count() -> (depth, allocations held)."},
    {NULL, NULL, 0, NULL},
};

int cf_py_memory_init_module(PyObject *m)
{
    return PyType_Ready(&CfPyMemory_Type);
}
