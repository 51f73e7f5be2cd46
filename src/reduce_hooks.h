/* reduce_hooks.h: what the reduction engine (reduce.c) lends the reduceat engine (reduceat.c):
 * its argument checks, its kernel cache (a reduceat specialisation is one more kind of the
 * reduction kernels, generated from templates/cufunc/reduce.cuh), the per-stream scratch and the
 * parameter block's kept axes. Internal. */
#ifndef CUFUNC_REDUCE_HOOKS_H
#define CUFUNC_REDUCE_HOOKS_H

#include <stdint.h>

#include "cufunc/reduce.cuh"
#include "cufunc/reduce.h"
#include "ktable.h"

/* A reduceat kernel: cf_red_segments (check = 0) or cf_red_segments_check (check = 1). */
typedef struct cf_red_seg_spec {
    cf_dtype in, out, idx;          /* the array's, the output's and the indices' dtypes */
    int knd, index32;               /* coalesced kept axes; 32-bit indexing */
    int block, group, vec, unroll;  /* threads per block, lanes per segment, vector width, loads */
    int cols, check;                /* a thread per output along a strided axis; the check */
} cf_red_seg_spec;

/* A valid reducer, loop and stream (CF_ERR_INVALID otherwise). */
cf_status cf_red_hook_check_loop(cf_reducer *r, int loop, cf_stream *s);
/* The views are valid, on `device`, aligned, and out shares no memory with in or indices. */
cf_status cf_red_hook_check_operands(const cf_reducer *r, int device, const cf_array *in,
                                     const cf_array *indices, const cf_array *out);
/* The kernel of a spec, from the reducer's kernel cache or built once. */
cf_status cf_red_hook_kernel(cf_reducer *r, int loop, const cf_red_seg_spec *ss, int device,
                             cf_kentry *out);
/* Stream s's scratch (ordered on s): the split tickets, and the CF_RED_SEG_SCRATCH bytes of the
 * index check (zeroed once; the check kernel leaves them as it found them, but for the verdict). */
cf_status cf_red_hook_scratch(cf_stream *s, uint64_t *tickets, uint64_t *seg);
/* The parameter block with plan p's kept axes and the addresses (reduce.c's fill_params). */
void cf_red_hook_params(cf_red_params *pr, const cf_reduce_plan *p, uint64_t in, uint64_t out,
                        uint64_t where);

#endif
