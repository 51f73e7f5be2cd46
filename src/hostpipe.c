/* hostpipe.c: ufunc launches on host arrays, streamed through overlapped chunks
 * (cf_ufunc_launch_host in include/cufunc/ufunc.h): the runtime. The planner, pure, is
 * hostpipe_plan.c; the page-locked blocks of new host results, pinblocks.c.
 *
 * Why chunks: a host call moves its inputs in, computes, and moves its outputs out. Done whole,
 * those three phases run one after the other, and the link's two directions (PCIe is full duplex)
 * are each idle two thirds of the time. Cut into chunks on S streams, chunk c's device-to-host
 * copy, chunk c+1's kernel and chunk c+2's host-to-device copy run together, and the total time
 * falls towards that of the larger direction alone plus one chunk to fill and drain.
 *
 * Per call, on the calling thread, with slot k = c mod S for chunk c:
 *   1. wait for the work already queued on the caller's stream (it may write a host input);
 *      upload the resident operands (broadcast along the cut axes) on it; every slot stream waits
 *      for that (event `start`);
 *   2. chunk c: wait for slot k's previous chunk (event done[k]) and unpack its outputs from the
 *      slot's pinned buffer into the host outputs; pack chunk c's input slabs into the pinned
 *      buffer (the copy threads; one memcpy per contiguous run); one host-to-device copy of all of
 *      them into the slot's device buffer; the kernel on the chunk's views; one device-to-host
 *      copy of the output blocks; record done[k];
 *   3. drain: wait for the last S chunks in order and unpack them.
 * The pinned buffers (one per slot, all operands' blocks of a chunk packed in it, the same layout
 * as the slot's device buffer, so each direction is a single DMA per chunk) are kept for the next
 * call and grown on demand; the device buffers come from the stream-ordered pool per call.
 *
 * Streams, events and pinned buffers are shared by all calls in the process under `pipe_lock`
 * (one pipelined call at a time: they would compete for the copy engines, the link and the copy
 * threads anyway). The configuration has its own lock so that cf_hostpipe_wanted never waits for
 * a running pipeline.
 */
#include "hostpipe.h"
#include "pinblocks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "context.h"
#include "cufunc/kernel_args.h"
#include "diagnostics.h"
#include "driver.h"
#include "env.h"
#include "error.h"
#include "util.h"
#include "testing.h"
#include "threadpool.h"

#define MAX_DEVICES 64
#define MAX_STREAMS CF_HOSTPIPE_MAX_STREAMS
#define MIN_CHUNK CF_HOSTPIPE_MIN_CHUNK
#define MAX_CHUNK CF_HOSTPIPE_MAX_CHUNK
#define PINNED_STEP CF_PINBLOCK_STEP

/* ==== configuration =========================================================================== */

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
/* config_lock guards these two; it is never held for long, so readers never wait for a pipeline */
static cf_hostpipe_config config;
static cf_hostpipe_info last;
static int64_t last_phases[CF_HOSTPIPE_PHASES]; /* config_lock; cf_hostpipe_test_phases */

/* Processors online, asked once: glibc's sysconf(_SC_NPROCESSORS_ONLN) opens and reads
 * /sys/devices/system/cpu/online on every call, a few microseconds a small call cannot spare. */
static int cpus_online(void)
{
    static atomic_int cached;
    int n = atomic_load(&cached);
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
        atomic_store(&cached, n);
    }
    return n;
}

void cf_hostpipe_test_phases(int64_t ns[CF_HOSTPIPE_PHASES])
{
    pthread_mutex_lock(&config_lock);
    memcpy(ns, last_phases, sizeof last_phases);
    pthread_mutex_unlock(&config_lock);
}

static void read_env(cf_hostpipe_config *c)
{
    c->chunk_bytes = (size_t)cf_knob(CF_KNOB_HOSTPIPE_CHUNK_KB) << 10;
    c->streams = (int)cf_knob(CF_KNOB_HOSTPIPE_STREAMS);
    c->min_bytes = (size_t)cf_knob(CF_KNOB_HOSTPIPE_MIN_KB) << 10;
    cf_host_knobs k;
    cf_host_knobs_read(&k);
    c->threads = k.threads;
    c->register_min = (size_t)k.register_min;
    c->result_pinned_min = (size_t)k.result_pinned_min;
}

static void init_config(void) { read_env(&config); }

void cf_hostpipe_get_config(cf_hostpipe_config *out)
{
    if (!out)
        return;
    pthread_once(&config_once, init_config);
    pthread_mutex_lock(&config_lock);
    *out = config;
    pthread_mutex_unlock(&config_lock);
}

int cf_hostpipe_wanted(size_t host_bytes)
{
    cf_hostpipe_config c;
    cf_hostpipe_get_config(&c);
    return host_bytes > 0 && host_bytes >= c.min_bytes;
}

/* ==== the policy of new host results (the blocks: pinblocks.c) ============================== */

int cf_hostpipe_result_wanted(size_t nbytes)
{
    cf_hostpipe_config c;
    cf_hostpipe_get_config(&c);
    if (!c.result_pinned_min || nbytes < c.result_pinned_min)
        return 0;
    return cf_pinblocks_seen(nbytes);
}

/* ==== the pipeline ============================================================================ */

typedef struct device_pipe {
    cf_stream *stream[MAX_STREAMS];
    CUevent done[MAX_STREAMS]; /* recorded after each chunk's last copy on the slot's stream */
    CUevent start;             /* recorded on the caller's stream after the resident uploads */
} device_pipe;

static pthread_mutex_t pipe_lock = PTHREAD_MUTEX_INITIALIZER;
/* All below guarded by pipe_lock. */
static device_pipe devices[MAX_DEVICES];
static char *pinned[MAX_STREAMS];
static size_t pinned_bytes[MAX_STREAMS];
static _Atomic int64_t fail_at = -1;

static void release_pinned(void)
{
    for (int k = 0; k < MAX_STREAMS; k++) {
        cf_host_free_pinned(pinned[k]);
        pinned[k] = NULL;
        pinned_bytes[k] = 0;
    }
}

cf_status cf_hostpipe_configure(const cf_hostpipe_config *cfg)
{
    cf_hostpipe_config c;
    if (cfg) {
        c = *cfg;
        if (c.chunk_bytes != 0 && (c.chunk_bytes < MIN_CHUNK || c.chunk_bytes > MAX_CHUNK))
            return cf_error_set(CF_ERR_INVALID,
                                "cf_hostpipe_configure: a chunk of %zu bytes is outside "
                                "1 KiB..1 GiB (0 for automatic)",
                                c.chunk_bytes);
        if (c.streams < 2 || c.streams > MAX_STREAMS)
            return cf_error_set(CF_ERR_INVALID,
                                "cf_hostpipe_configure: %d streams is outside 2..%d", c.streams,
                                MAX_STREAMS);
        if (c.threads < 0 || c.threads > 65)
            return cf_error_set(CF_ERR_INVALID,
                                "cf_hostpipe_configure: %d copy threads is outside 0..65",
                                c.threads);
    } else {
        read_env(&c);
    }
    pthread_once(&config_once, init_config);
    pthread_mutex_lock(&config_lock);
    config = c;
    pthread_mutex_unlock(&config_lock);
    /* No pipelined call is running while pipe_lock is held, so no DMA reads these buffers. */
    pthread_mutex_lock(&pipe_lock);
    release_pinned();
    pthread_mutex_unlock(&pipe_lock);
    cf_pinblocks_forget();
    return CF_OK;
}

void cf_hostpipe_last(cf_hostpipe_info *out)
{
    if (!out)
        return;
    pthread_mutex_lock(&config_lock);
    *out = last;
    pthread_mutex_unlock(&config_lock);
}

void cf_hostpipe_test_fail_at(int64_t chunk) { atomic_store(&fail_at, chunk < 0 ? -1 : chunk); }

static _Atomic int register_fault;
void cf_hostpipe_test_register_fault(int mode) { atomic_store(&register_fault, mode); }

/* The working state of one call (large: a chunk's operands are full cf_operands). */
typedef struct pipe_call {
    cf_hostpipe_plan plan;
    const cf_array *arrays[CF_HOSTPIPE_MAX_OPS];
    cf_operand cops[CF_HOSTPIPE_MAX_OPS]; /* the kernel's operands for the current chunk */
    cf_array cwhere;
    uint64_t resident[CF_HOSTPIPE_MAX_OPS]; /* device copies of resident operands */
    uint64_t slot[MAX_STREAMS];             /* each slot's device buffer */
    void *reg[CF_HOSTPIPE_MAX_OPS];         /* ranges this call registered, to unregister */
    int nreg;
    int ndirect, nregistered, nreg_failed;  /* for cf_hostpipe_info */
} pipe_call;

/* Upload resident operand i whole onto s, into pc->resident[i]. */
static cf_status upload_resident(pipe_call *pc, int i, cf_stream *s)
{
    const cf_hostpipe_plan *p = &pc->plan;
    int n = p->ndim - p->split;
    int64_t packed[CF_MAX_DIMS], host[CF_MAX_DIMS], shape[CF_MAX_DIMS], first;
    size_t bytes = cf_hostpipe_slab(p, i, p->rows, packed, &first);
    cf_status st = cf_mem_alloc(s, bytes, &pc->resident[i]);
    if (st)
        return st;
    int packed_already = 1;
    for (int a = 0; a < n; a++) {
        host[a] = cf_hostpipe_stride(p, i, p->split + a);
        shape[a] = a == 0 ? p->rows : p->coalesced.shape[p->split + a];
        packed_already &= host[a] == packed[a];
    }
    const char *h = (const char *)(uintptr_t)pc->arrays[i]->data;
    if (packed_already) /* the host region is the packed block itself */
        return cf_memcpy_htod(s, pc->resident[i], h - first, bytes, 0);
    char *tmp = cf_malloc(bytes);
    if (!tmp)
        return cf_error_prefix("cf_ufunc_launch_host: packing a broadcast input");
    cf_hostpipe_copy(tmp + first, packed, h, host, n, shape, p->item[i]);
    /* returns once tmp may be reused (pageable source) */
    st = cf_memcpy_htod(s, pc->resident[i], tmp, bytes, 0);
    cf_free(tmp);
    return st;
}

/* Streams and events of `device` for `nslots` slots, created at first need. Context current. */
static cf_status ensure_device(int device, int nslots)
{
    device_pipe *d = &devices[device];
    cf_status st;
    for (int k = 0; k < nslots; k++) {
        if (!d->stream[k] && (st = cf_stream_create(device, &d->stream[k])) != CF_OK)
            return st;
        if (!d->done[k])
            CF_CU_TRY(cf_drv.cuEventCreate(&d->done[k], CU_EVENT_DISABLE_TIMING));
    }
    if (!d->start)
        CF_CU_TRY(cf_drv.cuEventCreate(&d->start, CU_EVENT_DISABLE_TIMING));
    return CF_OK;
}

/* Pinned buffers of at least `bytes` for the first `nslots` slots, kept from earlier calls. */
static cf_status ensure_pinned(int nslots, size_t bytes)
{
    size_t want = (bytes + PINNED_STEP - 1) / PINNED_STEP * PINNED_STEP;
    for (int k = 0; k < nslots && bytes > 0; k++) {
        if (pinned_bytes[k] >= bytes && pinned[k])
            continue;
        cf_host_free_pinned(pinned[k]);
        pinned[k] = NULL;
        pinned_bytes[k] = 0;
        void *ptr = NULL;
        cf_status st = cf_host_alloc_pinned(want, &ptr);
        if (st)
            return cf_error_prefix("cf_ufunc_launch_host: pinned buffers of %zu bytes", want);
        pinned[k] = ptr;
        pinned_bytes[k] = want;
    }
    return CF_OK;
}

#define STEP(call, what)                                                                           \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            st = cf_cu_check(r_, what);                                                            \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* Decide, once per call, which streamed host operands are DMA'd in place: those page-locked
 * already (asked only for operands of CF_HOSTPIPE_PINNED_QUERY_MIN bytes or more), and those
 * registered here (register_min, cf_hostpipe_operand_policy). Operands sharing pages are
 * registered as one range (a page can be registered once). A registration refused because part
 * of the range is registered already keeps the operands whose ends are page-locked (someone
 * else's registration covers them: used as they are, not unregistered by us); any other failure
 * leaves them staged. The device's context is current; pipe_lock held. */
static void choose_direct(pipe_call *pc, size_t register_min)
{
    cf_hostpipe_plan *p = &pc->plan;
    uintptr_t lo[CF_HOSTPIPE_MAX_OPS], hi[CF_HOSTPIPE_MAX_OPS];
    uintptr_t mlo[CF_HOSTPIPE_MAX_OPS], mhi[CF_HOSTPIPE_MAX_OPS];
    int want[CF_HOSTPIPE_MAX_OPS], n = 0;
    CUresult res[CF_HOSTPIPE_MAX_OPS];
    for (int i = 0; i < p->nops; i++) {
        const cf_array *a = pc->arrays[i];
        if (p->role[i] != CF_HP_STREAMED || !a || a->device >= 0)
            continue;
        int64_t l, h;
        cf_array_byte_bounds(a, &l, &h);
        if (h <= l)
            continue;
        const char *base = (const char *)(uintptr_t)a->data;
        size_t span = (size_t)(h - l);
        int pinned = cf_hostpipe_ask_pinned(span) && cf_mem_byte_is_pinned(base + l) &&
                     cf_mem_byte_is_pinned(base + h - 1);
        int dense = (int64_t)span == cf_array_nbytes(a);
        switch (cf_hostpipe_operand_policy(span, dense, pinned, register_min)) {
        case CF_HOST_PINNED:
            cf_hostpipe_set_direct(p, i, 1);
            pc->ndirect++;
            break;
        case CF_HOST_REGISTER:
            lo[n] = mlo[n] = (uintptr_t)(base + l);
            hi[n] = mhi[n] = (uintptr_t)(base + h);
            want[n++] = i;
            break;
        default:
            break;
        }
    }
    if (n == 0)
        return;
    long pg = sysconf(_SC_PAGESIZE);
    int m = cf_hostpipe_merge_spans(n, mlo, mhi, pg > 0 ? (size_t)pg : 4096);
    const int fault = atomic_load(&register_fault);
    for (int k = 0; k < m; k++) {
        void *ptr = (void *)mlo[k];
        res[k] = fault == 1   ? CUDA_ERROR_OUT_OF_MEMORY
                 : fault == 2 ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                              : cf_drv.cuMemHostRegister(ptr, mhi[k] - mlo[k],
                                                         CU_MEMHOSTREGISTER_PORTABLE);
        if (res[k] == CUDA_SUCCESS)
            pc->reg[pc->nreg++] = ptr;
    }
    for (int j = 0; j < n; j++) {
        int k = 0;
        while (k < m - 1 && !(lo[j] >= mlo[k] && hi[j] <= mhi[k]))
            k++;
        int i = want[j];
        if (res[k] == CUDA_SUCCESS) {
            pc->nregistered++;
        } else if (res[k] == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED &&
                   cf_mem_byte_is_pinned((const void *)lo[j]) &&
                   cf_mem_byte_is_pinned((const void *)(hi[j] - 1))) {
            /* page-locked by someone else: use it as it is */
        } else {
            pc->nreg_failed++;
            continue;
        }
        cf_hostpipe_set_direct(p, i, 1);
        pc->ndirect++;
    }
}

/* Undo choose_direct's registrations. Nothing may be reading or writing them any more. */
static void unregister_all(pipe_call *pc)
{
    for (int k = 0; k < pc->nreg; k++)
        cf_drv.cuMemHostUnregister(pc->reg[k]);
    pc->nreg = 0;
}

/* Unpack the outputs of the chunk laid out in L from slot buffer `buf`: the packed ones, and the
 * direct ones whose slab was not in place (their DMA went through `buf` too). */
static void unpack_outputs(const pipe_call *pc, const cf_hostpipe_layout *L, char *buf)
{
    const cf_hostpipe_plan *p = &pc->plan;
    char *start;
    for (int i = p->nin; i < p->nin + p->nout; i++)
        if (p->role[i] == CF_HP_STREAMED &&
            (!p->direct[i] || !cf_hostpipe_in_place(p, L, i, pc->arrays[i], &start)))
            cf_hostpipe_pack(p, L, i, pc->arrays[i], buf, 1);
}

/* Chunk c's host-to-device half into slot k: pack, the packed range's DMA, the direct operands'
 * DMAs (from their own pages when their slab is in place there, else packed into the slot's
 * pinned buffer first). pipe_lock held. */
static cf_status chunk_in(pipe_call *pc, const cf_hostpipe_layout *L, int has_where, char *buf,
                          uint64_t slot, CUstream h)
{
    const cf_hostpipe_plan *p = &pc->plan;
    cf_status st = CF_OK;
    char *start;
    for (int i = 0; i < p->nops; i++)
        if (p->role[i] == CF_HP_STREAMED && (!cf_hostpipe_is_output(p, i) || has_where) &&
            (!p->direct[i] || !cf_hostpipe_in_place(p, L, i, pc->arrays[i], &start)))
            cf_hostpipe_pack(p, L, i, pc->arrays[i], buf, 0);
    if (L->h2d)
        STEP(cf_drv.cuMemcpyHtoDAsync(slot, buf, L->h2d, h), "copying a chunk in");
    for (int i = 0; i < p->nops; i++)
        if (p->role[i] == CF_HP_STREAMED && p->direct[i] && (!cf_hostpipe_is_output(p, i) || has_where) &&
            L->bytes[i]) {
            const char *src = cf_hostpipe_in_place(p, L, i, pc->arrays[i], &start)
                                  ? start
                                  : buf + L->block[i];
            STEP(cf_drv.cuMemcpyHtoDAsync(slot + L->block[i], src, L->bytes[i], h),
                 "copying a chunk of page-locked memory in");
        }
out:
    return st;
}

/* Chunk c's device-to-host half: the packed outputs' DMA into the slot's pinned buffer, the
 * direct outputs' DMAs into their own pages (or the pinned buffer). */
static cf_status chunk_out(pipe_call *pc, const cf_hostpipe_layout *L, char *buf, uint64_t slot,
                           CUstream h)
{
    const cf_hostpipe_plan *p = &pc->plan;
    cf_status st = CF_OK;
    char *start;
    if (L->out_end > L->out_start)
        STEP(cf_drv.cuMemcpyDtoHAsync(buf + L->out_start, slot + L->out_start,
                                      L->out_end - L->out_start, h),
             "copying a chunk out");
    for (int i = p->nin; i < p->nin + p->nout; i++)
        if (p->role[i] == CF_HP_STREAMED && p->direct[i] && L->bytes[i]) {
            char *dst = cf_hostpipe_in_place(p, L, i, pc->arrays[i], &start) ? start
                                                                              : buf + L->block[i];
            STEP(cf_drv.cuMemcpyDtoHAsync(dst, slot + L->block[i], L->bytes[i], h),
                 "copying a chunk out into page-locked memory");
        }
out:
    return st;
}

/* The pipeline proper. pipe_lock held. */
static cf_status run(pipe_call *pc, cf_ufunc *u, int loop, cf_stream *s, int device, int has_where,
                     int nslots, const cf_hostpipe_config *cfg, int64_t *ph)
{
    const cf_hostpipe_plan *p = &pc->plan;
    device_pipe *d = &devices[device];
    cf_hostpipe_layout L;
    int64_t cshape[CF_MAX_DIMS];
    const int cnd = p->ndim - p->split;
    const int64_t fail_chunk = atomic_load(&fail_at);
    int64_t c = 0, issued = 0;
    cf_status st;

    int64_t t = cf_now_ns(), t1;
    cf_hostpipe_set_copy_threads(cf_hostpipe_copy_threads(cfg->threads, cpus_online()));
    /* pinned first: allocating them may make another device's context current */
    if ((st = ensure_pinned(nslots, p->slot_bytes)) != CF_OK ||
        (st = cf_context_enter(device)) != CF_OK || (st = ensure_device(device, nslots)) != CF_OK)
        goto out;
    /* The caller's earlier work may still be writing a host input (an asynchronous copy into
     * pinned memory): the packing below reads host memory directly, so wait for it. */
    STEP(cf_drv.cuStreamSynchronize(cf_stream_cu(s)), "waiting for the stream's earlier work");
    choose_direct(pc, cfg->register_min);
    for (int i = 0; i < p->nops; i++)
        if (p->role[i] == CF_HP_RESIDENT && (st = upload_resident(pc, i, s)) != CF_OK)
            goto out;
    if ((st = cf_context_enter(device)) != CF_OK)
        goto out;
    /* Slot streams wait for the resident uploads queued on s; with none, nothing is queued on s
     * since the synchronisation above and small calls save the event's round trip. */
    if (p->nresident > 0)
        STEP(cf_drv.cuEventRecord(d->start, cf_stream_cu(s)), "recording the pipeline's start");
    for (int k = 0; k < nslots; k++) {
        if (p->nresident > 0)
            STEP(cf_drv.cuStreamWaitEvent(cf_stream_cu(d->stream[k]), d->start, 0),
                 "ordering a pipeline stream after the stream");
        if ((st = cf_mem_alloc(d->stream[k], p->slot_bytes, &pc->slot[k])) != CF_OK)
            goto out;
    }

    t1 = cf_now_ns(), ph[1] += t1 - t, t = t1;
    for (c = 0; c < p->nchunks; c++) {
        int k = (int)(c % nslots);
        CUstream h = cf_stream_cu(d->stream[k]);
        char *buf = pinned[k];
        if (c >= nslots) { /* the slot's previous chunk: wait for it, unpack its outputs */
            STEP(cf_drv.cuEventSynchronize(d->done[k]), "waiting for a chunk");
            t1 = cf_now_ns(), ph[3] += t1 - t, t = t1;
            cf_hostpipe_lay_out(p, c - nslots, has_where, &L);
            unpack_outputs(pc, &L, buf);
            t1 = cf_now_ns(), ph[4] += t1 - t, t = t1;
        }
        cf_hostpipe_lay_out(p, c, has_where, &L);
        if ((st = chunk_in(pc, &L, has_where, buf, pc->slot[k], h)) != CF_OK)
            goto out;
        cf_hostpipe_views(p, &L, pc->arrays, pc->slot[k], pc->resident, device, pc->cops,
                          &pc->cwhere, cshape);
        if (c == fail_chunk) {
            st = cf_error_set(CF_ERR_CUDA, "cf_ufunc_launch_host: injected failure before chunk "
                              "%lld", (long long)c);
            goto out;
        }
        if ((st = cf_ufunc_launch(u, loop, d->stream[k], pc->cops, has_where ? &pc->cwhere : NULL,
                                  cnd, cshape)) != CF_OK)
            goto out;
        if ((st = chunk_out(pc, &L, buf, pc->slot[k], h)) != CF_OK)
            goto out;
        STEP(cf_drv.cuEventRecord(d->done[k], h), "recording a chunk's event");
        issued = c + 1;
        t1 = cf_now_ns(), ph[2] += t1 - t, t = t1;
    }
    /* drain, in chunk order */
    for (c = issued > nslots ? issued - nslots : 0; c < issued; c++) {
        int k = (int)(c % nslots);
        STEP(cf_drv.cuEventSynchronize(d->done[k]), "waiting for a chunk");
        t1 = cf_now_ns(), ph[3] += t1 - t, t = t1;
        cf_hostpipe_lay_out(p, c, has_where, &L);
        unpack_outputs(pc, &L, pinned[k]);
        t1 = cf_now_ns(), ph[4] += t1 - t, t = t1;
    }

out:
    if (st != CF_OK) {
        /* Leave nothing running that reads or writes buffers about to be released: wait for
         * every slot stream (errors ignored: a broken context fails these too) and the caller's
         * stream (a resident upload). The first failure's message is kept. */
        char *msg = cf_strdup(cf_last_error());
        if (cf_context_enter(device) == CF_OK) {
            for (int k = 0; k < nslots; k++)
                if (d->stream[k])
                    cf_drv.cuStreamSynchronize(cf_stream_cu(d->stream[k]));
            cf_drv.cuStreamSynchronize(cf_stream_cu(s));
            unregister_all(pc);
        }
        for (int k = 0; k < nslots; k++)
            if (pc->slot[k])
                cf_mem_free(d->stream[k], pc->slot[k]);
        for (int i = 0; i < p->nops; i++)
            if (pc->resident[i])
                cf_mem_free(s, pc->resident[i]);
        if (msg) {
            cf_error_set(st, "%s", msg);
            cf_free(msg);
        }
        return st;
    }
    /* every chunk is done: the registrations are undone and the buffers go back to the pool (all
     * of them; the first error is reported) */
    unregister_all(pc);
    for (int k = 0; k < nslots; k++)
        if (pc->slot[k]) {
            cf_status f = cf_mem_free(d->stream[k], pc->slot[k]);
            st = st ? st : f;
        }
    for (int i = 0; i < p->nops; i++)
        if (pc->resident[i]) {
            cf_status f = cf_mem_free(s, pc->resident[i]);
            st = st ? st : f;
        }
    return st;
}

cf_status cf_ufunc_launch_host(cf_ufunc *u, int loop, cf_stream *s, const cf_operand *ops,
                               const cf_array *where, int ndim, const int64_t *shape,
                               cf_hostpipe_info *info)
{
    if (!u || !ops || !s)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_launch_host: %s is NULL",
                            !u ? "u" : !ops ? "ops" : "s");
    const int nin = cf_ufunc_nin(u), nout = cf_ufunc_nout(u);
    if (loop < 0 || loop >= cf_ufunc_nloops(u))
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_launch_host: no loop %d (the ufunc has %d)",
                            loop, cf_ufunc_nloops(u));
    const int device = cf_stream_device(s);
    if (device < 0 || device >= MAX_DEVICES)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_launch_host: s is not a live stream");
    int64_t ph[CF_HOSTPIPE_PHASES] = {0}, t_entry = cf_now_ns(), t_run;
    pipe_call *pc = cf_malloc(sizeof *pc);
    if (!pc)
        return cf_error_prefix("cf_ufunc_launch_host");
    cf_hostpipe_plan *p = &pc->plan;
    cf_status st = CF_OK;
    int nops = nin + nout + (where ? 1 : 0);
    for (int i = 0; i < nops; i++) {
        const cf_array *a = i == nin + nout ? where : ops[i].is_scalar ? NULL : &ops[i].array;
        if (a && a->device >= 0 && a->device != device) {
            st = cf_error_set(CF_ERR_INVALID, "cf_ufunc_launch_host: operand %d is on device %d, "
                              "the stream on device %d", i, a->device, device);
            goto out;
        }
        pc->arrays[i] = a;
        pc->resident[i] = 0;
        if (i < nin + nout && ops[i].is_scalar)
            pc->cops[i] = ops[i]; /* scalars stay as given; arrays are set per chunk */
    }
    for (int k = 0; k < MAX_STREAMS; k++)
        pc->slot[k] = 0;
    pc->nreg = pc->ndirect = pc->nregistered = pc->nreg_failed = 0;
    cf_hostpipe_config cfg;
    cf_hostpipe_get_config(&cfg);
    if ((st = cf_hostpipe_plan_make(p, nin, nout, pc->arrays, where != NULL, ndim, shape,
                                    cfg.chunk_bytes, cfg.streams)) != CF_OK)
        goto out;
    if (p->ndim - p->split > CF_EW_MAX_NDIM) {
        st = cf_error_set(CF_ERR_UNSUPPORTED, "cf_ufunc_launch_host: the operands' layouts leave "
                          "%d axes that cannot be merged; element-wise kernels handle at most %d",
                          p->ndim - p->split, CF_EW_MAX_NDIM);
        goto out;
    }
    int nslots = p->nchunks < cfg.streams ? (int)p->nchunks : cfg.streams;
    cf_hostpipe_info done = {0, p->nchunks, nslots, p->split, p->rows, p->nstreamed,
                             p->nresident, p->chunk_target, 0, 0, 0};
    if (p->nchunks > 0) {
        /* before the lock: in a forked child this fails (CF_ERR_FORK) rather than waiting on a
         * lock some parent thread held at the fork */
        if ((st = cf_context_enter(device)) != CF_OK)
            goto out;
        pthread_mutex_lock(&pipe_lock);
        t_run = cf_now_ns();
        ph[0] = t_run - t_entry;
        st = run(pc, u, loop, s, device, where != NULL, nslots, &cfg, ph);
        pthread_mutex_unlock(&pipe_lock);
        ph[6] = cf_now_ns() - t_entry;
        ph[5] = ph[6] - ph[0] - ph[1] - ph[2] - ph[3] - ph[4];
        done.direct = pc->ndirect;
        done.registered = pc->nregistered;
        done.register_failed = pc->nreg_failed;
        if (st == CF_OK) {
            pthread_mutex_lock(&config_lock);
            done.calls = ++last.calls;
            last = done;
            memcpy(last_phases, ph, sizeof ph);
            pthread_mutex_unlock(&config_lock);
        }
    }
    if (st == CF_OK && info)
        *info = done;
out:
    cf_free(pc);
    return st;
}

/* cf_ufunc_call's host twin (include/cufunc/ufunc.h): contiguous 1-D host operands through the
 * host pipeline. It lives here, not in ufunc.c, so that the engine never calls back into the host
 * pipeline built on it (no call cycle between the files). */
cf_status cf_ufunc_call_host(cf_ufunc *u, cf_stream *s, int64_t n, const cf_dtype *types,
                             void *const *args)
{
    if (!u || !types)
        return cf_error_set(CF_ERR_INVALID, "ufunc call: NULL ufunc or types");
    int loop = -1;
    cf_status st = cf_ufunc_resolve(u, types, NULL, &loop);
    if (st)
        return st;
    if (!args)
        return cf_error_set(CF_ERR_INVALID, "cf_ufunc_call_host: NULL args");
    cf_operand ops[32]; /* a ufunc's nin + nout is at most 32 (cf_ufunc_create) */
    for (int i = 0; i < cf_ufunc_nin(u) + cf_ufunc_nout(u); i++) {
        memset(&ops[i], 0, sizeof ops[i]);
        if (cf_array_init_contiguous(&ops[i].array, (uint64_t)(uintptr_t)args[i], types[i], 1, &n,
                                     'C', -1))
            return cf_error_prefix("operand %d", i);
    }
    cf_stream *own = NULL;
    if (!s && (st = cf_stream_default(0, &own)))
        return st;
    st = cf_ufunc_launch_host(u, loop, s ? s : own, ops, NULL, 1, &n, NULL);
    cf_stream_free(own);
    return st;
}
