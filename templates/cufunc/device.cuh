/* cufunc/device.cuh: device helpers every generated kernel shares (element-wise, gufunc, reduce):
 * aligned vectors, the programmatic-dependent-launch wait, division by an extent with a
 * multiply-high, and the one loop that turns a linear index into per-operand byte offsets. */
#ifndef CUFUNC_DEVICE_CUH
#define CUFUNC_DEVICE_CUH

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

/* Byte offsets of linear index i over ND axes (row-major, innermost last; ND == 0 gives zeros) for
 * NOPS operands, operand j's byte stride along axis k being stride(j, k). shape[k] and div[k] are
 * the extents and their divisors. I is the unsigned index type and O the signed offset type:
 * (unsigned, int) when the plan allows 32-bit indexing, so the per-axis divisions are 32-bit
 * multiply-highs and the offset sums 32-bit adds; (unsigned long long, long long) otherwise. */
template <int ND, int NOPS, typename I, typename O, class S>
__device__ __forceinline__ void cf_index_offsets(I i, const cf_ka_i64 *shape, const cf_ew_fastdiv *div,
                                                 const S &stride, O *off)
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
            q = cf_divi<I>(i, div[k]);
            c = i - q * (I)shape[k];
        }
#pragma unroll
        for (int j = 0; j < NOPS; j++)
            off[j] += (O)c * (O)stride(j, k);
        i = q;
    }
}

#endif
