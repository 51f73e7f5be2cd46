/* test_stream.c: cf_stream_create / default / wrap / free, synchronize, query and waiting between
 * streams. Argument checks and the no-driver behaviour run anywhere; the rest needs a GPU. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "context.h"
#include "testing.h"

/* Run fn in a child in which libcuda cannot be found (see test_memory.c). */
static void in_child_without_driver(void (*fn)(void))
{
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("CUFUNC_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
        alarm(20);
        fn();
        fflush(stderr);
        _exit(cf_t_current_failed ? 1 : 0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void no_driver_checks(void)
{
    cf_stream *s = (cf_stream *)1;
    CHECK_STATUS(cf_stream_create(0, &s), CF_ERR_NO_DRIVER);
    CHECK(s == NULL);
    CHECK_CONTAINS(cf_last_error(), "CUFUNC_DRIVER_PATH");
    s = (cf_stream *)1;
    CHECK_STATUS(cf_stream_default(0, &s), CF_ERR_NO_DRIVER);
    CHECK(s == NULL);
    s = (cf_stream *)1;
    CHECK_STATUS(cf_stream_wrap(0, 0x1234, &s), CF_ERR_NO_DRIVER);
    CHECK(s == NULL);
    CHECK_CONTAINS(cf_last_error(), "CUDA driver");
}

static void test_no_driver(void) { in_child_without_driver(no_driver_checks); }

static void test_args(void)
{
    CHECK_STATUS(cf_stream_create(0, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_stream_create: out is NULL");
    CHECK_STATUS(cf_stream_default(0, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_stream_default: out is NULL");
    CHECK_STATUS(cf_stream_wrap(0, 0, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_stream_wrap: out is NULL");
    CHECK_STATUS(cf_stream_create_ex(0, 0, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "out is NULL");
    /* unknown flags are refused before the driver is needed */
    cf_stream *bad = (cf_stream *)1;
    CHECK_STATUS(cf_stream_create_ex(0, 0x10, &bad), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "unknown flags 0x10");
    CHECK(bad == NULL);
    unsigned flags = 7;
    CHECK_STATUS(cf_stream_flags(NULL, &flags), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_stream_flags: s is NULL");
    CHECK_STATUS(cf_stream_synchronize_queued(NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_stream_synchronize_queued: s is NULL");
    cf_stream_free(NULL);
    CHECK(cf_stream_handle(NULL) == 0);
    CHECK(cf_stream_device(NULL) == -1);
    CHECK(cf_stream_cu(NULL) == NULL);
    CHECK_STATUS(cf_stream_synchronize(NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_stream_synchronize: s is NULL");
    int done = 0;
    CHECK_STATUS(cf_stream_query(NULL, &done), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_stream_query: s is NULL");
    CHECK_STATUS(cf_stream_wait_stream(NULL, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "waiter is NULL");
}

/* ---- GPU ----------------------------------------------------------------------------------- */

static void test_create(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    CHECK(cf_stream_handle(s) != 0);
    CHECK(cf_stream_cu(s) == (CUstream)cf_stream_handle(s));
    CHECK(cf_stream_device(s) == 0);
    int done = -1;
    CHECK_OK(cf_stream_query(s, &done));
    CHECK(done == 1);
    CHECK_STATUS(cf_stream_query(s, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "done is NULL");
    CHECK_OK(cf_stream_synchronize(s));
    CHECK_OK(cf_stream_wait_stream(s, s));
    cf_stream_free(s);

    int ndev = 0;
    CHECK_OK(cf_device_count(&ndev));
    s = (cf_stream *)1;
    CHECK_STATUS(cf_stream_create(ndev, &s), CF_ERR_NO_DEVICE);
    CHECK(s == NULL);
    CHECK_STATUS(cf_stream_create(-1, &s), CF_ERR_NO_DEVICE);
    CHECK_STATUS(cf_stream_default(ndev + 5, &s), CF_ERR_NO_DEVICE);
    CHECK_STATUS(cf_stream_wrap(ndev, 0, &s), CF_ERR_NO_DEVICE);
}

static void test_default(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_default(0, &s));
    if (!s)
        return;
    CHECK(cf_stream_handle(s) == 0);
    CHECK(cf_stream_device(s) == 0);
    int done = -1;
    CHECK_OK(cf_stream_query(s, &done));
    CHECK(done == 0 || done == 1);
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s); /* the legacy stream is not destroyed: it keeps working */
    CHECK_OK(cf_stream_default(0, &s));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
}

/* Memset a small buffer on s and read it back on s: the stream works. */
static int stream_works(cf_stream *s, unsigned char v)
{
    uint64_t d = 0;
    unsigned char h[300];
    memset(h, ~v, sizeof h);
    int ok = cf_mem_alloc(s, sizeof h, &d) == CF_OK && cf_memset8(s, d, v, sizeof h) == CF_OK &&
             cf_memcpy_dtoh(s, h, d, sizeof h, 1) == CF_OK;
    for (size_t i = 0; ok && i < sizeof h; i++)
        ok = h[i] == v;
    if (d && cf_mem_free(s, d) != CF_OK)
        ok = 0;
    if (!ok)
        fprintf(stderr, "  stream 0x%llx does not work: %s\n",
                (unsigned long long)cf_stream_handle(s), cf_last_error());
    return ok && cf_stream_synchronize(s) == CF_OK;
}

static void test_wrap(void)
{
    NEED_GPU();
    cf_stream *owner = NULL, *w = NULL;
    CHECK_OK(cf_stream_create(0, &owner));
    if (!owner)
        return;
    CHECK_OK(cf_stream_wrap(0, cf_stream_handle(owner), &w));
    if (w) {
        CHECK(cf_stream_handle(w) == cf_stream_handle(owner));
        CHECK(stream_works(w, 0x21));
        CHECK_OK(cf_stream_wait_stream(w, owner)); /* the same stream: nothing to do */
        cf_stream_free(w); /* frees the wrapper only */
    }
    CHECK(stream_works(owner, 0x42)); /* so the stream is still alive */

    /* The special handles: legacy default (0), legacy (1), per-thread default (2). */
    for (uintptr_t h = 0; h <= 2; h++) {
        w = NULL;
        CHECK_OK(cf_stream_wrap(0, h, &w));
        if (!w)
            continue;
        CHECK(cf_stream_handle(w) == h);
        CHECK(stream_works(w, (unsigned char)(0x61 + h)));
        cf_stream_free(w);
    }

    /* A stream of another device is refused with a message naming both devices. */
    int ndev = 0;
    CHECK_OK(cf_device_count(&ndev));
    if (ndev >= 2) {
        cf_stream *other = NULL;
        CHECK_OK(cf_stream_create(1, &other));
        w = (cf_stream *)1;
        CHECK_STATUS(cf_stream_wrap(0, cf_stream_handle(other), &w), CF_ERR_INVALID);
        CHECK(w == NULL);
        CHECK_CONTAINS(cf_last_error(), "belongs to device 1, not to device 0");
        CHECK_OK(cf_stream_wrap(1, cf_stream_handle(other), &w));
        cf_stream_free(w);
        cf_stream_free(other);
    }
    cf_stream_free(owner);
}

/* s2 waits for s1: s1 is kept busy with large memsets, the last of which writes 0x1F; s2 then
 * reads one byte. Without the wait s2 would run at once and read an earlier value. */
static void test_wait_stream(void)
{
    NEED_GPU();
    const size_t n = (size_t)512 << 20;
    cf_stream *s1 = NULL, *s2 = NULL, *def = NULL;
    uint64_t d = 0;
    CHECK_OK(cf_stream_create(0, &s1));
    CHECK_OK(cf_stream_create(0, &s2));
    CHECK_OK(cf_stream_default(0, &def));
    if (!s1 || !s2 || !def || cf_mem_alloc(s1, n, &d) != CF_OK)
        goto out;
    CHECK_OK(cf_stream_synchronize(s1));
    for (int round = 0; round < 4; round++) {
        cf_stream *waiter = round % 2 ? def : s2;
        for (int k = 0; k < 16; k++)
            CHECK_OK(cf_memset8(s1, d, (unsigned char)(0x10 + k + round), n));
        CHECK_OK(cf_stream_wait_stream(waiter, s1));
        unsigned char last = 0, first = 0;
        CHECK_OK(cf_memcpy_dtoh(waiter, &last, d + n - 1, 1, 1));
        CHECK_OK(cf_memcpy_dtoh(waiter, &first, d, 1, 1));
        CHECK(last == 0x1F + round);
        CHECK(first == 0x1F + round);
    }
    /* After a synchronize the stream reports done. */
    CHECK_OK(cf_stream_synchronize(s1));
    int done = 0;
    CHECK_OK(cf_stream_query(s1, &done));
    CHECK(done == 1);
    CHECK_OK(cf_mem_free(s1, d));
    CHECK_OK(cf_stream_synchronize(s1));
out:
    cf_stream_free(s1);
    cf_stream_free(s2);
    cf_stream_free(def);
}

/* cf_stream_create makes a non-blocking stream, cf_stream_create_ex either kind; the default
 * streams report blocking. */
static void test_flags(void)
{
    NEED_GPU();
    cf_stream *nb = NULL, *b = NULL, *def = NULL, *ptds = NULL, *legacy = NULL;
    unsigned flags = 7;
    CHECK_OK(cf_stream_create(0, &nb));
    CHECK_OK(cf_stream_create_ex(0, CF_STREAM_BLOCKING, &b));
    CHECK_OK(cf_stream_default(0, &def));
    CHECK_OK(cf_stream_wrap(0, 2, &ptds));
    CHECK_OK(cf_stream_wrap(0, 1, &legacy));
    if (nb && b && def && ptds && legacy) {
        CHECK_OK(cf_stream_flags(nb, &flags));
        CHECK(flags == CF_STREAM_NON_BLOCKING);
        CHECK_OK(cf_stream_flags(b, &flags));
        CHECK(flags == CF_STREAM_BLOCKING);
        CHECK_OK(cf_stream_flags(def, &flags));
        CHECK(flags == CF_STREAM_BLOCKING);
        CHECK_OK(cf_stream_flags(ptds, &flags));
        CHECK(flags == CF_STREAM_BLOCKING);
        CHECK(stream_works(b, 0x33));
        /* handle 0 and handle 1 are both the legacy default stream: waiting is a no-op */
        CHECK_OK(cf_stream_wait_stream(legacy, def));
        CHECK_OK(cf_stream_wait_stream(def, legacy));
    }
    cf_stream_free(nb);
    cf_stream_free(b);
    cf_stream_free(def);
    cf_stream_free(ptds);
    cf_stream_free(legacy);
}

/* Numba's ordering, which cuda.stream() relies on: a blocking stream and the legacy default
 * stream wait for each other with no explicit wait. s is kept busy with large memsets ending in a
 * known value; the legacy stream then reads, and the other way round. A non-blocking stream
 * would (usually) let the reader run first; that is not asserted, it is the driver's business. */
static void test_blocking_orders_with_legacy(void)
{
    NEED_GPU();
    const size_t n = (size_t)512 << 20;
    cf_stream *b = NULL, *def = NULL;
    uint64_t d = 0;
    CHECK_OK(cf_stream_create_ex(0, CF_STREAM_BLOCKING, &b));
    CHECK_OK(cf_stream_default(0, &def));
    if (!b || !def || cf_mem_alloc(def, n, &d) != CF_OK)
        goto out;
    CHECK_OK(cf_stream_synchronize(def));
    for (int round = 0; round < 4; round++) {
        cf_stream *producer = round % 2 ? def : b, *consumer = round % 2 ? b : def;
        for (int k = 0; k < 16; k++)
            CHECK_OK(cf_memset8(producer, d, (unsigned char)(0x40 + k + round), n));
        unsigned char last = 0, first = 0;
        CHECK_OK(cf_memcpy_dtoh(consumer, &last, d + n - 1, 1, 1));
        CHECK_OK(cf_memcpy_dtoh(consumer, &first, d, 1, 1));
        CHECK(last == 0x4F + round);
        CHECK(first == 0x4F + round);
    }
    /* cf_stream_synchronize_queued on the legacy stream waits for the blocking stream's work */
    for (int k = 0; k < 16; k++)
        CHECK_OK(cf_memset8(b, d, (unsigned char)(0x70 + k), n));
    CHECK_OK(cf_stream_synchronize_queued(def));
    int done = 0;
    CHECK_OK(cf_stream_query(b, &done));
    CHECK(done == 1);
    CHECK_OK(cf_mem_free(def, d));
    CHECK_OK(cf_stream_synchronize(def));
out:
    cf_stream_free(b);
    cf_stream_free(def);
}

/* A failed host allocation in cf_stream_create is reported, leaves *out NULL and the next works. */
static void test_create_host_failure(void)
{
    NEED_GPU();
    int64_t before = cf_test_alloc_outstanding();
    cf_stream *s = (cf_stream *)1;
    cf_test_fail_alloc_after(1, 0);
    CHECK_STATUS(cf_stream_create(0, &s), CF_ERR_NOMEM);
    cf_test_fail_alloc_after(0, 0);
    CHECK(s == NULL);
    CHECK(cf_test_alloc_outstanding() == before);
    CHECK_OK(cf_stream_create(0, &s));
    CHECK(s && stream_works(s, 0x11));
    cf_stream_free(s);
    CHECK(cf_test_alloc_outstanding() == before);
}

int main(void)
{
    RUN(test_no_driver); /* first: it forks before this process loads the driver */
    RUN(test_args);
    RUN(test_create);
    RUN(test_default);
    RUN(test_wrap);
    RUN(test_wait_stream);
    RUN(test_flags);
    RUN(test_blocking_orders_with_legacy);
    RUN(test_create_host_failure);
    return SUMMARY();
}
