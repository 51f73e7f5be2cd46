/* bench_copy.c: host<->device copy bandwidth through cf_memcpy_*, and the card's device-to-device
 * copy bandwidth (bytes read + bytes written), the ceiling memory-bound kernels are held against.
 *
 *   bench_copy [--size MiB] [--reps N] [--device D] [--sweep]
 *
 * Every figure is the median of N runs (default 9) in GB/s (1e9 bytes per second). Pageable rows
 * are measured through the staging ring (staging.h) and through the driver's own path (staging
 * off) for comparison; pinned rows are plain DMA. htod is timed with sync=1, so the whole copy is
 * counted. --sweep also tries combinations of chunk size, buffer count and copy threads for the
 * pageable copies, to tune the defaults (CUFUNC_STAGING_CHUNK_MB, CUFUNC_STAGING_BUFFERS,
 * CUFUNC_COPY_THREADS).
 *
 * Built from the library's sources (it reaches the internal staging and thread-pool settings).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cufunc/cufunc.h"
#include "staging.h"
#include "threadpool.h"

#include "bench_util.h"

static int die(const char *what)
{
    fprintf(stderr, "bench_copy: %s: %s: %s\n", what, cf_status_name(cf_last_status()),
            cf_last_error());
    return 1;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((call) != CF_OK)                                                                       \
            return die(#call);                                                                     \
    } while (0)

enum { H2D, D2H, D2H_FRESH, D2D, HOST_MEMCPY, HOST_POOL };

typedef struct ctx {
    cf_stream *s;
    uint64_t d, d2;
    unsigned char *pageable, *pinned;
    size_t n;
    int reps;
} ctx;

/* Time `kind` reps times; medians and bests in GB/s of `counted` bytes per run. */
static int measure(ctx *c, int kind, int pinned, double *median, double *best)
{
    double gbps[64];
    int reps = c->reps > 64 ? 64 : c->reps;
    unsigned char *host = pinned ? c->pinned : c->pageable;
    size_t counted = kind == D2D ? 2 * c->n : c->n;
    /* One warm-up run (allocates the staging buffers, starts the threads). */
    for (int r = -1; r < reps; r++) {
        unsigned char *fresh = NULL;
        if (kind == D2H_FRESH && !(fresh = malloc(c->n)))
            return die("malloc");
        TRY(cf_stream_synchronize(c->s));
        double t0 = now();
        switch (kind) {
        case H2D: TRY(cf_memcpy_htod(c->s, c->d, host, c->n, 1)); break;
        case D2H: TRY(cf_memcpy_dtoh(c->s, host, c->d, c->n, 1)); break;
        case D2H_FRESH: TRY(cf_memcpy_dtoh(c->s, fresh, c->d, c->n, 1)); break;
        case D2D:
            TRY(cf_memcpy_dtod(c->s, c->d2, c->d, c->n));
            TRY(cf_stream_synchronize(c->s));
            break;
        case HOST_MEMCPY: memcpy(c->pinned, c->pageable, c->n); break;
        case HOST_POOL: cf_threadpool_memcpy(c->pinned, c->pageable, c->n); break;
        }
        double t = now() - t0;
        free(fresh);
        if (r >= 0)
            gbps[r] = (double)counted / t / 1e9;
    }
    qsort(gbps, (size_t)reps, sizeof gbps[0], cmp_double);
    *median = gbps[reps / 2];
    *best = gbps[reps - 1];
    return 0;
}

static int row(ctx *c, const char *name, int kind, int pinned, size_t size)
{
    double med = 0, best = 0;
    if (measure(c, kind, pinned, &med, &best))
        return 1;
    printf("%-44s %8.0f MiB %10.1f %10.1f\n", name, (double)size / (1 << 20), med, best);
    fflush(stdout);
    return 0;
}

static int sweep(ctx *c, cf_staging_config base)
{
    static const int chunks_mb[] = {2, 4, 8, 16, 32};
    static const int buffers[] = {2, 3, 4, 6, 8};
    static const int threads[] = {0, 2, 4, 6, 8, 12, 15};
    printf("\nsweep: pageable %zu MiB, median GB/s\n", c->n >> 20);
    printf("%8s %8s %8s %10s %10s\n", "chunk", "buffers", "threads", "h2d", "d2h");
    double best_sum = 0;
    int bc = 0, bb = 0, bt = 0;
    for (size_t i = 0; i < sizeof chunks_mb / sizeof chunks_mb[0]; i++)
        for (size_t j = 0; j < sizeof buffers / sizeof buffers[0]; j++)
            for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
                cf_staging_config cfg = {(size_t)chunks_mb[i] << 20, buffers[j], 0};
                TRY(cf_staging_configure(&cfg));
                TRY(cf_threadpool_configure(threads[k]));
                double h2d, d2h, best;
                if (measure(c, H2D, 0, &h2d, &best) || measure(c, D2H, 0, &d2h, &best))
                    return 1;
                printf("%5d MiB %8d %8d %10.1f %10.1f\n", chunks_mb[i], buffers[j], threads[k], h2d,
                       d2h);
                fflush(stdout);
                double worst = h2d < d2h ? h2d : d2h;
                if (worst > best_sum) {
                    best_sum = worst;
                    bc = chunks_mb[i];
                    bb = buffers[j];
                    bt = threads[k];
                }
            }
    printf("best (highest of the slower direction): CUFUNC_STAGING_CHUNK_MB=%d "
           "CUFUNC_STAGING_BUFFERS=%d CUFUNC_COPY_THREADS=%d -> %.1f GB/s\n",
           bc, bb, bt, best_sum);
    TRY(cf_staging_configure(&base));
    TRY(cf_threadpool_configure(-1));
    return 0;
}

int main(int argc, char **argv)
{
    size_t mib = 256;
    int reps = 9, device = 0, do_sweep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc)
            mib = (size_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sweep"))
            do_sweep = 1;
        else {
            fprintf(stderr, "usage: %s [--size MiB] [--reps N] [--device D] [--sweep]\n", argv[0]);
            return 2;
        }
    }
    if (mib == 0 || reps < 1) {
        fprintf(stderr, "bench_copy: --size and --reps must be positive\n");
        return 2;
    }
    if (!cf_is_available()) {
        fprintf(stderr, "bench_copy: no usable GPU: %s\n", cf_last_error());
        return 77;
    }
    cf_device_props props;
    TRY(cf_device_props_get(device, &props));
    TRY(cf_device_set(device));

    ctx c = {0};
    c.n = mib << 20;
    c.reps = reps;
    TRY(cf_stream_create(device, &c.s));
    TRY(cf_mem_alloc(c.s, c.n, &c.d));
    TRY(cf_memset8(c.s, c.d, 0x5A, c.n));
    TRY(cf_host_alloc_pinned(c.n, (void **)&c.pinned));
    c.pageable = malloc(c.n);
    if (!c.pageable)
        return die("malloc");
    memset(c.pageable, 0x3C, c.n); /* fault the pages in: a NumPy array being copied is resident */
    memset(c.pinned, 0x3C, c.n);

    cf_staging_config cfg;
    cf_staging_get_config(&cfg);
    printf("cufunc copy bandwidth on device %d (%s, sm_%d%d); staging %zu MiB x %d buffers, "
           "%d copy threads + caller; median of %d\n",
           device, props.name, props.cc_major, props.cc_minor, cfg.chunk_bytes >> 20, cfg.nbuffers,
           cf_threadpool_workers(), reps);
    printf("%-44s %12s %10s %10s\n", "copy", "size", "GB/s med", "GB/s best");
    if (row(&c, "h2d pageable (cufunc staged)", H2D, 0, c.n) ||
        row(&c, "d2h pageable (cufunc staged)", D2H, 0, c.n) ||
        row(&c, "d2h pageable, fresh destination (staged)", D2H_FRESH, 0, c.n))
        return 1;
    cf_staging_config direct = cfg;
    direct.min_bytes = SIZE_MAX; /* nothing is staged: the driver's own pageable path */
    TRY(cf_staging_configure(&direct));
    if (row(&c, "h2d pageable (driver's own path)", H2D, 0, c.n) ||
        row(&c, "d2h pageable (driver's own path)", D2H, 0, c.n))
        return 1;
    TRY(cf_staging_configure(&cfg));
    if (row(&c, "h2d pinned", H2D, 1, c.n) || row(&c, "d2h pinned", D2H, 1, c.n) ||
        row(&c, "host memcpy pageable->pinned, 1 thread", HOST_MEMCPY, 0, c.n) ||
        row(&c, "host memcpy pageable->pinned, thread pool", HOST_POOL, 0, c.n))
        return 1;

    /* Device-to-device: 1 GiB (or the asked size if larger), counted as read + write. */
    size_t saved_n = c.n;
    c.n = c.n > ((size_t)1 << 30) ? c.n : ((size_t)1 << 30);
    uint64_t a = 0, b = 0;
    TRY(cf_mem_alloc(c.s, c.n, &a));
    TRY(cf_mem_alloc(c.s, c.n, &b));
    TRY(cf_memset8(c.s, a, 0x11, c.n));
    uint64_t keep = c.d;
    c.d = a;
    c.d2 = b;
    if (row(&c, "d2d copy (bytes read + written)", D2D, 0, c.n))
        return 1;
    c.d = keep;
    c.n = saved_n;
    TRY(cf_mem_free(c.s, a));
    TRY(cf_mem_free(c.s, b));

    if (do_sweep && sweep(&c, cfg))
        return 1;

    TRY(cf_mem_free(c.s, c.d));
    TRY(cf_stream_synchronize(c.s));
    cf_host_free_pinned(c.pinned);
    free(c.pageable);
    cf_stream_free(c.s);
    return 0;
}
