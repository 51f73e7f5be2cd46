/* cufunc/cufunc.h: the whole public C API of cufunc (libcufunc); docs/C_API.md is the guide.
 *
 * Conventions, which every function follows unless its comment says otherwise:
 *   - Returns: a function that can fail returns cf_status, CF_OK (0) or a negative code, and on
 *     failure leaves a message for cf_last_error() (status.h). Results go to out-parameters,
 *     which are written only on success (pointers among them set to NULL on failure).
 *   - Ownership: what the caller passes in stays the caller's; cufunc copies what it keeps
 *     (names, sources, options, types). An object returned through an out-parameter by a
 *     cf_*_create (or cf_ufunc_from_expr) is the caller's, freed with the matching cf_*_free
 *     (a no-op on NULL); a buffer returned as void* or char* is the caller's, freed with
 *     cf_free_buffer. A `const char *` returned by value belongs to cufunc: never free it.
 *     A cf_array is a view: it never owns the memory it describes.
 *   - GPU: each header says which of its functions need a GPU (the CUDA driver and a device),
 *     which need only NVRTC (compiling), and which need neither. libcuda and libnvrtc are
 *     loaded at first use; their absence is CF_ERR_NO_DRIVER / CF_ERR_NO_NVRTC, never a crash.
 *   - Threads: any function may be called from any thread; the error message is per thread.
 *     Objects (ufuncs, gufuncs, reducers) may be launched from several threads at once once
 *     their loops are added.
 *   - Errors never abort or exit; on failure what the call allocated is released. */
#ifndef CUFUNC_CUFUNC_H
#define CUFUNC_CUFUNC_H

#define CUFUNC_VERSION_MAJOR 0
#define CUFUNC_VERSION_MINOR 1
#define CUFUNC_VERSION_PATCH 0
#define CUFUNC_VERSION_STRING "0.1.0"

#include "cufunc/status.h"
#include "cufunc/dtype.h"
#include "cufunc/loops.h"
#include "cufunc/array.h"
#include "cufunc/runtime.h"
#include "cufunc/compile.h"
#include "cufunc/plan.h"
#include "cufunc/ufunc.h"
#include "cufunc/signature.h"
#include "cufunc/reduce.h"
#include "cufunc/gufunc.h"
#include "cufunc/at.h"

#endif
