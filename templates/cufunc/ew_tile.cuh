/* cufunc/ew_tile.cuh: the tile element-wise kernels (see elementwise.cuh for the operand list).
 * The source defines CF_EW_BLOCK, CF_EW_NOPS, CF_EW_OPS, CF_EW_ND, CF_EW_I, CF_EW_O, CF_EW_TR
 * (threads along a tile's rows, 32 / TR rows each), CF_EW_TILE_PRELOAD, CF_EW_TILE_PIPELINE and
 * CF_EW_BODY_TILE.
 *
 * Block (32, TR); 32x32 tiles of the last two axes (extents R, C); tile t of the header's n covers
 * rows r0.. and columns c0.. at outer index q2 (the axes before them). Staged operands ('T') are
 * read with consecutive threads on consecutive rows (their fast axis) into sm<i>[col][row] (padded
 * rows of 33, so the body's column-wise reads hit distinct banks); the body then runs with
 * consecutive threads on consecutive columns, the outputs' fast axis; the other array operands
 * ('X') are read or written in place. Every operand's address is its per-tile, per-thread offset
 * (goff: staged, hoff: in place) plus j times a per-tile step.
 * PIPELINE: a grid of resident blocks loops over tiles; each tile's loads (staged and in-place
 * inputs) go to registers, and a block issues its next tile's loads right after writing the
 * current one's staged values to shared memory, before its barrier, body and stores. Else one
 * tile per block round: PRELOAD loads the in-place inputs into registers before the barrier too
 * (one memory latency per tile, not two), and full tiles run without bounds checks. */
#define CF_EW_TILE_SMEM(sfx, pfx, i, K, R, S, L, Z)                                               \
    CF_EW_IF_T_##K(__shared__ __align__(16) unsigned char sm##i##_bytes[32 * 33 * sizeof(S)];     \
                   S *const sm##i = (S *)sm##i##_bytes;)
/* a tile's per-operand offsets and steps (variables suffixed sfx) */
#define CF_EW_TILE_GEO_OP(sfx, pfx, i, K, R, S, L, Z)                                             \
    CF_EW_IF_T_##K(const CF_EW_O goff##i##sfx = boff##sfx[i] +                                     \
                       (CF_EW_O)(r0##sfx + tx) * (CF_EW_O)p.op[i].strides[CF_EW_ND - 2] +         \
                       (CF_EW_O)(c0##sfx + ty) * (CF_EW_O)p.op[i].strides[CF_EW_ND - 1];          \
                   const CF_EW_O gstep##i##sfx = CF_EW_TR * (CF_EW_O)p.op[i].strides[CF_EW_ND - 1];) \
    CF_EW_IF_X_##K(const CF_EW_O hoff##i##sfx = boff##sfx[i] +                                     \
                       (CF_EW_O)(r0##sfx + ty) * (CF_EW_O)p.op[i].strides[CF_EW_ND - 2] +         \
                       (CF_EW_O)(c0##sfx + tx) * (CF_EW_O)p.op[i].strides[CF_EW_ND - 1];          \
                   const CF_EW_O hstep##i##sfx = CF_EW_TR * (CF_EW_O)p.op[i].strides[CF_EW_ND - 2];)
/* the geometry of tile tv into variables suffixed sfx */
#define CF_EW_TILE_GEO(tv, sfx)                                                                   \
    const CF_EW_I q##sfx = cf_divi<CF_EW_I>(tv, p.h.div[CF_EW_ND - 1]);                           \
    const CF_EW_I c0##sfx = (tv - q##sfx * (CF_EW_I)p.h.div[CF_EW_ND - 1].divisor) * 32;          \
    const CF_EW_I q2##sfx = cf_divi<CF_EW_I>(q##sfx, p.h.div[CF_EW_ND - 2]);                      \
    const CF_EW_I r0##sfx = (q##sfx - q2##sfx * (CF_EW_I)p.h.div[CF_EW_ND - 2].divisor) * 32;     \
    const CF_EW_I rn##sfx = R - r0##sfx, cn##sfx = C - c0##sfx;                                   \
    CF_EW_O boff##sfx[CF_EW_NOPS];                                                                \
    cf_offsets<CF_EW_ND - 2, CF_EW_NOPS, CF_EW_I, CF_EW_O>(q2##sfx, p.h, p.op, boff##sfx);        \
    CF_EW_OPS(CF_EW_TILE_GEO_OP, sfx, )
/* pipelined: row j's loads of a tile (geometry sfx) into registers pfx##st<i>, pfx##pre<i> */
#define CF_EW_TILE_FETCH_T(sfx, pfx, i, K, R, S, L, Z)                                            \
    CF_EW_IF_T_##K(if (tx < rn##sfx && ty + j * CF_EW_TR < cn##sfx)                               \
                       pfx##st##i[j] = *(const S *)(p.op[i].ptr + (goff##i##sfx + (CF_EW_O)j * gstep##i##sfx));)
#define CF_EW_TILE_FETCH_X(sfx, pfx, i, K, R, S, L, Z)                                            \
    CF_EW_IF_X_##K(CF_EW_IF_IN_##R(if (ty + j * CF_EW_TR < rn##sfx && tx < cn##sfx)               \
                       pfx##pre##i[j] = *(const S *)(p.op[i].ptr + (hoff##i##sfx + (CF_EW_O)j * hstep##i##sfx));))
#define CF_EW_TILE_REGS(sfx, pfx, i, K, R, S, L, Z)                                               \
    CF_EW_IF_T_##K(S st##i[32 / CF_EW_TR], nst##i[32 / CF_EW_TR];)                                \
    CF_EW_IF_X_##K(CF_EW_IF_IN_##R(S pre##i[32 / CF_EW_TR], npre##i[32 / CF_EW_TR];))
#define CF_EW_TILE_PRE(sfx, pfx, i, K, R, S, L, Z)                                                \
    CF_EW_IF_X_##K(CF_EW_IF_IN_##R(S pre##i[32 / CF_EW_TR];))
#define CF_EW_TILE_STAGE(sfx, pfx, i, K, R, S, L, Z)                                              \
    CF_EW_IF_T_##K(sm##i[(ty + j * CF_EW_TR) * 33 + tx] = st##i[j];)
#define CF_EW_TILE_NEXT(sfx, pfx, i, K, R, S, L, Z)                                               \
    CF_EW_IF_T_##K(st##i[j] = nst##i[j];) CF_EW_IF_X_##K(CF_EW_IF_IN_##R(pre##i[j] = npre##i[j];))
#define CF_EW_TILE_OFF(sfx, pfx, i, K, R, S, L, Z)                                                \
    CF_EW_IF_X_##K(off[i] = hoff##i + (CF_EW_O)j * hstep##i;)
/* one tile per block: staging straight into shared memory, preloads */
#define CF_EW_TILE_LOAD_T(sfx, pfx, i, K, R, S, L, Z)                                             \
    CF_EW_IF_T_##K(sm##i[(ty + j * CF_EW_TR) * 33 + tx] =                                         \
                       *(const S *)(p.op[i].ptr + (goff##i + (CF_EW_O)j * gstep##i));)
#define CF_EW_TILE_LOAD_X(sfx, pfx, i, K, R, S, L, Z)                                             \
    CF_EW_IF_X_##K(CF_EW_IF_IN_##R(pre##i[j] = *(const S *)(p.op[i].ptr + (hoff##i + (CF_EW_O)j * hstep##i));))

struct cf_params { cf_ew_header h; cf_ew_operand op[CF_EW_NOPS]; };

extern "C" __global__ void __launch_bounds__(CF_EW_BLOCK)
cf_ew(const __grid_constant__ cf_params p)
{
    cf_grid_dependency_wait();
    CF_EW_OPS(CF_EW_UNIFORM, , )
    CF_EW_OPS(CF_EW_TILE_SMEM, , )
    const CF_EW_I R = (CF_EW_I)p.h.shape[CF_EW_ND - 2], C = (CF_EW_I)p.h.shape[CF_EW_ND - 1];
    const CF_EW_I ntiles = (CF_EW_I)p.h.n;
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
#if CF_EW_TILE_PIPELINE
    CF_EW_OPS(CF_EW_TILE_REGS, , )
    CF_EW_I t = blockIdx.x;
    if (t < ntiles) {
        CF_EW_TILE_GEO(t, f)
#pragma unroll
        for (int j = 0; j < 32 / CF_EW_TR; j++) {
            CF_EW_OPS(CF_EW_TILE_FETCH_T, f, )
            CF_EW_OPS(CF_EW_TILE_FETCH_X, f, )
        }
    }
    for (; t < ntiles; t += gridDim.x) {
        CF_EW_TILE_GEO(t, )
#pragma unroll
        for (int j = 0; j < 32 / CF_EW_TR; j++)
            if (tx < rn && ty + j * CF_EW_TR < cn) {
                CF_EW_OPS(CF_EW_TILE_STAGE, , )
            }
        const CF_EW_I tn = t + gridDim.x;
        if (tn < ntiles) {
            CF_EW_TILE_GEO(tn, n)
#pragma unroll
            for (int j = 0; j < 32 / CF_EW_TR; j++) {
                CF_EW_OPS(CF_EW_TILE_FETCH_T, n, n)
                CF_EW_OPS(CF_EW_TILE_FETCH_X, n, n)
            }
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < 32 / CF_EW_TR; j++) {
            const unsigned ly = ty + j * CF_EW_TR;
            if (ly < rn && tx < cn) {
                CF_EW_O off[CF_EW_NOPS];
                CF_EW_OPS(CF_EW_TILE_OFF, , )
                CF_EW_BODY_TILE
            }
        }
        __syncthreads(); /* the next staging must not overwrite what this tile reads */
#pragma unroll
        for (int j = 0; j < 32 / CF_EW_TR; j++) {
            CF_EW_OPS(CF_EW_TILE_NEXT, , )
        }
    }
#else
#if CF_EW_TILE_PRELOAD
    CF_EW_OPS(CF_EW_TILE_PRE, , )
#endif
    for (CF_EW_I t = blockIdx.x; t < ntiles; t += gridDim.x) {
        CF_EW_TILE_GEO(t, )
        /* the condition is the same for the whole block, so both branches' barriers are reached */
        if (rn >= 32 && cn >= 32) {
#pragma unroll
            for (int j = 0; j < 32 / CF_EW_TR; j++) {
                CF_EW_OPS(CF_EW_TILE_LOAD_T, , )
            }
#if CF_EW_TILE_PRELOAD
#pragma unroll
            for (int j = 0; j < 32 / CF_EW_TR; j++) {
                CF_EW_OPS(CF_EW_TILE_LOAD_X, , )
            }
#endif
            __syncthreads();
#pragma unroll
            for (int j = 0; j < 32 / CF_EW_TR; j++) {
                const unsigned ly = ty + j * CF_EW_TR;
                CF_EW_O off[CF_EW_NOPS];
                CF_EW_OPS(CF_EW_TILE_OFF, , )
                CF_EW_BODY_TILE
            }
        } else {
#pragma unroll
            for (int j = 0; j < 32 / CF_EW_TR; j++) {
                if (tx < rn && ty + j * CF_EW_TR < cn) {
                    CF_EW_OPS(CF_EW_TILE_LOAD_T, , )
                }
            }
#if CF_EW_TILE_PRELOAD
#pragma unroll
            for (int j = 0; j < 32 / CF_EW_TR; j++) {
                if (ty + j * CF_EW_TR < rn && tx < cn) {
                    CF_EW_OPS(CF_EW_TILE_LOAD_X, , )
                }
            }
#endif
            __syncthreads();
#pragma unroll
            for (int j = 0; j < 32 / CF_EW_TR; j++) {
                const unsigned ly = ty + j * CF_EW_TR;
                if (ly < rn && tx < cn) {
                    CF_EW_O off[CF_EW_NOPS];
                    CF_EW_OPS(CF_EW_TILE_OFF, , )
                    CF_EW_BODY_TILE
                }
            }
        }
        /* the next tile's staging must not overwrite what this one still reads */
        __syncthreads();
    }
#endif
}
