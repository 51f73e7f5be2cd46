/* Unit tests of the reduction engine: planning of reduced and kept axes, launch geometry, kernel
 * generation (every kernel shape compiled with NVRTC for sm_90, no GPU needed), and launches
 * against host results behind NEED_GPU(). */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "cufunc/reduce.h"

static const char *ADD_F4 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_float32 add_f4(cf_float32 a, cf_float32 b) { return a + b; }\n";
static const char *ADD_F8 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_float64 add_f8(cf_float64 a, cf_float64 b) { return a + b; }\n";
static const char *ADD_I8 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_int64 add_i8(cf_int64 a, cf_int64 b) { return cf_add(a, b); }\n";
static const char *MAX_I1 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_int8 max_i1(cf_int8 a, cf_int8 b) { return a > b ? a : b; }\n";
static const char *OR_B = "#include \"cufunc/runtime.cuh\"\n"
                          "__device__ cf_bool or_b(cf_bool a, cf_bool b) { return a || b; }\n";
static const char *ADD_C8 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_complex64 add_c8(cf_complex64 a, cf_complex64 b) { return a + b; }\n";
static const char *MUL_C16 = "#include \"cufunc/runtime.cuh\"\n"
                             "__device__ cf_complex128 mul_c16(cf_complex128 a, cf_complex128 b) { return a * b; }\n";

static const char *ADD_F2 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_float16 add_f2(cf_float16 a, cf_float16 b) { return a + b; }\n";

static cf_reducer *make_reducer(void)
{
    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("add", &r));
    const char *opts[1] = {"--fmad=false"};
    int idx = -1;
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT32, ADD_F4, "add_f4", opts, 1, &idx));
    CHECK(idx == 0);
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT64, ADD_F8, "add_f8", opts, 1, &idx));
    CHECK_OK(cf_reducer_add_loop(r, CF_INT64, ADD_I8, "add_i8", opts, 1, &idx));
    CHECK_OK(cf_reducer_add_loop(r, CF_INT8, MAX_I1, "max_i1", opts, 1, &idx));
    CHECK_OK(cf_reducer_add_loop(r, CF_BOOL, OR_B, "or_b", opts, 1, &idx));
    CHECK_OK(cf_reducer_add_loop(r, CF_COMPLEX64, ADD_C8, "add_c8", opts, 1, &idx));
    CHECK_OK(cf_reducer_add_loop(r, CF_COMPLEX128, MUL_C16, "mul_c16", opts, 1, &idx));
    CHECK(idx == 6);
    return r;
}

/* A C-contiguous view at `data`. */
static cf_array view(cf_dtype dt, int ndim, const int64_t *shape, uint64_t data)
{
    cf_array a;
    memset(&a, 0, sizeof a);
    CHECK_OK(cf_array_init_contiguous(&a, data, dt, ndim, shape, 'C', 0));
    return a;
}

/* The keepdims output of reducing `in` over `red`. */
static cf_array keepdims_out(const cf_array *in, const unsigned char *red, cf_dtype dt, uint64_t data)
{
    int64_t shape[CF_MAX_DIMS];
    for (int k = 0; k < in->ndim; k++)
        shape[k] = red[k] ? 1 : in->shape[k];
    return view(dt, in->ndim, shape, data);
}

static void test_loops(void)
{
    cf_reducer *r = make_reducer();
    CHECK(cf_reducer_nloops(r) == 7);
    CHECK(cf_reducer_find_loop(r, CF_FLOAT64) == 1);
    CHECK(cf_reducer_find_loop(r, CF_UINT16) == -1);
    CHECK(cf_reducer_loop_type(r, 4) == CF_BOOL);
    CHECK(cf_reducer_loop_type(r, 99) == CF_NDTYPES);
    CHECK_STATUS(cf_reducer_add_loop(r, CF_FLOAT32, ADD_F4, "add_f4", NULL, 0, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "already has a loop for float32");
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT16, ADD_F4, "add_f4", NULL, 0, NULL)); /* float16 too */
    CHECK(cf_reducer_find_loop(r, CF_FLOAT16) >= 0);
    CHECK_STATUS(cf_reducer_add_loop(NULL, CF_FLOAT32, ADD_F4, "x", NULL, 0, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_reducer_add_loop(r, (cf_dtype)77, ADD_F4, "x", NULL, 0, NULL), CF_ERR_TYPE);
    CHECK(strcmp(cf_reducer_name(r), "add") == 0);
    cf_reducer_free(r);
    cf_reducer_free(NULL);
}

static void test_plan_rows_cols_all(void)
{
    int64_t shape[3] = {4, 5, 6};
    cf_array in = view(CF_FLOAT32, 3, shape, 0x10000);
    cf_reduce_plan p;

    /* last axis: contiguous runs of 6, 20 outputs over merged kept axes */
    unsigned char r2[3] = {0, 0, 1};
    cf_array out = keepdims_out(&in, r2, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, r2, &out, NULL));
    CHECK(p.kind == CF_REDUCE_ROWS);
    CHECK(p.n_out == 20 && p.n_red == 6);
    CHECK(p.kept_ndim == 1 && p.kept_shape[0] == 20 && p.in_kept[0] == 24 && p.out_kept[0] == 4);
    CHECK(p.red_ndim == 1 && p.in_red[0] == 4 && p.red_contiguous);
    CHECK(p.index32);

    /* first axis: strided reduction, kept axes contiguous and merged */
    unsigned char r0[3] = {1, 0, 0};
    out = keepdims_out(&in, r0, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, r0, &out, NULL));
    CHECK(p.kind == CF_REDUCE_COLS);
    CHECK(p.n_out == 30 && p.n_red == 4);
    CHECK(p.kept_ndim == 1 && p.in_kept[0] == 4 && p.kept_contiguous);
    CHECK(p.red_ndim == 1 && p.in_red[0] == 120 && !p.red_contiguous);

    /* the middle axis: kept axes 0 and 2 cannot merge */
    unsigned char r1[3] = {0, 1, 0};
    out = keepdims_out(&in, r1, CF_FLOAT64, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, r1, &out, NULL));
    CHECK(p.kind == CF_REDUCE_COLS);
    CHECK(p.kept_ndim == 2 && p.kept_shape[0] == 4 && p.kept_shape[1] == 6);
    CHECK(p.out_kept[0] == 48 && p.out_kept[1] == 8);
    CHECK(p.red_ndim == 1 && p.red_shape[0] == 5 && p.in_red[0] == 24);

    /* axes (1, 2): one contiguous run of 30 per output */
    unsigned char r12[3] = {0, 1, 1};
    out = keepdims_out(&in, r12, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, r12, &out, NULL));
    CHECK(p.kind == CF_REDUCE_ROWS && p.n_red == 30 && p.red_ndim == 1 && p.red_contiguous);

    /* axes (0, 2): two reduced axes that cannot merge, kept axis stride 24 < 120 */
    unsigned char r02[3] = {1, 0, 1};
    out = keepdims_out(&in, r02, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, r02, &out, NULL));
    CHECK(p.n_out == 5 && p.n_red == 24 && p.red_ndim == 2);
    CHECK(p.kind == CF_REDUCE_ROWS); /* innermost reduced stride 4 <= kept stride 24 */

    /* everything */
    unsigned char rall[3] = {1, 1, 1};
    out = keepdims_out(&in, rall, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, rall, &out, NULL));
    CHECK(p.kind == CF_REDUCE_ALL && p.n_out == 1 && p.n_red == 120 && p.red_contiguous);

    /* no axis: one element per output, a thread each */
    unsigned char rnone[3] = {0, 0, 0};
    out = keepdims_out(&in, rnone, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, rnone, &out, NULL));
    CHECK(p.kind == CF_REDUCE_COLS && p.n_out == 120 && p.n_red == 1 && p.red_ndim == 0);
}

static void test_plan_strided_and_where(void)
{
    /* a transposed (F-ordered) 2-d array: reducing axis 0 reads contiguous runs */
    int64_t shape[2] = {8, 3};
    cf_array in;
    memset(&in, 0, sizeof in);
    CHECK_OK(cf_array_init_contiguous(&in, 0x10000, CF_FLOAT64, 2, shape, 'F', 0));
    cf_reduce_plan p;
    unsigned char r0[2] = {1, 0};
    cf_array out = keepdims_out(&in, r0, CF_FLOAT64, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &in, r0, &out, NULL));
    CHECK(p.kind == CF_REDUCE_ROWS && p.red_contiguous && p.in_kept[0] == 64);

    /* a reversed axis: strides negative, never "contiguous" */
    int64_t n1[1] = {100};
    cf_array rev = view(CF_FLOAT32, 1, n1, 0x10000 + 99 * 4);
    rev.strides[0] = -4;
    unsigned char r[1] = {1};
    out = keepdims_out(&rev, r, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &rev, r, &out, NULL));
    CHECK(p.kind == CF_REDUCE_ALL && !p.red_contiguous && p.in_red[0] == -4);

    /* where= broadcast from (5,) onto (4, 5): stride 0 on the broadcast axis */
    int64_t s45[2] = {4, 5}, s5[1] = {5};
    cf_array a = view(CF_INT64, 2, s45, 0x10000);
    cf_array w = view(CF_BOOL, 1, s5, 0x50000);
    unsigned char r1[2] = {0, 1};
    out = keepdims_out(&a, r1, CF_INT64, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &a, r1, &out, &w));
    CHECK(p.has_where && p.kind == CF_REDUCE_ROWS);
    CHECK(p.where_kept[0] == 0 && p.where_red[0] == 1 && p.red_contiguous);
    /* a mask that does not broadcast */
    int64_t s3[1] = {3};
    cf_array w3 = view(CF_BOOL, 1, s3, 0x50000);
    CHECK_STATUS(cf_reduce_plan_axes(&p, &a, r1, &out, &w3), CF_ERR_INVALID);
    cf_array wi = view(CF_INT8, 1, s5, 0x50000);
    CHECK_STATUS(cf_reduce_plan_axes(&p, &a, r1, &out, &wi), CF_ERR_TYPE);

    /* an out of the wrong shape */
    int64_t bad[2] = {4, 2};
    cf_array ob = view(CF_INT64, 2, bad, 0x90000);
    CHECK_STATUS(cf_reduce_plan_axes(&p, &a, r1, &ob, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "out has shape (4,2), the reduction gives (4,1)");
    cf_array o1 = view(CF_INT64, 1, s5, 0x90000);
    CHECK_STATUS(cf_reduce_plan_axes(&p, &a, r1, &o1, NULL), CF_ERR_INVALID);

    /* more than 6 axes that cannot merge */
    int64_t s8[8] = {2, 2, 2, 2, 2, 2, 2, 2};
    cf_array big = view(CF_FLOAT32, 8, s8, 0x10000);
    int64_t stride = 4;
    for (int k = 7; k >= 0; k--) {
        big.strides[k] = stride;
        stride *= 3; /* gaps everywhere: nothing merges */
    }
    unsigned char alt[8] = {1, 0, 1, 0, 1, 0, 1, 0};
    cf_array ob8 = keepdims_out(&big, alt, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &big, alt, &ob8, NULL));
    CHECK(p.kept_ndim == 4 && p.red_ndim == 4);
    unsigned char most[8] = {1, 1, 1, 1, 1, 1, 1, 0};
    ob8 = keepdims_out(&big, most, CF_FLOAT32, 0x90000);
    CHECK_STATUS(cf_reduce_plan_axes(&p, &big, most, &ob8, NULL), CF_ERR_UNSUPPORTED);

    /* 64-bit indexing beyond 2^31 elements */
    int64_t huge[1] = {(int64_t)3 << 30};
    cf_array h = view(CF_FLOAT32, 1, huge, 0x10000);
    out = keepdims_out(&h, r, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &h, r, &out, NULL));
    CHECK(!p.index32);
}

static void test_plan_scan(void)
{
    int64_t shape[3] = {4, 5, 6};
    cf_array in = view(CF_FLOAT32, 3, shape, 0x10000);
    cf_array out = view(CF_FLOAT64, 3, shape, 0x90000);
    cf_reduce_plan p;
    CHECK_OK(cf_reduce_plan_scan(&p, &in, 2, &out));
    CHECK(p.n_out == 20 && p.n_red == 6 && p.red_contiguous);
    CHECK(p.in_red[0] == 4 && p.out_red[0] == 8);
    CHECK(p.kept_ndim == 1 && p.in_kept[0] == 24 && p.out_kept[0] == 48);
    CHECK(p.kind == CF_SCAN_TILES); /* few columns */
    CHECK_OK(cf_reduce_plan_scan(&p, &in, 0, &out));
    CHECK(p.n_out == 30 && p.n_red == 4 && !p.red_contiguous && p.in_red[0] == 120);
    CHECK_OK(cf_reduce_plan_scan(&p, &in, 1, &out));
    CHECK(p.kept_ndim == 2 && p.n_red == 5);
    CHECK_STATUS(cf_reduce_plan_scan(&p, &in, 3, &out), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "axis 3 is out of bounds for array of dimension 3");
    cf_array s0 = view(CF_FLOAT32, 0, shape, 0x10000);
    CHECK_STATUS(cf_reduce_plan_scan(&p, &s0, 0, &s0), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "cannot accumulate on a scalar");
    int64_t other[3] = {4, 5, 7};
    cf_array bad = view(CF_FLOAT32, 3, other, 0x90000);
    CHECK_STATUS(cf_reduce_plan_scan(&p, &in, 2, &bad), CF_ERR_INVALID);

    /* many short columns along a strided axis: a thread per column */
    int64_t wide[2] = {16, 100000};
    cf_array w = view(CF_FLOAT32, 2, wide, 0x10000);
    CHECK_OK(cf_reduce_plan_scan(&p, &w, 0, &w));
    CHECK(p.kind == CF_SCAN_COLS);
    int64_t one[1] = {1 << 28};
    cf_array big = view(CF_FLOAT32, 1, one, 0x10000);
    CHECK_OK(cf_reduce_plan_scan(&p, &big, 0, &big));
    CHECK(p.kind == CF_SCAN_TILES && p.n_out == 1);
}

static void test_geometry(void)
{
    const int sms = 132;
    cf_reduce_plan p;
    cf_reduce_geom g;
    unsigned char rall[1] = {1};

    /* 2^28 float32: vectors of 4, a full card of 512-thread blocks */
    int64_t n[1] = {(int64_t)1 << 28};
    cf_array a = view(CF_FLOAT32, 1, n, 0x100000);
    cf_array o = keepdims_out(&a, rall, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &a, rall, &o, NULL));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, a.data, sms, 4, &g));
    CHECK(g.block == 512 && g.vec == 4 && g.unroll == 8); /* 8 vectors in flight for 4-byte elements */
    CHECK(g.grid[0] == 528 && g.grid[1] == 1);
    /* misaligned start: no vectors */
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, a.data + 4, sms, 4, &g));
    CHECK(g.vec == 1);
    /* 1024 elements: one block, no ticket */
    int64_t small[1] = {1024};
    cf_array s = view(CF_FLOAT32, 1, small, 0x100000);
    CHECK_OK(cf_reduce_plan_axes(&p, &s, rall, &o, NULL));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, s.data, sms, 4, &g));
    CHECK(g.grid[0] == 1);
    /* never more blocks than the partials area holds */
    CHECK_OK(cf_reduce_plan_axes(&p, &a, rall, &o, NULL));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, a.data, 10000, 32, &g));
    CHECK(g.grid[0] == 4096);

    /* (16384, 16384) float32 over axis 1: a block per row, float4 loads */
    int64_t sq[2] = {16384, 16384};
    cf_array m = view(CF_FLOAT32, 2, sq, 0x100000);
    unsigned char r1[2] = {0, 1}, r0[2] = {1, 0};
    cf_array o1 = keepdims_out(&m, r1, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &m, r1, &o1, NULL));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, m.data, sms, 8, &g));
    CHECK(p.kind == CF_REDUCE_ROWS && g.group == 256 && g.vec == 4 && g.grid[1] == 1);
    CHECK(g.grid[0] == 8448); /* 132 SMs x 8 blocks x 8 rounds, rows grid-strided */
    /* over axis 0: a thread per 4 columns, the rows split until the grid holds 2048 threads per
     * SM (src/reduce.c, RED_COLS_THREADS_PER_SM) */
    cf_array o0 = keepdims_out(&m, r0, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &m, r0, &o0, NULL));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, m.data, sms, 8, &g));
    CHECK(p.kind == CF_REDUCE_COLS && g.vec == 4 && g.grid[0] == 16);
    CHECK(g.grid[1] > 1 && (int64_t)g.grid[1] * g.chunk >= 16384 &&
          (int64_t)(g.grid[1] - 1) * g.chunk < 16384);
    CHECK(g.partials == (int64_t)g.grid[1] * 16384);
    CHECK((int64_t)g.grid[0] * g.grid[1] * g.block >= (int64_t)sms * 2048);
    CHECK(g.grid[1] == 66); /* ceil(132 x 8 blocks / 16 column blocks) */

    /* few long rows: split rows */
    int64_t fr[2] = {4, 1 << 24};
    cf_array f = view(CF_FLOAT32, 2, fr, 0x100000);
    cf_array of = keepdims_out(&f, r1, CF_FLOAT32, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &f, r1, &of, NULL));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, f.data, sms, 8, &g));
    CHECK(p.kind == CF_REDUCE_ROWS && g.grid[0] == 4 && g.grid[1] > 1 && g.chunk % 16 == 0);
    CHECK((int64_t)g.grid[1] * g.chunk >= (1 << 24));
    /* short rows: a warp each */
    int64_t sr[2] = {100000, 100};
    cf_array sh = view(CF_FLOAT64, 2, sr, 0x100000);
    cf_array osh = keepdims_out(&sh, r1, CF_FLOAT64, 0x90000);
    CHECK_OK(cf_reduce_plan_axes(&p, &sh, r1, &osh, NULL));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT64, CF_FLOAT64, sh.data, sms, 8, &g));
    CHECK(g.group == 32 && g.vec == 2 && g.grid[0] == 8448); /* 12500 blocks of 8 rows, capped */

    /* scans: 2^28 float32 in tiles of 256 x (44 + 44), float4 vectors (11 rounds of 4 per lane in
     * registers, 11 more in shared memory), 4 blocks per SM asked of the compiler */
    cf_array so = view(CF_FLOAT32, 1, n, 0x100000);
    CHECK_OK(cf_reduce_plan_scan(&p, &a, 0, &so));
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT32, a.data, sms, 0, &g));
    CHECK(g.items == 44 && g.smem_items == 44 && g.block == 256 && g.vec == 4 &&
          g.min_blocks == 4);
    CHECK(g.tiles_per_row == 11916 && g.grid[0] == 11916 && g.chunk == 22528);
    /* accumulators of 8 and 16 bytes: 16 and 8 items; items stay a multiple of the vector; no
     * shared-memory part when the accumulator is wider than the input (its slots hold both) */
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_FLOAT64, a.data, sms, 0, &g));
    CHECK(g.items == 16 && g.vec == 4 && g.smem_items == 0);
    /* float64 in and out: 16 in registers + 22 in shared memory, 4 blocks per SM (H100, 2026-11-25) */
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT64, CF_FLOAT64, a.data, sms, 0, &g));
    CHECK(g.items == 16 && g.smem_items == 22 && g.vec == 2 && g.min_blocks == 4);
    CHECK_OK(cf_reduce_geometry(&p, CF_FLOAT32, CF_COMPLEX128, a.data, sms, 0, &g));
    CHECK(g.items == 8 && g.vec == 4);
    CHECK_OK(cf_reduce_geometry(&p, CF_INT8, CF_COMPLEX128, a.data, sms, 0, &g));
    CHECK(g.items == 16 && g.vec == 16);
    CHECK_OK(cf_reduce_geometry(&p, CF_COMPLEX128, CF_COMPLEX128, a.data, sms, 0, &g));
    CHECK(g.items == 8 && g.vec == 1);
    /* rows: tiles never straddle rows */
    int64_t rows[2] = {3, 10000};
    cf_array ra = view(CF_INT32, 2, rows, 0x100000);
    CHECK_OK(cf_reduce_plan_scan(&p, &ra, 1, &ra));
    CHECK_OK(cf_reduce_geometry(&p, CF_INT32, CF_INT32, ra.data, sms, 0, &g));
    CHECK(p.kind == CF_SCAN_TILES && g.tiles_per_row == 1 && g.grid[0] == 3);
    CHECK_STATUS(cf_reduce_geometry(NULL, CF_FLOAT32, CF_FLOAT32, 0, sms, 0, &g), CF_ERR_INVALID);
}

static int have_nvrtc(void)
{
    if (cf_nvrtc_init() == CF_OK)
        return 1;
    CHECK_OK(cf_nvrtc_init()); /* CI has NVRTC: its absence is a failure, not a skip */
    return 0;
}

/* Generate the kernel of a launch and compile it for sm_90. */
static void compile_case(cf_reducer *r, int loop, const cf_array *in, const unsigned char *red,
                         int scan_axis, const cf_array *out, const cf_array *where,
                         const char *want)
{
    char *src = NULL;
    CHECK_OK(cf_reduce_kernel_source(r, loop, in, red, scan_axis, out, where, &src));
    if (!src)
        return;
    if (want)
        CHECK_CONTAINS(src, want);
    const char *opts[1] = {"--fmad=false"};
    void *img = NULL;
    size_t n = 0;
    cf_status st = cf_compile_source(src, opts, 1, 9, 0, &img, &n, NULL);
    if (st != CF_OK)
        fprintf(stderr, "%s\n", cf_last_error());
    CHECK(st == CF_OK);
    cf_free_buffer(img);
    cf_free_buffer(src);
}

static void test_kernels_compile(void)
{
    if (!have_nvrtc())
        return;
    cf_reducer *r = make_reducer();
    static const cf_dtype loops[7] = {CF_FLOAT32, CF_FLOAT64, CF_INT64, CF_INT8, CF_BOOL,
                                      CF_COMPLEX64, CF_COMPLEX128};
    int64_t sq[2] = {64, 48}, n[1] = {1000};
    unsigned char r1[2] = {0, 1}, r0[2] = {1, 0}, rall[2] = {1, 1}, one[1] = {1};
    for (int l = 0; l < 7; l++) {
        cf_dtype t = loops[l];
        cf_array a1 = view(t, 1, n, 0x100000);
        cf_array o = keepdims_out(&a1, one, t, 0x90000);
        compile_case(r, l, &a1, one, -1, &o, NULL, "cf_red_all<");
        cf_array m = view(t, 2, sq, 0x100000);
        cf_array o1 = keepdims_out(&m, r1, t, 0x90000);
        compile_case(r, l, &m, r1, -1, &o1, NULL, "cf_red_rows<");
        cf_array o0 = keepdims_out(&m, r0, t, 0x90000);
        compile_case(r, l, &m, r0, -1, &o0, NULL, "cf_red_cols<");
        cf_array sc = view(t, 2, sq, 0x200000);
        compile_case(r, l, &m, NULL, 1, &sc, NULL, "cf_scan_tiles<");
    }
    /* float16 (2-byte cf_float16: vector loads, 4-byte-word shuffles): every kernel shape, and
     * float32 elements into the float16 loop */
    cf_reducer *h = NULL;
    CHECK_OK(cf_reducer_create("add", &h));
    const char *hopts[1] = {"--fmad=false"};
    CHECK_OK(cf_reducer_add_loop(h, CF_FLOAT16, ADD_F2, "add_f2", hopts, 1, NULL));
    {
        cf_array a1 = view(CF_FLOAT16, 1, n, 0x100000);
        cf_array o = keepdims_out(&a1, one, CF_FLOAT16, 0x90000);
        compile_case(h, 0, &a1, one, -1, &o, NULL, "cf_red_all<cf_red_op, cf_float16, cf_float16");
        cf_array m = view(CF_FLOAT16, 2, sq, 0x100000);
        cf_array o1 = keepdims_out(&m, r1, CF_FLOAT16, 0x90000);
        compile_case(h, 0, &m, r1, -1, &o1, NULL, "cf_red_rows<");
        cf_array o0 = keepdims_out(&m, r0, CF_FLOAT16, 0x90000);
        compile_case(h, 0, &m, r0, -1, &o0, NULL, "cf_red_cols<");
        cf_array sc = view(CF_FLOAT16, 2, sq, 0x200000);
        compile_case(h, 0, &m, NULL, 1, &sc, NULL, "cf_scan_tiles<");
        cf_array f = view(CF_FLOAT32, 1, n, 0x100000);
        compile_case(h, 0, &f, one, -1, &o, NULL, "cf_red_all<cf_red_op, cf_float32, cf_float16");
        (void)rall;
    }
    cf_reducer_free(h);
    /* mixed dtypes: int32 elements into the int64 loop, float64 output of a float32 loop */
    cf_array ai = view(CF_INT32, 1, n, 0x100000);
    cf_array oi = keepdims_out(&ai, one, CF_INT64, 0x90000);
    compile_case(r, 2, &ai, one, -1, &oi, NULL, "cf_red_all<cf_red_op, cf_int32, cf_int64");
    int64_t big[2] = {16, 100000};
    cf_array m = view(CF_FLOAT32, 2, big, 0x100000);
    cf_array sc = view(CF_FLOAT64, 2, big, 0x200000);
    compile_case(r, 0, &m, NULL, 0, &sc, NULL, "cf_scan_cols<cf_red_op, cf_float32, cf_float64");
    /* scan tiles: float4 vectors in and out; int8 into int64 (16-wide vectors, 128-byte stores);
     * float64 into float32 (8-byte stores, element by element); complex128 (one element a
     * vector); a strided scan axis with few columns (tiles read element by element) */
    int64_t n1m[1] = {1 << 20};
    cf_array f1 = view(CF_FLOAT32, 1, n1m, 0x100000);
    cf_array f1o = view(CF_FLOAT32, 1, n1m, 0x800000);
    compile_case(r, 0, &f1, NULL, 0, &f1o, NULL,
                 "cf_scan_tiles<cf_red_op, cf_float32, cf_float32, 256, 44, 4, 0, 0, unsigned>");
    cf_array i1 = view(CF_INT8, 1, n1m, 0x100000);
    cf_array i1o = view(CF_INT64, 1, n1m, 0x800000);
    compile_case(r, 2, &i1, NULL, 0, &i1o, NULL, "cf_scan_tiles<cf_red_op, cf_int8, cf_int64, 256, 16, 16");
    cf_array d1 = view(CF_FLOAT64, 1, n1m, 0x100000);
    compile_case(r, 1, &d1, NULL, 0, &f1o, NULL, "cf_scan_tiles<cf_red_op, cf_float64, cf_float32, 256, 16, 2");
    cf_array z1 = view(CF_COMPLEX128, 1, n1m, 0x100000);
    compile_case(r, 6, &z1, NULL, 0, &z1, NULL, "cf_scan_tiles<cf_red_op, cf_complex128, cf_complex128, 256, 8, 1");
    cf_array b1 = view(CF_BOOL, 1, n1m, 0x100000);
    compile_case(r, 4, &b1, NULL, 0, &b1, NULL, "cf_scan_tiles<cf_red_op, cf_bool, cf_bool, 256, 48, 16");
    int64_t tall[2] = {100000, 3};
    cf_array t3 = view(CF_FLOAT32, 2, tall, 0x100000);
    compile_case(r, 0, &t3, NULL, 0, &t3, NULL, "cf_scan_tiles<cf_red_op, cf_float32, cf_float32, 256, 44, 4, 0, 1");
    /* where= masks (full, rows, cols) and strided (transposed) inputs */
    cf_array w = view(CF_BOOL, 2, sq, 0x300000);
    cf_array mf = view(CF_FLOAT32, 2, sq, 0x100000);
    cf_array oall = keepdims_out(&mf, rall, CF_FLOAT32, 0x90000);
    compile_case(r, 0, &mf, rall, -1, &oall, &w, "true");
    cf_array o1 = keepdims_out(&mf, r1, CF_FLOAT32, 0x90000);
    compile_case(r, 0, &mf, r1, -1, &o1, &w, "true");
    cf_array o0 = keepdims_out(&mf, r0, CF_FLOAT32, 0x90000);
    compile_case(r, 0, &mf, r0, -1, &o0, &w, "true");
    /* a transposed array is one contiguous run for a full reduction; every other column is one
     * strided axis */
    cf_array t = mf;
    t.shape[0] = sq[1];
    t.shape[1] = sq[0];
    t.strides[0] = 4;
    t.strides[1] = 4 * sq[1];
    cf_array ot = keepdims_out(&t, rall, CF_FLOAT32, 0x90000);
    compile_case(r, 0, &t, rall, -1, &ot, NULL, "cf_red_all<cf_red_op, cf_float32, cf_float32, 512, 4, 8, 0");
    cf_array half = mf;
    half.shape[1] = sq[1] / 2;
    half.strides[1] = 8;
    compile_case(r, 0, &half, rall, -1, &ot, NULL, "cf_red_all<cf_red_op, cf_float32, cf_float32, 512, 1, 4, 1");
    /* three unmergeable reduced axes through fast division */
    int64_t s3[3] = {6, 7, 8};
    cf_array c3 = view(CF_FLOAT64, 3, s3, 0x100000);
    c3.strides[0] = 8 * 7 * 9;
    c3.strides[1] = 8 * 9;
    unsigned char r02[3] = {1, 0, 1};
    cf_array o3 = keepdims_out(&c3, r02, CF_FLOAT64, 0x90000);
    compile_case(r, 1, &c3, r02, -1, &o3, NULL, NULL);
    cf_reducer_free(r);
}

/* ---- on the GPU ---------------------------------------------------------------------------- */

static void test_gpu_full(void)
{
    NEED_GPU();
    cf_reducer *r = make_reducer();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    static const int64_t sizes[] = {1, 31, 32, 33, 127, 128, 129, 1023, 1024, 1025, 4097, 65537,
                                    1049728, 3000017};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        int64_t n = sizes[c];
        int64_t *h = malloc((size_t)n * 8);
        int64_t want = 0;
        for (int64_t i = 0; i < n; i++) {
            h[i] = (i * 7919) % 1001 - 500;
            want += h[i];
        }
        uint64_t d = 0, res = 0;
        CHECK_OK(cf_mem_alloc(s, (size_t)n * 8 + 8, &d));
        CHECK_OK(cf_mem_alloc(s, 8, &res));
        CHECK_OK(cf_memcpy_htod(s, d + 8, h, (size_t)n * 8, 1));
        cf_array a = view(CF_INT64, 1, &n, d + 8); /* 8-byte aligned only: no 16-byte vectors */
        int64_t init = 5;
        for (int rep = 0; rep < 3; rep++) { /* the ticket must be reset for the next launch */
            CHECK_OK(cf_reduce_all(r, 2, s, &a, res, CF_INT64, &init));
            int64_t got = 0;
            CHECK_OK(cf_memcpy_dtoh(s, &got, res, 8, 1));
            if (got != want + 5)
                fprintf(stderr, "  n=%lld rep %d: got %lld want %lld\n", (long long)n, rep,
                        (long long)got, (long long)(want + 5));
            CHECK(got == want + 5);
        }
        CHECK_OK(cf_mem_free(s, d));
        CHECK_OK(cf_mem_free(s, res));
        free(h);
    }
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_reducer_free(r);
}

static void test_gpu_axes_and_scan(void)
{
    NEED_GPU();
    cf_reducer *r = make_reducer();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    int64_t shape[2] = {300, 517};
    int64_t n = shape[0] * shape[1];
    double *h = malloc((size_t)n * 8), *back = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++)
        h[i] = (double)((i * 31) % 97) - 48.0; /* small integers: sums are exact */
    uint64_t d = 0, o = 0;
    CHECK_OK(cf_mem_alloc(s, (size_t)n * 8, &d));
    CHECK_OK(cf_mem_alloc(s, (size_t)n * 8, &o));
    CHECK_OK(cf_memcpy_htod(s, d, h, (size_t)n * 8, 1));
    cf_array a = view(CF_FLOAT64, 2, shape, d);
    for (int axis = 0; axis < 2; axis++) {
        unsigned char red[2] = {axis == 0, axis == 1};
        cf_array out = keepdims_out(&a, red, CF_FLOAT64, o);
        CHECK_OK(cf_reduce_launch(r, 1, s, &a, red, &out, NULL, NULL));
        int64_t nout = shape[1 - axis];
        CHECK_OK(cf_memcpy_dtoh(s, back, o, (size_t)nout * 8, 1));
        int bad = 0;
        for (int64_t j = 0; j < nout; j++) {
            double want = 0;
            for (int64_t i = 0; i < shape[axis]; i++)
                want += axis == 0 ? h[i * shape[1] + j] : h[j * shape[1] + i];
            bad += back[j] != want;
        }
        CHECK(bad == 0);
    }
    /* scan along both axes */
    for (int axis = 0; axis < 2; axis++) {
        cf_array out = view(CF_FLOAT64, 2, shape, o);
        CHECK_OK(cf_scan_launch(r, 1, s, &a, axis, &out));
        CHECK_OK(cf_memcpy_dtoh(s, back, o, (size_t)n * 8, 1));
        int bad = 0;
        for (int64_t j = 0; j < shape[1 - axis]; j++) {
            double acc = 0;
            for (int64_t i = 0; i < shape[axis]; i++) {
                int64_t idx = axis == 0 ? i * shape[1] + j : j * shape[1] + i;
                acc += h[idx];
                bad += back[idx] != acc;
            }
        }
        CHECK(bad == 0);
    }
    /* an empty reduction without an initial value */
    int64_t e[2] = {0, 3};
    cf_array ea = view(CF_FLOAT64, 2, e, d);
    unsigned char r0[2] = {1, 0};
    cf_array eo = keepdims_out(&ea, r0, CF_FLOAT64, o);
    CHECK_STATUS(cf_reduce_launch(r, 1, s, &ea, r0, &eo, NULL, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "zero-size array to reduction operation add which has no identity");
    CHECK_OK(cf_mem_free(s, d));
    CHECK_OK(cf_mem_free(s, o));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    free(h);
    free(back);
    cf_reducer_free(r);
}

/* An output that shares memory with the array or the mask is refused (CF_ERR_INVALID), never
 * computed from half-written data, and writes nothing; a scan in place (out the very same view)
 * is allowed and exact along either axis, many tiles long. */
static void test_gpu_overlap(void)
{
    NEED_GPU();
    cf_reducer *r = make_reducer();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    int64_t shape[2] = {64, 20000}, n = shape[0] * shape[1];
    double *h = malloc((size_t)n * 8), *back = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++)
        h[i] = (double)((i * 31) % 7) - 3.0; /* small integers: sums are exact */
    uint64_t d = 0, w = 0;
    CHECK_OK(cf_mem_alloc(s, (size_t)n * 8, &d));
    CHECK_OK(cf_mem_alloc(s, (size_t)n, &w));
    CHECK_OK(cf_memcpy_htod(s, d, h, (size_t)n * 8, 1));
    CHECK_OK(cf_memset8(s, w, 1, (size_t)n));
    cf_array a = view(CF_FLOAT64, 2, shape, d), mask = view(CF_BOOL, 2, shape, w);
    unsigned char red[2] = {0, 1};
    cf_array out = keepdims_out(&a, red, CF_FLOAT64, d + 8); /* inside the first row */
    CHECK_STATUS(cf_reduce_launch(r, 1, s, &a, red, &out, NULL, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "shares memory with the array");
    CHECK_STATUS(cf_reduce_all(r, 1, s, &a, d + 8 * (n - 1), CF_FLOAT64, NULL), CF_ERR_INVALID);
    uint64_t o = 0;
    CHECK_OK(cf_mem_alloc(s, (size_t)n * 8, &o));
    cf_array in2 = view(CF_FLOAT64, 2, shape, o);
    out = keepdims_out(&in2, red, CF_FLOAT64, w); /* over the mask's bytes */
    double zero = 0;
    CHECK_STATUS(cf_reduce_launch(r, 1, s, &in2, red, &out, &mask, &zero), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "shares memory with the mask");
    int64_t m = n - 1;
    cf_array in1 = view(CF_FLOAT64, 1, &m, d), shifted = view(CF_FLOAT64, 1, &m, d + 8);
    CHECK_STATUS(cf_scan_launch(r, 1, s, &in1, 0, &shifted), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "other than as the same view");
    cf_array rev = in1;
    rev.data = d + (uint64_t)(m - 1) * 8;
    rev.strides[0] = -8;
    CHECK_STATUS(cf_scan_launch(r, 1, s, &in1, 0, &rev), CF_ERR_INVALID);
    CHECK_OK(cf_memcpy_dtoh(s, back, d, (size_t)n * 8, 1));
    CHECK(memcmp(back, h, (size_t)n * 8) == 0); /* the refused launches wrote nothing */

    for (int axis = 0; axis < 2; axis++) {
        CHECK_OK(cf_memcpy_htod(s, d, h, (size_t)n * 8, 1));
        CHECK_OK(cf_scan_launch(r, 1, s, &a, axis, &a));
        CHECK_OK(cf_memcpy_dtoh(s, back, d, (size_t)n * 8, 1));
        int64_t bad = 0;
        for (int64_t j = 0; j < shape[1 - axis]; j++) {
            double acc = 0;
            for (int64_t i = 0; i < shape[axis]; i++) {
                int64_t idx = axis == 0 ? i * shape[1] + j : j * shape[1] + i;
                acc += h[idx];
                bad += back[idx] != acc;
            }
        }
        if (bad)
            fprintf(stderr, "  scan in place along axis %d: %lld wrong\n", axis, (long long)bad);
        CHECK(bad == 0);
    }
    CHECK_OK(cf_mem_free(s, d));
    CHECK_OK(cf_mem_free(s, w));
    CHECK_OK(cf_mem_free(s, o));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    free(h);
    free(back);
    cf_reducer_free(r);
}

/* ---- scans on the GPU: every tile shape, in order, exactly --------------------------------- */

/* Affine maps x -> m * x + c composed in order (first a, then b), modulo 2^32 (int64: m in the
 * high half, c in the low half) or 2^16 (int32): associative and NOT commutative, so any
 * combination out of order gives a different result; integer arithmetic makes the check exact. */
static const char *AFF_I8 =
    "#include \"cufunc/runtime.cuh\"\n"
    "__device__ cf_int64 aff8(cf_int64 a, cf_int64 b) {\n"
    "    unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;\n"
    "    unsigned m1 = (unsigned)(ua >> 32), c1 = (unsigned)ua, m2 = (unsigned)(ub >> 32), c2 = (unsigned)ub;\n"
    "    return (cf_int64)(((unsigned long long)(m1 * m2) << 32) | (unsigned long long)(m2 * c1 + c2));\n"
    "}\n";
static const char *AFF_I4 =
    "#include \"cufunc/runtime.cuh\"\n"
    "__device__ cf_int32 aff4(cf_int32 a, cf_int32 b) {\n"
    "    unsigned ua = (unsigned)a, ub = (unsigned)b;\n"
    "    unsigned m1 = ua >> 16, c1 = ua & 0xffffu, m2 = ub >> 16, c2 = ub & 0xffffu;\n"
    "    return (cf_int32)((((m1 * m2) & 0xffffu) << 16) | ((m2 * c1 + c2) & 0xffffu));\n"
    "}\n";
static const char *ADD_I1 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_int8 add_i1(cf_int8 a, cf_int8 b) { return (cf_int8)(a + b); }\n";
static const char *ADD_F4S = "#include \"cufunc/runtime.cuh\"\n"
                             "__device__ cf_float32 add_f4s(cf_float32 a, cf_float32 b) { return a + b; }\n";
static const char *ADD_C16 = "#include \"cufunc/runtime.cuh\"\n"
                             "__device__ cf_complex128 add_c16(cf_complex128 a, cf_complex128 b) { return a + b; }\n";

typedef void (*host_op)(const void *a, const void *b, void *r);

static void h_aff8(const void *a, const void *b, void *r)
{
    uint64_t ua, ub;
    memcpy(&ua, a, 8);
    memcpy(&ub, b, 8);
    uint32_t m1 = (uint32_t)(ua >> 32), c1 = (uint32_t)ua, m2 = (uint32_t)(ub >> 32), c2 = (uint32_t)ub;
    uint64_t v = ((uint64_t)(uint32_t)(m1 * m2) << 32) | (uint32_t)(m2 * c1 + c2);
    memcpy(r, &v, 8);
}
static void h_aff4(const void *a, const void *b, void *r)
{
    uint32_t ua, ub;
    memcpy(&ua, a, 4);
    memcpy(&ub, b, 4);
    uint32_t m1 = ua >> 16, c1 = ua & 0xffffu, m2 = ub >> 16, c2 = ub & 0xffffu;
    uint32_t v = (((m1 * m2) & 0xffffu) << 16) | ((m2 * c1 + c2) & 0xffffu);
    memcpy(r, &v, 4);
}
static void h_add_i1(const void *a, const void *b, void *r)
{
    uint8_t v = (uint8_t)(*(const uint8_t *)a + *(const uint8_t *)b); /* wraps as int8 does */
    memcpy(r, &v, 1);
}
static void h_add_f4(const void *a, const void *b, void *r)
{
    float x, y;
    memcpy(&x, a, 4);
    memcpy(&y, b, 4);
    x += y;
    memcpy(r, &x, 4);
}
static void h_add_f8(const void *a, const void *b, void *r)
{
    double x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    x += y;
    memcpy(r, &x, 8);
}
static void h_add_c8(const void *a, const void *b, void *r)
{
    float x[2], y[2];
    memcpy(x, a, 8);
    memcpy(y, b, 8);
    x[0] += y[0];
    x[1] += y[1];
    memcpy(r, x, 8);
}
static void h_add_c16(const void *a, const void *b, void *r)
{
    double x[2], y[2];
    memcpy(x, a, 16);
    memcpy(y, b, 16);
    x[0] += y[0];
    x[1] += y[1];
    memcpy(r, x, 16);
}
static void h_or_b(const void *a, const void *b, void *r)
{
    unsigned char v = *(const unsigned char *)a || *(const unsigned char *)b;
    memcpy(r, &v, 1);
}

/* Element i of a deterministic input of dtype dt (esz bytes): values whose scans are exact. */
static void scan_input(cf_dtype dt, int64_t i, void *dst)
{
    uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    switch (dt) {
    case CF_INT64: { /* odd multipliers: the composition never collapses to a constant */
        uint64_t v = ((uint64_t)((uint32_t)(h >> 16) | 1u) << 32) | (uint32_t)(h >> 7);
        memcpy(dst, &v, 8);
        break;
    }
    case CF_INT32: {
        uint32_t v = ((((uint32_t)(h >> 20) | 1u) & 0xffffu) << 16) | ((uint32_t)(h >> 5) & 0xffffu);
        memcpy(dst, &v, 4);
        break;
    }
    case CF_INT8: {
        int8_t v = (int8_t)(h >> 11); /* any value: the sums wrap */
        memcpy(dst, &v, 1);
        break;
    }
    case CF_FLOAT32: { /* -1, 0, 1: partial sums stay small integers, exact in any order */
        float v = (float)((int)((h >> 9) % 3) - 1);
        memcpy(dst, &v, 4);
        break;
    }
    case CF_FLOAT64: {
        double v = (double)((int)((h >> 9) % 7) - 3);
        memcpy(dst, &v, 8);
        break;
    }
    case CF_COMPLEX64: {
        float v[2] = {(float)((int)((h >> 9) % 3) - 1), (float)((int)((h >> 13) % 5) - 2)};
        memcpy(dst, v, 8);
        break;
    }
    case CF_COMPLEX128: {
        double v[2] = {(double)((int)((h >> 9) % 5) - 2), (double)((int)((h >> 17) % 3) - 1)};
        memcpy(dst, v, 16);
        break;
    }
    case CF_BOOL: {
        unsigned char v = (h >> 7) % 5000 == 0; /* rare trues: long runs of false, then true */
        memcpy(dst, &v, 1);
        break;
    }
    default:
        break;
    }
}

typedef struct scan_case {
    int loop;
    cf_dtype dt;
    host_op op;
} scan_case;

/* Scan rows x n elements along the last axis (rows == 1: a 1-d array), input starting `shift`
 * elements past a 256-byte boundary, output every `ostride`-th element (in place when ostride is
 * 0), twice (the tile counter and epochs must be ready for the next launch); compare exactly. */
static void check_scan(cf_reducer *r, cf_stream *s, const scan_case *c, int64_t rows, int64_t n,
                       int shift, int ostride)
{
    size_t esz = cf_dtype_size(c->dt);
    int64_t total = rows * n;
    unsigned char *h = malloc((size_t)total * esz), *want = malloc((size_t)total * esz);
    unsigned char *got = malloc((size_t)total * esz * (ostride > 1 ? ostride : 1));
    CHECK(h && want && got);
    if (!h || !want || !got)
        goto done;
    for (int64_t i = 0; i < total; i++)
        scan_input(c->dt, i, h + i * esz);
    for (int64_t row = 0; row < rows; row++) {
        unsigned char *w = want + row * n * esz, *x = h + row * n * esz;
        memcpy(w, x, esz);
        for (int64_t i = 1; i < n; i++)
            c->op(w + (i - 1) * esz, x + i * esz, w + i * esz);
    }
    size_t ibytes = (size_t)total * esz + 512, obytes = (size_t)total * esz * (ostride > 1 ? ostride : 1) + 256;
    uint64_t din = 0, dout = 0;
    CHECK_OK(cf_mem_alloc(s, ibytes, &din));
    if (ostride)
        CHECK_OK(cf_mem_alloc(s, obytes, &dout));
    uint64_t in_at = ((din + 255) & ~(uint64_t)255) + (uint64_t)shift * esz;
    int64_t shape[2] = {rows, n};
    int nd = rows > 1 ? 2 : 1;
    cf_array a = view(c->dt, nd, rows > 1 ? shape : shape + 1, in_at);
    cf_array o = a;
    if (ostride) {
        o.data = (dout + 255) & ~(uint64_t)255;
        o.strides[nd - 1] = (int64_t)esz * ostride;
        if (nd == 2)
            o.strides[0] = (int64_t)esz * ostride * n;
    }
    for (int rep = 0; rep < 2; rep++) {
        CHECK_OK(cf_memcpy_htod(s, in_at, h, (size_t)total * esz, 1));
        CHECK_OK(cf_scan_launch(r, c->loop, s, &a, nd - 1, &o));
        size_t step = esz * (size_t)(ostride > 1 ? ostride : 1);
        CHECK_OK(cf_memcpy_dtoh(s, got, o.data, (size_t)(total - 1) * step + esz, 1));
        int64_t bad = 0, first_bad = -1;
        for (int64_t i = 0; i < total; i++)
            if (memcmp(got + (size_t)i * step, want + i * esz, esz) != 0) {
                if (first_bad < 0)
                    first_bad = i;
                bad++;
            }
        if (bad)
            fprintf(stderr, "  scan %s rows=%lld n=%lld shift=%d ostride=%d rep %d: %lld wrong, first at "
                    "%lld\n", cf_dtype_name(c->dt), (long long)rows, (long long)n, shift, ostride,
                    rep, (long long)bad, (long long)first_bad);
        CHECK(bad == 0);
    }
    CHECK_OK(cf_mem_free(s, din));
    if (ostride)
        CHECK_OK(cf_mem_free(s, dout));
done:
    free(h);
    free(want);
    free(got);
}

static cf_reducer *make_scan_reducer(void)
{
    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("scan", &r));
    const char *opts[1] = {"--fmad=false"};
    CHECK_OK(cf_reducer_add_loop(r, CF_INT64, AFF_I8, "aff8", opts, 1, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_INT32, AFF_I4, "aff4", opts, 1, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_INT8, ADD_I1, "add_i1", opts, 1, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT32, ADD_F4S, "add_f4s", opts, 1, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT64, ADD_F8, "add_f8", opts, 1, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_COMPLEX64, ADD_C8, "add_c8", opts, 1, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_COMPLEX128, ADD_C16, "add_c16", opts, 1, NULL));
    CHECK_OK(cf_reducer_add_loop(r, CF_BOOL, OR_B, "or_b", opts, 1, NULL));
    return r;
}

static const scan_case SCAN_CASES[] = {
    {0, CF_INT64, h_aff8},  {1, CF_INT32, h_aff4},      {2, CF_INT8, h_add_i1},
    {3, CF_FLOAT32, h_add_f4}, {4, CF_FLOAT64, h_add_f8}, {5, CF_COMPLEX64, h_add_c8},
    {6, CF_COMPLEX128, h_add_c16}, {7, CF_BOOL, h_or_b},
};

/* NVRTC only: every scan loop of the scan tests compiles (no GPU needed). */
static void test_scan_kernels_compile(void)
{
    if (!have_nvrtc())
        return;
    cf_reducer *r = make_scan_reducer();
    int64_t n[1] = {100000};
    for (size_t c = 0; c < sizeof SCAN_CASES / sizeof SCAN_CASES[0]; c++) {
        cf_array a = view(SCAN_CASES[c].dt, 1, n, 0x100000);
        cf_array o = view(SCAN_CASES[c].dt, 1, n, 0x900000);
        o.strides[0] *= 2;
        compile_case(r, SCAN_CASES[c].loop, &a, NULL, 0, &a, NULL, "cf_scan_tiles<");
        compile_case(r, SCAN_CASES[c].loop, &a, NULL, 0, &o, NULL, "cf_scan_tiles<");
    }
    cf_reducer_free(r);
}

static void test_gpu_scan_tiles(void)
{
    NEED_GPU();
    cf_reducer *r = make_scan_reducer();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    for (size_t c = 0; c < sizeof SCAN_CASES / sizeof SCAN_CASES[0]; c++) {
        const scan_case *sc = &SCAN_CASES[c];
        /* the tile of this loop's kernel, from the geometry the launch uses */
        int64_t big[1] = {1 << 24};
        cf_array a = view(sc->dt, 1, big, 0x100000);
        cf_reduce_plan p;
        cf_reduce_geom g;
        CHECK_OK(cf_reduce_plan_scan(&p, &a, 0, &a));
        CHECK_OK(cf_reduce_geometry(&p, sc->dt, sc->dt, a.data, 132, 0, &g));
        const int64_t tile = g.chunk;
        const int64_t warp_seg = 32 * (int64_t)g.items;
        int64_t sizes[] = {1, 2, 31, 32, 33, warp_seg - 1, warp_seg, warp_seg + 1, tile - 1, tile,
                           tile + 1, 2 * tile - 1, 2 * tile, 2 * tile + 1, 33 * tile,
                           33 * tile + 7, 70 * tile + 3, 1000003};
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            check_scan(r, s, sc, 1, sizes[k], 0, 1);
        /* in place; a misaligned start (element loads); a strided output (element stores) */
        check_scan(r, s, sc, 1, 5 * tile + 17, 0, 0);
        check_scan(r, s, sc, 1, 5 * tile + 17, 1, 1);
        check_scan(r, s, sc, 1, 3 * tile + 5, 0, 2);
        /* several rows of several tiles: each row's look-back stops at its own first tile */
        check_scan(r, s, sc, 7, 2 * tile + 3, 0, 1);
        check_scan(r, s, sc, 40, tile, 0, 1);
    }
    /* a strided scan axis with few columns: tiles read along the axis element by element */
    {
        const scan_case *sc = &SCAN_CASES[1];
        int64_t shape[2] = {20011, 3};
        size_t esz = 4;
        int64_t total = shape[0] * shape[1];
        uint32_t *h = malloc((size_t)total * esz), *got = malloc((size_t)total * esz);
        uint32_t *want = malloc((size_t)total * esz);
        for (int64_t i = 0; i < total; i++)
            scan_input(CF_INT32, i, h + i);
        for (int64_t j = 0; j < shape[1]; j++) {
            want[j] = h[j];
            for (int64_t i = 1; i < shape[0]; i++)
                h_aff4(&want[(i - 1) * shape[1] + j], &h[i * shape[1] + j], &want[i * shape[1] + j]);
        }
        uint64_t d = 0, o = 0;
        CHECK_OK(cf_mem_alloc(s, (size_t)total * esz, &d));
        CHECK_OK(cf_mem_alloc(s, (size_t)total * esz, &o));
        CHECK_OK(cf_memcpy_htod(s, d, h, (size_t)total * esz, 1));
        cf_array a = view(CF_INT32, 2, shape, d), out = view(CF_INT32, 2, shape, o);
        cf_reduce_plan p;
        CHECK_OK(cf_reduce_plan_scan(&p, &a, 0, &out));
        CHECK(p.kind == CF_SCAN_TILES);
        CHECK_OK(cf_scan_launch(r, sc->loop, s, &a, 0, &out));
        CHECK_OK(cf_memcpy_dtoh(s, got, o, (size_t)total * esz, 1));
        CHECK(memcmp(got, want, (size_t)total * esz) == 0);
        CHECK_OK(cf_mem_free(s, d));
        CHECK_OK(cf_mem_free(s, o));
        free(h);
        free(got);
        free(want);
    }
    /* int8 elements into the int64 affine loop's sibling: int32 elements into int64 sums (mixed
     * dtypes: converted on load, 16-byte vectors of the input) */
    {
        cf_reducer *add = make_reducer();
        int64_t n = 3 * 8192 + 11;
        int32_t *h = malloc((size_t)n * 4);
        int64_t *got = malloc((size_t)n * 8), acc = 0;
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            h[i] = (int32_t)((i * 2654435761u) % 2001) - 1000;
        uint64_t d = 0, o = 0;
        CHECK_OK(cf_mem_alloc(s, (size_t)n * 4, &d));
        CHECK_OK(cf_mem_alloc(s, (size_t)n * 8, &o));
        CHECK_OK(cf_memcpy_htod(s, d, h, (size_t)n * 4, 1));
        cf_array a = view(CF_INT32, 1, &n, d), out = view(CF_INT64, 1, &n, o);
        CHECK_OK(cf_scan_launch(add, 2, s, &a, 0, &out));
        CHECK_OK(cf_memcpy_dtoh(s, got, o, (size_t)n * 8, 1));
        for (int64_t i = 0; i < n; i++) {
            acc += h[i];
            bad += got[i] != acc;
        }
        CHECK(bad == 0);
        CHECK_OK(cf_mem_free(s, d));
        CHECK_OK(cf_mem_free(s, o));
        free(h);
        free(got);
        cf_reducer_free(add);
    }
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_reducer_free(r);
}

/* max written as the user writes it (a select): NaN placement decides the result as the body
 * says, identical to a host fold over the same order only when there is no NaN; here none. */
static void test_gpu_max_select(void)
{
    NEED_GPU();
    static const char *MAX_F4 = "#include \"cufunc/runtime.cuh\"\n"
                                "__device__ cf_float32 mx(cf_float32 a, cf_float32 b) { return ((a > b) ? a : b); }\n";
    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("max", &r));
    const char *opts[1] = {"--fmad=false"};
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT32, MAX_F4, "mx", opts, 1, NULL));
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    static const int64_t sizes[] = {1, 5, 2047, 2048, 2049, 65536 * 3 + 7, 4000037};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        int64_t n = sizes[c];
        float *h = malloc((size_t)n * 4), want = -1e30f;
        for (int64_t i = 0; i < n; i++) {
            h[i] = -1000.0f - (float)((i * 7919) % 100003); /* all negative */
            if (h[i] > want)
                want = h[i];
        }
        uint64_t d = 0, res = 0;
        CHECK_OK(cf_mem_alloc(s, (size_t)n * 4, &d));
        CHECK_OK(cf_mem_alloc(s, 4, &res));
        CHECK_OK(cf_memcpy_htod(s, d, h, (size_t)n * 4, 1));
        cf_array a = view(CF_FLOAT32, 1, &n, d);
        for (int rep = 0; rep < 2; rep++) {
            CHECK_OK(cf_reduce_all(r, 0, s, &a, res, CF_FLOAT32, NULL));
            float got = 0;
            CHECK_OK(cf_memcpy_dtoh(s, &got, res, 4, 1));
            CHECK(got == want);
        }
        CHECK_OK(cf_mem_free(s, d));
        CHECK_OK(cf_mem_free(s, res));
        free(h);
    }
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_reducer_free(r);
}

int main(void)
{
    RUN(test_loops);
    RUN(test_plan_rows_cols_all);
    RUN(test_plan_strided_and_where);
    RUN(test_plan_scan);
    RUN(test_geometry);
    RUN(test_kernels_compile);
    RUN(test_gpu_full);
    RUN(test_gpu_axes_and_scan);
    RUN(test_gpu_overlap);
    RUN(test_scan_kernels_compile);
    RUN(test_gpu_scan_tiles);
    RUN(test_gpu_max_select);
    return SUMMARY();
}
