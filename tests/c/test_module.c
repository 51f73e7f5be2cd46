/* test_module.c: modules, kernels and launches. Argument checks run everywhere; loading and
 * launching need a GPU (NEED_GPU: skipped without one, failed with CUFUNC_REQUIRE_GPU=1). */
#include <pthread.h>

#include "check.h"

static const char *FILL =
    "extern \"C\" __global__ void fill(int *out, int n, int mul)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        out[i] = i * mul + 7;\n"
    "}\n"
    "extern \"C\" __global__ void fill2d(int *out, int w, int h)\n"
    "{\n"
    "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
    "    if (x < w && y < h)\n"
    "        out[y * w + x] = y * 1000 + x;\n"
    "}\n";

static void test_arguments_without_gpu(void)
{
    cf_module *m = (cf_module *)1;
    CHECK_STATUS(cf_module_load(0, FILL, NULL, 0, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_module_load(0, NULL, NULL, 0, &m), CF_ERR_INVALID);
    CHECK(m == NULL);
    cf_function *f = (cf_function *)1;
    CHECK_STATUS(cf_module_function(NULL, "fill", &f), CF_ERR_INVALID);
    CHECK(f == NULL);
    /* Something that is not a module is refused, not dereferenced as one. */
    static char not_a_module[256];
    CHECK_STATUS(cf_module_function((cf_module *)not_a_module, "fill", &f), CF_ERR_INVALID);
    cf_function_attrs a;
    CHECK_STATUS(cf_function_attrs_get(NULL, &a), CF_ERR_INVALID);
    int blocks;
    CHECK_STATUS(cf_function_max_active_blocks(NULL, 128, 0, &blocks), CF_ERR_INVALID);
    unsigned g[3] = {1, 1, 1}, b[3] = {32, 1, 1};
    CHECK_STATUS(cf_launch(NULL, g, b, 0, NULL, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_launch((cf_function *)not_a_module, g, b, 0, NULL, NULL), CF_ERR_INVALID);
}

static cf_function *get_fn(cf_module *m, const char *name)
{
    cf_function *f = NULL;
    CHECK_OK(cf_module_function(m, name, &f));
    return f;
}

static void test_load_and_launch(void)
{
    NEED_GPU();
    cf_module *m = NULL, *again = NULL;
    CHECK_OK(cf_module_load(0, FILL, NULL, 0, &m));
    if (!m)
        return;
    /* Same source and options on the same device: the same module (memory hit). */
    CHECK_OK(cf_module_load(0, FILL, NULL, 0, &again));
    CHECK(again == m);
    cf_function *f = get_fn(m, "fill");
    CHECK(f != NULL && get_fn(m, "fill") == f);
    cf_function *f2 = get_fn(m, "fill2d");
    CHECK(f2 != NULL && f2 != f);
    cf_function *missing = (cf_function *)1;
    CHECK_STATUS(cf_module_function(m, "no_such_kernel", &missing), CF_ERR_INVALID);
    CHECK(missing == NULL);
    CHECK_CONTAINS(cf_last_error(), "no_such_kernel");
    if (!f || !f2)
        return;

    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    int n = 100003, mul = 3;
    uint64_t d = 0;
    CHECK_OK(cf_mem_alloc(s, (size_t)n * sizeof(int), &d));
    void *args[] = {&d, &n, &mul};
    unsigned grid[3] = {(unsigned)(n + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    CHECK_OK(cf_launch(f, grid, block, 0, s, args));
    int *host = malloc((size_t)n * sizeof(int));
    CHECK_OK(cf_memcpy_dtoh(s, host, d, (size_t)n * sizeof(int), 1));
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += host[i] != i * mul + 7;
    CHECK(bad == 0);

    /* 2-D grid and block, on the legacy default stream (s = NULL). */
    int w = 300, h = 200;
    void *args2[] = {&d, &w, &h};
    unsigned grid2[3] = {(unsigned)(w + 15) / 16, (unsigned)(h + 15) / 16, 1};
    unsigned block2[3] = {16, 16, 1};
    CHECK_OK(cf_launch(f2, grid2, block2, 0, NULL, args2));
    CHECK_OK(cf_device_synchronize(0));
    CHECK_OK(cf_memcpy_dtoh(s, host, d, (size_t)(w * h) * sizeof(int), 1));
    bad = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            bad += host[y * w + x] != y * 1000 + x;
    CHECK(bad == 0);
    free(host);
    CHECK_OK(cf_mem_free(s, d));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
}

static void test_launch_checks(void)
{
    NEED_GPU();
    cf_module *m = NULL;
    CHECK_OK(cf_module_load(0, FILL, NULL, 0, &m));
    if (!m)
        return;
    cf_function *f = get_fn(m, "fill");
    if (!f)
        return;
    int n = 0, mul = 1;
    uint64_t d = 0;
    void *args[] = {&d, &n, &mul};
    unsigned g1[3] = {1, 1, 1};
    unsigned zero_grid[3] = {0, 1, 1}, zero_block[3] = {32, 0, 1};
    unsigned big_block[3] = {2048, 1, 1}, deep_block[3] = {1, 1, 65};
    unsigned huge_grid[3] = {1, 70000, 1};
    unsigned b32[3] = {32, 1, 1};
    CHECK_STATUS(cf_launch(f, zero_grid, b32, 0, NULL, args), CF_ERR_INVALID);
    CHECK_STATUS(cf_launch(f, g1, zero_block, 0, NULL, args), CF_ERR_INVALID);
    CHECK_STATUS(cf_launch(f, g1, big_block, 0, NULL, args), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "fill");
    CHECK_STATUS(cf_launch(f, g1, deep_block, 0, NULL, args), CF_ERR_INVALID);
    CHECK_STATUS(cf_launch(f, huge_grid, b32, 0, NULL, args), CF_ERR_INVALID);
    CHECK_STATUS(cf_launch(f, NULL, b32, 0, NULL, args), CF_ERR_INVALID);
    CHECK_STATUS(cf_launch(f, g1, NULL, 0, NULL, args), CF_ERR_INVALID);
    /* n = 0: a valid launch that writes nothing. */
    CHECK_OK(cf_launch(f, g1, b32, 0, NULL, args));
    CHECK_OK(cf_device_synchronize(0));
}

static void test_attrs_and_occupancy(void)
{
    NEED_GPU();
    cf_module *m = NULL;
    CHECK_OK(cf_module_load(0, FILL, NULL, 0, &m));
    if (!m)
        return;
    cf_function *f = get_fn(m, "fill");
    if (!f)
        return;
    cf_function_attrs a = {0};
    CHECK_OK(cf_function_attrs_get(f, &a));
    CHECK(a.max_threads_per_block >= 256 && a.max_threads_per_block <= 1024);
    CHECK(a.num_regs > 0 && a.num_regs <= 255);
    CHECK(a.shared_bytes == 0 && a.local_bytes == 0);
    CHECK_STATUS(cf_function_attrs_get(f, NULL), CF_ERR_INVALID);
    cf_device_props p;
    CHECK_OK(cf_device_props_get(0, &p));
    int blocks = 0;
    CHECK_OK(cf_function_max_active_blocks(f, 256, 0, &blocks));
    CHECK(blocks >= 1 && blocks * 256 <= p.max_threads_per_multiprocessor);
    CHECK_STATUS(cf_function_max_active_blocks(f, 0, 0, &blocks), CF_ERR_INVALID);
    CHECK_STATUS(cf_function_max_active_blocks(f, 4096, 0, &blocks), CF_ERR_INVALID);
    CHECK_STATUS(cf_function_max_active_blocks(f, 256, 0, NULL), CF_ERR_INVALID);
}

static void test_compile_error_and_bad_device(void)
{
    NEED_GPU();
    cf_module *m = (cf_module *)1;
    CHECK_STATUS(cf_module_load(0, "extern \"C\" __global__ void k() { broken }\n", NULL, 0, &m),
                 CF_ERR_COMPILE);
    CHECK(m == NULL);
    CHECK_CONTAINS(cf_last_error(), "broken");
    int count = 0;
    CHECK_OK(cf_device_count(&count));
    CHECK_STATUS(cf_module_load(count + 5, FILL, NULL, 0, &m), CF_ERR_NO_DEVICE);
    /* Options make a different module. */
    const char *opts[] = {"-DUNUSED=1"};
    cf_module *a = NULL, *b = NULL;
    CHECK_OK(cf_module_load(0, FILL, NULL, 0, &a));
    CHECK_OK(cf_module_load(0, FILL, opts, 1, &b));
    CHECK(a && b && a != b);
}

/* Threads racing to load one new source all get the same module. */
static const char *RACE_SRC = "extern \"C\" __global__ void race(int *p) { *p = 5; }\n";
static cf_module *race_out[8];

static void *race_thread(void *arg)
{
    int i = (int)(intptr_t)arg;
    if (cf_module_load(0, RACE_SRC, NULL, 0, &race_out[i]) != CF_OK)
        race_out[i] = NULL;
    return NULL;
}

static void test_concurrent_load(void)
{
    NEED_GPU();
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, race_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 8; i++)
        CHECK(race_out[i] != NULL && race_out[i] == race_out[0]);
}

int main(void)
{
    RUN(test_arguments_without_gpu);
    RUN(test_load_and_launch);
    RUN(test_launch_checks);
    RUN(test_attrs_and_occupancy);
    RUN(test_compile_error_and_bad_device);
    RUN(test_concurrent_load);
    return SUMMARY();
}
