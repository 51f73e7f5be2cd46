/* reduce.c: the reduction and scan engine (include/cufunc/reduce.h): loops, planning of reduced
 * and kept axes, launch geometry, kernel generation, the per-stream scratch, launches.
 *
 * Kernels are generated as CUDA C text per specialisation key (kernel shape, element, accumulator
 * and output dtypes, vector width, coalesced axes, mask, index width): the user's device function,
 * an operator struct around it, and an entry that instantiates one template of
 * templates/cufunc/reduce.cuh. The parameter block is one by-value struct laid out by that header.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "cufunc/plan.h"
#include "cufunc/reduce.cuh"
#include "cufunc/reduce.h"
#include "context.h"
#include "driver.h"
#include "diagnostics.h"
#include "env.h"
#include "error.h"
#include "util.h"
#include "fastdiv.h"
#include "ktable.h"
#include "reduce_hooks.h"
#include "loopfn.h"
#include "strbuf.h"

#define RED_MAX_LOOPS CF_NDTYPES

typedef struct red_loop {
    cf_dtype acc;
    cf_loop_fn fn;         /* source, function name, NVRTC options */
} red_loop;

struct cf_reducer {
    char *name;
    red_loop loops[RED_MAX_LOOPS];
    int nloops;
    pthread_mutex_t lock;
    cf_ktable table;        /* compiled kernels by specialisation key */
};

/* ---- reducer objects ---------------------------------------------------------------------- */


cf_status cf_reducer_create(const char *name, cf_reducer **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_reducer_create: out is NULL");
    *out = NULL;
    cf_reducer *r = cf_calloc(1, sizeof *r);
    if (!r)
        return CF_ERR_NOMEM;
    r->name = cf_strdup(name ? name : "reduce");
    if (!r->name)
        goto fail;
    pthread_mutex_init(&r->lock, NULL);
    cf_ktable_init(&r->table);
    *out = r;
    return CF_OK;
fail:
    cf_free(r);
    return CF_ERR_NOMEM;
}

static void loop_clear(red_loop *l)
{
    cf_loop_fn_clear(&l->fn);
    memset(l, 0, sizeof *l);
}

void cf_reducer_free(cf_reducer *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nloops; i++)
        loop_clear(&r->loops[i]);
    cf_ktable_clear(&r->table);
    pthread_mutex_destroy(&r->lock);
    cf_free(r->name);
    cf_free(r);
}

const char *cf_reducer_name(const cf_reducer *r) { return r ? r->name : ""; }
int cf_reducer_nloops(const cf_reducer *r) { return r ? r->nloops : 0; }

int cf_reducer_kernel_count(const cf_reducer *r)
{
    if (!r)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&r->lock);
    int n = (int)cf_ktable_count(&r->table);
    pthread_mutex_unlock((pthread_mutex_t *)&r->lock);
    return n;
}

int cf_reducer_find_loop(const cf_reducer *r, cf_dtype acc)
{
    if (!r)
        return -1;
    for (int i = 0; i < r->nloops; i++)
        if (r->loops[i].acc == acc)
            return i;
    return -1;
}

cf_dtype cf_reducer_loop_type(const cf_reducer *r, int loop)
{
    return r && loop >= 0 && loop < r->nloops ? r->loops[loop].acc : CF_NDTYPES;
}

cf_status cf_reducer_add_loop(cf_reducer *r, cf_dtype acc, const char *source, const char *fn_name,
                              const char *const *options, int noptions, int *index)
{
    return cf_reducer_add_loop_globals(r, acc, source, fn_name, options, noptions, NULL, 0,
                                       index);
}

cf_status cf_reducer_add_loop_globals(cf_reducer *r, cf_dtype acc, const char *source,
                                      const char *fn_name, const char *const *options,
                                      int noptions, const cf_module_global *globals,
                                      int nglobals, int *index)
{
    if (!r || !source || !fn_name || noptions < 0 || (noptions && !options))
        return cf_error_set(CF_ERR_INVALID, "cf_reducer_add_loop: NULL argument");
    if (!cf_dtype_valid(acc))
        return cf_error_set(CF_ERR_TYPE, "cf_reducer_add_loop: invalid accumulator dtype");
    pthread_mutex_lock(&r->lock);
    int dup = cf_reducer_find_loop(r, acc) >= 0;
    pthread_mutex_unlock(&r->lock);
    if (dup)
        return cf_error_set(CF_ERR_INVALID, "reducer '%s' already has a loop for %s", r->name,
                            cf_dtype_name(acc));
    red_loop l;
    memset(&l, 0, sizeof l);
    l.acc = acc;
    cf_status st = cf_loop_fn_init(&l.fn, source, fn_name, options, noptions, globals, nglobals);
    if (st)
        return st;
    pthread_mutex_lock(&r->lock);
    if (cf_reducer_find_loop(r, acc) >= 0 || r->nloops == RED_MAX_LOOPS) {
        pthread_mutex_unlock(&r->lock);
        loop_clear(&l);
        return cf_error_set(CF_ERR_INVALID, "reducer '%s' already has a loop for %s", r->name,
                            cf_dtype_name(acc));
    }
    r->loops[r->nloops] = l;
    int idx = r->nloops++;
    pthread_mutex_unlock(&r->lock);
    if (index)
        *index = idx;
    return CF_OK;
}

/* ---- planning ------------------------------------------------------------------------------ */



static int check_view(const cf_array *a, const char *what)
{
    if (a->ndim < 0 || a->ndim > CF_MAX_DIMS)
        return cf_error_set(CF_ERR_INVALID, "%s has %d dimensions (at most %d)", what, a->ndim,
                            CF_MAX_DIMS);
    if (!cf_dtype_valid(a->dtype))
        return cf_error_set(CF_ERR_TYPE, "%s has an invalid dtype", what);
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] < 0)
            return cf_error_set(CF_ERR_INVALID, "%s has a negative extent", what);
    return CF_OK;
}

/* `where` stretched onto in's shape: right-aligned, stride 0 on broadcast axes. */
static cf_status broadcast_where(const cf_array *in, const cf_array *where, cf_array *full)
{
    if (where->dtype != CF_BOOL)
        return cf_error_set(CF_ERR_TYPE, "where= must be a bool array, not %s",
                            cf_dtype_name(where->dtype));
    const int64_t *shapes[2] = {in->shape, where->shape};
    int ndims[2] = {in->ndim, where->ndim}, nd;
    int64_t bshape[CF_MAX_DIMS];
    cf_status st = cf_broadcast_shapes(2, ndims, shapes, &nd, bshape);
    if (st)
        return st;
    int same = nd == in->ndim;
    for (int k = 0; same && k < nd; k++)
        same = bshape[k] == in->shape[k];
    if (!same) {
        char a[256], b[256];
        cf_format_shape(a, sizeof a, where->ndim, where->shape);
        cf_format_shape(b, sizeof b, in->ndim, in->shape);
        return cf_error_set(CF_ERR_INVALID, "where= of shape %s does not broadcast to the array's "
                            "shape %s", a, b);
    }
    *full = *in;
    full->dtype = CF_BOOL;
    full->data = where->data;
    full->device = where->device;
    int off = in->ndim - where->ndim;
    for (int k = 0; k < in->ndim; k++) {
        int64_t e = k >= off ? where->shape[k - off] : 1;
        full->strides[k] = (k >= off && e == in->shape[k]) ? where->strides[k - off] : 0;
    }
    return CF_OK;
}

/* A view of `a` restricted to the listed axes. */
static void sub_view(const cf_array *a, const int *axes, int n, cf_array *out)
{
    out->data = a->data;
    out->dtype = a->dtype;
    out->device = a->device;
    out->ndim = n;
    for (int j = 0; j < n; j++) {
        out->shape[j] = a->shape[axes[j]];
        out->strides[j] = a->strides[axes[j]];
    }
}

/* Whether every index and offset of the launch fits in 31 bits. */
static int fits32(const cf_reduce_plan *p, int nops)
{
    if (p->n_out > 0 && p->n_red > 0 && p->n_out > (((int64_t)1 << 31) - 1) / p->n_red)
        return 0;
    const int64_t *kept[3] = {p->in_kept, p->out_kept, p->where_kept};
    const int64_t *red[3] = {p->in_red, p->out_red, p->where_red};
    for (int i = 0; i < nops; i++) {
        int64_t reach = 16;
        for (int k = 0; k < p->kept_ndim; k++)
            reach += (p->kept_shape[k] - 1) * cf_abs64(kept[i][k]);
        for (int k = 0; k < p->red_ndim; k++)
            reach += (p->red_shape[k] > 0 ? p->red_shape[k] - 1 : 0) * cf_abs64(red[i][k]);
        if (reach >= ((int64_t)1 << 31))
            return 0;
    }
    return 1;
}

cf_status cf_reduce_plan_axes(cf_reduce_plan *p, const cf_array *in, const unsigned char *reduced,
                              const cf_array *out, const cf_array *where)
{
    if (!p || !in || !reduced || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_reduce_plan_axes: NULL argument");
    cf_status st;
    if ((st = check_view(in, "the array")) || (st = check_view(out, "out")))
        return st;
    if (where && (st = check_view(where, "where")))
        return st;
    if (out->ndim != in->ndim)
        return cf_error_set(CF_ERR_INVALID, "out has %d dimensions, the array %d (out must have "
                            "the keepdims shape)", out->ndim, in->ndim);
    for (int k = 0; k < in->ndim; k++)
        if (out->shape[k] != (reduced[k] ? 1 : in->shape[k])) {
            char a[256], b[256];
            int64_t want[CF_MAX_DIMS];
            for (int j = 0; j < in->ndim; j++)
                want[j] = reduced[j] ? 1 : in->shape[j];
            cf_format_shape(a, sizeof a, out->ndim, out->shape);
            cf_format_shape(b, sizeof b, in->ndim, want);
            return cf_error_set(CF_ERR_INVALID, "out has shape %s, the reduction gives %s", a, b);
        }
    cf_array wfull;
    memset(&wfull, 0, sizeof wfull);
    if (where && (st = broadcast_where(in, where, &wfull)))
        return st;

    memset(p, 0, sizeof *p);
    p->has_where = where != NULL;
    int kept_axes[CF_MAX_DIMS], red_axes[CF_MAX_DIMS], nk = 0, nr = 0;
    for (int k = 0; k < in->ndim; k++) {
        if (reduced[k])
            red_axes[nr++] = k;
        else
            kept_axes[nk++] = k;
    }
    cf_plan *pl = cf_malloc(sizeof *pl);
    if (!pl)
        return CF_ERR_NOMEM;
    cf_array ops[3];
    /* kept axes: the input first, so that its memory order decides the order of outputs */
    int nops = 0;
    sub_view(in, kept_axes, nk, &ops[nops++]);
    sub_view(out, kept_axes, nk, &ops[nops++]);
    if (where)
        sub_view(&wfull, kept_axes, nk, &ops[nops++]);
    int64_t kshape[CF_MAX_DIMS];
    for (int j = 0; j < nk; j++)
        kshape[j] = in->shape[kept_axes[j]];
    st = cf_plan_elementwise(pl, nops, ops, nk, kshape);
    if (st)
        goto done;
    p->n_out = pl->size;
    p->kept_ndim = pl->ndim;
    for (int k = 0; k < pl->ndim; k++) {
        p->kept_shape[k] = pl->shape[k];
        p->in_kept[k] = pl->strides[0][k];
        p->out_kept[k] = pl->strides[1][k];
        p->where_kept[k] = where ? pl->strides[2][k] : 0;
    }
    p->kept_contiguous = pl->ndim >= 1 &&
                         pl->strides[0][pl->ndim - 1] == (int64_t)cf_dtype_size(in->dtype);

    /* reduced axes */
    nops = 0;
    sub_view(in, red_axes, nr, &ops[nops++]);
    if (where)
        sub_view(&wfull, red_axes, nr, &ops[nops++]);
    int64_t rshape[CF_MAX_DIMS];
    for (int j = 0; j < nr; j++)
        rshape[j] = in->shape[red_axes[j]];
    st = cf_plan_elementwise(pl, nops, ops, nr, rshape);
    if (st)
        goto done;
    p->n_red = pl->size;
    p->red_ndim = pl->ndim;
    for (int k = 0; k < pl->ndim; k++) {
        p->red_shape[k] = pl->shape[k];
        p->in_red[k] = pl->strides[0][k];
        p->where_red[k] = where ? pl->strides[1][k] : 0;
    }
    p->red_contiguous = pl->ndim == 0 || (pl->ndim == 1 && pl->contiguous[0] &&
                                          (!where || pl->contiguous[1]));
    if (p->kept_ndim > CF_RED_MAX_NDIM || p->red_ndim > CF_RED_MAX_NDIM) {
        st = cf_error_set(CF_ERR_UNSUPPORTED, "the array's layout leaves %d kept and %d reduced "
                          "axes that cannot be merged; reductions handle at most %d of each (make "
                          "the array contiguous first)", p->kept_ndim, p->red_ndim, CF_RED_MAX_NDIM);
        goto done;
    }
    p->index32 = fits32(p, where ? 3 : 2);
    if (p->n_out == 1) {
        p->kind = CF_REDUCE_ALL;
    } else if (p->red_ndim == 0) {
        p->kind = CF_REDUCE_COLS; /* one element per output: a thread per output reads coalesced */
    } else {
        /* the layout whose innermost axis is the least strided in the input reads coalesced */
        int64_t s_red = cf_abs64(p->in_red[p->red_ndim - 1]);
        int64_t s_kept = p->kept_ndim ? cf_abs64(p->in_kept[p->kept_ndim - 1]) : INT64_MAX;
        p->kind = s_red <= s_kept ? CF_REDUCE_ROWS : CF_REDUCE_COLS;
    }
done:
    cf_free(pl);
    return st;
}

cf_status cf_reduce_plan_scan(cf_reduce_plan *p, const cf_array *in, int axis, const cf_array *out)
{
    if (!p || !in || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_reduce_plan_scan: NULL argument");
    cf_status st;
    if ((st = check_view(in, "the array")) || (st = check_view(out, "out")))
        return st;
    if (in->ndim < 1)
        return cf_error_set(CF_ERR_TYPE, "cannot accumulate on a scalar");
    if (axis < 0 || axis >= in->ndim)
        return cf_error_set(CF_ERR_INVALID, "axis %d is out of bounds for array of dimension %d",
                            axis, in->ndim);
    int same = out->ndim == in->ndim;
    for (int k = 0; same && k < in->ndim; k++)
        same = out->shape[k] == in->shape[k];
    if (!same) {
        char a[256], b[256];
        cf_format_shape(a, sizeof a, out->ndim, out->shape);
        cf_format_shape(b, sizeof b, in->ndim, in->shape);
        return cf_error_set(CF_ERR_INVALID, "out has shape %s, accumulate gives %s", a, b);
    }
    memset(p, 0, sizeof *p);
    int kept_axes[CF_MAX_DIMS], nk = 0;
    for (int k = 0; k < in->ndim; k++)
        if (k != axis)
            kept_axes[nk++] = k;
    cf_plan *pl = cf_malloc(sizeof *pl);
    if (!pl)
        return CF_ERR_NOMEM;
    cf_array ops[2];
    sub_view(in, kept_axes, nk, &ops[0]);
    sub_view(out, kept_axes, nk, &ops[1]);
    int64_t kshape[CF_MAX_DIMS];
    for (int j = 0; j < nk; j++)
        kshape[j] = in->shape[kept_axes[j]];
    st = cf_plan_elementwise(pl, 2, ops, nk, kshape);
    if (!st) {
        p->n_out = pl->size;
        p->kept_ndim = pl->ndim;
        for (int k = 0; k < pl->ndim; k++) {
            p->kept_shape[k] = pl->shape[k];
            p->in_kept[k] = pl->strides[0][k];
            p->out_kept[k] = pl->strides[1][k];
        }
        p->kept_contiguous = pl->ndim >= 1 &&
                             pl->strides[0][pl->ndim - 1] == (int64_t)cf_dtype_size(in->dtype);
    }
    cf_free(pl);
    if (st)
        return st;
    if (p->kept_ndim > CF_RED_MAX_NDIM)
        return cf_error_set(CF_ERR_UNSUPPORTED, "the array's layout leaves %d axes besides the "
                            "scanned one that cannot be merged; accumulate handles at most %d "
                            "(make the array contiguous first)", p->kept_ndim, CF_RED_MAX_NDIM);
    p->n_red = in->shape[axis];
    p->red_ndim = 1;
    p->red_shape[0] = in->shape[axis];
    p->in_red[0] = in->strides[axis];
    p->out_red[0] = out->strides[axis];
    p->red_contiguous = p->in_red[0] == (int64_t)cf_dtype_size(in->dtype) || p->n_red <= 1;
    p->index32 = fits32(p, 2);
    if (p->n_out <= 1 || (p->red_contiguous && p->n_red >= 1024))
        p->kind = CF_SCAN_TILES;
    else if (p->n_out >= 4096)
        p->kind = CF_SCAN_COLS; /* enough columns to fill the card, a thread each */
    else
        p->kind = CF_SCAN_TILES; /* few columns: parallel along the axis instead */
    return CF_OK;
}

/* ---- tuning knobs ---------------------------------------------------------------------------- */

/* Environment variables read once per process, for measurements (bench/bench_scan_variants.py runs
 * one process per setting); unset or out of range: the defaults below (rows of env.h's CF_KNOBS).
 *   CUFUNC_REDUCE_BLOCKS_PER_SM  blocks of 512 per multiprocessor of full reductions (1..64)
 *   CUFUNC_REDUCE_UNROLL         independent vector loads in flight per thread of full, row and
 *                                column reductions (1, 2, 4 or 8)
 *   CUFUNC_REDUCE_COLS_THREADS_PER_SM  threads per multiprocessor a split column reduction aims
 *                                at (64..65536; default RED_COLS_THREADS_PER_SM)
 *   CUFUNC_REDUCE_GATHER         partials the last block of a split loads at once (1..32; default
 *                                CF_RED_GATHER of templates/cufunc/reduce.cuh, 8)
 *   CUFUNC_SCAN_BLOCK            threads per scan tile (64, 128, 256, 512 or 1024)
 *   CUFUNC_SCAN_ITEMS            elements per thread of a scan tile (1..64; rounded up to a
 *                                multiple of the elements of one 16-byte vector)
 *   CUFUNC_SCAN_SLEEP            nanoseconds a look-back waits between polls of a tile state that
 *                                is not ready yet (0..10000; 0: poll again at once)
 *   CUFUNC_SCAN_SMEM_ITEMS       elements per thread of a scan tile held in shared memory beside
 *                                the register ones (0..48, a multiple of the vector; only when
 *                                the accumulator has the input's size)
 *   CUFUNC_SCAN_ORDER            "block": one-tile-per-block scans take tile blockIdx.x (as CUB
 *                                does); "atomic": tiles drawn from an atomic counter
 *   CUFUNC_SCAN_LOOKBACK         32-tile groups a look-back step reads per L2 round trip (1, 2, 4
 *                                or 8; default SCAN_LOOKBACK_DEFAULT)
 *   CUFUNC_SCAN_MIN_BLOCKS       scan tiles resident per multiprocessor asked of the compiler
 *                                (__launch_bounds__'s second argument, 1..32; unset: none): a
 *                                tile lives in registers, so fewer registers per thread means more
 *                                tiles, and more bytes, in flight */
typedef struct red_knobs {
    int blocks_per_sm, unroll, scan_block, scan_items, scan_sleep, scan_min_blocks;
    int cols_threads_per_sm, gather;
    int scan_lookback;
    int scan_order; /* -1: unset, 0: atomic, 1: block */
    int scan_smem_items; /* -1: unset */
} red_knobs;

static red_knobs knob_values;
static pthread_once_t knob_once = PTHREAD_ONCE_INIT;

static void read_knobs(void)
{
    red_knobs *k = &knob_values;
    k->blocks_per_sm = (int)cf_knob(CF_KNOB_REDUCE_BLOCKS_PER_SM);
    k->unroll = (int)cf_knob(CF_KNOB_REDUCE_UNROLL);
    k->scan_block = (int)cf_knob(CF_KNOB_SCAN_BLOCK);
    k->scan_items = (int)cf_knob(CF_KNOB_SCAN_ITEMS);
    k->scan_sleep = (int)cf_knob(CF_KNOB_SCAN_SLEEP);
    k->scan_min_blocks = (int)cf_knob(CF_KNOB_SCAN_MIN_BLOCKS);
    k->cols_threads_per_sm = (int)cf_knob(CF_KNOB_REDUCE_COLS_THREADS_PER_SM);
    k->gather = (int)cf_knob(CF_KNOB_REDUCE_GATHER);
    k->scan_lookback = (int)cf_knob(CF_KNOB_SCAN_LOOKBACK);
    k->scan_smem_items = (int)cf_knob(CF_KNOB_SCAN_SMEM_ITEMS);
    const char *o = cf_knob_text(CF_KNOB_SCAN_ORDER);
    k->scan_order = !o ? -1 : !strcmp(o, "block") ? 1 : !strcmp(o, "atomic") ? 0 : -1;
}

static const red_knobs *knobs(void)
{
    pthread_once(&knob_once, read_knobs);
    return &knob_values;
}

/* ---- geometry ------------------------------------------------------------------------------ */

#define RED_ALL_BLOCK 512
#define RED_BLOCK 256
#define RED_THREADS_PER_SM 2048
/* full reductions: 2 blocks of 512 per multiprocessor, 4 vector loads in flight per thread */
#define RED_ALL_BLOCKS_PER_SM 2
/* column reductions whose columns alone do not fill the card split the reduced range over blocks
 * until the grid holds this many threads per multiprocessor. Fewer (512) measured better for most
 * shapes on an H200 but a fifth slower for (8192, 16384) float64, in both runs that measured it
 * (bench/bench_cols_variants.py, bench/REDUCE_NOTES.md "axis 0"): kept at 2048 until understood. */
#define RED_COLS_THREADS_PER_SM 2048
/* scans: 256 threads x 128 bytes of accumulators each (32 float32): 64 registers, 4 blocks per SM */
#define SCAN_BLOCK 256
/* look-back window: groups of 32 tiles per L2 round trip (templates/cufunc/reduce.cuh). One:
 * wider windows measured slower on an H200 (2^28 float32: 1 group 3264 GB/s, 2: 3230, 4: 2999,
 * 8: 2614; the extra polls and the registers they hold cost more than the round trips saved) */
#define SCAN_LOOKBACK_DEFAULT 1
/* tile order of one-tile-per-block scans: 0 atomic draws, 1 block order. Atomic draws: block
 * order measured no faster (2^28 float32 on an H200: 3205 GB/s vs 3224), and the draws give
 * the forward-progress guarantee without relying on the order blocks are started in */
#define SCAN_ORDER_DEFAULT 0
/* elements per thread of a scan tile held in shared memory beside the register ones: 44, so a tile
 * of 256 x (44 + 44) float32 has 88 KiB resident per block, 352 KiB per SM over registers and
 * shared memory; measured on an H200 (2^28 float32): 3409 GB/s = 81% of copy, against 3262
 * without (32 items: 3406, 20: 3398) */
#define SCAN_SMEM_ITEMS_DEFAULT 44
#define SCAN_SMEM_ITEMS_DEFAULT_8 22 /* 8-byte elements: 44 KiB of a 256-thread tile */
/* the shared-memory part of a tile is static shared memory: under the 48 KiB a kernel may declare
 * statically, with room for the scan's own few words */
#define SCAN_SMEM_MAX (48 * 1024 - 1024)

static int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Elements of `size` bytes per 16-byte vector. */
static int vec_of(size_t size) { return size >= 16 ? 1 : (int)(16 / size); }
static int unroll_of(int vec)
{
    int u = knobs()->unroll;
    return u ? u : vec >= 8 ? 2 : 4;
}

cf_status cf_reduce_geometry(const cf_reduce_plan *p, cf_dtype in_dtype, cf_dtype acc,
                             uint64_t in_data, int sms, int blocks_per_sm, cf_reduce_geom *g)
{
    if (!p || !g || !cf_dtype_valid(in_dtype) || !cf_dtype_valid(acc) || sms < 1)
        return cf_error_set(CF_ERR_INVALID, "cf_reduce_geometry: bad arguments");
    memset(g, 0, sizeof *g);
    g->grid[0] = g->grid[1] = g->grid[2] = 1;
    const size_t isz = cf_dtype_size(in_dtype), asz = cf_dtype_size(acc);
    const int V = vec_of(isz);
    const int64_t target_threads = (int64_t)sms * RED_THREADS_PER_SM;
    switch (p->kind) {
    case CF_REDUCE_ALL: {
        g->block = RED_ALL_BLOCK;
        g->vec = p->red_contiguous && !p->has_where && in_data % 16 == 0 ? V : 1;
        /* 4-byte elements: 8 vectors in flight per thread, the best of bench_scan_variants.py's
         * reduction settings on an H200 (2^28 float32: sum 4524 GB/s, max 4513 against 4501 /
         * 4493 with 4; CuPy's CUB sum 4496 in the same run) */
        g->unroll = knobs()->unroll ? knobs()->unroll : g->vec == 4 ? 8 : unroll_of(g->vec);
        int64_t per_sm = blocks_per_sm > 0 ? blocks_per_sm : RED_THREADS_PER_SM / RED_ALL_BLOCK;
        int64_t cap = min64((int64_t)sms * per_sm, CF_RED_MAX_BLOCKS);
        int64_t blocks = ceil_div(p->n_red, (int64_t)g->block * g->vec * g->unroll);
        g->grid[0] = (unsigned)max64(1, min64(blocks, cap));
        g->chunk = p->n_red;
        return CF_OK;
    }
    case CF_REDUCE_ROWS: {
        g->block = RED_BLOCK;
        g->vec = p->red_contiguous && !p->has_where ? V : 1;
        g->unroll = unroll_of(V);
        g->group = p->n_red <= (int64_t)32 * V * g->unroll * 4 ? 32 : RED_BLOCK;
        int64_t per_block = g->block / g->group;
        int64_t blocks = ceil_div(p->n_out, per_block);
        int64_t per_round = (int64_t)g->block * g->vec * g->unroll;
        g->chunk = p->n_red;
        if (g->group == RED_BLOCK && p->n_out <= CF_RED_NTICKETS &&
            p->n_out * RED_BLOCK * 2 <= target_threads && p->n_red >= 4 * per_round) {
            /* too few rows for the card: split each row over several blocks */
            int64_t split = min64(ceil_div(target_threads, p->n_out * RED_BLOCK),
                                  ceil_div(p->n_red, per_round));
            split = min64(split, 65535);
            int64_t chunk = ceil_div(p->n_red, split);
            chunk = ceil_div(chunk, 16) * 16; /* chunks start at vector boundaries of the row */
            split = ceil_div(p->n_red, chunk);
            if (split > 1) {
                g->chunk = chunk;
                g->grid[0] = (unsigned)p->n_out;
                g->grid[1] = (unsigned)split;
                g->partials = split * p->n_out;
                return CF_OK;
            }
        }
        int64_t per_sm = blocks_per_sm > 0 ? blocks_per_sm : RED_THREADS_PER_SM / RED_BLOCK;
        int64_t cap = min64((int64_t)sms * per_sm * 8, 0x7fffffff);
        g->grid[0] = (unsigned)max64(1, min64(blocks, cap));
        return CF_OK;
    }
    case CF_REDUCE_COLS: {
        g->block = RED_BLOCK;
        int vc = 1;
        if (!p->has_where && p->kept_contiguous && p->kept_ndim >= 1 && V > 1 &&
            p->kept_shape[p->kept_ndim - 1] % V == 0 && in_data % 16 == 0) {
            vc = V;
            for (int k = 0; k + 1 < p->kept_ndim && vc > 1; k++)
                if (p->in_kept[k] % 16)
                    vc = 1;
            for (int k = 0; k < p->red_ndim && vc > 1; k++)
                if (p->in_red[k] % 16)
                    vc = 1;
        }
        g->vec = vc;
        g->unroll = knobs()->unroll ? knobs()->unroll : vc >= 8 ? 2 : vc >= 4 ? 4 : 8;
        int64_t groups = p->n_out / vc;
        int64_t blocks_x = ceil_div(groups, RED_BLOCK);
        /* a split aims at RED_COLS_THREADS_PER_SM threads per multiprocessor */
        int tps = knobs()->cols_threads_per_sm ? knobs()->cols_threads_per_sm
                                               : RED_COLS_THREADS_PER_SM;
        int64_t target_blocks = max64(1, (int64_t)sms * tps / RED_BLOCK);
        int64_t split = 1, chunk = max64(p->n_red, 1);
        if (blocks_x < target_blocks && blocks_x <= CF_RED_NTICKETS && p->n_red >= 64) {
            split = min64(ceil_div(target_blocks, blocks_x), ceil_div(p->n_red, 32));
            split = min64(split, 65535);
            chunk = ceil_div(p->n_red, split);
            split = ceil_div(p->n_red, chunk);
        }
        if (blocks_x > 0x7fffffff)
            return cf_error_set(CF_ERR_UNSUPPORTED, "too many outputs (%lld) for one launch",
                                (long long)p->n_out);
        g->grid[0] = (unsigned)max64(1, blocks_x);
        g->grid[1] = (unsigned)split;
        g->chunk = chunk;
        g->partials = split > 1 ? split * p->n_out : 0;
        return CF_OK;
    }
    case CF_SCAN_TILES: {
        /* Each lane holds ITEMS elements in rounds of one 16-byte vector (V elements): a tile of
         * 256 x 32 float32 (32 KiB) amortises the look-back over enough bytes that a window of 32
         * predecessors per L2 round trip keeps up with the memory, and 4 resident blocks per SM
         * hold 128 KiB of tiles in registers (bench/REDUCE_NOTES.md). */
        const red_knobs *k = knobs();
        g->vec = V;
        g->block = k->scan_block ? k->scan_block : SCAN_BLOCK;
        /* 4-byte accumulators: 44 items per thread with registers capped for 4 resident blocks
         * per SM (176 KiB of tiles per SM), the best of bench_scan_variants.py's sweep on an
         * H200 (2^28 int32: 3214 GB/s, float32 3215; 56 items uncapped, 3 blocks: 2878 / ~3200;
         * 48 items capped: 3007) */
        /* 8-byte accumulators: 16 in registers + 22 in shared memory (76 KiB tiles), 4 blocks
         * per SM: 2^27 float64 at 2469 GB/s = 84% of copy on an H100, against 2045 (69.5%) with
         * 256 x 16 alone (bench_scan_variants.py --f64, H100, 2026-11-25) */
        int items = k->scan_items ? k->scan_items : asz <= 4 ? 44 : asz == 8 ? 16 : 8;
        g->min_blocks = k->scan_min_blocks ? k->scan_min_blocks
                        : !k->scan_items && !k->scan_block && asz <= 8 ? 4 : 0;
        /* more of the tile in shared memory (one-tile-per-block driver, accumulator of the
         * input's size: the slots hold inputs, then partial results) */
        int sitems = k->scan_smem_items >= 0 ? k->scan_smem_items
                     : asz == 8                 ? SCAN_SMEM_ITEMS_DEFAULT_8
                                                : SCAN_SMEM_ITEMS_DEFAULT;
        sitems = (sitems + V - 1) / V * V;
        if (asz != isz || V * (int)isz != 16 ||
            (int64_t)g->block * sitems * (int64_t)isz > SCAN_SMEM_MAX)
            sitems = 0;
        g->smem_items = sitems;
        if (items < V)
            items = V;
        items = (items + V - 1) / V * V;
        g->items = items;
        g->unroll = 1;
        int64_t tile = (int64_t)g->block * (g->items + g->smem_items);
        g->tiles_per_row = max64(1, ceil_div(p->n_red, tile));
        int64_t tiles = g->tiles_per_row * p->n_out;
        if (tiles > 0x7fffffff)
            return cf_error_set(CF_ERR_UNSUPPORTED, "accumulate over %lld tiles: too many for one "
                                "launch", (long long)tiles);
        g->grid[0] = (unsigned)max64(1, tiles);
        g->chunk = tile;
        return CF_OK;
    }
    case CF_SCAN_COLS: {
        g->block = RED_BLOCK;
        g->unroll = 4;
        g->vec = 1;
        int64_t per_sm = blocks_per_sm > 0 ? blocks_per_sm : RED_THREADS_PER_SM / RED_BLOCK;
        int64_t cap = min64((int64_t)sms * per_sm * 4, 0x7fffffff);
        g->grid[0] = (unsigned)max64(1, min64(ceil_div(p->n_out, RED_BLOCK), cap));
        return CF_OK;
    }
    case CF_REDUCE_SEGMENTS: /* reduceat's geometry is its own (reduceat.c) */
        break;
    }
    return cf_error_set(CF_ERR_INVALID, "cf_reduce_geometry: bad plan kind %d", (int)p->kind);
}

/* ---- specialisation and generation --------------------------------------------------------- */

typedef struct red_spec {
    int loop;
    cf_reduce_kind kind;
    cf_dtype in, out, acc;
    int block, group, vec, unroll, items, sleep, min_blocks, lookback, order, smem_items;
    int knd, rnd;
    int where, index32;
    cf_dtype idx;          /* reduceat: the indices' dtype */
    int cols, check;       /* reduceat: a thread per output along a strided axis; the check kernel */
} red_spec;

static void make_spec(const cf_reducer *r, int loop, const cf_reduce_plan *p, const cf_reduce_geom *g,
                      cf_dtype in, cf_dtype out, red_spec *sp)
{
    memset(sp, 0, sizeof *sp);
    sp->loop = loop;
    sp->kind = p->kind;
    sp->in = in;
    sp->out = out;
    sp->acc = r->loops[loop].acc;
    sp->block = (int)g->block;
    sp->group = g->group;
    sp->vec = g->vec;
    sp->unroll = g->unroll;
    sp->items = g->items;
    sp->sleep = p->kind == CF_SCAN_TILES ? knobs()->scan_sleep : 0;
    sp->min_blocks = p->kind == CF_SCAN_TILES ? g->min_blocks : 0;
    sp->lookback = p->kind == CF_SCAN_TILES
                       ? (knobs()->scan_lookback ? knobs()->scan_lookback : SCAN_LOOKBACK_DEFAULT)
                       : 0;
    sp->smem_items = p->kind == CF_SCAN_TILES ? g->smem_items : 0;
    sp->order = p->kind == CF_SCAN_TILES &&
                (knobs()->scan_order >= 0 ? knobs()->scan_order : SCAN_ORDER_DEFAULT);
    sp->knd = p->kept_ndim;
    sp->where = p->has_where;
    sp->index32 = p->index32;
    switch (p->kind) {
    case CF_REDUCE_ALL:
    case CF_REDUCE_ROWS:
        sp->rnd = p->red_contiguous ? 0 : p->red_ndim;
        break;
    case CF_REDUCE_COLS:
        sp->rnd = p->red_ndim > 0 ? p->red_ndim : 1;
        break;
    default:
        sp->rnd = 1;
        sp->where = 0;
        break;
    }
    if (p->kind == CF_REDUCE_ALL)
        sp->knd = 0;
}

/* The kernel table's key: the device and the spec, a zero-filled binary struct (make_spec and
 * rat_spec zero every spec first; red_spec has no padding: ints and enums only). */
typedef struct red_key {
    int device;
    red_spec sp;
} red_key;

static void spec_key(const red_spec *sp, int device, red_key *k)
{
    memset(k, 0, sizeof *k);
    k->device = device;
    memcpy(&k->sp, sp, sizeof *sp);
}

static cf_status generate(const red_loop *l, const red_spec *sp, char **out)
{
    const char *acc = cf_dtype_ctype(sp->acc), *tin = cf_dtype_ctype(sp->in),
               *tout = cf_dtype_ctype(sp->out);
    const char *I = sp->index32 ? "unsigned" : "unsigned long long";
    const char *W = sp->where ? "true" : "false";
    cf_strbuf b = {0};
    if (knobs()->gather)
        cf_strbuf_printf(&b, "#define CF_RED_GATHER %d\n", knobs()->gather);
    if (sp->lookback)
        cf_strbuf_printf(&b, "#define CF_SCAN_LOOKBACK_GROUPS %d\n#define CF_SCAN_BLOCK_ORDER %d\n"
                         "#define CF_SCAN_SMEM_ROUNDS %d\n", sp->lookback, sp->order,
                         sp->vec ? sp->smem_items / sp->vec : 0);
    /* the runtime header first: a loop's source may use it without including it */
    cf_strbuf_printf(&b, "#include \"cufunc/runtime.cuh\"\n%s\n#include \"cufunc/reduce.cuh\"\n\n"
                  "struct cf_red_op {\n"
                  "    typedef %s T;\n"
                  "    static __device__ __forceinline__ T apply(T a, T b) { return cf_cast<T>(%s(a, b)); }\n"
                  "};\n\n"
                  "extern \"C\" __global__ void __launch_bounds__(%d, %d)\n"
                  "cf_reduce(const __grid_constant__ cf_red_params p)\n{\n    ",
              l->fn.source, acc, l->fn.fn_name, sp->block, sp->min_blocks > 0 ? sp->min_blocks : 1);
    switch (sp->kind) {
    case CF_REDUCE_ALL:
        cf_strbuf_printf(&b, "cf_red_all<cf_red_op, %s, %s, %d, %d, %d, %d, %s, %s>(p);\n", tin, tout,
                  sp->block, sp->vec, sp->unroll, sp->rnd, W, I);
        break;
    case CF_REDUCE_ROWS:
        cf_strbuf_printf(&b, "cf_red_rows<cf_red_op, %s, %s, %d, %d, %d, %d, %d, %d, %s, %s>(p);\n", tin,
                  tout, sp->block, sp->group, sp->vec, sp->unroll, sp->knd, sp->rnd, W, I);
        break;
    case CF_REDUCE_COLS:
        cf_strbuf_printf(&b, "cf_red_cols<cf_red_op, %s, %s, %d, %d, %d, %d, %d, %s, %s>(p);\n", tin,
                  tout, sp->block, sp->vec, sp->unroll, sp->knd, sp->rnd, W, I);
        break;
    case CF_SCAN_TILES:
        cf_strbuf_printf(&b, "cf_scan_tiles<cf_red_op, %s, %s, %d, %d, %d, %d, %d, %s>(p);\n", tin,
                  tout, sp->block, sp->items, sp->vec, sp->sleep, sp->knd, I);
        break;
    case CF_SCAN_COLS:
        cf_strbuf_printf(&b, "cf_scan_cols<cf_red_op, %s, %s, %d, %d, %d, %s>(p);\n", tin, tout,
                  sp->block, sp->unroll, sp->knd, I);
        break;
    case CF_REDUCE_SEGMENTS:
        if (sp->check)
            cf_strbuf_printf(&b, "cf_red_segments_check<%s, %d>(p);\n", cf_dtype_ctype(sp->idx),
                             sp->block);
        else
            cf_strbuf_printf(&b, "cf_red_segments<cf_red_op, %s, %s, %s, %d, %d, %d, %d, %d, %s, "
                             "%s>(p);\n", tin, tout, cf_dtype_ctype(sp->idx), sp->block, sp->group,
                             sp->vec, sp->unroll, sp->knd, sp->cols ? "true" : "false", I);
        break;
    }
    cf_strbuf_printf(&b, "}\n");
    if (b.failed) {
        cf_free(b.s);
        return cf_error_set(CF_ERR_NOMEM, "reduce: out of memory generating a kernel");
    }
    *out = b.s;
    return CF_OK;
}

/* ---- the kernel table ------------------------------------------------------------------------ */

typedef struct red_build {
    cf_reducer *r;
    const red_spec *sp;
    int device;
} red_build;

/* cf_kbuild_fn of the reductions (aux: resident blocks per multiprocessor). Runs without the
 * reducer's lock; the loop is copied under it (a loop may be added meanwhile). */
static cf_status build_kernel(void *ctx, cf_function **fn, int64_t *aux)
{
    const red_build *c = ctx;
    pthread_mutex_lock(&c->r->lock);
    red_loop l = c->r->loops[c->sp->loop];
    pthread_mutex_unlock(&c->r->lock);
    char *src = NULL;
    cf_module *m = NULL;
    int per_sm = 0;
    cf_status st = generate(&l, c->sp, &src);
    if (!st)
        st = cf_loop_fn_load(&l.fn, c->device, src, &m);
    if (!st)
        st = cf_module_function(m, "cf_reduce", fn);
    if (!st)
        st = cf_function_max_active_blocks(*fn, c->sp->block, 0, &per_sm);
    if (!st)
        *aux = per_sm > 0 ? per_sm : 1;
    cf_free(src);
    return st;
}

/* The kernel of a spec: from the kernel cache, else built once (ktable.h). */
static cf_status get_kernel(cf_reducer *r, const red_spec *sp, int device, cf_kentry *out)
{
    red_key key;
    spec_key(sp, device, &key);
    red_build c = {r, sp, device};
    return cf_ktable_get(&r->table, &r->lock, &key, sizeof key, 0, build_kernel, &c, out);
}

/* ---- per-stream scratch -------------------------------------------------------------------- */

/* tickets, then the scan tile counter, then the partials of full reductions and their flags, then
 * reduceat's index check */
#define SCR_TICKETS 0
#define SCR_TILE_COUNTER (CF_RED_NTICKETS * 4)
#define SCR_PARTIALS (SCR_TILE_COUNTER + 256)
#define SCR_PARTIAL_OK (SCR_PARTIALS + CF_RED_MAX_BLOCKS * 16)
#define SCR_SEG (SCR_PARTIAL_OK + CF_RED_MAX_BLOCKS) /* reduceat's index check (reduceat.c) */
#define SCR_BYTES (SCR_SEG + CF_RED_SEG_SCRATCH)

typedef struct red_scratch {
    int device;
    uintptr_t stream;
    pthread_t thread;           /* per-thread default streams share a handle across threads */
    int per_thread;
    uint64_t base;              /* SCR_BYTES, zeroed at creation, kept zeroed by the kernels */
    uint64_t scan;              /* scan tile states: status, aggregates, inclusive prefixes */
    int64_t scan_tiles;
    unsigned epoch;
} red_scratch;

static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static red_scratch *scratch;
static int nscratch, scratch_cap;

/* Scan tile states: a 64-bit status word per tile, then 16-byte aggregate and inclusive slots
 * (used by values of more than 4 bytes; smaller ones travel inside the status word). */
static size_t scan_bytes(int64_t tiles)
{
    return (size_t)tiles * (8 + 32);
}

/* cf_stream_free's hook: an owned stream's scratch is freed with it (ordered on it, so after the
 * launches that used it) and forgotten, so that neither memory nor tickets outlive the stream: a
 * stream created later may get the same handle. Borrowed streams (the legacy and per-thread
 * default streams, external ones) keep theirs for the life of the process. */
static void release_scratch(cf_stream *s)
{
    int device = cf_stream_device(s);
    uintptr_t h = cf_stream_handle(s);
    pthread_mutex_lock(&scratch_lock);
    for (int i = 0; i < nscratch;) {
        if (scratch[i].device == device && scratch[i].stream == h) {
            cf_mem_free(s, scratch[i].base);
            if (scratch[i].scan)
                cf_mem_free(s, scratch[i].scan);
            scratch[i] = scratch[--nscratch];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&scratch_lock);
}

/* The scratch of stream s (created on first use, ordered on s): a few hundred KiB, reused by every
 * reduction on s, freed with s when s is an owned stream (release_scratch). The returned copy is
 * valid while the caller orders its work on s. */
static cf_status get_scratch(cf_stream *s, int64_t scan_tiles, red_scratch *out)
{
    int device = cf_stream_device(s);
    uintptr_t h = cf_stream_handle(s);
    int per_thread = h == 2;
    pthread_t self = pthread_self();
    cf_status st = CF_OK;
    pthread_mutex_lock(&scratch_lock);
    red_scratch *e = NULL;
    for (int i = 0; i < nscratch && !e; i++)
        if (scratch[i].device == device && scratch[i].stream == h &&
            (!per_thread || pthread_equal(scratch[i].thread, self)))
            e = &scratch[i];
    if (!e) {
        if ((st = cf_stream_add_destroy_hook(release_scratch)) != CF_OK)
            goto done;
        if (nscratch == scratch_cap) {
            int cap = scratch_cap ? 2 * scratch_cap : 8;
            red_scratch *grown = cf_realloc(scratch, (size_t)cap * sizeof *grown);
            if (!grown) {
                st = CF_ERR_NOMEM;
                goto done;
            }
            scratch = grown;
            scratch_cap = cap;
        }
        red_scratch fresh;
        memset(&fresh, 0, sizeof fresh);
        fresh.device = device;
        fresh.stream = h;
        fresh.thread = self;
        fresh.per_thread = per_thread;
        if ((st = cf_mem_alloc(s, SCR_BYTES, &fresh.base)) != CF_OK)
            goto done;
        if ((st = cf_memset8(s, fresh.base, 0, SCR_BYTES)) != CF_OK) {
            cf_mem_free(s, fresh.base);
            goto done;
        }
        scratch[nscratch] = fresh;
        e = &scratch[nscratch++];
    }
    if (scan_tiles > 0) {
        if (scan_tiles > e->scan_tiles) {
            int64_t tiles = max64(scan_tiles, 2 * e->scan_tiles);
            uint64_t mem = 0;
            if ((st = cf_mem_alloc(s, scan_bytes(tiles), &mem)) != CF_OK)
                goto done;
            if ((st = cf_memset8(s, mem, 0, scan_bytes(tiles))) != CF_OK) {
                cf_mem_free(s, mem);
                goto done;
            }
            if (e->scan)
                cf_mem_free(s, e->scan); /* ordered after the launches that used it */
            e->scan = mem;
            e->scan_tiles = tiles;
            e->epoch = 0;
        }
        if (++e->epoch >= (1u << 30)) {
            /* statuses hold 30 bits of epoch: start over from zeroed statuses */
            if ((st = cf_memset8(s, e->scan, 0, (size_t)e->scan_tiles * 8)) != CF_OK)
                goto done;
            e->epoch = 1;
        }
    }
    *out = *e;
done:
    pthread_mutex_unlock(&scratch_lock);
    return st;
}

/* The scratch of one launch captured into a CUDA graph: the stream's own scratch cannot serve,
 * since its tickets and scan epoch are baked into the graph's kernel parameters and a replay would
 * find the statuses of the previous replay under the same epoch. The graph gets its own memory
 * (an allocation node) whose counters are zeroed by memset nodes before each replay's kernel, and
 * freed by a free node after it (graph_scratch_end). */
static cf_status graph_scratch(cf_stream *s, int64_t scan_tiles, red_scratch *out)
{
    memset(out, 0, sizeof *out);
    out->device = cf_stream_device(s);
    out->stream = cf_stream_handle(s);
    size_t scan_at = ((size_t)SCR_BYTES + 255) / 256 * 256;
    size_t bytes = scan_at + (scan_tiles > 0 ? scan_bytes(scan_tiles) : 0);
    cf_status st = cf_mem_alloc(s, bytes, &out->base);
    if (st)
        return st;
    CUstream h = cf_stream_cu(s);
    CUresult r = cf_drv.cuMemsetD32Async(out->base + SCR_TICKETS, 0, SCR_PARTIALS / 4, h);
    if (r == CUDA_SUCCESS)
        r = cf_drv.cuMemsetD8Async(out->base + SCR_PARTIAL_OK, 0, CF_RED_MAX_BLOCKS, h);
    if (r == CUDA_SUCCESS && scan_tiles > 0) {
        out->scan = out->base + scan_at;
        out->scan_tiles = scan_tiles;
        out->epoch = 1;
        r = cf_drv.cuMemsetD32Async(out->scan, 0, (size_t)scan_tiles * 2, h); /* the statuses */
    }
    if (r != CUDA_SUCCESS) {
        st = cf_cu_check(r, "zeroing a captured reduction's counters");
        cf_mem_free(s, out->base);
    }
    return st;
}

/* ---- launch -------------------------------------------------------------------------------- */

/* Elements must sit at addresses aligned to their size (complex: to a component's size). */
static cf_status check_aligned(const cf_array *a, const char *what)
{
    if (!a)
        return CF_OK;
    uint64_t al = cf_dtype_size(a->dtype);
    if (cf_dtype_kind(a->dtype) == 'c')
        al /= 2;
    int bad = a->data % al != 0;
    for (int k = 0; k < a->ndim && !bad; k++)
        bad = a->shape[k] > 1 && (uint64_t)cf_abs64(a->strides[k]) % al != 0;
    if (bad)
        return cf_error_set(CF_ERR_UNSUPPORTED, "%s is not aligned to its element size; make an "
                            "aligned copy first", what);
    return CF_OK;
}

static void fill_params(cf_red_params *pr, const cf_reduce_plan *p, const cf_reduce_geom *g,
                        uint64_t in, uint64_t out, uint64_t where, const void *init, size_t accsz)
{
    memset(pr, 0, sizeof *pr);
    pr->in = in;
    pr->out = out;
    pr->where = where;
    pr->n_out = p->n_out;
    pr->n_red = p->n_red;
    pr->chunk = g->chunk;
    pr->tiles_per_row = g->tiles_per_row;
    pr->has_init = init != NULL;
    if (init)
        memcpy(pr->init, init, accsz);
    pr->kept_ndim = p->kept_ndim;
    pr->red_ndim = p->red_ndim;
    for (int k = 0; k < p->kept_ndim; k++) {
        pr->kept_shape[k] = p->kept_shape[k];
        cf_fastdiv_init(&pr->kept_div[k], (uint64_t)p->kept_shape[k], p->index32);
        pr->in_kept[k] = p->in_kept[k];
        pr->out_kept[k] = p->out_kept[k];
        pr->where_kept[k] = p->where_kept[k];
    }
    for (int k = 0; k < p->red_ndim; k++) {
        pr->red_shape[k] = p->red_shape[k];
        cf_fastdiv_init(&pr->red_div[k], (uint64_t)p->red_shape[k], p->index32);
        pr->in_red[k] = p->in_red[k];
        pr->out_red[k] = p->out_red[k];
        pr->where_red[k] = p->where_red[k];
    }
    if (p->red_ndim == 0) {
        /* one element per output (or none): a single reduced axis of that extent, stride 0 */
        pr->red_shape[0] = p->n_red;
        cf_fastdiv_init(&pr->red_div[0], (uint64_t)(p->n_red > 0 ? p->n_red : 1), p->index32);
    }
}

static cf_status run(cf_reducer *r, int loop, cf_stream *s, const cf_reduce_plan *p,
                     cf_dtype in_dtype, cf_dtype out_dtype, uint64_t in, uint64_t out,
                     uint64_t where, const void *init)
{
    int device = cf_stream_device(s);
    cf_device_props props;
    cf_reduce_geom g;
    red_spec sp;
    cf_kentry k;
    cf_status st = cf_device_props_get(device, &props);
    if (st)
        return st;
    /* the kernel's shape does not depend on occupancy; the grid does */
    if ((st = cf_reduce_geometry(p, in_dtype, r->loops[loop].acc, in, props.multiprocessor_count,
                                 0, &g)))
        return st;
    make_spec(r, loop, p, &g, in_dtype, out_dtype, &sp);
    if ((st = get_kernel(r, &sp, device, &k)))
        return st;
    int bps = (int)k.aux;
    if (p->kind == CF_REDUCE_ALL) {
        /* The same grid whatever the body: a cheap body (32 registers) would otherwise get twice
         * the blocks of the configuration measured best (bench/REDUCE_NOTES.md). */
        bps = knobs()->blocks_per_sm ? knobs()->blocks_per_sm
                                     : (bps < RED_ALL_BLOCKS_PER_SM ? bps : RED_ALL_BLOCKS_PER_SM);
    }
    if ((st = cf_reduce_geometry(p, in_dtype, r->loops[loop].acc, in, props.multiprocessor_count,
                                 bps, &g)))
        return st;
    red_scratch scr;
    int scan = p->kind == CF_SCAN_TILES, capture = CF_CAPTURE_NONE;
    /* the legacy default stream never captures: its eager launches ask nothing */
    if (cf_stream_handle(s) > 1 && (st = cf_stream_capture_status(s, &capture)))
        return st;
    capture = capture == CF_CAPTURE_ACTIVE || capture == CF_CAPTURE_INVALIDATED;
    if ((st = capture ? graph_scratch(s, scan ? (int64_t)g.grid[0] : 0, &scr)
                      : get_scratch(s, scan ? (int64_t)g.grid[0] : 0, &scr)))
        return st;
    size_t accsz = cf_dtype_size(r->loops[loop].acc);
    cf_red_params prm;
    fill_params(&prm, p, &g, in, out, where, init, accsz);
    prm.tickets = scr.base + SCR_TICKETS;
    prm.tile_counter = scr.base + SCR_TILE_COUNTER;
    prm.partials = scr.base + SCR_PARTIALS;
    prm.partial_ok = scr.base + SCR_PARTIAL_OK;
    if (scan) {
        int64_t tiles = scr.scan_tiles;
        prm.status = scr.scan;
        prm.aggregate = scr.scan + (uint64_t)tiles * 8;
        prm.inclusive = prm.aggregate + (uint64_t)tiles * 16;
        prm.epoch = scr.epoch;
    }
    uint64_t split_mem = 0;
    if (g.partials > 0) {
        size_t vbytes = (size_t)(((g.partials * (int64_t)accsz + 15) / 16) * 16);
        if ((st = cf_mem_alloc(s, vbytes + (size_t)g.partials, &split_mem)))
            return st;
        prm.partials = split_mem;
        prm.partial_ok = split_mem + vbytes;
    }
    unsigned block[3] = {g.block, 1, 1};
    void *args[1] = {&prm};
    st = cf_launch(k.fn, g.grid, block, 0, s, args);
    if (split_mem) {
        cf_status fst = cf_mem_free(s, split_mem); /* stream-ordered: after the kernel */
        if (!st)
            st = fst;
    }
    if (capture) {
        cf_status fst = cf_mem_free(s, scr.base); /* a free node after the kernel */
        if (!st)
            st = fst;
    }
    return st;
}

static cf_status check_loop(cf_reducer *r, int loop, cf_stream *s)
{
    if (!r || loop < 0 || loop >= r->nloops)
        return cf_error_set(CF_ERR_INVALID, "reduce: bad reducer or loop");
    if (!s)
        return cf_error_set(CF_ERR_INVALID, "reduce: stream is NULL");
    return CF_OK;
}

static cf_status check_device(const cf_array *a, int device, const char *what)
{
    if (a && a->device != device)
        return cf_error_set(CF_ERR_INVALID, "%s is on device %d, the launch on device %d", what,
                            a->device, device);
    return CF_OK;
}

/* Outputs that share memory with what the kernel reads would make it read elements it (or another
 * block) already wrote; the caller copies first (NumPy's rule, cf_array_needs_copy). */
static cf_status check_no_overlap(const cf_reducer *r, const cf_array *in, const cf_array *out,
                                  int in_place_ok, const char *what)
{
    if (in && cf_array_needs_copy(in, out, in_place_ok))
        return cf_error_set(CF_ERR_INVALID, "%s: the output shares memory with %s%s; copy %s first "
                            "(NumPy computes such a call as if the input were copied)", r->name,
                            what, in_place_ok ? " other than as the same view" : "", what);
    return CF_OK;
}

cf_status cf_reduce_launch(cf_reducer *r, int loop, cf_stream *s, const cf_array *in,
                           const unsigned char *reduced, const cf_array *out,
                           const cf_array *where, const void *init)
{
    cf_status st = check_loop(r, loop, s);
    if (st)
        return st;
    cf_reduce_plan p;
    if ((st = cf_reduce_plan_axes(&p, in, reduced, out, where)))
        return st;
    if (p.n_out == 0)
        return CF_OK;
    if (p.n_red == 0 && !init)
        return cf_error_set(CF_ERR_INVALID, "zero-size array to reduction operation %s which has "
                            "no identity", r->name);
    int device = cf_stream_device(s);
    if ((st = check_device(in, device, "the array")) || (st = check_device(out, device, "out")) ||
        (st = check_device(where, device, "where")) ||
        (st = check_aligned(in, "the array")) || (st = check_aligned(out, "out")) ||
        (st = check_no_overlap(r, in, out, 0, "the array")) ||
        (st = check_no_overlap(r, where, out, 0, "the mask")))
        return st;
    return run(r, loop, s, &p, in->dtype, out->dtype, in->data, out->data,
               where ? where->data : 0, init);
}

cf_status cf_reduce_all(cf_reducer *r, int loop, cf_stream *s, const cf_array *in, uint64_t out,
                        cf_dtype out_dtype, const void *init)
{
    cf_status st = check_loop(r, loop, s);
    if (st)
        return st;
    if (!in || !cf_dtype_valid(out_dtype))
        return cf_error_set(CF_ERR_INVALID, "cf_reduce_all: bad arguments");
    if ((st = check_view(in, "the array")))
        return st;
    unsigned char reduced[CF_MAX_DIMS];
    cf_array o;
    memset(&o, 0, sizeof o);
    o.data = out;
    o.dtype = out_dtype;
    o.ndim = in->ndim;
    o.device = in->device;
    for (int k = 0; k < in->ndim; k++) {
        reduced[k] = 1;
        o.shape[k] = 1;
    }
    return cf_reduce_launch(r, loop, s, in, reduced, &o, NULL, init);
}

cf_status cf_scan_launch(cf_reducer *r, int loop, cf_stream *s, const cf_array *in, int axis,
                         const cf_array *out)
{
    cf_status st = check_loop(r, loop, s);
    if (st)
        return st;
    cf_reduce_plan p;
    if ((st = cf_reduce_plan_scan(&p, in, axis, out)))
        return st;
    if (p.n_out == 0 || p.n_red == 0)
        return CF_OK;
    int device = cf_stream_device(s);
    if ((st = check_device(in, device, "the array")) || (st = check_device(out, device, "out")) ||
        (st = check_aligned(in, "the array")) || (st = check_aligned(out, "out")) ||
        (st = check_no_overlap(r, in, out, 1, "the array")))
        return st;
    return run(r, loop, s, &p, in->dtype, out->dtype, in->data, out->data, 0, NULL);
}

cf_status cf_reduce_kernel_source(cf_reducer *r, int loop, const cf_array *in,
                                  const unsigned char *reduced, int scan_axis, const cf_array *out,
                                  const cf_array *where, char **source)
{
    if (!r || loop < 0 || loop >= r->nloops || !source || !in || !out)
        return cf_error_set(CF_ERR_INVALID, "cf_reduce_kernel_source: bad arguments");
    cf_reduce_plan p;
    cf_reduce_geom g;
    red_spec sp;
    cf_status st = scan_axis >= 0 ? cf_reduce_plan_scan(&p, in, scan_axis, out)
                                  : cf_reduce_plan_axes(&p, in, reduced, out, where);
    if (st)
        return st;
    /* the source does not depend on the device: any multiprocessor count gives the same shape */
    if ((st = cf_reduce_geometry(&p, in->dtype, r->loops[loop].acc, in->data, 1, 0, &g)))
        return st;
    make_spec(r, loop, &p, &g, in->dtype, out->dtype, &sp);
    return generate(&r->loops[loop], &sp, source);
}

/* ---- conveniences for C programs (reduce.h) ------------------------------------------------ */

cf_status cf_reducer_check(cf_reducer *r, int loop)
{
    if (!r || loop < -1 || loop >= r->nloops)
        return cf_error_set(CF_ERR_INVALID, "cf_reducer_check: bad reducer or loop %d", loop);
    int major, minor;
    cf_loop_check_arch(&major, &minor);
    for (int l = loop < 0 ? 0 : loop; l < (loop < 0 ? r->nloops : loop + 1); l++) {
        /* the full reduction of a contiguous vector of the accumulator type: the kernel of the
         * commonest call, with the loop's function in it (nothing is read from these addresses) */
        int64_t n = 1 << 20;
        cf_array in, out;
        cf_dtype acc = r->loops[l].acc;
        int64_t one = 1;
        cf_status st = cf_array_init_contiguous(&in, (uint64_t)1 << 32, acc, 1, &n, 'C', 0);
        if (!st)
            st = cf_array_init_contiguous(&out, (uint64_t)2 << 32, acc, 1, &one, 'C', 0);
        char *src = NULL, what[256];
        unsigned char reduced[1] = {1};
        if (!st)
            st = cf_reduce_kernel_source(r, l, &in, reduced, -1, &out, NULL, &src);
        snprintf(what, sizeof what, "reducer '%s' loop %d (%s, %s) -> %s", r->name, l,
                 cf_dtype_name(acc), cf_dtype_name(acc), cf_dtype_name(acc));
        if (!st)
            st = cf_loop_fn_compile(&r->loops[l].fn, src, major, minor, what, NULL);
        cf_free(src);
        if (st)
            return st;
    }
    return CF_OK;
}

cf_status cf_reduce_to_host(cf_reducer *r, cf_stream *s, const cf_array *in, const void *init,
                            void *result)
{
    if (!r || !in || !result)
        return cf_error_set(CF_ERR_INVALID, "cf_reduce_to_host: NULL reducer, array or result");
    int loop = cf_reducer_find_loop(r, in->dtype);
    if (loop < 0 && r->nloops == 1)
        loop = 0; /* the one loop; the elements are converted to its type as they are loaded */
    if (loop < 0)
        return cf_error_set(CF_ERR_TYPE, "reducer '%s' has no loop for %s (add one, or give it "
                            "a single loop to convert to)", r->name, cf_dtype_name(in->dtype));
    cf_dtype acc = r->loops[loop].acc;
    int device = in->device >= 0 ? in->device : 0;
    cf_stream *own = NULL;
    cf_status st = CF_OK;
    if (!s && (st = cf_stream_default(device, &own)))
        return st;
    if (!s)
        s = own;
    uint64_t dout = 0, din = 0;
    cf_array dev = *in;
    if (in->device < 0) {
        /* a host array: one contiguous upload first */
        if (!cf_array_is_c_contiguous(in)) {
            st = cf_error_set(CF_ERR_INVALID, "cf_reduce_to_host: a host array must be "
                              "C-contiguous (copy it first)");
            goto done;
        }
        size_t nbytes = (size_t)cf_array_nbytes(in);
        if ((st = cf_mem_alloc(s, nbytes, &din)))
            goto done;
        if (nbytes && (st = cf_memcpy_htod(s, din, (const void *)(uintptr_t)in->data, nbytes, 0)))
            goto done;
        dev.data = din;
        dev.device = cf_stream_device(s);
    }
    if ((st = cf_mem_alloc(s, cf_dtype_size(acc), &dout)))
        goto done;
    if ((st = cf_reduce_all(r, loop, s, &dev, dout, acc, init)))
        goto done;
    st = cf_memcpy_dtoh(s, result, dout, cf_dtype_size(acc), 1);
done:
    if (dout)
        cf_mem_free(s, dout);
    if (din)
        cf_mem_free(s, din);
    cf_stream_free(own);
    return st;
}

/* ---- what reduce.c lends reduceat.c (reduce_hooks.h) ------------------------------------------ */

cf_status cf_red_hook_check_loop(cf_reducer *r, int loop, cf_stream *s)
{
    return check_loop(r, loop, s);
}

cf_status cf_red_hook_check_operands(const cf_reducer *r, int device, const cf_array *in,
                                     const cf_array *indices, const cf_array *out)
{
    cf_status st;
    if ((st = check_view(in, "the array")) || (st = check_view(out, "out")) ||
        (st = check_view(indices, "indices")))
        return st;
    if ((st = check_device(in, device, "the array")) || (st = check_device(out, device, "out")) ||
        (st = check_device(indices, device, "indices")) ||
        (st = check_aligned(in, "the array")) || (st = check_aligned(out, "out")) ||
        (st = check_aligned(indices, "indices")) ||
        (st = check_no_overlap(r, in, out, 0, "the array")) ||
        (st = check_no_overlap(r, indices, out, 0, "the indices")))
        return st;
    return CF_OK;
}

cf_status cf_red_hook_kernel(cf_reducer *r, int loop, const cf_red_seg_spec *ss, int device,
                             cf_kentry *out)
{
    red_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.loop = loop;
    sp.kind = CF_REDUCE_SEGMENTS;
    sp.in = ss->in;
    sp.out = ss->out;
    sp.acc = r->loops[loop].acc;
    sp.idx = ss->idx;
    sp.knd = ss->knd;
    sp.rnd = 1;
    sp.index32 = ss->index32;
    sp.block = ss->block;
    sp.group = ss->group;
    sp.vec = ss->vec;
    sp.unroll = ss->unroll;
    sp.cols = ss->cols;
    sp.check = ss->check;
    return get_kernel(r, &sp, device, out);
}

cf_status cf_red_hook_scratch(cf_stream *s, uint64_t *tickets, uint64_t *seg)
{
    red_scratch scr;
    cf_status st = get_scratch(s, 0, &scr);
    if (st)
        return st;
    *tickets = scr.base + SCR_TICKETS;
    *seg = scr.base + SCR_SEG;
    return CF_OK;
}

void cf_red_hook_params(cf_red_params *pr, const cf_reduce_plan *p, uint64_t in, uint64_t out,
                        uint64_t where)
{
    cf_reduce_geom g;
    memset(&g, 0, sizeof g);
    fill_params(pr, p, &g, in, out, where, NULL, 0);
}
