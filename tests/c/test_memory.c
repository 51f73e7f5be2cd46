/* test_memory.c: device allocation (pool, accounting, out of memory), pinned host memory and the
 * cf_memcpy_* / cf_memset8 copies. Argument checks and the no-driver behaviour run anywhere; the
 * rest needs a GPU. Device and host buffers are poisoned and filled with position-dependent
 * patterns, with guard zones, so unwritten, misplaced or overrun bytes show. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "context.h"
#include "diagnostics.h"
#include "driver.h"
#include "testing.h"
#include "staging.h"

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

/* Run fn in a child process in which libcuda cannot be found (the driver load is once per
 * process, so this must run before the parent touches the driver). */
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

/* ---- anywhere ------------------------------------------------------------------------------ */

static void no_driver_checks(void)
{
    void *p = (void *)1;
    CHECK_STATUS(cf_host_alloc_pinned(16, &p), CF_ERR_NO_DRIVER);
    CHECK(p == NULL);
    CHECK_CONTAINS(cf_last_error(), "CUFUNC_DRIVER_PATH");
    int x = 0;
    CHECK(cf_host_is_pinned(&x) == 0);
    cf_host_free_pinned(&x); /* no driver: nothing to free, and no crash */
    CHECK(cf_mem_outstanding() == 0);
    CHECK_STATUS(cf_init(), CF_ERR_NO_DRIVER);
}

static void test_no_driver(void) { in_child_without_driver(no_driver_checks); }

static void test_args(void)
{
    uint64_t d = 1;
    CHECK_STATUS(cf_mem_alloc(NULL, 16, &d), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_mem_alloc");
    CHECK_CONTAINS(cf_last_error(), "NULL");
    CHECK(d == 0);
    CHECK_STATUS(cf_mem_alloc(NULL, 16, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "ptr is NULL");
    CHECK_STATUS(cf_mem_free(NULL, 0x1234), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_mem_free: stream s is NULL");
    char buf[8];
    CHECK_STATUS(cf_memcpy_htod(NULL, 0x1234, buf, 8, 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_memcpy_htod");
    CHECK_STATUS(cf_memcpy_dtoh(NULL, buf, 0x1234, 8, 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_memcpy_dtoh");
    CHECK_STATUS(cf_memcpy_dtod(NULL, 0x1234, 0x5678, 8), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_memcpy_dtod");
    CHECK_STATUS(cf_memset8(NULL, 0x1234, 1, 8), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_memset8");
    CHECK_STATUS(cf_host_alloc_pinned(16, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_host_alloc_pinned: ptr is NULL");
    cf_host_free_pinned(NULL);
    CHECK(cf_host_is_pinned(NULL) == 0);
}

/* The pinned-memory probe asks the driver without an error for memory it does not know:
 * compute-sanitizer reports every failing driver call as an error of the user's program, and
 * most host arrays are pageable. White-box: the driver table's two pointer-attribute entries are
 * replaced by fakes (cuPointerGetAttribute fails as the driver does and counts its calls), so
 * this runs without a GPU too. */
static int fake_single_calls;
static uintptr_t fake_pinned_lo, fake_pinned_hi;

static CUresult CUDAAPI fake_get_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    fake_single_calls++;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult CUDAAPI fake_get_attributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                            CUdeviceptr ptr)
{
    /* The driver's documented behaviour: success on any pointer, default values for unknown
     * memory. */
    for (unsigned int i = 0; i < n; i++) {
        if (attrs[i] != CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
            return CUDA_ERROR_INVALID_VALUE;
        int known = ptr >= fake_pinned_lo && ptr < fake_pinned_hi;
        *(unsigned int *)data[i] = known ? CU_MEMORYTYPE_HOST : 0;
    }
    return CUDA_SUCCESS;
}

static void test_pinned_probe_without_errors(void)
{
    static char pinned[64], pageable[64];
    cf_driver_table saved = cf_drv;
    cf_drv.cuPointerGetAttribute = fake_get_attribute;
    cf_drv.cuPointerGetAttributes = fake_get_attributes;
    fake_single_calls = 0;
    fake_pinned_lo = (uintptr_t)pinned;
    fake_pinned_hi = (uintptr_t)pinned + sizeof pinned;
    CHECK(cf_mem_byte_is_pinned(pinned) == 1);
    CHECK(cf_mem_byte_is_pinned(pinned + 63) == 1);
    CHECK(cf_mem_byte_is_pinned(pageable) == 0);
    CHECK(cf_mem_byte_is_pinned(pageable + 10) == 0);
    CHECK(fake_single_calls == 0); /* no failing call was made */
    cf_drv = saved;
}

/* ---- GPU ----------------------------------------------------------------------------------- */

#define GUARD 64

/* htod then dtoh of n bytes through a guarded device region; pinned or pageable host buffers. */
static int roundtrip_ok(cf_stream *s, size_t n, size_t hoff, int pinned, unsigned seed)
{
    int ok = 0;
    uint64_t d = 0;
    unsigned char *src = NULL, *back = NULL;
    size_t nsrc = n + hoff + 1, nback = n + 2 * GUARD + hoff;
    if (pinned) {
        if (cf_host_alloc_pinned(nsrc, (void **)&src) || cf_host_alloc_pinned(nback, (void **)&back))
            goto out;
    } else {
        src = malloc(nsrc);
        back = malloc(nback);
    }
    if (!src || !back)
        goto out;
    if (pinned && !(cf_host_is_pinned(src + hoff) && cf_host_is_pinned(back))) {
        fprintf(stderr, "  pinned buffers not seen as pinned\n");
        goto out;
    }
    if (cf_mem_alloc(s, n + 2 * GUARD, &d) || cf_memset8(s, d, 0xA5, n + 2 * GUARD))
        goto out;
    fill_pattern(src + hoff, n, seed);
    memset(back, 0x5A, nback);
    if (cf_memcpy_htod(s, d + GUARD, src + hoff, n, 0))
        goto out;
    if (!pinned)
        memset(src + hoff, 0, n); /* pageable sources may be reused as soon as htod returns */
    if (cf_memcpy_dtoh(s, back + hoff, d, n + 2 * GUARD, 1))
        goto out;
    size_t bad = pattern_mismatch(back + hoff + GUARD, n, seed);
    ok = bad == n && all_bytes(back + hoff, GUARD, 0xA5) &&
         all_bytes(back + hoff + GUARD + n, GUARD, 0xA5) && all_bytes(back, hoff, 0x5A);
    if (!ok)
        fprintf(stderr, "  round trip of %zu bytes (%s, host +%zu): first bad byte %zu\n", n,
                pinned ? "pinned" : "pageable", hoff, bad);
out:
    if (!ok && cf_last_status() != CF_OK)
        fprintf(stderr, "  last error: %s\n", cf_last_error());
    if (d && cf_mem_free(s, d) != CF_OK)
        ok = 0;
    if (pinned) {
        cf_host_free_pinned(src);
        cf_host_free_pinned(back);
    } else {
        free(src);
        free(back);
    }
    return ok;
}

static void test_roundtrips(void)
{
    NEED_GPU();
    cf_staging_config cfg;
    cf_staging_get_config(&cfg);
    const size_t c = cfg.chunk_bytes;
    const size_t m = cfg.min_bytes ? cfg.min_bytes : 2; /* the staging threshold */
    const size_t sizes[] = {0, 1, 7, 4096, m - 1, m, c - 1, c, c + 1, 3 * c + 5};
    cf_stream *streams[2] = {NULL, NULL};
    CHECK_OK(cf_stream_create(0, &streams[0]));
    CHECK_OK(cf_stream_default(0, &streams[1]));
    for (int k = 0; k < 2; k++) {
        if (!streams[k])
            continue;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (int pinned = 0; pinned < 2; pinned++)
                CHECK(roundtrip_ok(streams[k], sizes[i], (i + (size_t)pinned) % 4, pinned,
                                   (unsigned)(k * 1000 + i * 10 + (size_t)pinned)));
    }
    CHECK(cf_mem_outstanding() == 0);
    cf_stream_free(streams[0]);
    cf_stream_free(streams[1]);
}

static void test_alloc_accounting(void)
{
    NEED_GPU();
    int64_t host_before = cf_test_alloc_outstanding();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    CHECK(cf_mem_outstanding() == 0);
    uint64_t z = 1, a = 0, b = 0;
    CHECK_OK(cf_mem_alloc(s, 0, &z));
    CHECK(z == 0);
    CHECK(cf_mem_outstanding() == 0);
    CHECK_OK(cf_mem_free(s, 0));
    CHECK_OK(cf_mem_alloc(s, 1000, &a));
    CHECK_OK(cf_mem_alloc(s, (size_t)3 << 20, &b));
    CHECK(a != 0 && b != 0 && a != b);
    CHECK(cf_mem_outstanding() == 1000 + ((int64_t)3 << 20));

    /* Many live allocations: the table grows and every pointer stays findable. */
    enum { N = 300 };
    uint64_t many[N];
    int64_t sum = 0;
    for (int i = 0; i < N; i++) {
        many[i] = 0;
        CHECK_OK(cf_mem_alloc(s, (size_t)(i + 1) * 512, &many[i]));
        sum += (int64_t)(i + 1) * 512;
    }
    CHECK(cf_mem_outstanding() == 1000 + ((int64_t)3 << 20) + sum);
    for (int i = 0; i < N; i += 2) /* free in an order unlike allocation */
        CHECK_OK(cf_mem_free(s, many[i]));
    for (int i = N - 1; i > 0; i -= 2)
        CHECK_OK(cf_mem_free(s, many[i]));
    CHECK(cf_mem_outstanding() == 1000 + ((int64_t)3 << 20));

    CHECK_STATUS(cf_mem_free(s, a + 8), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "not allocated by cf_mem_alloc");
    CHECK_OK(cf_mem_free(s, a));
    CHECK_STATUS(cf_mem_free(s, a), CF_ERR_INVALID); /* double free */
    CHECK_OK(cf_mem_free(s, b));
    CHECK(cf_mem_outstanding() == 0);

    /* Freed memory is reused with no synchronisation in between. */
    for (int i = 0; i < 2000; i++) {
        uint64_t p = 0;
        CHECK_OK(cf_mem_alloc(s, (size_t)64 << 20, &p));
        CHECK_OK(cf_mem_free(s, p));
    }
    CHECK_OK(cf_stream_synchronize(s));
    CHECK(cf_mem_outstanding() == 0);
    cf_stream_free(s);
    CHECK(cf_test_alloc_outstanding() == host_before);
}

/* cf_mem_trim hands the pool's kept memory back to the driver (other processes can have it) and
 * leaves live allocations alone. */
static void test_trim(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    const size_t big = (size_t)512 << 20;
    uint64_t live = 0, gone = 0;
    CHECK_OK(cf_mem_alloc(s, 4096, &live));
    CHECK_OK(cf_memset8(s, live, 0x5a, 4096));
    CHECK_OK(cf_mem_alloc(s, big, &gone));
    CHECK_OK(cf_mem_free(s, gone));
    CHECK_OK(cf_stream_synchronize(s));
    size_t kept_free = 0, trimmed_free = 0, total = 0;
    CHECK_OK(cf_device_mem_info(0, &kept_free, &total));
    CHECK_OK(cf_mem_trim(0));
    CHECK_OK(cf_device_mem_info(0, &trimmed_free, &total));
    /* the 512 MiB the pool kept are the driver's again (other processes may take some meanwhile:
     * half of it is the bar) */
    CHECK(trimmed_free >= kept_free + big / 2);
    unsigned char back[4096];
    CHECK_OK(cf_memcpy_dtoh(s, back, live, sizeof back, 1));
    int same = 1;
    for (size_t i = 0; i < sizeof back; i++)
        same &= back[i] == 0x5a;
    CHECK(same);
    CHECK_OK(cf_mem_free(s, live));
    CHECK_STATUS(cf_mem_trim(-1), CF_ERR_NO_DEVICE);
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
}

static void test_out_of_memory(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    uint64_t p = 1;
    const size_t huge = (size_t)1 << 50; /* 1 PiB */
    CHECK_STATUS(cf_mem_alloc(s, huge, &p), CF_ERR_DEVICE_NOMEM);
    CHECK(p == 0);
    CHECK_CONTAINS(cf_last_error(), "1125899906842624 bytes");
    CHECK_CONTAINS(cf_last_error(), "1.00 PiB");
    CHECK_CONTAINS(cf_last_error(), "device 0");
    CHECK_CONTAINS(cf_last_error(), "free of");
    CHECK(cf_mem_outstanding() == 0);
    /* The process stays usable: a normal allocation and a copy work. */
    CHECK(roundtrip_ok(s, (size_t)5 << 20, 1, 0, 4242));
    uint64_t q = 0;
    CHECK_OK(cf_mem_alloc(s, (size_t)256 << 20, &q));
    CHECK_OK(cf_memset8(s, q, 0x7E, (size_t)256 << 20));
    unsigned char last = 0;
    CHECK_OK(cf_memcpy_dtoh(s, &last, q + ((size_t)256 << 20) - 1, 1, 1));
    CHECK(last == 0x7E);
    CHECK_OK(cf_mem_free(s, q));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
}

/* A failed host allocation inside cf_mem_alloc (recording the pointer) frees the device memory and
 * reports CF_ERR_NOMEM; the next allocation works. */
static void test_alloc_host_failure(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    CHECK(cf_mem_outstanding() == 0); /* so the table is empty and the next insert allocates */
    uint64_t p = 1;
    cf_test_fail_alloc_after(1, 0);
    CHECK_STATUS(cf_mem_alloc(s, 4096, &p), CF_ERR_NOMEM);
    cf_test_fail_alloc_after(0, 0);
    CHECK(p == 0);
    CHECK(cf_mem_outstanding() == 0);
    CHECK_OK(cf_mem_alloc(s, 4096, &p));
    CHECK(cf_mem_outstanding() == 4096);
    CHECK_OK(cf_mem_free(s, p));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
}

static void test_pinned(void)
{
    NEED_GPU();
    void *p = (void *)1;
    CHECK_OK(cf_host_alloc_pinned(0, &p));
    CHECK(p == NULL);
    CHECK_OK(cf_host_alloc_pinned((size_t)1 << 20, &p));
    CHECK(p != NULL);
    if (p) {
        CHECK(cf_host_is_pinned(p));
        CHECK(cf_host_is_pinned((char *)p + ((size_t)1 << 20) - 1));
        cf_host_free_pinned(p);
    }
    char *m = malloc((size_t)4 << 20);
    CHECK(m != NULL);
    memset(m, 1, (size_t)4 << 20);
    CHECK(!cf_host_is_pinned(m));
    int local = 0;
    CHECK(!cf_host_is_pinned(&local));
    free(m);
}

static void test_dtod_memset(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    const size_t n = ((size_t)1 << 20) + 13;
    uint64_t a = 0, b = 0;
    unsigned char *h = malloc(n), *back = malloc(n);
    CHECK(h && back);
    CHECK_OK(cf_mem_alloc(s, n, &a));
    CHECK_OK(cf_mem_alloc(s, n, &b));
    if (!h || !back || !a || !b)
        goto out;
    fill_pattern(h, n, 5);
    CHECK_OK(cf_memcpy_htod(s, a, h, n, 0));
    CHECK_OK(cf_memset8(s, b, 0xC3, n));
    CHECK_OK(cf_memcpy_dtod(s, b + 5, a + 3, n - 10));
    CHECK_OK(cf_memcpy_dtoh(s, back, b, n, 1));
    CHECK(all_bytes(back, 5, 0xC3));
    CHECK(memcmp(back + 5, h + 3, n - 10) == 0);
    CHECK(all_bytes(back + n - 5, 5, 0xC3));

    CHECK_OK(cf_memset8(s, a + 7, 0x3C, 1000));
    CHECK_OK(cf_memcpy_dtoh(s, back, a, 1100, 1));
    CHECK(memcmp(back, h, 7) == 0);
    CHECK(all_bytes(back + 7, 1000, 0x3C));
    CHECK(memcmp(back + 1007, h + 1007, 93) == 0);

    CHECK_OK(cf_memcpy_dtod(s, a, a, 100)); /* the same range: nothing to do */
    CHECK_STATUS(cf_memcpy_dtod(s, a + 1, a, 100), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "overlap");
    CHECK_OK(cf_memcpy_dtod(s, a, b, 0));
    CHECK_OK(cf_memset8(s, a, 0, 0));
out:
    if (a)
        CHECK_OK(cf_mem_free(s, a));
    if (b)
        CHECK_OK(cf_mem_free(s, b));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
    free(h);
    free(back);
}

/* Bad pointers and sizes are errors that name the argument, never a DMA to a wild address. */
static void test_bad_pointers(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    if (!s)
        return;
    uint64_t d = 0;
    char host[64];
    memset(host, 1, sizeof host);
    CHECK_OK(cf_mem_alloc(s, 4096, &d));
    CHECK_STATUS(cf_memcpy_htod(s, 0, host, 8, 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "dst is a null device pointer");
    CHECK_STATUS(cf_memcpy_htod(s, 0x1000, host, 8, 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "not memory known to the CUDA driver");
    CHECK_STATUS(cf_memcpy_htod(s, (uint64_t)(uintptr_t)host, host, 8, 0), CF_ERR_INVALID);
    CHECK_STATUS(cf_memcpy_htod(s, d, NULL, 8, 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "src is NULL");
    CHECK_STATUS(cf_memcpy_dtoh(s, NULL, d, 8, 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "dst is NULL");
    CHECK_STATUS(cf_memcpy_dtoh(s, host, 0x1000, 8, 0), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "src 0x1000");
    CHECK_STATUS(cf_memset8(s, UINT64_MAX - 4, 1, 100), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "overflows");
    CHECK_STATUS(cf_memcpy_dtod(s, d, 0x1000, 8), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "src");
    /* Zero bytes: nothing is touched, so any pointer is fine. */
    CHECK_OK(cf_memcpy_htod(s, 0, NULL, 0, 1));
    CHECK_OK(cf_memcpy_dtoh(s, NULL, 0, 0, 1));

    int ndev = 0;
    CHECK_OK(cf_device_count(&ndev));
    if (ndev >= 2) {
        cf_stream *s1 = NULL;
        uint64_t d1 = 0;
        CHECK_OK(cf_stream_create(1, &s1));
        CHECK_OK(cf_mem_alloc(s1, 4096, &d1));
        CHECK_STATUS(cf_memset8(s, d1, 1, 16), CF_ERR_INVALID);
        CHECK_CONTAINS(cf_last_error(), "device 1");
        CHECK_STATUS(cf_mem_free(s, d1), CF_ERR_INVALID);
        CHECK_OK(cf_mem_free(s1, d1));
        CHECK_OK(cf_stream_synchronize(s1));
        cf_stream_free(s1);
    }
    CHECK_OK(cf_mem_free(s, d));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
}


/* ---- registration, mapped, managed, IPC, events ------------------------------------------- */

static void test_new_api_args(void)
{
    int reg = 7;
    uint64_t d = 1;
    void *h = (void *)1;
    unsigned char handle[CF_IPC_HANDLE_BYTES];
    CHECK_STATUS(cf_host_register(NULL, 16, 0, &reg), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_host_register");
    CHECK_STATUS(cf_host_unregister(NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_host_device_pointer(NULL, &d), CF_ERR_INVALID);
    CHECK_STATUS(cf_host_alloc_mapped(16, NULL, &d), CF_ERR_INVALID);
    CHECK_STATUS(cf_host_alloc_mapped(16, &h, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_mem_alloc_managed(0, 16, 1, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_mem_alloc_ipc(NULL, 16, &d), CF_ERR_INVALID);
    CHECK(d == 0);
    CHECK_STATUS(cf_ipc_get_handle(0x1234, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_ipc_open(0, NULL, &d), CF_ERR_INVALID);
    CHECK_STATUS(cf_ipc_open(0, handle, NULL), CF_ERR_INVALID);
    CHECK(cf_mem_lookup(0, NULL, NULL) == 0);
    CHECK(cf_mem_lookup(0x1234, NULL, NULL) == 0);
    cf_event *e = (cf_event *)1;
    CHECK_STATUS(cf_event_create(0, 1, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_event_record(NULL, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "not a live cf_event");
    CHECK_STATUS(cf_event_synchronize(NULL), CF_ERR_INVALID);
    int done = 0;
    CHECK_STATUS(cf_event_query(NULL, &done), CF_ERR_INVALID);
    CHECK_STATUS(cf_event_wait(NULL, NULL), CF_ERR_INVALID);
    float ms = 0;
    CHECK_STATUS(cf_event_elapsed_ms(NULL, NULL, &ms), CF_ERR_INVALID);
    cf_event_free(NULL);
    (void)e;
}

static void test_register_mapped_managed(void)
{
    NEED_GPU();
    size_t n = (size_t)1 << 20;
    char *m = malloc(n);
    CHECK(m != NULL);
    if (!m)
        return;
    memset(m, 3, n);
    int reg = 0;
    CHECK(!cf_host_is_pinned(m));
    CHECK_OK(cf_host_register(m, n, 1, &reg));
    CHECK(reg == 1);
    CHECK(cf_host_is_pinned(m) && cf_host_is_pinned(m + n - 1));
    int again = 7;
    CHECK_OK(cf_host_register(m, n, 1, &again)); /* already page-locked: nothing done */
    CHECK(again == 0);
    uint64_t dp = 0;
    CHECK_OK(cf_host_device_pointer(m, &dp));
    CHECK(dp != 0);
    CHECK_OK(cf_host_unregister(m));
    CHECK(!cf_host_is_pinned(m));
    free(m);

    void *h = NULL;
    uint64_t hd = 0;
    CHECK_OK(cf_host_alloc_mapped(n, &h, &hd));
    CHECK(h != NULL && hd != 0 && cf_host_is_pinned(h));
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_default(0, &s));
    uint64_t dev = 0;
    CHECK_OK(cf_mem_alloc(s, n, &dev));
    CHECK_OK(cf_memset8(s, dev, 0x5a, n));
    CHECK_OK(cf_memcpy_dtod(s, hd, dev, n)); /* the device writes host memory in place */
    CHECK_OK(cf_stream_synchronize(s));
    CHECK(all_bytes(h, n, 0x5a));
    cf_host_free_pinned(h);

    int64_t before = cf_mem_outstanding();
    uint64_t mp = 0;
    CHECK_OK(cf_mem_alloc_managed(0, n, 1, &mp));
    CHECK(mp != 0 && cf_mem_outstanding() == before + (int64_t)n);
    memset((void *)(uintptr_t)mp, 0x11, n); /* host-usable */
    CHECK_OK(cf_memset8(s, mp, 0x22, n / 2));
    CHECK_OK(cf_stream_synchronize(s));
    CHECK(all_bytes((unsigned char *)(uintptr_t)mp, n / 2, 0x22));
    CHECK(all_bytes((unsigned char *)(uintptr_t)mp + n / 2, n / 2, 0x11));
    int pooled = 7;
    size_t sz = 0;
    CHECK(cf_mem_lookup(mp, &pooled, &sz) == 1 && pooled == 0 && sz == n);
    CHECK_OK(cf_mem_free(s, mp));
    CHECK(cf_mem_outstanding() == before);
    size_t free_b = 0, total_b = 0;
    CHECK_OK(cf_device_mem_info(0, &free_b, &total_b));
    /* more than is free: refused before the driver is asked */
    CHECK_STATUS(cf_mem_alloc_managed(0, free_b + ((size_t)1 << 30), 1, &mp), CF_ERR_DEVICE_NOMEM);
    CHECK(mp == 0);
    CHECK_OK(cf_mem_free(s, dev));
    cf_stream_free(s);
}

static void test_ipc_and_events(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    uint64_t pool = 0, ipc = 0;
    unsigned char h[CF_IPC_HANDLE_BYTES];
    CHECK_OK(cf_mem_alloc(s, 4096, &pool));
    CHECK_STATUS(cf_ipc_get_handle(pool, h), CF_ERR_INVALID); /* pool memory: not exportable */
    CHECK_CONTAINS(cf_last_error(), "cf_mem_alloc_ipc");
    CHECK_OK(cf_mem_alloc_ipc(s, 4096, &ipc));
    int pooled = 7;
    CHECK(cf_mem_lookup(ipc, &pooled, NULL) == 1 && pooled == 0);
    CHECK_OK(cf_ipc_get_handle(ipc, h));
    uint64_t opened = 0;
    /* the exporting process cannot open its own handle: an error, not a crash */
    CHECK(cf_ipc_open(0, h, &opened) != CF_OK);

    cf_event *a = NULL, *b = NULL, *nt = NULL;
    CHECK_OK(cf_event_create(0, 1, &a));
    CHECK_OK(cf_event_create(0, 1, &b));
    CHECK_OK(cf_event_create(0, 0, &nt));
    float ms = -1;
    CHECK_STATUS(cf_event_elapsed_ms(a, b, &ms), CF_ERR_INVALID); /* not recorded */
    CHECK_OK(cf_event_record(a, s));
    CHECK_OK(cf_memset8(s, ipc, 1, 4096));
    CHECK_OK(cf_event_record(b, s));
    CHECK_OK(cf_event_record(nt, s));
    CHECK_OK(cf_event_synchronize(b));
    int done = 0;
    CHECK_OK(cf_event_query(b, &done));
    CHECK(done == 1);
    CHECK_OK(cf_event_elapsed_ms(a, b, &ms));
    CHECK(ms >= 0);
    CHECK_STATUS(cf_event_elapsed_ms(a, nt, &ms), CF_ERR_INVALID); /* no timing */
    cf_stream *d = NULL;
    CHECK_OK(cf_stream_default(0, &d));
    CHECK_OK(cf_event_wait(b, d));
    cf_event_free(a);
    cf_event_free(b);
    cf_event_free(nt);
    CHECK_OK(cf_mem_free(s, ipc));
    CHECK_OK(cf_mem_free(s, pool));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(d);
    cf_stream_free(s);
}

int main(void)
{
    RUN(test_no_driver); /* first: it forks before this process loads the driver */
    RUN(test_args);
    RUN(test_pinned_probe_without_errors);
    RUN(test_pinned);
    RUN(test_alloc_accounting);
    RUN(test_alloc_host_failure);
    RUN(test_roundtrips);
    RUN(test_dtod_memset);
    RUN(test_bad_pointers);
    RUN(test_new_api_args);
    RUN(test_register_mapped_managed);
    RUN(test_ipc_and_events);
    RUN(test_trim);
    RUN(test_out_of_memory);
    return SUMMARY();
}
