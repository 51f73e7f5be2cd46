/* py_graph.c: CUDA graphs captured on a cufunc Stream: Stream.begin_capture() / end_capture() /
 * is_capturing() (methods this file adds to the Stream type at module init: streams sit below
 * graphs) make a Graph (CuPy's spelling: launch(stream), upload); the Graph keeps the memory its
 * kernels read and write alive (the CfPyMemory owners its calls noted), and orders a launch after
 * the last writes to that memory and later work after the launch, as a call is ordered. Which
 * call is captured on which stream: py_capturing.c. */
#include "py_graph.h"
#include "py_capturing.h"
#include "py_memory.h"
#include "py_stream.h"

#include <string.h>

/* ---- Graph ---------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cf_graph *graph;
    PyObject *stream; /* the Stream it was captured on */
    PyObject *arrays; /* the memory (CfPyMemory) its calls read and wrote (a list) */
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
        if (cf_py_memory_order(PyList_GET_ITEM(self->arrays, i), s, r) < 0)
            goto fail;
    cf_status st = cf_graph_launch(self->graph, s);
    cf_context_restore();
    if (st != CF_OK) {
        cf_py_raise(st, "Graph.launch");
        goto fail;
    }
    /* later work on other streams waits for the launch */
    for (Py_ssize_t i = 0; i < n; i++)
        cf_py_memory_written(PyList_GET_ITEM(self->arrays, i), r);
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

static PyObject *stream_begin_capture(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"mode", NULL};
    PyObject *mode_arg = NULL;
    int mode;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:begin_capture", kwlist, &mode_arg) ||
        parse_mode(mode_arg, &mode) < 0)
        return NULL;
    CfPyStream *st = (CfPyStream *)self;
    if (cf_py_capture_own_thread() != NULL) {
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
    cf_py_capture_own_begin(self, arrays);
    Py_RETURN_NONE;
}

static PyObject *stream_end_capture(PyObject *self, PyObject *unused)
{
    CfPyStream *st = (CfPyStream *)self;
    cf_graph *g = NULL;
    cf_status s = cf_stream_end_capture(st->stream, &g);
    cf_context_restore();
    PyObject *arrays = cf_py_capture_own_end(self);
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

static PyObject *stream_is_capturing(PyObject *self, PyObject *unused)
{
    int capturing = 0;
    int r = cf_py_capture_status(((CfPyStream *)self)->stream, &capturing);
    cf_context_restore();
    if (r < 0)
        return NULL;
    return PyBool_FromLong(capturing);
}

/* Stream's capture methods, added to the Stream type at module init. */
static PyMethodDef stream_capture_methods[] = {
    {"begin_capture", (PyCFunction)(void (*)(void))stream_begin_capture,
     METH_VARARGS | METH_KEYWORDS,
     "begin_capture($self, /, mode='thread_local')\n"
     "--\n"
     "\n"
     "Capture the work queued on this stream into a CUDA graph instead of running it.\n"
     "\n"
     "cufunc calls without ``stream=`` on this thread are captured here too.\n"
     "\n"
     "Parameters\n"
     "----------\n"
     "mode : {'thread_local', 'global', 'relaxed'}, optional\n"
     "    The capture mode (``cudaStreamCaptureMode``).\n"},
    {"end_capture", (PyCFunction)stream_end_capture, METH_NOARGS,
     "end_capture($self, /)\n"
     "--\n"
     "\n"
     "End the capture begun by ``begin_capture``.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "Graph\n"
     "    The captured graph; ``Graph.launch(stream)`` replays it.\n"},
    {"is_capturing", (PyCFunction)stream_is_capturing, METH_NOARGS,
     "is_capturing($self, /)\n"
     "--\n"
     "\n"
     "Tell whether the stream captures a CUDA graph now.\n"
     "\n"
     "Returns\n"
     "-------\n"
     "bool\n"
     "    True during a capture.\n"},
    {NULL, NULL, 0, NULL},
};

int cf_py_graph_init_module(PyObject *m)
{
    if (PyType_Ready(&CfPyGraph_Type) < 0)
        return -1;
    /* the Stream type is ready (py_stream.c's init runs first): its capture methods join it */
    PyObject *dict = CfPyStream_Type.tp_dict;
    for (PyMethodDef *d = stream_capture_methods; d->ml_name != NULL; d++) {
        PyObject *descr = PyDescr_NewMethod(&CfPyStream_Type, d);
        int bad = descr == NULL || PyDict_SetItemString(dict, d->ml_name, descr) < 0;
        Py_XDECREF(descr);
        if (bad)
            return -1;
    }
    PyType_Modified(&CfPyStream_Type);
    Py_INCREF(&CfPyGraph_Type);
    if (PyModule_AddObject(m, "Graph", (PyObject *)&CfPyGraph_Type) < 0) {
        Py_DECREF(&CfPyGraph_Type);
        return -1;
    }
    return 0;
}
