/* cufunc/gufunc.h: generalized ufuncs on the GPU (the engine behind @guvectorize).
 *
 * A cf_gufunc has a layout ("(m,n),(n,p)->(m,p)", parsed by cf_parse_layout) and a set of loops. A
 * loop is a CUDA C `__device__ void` function (made by the kernel language) that takes each operand
 * either by value (a scalar, for operands with no core dimensions) or as cf_array_ref<T, ND> (see
 * templates/cufunc/runtime.cuh): a view of the operand's core dimensions for one loop iteration.
 *
 * Each operand's last dimensions are its core dimensions (callers move them there for axes=, see
 * cf_gufunc_axes_perm); the dimensions before them are loop dimensions, broadcast across operands
 * by NumPy's rules. A call binds the core dimensions' sizes (cf_gufunc_bind), then launches
 * (cf_gufunc_launch): one thread per loop iteration, the body running on its own core views. When
 * the core operands of a block of iterations are small and C-contiguous, the kernel stages them
 * through shared memory: the block copies its iterations' rows in with coalesced (16-byte where
 * aligned) loads, each thread then runs the body on its rows in shared memory, and outputs go back
 * the same way. The launch plan (cf_gufunc_plan_launch) is pure and testable without a GPU.
 *
 * GPU: everything but cf_gufunc_launch needs no GPU (cf_gufunc_check needs NVRTC).
 */
#ifndef CUFUNC_GUFUNC_H
#define CUFUNC_GUFUNC_H

#include <stdint.h>
#include "cufunc/array.h"
#include "cufunc/runtime.h"
#include "cufunc/signature.h"
#include "cufunc/ufunc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cf_gufunc cf_gufunc;

/* Loop dimensions after coalescing, and core dimensions of one operand, that kernels handle. */
#define CF_GUFUNC_MAX_LOOP_NDIM 6
#define CF_GUFUNC_MAX_CORE_NDIM 6

/* A new gufunc named `name` (copied; used in error messages) with a layout signature. A layout that
 * does not parse is CF_ERR_INVALID with cf_parse_layout's message (a caret under the place). Free
 * with cf_gufunc_free (no-op on NULL). */
CF_API cf_status cf_gufunc_create(const char *name, const char *layout, cf_gufunc **out);
CF_API void cf_gufunc_free(cf_gufunc *g);
CF_API int cf_gufunc_nin(const cf_gufunc *g);
CF_API int cf_gufunc_nout(const cf_gufunc *g);
CF_API const char *cf_gufunc_name(const cf_gufunc *g);
/* The parsed layout (owned by the gufunc). */
CF_API const cf_layout *cf_gufunc_layout(const cf_gufunc *g);
/* The layout as NumPy writes it, "(m,n),(n,p)->(m,p)" (owned by the gufunc). */
CF_API const char *cf_gufunc_signature(const cf_gufunc *g);

/* Add a loop (the runtime header is included before `source`, as for ufunc loops; a `fn_name`
 * that does not occur in `source` is CF_ERR_INVALID; not compiled here: cf_gufunc_check does
 * that). `types`: nin + nout dtypes. `arg_ndim`: how the device function takes each operand:
 * 0 = a scalar by value (inputs with no core dimensions only); k >= 1 = cf_array_ref<T, k>, where k
 * is the operand's number of core dimensions, or 1 for an operand with none (a one-element array,
 * Numba's way of writing a scalar output: out[0] = v). `source` defines the `__device__ void`
 * function `fn_name`; `options` are extra NVRTC options. Everything is copied. A loop with the same
 * input types as an earlier one is CF_ERR_INVALID; arg_ndim not matching the layout is CF_ERR_TYPE
 * naming the argument (counting from 1). */
CF_API cf_status cf_gufunc_add_loop(cf_gufunc *g, const cf_dtype *types, const int *arg_ndim,
                                    const char *source, const char *fn_name,
                                    const char *const *options, int noptions, int *index);
/* cf_gufunc_add_loop with module globals, as cf_ufunc_add_loop_globals (ufunc.h). */
CF_API cf_status cf_gufunc_add_loop_globals(cf_gufunc *g, const cf_dtype *types,
                                            const int *arg_ndim, const char *source,
                                            const char *fn_name, const char *const *options,
                                            int noptions, const cf_module_global *globals,
                                            int nglobals, int *index);
CF_API int cf_gufunc_nloops(const cf_gufunc *g);
/* The nin + nout types and argument ranks of a loop (either pointer may be NULL). */
CF_API cf_status cf_gufunc_loop_types(const cf_gufunc *g, int loop, cf_dtype *types, int *arg_ndim);

/* Pick a loop for these input dtypes, as cf_ufunc_resolve does (exact match, then the first loop
 * the inputs reach by safe casting; weak[i] marks a NEP 50 Python scalar). CF_ERR_TYPE when
 * nothing matches, listing the loops. */
CF_API cf_status cf_gufunc_resolve(const cf_gufunc *g, const cf_dtype *in_types,
                                   const unsigned char *weak, int *loop);

/* cf_gufunc_resolve under a rule (cf_loop_rule, cufunc/ufunc.h: Numba's for cufunc.numba). */
CF_API cf_status cf_gufunc_resolve_rule(const cf_gufunc *g, const cf_dtype *in_types,
                                        const unsigned char *weak, cf_loop_rule rule, int *loop);
/* cf_gufunc_resolve_rule's general form (cufunc/loops.h), as cf_ufunc_find / _resolve_query. */
CF_API int cf_gufunc_find(const cf_gufunc *g, const cf_loops_query *q);
CF_API cf_status cf_gufunc_resolve_query(const cf_gufunc *g, const cf_loops_query *q, int *loop);

/* ---- shapes --------------------------------------------------------------------------------- */

/* The outcome of binding a call's operands to the layout. */
typedef struct cf_gufunc_shapes {
    int loop_ndim;                          /* the broadcast loop shape */
    int64_t loop_shape[CF_MAX_DIMS];
    int64_t dim_size[CF_SIG_MAX_NAMES];     /* each named core dimension's size */
} cf_gufunc_shapes;

/* Bind operands to the layout: ops[0..nin) are the inputs (arrays or scalars; a scalar has no
 * dimensions), ops[nin + o] is output o when has_out[o] is set (has_out may be NULL: no outputs
 * given). Checks, with NumPy's wording and naming arguments counting from 1: enough dimensions for
 * the core, core dimensions that agree across arguments and with fixed sizes, an output core
 * dimension that no input defines (only out= can give it), loop dimensions that broadcast, and
 * given outputs whose loop dimensions are the broadcast shape. CF_ERR_INVALID on failure. */
CF_API cf_status cf_gufunc_bind(const cf_gufunc *g, const cf_operand *ops,
                                const unsigned char *has_out, cf_gufunc_shapes *out);
/* The full shape of operand `op` for a binding: the loop shape then its core dimensions. */
CF_API cf_status cf_gufunc_operand_shape(const cf_gufunc *g, const cf_gufunc_shapes *sh, int op,
                                         int *ndim, int64_t *shape);

/* NumPy's axes= for one operand of `ndim` dimensions with `ncore` core dimensions: `axes` lists
 * the axes (negative counts from the end) that are its core dimensions, in core order. Writes the
 * permutation perm[0..ndim) that moves them last: the new view's axis k is the old axis perm[k]
 * (loop axes keep their order). CF_ERR_RANGE for an axis out of bounds, CF_ERR_INVALID for a
 * repeated axis or a wrong count; messages name argument `arg` (counting from 1). */
CF_API cf_status cf_gufunc_axes_perm(int arg, int ndim, int ncore, const int *axes, int naxes,
                                     int *perm);

/* ---- launch --------------------------------------------------------------------------------- */

/* How a launch runs (cf_gufunc_plan_launch): pure data, for tests and inspection. */
typedef struct cf_gufunc_plan {
    int nops;
    int64_t n;                               /* loop iterations */
    int loop_ndim;                           /* loop axes after coalescing (>= 1 when n > 1) */
    int64_t loop_shape[CF_GUFUNC_MAX_LOOP_NDIM];
    int64_t loop_strides[CF_SIG_MAX_ARGS][CF_GUFUNC_MAX_LOOP_NDIM];
    int index32;                             /* 32-bit index and offset maths */
    /* Per operand: 'S' a scalar parameter passed by value, 'R' a scalar parameter seen as a
     * one-element array, 'V' a core-less array element passed by value, 'A' a core view read in
     * place, 'G' a core view staged through shared memory (a row per iteration of the tile), 'U'
     * staged once per tile (the same core for every iteration: all loop strides 0). */
    char kind[CF_SIG_MAX_ARGS];
    int core_ndim[CF_SIG_MAX_ARGS];
    int64_t core_shape[CF_SIG_MAX_ARGS][CF_GUFUNC_MAX_CORE_NDIM];
    int64_t core_strides[CF_SIG_MAX_ARGS][CF_GUFUNC_MAX_CORE_NDIM];
    /* Staged operands: bytes of one core, bytes between iterations in shared memory (padded so that
     * threads reading their own rows hit distinct banks), offset of the region, the width of the
     * copies (16: vector loads of whole aligned rows; else the element or component size), and
     * whether an output is read in before the body runs (out= given: the body may read it; 1 by
     * the tile's copy, 2 by each thread into registers, flat cores of at most 64 bytes). */
    int64_t row_bytes[CF_SIG_MAX_ARGS], pitch[CF_SIG_MAX_ARGS], smem_offset[CF_SIG_MAX_ARGS];
    int copy_width[CF_SIG_MAX_ARGS];
    unsigned char load_output[CF_SIG_MAX_ARGS];
    /* Staged 'G' operands whose tile is one contiguous block of memory (iteration t's core at
     * t * row_bytes from the operand's base): copied as a flat block (16-byte units where aligned,
     * cp.async on sm_80+), no per-iteration base offsets. Cores under 32 bytes are staged only so. */
    unsigned char flat[CF_SIG_MAX_ARGS];
    int staged;                              /* some operand is 'G' or 'U' */
    int tile;                                /* staged: iterations per block tile (power of 2) */
    int block_threads;
    int64_t smem_bytes;                      /* staged: static shared memory of the kernel */
} cf_gufunc_plan;

/* Shared memory a staged kernel may use per block (the static limit), and the fewest iterations a
 * tile must hold for staging to be chosen. */
#define CF_GUFUNC_STAGE_BUDGET 49152
#define CF_GUFUNC_MIN_TILE 4

/* Plan a launch of `loop` over operands `ops` (inputs then outputs, full shapes: loop dimensions
 * then core dimensions last, as bound in `sh`). Array operands passed as cf_array_ref must have the
 * loop's dtype (cf_gufunc_launch converts the others through temporaries first). Bit o of
 * `fresh_outputs` says output o was just allocated, so its contents need not be read. */
CF_API cf_status cf_gufunc_plan_launch(const cf_gufunc *g, int loop, const cf_operand *ops,
                                       const cf_gufunc_shapes *sh, unsigned fresh_outputs,
                                       cf_gufunc_plan *plan);

/* Launch `loop` on stream `s`. Operands as for cf_gufunc_plan_launch except that dtypes may differ
 * from the loop's: scalars and core-less inputs taken by value are converted in the kernel, other
 * arrays through temporaries from the stream-ordered pool (converted in, and for outputs converted
 * back after the kernel). Outputs must have exactly the bound full shape and must not overlap
 * each other. An input that shares memory with an output is copied to a temporary first (by
 * cf_array_needs_copy: any overlap, except the same view between operands without core
 * dimensions), so the call computes what NumPy defines: as if every input were copied before any
 * output is written. Returns without waiting for the kernel. */
CF_API cf_status cf_gufunc_launch(cf_gufunc *g, int loop, cf_stream *s, const cf_operand *ops,
                                  const cf_gufunc_shapes *sh, unsigned fresh_outputs);

/* The CUDA C source of the kernel a launch with these arguments would use (needs no GPU; array
 * dtypes must be the loop's). The caller frees *source with cf_free_buffer. */
CF_API cf_status cf_gufunc_kernel_source(cf_gufunc *g, int loop, const cf_operand *ops,
                                         const cf_gufunc_shapes *sh, unsigned fresh_outputs,
                                         char **source);

/* Compile loop `loop` (-1: every loop) now, as cf_ufunc_check does for ufuncs: a kernel for
 * C-contiguous operands of the loop's dtypes, each core dimension its fixed size or 4. The loop's
 * function is called with its argument types (scalars, cf_array_ref<T, k>), so a source that does
 * not compile, or takes other arguments, is CF_ERR_COMPILE with NVRTC's log and the numbered
 * source. Needs NVRTC, not a GPU. */
CF_API cf_status cf_gufunc_check(cf_gufunc *g, int loop);

#ifdef __cplusplus
}
#endif
#endif
