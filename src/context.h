/* context.h: internal side of devices, primary contexts and streams (public side: runtime.h). */
#ifndef CF_CONTEXT_H
#define CF_CONTEXT_H

#include <cuda.h>

#include "cufunc/compile.h"
#include "cufunc/runtime.h"

/* Load the driver (cf_driver_load), check the ordinal, retain the device's primary context once
 * per process and make it current on the calling thread if it is not already. */
cf_status cf_context_enter(int device);

/* The CUstream behind a cf_stream (NULL stream handle for the legacy default). */
CUstream cf_stream_cu(const cf_stream *s);

/* A subsystem that keeps state per CUstream (reduce.c's scratch) registers a hook here, once; it is
 * called by cf_stream_free with the stream still usable, just before an owned stream is destroyed,
 * so that the state goes with its stream (a later stream may get the same handle). At most
 * CF_STREAM_MAX_HOOKS hooks; registering the same one twice is a no-op. */
#define CF_STREAM_MAX_HOOKS 4
cf_status cf_stream_add_destroy_hook(void (*hook)(cf_stream *s));

/* Whether the byte at p is page-locked host memory, asked without a driver error for memory the
 * driver does not know (memory.c). A context must be current. For the unit test of the probe. */
int cf_mem_byte_is_pinned(const void *p);

/* The CUfunction behind a cf_function (NULL for a freed or foreign pointer). For bench_launch,
 * whose floor is the bare driver call. */
CUfunction cf_function_cu(const cf_function *f);

#endif
