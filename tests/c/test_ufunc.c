/* Unit tests of the element-wise engine: casting table, loop resolution, kernel specialisation.
 * Every generated kernel is compiled with NVRTC (no GPU needed); launches run behind NEED_GPU(). */
#include <math.h>
#include <stdint.h>

#include "check.h"

static const char *ADD_F4 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_float32 add_f4(cf_float32 a, cf_float32 b) { return a + b; }\n";
static const char *ADD_F8 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_float64 add_f8(cf_float64 a, cf_float64 b) { return a + b; }\n";
static const char *DIVMOD_I4 =
    "#include \"cufunc/runtime.cuh\"\n"
    "struct dm_ret { cf_int32 f0; cf_int32 f1; };\n"
    "__device__ dm_ret divmod_i4(cf_int32 a, cf_int32 b) {\n"
    "    dm_ret r; r.f0 = cf_floordiv(a, b); r.f1 = cf_mod(a, b); return r; }\n";

static cf_ufunc *make_add(void)
{
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("add", 2, 1, &u));
    cf_dtype f4[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32}, f8[3] = {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64};
    const char *opts[1] = {"--fmad=false"};
    int idx = -1;
    CHECK_OK(cf_ufunc_add_loop(u, f4, ADD_F4, "add_f4", opts, 1, &idx));
    CHECK(idx == 0);
    CHECK_OK(cf_ufunc_add_loop(u, f8, ADD_F8, "add_f8", opts, 1, &idx));
    CHECK(idx == 1);
    return u;
}

static void test_can_cast_safe(void)
{
    /* Pairs checked against numpy.can_cast(a, b, 'safe') with NumPy 2.x. */
    static const struct { cf_dtype from, to; int want; } cases[] = {
        {CF_BOOL, CF_INT8, 1},      {CF_INT8, CF_BOOL, 0},       {CF_INT8, CF_INT16, 1},
        {CF_INT16, CF_INT8, 0},     {CF_INT8, CF_UINT8, 0},      {CF_UINT8, CF_INT16, 1},
        {CF_UINT8, CF_INT8, 0},     {CF_UINT32, CF_INT64, 1},    {CF_UINT64, CF_INT64, 0},
        {CF_INT16, CF_FLOAT32, 1},  {CF_INT32, CF_FLOAT32, 0},   {CF_INT32, CF_FLOAT64, 1},
        {CF_INT64, CF_FLOAT64, 1},  {CF_UINT64, CF_FLOAT64, 1},  {CF_UINT16, CF_FLOAT32, 1},
        {CF_INT8, CF_FLOAT16, 1},   {CF_INT16, CF_FLOAT16, 0},   {CF_FLOAT32, CF_FLOAT64, 1},
        {CF_FLOAT64, CF_FLOAT32, 0}, {CF_FLOAT32, CF_COMPLEX64, 1}, {CF_FLOAT64, CF_COMPLEX64, 0},
        {CF_FLOAT64, CF_COMPLEX128, 1}, {CF_COMPLEX64, CF_COMPLEX128, 1},
        {CF_COMPLEX128, CF_FLOAT64, 0}, {CF_INT16, CF_COMPLEX64, 1}, {CF_INT32, CF_COMPLEX64, 0},
        {CF_INT64, CF_COMPLEX128, 1}, {CF_FLOAT16, CF_FLOAT32, 1},  {CF_FLOAT16, CF_COMPLEX64, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = cf_can_cast_safe(cases[i].from, cases[i].to);
        if (got != cases[i].want)
            fprintf(stderr, "  can_cast(%s, %s) = %d\n", cf_dtype_name(cases[i].from),
                    cf_dtype_name(cases[i].to), got);
        CHECK(got == cases[i].want);
    }
}

static void test_resolve(void)
{
    cf_ufunc *u = make_add();
    int loop = -1;
    cf_dtype in[2] = {CF_FLOAT32, CF_FLOAT32};
    CHECK_OK(cf_ufunc_resolve(u, in, NULL, &loop));
    CHECK(loop == 0);
    in[1] = CF_FLOAT64;
    CHECK_OK(cf_ufunc_resolve(u, in, NULL, &loop));
    CHECK(loop == 1);
    in[0] = CF_INT16; in[1] = CF_INT16;  /* int16 reaches float32 safely: first loop that fits */
    CHECK_OK(cf_ufunc_resolve(u, in, NULL, &loop));
    CHECK(loop == 0);
    in[0] = CF_INT32; in[1] = CF_INT32;  /* int32 needs float64 */
    CHECK_OK(cf_ufunc_resolve(u, in, NULL, &loop));
    CHECK(loop == 1);
    /* NEP 50: a Python float with a float32 array stays float32 */
    in[0] = CF_FLOAT32; in[1] = CF_FLOAT64;
    unsigned char weak[2] = {0, 1};
    CHECK_OK(cf_ufunc_resolve(u, in, weak, &loop));
    CHECK(loop == 0);
    in[0] = CF_COMPLEX64; in[1] = CF_FLOAT32;
    CHECK_STATUS(cf_ufunc_resolve(u, in, NULL, &loop), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "ufunc 'add' not supported for the input types (complex64, float32)");
    CHECK_CONTAINS(cf_last_error(), "(float32, float32) -> (float32)");
    /* a duplicate loop is refused */
    cf_dtype f4[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    CHECK_STATUS(cf_ufunc_add_loop(u, f4, ADD_F4, "add_f4", NULL, 0, NULL), CF_ERR_INVALID);
    cf_ufunc_free(u);
    cf_ufunc_free(NULL);
    cf_ufunc *bad = NULL;
    CHECK_STATUS(cf_ufunc_create("x", 0, 1, &bad), CF_ERR_INVALID);
    CHECK(bad == NULL);
}

static cf_operand arr(cf_dtype dt, int ndim, const int64_t *shape, uint64_t data, char order)
{
    cf_operand o;
    memset(&o, 0, sizeof o);
    cf_array_init_contiguous(&o.array, data, dt, ndim, shape, order, 0);
    return o;
}

/* Generate the kernel, check it contains `want`, compile it with NVRTC for sm_90. */
static void check_kernel(cf_ufunc *u, int loop, const cf_operand *ops, const cf_array *where,
                         int ndim, const int64_t *shape, const char *want)
{
    char *src = NULL;
    CHECK_OK(cf_ufunc_kernel_source(u, loop, ops, where, ndim, shape, &src));
    if (!src)
        return;
    CHECK_CONTAINS(src, want);
    void *image = NULL;
    size_t size = 0;
    int is_ptx = 0;
    const char *opts[1] = {"--fmad=false"};
    cf_status st = cf_compile_source(src, opts, 1, 9, 0, &image, &size, &is_ptx);
    if (st != CF_OK)
        fprintf(stderr, "%s\n", cf_last_error());
    CHECK(st == CF_OK && size > 0);
    cf_free_buffer(image);
    cf_free_buffer(src);
}

static void test_kernel_shapes(void)
{
    cf_ufunc *u = make_add();
    int64_t shape[2] = {64, 100};
    cf_operand ops[3];
    /* contiguous, 16-byte aligned: float4 vectors */
    ops[0] = arr(CF_FLOAT32, 2, shape, 0x100000, 'C');
    ops[1] = arr(CF_FLOAT32, 2, shape, 0x200000, 'C');
    ops[2] = arr(CF_FLOAT32, 2, shape, 0x300000, 'C');
    check_kernel(u, 0, ops, NULL, 2, shape, "cf_vec<cf_float32, 4>");
    /* a misaligned operand: scalar accesses */
    ops[1].array.data += 4;
    check_kernel(u, 0, ops, NULL, 2, shape, "cf_vec<cf_float32, 1>");
    ops[1].array.data -= 4;
    /* transposed input: the strided kernel over 2 axes, 32-bit index */
    int64_t tshape[2] = {100, 64};
    ops[1] = arr(CF_FLOAT32, 2, tshape, 0x200000, 'C');
    int64_t t0 = ops[1].array.strides[0];
    ops[1].array.shape[0] = 64; ops[1].array.shape[1] = 100;
    ops[1].array.strides[0] = ops[1].array.strides[1];
    ops[1].array.strides[1] = t0;
    check_kernel(u, 0, ops, NULL, 2, shape, "cf_offsets<2, 3, unsigned, int>");
    /* a Python scalar operand and in-kernel casting (int32 array into the float64 loop) */
    ops[0] = arr(CF_INT32, 2, shape, 0x100000, 'C');
    memset(&ops[1], 0, sizeof ops[1]);
    ops[1].is_scalar = 1;
    ops[1].scalar_dtype = CF_FLOAT64;
    double two = 2.0;
    memcpy(ops[1].scalar, &two, 8);
    ops[2] = arr(CF_FLOAT64, 2, shape, 0x300000, 'C');
    check_kernel(u, 1, ops, NULL, 2, shape, "cf_cast<cf_float64>(in0[u].v[e])");
    check_kernel(u, 1, ops, NULL, 2, shape, "p.op[1].scalar");
    /* a 0-d device array input is uniform: loaded once */
    ops[1] = arr(CF_FLOAT64, 0, NULL, 0x400000, 'C');
    check_kernel(u, 1, ops, NULL, 2, shape, "const cf_float64 v1 = cf_cast<cf_float64>(*(const cf_float64 *)p.op[1].ptr);");
    /* where= mask, broadcast row */
    int64_t row[1] = {100};
    cf_array mask;
    cf_array_init_contiguous(&mask, 0x500000, CF_BOOL, 1, row, 'C', 0);
    ops[1] = arr(CF_FLOAT64, 2, shape, 0x200000, 'C');
    check_kernel(u, 1, ops, &mask, 2, shape, "if (*(const cf_bool *)(p.op[3].ptr + off[3]))");
    /* more than 2^31 elements: the 64-bit strided kernel */
    int64_t big[1] = {(int64_t)3 << 30};
    ops[0] = arr(CF_FLOAT32, 1, big, 0x100000, 'C');
    ops[1] = arr(CF_FLOAT32, 1, big, 0x200000, 'C');
    ops[2] = arr(CF_FLOAT32, 1, big, 0x300000, 'C');
    check_kernel(u, 0, ops, NULL, 1, big, "cf_offsets<1, 3, unsigned long long, long long>");
    /* bad calls */
    char *src = NULL;
    int64_t other[2] = {64, 99};
    ops[0] = arr(CF_FLOAT32, 2, shape, 0x100000, 'C');
    ops[1] = arr(CF_FLOAT32, 2, other, 0x200000, 'C');
    ops[2] = arr(CF_FLOAT32, 2, shape, 0x300000, 'C');
    CHECK_STATUS(cf_ufunc_kernel_source(u, 0, ops, NULL, 2, shape, &src), CF_ERR_INVALID);
    ops[1] = arr(CF_FLOAT32, 2, shape, 0x200000, 'C');
    ops[2] = arr(CF_FLOAT32, 2, other, 0x300000, 'C');
    CHECK_STATUS(cf_ufunc_kernel_source(u, 0, ops, NULL, 2, shape, &src), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "output 0 does not have the loop's shape");
    ops[2] = arr(CF_FLOAT16, 2, shape, 0x300000, 'C');
    CHECK_STATUS(cf_ufunc_kernel_source(u, 0, ops, NULL, 2, shape, &src), CF_ERR_UNSUPPORTED);
    CHECK_STATUS(cf_ufunc_kernel_source(u, 7, ops, NULL, 2, shape, &src), CF_ERR_INVALID);
    cf_ufunc_free(u);
}

static void test_two_outputs(void)
{
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("divmod", 2, 2, &u));
    cf_dtype t[4] = {CF_INT32, CF_INT32, CF_INT32, CF_INT32};
    CHECK_OK(cf_ufunc_add_loop(u, t, DIVMOD_I4, "divmod_i4", NULL, 0, NULL));
    int64_t shape[1] = {1000};
    cf_operand ops[4];
    for (int i = 0; i < 4; i++)
        ops[i] = arr(i == 3 ? CF_INT64 : CF_INT32, 1, shape, 0x100000 * (uint64_t)(i + 1), 'C');
    check_kernel(u, 0, ops, NULL, 1, shape, "out3[u].v[e] = cf_cast<cf_int64>(r.f1);");
    cf_ufunc_free(u);
}

/* ---- on the GPU ---------------------------------------------------------------------------- */

static void test_launch_on_gpu(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    cf_ufunc *u = make_add();
    enum { R = 300, C = 257 };
    int64_t shape[2] = {R, C};
    size_t n = (size_t)R * C;
    float *a = malloc(n * 4), *b = malloc(n * 4), *out = malloc(n * 4);
    double *out8 = malloc(n * 8);
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = 1000.0f - (float)i;
    }
    uint64_t da = 0, db = 0, dc = 0, dd = 0;
    CHECK_OK(cf_mem_alloc(s, n * 4, &da));
    CHECK_OK(cf_mem_alloc(s, n * 4, &db));
    CHECK_OK(cf_mem_alloc(s, n * 4, &dc));
    CHECK_OK(cf_mem_alloc(s, n * 8, &dd));
    CHECK_OK(cf_memcpy_htod(s, da, a, n * 4, 1));
    CHECK_OK(cf_memcpy_htod(s, db, b, n * 4, 1));
    cf_operand ops[3];
    ops[0] = arr(CF_FLOAT32, 2, shape, da, 'C');
    ops[1] = arr(CF_FLOAT32, 2, shape, db, 'C');
    ops[2] = arr(CF_FLOAT32, 2, shape, dc, 'C');
    /* contiguous */
    CHECK_OK(cf_memset8(s, dc, 0xff, n * 4));
    CHECK_OK(cf_ufunc_launch(u, 0, s, ops, NULL, 2, shape));
    CHECK_OK(cf_memcpy_dtoh(s, out, dc, n * 4, 1));
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += out[i] != a[i] + b[i];
    CHECK(bad == 0);
    /* b read transposed (as a (C, R) array viewed (R, C)): strided kernel */
    int64_t tshape[2] = {C, R};
    cf_array_init_contiguous(&ops[1].array, db, CF_FLOAT32, 2, tshape, 'C', 0);
    ops[1].array.shape[0] = R; ops[1].array.shape[1] = C;
    ops[1].array.strides[0] = 4; ops[1].array.strides[1] = 4 * R;
    CHECK_OK(cf_memset8(s, dc, 0xff, n * 4));
    CHECK_OK(cf_ufunc_launch(u, 0, s, ops, NULL, 2, shape));
    CHECK_OK(cf_memcpy_dtoh(s, out, dc, n * 4, 1));
    bad = 0;
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++)
            bad += out[r * C + c] != a[r * C + c] + b[c * R + r];
    CHECK(bad == 0);
    /* Python-scalar second operand, float32 array into the float64 loop, float64 output */
    ops[0] = arr(CF_FLOAT32, 2, shape, da, 'C');
    memset(&ops[1], 0, sizeof ops[1]);
    ops[1].is_scalar = 1;
    ops[1].scalar_dtype = CF_FLOAT64;
    double third = 1.0 / 3.0;
    memcpy(ops[1].scalar, &third, 8);
    ops[2] = arr(CF_FLOAT64, 2, shape, dd, 'C');
    CHECK_OK(cf_ufunc_launch(u, 1, s, ops, NULL, 2, shape));
    CHECK_OK(cf_memcpy_dtoh(s, out8, dd, n * 8, 1));
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += out8[i] != (double)a[i] + third;
    CHECK(bad == 0);
    CHECK(cf_ufunc_kernel_count(u) == 3);
    /* the same call again compiles nothing new */
    CHECK_OK(cf_ufunc_launch(u, 1, s, ops, NULL, 2, shape));
    CHECK(cf_ufunc_kernel_count(u) == 3);
    CHECK_OK(cf_stream_synchronize(s));
    cf_mem_free(s, da); cf_mem_free(s, db); cf_mem_free(s, dc); cf_mem_free(s, dd);
    cf_stream_synchronize(s);
    cf_stream_free(s);
    cf_ufunc_free(u);
    free(a); free(b); free(out); free(out8);
}

int main(void)
{
    RUN(test_can_cast_safe);
    RUN(test_resolve);
    RUN(test_kernel_shapes);
    RUN(test_two_outputs);
    RUN(test_launch_on_gpu);
    return SUMMARY();
}
