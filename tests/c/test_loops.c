/* test_loops.c: the loop resolver (include/cufunc/loops.h, src/loopfn.c), every rule and query on
 * plain tables (no GPU): NumPy's two passes and NEP 50's weak scalars, lazy loops (exact only),
 * dtype= with a casting rule, Numba's ufunc rule (and its ambiguity), Numba's gufunc rule, the
 * scalar-cast fallback, the no-match message, cf_loops_nep50, the reduce accumulators, and the
 * engines' resolvers agreeing with the table's answer. The Python side asks the same functions
 * (tests/python/test_loops_resolver.py). */
#include <string.h>

#include "check.h"
#include "loopfn.h"
#include "cufunc/ufunc.h"
#include "cufunc/gufunc.h"

#define B CF_BOOL
#define I8 CF_INT8
#define I32 CF_INT32
#define I64 CF_INT64
#define U8 CF_UINT8
#define U64 CF_UINT64
#define F32 CF_FLOAT32
#define F64 CF_FLOAT64
#define C64 CF_COMPLEX64
#define C128 CF_COMPLEX128

/* binary loops, (in, in) -> out */
static const cf_dtype LOOPS[][3] = {
    {I32, I32, I32}, {I64, I64, I64}, {F32, F32, F32}, {F64, F64, F64}, {C64, C64, C64},
};
#define NLOOPS ((int)(sizeof LOOPS / sizeof LOOPS[0]))

static int find(cf_loops_mode mode, cf_dtype a, cf_dtype b, unsigned char wa, unsigned char wb,
                int lazy)
{
    cf_dtype in[2] = {a, b};
    unsigned char weak[2] = {wa, wb};
    cf_loops_query q = {mode, 2, 1, in, weak, lazy, -1, CF_CAST_SAFE};
    return cf_loops_find(&LOOPS[0][0], sizeof LOOPS[0], NLOOPS, &q);
}

static void test_numpy_rule(void)
{
    CHECK(find(CF_LOOPS_NUMPY, I32, I32, 0, 0, 0) == 0);  /* exact */
    CHECK(find(CF_LOOPS_NUMPY, I8, I8, 0, 0, 0) == 0);    /* int8 reaches int32 safely first */
    CHECK(find(CF_LOOPS_NUMPY, I32, F32, 0, 0, 0) == 3);  /* int32 + float32: float64 */
    CHECK(find(CF_LOOPS_NUMPY, U64, I64, 0, 0, 0) == 3);  /* uint64 + int64: float64 */
    CHECK(find(CF_LOOPS_NUMPY, C128, F32, 0, 0, 0) == -1); /* no complex128 loop */
    /* a weak Python float beside a float32 array takes the float32 loop (NEP 50) */
    CHECK(find(CF_LOOPS_NUMPY, F32, F64, 0, 1, 0) == 2);
    /* a weak Python int beside an int8 array: the first loop of int kind int8 reaches */
    CHECK(find(CF_LOOPS_NUMPY, I8, I64, 0, 1, 0) == 0);
    /* a weak complex beside float32: the first complex loop float32 reaches */
    CHECK(find(CF_LOOPS_NUMPY, F32, C128, 0, 1, 0) == 4);
    /* a weak scalar never reaches bool */
    const cf_dtype bools[1][3] = {{B, B, B}};
    cf_dtype in[2] = {B, I64};
    unsigned char weak[2] = {0, 1};
    cf_loops_query q = {CF_LOOPS_NUMPY, 2, 1, in, weak, 0, -1, CF_CAST_SAFE};
    CHECK(cf_loops_find(&bools[0][0], sizeof bools[0], 1, &q) == -1);
    CHECK(cf_loops_find(&bools[0][0], sizeof bools[0], 0, &q) == CF_LOOPS_NONE);
}

static void test_lazy_loops_take_exact_matches_only(void)
{
    CHECK(find(CF_LOOPS_NUMPY, I32, I32, 0, 0, 1) == 0);
    CHECK(find(CF_LOOPS_NUMPY, I8, I8, 0, 0, 1) == CF_LOOPS_NONE); /* compile one for int8 */
    CHECK(find(CF_LOOPS_NUMPY, F32, F64, 0, 1, 1) == 2);          /* weak by kind still */
    CHECK(find(CF_LOOPS_NUMPY, I32, F32, 0, 0, 1) == CF_LOOPS_NONE);
}

static void test_dtype_with_casting(void)
{
    cf_dtype in[2] = {I8, I8};
    unsigned char weak[2] = {0, 0};
    cf_loops_query q = {CF_LOOPS_NUMPY, 2, 1, in, weak, 0, F32, CF_CAST_SAFE};
    CHECK(cf_loops_find(&LOOPS[0][0], sizeof LOOPS[0], NLOOPS, &q) == 2);
    q.out_dtype = I32;
    in[0] = in[1] = I64; /* int64 -> int32 is not safe, but is same_kind */
    CHECK(cf_loops_find(&LOOPS[0][0], sizeof LOOPS[0], NLOOPS, &q) == CF_LOOPS_NONE);
    q.casting = CF_CAST_SAME_KIND;
    CHECK(cf_loops_find(&LOOPS[0][0], sizeof LOOPS[0], NLOOPS, &q) == 0);
    q.lazy = 1; /* dtype= is one pass whatever lazy says */
    CHECK(cf_loops_find(&LOOPS[0][0], sizeof LOOPS[0], NLOOPS, &q) == 0);
}

static void test_numba_ufunc_rule(void)
{
    CHECK(find(CF_LOOPS_NUMBA_UFUNC, I32, I32, 0, 0, 0) == 0);
    CHECK(find(CF_LOOPS_NUMBA_UFUNC, I8, I8, 0, 0, 0) == CF_LOOPS_NONE); /* arrays exactly */
    /* an array of float32 and a scalar: the only loop with float32 first */
    CHECK(find(CF_LOOPS_NUMBA_UFUNC, F32, I64, 0, 1, 0) == 2);
    /* two scalars of types no loop has exactly: every loop matches, ambiguous */
    CHECK(find(CF_LOOPS_NUMBA_UFUNC, I8, I8, 1, 1, 0) == CF_LOOPS_AMBIGUOUS);
    /* an exact match wins in the first pass, scalars or not */
    CHECK(find(CF_LOOPS_NUMBA_UFUNC, F64, F64, 1, 1, 0) == 3);
}

static void test_numba_gufunc_rule(void)
{
    CHECK(find(CF_LOOPS_NUMBA_GUFUNC, F64, F64, 0, 0, 0) == 3);
    /* the first loop whose types cast safely *to* the inputs': int32 -> int64 */
    CHECK(find(CF_LOOPS_NUMBA_GUFUNC, I64, I64, 0, 0, 1) == 1); /* lazy: exact only */
    CHECK(find(CF_LOOPS_NUMBA_GUFUNC, F64, I64, 0, 0, 0) == 0); /* int32 reaches both */
    CHECK(find(CF_LOOPS_NUMBA_GUFUNC, I8, I8, 0, 0, 0) == CF_LOOPS_NONE);
}

static void test_scalar_cast_fallback(void)
{
    /* a float32 array and a strong float64 NumPy scalar: the float32 loop (its type casts
     * safely to the scalar's; the array reaches it) */
    CHECK(find(CF_LOOPS_SCALAR_CAST, F32, F64, 0, CF_LOOPS_SCALAR, 0) == 2);
    /* an int32 array and an int64 scalar: the int32 loop */
    CHECK(find(CF_LOOPS_SCALAR_CAST, I32, I64, 0, CF_LOOPS_SCALAR, 0) == 0);
    /* weak inputs are skipped; no strong scalar at all: none */
    CHECK(find(CF_LOOPS_SCALAR_CAST, F32, F64, 0, CF_LOOPS_WEAK, 0) == CF_LOOPS_NONE);
    CHECK(find(CF_LOOPS_SCALAR_CAST, I64, I64, CF_LOOPS_SCALAR, CF_LOOPS_WEAK, 0) == 0);
    /* the array input must still reach the loop by safe casting */
    CHECK(find(CF_LOOPS_SCALAR_CAST, C128, I64, 0, CF_LOOPS_SCALAR, 0) == CF_LOOPS_NONE);
}

static void test_no_match_message(void)
{
    cf_dtype in[2] = {C128, F64};
    unsigned char weak[2] = {0, 1};
    cf_loops_query q = {CF_LOOPS_NUMPY, 2, 1, in, weak, 0, -1, CF_CAST_SAFE};
    CHECK_STATUS(cf_loops_no_match(&LOOPS[0][0], sizeof LOOPS[0], 2, &q, "ufunc", "f"),
                 CF_ERR_TYPE);
    CHECK(strcmp(cf_last_error(),
                 "ufunc 'f' not supported for the input types (complex128, Python float64), and "
                 "the inputs could not be safely coerced to any supported types according to the "
                 "casting rule 'safe'; its loops are: (int32, int32) -> (int32) (int64, int64) -> "
                 "(int64)") == 0);
    q.mode = CF_LOOPS_NUMBA_UFUNC;
    cf_loops_no_match(NULL, sizeof LOOPS[0], 0, &q, "gufunc", "g");
    CHECK(strstr(cf_last_error(), "(complex128, scalar float64): under Numba's rules") != NULL);
    CHECK(strstr(cf_last_error(), "its loops are: none") != NULL);
    cf_clear_error();
}

static void test_nep50(void)
{
    cf_dtype in[3] = {F32, F64, I64};
    unsigned char weak[3] = {0, 1, 1};
    cf_loops_nep50(3, in, weak); /* beside float32: the float stays weak, the int too */
    CHECK(weak[0] == 0 && weak[1] == 1 && weak[2] == 1);
    cf_dtype in2[2] = {I8, F64};
    unsigned char w2[2] = {0, 1};
    cf_loops_nep50(2, in2, w2); /* an int8 array + 2.0: the float is float64, strong */
    CHECK(w2[1] == 0);
    cf_dtype in3[2] = {F32, C128};
    unsigned char w3[2] = {0, 1};
    cf_loops_nep50(2, in3, w3); /* a complex beside floats keeps their precision: weak */
    CHECK(w3[1] == 1);
    cf_dtype in4[2] = {F64, I64};
    unsigned char w4[2] = {1, 1};
    cf_loops_nep50(2, in4, w4); /* Python scalars alone: their default types */
    CHECK(w4[0] == 0 && w4[1] == 0);
    cf_dtype in5[2] = {U8, I64};
    unsigned char w5[2] = {0, 7};
    cf_loops_nep50(2, in5, w5); /* signed and unsigned one kind; any nonzero flag reads 1 */
    CHECK(w5[1] == 1);
}

static void test_kind_orders(void)
{
    /* the one order (cf_dtype_kind_order) and NEP 50's, derived from it */
    CHECK(cf_dtype_kind_order(B) == 0 && cf_dtype_kind_order(U8) == 1 &&
          cf_dtype_kind_order(I8) == 2 && cf_dtype_kind_order(F32) == 3 &&
          cf_dtype_kind_order(C64) == 4 && cf_dtype_kind_order((cf_dtype)-1) == -1);
    CHECK(cf_dtype_nep50_kind(B) == 0 && cf_dtype_nep50_kind(U8) == 1 &&
          cf_dtype_nep50_kind(I64) == 1 && cf_dtype_nep50_kind(F64) == 2 &&
          cf_dtype_nep50_kind(C128) == 3 && cf_dtype_nep50_kind((cf_dtype)-1) == -1);
    CHECK(cf_weak_reaches(I64, U8) && !cf_weak_reaches(F64, I64) && !cf_weak_reaches(I64, B));
}

static void test_reduce_accumulators(void)
{
    CHECK(cf_loops_reduce_dtype(CF_ACC_WIDEN, B) == I64);
    CHECK(cf_loops_reduce_dtype(CF_ACC_WIDEN, I8) == I64);
    CHECK(cf_loops_reduce_dtype(CF_ACC_WIDEN, U8) == U64);
    CHECK(cf_loops_reduce_dtype(CF_ACC_WIDEN, I64) == I64);
    CHECK(cf_loops_reduce_dtype(CF_ACC_WIDEN, F32) == F32);
    CHECK(cf_loops_reduce_dtype(CF_ACC_LOOP, I8) == I8);
    CHECK(cf_loops_reduce_dtype(CF_ACC_LOGICAL, I8) == I8);
}

/* The engines' resolvers are the table's rule over their loops. */
static void test_engines_use_the_rule(void)
{
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("f", 2, 1, &u));
    const char *src = "__device__ int f(int a, int b) { return a + b; }";
    for (int l = 0; l < NLOOPS; l++)
        CHECK_OK(cf_ufunc_add_loop(u, LOOPS[l], src, "f", NULL, 0, NULL));
    cf_dtype in[2] = {I8, F32};
    unsigned char weak[2] = {0, 0};
    cf_loops_query q = {CF_LOOPS_NUMPY, 2, 1, in, weak, 0, -1, CF_CAST_SAFE};
    int loop = -9;
    CHECK_OK(cf_ufunc_resolve_query(u, &q, &loop));
    CHECK(loop == cf_loops_find(&LOOPS[0][0], sizeof LOOPS[0], NLOOPS, &q) && loop == 2);
    CHECK_OK(cf_ufunc_resolve(u, in, weak, &loop));
    CHECK(loop == 2);
    CHECK_STATUS(cf_ufunc_find_exact(u, in, weak, &loop), CF_ERR_TYPE);
    q.lazy = 1;
    CHECK(cf_ufunc_find(u, &q) == CF_LOOPS_NONE);
    in[0] = C128;
    q.lazy = 0;
    CHECK_STATUS(cf_ufunc_resolve_query(u, &q, &loop), CF_ERR_TYPE);
    CHECK(strstr(cf_last_error(), "ufunc 'f' not supported for the input types") != NULL);
    in[0] = I8;
    in[1] = I8;
    weak[0] = weak[1] = 1;
    q.mode = CF_LOOPS_NUMBA_UFUNC;
    CHECK_STATUS(cf_ufunc_resolve_query(u, &q, &loop), CF_ERR_TYPE);
    CHECK(strstr(cf_last_error(), "several loops match") != NULL);
    cf_ufunc_free(u);
    cf_clear_error();
}

int main(void)
{
    RUN(test_numpy_rule);
    RUN(test_lazy_loops_take_exact_matches_only);
    RUN(test_dtype_with_casting);
    RUN(test_numba_ufunc_rule);
    RUN(test_numba_gufunc_rule);
    RUN(test_scalar_cast_fallback);
    RUN(test_no_match_message);
    RUN(test_nep50);
    RUN(test_kind_orders);
    RUN(test_reduce_accumulators);
    RUN(test_engines_use_the_rule);
    return SUMMARY();
}
