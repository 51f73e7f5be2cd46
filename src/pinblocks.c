/* pinblocks.c: the cache of page-locked blocks that new NumPy results of host calls live in
 * (cf_hostpipe_result_alloc/free/stats, include/cufunc/ufunc.h; whether a call wants one is the
 * host path's policy, cf_hostpipe_result_wanted in hostpipe.c, which asks cf_pinblocks_seen).
 * Freed blocks are kept for later requests they fit, at most CF_HOST_RESULT_CACHE_BYTES; at most
 * CF_HOST_RESULT_OUTSTANDING_BYTES are handed out at once. */
#include "pinblocks.h"

#include <pthread.h>
#include <string.h>

#include "cufunc/runtime.h"
#include "cufunc/ufunc.h"
#include "diagnostics.h"
#include "env.h"
#include "error.h"

#define PINNED_STEP CF_PINBLOCK_STEP

/* A block is one cuMemHostAlloc of a header page and the data; the header holds the data's
 * capacity, so a block given back needs no table. Freed blocks wait in `cache` (oldest first)
 * for a request they fit. The data starts page-aligned, as the DMAs like it. */
#define RESULT_HEADER ((size_t)4096)
#define RESULT_CACHE_SLOTS 64

static pthread_mutex_t result_lock = PTHREAD_MUTEX_INITIALIZER;
static char *result_cache[RESULT_CACHE_SLOTS]; /* data pointers, oldest first */
static int result_ncached;
static size_t result_cached_bytes, result_outstanding;

/* Sizes (in PINNED_STEP units) of the last requests cf_hostpipe_result_wanted turned down or
 * granted, a ring under result_lock. */
#define RESULT_RECENT 16
static size_t result_recent[RESULT_RECENT];
static int result_recent_next;

static size_t result_capacity(const char *data) { return *(const size_t *)(data - RESULT_HEADER); }

/* The bytes a new block for `want` gets: whole PINNED_STEPs. */
static size_t result_step_bytes(size_t want)
{
    return (want + PINNED_STEP - 1) / PINNED_STEP * PINNED_STEP;
}

/* A cached block of `cap` serves `want` when at most twice the block `want` would get itself
 * (comparing with `want` alone, a request under half a step never fitted the block made for it,
 * and every such call paid cuMemHostAlloc). */
static int result_fits(size_t cap, size_t want)
{
    return cap >= want && cap / 2 <= result_step_bytes(want);
}

cf_status cf_hostpipe_result_alloc(size_t nbytes, void **ptr)
{
    if (!ptr)
        return cf_error_set(CF_ERR_INVALID, "cf_hostpipe_result_alloc: ptr is NULL");
    *ptr = NULL;
    size_t want = nbytes ? nbytes : 1;
    pthread_mutex_lock(&result_lock);
    for (int k = 0; k < result_ncached; k++) {
        size_t cap = result_capacity(result_cache[k]);
        if (result_fits(cap, want)) {
            *ptr = result_cache[k];
            memmove(&result_cache[k], &result_cache[k + 1],
                    sizeof result_cache[0] * (size_t)(result_ncached - k - 1));
            result_ncached--;
            result_cached_bytes -= cap;
            result_outstanding += cap;
            pthread_mutex_unlock(&result_lock);
            return CF_OK;
        }
    }
    if (result_outstanding + want > CF_HOST_RESULT_OUTSTANDING_BYTES) {
        pthread_mutex_unlock(&result_lock);
        return cf_error_set(CF_ERR_NOMEM, "cf_hostpipe_result_alloc: %zu bytes of page-locked "
                            "results are out already", result_outstanding);
    }
    result_outstanding += want; /* reserved before the slow allocation, outside the lock */
    pthread_mutex_unlock(&result_lock);
    size_t cap = result_step_bytes(want);
    void *block = NULL;
    cf_status st = cf_host_alloc_pinned(cap + RESULT_HEADER, &block);
    pthread_mutex_lock(&result_lock);
    result_outstanding -= want;
    if (st == CF_OK)
        result_outstanding += cap;
    pthread_mutex_unlock(&result_lock);
    if (st != CF_OK)
        return st;
    *(size_t *)block = cap;
    *ptr = (char *)block + RESULT_HEADER;
    return CF_OK;
}

void cf_hostpipe_result_free(void *ptr)
{
    if (!ptr)
        return;
    char *data = ptr, *evict[RESULT_CACHE_SLOTS + 1];
    int nevict = 0;
    size_t cap = result_capacity(data);
    pthread_mutex_lock(&result_lock);
    result_outstanding -= cap;
    result_cache[result_ncached++] = data;
    result_cached_bytes += cap;
    while (result_ncached > 0 && (result_ncached == RESULT_CACHE_SLOTS ||
                                  result_cached_bytes > CF_HOST_RESULT_CACHE_BYTES)) {
        evict[nevict++] = result_cache[0];
        result_cached_bytes -= result_capacity(result_cache[0]);
        memmove(&result_cache[0], &result_cache[1],
                sizeof result_cache[0] * (size_t)(result_ncached - 1));
        result_ncached--;
    }
    pthread_mutex_unlock(&result_lock);
    for (int k = 0; k < nevict; k++)
        cf_host_free_pinned(evict[k] - RESULT_HEADER);
}

/* (cf_hostpipe_configure) The cached result blocks freed (blocks handed out stay valid and come
 * back to the cache later) and the sizes seen forgotten, so a new setting starts clean. */
void cf_pinblocks_forget(void)
{
    char *evict[RESULT_CACHE_SLOTS];
    pthread_mutex_lock(&result_lock);
    int n = result_ncached;
    memcpy(evict, result_cache, sizeof evict[0] * (size_t)n);
    result_ncached = 0;
    result_cached_bytes = 0;
    memset(result_recent, 0, sizeof result_recent);
    pthread_mutex_unlock(&result_lock);
    for (int k = 0; k < n; k++)
        cf_host_free_pinned(evict[k] - RESULT_HEADER);
}

void cf_hostpipe_result_stats(size_t *outstanding, size_t *cached)
{
    pthread_mutex_lock(&result_lock);
    if (outstanding)
        *outstanding = result_outstanding;
    if (cached)
        *cached = result_cached_bytes;
    pthread_mutex_unlock(&result_lock);
}

int cf_pinblocks_seen(size_t nbytes)
{
    size_t want = nbytes ? nbytes : 1;
    size_t steps = result_step_bytes(want) / PINNED_STEP;
    int yes = 0;
    pthread_mutex_lock(&result_lock);
    for (int k = 0; k < result_ncached && !yes; k++)
        yes = result_fits(result_capacity(result_cache[k]), want);
    for (int k = 0; k < RESULT_RECENT && !yes; k++)
        yes = result_recent[k] == steps;
    result_recent[result_recent_next] = steps;
    result_recent_next = (result_recent_next + 1) % RESULT_RECENT;
    pthread_mutex_unlock(&result_lock);
    return yes;
}
