/* cufunc/elementwise.cuh: device helpers of the element-wise kernels that src/ufunc.c generates.
 * The kernels themselves are generated text (one per specialisation key), kept small so NVRTC
 * compiles them fast; what they share lives here (the index-to-offsets loop, vectors, division:
 * device.cuh, shared with the gufunc and reduce kernels). */
#ifndef CUFUNC_ELEMENTWISE_CUH
#define CUFUNC_ELEMENTWISE_CUH

#include "cufunc/device.cuh"

/* Byte offsets of linear element i for NOPS operands over ND coalesced axes (row-major, innermost
 * last; ND == 0 gives zeros). The row-vector kernels pass a vector index over the loop shape with
 * its innermost extent divided by VEC; the tile kernels pass a tile's index over the outer axes.
 * I is the unsigned index type and O the signed offset type: (unsigned, int) when the plan allows
 * 32-bit indexing, so the per-axis divisions are 32-bit multiply-highs and the offset sums
 * 32-bit adds; (unsigned long long, long long) otherwise. */
struct cf_ew_strides {
    const cf_ew_operand *op;
    __device__ __forceinline__ cf_ka_i64 operator()(int j, int k) const { return op[j].strides[k]; }
};
template <int ND, int NOPS, typename I, typename O>
__device__ __forceinline__ void cf_offsets(I i, const cf_ew_header &h, const cf_ew_operand *op,
                                           O *off)
{
    cf_index_offsets<ND, NOPS, I, O>(i, h.shape, h.div, cf_ew_strides{op}, off);
}

#endif
