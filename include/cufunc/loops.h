/* cufunc/loops.h: loop resolution, the one rule by which every engine (ufunc, gufunc, reduce,
 * ufunc.at) and the Python package (cufunc._loops, through cufunc._core) pick a loop for a call.
 *
 * An engine's loops are an array of structs, each holding its nin + nout types: `types` points at
 * the first loop's types and `stride` is the size of a loop struct in bytes (for a plain table of
 * dtypes, (nin + nout) * sizeof(cf_dtype)). */
#ifndef CUFUNC_LOOPS_H
#define CUFUNC_LOOPS_H

#include <stddef.h>

#include "cufunc/dtype.h"
#include "cufunc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The rules:
 * CF_LOOPS_NUMPY: NumPy's. The first loop whose inputs `in` reach: an exact match in the first
 *   pass, then (unless `lazy`) by safe casting; weak[i] marks a NEP 50 Python scalar, which
 *   reaches any loop type of its kind or a higher one (cf_weak_reaches).
 * CF_LOOPS_NUMBA_UFUNC (numba-cuda's UFuncMechanism): weak[i] marks a scalar (Python or NumPy, by
 *   its own dtype). First pass: every input exact; second: array inputs exact, scalars match any
 *   type, and the match must be the only one (CF_LOOPS_AMBIGUOUS).
 * CF_LOOPS_NUMBA_GUFUNC (numba-cuda's GeneralizedUFunc): every input by its dtype; first pass
 *   exact, second the first loop whose type for each input casts safely *to* the input's dtype
 *   (Numba's np.can_cast(loop type, given type): the inputs are then converted to the loop's).
 * CF_LOOPS_SCALAR_CAST: Numba's habit for NumPy scalars, the fallback of a gufunc call under
 *   NumPy's rule when nothing else matched: one pass, the first loop whose type for each strong
 *   scalar (weak[i] == CF_LOOPS_SCALAR) casts safely *to* the scalar's type, weak inputs
 *   (CF_LOOPS_WEAK) skipped, other inputs reaching the loop by safe casting; the caller converts
 *   the scalars. None (CF_LOOPS_NONE) when no input is a strong scalar. */
typedef enum {
    CF_LOOPS_NUMPY = 0,
    CF_LOOPS_NUMBA_UFUNC = 1,
    CF_LOOPS_NUMBA_GUFUNC = 2,
    CF_LOOPS_SCALAR_CAST = 3
} cf_loops_mode;

/* The values of weak[i]: a typed operand, a weak (Python) scalar, a strong (NumPy) scalar (the
 * last only for CF_LOOPS_SCALAR_CAST; any nonzero value is "weak" for the other rules). */
enum { CF_LOOPS_STRONG = 0, CF_LOOPS_WEAK = 1, CF_LOOPS_SCALAR = 2 };

/* cf_loops_find's answers besides a loop index. */
enum { CF_LOOPS_NONE = -1, CF_LOOPS_AMBIGUOUS = -2 };

typedef struct cf_loops_query {
    cf_loops_mode mode;
    int nin, nout;
    const cf_dtype *in;         /* the nin input dtypes */
    const unsigned char *weak;  /* per input, CF_LOOPS_*; NULL: all typed */
    /* The loops are compiled on demand: only the first pass (exact matches; weak scalars by
     * kind). CF_LOOPS_NONE then means "compile a loop for these types" rather than a cast into
     * an earlier loop. */
    int lazy;
    /* dtype= (NumPy's signature=(None, ..., dtype)): -1, or the dtype every output of the loop
     * must have; the inputs then reach the loop under `casting` (weak ones by kind), in one
     * pass, whatever `mode` and `lazy` say. */
    int out_dtype;
    cf_casting casting;
} cf_loops_query;

/* The index of the loop `q` resolves to among `nloops`, or CF_LOOPS_NONE, CF_LOOPS_AMBIGUOUS. */
CF_API int cf_loops_find(const cf_dtype *types, size_t stride, int nloops,
                         const cf_loops_query *q);

/* CF_ERR_TYPE with NumPy's message ("ufunc 'f' not supported for the input types (...)") and the
 * list of loops, worded for q->mode. `what` is "ufunc" or "gufunc". Returns the status. */
CF_API cf_status cf_loops_no_match(const cf_dtype *types, size_t stride, int nloops,
                                   const cf_loops_query *q, const char *what, const char *name);

/* NEP 50: which of the n inputs flagged weak (Python int, float, complex, classified as int64,
 * float64, complex128) stay weak. A weak input stays weak only beside a typed input of its kind
 * or a higher one (cf_dtype_nep50_kind), or when it is complex beside floats (it takes their
 * precision); alone, or beside typed inputs of a lower kind, it becomes a typed input of its
 * default type (np.hypot(3.0, 4.0) is float64, an int8 array + 2.0 is float64). weak[] is
 * updated in place (0 or 1). */
CF_API void cf_loops_nep50(int n, const cf_dtype *in, unsigned char *weak);

/* How a binary ufunc's reduce and accumulate choose their accumulator (without dtype=): a
 * property of the ufunc (cufunc.UFunc's `accumulator`), not of its name.
 * CF_ACC_LOOP: the loop the ufunc's call takes for (T, T), whose one type is the accumulator.
 * CF_ACC_WIDEN: NumPy's add and multiply: bool and integers narrower than 64 bits accumulate in
 *   int64 (unsigned: uint64), cf_loops_reduce_dtype.
 * CF_ACC_LOGICAL: NumPy's logical_and/or/xor: when the (T, T) loop gives another type (bool), the
 *   reduction runs in that type's own loop (the elements cast to it as they are loaded). */
typedef enum { CF_ACC_LOOP = 0, CF_ACC_WIDEN = 1, CF_ACC_LOGICAL = 2 } cf_accumulator;

/* The element type a reduction of T-typed elements resolves its (acc, acc) loop for. */
CF_API cf_dtype cf_loops_reduce_dtype(cf_accumulator rule, cf_dtype t);

#ifdef __cplusplus
}
#endif

#endif
