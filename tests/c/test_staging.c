/* test_staging.c: the parallel host memcpy (threadpool.c), the staging chunk arithmetic and
 * configuration, and (on a GPU) staged host<->device copies over many chunk/buffer/thread settings.
 * Buffers are poisoned and filled with position-dependent patterns so lost or misplaced bytes show. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "staging.h"
#include "threadpool.h"

static unsigned char pattern_byte(size_t i, unsigned seed)
{
    uint32_t x = (uint32_t)i * 0x9E3779B1u + seed * 0x85EBCA6Bu + 1u;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return (unsigned char)x;
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = pattern_byte(i, seed);
}

/* The first index where p differs from the pattern, or n. */
static size_t pattern_mismatch(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != pattern_byte(i, seed))
            return i;
    return n;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* ---- chunk arithmetic --------------------------------------------------------------------- */

static void test_chunk_arithmetic(void)
{
    const size_t c = 1000;
    CHECK(cf_staging_nchunks(0, c) == 0);
    CHECK(cf_staging_nchunks(1, c) == 1);
    CHECK(cf_staging_nchunks(c - 1, c) == 1);
    CHECK(cf_staging_nchunks(c, c) == 1);
    CHECK(cf_staging_nchunks(c + 1, c) == 2);
    CHECK(cf_staging_nchunks(3 * c + 5, c) == 4);
    CHECK(cf_staging_nchunks(SIZE_MAX, (size_t)1 << 20) == (SIZE_MAX >> 20) + 1);

    /* The chunks tile [0, n) exactly, in order, each at most c and only the last one short. */
    size_t sizes[] = {1, 7, c - 1, c, c + 1, 3 * c + 5, 17 * c};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t], next = 0, nch = cf_staging_nchunks(n, c);
        for (size_t k = 0; k < nch; k++) {
            size_t off = 99, len = 99;
            cf_staging_chunk(n, c, k, &off, &len);
            CHECK(off == next);
            CHECK(len > 0 && len <= c);
            if (k + 1 < nch)
                CHECK(len == c);
            next = off + len;
        }
        CHECK(next == n);
    }
    size_t off, len;
    cf_staging_chunk(3 * c + 5, c, 3, &off, &len);
    CHECK(off == 3 * c && len == 5);
}

/* ---- thread pool -------------------------------------------------------------------------- */

#define GUARD 64

/* Copy n bytes from src+soff to dst+doff through the pool, with guard zones around the target. */
static int pool_copy_ok(size_t n, size_t soff, size_t doff, unsigned seed)
{
    unsigned char *src = malloc(n + soff + 1);
    unsigned char *dst = malloc(n + doff + 2 * GUARD);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0;
    }
    fill_pattern(src + soff, n, seed);
    memset(dst, 0xA5, n + doff + 2 * GUARD);
    cf_threadpool_memcpy(dst + GUARD + doff, src + soff, n);
    int ok = pattern_mismatch(dst + GUARD + doff, n, seed) == n &&
             all_bytes(dst, GUARD + doff, 0xA5) && all_bytes(dst + GUARD + doff + n, GUARD, 0xA5);
    if (!ok)
        fprintf(stderr, "  pool copy of %zu bytes (src+%zu, dst+%zu, %d workers) is wrong\n", n,
                soff, doff, cf_threadpool_workers());
    free(src);
    free(dst);
    return ok;
}

static void test_threadpool_sizes(void)
{
    /* Sizes around the split threshold (256 KiB), the part size (64 KiB, 4 KiB rounding) and
     * not divisible by any thread count. */
    const size_t sizes[] = {0,          1,           2,           7,           4095,
                            4096,       4097,        (256 << 10) - 1, 256 << 10, (256 << 10) + 1,
                            (1 << 20) + 13, 3 * (1 << 20) + 7, 5 * (1 << 20) + 4093};
    const size_t offs[][2] = {{0, 0}, {1, 0}, {0, 5}, {3, 7}, {4096, 1}};
    const int workers[] = {0, 1, 2, 3, 7, -1};
    for (size_t w = 0; w < sizeof workers / sizeof workers[0]; w++) {
        CHECK_OK(cf_threadpool_configure(workers[w]));
        if (workers[w] >= 0)
            CHECK(cf_threadpool_workers() == workers[w]);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
                CHECK(pool_copy_ok(sizes[i], offs[o][0], offs[o][1], (unsigned)(i * 7 + o)));
        if (workers[w] > 0)
            CHECK(cf_threadpool_workers() == workers[w]); /* the threads did start */
    }
    CHECK_OK(cf_threadpool_configure(-1));
    CHECK(cf_threadpool_workers() >= 1);
}

static void test_threadpool_configure_bad(void)
{
    CHECK_STATUS(cf_threadpool_configure(CF_THREADPOOL_MAX_WORKERS + 1), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "workers");
}

typedef struct copier {
    unsigned seed;
    int ok;
} copier;

static void *copier_main(void *arg)
{
    copier *c = arg;
    c->ok = 1;
    for (int r = 0; r < 20 && c->ok; r++)
        c->ok = pool_copy_ok((2 << 20) + c->seed * 4099, c->seed % 5, c->seed % 3, c->seed + r);
    return NULL;
}

/* Several threads copying at once: one gets the pool, the others copy alone; all must be right. */
static void test_threadpool_concurrent(void)
{
    CHECK_OK(cf_threadpool_configure(3));
    pthread_t t[4];
    copier c[4];
    for (int i = 0; i < 4; i++) {
        c[i].seed = (unsigned)i + 1;
        CHECK(pthread_create(&t[i], NULL, copier_main, &c[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(c[i].ok);
    }
    CHECK_OK(cf_threadpool_configure(-1));
}

/* A child forked after the pool started must not wait for the parent's workers (they do not exist
 * in the child): its copies must finish, and be right. */
static void test_threadpool_fork(void)
{
    CHECK_OK(cf_threadpool_configure(2));
    CHECK(pool_copy_ok(3 << 20, 0, 0, 11)); /* the pool is running now */
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(20); /* a hang becomes a failure, not a stuck test run */
        int ok = pool_copy_ok(3 << 20, 1, 2, 12) && pool_copy_ok(8 << 20, 0, 0, 13);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(pool_copy_ok(3 << 20, 0, 0, 14)); /* the parent's pool still works */
    CHECK_OK(cf_threadpool_configure(-1));
}

/* ---- configuration ------------------------------------------------------------------------ */

static void test_config(void)
{
    cf_staging_config saved, c;
    cf_staging_get_config(&saved);
    CHECK(saved.chunk_bytes >= ((size_t)64 << 10));
    CHECK(saved.nbuffers >= 2 && saved.nbuffers <= CF_STAGING_MAX_BUFFERS);

    c = saved;
    c.chunk_bytes = 1000;
    CHECK_STATUS(cf_staging_configure(&c), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "chunk");
    c = saved;
    c.nbuffers = 1;
    CHECK_STATUS(cf_staging_configure(&c), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "buffers");
    c.nbuffers = CF_STAGING_MAX_BUFFERS + 1;
    CHECK_STATUS(cf_staging_configure(&c), CF_ERR_INVALID);

    c.chunk_bytes = (size_t)128 << 10;
    c.nbuffers = 3;
    c.min_bytes = 5000;
    CHECK_OK(cf_staging_configure(&c));
    cf_staging_config got;
    cf_staging_get_config(&got);
    CHECK(got.chunk_bytes == c.chunk_bytes && got.nbuffers == 3 && got.min_bytes == 5000);
    CHECK(!cf_staging_wanted(0));
    CHECK(!cf_staging_wanted(4999));
    CHECK(cf_staging_wanted(5000));

    /* From the environment; values that do not parse or are out of range fall back to defaults. */
    setenv("CUFUNC_STAGING_CHUNK_MB", "2", 1);
    setenv("CUFUNC_STAGING_BUFFERS", "5", 1);
    setenv("CUFUNC_STAGING_MIN_KB", "0", 1);
    CHECK_OK(cf_staging_configure(NULL));
    cf_staging_get_config(&got);
    CHECK(got.chunk_bytes == ((size_t)2 << 20) && got.nbuffers == 5 && got.min_bytes == 0);
    CHECK(cf_staging_wanted(1));
    CHECK(!cf_staging_wanted(0));
    setenv("CUFUNC_STAGING_CHUNK_MB", "lots", 1);
    setenv("CUFUNC_STAGING_BUFFERS", "99", 1);
    setenv("CUFUNC_STAGING_MIN_KB", "-3", 1);
    CHECK_OK(cf_staging_configure(NULL));
    cf_staging_get_config(&got);
    CHECK(got.chunk_bytes == ((size_t)8 << 20) && got.nbuffers == 4 &&
          got.min_bytes == ((size_t)1024 << 10));
    unsetenv("CUFUNC_STAGING_CHUNK_MB");
    unsetenv("CUFUNC_STAGING_BUFFERS");
    unsetenv("CUFUNC_STAGING_MIN_KB");
    CHECK_OK(cf_staging_configure(&saved));
}

/* ---- staged copies on the GPU ------------------------------------------------------------- */

/* Round trip of n bytes at host offset `hoff` through device memory with guard zones: poison the
 * device region, htod (staged per the configuration), dtoh the region and its guards into a
 * poisoned host buffer, compare. */
static int gpu_roundtrip_ok(cf_stream *s, size_t n, size_t hoff, unsigned seed)
{
    int ok = 0;
    uint64_t d = 0;
    unsigned char *src = malloc(n + hoff + 1), *back = malloc(n + 2 * GUARD + hoff);
    if (!src || !back)
        goto out;
    if (cf_mem_alloc(s, n + 2 * GUARD, &d) || cf_memset8(s, d, 0xA5, n + 2 * GUARD))
        goto out;
    fill_pattern(src + hoff, n, seed);
    memset(back, 0x5A, n + 2 * GUARD + hoff);
    if (cf_memcpy_htod(s, d + GUARD, src + hoff, n, 0))
        goto out;
    /* Scribble over the source: htod promised it was free to reuse on return. */
    memset(src + hoff, 0x00, n);
    if (cf_memcpy_dtoh(s, back + hoff, d, n + 2 * GUARD, 1))
        goto out;
    size_t bad = pattern_mismatch(back + hoff + GUARD, n, seed);
    ok = bad == n && all_bytes(back + hoff, GUARD, 0xA5) &&
         all_bytes(back + hoff + GUARD + n, GUARD, 0xA5) && all_bytes(back, hoff, 0x5A);
    if (!ok)
        fprintf(stderr, "  round trip of %zu bytes (host +%zu): first bad byte %zu\n", n, hoff, bad);
out:
    if (!ok && cf_last_status() != CF_OK)
        fprintf(stderr, "  last error: %s\n", cf_last_error());
    if (d)
        cf_mem_free(s, d);
    free(src);
    free(back);
    return ok;
}

static void test_gpu_small_chunks(void)
{
    NEED_GPU();
    cf_staging_config saved;
    cf_staging_get_config(&saved);
    cf_stream *s = NULL, *def = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    CHECK_OK(cf_stream_default(0, &def));
    if (!s || !def)
        goto out;
    const size_t c = (size_t)64 << 10;
    const size_t sizes[] = {1, 7, c - 1, c, c + 1, 3 * c + 5, 41 * c + 3};
    const int nbufs[] = {2, 3, 16};
    const int workers[] = {0, 3};
    for (size_t b = 0; b < sizeof nbufs / sizeof nbufs[0]; b++)
        for (size_t w = 0; w < sizeof workers / sizeof workers[0]; w++) {
            cf_staging_config cfg = {c, nbufs[b], 0};
            CHECK_OK(cf_staging_configure(&cfg));
            CHECK_OK(cf_threadpool_configure(workers[w]));
            for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
                CHECK(gpu_roundtrip_ok(s, sizes[i], i % 4, (unsigned)(b * 100 + w * 10 + i)));
                CHECK(gpu_roundtrip_ok(def, sizes[i], 3, (unsigned)(b * 100 + w * 10 + i + 1)));
            }
        }
out:
    CHECK_OK(cf_staging_configure(&saved));
    CHECK_OK(cf_threadpool_configure(-1));
    cf_stream_free(s);
    cf_stream_free(def);
}

/* The staged path is ordered after earlier work on the caller's stream, both ways: a memset queued
 * just before must land before an htod over it, and before a dtoh reads. */
static void test_gpu_stream_order(void)
{
    NEED_GPU();
    cf_staging_config saved;
    cf_staging_get_config(&saved);
    cf_staging_config cfg = {(size_t)1 << 20, 3, 0};
    CHECK_OK(cf_staging_configure(&cfg));
    const size_t n = (size_t)64 << 20;
    cf_stream *s = NULL;
    uint64_t d = 0;
    unsigned char *h = malloc(n);
    CHECK(h != NULL);
    CHECK_OK(cf_stream_create(0, &s));
    if (!s || !h || cf_mem_alloc(s, n, &d) != CF_OK)
        goto out;
    for (int round = 0; round < 3; round++) {
        /* Several large memsets keep the stream busy while the staged copy starts. */
        for (int k = 0; k < 8; k++)
            CHECK_OK(cf_memset8(s, d, (unsigned char)(0x10 + k), n));
        fill_pattern(h, n, 77 + round);
        CHECK_OK(cf_memcpy_htod(s, d, h, n, 0));
        memset(h, 0, n);
        CHECK_OK(cf_memcpy_dtoh(s, h, d, n, 1));
        CHECK(pattern_mismatch(h, n, 77 + round) == n);

        for (int k = 0; k < 8; k++)
            CHECK_OK(cf_memset8(s, d, (unsigned char)(0x30 + k), n));
        memset(h, 0x01, n);
        CHECK_OK(cf_memcpy_dtoh(s, h, d, n, 0));
        CHECK(all_bytes(h, n, 0x37));
    }
out:
    if (d)
        CHECK_OK(cf_mem_free(s, d));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    free(h);
    CHECK_OK(cf_staging_configure(&saved));
}

/* Copies on two streams from two threads at once share the staging ring; both must be right. */
typedef struct gpu_worker {
    unsigned seed;
    int ok;
} gpu_worker;

static void *gpu_worker_main(void *arg)
{
    gpu_worker *g = arg;
    cf_stream *s = NULL;
    g->ok = cf_stream_create(0, &s) == CF_OK;
    for (int r = 0; r < 6 && g->ok; r++)
        g->ok = gpu_roundtrip_ok(s, (5 << 20) + g->seed * 333, g->seed % 3, g->seed * 10 + r);
    cf_stream_free(s);
    return NULL;
}

static void test_gpu_threads(void)
{
    NEED_GPU();
    cf_staging_config saved;
    cf_staging_get_config(&saved);
    cf_staging_config cfg = {(size_t)1 << 20, 2, 0};
    CHECK_OK(cf_staging_configure(&cfg));
    pthread_t t[3];
    gpu_worker g[3];
    for (int i = 0; i < 3; i++) {
        g[i].seed = (unsigned)i + 1;
        CHECK(pthread_create(&t[i], NULL, gpu_worker_main, &g[i]) == 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        CHECK(g[i].ok);
    }
    CHECK_OK(cf_staging_configure(&saved));
}

int main(void)
{
    RUN(test_chunk_arithmetic);
    RUN(test_threadpool_sizes);
    RUN(test_threadpool_configure_bad);
    RUN(test_threadpool_concurrent);
    RUN(test_threadpool_fork);
    RUN(test_config);
    RUN(test_gpu_small_chunks);
    RUN(test_gpu_stream_order);
    RUN(test_gpu_threads);
    return SUMMARY();
}
