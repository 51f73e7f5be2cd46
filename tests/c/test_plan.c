/* Unit tests of the element-wise planner: broadcasting, axis order, coalescing, index width; its
 * two entry points (cf_plan_elementwise, the launch path's cf_plan_small_make) agree, and a plan
 * visits exactly the elements of the loop it was made for. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plan.h"

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

/* ---- random layouts: the two entry points agree, and a plan means its loop ----------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* cf_plan_small_make and cf_plan_elementwise on the same operands: both fail with the same status
 * or agree on every field a launch uses. 0 when they agree, else the message in `why`. */
static int plans_agree(int nops, const cf_array *ops, int ndim, const int64_t *shape, char *why,
                       size_t cap)
{
    const cf_array *ptrs[8];
    for (int i = 0; i < nops; i++)
        ptrs[i] = &ops[i];
    static cf_plan_small a;
    static cf_plan b;
    cf_status sa = cf_plan_small_make(&a, nops, ptrs, ndim, shape);
    cf_status sb = cf_plan_elementwise(&b, nops, ops, ndim, shape);
    /* the small plan refuses what it cannot hold: more than CF_PLAN_SMALL_AXES merged axes */
    if (sb == CF_OK && b.ndim > CF_PLAN_SMALL_AXES)
        sb = CF_ERR_UNSUPPORTED;
    if (sa != sb)
        return snprintf(why, cap, "status %d vs %d", (int)sa, (int)sb);
    if (sa == CF_ERR_UNSUPPORTED && a.ndim != b.ndim)
        return snprintf(why, cap, "unsupported with ndim %d vs %d", a.ndim, b.ndim);
    if (sa)
        return 0;
    if (a.ndim != b.ndim || a.size != b.size || a.index32 != b.index32)
        return snprintf(why, cap, "ndim %d/%d size %lld/%lld index32 %d/%d", a.ndim, b.ndim,
                        (long long)a.size, (long long)b.size, a.index32, b.index32);
    for (int k = 0; k < a.ndim; k++)
        if (a.shape[k] != b.shape[k])
            return snprintf(why, cap, "extent %d", k);
    for (int i = 0; i < nops; i++) {
        if (a.contiguous[i] != b.contiguous[i])
            return snprintf(why, cap, "operand %d's contiguity", i);
        for (int k = 0; k < a.ndim; k++)
            if (a.strides[i][k] != b.strides[i][k])
                return snprintf(why, cap, "operand %d's stride %d", i, k);
    }
    return 0;
}

static int nops_cmp;
static int cmp_tuple(const void *x, const void *y)
{
    const int64_t *a = x, *b = y;
    for (int i = 0; i < nops_cmp; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

/* The offsets (one per operand) of every element of an iteration over `nd` axes of `shape` with
 * the strides of operand i at strides[i * pitch + k], in `out` (size x nops). */
static void offsets(int nops, int nd, const int64_t *shape, const int64_t *strides, int pitch,
                    int64_t size, int64_t *out)
{
    int64_t idx[CF_MAX_DIMS] = {0};
    for (int64_t e = 0; e < size; e++) {
        for (int i = 0; i < nops; i++) {
            int64_t o = 0;
            for (int k = 0; k < nd; k++)
                o += idx[k] * strides[i * pitch + k];
            out[e * nops + i] = o;
        }
        for (int k = nd - 1; k >= 0 && ++idx[k] == shape[k]; k--)
            idx[k] = 0;
    }
}

/* The plan visits the same (offset of operand 0, ..., offset of operand n-1) tuples as the loop
 * it was made for, each once: as sorted lists, equal. */
static int plan_means_loop(int nops, const cf_array *ops, int ndim, const int64_t *shape,
                           const cf_plan *p)
{
    int64_t size = p->size;
    int64_t bstr[8 * CF_MAX_DIMS];
    for (int i = 0; i < nops; i++) {
        int off = ndim - ops[i].ndim;
        for (int k = 0; k < ndim; k++)
            bstr[i * CF_MAX_DIMS + k] =
                k < off || ops[i].shape[k - off] == 1 ? 0 : ops[i].strides[k - off];
    }
    int64_t *want = malloc((size_t)(size ? size : 1) * (size_t)nops * sizeof *want);
    int64_t *got = malloc((size_t)(size ? size : 1) * (size_t)nops * sizeof *got);
    offsets(nops, ndim, shape, bstr, CF_MAX_DIMS, size, want);
    offsets(nops, p->ndim, p->shape, &p->strides[0][0], CF_MAX_DIMS, size, got);
    nops_cmp = nops;
    qsort(want, (size_t)size, (size_t)nops * sizeof *want, cmp_tuple);
    qsort(got, (size_t)size, (size_t)nops * sizeof *got, cmp_tuple);
    int same = memcmp(want, got, (size_t)size * (size_t)nops * sizeof *want) == 0;
    free(want);
    free(got);
    return same;
}

/* Random operands over random loops: C and F orders, broadcast axes, transposes, steps,
 * reversals, zero strides, empty loops, operands that do not broadcast, and (every 50th) more
 * axes than a small plan holds, so the heap fallback is compared too. */
static void test_random_layouts(void)
{
    static const cf_dtype dts[4] = {CF_BOOL, CF_INT16, CF_FLOAT32, CF_COMPLEX128};
    int disagreements = 0, wrong = 0, checked = 0;
    static cf_plan p;
    for (int trial = 0; trial < 3000; trial++) {
        int ndim = (int)rnd(6), nops = 1 + (int)rnd(4);
        int64_t shape[CF_MAX_DIMS];
        if (trial % 50 == 0)
            ndim = 20 + (int)rnd(10); /* more axes than the small plan holds */
        for (int k = 0; k < ndim; k++)
            shape[k] = ndim > 10 ? 1 + rnd(2) : rnd(8) == 0 ? 1 : 1 + rnd(6);
        if (trial % 97 == 0 && ndim)
            shape[rnd((unsigned)ndim)] = 0;
        cf_array ops[4];
        for (int i = 0; i < nops; i++) {
            cf_dtype dt = dts[rnd(4)];
            int nd = ndim ? (int)rnd((unsigned)ndim + 1) : 0;
            if (i == 0)
                nd = ndim;
            int64_t sh[CF_MAX_DIMS];
            for (int k = 0; k < nd; k++) {
                sh[k] = shape[ndim - nd + k];
                if (rnd(5) == 0)
                    sh[k] = 1;                  /* broadcast */
                if (trial % 211 == 0 && rnd(3) == 0)
                    sh[k] = 9;                  /* does not broadcast */
            }
            cf_array_init_contiguous(&ops[i], 0x100000, dt, nd, sh, rnd(2) ? 'C' : 'F', 0);
            int kind = (int)rnd(4);
            if (kind == 1 && nd >= 2) {          /* swap two axes' strides: a transpose */
                int a = (int)rnd((unsigned)nd), b = (int)rnd((unsigned)nd);
                int64_t t = ops[i].strides[a];
                ops[i].strides[a] = ops[i].strides[b];
                ops[i].strides[b] = t;
            } else if (kind == 2 && nd >= 1) {   /* a step or a reversal */
                int a = (int)rnd((unsigned)nd);
                ops[i].strides[a] *= rnd(2) ? -1 : 3;
            } else if (kind == 3 && nd >= 1) {   /* a zero stride */
                ops[i].strides[rnd((unsigned)nd)] = 0;
            }
        }
        char why[256];
        if (plans_agree(nops, ops, ndim, shape, why, sizeof why) && disagreements++ < 5)
            fprintf(stderr, "  trial %d: plans differ: %s\n", trial, why);
        if (cf_plan_elementwise(&p, nops, ops, ndim, shape) == CF_OK && p.size <= 8192) {
            checked++;
            if (!plan_means_loop(nops, ops, ndim, shape, &p) && wrong++ < 5)
                fprintf(stderr, "  trial %d: the plan visits other elements\n", trial);
        }
    }
    CHECK(disagreements == 0);
    CHECK(wrong == 0);
    CHECK(checked > 2000); /* the oracle really ran */

    /* a known answer: a transposed operand keeps two axes, in both entry points */
    int64_t sq[2] = {64, 48};
    cf_array two[2];
    cf_array_init_contiguous(&two[0], 0x1000, CF_FLOAT32, 2, sq, 'C', 0);
    cf_array_init_contiguous(&two[1], 0x1000, CF_FLOAT32, 2, sq, 'F', 0);
    char why[256];
    CHECK(plans_agree(2, two, 2, sq, why, sizeof why) == 0);
    const cf_array *ptrs[2] = {&two[0], &two[1]};
    static cf_plan_small s;
    CHECK_OK(cf_plan_small_make(&s, 2, ptrs, 2, sq));
    CHECK(s.ndim == 2 && s.shape[0] == 64 && s.shape[1] == 48 && s.strides[1][0] == 4);
}

/* The small plan's limits: operands, and more merged axes than it holds (the count reported). */
static void test_small_limits(void)
{
    static cf_plan_small s;
    cf_array a;
    int64_t one[1] = {5};
    cf_array_init_contiguous(&a, 0x1000, CF_FLOAT32, 1, one, 'C', 0);
    const cf_array *ptrs[CF_PLAN_SMALL_OPS + 1];
    for (int i = 0; i <= CF_PLAN_SMALL_OPS; i++)
        ptrs[i] = &a;
    CHECK_OK(cf_plan_small_make(&s, CF_PLAN_SMALL_OPS, ptrs, 1, one));
    CHECK(s.ndim == 1 && s.shape[0] == 5 && s.contiguous[CF_PLAN_SMALL_OPS - 1]);
    CHECK_STATUS(cf_plan_small_make(&s, CF_PLAN_SMALL_OPS + 1, ptrs, 1, one), CF_ERR_INVALID);
    CHECK_STATUS(cf_plan_small_make(NULL, 1, ptrs, 1, one), CF_ERR_INVALID);
    /* 20 axes of extent 2 with strides that never merge (every other element of each axis) */
    int64_t shape[20], strides[20], st = 2;
    for (int k = 19; k >= 0; k--, st *= 4) {
        shape[k] = 2;
        strides[k] = st;
    }
    cf_array w = view(CF_INT8, 20, shape, strides);
    const cf_array *wp[1] = {&w};
    CHECK_STATUS(cf_plan_small_make(&s, 1, wp, 20, shape), CF_ERR_UNSUPPORTED);
    CHECK(s.ndim == 20);
    /* the same loop contiguous: planned on the heap, merged to one axis */
    cf_array c = view(CF_INT8, 20, shape, NULL);
    const cf_array *cp[1] = {&c};
    CHECK_OK(cf_plan_small_make(&s, 1, cp, 20, shape));
    CHECK(s.ndim == 1 && s.shape[0] == 1 << 20 && s.contiguous[0]);
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
    RUN(test_random_layouts);
    RUN(test_small_limits);
    RUN(test_grid);
    return SUMMARY();
}
