/* py_common.h: what the C files of the extension cufunc._core share. They use only the public C API
 * (include/cufunc/), never src/ headers.
 *
 * Conventions: functions returning int give 0 on success and -1 with a Python exception set;
 * functions returning PyObject * give a new reference or NULL with an exception set. Checks of
 * arguments that need no GPU come before the first call that does (cf_py_cuda_init), so bad input
 * is reported as such on a machine without a GPU too. */
#ifndef CF_PY_COMMON_H
#define CF_PY_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* One NumPy C-API table for the whole extension; _coremodule.c defines CF_PY_IMPORT_ARRAY and calls
 * import_array(), the other files see the table through NO_IMPORT_ARRAY. */
#define PY_ARRAY_UNIQUE_SYMBOL cf_py_numpy_api
#ifndef CF_PY_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <stdint.h>
#include <string.h>

#include "cufunc/cufunc.h"
/* The one header from src/ that numpy_ext may use: the test hooks the Python tests drive. It is
 * named by its path because src/ is not on numpy_ext's include path (setup.py): numpy_ext builds
 * against the public API in include/ only, and any other src/ header fails to compile. */
#include "../src/testing.h"

/* Whether the interpreter is shutting down (the driver may already be torn down then). */
#if PY_VERSION_HEX >= 0x030D0000
#define cf_py_is_finalizing() Py_IsFinalizing()
#else
#define cf_py_is_finalizing() _Py_IsFinalizing()
#endif

/* ---- errors (_coremodule.c) ------------------------------------------------------------------ */

/* The exception classes of cufunc.errors, loaded at module init (borrowed, live until exit). */
extern PyObject *cf_py_CudaSupportError;
extern PyObject *cf_py_CudaAPIError;
extern PyObject *cf_py_DeviceAssertionError;
extern PyObject *cf_py_CompileError;

/* The Python exception class for a status code (borrowed): see the brackets in status.h. */
PyObject *cf_py_exception_for(cf_status st);
/* Raise the exception for `st` with cf_last_error()'s message, prefixed by "what: " when `what` is
 * not NULL. Returns NULL so callers can `return cf_py_raise(st, "to_device");`. */
PyObject *cf_py_raise(cf_status st, const char *what);
/* Same, returning -1. */
int cf_py_fail(cf_status st, const char *what);
/* Load the driver (cf_init); CudaSupportError without a usable driver. `what` names the caller. */
int cf_py_cuda_init(const char *what);
/* The calling thread's current device (after cf_py_cuda_init). */
int cf_py_current_device(int *device, const char *what);

/* ---- dtypes (_coremodule.c) ------------------------------------------------------------------ */

/* The cf_dtype of a NumPy dtype; TypeError naming `argname` and the dtype when cufunc does not
 * support it (object, str, datetime64, structured, long double, non-native byte order). */
int cf_py_dtype_from_descr(PyArray_Descr *descr, cf_dtype *out, const char *argname);
/* Any dtype-like object (np.float32, 'f4', a dtype, None = float64) -> cf_dtype and a new reference
 * to its native NumPy dtype (descr may be NULL if not wanted). */
int cf_py_dtype_from_object(PyObject *obj, cf_dtype *out, PyArray_Descr **descr,
                            const char *argname);
/* The native NumPy dtype of a cf_dtype (new reference). */
PyArray_Descr *cf_py_descr_from_dtype(cf_dtype dt);

/* NumPy's casting= argument (a str; NULL means the ufunc default, 'same_kind'). ValueError with
 * NumPy's wording otherwise. */
int cf_py_parse_casting(PyObject *obj, cf_casting *out);

/* ---- shapes (_coremodule.c) ------------------------------------------------------------------ */

/* An int or a sequence of ints -> ndim and extents. ValueError naming `argname` for negative
 * extents or more than CF_MAX_DIMS axes, TypeError for non-integers. */
int cf_py_parse_shape(PyObject *obj, int *ndim, int64_t *shape, const char *argname);
/* ValueError naming `argname` if size * itemsize does not fit in 63 bits. */
int cf_py_check_nbytes(int ndim, const int64_t *shape, size_t itemsize, const char *argname);
/* 'C' or 'F' from a str argument; ValueError naming `argname` otherwise. */
int cf_py_parse_order(PyObject *obj, char *order, const char *argname);
/* A tuple of Python ints. */
PyObject *cf_py_tuple_from_int64(int n, const int64_t *v);

/* ---- streams (py_stream.c) ------------------------------------------------------------------- */

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

/* ---- CUDA graph capture (py_graph.c) --------------------------------------------------------
 * cf_py_capturing: the stream of the call under way when that stream captures a graph (set by
 * the place step, cleared when the call ends), else NULL: ordering then queues no wait on work
 * outside the capture, and memory allocated for the call is freed on that stream while the
 * capture lasts. */
extern _Thread_local cf_stream *cf_py_capturing;
/* Nonzero while a capture cufunc knows of exists (a Stream capturing, a call being captured, a
 * capturing foreign stream just seen): the eager path reads this global only, no thread-local. */
extern int cf_py_capture_gate;
/* The place step's capture: enter with the call's capturing stream, leave when the call ends. */
void cf_py_capture_call_enter(cf_stream *s);
void cf_py_capture_call_leave(void);
/* Whether the call's resolved stream captures: asked of the driver for external streams only
 * (cufunc's own streams capture through Stream.begin_capture, the legacy stream never). */
int cf_py_capture_stream_status(PyObject *resolved, cf_stream *s, int *capturing);
/* GraphCaptureError "<name>: <why> cannot be captured ...; <instead>"; returns -1. */
int cf_py_capture_refuse(const char *name, const char *why, const char *instead);
/* Forget the capturing stream the last call's operands named (a call's first step). */
void cf_py_capture_call_begin(void);
/* Whether a call without stream= may be captured: an operand named a capturing stream, or the
 * thread captures on a cufunc Stream (one thread-local read: the eager path's cost). */
int cf_py_capture_pending(void);
/* *capturing: whether s captures (an invalidated capture counts: nothing may synchronise). */
int cf_py_capture_status(cf_stream *s, int *capturing);
/* The same, for a foreign operand's stream; a capturing one is remembered for the call. */
int cf_py_capture_note_foreign(cf_stream *s, int *capturing);
/* The stream a call without stream= is captured on (new reference: a Stream, or None). */
PyObject *cf_py_capture_default(int device);
/* The cufunc Stream this thread captures on (borrowed), or NULL. */
PyObject *cf_py_capture_own(void);
/* An Allocation a captured call on s uses: kept and ordered by the Graph of this thread's own
 * capture (nothing for other captures). */
void cf_py_capture_note_allocation(PyObject *allocation, cf_stream *s);
/* A call with host operands or a host result: refused while it would be captured, or while a
 * capture runs that it would break (a blocking stream of `device`, PyTorch's current stream). */
int cf_py_capture_check_host(const char *name, int capturing, int device);
/* Stream methods (py_stream.c's table). */
PyObject *cf_py_stream_begin_capture(PyObject *self, PyObject *args, PyObject *kw);
PyObject *cf_py_stream_end_capture(PyObject *self, PyObject *unused);
PyObject *cf_py_stream_is_capturing(PyObject *self, PyObject *unused);
/* py_devicearray.c: order s (resolved stream `resolved`) after an Allocation's last write, and
 * record s as its last writer. */
int cf_py_allocation_order(PyObject *allocation, cf_stream *s, PyObject *resolved);
void cf_py_allocation_written(PyObject *allocation, PyObject *resolved);
int cf_py_graph_init_module(PyObject *m);
extern PyMethodDef cf_py_graph_methods[];

/* Copy a view's used axes only: a cf_array holds CF_MAX_DIMS (64) of each, and whole-struct
 * copies (1 KB each) showed up on the per-call path of small ufunc calls. */
static inline void cf_py_view_copy(cf_array *dst, const cf_array *src)
{
    dst->data = src->data;
    dst->dtype = src->dtype;
    dst->ndim = src->ndim;
    dst->device = src->device;
    memcpy(dst->shape, src->shape, sizeof(int64_t) * (size_t)src->ndim);
    memcpy(dst->strides, src->strides, sizeof(int64_t) * (size_t)src->ndim);
}

/* ---- device arrays (py_devicearray.c) -------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    cf_array view;         /* data pointer, dtype, shape, strides (bytes), device */
    PyArray_Descr *descr;  /* the NumPy dtype of view.dtype */
    PyObject *base;        /* keeps the memory alive: a CfPyAllocation or a foreign object */
    PyObject *stream;      /* the Stream work on this array is ordered on, or NULL (default) */
    int readonly;
    PyObject *weakreflist;
    /* This object's number, never reused (0: none). A DeviceArray never changes its view, stream
     * or readonly flag, so a caller that saw this serial before knows the whole array by it: the
     * ufunc fast path repeats a launch on it (py_ufunc.c). */
    uint64_t serial;
} CfPyDeviceArray;


extern PyTypeObject CfPyDeviceArray_Type;
#define CfPyDeviceArray_Check(o) PyObject_TypeCheck((o), &CfPyDeviceArray_Type)

/* A view object over `view` keeping `base` alive (both new references taken; stream may be NULL or
 * Py_None for the default stream). */
PyObject *cf_py_devicearray_wrap(const cf_array *view, PyObject *base, PyObject *stream,
                                 int readonly);
/* A new contiguous array from the device's stream-ordered pool, allocated on `stream` (a resolved
 * stream: a Stream or None). MemoryError naming the size when the device is full. */
PyObject *cf_py_devicearray_alloc(int ndim, const int64_t *shape, cf_dtype dt, char order,
                                  int device, PyObject *stream);
/* A DeviceArray, or any object with __cuda_array_interface__, as a view (no copy). `*keepalive`
 * receives a new reference that keeps the memory alive while the view is used. When `sync`, the
 * producer's stream named in the interface is synchronised (CAI v3; PyTorch's current stream,
 * see cf_py_foreign_read), and a producer whose interface names no stream but which speaks
 * DLPack is asked, through the DLPack stream handshake, to order its pending work before the
 * legacy default stream's (cf_py_order_operand
 * then orders a call on another stream after that). TypeError naming `argname` for other
 * objects. Needs the GPU for foreign objects (to find the pointer's device). */
int cf_py_device_view(PyObject *obj, cf_array *out, PyObject **keepalive, int sync,
                      const char *argname);
/* `sync` for a call's operands: a stream named in the interface is ordered before the legacy
 * default stream on the device (an event wait, or nothing for 1 and 2), not synchronised on the
 * host; the call orders itself after that stream (cf_py_args_order). */
#define CF_PY_VIEW_ORDER 2
/* Or'ed into `sync`: an object without a (readable) __cuda_array_interface__ is no error, the
 * answer is 1 (not a device object) with no exception; the interface is read once, not twice
 * as cf_py_is_device_object then cf_py_device_view would (a Python property for PyTorch). */
#define CF_PY_VIEW_OPTIONAL 4
/* Read foreign device object obj's view, *readonly, and the stream its
 * interface names (*has_stream, *stream) without building its __cuda_array_interface__ where
 * py_interop.c has a reader of its type (PyTorch tensors, CuPy arrays): 0, with v->device the
 * device the library names for non-empty data (a tensor's, a CuPy allocation's), else -1 (the
 * pointer says; an empty array: the current device). Otherwise *cai
 * receives obj's interface (a new reference) for parse_cai: 1. -1 with an exception
 * (AttributeError when obj has no interface). */
int cf_py_foreign_read(PyObject *obj, cf_array *v, int *readonly, int *has_stream,
                       uintptr_t *stream, PyObject **cai, const char *argname);
/* Order work on stream `s` (of the resolved stream `resolved`: a Stream or None; on `device`)
 * after the work that last wrote the memory of device operand `obj` (the `keep` of a device view:
 * a DeviceArray, or a foreign object, whose producer cf_py_device_view ordered before the legacy
 * default stream). When the work `written` to the memory, its stream becomes the one to wait for.
 * No driver call when the last writer's stream is `resolved`, or ordered with it by CUDA. */
int cf_py_order_operand(PyObject *obj, int device, PyObject *resolved, cf_stream *s, int written);
/* The resolved stream the memory of `obj` is pending on (borrowed; NULL: the legacy default
 * stream), for the CUDA Array Interface and DLPack exports. */
PyObject *cf_py_pending_stream(PyObject *obj);
/* Record that a DeviceArray's address left cufunc's hands (CAI, DLPack, .ptr, a captured global),
 * so that get_ipc_handle never moves its memory (no-op for other objects). */
void cf_py_devicearray_mark_exposed(PyObject *obj);
/* Whether obj is a DeviceArray or exposes __cuda_array_interface__ (no GPU needed). */
int cf_py_is_device_object(PyObject *obj);
/* cuda.as_cuda_array's engine: a DeviceArray view of a CAI object (the object itself if it is one). */
PyObject *cf_py_as_cuda_array(PyObject *obj, int sync, const char *argname);

/* ---- DLPack (py_dlpack.c) -------------------------------------------------------------------- */

PyObject *cf_py_devicearray_dlpack(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *cf_py_devicearray_order_for(PyObject *self, PyObject *stream);
PyObject *cf_py_devicearray_dlpack_device(PyObject *self, PyObject *unused);
/* A versioned DLPack managed tensor over DeviceArray d (holding a reference to d), after the
 * consumer's stream (a protocol handle: 1 the legacy default stream) was made to wait for the work
 * pending on d: for a library that takes it in C (the DLPack C exchange API). NULL: an error. */
struct DLManagedTensorVersioned *cf_py_dlpack_managed(PyObject *d, long long consumer);
/* cufunc's dtype of a DLPack data type (code, bits, lanes); -1 when cufunc has none: a TypeError
 * naming argname, or no exception when argname is NULL. */
int cf_py_dtype_from_dl(uint8_t code, uint8_t bits, uint16_t lanes, cf_dtype *out,
                        const char *argname);
/* The DLPack data type (code, bits; one lane) of cufunc's dtype. */
void cf_py_dl_dtype(cf_dtype dt, uint8_t *code, uint8_t *bits);
/* The pending-work slot of memory imported through DLPack when `base` is its owner, else NULL. */
PyObject **cf_py_dlpack_pending_slot(PyObject *base);

/* ---- types registered by each file; module functions of each file ---------------------------- */

int cf_py_signature_init_module(PyObject *m);
/* Parse a gufunc layout given as a str into *L; -1 with cufunc.errors.SignatureError set. */
int cf_py_parse_layout_text(PyObject *arg, cf_layout *L);
extern PyMethodDef cf_py_signature_methods[];

int cf_py_device_init_module(PyObject *m);
int cf_py_stream_init_module(PyObject *m);
int cf_py_devicearray_init_module(PyObject *m);
int cf_py_dlpack_init_module(PyObject *m);
int cf_py_compile_init_module(PyObject *m);

extern PyMethodDef cf_py_device_methods[];
extern PyMethodDef cf_py_stream_methods[];
extern PyMethodDef cf_py_devicearray_methods[];
extern PyMethodDef cf_py_dlpack_methods[];
extern PyMethodDef cf_py_compile_methods[];

#endif
