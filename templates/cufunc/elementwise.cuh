/* cufunc/elementwise.cuh: what the element-wise kernels (ew_flat.cuh, ew_strided.cuh,
 * ew_rowvec.cuh, ew_tile.cuh) share: cf_offsets (device.cuh's index-to-offsets loop, which the
 * gufunc and reduce kernels share too) and the operand-list macros. */
#ifndef CUFUNC_ELEMENTWISE_CUH
#define CUFUNC_ELEMENTWISE_CUH

#include "cufunc/device.cuh"

/* Byte offsets of linear element i for NOPS operands over ND coalesced axes (row-major, innermost
 * last; ND == 0 gives zeros). The row-vector kernels pass a vector index over the loop shape with
 * its innermost extent divided by VEC; the tile kernels pass a tile's index over the outer axes.
 * I is the unsigned index type and O the signed offset type: (unsigned, int) when the plan allows
 * 32-bit indexing, so the per-axis divisions are 32-bit multiply-highs and the offset sums
 * 32-bit adds; (unsigned long long, long long) otherwise. */
struct cf_ew_strides {
    const cf_ew_operand *op;
    __device__ __forceinline__ cf_ka_i64 operator()(int j, int k) const { return op[j].strides[k]; }
};
template <int ND, int NOPS, typename I, typename O>
__device__ __forceinline__ void cf_offsets(I i, const cf_ew_header &h, const cf_ew_operand *op,
                                           O *off)
{
    cf_index_offsets<ND, NOPS, I, O>(i, h.shape, h.div, cf_ew_strides{op}, off);
}


/* ---- the kernels' operand lists ------------------------------------------------------------
 * The kernels themselves are the headers ew_flat.cuh, ew_strided.cuh, ew_rowvec.cuh and
 * ew_tile.cuh: ufunc.c's source for a key defines the key as macros and includes the one header
 * of its shape. Macros, not templates: the preprocessed kernel is the text the generator used to
 * print (the same SASS, tools/kernel_compare.py), and NVRTC pays no template instantiations for
 * it (templates made a first compile 15-25% slower). The key's operands are the list
 * CF_EW_OPS(F, sfx, pfx), one F(sfx, pfx, i, K, R, S, L, Z) per operand: index, kind (S scalar,
 * U uniform, C contiguous, X strided, B broadcast row, T transposed; see ufunc.c), role (L
 * loaded: an input or the mask; O an output; W an output loaded first, because a masked-off
 * element keeps its value), stored type, loop type, item size; sfx and pfx are passed through
 * (the suffix and prefix of the variables a tile step names). A kernel applies a step macro to
 * every operand with CF_EW_OPS(step, sfx, pfx); a step keeps the operands it concerns with the
 * selectors below (CF_EW_IF_<kind>_##K(code), CF_EW_IF_<role>_##R(code)). The body of one
 * element is CF_EW_BODY_VEC (registers in<i>[u].v[e], b<i>[u]), CF_EW_BODY_MEM (memory at
 * off[i]) or CF_EW_BODY_TILE, written by ufunc.c. */
#define CF_EW_KEEP(...) __VA_ARGS__
#define CF_EW_DROP(...)
#define CF_EW_IF_S_S CF_EW_KEEP
#define CF_EW_IF_S_U CF_EW_DROP
#define CF_EW_IF_S_C CF_EW_DROP
#define CF_EW_IF_S_X CF_EW_DROP
#define CF_EW_IF_S_B CF_EW_DROP
#define CF_EW_IF_S_T CF_EW_DROP
#define CF_EW_IF_U_S CF_EW_DROP
#define CF_EW_IF_U_U CF_EW_KEEP
#define CF_EW_IF_U_C CF_EW_DROP
#define CF_EW_IF_U_X CF_EW_DROP
#define CF_EW_IF_U_B CF_EW_DROP
#define CF_EW_IF_U_T CF_EW_DROP
#define CF_EW_IF_C_S CF_EW_DROP
#define CF_EW_IF_C_U CF_EW_DROP
#define CF_EW_IF_C_C CF_EW_KEEP
#define CF_EW_IF_C_X CF_EW_DROP
#define CF_EW_IF_C_B CF_EW_DROP
#define CF_EW_IF_C_T CF_EW_DROP
#define CF_EW_IF_X_S CF_EW_DROP
#define CF_EW_IF_X_U CF_EW_DROP
#define CF_EW_IF_X_C CF_EW_DROP
#define CF_EW_IF_X_X CF_EW_KEEP
#define CF_EW_IF_X_B CF_EW_DROP
#define CF_EW_IF_X_T CF_EW_DROP
#define CF_EW_IF_B_S CF_EW_DROP
#define CF_EW_IF_B_U CF_EW_DROP
#define CF_EW_IF_B_C CF_EW_DROP
#define CF_EW_IF_B_X CF_EW_DROP
#define CF_EW_IF_B_B CF_EW_KEEP
#define CF_EW_IF_B_T CF_EW_DROP
#define CF_EW_IF_T_S CF_EW_DROP
#define CF_EW_IF_T_U CF_EW_DROP
#define CF_EW_IF_T_C CF_EW_DROP
#define CF_EW_IF_T_X CF_EW_DROP
#define CF_EW_IF_T_B CF_EW_DROP
#define CF_EW_IF_T_T CF_EW_KEEP
/* roles: loaded (inputs, the mask, outputs under a mask), an input or the mask, an output */
#define CF_EW_IF_LOADED_L CF_EW_KEEP
#define CF_EW_IF_LOADED_O CF_EW_DROP
#define CF_EW_IF_LOADED_W CF_EW_KEEP
#define CF_EW_IF_IN_L CF_EW_KEEP
#define CF_EW_IF_IN_O CF_EW_DROP
#define CF_EW_IF_IN_W CF_EW_DROP
#define CF_EW_IF_OUT_L CF_EW_DROP
#define CF_EW_IF_OUT_O CF_EW_KEEP
#define CF_EW_IF_OUT_W CF_EW_KEEP
/* an operand's register array: in<i> (inputs, the mask), out<i> (outputs); pointer constness */
#define CF_EW_REG_L(i) in##i
#define CF_EW_REG_O(i) out##i
#define CF_EW_REG_W(i) out##i
#define CF_EW_CONST_L const
#define CF_EW_CONST_O
#define CF_EW_CONST_W

/* Scalars and uniform inputs (and a uniform mask), converted once before the loop. */
#define CF_EW_UNIFORM(sfx, pfx, i, K, R, S, L, Z)                                                          \
    CF_EW_IF_IN_##R(CF_EW_IF_S_##K(const L v##i = cf_cast<L>(*(const S *)p.op[i].scalar);)      \
                    CF_EW_IF_U_##K(const L v##i = cf_cast<L>(*(const S *)p.op[i].ptr);))

#endif
