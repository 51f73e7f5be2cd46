/* Unit tests of the conveniences for C programs: the runtime header included for a
 * loop's source, loops checked when added (a misspelt function name) and by cf_*_check (NVRTC's
 * log with the numbered source), compiling a ufunc's kernel for a key without a GPU (through the
 * kernel cache, as a later launch will look it up), cf_ufunc_from_expr, and the calls on 1-D
 * device and host buffers and the reduction to a host scalar (behind NEED_GPU). Compiling needs
 * NVRTC (CI has it: its absence is a failure), not a GPU. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "diagnostics.h"

/* No #include of the runtime header: cufunc adds it. */
static const char *HYPOT_F4 = "__device__ cf_float32 hyp(cf_float32 x, cf_float32 y) {\n"
                              "    return sqrtf(x * x + y * y);\n}\n";
static const char *SUM_F8 = "__device__ cf_float64 sum(cf_float64 a, cf_float64 b) { return a + b; }\n";
static const char *ROWSUM_F4 =
    "__device__ void rowsum(cf_array_ref<cf_float32, 1> x, cf_array_ref<cf_float32, 1> out) {\n"
    "    cf_float32 s = 0.0f;\n"
    "    for (long long i = 0; i < x.shape[0]; i++) s += *(cf_float32 *)(x.data + i * x.strides[0]);\n"
    "    *(cf_float32 *)out.data = s;\n}\n";
static const cf_dtype F4x3[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};

/* A fresh disk cache for this process, so that "compiled now / from memory / from disk" are known. */
static void use_fresh_cache(void)
{
    const char *tmp = getenv("CUFUNC_TEST_TMP");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/capi_cache_%ld", tmp ? tmp : "/tmp", (long)getpid());
    setenv("CUFUNC_CACHE_DIR", dir, 1);
    setenv("CUFUNC_CACHE", "1", 1);
    CHECK_OK(cf_cache_reconfigure());
}

static void test_runtime_header_included(void)
{
    CHECK_OK(cf_nvrtc_init()); /* CI has NVRTC: its absence is a failure, not a skip */
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("hypot", 2, 1, &u));
    CHECK_OK(cf_ufunc_add_loop(u, F4x3, HYPOT_F4, "hyp", NULL, 0, NULL));
    CHECK_OK(cf_ufunc_check(u, 0));
    CHECK_OK(cf_ufunc_check(u, -1));
    /* a source that includes it itself still compiles (include guard) */
    cf_ufunc *v = NULL;
    CHECK_OK(cf_ufunc_create("hypot2", 2, 1, &v));
    char src[512];
    snprintf(src, sizeof src, "#include \"cufunc/runtime.cuh\"\n%s", HYPOT_F4);
    CHECK_OK(cf_ufunc_add_loop(v, F4x3, src, "hyp", NULL, 0, NULL));
    CHECK_OK(cf_ufunc_check(v, 0));

    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("sum", &r));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT64, SUM_F8, "sum", NULL, 0, NULL));
    CHECK_OK(cf_reducer_check(r, -1));

    cf_gufunc *g = NULL;
    const int nd[2] = {1, 1};
    CHECK_OK(cf_gufunc_create("rowsum", "(n)->()", &g));
    CHECK_OK(cf_gufunc_add_loop(g, F4x3, nd, ROWSUM_F4, "rowsum", NULL, 0, NULL));
    CHECK_OK(cf_gufunc_check(g, 0));
    cf_ufunc_free(u);
    cf_ufunc_free(v);
    cf_reducer_free(r);
    cf_gufunc_free(g);
}

/* A function name the source does not define fails when the loop is added, in every engine. */
static void test_misspelt_name_at_add(void)
{
    static const struct { const char *source, *fn; int ok; } cases[] = {
        {"__device__ cf_float32 hyp(cf_float32 x, cf_float32 y) { return x; }", "hyp", 1},
        {"__device__ cf_float32 hyp(cf_float32 x, cf_float32 y) { return x; }", "hypot", 0},
        {"__device__ cf_float32 hypot_f4(cf_float32 x, cf_float32 y) { return x; }", "hypot", 0},
        {"__device__ cf_float32 my_hyp(cf_float32 x, cf_float32 y) { return x; }", "hyp", 0},
        {"namespace k { __device__ cf_float32 f(cf_float32 x, cf_float32 y) { return x; } }",
         "k::f", 1},
        {"__device__ cf_float32 hyp(cf_float32 x, cf_float32 y) { return x; }", "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_ufunc *u = NULL;
        CHECK_OK(cf_ufunc_create("u", 2, 1, &u));
        cf_status st = cf_ufunc_add_loop(u, F4x3, cases[i].source, cases[i].fn, NULL, 0, NULL);
        if (cases[i].ok) {
            CHECK_OK(st);
        } else {
            CHECK_STATUS(st, CF_ERR_INVALID);
            CHECK_CONTAINS(cf_last_error(), "does not define");
            CHECK(cf_ufunc_nloops(u) == 0);
        }
        cf_ufunc_free(u);
    }
    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("sum", &r));
    CHECK_STATUS(cf_reducer_add_loop(r, CF_FLOAT64, SUM_F8, "summ", NULL, 0, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "'summ'");
    cf_reducer_free(r);
    cf_gufunc *g = NULL;
    const int nd[2] = {1, 1};
    CHECK_OK(cf_gufunc_create("rowsum", "(n)->()", &g));
    CHECK_STATUS(cf_gufunc_add_loop(g, F4x3, nd, ROWSUM_F4, "row_sum", NULL, 0, NULL),
                 CF_ERR_INVALID);
    cf_gufunc_free(g);
}

/* A loop that does not compile: the check says which loop, with NVRTC's log and the numbered
 * source holding the user's text. */
static void test_check_reports_log(void)
{
    static const char *BAD_U = "__device__ cf_float32 hyp(cf_float32 x, cf_float32 y) {\n"
                               "    return sqrtf(x * x + y * y)  /* no semicolon */\n}\n";
    static const char *WRONG_ARITY = "__device__ cf_float32 hyp(cf_float32 x) { return x; }\n";
    const char *sources[2] = {BAD_U, WRONG_ARITY};
    for (int i = 0; i < 2; i++) {
        cf_ufunc *u = NULL;
        CHECK_OK(cf_ufunc_create("broken", 2, 1, &u));
        CHECK_OK(cf_ufunc_add_loop(u, F4x3, sources[i], "hyp", NULL, 0, NULL));
        CHECK_STATUS(cf_ufunc_check(u, 0), CF_ERR_COMPILE);
        const char *msg = cf_last_error();
        CHECK_CONTAINS(msg, "ufunc 'broken' loop 0 (float32, float32) -> float32: ");
        CHECK_CONTAINS(msg, "--- NVRTC log ---");
        CHECK_CONTAINS(msg, "error");
        CHECK_CONTAINS(msg, "    1 | #include \"cufunc/runtime.cuh\"");
        CHECK_CONTAINS(msg, i == 0 ? "/* no semicolon */" : "hyp(cf_float32 x)");
        cf_ufunc_free(u);
    }
    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("sum", &r));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT64, "__device__ cf_float64 sum(cf_float64 a) { return a; }",
                                 "sum", NULL, 0, NULL));
    CHECK_STATUS(cf_reducer_check(r, 0), CF_ERR_COMPILE);
    CHECK_CONTAINS(cf_last_error(), "reducer 'sum' loop 0 (float64, float64) -> float64: ");
    cf_reducer_free(r);
    cf_gufunc *g = NULL;
    const int nd[2] = {1, 1};
    CHECK_OK(cf_gufunc_create("rowsum", "(n)->()", &g));
    CHECK_OK(cf_gufunc_add_loop(g, F4x3, nd, "__device__ void rowsum(cf_float32 *x) {}", "rowsum",
                                NULL, 0, NULL));
    CHECK_STATUS(cf_gufunc_check(g, -1), CF_ERR_COMPILE);
    CHECK_CONTAINS(cf_last_error(), "gufunc 'rowsum' (n)->() loop 0 (float32) -> float32: ");
    cf_gufunc_free(g);
    /* bad arguments */
    CHECK_STATUS(cf_ufunc_check(NULL, 0), CF_ERR_INVALID);
    CHECK_STATUS(cf_reducer_check(NULL, -1), CF_ERR_INVALID);
    CHECK_STATUS(cf_gufunc_check(NULL, -1), CF_ERR_INVALID);
}

/* Compiling for a key without a GPU files the kernel under the key a launch on such a device
 * will look up: the same source (the kernel of real, aligned device addresses), options and arch. */
static void test_compile_for_key(void)
{
    use_fresh_cache();
    cf_ufunc *u = NULL;
    const char *opts[1] = {"--fmad=false"};
    CHECK_OK(cf_ufunc_create("hypot", 2, 1, &u));
    CHECK_OK(cf_ufunc_add_loop(u, F4x3, HYPOT_F4, "hyp", opts, 1, NULL));
    int from = -1;
    CHECK_OK(cf_ufunc_compile_contiguous(u, 0, NULL, 1000, 9, 0, &from));
    CHECK(from == 0);
    CHECK_OK(cf_ufunc_compile_contiguous(u, 0, F4x3, 1000, 9, 0, &from));
    CHECK(from == 1);
    /* the launch's kernel for operands at 256-byte aligned addresses (as cf_mem_alloc gives) */
    cf_operand ops[3];
    memset(ops, 0, sizeof ops);
    int64_t n = 1000;
    for (int k = 0; k < 3; k++)
        CHECK_OK(cf_array_init_contiguous(&ops[k].array, 0x7f0000000000ull + 0x100000ull * k,
                                          CF_FLOAT32, 1, &n, 'C', 0));
    char *src = NULL;
    CHECK_OK(cf_ufunc_kernel_source(u, 0, ops, NULL, 1, &n, &src));
    void *img = NULL;
    size_t size = 0;
    int is_ptx = -1;
    CHECK_OK(cf_cache_get_image(src, opts, 1, 9, 0, &img, &size, &is_ptx, &from));
    CHECK(from == 1); /* already there: no compile */
    cf_free_buffer(img);
    /* a new process (memory cache cleared) finds it on disk */
    CHECK_OK(cf_cache_reconfigure());
    CHECK_OK(cf_cache_get_image(src, opts, 1, 9, 0, &img, &size, &is_ptx, &from));
    CHECK(from == 2);
    cf_free_buffer(img);
    cf_free_buffer(src);
    /* other keys: another arch, 64-bit indexing, a strided and a broadcast operand */
    CHECK_OK(cf_ufunc_compile_contiguous(u, 0, NULL, (int64_t)1 << 32, 8, 0, &from));
    CHECK(from == 0);
    ops[0].array.strides[0] = 8;
    ops[1].array.strides[0] = 0;
    CHECK_OK(cf_ufunc_compile(u, 0, ops, NULL, 1, &n, 8, 0, &from));
    CHECK(from == 0);
    /* operand dtypes other than the loop's (converted in the kernel) */
    const cf_dtype mixed[3] = {CF_INT16, CF_UINT8, CF_FLOAT64};
    CHECK_OK(cf_ufunc_compile_contiguous(u, 0, mixed, 1000, 8, 0, &from));
    CHECK(from == 0);
    CHECK_STATUS(cf_ufunc_compile_contiguous(u, 0, NULL, 10, 0, 0, &from), CF_ERR_INVALID);
    CHECK_STATUS(cf_ufunc_compile_contiguous(u, 1, NULL, 10, 9, 0, &from), CF_ERR_INVALID);
    CHECK_STATUS(cf_ufunc_compile_contiguous(NULL, 0, NULL, 10, 9, 0, &from), CF_ERR_INVALID);
    cf_ufunc_free(u);
}

static void test_from_expr(void)
{
    const cf_dtype types[2][3] = {{CF_FLOAT32, CF_FLOAT32, CF_FLOAT32},
                                  {CF_FLOAT64, CF_FLOAT64, CF_INT32}};
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_from_expr("hypot", "sqrt(x * x + y * y)", 2, &types[0][0], 2, &u));
    CHECK(u && cf_ufunc_nloops(u) == 2 && cf_ufunc_nin(u) == 2 && cf_ufunc_nout(u) == 1);
    cf_dtype lt[3];
    CHECK_OK(cf_ufunc_loop_types(u, 1, lt));
    CHECK(lt[0] == CF_FLOAT64 && lt[2] == CF_INT32);
    /* the float64 -> int32 loop converts as NumPy stores: cf_cast */
    cf_operand ops[3];
    memset(ops, 0, sizeof ops);
    int64_t n = 8;
    for (int k = 0; k < 3; k++)
        CHECK_OK(cf_array_init_contiguous(&ops[k].array, (uint64_t)(k + 1) << 32, types[1][k], 1,
                                          &n, 'C', 0));
    char *src = NULL;
    CHECK_OK(cf_ufunc_kernel_source(u, 1, ops, NULL, 1, &n, &src));
    CHECK_CONTAINS(src, "cf_int32 cf_expr_1(cf_float64 x, cf_float64 y)");
    CHECK_CONTAINS(src, "return cf_cast<cf_int32>(");
    cf_free_buffer(src);
    cf_ufunc_free(u);

    /* argument names past four */
    const cf_dtype six[6] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32, CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    CHECK_OK(cf_ufunc_from_expr("sum5", "x + y + z + w + x4", 5, six, 1, &u));
    cf_ufunc_free(u);
    /* errors: an expression that does not compile (nothing returned), two loops with the same
     * input types, a bad dtype, no expression */
    u = (cf_ufunc *)1;
    CHECK_STATUS(cf_ufunc_from_expr("bad", "sqrtf(x * x + )", 2, F4x3, 1, &u), CF_ERR_COMPILE);
    CHECK(u == NULL);
    CHECK_CONTAINS(cf_last_error(), "ufunc 'bad' loop 0");
    CHECK_CONTAINS(cf_last_error(), "sqrtf(x * x + )");
    CHECK_STATUS(cf_ufunc_from_expr("twice", "x", 1, (const cf_dtype[]){CF_FLOAT32, CF_FLOAT32,
                                    CF_FLOAT32, CF_FLOAT64}, 2, &u), CF_ERR_INVALID);
    CHECK_STATUS(cf_ufunc_from_expr("badtype", "x", 1, (const cf_dtype[]){CF_FLOAT32, (cf_dtype)99},
                                    1, &u), CF_ERR_TYPE);
    CHECK_STATUS(cf_ufunc_from_expr("empty", "", 1, F4x3, 1, &u), CF_ERR_INVALID);
    CHECK_STATUS(cf_ufunc_from_expr("none", "x", 1, F4x3, 0, &u), CF_ERR_INVALID);
    CHECK_STATUS(cf_ufunc_from_expr("noout", "x", 1, F4x3, 1, NULL), CF_ERR_INVALID);
}

/* The loop is picked before anything touches the GPU: these fail the same with or without one. */
static void test_calls_without_a_loop(void)
{
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("hypot", 2, 1, &u));
    CHECK_OK(cf_ufunc_add_loop(u, F4x3, HYPOT_F4, "hyp", NULL, 0, NULL));
    const cf_dtype f8[3] = {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64};
    double buf[3] = {0};
    void *args[3] = {buf, buf + 1, buf + 2};
    CHECK_STATUS(cf_ufunc_call_host(u, NULL, 1, f8, args), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "not supported for the input types (float64, float64)");
    CHECK_STATUS(cf_ufunc_call_host(u, NULL, 1, NULL, args), CF_ERR_INVALID);
    CHECK_STATUS(cf_ufunc_call_host(u, NULL, 1, F4x3, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_ufunc_call(u, NULL, 1, F4x3, (const uint64_t[]){0, 0, 0}), CF_ERR_INVALID);
    cf_ufunc_free(u);

    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("sum", &r));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT64, SUM_F8, "sum", NULL, 0, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT32, "__device__ cf_float32 sum(cf_float32 a, cf_float32 b) "
                                 "{ return a + b; }", "sum", NULL, 0, NULL));
    cf_array a;
    int64_t n = 4;
    double result = 0;
    CHECK_OK(cf_array_init_contiguous(&a, (uint64_t)(uintptr_t)buf, CF_INT32, 1, &n, 'C', -1));
    CHECK_STATUS(cf_reduce_to_host(r, NULL, &a, NULL, &result), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "no loop for int32");
    CHECK_STATUS(cf_reduce_to_host(r, NULL, NULL, NULL, &result), CF_ERR_INVALID);
    cf_reducer_free(r);
}

/* ---- on the GPU ------------------------------------------------------------------------------ */

static void test_call_device_and_host(void)
{
    NEED_GPU();
    const cf_dtype types[2][3] = {{CF_FLOAT32, CF_FLOAT32, CF_FLOAT32},
                                  {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64}};
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_from_expr("hypot", "sqrt(x * x + y * y)", 2, &types[0][0], 2, &u));
    if (!u)
        return;
    enum { N = 1000003 };
    float *x = malloc(N * 4), *y = malloc(N * 4), *r = malloc(N * 4);
    int16_t *xi = malloc(N * 2);
    double *rd = malloc(N * 8);
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 1000);
        y[i] = (float)(i % 333) * 0.5f;
        xi[i] = (int16_t)(i % 1000);
        r[i] = -1;
        rd[i] = -1;
    }
    /* host buffers: the float32 loop */
    void *args[3] = {x, y, r};
    CHECK_OK(cf_ufunc_call_host(u, NULL, N, types[0], args));
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += fabsf(r[i] - sqrtf(x[i] * x[i] + y[i] * y[i])) > 1e-6f * r[i] + 1e-30f;
    CHECK(bad == 0);
    /* host buffers of other dtypes: int16 and float32 in, float64 out (the float32 loop: int16
     * reaches float32 safely; the result is converted to float64 in the kernel) */
    const cf_dtype mixed[3] = {CF_INT16, CF_FLOAT32, CF_FLOAT64};
    void *args2[3] = {xi, y, rd};
    CHECK_OK(cf_ufunc_call_host(u, NULL, N, mixed, args2));
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += fabs(rd[i] - sqrt((double)x[i] * x[i] + (double)y[i] * y[i])) > 1e-6 * rd[i] + 1e-30;
    CHECK(bad == 0);
    /* device memory, on a created stream */
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    uint64_t d[3] = {0};
    for (int k = 0; k < 3; k++)
        CHECK_OK(cf_mem_alloc(s, N * 4, &d[k]));
    CHECK_OK(cf_memcpy_htod(s, d[0], x, N * 4, 0));
    CHECK_OK(cf_memcpy_htod(s, d[1], y, N * 4, 0));
    CHECK_OK(cf_memset8(s, d[2], 0xff, N * 4));
    CHECK_OK(cf_ufunc_call(u, s, N, types[0], d));
    float *back = malloc(N * 4);
    CHECK_OK(cf_memcpy_dtoh(s, back, d[2], N * 4, 1));
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += fabsf(back[i] - sqrtf(x[i] * x[i] + y[i] * y[i])) > 1e-6f * back[i] + 1e-30f;
    CHECK(bad == 0);
    for (int k = 0; k < 3; k++)
        CHECK_OK(cf_mem_free(s, d[k]));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_ufunc_free(u);
    free(x), free(y), free(r), free(xi), free(rd), free(back);
}

static void test_reduce_to_host(void)
{
    NEED_GPU();
    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("sum", &r));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT64, SUM_F8, "sum", NULL, 0, NULL));
    CHECK_OK(cf_reducer_check(r, 0));
    enum { N = 3000017 };
    int32_t *h = malloc(N * 4);
    double *hd = malloc(N * 8);
    for (int i = 0; i < N; i++) {
        h[i] = i % 1000 - 500;
        hd[i] = h[i];
    }
    double want = 0;
    for (int i = 0; i < N; i++)
        want += h[i];
    int64_t n = N, zero = 0;
    cf_array a;
    double got = -1, init = 0.5;
    /* a host int32 array: copied in, converted to the only loop's float64 */
    CHECK_OK(cf_array_init_contiguous(&a, (uint64_t)(uintptr_t)h, CF_INT32, 1, &n, 'C', -1));
    CHECK_OK(cf_reduce_to_host(r, NULL, &a, &init, &got));
    CHECK(got == want + 0.5);
    /* What stays allocated from here on: the default stream's reduction scratch, which lives as
     * long as the process. A stream's own scratch goes with the stream (checked at the end). */
    CHECK_OK(cf_device_synchronize(0));
    int64_t kept = cf_mem_outstanding();
    /* a device float64 array */
    cf_stream *s = NULL;
    uint64_t d = 0;
    CHECK_OK(cf_stream_create(0, &s));
    CHECK_OK(cf_mem_alloc(s, N * 8, &d));
    CHECK_OK(cf_memcpy_htod(s, d, hd, N * 8, 0));
    CHECK_OK(cf_array_init_contiguous(&a, d, CF_FLOAT64, 1, &n, 'C', 0));
    got = -1;
    CHECK_OK(cf_reduce_to_host(r, s, &a, NULL, &got));
    CHECK(got == want);
    /* empty: the initial value; without one, an error */
    CHECK_OK(cf_array_init_contiguous(&a, d, CF_FLOAT64, 1, &zero, 'C', 0));
    CHECK_OK(cf_reduce_to_host(r, s, &a, &init, &got));
    CHECK(got == 0.5);
    CHECK_STATUS(cf_reduce_to_host(r, s, &a, NULL, &got), CF_ERR_INVALID);
    /* a strided host array is refused, not misread */
    CHECK_OK(cf_array_init_contiguous(&a, (uint64_t)(uintptr_t)h, CF_INT32, 1, &n, 'C', -1));
    a.shape[0] = N / 2;
    a.strides[0] = 8;
    CHECK_STATUS(cf_reduce_to_host(r, s, &a, NULL, &got), CF_ERR_INVALID);
    CHECK_OK(cf_mem_free(s, d));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    CHECK_OK(cf_device_synchronize(0));
    CHECK(cf_mem_outstanding() == kept);
    /* many short-lived streams: the scratch of each goes with it (it used to stay for ever) */
    CHECK_OK(cf_array_init_contiguous(&a, (uint64_t)(uintptr_t)h, CF_INT32, 1, &n, 'C', -1));
    for (int k = 0; k < 20; k++) {
        cf_stream *t = NULL;
        CHECK_OK(cf_stream_create(0, &t));
        got = -1;
        CHECK_OK(cf_reduce_to_host(r, t, &a, &init, &got));
        CHECK(got == want + 0.5);
        cf_stream_free(t);
    }
    CHECK_OK(cf_device_synchronize(0));
    CHECK(cf_mem_outstanding() == kept);
    cf_reducer_free(r);
    free(h);
    free(hd);
}

int main(void)
{
    RUN(test_runtime_header_included);
    RUN(test_misspelt_name_at_add);
    RUN(test_check_reports_log);
    RUN(test_compile_for_key);
    RUN(test_from_expr);
    RUN(test_calls_without_a_loop);
    RUN(test_call_device_and_host);
    RUN(test_reduce_to_host);
    return SUMMARY();
}
