/* Unit tests of the element-wise engine: casting table, loop resolution, kernel specialisation
 * (flat, row-vector, tile and strided kernels; the planner itself: test_plan.c).
 * Every generated kernel is compiled with NVRTC (no GPU needed); launches run behind NEED_GPU(),
 * each case against a host loop with poisoned outputs and guard bytes. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "diagnostics.h"

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
    /* contiguous, 16-byte aligned: the flat kernel with float4 vectors and its small parameters */
    ops[0] = arr(CF_FLOAT32, 2, shape, 0x100000, 'C');
    ops[1] = arr(CF_FLOAT32, 2, shape, 0x200000, 'C');
    ops[2] = arr(CF_FLOAT32, 2, shape, 0x300000, 'C');
    check_kernel(u, 0, ops, NULL, 2, shape, "#define CF_EW_V 4\n");
    check_kernel(u, 0, ops, NULL, 2, shape, "#include \"cufunc/ew_flat.cuh\"");
    check_kernel(u, 0, ops, NULL, 2, shape, "F(sfx, pfx, 0, C, L, cf_float32, cf_float32, 4)");
    check_kernel(u, 0, ops, NULL, 2, shape, "F(sfx, pfx, 2, C, O, cf_float32, cf_float32, 4)");
    /* a misaligned operand: scalar accesses */
    ops[1].array.data += 4;
    check_kernel(u, 0, ops, NULL, 2, shape, "#define CF_EW_V 1\n");
    ops[1].array.data -= 4;
    /* transposed input: the tile kernel stages it through shared memory */
    int64_t tshape[2] = {100, 64};
    ops[1] = arr(CF_FLOAT32, 2, tshape, 0x200000, 'C');
    int64_t t0 = ops[1].array.strides[0];
    ops[1].array.shape[0] = 64; ops[1].array.shape[1] = 100;
    ops[1].array.strides[0] = ops[1].array.strides[1];
    ops[1].array.strides[1] = t0;
    check_kernel(u, 0, ops, NULL, 2, shape, "sm1[");
    check_kernel(u, 0, ops, NULL, 2, shape, "F(sfx, pfx, 1, T, L, cf_float32, cf_float32, 4)");
    check_kernel(u, 0, ops, NULL, 2, shape, "#include \"cufunc/ew_tile.cuh\"");
    /* every other element of a row: the strided kernel */
    ops[1] = arr(CF_FLOAT32, 2, shape, 0x200000, 'C');
    ops[1].array.strides[1] = 8;
    ops[1].array.strides[0] = 8 * 100;
    check_kernel(u, 0, ops, NULL, 2, shape, "#define CF_EW_ND 1\n#define CF_EW_I unsigned\n"
                                            "#define CF_EW_O int\n");
    check_kernel(u, 0, ops, NULL, 2, shape, "#include \"cufunc/ew_strided.cuh\"");
    /* a Python scalar operand and in-kernel casting (int32 array into the float64 loop) */
    ops[0] = arr(CF_INT32, 2, shape, 0x100000, 'C');
    memset(&ops[1], 0, sizeof ops[1]);
    ops[1].is_scalar = 1;
    ops[1].scalar_dtype = CF_FLOAT64;
    double two = 2.0;
    memcpy(ops[1].scalar, &two, 8);
    ops[2] = arr(CF_FLOAT64, 2, shape, 0x300000, 'C');
    check_kernel(u, 1, ops, NULL, 2, shape, "cf_cast<cf_float64>(in0[u].v[e])");
    check_kernel(u, 1, ops, NULL, 2, shape, "F(sfx, pfx, 1, S, L, cf_float64, cf_float64, 8)");
    /* a 0-d device array input is uniform: loaded once */
    ops[1] = arr(CF_FLOAT64, 0, NULL, 0x400000, 'C');
    check_kernel(u, 1, ops, NULL, 2, shape, "F(sfx, pfx, 1, U, L, cf_float64, cf_float64, 8)");
    /* where= mask, broadcast row: contiguous rows, the row-vector kernel loads the mask as vectors */
    int64_t row[1] = {100};
    cf_array mask;
    cf_array_init_contiguous(&mask, 0x500000, CF_BOOL, 1, row, 'C', 0);
    ops[1] = arr(CF_FLOAT64, 2, shape, 0x200000, 'C');
    check_kernel(u, 1, ops, &mask, 2, shape, "if (in3[u].v[e])");
    check_kernel(u, 1, ops, &mask, 2, shape, "F(sfx, pfx, 3, C, L, cf_bool, cf_bool, 1)");
    check_kernel(u, 1, ops, &mask, 2, shape, "F(sfx, pfx, 2, C, W, cf_float64, cf_float64, 8)");
    check_kernel(u, 1, ops, &mask, 2, shape, "#define CF_EW_V 2\n");
    check_kernel(u, 1, ops, &mask, 2, shape, "#include \"cufunc/ew_rowvec.cuh\"");
    /* more than 2^31 elements: the 64-bit row-vector kernel over one axis */
    int64_t big[1] = {(int64_t)3 << 30};
    ops[0] = arr(CF_FLOAT32, 1, big, 0x100000, 'C');
    ops[1] = arr(CF_FLOAT32, 1, big, 0x200000, 'C');
    ops[2] = arr(CF_FLOAT32, 1, big, 0x300000, 'C');
    check_kernel(u, 0, ops, NULL, 1, big, "#define CF_EW_ND 1\n#define CF_EW_I unsigned long long\n"
                                          "#define CF_EW_O long long\n");
    check_kernel(u, 0, ops, NULL, 1, big, "#include \"cufunc/ew_rowvec.cuh\"");
    /* ... and misaligned, the 64-bit strided kernel */
    ops[1].array.data += 4;
    check_kernel(u, 0, ops, NULL, 1, big, "#define CF_EW_ND 1\n#define CF_EW_I unsigned long long\n"
                                          "#define CF_EW_O long long\n");
    check_kernel(u, 0, ops, NULL, 1, big, "#include \"cufunc/ew_strided.cuh\"");
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
    ops[2] = arr(CF_FLOAT16, 2, shape, 0x300000, 'C'); /* a float16 output: cast from the loop's */
    CHECK_OK(cf_ufunc_kernel_source(u, 0, ops, NULL, 2, shape, &src));
    CHECK(strstr(src, "cf_cast<cf_float16>") != NULL);
    cf_free_buffer(src);
    src = NULL;
    CHECK_STATUS(cf_ufunc_kernel_source(u, 7, ops, NULL, 2, shape, &src), CF_ERR_INVALID);
    /* an output with a zero stride */
    ops[2] = arr(CF_FLOAT32, 2, shape, 0x300000, 'C');
    ops[2].array.strides[0] = 0;
    ops[2].array.strides[1] = 0;
    CHECK_STATUS(cf_ufunc_kernel_source(u, 0, ops, NULL, 2, shape, &src), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "zero stride");
    cf_ufunc_free(u);
}

/* ---- a table of layouts: each compiled with NVRTC here, and run against a host loop on a GPU -- */

/* One operand of a case: a scalar, or a view whose strides are in elements (any sign) at an
 * element offset `shift` from an aligned base (shift 1 breaks vector alignment). */
typedef struct tview {
    int is_scalar;
    cf_dtype dtype;
    double scalar;
    int ndim;
    int64_t shape[4];
    int64_t strides[4]; /* elements; all zero: C-contiguous */
    int shift;
} tview;

enum { OP_ADD_F4, OP_ADD_F8, OP_DIVMOD };

typedef struct tcase {
    const char *name;
    int op;              /* which ufunc and loop */
    int ndim;
    int64_t shape[4];
    tview v[4];          /* nin + nout operands */
    int has_where;
    tview where;
    const char *want;    /* a piece of the generated source: which kernel shape */
} tcase;

/* the kernel of a key is the header of its shape, instantiated by the source's macros */
#define FLAT "#include \"cufunc/ew_flat.cuh\""
#define ROWVEC "#include \"cufunc/ew_rowvec.cuh\""
#define TILE "#include \"cufunc/ew_tile.cuh\""
#define STRIDED "#include \"cufunc/ew_strided.cuh\""

#define F4(nd, ...) {0, CF_FLOAT32, 0, nd, __VA_ARGS__}
#define VIEW(dt, nd, ...) {0, dt, 0, nd, __VA_ARGS__}
#define SCALAR(dt, x) {1, dt, x, 0, {0}, {0}, 0}

static const tcase CASES[] = {
    {"flat, odd size", OP_ADD_F4, 2, {300, 257},
     {F4(2, {300, 257}), F4(2, {300, 257}), F4(2, {300, 257})}, 0, {0}, FLAT},
    {"flat, misaligned input", OP_ADD_F4, 1, {1001},
     {F4(1, {1001}), F4(1, {1001}, {0}, 1), F4(1, {1001})}, 0, {0}, "#define CF_EW_V 1\n"},
    {"flat, where mask, scalar", OP_ADD_F4, 1, {999},
     {F4(1, {999}), SCALAR(CF_FLOAT32, 0.75), F4(1, {999})}, 1, VIEW(CF_BOOL, 1, {999}), FLAT},
    {"flat, one element", OP_ADD_F4, 0, {0},
     {F4(0, {0}), F4(0, {0}), F4(0, {0})}, 0, {0}, FLAT},
    {"row-vector, broadcast column and row", OP_ADD_F4, 2, {300, 256},
     {F4(2, {300, 1}), F4(2, {1, 256}), F4(2, {300, 256})}, 0, {0}, "F(sfx, pfx, 0, B, L, cf_float32, cf_float32, 4)"},
    {"row-vector, inner extent not a multiple of 4", OP_ADD_F4, 2, {77, 258},
     {F4(2, {77, 1}), F4(2, {1, 258}), F4(2, {77, 258})}, 0, {0}, "#define CF_EW_V 2\n"},
    {"row-vector, misaligned output", OP_ADD_F4, 2, {65, 256},
     {F4(2, {65, 1}), F4(2, {1, 256}), F4(2, {65, 256}, {0}, 2)}, 0, {0}, "#define CF_EW_V 2\n"},
    {"strided, odd inner extent with broadcast", OP_ADD_F4, 2, {37, 255},
     {F4(2, {37, 1}), F4(2, {1, 255}), F4(2, {37, 255})}, 0, {0}, STRIDED},
    {"row-vector, reversed rows, padded rows", OP_ADD_F4, 2, {64, 128},
     {F4(2, {64, 128}, {-128, 1}), F4(2, {64, 128}, {132, 1}), F4(2, {64, 128})}, 0, {0}, ROWVEC},
    {"row-vector, mask broadcast column, mixed dtypes", OP_ADD_F8, 3, {5, 33, 64},
     {VIEW(CF_INT32, 3, {5, 33, 64}), VIEW(CF_FLOAT32, 1, {64}), VIEW(CF_FLOAT32, 3, {5, 33, 64})},
     1, VIEW(CF_BOOL, 2, {33, 1}), "F(sfx, pfx, 3, B, L, cf_bool, cf_bool, 1)"},
    {"row-vector, uniform input", OP_ADD_F8, 2, {40, 96},
     {VIEW(CF_FLOAT64, 0, {0}), VIEW(CF_FLOAT64, 2, {40, 1}), VIEW(CF_FLOAT64, 2, {40, 96})},
     0, {0}, "F(sfx, pfx, 0, U, L, cf_float64, cf_float64, 8)"},
    {"row-vector, two outputs", OP_DIVMOD, 2, {50, 64},
     {VIEW(CF_INT32, 2, {50, 1}), VIEW(CF_INT32, 2, {1, 64}), VIEW(CF_INT32, 2, {50, 64}),
      VIEW(CF_INT64, 2, {50, 64})}, 0, {0}, "F(sfx, pfx, 3, C, O, cf_int64, cf_int32, 8)"},
    {"tile, transposed input, ragged tiles", OP_ADD_F4, 2, {300, 257},
     {F4(2, {300, 257}), F4(2, {300, 257}, {1, 300}), F4(2, {300, 257})}, 0, {0}, TILE},
    {"tile, transposed input with negative strides, misaligned", OP_ADD_F4, 2, {70, 45},
     {F4(2, {70, 45}, {-1, -70}, 1), F4(2, {70, 45}), F4(2, {70, 45}, {0}, 1)}, 0, {0}, TILE},
    {"tile, batch of transposes", OP_ADD_F4, 3, {3, 70, 45},
     {F4(3, {3, 70, 45}), F4(3, {3, 70, 45}, {3150, 1, 70}), F4(3, {3, 70, 45})}, 0, {0},
     "#define CF_EW_ND 3\n#define CF_EW_I unsigned\n#define CF_EW_O int\n"},
    {"tile, transposed output (inputs staged)", OP_ADD_F4, 2, {96, 64},
     {F4(2, {96, 64}), F4(2, {96, 64}), F4(2, {96, 64}, {1, 96})}, 0, {0}, "sm1["},
    {"tile, transposed mask and scalar, mixed dtypes", OP_ADD_F8, 2, {64, 100},
     {VIEW(CF_INT32, 2, {64, 100}, {1, 64}), SCALAR(CF_FLOAT64, 0.125), VIEW(CF_FLOAT32, 2, {64, 100})},
     1, VIEW(CF_BOOL, 2, {64, 100}, {1, 64}), "if (sm3[tx * "},
    {"tile, broadcast column", OP_ADD_F8, 2, {64, 64},
     {VIEW(CF_FLOAT64, 2, {64, 64}, {1, 64}), VIEW(CF_FLOAT64, 2, {64, 1}), VIEW(CF_FLOAT64, 2, {64, 64})},
     0, {0}, TILE},
    {"tile, two outputs", OP_DIVMOD, 2, {40, 33},
     {VIEW(CF_INT32, 2, {40, 33}, {1, 40}), VIEW(CF_INT32, 2, {40, 33}), VIEW(CF_INT32, 2, {40, 33}),
      VIEW(CF_INT64, 2, {40, 33})}, 0, {0}, TILE},
    {"strided, small transposed extent", OP_ADD_F4, 2, {100, 7},
     {F4(2, {100, 7}), F4(2, {100, 7}, {1, 100}), F4(2, {100, 7})}, 0, {0}, STRIDED},
    {"strided, outputs in different orders", OP_DIVMOD, 2, {40, 33},
     {VIEW(CF_INT32, 2, {40, 33}), VIEW(CF_INT32, 2, {40, 33}), VIEW(CF_INT32, 2, {40, 33}),
      VIEW(CF_INT64, 2, {40, 33}, {1, 40})}, 0, {0}, STRIDED},
    {"strided, every other element", OP_ADD_F4, 2, {33, 50},
     {F4(2, {33, 50}, {100, 2}), F4(2, {33, 50}), F4(2, {33, 50})}, 0, {0}, STRIDED},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

static cf_ufunc *make_divmod(void)
{
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("divmod", 2, 2, &u));
    cf_dtype t[4] = {CF_INT32, CF_INT32, CF_INT32, CF_INT32};
    CHECK_OK(cf_ufunc_add_loop(u, t, DIVMOD_I4, "divmod_i4", NULL, 0, NULL));
    return u;
}

static int case_nin(const tcase *c) { (void)c; return 2; }
static int case_nout(const tcase *c) { return c->op == OP_DIVMOD ? 2 : 1; }

/* Element offset range [lo, hi] of a view (strides in elements, default C order). */
static void view_strides(const tview *v, int64_t *st)
{
    int allzero = 1;
    for (int k = 0; k < v->ndim; k++)
        allzero &= v->strides[k] == 0;
    int64_t acc = 1;
    for (int k = v->ndim - 1; k >= 0; k--) {
        st[k] = allzero ? acc : v->strides[k];
        acc *= v->shape[k];
    }
}

static void view_bounds(const tview *v, int64_t *lo, int64_t *hi)
{
    int64_t st[4];
    view_strides(v, st);
    *lo = *hi = 0;
    for (int k = 0; k < v->ndim; k++) {
        int64_t span = (v->shape[k] - 1) * st[k];
        if (span < 0)
            *lo += span;
        else
            *hi += span;
    }
}

/* Layout of an operand in its buffer: GUARD elements of poison on both sides, then the view. */
enum { GUARD = 16 };

static size_t view_buffer_elems(const tview *v)
{
    int64_t lo, hi;
    view_bounds(v, &lo, &hi);
    return (size_t)(hi - lo + 1 + 2 * GUARD + 4);
}

/* The cf_operand of a view whose buffer starts at `base` (element 0 of the view at
 * base + (GUARD + shift - lo) * itemsize). */
static cf_operand view_operand(const tview *v, uint64_t base)
{
    cf_operand o;
    memset(&o, 0, sizeof o);
    if (v->is_scalar) {
        o.is_scalar = 1;
        o.scalar_dtype = v->dtype;
        if (v->dtype == CF_FLOAT32) {
            float f = (float)v->scalar;
            memcpy(o.scalar, &f, 4);
        } else if (v->dtype == CF_FLOAT64) {
            memcpy(o.scalar, &v->scalar, 8);
        } else {
            int32_t i = (int32_t)v->scalar;
            memcpy(o.scalar, &i, 4);
        }
        return o;
    }
    int64_t lo, hi, st[4];
    view_bounds(v, &lo, &hi);
    view_strides(v, st);
    size_t item = cf_dtype_size(v->dtype);
    cf_array_init_contiguous(&o.array, base + (uint64_t)(GUARD + v->shift - lo) * item, v->dtype,
                             v->ndim, v->shape, 'C', 0);
    for (int k = 0; k < v->ndim; k++)
        o.array.strides[k] = st[k] * (int64_t)item;
    return o;
}

static void case_operands(const tcase *c, const uint64_t *bases, cf_operand *ops, cf_array *where)
{
    int n = case_nin(c) + case_nout(c);
    for (int i = 0; i < n; i++)
        ops[i] = view_operand(&c->v[i], bases[i]);
    if (c->has_where)
        *where = view_operand(&c->where, bases[n]).array;
}

static void test_case_sources(void)
{
    cf_ufunc *add = make_add(), *dm = make_divmod();
    for (int ci = 0; ci < NCASES; ci++) {
        const tcase *c = &CASES[ci];
        uint64_t bases[5];
        for (int i = 0; i < 5; i++)
            bases[i] = 0x10000000ull * (uint64_t)(i + 1);
        cf_operand ops[4];
        cf_array where;
        case_operands(c, bases, ops, &where);
        int before = cf_t_current_failed;
        cf_t_current_failed = 0;
        check_kernel(c->op == OP_DIVMOD ? dm : add, c->op == OP_ADD_F8 ? 1 : 0, ops,
                     c->has_where ? &where : NULL, c->ndim, c->shape, c->want);
        if (cf_t_current_failed)
            fprintf(stderr, "  (case: %s)\n", c->name);
        cf_t_current_failed |= before;
    }
    cf_ufunc_free(add);
    cf_ufunc_free(dm);
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
    /* contiguous: not ready before the first launch compiles the kernel (nothing written),
     * ready after it */
    CHECK_OK(cf_memset8(s, dc, 0xff, n * 4));
    int launched = -1;
    CHECK_OK(cf_ufunc_launch_if_ready(u, 0, s, ops, NULL, 2, shape, &launched, NULL));
    CHECK(launched == 0);
    CHECK_OK(cf_memcpy_dtoh(s, out, dc, n * 4, 1));
    CHECK(out[0] != out[0]); /* still the 0xff bytes: a NaN */
    CHECK_OK(cf_ufunc_launch(u, 0, s, ops, NULL, 2, shape));
    CHECK_OK(cf_memcpy_dtoh(s, out, dc, n * 4, 1));
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += out[i] != a[i] + b[i];
    CHECK(bad == 0);
    CHECK_OK(cf_memset8(s, dc, 0xff, n * 4));
    cf_ufunc_record *rec = malloc(sizeof *rec);
    CHECK_OK(cf_ufunc_launch_if_ready(u, 0, s, ops, NULL, 2, shape, &launched, rec));
    CHECK(launched == 1);
    CHECK(rec->fn != NULL && rec->param_bytes > 0);
    CHECK_OK(cf_memcpy_dtoh(s, out, dc, n * 4, 1));
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += out[i] != a[i] + b[i];
    CHECK(bad == 0);
    /* the record repeats the launch: it reads what the inputs hold now */
    for (size_t i = 0; i < n; i++)
        a[i] = -(float)i;
    CHECK_OK(cf_memcpy_htod(s, da, a, n * 4, 1));
    CHECK_OK(cf_memset8(s, dc, 0xff, n * 4));
    CHECK_OK(cf_ufunc_replay(rec, s));
    CHECK_OK(cf_memcpy_dtoh(s, out, dc, n * 4, 1));
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += out[i] != a[i] + b[i];
    CHECK(bad == 0);
    rec->fn = NULL;
    CHECK(cf_ufunc_replay(rec, s) == CF_ERR_INVALID);
    free(rec);
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

/* ---- the case table on the GPU against a host loop ---------------------------------------- */

static double get_value(cf_dtype dt, const unsigned char *p)
{
    switch (dt) {
    case CF_BOOL: return *p ? 1.0 : 0.0;
    case CF_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case CF_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case CF_FLOAT32: { float v; memcpy(&v, p, 4); return v; }
    case CF_FLOAT64: { double v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

static void put_value(cf_dtype dt, unsigned char *p, double x)
{
    switch (dt) {
    case CF_INT32: { int32_t v = (int32_t)x; memcpy(p, &v, 4); break; }
    case CF_INT64: { int64_t v = (int64_t)x; memcpy(p, &v, 8); break; }
    case CF_FLOAT32: { float v = (float)x; memcpy(p, &v, 4); break; }
    case CF_FLOAT64: memcpy(p, &x, 8); break;
    default: break;
    }
}

/* Input values: exact in every dtype used, never 0 for a divisor (operand 1). */
static void fill_input(cf_dtype dt, unsigned char *buf, size_t n, int operand)
{
    size_t item = cf_dtype_size(dt);
    for (size_t k = 0; k < n; k++) {
        unsigned char *p = buf + k * item;
        if (dt == CF_BOOL) {
            *p = (unsigned char)((k * 7) % 3 != 0);
            continue;
        }
        double x;
        if (dt == CF_INT32 || dt == CF_INT64) {
            x = (double)((int64_t)((k * 7 + (size_t)operand * 5) % 23) - 11);
            if (operand == 1 && x == 0)
                x = 5;
        } else {
            x = (double)((int64_t)((k * 13 + (size_t)operand * 3) % 1000) - 500) * 0.25;
        }
        put_value(dt, p, x);
    }
}

static void host_compute(int op, const double *in, double *out)
{
    if (op == OP_ADD_F4) {
        float r = (float)in[0] + (float)in[1];
        out[0] = r;
    } else if (op == OP_ADD_F8) {
        out[0] = in[0] + in[1];
    } else {
        int32_t a = (int32_t)in[0], b = (int32_t)in[1];
        int32_t q = a / b;
        if (a % b != 0 && ((a < 0) != (b < 0)))
            q--;
        out[0] = q;
        out[1] = a - q * b;
    }
}

/* Run one case: poisoned outputs and guards, then the whole of every output buffer compared with
 * the host loop's (so nothing outside the views may change either). Returns the mismatches. */
static int run_case(cf_stream *s, cf_ufunc *u, int loop, const tcase *c)
{
    int nin = case_nin(c), nout = case_nout(c), nops = nin + nout + (c->has_where ? 1 : 0);
    const tview *views[5];
    for (int i = 0; i < nin + nout; i++)
        views[i] = &c->v[i];
    if (c->has_where)
        views[nin + nout] = &c->where;
    uint64_t dev[5] = {0};
    unsigned char *host[5] = {0}, *want[5] = {0};
    size_t bytes[5] = {0};
    int bad = 0;
    for (int i = 0; i < nops; i++) {
        if (views[i]->is_scalar)
            continue;
        size_t item = cf_dtype_size(views[i]->dtype);
        bytes[i] = view_buffer_elems(views[i]) * item;
        host[i] = malloc(bytes[i]);
        want[i] = malloc(bytes[i]);
        CHECK_OK(cf_mem_alloc(s, bytes[i], &dev[i]));
        int is_out = i >= nin && i < nin + nout;
        if (is_out)
            memset(host[i], 0xa5, bytes[i]);
        else
            fill_input(views[i]->dtype, host[i], bytes[i] / item, i);
        memcpy(want[i], host[i], bytes[i]);
        CHECK_OK(cf_memcpy_htod(s, dev[i], host[i], bytes[i], 1));
    }
    cf_operand ops[4];
    cf_array where;
    case_operands(c, dev, ops, &where);
    /* the host loop over the loop shape, operands broadcast right-aligned */
    int64_t size = 1;
    for (int k = 0; k < c->ndim; k++)
        size *= c->shape[k];
    for (int64_t lin = 0; lin < size; lin++) {
        int64_t idx[4], rem = lin;
        for (int k = c->ndim - 1; k >= 0; k--) {
            idx[k] = rem % c->shape[k];
            rem /= c->shape[k];
        }
        unsigned char *elem[5];
        for (int i = 0; i < nops; i++) {
            const tview *v = views[i];
            if (v->is_scalar) {
                elem[i] = NULL;
                continue;
            }
            int64_t lo, hi, st[4], off = 0;
            view_bounds(v, &lo, &hi);
            view_strides(v, st);
            for (int k = 0; k < v->ndim; k++)
                if (v->shape[k] != 1)
                    off += idx[c->ndim - v->ndim + k] * st[k];
            elem[i] = (i >= nin && i < nin + nout ? want[i] : host[i]) +
                      (GUARD + v->shift - lo + off) * (int64_t)cf_dtype_size(v->dtype);
        }
        if (c->has_where && !*elem[nin + nout])
            continue;
        double in[2], out[2];
        for (int i = 0; i < nin; i++)
            in[i] = views[i]->is_scalar
                        ? (views[i]->dtype == CF_FLOAT32 ? (double)(float)views[i]->scalar
                                                         : views[i]->scalar)
                        : get_value(views[i]->dtype, elem[i]);
        host_compute(c->op, in, out);
        for (int o = 0; o < nout; o++)
            put_value(views[nin + o]->dtype, elem[nin + o], out[o]);
    }
    cf_status st = cf_ufunc_launch(u, loop, s, ops, c->has_where ? &where : NULL, c->ndim, c->shape);
    CHECK_OK(st);
    for (int i = nin; i < nin + nout; i++) {
        CHECK_OK(cf_memcpy_dtoh(s, host[i], dev[i], bytes[i], 1));
        size_t item = cf_dtype_size(views[i]->dtype), first = bytes[i];
        int wrong = 0;
        for (size_t k = 0; k < bytes[i]; k++)
            if (host[i][k] != want[i][k]) {
                if (k < first)
                    first = k;
                wrong++;
            }
        if (wrong || st) {
            fprintf(stderr, "  case '%s': output %d has %d wrong bytes (first at element %zu)\n",
                    c->name, i - nin, wrong, first / item);
            bad += wrong ? wrong : 1;
        }
    }
    for (int i = 0; i < nops; i++) {
        if (dev[i])
            cf_mem_free(s, dev[i]);
        free(host[i]);
        free(want[i]);
    }
    return bad;
}

static void test_cases_on_gpu(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    cf_ufunc *add = make_add(), *dm = make_divmod();
    int bad = 0;
    for (int ci = 0; ci < NCASES; ci++) {
        const tcase *c = &CASES[ci];
        bad += run_case(s, c->op == OP_DIVMOD ? dm : add, c->op == OP_ADD_F8 ? 1 : 0, c) != 0;
    }
    CHECK(bad == 0);
    /* a large broadcast and a large transpose: many tiles and grid-stride iterations */
    static const tcase big[] = {
        {"row-vector, broadcast 2048 x 4096", OP_ADD_F4, 2, {2048, 4096},
         {F4(2, {2048, 1}), F4(2, {1, 4096}), F4(2, {2048, 4096})}, 0, {0}, ROWVEC},
        {"tile, transposed 1500 x 2100", OP_ADD_F4, 2, {1500, 2100},
         {F4(2, {1500, 2100}), F4(2, {1500, 2100}, {1, 1500}), F4(2, {1500, 2100})}, 0, {0}, TILE},
        {"flat, 2^22 + 3", OP_ADD_F4, 1, {(1 << 22) + 3},
         {F4(1, {(1 << 22) + 3}), F4(1, {(1 << 22) + 3}), F4(1, {(1 << 22) + 3})}, 0, {0}, FLAT},
    };
    for (int ci = 0; ci < 3; ci++)
        CHECK(run_case(s, add, 0, &big[ci]) == 0);
    /* an empty loop launches nothing and succeeds */
    int64_t empty[2] = {0, 5};
    cf_operand ops[3];
    for (int i = 0; i < 3; i++)
        ops[i] = arr(CF_FLOAT32, 2, empty, 0, 'C');
    CHECK_OK(cf_ufunc_launch(add, 0, s, ops, NULL, 2, empty));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_ufunc_free(add);
    cf_ufunc_free(dm);
}

int main(void)
{
    RUN(test_can_cast_safe);
    RUN(test_resolve);
    RUN(test_kernel_shapes);
    RUN(test_two_outputs);
    RUN(test_case_sources);
    RUN(test_launch_on_gpu);
    RUN(test_cases_on_gpu);
    return SUMMARY();
}
