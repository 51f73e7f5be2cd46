/* cufunc/elementwise.cuh: device helpers of the element-wise kernels that src/ufunc.c generates.
 * The kernels themselves are generated text (one per specialisation key), kept small so NVRTC
 * compiles them fast; what they share lives here. */
#ifndef CUFUNC_ELEMENTWISE_CUH
#define CUFUNC_ELEMENTWISE_CUH

#include "cufunc/kernel_args.h"

/* N consecutive elements aligned to their total size (at most 16 bytes), so that one load or store
 * moves them all (ld.global.v4.f32 for N = 4 floats). sizeof(cf_vec<T, N>) == N * sizeof(T): the
 * kernels index arrays of them. */
template <typename T, int N> struct alignas(sizeof(T) * N) cf_vec { T v[N]; };

/* Programmatic dependent launch (compute capability 9.0 and up; see cf_launch_ex): wait for the
 * previous kernel in the stream (its completion and its memory) before touching global memory.
 * A no-op for a kernel launched without the attribute, and on older devices. The kernels do not
 * signal griddepcontrol.launch_dependents themselves: the implicit signal as their blocks exit
 * already lets the next kernel's blocks fill the SMs during the tail, and an early explicit one
 * cost a one-pass store-only kernel a fifth of its speed (87% of copy to 68%, measured). */
__device__ __forceinline__ void cf_grid_dependency_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
static_assert(sizeof(cf_vec<bool, 4>) == 4 && sizeof(cf_vec<float, 4>) == 16, "cf_vec packing");

/* n / d and n % d for the loop's extents: 32-bit and 64-bit index variants. */
__device__ __forceinline__ unsigned cf_div32(unsigned n, const cf_ew_fastdiv &d)
{
    return (__umulhi(n, (unsigned)d.magic) + n) >> (unsigned)d.shift;
}
__device__ __forceinline__ unsigned long long cf_div64(unsigned long long n, const cf_ew_fastdiv &d)
{
    return (__umul64hi(n, d.magic) + n) >> d.shift;
}

/* n / d in the index type I (32- or 64-bit). */
template <typename I> __device__ __forceinline__ I cf_divi(I n, const cf_ew_fastdiv &d)
{
    if (sizeof(I) == 4)
        return (I)cf_div32((unsigned)n, d);
    return (I)cf_div64((unsigned long long)n, d);
}

/* Byte offsets of linear element i for NOPS operands over ND coalesced axes (row-major, innermost
 * last; ND == 0 gives zeros). The row-vector kernels pass a vector index over the loop shape with
 * its innermost extent divided by VEC; the tile kernels pass a tile's index over the outer axes.
 * I is the unsigned index type and O the signed offset type: (unsigned, int) when the plan allows
 * 32-bit indexing, so the per-axis divisions are 32-bit multiply-highs and the offset sums
 * 32-bit adds; (unsigned long long, long long) otherwise. */
template <int ND, int NOPS, typename I, typename O>
__device__ __forceinline__ void cf_offsets(I i, const cf_ew_header &h, const cf_ew_operand *op,
                                           O *off)
{
#pragma unroll
    for (int j = 0; j < NOPS; j++)
        off[j] = 0;
#pragma unroll
    for (int k = ND - 1; k >= 0; k--) {
        I q, c;
        if (k == 0) {
            c = i;
            q = 0;
        } else {
            q = cf_divi<I>(i, h.div[k]);
            c = i - q * (I)h.shape[k];
        }
#pragma unroll
        for (int j = 0; j < NOPS; j++)
            off[j] += (O)c * (O)op[j].strides[k];
        i = q;
    }
}

#endif
