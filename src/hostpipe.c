/* hostpipe.c: ufunc launches on host arrays, streamed through overlapped chunks
 * (cf_ufunc_launch_host in include/cufunc/ufunc.h; the planner in hostpipe.h).
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

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "context.h"
#include "cufunc/kernel_args.h"
#include "driver.h"
#include "env.h"
#include "error.h"
#include "util.h"
#include "testing.h"
#include "threadpool.h"

#define MAX_DEVICES 64
#define MAX_STREAMS 16
#define DEFAULT_STREAMS 3
/* Every host call: small ones in one chunk (one pinned DMA each way, one wait) beat the
 * whole-array path's separate pageable copies (bench/HOSTPIPE_NOTES.md). */
#define DEFAULT_MIN_KB 0
#define MIN_CHUNK ((size_t)1 << 10)
#define MAX_CHUNK ((size_t)1 << 30)
/* Pinned buffers grow in steps of this, so calls of slightly different sizes reuse them. */
#define PINNED_STEP ((size_t)1 << 20)

/* ==== the planner (pure) ===================================================================== */


static size_t align_up(size_t n)
{
    return (n + CF_HOSTPIPE_ALIGN - 1) & ~(size_t)(CF_HOSTPIPE_ALIGN - 1);
}

/* Packed bytes of operand i over the axes from `from` on, one index of each axis before it. */
static size_t inner_bytes(const cf_hostpipe_plan *p, int i, int from)
{
    size_t n = p->item[i];
    for (int k = from; k < p->ndim; k++)
        if (cf_hostpipe_stride(p, i, k) != 0)
            n *= (size_t)p->coalesced.shape[k];
    return n;
}

/* Whether operand i has stride 0 on every axis 0..j. */
static int broadcast_upto(const cf_hostpipe_plan *p, int i, int j)
{
    for (int k = 0; k <= j; k++)
        if (cf_hostpipe_stride(p, i, k) != 0)
            return 0;
    return 1;
}

static int is_output(const cf_hostpipe_plan *p, int i)
{
    return i >= p->nin && i < p->nin + p->nout;
}

static cf_status check_overlaps(int nin, int nout, const cf_array *const *arrays, int nops)
{
    for (int o = nin; o < nin + nout; o++)
        for (int i = 0; i < nops; i++) {
            const cf_array *a = arrays[i];
            if (i == o || !a || !cf_array_may_overlap(arrays[o], a))
                continue;
            int other_out = i >= nin && i < nin + nout;
            if (!other_out && cf_array_same_view(arrays[o], a))
                continue; /* in place: chunk c reads and writes only its own elements */
            return cf_error_set(CF_ERR_INVALID,
                                "cf_ufunc_launch_host: output %d overlaps %s %d in another layout; "
                                "copy one of them first",
                                o - nin,
                                other_out ? "output" : i == nin + nout ? "the mask" : "input",
                                other_out ? i - nin : i);
        }
    return CF_OK;
}

cf_status cf_hostpipe_plan_make(cf_hostpipe_plan *p, int nin, int nout,
                                const cf_array *const *arrays, int has_where, int ndim,
                                const int64_t *shape, size_t chunk_bytes, int streams)
{
    int nops = nin + nout + (has_where ? 1 : 0);
    if (!p || !arrays || nin < 1 || nout < 1 || nops > CF_HOSTPIPE_MAX_OPS || ndim < 0 ||
        ndim > CF_MAX_DIMS || (ndim > 0 && !shape) || streams < 1)
        return cf_error_set(CF_ERR_INVALID,
                            "cf_hostpipe_plan_make: bad arguments (nin %d, nout %d, ndim %d)", nin,
                            nout, ndim);
    p->nin = nin;
    p->nout = nout;
    p->nops = nops;
    memset(p->direct, 0, sizeof p->direct);
    for (int i = 0; i < nops; i++) {
        const cf_array *a = arrays[i];
        if (!a) {
            if (i >= nin)
                return cf_error_set(CF_ERR_INVALID, "cf_hostpipe_plan_make: %s is not an array",
                                    i < nin + nout ? "an output" : "the mask");
            continue;
        }
        if (cf_dtype_size(a->dtype) == 0 || a->ndim < 0 || a->ndim > ndim)
            return cf_error_set(CF_ERR_INVALID, "operand %d: bad dtype or ndim %d", i, a->ndim);
        if (i >= nin && i < nin + nout && !cf_array_has_shape(a, ndim, shape))
            return cf_error_set(CF_ERR_INVALID, "output %d does not have the loop's shape",
                                i - nin);
    }
    cf_status st = check_overlaps(nin, nout, arrays, nops);
    if (st)
        return st;

    /* Coalesce: outputs first (their memory order decides the axis order), inputs, mask. Only the
     * used axes of each view are copied (a cf_array holds 64 of each). */
    cf_array *list = cf_malloc(sizeof(cf_array) * (size_t)nops);
    if (!list)
        return cf_error_prefix("cf_ufunc_launch_host");
    int np = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < nops; i++) {
            int out = i >= nin && i < nin + nout, mask = i == nin + nout;
            if ((pass == 0) != out || (pass == 2) != mask)
                continue;
            const cf_array *a = arrays[i];
            p->pidx[i] = -1;
            p->item[i] = 0;
            if (!a)
                continue;
            cf_array *d = &list[np];
            d->data = a->data;
            d->dtype = a->dtype;
            d->ndim = a->ndim;
            d->device = a->device;
            memcpy(d->shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
            memcpy(d->strides, a->strides, sizeof(int64_t) * (size_t)a->ndim);
            p->item[i] = cf_dtype_size(a->dtype);
            p->pidx[i] = np++;
        }
    st = cf_plan_elementwise(&p->coalesced, np, list, ndim, shape);
    cf_free(list);
    if (st)
        return st;
    p->size = p->coalesced.size;
    p->ndim = p->coalesced.ndim;
    if (p->ndim == 0) {
        /* one element or none: one axis of that extent, every stride 0 */
        p->ndim = 1;
        p->coalesced.shape[0] = p->size;
        for (int j = 0; j < np; j++)
            p->coalesced.strides[j][0] = 0;
    }
    const int64_t *ext = p->coalesced.shape;
    for (int o = nin; o < nin + nout; o++)
        for (int k = 0; k < p->ndim; k++)
            if (ext[k] > 1 && cf_hostpipe_stride(p, o, k) == 0)
                return cf_error_set(CF_ERR_INVALID,
                                    "output %d has a zero stride: its elements overlap", o - nin);

    /* Roles, before the split is known: host or device. */
    for (int i = 0; i < nops; i++)
        p->role[i] = !arrays[i] ? CF_HP_SCALAR : arrays[i]->device >= 0 ? CF_HP_DEVICE
                                                                       : CF_HP_STREAMED;

    /* The chunk size aimed at. */
    size_t target = chunk_bytes;
    if (target == 0) {
        size_t largest = 0;
        for (int i = 0; i < nops; i++)
            if (p->role[i] == CF_HP_STREAMED && inner_bytes(p, i, 0) > largest)
                largest = inner_bytes(p, i, 0);
        target = largest / (2 * (size_t)streams);
        if (target > CF_HOSTPIPE_AUTO_CHUNK)
            target = CF_HOSTPIPE_AUTO_CHUNK;
        if (target < CF_HOSTPIPE_MIN_AUTO_CHUNK)
            target = CF_HOSTPIPE_MIN_AUTO_CHUNK;
    }

    /* The split: the outermost axis one index of which (with everything inside it) fits the
     * target for every operand that moves with the chunks there. */
    size_t per_row = 0;
    p->split = p->ndim - 1;
    for (int j = 0; j < p->ndim; j++) {
        size_t m = 0;
        for (int i = 0; i < nops; i++)
            if (p->role[i] == CF_HP_STREAMED && (is_output(p, i) || !broadcast_upto(p, i, j)) &&
                inner_bytes(p, i, j + 1) > m)
                m = inner_bytes(p, i, j + 1);
        if (m <= target || j == p->ndim - 1) {
            p->split = j;
            per_row = m;
            break;
        }
    }
    int64_t extent = ext[p->split];
    int64_t rows = per_row ? (int64_t)(target / per_row) : extent;
    if (rows < 1)
        rows = 1;
    if (rows > extent)
        rows = extent;
    p->rows = rows;
    int64_t outer = 1;
    for (int k = 0; k < p->split; k++)
        outer *= ext[k];
    p->per_outer = rows > 0 ? (extent + rows - 1) / rows : 0;
    p->nchunks = p->size == 0 ? 0 : outer * p->per_outer;

    /* Roles after the split, and the slot size. */
    p->nstreamed = p->nresident = 0;
    p->slot_bytes = p->chunk_target = 0;
    for (int i = 0; i < nops; i++) {
        if (p->role[i] != CF_HP_STREAMED)
            continue;
        if (!is_output(p, i) && broadcast_upto(p, i, p->split)) {
            p->role[i] = CF_HP_RESIDENT;
            p->nresident++;
            continue;
        }
        p->nstreamed++;
        int64_t str[CF_MAX_DIMS], first;
        size_t b = cf_hostpipe_slab(p, i, rows, str, &first);
        p->slot_bytes += align_up(b);
        if (b > p->chunk_target)
            p->chunk_target = b;
    }
    return CF_OK;
}

void cf_hostpipe_chunk(const cf_hostpipe_plan *p, int64_t c, int64_t *rows, int64_t *offsets)
{
    int64_t outer = c / p->per_outer, q = c % p->per_outer;
    int64_t r0 = q * p->rows, left = p->coalesced.shape[p->split] - r0;
    *rows = left < p->rows ? left : p->rows;
    int64_t idx[CF_MAX_DIMS];
    for (int k = p->split - 1; k >= 0; k--) {
        idx[k] = outer % p->coalesced.shape[k];
        outer /= p->coalesced.shape[k];
    }
    for (int i = 0; i < p->nops; i++) {
        int64_t off = r0 * cf_hostpipe_stride(p, i, p->split);
        for (int k = 0; k < p->split; k++)
            off += idx[k] * cf_hostpipe_stride(p, i, k);
        offsets[i] = off;
    }
}

size_t cf_hostpipe_slab(const cf_hostpipe_plan *p, int i, int64_t rows, int64_t *strides,
                        int64_t *first)
{
    int n = p->ndim - p->split;
    int order[CF_MAX_DIMS], m = 0;
    *first = 0;
    for (int a = 0; a < n; a++) {
        strides[a] = 0;
        if (cf_hostpipe_stride(p, i, p->split + a) == 0)
            continue;
        /* insertion by increasing |stride| (innermost first); on ties the later axis is inner */
        int64_t s = cf_abs64(cf_hostpipe_stride(p, i, p->split + a));
        int at = m++;
        while (at > 0 && cf_abs64(cf_hostpipe_stride(p, i, p->split + order[at - 1])) > s) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = a;
    }
    int64_t b = (int64_t)p->item[i];
    for (int t = 0; t < m; t++) {
        int a = order[t];
        int64_t e = a == 0 ? rows : p->coalesced.shape[p->split + a];
        if (cf_hostpipe_stride(p, i, p->split + a) < 0) {
            strides[a] = -b;
            *first += (e - 1) * b;
        } else {
            strides[a] = b;
        }
        b *= e;
    }
    return (size_t)b;
}

void cf_hostpipe_lay_out(const cf_hostpipe_plan *p, int64_t c, int has_where,
                         cf_hostpipe_layout *L)
{
    int64_t str[CF_MAX_DIMS];
    cf_hostpipe_chunk(p, c, &L->rows, L->offsets);
    /* packed inputs and mask first, then packed outputs: one contiguous range each way; then the
     * direct operands (inputs and mask, outputs), each moved by its own DMA */
    size_t end = 0;
    for (int i = 0; i < p->nops; i++)
        if (p->role[i] == CF_HP_STREAMED && !is_output(p, i) && !p->direct[i]) {
            L->block[i] = align_up(end);
            L->bytes[i] = cf_hostpipe_slab(p, i, L->rows, str, &L->first[i]);
            end = L->block[i] + L->bytes[i];
        }
    size_t in_end = end;
    L->out_start = end = align_up(end);
    for (int i = p->nin; i < p->nin + p->nout; i++)
        if (p->role[i] == CF_HP_STREAMED && !p->direct[i]) {
            L->block[i] = align_up(end);
            L->bytes[i] = cf_hostpipe_slab(p, i, L->rows, str, &L->first[i]);
            end = L->block[i] + L->bytes[i];
        }
    L->out_end = end;
    /* with a mask, masked elements keep the outputs' values: their blocks go in too */
    L->h2d = has_where && end > L->out_start ? end : in_end;
    L->direct_start = end = align_up(end);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < p->nops; i++)
            if (p->role[i] == CF_HP_STREAMED && p->direct[i] && is_output(p, i) == pass) {
                L->block[i] = align_up(end);
                L->bytes[i] = cf_hostpipe_slab(p, i, L->rows, str, &L->first[i]);
                end = L->block[i] + L->bytes[i];
            }
    L->end = end;
}

void cf_hostpipe_set_direct(cf_hostpipe_plan *p, int i, int direct)
{
    if (i >= 0 && i < p->nops && p->role[i] == CF_HP_STREAMED)
        p->direct[i] = direct ? 1 : 0;
}

int cf_hostpipe_in_place(const cf_hostpipe_plan *p, const cf_hostpipe_layout *L, int i,
                         const cf_array *host, char **start)
{
    int n = p->ndim - p->split;
    int64_t packed[CF_MAX_DIMS], first;
    cf_hostpipe_slab(p, i, L->rows, packed, &first);
    for (int a = 0; a < n; a++) {
        int64_t e = a == 0 ? L->rows : p->coalesced.shape[p->split + a];
        if (e > 1 && cf_hostpipe_stride(p, i, p->split + a) != packed[a])
            return 0;
    }
    *start = (char *)(uintptr_t)host->data + L->offsets[i] - first;
    return 1;
}

/* ---- the host path's policy (pure) ------------------------------------------------------------ */

int cf_hostpipe_ask_pinned(size_t span) { return span >= CF_HOSTPIPE_PINNED_QUERY_MIN; }

int cf_hostpipe_operand_policy(size_t span, int dense, int pinned, size_t register_min)
{
    if (pinned)
        return CF_HOST_PINNED;
    if (register_min > 0 && dense && span >= register_min)
        return CF_HOST_REGISTER;
    return CF_HOST_STAGE;
}

int cf_hostpipe_copy_threads(int knob, int cpus)
{
    if (knob > 0)
        return knob;
    int n = cpus < CF_HOST_AUTO_THREADS ? cpus : CF_HOST_AUTO_THREADS;
    return n < 1 ? 1 : n;
}

int cf_hostpipe_merge_spans(int n, uintptr_t *lo, uintptr_t *hi, size_t page)
{
    if (n <= 0)
        return 0;
    for (int k = 0; k < n; k++) {
        lo[k] &= ~(uintptr_t)(page - 1);
        hi[k] = (hi[k] + page - 1) & ~(uintptr_t)(page - 1);
    }
    for (int k = 1; k < n; k++) { /* insertion sort by lo: a call has at most 33 operands */
        uintptr_t l = lo[k], h = hi[k];
        int j = k;
        for (; j > 0 && lo[j - 1] > l; j--) {
            lo[j] = lo[j - 1];
            hi[j] = hi[j - 1];
        }
        lo[j] = l;
        hi[j] = h;
    }
    int m = 0;
    for (int k = 1; k < n; k++) {
        if (lo[k] <= hi[m]) {
            if (hi[k] > hi[m])
                hi[m] = hi[k];
        } else {
            m++;
            lo[m] = lo[k];
            hi[m] = hi[k];
        }
    }
    return m + 1;
}

void cf_hostpipe_pack(const cf_hostpipe_plan *p, const cf_hostpipe_layout *L, int i,
                      const cf_array *host, void *slot, int to_host)
{
    int n = p->ndim - p->split;
    int64_t packed[CF_MAX_DIMS], hs[CF_MAX_DIMS], shape[CF_MAX_DIMS], first;
    cf_hostpipe_slab(p, i, L->rows, packed, &first);
    for (int a = 0; a < n; a++) {
        hs[a] = cf_hostpipe_stride(p, i, p->split + a);
        shape[a] = a == 0 ? L->rows : p->coalesced.shape[p->split + a];
    }
    char *h = (char *)(uintptr_t)host->data + L->offsets[i];
    char *b = (char *)slot + L->block[i] + first;
    if (to_host)
        cf_hostpipe_copy(h, hs, b, packed, n, shape, p->item[i]);
    else
        cf_hostpipe_copy(b, packed, h, hs, n, shape, p->item[i]);
}

void cf_hostpipe_views(const cf_hostpipe_plan *p, const cf_hostpipe_layout *L,
                       const cf_array *const *arrays, uint64_t slot, const uint64_t *resident,
                       int device, cf_operand *ops, cf_array *where, int64_t *shape)
{
    int n = p->ndim - p->split;
    for (int a = 0; a < n; a++)
        shape[a] = a == 0 ? L->rows : p->coalesced.shape[p->split + a];
    for (int i = 0; i < p->nops; i++) {
        if (p->role[i] == CF_HP_SCALAR)
            continue;
        cf_array *v = i == p->nin + p->nout ? where : &ops[i].array;
        int64_t first = 0;
        if (i < p->nin + p->nout)
            ops[i].is_scalar = 0;
        v->dtype = arrays[i]->dtype;
        v->ndim = n;
        v->device = device;
        memcpy(v->shape, shape, sizeof(int64_t) * (size_t)n);
        switch (p->role[i]) {
        case CF_HP_DEVICE:
            v->data = arrays[i]->data + (uint64_t)L->offsets[i];
            for (int a = 0; a < n; a++)
                v->strides[a] = cf_hostpipe_stride(p, i, p->split + a);
            break;
        case CF_HP_RESIDENT:
            cf_hostpipe_slab(p, i, L->rows, v->strides, &first);
            v->data = resident[i] + (uint64_t)first;
            break;
        default:
            cf_hostpipe_slab(p, i, L->rows, v->strides, &first);
            v->data = slot + L->block[i] + (uint64_t)first;
        }
    }
}

/* Threads per pack/unpack copy (CUFUNC_HOST_THREADS through the configuration; 0: every worker
 * of the pool, until the first pipelined call sets it). */
static _Atomic int copy_threads;

static inline void copy_items(char *d, int64_t ds, const char *s, int64_t ss, int64_t n,
                              size_t item)
{
    /* constant sizes let the compiler turn each memcpy into one load and one store */
    switch (item) {
#define ITEMS(N)                                                                                   \
    case N:                                                                                        \
        for (int64_t t = 0; t < n; t++, d += ds, s += ss)                                          \
            memcpy(d, s, N);                                                                       \
        return;
        ITEMS(1) ITEMS(2) ITEMS(4) ITEMS(8) ITEMS(16)
#undef ITEMS
    default:
        for (int64_t t = 0; t < n; t++, d += ds, s += ss)
            memcpy(d, s, item);
    }
}

void cf_hostpipe_copy(void *dst, const int64_t *dst_strides, const void *src,
                      const int64_t *src_strides, int ndim, const int64_t *shape, size_t item)
{
    char *d = dst;
    const char *s = src;
    int64_t ext[CF_MAX_DIMS], ss[CF_MAX_DIMS], ds[CF_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] == 0)
            return;
        int64_t a = src_strides[k], b = dst_strides[k];
        if (shape[k] == 1 || (a == 0 && b == 0))
            continue;
        if (a < 0) { /* walk src upwards in memory: start both sides at the axis' far end */
            s += a * (shape[k] - 1);
            d += b * (shape[k] - 1);
            a = -a;
            b = -b;
        }
        /* insertion by decreasing src stride (outermost first), stable */
        int at = n++;
        while (at > 0 && ss[at - 1] < a) {
            ext[at] = ext[at - 1];
            ss[at] = ss[at - 1];
            ds[at] = ds[at - 1];
            at--;
        }
        ext[at] = shape[k];
        ss[at] = a;
        ds[at] = b;
    }
    if (n == 0) {
        memcpy(d, s, item);
        return;
    }
    /* merge an outer axis into the inner one where both sides step through the pair as one */
    int w = n - 1;
    for (int j = n - 2; j >= 0; j--) {
        if (ss[j] == ss[w] * ext[w] && ds[j] == ds[w] * ext[w]) {
            ext[w] *= ext[j];
        } else {
            w--;
            ext[w] = ext[j];
            ss[w] = ss[j];
            ds[w] = ds[j];
        }
    }
    int kept = n - w;
    memmove(ext, ext + w, sizeof(int64_t) * (size_t)kept);
    memmove(ss, ss + w, sizeof(int64_t) * (size_t)kept);
    memmove(ds, ds + w, sizeof(int64_t) * (size_t)kept);
    n = kept;

    const int in = n - 1;
    const int run = ss[in] == (int64_t)item && ds[in] == (int64_t)item;
    int64_t idx[CF_MAX_DIMS] = {0};
    for (;;) {
        if (run)
            cf_threadpool_memcpy_n(d, s, (size_t)ext[in] * item, atomic_load(&copy_threads));
        else
            copy_items(d, ds[in], s, ss[in], ext[in], item);
        int k = in - 1;
        for (; k >= 0; k--) {
            s += ss[k];
            d += ds[k];
            if (++idx[k] < ext[k])
                break;
            s -= ss[k] * ext[k];
            d -= ds[k] * ext[k];
            idx[k] = 0;
        }
        if (k < 0)
            return;
    }
}

/* ==== configuration =========================================================================== */

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
/* config_lock guards these two; it is never held for long, so readers never wait for a pipeline */
static cf_hostpipe_config config;
static cf_hostpipe_info last;
static int64_t last_phases[CF_HOSTPIPE_PHASES]; /* config_lock; cf_hostpipe_test_phases */

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

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
    c->chunk_bytes = (size_t)cf_env_long("CUFUNC_HOSTPIPE_CHUNK_KB", 0, 0, 1L << 20) << 10;
    c->streams = (int)cf_env_long("CUFUNC_HOSTPIPE_STREAMS", DEFAULT_STREAMS, 2, MAX_STREAMS);
    c->min_bytes = (size_t)cf_env_long("CUFUNC_HOSTPIPE_MIN_KB", DEFAULT_MIN_KB, 0, 1L << 30) << 10;
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

/* ==== page-locked blocks for new host results ================================================= */

/* A block is one cuMemHostAlloc of a header page and the data; the header holds the data's
 * capacity, so a block given back needs no table. Freed blocks wait in `cache` (oldest first)
 * for a request they fit. The data starts page-aligned, as the DMAs like it. */
#define RESULT_HEADER ((size_t)4096)
#define RESULT_CACHE_SLOTS 64

static pthread_mutex_t result_lock = PTHREAD_MUTEX_INITIALIZER;
static char *result_cache[RESULT_CACHE_SLOTS]; /* data pointers, oldest first */
static int result_ncached;
static size_t result_cached_bytes, result_outstanding;

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

/* Sizes (in PINNED_STEP units) of the last requests cf_hostpipe_result_wanted turned down or
 * granted, a ring under result_lock. */
#define RESULT_RECENT 16
static size_t result_recent[RESULT_RECENT];
static int result_recent_next;

int cf_hostpipe_result_wanted(size_t nbytes)
{
    cf_hostpipe_config c;
    cf_hostpipe_get_config(&c);
    if (!c.result_pinned_min || nbytes < c.result_pinned_min)
        return 0;
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

/* cf_hostpipe_configure: the cached result blocks freed (blocks handed out stay valid and come
 * back to the cache later) and the sizes seen forgotten, so a new setting starts clean. */
static void result_forget(void)
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

static void result_forget(void);

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
    result_forget();
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
        if (p->role[i] == CF_HP_STREAMED && (!is_output(p, i) || has_where) &&
            (!p->direct[i] || !cf_hostpipe_in_place(p, L, i, pc->arrays[i], &start)))
            cf_hostpipe_pack(p, L, i, pc->arrays[i], buf, 0);
    if (L->h2d)
        STEP(cf_drv.cuMemcpyHtoDAsync(slot, buf, L->h2d, h), "copying a chunk in");
    for (int i = 0; i < p->nops; i++)
        if (p->role[i] == CF_HP_STREAMED && p->direct[i] && (!is_output(p, i) || has_where) &&
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

    int64_t t = now_ns(), t1;
    atomic_store(&copy_threads, cf_hostpipe_copy_threads(cfg->threads, cpus_online()));
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

    t1 = now_ns(), ph[1] += t1 - t, t = t1;
    for (c = 0; c < p->nchunks; c++) {
        int k = (int)(c % nslots);
        CUstream h = cf_stream_cu(d->stream[k]);
        char *buf = pinned[k];
        if (c >= nslots) { /* the slot's previous chunk: wait for it, unpack its outputs */
            STEP(cf_drv.cuEventSynchronize(d->done[k]), "waiting for a chunk");
            t1 = now_ns(), ph[3] += t1 - t, t = t1;
            cf_hostpipe_lay_out(p, c - nslots, has_where, &L);
            unpack_outputs(pc, &L, buf);
            t1 = now_ns(), ph[4] += t1 - t, t = t1;
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
        t1 = now_ns(), ph[2] += t1 - t, t = t1;
    }
    /* drain, in chunk order */
    for (c = issued > nslots ? issued - nslots : 0; c < issued; c++) {
        int k = (int)(c % nslots);
        STEP(cf_drv.cuEventSynchronize(d->done[k]), "waiting for a chunk");
        t1 = now_ns(), ph[3] += t1 - t, t = t1;
        cf_hostpipe_lay_out(p, c, has_where, &L);
        unpack_outputs(pc, &L, pinned[k]);
        t1 = now_ns(), ph[4] += t1 - t, t = t1;
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
    int64_t ph[CF_HOSTPIPE_PHASES] = {0}, t_entry = now_ns(), t_run;
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
        t_run = now_ns();
        ph[0] = t_run - t_entry;
        st = run(pc, u, loop, s, device, where != NULL, nslots, &cfg, ph);
        pthread_mutex_unlock(&pipe_lock);
        ph[6] = now_ns() - t_entry;
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
