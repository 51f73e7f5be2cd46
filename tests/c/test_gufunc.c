/* Unit tests of the gufunc engine: layouts, loops, shape binding (NumPy's rules and messages),
 * axes=, the launch plan (which operands are staged through shared memory, tile sizes, padding),
 * and the generated kernels, each compiled with NVRTC (no GPU needed). Launches against host
 * loops run behind NEED_GPU(). */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "cufunc/gufunc.h"
#include "diagnostics.h"

static const char *ROWSUM_F4 =
    "#include \"cufunc/runtime.cuh\"\n"
    "__device__ void rowsum_f4(cf_array_ref<cf_float32, 1> x, cf_array_ref<cf_float32, 1> out) {\n"
    "    cf_float32 s = 0.0f;\n"
    "    for (long long i = 0; i < x.shape[0]; i++) s = s + *(cf_float32 *)(x.data + i * x.strides[0]);\n"
    "    *(cf_float32 *)out.data = s;\n}\n";

/* out[0] += sum(x): reads the output before writing it (so out= contents must be loaded) */
static const char *ACCUM_F4 =
    "#include \"cufunc/runtime.cuh\"\n"
    "__device__ void accum_f4(cf_array_ref<cf_float32, 1> x, cf_array_ref<cf_float32, 1> out) {\n"
    "    for (long long i = 0; i < x.shape[0]; i++)\n"
    "        *(cf_float32 *)out.data = *(cf_float32 *)out.data + *(cf_float32 *)(x.data + i * x.strides[0]);\n}\n";

static const char *MATMUL_F4 =
    "#include \"cufunc/runtime.cuh\"\n"
    "__device__ void matmul_f4(cf_array_ref<cf_float32, 2> a, cf_array_ref<cf_float32, 2> b,\n"
    "                          cf_array_ref<cf_float32, 2> c) {\n"
    "    for (long long i = 0; i < a.shape[0]; i++)\n"
    "        for (long long j = 0; j < b.shape[1]; j++) {\n"
    "            cf_float32 s = 0.0f;\n"
    "            for (long long k = 0; k < a.shape[1]; k++)\n"
    "                s = s + *(cf_float32 *)(a.data + i * a.strides[0] + k * a.strides[1]) *\n"
    "                        *(cf_float32 *)(b.data + k * b.strides[0] + j * b.strides[1]);\n"
    "            *(cf_float32 *)(c.data + i * c.strides[0] + j * c.strides[1]) = s;\n"
    "        }\n}\n";

/* '(n),()->(n)' with the scalar by value: y = x * a */
static const char *SCALE_F8 =
    "#include \"cufunc/runtime.cuh\"\n"
    "__device__ void scale_f8(cf_array_ref<cf_float64, 1> x, cf_float64 a, cf_array_ref<cf_float64, 1> y) {\n"
    "    for (long long i = 0; i < x.shape[0]; i++)\n"
    "        *(cf_float64 *)(y.data + i * y.strides[0]) = *(cf_float64 *)(x.data + i * x.strides[0]) * a;\n}\n";

static const char *OPTS[1] = {"--fmad=false"};

static cf_gufunc *make(const char *name, const char *layout, const cf_dtype *types,
                       const int *arg_ndim, const char *src, const char *fn)
{
    cf_gufunc *g = NULL;
    CHECK_OK(cf_gufunc_create(name, layout, &g));
    if (g)
        CHECK_OK(cf_gufunc_add_loop(g, types, arg_ndim, src, fn, OPTS, 1, NULL));
    return g;
}

static cf_gufunc *make_rowsum(void)
{
    cf_dtype t[2] = {CF_FLOAT32, CF_FLOAT32};
    int nd[2] = {1, 1};
    return make("rowsum", "(n)->()", t, nd, ROWSUM_F4, "rowsum_f4");
}

static cf_gufunc *make_matmul(void)
{
    cf_dtype t[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    int nd[3] = {2, 2, 2};
    return make("matmul", "(m,n),(n,p)->(m,p)", t, nd, MATMUL_F4, "matmul_f4");
}

/* c = a x b over 3-vectors of C type `ct` (the body reads all of a and b before it writes c) */
static cf_gufunc *make_cross(cf_dtype dt, const char *ct)
{
    static char src[1024];
    snprintf(src, sizeof src,
             "#include \"cufunc/runtime.cuh\"\n"
             "#define E(v, i) (*(%s *)(v.data + (i) * v.strides[0]))\n"
             "__device__ void cross(cf_array_ref<%s, 1> a, cf_array_ref<%s, 1> b,\n"
             "                      cf_array_ref<%s, 1> c) {\n"
             "    %s x = E(a, 1) * E(b, 2) - E(a, 2) * E(b, 1);\n"
             "    %s y = E(a, 2) * E(b, 0) - E(a, 0) * E(b, 2);\n"
             "    %s z = E(a, 0) * E(b, 1) - E(a, 1) * E(b, 0);\n"
             "    E(c, 0) = x; E(c, 1) = y; E(c, 2) = z;\n}\n",
             ct, ct, ct, ct, ct, ct, ct);
    cf_dtype t[3] = {dt, dt, dt};
    int nd[3] = {1, 1, 1};
    return make("cross", "(n),(n)->(n)", t, nd, src, "cross");
}

static cf_operand arr(cf_dtype dt, int ndim, const int64_t *shape, uint64_t data)
{
    cf_operand o;
    memset(&o, 0, sizeof o);
    cf_array_init_contiguous(&o.array, data, dt, ndim, shape, 'C', 0);
    return o;
}

static cf_operand scalar_f8(double v)
{
    cf_operand o;
    memset(&o, 0, sizeof o);
    o.is_scalar = 1;
    o.scalar_dtype = CF_FLOAT64;
    memcpy(o.scalar, &v, 8);
    return o;
}

/* ---- layouts and loops --------------------------------------------------------------------- */

static void test_create(void)
{
    cf_gufunc *g = NULL;
    CHECK_OK(cf_gufunc_create("mm", " ( m , n ),(n,p)-> ( m,p ) ", &g));
    CHECK(cf_gufunc_nin(g) == 2 && cf_gufunc_nout(g) == 1);
    CHECK(strcmp(cf_gufunc_signature(g), "(m,n),(n,p)->(m,p)") == 0);
    CHECK(strcmp(cf_gufunc_name(g), "mm") == 0);
    CHECK(cf_gufunc_layout(g)->nnames == 3);
    cf_gufunc_free(g);
    g = NULL;
    CHECK_OK(cf_gufunc_create("f", "(),(3)->(),()", &g));
    CHECK(strcmp(cf_gufunc_signature(g), "(),(3)->(),()") == 0);
    CHECK(cf_gufunc_nout(g) == 2);
    cf_gufunc_free(g);
    g = NULL;
    CHECK_STATUS(cf_gufunc_create("bad", "(m,n)->(m", &g), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "^");
    CHECK(g == NULL);
    CHECK_STATUS(cf_gufunc_create("bad", "(m,n)>(m)", &g), CF_ERR_INVALID);
    CHECK_STATUS(cf_gufunc_create("bad", NULL, &g), CF_ERR_INVALID);
    CHECK_STATUS(cf_gufunc_create("bad", "(n)->()", NULL), CF_ERR_INVALID);
    cf_gufunc_free(NULL);
    CHECK(cf_gufunc_nin(NULL) == 0 && cf_gufunc_nloops(NULL) == 0);
}

static void test_add_loop(void)
{
    cf_gufunc *g = NULL;
    CHECK_OK(cf_gufunc_create("scale", "(n),()->(n)", &g));
    cf_dtype t[3] = {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64};
    int ok[3] = {1, 0, 1}, ok_array_scalar[3] = {1, 1, 1};
    int bad_in[3] = {2, 0, 1}, bad_scalar[3] = {0, 0, 1}, bad_out[3] = {1, 0, 0};
    CHECK_STATUS(cf_gufunc_add_loop(g, t, bad_in, SCALE_F8, "scale_f8", OPTS, 1, NULL), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "argument 1 is declared a 2-d array but has 1 core dimension");
    CHECK_STATUS(cf_gufunc_add_loop(g, t, bad_scalar, SCALE_F8, "scale_f8", OPTS, 1, NULL),
                 CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "argument 1 is declared a scalar");
    CHECK_STATUS(cf_gufunc_add_loop(g, t, bad_out, SCALE_F8, "scale_f8", OPTS, 1, NULL),
                 CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "argument 3 is declared a scalar");
    int idx = -1;
    CHECK_OK(cf_gufunc_add_loop(g, t, ok, SCALE_F8, "scale_f8", OPTS, 1, &idx));
    CHECK(idx == 0 && cf_gufunc_nloops(g) == 1);
    CHECK_STATUS(cf_gufunc_add_loop(g, t, ok_array_scalar, SCALE_F8, "scale_f8", OPTS, 1, NULL),
                 CF_ERR_INVALID); /* same input types again */
    cf_dtype h[3] = {CF_FLOAT64, (cf_dtype)CF_NDTYPES, CF_FLOAT64}; /* float16 is a loop type now */
    CHECK_STATUS(cf_gufunc_add_loop(g, h, ok, SCALE_F8, "x", NULL, 0, NULL), CF_ERR_TYPE);
    cf_dtype got[3];
    int gnd[3];
    CHECK_OK(cf_gufunc_loop_types(g, 0, got, gnd));
    CHECK(got[1] == CF_FLOAT64 && gnd[0] == 1 && gnd[1] == 0 && gnd[2] == 1);
    CHECK_STATUS(cf_gufunc_loop_types(g, 1, got, gnd), CF_ERR_INVALID);
    cf_gufunc_free(g);

    /* a scalar output can only be an array: '()' declared T[:] (Numba's out[0]) */
    g = NULL;
    CHECK_OK(cf_gufunc_create("rowsum", "(n)->()", &g));
    cf_dtype t2[2] = {CF_FLOAT32, CF_FLOAT32};
    int numba_way[2] = {1, 1}, two_d_out[2] = {1, 2};
    CHECK_OK(cf_gufunc_add_loop(g, t2, numba_way, ROWSUM_F4, "rowsum_f4", OPTS, 1, NULL));
    cf_dtype t3[2] = {CF_FLOAT64, CF_FLOAT64};
    CHECK_STATUS(cf_gufunc_add_loop(g, t3, two_d_out, ROWSUM_F4, "rowsum_f4", OPTS, 1, NULL),
                 CF_ERR_TYPE);
    cf_gufunc_free(g);
}

static void test_resolve(void)
{
    cf_gufunc *g = NULL;
    CHECK_OK(cf_gufunc_create("rowsum", "(n)->()", &g));
    cf_dtype f4[2] = {CF_FLOAT32, CF_FLOAT32}, f8[2] = {CF_FLOAT64, CF_FLOAT64};
    int nd[2] = {1, 1};
    CHECK_OK(cf_gufunc_add_loop(g, f4, nd, ROWSUM_F4, "rowsum_f4", OPTS, 1, NULL));
    CHECK_OK(cf_gufunc_add_loop(g, f8, nd, ROWSUM_F4, "rowsum_f4", OPTS, 1, NULL));
    int loop = -1;
    cf_dtype in;
    in = CF_FLOAT64;
    CHECK_OK(cf_gufunc_resolve(g, &in, NULL, &loop));
    CHECK(loop == 1);
    in = CF_INT16; /* int16 -> float32 is safe */
    CHECK_OK(cf_gufunc_resolve(g, &in, NULL, &loop));
    CHECK(loop == 0);
    in = CF_INT64; /* only float64 holds it */
    CHECK_OK(cf_gufunc_resolve(g, &in, NULL, &loop));
    CHECK(loop == 1);
    unsigned char weak = 1;
    in = CF_FLOAT64; /* a Python float takes the first float loop */
    CHECK_OK(cf_gufunc_resolve(g, &in, &weak, &loop));
    CHECK(loop == 0);
    in = CF_COMPLEX64;
    CHECK_STATUS(cf_gufunc_resolve(g, &in, NULL, &loop), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "gufunc 'rowsum' not supported for the input types (complex64)");
    CHECK_CONTAINS(cf_last_error(), "(float64) -> (float64)");
    cf_gufunc_free(g);
}

/* ---- shapes ------------------------------------------------------------------------------- */

static void test_bind(void)
{
    cf_gufunc *g = make_matmul();
    cf_gufunc_shapes sh;
    int64_t a_shape[3] = {5, 3, 4}, b_shape[2] = {4, 2};
    cf_operand ops[3];
    ops[0] = arr(CF_FLOAT32, 3, a_shape, 0x1000);
    ops[1] = arr(CF_FLOAT32, 2, b_shape, 0x2000);
    CHECK_OK(cf_gufunc_bind(g, ops, NULL, &sh));
    CHECK(sh.loop_ndim == 1 && sh.loop_shape[0] == 5);
    CHECK(sh.dim_size[0] == 3 && sh.dim_size[1] == 4 && sh.dim_size[2] == 2);
    int nd = 0;
    int64_t full[CF_MAX_DIMS];
    CHECK_OK(cf_gufunc_operand_shape(g, &sh, 2, &nd, full));
    CHECK(nd == 3 && full[0] == 5 && full[1] == 3 && full[2] == 2);

    /* loop dimensions broadcast: (2,1) with (5,) -> (2,5) */
    int64_t a4[4] = {2, 1, 3, 4}, b3[3] = {5, 4, 2};
    ops[0] = arr(CF_FLOAT32, 4, a4, 0x1000);
    ops[1] = arr(CF_FLOAT32, 3, b3, 0x2000);
    CHECK_OK(cf_gufunc_bind(g, ops, NULL, &sh));
    CHECK(sh.loop_ndim == 2 && sh.loop_shape[0] == 2 && sh.loop_shape[1] == 5);

    /* core dimensions that disagree: argument 2's 'n' */
    int64_t b_bad[2] = {5, 2};
    ops[0] = arr(CF_FLOAT32, 3, a_shape, 0x1000);
    ops[1] = arr(CF_FLOAT32, 2, b_bad, 0x2000);
    CHECK_STATUS(cf_gufunc_bind(g, ops, NULL, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "matmul: input argument 2 has a mismatch in its core dimension "
                   "0 ('n'), with gufunc signature (m,n),(n,p)->(m,p) (size 5 is different from 4");
    CHECK_CONTAINS(cf_last_error(), "argument 1");

    /* not enough dimensions */
    int64_t v[1] = {4};
    ops[1] = arr(CF_FLOAT32, 1, v, 0x2000);
    CHECK_STATUS(cf_gufunc_bind(g, ops, NULL, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "input argument 2 does not have enough dimensions (has 1, "
                   "gufunc core with signature (m,n),(n,p)->(m,p) requires 2)");

    /* loop dimensions that do not broadcast */
    int64_t a2[3] = {2, 3, 4}, b2[3] = {3, 4, 2};
    ops[0] = arr(CF_FLOAT32, 3, a2, 0x1000);
    ops[1] = arr(CF_FLOAT32, 3, b2, 0x2000);
    CHECK_STATUS(cf_gufunc_bind(g, ops, NULL, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "could not be broadcast");
    CHECK_CONTAINS(cf_last_error(), "(2,) (3,)");

    /* a given output: its loop dimensions must be the broadcast shape, its core agree */
    unsigned char has_out[1] = {1};
    int64_t c_good[3] = {5, 3, 2}, c_loop_bad[3] = {1, 3, 2}, c_core_bad[3] = {5, 3, 7};
    ops[0] = arr(CF_FLOAT32, 3, a_shape, 0x1000);
    ops[1] = arr(CF_FLOAT32, 2, b_shape, 0x2000);
    ops[2] = arr(CF_FLOAT32, 3, c_good, 0x3000);
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    ops[2] = arr(CF_FLOAT32, 3, c_loop_bad, 0x3000);
    CHECK_STATUS(cf_gufunc_bind(g, ops, has_out, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "output argument 3 has loop dimensions (1,), which do not "
                   "match the broadcast loop dimensions (5,)");
    ops[2] = arr(CF_FLOAT32, 3, c_core_bad, 0x3000);
    CHECK_STATUS(cf_gufunc_bind(g, ops, has_out, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "output argument 3 has a mismatch in its core dimension 1 ('p')");
    /* an output larger than the inputs' loop: the inputs broadcast to it (as NumPy) */
    int64_t c_big[4] = {6, 5, 3, 2};
    ops[2] = arr(CF_FLOAT32, 4, c_big, 0x3000);
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK(sh.loop_ndim == 2 && sh.loop_shape[0] == 6 && sh.loop_shape[1] == 5);
    cf_gufunc_free(g);

    /* fixed sizes, and an output dimension that no input defines */
    g = NULL;
    CHECK_OK(cf_gufunc_create("norm3", "(3)->()", &g));
    int64_t x4[2] = {10, 4};
    ops[0] = arr(CF_FLOAT32, 2, x4, 0x1000);
    CHECK_STATUS(cf_gufunc_bind(g, ops, NULL, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "size 4 is different from the fixed size 3");
    cf_gufunc_free(g);
    g = NULL;
    CHECK_OK(cf_gufunc_create("expand", "(n)->(n,k)", &g));
    int64_t x5[1] = {5};
    ops[0] = arr(CF_FLOAT32, 1, x5, 0x1000);
    CHECK_STATUS(cf_gufunc_bind(g, ops, NULL, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "output argument 2 has core dimension 1 ('k') unspecified");
    CHECK_CONTAINS(cf_last_error(), "out=");
    int64_t o57[2] = {5, 7};
    ops[1] = arr(CF_FLOAT32, 2, o57, 0x2000);
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK(sh.loop_ndim == 0 && sh.dim_size[1] == 7);
    cf_gufunc_free(g);
    g = NULL;
    CHECK_OK(cf_gufunc_create("three", "()->(3)", &g));
    ops[0] = scalar_f8(1.0);
    CHECK_OK(cf_gufunc_bind(g, ops, NULL, &sh));
    CHECK(sh.loop_ndim == 0 && sh.dim_size[0] == 3);
    cf_gufunc_free(g);

    /* scalars have no dimensions */
    g = make_rowsum();
    ops[0] = scalar_f8(2.0);
    CHECK_STATUS(cf_gufunc_bind(g, ops, NULL, &sh), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "input argument 1 does not have enough dimensions (has 0");
    cf_gufunc_free(g);
}

static void test_axes_perm(void)
{
    int perm[CF_MAX_DIMS];
    int ax[2] = {0, -1};
    CHECK_OK(cf_gufunc_axes_perm(1, 3, 2, ax, 2, perm));
    CHECK(perm[0] == 1 && perm[1] == 0 && perm[2] == 2);
    int ax1[1] = {-2};
    CHECK_OK(cf_gufunc_axes_perm(1, 4, 1, ax1, 1, perm));
    CHECK(perm[0] == 0 && perm[1] == 1 && perm[2] == 3 && perm[3] == 2);
    CHECK_OK(cf_gufunc_axes_perm(2, 2, 0, NULL, 0, perm));
    CHECK(perm[0] == 0 && perm[1] == 1);
    int oob[1] = {3};
    CHECK_STATUS(cf_gufunc_axes_perm(2, 3, 1, oob, 1, perm), CF_ERR_RANGE);
    CHECK_CONTAINS(cf_last_error(), "axis 3 is out of bounds for array of dimension 3");
    int rep[2] = {1, -2};
    CHECK_STATUS(cf_gufunc_axes_perm(1, 3, 2, rep, 2, perm), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "repeated");
    CHECK_STATUS(cf_gufunc_axes_perm(1, 3, 2, ax1, 1, perm), CF_ERR_INVALID);
    CHECK_STATUS(cf_gufunc_axes_perm(1, 1, 2, ax, 2, perm), CF_ERR_INVALID);
}

/* ---- the launch plan (the loop scheduler) ---------------------------------------------------- */

static void plan_of(cf_gufunc *g, cf_operand *ops, const unsigned char *has_out, unsigned fresh,
                    cf_gufunc_plan *p)
{
    cf_gufunc_shapes sh;
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK_OK(cf_gufunc_plan_launch(g, 0, ops, &sh, fresh, p));
}

static void test_plan_rowsum(void)
{
    cf_gufunc *g = make_rowsum();
    cf_gufunc_plan p;
    int64_t xs[2] = {65536, 1024}, os[1] = {65536};
    cf_operand ops[2] = {arr(CF_FLOAT32, 2, xs, 0x10000000), arr(CF_FLOAT32, 1, os, 0x40000000)};
    unsigned char has_out[1] = {1};
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.n == 65536 && p.loop_ndim == 1 && p.loop_shape[0] == 65536);
    CHECK(p.loop_strides[0][0] == 4096 && p.loop_strides[1][0] == 4);
    CHECK(p.index32);
    /* the 4 KiB rows are staged: 8 per block (8 * 4112 bytes fit 48 KiB) copied by 128 threads,
     * 16-byte copies, rows padded to an odd number of 16-byte units (a tile of at most 8 rows:
     * aligned rows, no bank conflicts); the scalar output is written in place (adjacent across
     * threads) */
    CHECK(p.kind[0] == 'G' && p.kind[1] == 'A');
    CHECK(p.staged && p.tile == 8 && p.block_threads == 128);
    CHECK(p.row_bytes[0] == 4096 && p.pitch[0] == 4112 && p.copy_width[0] == 16);
    CHECK(p.smem_bytes <= CF_GUFUNC_STAGE_BUDGET && p.smem_bytes >= 8 * 4112);
    CHECK(p.core_ndim[1] == 1 && p.core_shape[1][0] == 1);

    /* rows 64 KiB long cannot be staged CF_GUFUNC_MIN_TILE at a time: direct access */
    int64_t longrows[2] = {64, 16384}, os64[1] = {64};
    ops[0] = arr(CF_FLOAT32, 2, longrows, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 1, os64, 0x20000000);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[0] == 'A' && !p.staged && p.block_threads == 128);

    /* a misaligned base: element copies instead of 16-byte vectors */
    ops[0] = arr(CF_FLOAT32, 2, xs, 0x10000004);
    ops[1] = arr(CF_FLOAT32, 1, os, 0x40000000);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[0] == 'G' && p.copy_width[0] == 4);

    /* rows read with a stride (every other column): not compact, direct */
    ops[0] = arr(CF_FLOAT32, 2, xs, 0x10000000);
    ops[0].array.shape[1] = 512;
    ops[0].array.strides[1] = 8;
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[0] == 'A' && !p.staged);
    CHECK(p.core_strides[0][0] == 8 && p.core_shape[0][0] == 512);

    /* a single iteration: nothing to coalesce */
    int64_t one[1] = {1024};
    ops[0] = arr(CF_FLOAT32, 1, one, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 0, NULL, 0x20000000);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.n == 1 && p.loop_ndim == 0 && !p.staged);

    /* an empty loop */
    int64_t empty[2] = {0, 8}, oe[1] = {0};
    ops[0] = arr(CF_FLOAT32, 2, empty, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 1, oe, 0x20000000);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.n == 0);
    cf_gufunc_free(g);
}

/* The plans before flat tiles (CUFUNC_GU_SMALL=0): test_plan_small has the flat ones. */
static void test_plan_matmul(void)
{
    int was = cf_gufunc_set_small_staging(0);
    cf_gufunc *g = make_matmul();
    cf_gufunc_plan p;
    int64_t s[3] = {1 << 20, 4, 4};
    cf_operand ops[3] = {arr(CF_FLOAT32, 3, s, 0x10000000), arr(CF_FLOAT32, 3, s, 0x20000000),
                         arr(CF_FLOAT32, 3, s, 0x30000000)};
    unsigned char has_out[1] = {1};
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[0] == 'G' && p.kind[1] == 'G' && p.kind[2] == 'G');
    /* 3 rows of 64 bytes padded to 68 (17 words: odd), 4-byte base offsets: 128 per block */
    CHECK(p.pitch[0] == 68 && p.copy_width[0] == 16 && p.tile == 128 && p.block_threads == 128);
    CHECK(p.load_output[2] == 0);
    CHECK(p.smem_bytes == 3 * 68 * 128 + 3 * 4 * 128);
    /* out= given (not fresh): the body may read it, so it is loaded first */
    plan_of(g, ops, has_out, 0, &p);
    CHECK(p.load_output[2] == 1);

    /* b broadcast along the loop: one copy per block ('U') */
    int64_t b2[2] = {4, 4};
    ops[1] = arr(CF_FLOAT32, 2, b2, 0x20000000);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[0] == 'G' && p.kind[1] == 'U' && p.kind[2] == 'G');
    CHECK(p.loop_strides[1][0] == 0);
    CHECK(p.tile == 256 && p.block_threads == 256);
    CHECK(p.smem_bytes == 64 + 2 * 68 * 256 + 2 * 4 * 256);
    CHECK(p.smem_offset[1] == 0 && p.smem_offset[0] == 64);

    /* a transposed (Fortran-ordered) a: its core is not compact: read in place */
    ops[0] = arr(CF_FLOAT32, 3, s, 0x10000000);
    cf_array_init_contiguous(&ops[0].array, 0x10000000, CF_FLOAT32, 3, s, 'F', 0);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[0] == 'A' && p.kind[1] == 'U' && p.kind[2] == 'G');

    /* the output is the same memory as an input (in place): neither is staged */
    ops[0] = arr(CF_FLOAT32, 3, s, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 3, s, 0x20000000);
    ops[2] = arr(CF_FLOAT32, 3, s, 0x10000000);
    plan_of(g, ops, has_out, 0, &p);
    CHECK(p.kind[0] == 'A' && p.kind[1] == 'G' && p.kind[2] == 'A');

    /* an output broadcast over the loop is refused */
    ops[2] = arr(CF_FLOAT32, 3, s, 0x30000000);
    ops[2].array.strides[0] = 0;
    cf_gufunc_shapes sh;
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK_STATUS(cf_gufunc_plan_launch(g, 0, ops, &sh, 1, &p), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "zero stride");

    /* more than 2^31 bytes reached: 64-bit offsets */
    int64_t big[3] = {(int64_t)1 << 26, 4, 4};
    ops[0] = arr(CF_FLOAT32, 3, big, 0x100000000ull);
    ops[1] = arr(CF_FLOAT32, 2, b2, 0x20000000);
    ops[2] = arr(CF_FLOAT32, 3, big, 0x300000000ull);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(!p.index32 && p.staged && p.tile == 256);
    CHECK(p.smem_bytes == 64 + 2 * 68 * 256 + 2 * 8 * 256);

    /* the dtype of a view must be the loop's */
    ops[0] = arr(CF_FLOAT64, 3, s, 0x10000000);
    ops[2] = arr(CF_FLOAT32, 3, s, 0x30000000);
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK_STATUS(cf_gufunc_plan_launch(g, 0, ops, &sh, 1, &p), CF_ERR_TYPE);
    cf_gufunc_free(g);
    cf_gufunc_set_small_staging(was);
}

static void test_plan_scalars(void)
{
    cf_gufunc *g = NULL;
    CHECK_OK(cf_gufunc_create("scale", "(n),()->(n)", &g));
    cf_dtype t[3] = {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64};
    int nd[3] = {1, 0, 1};
    CHECK_OK(cf_gufunc_add_loop(g, t, nd, SCALE_F8, "scale_f8", OPTS, 1, NULL));
    cf_gufunc_plan p;
    int64_t xs[2] = {1000, 3}, as[1] = {1000};
    unsigned char has_out[1] = {1};
    cf_operand ops[3] = {arr(CF_FLOAT64, 2, xs, 0x1000), scalar_f8(2.5),
                         arr(CF_FLOAT64, 2, xs, 0x100000)};
    int was = cf_gufunc_set_small_staging(0);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[1] == 'S');
    CHECK(p.kind[0] == 'A' && p.kind[2] == 'A'); /* 24-byte rows: under a sector, not staged */
    cf_gufunc_set_small_staging(1);
    plan_of(g, ops, has_out, 1, &p); /* ... unless the tile is a contiguous block (flat) */
    CHECK(p.kind[0] == 'G' && p.flat[0] && p.kind[1] == 'S' && p.kind[2] == 'G' && p.flat[2]);
    CHECK(p.pitch[0] == 24 && p.copy_width[0] == 16 && p.tile == 128 && p.block_threads == 128);
    cf_gufunc_set_small_staging(was);
    /* a per-iteration scalar taken by value from memory; any dtype (converted in the kernel) */
    ops[1] = arr(CF_INT32, 1, as, 0x200000);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.kind[1] == 'V');
    char *src = NULL;
    cf_gufunc_shapes sh;
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK_OK(cf_gufunc_kernel_source(g, 0, ops, &sh, 1, &src));
    /* by value, converted from int32 (gu_kernel.cuh: CF_GU_ARG_V with X = 1) */
    CHECK_CONTAINS(src, "F(1, V, I, 0, cf_float64, cf_int32, 1)");
    cf_free_buffer(src);
    cf_gufunc_free(g);
}

/* ---- generated kernels compile --------------------------------------------------------------- */

static void check_kernel(cf_gufunc *g, cf_operand *ops, const unsigned char *has_out,
                         unsigned fresh, const char *want)
{
    cf_gufunc_shapes sh;
    char *src = NULL;
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK_OK(cf_gufunc_kernel_source(g, 0, ops, &sh, fresh, &src));
    if (!src)
        return;
    CHECK_CONTAINS(src, want);
    /* the kernel is the header, instantiated by the key's macros: the source writes none itself */
    CHECK_CONTAINS(src, "#include \"cufunc/gu_kernel.cuh\"\n");
    CHECK(strstr(src, "__global__") == NULL && strstr(src, "cf_gu_copy") == NULL);
    void *image = NULL;
    size_t size = 0;
    int is_ptx = 0;
    cf_status st = cf_compile_source(src, OPTS, 1, 9, 0, &image, &size, &is_ptx);
    if (st != CF_OK)
        fprintf(stderr, "%s\n", cf_last_error());
    CHECK(st == CF_OK && size > 0);
    cf_free_buffer(image);
    cf_free_buffer(src);
}

static void test_kernels_compile(void)
{
    unsigned char has_out[1] = {1};
    cf_gufunc *g = make_rowsum();
    int64_t xs[2] = {65536, 1024}, os[1] = {65536};
    cf_operand ops[3] = {arr(CF_FLOAT32, 2, xs, 0x10000000), arr(CF_FLOAT32, 1, os, 0x40000000)};
    check_kernel(g, ops, has_out, 1, "#define CF_GU_STAGE_0 4096, 4112, 0, 16, 1, ");
    check_kernel(g, ops, has_out, 1, "F(0, G, I, 1, cf_float32, cf_float32, 0)");
    ops[0] = arr(CF_FLOAT32, 2, xs, 0x10000004); /* element copies */
    check_kernel(g, ops, has_out, 1, "#define CF_GU_STAGE_0 4096, 4100, 0, 4, 1, ");
    int64_t longrows[2] = {64, 16384}, os64[1] = {64};
    ops[0] = arr(CF_FLOAT32, 2, longrows, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 1, os64, 0x20000000);
    check_kernel(g, ops, has_out, 1, "F(0, A, I, 1, cf_float32, cf_float32, 0)");
    cf_gufunc_free(g);

    int was = cf_gufunc_set_small_staging(0); /* the plans before flat tiles */
    g = make_matmul();
    int64_t s[3] = {1 << 20, 4, 4}, b2[2] = {4, 4};
    ops[0] = arr(CF_FLOAT32, 3, s, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 3, s, 0x20000000);
    ops[2] = arr(CF_FLOAT32, 3, s, 0x30000000);
    /* the output staged, written back (a fresh output is not read in first: LD 0) */
    check_kernel(g, ops, has_out, 1, "F(2, G, O, 2, cf_float32, cf_float32, 0)");
    check_kernel(g, ops, has_out, 1, "#define CF_GU_STAGE_2 64, 68, 17408, 16, 0, ");
    check_kernel(g, ops, has_out, 0, "#define CF_GU_STAGE_2 64, 68, 17408, 16, 1, ");
    ops[1] = arr(CF_FLOAT32, 2, b2, 0x20000000);
    check_kernel(g, ops, has_out, 1, "F(1, U, I, 2, cf_float32, cf_float32, 0)");
    check_kernel(g, ops, has_out, 1, "#define CF_GU_STAGE_1 64, 64, 0, 16, 0, 0, 0, (4, 4)\n");
    int64_t big[3] = {(int64_t)1 << 26, 4, 4};
    ops[0] = arr(CF_FLOAT32, 3, big, 0x100000000ull);
    ops[2] = arr(CF_FLOAT32, 3, big, 0x300000000ull);
    check_kernel(g, ops, has_out, 1, "#define CF_GU_I unsigned long long\n#define CF_GU_O long long\n");
    cf_array_init_contiguous(&ops[0].array, 0x10000000, CF_FLOAT32, 3, s, 'F', 0);
    ops[2] = arr(CF_FLOAT32, 3, s, 0x30000000);
    check_kernel(g, ops, has_out, 1, "F(0, A, I, 2, cf_float32, cf_float32, 0)");
    /* several loop axes that do not merge (a transposed loop): offsets through divisions */
    int64_t s4[4] = {64, 32, 4, 4};
    ops[0] = arr(CF_FLOAT32, 4, s4, 0x10000000);
    ops[0].array.strides[0] = 64;
    ops[0].array.strides[1] = 64 * 64;
    ops[1] = arr(CF_FLOAT32, 4, s4, 0x20000000);
    ops[2] = arr(CF_FLOAT32, 4, s4, 0x30000000);
    check_kernel(g, ops, has_out, 1, "#define CF_GU_NOPS 3\n#define CF_GU_ND 2\n");
    cf_gufunc_free(g);
    cf_gufunc_set_small_staging(was);

    /* scalar parameters: by value and as a one-element array */
    cf_gufunc *sc = NULL;
    CHECK_OK(cf_gufunc_create("scale", "(n),()->(n)", &sc));
    cf_dtype t[3] = {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64};
    int by_value[3] = {1, 0, 1};
    CHECK_OK(cf_gufunc_add_loop(sc, t, by_value, SCALE_F8, "scale_f8", OPTS, 1, NULL));
    int64_t x3[2] = {100, 16};
    ops[0] = arr(CF_FLOAT64, 2, x3, 0x1000);
    ops[1] = scalar_f8(3.0);
    ops[1].scalar_dtype = CF_INT64; /* converted in the kernel */
    ops[2] = arr(CF_FLOAT64, 2, x3, 0x100000);
    check_kernel(sc, ops, has_out, 1, "F(1, S, I, 0, cf_float64, cf_int64, 0)");
    cf_gufunc_free(sc);
    static const char *SCALE_ARR =
        "#include \"cufunc/runtime.cuh\"\n"
        "__device__ void scale_arr(cf_array_ref<cf_float64, 1> x, cf_array_ref<cf_float64, 1> a, cf_array_ref<cf_float64, 1> y) {\n"
        "    for (long long i = 0; i < x.shape[0]; i++)\n"
        "        *(cf_float64 *)(y.data + i * y.strides[0]) = *(cf_float64 *)(x.data + i * x.strides[0]) * *(cf_float64 *)a.data;\n}\n";
    sc = NULL;
    CHECK_OK(cf_gufunc_create("scale", "(n),()->(n)", &sc));
    int as_array[3] = {1, 1, 1};
    CHECK_OK(cf_gufunc_add_loop(sc, t, as_array, SCALE_ARR, "scale_arr", OPTS, 1, NULL));
    ops[1] = scalar_f8(3.0);
    check_kernel(sc, ops, has_out, 1, "F(1, R, I, 1, cf_float64, cf_float64, 0)");
    cf_gufunc_free(sc);
}

/* ---- on the GPU ---------------------------------------------------------------------------- */

static float frand(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) & 0xffff) / 65536.0f - 0.5f;
}

/* ---- small cores: flat tiles ------------------------------------------------------------------ */

/* kinds "GGA", flats "110" (per operand), then the tile and the block */
static void check_plan(const char *what, const cf_gufunc_plan *p, const char *kinds,
                       const char *flats, int tile, int threads)
{
    int ok = p->tile == tile && p->block_threads == threads && p->staged == (tile > 0);
    for (int i = 0; kinds[i]; i++)
        ok &= p->kind[i] == kinds[i] && p->flat[i] == (flats[i] == '1');
    if (!ok) {
        fprintf(stderr, "  %s: kinds ", what);
        for (int i = 0; kinds[i]; i++)
            fprintf(stderr, "%c%d", p->kind[i], p->flat[i]);
        fprintf(stderr, " tile %d threads %d (want %s %s %d %d)\n", p->tile, p->block_threads,
                kinds, flats, tile, threads);
    }
    CHECK(ok);
}

static void test_plan_small(void)
{
    int was = cf_gufunc_set_small_staging(1);
    cf_gufunc *g = make_cross(CF_FLOAT32, "cf_float32");
    cf_gufunc_plan p;
    unsigned char has_out[1] = {1};
    int64_t s[2] = {1 << 20, 3};
    cf_operand ops[3] = {arr(CF_FLOAT32, 2, s, 0x10000000), arr(CF_FLOAT32, 2, s, 0x20000000),
                         arr(CF_FLOAT32, 2, s, 0x30000000)};
    /* fresh output: all three flat, packed 12-byte rows, 16-byte copies; 512 rows in 18 KiB */
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross fresh", &p, "GGG", "111", 512, 256);
    CHECK(p.pitch[0] == 12 && p.copy_width[0] == 16 && p.copy_width[2] == 16);
    CHECK(p.smem_bytes == 3 * 12 * 512 && p.load_output[2] == 0);
    /* out= given: the body may read it or write part of it, so it is read in, by each thread
     * into registers (load_output 2: the compiler drops the reads a body makes dead) */
    plan_of(g, ops, has_out, 0, &p);
    check_plan("cross out=", &p, "GGG", "111", 512, 256);
    CHECK(p.smem_bytes == 3 * 12 * 512 && p.load_output[2] == 2);
    /* a[1:]: 12 bytes off 16-byte alignment (and off 8): element copies for that operand only */
    ops[0].array.data += 12;
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross a[1:]", &p, "GGG", "111", 512, 256);
    CHECK(p.copy_width[0] == 4 && p.copy_width[1] == 16);
    ops[0].array.data = 0x10000000 + 24; /* a[2:]: 8-byte aligned, 16 not */
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.copy_width[0] == 8);
    /* every other row (a[::2]): the tile is not a block: in place, as before */
    ops[0] = arr(CF_FLOAT32, 2, s, 0x10000000);
    ops[0].array.strides[0] = 24;
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross a[::2]", &p, "AGG", "011", 1024, 256);
    /* reversed rows (a[::-1]) */
    ops[0].array.strides[0] = -12;
    ops[0].array.data = 0x10000000 + 12 * ((1 << 20) - 1);
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross a[::-1]", &p, "AGG", "011", 1024, 256);
    /* F-ordered a: the core is not compact (the loop axis is the fast one: already coalesced) */
    cf_array_init_contiguous(&ops[0].array, 0x10000000, CF_FLOAT32, 2, s, 'F', 0);
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross F-ordered a", &p, "AGG", "011", 1024, 256);
    /* in place (out is a): neither is staged; b still is */
    ops[0] = arr(CF_FLOAT32, 2, s, 0x10000000);
    ops[2] = arr(CF_FLOAT32, 2, s, 0x10000000);
    plan_of(g, ops, has_out, 0, &p);
    check_plan("cross in place", &p, "AGA", "010", 1024, 256);
    /* out overlapping a shifted by one row */
    ops[2].array.data += 12;
    ops[2].array.shape[0] = (1 << 20) - 1;
    ops[0].array.shape[0] = (1 << 20) - 1;
    ops[1].array.shape[0] = (1 << 20) - 1;
    plan_of(g, ops, has_out, 0, &p);
    CHECK(p.kind[0] == 'A' && p.kind[2] == 'A');
    /* smaller loops: the tile shrinks to the loop (at least CF_GUFUNC_MIN_TILE, 128 threads),
     * and tiles over 128 iterations only while the loop makes 1024 of them */
    int64_t sizes[7] = {5, 255, 256, 257, 1 << 18, 1 << 19, (1 << 19) - 1};
    int64_t tiles[7] = {8, 128, 128, 128, 256, 512, 256};
    for (int k = 0; k < 7; k++) {
        int64_t sk[2] = {sizes[k], 3};
        for (int o = 0; o < 3; o++)
            ops[o] = arr(CF_FLOAT32, 2, sk, 0x10000000 * (uint64_t)(o + 1));
        plan_of(g, ops, has_out, 1, &p);
        check_plan("cross small n", &p, "GGG", "111", (int)tiles[k], tiles[k] <= 128 ? 128 : 256);
    }
    /* one iteration: nothing to stage */
    int64_t one[1] = {3};
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT32, 1, one, 0x10000000 * (uint64_t)(o + 1));
    plan_of(g, ops, has_out, 1, &p);
    CHECK(!p.staged && p.kind[0] == 'A');
    /* a 2-D loop with b broadcast over the outer axis: a and out are blocks, b is not */
    int64_t s3[3] = {64, 16384, 3}, sb[2] = {16384, 3};
    ops[0] = arr(CF_FLOAT32, 3, s3, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 2, sb, 0x20000000);
    ops[2] = arr(CF_FLOAT32, 3, s3, 0x30000000);
    plan_of(g, ops, has_out, 1, &p);
    CHECK(p.loop_ndim == 2);
    check_plan("cross b broadcast", &p, "GAG", "101", 1024, 256);
    /* switched off: as before (cores under 32 bytes in place) */
    cf_gufunc_set_small_staging(0);
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT32, 2, s, 0x10000000 * (uint64_t)(o + 1));
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross off", &p, "AAA", "000", 0, 128);
    cf_gufunc_set_small_staging(1);
    cf_gufunc_free(g);

    /* float64 (24-byte rows) and int32 (12) */
    g = make_cross(CF_FLOAT64, "cf_float64");
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT64, 2, s, 0x10000000 * (uint64_t)(o + 1));
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross float64", &p, "GGG", "111", 256, 256);
    CHECK(p.pitch[0] == 24 && p.copy_width[0] == 16);
    cf_gufunc_free(g);
    g = make_cross(CF_INT32, "cf_int32");
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_INT32, 2, s, 0x10000000 * (uint64_t)(o + 1));
    plan_of(g, ops, has_out, 1, &p);
    check_plan("cross int32", &p, "GGG", "111", 512, 256);
    cf_gufunc_free(g);

    /* 4x4 matmul: flat, rows padded to 17 words (the body's column reads of B stay free of bank
     * conflicts), element copies (cp.async of 4 bytes), no base-offset tables */
    g = make_matmul();
    int64_t m[3] = {1 << 20, 4, 4};
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT32, 3, m, 0x10000000 * (uint64_t)(o + 1));
    plan_of(g, ops, has_out, 1, &p);
    check_plan("matmul fresh", &p, "GGG", "111", 128, 128);
    CHECK(p.pitch[0] == 68 && p.copy_width[0] == 4 && p.smem_bytes == 3 * 68 * 128);
    plan_of(g, ops, has_out, 0, &p); /* out= given: read in (the body may read it) */
    check_plan("matmul out=", &p, "GGG", "111", 128, 128);
    CHECK(p.load_output[2] == 2); /* 64 bytes: into registers */
    /* larger out= cores are read in by the tile's copy: (8, 8) float32 */
    int64_t m8[3] = {1 << 16, 8, 8};
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT32, 3, m8, 0x10000000 * (uint64_t)(o + 1));
    plan_of(g, ops, has_out, 0, &p);
    check_plan("matmul 8x8 out=", &p, "GGG", "111", 32, 128);
    CHECK(p.load_output[2] == 1 && p.pitch[0] == 260);
    cf_gufunc_free(g);

    /* (2)->(2) and (3)->() float32 */
    static const char *SWAP2 =
        "#include \"cufunc/runtime.cuh\"\n"
        "__device__ void swap2(cf_array_ref<cf_float32, 1> x, cf_array_ref<cf_float32, 1> y) {\n"
        "    cf_float32 a = *(cf_float32 *)x.data, b = *(cf_float32 *)(x.data + x.strides[0]);\n"
        "    *(cf_float32 *)y.data = b; *(cf_float32 *)(y.data + y.strides[0]) = a;\n}\n";
    cf_dtype t2[2] = {CF_FLOAT32, CF_FLOAT32};
    int nd2[2] = {1, 1};
    g = make("swap2", "(n)->(n)", t2, nd2, SWAP2, "swap2");
    int64_t v2[2] = {1 << 20, 2};
    ops[0] = arr(CF_FLOAT32, 2, v2, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 2, v2, 0x20000000);
    plan_of(g, ops, has_out, 1, &p);
    check_plan("(2)->(2)", &p, "GG", "11", 1024, 256);
    CHECK(p.pitch[0] == 8 && p.copy_width[0] == 16 && p.smem_bytes == 2 * 8 * 1024);
    cf_gufunc_free(g);
    g = make_rowsum();
    int64_t v3[2] = {1 << 20, 3}, o3[1] = {1 << 20};
    ops[0] = arr(CF_FLOAT32, 2, v3, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 1, o3, 0x20000000);
    plan_of(g, ops, has_out, 1, &p);
    check_plan("(3)->()", &p, "GA", "10", 1024, 256);
    /* the row sum's 4 KiB rows keep their plan (not flat: 16-byte copies, 8 rows per tile) */
    int64_t xs[2] = {65536, 1024}, os[1] = {65536};
    ops[0] = arr(CF_FLOAT32, 2, xs, 0x10000000);
    ops[1] = arr(CF_FLOAT32, 1, os, 0x40000000);
    plan_of(g, ops, has_out, 1, &p);
    check_plan("row sum", &p, "GA", "00", 8, 128);
    CHECK(p.pitch[0] == 4112 && p.copy_width[0] == 16);
    cf_gufunc_free(g);
    cf_gufunc_set_small_staging(was);
}

/* The flat kernels compile (NVRTC, sm_90): packed and padded rows, 16/8/4-byte and 1-byte units,
 * several iterations per thread, a fresh and a loaded output, 64-bit offsets. */
static void test_small_kernels_compile(void)
{
    int was = cf_gufunc_set_small_staging(1);
    unsigned char has_out[1] = {1};
    static const struct {
        cf_dtype dt;
        const char *ct;
        uint64_t misalign;
        unsigned fresh;
        const char *want;
    } cases[] = {
        {CF_FLOAT32, "cf_float32", 0, 1, "#define CF_GU_STAGE_0 12, 12, 0, 16, 1, 0, 1, (3)\n"},
        {CF_FLOAT32, "cf_float32", 0, 0, "#define CF_GU_STAGE_2 12, 12, 12288, 16, 2, 0, 1, (3)\n"},
        {CF_FLOAT32, "cf_float32", 4, 1, "#define CF_GU_STAGE_0 12, 12, 0, 4, 1, 0, 1, (3)\n"},
        {CF_FLOAT64, "cf_float64", 8, 1, "#define CF_GU_STAGE_0 24, 24, 0, 8, 1, 0, 1, (3)\n"},
        {CF_INT32, "cf_int32", 0, 1, "#define CF_GU_TILE 512\n"},
        {CF_INT8, "cf_int8", 0, 1, "#define CF_GU_STAGE_0 3, 3, 0, 16, 1, 0, 1, (3)\n"},
        {CF_INT16, "cf_int16", 2, 1, "#define CF_GU_STAGE_0 6, 6, 0, 2, 1, 0, 1, (3)\n"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cf_gufunc *g = make_cross(cases[k].dt, cases[k].ct);
        int64_t s[2] = {1 << 20, 3};
        cf_operand ops[3];
        for (int o = 0; o < 3; o++)
            ops[o] = arr(cases[k].dt, 2, s, 0x10000000 * (uint64_t)(o + 1));
        ops[0].array.data += cases[k].misalign;
        check_kernel(g, ops, has_out, cases[k].fresh, cases[k].want);
        cf_gufunc_free(g);
    }
    cf_gufunc *g = make_matmul();
    int64_t m[3] = {1 << 20, 4, 4}, big[3] = {(int64_t)1 << 26, 4, 4};
    cf_operand ops[3];
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT32, 3, m, 0x10000000 * (uint64_t)(o + 1));
    check_kernel(g, ops, has_out, 1, "#define CF_GU_STAGE_2 64, 68, 17408, 4, 0, 0, 1, (4, 4)\n");
    check_kernel(g, ops, has_out, 0, "#define CF_GU_STAGE_2 64, 68, 17408, 4, 2, 0, 1, (4, 4)\n");
    int64_t m8[3] = {1 << 16, 8, 8};
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT32, 3, m8, 0x10000000 * (uint64_t)(o + 1));
    check_kernel(g, ops, has_out, 0, "#define CF_GU_STAGE_2 256, 260, 16640, 4, 1, 0, 1, (8, 8)\n");
    for (int o = 0; o < 3; o++)
        ops[o] = arr(CF_FLOAT32, 3, big, 0x100000000ull * (uint64_t)(o + 1));
    check_kernel(g, ops, has_out, 1, "#define CF_GU_O long long\n");
    cf_gufunc_free(g);
    cf_gufunc_set_small_staging(was);
}

static void test_rowsum_on_gpu(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    cf_gufunc *g = make_rowsum();
    enum { R = 1000, N = 1024 };
    float *x = malloc(sizeof(float) * R * N), *out = malloc(sizeof(float) * R);
    unsigned st = 1;
    for (int i = 0; i < R * N; i++)
        x[i] = frand(&st);
    uint64_t dx = 0, dout = 0;
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * R * N, &dx));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * R, &dout));
    CHECK_OK(cf_memcpy_htod(s, dx, x, sizeof(float) * R * N, 1));
    int64_t xs[2] = {R, N}, os[1] = {R};
    cf_operand ops[2] = {arr(CF_FLOAT32, 2, xs, dx), arr(CF_FLOAT32, 1, os, dout)};
    unsigned char has_out[1] = {1};
    cf_gufunc_shapes sh;
    /* staged (whole rows), then direct (every other column: a strided core) */
    for (int variant = 0; variant < 2; variant++) {
        int cols = variant ? N / 2 : N;
        if (variant) {
            ops[0].array.shape[1] = cols;
            ops[0].array.strides[1] = 8;
        }
        CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
        CHECK_OK(cf_memset8(s, dout, 0xff, sizeof(float) * R));
        CHECK_OK(cf_gufunc_launch(g, 0, s, ops, &sh, 1));
        CHECK_OK(cf_memcpy_dtoh(s, out, dout, sizeof(float) * R, 1));
        int bad = 0;
        for (int r = 0; r < R; r++) {
            float want = 0.0f; /* the body's order: sequential float32 adds */
            for (int c = 0; c < cols; c++)
                want = want + x[r * N + c * (variant ? 2 : 1)];
            bad += out[r] != want;
        }
        CHECK(bad == 0);
    }
    /* a float64 input: converted to float32 through a temporary */
    double *x8 = malloc(sizeof(double) * R * N);
    for (int i = 0; i < R * N; i++)
        x8[i] = (double)x[i] + 1e-9;
    uint64_t dx8 = 0;
    CHECK_OK(cf_mem_alloc(s, sizeof(double) * R * N, &dx8));
    CHECK_OK(cf_memcpy_htod(s, dx8, x8, sizeof(double) * R * N, 1));
    ops[0] = arr(CF_FLOAT64, 2, xs, dx8);
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK_OK(cf_gufunc_launch(g, 0, s, ops, &sh, 1));
    CHECK_OK(cf_memcpy_dtoh(s, out, dout, sizeof(float) * R, 1));
    int bad = 0;
    for (int r = 0; r < R; r++) {
        float want = 0.0f;
        for (int c = 0; c < N; c++)
            want = want + (float)x8[r * N + c];
        bad += out[r] != want;
    }
    CHECK(bad == 0);
    CHECK_OK(cf_stream_synchronize(s));
    cf_mem_free(s, dx);
    cf_mem_free(s, dx8);
    cf_mem_free(s, dout);
    cf_stream_synchronize(s);
    cf_stream_free(s);
    cf_gufunc_free(g);
    free(x);
    free(x8);
    free(out);
}

static void test_accumulate_into_out_on_gpu(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    cf_gufunc *g = NULL;
    CHECK_OK(cf_gufunc_create("accum", "(n)->(n)", &g));
    static const char *ACC_ROWS =
        "#include \"cufunc/runtime.cuh\"\n"
        "__device__ void acc_rows(cf_array_ref<cf_float32, 1> x, cf_array_ref<cf_float32, 1> y) {\n"
        "    for (long long i = 0; i < x.shape[0]; i++)\n"
        "        *(cf_float32 *)(y.data + i * y.strides[0]) = *(cf_float32 *)(y.data + i * y.strides[0]) + *(cf_float32 *)(x.data + i * x.strides[0]);\n}\n";
    cf_dtype t[2] = {CF_FLOAT32, CF_FLOAT32};
    int nd[2] = {1, 1};
    CHECK_OK(cf_gufunc_add_loop(g, t, nd, ACC_ROWS, "acc_rows", OPTS, 1, NULL));
    enum { R = 777, N = 64 };
    float *x = malloc(sizeof(float) * R * N), *y = malloc(sizeof(float) * R * N),
          *got = malloc(sizeof(float) * R * N);
    for (int i = 0; i < R * N; i++) {
        x[i] = (float)(i % 97);
        y[i] = (float)(i % 13);
    }
    uint64_t dx = 0, dy = 0;
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * R * N, &dx));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * R * N, &dy));
    CHECK_OK(cf_memcpy_htod(s, dx, x, sizeof(float) * R * N, 1));
    CHECK_OK(cf_memcpy_htod(s, dy, y, sizeof(float) * R * N, 1));
    int64_t sh2[2] = {R, N};
    cf_operand ops[2] = {arr(CF_FLOAT32, 2, sh2, dx), arr(CF_FLOAT32, 2, sh2, dy)};
    unsigned char has_out[1] = {1};
    cf_gufunc_shapes sh;
    cf_gufunc_plan p;
    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
    CHECK_OK(cf_gufunc_plan_launch(g, 0, ops, &sh, 0, &p));
    CHECK(p.kind[0] == 'G' && p.kind[1] == 'G' && p.load_output[1]);
    CHECK_OK(cf_gufunc_launch(g, 0, s, ops, &sh, 0)); /* out= given: not fresh */
    CHECK_OK(cf_memcpy_dtoh(s, got, dy, sizeof(float) * R * N, 1));
    int bad = 0;
    for (int i = 0; i < R * N; i++)
        bad += got[i] != x[i] + y[i];
    CHECK(bad == 0);
    CHECK_OK(cf_stream_synchronize(s));
    cf_mem_free(s, dx);
    cf_mem_free(s, dy);
    cf_stream_synchronize(s);
    cf_stream_free(s);
    cf_gufunc_free(g);
    free(x);
    free(y);
    free(got);
}

static void test_matmul_on_gpu(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    cf_gufunc *g = make_matmul();
    enum { B = 5000 };
    float *a = malloc(sizeof(float) * B * 16), *b = malloc(sizeof(float) * B * 16),
          *c = malloc(sizeof(float) * B * 16);
    unsigned st = 7;
    for (int i = 0; i < B * 16; i++) {
        a[i] = frand(&st);
        b[i] = frand(&st);
    }
    uint64_t da = 0, db = 0, dc = 0;
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * B * 16, &da));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * B * 16, &db));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * B * 16, &dc));
    CHECK_OK(cf_memcpy_htod(s, da, a, sizeof(float) * B * 16, 1));
    CHECK_OK(cf_memcpy_htod(s, db, b, sizeof(float) * B * 16, 1));
    int64_t s3[3] = {B, 4, 4}, s2[2] = {4, 4};
    unsigned char has_out[1] = {1};
    cf_gufunc_shapes sh;
    /* variant 0: all staged; 1: b broadcast ('U'); 2: a read transposed (direct); each with the
     * flat tiles and without (CUFUNC_GU_SMALL=0): 6 kernels */
    int was = cf_gufunc_set_small_staging(1);
    for (int v = 0; v < 6; v++) {
        int variant = v % 3;
        cf_gufunc_set_small_staging(v < 3);
        cf_operand ops[3] = {arr(CF_FLOAT32, 3, s3, da), arr(CF_FLOAT32, 3, s3, db),
                             arr(CF_FLOAT32, 3, s3, dc)};
        if (variant == 1)
            ops[1] = arr(CF_FLOAT32, 2, s2, db);
        if (variant == 2) {
            ops[0].array.strides[1] = 4;
            ops[0].array.strides[2] = 16;
        }
        CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
        CHECK_OK(cf_memset8(s, dc, 0xff, sizeof(float) * B * 16));
        CHECK_OK(cf_gufunc_launch(g, 0, s, ops, &sh, 1));
        CHECK_OK(cf_memcpy_dtoh(s, c, dc, sizeof(float) * B * 16, 1));
        int bad = 0;
        for (int t = 0; t < B; t++) {
            const float *A = a + t * 16, *Bm = b + (variant == 1 ? 0 : t * 16);
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    float want = 0.0f;
                    for (int k = 0; k < 4; k++) {
                        float aik = variant == 2 ? A[k * 4 + i] : A[i * 4 + k];
                        want = want + aik * Bm[k * 4 + j];
                    }
                    bad += c[t * 16 + i * 4 + j] != want;
                }
        }
        CHECK(bad == 0);
    }
    cf_gufunc_set_small_staging(was);
    CHECK(cf_gufunc_kernel_count(g) == 6);
    CHECK_OK(cf_stream_synchronize(s));
    cf_mem_free(s, da);
    cf_mem_free(s, db);
    cf_mem_free(s, dc);
    cf_stream_synchronize(s);
    cf_stream_free(s);
    cf_gufunc_free(g);
    free(a);
    free(b);
    free(c);
}

/* Flat tiles on the GPU: the cross product over loops around the tile sizes (1, tile - 1, tile,
 * tile + 1, large odd counts), with a base off 16-byte alignment (a[1:]), a fresh output and a
 * loaded one, against the same float32 arithmetic on the host; flat and not (the A/B switch). */
static void test_cross_on_gpu(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    cf_gufunc *g = make_cross(CF_FLOAT32, "cf_float32");
    enum { NMAX = (1 << 19) + 2 };
    float *a = malloc(sizeof(float) * 3 * NMAX), *b = malloc(sizeof(float) * 3 * NMAX),
          *c = malloc(sizeof(float) * 3 * NMAX);
    unsigned st = 11;
    for (int i = 0; i < 3 * NMAX; i++) {
        a[i] = frand(&st);
        b[i] = frand(&st);
    }
    uint64_t da = 0, db = 0, dc = 0;
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * 3 * NMAX, &da));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * 3 * NMAX, &db));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * 3 * NMAX, &dc));
    CHECK_OK(cf_memcpy_htod(s, da, a, sizeof(float) * 3 * NMAX, 1));
    CHECK_OK(cf_memcpy_htod(s, db, b, sizeof(float) * 3 * NMAX, 1));
    /* tiles: 4 .. 128 below 2^17 iterations, 512 from 2^19 (cf_gufunc_plan_launch) */
    static const int64_t sizes[] = {1, 2, 127, 128, 129, 4097, 100003, 1 << 19, (1 << 19) + 1};
    int was = cf_gufunc_set_small_staging(1);
    unsigned char has_out[1] = {1};
    for (int on = 1; on >= 0; on--) {
        cf_gufunc_set_small_staging(on);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (int shift = 0; shift < 2; shift++)
                for (unsigned fresh = 0; fresh < 2; fresh++) {
                    int64_t n = sizes[k], sh2[2] = {n, 3};
                    cf_operand ops[3] = {arr(CF_FLOAT32, 2, sh2, da + 12u * (unsigned)shift),
                                         arr(CF_FLOAT32, 2, sh2, db),
                                         arr(CF_FLOAT32, 2, sh2, dc)};
                    cf_gufunc_shapes sh;
                    CHECK_OK(cf_gufunc_bind(g, ops, has_out, &sh));
                    /* the row past the end must survive: its bytes are 0xff */
                    CHECK_OK(cf_memset8(s, dc, 0xff, sizeof(float) * 3 * NMAX));
                    CHECK_OK(cf_gufunc_launch(g, 0, s, ops, &sh, fresh));
                    CHECK_OK(cf_memcpy_dtoh(s, c, dc, sizeof(float) * 3 * (size_t)(n + 1), 1));
                    int bad = 0;
                    for (int64_t t = 0; t < n; t++) {
                        const float *x = a + 3 * (t + shift), *y = b + 3 * t;
                        float w[3] = {x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2],
                                      x[0] * y[1] - x[1] * y[0]};
                        for (int j = 0; j < 3; j++)
                            bad += memcmp(&c[3 * t + j], &w[j], 4) != 0;
                    }
                    unsigned tail[3];
                    memcpy(tail, c + 3 * n, sizeof tail);
                    bad += tail[0] != 0xffffffffu || tail[1] != 0xffffffffu ||
                           tail[2] != 0xffffffffu;
                    if (bad)
                        fprintf(stderr, "  cross n=%lld shift=%d fresh=%u flat=%d: %d wrong\n",
                                (long long)n, shift, fresh, on, bad);
                    CHECK(bad == 0);
                }
    }
    cf_gufunc_set_small_staging(was);
    CHECK_OK(cf_stream_synchronize(s));
    cf_mem_free(s, da);
    cf_mem_free(s, db);
    cf_mem_free(s, dc);
    cf_stream_synchronize(s);
    cf_stream_free(s);
    cf_gufunc_free(g);
    free(a);
    free(b);
    free(c);
}

int main(void)
{
    RUN(test_create);
    RUN(test_add_loop);
    RUN(test_resolve);
    RUN(test_bind);
    RUN(test_axes_perm);
    RUN(test_plan_rowsum);
    RUN(test_plan_matmul);
    RUN(test_plan_scalars);
    RUN(test_kernels_compile);
    RUN(test_plan_small);
    RUN(test_small_kernels_compile);
    RUN(test_rowsum_on_gpu);
    RUN(test_accumulate_into_out_on_gpu);
    RUN(test_matmul_on_gpu);
    RUN(test_cross_on_gpu);
    return SUMMARY();
}
