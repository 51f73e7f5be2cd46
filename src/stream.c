/* stream.c: cf_stream, a small wrapper around a CUstream and the device it belongs to.
 *
 * A wrapper either owns its stream (cf_stream_create: destroyed with the wrapper) or borrows it
 * (cf_stream_default, cf_stream_wrap: the stream belongs to the legacy default stream or to
 * another library such as PyTorch, and cf_stream_free leaves it alone).
 *
 * Each wrapper carries a magic number, cleared when it is freed, so that passing a freed or
 * foreign pointer is usually reported (CF_ERR_INVALID) instead of handing garbage to the driver.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "alloc.h"
#include "context.h"
#include "driver.h"
#include "error.h"

#define STREAM_MAGIC 0x6366737472u /* "cfstr" */

struct cf_stream {
    uint64_t magic;
    CUstream handle;
    int device;
    int owned;
    /* Recorded by cf_stream_wait_stream when another stream waits for this one; created at first
     * need (most streams are never waited on) and swapped in atomically. */
    _Atomic(CUevent) event;
};

static int is_live(const cf_stream *s) { return s && s->magic == STREAM_MAGIC; }

/* CF_ERR_INVALID naming the function and argument when s is NULL or not a live wrapper. */
static cf_status check_stream(const cf_stream *s, const char *fn, const char *arg)
{
    if (!s)
        return cf_error_set(CF_ERR_INVALID, "%s: %s is NULL", fn, arg);
    if (s->magic != STREAM_MAGIC)
        return cf_error_set(CF_ERR_INVALID,
                            "%s: %s is not a live cf_stream (freed already, or not a stream)", fn,
                            arg);
    return CF_OK;
}

static cf_status new_wrapper(int device, CUstream handle, int owned, cf_stream **out)
{
    cf_stream *s = cf_malloc(sizeof *s);
    if (!s)
        return cf_error_prefix("allocating a stream wrapper");
    s->magic = STREAM_MAGIC;
    s->handle = handle;
    s->device = device;
    s->owned = owned;
    atomic_init(&s->event, NULL);
    *out = s;
    return CF_OK;
}

/* Ownership: the caller owns *out and frees it with cf_stream_free, which destroys the stream. */
cf_status cf_stream_create_ex(int device, unsigned flags, cf_stream **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_create: out is NULL");
    *out = NULL;
    if (flags & ~CF_STREAM_NON_BLOCKING)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_create_ex: unknown flags 0x%x", flags);
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    CUstream h = NULL;
    CF_CU_TRY(cf_drv.cuStreamCreate(&h, (flags & CF_STREAM_NON_BLOCKING) ? CU_STREAM_NON_BLOCKING
                                                                         : CU_STREAM_DEFAULT));
    if ((st = new_wrapper(device, h, 1, out)) != CF_OK)
        cf_drv.cuStreamDestroy(h);
    return st;
}

/* Non-blocking: the core's own streams (the host pipeline's slots, the C API's users) overlap
 * with whatever other libraries queue on the legacy default stream. Python's cuda.stream() asks
 * for a blocking one instead (Numba's ordering; py_stream.c). */
cf_status cf_stream_create(int device, cf_stream **out)
{
    return cf_stream_create_ex(device, CF_STREAM_NON_BLOCKING, out);
}

/* Ownership: the caller owns the wrapper *out; the legacy default stream itself is not owned. */
cf_status cf_stream_default(int device, cf_stream **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_default: out is NULL");
    *out = NULL;
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    return new_wrapper(device, NULL, 0, out);
}

/* Ownership: the caller owns the wrapper *out, never the stream `handle`, which must outlive it. */
cf_status cf_stream_wrap(int device, uintptr_t handle, cf_stream **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_wrap: out is NULL");
    *out = NULL;
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    CUstream h = (CUstream)handle;
    /* 0, 1 and 2 are the legacy default, legacy and per-thread default streams: they mean "the
     * stream of the current context", which cf_context_enter has just made device's primary. */
    if (handle > 2) {
        CUcontext mine = NULL, theirs = NULL;
        CF_CU_TRY(cf_drv.cuCtxGetCurrent(&mine));
        CUresult r = cf_drv.cuStreamGetCtx(h, &theirs);
        if (r != CUDA_SUCCESS) {
            cf_cu_check(r, "cuStreamGetCtx");
            return cf_error_prefix("cf_stream_wrap: handle 0x%llx is not a usable CUDA stream",
                                   (unsigned long long)handle);
        }
        if (theirs != mine) {
            CUdevice dev = -1;
            /* Name the stream's device if we can tell it, for a message that says what to fix. */
            if (cf_drv.cuCtxSetCurrent(theirs) == CUDA_SUCCESS) {
                if (cf_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
                    dev = -1;
                cf_drv.cuCtxSetCurrent(mine);
            }
            if (dev >= 0 && dev != device)
                return cf_error_set(CF_ERR_INVALID,
                                    "cf_stream_wrap: stream 0x%llx belongs to device %d, not to "
                                    "device %d",
                                    (unsigned long long)handle, (int)dev, device);
            return cf_error_set(CF_ERR_INVALID,
                                "cf_stream_wrap: stream 0x%llx belongs to a CUDA context other than "
                                "device %d's primary context (cufunc works only in primary "
                                "contexts, as the CUDA runtime, CuPy and PyTorch do)",
                                (unsigned long long)handle, device);
        }
    }
    return new_wrapper(device, h, 0, out);
}

cf_status cf_stream_handle_device(uintptr_t handle, int *device)
{
    if (!device)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_handle_device: device is NULL");
    *device = -1;
    cf_status st = cf_init();
    if (st || handle <= 2)
        return st; /* the default streams belong to whichever context is current */
    CUcontext theirs = NULL, mine = NULL;
    CUresult r = cf_drv.cuStreamGetCtx((CUstream)handle, &theirs);
    if (r != CUDA_SUCCESS) {
        cf_cu_check(r, "cuStreamGetCtx");
        return cf_error_prefix("cf_stream_handle_device: handle 0x%llx is not a usable CUDA stream",
                               (unsigned long long)handle);
    }
    CF_CU_TRY(cf_drv.cuCtxGetCurrent(&mine));
    /* the context's device is read with the context current; the caller's is put back at once
     * (no cf_context_enter: nothing for cf_context_restore to undo) */
    if (theirs != mine)
        CF_CU_TRY(cf_drv.cuCtxSetCurrent(theirs));
    CUdevice d = -1;
    r = cf_drv.cuCtxGetDevice(&d);
    if (theirs != mine)
        cf_drv.cuCtxSetCurrent(mine);
    if (r != CUDA_SUCCESS)
        return cf_cu_check(r, "cuCtxGetDevice");
    *device = (int)d;
    return CF_OK;
}

/* Frees the wrapper; destroys the stream only if cf_stream_create made it. */
static void (*_Atomic destroy_hooks[CF_STREAM_MAX_HOOKS])(cf_stream *);
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;

cf_status cf_stream_add_destroy_hook(void (*hook)(cf_stream *s))
{
    cf_status st = CF_OK;
    pthread_mutex_lock(&hooks_lock);
    int i = 0;
    while (i < CF_STREAM_MAX_HOOKS && atomic_load(&destroy_hooks[i]) &&
           atomic_load(&destroy_hooks[i]) != hook)
        i++;
    if (i == CF_STREAM_MAX_HOOKS)
        st = cf_error_set(CF_ERR_UNSUPPORTED, "cf_stream_add_destroy_hook: more than %d hooks",
                          CF_STREAM_MAX_HOOKS);
    else
        atomic_store(&destroy_hooks[i], hook);
    pthread_mutex_unlock(&hooks_lock);
    return st;
}

void cf_stream_free(cf_stream *s)
{
    if (!is_live(s))
        return;
    if (s->owned)
        for (int i = 0; i < CF_STREAM_MAX_HOOKS; i++) {
            void (*hook)(cf_stream *) = atomic_load(&destroy_hooks[i]);
            if (hook)
                hook(s);
        }
    s->magic = 0;
    CUevent ev = atomic_load(&s->event);
    if (ev || s->owned) {
        /* After fork, or with a broken driver, the driver objects cannot be released; the wrapper
         * still is. cuStreamDestroy returns at once and lets queued work finish. */
        if (cf_context_enter(s->device) == CF_OK) {
            if (ev)
                cf_drv.cuEventDestroy(ev);
            if (s->owned)
                cf_drv.cuStreamDestroy(s->handle);
        }
    }
    cf_free(s);
}

CUstream cf_stream_cu(const cf_stream *s) { return is_live(s) ? s->handle : NULL; }

uintptr_t cf_stream_handle(const cf_stream *s) { return is_live(s) ? (uintptr_t)s->handle : 0; }

int cf_stream_device(const cf_stream *s) { return is_live(s) ? s->device : -1; }

/* The legacy default stream has three names: the NULL handle, CU_STREAM_LEGACY (1), and, in a
 * program not built for per-thread default streams, what the runtime calls stream 0. */
static int is_legacy_handle(CUstream h) { return h == NULL || h == CU_STREAM_LEGACY; }

/* Whether two wrappers name the same stream (per-thread handles: the same one on the same
 * thread, which is all a handle can say). */
static int same_stream(const cf_stream *a, const cf_stream *b)
{
    if (a == b)
        return 1;
    if (a->device != b->device)
        return 0;
    return a->handle == b->handle || (is_legacy_handle(a->handle) && is_legacy_handle(b->handle));
}

cf_status cf_stream_flags(cf_stream *s, unsigned *flags)
{
    cf_status st = check_stream(s, "cf_stream_flags", "s");
    if (st)
        return st;
    if (!flags)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_flags: flags is NULL");
    *flags = 0;
    /* The legacy and per-thread default streams are blocking by definition; asking the driver
     * about the legacy one in a context that is not current would be an error. */
    if (is_legacy_handle(s->handle) || s->handle == CU_STREAM_PER_THREAD)
        return CF_OK;
    if ((st = cf_context_enter(s->device)) != CF_OK)
        return st;
    unsigned int f = 0;
    CF_CU_TRY(cf_drv.cuStreamGetFlags(s->handle, &f));
    *flags = (f & CU_STREAM_NON_BLOCKING) ? CF_STREAM_NON_BLOCKING : CF_STREAM_BLOCKING;
    return CF_OK;
}

cf_status cf_stream_synchronize(cf_stream *s)
{
    cf_status st = check_stream(s, "cf_stream_synchronize", "s");
    if (st || (st = cf_context_enter(s->device)) != CF_OK)
        return st;
    CF_CU_TRY(cf_drv.cuStreamSynchronize(s->handle));
    return CF_OK;
}

cf_status cf_stream_query(cf_stream *s, int *done)
{
    cf_status st = check_stream(s, "cf_stream_query", "s");
    if (st)
        return st;
    if (!done)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_query: done is NULL");
    if ((st = cf_context_enter(s->device)) != CF_OK)
        return st;
    CUresult r = cf_drv.cuStreamQuery(s->handle);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY) {
        *done = r == CUDA_SUCCESS;
        return CF_OK;
    }
    return cf_cu_check(r, "cuStreamQuery");
}

/* The wrapper's event, created at first use. s's context current. */
static cf_status stream_event(cf_stream *s, CUevent *out)
{
    CUevent ev = atomic_load(&s->event);
    if (!ev) {
        CUevent fresh = NULL;
        CF_CU_TRY(cf_drv.cuEventCreate(&fresh, CU_EVENT_DISABLE_TIMING));
        if (atomic_compare_exchange_strong(&s->event, &ev, fresh))
            ev = fresh;
        else
            cf_drv.cuEventDestroy(fresh); /* another thread won; ev now holds its event */
    }
    *out = ev;
    return CF_OK;
}

cf_status cf_stream_wait_stream(cf_stream *waiter, cf_stream *s)
{
    cf_status st = check_stream(waiter, "cf_stream_wait_stream", "waiter");
    if (st || (st = check_stream(s, "cf_stream_wait_stream", "s")) != CF_OK)
        return st;
    /* A stream is always ordered after itself. (Per-thread handles are not compared: the same
     * handle from the same thread is the same stream, which the equality also covers.) */
    if (same_stream(waiter, s))
        return CF_OK;
    if ((st = cf_context_enter(s->device)) != CF_OK)
        return st;
    CUevent ev = NULL;
    if ((st = stream_event(s, &ev)) != CF_OK)
        return st;
    /* Two threads may record this event at once; each waiter then waits for the later record,
     * which covers everything queued before either: stricter, never wrong. */
    CF_CU_TRY(cf_drv.cuEventRecord(ev, s->handle));
    if (waiter->device != s->device && (st = cf_context_enter(waiter->device)) != CF_OK)
        return st;
    CF_CU_TRY(cf_drv.cuStreamWaitEvent(waiter->handle, ev, 0));
    return CF_OK;
}

cf_status cf_stream_synchronize_queued(cf_stream *s)
{
    cf_status st = check_stream(s, "cf_stream_synchronize_queued", "s");
    if (st || (st = cf_context_enter(s->device)) != CF_OK)
        return st;
    /* An event, not cuStreamSynchronize: a record on the legacy default stream is an operation of
     * that stream, so it completes only after the work queued before it on every blocking stream
     * of the context, which is the guarantee the caller wants (memory written by a copy queued
     * on a cuda.stream() is then in place). */
    CUevent ev = NULL;
    if ((st = stream_event(s, &ev)) != CF_OK)
        return st;
    CF_CU_TRY(cf_drv.cuEventRecord(ev, s->handle));
    CF_CU_TRY(cf_drv.cuEventSynchronize(ev));
    return CF_OK;
}

/* ---- CUDA graphs: stream capture ---------------------------------------------------------- */

cf_status cf_stream_capture_status(cf_stream *s, int *status)
{
    cf_status st = check_stream(s, "cf_stream_capture_status", "s");
    if (st)
        return st;
    if (!status)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_capture_status: status is NULL");
    *status = CF_CAPTURE_NONE;
    if ((st = cf_context_enter(s->device)) != CF_OK)
        return st;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    /* a query, even of the legacy stream during a capture: it never breaks the capture */
    CUresult r = cf_drv.cuStreamIsCapturing(s->handle ? s->handle : CU_STREAM_LEGACY, &cs);
    if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
        *status = CF_CAPTURE_IMPLICIT;
        return CF_OK;
    }
    CF_CU_TRY(r);
    *status = cs == CU_STREAM_CAPTURE_STATUS_ACTIVE        ? CF_CAPTURE_ACTIVE
              : cs == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? CF_CAPTURE_INVALIDATED
                                                           : CF_CAPTURE_NONE;
    return CF_OK;
}

#define GRAPH_MAGIC 0x6366677270u /* "cfgrp" */

struct cf_graph {
    uint64_t magic;
    int device;
    CUgraph graph;
    CUgraphExec exec;
};

static cf_status check_graph(const cf_graph *g, const char *fn)
{
    if (!g || g->magic != GRAPH_MAGIC)
        return cf_error_set(CF_ERR_INVALID, "%s: g is not a live cf_graph", fn);
    return cf_context_enter(g->device);
}

cf_status cf_stream_begin_capture(cf_stream *s, int mode)
{
    cf_status st = check_stream(s, "cf_stream_begin_capture", "s");
    if (st)
        return st;
    if (mode < CF_CAPTURE_GLOBAL || mode > CF_CAPTURE_RELAXED)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_begin_capture: unknown mode %d", mode);
    if (is_legacy_handle(s->handle))
        return cf_error_set(CF_ERR_INVALID, "cf_stream_begin_capture: the legacy default stream "
                            "cannot capture; capture on a stream of your own (cf_stream_create)");
    if ((st = cf_context_enter(s->device)) != CF_OK)
        return st;
    CF_CU_TRY(cf_drv.cuStreamBeginCapture(s->handle, (CUstreamCaptureMode)mode));
    return CF_OK;
}

/* Ownership: the caller frees *out with cf_graph_free. */
cf_status cf_stream_end_capture(cf_stream *s, cf_graph **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_stream_end_capture: out is NULL");
    *out = NULL;
    cf_status st = check_stream(s, "cf_stream_end_capture", "s");
    if (st || (st = cf_context_enter(s->device)) != CF_OK)
        return st;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CF_CU_TRY(cf_drv.cuStreamEndCapture(s->handle, &graph));
    /* allocation nodes whose memory outlives a launch (a result the caller keeps) are freed by
     * the next launch rather than refused by it */
    CUresult r = cf_drv.cuGraphInstantiateWithFlags(
        &exec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
    if (r != CUDA_SUCCESS) {
        cf_drv.cuGraphDestroy(graph);
        return cf_cu_check(r, "cuGraphInstantiateWithFlags");
    }
    cf_graph *g = cf_malloc(sizeof *g);
    if (!g) {
        cf_drv.cuGraphExecDestroy(exec);
        cf_drv.cuGraphDestroy(graph);
        return cf_error_prefix("allocating a graph wrapper");
    }
    *g = (cf_graph){GRAPH_MAGIC, s->device, graph, exec};
    *out = g;
    return CF_OK;
}

cf_status cf_graph_launch(cf_graph *g, cf_stream *s)
{
    cf_status st = check_graph(g, "cf_graph_launch");
    if (st || (st = check_stream(s, "cf_graph_launch", "s")) != CF_OK)
        return st;
    if (s->device != g->device)
        return cf_error_set(CF_ERR_INVALID, "cf_graph_launch: the graph is on device %d, the "
                            "stream on device %d", g->device, s->device);
    CF_CU_TRY(cf_drv.cuGraphLaunch(g->exec, s->handle));
    return CF_OK;
}

cf_status cf_graph_upload(cf_graph *g, cf_stream *s)
{
    cf_status st = check_graph(g, "cf_graph_upload");
    if (st || (st = check_stream(s, "cf_graph_upload", "s")) != CF_OK)
        return st;
    CF_CU_TRY(cf_drv.cuGraphUpload(g->exec, s->handle));
    return CF_OK;
}

cf_status cf_graph_node_count(cf_graph *g, size_t *count)
{
    cf_status st = check_graph(g, "cf_graph_node_count");
    if (st)
        return st;
    if (!count)
        return cf_error_set(CF_ERR_INVALID, "cf_graph_node_count: count is NULL");
    size_t n = 0;
    CF_CU_TRY(cf_drv.cuGraphGetNodes(g->graph, NULL, &n));
    *count = n;
    return CF_OK;
}

void cf_graph_free(cf_graph *g)
{
    if (!g || g->magic != GRAPH_MAGIC)
        return;
    g->magic = 0;
    if (cf_context_enter(g->device) == CF_OK) {
        cf_drv.cuGraphExecDestroy(g->exec);
        cf_drv.cuGraphDestroy(g->graph);
    }
    cf_free(g);
}

/* ---- events (Numba's cuda.event) ---------------------------------------------------------- */

#define EVENT_MAGIC 0x6366657674u /* "cfevt" */

struct cf_event {
    uint64_t magic;
    CUevent handle;
    int device;
    int timing;
    int recorded; /* elapsed_time of an event never recorded is an error, not the driver's */
};

static cf_status check_event(const cf_event *e, const char *fn, const char *arg)
{
    if (!e || e->magic != EVENT_MAGIC)
        return cf_error_set(CF_ERR_INVALID, "%s: %s is not a live cf_event", fn, arg);
    return cf_context_enter(e->device);
}

/* Ownership: the caller frees *out with cf_event_free. */
cf_status cf_event_create(int device, int timing, cf_event **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_event_create: out is NULL");
    *out = NULL;
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    CUevent h = NULL;
    CF_CU_TRY(cf_drv.cuEventCreate(&h, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
    cf_event *e = cf_malloc(sizeof *e);
    if (!e) {
        cf_drv.cuEventDestroy(h);
        return cf_error_prefix("allocating an event wrapper");
    }
    *e = (cf_event){EVENT_MAGIC, h, device, timing != 0, 0};
    *out = e;
    return CF_OK;
}

void cf_event_free(cf_event *e)
{
    if (!e || e->magic != EVENT_MAGIC)
        return;
    e->magic = 0;
    if (cf_context_enter(e->device) == CF_OK)
        cf_drv.cuEventDestroy(e->handle); /* returns at once; a pending record still completes */
    cf_free(e);
}

cf_status cf_event_record(cf_event *e, cf_stream *s)
{
    cf_status st = check_event(e, "cf_event_record", "e");
    if (st || (st = check_stream(s, "cf_event_record", "s")) != CF_OK)
        return st;
    if (s->device != e->device)
        return cf_error_set(CF_ERR_INVALID,
                            "cf_event_record: the event is on device %d, the stream on device %d",
                            e->device, s->device);
    CF_CU_TRY(cf_drv.cuEventRecord(e->handle, s->handle));
    e->recorded = 1;
    return CF_OK;
}

cf_status cf_event_synchronize(cf_event *e)
{
    cf_status st = check_event(e, "cf_event_synchronize", "e");
    if (st)
        return st;
    CF_CU_TRY(cf_drv.cuEventSynchronize(e->handle));
    return CF_OK;
}

cf_status cf_event_query(cf_event *e, int *done)
{
    cf_status st = check_event(e, "cf_event_query", "e");
    if (st)
        return st;
    CUresult r = cf_drv.cuEventQuery(e->handle);
    if (r == CUDA_ERROR_NOT_READY) {
        *done = 0;
        return CF_OK;
    }
    CF_CU_TRY(r);
    *done = 1;
    return CF_OK;
}

cf_status cf_event_wait(cf_event *e, cf_stream *s)
{
    cf_status st = check_event(e, "cf_event_wait", "e");
    if (st || (st = check_stream(s, "cf_event_wait", "s")) != CF_OK)
        return st;
    CF_CU_TRY(cf_drv.cuStreamWaitEvent(s->handle, e->handle, 0));
    return CF_OK;
}

cf_status cf_event_elapsed_ms(cf_event *start, cf_event *end, float *ms)
{
    cf_status st = check_event(start, "cf_event_elapsed_ms", "start");
    if (st || (st = check_event(end, "cf_event_elapsed_ms", "end")) != CF_OK)
        return st;
    if (!start->timing || !end->timing)
        return cf_error_set(CF_ERR_INVALID,
                            "elapsed_time: both events must be made with timing=True");
    if (!start->recorded || !end->recorded)
        return cf_error_set(CF_ERR_INVALID,
                            "elapsed_time: both events must be recorded first (event.record())");
    CF_CU_TRY(cf_drv.cuEventElapsedTime(ms, start->handle, end->handle));
    return CF_OK;
}
