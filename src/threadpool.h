/* threadpool.h: a small fixed pool of worker threads that splits large host memcpy calls.
 *
 * Why: one thread copies pageable memory at about 10 GB/s, a fifth of what a pinned DMA moves, so
 * the host side of a staged host<->device copy (staging.c) is the bottleneck unless it is spread
 * over several cores.
 *
 * The pool is created at the first copy large enough to split. Workers: $CUFUNC_COPY_THREADS if set
 * (0..64; 0 means the calling thread copies alone), else min(8, online CPUs - 1), at least 1. The
 * calling thread always takes a share too. One copy uses the pool at a time: a second thread that
 * calls while the pool is busy copies on its own thread instead of waiting.
 *
 * Fork: a child handler (pthread_atfork) forgets the parent's workers, which do not exist in the
 * child, and resets the locks; the child builds its own pool at its next large copy.
 * Workers are never joined at exit (exit does not wait for them and they hold no resources that
 * need it); cf_threadpool_configure joins them.
 */
#ifndef CF_THREADPOOL_H
#define CF_THREADPOOL_H

#include <stddef.h>

#include "cufunc/status.h"

/* The most workers the pool will start. */
#define CF_THREADPOOL_MAX_WORKERS 64

/* memcpy(dst, src, n) with the bytes split among the workers and the calling thread; returns when
 * every byte is copied. The ranges must not overlap. Small copies (under a few hundred KiB) and
 * copies made while the pool is busy run on the calling thread. Never fails: if threads cannot be
 * started, the calling thread copies alone. */
void cf_threadpool_memcpy(void *dst, const void *src, size_t n);

/* The same with at most `nthreads` threads copying, the caller included (0: every worker;
 * 1: the caller alone). A pool of the default size (not set by cf_threadpool_configure or
 * $CUFUNC_COPY_THREADS) first
 * grows to nthreads - 1 workers (at most CF_THREADPOOL_MAX_WORKERS): the host pipeline asks for
 * more threads than the staging ring (hostpipe.c, CUFUNC_HOST_THREADS). */
void cf_threadpool_memcpy_n(void *dst, const void *src, size_t n, int nthreads);

/* The number of workers the pool has, or will start at its first use (the calling thread not
 * counted). */
int cf_threadpool_workers(void);

/* Stop and join the current workers (waiting for a copy in progress to finish) and use `nworkers`
 * from the next copy on; nworkers < 0 re-reads $CUFUNC_COPY_THREADS / the CPU count. For tests and
 * benchmarks that compare thread counts. CF_ERR_INVALID if nworkers > CF_THREADPOOL_MAX_WORKERS. */
cf_status cf_threadpool_configure(int nworkers);

#endif
