/* cufunc/reduce.h: reductions and scans with a binary GPU function (the engine behind
 * cuda.reduce, ufunc.reduce and ufunc.accumulate).
 *
 * A cf_reducer is a named set of loops; a loop is a CUDA C `__device__` function
 * `acc fn(acc, acc)` for one accumulator type `acc`. Elements of any dtype are converted to the
 * accumulator type as they are loaded; results are converted to the output's dtype as they are
 * stored, inside the kernel, with no temporary. The function is applied in an order that is not
 * the sequential one (vector lanes, threads, warps, blocks combine independently), so it must be
 * associative AND commutative; an initial value is folded in exactly once: result =
 * fn(init, fn-reduction of the elements).
 *
 * Every launch is one kernel launch and never waits for the device:
 *   - a full reduction runs one grid-stride kernel whose last block to finish (an atomic ticket)
 *     combines the blocks' partials and resets the ticket;
 *   - an axis reduction picks a layout that reads memory coalesced: a warp or a block per output
 *     when the reduced elements are contiguous ("rows"), a thread per output (several adjacent
 *     outputs with vector loads) looping over the reduced range when they are strided ("cols");
 *     when there are too few outputs to fill the card the reduced range is split over blocks and
 *     the last block of each output tile combines the partials (atomic tickets);
 *   - a scan (inclusive, "accumulate") runs in one pass with decoupled look-back along a contiguous
 *     axis, or a thread per column along a strided one.
 * The tickets and look-back flags live in a small per-stream scratch area that the kernels leave
 * ready for the next launch, so no memset precedes a launch.
 *
 * GPU: reducers, loops, planning and kernel sources need no GPU (cf_reducer_check needs NVRTC);
 * the launches and cf_reduce_to_host need one.
 */
#ifndef CUFUNC_REDUCE_H
#define CUFUNC_REDUCE_H

#include <stdint.h>
#include "cufunc/array.h"
#include "cufunc/compile.h"
#include "cufunc/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cf_reducer cf_reducer;

/* A new reducer (no loops). `name` is copied (it appears in messages). Free with cf_reducer_free
 * (no-op on NULL). */
CF_API cf_status cf_reducer_create(const char *name, cf_reducer **out);
CF_API void cf_reducer_free(cf_reducer *r);
CF_API const char *cf_reducer_name(const cf_reducer *r);

/* Add the loop for accumulator type `acc`: `source` is CUDA C defining the `__device__` function
 * `fn_name(acc, acc) -> acc` (the runtime header is included before it, as for ufunc loops);
 * `options` are extra NVRTC options (--fmad=false). Everything is copied. A second loop for the
 * same type, or a `fn_name` that does not occur in `source`, is CF_ERR_INVALID. Not compiled
 * here: cf_reducer_check does that. The new loop's index goes to *index (may be NULL). */
CF_API cf_status cf_reducer_add_loop(cf_reducer *r, cf_dtype acc, const char *source,
                                     const char *fn_name, const char *const *options,
                                     int noptions, int *index);
/* cf_reducer_add_loop with module globals, as cf_ufunc_add_loop_globals (ufunc.h). */
CF_API cf_status cf_reducer_add_loop_globals(cf_reducer *r, cf_dtype acc, const char *source,
                                             const char *fn_name, const char *const *options,
                                             int noptions, const cf_module_global *globals,
                                             int nglobals, int *index);
CF_API int cf_reducer_nloops(const cf_reducer *r);
/* The loop for accumulator type `acc`, or -1. */
CF_API int cf_reducer_find_loop(const cf_reducer *r, cf_dtype acc);
/* The accumulator type of a loop (CF_NDTYPES for a bad index). */
CF_API cf_dtype cf_reducer_loop_type(const cf_reducer *r, int loop);

/* ---- planning (pure C, no GPU) --------------------------------------------------------------- */

typedef enum cf_reduce_kind {
    CF_REDUCE_ALL = 1,   /* every element into one output */
    CF_REDUCE_ROWS = 2,  /* reduced elements contiguous / least strided: a warp or block per output */
    CF_REDUCE_COLS = 3,  /* kept axis contiguous / least strided: a thread per output */
    CF_SCAN_TILES = 4,   /* scan with decoupled look-back, tiles along each row */
    CF_SCAN_COLS = 5,    /* scan with a thread per column */
    CF_REDUCE_SEGMENTS = 6 /* reduceat: GROUP lanes (1..32, or a block) per segment */
} cf_reduce_kind;

/* The iteration of a reduction or scan split into two groups of axes, each coalesced as plan.h
 * does (extent-1 axes dropped, ordered by memory, merged): the kept axes (one output each) and the
 * reduced axes (for a scan: the scanned axis alone). Strides are in bytes, innermost axis last. */
typedef struct cf_reduce_plan {
    cf_reduce_kind kind;
    int64_t n_out;                      /* outputs (product of kept extents) */
    int64_t n_red;                      /* elements per output (product of reduced extents) */
    int kept_ndim, red_ndim;
    int64_t kept_shape[CF_MAX_DIMS], red_shape[CF_MAX_DIMS];
    int64_t in_kept[CF_MAX_DIMS], out_kept[CF_MAX_DIMS], where_kept[CF_MAX_DIMS];
    int64_t in_red[CF_MAX_DIMS], out_red[CF_MAX_DIMS], where_red[CF_MAX_DIMS];
    int has_where;
    int red_contiguous;   /* each output's elements are one unit-stride run (input and mask) */
    int kept_contiguous;  /* the innermost kept axis has unit stride in the input */
    int index32;          /* every index and byte offset fits 31 bits */
} cf_reduce_plan;

/* Plan a reduction of `in` over the axes k with reduced[k] != 0. `out` has in's ndim, extent 1 on
 * the reduced axes and in's extent on the others (NumPy's keepdims shape; its strides on the
 * reduced axes are ignored); its dtype may differ. `where` (NULL for none) is a bool array
 * broadcastable to in's shape. Errors: CF_ERR_INVALID for shapes that do not fit, CF_ERR_UNSUPPORTED
 * when more than 6 kept or 6 reduced axes remain after coalescing. */
CF_API cf_status cf_reduce_plan_axes(cf_reduce_plan *p, const cf_array *in,
                                     const unsigned char *reduced, const cf_array *out,
                                     const cf_array *where);
/* Plan an inclusive scan of `in` along `axis` into `out` (same shape, any dtype). */
CF_API cf_status cf_reduce_plan_scan(cf_reduce_plan *p, const cf_array *in, int axis,
                                     const cf_array *out);

/* Launch geometry and the kernel's compile-time shape, from a plan, the element and accumulator
 * dtypes, the input's address (vector loads need 16-byte alignment), the device's multiprocessor
 * count and how many blocks of the kernel fit on one (0: assume full occupancy). Pure. */
typedef struct cf_reduce_geom {
    unsigned grid[3];
    unsigned block;
    int group;            /* ROWS: threads per output, 32 (a warp) or `block` */
    int vec;              /* ALL/ROWS: elements per vector load; COLS: outputs per thread */
    int unroll;           /* independent loads in flight per thread */
    int items;            /* SCAN_TILES: elements per thread (tile = block * items) */
    int min_blocks;       /* SCAN_TILES: resident blocks per SM asked of the compiler, 0: none */
    int smem_items;       /* SCAN_TILES: elements per thread held in shared memory beside `items`
                           * (tile = block * (items + smem_items)) */
    int64_t chunk;        /* split reductions: reduced elements per gridDim.y block */
    int64_t tiles_per_row;
    int64_t partials;     /* partial values a split needs (grid[1] * n_out), 0 without a split */
} cf_reduce_geom;

CF_API cf_status cf_reduce_geometry(const cf_reduce_plan *p, cf_dtype in_dtype, cf_dtype acc,
                                    uint64_t in_data, int multiprocessors, int blocks_per_sm,
                                    cf_reduce_geom *g);

/* ---- launches ---------------------------------------------------------------------------------- */

/* Reduce `in` over the axes with reduced[k] != 0 into `out` (see cf_reduce_plan_axes; for a full
 * reduction `out` may be any 1-element view, e.g. ndim 0 or the first element of a device array),
 * skipping elements whose `where` is false, starting from `*init` (the accumulator type's bytes;
 * NULL for none) on stream `s`. An empty reduction (an output with no element to reduce) needs an
 * initial value: CF_ERR_INVALID otherwise. `out` must not share memory with `in` or `where`
 * (cf_array_needs_copy: CF_ERR_INVALID; copy the input first, as NumPy's answer is the one from a
 * copy). Returns without waiting for the kernel. */
CF_API cf_status cf_reduce_launch(cf_reducer *r, int loop, cf_stream *s, const cf_array *in,
                                  const unsigned char *reduced, const cf_array *out,
                                  const cf_array *where, const void *init);

/* Reduce every element of `in` into the one element at `out` (device address) of dtype out_dtype
 * (not inside `in`: CF_ERR_INVALID, as cf_reduce_launch). */
CF_API cf_status cf_reduce_all(cf_reducer *r, int loop, cf_stream *s, const cf_array *in,
                               uint64_t out, cf_dtype out_dtype, const void *init);

/* Inclusive scan of `in` along `axis` into `out` (same shape). `out` may be the same view as `in`
 * (each tile is loaded whole before it is stored, and a column scan reads each element before it
 * writes it) but must not share memory with it otherwise (CF_ERR_INVALID: copy `in` first). */
CF_API cf_status cf_scan_launch(cf_reducer *r, int loop, cf_stream *s, const cf_array *in,
                                int axis, const cf_array *out);

/* NumPy's reduceat: out[..., s, ...] = the reduction of in[..., indices[s]:indices[s+1], ...] along
 * `axis` (the last segment runs to the axis' end; where indices[s] >= indices[s+1], the element
 * in[..., indices[s], ...] alone). `indices` is a 1-d device array of an integer (or bool) dtype
 * whose values the caller has checked to lie in [0, in->shape[axis]) (else see
 * cf_reduceat_launch_checked); `out` has in's shape with indices' extent on `axis`, any dtype, not
 * sharing memory with `in` or `indices`. The kernel's shape (lanes per segment, vector loads,
 * blocks per long segment) is chosen from the outputs' count and the mean segment length. No
 * initial value. Returns without waiting. (src/reduceat.c) */
CF_API cf_status cf_reduceat_launch(cf_reducer *r, int loop, cf_stream *s, const cf_array *in,
                                    int axis, const cf_array *indices, const cf_array *out);

/* cf_reduceat_launch for device `indices` not checked yet: a kernel checks them against
 * [0, in->shape[axis]) on s and the reduction, queued right behind it, writes nothing when one
 * lies outside. Waits for the check only, not for the reduction: *bad = the first position whose
 * value lies outside (and *value = that value; out is left as it was), or -1. A stream being
 * captured into a graph is refused (CF_ERR_UNSUPPORTED: the check must wait). */
CF_API cf_status cf_reduceat_launch_checked(cf_reducer *r, int loop, cf_stream *s,
                                            const cf_array *in, int axis,
                                            const cf_array *indices, const cf_array *out,
                                            int64_t *bad, int64_t *value);

/* The CUDA C of the kernel cf_reduce_launch / cf_scan_launch would use (axis < 0: a reduction),
 * for inspection and tests; needs no GPU. The caller frees *source with cf_free_buffer. */
CF_API cf_status cf_reduce_kernel_source(cf_reducer *r, int loop, const cf_array *in,
                                         const unsigned char *reduced, int scan_axis,
                                         const cf_array *out, const cf_array *where,
                                         char **source);

/* ---- conveniences for C programs ------------------------------------------------------------ */

/* Compile loop `loop` (-1: every loop) now, as cf_ufunc_check does for ufuncs: the full reduction
 * of a contiguous vector of the accumulator type. CF_ERR_COMPILE with NVRTC's log and the numbered
 * source when the loop's source does not compile. Needs NVRTC, not a GPU. */
CF_API cf_status cf_reducer_check(cf_reducer *r, int loop);

/* Reduce every element of `in` to one value and copy it to the host: *result receives the
 * accumulator type's bytes (e.g. a float for a float32 loop). The loop is the one whose
 * accumulator type is in's dtype, else the reducer's only loop (elements converted as they are
 * loaded); else CF_ERR_TYPE. `in` is a device array, or a C-contiguous HOST array (device -1),
 * which is first copied to device `0` or the stream's device. `init` as for cf_reduce_launch
 * (NULL: none; needed when `in` is empty). `s` NULL: the default stream of in's device (device 0
 * for a host array). Waits for the result; temporaries go back to the pool. Needs a GPU. */
CF_API cf_status cf_reduce_to_host(cf_reducer *r, cf_stream *s, const cf_array *in,
                                   const void *init, void *result);

#ifdef __cplusplus
}
#endif
#endif
