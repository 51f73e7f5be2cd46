/* threadpool.c: the parallel host memcpy behind staged copies (see threadpool.h).
 *
 * One job at a time: the caller publishes {dst, src, n, part size} under `lock`, bumps the
 * generation and wakes the workers; every thread, the caller included, claims parts by index
 * under `lock` until none is left, and the caller waits until the count of unfinished parts is 0.
 * Claiming by index (rather than one fixed part per thread) lets fast threads take the parts of a
 * worker that was slow to wake.
 *
 * Staged copies hand the pool a job every chunk (about every 150 us), so waking must be cheap: a
 * worker spins for a while on the generation before it sleeps on the condition variable, and the
 * caller spins briefly before sleeping on `done_cv`.
 */
#define _GNU_SOURCE 1 /* sched_getaffinity, CPU_COUNT */
#include "threadpool.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "env.h"
#include "error.h"

/* Below this a copy is not split: waking threads costs more than it saves. */
#define SPLIT_MIN ((size_t)256 << 10)
/* The smallest part handed to one thread. */
#define MIN_PART ((size_t)64 << 10)
/* How long an idle worker spins before sleeping, and how long the caller spins for the last parts. */
#define WORKER_SPIN_NS 200000L
#define CALLER_SPIN_NS 2000000L
#define DEFAULT_MAX_WORKERS 8

static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER; /* one job at a time; guards the pool */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* guards the job */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;   /* a job was published, or shut down */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* the last part of a job finished */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Guarded by `busy`. */
static pthread_t threads[CF_THREADPOOL_MAX_WORKERS];
static int nlive;        /* workers running */
static int started;      /* the pool was built (with nlive workers, maybe 0) */
static int wanted = -1;  /* workers asked for by cf_threadpool_configure; -1: the default */
static int sized;        /* the pool's size was fixed (configure or $CUFUNC_COPY_THREADS): no growth */

/* Written under `lock`, read without it by spinning threads. */
static _Atomic uint64_t generation;
static _Atomic int shutting_down;
static _Atomic int parts_left;

/* The job, guarded by `lock`. job_cap threads at most copy its parts (the caller counted in
 * job_joined from the start); a worker that wakes once the cap is reached leaves the job alone. */
static char *job_dst;
static const char *job_src;
static size_t job_n, job_part;
static int job_nparts, job_next;
static int job_cap, job_joined;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin until the generation moves away from `seen` or shutdown starts, for at most `ns`. */
static void spin_for_job(uint64_t seen, long ns)
{
    int64_t deadline = cf_now_ns() + ns;
    for (unsigned i = 1;; i++) {
        if (atomic_load(&generation) != seen || atomic_load(&shutting_down))
            return;
        cpu_relax();
        if ((i & 63) == 0 && cf_now_ns() > deadline)
            return;
    }
}

static void spin_for_done(long ns)
{
    int64_t deadline = cf_now_ns() + ns;
    for (unsigned i = 1;; i++) {
        if (atomic_load(&parts_left) == 0)
            return;
        cpu_relax();
        if ((i & 63) == 0 && cf_now_ns() > deadline)
            return;
    }
}

/* Claim and copy parts of the current job until none is left. Called and returns with `lock` held. */
static void run_parts(void)
{
    while (job_next < job_nparts) {
        size_t i = (size_t)job_next++;
        size_t off = i * job_part;
        size_t len = job_n - off < job_part ? job_n - off : job_part;
        char *d = job_dst + off;
        const char *s = job_src + off;
        pthread_mutex_unlock(&lock);
        memcpy(d, s, len);
        pthread_mutex_lock(&lock);
        if (atomic_fetch_sub(&parts_left, 1) == 1)
            pthread_cond_broadcast(&done_cv);
    }
}

static void *worker_main(void *arg)
{
    uint64_t seen = (uint64_t)(uintptr_t)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!atomic_load(&shutting_down) && atomic_load(&generation) == seen) {
            pthread_mutex_unlock(&lock);
            spin_for_job(seen, WORKER_SPIN_NS);
            pthread_mutex_lock(&lock);
            if (!atomic_load(&shutting_down) && atomic_load(&generation) == seen)
                pthread_cond_wait(&wake, &lock);
        }
        if (atomic_load(&shutting_down))
            break;
        seen = atomic_load(&generation);
        if (job_joined < job_cap) {
            job_joined++;
            run_parts();
        }
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* In a forked child only the forking thread exists: forget the workers and start from fresh locks
 * (the parent's may have been held, or have had waiters, at the moment of fork). */
static void on_fork_child(void)
{
    static const pthread_mutex_t mutex_init = PTHREAD_MUTEX_INITIALIZER;
    static const pthread_cond_t cond_init = PTHREAD_COND_INITIALIZER;
    busy = mutex_init;
    lock = mutex_init;
    wake = cond_init;
    done_cv = cond_init;
    nlive = 0;
    started = 0;
    atomic_store(&shutting_down, 0);
    atomic_store(&parts_left, 0);
    job_nparts = job_next = 0;
    job_cap = job_joined = 0;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

/* $CUFUNC_COPY_THREADS when set to a valid count, else -1. */
static int env_workers(void) { return (int)cf_knob(CF_KNOB_COPY_THREADS); }

static int default_workers(void)
{
    int v = env_workers();
    if (v >= 0)
        return v;
    long cpus = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cpus = CPU_COUNT(&set);
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long n = cpus - 1;
    if (n > DEFAULT_MAX_WORKERS)
        n = DEFAULT_MAX_WORKERS;
    return n < 1 ? 1 : (int)n;
}

/* Start workers until `want` run (the pool may have some already). `busy` held, so no job runs. */
static void add_workers(int want)
{
    if (want > CF_THREADPOOL_MAX_WORKERS)
        want = CF_THREADPOOL_MAX_WORKERS;
    if (want <= nlive)
        return;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setstacksize(&attr, (size_t)256 << 10);
    /* Workers inherit a full signal mask, so signals (Python's SIGINT handler) go to other threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    uint64_t g = atomic_load(&generation);
    while (nlive < want) {
        if (pthread_create(&threads[nlive], &attr, worker_main, (void *)(uintptr_t)g) != 0)
            break; /* run with the workers that did start */
        nlive++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
}

/* Start the workers. `busy` held. */
static void start_pool(void)
{
    pthread_once(&atfork_once, register_atfork);
    started = 1;
    sized = wanted >= 0 || env_workers() >= 0;
    add_workers(wanted >= 0 ? wanted : default_workers());
}

/* Stop and join the workers. `busy` held, so no job is running. */
static void stop_pool(void)
{
    pthread_mutex_lock(&lock);
    atomic_store(&shutting_down, 1);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < nlive; i++)
        pthread_join(threads[i], NULL);
    nlive = 0;
    started = 0;
    atomic_store(&shutting_down, 0);
}

void cf_threadpool_memcpy(void *dst, const void *src, size_t n)
{
    cf_threadpool_memcpy_n(dst, src, n, 0);
}

void cf_threadpool_memcpy_n(void *dst, const void *src, size_t n, int nthreads)
{
    if (n < SPLIT_MIN || nthreads == 1 || pthread_mutex_trylock(&busy) != 0) {
        memcpy(dst, src, n);
        return;
    }
    if (!started)
        start_pool();
    /* A pool sized by default grows to what the call asks for; one sized by
     * cf_threadpool_configure or $CUFUNC_COPY_THREADS keeps that size. */
    if (nthreads > nlive + 1 && !sized)
        add_workers(nthreads - 1);
    size_t threads_total = (size_t)nlive + 1;
    if (nthreads > 0 && (size_t)nthreads < threads_total)
        threads_total = (size_t)nthreads;
    /* Two parts per thread, so a late worker's share is picked up by the others. */
    size_t part = (n + 2 * threads_total - 1) / (2 * threads_total);
    if (part < MIN_PART)
        part = MIN_PART;
    part = (part + 4095) & ~(size_t)4095;
    size_t nparts = (n + part - 1) / part;
    if (nlive == 0 || nparts < 2 || threads_total < 2) {
        pthread_mutex_unlock(&busy);
        memcpy(dst, src, n);
        return;
    }

    pthread_mutex_lock(&lock);
    job_dst = dst;
    job_src = src;
    job_n = n;
    job_part = part;
    job_nparts = (int)nparts;
    job_next = 0;
    job_cap = (int)threads_total;
    job_joined = 1; /* the caller */
    atomic_store(&parts_left, (int)nparts);
    atomic_fetch_add(&generation, 1);
    pthread_cond_broadcast(&wake);
    run_parts();
    while (atomic_load(&parts_left) > 0) {
        pthread_mutex_unlock(&lock);
        spin_for_done(CALLER_SPIN_NS);
        pthread_mutex_lock(&lock);
        if (atomic_load(&parts_left) > 0)
            pthread_cond_wait(&done_cv, &lock);
    }
    pthread_mutex_unlock(&lock);
    pthread_mutex_unlock(&busy);
}

int cf_threadpool_workers(void)
{
    pthread_mutex_lock(&busy);
    int n = started ? nlive : wanted >= 0 ? wanted : default_workers();
    pthread_mutex_unlock(&busy);
    return n;
}

cf_status cf_threadpool_configure(int nworkers)
{
    if (nworkers > CF_THREADPOOL_MAX_WORKERS)
        return cf_error_set(CF_ERR_INVALID, "cf_threadpool_configure: %d workers is over the limit %d",
                            nworkers, CF_THREADPOOL_MAX_WORKERS);
    pthread_mutex_lock(&busy);
    if (started)
        stop_pool();
    wanted = nworkers < 0 ? -1 : nworkers;
    pthread_mutex_unlock(&busy);
    return CF_OK;
}
