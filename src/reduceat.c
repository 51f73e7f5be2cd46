/* reduceat.c: the reduceat engine (include/cufunc/reduce.h: cf_reduceat_launch,
 * cf_reduceat_launch_checked): NumPy's segmented reduction along one axis, planned as a reduction
 * over that axis (the kept axes coalesced by cf_reduce_plan_axes), the kernel's shape chosen from
 * the mean segment length (rat_geometry), and device indices checked on the device without the
 * host waiting for the reduction.
 *
 * The kernels (cf_red_segments, cf_red_segments_check) are templates of
 * templates/cufunc/reduce.cuh, generated and cached by the reduction engine (reduce_hooks.h).
 *
 * Device indices: the check kernel looks for an index outside [0, n) and leaves its verdict in
 * the call's own device word (and in a mapped host word); the reduction is queued right behind
 * it and reads the verdict first: with a bad index no thread writes anything. The host waits for
 * the check alone (an event recorded after it), so the GPU goes from the check straight on to the
 * reduction, and the caller raises NumPy's IndexError with nothing written. */
#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "context.h"
#include "cufunc/compile.h"
#include "cufunc/reduce.cuh"
#include "cufunc/reduce.h"
#include "driver.h"
#include "error.h"
#include "fastdiv.h"
#include "reduce_hooks.h"
#include "util.h"

#define RAT_BLOCK 256
#define RAT_THREADS_PER_SM 2048 /* resident threads assumed per multiprocessor, as reduce.c */

static int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t view_reach(const cf_array *a)
{
    int64_t reach = (int64_t)cf_dtype_size(a->dtype) + 16;
    for (int k = 0; k < a->ndim; k++)
        reach += (a->shape[k] > 0 ? a->shape[k] - 1 : 0) * cf_abs64(a->strides[k]);
    return reach;
}

/* The kernel's shape: a thread per output along a strided axis (cols); else lanes per segment
 * from the mean segment length: about two 16-byte vectors per lane up to a warp, a block per
 * segment from BLOCK x 4 vectors on, split over several blocks when the outputs alone would not
 * fill the card twice (tickets allowing). Pure. */
static void rat_geometry(const cf_reduce_plan *p, int cols, int64_t n_axis, int64_t n_seg,
                         int contiguous, size_t insz, int sms, cf_red_seg_spec *sp,
                         unsigned grid[2])
{
    const int64_t n_q = p->n_out;
    const int64_t resident = (int64_t)sms * (RAT_THREADS_PER_SM / RAT_BLOCK);
    sp->block = RAT_BLOCK;
    sp->vec = contiguous && insz < 16 && !cols ? (int)(16 / insz) : 1;
    sp->unroll = 4;
    grid[1] = 1;
    if (cols) {
        sp->group = 1;
        grid[0] = (unsigned)max64(1, min64(ceil_div(n_q, RAT_BLOCK), resident * 8));
        return;
    }
    const int64_t mean = n_seg > 0 ? max64(1, n_axis / n_seg) : 1;
    if (mean >= (int64_t)RAT_BLOCK * sp->vec * 4) {
        sp->group = RAT_BLOCK;
        int64_t splits = 1;
        if (n_q < 2 * resident && n_q <= CF_RED_NTICKETS) {
            splits = ceil_div(2 * resident, n_q);
            /* every part keeps a vector per thread at least */
            splits = max64(1, min64(splits, mean / ((int64_t)RAT_BLOCK * sp->vec)));
            splits = min64(splits, 65535);
        }
        grid[0] = (unsigned)(splits > 1 ? n_q : min64(n_q, 0x7fffffff));
        grid[1] = (unsigned)splits;
        return;
    }
    int g = 1;
    while (g < 32 && (int64_t)g * 2 * sp->vec < mean)
        g *= 2;
    sp->group = g;
    grid[0] = (unsigned)max64(1, min64(ceil_div(n_q, RAT_BLOCK / g), resident * 16));
}

static cf_status idx_dtype_ok(cf_dtype idx)
{
    if (cf_dtype_kind(idx) != 'i' && cf_dtype_kind(idx) != 'u' && idx != CF_BOOL)
        return cf_error_set(CF_ERR_TYPE, "reduceat: indices must be integers, not %s",
                            cf_dtype_name(idx));
    return CF_OK;
}

/* ---- waiting for a check: a verdict of its own, two events and a mapped host word, reused ---- */

/* A checked call's own verdict word on the device: not the stream's scratch, which a call from
 * another thread on the same stream could queue its own check into between this call's check and
 * its reduction (check A, check B, reduction A: A would read B's verdict). A token goes back to
 * the idle list once the host has the verdict, and is taken again only after the reduction that
 * read its word has run (`done`), whatever stream the next call is on. */
typedef struct rat_token {
    int device;
    CUevent ev;                     /* recorded after the check kernel */
    CUevent done;                   /* recorded after the reduction that reads `verdict` */
    CUdeviceptr verdict;            /* the check's verdict on the device, read by the reduction */
    volatile uint64_t *host;        /* the verdict, written by the check kernel (mapped memory) */
    uint64_t dev;                   /* its device address */
} rat_token;

static pthread_mutex_t token_lock = PTHREAD_MUTEX_INITIALIZER;
static rat_token *idle_tokens;      /* tokens not in use; kept for the life of the process */
static int n_idle, idle_cap;

/* An idle token of `device` whose last reduction has run, or a new one. Context current. */
static cf_status token_take(int device, rat_token *out)
{
    pthread_mutex_lock(&token_lock);
    for (int i = 0; i < n_idle; i++)
        if (idle_tokens[i].device == device &&
            cf_drv.cuEventQuery(idle_tokens[i].done) == CUDA_SUCCESS) {
            *out = idle_tokens[i];
            idle_tokens[i] = idle_tokens[--n_idle];
            pthread_mutex_unlock(&token_lock);
            return CF_OK;
        }
    pthread_mutex_unlock(&token_lock);
    memset(out, 0, sizeof *out);
    out->device = device;
    void *h = NULL;
    cf_status st = cf_context_enter(device);
    if (!st)
        st = cf_cu_check(cf_drv.cuEventCreate(&out->ev, CU_EVENT_DISABLE_TIMING),
                         "creating reduceat's check event");
    if (!st)
        st = cf_cu_check(cf_drv.cuEventCreate(&out->done, CU_EVENT_DISABLE_TIMING),
                         "creating reduceat's reduction event");
    if (!st)
        st = cf_cu_check(cf_drv.cuMemAlloc(&out->verdict, 64),
                         "allocating reduceat's verdict word");
    if (!st)
        st = cf_host_alloc_mapped(64, &h, &out->dev);
    if (st) { /* what was made, undone (out was zeroed: the rest is NULL) */
        if (out->ev)
            cf_drv.cuEventDestroy(out->ev);
        if (out->done)
            cf_drv.cuEventDestroy(out->done);
        if (out->verdict)
            cf_drv.cuMemFree(out->verdict);
        return st;
    }
    out->host = h;
    return CF_OK;
}

static void token_give(const rat_token *t)
{
    pthread_mutex_lock(&token_lock);
    if (n_idle == idle_cap) {
        int cap = idle_cap ? 2 * idle_cap : 4;
        rat_token *grown = cf_realloc(idle_tokens, (size_t)cap * sizeof *grown);
        if (!grown) { /* kept by nobody: leaked, harmless */
            pthread_mutex_unlock(&token_lock);
            return;
        }
        idle_tokens = grown;
        idle_cap = cap;
    }
    idle_tokens[n_idle++] = *t;
    pthread_mutex_unlock(&token_lock);
}

/* ---- launches -------------------------------------------------------------------------------- */

/* The check kernel of device indices against [0, n) on s (its running verdict and ticket in the
 * stream's scratch at seg): its verdict (0, or ~ the first bad position) goes to the device word
 * `verdict` and, when host_word is not 0, to that mapped word. */
static cf_status launch_check(cf_reducer *r, int loop, cf_stream *s, const cf_array *indices,
                              int64_t n, uint64_t seg, uint64_t verdict, uint64_t host_word)
{
    int device = cf_stream_device(s);
    cf_red_seg_spec ss;
    memset(&ss, 0, sizeof ss);
    ss.in = ss.out = cf_reducer_loop_type(r, loop);
    ss.idx = indices->dtype;
    ss.block = RAT_BLOCK;
    ss.check = 1;
    cf_kentry k;
    cf_status st = cf_red_hook_kernel(r, loop, &ss, device, &k);
    if (st)
        return st;
    cf_red_params prm;
    memset(&prm, 0, sizeof prm);
    prm.where = indices->data;
    prm.where_red[0] = indices->strides[0];
    prm.tiles_per_row = indices->shape[0];
    prm.n_red = n;
    prm.partials = seg + CF_RED_SEG_ACC;
    prm.status = verdict;
    prm.tickets = seg + CF_RED_SEG_TICKET;
    prm.aggregate = host_word;
    unsigned grid[3] = {(unsigned)max64(1, min64(ceil_div(indices->shape[0], RAT_BLOCK),
                                                CF_RED_MAX_BLOCKS)), 1, 1};
    unsigned block[3] = {RAT_BLOCK, 1, 1};
    void *args[1] = {&prm};
    return cf_launch(k.fn, grid, block, 0, s, args);
}

/* The reduction; verdict: the device word it reads first (nothing written unless it is 0), or 0
 * for indices checked already. */
static cf_status launch_segments(cf_reducer *r, int loop, cf_stream *s, const cf_array *in,
                                 int axis, const cf_array *indices, const cf_array *out,
                                 uint64_t verdict)
{
    const int64_t n_seg = indices->shape[0], n_axis = in->shape[axis];
    int device = cf_stream_device(s);
    cf_status st;
    /* the kept axes planned as a reduction over `axis` into out with extent 1 there */
    unsigned char reduced[CF_MAX_DIMS] = {0};
    reduced[axis] = 1;
    cf_array ov = *out;
    ov.shape[axis] = 1;
    ov.strides[axis] = 0;
    cf_reduce_plan p;
    if ((st = cf_reduce_plan_axes(&p, in, reduced, &ov, NULL)))
        return st;
    p.n_out *= n_seg; /* outputs: kept positions x segments */
    p.index32 = p.index32 && p.n_out < ((int64_t)1 << 31) && view_reach(out) < ((int64_t)1 << 31)
                && view_reach(indices) < ((int64_t)1 << 31) && view_reach(in) < ((int64_t)1 << 31);
    const int64_t n_kept = p.n_out / n_seg;
    const int64_t sa = in->strides[axis];
    const size_t insz = cf_dtype_size(in->dtype);
    int cols = n_kept > 1 && p.kept_ndim > 0 &&
               cf_abs64(sa) > cf_abs64(p.in_kept[p.kept_ndim - 1]);
    cf_device_props props;
    if ((st = cf_device_props_get(device, &props)))
        return st;
    cf_red_seg_spec ss;
    memset(&ss, 0, sizeof ss);
    ss.in = in->dtype;
    ss.out = out->dtype;
    ss.idx = indices->dtype;
    ss.knd = p.kept_ndim;
    ss.index32 = p.index32;
    ss.cols = cols;
    unsigned grid[3] = {1, 1, 1};
    rat_geometry(&p, cols, n_axis, n_seg, sa == (int64_t)insz, insz, props.multiprocessor_count,
                 &ss, grid);
    cf_kentry k;
    uint64_t tickets = 0, seg = 0;
    if ((st = cf_red_hook_kernel(r, loop, &ss, device, &k)) ||
        (st = cf_red_hook_scratch(s, &tickets, &seg)))
        return st;
    cf_red_params prm;
    p.red_ndim = 0; /* the axis travels in in_red[0] below, not as reduced axes */
    cf_red_hook_params(&prm, &p, in->data, out->data, indices->data);
    prm.n_red = n_axis;
    prm.tiles_per_row = n_seg;
    prm.epoch = n_kept;
    prm.in_red[0] = sa;
    prm.out_red[0] = out->strides[axis];
    prm.where_red[0] = indices->strides[0];
    cf_fastdiv_init(&prm.red_div[1], (uint64_t)n_seg, p.index32);
    cf_fastdiv_init(&prm.red_div[2], (uint64_t)n_kept, p.index32);
    prm.tickets = tickets;
    prm.status = verdict;
    uint64_t split_mem = 0;
    if (grid[1] > 1) {
        size_t accsz = cf_dtype_size(cf_reducer_loop_type(r, loop));
        int64_t parts = (int64_t)grid[1] * p.n_out;
        size_t vbytes = (size_t)(((parts * (int64_t)accsz + 15) / 16) * 16);
        if ((st = cf_mem_alloc(s, vbytes + (size_t)parts, &split_mem)))
            return st;
        prm.partials = split_mem;
        prm.partial_ok = split_mem + vbytes;
    }
    unsigned block[3] = {(unsigned)ss.block, 1, 1};
    void *args[1] = {&prm};
    st = cf_launch(k.fn, grid, block, 0, s, args);
    if (split_mem) {
        cf_status fst = cf_mem_free(s, split_mem); /* stream-ordered: after the kernel */
        if (!st)
            st = fst;
    }
    return st;
}

/* The arguments of both entry points; *total: the outputs' count. */
static cf_status check_args(cf_reducer *r, int loop, cf_stream *s, const cf_array *in, int axis,
                            const cf_array *indices, const cf_array *out, int64_t *total)
{
    cf_status st = cf_red_hook_check_loop(r, loop, s);
    if (st)
        return st;
    if (!in || !indices || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_reduceat_launch: NULL argument");
    if (axis < 0 || axis >= in->ndim || indices->ndim != 1 || out->ndim != in->ndim ||
        in->ndim > CF_MAX_DIMS)
        return cf_error_set(CF_ERR_INVALID, "reduceat: bad axis, indices or out");
    for (int k = 0; k < in->ndim; k++)
        if (out->shape[k] != (k == axis ? indices->shape[0] : in->shape[k]))
            return cf_error_set(CF_ERR_INVALID, "reduceat: out has the wrong shape");
    if ((st = idx_dtype_ok(indices->dtype)))
        return st;
    *total = 1;
    for (int k = 0; k < out->ndim; k++)
        *total *= out->shape[k];
    if (*total == 0)
        return CF_OK;
    if (in->shape[axis] == 0)
        return cf_error_set(CF_ERR_RANGE, "reduceat: indices into an empty axis");
    return cf_red_hook_check_operands(r, cf_stream_device(s), in, indices, out);
}

cf_status cf_reduceat_launch(cf_reducer *r, int loop, cf_stream *s, const cf_array *in, int axis,
                             const cf_array *indices, const cf_array *out)
{
    int64_t total = 0;
    cf_status st = check_args(r, loop, s, in, axis, indices, out, &total);
    if (st || total == 0)
        return st;
    return launch_segments(r, loop, s, in, axis, indices, out, 0);
}

/* The value of indices[pos] (read back: the error path only). */
static cf_status index_value(cf_stream *s, const cf_array *indices, int64_t pos, int64_t *value)
{
    size_t isz = cf_dtype_size(indices->dtype);
    unsigned char b[8] = {0};
    cf_status st = cf_memcpy_dtoh(s, b, indices->data + (uint64_t)(pos * indices->strides[0]),
                                  isz, 1);
    if (st)
        return st;
    if (cf_dtype_kind(indices->dtype) == 'u' || indices->dtype == CF_BOOL) {
        uint64_t u = 0;
        memcpy(&u, b, isz); /* little-endian */
        *value = (int64_t)u;
    } else {
        int64_t v = 0;
        memcpy(&v, b, isz);
        int shift = 64 - 8 * (int)isz;
        *value = shift ? (int64_t)((uint64_t)v << shift) >> shift : v;
    }
    return CF_OK;
}

cf_status cf_reduceat_launch_checked(cf_reducer *r, int loop, cf_stream *s, const cf_array *in,
                                     int axis, const cf_array *indices, const cf_array *out,
                                     int64_t *bad, int64_t *value)
{
    if (!bad || !value)
        return cf_error_set(CF_ERR_INVALID, "cf_reduceat_launch_checked: bad or value is NULL");
    *bad = -1;
    *value = 0;
    int64_t total = 0;
    cf_status st = check_args(r, loop, s, in, axis, indices, out, &total);
    if (st || total == 0)
        return st;
    int capture = CF_CAPTURE_NONE;
    if (cf_stream_handle(s) > 1 && (st = cf_stream_capture_status(s, &capture)))
        return st;
    if (capture == CF_CAPTURE_ACTIVE || capture == CF_CAPTURE_INVALIDATED)
        return cf_error_set(CF_ERR_UNSUPPORTED, "reduceat with device indices cannot be captured "
                            "into a graph: their bounds check waits for the device (give the "
                            "indices as a host array, or check them before the capture)");
    uint64_t tickets = 0, seg = 0;
    rat_token t;
    if ((st = cf_red_hook_scratch(s, &tickets, &seg)) ||
        (st = token_take(cf_stream_device(s), &t)))
        return st;
    *t.host = 0;
    if (!(st = launch_check(r, loop, s, indices, in->shape[axis], seg, t.verdict, t.dev)) &&
        !(st = cf_cu_check(cf_drv.cuEventRecord(t.ev, cf_stream_cu(s)), "recording the check")) &&
        /* queued behind the check before waiting: the GPU goes on to it at once */
        !(st = launch_segments(r, loop, s, in, axis, indices, out, t.verdict)))
        st = cf_cu_check(cf_drv.cuEventRecord(t.done, cf_stream_cu(s)),
                         "recording reduceat's reduction");
    if (!st)
        st = cf_cu_check(cf_drv.cuEventSynchronize(t.ev), "waiting for reduceat's index check");
    uint64_t verdict = st ? 0 : *t.host;
    if (!st)
        token_give(&t); /* after an error the event may still be pending: not reused */
    if (st || verdict == 0)
        return st;
    *bad = (int64_t)~verdict;
    return index_value(s, indices, *bad, value);
}
