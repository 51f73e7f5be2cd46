/* cufunc/gu_kernel.cuh: the gufunc kernel, instantiated by the macros of a key's source (gufunc.c's
 * generate; see gufunc.cuh for the parameter layout and the copy helpers).
 *
 * The source defines, then includes this header once:
 *   CF_GU_FN       the loop's __device__ function
 *   CF_GU_BLOCK    threads per block (__launch_bounds__; the copies' thread count)
 *   CF_GU_NOPS     operands (inputs, then outputs)
 *   CF_GU_ND       coalesced loop axes for the index-to-offsets loop (>= 1)
 *   CF_GU_I, CF_GU_O   index and offset types: (unsigned, int) or (unsigned long long, long long)
 *   CF_GU_TILE     iterations per block tile of a staged kernel; 0: direct access, no staging
 *   CF_GU_SMEM     (staged only) static shared memory in bytes
 *   CF_GU_OPS(F)   the operand list, one F(i, K, R, C, L, S, X) per operand: index; kind (S a scalar
 *                  parameter by value, R a scalar parameter seen as a one-element array, V a
 *                  core-less element by value, A a core view read in place, G a core view staged
 *                  through shared memory, a row per iteration, U a core staged once per block; see
 *                  cf_gufunc_plan); role (I input, O output); the core's ndim; the loop's C type;
 *                  the C type in memory (S, R, V); X 1 when V converts from that type, else 0
 *   CF_GU_STAGE_<i>  per staged operand (G, U): ROW, PITCH, SOFF, W, LD, BASE, F, (DIMS): bytes of
 *                  a core, bytes between rows in shared memory, the region's offset, the copies'
 *                  width, LD 1 when the rows are read in first (inputs; outputs given by the
 *                  caller), 2 when an output given by the caller is read in by each thread into
 *                  an array of its own (CF_GU_REG_OUT), the offset of the per-iteration base offsets (G, not flat), F 1 when
 *                  the tile is one contiguous block copied flat (cf_gu_copy_flat; no base
 *                  offsets), the core's extents
 * A staged kernel whose tile is larger than its block (flat tiles of small cores) runs iterations
 * r = tid, tid + CF_GU_BLOCK, ... of the tile on each thread.
 *
 * Macros, not templates, as in the element-wise headers (elementwise.cuh): the preprocessed kernel
 * is the text gufunc.c used to print, so the compiled code is the same
 * (tools/kernel_compare.py cubins) and NVRTC pays no extra template instantiations. */
#include "cufunc/gufunc.cuh"

#define CF_GU_KEEP(...) __VA_ARGS__
#define CF_GU_DROP(...)
#define CF_GU_IF_1 CF_GU_KEEP
#define CF_GU_IF_0 CF_GU_DROP
#define CF_GU_IF_2 CF_GU_DROP        /* LD 2: not read in by the copy, but per thread (ARG) */
#define CF_GU_IF_REG_0 CF_GU_DROP
#define CF_GU_IF_REG_1 CF_GU_DROP
#define CF_GU_IF_REG_2 CF_GU_KEEP
#define CF_GU_IF_NREG_0 CF_GU_KEEP
#define CF_GU_IF_NREG_1 CF_GU_KEEP
#define CF_GU_IF_NREG_2 CF_GU_DROP
#define CF_GU_IF_FLAT_1 CF_GU_KEEP  /* a staged operand's F: a flat tile */
#define CF_GU_IF_FLAT_0 CF_GU_DROP
#define CF_GU_IF_NFLAT_1 CF_GU_DROP
#define CF_GU_IF_NFLAT_0 CF_GU_KEEP
/* kind selectors: CF_GU_IF_G_##K(code), CF_GU_IF_U_##K(code); role: CF_GU_IF_OUT_##R(code) */
#define CF_GU_IF_G_S CF_GU_DROP
#define CF_GU_IF_G_R CF_GU_DROP
#define CF_GU_IF_G_V CF_GU_DROP
#define CF_GU_IF_G_A CF_GU_DROP
#define CF_GU_IF_G_G CF_GU_KEEP
#define CF_GU_IF_G_U CF_GU_DROP
#define CF_GU_IF_U_S CF_GU_DROP
#define CF_GU_IF_U_R CF_GU_DROP
#define CF_GU_IF_U_V CF_GU_DROP
#define CF_GU_IF_U_A CF_GU_DROP
#define CF_GU_IF_U_G CF_GU_DROP
#define CF_GU_IF_U_U CF_GU_KEEP
#define CF_GU_IF_OUT_I CF_GU_DROP
#define CF_GU_IF_OUT_O CF_GU_KEEP
/* m(args...) after the args' expansion: unpacks CF_GU_STAGE_<i> and (DIMS) into parameters */
#define CF_GU_CALL(m, ...) m(__VA_ARGS__)
#define CF_GU_CALL2(m, ...) m(__VA_ARGS__) /* inside a CF_GU_CALL: a macro does not expand in itself */
#define CF_GU_UNPAREN(...) __VA_ARGS__
#define CF_GU_U_(x) x##u
#define CF_GU_U(x) CF_GU_U_(x)
/* the alignment of a staged row in shared memory (4, 8 or 16), from its pitch */
#define CF_GU_SW(pitch) ((pitch) % 16 == 0 ? 16 : (pitch) % 8 == 0 ? 8 : 4)

/* Scalar parameters, converted once. */
#define CF_GU_SCALAR(i, K, R, C, L, S, X) CF_GU_SCALAR_##K(i, L, S)
#define CF_GU_SCALAR_S(i, L, S) const L v##i = cf_cast<L>(*(const S *)p.op[i].scalar);
#define CF_GU_SCALAR_R(i, L, S) L v##i = cf_cast<L>(*(const S *)p.op[i].scalar);
#define CF_GU_SCALAR_V(i, L, S)
#define CF_GU_SCALAR_A(i, L, S)
#define CF_GU_SCALAR_G(i, L, S)
#define CF_GU_SCALAR_U(i, L, S)

/* Staged operands: the per-iteration base offsets (G), the cores shared by the block (U), the rows
 * of a tile read in before the body (G with LD) and written back after it (G outputs). */
#define CF_GU_BASE_PTR(i, K, R, C, L, S, X)                                                         \
    CF_GU_IF_G_##K(CF_GU_CALL(CF_GU_BASE_PTR_, i, CF_GU_STAGE_##i))
#define CF_GU_BASE_PTR_(i, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                                  \
    CF_GU_IF_NFLAT_##F(O *const cf_base##i = (O *)(cf_smem + BASE);)
#define CF_GU_ANY_U(i, K, R, C, L, S, X) CF_GU_IF_U_##K(|| 1)
#define CF_GU_COPY_U(i, K, R, C, L, S, X) CF_GU_IF_U_##K(CF_GU_CALL(CF_GU_COPY_U_, i, CF_GU_STAGE_##i))
#define CF_GU_COPY_U_(i, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                                       \
    cf_gu_copy<ROW, PITCH, W, 16, true, O>(cf_smem + SOFF, p.op[i].ptr, cf_zero, 1u, tid,           \
                                           CF_GU_U(CF_GU_BLOCK));
#define CF_GU_SET_BASE(i, K, R, C, L, S, X) CF_GU_IF_G_##K(CF_GU_CALL(CF_GU_SET_BASE_, i, CF_GU_STAGE_##i))
#define CF_GU_SET_BASE_(i, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                                  \
    CF_GU_IF_NFLAT_##F(cf_base##i[r] = off[i];)
#define CF_GU_ANY_BASE(i, K, R, C, L, S, X) CF_GU_IF_G_##K(CF_GU_CALL(CF_GU_ANY_BASE_, CF_GU_STAGE_##i))
#define CF_GU_ANY_BASE_(ROW, PITCH, SOFF, W, LD, BASE, F, DIMS) CF_GU_IF_NFLAT_##F(|| 1)
#define CF_GU_ANY_ASYNC(i, K, R, C, L, S, X) CF_GU_IF_G_##K(CF_GU_CALL(CF_GU_ANY_ASYNC_, CF_GU_STAGE_##i))
#define CF_GU_ANY_ASYNC_(ROW, PITCH, SOFF, W, LD, BASE, F, DIMS) CF_GU_IF_##LD(CF_GU_IF_FLAT_##F(|| 1))
#define CF_GU_COPY_IN(i, K, R, C, L, S, X) CF_GU_IF_G_##K(CF_GU_CALL(CF_GU_COPY_IN_, i, CF_GU_STAGE_##i))
#define CF_GU_COPY_IN_(i, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                                   \
    CF_GU_IF_##LD(CF_GU_IF_FLAT_##F(                                             \
        cf_gu_copy_flat<ROW, PITCH, W, true>(cf_smem + SOFF, p.op[i].ptr + (unsigned long long)tile * \
                                             ROW##ull, cnt, tid, CF_GU_U(CF_GU_BLOCK));)            \
        CF_GU_IF_NFLAT_##F(cf_gu_copy<ROW, PITCH, W, CF_GU_SW(PITCH), true, O>(    \
        cf_smem + SOFF, p.op[i].ptr, cf_base##i, cnt, tid, CF_GU_U(CF_GU_BLOCK));))
#define CF_GU_ANY_OUT(i, K, R, C, L, S, X) CF_GU_IF_G_##K(CF_GU_IF_OUT_##R(|| 1))
#define CF_GU_COPY_OUT(i, K, R, C, L, S, X)                                                         \
    CF_GU_IF_G_##K(CF_GU_IF_OUT_##R(CF_GU_CALL(CF_GU_COPY_OUT_, i, CF_GU_STAGE_##i)))
#define CF_GU_COPY_OUT_(i, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                                  \
    CF_GU_IF_FLAT_##F(                                                           \
        cf_gu_copy_flat<ROW, PITCH, W, false>(cf_smem + SOFF, p.op[i].ptr + (unsigned long long)tile * \
                                              ROW##ull, cnt, tid, CF_GU_U(CF_GU_BLOCK));)           \
    CF_GU_IF_NFLAT_##F(cf_gu_copy<ROW, PITCH, W, CF_GU_SW(PITCH), false, O>(       \
        cf_smem + SOFF, p.op[i].ptr, cf_base##i, cnt, tid, CF_GU_U(CF_GU_BLOCK));)

/* The body's arguments: a<i> (or v<i>, a scalar by value). A core view read in place takes its
 * extents and strides from the parameters; a staged one has constant extents and compact strides
 * (CF_GU_FIX<c>: the innermost axis first, each stride the product of the inner extents). */
#define CF_GU_ARG(i, K, R, C, L, S, X) CF_GU_ARG_##K(i, C, L, S, X)
#define CF_GU_ARG_S(i, C, L, S, X)
#define CF_GU_ARG_V(i, C, L, S, X) const L a##i = CF_GU_CVT_##X(L, *(const S *)(p.op[i].ptr + off[i]));
#define CF_GU_ARG_R(i, C, L, S, X)                                                                  \
    cf_array_ref<L, C> a##i;                                                                        \
    a##i.data = (char *)&v##i;                                                                      \
    a##i.shape[0] = 1;                                                                              \
    a##i.strides[0] = sizeof(L);
#define CF_GU_ARG_A(i, C, L, S, X)                                                                  \
    cf_array_ref<L, C> a##i;                                                                        \
    a##i.data = (char *)(p.op[i].ptr + off[i]);                                                     \
    CF_GU_CORE##C(a##i, i)
#define CF_GU_ARG_G(i, C, L, S, X) CF_GU_CALL(CF_GU_ARG_G_, i, C, L, CF_GU_STAGE_##i)
#define CF_GU_ARG_G_(i, C, L, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                              \
    cf_array_ref<L, C> a##i;                                                                        \
    CF_GU_IF_NREG_##LD(a##i.data = (char *)(cf_smem + SOFF + r * PITCH##u);)                        \
    CF_GU_IF_REG_##LD(L cf_reg##i[ROW / sizeof(L)];                                                 \
        cf_gu_reg_load<L, ROW / sizeof(L)>(cf_reg##i, p.op[i].ptr + (unsigned long long)(tile + r) *  \
                                                      ROW##ull);                                    \
        a##i.data = (char *)cf_reg##i;)                                                             \
    CF_GU_CALL2(CF_GU_FIX##C, a##i, (long long)sizeof(L), CF_GU_UNPAREN DIMS)
/* LD 2 (an out= core of a flat output, at most 64 bytes): the body works on a per-thread array
 * read in from the output first; when the body writes every element before reading any, that
 * array lives in registers and the compiler drops the reads (nothing the body can observe is
 * lost), else they stay: NumPy's out= semantics either way. After the body the array goes to the
 * shared row, then out with the tile's coalesced copy. */
#define CF_GU_REG_OUT(i, K, R, C, L, S, X) CF_GU_IF_G_##K(CF_GU_CALL(CF_GU_REG_OUT_, i, L, CF_GU_STAGE_##i))
#define CF_GU_REG_OUT_(i, L, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                                \
    CF_GU_IF_REG_##LD(cf_gu_reg_store<L, ROW / sizeof(L)>(cf_smem + SOFF + r * PITCH##u, cf_reg##i);)
#define CF_GU_ARG_U(i, C, L, S, X) CF_GU_CALL(CF_GU_ARG_U_, i, C, L, CF_GU_STAGE_##i)
#define CF_GU_ARG_U_(i, C, L, ROW, PITCH, SOFF, W, LD, BASE, F, DIMS)                                  \
    cf_array_ref<L, C> a##i;                                                                        \
    a##i.data = (char *)(cf_smem + SOFF);                                                           \
    CF_GU_CALL2(CF_GU_FIX##C, a##i, (long long)sizeof(L), CF_GU_UNPAREN DIMS)
#define CF_GU_CVT_0(L, e) e
#define CF_GU_CVT_1(L, e) cf_cast<L>(e)
#define CF_GU_DYN(a, i, d) a.shape[d] = p.op[i].core_shape[d]; a.strides[d] = p.op[i].core_strides[d];
#define CF_GU_CORE1(a, i) CF_GU_DYN(a, i, 0)
#define CF_GU_CORE2(a, i) CF_GU_CORE1(a, i) CF_GU_DYN(a, i, 1)
#define CF_GU_CORE3(a, i) CF_GU_CORE2(a, i) CF_GU_DYN(a, i, 2)
#define CF_GU_CORE4(a, i) CF_GU_CORE3(a, i) CF_GU_DYN(a, i, 3)
#define CF_GU_CORE5(a, i) CF_GU_CORE4(a, i) CF_GU_DYN(a, i, 4)
#define CF_GU_CORE6(a, i) CF_GU_CORE5(a, i) CF_GU_DYN(a, i, 5)
#define CF_GU_FIXD(a, d, n, z) a.shape[d] = n##LL; a.strides[d] = z;
#define CF_GU_FIX1(a, z, d0) CF_GU_FIXD(a, 0, d0, z)
#define CF_GU_FIX2(a, z, d0, d1) CF_GU_FIXD(a, 1, d1, z) CF_GU_FIX1(a, (z) * d1##LL, d0)
#define CF_GU_FIX3(a, z, d0, d1, d2) CF_GU_FIXD(a, 2, d2, z) CF_GU_FIX2(a, (z) * d2##LL, d0, d1)
#define CF_GU_FIX4(a, z, d0, d1, d2, d3)                                                           \
    CF_GU_FIXD(a, 3, d3, z) CF_GU_FIX3(a, (z) * d3##LL, d0, d1, d2)
#define CF_GU_FIX5(a, z, d0, d1, d2, d3, d4)                                                       \
    CF_GU_FIXD(a, 4, d4, z) CF_GU_FIX4(a, (z) * d4##LL, d0, d1, d2, d3)
#define CF_GU_FIX6(a, z, d0, d1, d2, d3, d4, d5)                                                   \
    CF_GU_FIXD(a, 5, d5, z) CF_GU_FIX5(a, (z) * d5##LL, d0, d1, d2, d3, d4)
/* the call's argument list: ", a0, v1, a2" without its first comma */
#define CF_GU_NAME(i, K, R, C, L, S, X) , CF_GU_NAME_##K(i)
#define CF_GU_NAME_S(i) v##i
#define CF_GU_NAME_R(i) a##i
#define CF_GU_NAME_V(i) a##i
#define CF_GU_NAME_A(i) a##i
#define CF_GU_NAME_G(i) a##i
#define CF_GU_NAME_U(i) a##i
#define CF_GU_REST(...) CF_GU_REST_(__VA_ARGS__)
#define CF_GU_REST_(first, ...) __VA_ARGS__

struct cf_params { cf_gu_header h; cf_gu_operand op[CF_GU_NOPS]; };

extern "C" __global__ void __launch_bounds__(CF_GU_BLOCK)
cf_gu(const __grid_constant__ cf_params p)
{
    typedef CF_GU_I I;
    typedef CF_GU_O O;
    CF_GU_OPS(CF_GU_SCALAR)
    const I n = (I)p.h.n;
#if CF_GU_TILE
    /* Staged: a block takes a tile of CF_GU_TILE iterations; its threads copy the tile's rows of
     * the staged operands into shared memory together (coalesced), thread k runs iteration k on
     * them (and k + CF_GU_BLOCK, ... when the tile is larger than the block), and the output rows
     * go back together. */
    __shared__ __align__(16) unsigned char cf_smem[CF_GU_SMEM];
    const unsigned tid = threadIdx.x;
    CF_GU_OPS(CF_GU_BASE_PTR)
#if 0 CF_GU_OPS(CF_GU_ANY_U)
    const O cf_zero[1] = {0};
    CF_GU_OPS(CF_GU_COPY_U)
    __syncthreads();
#endif
    for (I tile = (I)blockIdx.x * CF_GU_U(CF_GU_TILE); tile < n; tile += (I)gridDim.x * CF_GU_U(CF_GU_TILE)) {
        const unsigned cnt = (unsigned)(n - tile < (I)CF_GU_TILE ? n - tile : (I)CF_GU_TILE);
#if CF_GU_TILE <= CF_GU_BLOCK
        /* a thread per iteration: its offsets serve the base table and the body */
        const unsigned r = tid;
        const bool active = tid < cnt;
        O off[CF_GU_NOPS];
        cf_gu_offsets<CF_GU_ND, CF_GU_NOPS, I, O>(active ? tile + tid : tile, p.h, p.op, off);
        if (tid < CF_GU_U(CF_GU_TILE)) {
            CF_GU_OPS(CF_GU_SET_BASE)
        }
#if 0 CF_GU_OPS(CF_GU_ANY_BASE)
        __syncthreads();
#endif
#else
        /* several iterations per thread (flat tiles: no base table) */
#endif
        CF_GU_OPS(CF_GU_COPY_IN)
#if 0 CF_GU_OPS(CF_GU_ANY_ASYNC)
        cf_gu_async_wait(); /* this thread's cp.async copies; the barrier then makes all visible */
#endif
        __syncthreads();
#if CF_GU_TILE <= CF_GU_BLOCK
        if (active) {
#else
        for (unsigned r = tid; r < cnt; r += CF_GU_U(CF_GU_BLOCK)) {
            O off[CF_GU_NOPS];
            cf_gu_offsets<CF_GU_ND, CF_GU_NOPS, I, O>(tile + r, p.h, p.op, off);
#endif
            CF_GU_OPS(CF_GU_ARG)
            CF_GU_FN(CF_GU_REST(CF_GU_OPS(CF_GU_NAME)));
            CF_GU_OPS(CF_GU_REG_OUT)
        }
#if 0 CF_GU_OPS(CF_GU_ANY_OUT)
        __syncthreads();
        CF_GU_OPS(CF_GU_COPY_OUT)
#endif
        __syncthreads();
    }
#else
    const I step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        O off[CF_GU_NOPS];
        cf_gu_offsets<CF_GU_ND, CF_GU_NOPS, I, O>(i, p.h, p.op, off);
        {
            CF_GU_OPS(CF_GU_ARG)
            CF_GU_FN(CF_GU_REST(CF_GU_OPS(CF_GU_NAME)));
        }
    }
#endif
}
