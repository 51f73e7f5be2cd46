/* cufunc/reduce.cuh: the reduction and scan kernels that src/reduce.c instantiates.
 *
 * The first part (the parameter block) is plain C shared with the host (src/reduce.c includes this
 * file without __CUDACC__), so the layouts cannot drift; both sides check the size. The second part
 * holds the kernel bodies as templates over an operator struct Op, which the generated source
 * defines from the user's binary device function:
 *
 *     struct cf_red_op { typedef ACC T; static __device__ T apply(T a, T b); };
 *
 * Every kernel tracks, next to each partial value, whether it holds any element yet ("ok"): the
 * function need not have an identity, so a thread that saw no element must not contribute. The
 * initial value (`init`, NumPy's `initial` or the ufunc's identity) is folded in once, at the end:
 * result = apply(init, reduction of the elements). The order in which elements are combined is not
 * the sequential one: the function must be associative and commutative.
 *
 * Kernels (one launch each):
 *   cf_red_all    every element into one value: grid-stride loop with V-wide vector loads and U
 *                 independent accumulators per thread, warp shuffles, shared memory across warps,
 *                 then the last block to finish (atomic ticket) combines the blocks' partials and
 *                 resets the ticket for the next launch.
 *   cf_red_rows   reduced elements contiguous (or least strided): a warp (short rows) or a block
 *                 per output row; long rows with few outputs are split over gridDim.y blocks whose
 *                 partials the last of them combines.
 *   cf_red_cols   reduced axes strided, kept axis contiguous: a thread per output (VC adjacent
 *                 outputs with vector loads), looping over its share of the reduced range; the
 *                 reduced range is split over gridDim.y when there are too few outputs to fill the
 *                 card, the last block of a column tile combining the partials.
 *   cf_scan_tiles inclusive scan in one pass with decoupled look-back (Merrill & Garland, as CUB's
 *                 single-pass scan): each block takes the next tile (atomic counter), publishes its
 *                 aggregate, looks back over its predecessors' published aggregates / inclusive
 *                 prefixes a warp-wide window at a time, publishes its inclusive prefix.
 *   cf_scan_cols  scan along a strided axis: a thread per column, sequential along the axis.
 */
#ifndef CUFUNC_REDUCE_CUH
#define CUFUNC_REDUCE_CUH

#include "cufunc/kernel_args.h"

/* Coalesced kept axes and reduced axes a specialised kernel handles (each). */
#define CF_RED_MAX_NDIM 6
/* Per-stream tickets for split reductions (one per output tile) and partials of full reductions. */
#define CF_RED_NTICKETS 8192
#define CF_RED_MAX_BLOCKS 4096

typedef struct cf_red_params {
    cf_ka_u64 in, out, where;         /* addresses of element (0, ..., 0) */
    cf_ka_u64 tickets;                /* unsigned[CF_RED_NTICKETS], all 0 between launches */
    cf_ka_u64 partials;               /* ACC values of blocks / splits */
    cf_ka_u64 partial_ok;             /* unsigned char per partial: holds a value */
    cf_ka_u64 status;                 /* scans: unsigned per tile, (epoch << 2) | flag */
    cf_ka_u64 aggregate, inclusive;   /* scans: ACC per tile */
    cf_ka_u64 tile_counter;           /* scans: unsigned long long, 0 between launches */
    cf_ka_i64 n_out;                  /* outputs (rows, columns); 1 for a full reduction */
    cf_ka_i64 n_red;                  /* elements reduced into (scanned along) each output */
    cf_ka_i64 chunk;                  /* split reductions: reduced elements per gridDim.y block */
    cf_ka_i64 tiles_per_row;          /* scans */
    cf_ka_i64 epoch;                  /* scans: this launch's number, 1 .. 2^30 - 1 */
    cf_ka_i64 has_init;
    cf_ka_u64 init[2];                /* the initial value's bytes, in the accumulator type */
    cf_ka_i64 kept_ndim, red_ndim;
    cf_ka_i64 kept_shape[CF_RED_MAX_NDIM], red_shape[CF_RED_MAX_NDIM];
    cf_ew_fastdiv kept_div[CF_RED_MAX_NDIM], red_div[CF_RED_MAX_NDIM];
    /* byte strides over the coalesced kept axes (innermost last) */
    cf_ka_i64 in_kept[CF_RED_MAX_NDIM], out_kept[CF_RED_MAX_NDIM], where_kept[CF_RED_MAX_NDIM];
    /* byte strides over the coalesced reduced axes; scans: the scanned axis in [0] */
    cf_ka_i64 in_red[CF_RED_MAX_NDIM], out_red[CF_RED_MAX_NDIM], where_red[CF_RED_MAX_NDIM];
} cf_red_params;

#define CF_RED_PARAMS_BYTES (8 * (20 + 14 * CF_RED_MAX_NDIM))
#ifdef __cplusplus
static_assert(sizeof(cf_red_params) == CF_RED_PARAMS_BYTES, "cf_red_params layout");
#else
_Static_assert(sizeof(cf_red_params) == CF_RED_PARAMS_BYTES, "cf_red_params layout");
#endif

#ifdef __CUDACC__
#include "cufunc/elementwise.cuh"

#define CF_RED_FULL 0xffffffffu

template <typename I> struct cf_red_off_t { typedef long long type; };
template <> struct cf_red_off_t<unsigned> { typedef int type; };

/* ---- moving values of any type between lanes and through L2 ------------------------------------ */

template <typename T> struct cf_red_words { enum { n = (sizeof(T) + 3) / 4 }; };

/* Shuffles move a value as 4-byte words: complex values as their halves, bool as a word. */
template <typename T> __device__ __forceinline__ T cf_red_shfl_down(const T &v, unsigned d)
{
    unsigned w[cf_red_words<T>::n];
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = 0;
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = __shfl_down_sync(CF_RED_FULL, w[i], d);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

template <typename T> __device__ __forceinline__ T cf_red_shfl_up(const T &v, unsigned d)
{
    unsigned w[cf_red_words<T>::n];
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = 0;
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = __shfl_up_sync(CF_RED_FULL, w[i], d);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

template <typename T> __device__ __forceinline__ T cf_red_shfl_idx(const T &v, int src)
{
    unsigned w[cf_red_words<T>::n];
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = 0;
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = __shfl_sync(CF_RED_FULL, w[i], src);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

/* A value written by another block in this launch: read from L2, never from a stale L1 line. */
template <typename T> __device__ __forceinline__ T cf_red_load_cg(const T *p)
{
    if constexpr (sizeof(T) % 4 != 0) {
        return *(const volatile T *)p;
    } else {
        unsigned w[sizeof(T) / 4];
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 4); i++)
            w[i] = __ldcg((const unsigned *)p + i);
        T r;
        memcpy(&r, w, sizeof(T));
        return r;
    }
}

/* ---- combining partial values that may be empty ------------------------------------------------ */

/* (v, ok) <- (v, ok) then (x, xok): x comes after v. */
template <class Op> __device__ __forceinline__ void cf_red_fold(typename Op::T &v, bool &ok,
                                                                const typename Op::T &x, bool xok)
{
    if (xok) {
        if (ok)
            v = Op::apply(v, x);
        else
            v = x;
        ok = true;
    }
}

/* (v, ok) <- (x, xok) then (v, ok): x comes before v. */
template <class Op> __device__ __forceinline__ void cf_red_fold_before(typename Op::T &v, bool &ok,
                                                                       const typename Op::T &x,
                                                                       bool xok)
{
    if (xok) {
        if (ok)
            v = Op::apply(x, v);
        else
            v = x;
        ok = true;
    }
}

/* The warp's values combined in lane order (lane 0 first); the result is in lane 0. */
template <class Op> __device__ __forceinline__ void cf_red_warp(typename Op::T &v, bool &ok)
{
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned d = 16; d > 0; d >>= 1) {
        const typename Op::T o = cf_red_shfl_down(v, d);
        const bool ook = __shfl_down_sync(CF_RED_FULL, (int)ok, d) != 0;
        if (lane + d < 32)
            cf_red_fold<Op>(v, ok, o, ook);
    }
}

/* The same in reverse lane order (lane 31 first): the look-back window, oldest tile in lane 31. */
template <class Op> __device__ __forceinline__ void cf_red_warp_rev(typename Op::T &v, bool &ok)
{
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned d = 16; d > 0; d >>= 1) {
        const typename Op::T o = cf_red_shfl_down(v, d);
        const bool ook = __shfl_down_sync(CF_RED_FULL, (int)ok, d) != 0;
        if (lane + d < 32)
            cf_red_fold_before<Op>(v, ok, o, ook);
    }
}

/* The block's values combined; the result is in thread 0. Every thread of the block must call. */
template <class Op, int BLOCK> __device__ __forceinline__ void cf_red_block(typename Op::T &v,
                                                                          bool &ok)
{
    typedef typename Op::T T;
    cf_red_warp<Op>(v, ok);
    if (BLOCK > 32) {
        __shared__ T sv[BLOCK / 32];
        __shared__ bool sok[BLOCK / 32];
        const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        __syncthreads(); /* an earlier call's readers are done with sv */
        if (lane == 0) {
            sok[warp] = ok;
            if (ok)
                sv[warp] = v;
        }
        __syncthreads();
        if (warp == 0) {
            ok = lane < BLOCK / 32 ? sok[lane] : false;
            if (ok)
                v = sv[lane];
            cf_red_warp<Op>(v, ok);
        }
    }
}

/* The final value of one output: the initial value, when there is one, folded in first. */
template <class Op> __device__ __forceinline__ typename Op::T
cf_red_result(const cf_red_params &p, const typename Op::T &v, bool ok)
{
    typedef typename Op::T T;
    if (p.has_init) {
        T init;
        memcpy(&init, p.init, sizeof(T));
        return ok ? Op::apply(init, v) : init;
    }
    return v; /* the host never launches an empty reduction without an initial value */
}

/* ---- offsets ----------------------------------------------------------------------------------- */

/* Byte offsets of linear index i over ND coalesced axes (innermost last) for up to three operands. */
template <int ND, typename I, typename O>
__device__ __forceinline__ void cf_red_offsets(I i, const cf_ka_i64 *shape, const cf_ew_fastdiv *div,
                                               const cf_ka_i64 *s0, const cf_ka_i64 *s1,
                                               const cf_ka_i64 *s2, O &o0, O &o1, O &o2)
{
    o0 = 0;
    o1 = 0;
    o2 = 0;
#pragma unroll
    for (int k = ND - 1; k >= 0; k--) {
        I q, c;
        if (k == 0) {
            c = i;
            q = 0;
        } else {
            if (sizeof(I) == 4)
                q = (I)cf_div32((unsigned)i, div[k]);
            else
                q = (I)cf_div64((unsigned long long)i, div[k]);
            c = i - q * (I)shape[k];
        }
        o0 += (O)c * (O)s0[k];
        o1 += (O)c * (O)s1[k];
        o2 += (O)c * (O)s2[k];
        i = q;
    }
}

/* ---- the per-thread loops ---------------------------------------------------------------------- */

/* Vectors first, first + stride, ... below nvec of a V-wide aligned run, U independent
 * accumulators of V lanes each; folds the thread's total into (v, ok). */
template <class Op, typename TIn, int V, int U, typename I>
__device__ __forceinline__ void cf_red_vec_loop(const cf_vec<TIn, V> *__restrict__ src, I nvec,
                                                I first, I stride, typename Op::T &v, bool &ok)
{
    typedef typename Op::T T;
    T acc[U][V];
    bool aok[U];
    cf_vec<TIn, V> x[U];
    /* the first round initialises the accumulators: no test of "holds a value" in the hot loop */
#pragma unroll
    for (int u = 0; u < U; u++) {
        const I k = first + (I)u * stride;
        aok[u] = k < nvec;
        if (aok[u])
            x[u] = src[k];
    }
#pragma unroll
    for (int u = 0; u < U; u++)
        if (aok[u]) {
#pragma unroll
            for (int e = 0; e < V; e++)
                acc[u][e] = cf_cast<T>(x[u].v[e]);
        }
    I base = first + (I)U * stride;
    /* whole rounds: U loads in flight, no bounds tests */
    for (; aok[U - 1] && base + (I)(U - 1) * stride < nvec; base += (I)U * stride) {
#pragma unroll
        for (int u = 0; u < U; u++)
            x[u] = src[base + (I)u * stride];
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int e = 0; e < V; e++)
                acc[u][e] = Op::apply(acc[u][e], cf_cast<T>(x[u].v[e]));
    }
    /* the last partial round */
#pragma unroll
    for (int u = 0; u < U; u++) {
        const I k = base + (I)u * stride;
        if (k < nvec && aok[u])
            x[u] = src[k];
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        const I k = base + (I)u * stride;
        if (k < nvec && aok[u]) {
#pragma unroll
            for (int e = 0; e < V; e++)
                acc[u][e] = Op::apply(acc[u][e], cf_cast<T>(x[u].v[e]));
        }
    }
#pragma unroll
    for (int u = 0; u < U; u++)
        if (aok[u]) {
            T s = acc[u][0];
#pragma unroll
            for (int e = 1; e < V; e++)
                s = Op::apply(s, acc[u][e]);
            cf_red_fold<Op>(v, ok, s, true);
        }
}

/* Elements first, first + stride, ... below end, of a run whose element i lies at
 * in + offset(i) (ND == 0: contiguous, i * sizeof(TIn); else through the reduced axes), skipping
 * those whose mask is false (WHERE). U independent accumulators. */
template <class Op, typename TIn, int U, int ND, bool WHERE, typename I>
__device__ __forceinline__ void cf_red_elem_loop(const cf_red_params &p, cf_ka_u64 in,
                                                 cf_ka_u64 wh, I first, I end, I stride,
                                                 typename Op::T &v, bool &ok)
{
    typedef typename Op::T T;
    typedef typename cf_red_off_t<I>::type O;
    T acc[U];
    bool aok[U];
#pragma unroll
    for (int u = 0; u < U; u++)
        aok[u] = false;
    for (I base = first; base < end; base += (I)U * stride) {
        TIn x[U];
        bool m[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const I i = base + (I)u * stride;
            m[u] = i < end;
            if (m[u]) {
                O oi, ow, unused;
                if (ND == 0) {
                    oi = (O)i * (O)sizeof(TIn);
                    ow = (O)i;
                } else {
                    cf_red_offsets<(ND > 0 ? ND : 1), I, O>(i, p.red_shape, p.red_div, p.in_red,
                                                            p.where_red, p.in_red, oi, ow, unused);
                }
                if (WHERE)
                    m[u] = *(const bool *)(wh + ow);
                x[u] = *(const TIn *)(in + oi);
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (m[u])
                cf_red_fold<Op>(acc[u], aok[u], cf_cast<T>(x[u]), true);
    }
#pragma unroll
    for (int u = 0; u < U; u++)
        cf_red_fold<Op>(v, ok, acc[u], aok[u]);
}

/* ---- full reduction: one launch, the last block combines --------------------------------------- */

template <class Op, typename TIn, typename TOut, int BLOCK, int V, int U, int ND, bool WHERE,
          typename I>
__device__ __forceinline__ void cf_red_all(const cf_red_params &p)
{
    typedef typename Op::T T;
    T v;
    bool ok = false;
    const I n = (I)p.n_red;
    const I t = (I)blockIdx.x * BLOCK + threadIdx.x;
    const I step = (I)gridDim.x * BLOCK;
    if (ND == 0 && !WHERE && V > 1) {
        /* contiguous and aligned to V elements (the host checks): vectors, then the tail */
        const I nvec = n / V;
        cf_red_vec_loop<Op, TIn, V, U, I>((const cf_vec<TIn, V> *)p.in, nvec, t, step, v, ok);
        const I k = nvec * V + t;
        if (k < n)
            cf_red_fold<Op>(v, ok, cf_cast<T>(((const TIn *)p.in)[k]), true);
    } else {
        cf_red_elem_loop<Op, TIn, U, ND, WHERE, I>(p, p.in, p.where, t, n, step, v, ok);
    }
    cf_red_block<Op, BLOCK>(v, ok);
    if (gridDim.x == 1) {
        if (threadIdx.x == 0)
            *(TOut *)p.out = cf_cast<TOut>(cf_red_result<Op>(p, v, ok));
        return;
    }
    __shared__ bool s_last;
    if (threadIdx.x == 0) {
        if (ok)
            ((T *)p.partials)[blockIdx.x] = v;
        ((unsigned char *)p.partial_ok)[blockIdx.x] = ok;
        __threadfence(); /* the partial is visible before the ticket says so */
        const unsigned ticket = atomicAdd((unsigned *)p.tickets, 1u);
        s_last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (!s_last)
        return;
    __threadfence();
    ok = false;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += BLOCK)
        if (cf_red_load_cg((const unsigned char *)p.partial_ok + b))
            cf_red_fold<Op>(v, ok, cf_red_load_cg((const T *)p.partials + b), true);
    cf_red_block<Op, BLOCK>(v, ok);
    if (threadIdx.x == 0) {
        *(TOut *)p.out = cf_cast<TOut>(cf_red_result<Op>(p, v, ok));
        *(volatile unsigned *)p.tickets = 0; /* ready for the next launch on this stream */
    }
}

/* ---- split reductions: the last of gridDim.y blocks of a tile combines ------------------------- */

/* Called by every thread of the block after it wrote its partials (partials[y * n_out + j]).
 * Returns true in the block that finishes the tile `tile`; that block then reads all partials. */
__device__ __forceinline__ bool cf_red_split_arrive(const cf_red_params &p, unsigned tile)
{
    __shared__ bool s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned ticket = atomicAdd((unsigned *)p.tickets + tile, 1u);
        s_last = ticket == gridDim.y - 1;
        if (s_last)
            ((volatile unsigned *)p.tickets)[tile] = 0; /* every block of the tile has arrived */
    }
    __syncthreads();
    if (s_last)
        __threadfence();
    return s_last;
}

template <class Op, typename I>
__device__ __forceinline__ void cf_red_split_gather(const cf_red_params &p, I j,
                                                    typename Op::T &v, bool &ok)
{
    typedef typename Op::T T;
    const I n_out = (I)p.n_out;
    ok = false;
    for (unsigned y = 0; y < gridDim.y; y++) {
        const I idx = (I)y * n_out + j;
        if (cf_red_load_cg((const unsigned char *)p.partial_ok + idx))
            cf_red_fold<Op>(v, ok, cf_red_load_cg((const T *)p.partials + idx), true);
    }
}

/* ---- rows: reduced elements contiguous (or least strided) -------------------------------------- */

template <class Op, typename TIn, typename TOut, int BLOCK, int GROUP, int V, int U, int KND,
          int RND, bool WHERE, typename I>
__device__ __forceinline__ void cf_red_rows(const cf_red_params &p)
{
    typedef typename Op::T T;
    typedef typename cf_red_off_t<I>::type O;
    const I n_out = (I)p.n_out, n = (I)p.n_red;
    const I lane = (I)(threadIdx.x % GROUP);
    const I per_block = BLOCK / GROUP;
    const I g0 = (I)blockIdx.x * per_block + (I)(threadIdx.x / GROUP);
    const I gstep = (I)gridDim.x * per_block;
    const bool split = gridDim.y > 1; /* then GROUP == BLOCK and gridDim.x == n_out */
    I lo = 0, hi = n;
    if (split) {
        lo = (I)blockIdx.y * (I)p.chunk;
        hi = lo + (I)p.chunk < n ? lo + (I)p.chunk : n;
    }
    /* the row loop is uniform over a group: GROUP == BLOCK keeps __syncthreads legal */
    for (I row = g0; row < n_out; row += gstep) {
        O oin = 0, oout = 0, ow = 0;
        if (KND > 0)
            cf_red_offsets<(KND > 0 ? KND : 1), I, O>(row, p.kept_shape, p.kept_div, p.in_kept,
                                                      p.out_kept, p.where_kept, oin, oout, ow);
        const cf_ka_u64 in = p.in + (cf_ka_u64)(long long)oin;
        T v;
        bool ok = false;
        I rest = lo;
        if (RND == 0 && !WHERE && V > 1 && in % sizeof(TIn) == 0) {
            /* peel the elements before the first 16-byte boundary, then whole vectors */
            const TIn *src = (const TIn *)in;
            const unsigned long long a = (unsigned long long)(src + lo);
            I head = (I)(((16 - (a & 15)) & 15) / sizeof(TIn));
            if (head > hi - lo)
                head = hi - lo;
            if (lane < head)
                cf_red_fold<Op>(v, ok, cf_cast<T>(src[lo + lane]), true);
            const I nvec = (hi - lo - head) / V;
            cf_red_vec_loop<Op, TIn, V, U, I>((const cf_vec<TIn, V> *)(src + lo + head), nvec,
                                              lane, (I)GROUP, v, ok);
            rest = lo + head + nvec * V;
        }
        cf_red_elem_loop<Op, TIn, U, RND, WHERE, I>(p, in, p.where + (cf_ka_u64)(long long)ow,
                                                    rest + lane, hi, (I)GROUP, v, ok);
        if (GROUP == 32)
            cf_red_warp<Op>(v, ok);
        else
            cf_red_block<Op, BLOCK>(v, ok);
        if (!split) {
            if (lane == 0)
                *(TOut *)(p.out + (cf_ka_u64)(long long)oout) =
                    cf_cast<TOut>(cf_red_result<Op>(p, v, ok));
            continue;
        }
        if (threadIdx.x == 0) {
            const I idx = (I)blockIdx.y * n_out + row;
            if (ok)
                ((T *)p.partials)[idx] = v;
            ((unsigned char *)p.partial_ok)[idx] = ok;
        }
        if (cf_red_split_arrive(p, blockIdx.x) && threadIdx.x == 0) {
            cf_red_split_gather<Op, I>(p, row, v, ok);
            *(TOut *)(p.out + (cf_ka_u64)(long long)oout) =
                cf_cast<TOut>(cf_red_result<Op>(p, v, ok));
        }
    }
}

/* ---- columns: reduced axes strided, a thread per output (VC adjacent outputs) ------------------ */

template <class Op, typename TIn, typename TOut, int BLOCK, int VC, int U, int KND, int RND,
          bool WHERE, typename I>
__device__ __forceinline__ void cf_red_cols(const cf_red_params &p)
{
    typedef typename Op::T T;
    typedef typename cf_red_off_t<I>::type O;
    const I n_out = (I)p.n_out, n = (I)p.n_red;
    const I groups = (n_out + VC - 1) / VC; /* VC > 1: the host made n_out a multiple of VC */
    const I g = (I)blockIdx.x * BLOCK + threadIdx.x;
    const bool active = g < groups;
    const I lo = (I)blockIdx.y * (I)p.chunk;
    const I hi = lo + (I)p.chunk < n ? lo + (I)p.chunk : n;
    T v[VC];
    bool ok[VC];
#pragma unroll
    for (int e = 0; e < VC; e++)
        ok[e] = false;
    O oin = 0, oout = 0, ow = 0;
    if (active) {
        if (KND > 0)
            cf_red_offsets<(KND > 0 ? KND : 1), I, O>(g * VC, p.kept_shape, p.kept_div, p.in_kept,
                                                      p.out_kept, p.where_kept, oin, oout, ow);
        T acc[U][VC];
        bool aok[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            aok[u] = false;
        for (I base = lo; base < hi; base += U) {
            cf_vec<TIn, VC> x[U];
            bool m[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const I r = base + u;
                m[u] = r < hi;
                if (m[u]) {
                    O ri, rw, unused;
                    cf_red_offsets<(RND > 0 ? RND : 1), I, O>(r, p.red_shape, p.red_div, p.in_red,
                                                              p.where_red, p.in_red, ri, rw, unused);
                    if (WHERE)
                        m[u] = *(const bool *)(p.where + (cf_ka_u64)(long long)(ow + rw));
                    x[u] = *(const cf_vec<TIn, VC> *)(p.in + (cf_ka_u64)(long long)(oin + ri));
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++)
                if (m[u]) {
                    if (aok[u]) {
#pragma unroll
                        for (int e = 0; e < VC; e++)
                            acc[u][e] = Op::apply(acc[u][e], cf_cast<T>(x[u].v[e]));
                    } else {
#pragma unroll
                        for (int e = 0; e < VC; e++)
                            acc[u][e] = cf_cast<T>(x[u].v[e]);
                        aok[u] = true;
                    }
                }
        }
#pragma unroll
        for (int u = 0; u < U; u++)
#pragma unroll
            for (int e = 0; e < VC; e++)
                cf_red_fold<Op>(v[e], ok[e], acc[u][e], aok[u]);
    }
    const O ostep = KND > 0 ? (O)p.out_kept[(KND > 0 ? KND : 1) - 1] : (O)0;
    if (gridDim.y == 1) {
        if (active)
#pragma unroll
            for (int e = 0; e < VC; e++)
                *(TOut *)(p.out + (cf_ka_u64)(long long)(oout + e * ostep)) =
                    cf_cast<TOut>(cf_red_result<Op>(p, v[e], ok[e]));
        return;
    }
    if (active)
#pragma unroll
        for (int e = 0; e < VC; e++) {
            const I idx = (I)blockIdx.y * n_out + g * VC + e;
            if (ok[e])
                ((T *)p.partials)[idx] = v[e];
            ((unsigned char *)p.partial_ok)[idx] = ok[e];
        }
    if (cf_red_split_arrive(p, blockIdx.x) && active)
#pragma unroll
        for (int e = 0; e < VC; e++) {
            cf_red_split_gather<Op, I>(p, g * VC + e, v[e], ok[e]);
            *(TOut *)(p.out + (cf_ka_u64)(long long)(oout + e * ostep)) =
                cf_cast<TOut>(cf_red_result<Op>(p, v[e], ok[e]));
        }
}

/* ---- scans ------------------------------------------------------------------------------------- */

__device__ __forceinline__ int cf_scan_pad(int i) { return i + (i >> 5); }

enum { CF_SCAN_AGGREGATE = 1, CF_SCAN_PREFIX = 2 };

/* One tile of one row per block, in the order blocks start (atomic tile counter), so that every
 * tile a block waits for belongs to a block already running. */
template <class Op, typename TIn, typename TOut, int BLOCK, int ITEMS, int KND, typename I>
__device__ __forceinline__ void cf_scan_tiles(const cf_red_params &p)
{
    typedef typename Op::T T;
    typedef typename cf_red_off_t<I>::type O;
    constexpr int TILE = BLOCK * ITEMS;
    constexpr int NW = BLOCK / 32;
    __shared__ T s_items[TILE + TILE / 32];
    __shared__ T s_warp[NW];
    __shared__ bool s_warp_ok[NW];
    __shared__ T s_prefix;
    __shared__ bool s_prefix_ok;
    __shared__ unsigned long long s_tile;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const unsigned epoch = (unsigned)p.epoch;
    volatile unsigned *status = (volatile unsigned *)p.status;
    T *agg = (T *)p.aggregate, *incl = (T *)p.inclusive;

    if (tid == 0) {
        const unsigned long long t = atomicAdd((unsigned long long *)p.tile_counter, 1ull);
        /* the draw of the last tile is the last draw of this launch: reset for the next one */
        if (t == (unsigned long long)gridDim.x - 1)
            *(volatile unsigned long long *)p.tile_counter = 0;
        s_tile = t;
    }
    __syncthreads();
    const unsigned long long tile = s_tile;
    const unsigned long long tpr = (unsigned long long)p.tiles_per_row;
    const I row = (I)(tile / tpr), tj = (I)(tile % tpr);
    const I n = (I)p.n_red;
    O oin = 0, oout = 0, unused = 0;
    if (KND > 0)
        cf_red_offsets<(KND > 0 ? KND : 1), I, O>(row, p.kept_shape, p.kept_div, p.in_kept,
                                                  p.out_kept, p.in_kept, oin, oout, unused);
    const I start = tj * (I)TILE;
    const int count = n - start < (I)TILE ? (int)(n - start) : TILE;
    const O sin = (O)p.in_red[0], sout = (O)p.out_red[0];
    const cf_ka_u64 in = p.in + (cf_ka_u64)(long long)(oin + (O)start * sin);
    const cf_ka_u64 out = p.out + (cf_ka_u64)(long long)(oout + (O)start * sout);

    /* striped loads (coalesced), transposed through shared memory to ITEMS consecutive per thread */
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int idx = i * BLOCK + tid;
        if (idx < count)
            s_items[cf_scan_pad(idx)] = cf_cast<T>(*(const TIn *)(in + (O)idx * sin));
    }
    __syncthreads();
    int mine = count - tid * ITEMS;
    mine = mine < 0 ? 0 : mine > ITEMS ? ITEMS : mine;
    T x[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
        if (i < mine)
            x[i] = s_items[cf_scan_pad(tid * ITEMS + i)];
#pragma unroll
    for (int i = 1; i < ITEMS; i++)
        if (i < mine)
            x[i] = Op::apply(x[i - 1], x[i]);
    T tv;
    bool tok = mine > 0;
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
        if (i == mine - 1)
            tv = x[i];

    /* inclusive scan of the thread totals within the warp */
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const T o = cf_red_shfl_up(tv, d);
        const bool ook = __shfl_up_sync(CF_RED_FULL, (int)tok, d) != 0;
        if (lane >= d)
            cf_red_fold_before<Op>(tv, tok, o, ook);
    }
    T wex = cf_red_shfl_up(tv, 1); /* this thread's exclusive prefix within the warp */
    bool wexok = (__shfl_up_sync(CF_RED_FULL, (int)tok, 1) != 0) && lane > 0;
    if (lane == 31) {
        s_warp_ok[warp] = tok;
        if (tok)
            s_warp[warp] = tv;
    }
    __syncthreads();
    if (warp == 0) {
        T wt;
        bool wtok = lane < NW ? s_warp_ok[lane] : false;
        if (wtok)
            wt = s_warp[lane];
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const T o = cf_red_shfl_up(wt, d);
            const bool ook = __shfl_up_sync(CF_RED_FULL, (int)wtok, d) != 0;
            if (lane >= d)
                cf_red_fold_before<Op>(wt, wtok, o, ook);
        }
        const T e = cf_red_shfl_up(wt, 1);
        const bool eok = (__shfl_up_sync(CF_RED_FULL, (int)wtok, 1) != 0) && lane > 0;
        if (lane < NW) {
            s_warp_ok[lane] = eok;
            if (eok)
                s_warp[lane] = e;
        }
        const T total = cf_red_shfl_idx(wt, NW - 1); /* the tile's aggregate; never empty */
        if (tj == 0) {
            if (lane == 0) {
                incl[tile] = total;
                __threadfence();
                status[tile] = (epoch << 2) | CF_SCAN_PREFIX;
                s_prefix_ok = false;
            }
        } else {
            if (lane == 0) {
                agg[tile] = total;
                __threadfence();
                status[tile] = (epoch << 2) | CF_SCAN_AGGREGATE;
            }
            /* look back over 32 predecessors at a time; lane k sees tile - 1 - k */
            T ex;
            bool exok = false;
            const long long first = (long long)tile - (long long)tj;
            long long pred = (long long)tile - 1 - lane;
            for (;;) {
                unsigned flag = 3; /* before the row's first tile: stop, nothing to add */
                if (pred >= first) {
                    unsigned st;
                    do {
                        st = status[pred];
                    } while ((st >> 2) != epoch);
                    flag = st & 3u;
                }
                __threadfence();
                T val;
                bool vok = false;
                if (flag == CF_SCAN_AGGREGATE) {
                    val = cf_red_load_cg(agg + pred);
                    vok = true;
                } else if (flag == CF_SCAN_PREFIX) {
                    val = cf_red_load_cg(incl + pred);
                    vok = true;
                }
                const unsigned stops = __ballot_sync(CF_RED_FULL, flag >= CF_SCAN_PREFIX);
                const int stop = stops ? __ffs(stops) - 1 : 32;
                if (lane > stop)
                    vok = false;
                cf_red_warp_rev<Op>(val, vok); /* lane 0: the window, oldest tile first */
                if (lane == 0)
                    cf_red_fold_before<Op>(ex, exok, val, vok);
                if (stops)
                    break;
                pred -= 32;
            }
            if (lane == 0) {
                incl[tile] = exok ? Op::apply(ex, total) : total;
                __threadfence();
                status[tile] = (epoch << 2) | CF_SCAN_PREFIX;
                s_prefix_ok = exok;
                if (exok)
                    s_prefix = ex;
            }
        }
    }
    __syncthreads();
    T pre;
    bool pok = s_prefix_ok;
    if (pok)
        pre = s_prefix;
    cf_red_fold<Op>(pre, pok, s_warp[warp], s_warp_ok[warp]);
    cf_red_fold<Op>(pre, pok, wex, wexok);
    if (pok) {
#pragma unroll
        for (int i = 0; i < ITEMS; i++)
            if (i < mine)
                x[i] = Op::apply(pre, x[i]);
    }
#pragma unroll
    for (int i = 0; i < ITEMS; i++)
        if (i < mine)
            s_items[cf_scan_pad(tid * ITEMS + i)] = x[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int idx = i * BLOCK + tid;
        if (idx < count)
            *(TOut *)(out + (O)idx * sout) = cf_cast<TOut>(s_items[cf_scan_pad(idx)]);
    }
}

/* A thread per column (kept index), sequential along the scanned axis; U loads ahead. */
template <class Op, typename TIn, typename TOut, int BLOCK, int U, int KND, typename I>
__device__ __forceinline__ void cf_scan_cols(const cf_red_params &p)
{
    typedef typename Op::T T;
    typedef typename cf_red_off_t<I>::type O;
    const I n_out = (I)p.n_out, n = (I)p.n_red;
    const O sin = (O)p.in_red[0], sout = (O)p.out_red[0];
    for (I j = (I)blockIdx.x * BLOCK + threadIdx.x; j < n_out; j += (I)gridDim.x * BLOCK) {
        O oin = 0, oout = 0, unused = 0;
        if (KND > 0)
            cf_red_offsets<(KND > 0 ? KND : 1), I, O>(j, p.kept_shape, p.kept_div, p.in_kept,
                                                      p.out_kept, p.in_kept, oin, oout, unused);
        T acc;
        bool ok = false;
        for (I base = 0; base < n; base += U) {
            TIn x[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (base + u < n)
                    x[u] = *(const TIn *)(p.in + (cf_ka_u64)(long long)(oin + (O)(base + u) * sin));
#pragma unroll
            for (int u = 0; u < U; u++)
                if (base + u < n) {
                    cf_red_fold<Op>(acc, ok, cf_cast<T>(x[u]), true);
                    *(TOut *)(p.out + (cf_ka_u64)(long long)(oout + (O)(base + u) * sout)) =
                        cf_cast<TOut>(acc);
                }
        }
    }
}

#endif /* __CUDACC__ */
#endif
