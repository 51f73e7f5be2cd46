/* py_stream.h: streams (py_stream.c): the Stream type, `stream=` arguments, the ordering
 * between streams, Event. Below every file that queues work. */
#ifndef CF_PY_STREAM_H
#define CF_PY_STREAM_H

#include "py_common.h"

enum { CF_PY_STREAM_OWNED = 0, CF_PY_STREAM_DEFAULT = 1, CF_PY_STREAM_EXTERNAL = 2 };

typedef struct {
    PyObject_HEAD
    cf_stream *stream;   /* owned wrapper (and, for OWNED, the CUDA stream itself) */
    int device;
    int kind;            /* CF_PY_STREAM_* */
    PyObject *keepalive; /* the object an external stream came from, or NULL */
} CfPyStream;

extern PyTypeObject CfPyStream_Type;
#define CfPyStream_Check(o) PyObject_TypeCheck((o), &CfPyStream_Type)

/* Check the kind of a stream argument without touching the GPU. Accepted: 0 / None (the default
 * stream, with synchronous copies), a cufunc Stream, an object with __cuda_stream__ (the CUDA stream
 * protocol), 1 (legacy default stream) and 2 (per-thread default stream). Other ints are refused:
 * a bad handle would crash the driver; cuda.external_stream(ptr) takes raw handles on purpose. */
int cf_py_stream_check(PyObject *arg, const char *argname);
/* The device a stream argument implies: a Stream's own device, else the current device. */
int cf_py_stream_device(PyObject *arg, int *device, const char *argname);
/* Resolve a checked stream argument for work on `device`: a new reference to a Stream, or to
 * Py_None for 0 / None. ValueError naming `argname` if the stream belongs to another device. */
PyObject *cf_py_stream_resolve(PyObject *arg, int device, const char *argname);
/* The cf_stream to order work on for a resolved stream (a Stream or None): None gives the device's
 * legacy default stream (a wrapper cached for the life of the process). Borrowed. */
int cf_py_stream_get(PyObject *resolved, int device, cf_stream **out);
/* cf_stream_wrap on `device`, or, when the handle belongs to another device, on that one (another
 * library's current stream may be another device's than the data's: a wait across devices).
 * cf_status; the first failure's message when neither fits. */
cf_status cf_py_stream_wrap_any(int device, uintptr_t handle, cf_stream **out);
/* New Stream objects. */
PyObject *cf_py_stream_new_created(int device);
PyObject *cf_py_stream_new_default(int device);
PyObject *cf_py_stream_new_external(int device, uintptr_t handle, PyObject *keepalive);
/* The handle as the CUDA Array Interface / DLPack number it: the legacy default stream is 1. */
uintptr_t cf_py_stream_protocol_handle(PyObject *resolved);

/* Ordering between streams, for work on memory whose last writer queued its work on another
 * stream. Streams are resolved ones (a Stream, or NULL / None for the legacy default stream).
 * cf_py_stream_ordered: whether work queued on `consumer` runs after the work queued so far on
 * `producer` without any event: the same stream, or the legacy default stream and a blocking one
 * (cuda.stream(), the per-thread default stream). cf_py_stream_order_after: make `s` (the
 * cf_stream of `consumer`) wait for `producer` when that is not already so; nothing to do, and no
 * driver call, in the common case of one stream. */
int cf_py_stream_ordered(PyObject *producer, PyObject *consumer);
int cf_py_stream_order_after(cf_stream *s, PyObject *consumer, PyObject *producer, int device);
/* Whether a resolved stream is certainly still alive when nothing but its Stream object is left:
 * cufunc's own, the default ones, or an external one whose source object the Stream keeps (a
 * torch or CuPy stream object). A raw handle from external_stream(int) may have been destroyed. */
int cf_py_stream_usable_later(PyObject *stream);


int cf_py_stream_init_module(PyObject *m);
extern PyMethodDef cf_py_stream_methods[];

#endif
