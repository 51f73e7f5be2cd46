/* cufunc/gufunc.cuh: the kernel parameters of gufunc launches, shared by the host (src/gufunc.c,
 * C11) and the generated kernels (CUDA C++ under NVRTC) so the layouts cannot drift, and the device
 * helpers of the kernel (gu_kernel.cuh, which includes this file). Every field is 8 bytes or a multiple: no padding on either side;
 * both check the sizes with static asserts.
 *
 * A launch passes one `cf_gu_header` then one `cf_gu_operand` per operand (inputs, then outputs) as
 * a single by-value parameter. */
#ifndef CUFUNC_GUFUNC_CUH
#define CUFUNC_GUFUNC_CUH

#include "cufunc/kernel_args.h"

#define CF_GU_LOOP_NDIM 6   /* == CF_GUFUNC_MAX_LOOP_NDIM of include/cufunc/gufunc.h */
#define CF_GU_CORE_NDIM 6   /* == CF_GUFUNC_MAX_CORE_NDIM */

typedef struct cf_gu_header {
    cf_ka_i64 n;                             /* loop iterations */
    cf_ka_i64 ndim;                          /* coalesced loop axes, innermost last */
    cf_ka_i64 shape[CF_GU_LOOP_NDIM];
    cf_ew_fastdiv div[CF_GU_LOOP_NDIM];      /* divides by shape[k] */
} cf_gu_header;

typedef struct cf_gu_operand {
    cf_ka_u64 ptr;                           /* array: address of element (0, ..., 0) */
    cf_ka_i64 loop_strides[CF_GU_LOOP_NDIM]; /* byte strides over the coalesced loop axes */
    cf_ka_i64 core_shape[CF_GU_CORE_NDIM];
    cf_ka_i64 core_strides[CF_GU_CORE_NDIM]; /* bytes */
    cf_ka_u64 scalar[2];                     /* a scalar operand's bytes (up to complex128) */
} cf_gu_operand;

#define CF_GU_HEADER_BYTES (8 * (2 + CF_GU_LOOP_NDIM + 3 * CF_GU_LOOP_NDIM))
#define CF_GU_OPERAND_BYTES (8 * (1 + CF_GU_LOOP_NDIM + 2 * CF_GU_CORE_NDIM + 2))

CF_KA_LAYOUT(cf_gu_header, CF_GU_HEADER_BYTES);
CF_KA_LAYOUT(cf_gu_operand, CF_GU_OPERAND_BYTES);

#ifdef __CUDACC__
#include "cufunc/device.cuh"

/* Byte offsets of loop iteration i for NOPS operands over ND coalesced loop axes (device.cuh). */
struct cf_gu_strides {
    const cf_gu_operand *op;
    __device__ __forceinline__ cf_ka_i64 operator()(int j, int k) const { return op[j].loop_strides[k]; }
};
template <int ND, int NOPS, typename I, typename O>
__device__ __forceinline__ void cf_gu_offsets(I i, const cf_gu_header &h, const cf_gu_operand *op,
                                              O *off)
{
    cf_index_offsets<ND, NOPS, I, O>(i, h.shape, h.div, cf_gu_strides{op}, off);
}

/* One unit of W bytes (1, 2, 4, 8 or 16), moved as one access. */
template <int W> struct cf_gu_unit;
template <> struct cf_gu_unit<1> { typedef unsigned char T; };
template <> struct cf_gu_unit<2> { typedef unsigned short T; };
template <> struct cf_gu_unit<4> { typedef unsigned int T; };
template <> struct cf_gu_unit<8> { typedef unsigned long long T; };
template <> struct cf_gu_unit<16> { typedef uint4 T; };

/* Move 16 bytes between a register and shared memory aligned to SW bytes (4, 8 or 16). */
template <int SW> __device__ __forceinline__ void cf_gu_st16(unsigned char *s, const uint4 &v)
{
    if (SW >= 16) {
        *(uint4 *)s = v;
    } else if (SW == 8) {
        ((uint2 *)s)[0] = make_uint2(v.x, v.y);
        ((uint2 *)s)[1] = make_uint2(v.z, v.w);
    } else {
        ((unsigned *)s)[0] = v.x;
        ((unsigned *)s)[1] = v.y;
        ((unsigned *)s)[2] = v.z;
        ((unsigned *)s)[3] = v.w;
    }
}
template <int SW> __device__ __forceinline__ uint4 cf_gu_ld16(const unsigned char *s)
{
    uint4 v;
    if (SW >= 16) {
        v = *(const uint4 *)s;
    } else if (SW == 8) {
        uint2 a = ((const uint2 *)s)[0], b = ((const uint2 *)s)[1];
        v = make_uint4(a.x, a.y, b.x, b.y);
    } else {
        v = make_uint4(((const unsigned *)s)[0], ((const unsigned *)s)[1],
                       ((const unsigned *)s)[2], ((const unsigned *)s)[3]);
    }
    return v;
}

/* Copy the rows of `cnt` iterations between global memory (row j at g + base[j]) and shared memory
 * (row j at s + j * PITCH), all threads of the block together, consecutive threads on consecutive
 * units so that every warp access is coalesced. ROW bytes per row, moved in units of W bytes: W = 16
 * needs ROW % 16 == 0 and 16-byte aligned global rows, and SW (the shared alignment: 4, 8 or 16)
 * says how the 16 bytes are written into the padded shared rows; smaller W moves one element (or
 * complex component) per access. Each thread loads UNROLL units before storing any, so that a block
 * keeps 16 KiB (W = 16, 128 threads) of loads in flight: the copy runs at the memory's speed only
 * with that much outstanding per multiprocessor. IN: global -> shared, else shared -> global. */
template <int ROW, int PITCH, int W, int SW, bool IN, typename O>
__device__ __forceinline__ void cf_gu_copy(unsigned char *s, unsigned long long g, const O *base,
                                           unsigned cnt, unsigned tid, unsigned nthreads)
{
    typedef typename cf_gu_unit<W>::T U;
    constexpr unsigned PER_ROW = ROW / W;
    constexpr int UNROLL = W == 16 ? 8 : 16;
    const unsigned total = cnt * PER_ROW;
    for (unsigned v0 = tid; v0 < total; v0 += UNROLL * nthreads) {
        U x[UNROLL];
        if (IN) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const unsigned v = v0 + u * nthreads;
                if (v < total) {
                    const unsigned j = v / PER_ROW, b = (v - j * PER_ROW) * W;
                    /* through the read-only path: a staged row is never written while the
                     * kernel runs, except by the thread that owns it after this copy */
                    x[u] = __ldg((const U *)(g + (unsigned long long)(long long)base[j] + b));
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const unsigned v = v0 + u * nthreads;
            if (v >= total)
                break;
            const unsigned j = v / PER_ROW, b = (v - j * PER_ROW) * W;
            unsigned char *sp = s + j * PITCH + b;
            if (IN) {
                if (W == 16)
                    cf_gu_st16<SW>(sp, *(const uint4 *)&x[u]);
                else
                    *(U *)sp = x[u];
            } else {
                U *gp = (U *)(g + (unsigned long long)(long long)base[j] + b);
                if (W == 16) {
                    uint4 t = cf_gu_ld16<SW>(sp);
                    *gp = *(const U *)&t;
                } else {
                    *gp = *(const U *)sp;
                }
            }
        }
    }
}
/* Flat tiles: the rows of the tile's `cnt` iterations are one contiguous block at g (iteration k at
 * g + k * ROW), copied to or from shared memory (row k at s + k * PITCH; PITCH == ROW: packed)
 * with consecutive threads on consecutive W-byte units. W > ROW's alignment is fine when packed
 * (a unit spans rows); padded rows need W | ROW. The block's end that is not a whole unit goes in
 * units of the largest power of two dividing ROW (at most W). Loads into shared memory go through
 * cp.async on sm_80+ (no registers hold the data, every unit of every operand in flight before
 * the wait: cf_gu_async_wait); 1- and 2-byte units, and older GPUs, load synchronously. */
__device__ __forceinline__ unsigned cf_gu_smem_addr(const void *p)
{
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
template <int W> __device__ __forceinline__ void cf_gu_load_async(unsigned char *s, unsigned long long g)
{
    typedef typename cf_gu_unit<W>::T U;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (W == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(cf_gu_smem_addr(s)), "l"(g)
                     : "memory");
        return;
    } else if constexpr (W >= 4) {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(cf_gu_smem_addr(s)), "l"(g),
                     "n"(W)
                     : "memory");
        return;
    }
#endif
    *(U *)s = __ldg((const U *)g);
}
__device__ __forceinline__ void cf_gu_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
template <int ROW, int PITCH, int W, bool IN>
__device__ __forceinline__ void cf_gu_move(unsigned char *s, unsigned long long g, unsigned b)
{
    typedef typename cf_gu_unit<W>::T U;
    const unsigned sb = PITCH == ROW ? b : b / ROW * PITCH + b % ROW;
    if (IN)
        cf_gu_load_async<W>(s + sb, g + b);
    else
        *(U *)(g + b) = *(const U *)(s + sb);
}
template <int ROW, int PITCH, int W, bool IN>
__device__ __forceinline__ void cf_gu_copy_flat(unsigned char *s, unsigned long long g, unsigned cnt,
                                                unsigned tid, unsigned nthreads)
{
    constexpr int LOW = ROW & -ROW;
    constexpr int TU = LOW < W ? LOW : W;
    const unsigned bytes = cnt * ROW, nv = bytes / W;
    for (unsigned v = tid; v < nv; v += nthreads)
        cf_gu_move<ROW, PITCH, W, IN>(s, g, v * W);
    if (TU < W)
        for (unsigned b = nv * W + tid * TU; b < bytes; b += nthreads * TU)
            cf_gu_move<ROW, PITCH, TU, IN>(s, g, b);
}
/* A thread's own copy of an out= core (gu_kernel.cuh, LD 2): N elements of type L from global
 * memory, and to its shared row after the body. Plain loads: the compiler may drop them. */
template <typename L, int N>
__device__ __forceinline__ void cf_gu_reg_load(L *r, unsigned long long g)
{
#pragma unroll
    for (int k = 0; k < N; k++)
        r[k] = ((const L *)g)[k];
}
template <typename L, int N>
__device__ __forceinline__ void cf_gu_reg_store(unsigned char *s, const L *r)
{
#pragma unroll
    for (int k = 0; k < N; k++)
        ((L *)s)[k] = r[k];
}
#endif /* __CUDACC__ */

#endif
