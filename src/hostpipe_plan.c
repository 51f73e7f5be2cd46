/* hostpipe_plan.c: the host pipeline's planner (pure: no CUDA, no state): how a host call is cut
 * into chunks, each operand's slab and its place in a slot's buffer, the host path's policy
 * (which operands are DMA'd in place, how many copy threads, merged page spans), and the strided
 * host copies that pack and unpack the slabs (on the copy pool, with the thread count the
 * configuration sets: the one state here). Declared in hostpipe.h; the runtime that uses it is
 * hostpipe.c. */
#include "hostpipe.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "env.h"
#include "error.h"
#include "threadpool.h"
#include "util.h"

#define MIN_CHUNK CF_HOSTPIPE_MIN_CHUNK
#define MAX_CHUNK CF_HOSTPIPE_MAX_CHUNK

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
            if (p->role[i] == CF_HP_STREAMED && (cf_hostpipe_is_output(p, i) || !broadcast_upto(p, i, j)) &&
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
        if (!cf_hostpipe_is_output(p, i) && broadcast_upto(p, i, p->split)) {
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
        if (p->role[i] == CF_HP_STREAMED && !cf_hostpipe_is_output(p, i) && !p->direct[i]) {
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
            if (p->role[i] == CF_HP_STREAMED && p->direct[i] && cf_hostpipe_is_output(p, i) == pass) {
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

void cf_hostpipe_set_copy_threads(int n) { atomic_store(&copy_threads, n); }

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

