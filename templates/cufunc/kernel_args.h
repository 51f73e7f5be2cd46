/* cufunc/kernel_args.h: the kernel-parameter layouts of element-wise launches, shared by the host
 * (src/ufunc.c, C11) and the generated kernels (CUDA C++ under NVRTC), so the two cannot drift.
 * Every field is 8 bytes or a multiple, so C and C++ lay the structs out identically with no
 * padding; both sides check the sizes with static asserts.
 *
 * Every launch passes a single by-value parameter holding, for each operand in order (inputs, then
 * outputs, then the `where=` mask if any), one operand record after a header:
 *   - the flat (contiguous) kernel: `cf_ka_i64 n` (elements) then one `cf_ew_flat_operand` per
 *     operand. Kept small because the launch cost grows with the parameter bytes and this is the
 *     kernel of small calls.
 *   - the strided, row-vector and tile kernels: one `cf_ew_header` then one `cf_ew_operand` per
 *     operand. What the header's fields hold per kernel shape is written beside them. */
#ifndef CUFUNC_KERNEL_ARGS_H
#define CUFUNC_KERNEL_ARGS_H

#ifdef __CUDACC_RTC__
typedef long long cf_ka_i64;
typedef unsigned long long cf_ka_u64;
#else
#include <stdint.h>
typedef int64_t cf_ka_i64;
typedef uint64_t cf_ka_u64;
#endif

/* A parameter layout's size, checked by both compilers (static_assert in C++ under NVRTC,
 * _Static_assert in C11): every layout header states its struct sizes this way. */
#ifdef __cplusplus
#define CF_KA_LAYOUT(type, bytes) static_assert(sizeof(type) == (bytes), #type " layout")
#else
#define CF_KA_LAYOUT(type, bytes) _Static_assert(sizeof(type) == (bytes), #type " layout")
#endif

/* Coalesced axes a specialised element-wise kernel handles (see include/cufunc/plan.h). */
#define CF_EW_MAX_NDIM 10

/* Division by an invariant extent with a multiply-high and a shift (Granlund & Montgomery):
 * n / d == (umulhi(n, magic) + n) >> shift, for n, d < 2^31 (32-bit) or 2^63 (64-bit). */
typedef struct cf_ew_fastdiv {
    cf_ka_u64 divisor;
    cf_ka_u64 magic;
    cf_ka_u64 shift;
} cf_ew_fastdiv;

typedef struct cf_ew_header {
    /* strided: elements in the loop; row-vector: VEC-element vectors in the loop (the loop size
     * over VEC); tile: tiles in the loop (tiles per 2-D slice times the outer axes' product) */
    cf_ka_i64 n;
    cf_ka_i64 ndim;                       /* coalesced axes, innermost last */
    /* the loop extents; row-vector: the innermost one divided by VEC */
    cf_ka_i64 shape[CF_EW_MAX_NDIM];
    /* one per axis: divides by shape[k]; tile kernels: div[ndim - 2] and div[ndim - 1] divide by
     * the number of tiles along those two axes instead */
    cf_ew_fastdiv div[CF_EW_MAX_NDIM];
} cf_ew_header;

typedef struct cf_ew_operand {
    cf_ka_u64 ptr;                        /* array: address of element (0, ..., 0) */
    /* array: byte strides over the coalesced axes (0 for scalars); row-vector kernels: the
     * innermost one is VEC * itemsize for vector-loaded operands */
    cf_ka_i64 strides[CF_EW_MAX_NDIM];
    cf_ka_u64 scalar[2];                  /* scalar operand: its value's bytes (up to complex128) */
} cf_ew_operand;

/* An operand of the flat kernel: an array's first element or a scalar's value. */
typedef struct cf_ew_flat_operand {
    cf_ka_u64 ptr;
    cf_ka_u64 scalar[2];
} cf_ew_flat_operand;

#define CF_EW_HEADER_BYTES (8 * (2 + CF_EW_MAX_NDIM + 3 * CF_EW_MAX_NDIM))
#define CF_EW_OPERAND_BYTES (8 * (1 + CF_EW_MAX_NDIM + 2))
#define CF_EW_FLAT_HEADER_BYTES 8
#define CF_EW_FLAT_OPERAND_BYTES 24

CF_KA_LAYOUT(cf_ew_header, CF_EW_HEADER_BYTES);
CF_KA_LAYOUT(cf_ew_operand, CF_EW_OPERAND_BYTES);
CF_KA_LAYOUT(cf_ew_flat_operand, CF_EW_FLAT_OPERAND_BYTES);

#endif
