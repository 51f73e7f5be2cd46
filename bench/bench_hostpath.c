/* bench_hostpath.c: where the time of a ufunc call on NumPy arrays goes, measured piece by piece on the GPU machine, in one table of four parts:
 *
 *   (a) host memcpy between pageable and pinned memory with 1, 2, 4, 8, 12, 16 threads of cufunc's
 *       copy pool (threadpool.c, cf_threadpool_memcpy_n), 1 MiB .. 256 MiB: pack (pageable ->
 *       pinned), unpack (pinned -> pageable, pages resident) and unpack into fresh pages (a new
 *       NumPy result: every page is first touched by the copy);
 *   (b) pinned DMA: host-to-device and device-to-host alone, and both at once on two streams;
 *   (c) cuMemHostRegister + cuMemHostUnregister of user memory, 64 KiB .. 512 MiB, per MiB: fresh
 *       pages (mapped, never touched) and pages already touched; DMA from/to registered pages; the
 *       copy the registration saves (pack with the pool) beside it, and the crossover;
 *   (d) small round trips (host-to-device then device-to-host, no kernel, then a wait) of 4 KiB ..
 *       400 KiB: pageable through the driver, pinned, registered beforehand, registered per call,
 *       and packed through a pinned buffer (what the pipeline's one chunk does).
 *
 *   bench_hostpath [--reps N] [--device D] [--quick]
 *
 * Figures are medians of N runs (default 7), GB/s = 1e9 bytes per second, us = microseconds.
 * Large pageable buffers are advised to use huge pages (MADV_HUGEPAGE), as NumPy does for arrays
 * of 4 MiB or more. Built from the library's sources: it reaches the copy pool and the driver
 * table directly. The predictions these figures are held against: bench/HOSTPIPE_NOTES.md,
 * "2026-11-25 predictions". */
#define _GNU_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cufunc/cufunc.h"
#include "context.h"
#include "driver.h"
#include "threadpool.h"

#include "bench_util.h"

#define MIB ((size_t)1 << 20)
#define KIB ((size_t)1 << 10)
#define MAXREPS 64

static int reps = 7;

static int die(const char *what)
{
    fprintf(stderr, "bench_hostpath: %s: %s: %s\n", what, cf_status_name(cf_last_status()),
            cf_last_error());
    return 1;
}

static int cu_die(CUresult r, const char *what)
{
    fprintf(stderr, "bench_hostpath: %s: CUDA error %d\n", what, (int)r);
    return 1;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((call) != CF_OK)                                                                       \
            return die(#call);                                                                     \
    } while (0)
#define CU(call)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS)                                                                    \
            return cu_die(r_, #call);                                                              \
    } while (0)

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return t[n / 2];
}

/* Fresh anonymous pages (never touched), huge pages advised from 4 MiB as NumPy does. */
static void *fresh_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (n >= 4 * MIB)
        madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

static void *touched_map(size_t n)
{
    void *p = fresh_map(n);
    if (p)
        memset(p, 0x3C, n);
    return p;
}

/* ---- (a) host copies through the pool ---------------------------------------------------------- */

static const int THREADS[] = {1, 2, 4, 8, 12, 16};
#define NTHREADS ((int)(sizeof THREADS / sizeof THREADS[0]))

static int part_a(unsigned char *pinned, int quick)
{
    static const size_t sizes[] = {1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB};
    int nsizes = quick ? 3 : 5;
    printf("\n(a) host memcpy through the copy pool, GB/s (median of %d)\n", reps);
    printf("%-8s %-22s", "size", "direction");
    for (int t = 0; t < NTHREADS; t++)
        printf(" %6d thr", THREADS[t]);
    printf("\n");
    for (int z = 0; z < nsizes; z++) {
        size_t n = sizes[z];
        unsigned char *pageable = touched_map(n);
        if (!pageable)
            return die("mmap");
        for (int dir = 0; dir < 3; dir++) {
            static const char *names[] = {"pack pageable->pinned", "unpack pinned->pageable",
                                          "unpack into fresh pages"};
            printf("%4zu MiB %-22s", n / MIB, names[dir]);
            for (int t = 0; t < NTHREADS; t++) {
                double g[MAXREPS];
                for (int r = -1; r < reps; r++) {
                    unsigned char *dst = dir == 0 ? pinned : pageable;
                    if (dir == 2 && !(dst = fresh_map(n)))
                        return die("mmap");
                    double t0 = now();
                    if (dir == 0)
                        cf_threadpool_memcpy_n(pinned, pageable, n, THREADS[t]);
                    else
                        cf_threadpool_memcpy_n(dst, pinned, n, THREADS[t]);
                    double dt = now() - t0;
                    if (dir == 2)
                        munmap(dst, n);
                    if (r >= 0)
                        g[r] = (double)n / dt / 1e9;
                }
                printf(" %10.1f", median(g, reps));
                fflush(stdout);
            }
            printf("\n");
        }
        munmap(pageable, n);
    }
    return 0;
}

/* ---- (b) pinned DMA --------------------------------------------------------------------------- */

static int part_b(CUstream s1, CUstream s2, uint64_t d1, uint64_t d2, unsigned char *p1,
                  unsigned char *p2, size_t maxn)
{
    static const size_t sizes[] = {8 * MIB, 64 * MIB, 256 * MIB};
    printf("\n(b) pinned DMA, GB/s (median of %d)\n", reps);
    printf("%-8s %10s %10s %14s %14s %12s\n", "size", "h2d", "d2h", "both: h2d", "both: d2h",
           "both: sum");
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        size_t n = sizes[z];
        if (n > maxn)
            break;
        double h[MAXREPS], d[MAXREPS], bh[MAXREPS], bd[MAXREPS];
        for (int r = -1; r < reps; r++) {
            double t0 = now();
            CU(cf_drv.cuMemcpyHtoDAsync(d1, p1, n, s1));
            CU(cf_drv.cuStreamSynchronize(s1));
            double t1 = now();
            CU(cf_drv.cuMemcpyDtoHAsync(p2, d2, n, s2));
            CU(cf_drv.cuStreamSynchronize(s2));
            double t2 = now();
            /* both at once: each timed to its own completion (its stream), from the common start */
            CU(cf_drv.cuMemcpyHtoDAsync(d1, p1, n, s1));
            CU(cf_drv.cuMemcpyDtoHAsync(p2, d2, n, s2));
            double a = 0, b = 0;
            for (int done = 0; done != 3;) {
                if (!(done & 1) && cf_drv.cuStreamQuery(s1) == CUDA_SUCCESS) {
                    a = now();
                    done |= 1;
                }
                if (!(done & 2) && cf_drv.cuStreamQuery(s2) == CUDA_SUCCESS) {
                    b = now();
                    done |= 2;
                }
            }
            if (r >= 0) {
                h[r] = (double)n / (t1 - t0) / 1e9;
                d[r] = (double)n / (t2 - t1) / 1e9;
                bh[r] = (double)n / (a - t2) / 1e9;
                bd[r] = (double)n / (b - t2) / 1e9;
            }
        }
        double mh = median(h, reps), md = median(d, reps), mbh = median(bh, reps),
               mbd = median(bd, reps);
        printf("%4zu MiB %10.1f %10.1f %14.1f %14.1f %12.1f\n", n / MIB, mh, md, mbh, mbd,
               mbh + mbd);
        fflush(stdout);
    }
    return 0;
}

/* ---- (c) registration ------------------------------------------------------------------------- */

static int part_c(CUstream s1, uint64_t d1, unsigned char *pinned, int quick)
{
    static const size_t sizes[] = {64 * KIB, 1 * MIB, 8 * MIB, 64 * MIB, 512 * MIB};
    int nsizes = quick ? 4 : 5;
    printf("\n(c) cuMemHostRegister / cuMemHostUnregister of user memory, and what it saves "
           "(median of %d)\n", reps);
    printf("%-8s %13s %13s %13s | %11s %11s %11s %11s | %s\n", "size", "reg fresh", "reg touched",
           "unregister", "h2d reg", "d2h reg", "pack 12thr", "h2d pinned", "register wins for "
           "one h2d?");
    printf("%-8s %13s %13s %13s | %11s %11s %11s %11s |\n", "", "us/MiB", "us/MiB", "us/MiB",
           "GB/s", "GB/s", "GB/s", "GB/s");
    for (int z = 0; z < nsizes; z++) {
        size_t n = sizes[z];
        double rf[MAXREPS], rt[MAXREPS], un[MAXREPS], hr[MAXREPS], dr[MAXREPS], pk[MAXREPS],
            hp[MAXREPS];
        int copy_dma = n <= 256 * MIB; /* the device buffer and pinned buffer hold 256 MiB */
        unsigned char *touched = touched_map(n);
        if (!touched)
            return die("mmap");
        for (int r = -1; r < reps; r++) {
            unsigned char *fresh = fresh_map(n);
            if (!fresh)
                return die("mmap");
            double t0 = now();
            CU(cf_drv.cuMemHostRegister(fresh, n, CU_MEMHOSTREGISTER_PORTABLE));
            double t1 = now();
            CU(cf_drv.cuMemHostUnregister(fresh));
            munmap(fresh, n);
            double t2 = now();
            CU(cf_drv.cuMemHostRegister(touched, n, CU_MEMHOSTREGISTER_PORTABLE));
            double t3 = now();
            double t4 = t3, t5 = t3, t6 = t3;
            if (copy_dma) {
                CU(cf_drv.cuMemcpyHtoDAsync(d1, touched, n, s1));
                CU(cf_drv.cuStreamSynchronize(s1));
                t4 = now();
                CU(cf_drv.cuMemcpyDtoHAsync(touched, d1, n, s1));
                CU(cf_drv.cuStreamSynchronize(s1));
                t5 = now();
            }
            CU(cf_drv.cuMemHostUnregister(touched));
            t6 = now();
            double t7 = now(), t8 = t7, t9 = t7;
            if (copy_dma) {
                cf_threadpool_memcpy_n(pinned, touched, n, 12);
                t8 = now();
                CU(cf_drv.cuMemcpyHtoDAsync(d1, pinned, n, s1));
                CU(cf_drv.cuStreamSynchronize(s1));
                t9 = now();
            }
            if (r >= 0) {
                double mib = (double)n / (double)MIB;
                rf[r] = 1e6 * (t1 - t0) / mib;
                rt[r] = 1e6 * (t3 - t2) / mib;
                un[r] = 1e6 * (t6 - t5) / mib;
                hr[r] = copy_dma ? (double)n / (t4 - t3) / 1e9 : 0;
                dr[r] = copy_dma ? (double)n / (t5 - t4) / 1e9 : 0;
                pk[r] = copy_dma ? (double)n / (t8 - t7) / 1e9 : 0;
                hp[r] = copy_dma ? (double)n / (t9 - t8) / 1e9 : 0;
            }
        }
        munmap(touched, n);
        double mrf = median(rf, reps), mrt = median(rt, reps), mun = median(un, reps);
        double mhr = median(hr, reps), mdr = median(dr, reps), mpk = median(pk, reps),
               mhp = median(hp, reps);
        /* us per MiB: register (touched) + unregister + DMA, against pack + DMA in sequence */
        double mib_us = (double)MIB / 1e3;
        double reg_path = mrt + mun + (mhr > 0 ? mib_us / mhr : 0);
        double copy_path = (mpk > 0 ? mib_us / mpk : 0) + (mhp > 0 ? mib_us / mhp : 0);
        if (n >= KIB * KIB)
            printf("%4zu MiB", n / MIB);
        else
            printf("%4zu KiB", n / KIB);
        printf(" %13.1f %13.1f %13.1f | %11.1f %11.1f %11.1f %11.1f | ", mrf, mrt, mun, mhr, mdr,
               mpk, mhp);
        if (copy_dma)
            printf("%s (%.1f vs %.1f us/MiB)\n", reg_path < copy_path ? "yes" : "no", reg_path,
                   copy_path);
        else
            printf("-\n");
        fflush(stdout);
    }
    return 0;
}

/* ---- (d) small round trips -------------------------------------------------------------------- */

enum { RT_PAGEABLE, RT_PINNED, RT_REGISTERED, RT_REGISTER_PER_CALL, RT_PACKED, RT_N };

static int round_trip(int kind, CUstream s, uint64_t d, unsigned char *user, unsigned char *pin,
                      size_t n)
{
    switch (kind) {
    case RT_PAGEABLE:
        CU(cf_drv.cuMemcpyHtoDAsync(d, user, n, s));
        CU(cf_drv.cuMemcpyDtoHAsync(user, d, n, s)); /* pageable: returns once it has arrived */
        CU(cf_drv.cuStreamSynchronize(s));
        break;
    case RT_PINNED:
    case RT_REGISTERED:
        CU(cf_drv.cuMemcpyHtoDAsync(d, kind == RT_PINNED ? pin : user, n, s));
        CU(cf_drv.cuMemcpyDtoHAsync(kind == RT_PINNED ? pin : user, d, n, s));
        CU(cf_drv.cuStreamSynchronize(s));
        break;
    case RT_REGISTER_PER_CALL:
        CU(cf_drv.cuMemHostRegister(user, n, CU_MEMHOSTREGISTER_PORTABLE));
        CU(cf_drv.cuMemcpyHtoDAsync(d, user, n, s));
        CU(cf_drv.cuMemcpyDtoHAsync(user, d, n, s));
        CU(cf_drv.cuStreamSynchronize(s));
        CU(cf_drv.cuMemHostUnregister(user));
        break;
    default:
        memcpy(pin, user, n);
        CU(cf_drv.cuMemcpyHtoDAsync(d, pin, n, s));
        CU(cf_drv.cuMemcpyDtoHAsync(pin, d, n, s));
        CU(cf_drv.cuStreamSynchronize(s));
        memcpy(user, pin, n);
    }
    return 0;
}

static int part_d(CUstream s, uint64_t d, unsigned char *pinned)
{
    static const size_t sizes[] = {4 * KIB, 12 * KIB, 40 * KIB, 120 * KIB, 400 * KIB};
    static const char *names[RT_N] = {"pageable", "pinned", "registered", "reg per call",
                                      "packed+pinned"};
    const int inner = 200;
    printf("\n(d) small round trips: h2d then d2h (no kernel) then a wait, us per round trip "
           "(median of %d batches of %d)\n", reps, inner);
    printf("%-9s", "size");
    for (int k = 0; k < RT_N; k++)
        printf(" %14s", names[k]);
    printf(" %14s %14s\n", "h2d pageable", "d2h pageable");
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        size_t n = sizes[z];
        /* its own pages, as a small NumPy array from malloc (not page-aligned) */
        unsigned char *raw = malloc(n + 4096 + 16), *user = raw + 16;
        if (!raw)
            return die("malloc");
        memset(raw, 0x3C, n + 4096 + 16);
        printf("%6zu KiB", n / KIB);
        for (int k = 0; k <= RT_N + 1; k++) {
            if (k == RT_REGISTERED)
                CU(cf_drv.cuMemHostRegister(user, n, CU_MEMHOSTREGISTER_PORTABLE));
            double t[MAXREPS];
            for (int r = -1; r < reps; r++) {
                double t0 = now();
                for (int i = 0; i < inner; i++) {
                    if (k < RT_N) {
                        if (round_trip(k, s, d, user, pinned, n))
                            return 1;
                    } else if (k == RT_N) { /* pageable h2d alone, then a wait */
                        CU(cf_drv.cuMemcpyHtoDAsync(d, user, n, s));
                        CU(cf_drv.cuStreamSynchronize(s));
                    } else {
                        CU(cf_drv.cuMemcpyDtoHAsync(user, d, n, s));
                        CU(cf_drv.cuStreamSynchronize(s));
                    }
                }
                if (r >= 0)
                    t[r] = 1e6 * (now() - t0) / inner;
            }
            if (k == RT_REGISTERED)
                CU(cf_drv.cuMemHostUnregister(user));
            printf(" %14.1f", median(t, reps));
            fflush(stdout);
        }
        printf("\n");
        free(raw);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int device = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else {
            fprintf(stderr, "usage: %s [--reps N] [--device D] [--quick]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > MAXREPS) {
        fprintf(stderr, "bench_hostpath: --reps must be in 1..%d\n", MAXREPS);
        return 2;
    }
    if (!cf_is_available()) {
        fprintf(stderr, "bench_hostpath: no usable GPU: %s\n", cf_last_error());
        return 77;
    }
    cf_device_props props;
    TRY(cf_device_props_get(device, &props));
    TRY(cf_device_set(device));
    /* every thread count of part (a) available */
    TRY(cf_threadpool_configure(THREADS[NTHREADS - 1] - 1));
    const size_t big = 256 * MIB;
    cf_stream *st1 = NULL, *st2 = NULL;
    uint64_t d1 = 0, d2 = 0;
    unsigned char *p1 = NULL, *p2 = NULL;
    TRY(cf_stream_create(device, &st1));
    TRY(cf_stream_create(device, &st2));
    TRY(cf_mem_alloc(st1, big, &d1));
    TRY(cf_mem_alloc(st1, big, &d2));
    TRY(cf_memset8(st1, d1, 0x5A, big));
    TRY(cf_memset8(st1, d2, 0x5A, big));
    TRY(cf_stream_synchronize(st1));
    TRY(cf_host_alloc_pinned(big, (void **)&p1));
    TRY(cf_host_alloc_pinned(big, (void **)&p2));
    memset(p1, 0x3C, big);
    memset(p2, 0x3C, big);
    TRY(cf_context_enter(device));
    CUstream s1 = cf_stream_cu(st1), s2 = cf_stream_cu(st2);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_hostpath on device %d (%s, sm_%d%d), %ld CPUs online, copy pool of %d workers "
           "+ the caller; median of %d%s\n",
           device, props.name, props.cc_major, props.cc_minor, cpus, cf_threadpool_workers(), reps,
           quick ? " (quick)" : "");
    if (part_a(p1, quick) || part_b(s1, s2, d1, d2, p1, p2, big) || part_c(s1, d1, p1, quick) ||
        part_d(s1, d1, p1))
        return 1;
    TRY(cf_stream_synchronize(st1));
    cf_host_free_pinned(p1);
    cf_host_free_pinned(p2);
    TRY(cf_mem_free(st1, d1));
    TRY(cf_mem_free(st1, d2));
    TRY(cf_stream_synchronize(st1));
    cf_stream_free(st1);
    cf_stream_free(st2);
    TRY(cf_threadpool_configure(-1));
    return 0;
}
