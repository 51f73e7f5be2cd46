/* cufunc/ew_rowvec.cuh: the row-vector element-wise kernel (see elementwise.cuh for the operand
 * list). The header's loop shape has its innermost extent divided by CF_EW_V, and vector-loaded
 * operands' innermost stride is V * itemsize, so cf_offsets of a vector index gives the byte
 * offset of the vector's first element for every operand (broadcast rows 'B': of their one value,
 * loaded once per vector). The source defines CF_EW_BLOCK, CF_EW_NOPS, CF_EW_OPS, CF_EW_ND,
 * CF_EW_I, CF_EW_O, CF_EW_V, CF_EW_U and CF_EW_BODY_VEC. */
#define CF_EW_ROW_REG(sfx, pfx, i, K, R, S, L, Z)                                                           \
    CF_EW_IF_C_##K(cf_vec<S, CF_EW_V> CF_EW_REG_##R(i)[CF_EW_U];) CF_EW_IF_B_##K(S b##i[CF_EW_U];)
#define CF_EW_ROW_LOAD(sfx, pfx, i, K, R, S, L, Z)                                                          \
    CF_EW_IF_C_##K(CF_EW_IF_LOADED_##R(                                                           \
        CF_EW_REG_##R(i)[u] = *(const cf_vec<S, CF_EW_V> *)(p.op[i].ptr + off[u][i]);))           \
    CF_EW_IF_B_##K(b##i[u] = *(const S *)(p.op[i].ptr + off[u][i]);)
#define CF_EW_ROW_STORE(sfx, pfx, i, K, R, S, L, Z)                                                         \
    CF_EW_IF_OUT_##R(*(cf_vec<S, CF_EW_V> *)(p.op[i].ptr + off[u][i]) = out##i[u];)

struct cf_params { cf_ew_header h; cf_ew_operand op[CF_EW_NOPS]; };

extern "C" __global__ void __launch_bounds__(CF_EW_BLOCK)
cf_ew(const __grid_constant__ cf_params p)
{
    cf_grid_dependency_wait();
    CF_EW_OPS(CF_EW_UNIFORM, , )
    const CF_EW_I n = (CF_EW_I)p.h.n;
    const CF_EW_I step = (CF_EW_I)gridDim.x * blockDim.x;
    for (CF_EW_I base = (CF_EW_I)blockIdx.x * blockDim.x + threadIdx.x; base < n;
         base += (CF_EW_I)CF_EW_U * step) {
        CF_EW_O off[CF_EW_U][CF_EW_NOPS];
        CF_EW_OPS(CF_EW_ROW_REG, , )
#pragma unroll
        for (int u = 0; u < CF_EW_U; u++) {
            const CF_EW_I i = base + (CF_EW_I)u * step;
            if (i < n) {
                cf_offsets<CF_EW_ND, CF_EW_NOPS, CF_EW_I, CF_EW_O>(i, p.h, p.op, off[u]);
                CF_EW_OPS(CF_EW_ROW_LOAD, , )
            }
        }
#pragma unroll
        for (int u = 0; u < CF_EW_U; u++) {
            if (base + (CF_EW_I)u * step < n) {
#pragma unroll
                for (int e = 0; e < CF_EW_V; e++) {
                    CF_EW_BODY_VEC
                }
            }
        }
#pragma unroll
        for (int u = 0; u < CF_EW_U; u++) {
            if (base + (CF_EW_I)u * step < n) {
                CF_EW_OPS(CF_EW_ROW_STORE, , )
            }
        }
    }
}
