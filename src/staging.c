/* staging.c: the pinned staging ring for pageable host<->device copies (see staging.h).
 *
 * State shared by all devices, under `staging_lock` (one staged copy at a time: the buffers, the
 * PCIe link and the copy threads are shared anyway):
 *   - one pinned allocation, cut into `nbuffers` buffers of `chunk_bytes`, allocated portable at the
 *     first staged copy so that every device's context can DMA from it;
 *   - for each buffer, the event recorded after the last DMA that used it (and its device), which
 *     the host waits on before writing into the buffer again.
 * Per device (created in its primary context at first use): a private non-blocking stream that
 * carries the DMAs, an event per buffer, and the `ready` / `done` events that order the private
 * stream after the caller's stream and the caller's stream after the copy.
 */
#include "staging.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "context.h"
#include "driver.h"
#include "env.h"
#include "error.h"
#include "threadpool.h"

#define MAX_DEVICES 64
#define MIN_CHUNK ((size_t)64 << 10)
#define MAX_CHUNK ((size_t)1 << 30)

typedef struct device_state {
    CUstream stream;
    CUevent ready, done;
    CUevent buf[CF_STAGING_MAX_BUFFERS];
} device_state;

static pthread_mutex_t staging_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

/* All below guarded by staging_lock. */
static cf_staging_config config;
static char *pinned;          /* nbuffers * chunk_bytes of page-locked memory, or NULL */
static int pinned_device;     /* whose context allocated it */
static size_t pinned_chunk;   /* the configuration `pinned` was cut for */
static int pinned_nbuffers;
static CUevent last_event[CF_STAGING_MAX_BUFFERS];
static int last_device[CF_STAGING_MAX_BUFFERS];
static device_state devices[MAX_DEVICES];

static void read_env(cf_staging_config *c)
{
    c->chunk_bytes = (size_t)cf_knob(CF_KNOB_STAGING_CHUNK_MB) << 20;
    c->nbuffers = (int)cf_knob(CF_KNOB_STAGING_BUFFERS);
    c->min_bytes = (size_t)cf_knob(CF_KNOB_STAGING_MIN_KB) << 10;
}

static void init_config(void) { read_env(&config); }

void cf_staging_get_config(cf_staging_config *out)
{
    pthread_once(&config_once, init_config);
    pthread_mutex_lock(&staging_lock);
    *out = config;
    pthread_mutex_unlock(&staging_lock);
}

int cf_staging_wanted(size_t nbytes)
{
    pthread_once(&config_once, init_config);
    pthread_mutex_lock(&staging_lock);
    int want = nbytes > 0 && nbytes >= config.min_bytes;
    pthread_mutex_unlock(&staging_lock);
    return want;
}

size_t cf_staging_nchunks(size_t nbytes, size_t chunk)
{
    return nbytes / chunk + (nbytes % chunk != 0);
}

void cf_staging_chunk(size_t nbytes, size_t chunk, size_t k, size_t *offset, size_t *len)
{
    size_t off = k * chunk;
    *offset = off;
    *len = nbytes - off < chunk ? nbytes - off : chunk;
}

/* Wait for every DMA through the buffers and free them. staging_lock held. */
static void release_buffers(void)
{
    for (int b = 0; b < CF_STAGING_MAX_BUFFERS; b++) {
        if (last_event[b])
            cf_drv.cuEventSynchronize(last_event[b]);
        last_event[b] = NULL;
    }
    if (pinned && cf_context_enter(pinned_device) == CF_OK)
        cf_drv.cuMemFreeHost(pinned);
    pinned = NULL;
}

cf_status cf_staging_configure(const cf_staging_config *cfg)
{
    cf_staging_config c;
    if (cfg) {
        c = *cfg;
        if (c.chunk_bytes < MIN_CHUNK || c.chunk_bytes > MAX_CHUNK)
            return cf_error_set(CF_ERR_INVALID,
                                "cf_staging_configure: chunk of %zu bytes is outside 64 KiB..1 GiB",
                                c.chunk_bytes);
        if (c.nbuffers < 2 || c.nbuffers > CF_STAGING_MAX_BUFFERS)
            return cf_error_set(CF_ERR_INVALID,
                                "cf_staging_configure: %d buffers is outside 2..%d", c.nbuffers,
                                CF_STAGING_MAX_BUFFERS);
    } else {
        read_env(&c);
    }
    pthread_once(&config_once, init_config);
    pthread_mutex_lock(&staging_lock);
    release_buffers();
    config = c;
    pthread_mutex_unlock(&staging_lock);
    return CF_OK;
}

/* Make sure the pinned buffers exist for the current configuration; 0 if they cannot be had.
 * staging_lock held, device's context current. */
static int ensure_buffers(int device)
{
    if (pinned && pinned_chunk == config.chunk_bytes && pinned_nbuffers == config.nbuffers)
        return 1;
    if (pinned) {
        release_buffers();
        if (cf_context_enter(device) != CF_OK)
            return 0;
    }
    void *p = NULL;
    if (cf_drv.cuMemHostAlloc(&p, config.chunk_bytes * (size_t)config.nbuffers,
                              CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
        return 0;
    pinned = p;
    pinned_device = device;
    pinned_chunk = config.chunk_bytes;
    pinned_nbuffers = config.nbuffers;
    return 1;
}

#define STEP(call, what)                                                                           \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            st = cf_cu_check(r_, what);                                                            \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* Create what this device needs, and wait for buffers last used by another device (the per-device
 * streams do not order against each other). staging_lock held, device's context current. */
static cf_status prepare_device(int device)
{
    cf_status st = CF_OK;
    device_state *d = &devices[device];
    if (!d->stream)
        STEP(cf_drv.cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING), "creating the staging stream");
    if (!d->ready)
        STEP(cf_drv.cuEventCreate(&d->ready, CU_EVENT_DISABLE_TIMING), "creating a staging event");
    if (!d->done)
        STEP(cf_drv.cuEventCreate(&d->done, CU_EVENT_DISABLE_TIMING), "creating a staging event");
    for (int b = 0; b < config.nbuffers; b++) {
        if (!d->buf[b])
            STEP(cf_drv.cuEventCreate(&d->buf[b], CU_EVENT_DISABLE_TIMING),
                 "creating a staging event");
        if (last_event[b] && last_device[b] != device) {
            STEP(cf_drv.cuEventSynchronize(last_event[b]),
                 "waiting for a staging buffer used by another device");
            last_event[b] = NULL;
        }
    }
out:
    return st;
}

cf_status cf_staging_htod(int device, CUstream user, CUdeviceptr dst, const void *src,
                          size_t nbytes, int sync, int *staged)
{
    *staged = 0;
    if (device < 0 || device >= MAX_DEVICES || nbytes == 0)
        return CF_OK;
    pthread_once(&config_once, init_config);
    pthread_mutex_lock(&staging_lock);
    cf_status st = CF_OK;
    device_state *d = &devices[device];
    if (!ensure_buffers(device))
        goto out;
    if ((st = prepare_device(device)) != CF_OK)
        goto out;
    *staged = 1;
    const size_t chunk = config.chunk_bytes;
    const int nb = config.nbuffers;
    const char *s = src;
    STEP(cf_drv.cuEventRecord(d->ready, user), "staged copy: recording an event on the stream");
    STEP(cf_drv.cuStreamWaitEvent(d->stream, d->ready, 0), "staged copy: ordering after the stream");
    size_t nch = cf_staging_nchunks(nbytes, chunk);
    for (size_t k = 0; k < nch; k++) {
        int b = (int)(k % (size_t)nb);
        char *buf = pinned + (size_t)b * chunk;
        size_t off, len;
        cf_staging_chunk(nbytes, chunk, k, &off, &len);
        if (last_event[b])
            STEP(cf_drv.cuEventSynchronize(last_event[b]), "staged copy: waiting for a buffer");
        cf_threadpool_memcpy(buf, s + off, len);
        STEP(cf_drv.cuMemcpyHtoDAsync(dst + off, buf, len, d->stream), "staged copy: cuMemcpyHtoDAsync");
        STEP(cf_drv.cuEventRecord(d->buf[b], d->stream), "staged copy: recording a buffer event");
        last_event[b] = d->buf[b];
        last_device[b] = device;
    }
    STEP(cf_drv.cuEventRecord(d->done, d->stream), "staged copy: recording the done event");
    STEP(cf_drv.cuStreamWaitEvent(user, d->done, 0), "staged copy: ordering the stream after it");
    if (sync)
        STEP(cf_drv.cuEventSynchronize(d->done), "staged copy: waiting for the copy");
out:
    if (st != CF_OK && d->stream)
        cf_drv.cuStreamSynchronize(d->stream); /* leave no DMA behind untracked */
    pthread_mutex_unlock(&staging_lock);
    return st;
}

/* Queue the DMA of chunk k of a device-to-host copy into its buffer. */
static cf_status enqueue_dtoh(int device, CUdeviceptr src, size_t nbytes, size_t k)
{
    cf_status st = CF_OK;
    device_state *d = &devices[device];
    const size_t chunk = config.chunk_bytes;
    int b = (int)(k % (size_t)config.nbuffers);
    size_t off, len;
    cf_staging_chunk(nbytes, chunk, k, &off, &len);
    STEP(cf_drv.cuMemcpyDtoHAsync(pinned + (size_t)b * chunk, src + off, len, d->stream),
         "staged copy: cuMemcpyDtoHAsync");
    STEP(cf_drv.cuEventRecord(d->buf[b], d->stream), "staged copy: recording a buffer event");
    last_event[b] = d->buf[b];
    last_device[b] = device;
out:
    return st;
}

cf_status cf_staging_dtoh(int device, CUstream user, void *dst, CUdeviceptr src, size_t nbytes,
                          int *staged)
{
    *staged = 0;
    if (device < 0 || device >= MAX_DEVICES || nbytes == 0)
        return CF_OK;
    pthread_once(&config_once, init_config);
    pthread_mutex_lock(&staging_lock);
    cf_status st = CF_OK;
    device_state *d = &devices[device];
    if (!ensure_buffers(device))
        goto out;
    if ((st = prepare_device(device)) != CF_OK)
        goto out;
    *staged = 1;
    const size_t chunk = config.chunk_bytes;
    const size_t nb = (size_t)config.nbuffers;
    char *out_bytes = dst;
    STEP(cf_drv.cuEventRecord(d->ready, user), "staged copy: recording an event on the stream");
    STEP(cf_drv.cuStreamWaitEvent(d->stream, d->ready, 0), "staged copy: ordering after the stream");
    size_t nch = cf_staging_nchunks(nbytes, chunk);
    /* Fill the ring with the first chunks; then per chunk k: wait for its DMA, copy it out, and
     * only then queue chunk k + nb into the buffer it has just freed. */
    for (size_t k = 0; k < nch && k < nb; k++)
        if ((st = enqueue_dtoh(device, src, nbytes, k)) != CF_OK)
            goto out;
    for (size_t k = 0; k < nch; k++) {
        int b = (int)(k % nb);
        size_t off, len;
        cf_staging_chunk(nbytes, chunk, k, &off, &len);
        STEP(cf_drv.cuEventSynchronize(d->buf[b]), "staged copy: waiting for a chunk");
        cf_threadpool_memcpy(out_bytes + off, pinned + (size_t)b * chunk, len);
        if (k + nb < nch && (st = enqueue_dtoh(device, src, nbytes, k + nb)) != CF_OK)
            goto out;
    }
out:
    if (st != CF_OK && d->stream)
        cf_drv.cuStreamSynchronize(d->stream);
    pthread_mutex_unlock(&staging_lock);
    return st;
}
