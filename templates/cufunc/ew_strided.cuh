/* cufunc/ew_strided.cuh: the strided element-wise kernel (see elementwise.cuh for the operand
 * list): each element's byte offsets from its linear index over CF_EW_ND coalesced axes. The
 * source defines CF_EW_BLOCK, CF_EW_NOPS, CF_EW_OPS, CF_EW_ND, CF_EW_I (index type), CF_EW_O
 * (offset type) and CF_EW_BODY_MEM. */
struct cf_params { cf_ew_header h; cf_ew_operand op[CF_EW_NOPS]; };

extern "C" __global__ void __launch_bounds__(CF_EW_BLOCK)
cf_ew(const __grid_constant__ cf_params p)
{
    cf_grid_dependency_wait();
    CF_EW_OPS(CF_EW_UNIFORM, , )
    const CF_EW_I n = (CF_EW_I)p.h.n;
    const CF_EW_I step = (CF_EW_I)gridDim.x * blockDim.x;
    for (CF_EW_I i = (CF_EW_I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        CF_EW_O off[CF_EW_NOPS];
        cf_offsets<CF_EW_ND, CF_EW_NOPS, CF_EW_I, CF_EW_O>(i, p.h, p.op, off);
        CF_EW_BODY_MEM
    }
}
