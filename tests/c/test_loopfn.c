/* test_loopfn.c: a loop's module globals (captured device arrays): the loop record's copies
 * (src/loopfn.c), the checks of cf_module_load_globals that need no GPU (a global on another
 * device than the launch's), cf_array_ref_pack's layout, the engines' add-loop entry points, and
 * the kernels of loops that declare globals compiling with NVRTC. Behind NEED_GPU(): values are
 * written at load, each set of values gets its own module, and the element-wise engine reads a
 * captured array (and sees a later change of its contents). */
#include <stdint.h>

#include "check.h"
#include "testing.h"
#include "alloc.h"
#include "loopfn.h"

/* A loop reading a captured float32 table through an extern "C" __constant__ descriptor, the
 * way cufunc/lang/captures.py writes them. */
static const char *LOOKUP =
    "#include \"cufunc/runtime.cuh\"\n"
    "extern \"C\" {\n"
    "__constant__ cf_array_ref<cf_float32, 1> cap_table;\n"
    "}\n"
    "__device__ cf_float32 lookup(cf_int32 i)\n"
    "{ return *(const cf_float32 *)(cap_table.data + (long long)i * cap_table.strides[0]); }\n";

static const char *LOOKUP_ROW =
    "#include \"cufunc/runtime.cuh\"\n"
    "extern \"C\" {\n"
    "__constant__ cf_array_ref<cf_float32, 1> cap_table;\n"
    "}\n"
    "__device__ void lookup_row(cf_array_ref<cf_float32, 1> x, cf_array_ref<cf_float32, 1> o)\n"
    "{\n"
    "    cf_float32 s = 0;\n"
    "    for (long long j = 0; j < x.shape[0]; j++)\n"
    "        s += *(cf_float32 *)(x.data + j * x.strides[0]) *\n"
    "             *(const cf_float32 *)(cap_table.data + j * cap_table.strides[0]);\n"
    "    *(cf_float32 *)o.data = s;\n"
    "}\n";

static const char *WEIGHTED_MAX =
    "#include \"cufunc/runtime.cuh\"\n"
    "extern \"C\" {\n"
    "__constant__ cf_array_ref<cf_float32, 1> cap_w;\n"
    "}\n"
    "__device__ cf_int64 heaviest(cf_int64 a, cf_int64 b)\n"
    "{\n"
    "    cf_float32 wa = *(const cf_float32 *)(cap_w.data + a * cap_w.strides[0]);\n"
    "    cf_float32 wb = *(const cf_float32 *)(cap_w.data + b * cap_w.strides[0]);\n"
    "    return wa > wb || (wa == wb && a < b) ? a : b;\n"
    "}\n";

static int have_nvrtc(void)
{
    if (cf_nvrtc_init() == CF_OK)
        return 1;
    CHECK_OK(cf_nvrtc_init()); /* CI has NVRTC: its absence is a failure, not a skip */
    return 0;
}

static cf_module_global global_of(const char *name, const void *bytes, size_t size, int device,
                                  const char *label)
{
    cf_module_global g;
    g.name = name;
    g.bytes = bytes;
    g.size = size;
    g.device = device;
    g.label = label;
    return g;
}

static void test_record_copies_globals(void)
{
    int64_t before = cf_test_alloc_outstanding();
    char name0[] = "cap_a", name1[] = "cap_b", label0[] = "the array 'a'";
    unsigned char v0[24], v1[8];
    for (int i = 0; i < 24; i++)
        v0[i] = (unsigned char)i;
    memset(v1, 0xab, sizeof v1);
    cf_module_global g[2] = {global_of(name0, v0, sizeof v0, 0, label0),
                             global_of(name1, v1, sizeof v1, -1, NULL)};
    const char *opts[1] = {"--fmad=false"};
    cf_loop_fn f;
    CHECK_OK(cf_loop_fn_init(&f, LOOKUP, "lookup", opts, 1, g, 2));
    /* the caller's buffers may change or go away: the record has its own copies */
    memset(name0, 'x', 5);
    memset(label0, 'x', 5);
    memset(v0, 0, sizeof v0);
    CHECK(f.nglobals == 2 && f.globals != NULL);
    if (f.nglobals == 2) {
        CHECK(strcmp(f.globals[0].name, "cap_a") == 0);
        CHECK(strcmp(f.globals[0].label, "the array 'a'") == 0);
        CHECK(f.globals[0].size == 24 && f.globals[0].device == 0);
        const unsigned char *c = f.globals[0].bytes;
        CHECK(c[0] == 0 && c[5] == 5 && c[23] == 23);
        CHECK(strcmp(f.globals[1].name, "cap_b") == 0 && f.globals[1].label == NULL);
        CHECK(f.globals[1].size == 8 && f.globals[1].device == -1);
        CHECK(((const unsigned char *)f.globals[1].bytes)[7] == 0xab);
    }
    cf_loop_fn_clear(&f);
    CHECK(f.globals == NULL && f.nglobals == 0 && f.source == NULL);
    cf_loop_fn_clear(&f); /* no-op on a cleared record */
    /* no globals: nothing allocated for them */
    CHECK_OK(cf_loop_fn_init(&f, LOOKUP, "lookup", NULL, 0, NULL, 0));
    CHECK(f.globals == NULL && f.nglobals == 0);
    cf_loop_fn_clear(&f);
    CHECK(cf_test_alloc_outstanding() == before);
}

static void test_record_rejects_bad_globals(void)
{
    int64_t before = cf_test_alloc_outstanding();
    unsigned char v[8] = {0};
    struct {
        cf_module_global g[2];
        int n;
        const char *why;
    } cases[] = {
        {{global_of(NULL, v, 8, 0, NULL)}, 1, "no name"},
        {{global_of("", v, 8, 0, NULL)}, 1, "empty name"},
        {{global_of("g", NULL, 8, 0, NULL)}, 1, "no value"},
        {{global_of("g", v, 0, 0, NULL)}, 1, "size 0"},
        {{global_of("g", v, 8, -2, NULL)}, 1, "device -2"},
        {{global_of("g", v, 8, 0, NULL), global_of("g", v, 8, 0, NULL)}, 2, "two named g"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cf_loop_fn f;
        cf_status st = cf_loop_fn_init(&f, LOOKUP, "lookup", NULL, 0, cases[i].g, cases[i].n);
        if (st != CF_ERR_INVALID)
            fprintf(stderr, "  case '%s' gave %s\n", cases[i].why, cf_status_name(st));
        CHECK(st == CF_ERR_INVALID);
        CHECK(f.source == NULL && f.globals == NULL && f.nglobals == 0);
    }
    cf_loop_fn f;
    CHECK_STATUS(cf_loop_fn_init(&f, LOOKUP, "lookup", NULL, 0, NULL, 1), CF_ERR_INVALID);
    CHECK_STATUS(cf_loop_fn_init(&f, LOOKUP, "lookup", NULL, 0, cases[0].g, -1), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "globals");
    CHECK(cf_test_alloc_outstanding() == before);
}

static void test_record_allocation_failures(void)
{
    int64_t before = cf_test_alloc_outstanding();
    unsigned char v0[40] = {1}, v1[8] = {2};
    cf_module_global g[2] = {global_of("cap_a", v0, sizeof v0, 0, "a"),
                             global_of("cap_b", v1, sizeof v1, 0, NULL)};
    const char *opts[2] = {"--fmad=false", "-lineinfo"};
    int ok = 0;
    for (int k = 1; k < 40 && !ok; k++) {
        cf_loop_fn f;
        cf_test_fail_alloc_after(k, 0);
        cf_status st = cf_loop_fn_init(&f, LOOKUP, "lookup", opts, 2, g, 2);
        cf_test_fail_alloc_after(0, 0);
        CHECK(st == CF_OK || st == CF_ERR_NOMEM);
        if (st == CF_OK) {
            ok = 1;
            CHECK(f.nglobals == 2 && f.noptions == 2);
            cf_loop_fn_clear(&f);
        } else {
            CHECK(f.source == NULL && f.globals == NULL && f.nglobals == 0);
        }
        CHECK(cf_test_alloc_outstanding() == before);
    }
    CHECK(ok);
}

static void test_array_ref_pack(void)
{
    cf_array a;
    int64_t shape[2] = {3, 5};
    CHECK_OK(cf_array_init_contiguous(&a, 0x7f0000001000ull, CF_FLOAT64, 2, shape, 'C', 0));
    unsigned char buf[CF_ARRAY_REF_MAX_BYTES];
    size_t size = 0;
    CHECK_OK(cf_array_ref_pack(&a, buf, sizeof buf, &size));
    CHECK(size == 8 + 2 * 16);
    uint64_t data;
    int64_t words[4];
    memcpy(&data, buf, 8);
    memcpy(words, buf + 8, 32);
    CHECK(data == 0x7f0000001000ull);
    CHECK(words[0] == 3 && words[1] == 5);   /* the shape */
    CHECK(words[2] == 40 && words[3] == 8);  /* then the byte strides */
    /* negative strides travel as they are */
    a.strides[1] = -8;
    CHECK_OK(cf_array_ref_pack(&a, buf, sizeof buf, &size));
    memcpy(words, buf + 8, 32);
    CHECK(words[3] == -8);
    /* 0-d: cf_array_ref<T, 0> is the pointer alone */
    a.ndim = 0;
    CHECK_OK(cf_array_ref_pack(&a, buf, sizeof buf, &size));
    CHECK(size == 8);
    a.ndim = 2;
    CHECK_STATUS(cf_array_ref_pack(&a, buf, 39, &size), CF_ERR_INVALID);
    CHECK(size == 0);
    a.ndim = CF_MAX_DIMS + 1;
    CHECK_STATUS(cf_array_ref_pack(&a, buf, sizeof buf, &size), CF_ERR_INVALID);
    a.ndim = -1;
    CHECK_STATUS(cf_array_ref_pack(&a, buf, sizeof buf, &size), CF_ERR_INVALID);
    CHECK_STATUS(cf_array_ref_pack(NULL, buf, sizeof buf, &size), CF_ERR_INVALID);
    CHECK_STATUS(cf_array_ref_pack(&a, NULL, sizeof buf, &size), CF_ERR_INVALID);
    a.ndim = CF_MAX_DIMS;
    CHECK_OK(cf_array_ref_pack(&a, buf, sizeof buf, &size));
    CHECK(size == CF_ARRAY_REF_MAX_BYTES);
}

/* The seam for "a captured array on another device than the launch's": the check comes before
 * anything touches the GPU, so it is the same on a machine with one GPU or none. */
static void test_wrong_device_is_refused_before_the_gpu(void)
{
    unsigned char v[24] = {0};
    cf_module_global g = global_of("cap_table", v, sizeof v, 1,
                                   "the global device array 'table' captured by lookup");
    cf_module *m = (cf_module *)1;
    CHECK_STATUS(cf_module_load_globals(0, LOOKUP, NULL, 0, &g, 1, &m), CF_ERR_INVALID);
    CHECK(m == NULL);
    CHECK_CONTAINS(cf_last_error(), "the global device array 'table' captured by lookup is on "
                                    "device 1, but the kernel runs on device 0");
    /* through the loop record, as every engine loads a loop's kernels */
    cf_loop_fn f;
    CHECK_OK(cf_loop_fn_init(&f, LOOKUP, "lookup", NULL, 0, &g, 1));
    CHECK_STATUS(cf_loop_fn_load(&f, 0, LOOKUP, &m), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "'table' captured by lookup is on device 1");
    CHECK_STATUS(cf_loop_fn_load(&f, 2, LOOKUP, &m), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "is on device 1, but the kernel runs on device 2");
    cf_loop_fn_clear(&f);
    /* without a label, the message names the variable */
    g.label = NULL;
    CHECK_STATUS(cf_module_load_globals(3, LOOKUP, NULL, 0, &g, 1, &m), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cap_table is on device 1");
    /* malformed globals, also before the GPU */
    g = global_of("cap_table", v, sizeof v, -1, NULL);
    CHECK_STATUS(cf_module_load_globals(0, LOOKUP, NULL, 0, NULL, 1, &m), CF_ERR_INVALID);
    CHECK_STATUS(cf_module_load_globals(0, LOOKUP, NULL, 0, &g, -1, &m), CF_ERR_INVALID);
    g.size = 0;
    CHECK_STATUS(cf_module_load_globals(0, LOOKUP, NULL, 0, &g, 1, &m), CF_ERR_INVALID);
    g.size = sizeof v;
    g.name = "";
    CHECK_STATUS(cf_module_load_globals(0, LOOKUP, NULL, 0, &g, 1, &m), CF_ERR_INVALID);
    CHECK_STATUS(cf_module_load_globals(0, LOOKUP, NULL, 0, &g, 1, NULL), CF_ERR_INVALID);
}

static void test_engines_take_globals(void)
{
    unsigned char v[24] = {0};
    cf_module_global g[2] = {global_of("cap_table", v, sizeof v, 0, "table"),
                             global_of("cap_table", v, sizeof v, 0, "again")};
    const char *opts[1] = {"--fmad=false"};
    int idx = -1;

    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("lookup", 1, 1, &u));
    cf_dtype ut[2] = {CF_INT32, CF_FLOAT32};
    CHECK_STATUS(cf_ufunc_add_loop_globals(u, ut, LOOKUP, "lookup", opts, 1, g, 2, &idx),
                 CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "two globals named 'cap_table'");
    CHECK(cf_ufunc_nloops(u) == 0);
    CHECK_OK(cf_ufunc_add_loop_globals(u, ut, LOOKUP, "lookup", opts, 1, g, 1, &idx));
    CHECK(idx == 0 && cf_ufunc_nloops(u) == 1);
    cf_ufunc_free(u);

    cf_gufunc *gu = NULL;
    CHECK_OK(cf_gufunc_create("lookup_row", "(n)->()", &gu));
    cf_dtype gt[2] = {CF_FLOAT32, CF_FLOAT32};
    int nd[2] = {1, 1};
    CHECK_STATUS(cf_gufunc_add_loop_globals(gu, gt, nd, LOOKUP_ROW, "lookup_row", opts, 1, NULL,
                                            1, &idx), CF_ERR_INVALID);
    CHECK(cf_gufunc_nloops(gu) == 0);
    CHECK_OK(cf_gufunc_add_loop_globals(gu, gt, nd, LOOKUP_ROW, "lookup_row", opts, 1, g, 1,
                                        &idx));
    CHECK(idx == 0 && cf_gufunc_nloops(gu) == 1);
    cf_gufunc_free(gu);

    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("heaviest", &r));
    g[0].name = "cap_w";
    g[0].size = 0;
    CHECK_STATUS(cf_reducer_add_loop_globals(r, CF_INT64, WEIGHTED_MAX, "heaviest", opts, 1, g,
                                             1, &idx), CF_ERR_INVALID);
    CHECK(cf_reducer_nloops(r) == 0);
    g[0].size = sizeof v;
    CHECK_OK(cf_reducer_add_loop_globals(r, CF_INT64, WEIGHTED_MAX, "heaviest", opts, 1, g, 1,
                                         &idx));
    CHECK(idx == 0 && cf_reducer_find_loop(r, CF_INT64) == 0);
    cf_reducer_free(r);
}

static void compile_ok(const char *src, const char *what)
{
    void *image = NULL;
    size_t size = 0;
    int is_ptx = 0;
    const char *opts[1] = {"--fmad=false"};
    cf_status st = cf_compile_source(src, opts, 1, 9, 0, &image, &size, &is_ptx);
    if (st != CF_OK)
        fprintf(stderr, "  %s: %s\n", what, cf_last_error());
    CHECK(st == CF_OK && size > 0);
    cf_free_buffer(image);
}

/* The kernels of loops that declare extern "C" __constant__ globals compile in every engine (the
 * engines place a loop's source at file scope, where extern "C" blocks may go). */
static void test_kernels_with_globals_compile(void)
{
    if (!have_nvrtc())
        return;
    unsigned char v[24] = {0};
    cf_module_global g = global_of("cap_table", v, sizeof v, 0, "table");
    const char *opts[1] = {"--fmad=false"};
    char *src = NULL;

    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("lookup", 1, 1, &u));
    cf_dtype ut[2] = {CF_INT32, CF_FLOAT32};
    CHECK_OK(cf_ufunc_add_loop_globals(u, ut, LOOKUP, "lookup", opts, 1, &g, 1, NULL));
    int64_t shape[1] = {1000};
    cf_operand ops[2];
    memset(ops, 0, sizeof ops);
    cf_array_init_contiguous(&ops[0].array, 0x100000, CF_INT32, 1, shape, 'C', 0);
    cf_array_init_contiguous(&ops[1].array, 0x200000, CF_FLOAT32, 1, shape, 'C', 0);
    CHECK_OK(cf_ufunc_kernel_source(u, 0, ops, NULL, 1, shape, &src));
    if (src) {
        CHECK_CONTAINS(src, "cap_table");
        compile_ok(src, "ufunc kernel");
    }
    cf_free_buffer(src);
    src = NULL;
    cf_ufunc_free(u);

    cf_gufunc *gu = NULL;
    CHECK_OK(cf_gufunc_create("lookup_row", "(n)->()", &gu));
    cf_dtype gt[2] = {CF_FLOAT32, CF_FLOAT32};
    int nd[2] = {1, 1};
    CHECK_OK(cf_gufunc_add_loop_globals(gu, gt, nd, LOOKUP_ROW, "lookup_row", opts, 1, &g, 1,
                                        NULL));
    int64_t in_shape[2] = {100, 8}, out_shape[1] = {100};
    cf_operand gops[2];
    memset(gops, 0, sizeof gops);
    cf_array_init_contiguous(&gops[0].array, 0x100000, CF_FLOAT32, 2, in_shape, 'C', 0);
    cf_array_init_contiguous(&gops[1].array, 0x200000, CF_FLOAT32, 1, out_shape, 'C', 0);
    unsigned char has_out[1] = {1};
    cf_gufunc_shapes sh;
    CHECK_OK(cf_gufunc_bind(gu, gops, has_out, &sh));
    CHECK_OK(cf_gufunc_kernel_source(gu, 0, gops, &sh, 1, &src));
    if (src) {
        CHECK_CONTAINS(src, "cap_table");
        compile_ok(src, "gufunc kernel");
    }
    cf_free_buffer(src);
    src = NULL;
    cf_gufunc_free(gu);

    cf_reducer *r = NULL;
    CHECK_OK(cf_reducer_create("heaviest", &r));
    g.name = "cap_w";
    CHECK_OK(cf_reducer_add_loop_globals(r, CF_INT64, WEIGHTED_MAX, "heaviest", opts, 1, &g, 1,
                                         NULL));
    cf_array in, out;
    int64_t n[1] = {1 << 20}, one[1] = {1};
    cf_array_init_contiguous(&in, 0x100000, CF_INT64, 1, n, 'C', 0);
    cf_array_init_contiguous(&out, 0x200000, CF_INT64, 1, one, 'C', 0);
    unsigned char reduced[1] = {1};
    CHECK_OK(cf_reduce_kernel_source(r, 0, &in, reduced, -1, &out, NULL, &src));
    if (src) {
        CHECK_CONTAINS(src, "cap_w");
        compile_ok(src, "reduction kernel");
    }
    cf_free_buffer(src);
    src = NULL;
    CHECK_OK(cf_reduce_kernel_source(r, 0, &in, NULL, 0, &in, NULL, &src)); /* a scan */
    if (src)
        compile_ok(src, "scan kernel");
    cf_free_buffer(src);
    cf_reducer_free(r);
}

/* ---- on the GPU ------------------------------------------------------------------------------ */

static const char *READ_GLOBAL =
    "#include \"cufunc/runtime.cuh\"\n"
    "extern \"C\" {\n"
    "__constant__ cf_array_ref<cf_float32, 1> cap_table;\n"
    "__device__ long long dev_value;\n"
    "}\n"
    "extern \"C\" __global__ void read_global(float *out, long long *shape_out)\n"
    "{\n"
    "    out[threadIdx.x] = *(const float *)(cap_table.data + threadIdx.x * cap_table.strides[0]);\n"
    "    if (threadIdx.x == 0) { shape_out[0] = cap_table.shape[0]; shape_out[1] = dev_value; }\n"
    "}\n";

static void test_globals_are_written_at_load(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    float t1[32], t2[32], got[32];
    for (int i = 0; i < 32; i++) {
        t1[i] = (float)i;
        t2[i] = (float)(1000 - i);
    }
    uint64_t d1 = 0, d2 = 0, dout = 0, dshape = 0;
    CHECK_OK(cf_mem_alloc(s, sizeof t1, &d1));
    CHECK_OK(cf_mem_alloc(s, sizeof t2, &d2));
    CHECK_OK(cf_mem_alloc(s, sizeof got, &dout));
    CHECK_OK(cf_mem_alloc(s, 16, &dshape));
    CHECK_OK(cf_memcpy_htod(s, d1, t1, sizeof t1, 1));
    CHECK_OK(cf_memcpy_htod(s, d2, t2, sizeof t2, 1));

    int64_t shape[1] = {32};
    cf_array a1, a2;
    CHECK_OK(cf_array_init_contiguous(&a1, d1, CF_FLOAT32, 1, shape, 'C', 0));
    CHECK_OK(cf_array_init_contiguous(&a2, d2, CF_FLOAT32, 1, shape, 'C', 0));
    unsigned char b1[CF_ARRAY_REF_MAX_BYTES], b2[CF_ARRAY_REF_MAX_BYTES];
    size_t n1 = 0, n2 = 0;
    CHECK_OK(cf_array_ref_pack(&a1, b1, sizeof b1, &n1));
    CHECK_OK(cf_array_ref_pack(&a2, b2, sizeof b2, &n2));
    long long seven = 7, eight = 8;
    cf_module_global g1[2] = {global_of("cap_table", b1, n1, 0, "table 1"),
                              global_of("dev_value", &seven, 8, -1, NULL)};
    cf_module_global g2[2] = {global_of("cap_table", b2, n2, 0, "table 2"),
                              global_of("dev_value", &eight, 8, -1, NULL)};
    cf_module *m1 = NULL, *m2 = NULL, *m1again = NULL, *plain = NULL;
    CHECK_OK(cf_module_load_globals(0, READ_GLOBAL, NULL, 0, g1, 2, &m1));
    CHECK_OK(cf_module_load_globals(0, READ_GLOBAL, NULL, 0, g2, 2, &m2));
    CHECK_OK(cf_module_load_globals(0, READ_GLOBAL, NULL, 0, g1, 2, &m1again));
    CHECK_OK(cf_module_load(0, READ_GLOBAL, NULL, 0, &plain));
    /* one module per set of values; the same values give the same module */
    CHECK(m1 && m2 && m1 != m2 && m1again == m1 && plain != m1 && plain != m2);
    cf_module *ms[2] = {m1, m2};
    const float *want[2] = {t1, t2};
    for (int k = 0; k < 2 && m1 && m2; k++) {
        cf_function *fn = NULL;
        CHECK_OK(cf_module_function(ms[k], "read_global", &fn));
        if (!fn)
            continue;
        void *args[] = {&dout, &dshape};
        unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
        CHECK_OK(cf_launch(fn, grid, block, 0, s, args));
        long long sh[2] = {0, 0};
        CHECK_OK(cf_memcpy_dtoh(s, got, dout, sizeof got, 1));
        CHECK_OK(cf_memcpy_dtoh(s, sh, dshape, sizeof sh, 1));
        CHECK(memcmp(got, want[k], sizeof got) == 0);
        CHECK(sh[0] == 32 && sh[1] == (k == 0 ? 7 : 8));
    }
    /* a size that is not the variable's, and a name the module does not define */
    unsigned char small[8] = {0};
    cf_module_global bad = global_of("cap_table", small, sizeof small, 0, "the small one");
    cf_module *mb = NULL;
    CHECK_STATUS(cf_module_load_globals(0, READ_GLOBAL, NULL, 0, &bad, 1, &mb), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "has 24 bytes, but the small one has 8");
    bad = global_of("no_such_variable", b1, n1, 0, NULL);
    CHECK_STATUS(cf_module_load_globals(0, READ_GLOBAL, NULL, 0, &bad, 1, &mb), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "no variable named 'no_such_variable'");
    CHECK(mb == NULL);
    CHECK_OK(cf_stream_synchronize(s));
    cf_mem_free(s, d1);
    cf_mem_free(s, d2);
    cf_mem_free(s, dout);
    cf_mem_free(s, dshape);
    cf_stream_free(s);
}

/* Two ufuncs with the same loop source capturing different tables: each reads its own, and a
 * change of a table's contents is seen by the next launch. */
static void test_ufunc_reads_a_captured_array(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    enum { T = 64, N = 100000 };
    float t1[T], t2[T];
    for (int i = 0; i < T; i++) {
        t1[i] = (float)i * 0.5f;
        t2[i] = -(float)i;
    }
    int32_t *idx = malloc(N * sizeof *idx);
    float *out = malloc(N * sizeof *out);
    for (int i = 0; i < N; i++)
        idx[i] = (int32_t)((i * 7) % T);
    uint64_t d1 = 0, d2 = 0, didx = 0, dout = 0;
    CHECK_OK(cf_mem_alloc(s, sizeof t1, &d1));
    CHECK_OK(cf_mem_alloc(s, sizeof t2, &d2));
    CHECK_OK(cf_mem_alloc(s, N * sizeof *idx, &didx));
    CHECK_OK(cf_mem_alloc(s, N * sizeof *out, &dout));
    CHECK_OK(cf_memcpy_htod(s, d1, t1, sizeof t1, 1));
    CHECK_OK(cf_memcpy_htod(s, d2, t2, sizeof t2, 1));
    CHECK_OK(cf_memcpy_htod(s, didx, idx, N * sizeof *idx, 1));

    int64_t tshape[1] = {T}, shape[1] = {N};
    cf_array a1, a2;
    CHECK_OK(cf_array_init_contiguous(&a1, d1, CF_FLOAT32, 1, tshape, 'C', 0));
    CHECK_OK(cf_array_init_contiguous(&a2, d2, CF_FLOAT32, 1, tshape, 'C', 0));
    unsigned char b1[CF_ARRAY_REF_MAX_BYTES], b2[CF_ARRAY_REF_MAX_BYTES];
    size_t n1 = 0, n2 = 0;
    CHECK_OK(cf_array_ref_pack(&a1, b1, sizeof b1, &n1));
    CHECK_OK(cf_array_ref_pack(&a2, b2, sizeof b2, &n2));
    cf_module_global g1 = global_of("cap_table", b1, n1, 0, "t1");
    cf_module_global g2 = global_of("cap_table", b2, n2, 0, "t2");
    const char *opts[1] = {"--fmad=false"};
    cf_dtype ut[2] = {CF_INT32, CF_FLOAT32};
    cf_ufunc *u1 = NULL, *u2 = NULL;
    CHECK_OK(cf_ufunc_create("lookup1", 1, 1, &u1));
    CHECK_OK(cf_ufunc_create("lookup2", 1, 1, &u2));
    CHECK_OK(cf_ufunc_add_loop_globals(u1, ut, LOOKUP, "lookup", opts, 1, &g1, 1, NULL));
    CHECK_OK(cf_ufunc_add_loop_globals(u2, ut, LOOKUP, "lookup", opts, 1, &g2, 1, NULL));
    cf_operand ops[2];
    memset(ops, 0, sizeof ops);
    cf_array_init_contiguous(&ops[0].array, didx, CF_INT32, 1, shape, 'C', 0);
    cf_array_init_contiguous(&ops[1].array, dout, CF_FLOAT32, 1, shape, 'C', 0);
    for (int round = 0; round < 3; round++) {
        cf_ufunc *u = round == 1 ? u2 : u1;
        const float *t = round == 1 ? t2 : t1;
        CHECK_OK(cf_memset8(s, dout, 0xff, N * sizeof *out));
        CHECK_OK(cf_ufunc_launch(u, 0, s, ops, NULL, 1, shape));
        CHECK_OK(cf_memcpy_dtoh(s, out, dout, N * sizeof *out, 1));
        int bad = 0;
        for (int i = 0; i < N; i++)
            bad += out[i] != t[idx[i]];
        if (bad)
            fprintf(stderr, "  round %d: %d wrong\n", round, bad);
        CHECK(bad == 0);
        if (round == 1) { /* new contents of table 1, seen by u1's next launch */
            for (int i = 0; i < T; i++)
                t1[i] = (float)(3 * i + 1);
            CHECK_OK(cf_memcpy_htod(s, d1, t1, sizeof t1, 1));
        }
    }
    CHECK_OK(cf_stream_synchronize(s));
    cf_ufunc_free(u1);
    cf_ufunc_free(u2);
    cf_mem_free(s, d1);
    cf_mem_free(s, d2);
    cf_mem_free(s, didx);
    cf_mem_free(s, dout);
    cf_stream_free(s);
    free(idx);
    free(out);
}

/* The loop-list helpers the ufunc and gufunc engines add loops with (loopfn.h). */
typedef struct test_loop {
    cf_dtype types[3];
    int tag;
} test_loop;

static void test_loop_list_helpers(void)
{
    cf_dtype ok[3] = {CF_FLOAT32, CF_INT64, CF_FLOAT64}, bad[3] = {CF_FLOAT32, (cf_dtype)99, CF_BOOL};
    cf_dtype half[3] = {CF_FLOAT32, CF_FLOAT16, CF_FLOAT32};
    CHECK_OK(cf_loops_check_types(ok, 3));
    CHECK_STATUS(cf_loops_check_types(bad, 3), CF_ERR_TYPE);
    CHECK_CONTAINS(cf_last_error(), "loop type 2 is not a valid dtype");
    CHECK_OK(cf_loops_check_types(half, 3)); /* float16 loops are kernels like any other now */

    /* appended past the first allocation (4): every loop kept, in order, indices returned */
    test_loop *loops = NULL;
    int n = 0, cap = 0, idx = -1;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int64_t before = cf_test_alloc_outstanding();
    for (int k = 0; k < 9; k++) {
        test_loop l = {{(cf_dtype)(k % CF_NDTYPES), CF_INT32, CF_FLOAT64}, 100 + k};
        CHECK_OK(cf_loops_check_new("ufunc", "f", loops ? loops[0].types : NULL, sizeof l, n, 1,
                                    l.types));
        CHECK_OK(cf_loops_append(&loops, &n, &cap, sizeof l, &l, &lock, &idx));
        CHECK(idx == k && n == k + 1 && cap >= n);
    }
    CHECK(cap == 16);
    for (int k = 0; k < 9; k++)
        CHECK(loops[k].tag == 100 + k && loops[k].types[0] == (cf_dtype)(k % CF_NDTYPES));
    /* the same input types again (only the nin inputs count) */
    cf_dtype again[3] = {(cf_dtype)3, CF_BOOL, CF_BOOL};
    CHECK_STATUS(cf_loops_check_new("gufunc", "g", loops[0].types, sizeof *loops, n, 1, again),
                 CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "gufunc 'g' already has a loop for these input types");
    /* a failed growth leaves the list as it was */
    test_loop *keep = loops;
    int ncap = cap;
    for (int k = n; k < ncap; k++) {
        test_loop l = {{CF_BOOL, CF_BOOL, CF_BOOL}, k};
        CHECK_OK(cf_loops_append(&loops, &n, &cap, sizeof l, &l, &lock, NULL));
    }
    test_loop extra = {{CF_BOOL, CF_BOOL, CF_BOOL}, -1};
    cf_test_fail_alloc_after(1, 0);
    CHECK_STATUS(cf_loops_append(&loops, &n, &cap, sizeof extra, &extra, &lock, &idx),
                 CF_ERR_NOMEM);
    cf_test_fail_alloc_after(0, 0);
    CHECK(loops == keep && n == ncap && cap == ncap && loops[8].tag == 108);
    cf_free(loops);
    CHECK(cf_test_alloc_outstanding() == before);
}

int main(void)
{
    RUN(test_record_copies_globals);
    RUN(test_record_rejects_bad_globals);
    RUN(test_record_allocation_failures);
    RUN(test_loop_list_helpers);
    RUN(test_array_ref_pack);
    RUN(test_wrong_device_is_refused_before_the_gpu);
    RUN(test_engines_take_globals);
    RUN(test_kernels_with_globals_compile);
    RUN(test_globals_are_written_at_load);
    RUN(test_ufunc_reads_a_captured_array);
    return SUMMARY();
}
