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
                          {"complex64", "<c8", 8}, {"complex128", "<c16", 16}};
    for (int i = 0; i < CF_NDTYPES; i++) {
        CHECK(cf_dtype_size((cf_dtype)i) == want[i].size);
        CHECK(strcmp(cf_dtype_name((cf_dtype)i), want[i].name) == 0);
        char ts[8];
        cf_dtype_typestr((cf_dtype)i, ts);
        CHECK(strcmp(ts, want[i].typestr) == 0);
        cf_dtype back = CF_NDTYPES;
        CHECK_OK(cf_dtype_from_typestr(ts, &back));
        CHECK(back == (cf_dtype)i);
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

int main(void)
{
    RUN(test_dtype_table);
    RUN(test_contiguous_init);
    RUN(test_contiguity_flags);
    RUN(test_bounds_and_overlap);
    RUN(test_has_shape);
    return SUMMARY();
}
