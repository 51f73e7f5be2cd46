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
 * the sequential one: the function must be associative and commutative. Scans always combine an
 * earlier part with a later one in that order (apply(earlier, later)): associativity suffices.
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
 *                 single-pass scan): each block takes the next tile (atomic counter) of BLOCK x
 *                 ITEMS elements, loads it with 16-byte vectors into registers (V consecutive
 *                 elements per lane per round), scans it with warp shuffles, publishes its
 *                 aggregate (value and flag in one 64-bit word for values of <= 4 bytes), looks
 *                 back over its predecessors' aggregates / inclusive prefixes 32 tiles at a time,
 *                 publishes its inclusive prefix and stores the tile with 16-byte vectors.
 *   cf_scan_cols  scan along a strided axis: a thread per column, sequential along the axis.
 *   cf_red_segments  reduceat: one output per (kept position, segment); a segment is
 *                 [indices[s], indices[s + 1]) of the axis, the last one runs to the axis' end,
 *                 an empty or reversed one is the element at indices[s]. GROUP lanes per output
 *                 (1, 2, ..., 32 lanes of a warp, or a whole block; the host picks GROUP from the
 *                 mean segment length), 16-byte vector loads after a peeled head where the axis is
 *                 contiguous; a long segment with few outputs is split over gridDim.y blocks
 *                 whose partials the last of them combines (as cf_red_rows). COLS: a thread per
 *                 output, adjacent threads on adjacent kept positions (the axis strided).
 *                 With device indices it reads the check's verdict first and, if an index
 *                 lies outside, returns at once: nothing is written.
 *   cf_red_segments_check  the indices' first position outside [0, n): the last block to finish
 *                 publishes the verdict for the reduction queued behind it (and in a mapped host
 *                 word for the host waiting on the check alone).
 */
#ifndef CUFUNC_REDUCE_CUH
#define CUFUNC_REDUCE_CUH

#include "cufunc/kernel_args.h"

/* Coalesced kept axes and reduced axes a specialised kernel handles (each). */
#define CF_RED_MAX_NDIM 6
/* Per-stream tickets for split reductions (one per output tile) and partials of full reductions. */
#define CF_RED_NTICKETS 8192
#define CF_RED_MAX_BLOCKS 4096
/* reduceat's index check in the per-stream scratch: the running verdict and the check's ticket
 * (both 0 between launches). The last check's verdict is the calling thread's own word
 * (reduceat.c's token), not the stream's: two threads' calls on one stream interleave there. */
#define CF_RED_SEG_ACC 0
#define CF_RED_SEG_TICKET 16
#define CF_RED_SEG_SCRATCH 32

typedef struct cf_red_params {
    cf_ka_u64 in, out, where;         /* addresses of element (0, ..., 0) */
    cf_ka_u64 tickets;                /* unsigned[CF_RED_NTICKETS], all 0 between launches */
    cf_ka_u64 partials;               /* ACC values of blocks / splits */
    cf_ka_u64 partial_ok;             /* unsigned char per partial: holds a value */
    cf_ka_u64 status;                 /* scans: 64-bit word per tile, low half (epoch << 2) | flag */
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
CF_KA_LAYOUT(cf_red_params, CF_RED_PARAMS_BYTES);

#ifdef __CUDACC__
#include "cufunc/device.cuh"

#define CF_RED_FULL 0xffffffffu

template <typename I> struct cf_red_off_t { typedef long long type; };
template <> struct cf_red_off_t<unsigned> { typedef int type; };

/* ---- moving values of any type between lanes and through L2 ------------------------------------ */

template <typename T> struct cf_red_words { enum { n = (sizeof(T) + 3) / 4 }; };

/* Shuffles move a value as 4-byte words: complex values as their halves, bool as a word. `shfl`
 * moves one word (__shfl_down_sync, __shfl_up_sync or __shfl_sync with its lane argument). */
template <typename T, class Shfl> __device__ __forceinline__ T cf_red_shfl_words(const T &v, Shfl shfl)
{
    unsigned w[cf_red_words<T>::n];
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = 0;
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < cf_red_words<T>::n; i++)
        w[i] = shfl(w[i]);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

template <typename T> __device__ __forceinline__ T cf_red_shfl_down(const T &v, unsigned d)
{
    return cf_red_shfl_words(v, [d](unsigned x) { return __shfl_down_sync(CF_RED_FULL, x, d); });
}

template <typename T> __device__ __forceinline__ T cf_red_shfl_up(const T &v, unsigned d)
{
    return cf_red_shfl_words(v, [d](unsigned x) { return __shfl_up_sync(CF_RED_FULL, x, d); });
}

template <typename T> __device__ __forceinline__ T cf_red_shfl_idx(const T &v, int src)
{
    return cf_red_shfl_words(v, [src](unsigned x) { return __shfl_sync(CF_RED_FULL, x, src); });
}

/* A value written by another block in this launch: read from L2, never from a stale L1 line. */
template <typename T> __device__ __forceinline__ T cf_red_load_cg(const T *p)
{
    if constexpr (sizeof(T) % 4 != 0 && !__is_class(T)) {
        return *(const volatile T *)p;
    } else if constexpr (sizeof(T) == 2) { /* cf_float16: no volatile copy constructor, so its bits */
        const unsigned short b = *(const volatile unsigned short *)p;
        T r;
        memcpy(&r, &b, 2);
        return r;
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

/* The warp's values combined in lane order (lane 0 first); the result is in lane 0. The strides
 * grow (1, 2, 4, ...), so each step joins two ADJACENT runs of lanes: the order of the operands
 * is kept, and an associative but non-commutative function is combined correctly. (Strides that
 * shrink from 16 would pair lane i with lane i + 16 first: right only for commutative ones.) */
/* REV: the same in reverse lane order (lane 31 first): the look-back window, oldest tile in
 * lane 31. */
template <class Op, bool REV = false>
__device__ __forceinline__ void cf_red_warp(typename Op::T &v, bool &ok)
{
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (unsigned d = 1; d < 32; d <<= 1) {
        const typename Op::T o = cf_red_shfl_down(v, d);
        const bool ook = __shfl_down_sync(CF_RED_FULL, (int)ok, d) != 0;
        if (lane + d < 32) {
            if (REV)
                cf_red_fold_before<Op>(v, ok, o, ook);
            else
                cf_red_fold<Op>(v, ok, o, ook);
        }
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

/* Byte offsets of linear index i over ND coalesced axes (innermost last) for up to three operands
 * (device.cuh). */
struct cf_red_strides {
    const cf_ka_i64 *s[3];
    __device__ __forceinline__ cf_ka_i64 operator()(int j, int k) const { return s[j][k]; }
};
template <int ND, typename I, typename O>
__device__ __forceinline__ void cf_red_offsets(I i, const cf_ka_i64 *shape, const cf_ew_fastdiv *div,
                                               const cf_ka_i64 *s0, const cf_ka_i64 *s1,
                                               const cf_ka_i64 *s2, O &o0, O &o1, O &o2)
{
    O off[3];
    cf_index_offsets<ND, 3, I, O>(i, shape, div, cf_red_strides{{s0, s1, s2}}, off);
    o0 = off[0];
    o1 = off[1];
    o2 = off[2];
}

/* ---- the per-thread loops ---------------------------------------------------------------------- */

/* Vectors first, first + stride, ... below nvec of a V-wide aligned run, U vectors in flight per
 * round; folds the thread's total into (v, ok). A round loads its U vectors first, then combines
 * them lane-wise and folds that into V accumulators: few live registers whatever the body costs,
 * so ptxas keeps all U loads of a round in flight (with U x V accumulators it pipelined the loads
 * two at a time to save registers, halving the bytes in flight). A thread with fewer than U
 * vectors takes them one at a time. The hot loop carries no "holds a value" flags. */
template <class Op, typename TIn, int V, int U, typename I>
__device__ __forceinline__ void cf_red_vec_loop(const cf_vec<TIn, V> *__restrict__ src, I nvec,
                                                I first, I stride, typename Op::T &v, bool &ok)
{
    typedef typename Op::T T;
    I base = first;
    if (first + (I)(U - 1) * stride < nvec) {
        T acc[V];
        bool started = false;
        /* whole rounds: U loads in flight, no bounds tests */
        for (; base + (I)(U - 1) * stride < nvec; base += (I)U * stride) {
            cf_vec<TIn, V> x[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                x[u] = src[base + (I)u * stride];
#pragma unroll
            for (int e = 0; e < V; e++) {
                T s = cf_cast<T>(x[0].v[e]);
#pragma unroll
                for (int u = 1; u < U; u++)
                    s = Op::apply(s, cf_cast<T>(x[u].v[e]));
                acc[e] = started ? Op::apply(acc[e], s) : s;
            }
            started = true;
        }
        T s = acc[0];
#pragma unroll
        for (int e = 1; e < V; e++)
            s = Op::apply(s, acc[e]);
        cf_red_fold<Op>(v, ok, s, true);
    }
    /* the rest, fewer than U vectors: one at a time */
    for (I k = base; k < nvec; k += stride) {
        const cf_vec<TIn, V> x = src[k];
#pragma unroll
        for (int e = 0; e < V; e++)
            cf_red_fold<Op>(v, ok, cf_cast<T>(x.v[e]), true);
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

/* partials of a split loaded at once by its gather (the engine may define it: CUFUNC_REDUCE_GATHER) */
#ifndef CF_RED_GATHER
#define CF_RED_GATHER 8
#endif

template <class Op, typename I>
__device__ __forceinline__ void cf_red_split_gather(const cf_red_params &p, I j,
                                                    typename Op::T &v, bool &ok)
{
    typedef typename Op::T T;
    const I n_out = (I)p.n_out;
    const unsigned ny = gridDim.y;
    ok = false;
    /* CF_RED_GATHER partials in flight at once: the gather is the kernel's tail (one block per
     * tile does it after all others); one L2 round trip per partial cost a 2^28 float32 sum over
     * axis 0 with 1024 columns (1056 partials each) a fifth of its time (bench/REDUCE_NOTES.md,
     * "axis 0"). Values are loaded whether or not their flag is set (the partials area is
     * allocated whole); they are folded in order, as before. */
    unsigned y = 0;
    for (; y + CF_RED_GATHER <= ny; y += CF_RED_GATHER) {
        unsigned char f[CF_RED_GATHER];
        T x[CF_RED_GATHER];
#pragma unroll
        for (int k = 0; k < CF_RED_GATHER; k++) {
            const I idx = (I)(y + k) * n_out + j;
            f[k] = cf_red_load_cg((const unsigned char *)p.partial_ok + idx);
            x[k] = cf_red_load_cg((const T *)p.partials + idx);
        }
#pragma unroll
        for (int k = 0; k < CF_RED_GATHER; k++)
            if (f[k])
                cf_red_fold<Op>(v, ok, x[k], true);
    }
    for (; y < ny; y++) {
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

/* Tile states of the decoupled look-back, one 64-bit word per tile: the low 32 bits are
 * (epoch << 2) | flag, a word from another launch (another epoch) reads as "not yet". Values of
 * at most 4 bytes travel in the high 32 bits of the same word, so one 8-byte store publishes value
 * and flag together and one 8-byte load reads both (single-copy atomic); larger values go to the
 * per-tile arrays `aggregate` / `inclusive`, written before a __threadfence that precedes the
 * flag, and read (from L2) after a __threadfence that follows it. */
enum { CF_SCAN_AGGREGATE = 1, CF_SCAN_PREFIX = 2, CF_SCAN_ROW_START = 3 };

/* 32-tile groups a look-back step reads per L2 round trip (see cf_scan_look_back); the engine
 * may define it before including this header (CUFUNC_SCAN_LOOKBACK). */
#ifndef CF_SCAN_LOOKBACK_GROUPS
#define CF_SCAN_LOOKBACK_GROUPS 1
#endif
/* 0: the one-tile-per-block scan draws its tile from an atomic counter in the order blocks start;
 * 1: takes tile blockIdx.x (the engine defines it: CUFUNC_SCAN_ORDER) */
#ifndef CF_SCAN_BLOCK_ORDER
#define CF_SCAN_BLOCK_ORDER 0
#endif
/* rounds of 16-byte vectors per thread of a one-tile-per-block scan held in shared memory beside
 * the ITEMS in registers (the engine defines it: CUFUNC_SCAN_SMEM_ITEMS) */
#ifndef CF_SCAN_SMEM_ROUNDS
#define CF_SCAN_SMEM_ROUNDS 0
#endif

template <typename T> struct cf_scan_packed { enum { value = sizeof(T) <= 4 }; };

/* One 16-byte vector global -> shared memory, asynchronously where the card has cp.async (the
 * thread holds no register for it while it travels); commit, then wait for this thread's own. */
__device__ __forceinline__ void cf_scan_prefetch_one(uint4 *dst, const uint4 *src)
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(dst)), "l"(src));
#else
    *dst = __ldcs(src);
#endif
}

__device__ __forceinline__ void cf_scan_prefetch_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

__device__ __forceinline__ void cf_scan_prefetch_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

template <typename T>
__device__ __forceinline__ void cf_scan_publish(const cf_red_params &p, long long tile,
                                                unsigned flag, const T &v)
{
    volatile unsigned long long *status = (volatile unsigned long long *)p.status;
    const unsigned lo = ((unsigned)p.epoch << 2) | flag;
    if (cf_scan_packed<T>::value) {
        unsigned bits = 0;
        memcpy(&bits, &v, sizeof(T));
        status[tile] = ((unsigned long long)bits << 32) | lo;
    } else {
        T *dst = flag == CF_SCAN_AGGREGATE ? (T *)p.aggregate : (T *)p.inclusive;
        dst[tile] = v;
        __threadfence(); /* the value is visible in L2 before the flag says so */
        status[tile] = lo;
    }
}

/* The value of a tile whose state word `w` this thread read with a valid flag. */
template <typename T>
__device__ __forceinline__ T cf_scan_value(const cf_red_params &p, long long tile,
                                           unsigned long long w, unsigned flag)
{
    T v;
    if (cf_scan_packed<T>::value) {
        const unsigned bits = (unsigned)(w >> 32);
        memcpy(&v, &bits, sizeof(T));
    } else {
        v = cf_red_load_cg((flag == CF_SCAN_AGGREGATE ? (const T *)p.aggregate
                                                       : (const T *)p.inclusive) + tile);
    }
    return v;
}

/* Inclusive scan of one value per lane in lane order (lane 0 first). HAS_OK: some lanes may hold
 * no value (ok false); without it every lane holds one. */
template <class Op, bool HAS_OK>
__device__ __forceinline__ void cf_scan_warp(typename Op::T &v, bool &ok, unsigned lane)
{
#pragma unroll
    for (unsigned d = 1; d < 32; d <<= 1) {
        const typename Op::T o = cf_red_shfl_up(v, d);
        if (HAS_OK) {
            const bool ook = __shfl_up_sync(CF_RED_FULL, (int)ok, d) != 0;
            if (lane >= d)
                cf_red_fold_before<Op>(v, ok, o, ook);
        } else if (lane >= d) {
            v = Op::apply(o, v);
        }
    }
}

/* Exclusive prefix of the tile `tile` of a row whose first tile is `first` (< tile), by warp 0:
 * a window of 32 x G predecessors per step, lane k inspecting tiles base - k - 32 m (m < G), the
 * G loads of a lane in flight together, so one L2 round trip covers 32 x G tiles; steps go further
 * back until a tile with its inclusive prefix (or the row's start) is in the window. The engine
 * uses G = 1: wider windows were measured slower (src/reduce.c, SCAN_LOOKBACK_DEFAULT). Each group
 * is combined in tile order and put before what younger groups gave. The result is in every lane.
 * The tiles waited for were drawn before this one (atomic tile counter), so their blocks are
 * running and never wait for this one: no deadlock. */
template <class Op, int SLEEP, int G>
__device__ __forceinline__ typename Op::T cf_scan_look_back(const cf_red_params &p, long long tile,
                                                            long long first, unsigned lane)
{
    typedef typename Op::T T;
    const volatile unsigned long long *status = (const volatile unsigned long long *)p.status;
    const unsigned epoch = (unsigned)p.epoch;
    T ex;
    bool exok = false;
    for (long long base = tile - 1;; base -= 32 * G) {
        unsigned long long w[G];
        bool valid[G];
#pragma unroll
        for (int m = 0; m < G; m++) {
            w[m] = 0;
            valid[m] = base - 32 * m - (long long)lane < first;
        }
        for (;;) {
            bool all = true;
#pragma unroll
            for (int m = 0; m < G; m++)
                if (!valid[m])
                    w[m] = status[base - 32 * m - (long long)lane];
#pragma unroll
            for (int m = 0; m < G; m++) {
                if (!valid[m])
                    valid[m] = ((unsigned)w[m] >> 2) == epoch;
                all &= valid[m];
            }
            if (__all_sync(CF_RED_FULL, all))
                break;
#if __CUDA_ARCH__ >= 700
            if (SLEEP > 0)
                __nanosleep(SLEEP); /* back off: fewer polls of the same L2 lines */
#endif
        }
        /* the youngest group holding a prefix (or the row's start), and its youngest such lane */
        int mstop = G;
        unsigned stop = 32u;
        unsigned flag[G];
#pragma unroll
        for (int m = 0; m < G; m++) {
            const long long pred = base - 32 * m - (long long)lane;
            flag[m] = pred >= first ? (unsigned)w[m] & 3u : (unsigned)CF_SCAN_ROW_START;
            const unsigned stops = __ballot_sync(CF_RED_FULL, flag[m] >= CF_SCAN_PREFIX);
            if (stops && mstop == G) {
                mstop = m;
                stop = (unsigned)(__ffs(stops) - 1);
            }
        }
        if (!cf_scan_packed<T>::value)
            __threadfence(); /* the flags were read before the values */
#pragma unroll
        for (int m = 0; m < G; m++) {
            if (m > mstop)
                break;
            const long long pred = base - 32 * m - (long long)lane;
            T v;
            bool vok = pred >= first && (m < mstop || lane <= stop);
            if (vok)
                v = cf_scan_value<T>(p, pred, w[m], flag[m]);
            cf_red_warp<Op, true>(v, vok); /* lane 0: the group, oldest tile first */
            if (lane == 0)
                cf_red_fold_before<Op>(ex, exok, v, vok);
        }
        if (mstop < G)
            break;
    }
    /* tile > first: at least the previous tile contributed, so lane 0 holds a value */
    return cf_red_shfl_idx(ex, 0);
}

/* Store V consecutive results at dst (byte stride `so` between elements; VEC: contiguous and
 * aligned to 16 bytes when V * sizeof(TOut) is a multiple of 16). */
template <typename TOut, int V>
__device__ __forceinline__ void cf_scan_store(cf_ka_u64 dst, long long so, const TOut (&y)[V],
                                              bool vec, int cnt)
{
    if constexpr ((V * sizeof(TOut)) % 16 == 0) {
        if (vec && cnt == V) {
            uint4 u[V * sizeof(TOut) / 16];
            memcpy(u, y, sizeof u);
#pragma unroll
            for (int i = 0; i < (int)(V * sizeof(TOut) / 16); i++)
                __stcs((uint4 *)dst + i, u[i]);
            return;
        }
    }
#pragma unroll
    for (int e = 0; e < V; e++)
        if (e < cnt)
            *(TOut *)(dst + (cf_ka_u64)(e * so)) = y[e];
}

/* One tile of BLOCK * ITEMS elements (count of them present). Warp w owns the contiguous segment
 * [w * SEG, (w + 1) * SEG), SEG = 32 * ITEMS; in round r (of R = ITEMS / V) lane l holds the V
 * consecutive elements starting at w * SEG + (r * 32 + l) * V: one 16-byte vector per lane per
 * round when the input is contiguous, so every load instruction reads 512 contiguous bytes, and
 * the same for stores.
 *
 * A row's last tile may be partial; its missing places are filled with a copy of its last element
 * and never stored. An inclusive scan is causal (no result depends on a later element) and no
 * other tile reads the last tile's aggregate or prefix (the next row's look-back stops at its own
 * first tile), so the filled places change nothing that is stored, and every tile runs the same
 * code without "holds a value" flags. Registers matter (they decide how many tiles are resident),
 * so each round's prefix within its warp is applied at once rather than kept. */
template <class Op, typename TIn, typename TOut, int BLOCK, int ITEMS, int V, int SLEEP, typename O,
          int SR>
__device__ __forceinline__ void cf_scan_tile(const cf_red_params &p, long long tile,
                                             long long first, cf_ka_u64 in, cf_ka_u64 out, O sin,
                                             O sout, int count, bool vec_in, bool vec_out)
{
    typedef typename Op::T T;
    /* R rounds of a lane's elements in registers, then SR rounds in this thread's own slots of
     * shared memory (more bytes of the tile resident per SM than registers alone hold) */
    constexpr int R = ITEMS / V, NW = BLOCK / 32, SEG = 32 * (ITEMS + SR * V);
    constexpr int TILE = BLOCK * (ITEMS + SR * V);
    static_assert(SR == 0 || (V * sizeof(TIn) == 16 && sizeof(T) == sizeof(TIn)),
                  "shared-memory rounds hold one 16-byte vector of input, then of results");
    __shared__ T s_val[NW];
    __shared__ bool s_ok[NW];
    __shared__ uint4 s_ext[SR > 0 ? SR * BLOCK : 1];
    const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    /* loads: every round's load is issued before any is used */
    T x[R][V];
    if (V * sizeof(TIn) == 16 && vec_in && count == TILE) {
        uint4 u[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int v = (int)warp * (SEG / V) + r * 32 + (int)lane;
            u[r] = __ldcs((const uint4 *)in + v);
        }
        if constexpr (SR > 0) {
#pragma unroll
            for (int r = R; r < R + SR; r++)
                cf_scan_prefetch_one(&s_ext[(r - R) * BLOCK + tid],
                                     (const uint4 *)in + ((int)warp * (SEG / V) + r * 32 + (int)lane));
            cf_scan_prefetch_commit();
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            cf_vec<TIn, V> y;
            memcpy(&y, &u[r], sizeof y);
#pragma unroll
            for (int e = 0; e < V; e++)
                x[r][e] = cf_cast<T>(y.v[e]);
        }
    } else {
        TIn y[R][V];
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int e = 0; e < V; e++) {
                const int idx = (int)warp * SEG + (r * 32 + (int)lane) * V + e;
                const int j = idx < count ? idx : count - 1;
                y[r][e] = *(const TIn *)(in + (cf_ka_u64)((long long)((O)j * sin)));
            }
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int e = 0; e < V; e++)
                x[r][e] = cf_cast<T>(y[r][e]);
        if constexpr (SR > 0) {
#pragma unroll
            for (int r = R; r < R + SR; r++) {
                TIn ys[V];
#pragma unroll
                for (int e = 0; e < V; e++) {
                    const int idx = (int)warp * SEG + (r * 32 + (int)lane) * V + e;
                    const int j = idx < count ? idx : count - 1;
                    ys[e] = *(const TIn *)(in + (cf_ka_u64)((long long)((O)j * sin)));
                }
                memcpy(&s_ext[(r - R) * BLOCK + tid], ys, sizeof ys);
            }
        }
    }

    /* per round: the lane's V elements in order, the lanes' totals across the warp, then what
     * precedes each lane within the warp's segment (earlier rounds, earlier lanes) applied */
    T carry;
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
        for (int e = 1; e < V; e++)
            x[r][e] = Op::apply(x[r][e - 1], x[r][e]);
        T t = x[r][V - 1];
        bool unused = true;
        cf_scan_warp<Op, false>(t, unused, lane);
        const T ex = cf_red_shfl_up(t, 1);
        const T total = cf_red_shfl_idx(t, 31);
        if (r == 0) {
            if (lane > 0) {
#pragma unroll
                for (int e = 0; e < V; e++)
                    x[r][e] = Op::apply(ex, x[r][e]);
            }
            carry = total;
        } else {
            const T pre = lane > 0 ? Op::apply(carry, ex) : carry;
#pragma unroll
            for (int e = 0; e < V; e++)
                x[r][e] = Op::apply(pre, x[r][e]);
            carry = Op::apply(carry, total);
        }
    }
    if constexpr (SR > 0) {
        /* the shared-memory rounds the same way, their partial results back into their slots */
        cf_scan_prefetch_wait();
#pragma unroll
        for (int r = 0; r < SR; r++) {
            cf_vec<TIn, V> yv;
            memcpy(&yv, &s_ext[r * BLOCK + tid], sizeof yv);
            T xs[V];
#pragma unroll
            for (int e = 0; e < V; e++)
                xs[e] = cf_cast<T>(yv.v[e]);
#pragma unroll
            for (int e = 1; e < V; e++)
                xs[e] = Op::apply(xs[e - 1], xs[e]);
            T t = xs[V - 1];
            bool unused = true;
            cf_scan_warp<Op, false>(t, unused, lane);
            const T ex = cf_red_shfl_up(t, 1);
            const T total = cf_red_shfl_idx(t, 31);
            const T pre = lane > 0 ? Op::apply(carry, ex) : carry;
#pragma unroll
            for (int e = 0; e < V; e++)
                xs[e] = Op::apply(pre, xs[e]);
            carry = Op::apply(carry, total);
            memcpy(&s_ext[r * BLOCK + tid], xs, sizeof xs);
        }
    }
    if (lane == 0)
        s_val[warp] = carry;
    __syncthreads();

    /* warp 0: the warps' totals in order, the tile's aggregate, the look-back, each warp's prefix.
     * Lanes past the last warp hold copies of its total: they come after, so change nothing. */
    if (warp == 0) {
        T wt = s_val[lane < (unsigned)NW ? lane : NW - 1];
        bool unused = true;
        cf_scan_warp<Op, false>(wt, unused, lane);
        const T agg = cf_red_shfl_idx(wt, NW - 1);
        T wex = cf_red_shfl_up(wt, 1);
        bool wexok = lane > 0;
        if (tile == first) {
            if (lane == 0)
                cf_scan_publish<T>(p, tile, CF_SCAN_PREFIX, agg);
        } else {
            if (lane == 0)
                cf_scan_publish<T>(p, tile, CF_SCAN_AGGREGATE, agg);
            const T ex = cf_scan_look_back<Op, SLEEP, CF_SCAN_LOOKBACK_GROUPS>(p, tile, first, lane);
            if (lane == 0)
                cf_scan_publish<T>(p, tile, CF_SCAN_PREFIX, Op::apply(ex, agg));
            wex = wexok ? Op::apply(ex, wex) : ex;
            wexok = true;
        }
        __syncwarp();
        if (lane < (unsigned)NW) {
            s_ok[lane] = wexok;
            if (wexok)
                s_val[lane] = wex;
        }
    }
    __syncthreads();

    const bool wok = s_ok[warp];
    T wpre;
    if (wok)
        wpre = s_val[warp];
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (wok) {
#pragma unroll
            for (int e = 0; e < V; e++)
                x[r][e] = Op::apply(wpre, x[r][e]);
        }
        TOut y[V];
#pragma unroll
        for (int e = 0; e < V; e++)
            y[e] = cf_cast<TOut>(x[r][e]);
        const int idx = (int)warp * SEG + (r * 32 + (int)lane) * V;
        const int cnt = count - idx <= 0 ? 0 : count - idx >= V ? V : count - idx;
        cf_scan_store<TOut, V>(out + (cf_ka_u64)((long long)((O)idx * sout)), (long long)sout, y,
                               vec_out, cnt);
    }
    if constexpr (SR > 0) {
#pragma unroll
        for (int r = 0; r < SR; r++) {
            T xs[V];
            memcpy(xs, &s_ext[r * BLOCK + tid], sizeof xs);
            TOut y[V];
#pragma unroll
            for (int e = 0; e < V; e++)
                y[e] = cf_cast<TOut>(wok ? Op::apply(wpre, xs[e]) : xs[e]);
            const int idx = (int)warp * SEG + ((R + r) * 32 + (int)lane) * V;
            const int cnt = count - idx <= 0 ? 0 : count - idx >= V ? V : count - idx;
            cf_scan_store<TOut, V>(out + (cf_ka_u64)((long long)((O)idx * sout)), (long long)sout,
                                   y, vec_out, cnt);
        }
    }
}

/* Where tile `tile` of a scan reads and writes, and how (a tile of BLOCK x ITEMS elements). */
template <typename TIn, typename TOut, int BLOCK, int ITEMS, int KND, typename I>
struct cf_scan_where {
    typedef typename cf_red_off_t<I>::type O;
    long long first;
    cf_ka_u64 in, out;
    O sin, sout;
    int count;
    bool vec_in, vec_out;
    __device__ __forceinline__ cf_scan_where(const cf_red_params &p, long long tile)
    {
        constexpr int TILE = BLOCK * ITEMS;
        const long long tpr = (long long)p.tiles_per_row;
        const long long row = tile / tpr, tj = tile - row * tpr;
        O oin = 0, oout = 0, unused = 0;
        if (KND > 0)
            cf_red_offsets<(KND > 0 ? KND : 1), I, O>((I)row, p.kept_shape, p.kept_div, p.in_kept,
                                                      p.out_kept, p.in_kept, oin, oout, unused);
        const long long start = tj * (long long)TILE;
        const long long rest = (long long)p.n_red - start;
        first = tile - tj;
        count = rest < (long long)TILE ? (int)rest : TILE;
        sin = (O)p.in_red[0];
        sout = (O)p.out_red[0];
        in = p.in + (cf_ka_u64)(long long)(oin + (O)start * sin);
        out = p.out + (cf_ka_u64)(long long)(oout + (O)start * sout);
        vec_in = sin == (O)sizeof(TIn) && in % 16 == 0;
        vec_out = sout == (O)sizeof(TOut) && out % 16 == 0;
    }
};

/* Inclusive scan along rows of n_red elements, tiles_per_row tiles each: one tile per block, in
 * the order blocks draw them from an atomic counter (not blockIdx), so that every tile a block
 * waits for belongs to a block already running. The block that draws the launch's last tile
 * resets the counter, so the next launch on this stream needs no memset; tile states carry the
 * launch's epoch for the same reason. */
template <class Op, typename TIn, typename TOut, int BLOCK, int ITEMS, int V, int SLEEP, int KND,
          typename I>
__device__ __forceinline__ void cf_scan_tiles(const cf_red_params &p)
{
    typedef typename cf_red_off_t<I>::type O;
    static_assert(ITEMS % V == 0 && BLOCK % 32 == 0 && BLOCK <= 1024, "scan tile shape");
    constexpr int SR = CF_SCAN_SMEM_ROUNDS;
#if CF_SCAN_BLOCK_ORDER
    /* Tiles in block order, as CUB's scans take them: the hardware starts blocks in increasing
     * index order, so every tile a block waits for belongs to a block that has started; no
     * atomic draw (one L2 round trip with nothing in flight) before the tile's loads. */
    const long long tile = (long long)blockIdx.x;
#else
    __shared__ unsigned long long s_tile;
    if (threadIdx.x == 0) {
        const unsigned long long t = atomicAdd((unsigned long long *)p.tile_counter, 1ull);
        /* the draw of the last tile is the last draw of this launch */
        if (t == (unsigned long long)gridDim.x - 1)
            *(volatile unsigned long long *)p.tile_counter = 0;
        s_tile = t;
    }
    __syncthreads();
    const long long tile = (long long)s_tile;
#endif
    const cf_scan_where<TIn, TOut, BLOCK, ITEMS + SR * V, KND, I> w(p, tile);
    cf_scan_tile<Op, TIn, TOut, BLOCK, ITEMS, V, SLEEP, O, SR>(p, tile, w.first, w.in, w.out, w.sin,
                                                              w.sout, w.count, w.vec_in, w.vec_out);
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


/* ---- segments: reduceat ------------------------------------------------------------------------ */

/* cf_red_params as cf_red_segments reads it: n_out = outputs (n_kept * n_seg), n_red = the axis'
 * extent, tiles_per_row = n_seg (indices), epoch = n_kept, where = the indices' address; in_red[0],
 * out_red[0], where_red[0]: byte strides of the axis in the input and the output and of the
 * indices; red_div[1], red_div[2]: division by n_seg and by n_kept; the kept axes as for rows;
 * status: the check's verdict for device indices (0: indices checked on the host). */

/* The group's values combined in lane order; the result is in the group's lane 0. Every lane of
 * the warp calls (G <= 32 lanes per group, G a power of two). */
template <class Op, int G> __device__ __forceinline__ void cf_red_group(typename Op::T &v, bool &ok)
{
    const unsigned lane = threadIdx.x % G;
#pragma unroll
    for (unsigned d = 1; d < (unsigned)G; d <<= 1) {
        const typename Op::T o = cf_red_shfl_down(v, d);
        const bool ook = __shfl_down_sync(CF_RED_FULL, (int)ok, d) != 0;
        if (lane + d < (unsigned)G)
            cf_red_fold<Op>(v, ok, o, ook);
    }
}

/* Elements first, first + stride, ... below end of a run with byte stride sa, U in flight. */
template <class Op, typename TIn, int U, typename I, typename O>
__device__ __forceinline__ void cf_red_strided_loop(cf_ka_u64 in, O sa, I first, I end, I stride,
                                                    typename Op::T &v, bool &ok)
{
    typedef typename Op::T T;
    for (I base = first; base < end; base += (I)U * stride) {
        TIn x[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (base + (I)u * stride < end)
                x[u] = *(const TIn *)(in + (cf_ka_u64)(long long)((O)(base + (I)u * stride) * sa));
#pragma unroll
        for (int u = 0; u < U; u++)
            if (base + (I)u * stride < end)
                cf_red_fold<Op>(v, ok, cf_cast<T>(x[u]), true);
    }
}

template <class Op, typename TIn, typename TOut, typename TIdx, int BLOCK, int GROUP, int V, int U,
          int KND, bool COLS, typename I>
__device__ __forceinline__ void cf_red_segments(const cf_red_params &p)
{
    typedef typename Op::T T;
    typedef typename cf_red_off_t<I>::type O;
    const I n_q = (I)p.n_out, n_axis = (I)p.n_red, n_seg = (I)p.tiles_per_row;
    const I n_kept = (I)p.epoch;
    const O sa = (O)p.in_red[0], so = (O)p.out_red[0], si = (O)p.where_red[0];
    const I lane = (I)(threadIdx.x % GROUP);
    const I per_block = BLOCK / GROUP;
    /* the loop runs over the first output of each warp (or block), so that every lane of a warp
     * reaches the shuffles the same number of times */
    const I first = GROUP >= 32 ? (I)(threadIdx.x / GROUP)
                                : (I)((threadIdx.x / 32) * (32 / GROUP));
    const I mine = GROUP >= 32 ? 0 : (I)((threadIdx.x % 32) / GROUP);
    const I step = (I)gridDim.x * per_block;
    const bool split = GROUP == BLOCK && gridDim.y > 1; /* then gridDim.x == n_q */
    /* device indices: the check's verdict (the same for every thread: nothing is written, no
     * ticket taken, when an index lies outside) */
    if (p.status && *(volatile const unsigned long long *)p.status != 0)
        return;
    for (I base = (I)blockIdx.x * per_block + first; base < n_q; base += step) {
        const I q = base + mine;
        T v;
        bool ok = false;
        O oout = 0;
        if (q < n_q) {
            I k, s;
            if (COLS) {
                s = cf_divi<I>(q, p.red_div[2]);
                k = q - s * n_kept;
            } else {
                k = cf_divi<I>(q, p.red_div[1]);
                s = q - k * n_seg;
            }
            O oin = 0, unused = 0;
            if (KND > 0)
                cf_red_offsets<(KND > 0 ? KND : 1), I, O>(k, p.kept_shape, p.kept_div, p.in_kept,
                                                          p.out_kept, p.in_kept, oin, oout, unused);
            oout += (O)s * so;
            const I start = (I)*(const TIdx *)(p.where + (cf_ka_u64)(long long)((O)s * si));
            I end = s + 1 < n_seg
                        ? (I)*(const TIdx *)(p.where + (cf_ka_u64)(long long)((O)(s + 1) * si))
                        : n_axis;
            if (end <= start)
                end = start + 1; /* NumPy: an empty or reversed segment is its first element */
            I lo = start, hi = end;
            if (split) {
                const I part = (end - start + (I)gridDim.y - 1) / (I)gridDim.y;
                lo = start + (I)blockIdx.y * part;
                lo = lo < end ? lo : end;
                hi = lo + part < end ? lo + part : end;
            }
            const cf_ka_u64 in = p.in + (cf_ka_u64)(long long)oin;
            I rest = lo;
            if (!COLS && V > 1 && sa == (O)sizeof(TIn) && in % sizeof(TIn) == 0) {
                /* peel the elements before the first 16-byte boundary, then whole vectors */
                const TIn *src = (const TIn *)in;
                const unsigned long long a = (unsigned long long)(src + lo);
                I head = (I)(((16 - (a & 15)) & 15) / sizeof(TIn));
                if (head > hi - lo)
                    head = hi - lo;
                for (I j = lane; j < head; j += (I)GROUP) /* head may exceed a small group */
                    cf_red_fold<Op>(v, ok, cf_cast<T>(src[lo + j]), true);
                const I nvec = (hi - lo - head) / V;
                cf_red_vec_loop<Op, TIn, V, U, I>((const cf_vec<TIn, V> *)(src + lo + head), nvec,
                                                  lane, (I)GROUP, v, ok);
                rest = lo + head + nvec * V;
            }
            cf_red_strided_loop<Op, TIn, U, I, O>(in, sa, rest + lane, hi, (I)GROUP, v, ok);
        }
        if (GROUP == BLOCK && BLOCK > 32)
            cf_red_block<Op, BLOCK>(v, ok);
        else if (GROUP >= 32)
            cf_red_warp<Op>(v, ok);
        else if (GROUP > 1)
            cf_red_group<Op, (GROUP < 32 ? GROUP : 1)>(v, ok);
        if (!split) {
            if (lane == 0 && q < n_q)
                *(TOut *)(p.out + (cf_ka_u64)(long long)oout) = cf_cast<TOut>(v);
            continue;
        }
        if (threadIdx.x == 0) {
            const I idx = (I)blockIdx.y * n_q + q;
            if (ok)
                ((T *)p.partials)[idx] = v;
            ((unsigned char *)p.partial_ok)[idx] = ok;
        }
        if (cf_red_split_arrive(p, blockIdx.x) && threadIdx.x == 0) {
            cf_red_split_gather<Op, I>(p, q, v, ok);
            *(TOut *)(p.out + (cf_ka_u64)(long long)oout) = cf_cast<TOut>(v);
        }
    }
}

/* The first position s whose index lies outside [0, n_red): the threads fold ~s into the running
 * verdict at p.partials by atomicMax (the smallest s wins; 0 is "none"); the last block to finish
 * (ticket at p.tickets) moves it to p.status, where the reduction behind reads it, and to the
 * mapped host word p.aggregate (when not 0), and leaves the running verdict and the ticket at 0. */
template <typename TIdx, int BLOCK>
__device__ __forceinline__ void cf_red_segments_check(const cf_red_params &p)
{
    const long long n_seg = p.tiles_per_row, n = p.n_red;
    const long long si = p.where_red[0];
    unsigned long long *acc = (unsigned long long *)p.partials;
    for (long long s = (long long)blockIdx.x * BLOCK + threadIdx.x; s < n_seg;
         s += (long long)gridDim.x * BLOCK) {
        const long long x = (long long)*(const TIdx *)(p.where + (cf_ka_u64)(s * si));
        if (x < 0 || x >= n)
            atomicMax(acc, ~(unsigned long long)s);
    }
    __shared__ bool s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        s_last = atomicAdd((unsigned *)p.tickets, 1u) == gridDim.x - 1;
        if (s_last) {
            __threadfence();
            const unsigned long long v = atomicExch(acc, 0ull);
            *(volatile unsigned long long *)p.status = v;
            if (p.aggregate) /* the host reads it after the kernel's event: no system fence */
                *(volatile unsigned long long *)p.aggregate = v;
            *(volatile unsigned *)p.tickets = 0;
        }
    }
}

#endif /* __CUDACC__ */
#endif
