/* cufunc/at.h: ufunc.at, the unbuffered in-place update a[idx[i]] = f(a[idx[i]], b[i]) (or
 * f(a[idx[i]]) for a one-input function) in which repeated indices accumulate, as np.add.at.
 *
 * A cf_at is one loop's device function (the same CUDA C source, function name, options and
 * module globals a ufunc loop has) with the kernels compiled for it so far. The kernel template is
 * templates/cufunc/at.cuh; how each update is applied (cf_at_mode) is the caller's choice:
 * CF_AT_CAS is correct for any function on 1-, 2-, 4- and 8-byte types (an atomicCAS loop around
 * the user's function; 1- and 2-byte types on their 32-bit word), the hardware atomics are faster
 * where the function is known to be add, min or max, and CF_AT_SERIAL (one thread, in order) is
 * the fallback for 16-byte types. cf_at_pick_mode gives the usual choice.
 *
 * GPU: cf_at_create and cf_at_kernel_source need none; cf_at_launch needs one. */
#ifndef CUFUNC_AT_H
#define CUFUNC_AT_H

#include <stdint.h>

#include "cufunc/compile.h"
#include "cufunc/dtype.h"
#include "cufunc/runtime.h"
#include "cufunc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cf_at_mode {
    CF_AT_CAS = 0,      /* atomicCAS loop around the function (4/8-byte types) */
    CF_AT_CAS_WORD = 1, /* the same on the enclosing 32-bit word (1/2-byte types) */
    CF_AT_ADD = 2,      /* atomicAdd: int32, int64, uint32, uint64, float32, float64 */
    CF_AT_MIN = 3,      /* atomicMin: int32, int64, uint32, uint64 */
    CF_AT_MAX = 4,      /* atomicMax: the same */
    CF_AT_SERIAL = 5    /* one thread applies every update in order: any type */
} cf_at_mode;

/* What the function is known to compute, for cf_at_pick_mode. */
typedef enum cf_at_op { CF_AT_OP_ANY = 0, CF_AT_OP_ADD, CF_AT_OP_MIN, CF_AT_OP_MAX } cf_at_op;

typedef struct cf_at cf_at;

/* One update set. The target is the strided block a[k, r] at a + k * a_index + r * a_inner for k
 * in [0, extent) and r in [0, inner); index[i] (i < nindex, int32 or int64, contiguous; negative
 * counts from the end) picks k for the i-th update of `inner` elements; b's value for (i, r) is at
 * b + i * b_index + r * b_inner in dtype b_type (strides 0 broadcast), cast to the loop's second
 * input type. types: the loop's inputs and output (in0, [in1,] out); a_type is converted to in0 and
 * the result back to a_type inside the kernel. */
typedef struct cf_at_call {
    int nin;                  /* 1 or 2 */
    cf_dtype types[3];        /* in0, in1 (nin 2), out */
    uint64_t a;
    cf_dtype a_type;
    int64_t extent, inner, a_index, a_inner;
    uint64_t index;
    cf_dtype index_type;      /* CF_INT32 or CF_INT64 */
    int64_t nindex;
    uint64_t b;               /* nin 2 */
    cf_dtype b_type;
    int64_t b_index, b_inner;
    cf_at_mode mode;
} cf_at_call;

CF_API cf_status cf_at_create(const char *source, const char *fn_name, const char *const *options,
                              int noptions, const cf_module_global *globals, int nglobals,
                              cf_at **out);
CF_API void cf_at_destroy(cf_at *at);
/* The mode to use for `op` on the target dtype a_type when the loop's types are all a_type: the
 * hardware atomic where there is one, else CAS (CAS_WORD for 1-2 bytes, SERIAL for 16). */
CF_API cf_at_mode cf_at_pick_mode(cf_at_op op, int same_types, cf_dtype a_type);
/* The CUDA C of the kernel for this call (no GPU): free with cf_free_buffer. */
CF_API cf_status cf_at_kernel_source(const cf_at *at, const cf_at_call *c, char **out);
/* Launch on `s` (device `device`) and wait for it: CF_ERR_RANGE ("index %lld is out of bounds for
 * axis 0 with size %lld") when an index was out of range (the updates with valid indices are
 * applied all the same). */
CF_API cf_status cf_at_launch(cf_at *at, const cf_at_call *c, cf_stream *s, int device);

#ifdef __cplusplus
}
#endif
#endif
