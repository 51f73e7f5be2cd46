/* cufunc/ew_flat.cuh: the flat element-wise kernel (see elementwise.cuh for the operand list).
 * The source defines CF_EW_BLOCK, CF_EW_NOPS, CF_EW_OPS, CF_EW_V (vector width), CF_EW_U
 * (vectors per thread per round), CF_EW_BODY_VEC and, when CF_EW_V > 1, CF_EW_BODY_MEM.
 * Flat 32-bit index, V-wide aligned vectors, U of them per thread per round, loads first (U
 * independent vectors in flight per operand; outputs too under a mask, so that masked-off
 * elements are stored back unchanged); then the last n % V elements, one per thread, through byte
 * offsets. A pointer made straight from a kernel parameter is known to be global memory
 * (LDG/STG rather than generic LD/ST). */
#define CF_EW_FLAT_PTR(sfx, pfx, i, K, R, S, L, Z)                                                          \
    CF_EW_IF_C_##K(CF_EW_CONST_##R cf_vec<S, CF_EW_V> *__restrict__ p##i =                      \
                       (CF_EW_CONST_##R cf_vec<S, CF_EW_V> *)p.op[i].ptr;)
#define CF_EW_FLAT_REG(sfx, pfx, i, K, R, S, L, Z) CF_EW_IF_C_##K(cf_vec<S, CF_EW_V> CF_EW_REG_##R(i)[CF_EW_U];)
#define CF_EW_FLAT_LOAD(sfx, pfx, i, K, R, S, L, Z) CF_EW_IF_C_##K(CF_EW_IF_LOADED_##R(CF_EW_REG_##R(i)[u] = p##i[k];))
#define CF_EW_FLAT_STORE(sfx, pfx, i, K, R, S, L, Z) CF_EW_IF_OUT_##R(p##i[k] = out##i[u];)
#define CF_EW_FLAT_OFF(sfx, pfx, i, K, R, S, L, Z) off[i] = CF_EW_IF_C_##K((long long)k * Z) CF_EW_FLAT_ZERO_##K;
#define CF_EW_FLAT_ZERO_S 0
#define CF_EW_FLAT_ZERO_U 0
#define CF_EW_FLAT_ZERO_C
#define CF_EW_FLAT_ZERO_X 0
#define CF_EW_FLAT_ZERO_B 0
#define CF_EW_FLAT_ZERO_T 0

struct cf_params { cf_ka_i64 n; cf_ew_flat_operand op[CF_EW_NOPS]; };

extern "C" __global__ void __launch_bounds__(CF_EW_BLOCK)
cf_ew(const __grid_constant__ cf_params p)
{
    cf_grid_dependency_wait();
    CF_EW_OPS(CF_EW_UNIFORM, , )
    const unsigned n = (unsigned)p.n;
    const unsigned nvec = n / CF_EW_V;
    const unsigned step = gridDim.x * blockDim.x;
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    CF_EW_OPS(CF_EW_FLAT_PTR, , )
    for (unsigned base = t; base < nvec; base += CF_EW_U * step) {
        CF_EW_OPS(CF_EW_FLAT_REG, , )
#pragma unroll
        for (int u = 0; u < CF_EW_U; u++) {
            const unsigned k = base + u * step;
            if (k < nvec) {
                CF_EW_OPS(CF_EW_FLAT_LOAD, , )
            }
        }
#pragma unroll
        for (int u = 0; u < CF_EW_U; u++) {
            if (base + u * step < nvec) {
#pragma unroll
                for (int e = 0; e < CF_EW_V; e++) {
                    CF_EW_BODY_VEC
                }
            }
        }
#pragma unroll
        for (int u = 0; u < CF_EW_U; u++) {
            const unsigned k = base + u * step;
            if (k < nvec) {
                CF_EW_OPS(CF_EW_FLAT_STORE, , )
            }
        }
    }
#if CF_EW_V > 1
    const unsigned k = nvec * CF_EW_V + t;
    if (k < n) {
        long long off[CF_EW_NOPS];
        CF_EW_OPS(CF_EW_FLAT_OFF, , )
        CF_EW_BODY_MEM
    }
#endif
}
