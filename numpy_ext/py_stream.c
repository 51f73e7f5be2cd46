/* py_stream.c: the Stream type and the resolution of `stream=` arguments.
 *
 * A `stream=` argument is 0 / None (the device's legacy default stream; copies then return when the
 * data is in place, as in Numba), a cufunc Stream, an object speaking the CUDA stream protocol
 * (`__cuda_stream__() -> (0, handle)`), or 1 / 2 (the legacy / per-thread default streams, as the
 * CUDA Array Interface and DLPack number them). */
#include "py_stream.h"

#include <stdio.h>
#include <string.h>

/* The legacy default stream of each device, as cf_stream wrappers made once and kept for the life
 * of the process (they own nothing but the wrapper). */
static cf_stream **default_streams;
static int n_default_streams;

int cf_py_stream_get(PyObject *resolved, int device, cf_stream **out)
{
    cf_status st;
    if (resolved != NULL && resolved != Py_None) {
        *out = ((CfPyStream *)resolved)->stream;
        return 0;
    }
    if (device < 0) {
        PyErr_Format(PyExc_ValueError, "invalid device %d", device);
        return -1;
    }
    if (device >= n_default_streams) {
        int n = device + 1;
        cf_stream **grown = PyMem_Realloc(default_streams, sizeof(*grown) * (size_t)n);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(grown + n_default_streams, 0, sizeof(*grown) * (size_t)(n - n_default_streams));
        default_streams = grown;
        n_default_streams = n;
    }
    if (default_streams[device] == NULL) {
        st = cf_stream_default(device, &default_streams[device]);
        if (st != CF_OK)
            return cf_py_fail(st, "default stream");
    }
    *out = default_streams[device];
    return 0;
}

cf_status cf_py_stream_wrap_any(int device, uintptr_t handle, cf_stream **out)
{
    int other = -1;
    cf_status st = cf_stream_wrap(device, handle, out);
    if (st != CF_ERR_INVALID || cf_stream_handle_device(handle, &other) != CF_OK || other < 0 ||
        other == device)
        return st; /* the common case costs nothing more */
    return cf_stream_wrap(other, handle, out);
}

/* ---- the Stream type ------------------------------------------------------------------------- */

static PyObject *stream_new_from(cf_stream *s, int device, int kind, PyObject *keepalive)
{
    CfPyStream *self = PyObject_New(CfPyStream, &CfPyStream_Type);
    if (self == NULL) {
        cf_stream_free(s);
        return NULL;
    }
    self->stream = s;
    self->device = device;
    self->kind = kind;
    Py_XINCREF(keepalive);
    self->keepalive = keepalive;
    return (PyObject *)self;
}

PyObject *cf_py_stream_new_created(int device)
{
    cf_stream *s = NULL;
    /* Blocking, as Numba's cuda.stream() (cuStreamCreate with no flags): the legacy default
     * stream, where a call without stream= runs, and this stream wait for each other's earlier
     * work, so Numba code such as `d = cuda.to_device(h, stream=s); f(d)` is ordered with no
     * event at all, and memory freed on the default stream is never reused under a kernel still
     * running on s. Pairs of streams that are not ordered this way are ordered per array
     * (cf_py_order_operand). */
    cf_status st = cf_stream_create_ex(device, CF_STREAM_BLOCKING, &s);
    if (st != CF_OK)
        return cf_py_raise(st, "stream");
    return stream_new_from(s, device, CF_PY_STREAM_OWNED, NULL);
}

PyObject *cf_py_stream_new_default(int device)
{
    cf_stream *s = NULL;
    cf_status st = cf_stream_default(device, &s);
    if (st != CF_OK)
        return cf_py_raise(st, "default_stream");
    return stream_new_from(s, device, CF_PY_STREAM_DEFAULT, NULL);
}

PyObject *cf_py_stream_new_external(int device, uintptr_t handle, PyObject *keepalive)
{
    cf_stream *s = NULL;
    cf_status st = cf_stream_wrap(device, handle, &s);
    if (st != CF_OK)
        return cf_py_raise(st, "external_stream");
    return stream_new_from(s, device, CF_PY_STREAM_EXTERNAL, keepalive);
}

static void stream_dealloc(CfPyStream *self)
{
    /* For an owned stream this destroys the CUDA stream; the driver lets queued work finish. */
    cf_stream_free(self->stream);
    Py_XDECREF(self->keepalive);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *stream_repr(CfPyStream *self)
{
    static const char *kinds[] = {"stream", "default stream", "external stream"};
    char handle[32];
    snprintf(handle, sizeof handle, "0x%llx", (unsigned long long)cf_stream_handle(self->stream));
    return PyUnicode_FromFormat("<cufunc %s %s on device %d>", kinds[self->kind], handle,
                                self->device);
}

static PyObject *stream_synchronize(CfPyStream *self, PyObject *unused)
{
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_stream_synchronize(self->stream);
    Py_END_ALLOW_THREADS
    if (st != CF_OK)
        return cf_py_raise(st, "Stream.synchronize");
    Py_RETURN_NONE;
}

static PyObject *stream_query(CfPyStream *self, PyObject *unused)
{
    int done = 0;
    cf_status st = cf_stream_query(self->stream, &done);
    if (st != CF_OK)
        return cf_py_raise(st, "Stream.query");
    return PyBool_FromLong(done);
}

static PyObject *stream_wait_stream(CfPyStream *self, PyObject *other)
{
    cf_status st;
    if (!CfPyStream_Check(other)) {
        PyErr_Format(PyExc_TypeError, "Stream.wait_stream: other must be a cufunc Stream, got %.200s",
                     Py_TYPE(other)->tp_name);
        return NULL;
    }
    st = cf_stream_wait_stream(self->stream, ((CfPyStream *)other)->stream);
    if (st != CF_OK)
        return cf_py_raise(st, "Stream.wait_stream");
    Py_RETURN_NONE;
}

static PyObject *stream_enter(CfPyStream *self, PyObject *unused)
{
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *stream_exit(CfPyStream *self, PyObject *args)
{
    PyObject *r = stream_synchronize(self, NULL);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *stream_cuda_stream(CfPyStream *self, PyObject *unused)
{
    return Py_BuildValue("(iK)", 0, (unsigned long long)cf_stream_handle(self->stream));
}

static PyObject *stream_get_handle(CfPyStream *self, void *closure)
{
    return PyLong_FromUnsignedLongLong((unsigned long long)cf_stream_handle(self->stream));
}

static PyObject *stream_get_device(CfPyStream *self, void *closure)
{
    return PyLong_FromLong(self->device);
}

static PyObject *stream_get_is_default(CfPyStream *self, void *closure)
{
    return PyBool_FromLong(self->kind == CF_PY_STREAM_DEFAULT);
}

static PyObject *stream_get_is_external(CfPyStream *self, void *closure)
{
    return PyBool_FromLong(self->kind == CF_PY_STREAM_EXTERNAL);
}

static PyObject *stream_int(CfPyStream *self)
{
    return stream_get_handle(self, NULL);
}

static PyMethodDef stream_methods[] = {
    {"synchronize", (PyCFunction)stream_synchronize, METH_NOARGS,
     "synchronize($self, /)\n"
     "--\n"
     "\n"
     "Wait until all work queued on the stream is done.\n"},
    {"query", (PyCFunction)stream_query, METH_NOARGS,
     "query($self, /)\n"
     "--\n"
     "\n"
     "Tell whether all work queued on the stream is done, without waiting.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "bool\n"
     "    True when the stream is idle.\n"},
    {"wait_stream", (PyCFunction)stream_wait_stream, METH_O,
     "wait_stream($self, other, /)\n"
     "--\n"
     "\n"
     "Make this stream wait, on the device, for the work queued on another so far.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "other : Stream\n"
     "    The stream to wait for.\n"},
    {"auto_synchronize", (PyCFunction)stream_enter, METH_NOARGS,
     "auto_synchronize($self, /)\n"
     "--\n"
     "\n"
     "Give a context manager that synchronises the stream when its block exits.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Stream\n"
     "    The stream itself, a context manager: ``with stream.auto_synchronize(): ...``.\n"},
    {"__enter__", (PyCFunction)stream_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)stream_exit, METH_VARARGS, NULL},
    {"__cuda_stream__", (PyCFunction)stream_cuda_stream, METH_NOARGS,
     "The CUDA stream protocol: (0, handle)."},
    /* begin_capture, end_capture, is_capturing: added by py_graph.c at module init */
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"handle", (getter)stream_get_handle, NULL, "The CUstream as an int (0: legacy default).",
     NULL},
    {"ptr", (getter)stream_get_handle, NULL, "Same as handle.", NULL},
    {"device_id", (getter)stream_get_device, NULL, "The ordinal of the stream's device.", NULL},
    {"is_default", (getter)stream_get_is_default, NULL,
     "Whether this is the legacy default stream.", NULL},
    {"is_external", (getter)stream_get_is_external, NULL,
     "Whether the stream was made elsewhere (external_stream).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyNumberMethods stream_as_number = {
    .nb_int = (unaryfunc)stream_int,
};

PyTypeObject CfPyStream_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.Stream",
    .tp_basicsize = sizeof(CfPyStream),
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_repr = (reprfunc)stream_repr,
    .tp_as_number = &stream_as_number,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A CUDA stream. Made by cuda.stream(), cuda.default_stream() or "
              "cuda.external_stream(ptr).",
    .tp_methods = stream_methods,
    .tp_getset = stream_getset,
};

/* ---- `stream=` arguments --------------------------------------------------------------------- */

static int has_cuda_stream_protocol(PyObject *arg)
{
    PyObject *attr = PyObject_GetAttrString(arg, "__cuda_stream__");
    if (attr == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(attr);
    return 1;
}

static int small_int_value(PyObject *arg, long long *v)
{
    int overflow = 0;
    *v = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (*v == -1 && PyErr_Occurred())
        return -1;
    if (overflow)
        *v = -2; /* out of any accepted range */
    return 0;
}

int cf_py_stream_check(PyObject *arg, const char *argname)
{
    if (arg == NULL || arg == Py_None || CfPyStream_Check(arg))
        return 0;
    if (PyLong_Check(arg) && !PyBool_Check(arg)) {
        long long v;
        if (small_int_value(arg, &v) < 0)
            return -1;
        if (v == 0 || v == 1 || v == 2)
            return 0;
        PyErr_Format(PyExc_TypeError,
                     "%s: %R is not a stream; pass 0, a cufunc Stream or an object with "
                     "__cuda_stream__ (wrap a raw CUstream handle with cufunc.cuda.external_stream)",
                     argname, arg);
        return -1;
    }
    if (!PyBool_Check(arg) && has_cuda_stream_protocol(arg))
        return 0;
    PyErr_Format(PyExc_TypeError,
                 "%s: expected 0, a cufunc Stream or an object with __cuda_stream__, got %.200s",
                 argname, Py_TYPE(arg)->tp_name);
    return -1;
}

int cf_py_stream_device(PyObject *arg, int *device, const char *argname)
{
    if (arg != NULL && CfPyStream_Check(arg)) {
        *device = ((CfPyStream *)arg)->device;
        return cf_py_cuda_init(argname);
    }
    return cf_py_current_device(device, argname);
}

/* (version, handle) from obj.__cuda_stream__(). */
static int call_cuda_stream_protocol(PyObject *obj, uintptr_t *handle, const char *argname)
{
    PyObject *r = PyObject_CallMethod(obj, "__cuda_stream__", NULL);
    unsigned long long h;
    if (r == NULL)
        return -1;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 || !PyLong_Check(PyTuple_GET_ITEM(r, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(r, 1))) {
        PyErr_Format(PyExc_TypeError,
                     "%s: __cuda_stream__() must return (version, handle) ints, got %R", argname, r);
        Py_DECREF(r);
        return -1;
    }
    h = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(r, 1));
    Py_DECREF(r);
    if (h == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *handle = (uintptr_t)h;
    return 0;
}

PyObject *cf_py_stream_resolve(PyObject *arg, int device, const char *argname)
{
    uintptr_t handle;
    if (cf_py_stream_check(arg, argname) < 0)
        return NULL;
    if (arg == NULL || arg == Py_None)
        Py_RETURN_NONE;
    if (CfPyStream_Check(arg)) {
        CfPyStream *s = (CfPyStream *)arg;
        if (s->device != device) {
            PyErr_Format(PyExc_ValueError, "%s: the stream belongs to device %d, the data to device %d",
                         argname, s->device, device);
            return NULL;
        }
        Py_INCREF(arg);
        return arg;
    }
    if (PyLong_Check(arg)) {
        long long v;
        if (small_int_value(arg, &v) < 0)
            return NULL;
        if (v == 0)
            Py_RETURN_NONE;
        return cf_py_stream_new_external(device, (uintptr_t)v, NULL);
    }
    if (call_cuda_stream_protocol(arg, &handle, argname) < 0)
        return NULL;
    return cf_py_stream_new_external(device, handle, arg);
}

uintptr_t cf_py_stream_protocol_handle(PyObject *resolved)
{
    uintptr_t h;
    if (resolved == NULL || resolved == Py_None)
        return 1;
    h = cf_stream_handle(((CfPyStream *)resolved)->stream);
    return h == 0 ? 1 : h;
}

/* ---- ordering between streams ---------------------------------------------------------------- */

enum { ORD_LEGACY, ORD_BLOCKING, ORD_OTHER };

/* How a resolved stream (a Stream, or NULL / None for the legacy default stream) is ordered with
 * the legacy default stream: it is it, it is blocking (a cufunc stream, the per-thread default
 * stream), or nothing is known (an external stream, which may be non-blocking, as PyTorch's
 * side streams are). */
static int order_class(PyObject *stream)
{
    const CfPyStream *p;
    uintptr_t h;
    if (stream == NULL || stream == Py_None)
        return ORD_LEGACY;
    p = (const CfPyStream *)stream;
    if (p->kind == CF_PY_STREAM_DEFAULT)
        return ORD_LEGACY;
    if (p->kind == CF_PY_STREAM_OWNED)
        return ORD_BLOCKING; /* cf_py_stream_new_created */
    h = cf_stream_handle(p->stream);
    return h <= 1 ? ORD_LEGACY : h == 2 ? ORD_BLOCKING : ORD_OTHER;
}

int cf_py_stream_ordered(PyObject *producer, PyObject *consumer)
{
    int a, b;
    if (producer == Py_None)
        producer = NULL;
    if (consumer == Py_None)
        consumer = NULL;
    if (producer == consumer)
        return 1;
    a = order_class(producer);
    b = order_class(consumer);
    /* the legacy stream and a blocking stream wait for each other implicitly */
    if ((a == ORD_LEGACY && b != ORD_OTHER) || (b == ORD_LEGACY && a != ORD_OTHER))
        return 1;
    /* two wrappers of one stream (a torch stream resolved anew at each call). The per-thread
     * default stream (2) is taken as the same stream: it is, on the same thread. */
    if (producer != NULL && consumer != NULL) {
        const cf_stream *p = ((CfPyStream *)producer)->stream, *c = ((CfPyStream *)consumer)->stream;
        return cf_stream_device(p) == cf_stream_device(c) &&
               cf_stream_handle(p) == cf_stream_handle(c);
    }
    return 0;
}

int cf_py_stream_usable_later(PyObject *stream)
{
    const CfPyStream *p = (const CfPyStream *)stream;
    if (stream == NULL || stream == Py_None || p->kind != CF_PY_STREAM_EXTERNAL)
        return 1;
    return cf_stream_handle(p->stream) <= 2 || p->keepalive != NULL;
}

int cf_py_stream_order_after(cf_stream *s, PyObject *consumer, PyObject *producer, int device)
{
    cf_stream *ps;
    cf_status st;
    if (cf_py_stream_ordered(producer, consumer))
        return 0;
    if (cf_py_stream_get(producer == Py_None ? NULL : producer, device, &ps) < 0)
        return -1;
    st = cf_stream_wait_stream(s, ps);
    return st == CF_OK ? 0 : cf_py_fail(st, "ordering a call after the work that produced its "
                                            "arguments");
}

/* ---- Event (Numba's cuda.event) ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cf_event *event;
    int device;
    int timing;
} CfPyEvent;

static PyTypeObject CfPyEvent_Type;

static void event_dealloc(CfPyEvent *self)
{
    cf_event_free(self->event);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The cf_stream for a `stream=` argument of an event method (0: the legacy default stream). */
static int event_stream(CfPyEvent *self, PyObject *arg, const char *argname, cf_stream **s,
                        PyObject **resolved)
{
    *resolved = cf_py_stream_resolve(arg, self->device, argname);
    if (*resolved == NULL)
        return -1;
    if (cf_py_stream_get(*resolved, self->device, s) < 0) {
        Py_CLEAR(*resolved);
        return -1;
    }
    return 0;
}

static PyObject *event_record_or_wait(CfPyEvent *self, PyObject *args, PyObject *kwargs, int wait)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream = NULL, *resolved;
    cf_stream *s;
    cf_status st;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, wait ? "|O:wait" : "|O:record", kwlist,
                                     &stream))
        return NULL;
    if (cf_py_stream_check(stream, "stream") < 0 ||
        event_stream(self, stream, "stream", &s, &resolved) < 0)
        return NULL;
    st = wait ? cf_event_wait(self->event, s) : cf_event_record(self->event, s);
    Py_DECREF(resolved);
    if (st != CF_OK)
        return cf_py_raise(st, wait ? "Event.wait" : "Event.record");
    Py_RETURN_NONE;
}

static PyObject *event_record(CfPyEvent *self, PyObject *args, PyObject *kwargs)
{
    return event_record_or_wait(self, args, kwargs, 0);
}

static PyObject *event_wait(CfPyEvent *self, PyObject *args, PyObject *kwargs)
{
    return event_record_or_wait(self, args, kwargs, 1);
}

static PyObject *event_synchronize(CfPyEvent *self, PyObject *unused)
{
    cf_status st;
    Py_BEGIN_ALLOW_THREADS
    st = cf_event_synchronize(self->event);
    Py_END_ALLOW_THREADS
    if (st != CF_OK)
        return cf_py_raise(st, "Event.synchronize");
    Py_RETURN_NONE;
}

static PyObject *event_query(CfPyEvent *self, PyObject *unused)
{
    int done = 0;
    cf_status st = cf_event_query(self->event, &done);
    if (st != CF_OK)
        return cf_py_raise(st, "Event.query");
    return PyBool_FromLong(done);
}

/* elapsed_time(evtend) -> milliseconds from self to evtend, as a float (both must be complete). */
static PyObject *event_elapsed_time(CfPyEvent *self, PyObject *end)
{
    float ms = 0.f;
    cf_status st;
    if (!PyObject_TypeCheck(end, &CfPyEvent_Type)) {
        PyErr_Format(PyExc_TypeError, "elapsed_time: evtend must be a cufunc Event, got %.200s",
                     Py_TYPE(end)->tp_name);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    st = cf_event_elapsed_ms(self->event, ((CfPyEvent *)end)->event, &ms);
    Py_END_ALLOW_THREADS
    if (st != CF_OK)
        return cf_py_raise(st, "elapsed_time");
    return PyFloat_FromDouble((double)ms);
}

static PyObject *event_repr(CfPyEvent *self)
{
    return PyUnicode_FromFormat("<cufunc Event on device %d%s>", self->device,
                                self->timing ? " (timing)" : "");
}

static PyMethodDef event_methods[] = {
    {"record", (PyCFunction)(void (*)(void))event_record, METH_VARARGS | METH_KEYWORDS,
     "record($self, /, stream=0)\n"
     "--\n"
     "\n"
     "Record the event at the current end of a stream's work.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "stream : Stream or int, optional\n"
     "    A Stream, a CUstream handle (int) or an object with ``__cuda_stream__``; 0, the\n"
     "    default, is the legacy default stream.\n"},
    {"wait", (PyCFunction)(void (*)(void))event_wait, METH_VARARGS | METH_KEYWORDS,
     "wait($self, /, stream=0)\n"
     "--\n"
     "\n"
     "Make a stream's later work wait, on the device, for the event.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "stream : Stream or int, optional\n"
     "    A Stream, a CUstream handle (int) or an object with ``__cuda_stream__``; 0, the\n"
     "    default, is the legacy default stream.\n"},
    {"synchronize", (PyCFunction)event_synchronize, METH_NOARGS,
     "synchronize($self, /)\n"
     "--\n"
     "\n"
     "Wait on the host for the work recorded before the event.\n"},
    {"query", (PyCFunction)event_query, METH_NOARGS,
     "query($self, /)\n"
     "--\n"
     "\n"
     "Tell whether the work recorded before the event is done, without waiting.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "bool\n"
     "    True when it is done.\n"},
    {"elapsed_time", (PyCFunction)event_elapsed_time, METH_O,
     "elapsed_time($self, evtend, /)\n"
     "--\n"
     "\n"
     "Give the time between this event and a later one (both made with ``timing=True``).\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "evtend : Event\n"
     "    The later event.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "float\n"
     "    Milliseconds.\n"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CfPyEvent_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.Event",
    .tp_basicsize = sizeof(CfPyEvent),
    .tp_dealloc = (destructor)event_dealloc,
    .tp_repr = (reprfunc)event_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = event_methods,
    .tp_doc = "A CUDA event (cuda.event(timing=True)), as Numba's.",
};

static PyObject *py_event(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"timing", NULL};
    int timing = 1, device;
    cf_event *e = NULL;
    cf_status st;
    CfPyEvent *ev;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:event", kwlist, &timing))
        return NULL;
    if (cf_py_current_device(&device, "event") < 0)
        return NULL;
    if ((st = cf_event_create(device, timing, &e)) != CF_OK)
        return cf_py_raise(st, "event");
    ev = PyObject_New(CfPyEvent, &CfPyEvent_Type);
    if (ev == NULL) {
        cf_event_free(e);
        return NULL;
    }
    ev->event = e;
    ev->device = device;
    ev->timing = timing;
    return (PyObject *)ev;
}

/* ---- module functions ------------------------------------------------------------------------ */

static PyObject *py_stream(PyObject *self, PyObject *unused)
{
    int device;
    if (cf_py_current_device(&device, "stream") < 0)
        return NULL;
    return cf_py_stream_new_created(device);
}

static PyObject *py_default_stream(PyObject *self, PyObject *unused)
{
    int device;
    if (cf_py_current_device(&device, "default_stream") < 0)
        return NULL;
    return cf_py_stream_new_default(device);
}

static PyObject *py_wrapped_stream(uintptr_t handle, const char *what)
{
    int device;
    if (cf_py_current_device(&device, what) < 0)
        return NULL;
    return cf_py_stream_new_external(device, handle, NULL);
}

static PyObject *py_legacy_default_stream(PyObject *self, PyObject *unused)
{
    return py_wrapped_stream(1, "legacy_default_stream");
}

static PyObject *py_per_thread_default_stream(PyObject *self, PyObject *unused)
{
    return py_wrapped_stream(2, "per_thread_default_stream");
}

static PyObject *py_external_stream(PyObject *self, PyObject *arg)
{
    uintptr_t handle;
    int device;
    PyObject *keep = NULL;
    if (CfPyStream_Check(arg)) {
        Py_INCREF(arg);
        return arg;
    }
    if (PyLong_Check(arg) && !PyBool_Check(arg)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(arg);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "external_stream: ptr %R is not a CUstream handle", arg);
            return NULL;
        }
        handle = (uintptr_t)v;
    } else if (!PyBool_Check(arg) && has_cuda_stream_protocol(arg)) {
        if (call_cuda_stream_protocol(arg, &handle, "external_stream: ptr") < 0)
            return NULL;
        keep = arg;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "external_stream: ptr must be an int CUstream handle or an object with "
                     "__cuda_stream__, got %.200s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (cf_py_current_device(&device, "external_stream") < 0)
        return NULL;
    return cf_py_stream_new_external(device, handle, keep);
}

/* check_stream(obj): the argument check, without a GPU (for tests and the Python front). */
static PyObject *py_check_stream(PyObject *self, PyObject *arg)
{
    if (cf_py_stream_check(arg, "stream") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyMethodDef cf_py_stream_methods[] = {
    {"stream", py_stream, METH_NOARGS,
     "stream($module, /)\n"
     "--\n"
     "\n"
     "Make a new stream on the current device.\n"
     "\n"
     "As in Numba, it is ordered with the legacy default stream: work on either waits for the work\n"
     "queued before it on the other.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Stream\n"
     "    The new stream.\n"},
    {"default_stream", py_default_stream, METH_NOARGS,
     "default_stream($module, /)\n"
     "--\n"
     "\n"
     "Give the legacy default stream of the current device.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Stream\n"
     "    The default stream.\n"},
    {"legacy_default_stream", py_legacy_default_stream, METH_NOARGS,
     "legacy_default_stream($module, /)\n"
     "--\n"
     "\n"
     "Give the legacy default stream (``CU_STREAM_LEGACY``).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Stream\n"
     "    The legacy default stream.\n"},
    {"per_thread_default_stream", py_per_thread_default_stream, METH_NOARGS,
     "per_thread_default_stream($module, /)\n"
     "--\n"
     "\n"
     "Give the per-thread default stream (``CU_STREAM_PER_THREAD``).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Stream\n"
     "    The per-thread default stream.\n"},
    {"external_stream", py_external_stream, METH_O,
     "external_stream($module, ptr, /)\n"
     "--\n"
     "\n"
     "Wrap a CUDA stream made elsewhere.\n"
     "\n"
     "The stream must belong to the current device and outlive its use.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "ptr : int or object\n"
     "    A CUstream handle (e.g. ``torch.cuda.current_stream().cuda_stream``) or an object with\n"
     "    ``__cuda_stream__``.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Stream\n"
     "    A Stream over it.\n"},
    {"event", (PyCFunction)(void (*)(void))py_event, METH_VARARGS | METH_KEYWORDS,
     "event($module, /, timing=True)\n"
     "--\n"
     "\n"
     "Make a new CUDA event on the current device.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "timing : bool, optional\n"
     "    Record times (for ``elapsed_time``).\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Event\n"
     "    The event.\n"},
    {"check_stream", py_check_stream, METH_O,
     "check_stream(obj): raise TypeError if obj is not a valid stream argument."},
    {NULL, NULL, 0, NULL},
};

int cf_py_stream_init_module(PyObject *m)
{
    if (PyType_Ready(&CfPyStream_Type) < 0 || PyType_Ready(&CfPyEvent_Type) < 0)
        return -1;
    Py_INCREF(&CfPyEvent_Type);
    if (PyModule_AddObject(m, "Event", (PyObject *)&CfPyEvent_Type) < 0) {
        Py_DECREF(&CfPyEvent_Type);
        return -1;
    }
    Py_INCREF(&CfPyStream_Type);
    if (PyModule_AddObject(m, "Stream", (PyObject *)&CfPyStream_Type) < 0) {
        Py_DECREF(&CfPyStream_Type);
        return -1;
    }
    return 0;
}
