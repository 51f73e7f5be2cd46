/* test_graph.c: the C API on a stream that captures a CUDA graph (cf_stream_begin_capture,
 * cf_stream_end_capture, cf_graph_*): an element-wise launch and a full reduction captured, then
 * replayed after the inputs changed; argument checks run anywhere, the rest needs a GPU. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "context.h"

static const char *ADD_F8 = "#include \"cufunc/runtime.cuh\"\n"
                            "__device__ cf_float64 add_f8(cf_float64 a, cf_float64 b) { return a + b; }\n";

static cf_array view(int64_t n, uint64_t data)
{
    cf_array a;
    CHECK_OK(cf_array_init_contiguous(&a, data, CF_FLOAT64, 1, &n, 'C', 0));
    return a;
}

static void test_args(void)
{
    CHECK_STATUS(cf_stream_begin_capture(NULL, CF_CAPTURE_GLOBAL), CF_ERR_INVALID);
    CHECK_STATUS(cf_stream_end_capture(NULL, NULL), CF_ERR_INVALID);
    cf_graph *g = (cf_graph *)1;
    CHECK_STATUS(cf_stream_end_capture(NULL, &g), CF_ERR_INVALID);
    CHECK(g == NULL);
    int status = -1;
    CHECK_STATUS(cf_stream_capture_status(NULL, &status), CF_ERR_INVALID);
    CHECK_STATUS(cf_graph_launch(NULL, NULL), CF_ERR_INVALID);
    size_t n = 0;
    CHECK_STATUS(cf_graph_node_count(NULL, &n), CF_ERR_INVALID);
    cf_graph_free(NULL);
}

static void test_gpu_capture_replay(void)
{
    NEED_GPU();
    enum { N = 5000 };
    cf_stream *s = NULL, *legacy = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    CHECK_OK(cf_stream_default(0, &legacy));
    CHECK_STATUS(cf_stream_begin_capture(legacy, CF_CAPTURE_GLOBAL), CF_ERR_INVALID);
    cf_ufunc *u = NULL;
    cf_reducer *r = NULL;
    cf_dtype f8[3] = {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64};
    int idx = -1;
    CHECK_OK(cf_ufunc_create("add", 2, 1, &u));
    CHECK_OK(cf_ufunc_add_loop(u, f8, ADD_F8, "add_f8", NULL, 0, &idx));
    CHECK_OK(cf_reducer_create("add", &r));
    CHECK_OK(cf_reducer_add_loop(r, CF_FLOAT64, ADD_F8, "add_f8", NULL, 0, &idx));
    uint64_t x = 0, y = 0, res = 0;
    CHECK_OK(cf_mem_alloc(s, N * 8, &x));
    CHECK_OK(cf_mem_alloc(s, N * 8, &y));
    CHECK_OK(cf_mem_alloc(s, 8, &res));
    double *h = malloc(N * 8);
    for (int i = 0; i < N; i++)
        h[i] = i;
    CHECK_OK(cf_memcpy_htod(s, x, h, N * 8, 1));
    int64_t n = N;
    cf_operand ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].array = view(N, x);
    ops[1].array = view(N, x);
    ops[2].array = view(N, y);
    /* the reduction is cold (compiled and loaded during the capture), the element-wise warm */
    CHECK_OK(cf_ufunc_launch(u, 0, s, ops, NULL, 1, &n));
    CHECK_OK(cf_stream_synchronize(s));
    int status = -1;
    CHECK_OK(cf_stream_capture_status(s, &status));
    CHECK(status == CF_CAPTURE_NONE);
    CHECK_OK(cf_stream_begin_capture(s, CF_CAPTURE_GLOBAL));
    CHECK_OK(cf_stream_capture_status(s, &status));
    CHECK(status == CF_CAPTURE_ACTIVE);
    CHECK_OK(cf_ufunc_launch(u, 0, s, ops, NULL, 1, &n)); /* y = x + x */
    cf_array ya = view(N, y);
    double init = 0;
    CHECK_OK(cf_reduce_all(r, 0, s, &ya, res, CF_FLOAT64, &init)); /* res = sum(y) */
    cf_graph *g = NULL;
    CHECK_OK(cf_stream_end_capture(s, &g));
    size_t nodes = 0;
    CHECK_OK(cf_graph_node_count(g, &nodes));
    CHECK(nodes >= 2);
    CHECK_OK(cf_graph_upload(g, s));
    for (int rep = 1; rep <= 3; rep++) {
        for (int i = 0; i < N; i++)
            h[i] = i * rep;
        CHECK_OK(cf_memcpy_htod(s, x, h, N * 8, 1));
        CHECK_OK(cf_graph_launch(g, s));
        double got = 0;
        CHECK_OK(cf_memcpy_dtoh(s, &got, res, 8, 1));
        double want = 2.0 * rep * (N - 1) * N / 2;
        if (got != want)
            fprintf(stderr, "  rep %d: got %g want %g\n", rep, got, want);
        CHECK(got == want);
    }
    cf_graph_free(g);
    CHECK_OK(cf_mem_free(s, x));
    CHECK_OK(cf_mem_free(s, y));
    CHECK_OK(cf_mem_free(s, res));
    CHECK_OK(cf_stream_synchronize(s));
    free(h);
    cf_reducer_free(r);
    cf_ufunc_free(u);
    cf_stream_free(legacy);
    cf_stream_free(s);
}

int main(void)
{
    RUN(test_args);
    RUN(test_gpu_capture_replay);
    return SUMMARY();
}
