/* alloc.c: the one place cufunc allocates host memory, with a fault-injection hook. Each block carries
 * a small header with its size so that the outstanding count is exact (tests check for leaks). */
#include "alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testing.h"
#include "error.h"

/* 16 bytes keeps the user pointer aligned for any type. */
typedef union header {
    size_t size;
    max_align_t align;
} header;

static _Atomic int64_t fail_countdown; /* 0: off; n: the n-th allocation from now fails */
static _Atomic int fail_sticky;
static _Atomic int64_t alloc_count;
static _Atomic int64_t alloc_outstanding;

void cf_test_fail_alloc_after(int64_t n, int sticky)
{
    atomic_store(&fail_sticky, sticky);
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}

int64_t cf_test_alloc_count(void) { return atomic_load(&alloc_count); }
int64_t cf_test_alloc_outstanding(void) { return atomic_load(&alloc_outstanding); }

static int injected_failure(void)
{
    int64_t c = atomic_load(&fail_countdown);
    while (c > 0) {
        if (c == 1) {
            if (atomic_load(&fail_sticky))
                return 1; /* stays at 1: every later allocation fails too */
            if (atomic_compare_exchange_weak(&fail_countdown, &c, 0))
                return 1;
        } else if (atomic_compare_exchange_weak(&fail_countdown, &c, c - 1)) {
            return 0;
        }
    }
    return 0;
}

static void *fail(size_t n)
{
    cf_error_set(CF_ERR_NOMEM, "out of host memory allocating %zu bytes", n);
    return NULL;
}

void *cf_malloc(size_t n)
{
    if (n > SIZE_MAX - sizeof(header) || injected_failure())
        return fail(n);
    header *h = malloc(sizeof(header) + n);
    if (!h)
        return fail(n);
    h->size = n;
    atomic_fetch_add(&alloc_count, 1);
    atomic_fetch_add(&alloc_outstanding, 1);
    return h + 1;
}

void *cf_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return fail(SIZE_MAX);
    void *p = cf_malloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void *cf_realloc(void *p, size_t n)
{
    if (!p)
        return cf_malloc(n);
    if (n > SIZE_MAX - sizeof(header) || injected_failure())
        return fail(n);
    header *h = (header *)p - 1;
    header *g = realloc(h, sizeof(header) + n);
    if (!g)
        return fail(n);
    g->size = n;
    return g + 1;
}

void cf_free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub(&alloc_outstanding, 1);
    free((header *)p - 1);
}

char *cf_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = cf_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
