/* cufunc/ufunc.h: element-wise GPU functions (the engine behind @vectorize).
 *
 * A cf_ufunc is a named set of loops. A loop is a CUDA C `__device__` function (made by the kernel
 * language from the user's Python) with fixed argument and return types. A call picks a loop for
 * the operands' dtypes, plans the iteration (plan.h), and launches a kernel specialised on the key
 * {loop, each operand's dtype and kind (contiguous array, strided array, scalar), coalesced ndim,
 * index width, vector width, where-mask}. Kernels are generated once per key and device and kept
 * in the ufunc (and on disk through the compile cache). Operand dtypes may differ from the loop's
 * types: values are converted as they are loaded and stored, inside the kernel, with no temporary.
 *
 * GPU: creating ufuncs, adding loops, casting rules, loop resolution and kernel sources need no
 * GPU; cf_ufunc_check, cf_ufunc_compile* and cf_ufunc_from_expr need NVRTC only; launches,
 * replays and calls need a GPU. The host pipeline's settings (cf_hostpipe_*config, _wanted)
 * need none.
 */
#ifndef CUFUNC_UFUNC_H
#define CUFUNC_UFUNC_H

#include <stdint.h>
#include "cufunc/array.h"
#include "cufunc/loops.h"
#include "cufunc/compile.h"
#include "cufunc/plan.h"
#include "cufunc/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cf_ufunc cf_ufunc;

/* A new ufunc with nin inputs and nout outputs (1 <= nin, 1 <= nout, nin + nout <= 32). `name` is
 * copied. Free with cf_ufunc_free (no-op on NULL). */
CF_API cf_status cf_ufunc_create(const char *name, int nin, int nout, cf_ufunc **out);
CF_API void cf_ufunc_free(cf_ufunc *u);

/* Add a loop. `types` holds nin input types then nout output types. `source` is CUDA C defining the
 * `__device__` function `fn_name`; the runtime header "cufunc/runtime.cuh" is included before it
 * (cf_float32, cf_cast, ...; including it again is harmless). With nout == 1 the function returns
 * the output; with nout > 1 a struct whose fields f0, f1, ... are the outputs. `options` are extra
 * NVRTC options (e.g. --fmad=false). Everything is copied. The new loop's index is written to
 * *index (may be NULL). Errors: a loop with the same input types as an earlier one
 * (CF_ERR_INVALID), an invalid dtype (CF_ERR_TYPE), a `fn_name` that does not occur in `source` as
 * an identifier (CF_ERR_INVALID, at once). The source is not compiled here: cf_ufunc_check does
 * that (see "conveniences" below). No GPU, no NVRTC needed. */
CF_API cf_status cf_ufunc_add_loop(cf_ufunc *u, const cf_dtype *types, const char *source,
                                   const char *fn_name, const char *const *options, int noptions,
                                   int *index);
/* cf_ufunc_add_loop with module globals (compile.h): every kernel module of the loop gets them when
 * it is loaded (cf_module_load_globals), e.g. the descriptors of device arrays the device
 * function reads (captured from Python globals), declared in `source` and left out of its text so
 * that its kernels stay cacheable on disk. They are copied (names, labels, values); a launch on
 * another device than a global's is CF_ERR_INVALID naming its label. The caller keeps the memory
 * a global points to alive as long as the ufunc. `globals` may be NULL when nglobals is 0. The
 * same parameters in cf_gufunc_add_loop_globals and cf_reducer_add_loop_globals. */
CF_API cf_status cf_ufunc_add_loop_globals(cf_ufunc *u, const cf_dtype *types, const char *source,
                                           const char *fn_name, const char *const *options,
                                           int noptions, const cf_module_global *globals,
                                           int nglobals, int *index);
CF_API int cf_ufunc_nin(const cf_ufunc *u);
CF_API int cf_ufunc_nout(const cf_ufunc *u);
CF_API int cf_ufunc_nloops(const cf_ufunc *u);
/* The nin + nout types of a loop. */
CF_API cf_status cf_ufunc_loop_types(const cf_ufunc *u, int loop, cf_dtype *types);

/* Casting rules (cf_can_cast, cf_casting): cufunc/dtype.h. */

/* Pick a loop for these input dtypes: an exact match first, then the first loop (in the order they
 * were added) every input reaches by safe casting. weak[i] (may be NULL) marks a Python scalar
 * (NEP 50): it matches any loop type of its kind or a higher one (bool < int < float < complex),
 * the caller having checked the value fits. CF_ERR_TYPE when nothing matches, with a message
 * listing the input dtypes and the loops. */
CF_API cf_status cf_ufunc_resolve(const cf_ufunc *u, const cf_dtype *in_types,
                                  const unsigned char *weak, int *loop);
/* How a call picks its loop. CF_LOOP_RULE_NUMPY: cf_ufunc_resolve's rule (NumPy's). NUMBA: the
 * rule of Numba's CUDA ufuncs (cufunc.numba): weak[i] then marks any scalar input (a Python or
 * NumPy scalar, by its own dtype); a loop all of whose types equal the inputs' first, else the
 * loop whose types equal the array inputs' (scalars match any type, and are converted to it by
 * the caller), which must be the only one (several: CF_ERR_TYPE, ambiguous). For a gufunc
 * (cf_gufunc_resolve_rule) Numba's rule is: an exact match, else the first loop whose type for
 * each input casts safely to the input's dtype (the caller converts the inputs to the loop's
 * types). */
typedef enum { CF_LOOP_RULE_NUMPY = 0, CF_LOOP_RULE_NUMBA = 1 } cf_loop_rule;
CF_API cf_status cf_ufunc_resolve_rule(const cf_ufunc *u, const cf_dtype *in_types,
                                       const unsigned char *weak, cf_loop_rule rule, int *loop);
/* Only the first pass of cf_ufunc_resolve: a loop taking exactly these input dtypes (weak scalars
 * matching by kind). Ufuncs that compile loops on demand use this, so that new input types get a
 * loop of their own rather than a cast into an earlier one. CF_ERR_TYPE when there is none. */
CF_API cf_status cf_ufunc_find_exact(const cf_ufunc *u, const cf_dtype *in_types,
                                     const unsigned char *weak, int *loop);
/* The general form of the three above (cufunc/loops.h: NumPy's or Numba's rule, lazy loops,
 * dtype=); q->nin and q->nout are the ufunc's, whatever the query says. cf_ufunc_find answers
 * the loop index or CF_LOOPS_NONE / CF_LOOPS_AMBIGUOUS and sets no error; cf_ufunc_resolve_query
 * sets CF_ERR_TYPE with the message a call raises. */
CF_API int cf_ufunc_find(const cf_ufunc *u, const cf_loops_query *q);
CF_API cf_status cf_ufunc_resolve_query(const cf_ufunc *u, const cf_loops_query *q, int *loop);

/* One operand of a launch: an array view on the launch's device, or a scalar passed by value. */
typedef struct cf_operand {
    int is_scalar;
    cf_array array;              /* when !is_scalar */
    cf_dtype scalar_dtype;       /* when is_scalar */
    unsigned char scalar[16];    /* the value in scalar_dtype's representation */
} cf_operand;

/* Launch `loop` on stream `s` over the loop shape (ndim, shape): nin input operands then nout
 * output arrays, each broadcastable to the shape (outputs must have exactly that shape), and an
 * optional bool mask `where` (NULL for none) broadcastable to it: outputs are written only where
 * it is true. Operand dtypes may differ from the loop's types (converted in the kernel). Outputs
 * must not overlap inputs unless they are the same view (the caller copies otherwise, as NumPy).
 * Returns without waiting for the kernel. */
CF_API cf_status cf_ufunc_launch(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                                 const cf_array *where, int ndim, const int64_t *shape);

/* What a launch did, so that a caller can repeat it without planning, looking up or packing it
 * again: the kernel, its grid and block, and its parameter bytes (which hold the operands' device
 * addresses and strides, and scalars' values). A record is valid for a launch with the very same
 * operands: the same views (data, dtype, shape, strides) or scalar values, still alive, on the
 * same device, of a ufunc still alive. Keeping to that is the caller's side of the contract
 * (cufunc's Python layer knows it by the identity of immutable DeviceArray objects). */
#define CF_UFUNC_RECORD_PARAM_BYTES 1024
typedef struct cf_ufunc_record {
    cf_function *fn;             /* NULL: nothing recorded (an empty loop, where=, or too large) */
    unsigned grid[3], block[3];
    int overlap;                 /* launched as a programmatic dependent launch */
    size_t param_bytes;
    union {
        unsigned char bytes[CF_UFUNC_RECORD_PARAM_BYTES];
        uint64_t align;
    } params;
} cf_ufunc_record;

/* As cf_ufunc_launch when the kernel this launch needs is already compiled and loaded
 * (*launched = 1, also for an empty loop); otherwise nothing happens and *launched = 0, so that a
 * caller can release its own locks (the Python GIL) only around the cf_ufunc_launch that
 * compiles, and keep a launch of a ready kernel short. `record`, when not NULL, receives what a
 * launch did (record->fn NULL where it cannot be repeated with cf_ufunc_replay). */
CF_API cf_status cf_ufunc_launch_if_ready(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                                          const cf_array *where, int ndim, const int64_t *shape,
                                          int *launched, cf_ufunc_record *record);

/* Launch again what `record` recorded, on stream `s` (of the record's device); see
 * cf_ufunc_record for when that is valid. */
CF_API cf_status cf_ufunc_replay(const cf_ufunc_record *record, cf_stream *s);

/* The CUDA C source of the kernel a launch with these arguments would use (for inspection and
 * tests; needs no GPU: the device's properties are not involved in the source). The caller frees
 * *source with cf_free_buffer. */
CF_API cf_status cf_ufunc_kernel_source(cf_ufunc *u, int loop, const cf_operand *ops,
                                        const cf_array *where, int ndim, const int64_t *shape,
                                        char **source);

/* ---- launches on host arrays, pipelined (src/hostpipe.c) -------------------------------------
 * cf_ufunc_launch_host runs a loop whose operands may be HOST arrays (cf_array.device == -1:
 * pageable or pinned memory, any strides, each in its own dtype, converted in the kernel), beside
 * scalars and arrays on the stream's device (read or written in place). The loop is cut into
 * chunks along its outermost axes; chunk k goes to stream k mod S, whose pinned and device buffers
 * hold that chunk's part of every host operand, so the host-to-device copy of one chunk, the
 * kernel of another and the device-to-host copy of a third run at once while the calling thread
 * packs the next chunk's inputs into pinned memory and unpacks finished outputs. A host input
 * broadcast along the cut axes (stride 0) is uploaded once. Host outputs are written in place;
 * with `where`, masked elements keep their values (the outputs' chunks travel in as well).
 *
 * Ordering: waits for the work already queued on `s` (it may write a host input), runs on streams
 * of its own, and returns when every output holds its result. One pipelined launch runs at a time
 * in a process (a second thread waits): the copy engines, the link and the copy threads are shared
 * anyway. Outputs must not overlap (share bytes within their bounds with) inputs, the mask or each
 * other unless they are the same view: CF_ERR_INVALID, as NumPy would copy first.
 * On any failure every device buffer goes back to the pool and no copy or kernel is left running;
 * outputs may then be partly written, except after CF_ERR_UNSUPPORTED, which comes before anything
 * is written (layouts leaving more axes than element-wise kernels take): the
 * caller can then copy the operands into contiguous device arrays and use cf_ufunc_launch.
 *
 * Tuning, read from the environment at first use (cf_hostpipe_configure(NULL) reads it again):
 *   CUFUNC_HOSTPIPE_CHUNK_KB  bytes of the largest streamed operand per chunk, KiB (default 0:
 *                             automatic, 8 MiB, less for calls under 2 * S such chunks)
 *   CUFUNC_HOSTPIPE_STREAMS   S, streams and buffer slots (default 3; 2..16)
 *   CUFUNC_HOSTPIPE_MIN_KB    cf_hostpipe_wanted's threshold on a call's host bytes (default
 *                             0: every host call, one chunk for small ones: one pinned DMA each
 *                             way and one wait, cheaper than separate pageable copies)
 *   CUFUNC_HOST_THREADS       threads per pack/unpack copy (default 0: automatic)
 *   CUFUNC_HOST_REGISTER_MIN  bytes from which a host operand is page-locked for the call and
 *                             DMA'd in place (default 0: never); see src/env.h. Host operands of
 *                             64 KiB or more that are page-locked already are always DMA'd in place.
 *   CUFUNC_HOST_RESULT_PINNED_MIN  bytes from which the Python layer allocates new host results
 *                             in cached page-locked blocks (cf_hostpipe_result_alloc; 0: never;
 *                             default 1 MiB: the device-to-host copies land in the result)
 * A value that does not parse or is out of range is ignored (the default is used). */
typedef struct cf_hostpipe_config {
    size_t chunk_bytes;  /* 0: automatic; else 1 KiB .. 1 GiB */
    int streams;         /* 2..16 */
    size_t min_bytes;
    int threads;         /* 0: automatic; 1..65 */
    size_t register_min; /* 0: off */
    size_t result_pinned_min; /* 0: off (CUFUNC_HOST_RESULT_PINNED_MIN) */
} cf_hostpipe_config;

/* What a pipelined launch did (cf_ufunc_launch_host's `info`). */
typedef struct cf_hostpipe_info {
    int64_t calls;       /* pipelined launches completed in this process, this one included */
    int64_t chunks;      /* chunks the loop was cut into (0 for an empty loop) */
    int streams;         /* streams that carried chunks: min(S, chunks) */
    int split_axis;      /* the coalesced axis cut into ranges */
    int64_t rows;        /* indices of that axis per chunk */
    int streamed;        /* host operands moved chunk by chunk */
    int resident;        /* host operands uploaded once */
    size_t chunk_bytes;  /* the largest streamed operand's bytes in a full chunk */
    int direct;          /* streamed operands DMA'd in place (page-locked: already, or registered) */
    int registered;      /* of those, operands this call registered */
    int register_failed; /* operands whose registration failed (staged instead) */
} cf_hostpipe_info;

/* As cf_ufunc_launch, with host operands allowed (see above); `info` (may be NULL) receives what
 * the launch did. */
CF_API cf_status cf_ufunc_launch_host(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                                      const cf_array *where, int ndim, const int64_t *shape,
                                      cf_hostpipe_info *info);
/* Whether a call moving `host_bytes` between host and device is worth pipelining (>= the
 * configured threshold, and not empty). */
CF_API int cf_hostpipe_wanted(size_t host_bytes);
CF_API void cf_hostpipe_get_config(cf_hostpipe_config *out);
/* Use `cfg` from now on (NULL: re-read the environment); frees the cached pinned buffers and
 * result blocks (blocks handed out stay valid) and forgets the result sizes seen.
 * CF_ERR_INVALID for values outside the ranges above. */
CF_API cf_status cf_hostpipe_configure(const cf_hostpipe_config *cfg);
/* Page-locked blocks for new host results (CUFUNC_HOST_RESULT_PINNED_MIN): a block of at least
 * nbytes from the cache of freed ones (one at most twice the size, so little is wasted) or newly
 * allocated; CF_ERR_NOMEM when more than 8 GiB would be handed out at once or page-locked memory
 * runs out (the caller then uses ordinary memory). cf_hostpipe_result_free gives a block back (to
 * the cache, which keeps at most 1 GiB and 64 blocks, freeing the oldest beyond);
 * NULL is a no-op. Thread-safe. */
CF_API cf_status cf_hostpipe_result_alloc(size_t nbytes, void **ptr);
CF_API void cf_hostpipe_result_free(void *ptr);
/* Whether a new result of nbytes should take a page-locked block now (the Python layer asks
 * before cf_hostpipe_result_alloc): 1 when CUFUNC_HOST_RESULT_PINNED_MIN allows it and either a
 * cached block fits or a block of its size was asked for among the last 16 requests; else 0, and
 * the size is remembered. So a one-off call keeps ordinary memory (a fresh block of 256 MiB costs
 * ~0.7 ms per MiB to page-lock, several times the call), and repeated calls of one size get a
 * block from their second call on. Thread-safe. */
CF_API int cf_hostpipe_result_wanted(size_t nbytes);

/* ---- conveniences for C programs -------------------------------------------------------------
 * Checking loops. cf_ufunc_add_loop only checks what it can without NVRTC: the types, and that
 * `fn_name` occurs in `source` as an identifier (a misspelt name is CF_ERR_INVALID at once). It
 * does not compile: compiling takes 50 to 300 ms per loop and needs NVRTC, and programs that add
 * many loops (the Python front adds one per signature) compile only those they call. A C program
 * that wants a loop's errors at once calls cf_ufunc_check right after adding it;
 * cf_ufunc_from_expr does so itself. */

/* Compile loop `loop` (-1: every loop) now, as its kernels will be: the kernel of a contiguous
 * call of the loop's own types, through the kernel cache. A source that does not compile is
 * CF_ERR_COMPILE whose message (cf_last_error) names the ufunc, the loop and its types, then
 * holds NVRTC's log, the kernel's source with line numbers (the loop's source is in it, after the
 * runtime header's #include) and the options. Compiles for device 0's architecture when a GPU is
 * usable (so the first launch finds the kernel in the cache), else for compute capability 7.5.
 * Needs NVRTC, not a GPU. */
CF_API cf_status cf_ufunc_check(cf_ufunc *u, int loop);

/* Compile, without a GPU, the kernel cf_ufunc_launch would use for these operands on a device of
 * compute capability cc_major.cc_minor, through the kernel cache (memory and disk), so that a later
 * launch on such a device finds it there: ahead-of-time cache filling, CI checks of kernels.
 * Operands are described as for cf_ufunc_launch, but their memory is never touched and `device`
 * is ignored: only dtypes, shapes, strides and the data addresses' alignment (which decides the
 * vector width; cf_mem_alloc's memory is 256-byte aligned) matter. *from (may be NULL): 0
 * compiled now, 1 found in memory, 2 found on disk. Needs NVRTC, not a GPU. */
CF_API cf_status cf_ufunc_compile(cf_ufunc *u, int loop, const cf_operand *ops,
                                  const cf_array *where, int ndim, const int64_t *shape,
                                  int cc_major, int cc_minor, int *from);
/* cf_ufunc_compile for the commonest key: every operand a contiguous, aligned 1-D array of n
 * elements of `types` (nin + nout dtypes; NULL: the loop's own). n only decides the index width
 * (below 2^31 elements or not). Needs NVRTC, not a GPU. */
CF_API cf_status cf_ufunc_compile_contiguous(cf_ufunc *u, int loop, const cf_dtype *types,
                                             int64_t n, int cc_major, int cc_minor, int *from);

/* Call the ufunc on contiguous 1-D device arrays of n elements: args[0..nin) are the inputs'
 * device addresses, args[nin..nin+nout) the outputs', all on the stream's device; types[] their
 * nin + nout dtypes. The loop is picked from the input dtypes as cf_ufunc_resolve does (exact,
 * then safe casting); operands are converted in the kernel. Queued on `s` (not NULL); returns
 * without waiting. Outputs must not overlap inputs unless they are the same memory. Needs a GPU. */
CF_API cf_status cf_ufunc_call(cf_ufunc *u, cf_stream *s, int64_t n, const cf_dtype *types,
                               const uint64_t *args);
/* The same on contiguous 1-D HOST buffers (pageable or pinned): args[i] points at n elements of
 * types[i]; inputs are read, outputs written. Runs through the pipelined host path
 * (cf_ufunc_launch_host: copies in, kernel and copies out overlapped, chunk by chunk) and returns
 * when the outputs hold the result. `s` NULL: device 0's default stream. The caller keeps
 * ownership of the buffers. Needs a GPU. */
CF_API cf_status cf_ufunc_call_host(cf_ufunc *u, cf_stream *s, int64_t n, const cf_dtype *types,
                                    void *const *args);

/* A ufunc named `name` with nin inputs and one output computing the C expression `expr` (CUDA C,
 * e.g. "sqrtf(x * x + y * y)"), whose inputs are named x, y, z, w, then x4, x5, ... `types` holds
 * nloops rows of nin + 1 dtypes (the inputs', then the output's): one loop per row, tried in that
 * order by calls (cf_ufunc_resolve). The runtime header is available (cf_float32, cf_cast, ...);
 * CUDA's math functions are overloaded for float and double (sqrt, exp, ...), so one expression
 * can serve several loops. The value is converted to the output type as NumPy stores it. Every
 * loop is checked (cf_ufunc_check) before this returns: an expression that does not compile is
 * CF_ERR_COMPILE with NVRTC's log. Free *out with cf_ufunc_free. Needs NVRTC, not a GPU. */
CF_API cf_status cf_ufunc_from_expr(const char *name, const char *expr, int nin,
                                    const cf_dtype *types, int nloops, cf_ufunc **out);

#ifdef __cplusplus
}
#endif
#endif
