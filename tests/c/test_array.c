/* Unit tests of the pure parts: dtypes and strided views (no GPU). */
#include <stdint.h>

#include "check.h"

static void test_dtype_table(void)
{
    static const struct {
        const char *name, *typestr;
        size_t size;
    } want[CF_NDTYPES] = {{"bool", "|b1", 1},     {"int8", "|i1", 1},     {"int16", "<i2", 2},
                          {"int32", "<i4", 4},    {"int64", "<i8", 8},    {"uint8", "|u1", 1},
                          {"uint16", "<u2", 2},   {"uint32", "<u4", 4},   {"uint64", "<u8", 8},
                          {"float16", "<f2", 2},  {"float32", "<f4", 4},  {"float64", "<f8", 8},
                          {"complex64", "<c8", 8}, {"complex128", "<c16", 16},
                          {"bfloat16", "<V2", 2}};
    for (int i = 0; i < CF_NDTYPES; i++) {
        CHECK(cf_dtype_size((cf_dtype)i) == want[i].size);
        CHECK(strcmp(cf_dtype_name((cf_dtype)i), want[i].name) == 0);
        char ts[8];
        cf_dtype_typestr((cf_dtype)i, ts);
        CHECK(strcmp(ts, want[i].typestr) == 0);
        cf_dtype back = CF_NDTYPES;
        if (i == CF_BFLOAT16) /* "<V2" is any 2-byte void: never read back as bfloat16 */
            CHECK_STATUS(cf_dtype_from_typestr(ts, &back), CF_ERR_TYPE);
        else
            CHECK_OK(cf_dtype_from_typestr(ts, &back));
        CHECK(i == CF_BFLOAT16 || back == (cf_dtype)i);
        CHECK_OK(cf_dtype_from_name(want[i].name, &back));
        CHECK(back == (cf_dtype)i);
        CHECK(cf_dtype_ctype((cf_dtype)i) != NULL);
    }
    cf_dtype dt;
    CHECK_OK(cf_dtype_from_name("f4", &dt));
    CHECK(dt == CF_FLOAT32);
    CHECK_OK(cf_dtype_from_name("?", &dt));
    CHECK(dt == CF_BOOL);
    CHECK_STATUS(cf_dtype_from_name("object", &dt), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "object");
    CHECK_STATUS(cf_dtype_from_typestr(">f4", &dt), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "little-endian");
    CHECK_STATUS(cf_dtype_from_typestr("<M8", &dt), CF_ERR_TYPE);
    CHECK_STATUS(cf_dtype_from_typestr(NULL, &dt), CF_ERR_INVALID);
    CHECK(cf_dtype_size((cf_dtype)99) == 0);
    CHECK(strcmp(cf_dtype_name((cf_dtype)-1), "invalid") == 0);
}

static void test_contiguous_init(void)
{
    cf_array a;
    int64_t shape[3] = {2, 3, 4};
    CHECK_OK(cf_array_init_contiguous(&a, 0x1000, CF_FLOAT32, 3, shape, 'C', 0));
    CHECK(a.strides[0] == 48 && a.strides[1] == 16 && a.strides[2] == 4);
    CHECK(cf_array_size(&a) == 24 && cf_array_nbytes(&a) == 96);
    CHECK(cf_array_is_c_contiguous(&a) && !cf_array_is_f_contiguous(&a));
    CHECK_OK(cf_array_init_contiguous(&a, 0x1000, CF_FLOAT64, 3, shape, 'F', 0));
    CHECK(a.strides[0] == 8 && a.strides[1] == 16 && a.strides[2] == 48);
    CHECK(!cf_array_is_c_contiguous(&a) && cf_array_is_f_contiguous(&a));

    int64_t bad[2] = {3, -1};
    CHECK_STATUS(cf_array_init_contiguous(&a, 0, CF_INT8, 2, bad, 'C', 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "negative dimension -1");
    int64_t huge[2] = {INT64_MAX / 2, 4};
    CHECK_STATUS(cf_array_init_contiguous(&a, 0, CF_INT8, 2, huge, 'C', 0), CF_ERR_RANGE);
    CHECK_STATUS(cf_array_init_contiguous(&a, 0, CF_INT8, CF_MAX_DIMS + 1, shape, 'C', 0),
                 CF_ERR_INVALID);
    CHECK_STATUS(cf_array_init_contiguous(&a, 0, CF_INT8, 1, shape, 'X', 0), CF_ERR_INVALID);
    CHECK_STATUS(cf_array_init_contiguous(&a, 0, (cf_dtype)77, 1, shape, 'C', 0), CF_ERR_TYPE);

    /* 0-d: one element, contiguous both ways. */
    CHECK_OK(cf_array_init_contiguous(&a, 0, CF_INT32, 0, NULL, 'C', 0));
    CHECK(cf_array_size(&a) == 1 && cf_array_is_c_contiguous(&a) && cf_array_is_f_contiguous(&a));
    /* Empty arrays with a zero extent and a huge other extent are fine. */
    int64_t empty[2] = {0, INT64_MAX / 4};
    CHECK_OK(cf_array_init_contiguous(&a, 0, CF_INT8, 2, empty, 'C', 0));
    CHECK(cf_array_size(&a) == 0);
}

static void test_contiguity_flags(void)
{
    cf_array a;
    int64_t shape[2] = {4, 1};
    CHECK_OK(cf_array_init_contiguous(&a, 0, CF_FLOAT32, 2, shape, 'C', 0));
    a.strides[1] = 12345; /* extent 1: its stride does not matter, as in NumPy */
    CHECK(cf_array_is_c_contiguous(&a) && cf_array_is_f_contiguous(&a));
    a.strides[0] = 8; /* a[::2] of a column */
    CHECK(!cf_array_is_c_contiguous(&a));
    a.strides[0] = -4;
    CHECK(!cf_array_is_c_contiguous(&a));
}

static void test_bounds_and_overlap(void)
{
    cf_array a, b;
    int64_t shape[1] = {10};
    CHECK_OK(cf_array_init_contiguous(&a, 1000, CF_FLOAT32, 1, shape, 'C', 0));
    int64_t lo, hi;
    cf_array_byte_bounds(&a, &lo, &hi);
    CHECK(lo == 0 && hi == 40);
    /* reversed view: data at the last element, stride -4 */
    b = a;
    b.data = 1036;
    b.strides[0] = -4;
    cf_array_byte_bounds(&b, &lo, &hi);
    CHECK(lo == -36 && hi == 4);
    CHECK(cf_array_may_overlap(&a, &b));
    /* disjoint: the next 10 elements */
    b = a;
    b.data = 1040;
    CHECK(!cf_array_may_overlap(&a, &b));
    b.data = 1036;
    CHECK(cf_array_may_overlap(&a, &b));
    /* other device never overlaps */
    b.device = 1;
    CHECK(!cf_array_may_overlap(&a, &b));
    /* empty never overlaps */
    b = a;
    b.shape[0] = 0;
    CHECK(!cf_array_may_overlap(&a, &b));
}

/* One view for the overlap table: 1-d or 2-d, any strides, element (0, 0) at `data`. */
typedef struct {
    uint64_t data;
    cf_dtype dtype;
    int ndim, device;
    int64_t shape[2], strides[2];
} ov_view;

static cf_array ov_make(const ov_view *v)
{
    cf_array a;
    memset(&a, 0, sizeof a);
    a.data = v->data;
    a.dtype = v->dtype;
    a.ndim = v->ndim;
    a.device = v->device;
    for (int k = 0; k < v->ndim; k++) {
        a.shape[k] = v->shape[k];
        a.strides[k] = v->strides[k];
    }
    return a;
}

/* NumPy's rule for an input and an output of one kernel (cf_array_needs_copy): what an output
 * that aliases, partly overlaps or reverses its input needs, with in-place access allowed
 * (element-wise kernels, scans) and not (gufuncs with core dimensions, reductions). The base is
 * ten float32 at 0x1000 (bytes [0x1000, 0x1028)). */
static void test_needs_copy(void)
{
#define F4 CF_FLOAT32
    static const struct {
        const char *what;
        ov_view in, out;
        int same, copy_in_place, copy_strict; /* cf_array_same_view; needs_copy(.., 1); (.., 0) */
    } cases[] = {
        {"the same view", {0x1000, F4, 1, 0, {10}, {4}}, {0x1000, F4, 1, 0, {10}, {4}}, 1, 0, 1},
        {"disjoint, adjacent", {0x1000, F4, 1, 0, {10}, {4}}, {0x1028, F4, 1, 0, {10}, {4}}, 0, 0, 0},
        {"shifted by one element", {0x1000, F4, 1, 0, {10}, {4}}, {0x1004, F4, 1, 0, {10}, {4}}, 0, 1, 1},
        {"last byte shared", {0x1000, F4, 1, 0, {10}, {4}}, {0x1024, F4, 1, 0, {10}, {4}}, 0, 1, 1},
        {"reversed view of the input", {0x1000, F4, 1, 0, {10}, {4}}, {0x1024, F4, 1, 0, {10}, {-4}}, 0, 1, 1},
        {"reversed, disjoint below", {0x1000, F4, 1, 0, {10}, {4}}, {0x0ffc, F4, 1, 0, {10}, {-4}}, 0, 0, 0},
        {"reversed, one element shared", {0x1000, F4, 1, 0, {10}, {4}}, {0x1000, F4, 1, 0, {10}, {-4}}, 0, 1, 1},
        {"both reversed, same view", {0x1024, F4, 1, 0, {10}, {-4}}, {0x1024, F4, 1, 0, {10}, {-4}}, 1, 0, 1},
        {"other dtype, same bytes", {0x1000, F4, 1, 0, {10}, {4}}, {0x1000, CF_INT32, 1, 0, {10}, {4}}, 0, 1, 1},
        {"other device", {0x1000, F4, 1, 0, {10}, {4}}, {0x1000, F4, 1, 1, {10}, {4}}, 0, 0, 0},
        {"empty output", {0x1000, F4, 1, 0, {10}, {4}}, {0x1000, F4, 1, 0, {0}, {4}}, 0, 0, 0},
        {"empty input", {0x1000, F4, 1, 0, {0}, {4}}, {0x1000, F4, 1, 0, {10}, {4}}, 0, 0, 0},
        /* the bounds test is conservative: interleaved halves share no element but are copied */
        {"even and odd elements", {0x1000, F4, 1, 0, {5}, {8}}, {0x1004, F4, 1, 0, {5}, {8}}, 0, 1, 1},
        /* a broadcast view repeats elements: in place is not element-wise any more */
        {"same broadcast view", {0x1000, F4, 1, 0, {10}, {0}}, {0x1000, F4, 1, 0, {10}, {0}}, 1, 1, 1},
        {"broadcast input, one element", {0x1000, F4, 1, 0, {10}, {0}}, {0x1000, F4, 1, 0, {1}, {4}}, 0, 1, 1},
        /* 2-d: a (2, 5) C array, its first column as the output of a reduction over axis 1 */
        {"column of the input", {0x1000, F4, 2, 0, {2, 5}, {20, 4}}, {0x1000, F4, 1, 0, {2}, {20}}, 0, 1, 1},
        {"transposed view", {0x1000, F4, 2, 0, {2, 5}, {20, 4}}, {0x1000, F4, 2, 0, {5, 2}, {4, 20}}, 0, 1, 1},
        /* extent-1 axes: their strides do not matter (NumPy's rule) */
        {"extent-1 axis, other stride", {0x1000, F4, 2, 0, {1, 10}, {40, 4}}, {0x1000, F4, 2, 0, {1, 10}, {0, 4}}, 1, 0, 1},
        {"other shape, same bytes", {0x1000, F4, 2, 0, {2, 5}, {20, 4}}, {0x1000, F4, 1, 0, {10}, {4}}, 0, 1, 1},
        /* addresses at the top of the 64-bit range do not wrap */
        {"top of the address space", {UINT64_MAX - 39, F4, 1, 0, {10}, {4}}, {0x1000, F4, 1, 0, {10}, {4}}, 0, 0, 0},
    };
#undef F4
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        cf_array in = ov_make(&cases[t].in), out = ov_make(&cases[t].out);
        int same = cf_array_same_view(&in, &out), ip = cf_array_needs_copy(&in, &out, 1),
            strict = cf_array_needs_copy(&in, &out, 0);
        if (same != cases[t].same || ip != cases[t].copy_in_place || strict != cases[t].copy_strict)
            fprintf(stderr, "  case '%s': same %d (want %d), in place %d (want %d), strict %d "
                    "(want %d)\n", cases[t].what, same, cases[t].same, ip,
                    cases[t].copy_in_place, strict, cases[t].copy_strict);
        CHECK(same == cases[t].same);
        CHECK(ip == cases[t].copy_in_place);
        CHECK(strict == cases[t].copy_strict);
        /* same view is symmetric; overlap is */
        CHECK(cf_array_same_view(&out, &in) == same);
        CHECK(cf_array_may_overlap(&out, &in) == cf_array_may_overlap(&in, &out));
    }
}

static void test_has_shape(void)
{
    cf_array a;
    int64_t shape[2] = {3, 4}, other[2] = {3, 5};
    CHECK_OK(cf_array_init_contiguous(&a, 0, CF_INT32, 2, shape, 'C', 0));
    CHECK(cf_array_has_shape(&a, 2, shape));
    CHECK(!cf_array_has_shape(&a, 2, other));
    CHECK(!cf_array_has_shape(&a, 1, shape));
    CHECK_OK(cf_array_init_contiguous(&a, 0, CF_INT32, 0, NULL, 'C', 0));
    CHECK(cf_array_has_shape(&a, 0, NULL));
}

static void test_kind_order_and_weak(void)
{
    /* NumPy's same_kind order: bool < unsigned < signed < float < complex */
    CHECK(cf_dtype_kind_order(CF_BOOL) == 0 && cf_dtype_kind_order(CF_UINT64) == 1);
    CHECK(cf_dtype_kind_order(CF_INT8) == 2 && cf_dtype_kind_order(CF_FLOAT16) == 3);
    CHECK(cf_dtype_kind_order(CF_COMPLEX64) == 4 && cf_dtype_kind_order(CF_NDTYPES) == -1);
    CHECK(cf_can_cast(CF_UINT8, CF_INT8, CF_CAST_SAME_KIND));
    CHECK(!cf_can_cast(CF_INT8, CF_UINT64, CF_CAST_SAME_KIND));
    CHECK(!cf_can_cast(CF_FLOAT64, CF_INT64, CF_CAST_SAME_KIND));
    /* NEP 50 weak scalars: their kind or a higher one, never bool; int reaches unsigned too */
    static const struct { cf_dtype weak, to; int ok; } cases[] = {
        {CF_INT64, CF_UINT8, 1},    {CF_INT64, CF_INT8, 1},      {CF_INT64, CF_FLOAT32, 1},
        {CF_INT64, CF_BOOL, 0},     {CF_BOOL, CF_BOOL, 0},       {CF_BOOL, CF_UINT8, 1},
        {CF_FLOAT64, CF_INT64, 0},  {CF_FLOAT64, CF_FLOAT16, 1}, {CF_FLOAT64, CF_COMPLEX64, 1},
        {CF_COMPLEX128, CF_FLOAT64, 0}, {CF_COMPLEX128, CF_COMPLEX64, 1},
        {CF_NDTYPES, CF_COMPLEX64, 0}, {CF_INT64, CF_NDTYPES, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(cf_weak_reaches(cases[i].weak, cases[i].to) == cases[i].ok);
    CHECK(cf_dtype_valid(CF_COMPLEX128) && !cf_dtype_valid(CF_NDTYPES) && !cf_dtype_valid(-1));
    /* bfloat16: ml_dtypes' np.can_cast (safe, same_kind), copied from ml_dtypes 0.5 */
    static const struct { cf_dtype from, to; int safe, same_kind; } bf[] = {
        {CF_BOOL, CF_BFLOAT16, 1, 1},     {CF_INT8, CF_BFLOAT16, 1, 1},    {CF_UINT8, CF_BFLOAT16, 1, 1},
        {CF_INT16, CF_BFLOAT16, 0, 1},    {CF_UINT64, CF_BFLOAT16, 0, 1},  {CF_FLOAT16, CF_BFLOAT16, 0, 1},
        {CF_FLOAT32, CF_BFLOAT16, 0, 1},  {CF_COMPLEX64, CF_BFLOAT16, 0, 1},
        {CF_BFLOAT16, CF_FLOAT16, 0, 0},  {CF_BFLOAT16, CF_FLOAT32, 1, 1}, {CF_BFLOAT16, CF_FLOAT64, 1, 1},
        {CF_BFLOAT16, CF_COMPLEX64, 1, 1}, {CF_BFLOAT16, CF_INT64, 0, 0},  {CF_BFLOAT16, CF_BOOL, 0, 0},
        {CF_BFLOAT16, CF_BFLOAT16, 1, 1},
    };
    for (size_t i = 0; i < sizeof bf / sizeof bf[0]; i++) {
        CHECK(cf_can_cast(bf[i].from, bf[i].to, CF_CAST_SAFE) == bf[i].safe);
        CHECK(cf_can_cast(bf[i].from, bf[i].to, CF_CAST_SAME_KIND) == bf[i].same_kind);
    }
    CHECK(cf_weak_reaches(CF_FLOAT64, CF_BFLOAT16) && cf_weak_reaches(CF_INT64, CF_BFLOAT16));
}

int main(void)
{
    RUN(test_dtype_table);
    RUN(test_kind_order_and_weak);
    RUN(test_contiguous_init);
    RUN(test_contiguity_flags);
    RUN(test_bounds_and_overlap);
    RUN(test_needs_copy);
    RUN(test_has_shape);
    return SUMMARY();
}
