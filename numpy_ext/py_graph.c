/* py_graph.c: CUDA graph capture from Python.
 *
 * Which stream a call is captured on: the stream= given; else, while one of the call's foreign
 * operands names a stream that is capturing (PyTorch's current stream inside torch.cuda.graph,
 * CuPy's inside Stream.begin_capture), that stream; else, while this thread captures on a cufunc
 * Stream (Stream.begin_capture), that Stream. A call whose stream captures (cf_py_capturing, set
 * by the place step for the call's duration) queues no wait on work outside the capture, and the
 * calls that cannot be captured (host operands or results, a host scalar) are refused before
 * anything is queued, so that the caller's capture stays valid.
 *
 * Stream.begin_capture() / end_capture() make a Graph (CuPy's spelling: launch(stream), upload);
 * the Graph keeps the memory its kernels read and write alive, and orders a launch after the
 * last writes to that memory and later work after the launch, as a call is ordered. */
#include "py_common.h"

#include <string.h>

_Thread_local cf_stream *cf_py_capturing;
int cf_py_capture_gate;

/* A foreign operand's stream found capturing while the call read its operands (0: none). */
static _Thread_local uintptr_t seen_handle;
static _Thread_local int seen_device;

/* This thread's capture on a cufunc Stream (owned references), and the Allocations its calls
 * used (a list), for the Graph to keep and order. */
static _Thread_local PyObject *own_stream;
static _Thread_local PyObject *own_arrays;

static PyObject *capture_error_type(void)
{
    static PyObject *type;
    if (type == NULL) {
        PyObject *errors = PyImport_ImportModule("cufunc.errors");
        if (errors == NULL)
            return NULL;
        type = PyObject_GetAttrString(errors, "GraphCaptureError");
        Py_DECREF(errors);
    }
    return type;
}

int cf_py_capture_refuse(const char *name, const char *why, const char *instead)
{
    PyObject *t = capture_error_type();
    if (t != NULL)
        PyErr_Format(t, "%s: %s cannot be captured in a CUDA graph (the capture was left as it "
                     "was); %s", name, why, instead);
    return -1;
}

void cf_py_capture_call_begin(void)
{
    if (cf_py_capture_gate && seen_handle != 0) {
        seen_handle = 0;
        cf_py_capture_gate--;
    }
}

int cf_py_capture_pending(void)
{
    return cf_py_capture_gate && (seen_handle != 0 || own_stream != NULL);
}

void cf_py_capture_call_enter(cf_stream *s)
{
    cf_py_capturing = s;
    cf_py_capture_gate++;
}

void cf_py_capture_call_leave(void)
{
    cf_py_capturing = NULL;
    cf_py_capture_gate--;
}

int cf_py_capture_stream_status(PyObject *resolved, cf_stream *s, int *capturing)
{
    *capturing = 0;
    if (resolved == NULL || resolved == Py_None)
        return 0; /* the legacy default stream never captures */
    const CfPyStream *p = (const CfPyStream *)resolved;
    if (p->kind == CF_PY_STREAM_DEFAULT || cf_stream_handle(s) <= 1)
        return 0;
    if (p->kind == CF_PY_STREAM_OWNED) {
        /* cufunc's own streams capture through Stream.begin_capture only */
        *capturing = cf_py_capture_gate && own_stream == resolved;
        return 0;
    }
    return cf_py_capture_status(s, capturing);
}

int cf_py_capture_status(cf_stream *s, int *capturing)
{
    int status = CF_CAPTURE_NONE;
    cf_status st = cf_stream_capture_status(s, &status);
    if (st != CF_OK)
        return cf_py_fail(st, "querying a stream's capture status");
    *capturing = status == CF_CAPTURE_ACTIVE || status == CF_CAPTURE_INVALIDATED;
    return 0;
}

int cf_py_capture_note_foreign(cf_stream *s, int *capturing)
{
    *capturing = 0;
    if (cf_stream_handle(s) <= 1)
        return 0; /* the legacy default stream (PyTorch's default stream is it) never captures */
    if (cf_py_capture_status(s, capturing) < 0)
        return -1;
    if (*capturing) {
        if (seen_handle == 0)
            cf_py_capture_gate++;
        seen_handle = cf_stream_handle(s);
        seen_device = cf_stream_device(s);
    }
    return 0;
}

PyObject *cf_py_capture_default(int device)
{
    if (seen_handle != 0 && (device < 0 || device == seen_device))
        return cf_py_stream_new_external(seen_device, seen_handle, NULL);
    if (own_stream != NULL && (device < 0 || device == ((CfPyStream *)own_stream)->device))
        return Py_NewRef(own_stream);
    return Py_NewRef(Py_None);
}

PyObject *cf_py_capture_own(void) { return cf_py_capture_gate ? own_stream : NULL; }

void cf_py_capture_note_allocation(PyObject *allocation, cf_stream *s)
{
    if (own_arrays == NULL || allocation == NULL || own_stream == NULL ||
        ((CfPyStream *)own_stream)->stream != s)
        return;
    if (PySequence_Contains(own_arrays, allocation) == 0 &&
        PyList_Append(own_arrays, allocation) < 0)
        PyErr_Clear(); /* a Graph that keeps one array fewer alive: the caller's own references */
}

/* Whether a foreign library captures on its current stream of `device` right now: PyTorch
 * (torch.cuda.is_current_stream_capturing) when it is imported. Calls with host operands only. */
static int torch_capturing(void)
{
    PyObject *name = PyUnicode_FromString("torch.cuda");
    if (name == NULL)
        return -1;
    PyObject *mod = PyImport_GetModule(name);
    Py_DECREF(name);
    if (mod == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *r = PyObject_CallMethod(mod, "is_current_stream_capturing", NULL);
    Py_DECREF(mod);
    if (r == NULL) {
        PyErr_Clear(); /* torch.cuda present but not usable: no capture of its own either */
        return 0;
    }
    int v = PyObject_IsTrue(r);
    Py_DECREF(r);
    return v;
}

int cf_py_capture_check_host(const char *name, int capturing, int device)
{
    static const char instead[] = "pass device arrays (cufunc.cuda.to_device, or the caller's "
                                  "own tensors) for every operand and output";
    if (capturing)
        return cf_py_capture_refuse(name, "a call on host (NumPy) arrays, or one returning a "
                                    "host result,", instead);
    cf_stream *legacy;
    int status = CF_CAPTURE_NONE;
    if (cf_py_stream_get(NULL, device, &legacy) < 0)
        return -1;
    if (cf_stream_capture_status(legacy, &status) != CF_OK)
        return cf_py_fail(cf_last_status(), "querying the legacy default stream");
    int t = status == CF_CAPTURE_IMPLICIT ? 1 : torch_capturing();
    if (t < 0)
        return -1;
    if (t)
        return cf_py_capture_refuse(name, "a call on host (NumPy) arrays during a capture (it "
                                    "would copy and synchronise outside the graph, which "
                                    "invalidates the capture)", instead);
    return 0;
}

/* ---- Graph ---------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cf_graph *graph;
    PyObject *stream; /* the Stream it was captured on */
    PyObject *arrays; /* the Allocations its calls read and wrote (a list) */
    int device;
} CfPyGraph;

static void graph_dealloc(CfPyGraph *self)
{
    cf_graph_free(self->graph);
    Py_XDECREF(self->stream);
    Py_XDECREF(self->arrays);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The resolved stream of a launch/upload argument (None: the capture's own stream). */
static PyObject *graph_stream(CfPyGraph *self, PyObject *arg, cf_stream **s)
{
    PyObject *r;
    if (arg == NULL || arg == Py_None)
        r = Py_NewRef(self->stream);
    else if (cf_py_stream_check(arg, "stream") < 0 ||
             (r = cf_py_stream_resolve(arg, self->device, "stream")) == NULL)
        return NULL;
    if (cf_py_stream_get(r, self->device, s) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

static PyObject *graph_launch(CfPyGraph *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *arg = NULL;
    cf_stream *s;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:launch", kwlist, &arg))
        return NULL;
    PyObject *r = graph_stream(self, arg, &s);
    if (r == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(self->arrays);
    /* after the last writes to the memory the graph uses, wherever they were queued */
    for (Py_ssize_t i = 0; i < n; i++)
        if (cf_py_allocation_order(PyList_GET_ITEM(self->arrays, i), s, r) < 0)
            goto fail;
    cf_status st = cf_graph_launch(self->graph, s);
    cf_context_restore();
    if (st != CF_OK) {
        cf_py_raise(st, "Graph.launch");
        goto fail;
    }
    /* later work on other streams waits for the launch */
    for (Py_ssize_t i = 0; i < n; i++)
        cf_py_allocation_written(PyList_GET_ITEM(self->arrays, i), r);
    Py_DECREF(r);
    Py_RETURN_NONE;
fail:
    Py_DECREF(r);
    return NULL;
}

static PyObject *graph_replay(CfPyGraph *self, PyObject *unused)
{
    PyObject *args = PyTuple_New(0);
    PyObject *r = args ? graph_launch(self, args, NULL) : NULL;
    Py_XDECREF(args);
    return r;
}

static PyObject *graph_upload(CfPyGraph *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *arg = NULL;
    cf_stream *s;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:upload", kwlist, &arg))
        return NULL;
    PyObject *r = graph_stream(self, arg, &s);
    if (r == NULL)
        return NULL;
    cf_status st = cf_graph_upload(self->graph, s);
    cf_context_restore();
    Py_DECREF(r);
    if (st != CF_OK)
        return cf_py_raise(st, "Graph.upload");
    Py_RETURN_NONE;
}

static PyObject *graph_get_nodes(CfPyGraph *self, void *closure)
{
    size_t n = 0;
    cf_status st = cf_graph_node_count(self->graph, &n);
    cf_context_restore();
    if (st != CF_OK)
        return cf_py_raise(st, "Graph.node_count");
    return PyLong_FromSize_t(n);
}

static PyObject *graph_get_stream(CfPyGraph *self, void *closure)
{
    return Py_NewRef(self->stream);
}

static PyObject *graph_repr(CfPyGraph *self)
{
    return PyUnicode_FromFormat("<cufunc Graph on device %d>", self->device);
}

static PyMethodDef graph_methods[] = {
    {"launch", (PyCFunction)(void (*)(void))graph_launch, METH_VARARGS | METH_KEYWORDS,
     "launch($self, /, stream=None)\n"
     "--\n"
     "\n"
     "Run the captured work.\n"
     "\n"
     "It runs after the last writes to the memory it uses; later work sees its writes.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "stream : Stream or int, optional\n"
     "    The stream; the stream it was captured on when not given.\n"},
    {"replay", (PyCFunction)graph_replay, METH_NOARGS,
     "replay($self, /)\n"
     "--\n"
     "\n"
     "Launch the graph on the stream it was captured on.\n"},
    {"upload", (PyCFunction)(void (*)(void))graph_upload, METH_VARARGS | METH_KEYWORDS,
     "upload($self, /, stream=None)\n"
     "--\n"
     "\n"
     "Prepare the graph's first launch on the device ahead of time.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "stream : Stream or int, optional\n"
     "    The stream; the stream it was captured on when not given.\n"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef graph_getset[] = {
    {"node_count", (getter)graph_get_nodes, NULL,
     "The number of nodes of the graph (kernels, memsets, allocations, frees).", NULL},
    {"stream", (getter)graph_get_stream, NULL, "The Stream it was captured on.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CfPyGraph_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cufunc._core.Graph",
    .tp_basicsize = sizeof(CfPyGraph),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_repr = (reprfunc)graph_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A CUDA graph captured on a cufunc Stream (Stream.begin_capture / end_capture).",
    .tp_methods = graph_methods,
    .tp_getset = graph_getset,
};

/* ---- Stream.begin_capture / end_capture ----------------------------------------------------- */

static int parse_mode(PyObject *mode, int *out)
{
    static const char *names[] = {"global", "thread_local", "relaxed"};
    if (mode == NULL || mode == Py_None) {
        *out = CF_CAPTURE_THREAD_LOCAL;
        return 0;
    }
    const char *m = PyUnicode_Check(mode) ? PyUnicode_AsUTF8(mode) : NULL;
    for (int i = 0; m && i < 3; i++)
        if (strcmp(m, names[i]) == 0) {
            *out = i;
            return 0;
        }
    if (m == NULL && PyErr_Occurred())
        return -1;
    PyErr_Format(PyExc_ValueError, "begin_capture: mode must be 'global', 'thread_local' or "
                 "'relaxed', not %R", mode);
    return -1;
}

PyObject *cf_py_stream_begin_capture(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"mode", NULL};
    PyObject *mode_arg = NULL;
    int mode;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:begin_capture", kwlist, &mode_arg) ||
        parse_mode(mode_arg, &mode) < 0)
        return NULL;
    CfPyStream *st = (CfPyStream *)self;
    if (own_stream != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "begin_capture: this thread captures on another "
                        "cufunc Stream already; end_capture() it first");
        return NULL;
    }
    if (st->kind == CF_PY_STREAM_DEFAULT || cf_stream_handle(st->stream) <= 1) {
        PyErr_SetString(PyExc_ValueError, "begin_capture: the legacy default stream cannot "
                        "capture; capture on cufunc.cuda.stream()");
        return NULL;
    }
    PyObject *arrays = PyList_New(0);
    if (arrays == NULL)
        return NULL;
    cf_status s = cf_stream_begin_capture(st->stream, mode);
    cf_context_restore();
    if (s != CF_OK) {
        Py_DECREF(arrays);
        return cf_py_raise(s, "Stream.begin_capture");
    }
    own_stream = Py_NewRef(self);
    own_arrays = arrays;
    cf_py_capture_gate++;
    Py_RETURN_NONE;
}

PyObject *cf_py_stream_end_capture(PyObject *self, PyObject *unused)
{
    CfPyStream *st = (CfPyStream *)self;
    cf_graph *g = NULL;
    cf_status s = cf_stream_end_capture(st->stream, &g);
    cf_context_restore();
    PyObject *arrays = NULL;
    if (own_stream == self) {
        arrays = own_arrays;
        own_arrays = NULL;
        Py_CLEAR(own_stream);
        cf_py_capture_gate--;
    }
    if (s != CF_OK) {
        Py_XDECREF(arrays);
        return cf_py_raise(s, "Stream.end_capture");
    }
    if (arrays == NULL && (arrays = PyList_New(0)) == NULL) {
        cf_graph_free(g);
        return NULL;
    }
    CfPyGraph *r = PyObject_New(CfPyGraph, &CfPyGraph_Type);
    if (r == NULL) {
        cf_graph_free(g);
        Py_DECREF(arrays);
        return NULL;
    }
    r->graph = g;
    r->stream = Py_NewRef(self);
    r->arrays = arrays;
    r->device = st->device;
    return (PyObject *)r;
}

PyObject *cf_py_stream_is_capturing(PyObject *self, PyObject *unused)
{
    int capturing = 0;
    int r = cf_py_capture_status(((CfPyStream *)self)->stream, &capturing);
    cf_context_restore();
    if (r < 0)
        return NULL;
    return PyBool_FromLong(capturing);
}

/* _capturing() -> the cufunc Stream this thread captures on, or None (ufunc.at's front). */
static PyObject *py_capturing(PyObject *mod, PyObject *unused)
{
    PyObject *own = cf_py_capture_own();
    return Py_NewRef(own ? own : Py_None);
}

PyMethodDef cf_py_graph_methods[] = {
    {"_capturing", py_capturing, METH_NOARGS,
     "_capturing() -> the cufunc Stream this thread captures a CUDA graph on, or None."},
    {NULL, NULL, 0, NULL},
};

int cf_py_graph_init_module(PyObject *m)
{
    if (PyType_Ready(&CfPyGraph_Type) < 0)
        return -1;
    Py_INCREF(&CfPyGraph_Type);
    if (PyModule_AddObject(m, "Graph", (PyObject *)&CfPyGraph_Type) < 0) {
        Py_DECREF(&CfPyGraph_Type);
        return -1;
    }
    return 0;
}
