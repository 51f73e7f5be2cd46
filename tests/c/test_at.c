/* Tests of the ufunc.at engine (include/cufunc/at.h): the choice of update method, argument
 * checks and kernel sources (no GPU; compiling needs NVRTC), and a histogram on the GPU whose
 * repeated indices must all count. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "cufunc/at.h"

static const char *ADD_SRC =
    "__device__ cf_float32 my_add(cf_float32 a, cf_float32 b) { return a + b; }\n";
static const char *SAT_SRC =
    "__device__ cf_int16 my_sat(cf_int16 a, cf_int16 b) { int s = a + b; "
    "return (cf_int16)(s > 100 ? 100 : s); }\n";

static cf_at_call call_of(cf_dtype t, cf_at_mode mode)
{
    cf_at_call c;
    memset(&c, 0, sizeof c);
    c.nin = 2;
    c.types[0] = c.types[1] = c.types[2] = t;
    c.a_type = c.b_type = t;
    c.extent = 16;
    c.inner = 1;
    c.a_index = (int64_t)cf_dtype_size(t);
    c.index_type = CF_INT64;
    c.nindex = 100;
    c.b_index = (int64_t)cf_dtype_size(t);
    c.mode = mode;
    return c;
}

static void test_pick_mode(void)
{
    /* the hardware's atomics where they exist, CAS elsewhere, by size */
    CHECK(cf_at_pick_mode(CF_AT_OP_ADD, 1, CF_FLOAT32) == CF_AT_ADD);
    CHECK(cf_at_pick_mode(CF_AT_OP_ADD, 1, CF_INT64) == CF_AT_ADD);
    CHECK(cf_at_pick_mode(CF_AT_OP_ADD, 0, CF_FLOAT32) == CF_AT_CAS);
    CHECK(cf_at_pick_mode(CF_AT_OP_MAX, 1, CF_UINT32) == CF_AT_MAX);
    CHECK(cf_at_pick_mode(CF_AT_OP_MIN, 1, CF_FLOAT64) == CF_AT_CAS);
    CHECK(cf_at_pick_mode(CF_AT_OP_ANY, 1, CF_INT8) == CF_AT_CAS_WORD);
    CHECK(cf_at_pick_mode(CF_AT_OP_ADD, 1, CF_INT16) == CF_AT_CAS_WORD);
    CHECK(cf_at_pick_mode(CF_AT_OP_ADD, 1, CF_COMPLEX64) == CF_AT_CAS);
    CHECK(cf_at_pick_mode(CF_AT_OP_ADD, 1, CF_COMPLEX128) == CF_AT_SERIAL);
}

static void test_bad_calls(void)
{
    cf_at *at = NULL;
    char *src = NULL;
    CHECK_STATUS(cf_at_create(ADD_SRC, "my_add", NULL, 0, NULL, 0, NULL), CF_ERR_INVALID);
    CHECK_OK(cf_at_create(ADD_SRC, "my_add", NULL, 0, NULL, 0, &at));
    cf_at_call c = call_of(CF_FLOAT32, CF_AT_ADD);
    c.index_type = CF_FLOAT32;
    CHECK_STATUS(cf_at_kernel_source(at, &c, &src), CF_ERR_TYPE);
    c = call_of(CF_INT8, CF_AT_ADD); /* no atomicAdd on int8 */
    CHECK_STATUS(cf_at_kernel_source(at, &c, &src), CF_ERR_INVALID);
    c = call_of(CF_COMPLEX128, CF_AT_CAS); /* no 16-byte CAS */
    CHECK_STATUS(cf_at_kernel_source(at, &c, &src), CF_ERR_INVALID);
    c = call_of(CF_FLOAT16, CF_AT_CAS_WORD);
    CHECK_STATUS(cf_at_kernel_source(at, &c, &src), CF_ERR_UNSUPPORTED);
    c = call_of(CF_FLOAT32, CF_AT_ADD);
    c.nin = 3;
    CHECK_STATUS(cf_at_kernel_source(at, &c, &src), CF_ERR_INVALID);
    CHECK(src == NULL);
    cf_at_destroy(at);
    cf_at_destroy(NULL);
}

static int have_nvrtc(void)
{
    if (cf_nvrtc_init() == CF_OK)
        return 1;
    CHECK_OK(cf_nvrtc_init()); /* CI has NVRTC: its absence is a failure, not a skip */
    return 0;
}

static void compile_case(const char *fsrc, const char *name, cf_at_call c, const char *want)
{
    cf_at *at = NULL;
    char *src = NULL;
    void *img = NULL;
    size_t size = 0;
    int ptx = 0;
    static const char *opts[1] = {"--fmad=false"};
    CHECK_OK(cf_at_create(fsrc, name, opts, 1, NULL, 0, &at));
    CHECK_OK(cf_at_kernel_source(at, &c, &src));
    if (src) {
        CHECK_CONTAINS(src, want);
        CHECK_OK(cf_compile_source(src, opts, 1, 7, 5, &img, &size, &ptx));
    }
    cf_free_buffer(img);
    cf_free_buffer(src);
    cf_at_destroy(at);
}

static void test_kernels_compile(void)
{
    if (!have_nvrtc())
        return;
    compile_case(ADD_SRC, "my_add", call_of(CF_FLOAT32, CF_AT_ADD),
                 "cf_at_run<cf_at_op, cf_float32, long long, 2>");
    compile_case(ADD_SRC, "my_add", call_of(CF_FLOAT32, CF_AT_CAS), ", 0>");
    cf_at_call c = call_of(CF_FLOAT32, CF_AT_CAS);
    c.index_type = CF_INT32;
    c.b_type = CF_INT32; /* values converted in the kernel */
    compile_case(ADD_SRC, "my_add", c, "cf_at_run<cf_at_op, cf_int32, int, 0>");
    compile_case(SAT_SRC, "my_sat", call_of(CF_INT16, CF_AT_CAS_WORD), ", 1>");
    c = call_of(CF_INT16, CF_AT_SERIAL);
    compile_case(SAT_SRC, "my_sat", c, ", 5>");
}

static void test_gpu_histogram(void)
{
    NEED_GPU();
    enum { NB = 1024, NI = 1 << 20 };
    cf_stream *s = NULL;
    cf_at *at = NULL, *sat = NULL;
    int64_t *idx = malloc(sizeof(int64_t) * NI);
    float *ones = malloc(sizeof(float) * NI), *bins = calloc(NB, sizeof(float));
    int16_t *sbins = calloc(NB, sizeof(int16_t)), *sones = malloc(sizeof(int16_t) * NI);
    uint64_t d_idx = 0, d_ones = 0, d_bins = 0, d_sones = 0, d_sbins = 0;
    int want[NB] = {0};
    uint32_t x = 12345;
    for (int i = 0; i < NI; i++) {
        x = x * 1664525u + 1013904223u;
        idx[i] = (int64_t)(x >> 22) - (i % 3 == 0 ? NB : 0); /* some negative: from the end */
        want[(idx[i] + NB) % NB]++;
        ones[i] = 1.0f;
        sones[i] = 1;
    }
    CHECK_OK(cf_stream_default(0, &s));
    CHECK_OK(cf_mem_alloc(s, sizeof(int64_t) * NI, &d_idx));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * NI, &d_ones));
    CHECK_OK(cf_mem_alloc(s, sizeof(float) * NB, &d_bins));
    CHECK_OK(cf_mem_alloc(s, sizeof(int16_t) * NI, &d_sones));
    CHECK_OK(cf_mem_alloc(s, sizeof(int16_t) * NB, &d_sbins));
    CHECK_OK(cf_memcpy_htod(s, d_idx, idx, sizeof(int64_t) * NI, 1));
    CHECK_OK(cf_memcpy_htod(s, d_ones, ones, sizeof(float) * NI, 1));
    CHECK_OK(cf_memset8(s, d_bins, 0, sizeof(float) * NB));
    CHECK_OK(cf_memcpy_htod(s, d_sones, sones, sizeof(int16_t) * NI, 1));
    CHECK_OK(cf_memset8(s, d_sbins, 0, sizeof(int16_t) * NB));
    CHECK_OK(cf_at_create(ADD_SRC, "my_add", NULL, 0, NULL, 0, &at));
    CHECK_OK(cf_at_create(SAT_SRC, "my_sat", NULL, 0, NULL, 0, &sat));
    for (int mode = CF_AT_CAS; mode <= CF_AT_ADD; mode += 2) { /* CAS, then atomicAdd */
        cf_at_call c = call_of(CF_FLOAT32, (cf_at_mode)mode);
        c.a = d_bins, c.extent = NB, c.index = d_idx, c.nindex = NI, c.b = d_ones;
        CHECK_OK(cf_at_launch(at, &c, s, 0));
    }
    cf_at_call c = call_of(CF_INT16, CF_AT_CAS_WORD); /* neighbours share words: all must count */
    c.a = d_sbins, c.extent = NB, c.index = d_idx, c.nindex = NI, c.b = d_sones;
    c.a_index = 2, c.b_index = 2;
    CHECK_OK(cf_at_launch(sat, &c, s, 0));
    CHECK_OK(cf_memcpy_dtoh(s, bins, d_bins, sizeof(float) * NB, 1));
    CHECK_OK(cf_memcpy_dtoh(s, sbins, d_sbins, sizeof(int16_t) * NB, 1));
    for (int b = 0; b < NB; b++) {
        CHECK(bins[b] == 2.0f * (float)want[b]);
        CHECK(sbins[b] == (want[b] > 100 ? 100 : want[b]));
    }
    /* a bad index: reported, the others applied */
    idx[0] = NB;
    CHECK_OK(cf_memcpy_htod(s, d_idx, idx, sizeof(int64_t), 1));
    c = call_of(CF_FLOAT32, CF_AT_ADD);
    c.a = d_bins, c.extent = NB, c.index = d_idx, c.nindex = 4, c.b = d_ones;
    CHECK_STATUS(cf_at_launch(at, &c, s, 0), CF_ERR_RANGE);
    CHECK_CONTAINS(cf_last_error(), "index 1024 is out of bounds");
    cf_mem_free(s, d_idx);
    cf_mem_free(s, d_ones);
    cf_mem_free(s, d_bins);
    cf_mem_free(s, d_sones);
    cf_mem_free(s, d_sbins);
    cf_at_destroy(at);
    cf_at_destroy(sat);
    cf_stream_free(s);
    free(idx), free(ones), free(bins), free(sbins), free(sones);
}

int main(void)
{
    RUN(test_pick_mode);
    RUN(test_bad_calls);
    RUN(test_kernels_compile);
    RUN(test_gpu_histogram);
    return SUMMARY();
}
