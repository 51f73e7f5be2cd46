/* py_capturing.c: which call is being captured into a CUDA graph, and on which stream: the
 * capture state every call reads (py_graph.c makes the Graph objects and the Stream methods).
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
#include "py_capturing.h"
#include "py_hooks.h"

#include <string.h>

_Thread_local cf_stream *cf_py_capturing;
int cf_py_capture_gate;

/* A foreign operand's stream found capturing while the call read its operands (0: none). */
static _Thread_local uintptr_t seen_handle;
static _Thread_local int seen_device;

/* This thread's capture on a cufunc Stream (owned references), and the memory (CfPyMemory) its
 * calls used (a list), for the Graph to keep and order. */
static _Thread_local PyObject *own_stream;
static _Thread_local PyObject *own_arrays;

int cf_py_capture_refuse(const char *name, const char *why, const char *instead)
{
    PyObject *t = cf_py_hook(CF_PY_HOOK_GraphCaptureError);
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

void cf_py_capture_note_memory(PyObject *memory, cf_stream *s)
{
    if (own_arrays == NULL || memory == NULL || own_stream == NULL ||
        ((CfPyStream *)own_stream)->stream != s)
        return;
    if (PySequence_Contains(own_arrays, memory) == 0 &&
        PyList_Append(own_arrays, memory) < 0)
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

/* ---- this thread's capture on a cufunc Stream ------------------------------------------------ */

PyObject *cf_py_capture_own_thread(void) { return own_stream; }

void cf_py_capture_own_begin(PyObject *stream, PyObject *memory)
{
    own_stream = Py_NewRef(stream);
    own_arrays = memory;
    cf_py_capture_gate++;
}

PyObject *cf_py_capture_own_end(PyObject *stream)
{
    PyObject *memory = NULL;
    if (own_stream == stream) {
        memory = own_arrays;
        own_arrays = NULL;
        Py_CLEAR(own_stream);
        cf_py_capture_gate--;
    }
    return memory;
}

/* _capturing() -> the cufunc Stream this thread captures on, or None (ufunc.at's front). */
static PyObject *py_capturing(PyObject *mod, PyObject *unused)
{
    PyObject *own = cf_py_capture_own();
    return Py_NewRef(own ? own : Py_None);
}

PyMethodDef cf_py_capturing_methods[] = {
    {"_capturing", py_capturing, METH_NOARGS,
     "_capturing() -> the cufunc Stream this thread captures a CUDA graph on, or None."},
    {NULL, NULL, 0, NULL},
};
