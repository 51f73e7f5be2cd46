/* Unit tests of the element-wise planner: broadcasting, axis order, coalescing, index width. */
#include "check.h"

static cf_array view(cf_dtype dt, int ndim, const int64_t *shape, const int64_t *strides_elems)
{
    cf_array a;
    cf_array_init_contiguous(&a, 0x10000, dt, ndim, shape, 'C', 0);
    if (strides_elems)
        for (int i = 0; i < ndim; i++)
            a.strides[i] = strides_elems[i] * (int64_t)cf_dtype_size(dt);
    return a;
}

static void test_broadcast_shapes(void)
{
    int64_t s1[2] = {4096, 1}, s2[2] = {1, 4096}, s3[1] = {7}, out[CF_MAX_DIMS];
    const int64_t *shapes[2] = {s1, s2};
    int nd[2] = {2, 2}, ond = -1;
    CHECK_OK(cf_broadcast_shapes(2, nd, shapes, &ond, out));
    CHECK(ond == 2 && out[0] == 4096 && out[1] == 4096);

    int64_t s4[3] = {2, 1, 3};
    const int64_t *sh2[2] = {s4, s3};
    int nd2[2] = {3, 1};
    CHECK_STATUS(cf_broadcast_shapes(2, nd2, sh2, &ond, out), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(),
                   "operands could not be broadcast together with shapes (2,1,3) (7,) ");

    /* zero extents broadcast with 1 but not with other extents */
    int64_t z[1] = {0}, one[1] = {1}, two[1] = {2};
    const int64_t *sz[2] = {z, one};
    int nd1[2] = {1, 1};
    CHECK_OK(cf_broadcast_shapes(2, nd1, sz, &ond, out));
    CHECK(ond == 1 && out[0] == 0);
    const int64_t *sz2[2] = {z, two};
    CHECK_STATUS(cf_broadcast_shapes(2, nd1, sz2, &ond, out), CF_ERR_INVALID);
    /* 0-d operands */
    int nd0[2] = {0, 1};
    const int64_t *s0[2] = {NULL, two};
    CHECK_OK(cf_broadcast_shapes(2, nd0, s0, &ond, out));
    CHECK(ond == 1 && out[0] == 2);
    CHECK_OK(cf_broadcast_shapes(0, NULL, NULL, &ond, out));
    CHECK(ond == 0);
}

static void test_c_and_f_contiguous_coalesce(void)
{
    int64_t shape[3] = {4, 5, 6};
    cf_array ops[2];
    ops[0] = view(CF_FLOAT32, 3, shape, NULL);
    ops[1] = view(CF_FLOAT64, 3, shape, NULL);
    cf_plan p;
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 3, shape));
    CHECK(p.ndim == 1 && p.shape[0] == 120 && p.size == 120);
    CHECK(p.strides[0][0] == 4 && p.strides[1][0] == 8);
    CHECK(p.all_contiguous && p.index32);

    /* all Fortran-ordered: also one axis */
    cf_array_init_contiguous(&ops[0], 0, CF_FLOAT32, 3, shape, 'F', 0);
    cf_array_init_contiguous(&ops[1], 0, CF_INT16, 3, shape, 'F', 0);
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 3, shape));
    CHECK(p.ndim == 1 && p.shape[0] == 120 && p.all_contiguous);
}

static void test_transposed_input(void)
{
    /* out C-ordered (4,6); input is the transpose of a C (6,4) array: strides (1, 4) elements */
    int64_t shape[2] = {4, 6}, tstr[2] = {1, 4};
    cf_array ops[2];
    ops[0] = view(CF_FLOAT32, 2, shape, NULL);
    ops[1] = view(CF_FLOAT32, 2, shape, tstr);
    cf_plan p;
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 2, shape));
    CHECK(p.ndim == 2 && !p.all_contiguous && p.contiguous[0] == 0);
    /* the output (operand 0) decides: its stride-1 axis is innermost */
    CHECK(p.shape[1] == 6 && p.strides[0][1] == 4 && p.strides[1][1] == 16);
    CHECK(p.perm[0] == 0 && p.perm[1] == 1);
}

static void test_broadcast_operands(void)
{
    int64_t shape[2] = {4096, 4096}, col[2] = {4096, 1}, row[2] = {1, 4096};
    cf_array ops[3];
    ops[0] = view(CF_FLOAT32, 2, shape, NULL);
    ops[1] = view(CF_FLOAT32, 2, col, NULL);
    ops[2] = view(CF_FLOAT32, 2, row, NULL);
    cf_plan p;
    CHECK_OK(cf_plan_elementwise(&p, 3, ops, 2, shape));
    CHECK(p.ndim == 2);
    CHECK(p.strides[1][1] == 0 && p.strides[1][0] == 4);   /* column: steps along the outer axis */
    CHECK(p.strides[2][0] == 0 && p.strides[2][1] == 4);   /* row: steps along the inner axis */
    CHECK(p.index32);
    /* a 1-d operand broadcast over leading axes of a 3-d loop */
    int64_t s3[3] = {3, 4, 5}, s1[1] = {5};
    ops[0] = view(CF_INT32, 3, s3, NULL);
    ops[1] = view(CF_INT32, 1, s1, NULL);
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 3, s3));
    CHECK(p.ndim == 2 && p.shape[0] == 12 && p.shape[1] == 5);
    CHECK(p.strides[1][0] == 0 && p.strides[1][1] == 4);
    /* an operand that does not broadcast */
    int64_t bad[1] = {4};
    ops[1] = view(CF_INT32, 1, bad, NULL);
    CHECK_STATUS(cf_plan_elementwise(&p, 2, ops, 3, s3), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "does not broadcast");
}

static void test_negative_and_sliced(void)
{
    /* a[::-1] against a fresh output: not contiguous, one axis */
    int64_t shape[1] = {100}, neg[1] = {-1}, two[1] = {2};
    cf_array ops[2];
    ops[0] = view(CF_FLOAT64, 1, shape, NULL);
    ops[1] = view(CF_FLOAT64, 1, shape, neg);
    cf_plan p;
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 1, shape));
    CHECK(p.ndim == 1 && p.strides[1][0] == -8 && !p.contiguous[1] && p.contiguous[0]);
    ops[1] = view(CF_FLOAT64, 1, shape, two);
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 1, shape));
    CHECK(p.strides[1][0] == 16 && !p.all_contiguous);
    /* a (10, 20) view of rows of a wider (10, 32) array: rows do not merge */
    int64_t s2[2] = {10, 20}, st[2] = {32, 1};
    ops[0] = view(CF_FLOAT32, 2, s2, NULL);
    ops[1] = view(CF_FLOAT32, 2, s2, st);
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 2, s2));
    CHECK(p.ndim == 2 && p.shape[0] == 10 && p.shape[1] == 20);
}

static void test_degenerate(void)
{
    cf_array ops[2];
    cf_plan p;
    /* 0-d */
    ops[0] = view(CF_FLOAT32, 0, NULL, NULL);
    ops[1] = view(CF_FLOAT32, 0, NULL, NULL);
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 0, NULL));
    CHECK(p.ndim == 0 && p.size == 1 && p.all_contiguous && p.index32);
    /* empty */
    int64_t shape[2] = {0, 5};
    ops[0] = view(CF_FLOAT32, 2, shape, NULL);
    ops[1] = view(CF_FLOAT32, 2, shape, NULL);
    CHECK_OK(cf_plan_elementwise(&p, 2, ops, 2, shape));
    CHECK(p.ndim == 0 && p.size == 0);
    /* extent-1 axes vanish */
    int64_t ones[3] = {1, 7, 1};
    ops[0] = view(CF_INT8, 3, ones, NULL);
    CHECK_OK(cf_plan_elementwise(&p, 1, ops, 3, ones));
    CHECK(p.ndim == 1 && p.shape[0] == 7 && p.perm[0] == 1);
    CHECK_STATUS(cf_plan_elementwise(&p, CF_MAX_OPERANDS + 1, ops, 3, ones), CF_ERR_INVALID);
    CHECK_STATUS(cf_plan_elementwise(NULL, 1, ops, 3, ones), CF_ERR_INVALID);
}

static void test_index_width(void)
{
    cf_array ops[1];
    cf_plan p;
    int64_t small[1] = {((int64_t)1 << 29) - 1};  /* float32: reach just under 2^31 bytes */
    ops[0] = view(CF_FLOAT32, 1, small, NULL);
    CHECK_OK(cf_plan_elementwise(&p, 1, ops, 1, small));
    CHECK(p.index32);
    int64_t big[1] = {(int64_t)1 << 29};          /* reach exactly 2^31 bytes */
    ops[0] = view(CF_FLOAT32, 1, big, NULL);
    CHECK_OK(cf_plan_elementwise(&p, 1, ops, 1, big));
    CHECK(!p.index32);
    int64_t huge[1] = {(int64_t)1 << 31};         /* more elements than int32 */
    ops[0] = view(CF_INT8, 1, huge, NULL);
    CHECK_OK(cf_plan_elementwise(&p, 1, ops, 1, huge));
    CHECK(!p.index32);
}

static void test_grid(void)
{
    CHECK(cf_plan_grid(0, 256, 1000) == 1);
    CHECK(cf_plan_grid(1, 256, 1000) == 1);
    CHECK(cf_plan_grid(257, 256, 1000) == 2);
    CHECK(cf_plan_grid((int64_t)1 << 40, 256, 1056) == 1056);
    CHECK(cf_plan_grid((int64_t)1 << 40, 256, 0) == 0x7fffffff);
}

int main(void)
{
    RUN(test_broadcast_shapes);
    RUN(test_c_and_f_contiguous_coalesce);
    RUN(test_transposed_input);
    RUN(test_broadcast_operands);
    RUN(test_negative_and_sliced);
    RUN(test_degenerate);
    RUN(test_index_width);
    RUN(test_grid);
    return SUMMARY();
}
