/* cufunc/at.cuh: the kernel of ufunc.at (unbuffered in-place: a[idx[i]] = f(a[idx[i]], b[i]) for
 * every i, repeated indices accumulating), instantiated by src/at.c.
 *
 * The parameter block is plain C shared with the host (src/at.c includes this file without
 * __CUDACC__). The target is seen as (extent, inner): the indexed axis and, per index, `inner`
 * elements `a_inner` bytes apart (a trailing block of a, or 1). The values b are read in their own
 * dtype at b + i * b_index + r * b_inner (strides 0 broadcast) and cast to the loop's type.
 *
 * How an update is applied (MODE, chosen by the host from the loop and the dtype):
 *   CF_AT_MODE_CAS     any 4- or 8-byte type and any function: read, apply the user's function,
 *                      atomicCAS the bits back, retry until no other thread wrote in between. The
 *                      comparison is of bit patterns, so NaN values do not loop forever.
 *   CF_AT_MODE_CAS_WORD 1- and 2-byte types: the same on the aligned 32-bit word holding the
 *                      element, the neighbouring bytes written back unchanged.
 *   CF_AT_MODE_ADD     the hardware's atomicAdd (add on int32/int64/uint32/uint64/float32/float64).
 *   CF_AT_MODE_MIN/MAX atomicMin/atomicMax (minimum/maximum on int32/int64/uint32/uint64).
 *   CF_AT_MODE_SERIAL  16-byte types (complex128), which have no CAS: one thread applies every
 *                      update in order (correct and slow).
 * An index outside [-extent, extent) is skipped and reported through `bad` (flag, then value). */
#ifndef CUFUNC_AT_CUH
#define CUFUNC_AT_CUH

#include "cufunc/kernel_args.h"

#define CF_AT_MODE_CAS 0
#define CF_AT_MODE_CAS_WORD 1
#define CF_AT_MODE_ADD 2
#define CF_AT_MODE_MIN 3
#define CF_AT_MODE_MAX 4
#define CF_AT_MODE_SERIAL 5

typedef struct cf_at_params {
    cf_ka_u64 a;         /* the target's element (0, ..., 0) */
    cf_ka_u64 index;     /* int32 or int64 indices, contiguous */
    cf_ka_u64 b;         /* values (unused by a one-input function) */
    cf_ka_u64 bad;       /* unsigned long long[2]: a bad index was seen, and one such index */
    cf_ka_i64 nindex;    /* indices */
    cf_ka_i64 inner;     /* elements updated per index (>= 1) */
    cf_ka_i64 extent;    /* extent of the indexed axis */
    cf_ka_i64 a_index;   /* bytes between entries of the indexed axis */
    cf_ka_i64 a_inner;   /* bytes between the elements of one entry */
    cf_ka_i64 b_index;   /* bytes between b's values of consecutive indices (0: broadcast) */
    cf_ka_i64 b_inner;   /* bytes between b's values within one entry (0: broadcast) */
} cf_at_params;

#define CF_AT_PARAMS_BYTES (8 * 11)
CF_KA_LAYOUT(cf_at_params, CF_AT_PARAMS_BYTES);

#ifdef __CUDACC__

template <int N> struct cf_at_word;
template <> struct cf_at_word<4> { typedef unsigned int U; };
template <> struct cf_at_word<8> { typedef unsigned long long U; };

template <typename To, typename From> __device__ __forceinline__ To cf_at_bits(From x)
{
    To r;
    memcpy(&r, &x, sizeof r);
    return r;
}

/* Op: struct { typedef T; typedef B; static __device__ T apply(T cur, B v); } */
template <class Op> __device__ __forceinline__ void cf_at_cas(typename Op::T *dst, typename Op::B v)
{
    typedef typename Op::T T;
    typedef typename cf_at_word<sizeof(T)>::U U;
    U *w = (U *)dst, old = *(volatile U *)w, assumed;
    do {
        assumed = old;
        T nv = Op::apply(cf_at_bits<T>(assumed), v);
        old = atomicCAS(w, assumed, cf_at_bits<U>(nv));
    } while (old != assumed);
}

template <class Op> __device__ __forceinline__ void cf_at_cas_word(typename Op::T *dst,
                                                                    typename Op::B v)
{
    typedef typename Op::T T;
    unsigned long long addr = (unsigned long long)dst;
    unsigned *w = (unsigned *)(addr & ~3ULL);
    unsigned shift = (unsigned)(addr & 3ULL) * 8u;
    unsigned mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned old = *(volatile unsigned *)w, assumed;
    do {
        assumed = old;
        T cur;
        unsigned part = (assumed & mask) >> shift;
        if (sizeof(T) == 1) { unsigned char c = (unsigned char)part; memcpy(&cur, &c, 1); }
        else { unsigned short c = (unsigned short)part; memcpy(&cur, &c, 2); }
        T nv = Op::apply(cur, v);
        unsigned nb = 0;
        if (sizeof(T) == 1) { unsigned char c; memcpy(&c, &nv, 1); nb = c; }
        else { unsigned short c; memcpy(&c, &nv, 2); nb = c; }
        old = atomicCAS(w, assumed, (assumed & ~mask) | (nb << shift));
    } while (old != assumed);
}

/* How one update is applied, per MODE (a specialisation each: only the chosen one is instantiated,
 * so a CAS on a 16-byte type or an atomicAdd on int8 is never compiled). */
template <class Op, int MODE> struct cf_at_apply;
template <class Op> struct cf_at_apply<Op, CF_AT_MODE_CAS> {
    static __device__ __forceinline__ void f(typename Op::T *d, typename Op::B v) { cf_at_cas<Op>(d, v); }
};
template <class Op> struct cf_at_apply<Op, CF_AT_MODE_CAS_WORD> {
    static __device__ __forceinline__ void f(typename Op::T *d, typename Op::B v) { cf_at_cas_word<Op>(d, v); }
};
template <class Op> struct cf_at_apply<Op, CF_AT_MODE_SERIAL> {
    static __device__ __forceinline__ void f(typename Op::T *d, typename Op::B v) { *d = Op::apply(*d, v); }
};
/* the hardware's atomics; int64 adds as unsigned long long (two's complement) */
__device__ __forceinline__ void cf_at_add(int *p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void cf_at_add(unsigned *p, unsigned v) { atomicAdd(p, v); }
__device__ __forceinline__ void cf_at_add(long long *p, long long v)
{ atomicAdd((unsigned long long *)p, (unsigned long long)v); }
__device__ __forceinline__ void cf_at_add(unsigned long long *p, unsigned long long v) { atomicAdd(p, v); }
__device__ __forceinline__ void cf_at_add(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void cf_at_add(double *p, double v) { atomicAdd(p, v); }
template <class Op> struct cf_at_apply<Op, CF_AT_MODE_ADD> {
    static __device__ __forceinline__ void f(typename Op::T *d, typename Op::B v)
    { cf_at_add(d, cf_cast<typename Op::T>(v)); }
};
template <class Op> struct cf_at_apply<Op, CF_AT_MODE_MIN> {
    static __device__ __forceinline__ void f(typename Op::T *d, typename Op::B v)
    { atomicMin(d, cf_cast<typename Op::T>(v)); }
};
template <class Op> struct cf_at_apply<Op, CF_AT_MODE_MAX> {
    static __device__ __forceinline__ void f(typename Op::T *d, typename Op::B v)
    { atomicMax(d, cf_cast<typename Op::T>(v)); }
};

template <class Op, typename BS, typename I, int MODE>
__device__ __forceinline__ void cf_at_one(const cf_at_params &p, long long j)
{
    typedef typename Op::T T;
    long long i = p.inner == 1 ? j : j / p.inner, r = j - i * p.inner;
    long long k = (long long)((const I *)p.index)[i];
    if (k < 0)
        k += p.extent;
    if (k < 0 || k >= p.extent) {
        unsigned long long *bad = (unsigned long long *)p.bad;
        if (atomicCAS(bad, 0ULL, 1ULL) == 0ULL)
            bad[1] = (unsigned long long)((const I *)p.index)[i];
        return;
    }
    T *dst = (T *)(p.a + k * p.a_index + r * p.a_inner);
    typename Op::B v = cf_cast<typename Op::B>(*(const BS *)(p.b + i * p.b_index + r * p.b_inner));
    cf_at_apply<Op, MODE>::f(dst, v);
}

template <class Op, typename BS, typename I, int MODE>
__device__ void cf_at_run(const cf_at_params &p)
{
    long long n = p.nindex * p.inner;
    if (MODE == CF_AT_MODE_SERIAL) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            for (long long j = 0; j < n; j++)
                cf_at_one<Op, BS, I, MODE>(p, j);
        return;
    }
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += step)
        cf_at_one<Op, BS, I, MODE>(p, j);
}

#endif /* __CUDACC__ */
#endif
