/* cufunc/plan.h: planning element-wise work over strided operands. Pure C, no GPU.
 *
 * A plan takes operands (strided views) and the loop shape they broadcast to, and rewrites the
 * iteration into the fewest, largest axes: axes of extent 1 dropped, axes ordered so the innermost
 * one is the fastest-moving in memory, and adjacent axes merged wherever every operand steps
 * through them as one. After planning, a C-contiguous array and a Fortran-contiguous array of the
 * same shape both become one axis; a transposed operand keeps two. The kernel is then specialised
 * on the plan's ndim, the operands' contiguity and the index width. Results are written into the
 * caller's struct (nothing to free).
 */
#ifndef CUFUNC_PLAN_H
#define CUFUNC_PLAN_H

#include <stdint.h>
#include "cufunc/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operands of one element-wise launch (inputs and outputs together). NumPy allows 64. */
#define CF_MAX_OPERANDS 64

/* Broadcast shapes by NumPy's rules (right-aligned; extent 1 stretches). On failure CF_ERR_INVALID
 * with NumPy's message: "operands could not be broadcast together with shapes (2,3) (4,) ". */
CF_API cf_status cf_broadcast_shapes(int n, const int *ndims, const int64_t *const *shapes,
                                     int *out_ndim, int64_t out_shape[CF_MAX_DIMS]);

typedef struct cf_plan {
    int nops;
    int ndim;                        /* after coalescing; 0 when there is one element or none */
    int64_t size;                    /* number of elements of the loop */
    int64_t shape[CF_MAX_DIMS];      /* the coalesced loop shape, innermost axis last */
    /* Byte strides of each operand over the coalesced axes; 0 on broadcast axes. */
    int64_t strides[CF_MAX_OPERANDS][CF_MAX_DIMS];
    /* Per operand: 1 when its elements are visited at consecutive addresses (stride == itemsize
     * over a single axis, or size <= 1). */
    unsigned char contiguous[CF_MAX_OPERANDS];
    /* Every operand contiguous: the kernel can use flat indexing and vector loads. */
    int all_contiguous;
    /* The loop size and every operand's reach in bytes are below 2^31: 32-bit index maths. */
    int index32;
    /* Axis permutation: perm[k] is the original (broadcast-shape) axis that became position k
     * before merging; kept for reductions and for tests. */
    int perm[CF_MAX_DIMS];
} cf_plan;

/* Plan a loop of `shape` (ndim axes) over `nops` operands. Each operand must have ndim <= the loop's
 * and broadcast to it (right-aligned); broadcast axes get stride 0. The axis order follows the
 * memory order of the operands, the first operand with a non-zero stride on both axes deciding
 * (list outputs first so that writes are the ones kept in order). `plan` is fully written. */
CF_API cf_status cf_plan_elementwise(cf_plan *plan, int nops, const cf_array *ops, int ndim,
                                     const int64_t *shape);

/* Number of blocks for `n` items, `per_block` items each, capped at `max_resident` (the blocks
 * that fit on the device at once, times a small factor, for grid-stride loops); at least 1. */
CF_API unsigned cf_plan_grid(int64_t n, int64_t per_block, int64_t max_resident);

#ifdef __cplusplus
}
#endif
#endif
