/* py_capturing.h: which call is being captured into a CUDA graph (py_capturing.c) */
#ifndef CF_PY_CAPTURING_H
#define CF_PY_CAPTURING_H

#include "py_stream.h"

/* cf_py_capturing: the stream of the call under way when that stream captures a graph (set by
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
/* The memory (a CfPyMemory, or NULL: nothing) a captured call on s uses: kept and ordered by the
 * Graph of this thread's own capture (nothing for other captures). */
void cf_py_capture_note_memory(PyObject *memory, cf_stream *s);
/* A call with host operands or a host result: refused while it would be captured, or while a
 * capture runs that it would break (a blocking stream of `device`, PyTorch's current stream). */
int cf_py_capture_check_host(const char *name, int capturing, int device);
/* This thread's own capture on a cufunc Stream (Stream.begin_capture, py_graph.c): the Stream
 * whatever the gate says (borrowed, or NULL); begin: from now on `stream` captures this thread's
 * calls and `memory` (a list, stolen) collects the memory they use; end: when `stream` is the one,
 * the capture's state is cleared and its list returned (new reference), else NULL. */
PyObject *cf_py_capture_own_thread(void);
void cf_py_capture_own_begin(PyObject *stream, PyObject *memory);
PyObject *cf_py_capture_own_end(PyObject *stream);

/* _capturing */
extern PyMethodDef cf_py_capturing_methods[];

#endif
