/* test_hostpipe.c: the chunk planner of cf_ufunc_launch_host (hostpipe.h), on a CPU: the strided
 * block copy against a naive loop; split axis, rows, roles and refusals; and the whole pipeline
 * emulated on the host -- every chunk packed into a slot buffer with the pipeline's own layout,
 * pack and view functions, an element-wise "kernel" run over the chunk's views, the outputs
 * unpacked -- over many layouts and chunk sizes, against the loop computed directly. The kernels
 * the chunks launch are compiled with NVRTC. On a GPU: real pipelined launches, with an injected
 * failure mid-pipeline and a kernel that does not compile. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "check.h"
#include "diagnostics.h"
#include "testing.h"
#include "env.h"
#include "hostpipe.h"
#include "threadpool.h"

/* ---- values of any dtype as doubles ---------------------------------------------------------- */

static double get(cf_dtype t, const void *p)
{
    switch (t) {
    case CF_BOOL: return *(const unsigned char *)p;
    case CF_INT8: return *(const int8_t *)p;
    case CF_INT16: return *(const int16_t *)p;
    case CF_INT32: return *(const int32_t *)p;
    case CF_INT64: return (double)*(const int64_t *)p;
    case CF_FLOAT32: return *(const float *)p;
    case CF_FLOAT64: return *(const double *)p;
    default: return 0;
    }
}

static void put(cf_dtype t, void *p, double v)
{
    switch (t) {
    case CF_BOOL: *(unsigned char *)p = v != 0; break;
    case CF_INT8: *(int8_t *)p = (int8_t)v; break;
    case CF_INT16: *(int16_t *)p = (int16_t)v; break;
    case CF_INT32: *(int32_t *)p = (int32_t)v; break;
    case CF_INT64: *(int64_t *)p = (int64_t)v; break;
    case CF_FLOAT32: *(float *)p = (float)v; break;
    case CF_FLOAT64: *(double *)p = v; break;
    default: break;
    }
}

/* ---- host arrays: a buffer and a view into it ------------------------------------------------ */

typedef struct harr {
    cf_array v;
    char *mem;
    size_t bytes;
} harr;

/* A view of `shape` with element strides `est` (any signs; 0 = broadcast) into a fresh buffer
 * just large enough, filled with small integer values (exact in every dtype used here). */
static harr make(cf_dtype t, int ndim, const int64_t *shape, const int64_t *est, unsigned seed)
{
    harr h;
    memset(&h, 0, sizeof h);
    size_t item = cf_dtype_size(t);
    int64_t lo = 0, hi = 0;
    for (int k = 0; k < ndim; k++) {
        int64_t span = (shape[k] - 1) * est[k];
        if (shape[k] == 0)
            span = 0;
        if (span < 0)
            lo += span;
        else
            hi += span;
    }
    size_t n = (size_t)(hi - lo + 1);
    h.bytes = n * item;
    h.mem = malloc(h.bytes + 16);
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t e = 0; e < n; e++) {
        x = x * 1103515245u + 12345u;
        double v = t == CF_BOOL ? (double)((x >> 16) & 1) : (double)((int)((x >> 16) % 61) - 30);
        put(t, h.mem + e * item, v);
    }
    h.v.data = (uint64_t)(uintptr_t)(h.mem + (size_t)(-lo) * item);
    h.v.dtype = t;
    h.v.ndim = ndim;
    h.v.device = -1;
    for (int k = 0; k < ndim; k++) {
        h.v.shape[k] = shape[k];
        h.v.strides[k] = est[k] * (int64_t)item;
    }
    return h;
}

static harr make_c(cf_dtype t, int ndim, const int64_t *shape, unsigned seed)
{
    int64_t est[CF_MAX_DIMS], e = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        est[k] = shape[k] == 1 ? 0 : e;
        e *= shape[k] > 0 ? shape[k] : 1;
    }
    for (int k = 0; k < ndim; k++)
        if (shape[k] == 1)
            est[k] = 1;
    return make(t, ndim, shape, est, seed);
}

static harr copy_of(const harr *a)
{
    harr h = *a;
    h.mem = malloc(a->bytes + 16);
    memcpy(h.mem, a->mem, a->bytes);
    h.v.data = (uint64_t)(uintptr_t)h.mem + (a->v.data - (uint64_t)(uintptr_t)a->mem);
    return h;
}

static void drop(harr *h)
{
    free(h->mem);
    h->mem = NULL;
}

/* Address of element idx (of the loop shape, right-aligned broadcasting) of a view. */
static const char *at(const cf_array *v, int ndim, const int64_t *idx)
{
    const char *p = (const char *)(uintptr_t)v->data;
    int off = ndim - v->ndim;
    for (int k = 0; k < v->ndim; k++)
        if (v->shape[k] != 1)
            p += idx[off + k] * v->strides[k];
    return p;
}

/* The "kernel": out0 = 2 a + b, out1 = a - b, where the mask (if any) is true. */
static void kernel_at(int nout, const cf_array *a, const cf_array *b, const cf_array *o0,
                      const cf_array *o1, const cf_array *mask, int ndim, const int64_t *idx)
{
    if (mask && !get(CF_BOOL, at(mask, ndim, idx)))
        return;
    double x = get(a->dtype, at(a, ndim, idx)), y = get(b->dtype, at(b, ndim, idx));
    put(o0->dtype, (void *)at(o0, ndim, idx), 2 * x + y);
    if (nout > 1)
        put(o1->dtype, (void *)at(o1, ndim, idx), x - y);
}

static void run_loop(int nout, const cf_array *a, const cf_array *b, const cf_array *o0,
                     const cf_array *o1, const cf_array *mask, int ndim, const int64_t *shape)
{
    int64_t idx[CF_MAX_DIMS] = {0}, size = 1;
    for (int k = 0; k < ndim; k++)
        size *= shape[k];
    for (int64_t e = 0; e < size; e++) {
        kernel_at(nout, a, b, o0, o1, mask, ndim, idx);
        for (int k = ndim - 1; k >= 0; k--) {
            if (++idx[k] < shape[k])
                break;
            idx[k] = 0;
        }
    }
}

/* ---- the strided copy ------------------------------------------------------------------------ */

static void test_copy(void)
{
    static const struct {
        int ndim;
        int64_t shape[3], src[3], dst[3];
    } cases[] = {
        {1, {1000}, {1}, {1}},              /* one run */
        {1, {1000}, {-1}, {-1}},            /* reversed both sides: still one run */
        {1, {1000}, {-1}, {1}},             /* reversal */
        {1, {777}, {3}, {1}},               /* gather every third */
        {2, {40, 50}, {50, 1}, {50, 1}},    /* C to C: merges into one run */
        {2, {40, 50}, {1, 40}, {50, 1}},    /* F to C: a transpose */
        {2, {40, 50}, {60, 1}, {50, 1}},    /* padded rows: runs of 50 */
        {2, {40, 50}, {0, 1}, {50, 1}},     /* broadcast rows: expands */
        {3, {4, 5, 6}, {-30, 6, -1}, {30, 6, 1}},
        {3, {4, 5, 6}, {1, 24, 4}, {-1, 20, 100}},
        {2, {300000, 2}, {2, 1}, {2, 1}},   /* long enough for the copy threads */
        {2, {3, 0}, {1, 1}, {1, 1}},        /* empty */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int nd = cases[c].ndim;
        for (int isz = 0; isz < 3; isz++) {
            cf_dtype t = isz == 0 ? CF_INT8 : isz == 1 ? CF_FLOAT32 : CF_FLOAT64;
            int64_t item = (int64_t)cf_dtype_size(t);
            harr src = make(t, nd, cases[c].shape, cases[c].src, (unsigned)c + 1);
            harr dst = make(t, nd, cases[c].shape, cases[c].dst, 99);
            harr want = copy_of(&dst);
            int64_t idx[3] = {0}, size = 1;
            for (int k = 0; k < nd; k++)
                size *= cases[c].shape[k];
            for (int64_t e = 0; e < size; e++) {
                memcpy((void *)at(&want.v, nd, idx), at(&src.v, nd, idx), (size_t)item);
                for (int k = nd - 1; k >= 0; k--) {
                    if (++idx[k] < cases[c].shape[k])
                        break;
                    idx[k] = 0;
                }
            }
            cf_hostpipe_copy((void *)(uintptr_t)dst.v.data, dst.v.strides,
                             (const void *)(uintptr_t)src.v.data, src.v.strides, nd,
                             cases[c].shape, (size_t)item);
            int same = memcmp(dst.mem, want.mem, dst.bytes) == 0;
            if (!same)
                fprintf(stderr, "  copy case %zu, itemsize %lld differs\n", c, (long long)item);
            CHECK(same);
            drop(&src);
            drop(&dst);
            drop(&want);
        }
    }
}

/* ---- the plan -------------------------------------------------------------------------------- */

static cf_array view(cf_dtype t, int ndim, const int64_t *shape, const int64_t *est, uint64_t data,
                     int device)
{
    cf_array v;
    memset(&v, 0, sizeof v);
    v.data = data;
    v.dtype = t;
    v.ndim = ndim;
    v.device = device;
    for (int k = 0; k < ndim; k++) {
        v.shape[k] = shape[k];
        v.strides[k] = est[k] * (int64_t)cf_dtype_size(t);
    }
    return v;
}

static void test_plan(void)
{
    cf_hostpipe_plan *p = cf_malloc(sizeof *p);
    if (!p)
        return;
    /* 1-d: flat chunks of chunk_bytes / itemsize */
    int64_t n[1] = {1000}, one[1] = {1};
    cf_array a = view(CF_FLOAT32, 1, n, one, 0x100000, -1);
    cf_array b = view(CF_FLOAT32, 1, n, one, 0x200000, -1);
    cf_array o = view(CF_FLOAT32, 1, n, one, 0x300000, -1);
    const cf_array *ops[3] = {&a, &b, &o};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3));
    CHECK(p->ndim == 1 && p->split == 0 && p->rows == 64 && p->nchunks == 16);
    CHECK(p->role[0] == CF_HP_STREAMED && p->role[2] == CF_HP_STREAMED && p->nstreamed == 3);
    CHECK(p->chunk_target == 256 && p->slot_bytes == 3 * 256);
    int64_t rows, offs[3];
    cf_hostpipe_chunk(p, 15, &rows, offs);
    CHECK(rows == 1000 - 15 * 64 && offs[0] == 15 * 64 * 4 && offs[2] == 15 * 64 * 4);

    /* float64 output beside float32 inputs: the largest operand sets the rows */
    o.dtype = CF_FLOAT64;
    o.strides[0] = 8;
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3));
    CHECK(p->rows == 32 && p->nchunks == 32 && p->chunk_target == 256);

    /* C-order 2-d: one axis after coalescing */
    int64_t s2[2] = {37, 53}, c2[2] = {53, 1}, f2[2] = {1, 37};
    cf_array a2 = view(CF_FLOAT32, 2, s2, c2, 0x100000, -1);
    cf_array b2 = view(CF_FLOAT32, 2, s2, c2, 0x200000, -1);
    cf_array o2 = view(CF_FLOAT32, 2, s2, c2, 0x300000, -1);
    const cf_array *ops2[3] = {&a2, &b2, &o2};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops2, 0, 2, s2, 1024, 3));
    CHECK(p->ndim == 1 && p->coalesced.shape[0] == 37 * 53 && p->rows == 256);
    /* an F-order input keeps two axes: rows of the output's order */
    a2 = view(CF_FLOAT32, 2, s2, f2, 0x100000, -1);
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops2, 0, 2, s2, 1000, 3));
    CHECK(p->ndim == 2 && p->split == 0 && p->rows == 1000 / (53 * 4) && p->nchunks == 10);
    /* a chunk under one row: split on the inner axis */
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops2, 0, 2, s2, 64, 3));
    CHECK(p->ndim == 2 && p->split == 1 && p->rows == 16 && p->nchunks == 37 * 4);
    cf_hostpipe_chunk(p, 4 * 5 + 3, &rows, offs); /* row 5, the last range of it */
    CHECK(rows == 53 - 48 && offs[0] == 5 * 4 + 48 * 37 * 4 && offs[2] == (5 * 53 + 48) * 4);

    /* broadcast: a row vector is resident when rows are cut, a column streams with stride 0 */
    int64_t r1[1] = {53}, col[2] = {37, 1};
    cf_array row = view(CF_FLOAT32, 1, r1, one, 0x100000, -1);
    int64_t ce[2] = {1, 1};
    cf_array cl = view(CF_FLOAT32, 2, col, ce, 0x200000, -1);
    o2 = view(CF_FLOAT32, 2, s2, c2, 0x300000, -1);
    const cf_array *ops3[3] = {&row, &cl, &o2};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops3, 0, 2, s2, 1000, 3));
    CHECK(p->split == 0 && p->role[0] == CF_HP_RESIDENT && p->role[1] == CF_HP_STREAMED);
    CHECK(p->nresident == 1 && p->nstreamed == 2);
    int64_t str[2], first;
    CHECK(cf_hostpipe_slab(p, 1, 4, str, &first) == 16 && str[0] == 4 && str[1] == 0);
    CHECK(cf_hostpipe_slab(p, 0, 4, str, &first) == 53 * 4 && str[0] == 0 && str[1] == 4);
    /* split on the inner axis: both move with the chunks, the column one element per chunk */
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops3, 0, 2, s2, 64, 3));
    CHECK(p->split == 1 && p->role[0] == CF_HP_STREAMED && p->role[1] == CF_HP_STREAMED);
    CHECK(cf_hostpipe_slab(p, 1, 16, str, &first) == 4 && str[0] == 0);

    /* device operands are read in place */
    b.device = 0;
    o = view(CF_FLOAT32, 1, n, one, 0x300000, -1);
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3));
    CHECK(p->role[1] == CF_HP_DEVICE && p->nstreamed == 2);
    b.device = -1;

    /* negative strides: packed in the same direction, element 0 at the far end */
    a = view(CF_FLOAT32, 1, n, (int64_t[]){-1}, 0x100000 + 999 * 4, -1);
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3));
    CHECK(cf_hostpipe_slab(p, 0, 64, str, &first) == 256 && str[0] == -4 && first == 63 * 4);
    a = view(CF_FLOAT32, 1, n, one, 0x100000, -1);

    /* empty and one-element loops */
    int64_t zero[1] = {0};
    cf_array az = view(CF_FLOAT32, 1, zero, one, 0x100000, -1), bz = az, oz = az;
    oz.data = 0x300000;
    const cf_array *opsz[3] = {&az, &bz, &oz};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, opsz, 0, 1, zero, 256, 3));
    CHECK(p->nchunks == 0);
    cf_array a0 = view(CF_FLOAT32, 0, NULL, NULL, 0x100000, -1), o0 = a0;
    o0.data = 0x300000;
    const cf_array *ops0[3] = {&a0, NULL, &o0};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops0, 0, 0, NULL, 256, 3));
    CHECK(p->nchunks == 1 && p->ndim == 1 && p->rows == 1 && p->role[1] == CF_HP_SCALAR);

    /* automatic chunks: 8 MiB of the largest operand; less for small calls, never under 1 MiB */
    int64_t big[1] = {(int64_t)1 << 26};
    cf_array ab = view(CF_FLOAT32, 1, big, one, 0x10000000, -1), bb = ab, ob = ab;
    bb.data = 0x30000000;
    ob.data = 0x50000000;
    const cf_array *opsb[3] = {&ab, &bb, &ob};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, opsb, 0, 1, big, 0, 3));
    CHECK(p->chunk_target == CF_HOSTPIPE_AUTO_CHUNK && p->nchunks == 32);
    big[0] = (int64_t)1 << 20; /* 4 MiB operands: 1 MiB chunks (4 MiB / 6 is under the floor) */
    ab.shape[0] = bb.shape[0] = ob.shape[0] = big[0];
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, opsb, 0, 1, big, 0, 3));
    CHECK(p->chunk_target == CF_HOSTPIPE_MIN_AUTO_CHUNK && p->nchunks == 4);
    big[0] = (int64_t)15 << 20; /* 60 MiB operands, 3 streams: 10 MiB would be 6 chunks */
    ab.shape[0] = bb.shape[0] = ob.shape[0] = big[0];
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, opsb, 0, 1, big, 0, 3));
    CHECK(p->chunk_target == CF_HOSTPIPE_AUTO_CHUNK && p->nchunks == 8);
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, opsb, 0, 1, big, 0, 8)); /* 60 MiB / 16 */
    CHECK(p->chunk_target == (((size_t)15 << 22) / 16 / 4) * 4 && p->nchunks == 16);
    cf_free(p);
}

static void test_plan_refusals(void)
{
    cf_hostpipe_plan *p = cf_malloc(sizeof *p);
    if (!p)
        return;
    int64_t n[1] = {100}, one[1] = {1}, two[1] = {2}, zero[1] = {0}, rev[1] = {-1};
    cf_array a = view(CF_FLOAT32, 1, n, one, 0x100000, -1);
    cf_array b = view(CF_FLOAT32, 1, n, one, 0x200000, -1);
    cf_array o = a; /* in place: the same view is fine */
    const cf_array *ops[3] = {&a, &b, &o};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3));
    o = view(CF_FLOAT32, 1, n, rev, 0x100000 + 99 * 4, -1); /* a reversed: refused */
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "output 0 overlaps input 0");
    o = view(CF_FLOAT32, 1, n, one, 0x100000 + 8, -1); /* shifted */
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3), CF_ERR_INVALID);
    o = view(CF_FLOAT32, 1, n, one, 0x300000, -1);
    cf_array m = view(CF_BOOL, 1, n, one, 0x300000 + 50, -1); /* the mask inside the output */
    const cf_array *opsm[4] = {&a, &b, &o, &m};
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 1, opsm, 1, 1, n, 256, 3), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "the mask");
    /* two outputs sharing memory */
    cf_array o2 = view(CF_FLOAT32, 1, n, two, 0x300000, -1);
    const cf_array *ops2[4] = {&a, &b, &o, &o2};
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 2, ops2, 0, 1, n, 256, 3), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "output 0 overlaps output 1");
    /* an output with a zero stride overlaps itself */
    o = view(CF_FLOAT32, 1, n, zero, 0x300000, -1);
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "zero stride");
    /* an output of another shape, a scalar output, bad arguments */
    int64_t n2[1] = {50};
    o = view(CF_FLOAT32, 1, n2, one, 0x300000, -1);
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3), CF_ERR_INVALID);
    const cf_array *opsn[3] = {&a, &b, NULL};
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 1, opsn, 0, 1, n, 256, 3), CF_ERR_INVALID);
    CHECK_STATUS(cf_hostpipe_plan_make(NULL, 2, 1, ops, 0, 1, n, 256, 3), CF_ERR_INVALID);
    CHECK_STATUS(cf_hostpipe_plan_make(p, 0, 1, ops, 0, 1, n, 256, 3), CF_ERR_INVALID);
    /* a host allocation failure is reported, not a crash */
    o = view(CF_FLOAT32, 1, n, one, 0x300000, -1);
    cf_test_fail_alloc_after(1, 0);
    CHECK_STATUS(cf_hostpipe_plan_make(p, 2, 1, ops, 0, 1, n, 256, 3), CF_ERR_NOMEM);
    cf_test_fail_alloc_after(0, 0);
    cf_free(p);
}

/* ---- the pipeline, emulated ------------------------------------------------------------------ */

typedef struct ecase {
    const char *name;
    int ndim;
    int64_t shape[3];
    /* per operand (a, b, out0, out1, mask): dtype, ndim, shape, element strides */
    struct {
        cf_dtype t;
        int ndim;
        int64_t shape[3], est[3];
        int device; /* 0: pretend it is device memory (read in place) */
    } op[5];
    int nout, has_where, in_place;
    size_t chunk;
} ecase;

#define C1(n) 1, {n}, {1}, 0
static const ecase ECASES[] = {
    {"1-d", 1, {1000}, {{CF_FLOAT32, C1(1000)}, {CF_FLOAT32, C1(1000)}, {CF_FLOAT32, C1(1000)}},
     1, 0, 0, 256},
    {"1-d one chunk", 1, {1000},
     {{CF_FLOAT32, C1(1000)}, {CF_FLOAT32, C1(1000)}, {CF_FLOAT32, C1(1000)}},
     1, 0, 0, 4000},
    {"1-d chunk boundary - 1", 1, {255},
     {{CF_FLOAT32, C1(255)}, {CF_FLOAT32, C1(255)}, {CF_FLOAT32, C1(255)}},
     1, 0, 0, 64},
    {"1-d chunk boundary + 1", 1, {257},
     {{CF_FLOAT32, C1(257)}, {CF_FLOAT32, C1(257)}, {CF_FLOAT32, C1(257)}},
     1, 0, 0, 64},
    {"1-d reversed and stepped", 1, {1000},
     {{CF_FLOAT32, 1, {1000}, {-1}, 0}, {CF_FLOAT64, 1, {1000}, {3}, 0}, {CF_FLOAT32, C1(1000)}},
     1, 0, 0, 300},
    {"2-d C", 2, {37, 53},
     {{CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}, {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0},
      {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}}, 1, 0, 0, 1000},
    {"2-d F input", 2, {37, 53},
     {{CF_FLOAT32, 2, {37, 53}, {1, 37}, 0}, {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0},
      {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}}, 1, 0, 0, 500},
    {"2-d F input, inner split", 2, {37, 53},
     {{CF_FLOAT32, 2, {37, 53}, {1, 37}, 0}, {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0},
      {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}}, 1, 0, 0, 64},
    {"2-d F all", 2, {37, 53},
     {{CF_FLOAT32, 2, {37, 53}, {1, 37}, 0}, {CF_FLOAT32, 2, {37, 53}, {1, 37}, 0},
      {CF_FLOAT32, 2, {37, 53}, {1, 37}, 0}}, 1, 0, 0, 400},
    {"broadcast row and column", 2, {37, 53},
     {{CF_FLOAT32, 1, {53}, {1}, 0}, {CF_FLOAT32, 2, {37, 1}, {1, 1}, 0},
      {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}}, 1, 0, 0, 400},
    {"broadcast, inner split", 2, {37, 53},
     {{CF_FLOAT32, 1, {53}, {1}, 0}, {CF_FLOAT32, 2, {37, 1}, {1, 1}, 0},
      {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}}, 1, 0, 0, 32},
    {"3-d permuted into an F output", 3, {5, 6, 7},
     {{CF_FLOAT64, 3, {5, 6, 7}, {7, 35, 1}, 0}, {CF_INT16, 2, {6, 1}, {1, 1}, 0},
      {CF_FLOAT32, 3, {5, 6, 7}, {1, 5, 30}, 0}}, 1, 0, 0, 100},
    {"3-d negative strides, 2 outputs", 3, {5, 6, 7},
     {{CF_INT8, 3, {5, 6, 7}, {-42, 7, -1}, 0}, {CF_FLOAT64, 3, {5, 6, 7}, {1, -5, 30}, 0},
      {CF_FLOAT32, 3, {5, 6, 7}, {42, 7, 1}, 0}, {CF_INT32, 3, {5, 6, 7}, {-1, 5, 30}, 0}},
     2, 0, 0, 40},
    {"mixed dtypes, mask, 2 outputs", 2, {40, 30},
     {{CF_INT8, 2, {40, 30}, {30, 1}, 0}, {CF_FLOAT64, 1, {30}, {1}, 0},
      {CF_FLOAT32, 2, {40, 30}, {30, 1}, 0}, {CF_INT32, 2, {40, 30}, {1, 40}, 0},
      {CF_BOOL, 2, {40, 30}, {60, 2}, 0}}, 2, 1, 0, 128},
    {"mask broadcast along the rows", 2, {40, 30},
     {{CF_INT16, 2, {40, 30}, {30, 1}, 0}, {CF_FLOAT64, 2, {40, 30}, {30, 1}, 0},
      {CF_FLOAT32, 2, {40, 30}, {30, 1}, 0}, {0}, {CF_BOOL, 1, {30}, {1}, 0}}, 1, 1, 0, 256},
    {"in place", 2, {37, 53},
     {{CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}, {CF_FLOAT32, 2, {37, 53}, {1, 37}, 0},
      {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}}, 1, 0, 1, 300},
    {"a device operand", 2, {37, 53},
     {{CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}, {CF_FLOAT32, 2, {37, 53}, {1, 37}, 1},
      {CF_FLOAT32, 2, {37, 53}, {53, 1}, 0}}, 1, 0, 0, 300},
    {"one element", 1, {1}, {{CF_FLOAT32, C1(1)}, {CF_FLOAT32, C1(1)}, {CF_FLOAT32, C1(1)}},
     1, 0, 0, 64},
    {"empty", 2, {0, 5}, {{CF_FLOAT32, 2, {0, 5}, {5, 1}, 0}, {CF_FLOAT32, 2, {0, 5}, {5, 1}, 0},
                          {CF_FLOAT32, 2, {0, 5}, {5, 1}, 0}}, 1, 0, 0, 64},
};

/* direct: bit i marks streamed operand i as direct (page-locked host memory, cf_hostpipe_set_direct):
 * its blocks move by DMAs of their own, from and to its own pages where its slab lies packed there
 * (cf_hostpipe_in_place), else through the slot's pinned buffer, as hostpipe.c's chunk_in,
 * chunk_out and unpack_outputs do. */
static void emulate_direct(const ecase *ec, unsigned direct)
{
    harr h[5], want[5];
    int nout = ec->nout, nin = 2, nops = nin + nout + ec->has_where;
    int opi[5] = {0, 1, 2, 3, 4}; /* operand i of the launch -> case slot */
    if (ec->has_where)
        opi[nin + nout] = 4;
    const cf_array *arrays[5];
    memset(h, 0, sizeof h);
    memset(want, 0, sizeof want);
    for (int i = 0; i < nops; i++) {
        int s = opi[i];
        h[i] = make(ec->op[s].t, ec->op[s].ndim, ec->op[s].shape, ec->op[s].est,
                    7u * (unsigned)i + 1);
        if (ec->op[s].device)
            h[i].v.device = 0;
        arrays[i] = &h[i].v;
    }
    if (ec->in_place) { /* out0 is input 0 */
        drop(&h[2]);
        h[2] = copy_of(&h[0]);
        drop(&h[0]);
        h[0] = h[2];
        h[0].mem = NULL;
        arrays[0] = &h[2].v;
    }
    for (int o = 0; o < nout; o++)
        want[nin + o] = copy_of(&h[nin + o]);
    /* the reference, on copies of the outputs (in place: input 0 read from a copy first) */
    harr a0 = copy_of(&h[ec->in_place ? 2 : 0]);
    run_loop(nout, &a0.v, &h[1].v, &want[2].v, nout > 1 ? &want[3].v : NULL,
             ec->has_where ? &h[nin + nout].v : NULL, ec->ndim, ec->shape);
    drop(&a0);

    cf_hostpipe_plan *p = cf_malloc(sizeof *p);
    cf_operand *cops = calloc(4, sizeof *cops);
    cf_array *cw = calloc(1, sizeof *cw);
    CHECK_OK(cf_hostpipe_plan_make(p, nin, nout, arrays, ec->has_where, ec->ndim, ec->shape,
                                   ec->chunk, 3));
    if (cf_t_current_failed)
        goto out;
    for (int i = 0; i < nops; i++)
        if (direct >> i & 1)
            cf_hostpipe_set_direct(p, i, 1);
    size_t slot_before = p->slot_bytes;
    /* residents packed once */
    uint64_t resident[5] = {0};
    char *resbuf[5] = {0};
    for (int i = 0; i < nops; i++)
        if (p->role[i] == CF_HP_RESIDENT) {
            int n = p->ndim - p->split;
            int64_t packed[CF_MAX_DIMS], hs[CF_MAX_DIMS], sh[CF_MAX_DIMS], first;
            size_t bytes = cf_hostpipe_slab(p, i, p->rows, packed, &first);
            for (int a = 0; a < n; a++) {
                hs[a] = cf_hostpipe_stride(p, i, p->split + a);
                sh[a] = a == 0 ? p->rows : p->coalesced.shape[p->split + a];
            }
            resbuf[i] = malloc(bytes);
            cf_hostpipe_copy(resbuf[i] + first, packed, (const void *)(uintptr_t)arrays[i]->data,
                             hs, n, sh, p->item[i]);
            resident[i] = (uint64_t)(uintptr_t)resbuf[i];
        }
    /* the slot's pinned buffer and its "device" buffer, with guard bytes after each */
    char *raw = malloc(2 * (p->slot_bytes + CF_HOSTPIPE_ALIGN + 64));
    const size_t al = CF_HOSTPIPE_ALIGN;
    char *slot = (char *)(((uintptr_t)raw + al - 1) & ~(uintptr_t)(al - 1));
    char *dev = slot + ((p->slot_bytes + 64 + al - 1) & ~(al - 1));
    memset(slot + p->slot_bytes, 0xAB, 64);
    memset(dev + p->slot_bytes, 0xAB, 64);
    cf_hostpipe_layout L;
    int64_t cshape[CF_MAX_DIMS];
    for (int64_t c = 0; c < p->nchunks; c++) {
        /* stale data from the last chunk must not survive */
        memset(slot, 0xCD, p->slot_bytes);
        memset(dev, 0xEF, p->slot_bytes);
        cf_hostpipe_lay_out(p, c, ec->has_where, &L);
        CHECK(L.out_end <= p->slot_bytes && L.h2d <= L.out_end && L.out_start <= L.out_end);
        CHECK(L.end <= p->slot_bytes && L.direct_start >= L.out_end);
        char *start;
        for (int i = 0; i < nops; i++)
            if (p->role[i] == CF_HP_STREAMED) {
                CHECK(L.block[i] % CF_HOSTPIPE_ALIGN == 0);
                int out = i >= nin && i < nin + nout;
                if (p->direct[i])
                    CHECK(L.block[i] >= L.direct_start && L.block[i] + L.bytes[i] <= L.end);
                else
                    CHECK(out ? L.block[i] >= L.out_start && L.block[i] < L.direct_start
                              : L.block[i] < L.out_start);
                if ((!out || ec->has_where) &&
                    (!p->direct[i] || !cf_hostpipe_in_place(p, &L, i, arrays[i], &start)))
                    cf_hostpipe_pack(p, &L, i, arrays[i], slot, 0);
            }
        memcpy(dev, slot, L.h2d); /* the copies the pipeline makes, nothing more */
        for (int i = 0; i < nops; i++) {
            int out = i >= nin && i < nin + nout;
            if (p->role[i] == CF_HP_STREAMED && p->direct[i] && (!out || ec->has_where))
                memcpy(dev + L.block[i],
                       cf_hostpipe_in_place(p, &L, i, arrays[i], &start) ? start
                                                                         : slot + L.block[i],
                       L.bytes[i]);
        }
        cf_hostpipe_views(p, &L, arrays, (uint64_t)(uintptr_t)dev, resident, -1, cops, cw, cshape);
        int cnd = p->ndim - p->split;
        run_loop(nout, &cops[0].array, &cops[1].array, &cops[2].array,
                 nout > 1 ? &cops[3].array : NULL, ec->has_where ? cw : NULL, cnd, cshape);
        memcpy(slot + L.out_start, dev + L.out_start, L.out_end - L.out_start);
        for (int i = nin; i < nin + nout; i++)
            if (p->role[i] == CF_HP_STREAMED && p->direct[i]) {
                if (cf_hostpipe_in_place(p, &L, i, arrays[i], &start))
                    memcpy(start, dev + L.block[i], L.bytes[i]);
                else
                    memcpy(slot + L.block[i], dev + L.block[i], L.bytes[i]);
            }
        for (int i = nin; i < nin + nout; i++)
            if (p->role[i] == CF_HP_STREAMED &&
                (!p->direct[i] || !cf_hostpipe_in_place(p, &L, i, arrays[i], &start)))
                cf_hostpipe_pack(p, &L, i, arrays[i], slot, 1);
    }
    CHECK(p->slot_bytes == slot_before);
    for (int g = 0; g < 64; g++)
        CHECK((unsigned char)slot[p->slot_bytes + g] == 0xAB &&
              (unsigned char)dev[p->slot_bytes + g] == 0xAB);
    for (int o = 0; o < nout; o++) {
        int same = memcmp(h[nin + o].mem, want[nin + o].mem, want[nin + o].bytes) == 0;
        if (!same)
            fprintf(stderr, "  case '%s': output %d differs (split %d, rows %lld, %lld chunks)\n",
                    ec->name, o, p->split, (long long)p->rows, (long long)p->nchunks);
        CHECK(same);
    }
    free(raw);
    for (int i = 0; i < 5; i++)
        free(resbuf[i]);
out:
    cf_free(p);
    free(cops);
    free(cw);
    for (int i = 0; i < 5; i++) {
        drop(&h[i]);
        drop(&want[i]);
    }
}

static void emulate(const ecase *ec) { emulate_direct(ec, 0); }

static void test_emulated(void)
{
    for (size_t c = 0; c < sizeof ECASES / sizeof ECASES[0]; c++) {
        int before = cf_t_current_failed;
        cf_t_current_failed = 0;
        emulate(&ECASES[c]);
        if (cf_t_current_failed)
            fprintf(stderr, "  (in case '%s')\n", ECASES[c].name);
        cf_t_current_failed |= before;
    }
    /* the same with operands DMA'd in place (page-locked): all of them, inputs only, outputs
     * only, every other one; in-place slabs and strided ones that go through the pinned buffer */
    static const unsigned masks[] = {0x1F, 0x3, 0xC, 0x5, 0xA, 0x10};
    for (size_t c = 0; c < sizeof ECASES / sizeof ECASES[0]; c++)
        for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++) {
            int before = cf_t_current_failed;
            cf_t_current_failed = 0;
            emulate_direct(&ECASES[c], masks[m]);
            if (cf_t_current_failed)
                fprintf(stderr, "  (in case '%s', direct 0x%x)\n", ECASES[c].name, masks[m]);
            cf_t_current_failed |= before;
        }
    /* every chunk size from one element to the whole, on a 2-d F-order input with a mask */
    for (size_t chunk = 1; chunk <= 64 * 4 + 8; chunk += 7) {
        ecase ec = ECASES[13];
        ec.chunk = chunk;
        int before = cf_t_current_failed;
        cf_t_current_failed = 0;
        emulate(&ec);
        if (cf_t_current_failed)
            fprintf(stderr, "  (mask case, chunk %zu)\n", chunk);
        cf_t_current_failed |= before;
    }
}

/* ---- the host path's policy (pure) ------------------------------------------------------------ */

static void test_policy(void)
{
    /* whether to ask the driver, and the strategy: (span, pinned, register_min) -> strategy */
    const size_t q = CF_HOSTPIPE_PINNED_QUERY_MIN;
    CHECK(!cf_hostpipe_ask_pinned(0) && !cf_hostpipe_ask_pinned(q - 1) && cf_hostpipe_ask_pinned(q));
    static const struct {
        size_t span;
        int dense, pinned;
        size_t register_min;
        int want;
    } T[] = {
        {4096, 1, 0, 0, CF_HOST_STAGE},             /* small, pageable */
        {(size_t)1 << 30, 1, 0, 0, CF_HOST_STAGE},  /* registration off: stage whatever the size */
        {(size_t)1 << 30, 1, 1, 0, CF_HOST_PINNED}, /* page-locked already: in place, knob or not */
        {(size_t)1 << 20, 1, 1, (size_t)1 << 30, CF_HOST_PINNED},
        {(size_t)1 << 20, 0, 1, 0, CF_HOST_PINNED}, /* strided but pinned: in place where it can */
        {(size_t)1 << 20, 1, 0, (size_t)1 << 20, CF_HOST_REGISTER}, /* at the threshold */
        {((size_t)1 << 20) - 1, 1, 0, (size_t)1 << 20, CF_HOST_STAGE}, /* just under it */
        {(size_t)1 << 30, 0, 0, 1, CF_HOST_STAGE}, /* strided or broadcast: never registered */
        {1, 1, 0, 1, CF_HOST_REGISTER},
    };
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++)
        CHECK(cf_hostpipe_operand_policy(T[t].span, T[t].dense, T[t].pinned, T[t].register_min) ==
              T[t].want);
    /* copy threads: (knob, cpus) -> threads */
    static const int TH[][3] = {{0, 16, CF_HOST_AUTO_THREADS}, {0, 4, 4}, {0, 0, 1}, {0, -1, 1},
                                {3, 16, 3}, {1, 16, 1}, {40, 16, 40}, {0, 1, 1}};
    for (size_t t = 0; t < sizeof TH / sizeof TH[0]; t++)
        CHECK(cf_hostpipe_copy_threads(TH[t][0], TH[t][1]) == TH[t][2]);
    /* page spans: rounded out, sorted, merged where they overlap or touch */
    {
        uintptr_t lo[4] = {0x5010, 0x1000, 0x2fff, 0x9000}, hi[4] = {0x6000, 0x2001, 0x3001, 0x9001};
        int m = cf_hostpipe_merge_spans(4, lo, hi, 0x1000);
        /* [0x1000,0x3000) and [0x2000,0x4000) merge; [0x5000,0x6000); [0x9000,0xa000) */
        CHECK(m == 3);
        CHECK(lo[0] == 0x1000 && hi[0] == 0x4000);
        CHECK(lo[1] == 0x5000 && hi[1] == 0x6000);
        CHECK(lo[2] == 0x9000 && hi[2] == 0xa000);
        uintptr_t l1[2] = {0x1000, 0x1800}, h1[2] = {0x1800, 0x2000}; /* one page, twice */
        CHECK(cf_hostpipe_merge_spans(2, l1, h1, 0x1000) == 1 && l1[0] == 0x1000 && h1[0] == 0x2000);
        uintptr_t l2[2] = {0x3000, 0x1000}, h2[2] = {0x4000, 0x3000}; /* touching: one range */
        CHECK(cf_hostpipe_merge_spans(2, l2, h2, 0x1000) == 1 && l2[0] == 0x1000 && h2[0] == 0x4000);
        CHECK(cf_hostpipe_merge_spans(0, l2, h2, 0x1000) == 0);
    }
    /* in place: a contiguous slab is one DMA from the user's pages (its lowest byte), a strided
     * one is not */
    cf_hostpipe_plan *p = cf_malloc(sizeof *p);
    if (!p)
        return;
    int64_t n[1] = {1000}, one[1] = {1}, rev[1] = {-1}, three[1] = {3};
    uint64_t base = 0x100000;
    cf_array a = view(CF_FLOAT32, 1, n, one, base, -1);
    cf_array b = view(CF_FLOAT32, 1, n, rev, 0x200000 + 999 * 4, -1);
    cf_array o = view(CF_FLOAT32, 1, n, three, 0x300000, -1);
    const cf_array *arr[3] = {&a, &b, &o};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, arr, 0, 1, n, 400, 3)); /* 100 elements a chunk */
    for (int i = 0; i < 3; i++)
        cf_hostpipe_set_direct(p, i, 1);
    cf_hostpipe_layout L;
    cf_hostpipe_lay_out(p, 2, 0, &L);
    char *start = NULL;
    CHECK(cf_hostpipe_in_place(p, &L, 0, &a, &start) && start == (char *)(uintptr_t)(base + 800));
    /* reversed: chunk 2 is elements 200..299 of b, at b.data - 299*4 .. b.data - 200*4 */
    CHECK(cf_hostpipe_in_place(p, &L, 1, &b, &start) &&
          start == (char *)(uintptr_t)(0x200000 + 999 * 4 - 299 * 4));
    CHECK(!cf_hostpipe_in_place(p, &L, 2, &o, &start));
    CHECK(L.bytes[0] == 400 && L.bytes[1] == 400 && L.bytes[2] == 400);
    CHECK(L.h2d == 0 && L.out_end == L.out_start); /* nothing packed: every operand direct */
    /* a device operand cannot be made direct */
    cf_array d = a;
    d.device = 0;
    const cf_array *arr2[3] = {&d, &b, &o};
    CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, arr2, 0, 1, n, 400, 3));
    cf_hostpipe_set_direct(p, 0, 1);
    CHECK(p->direct[0] == 0);
    cf_free(p);
}

/* Which new results take a page-locked block (no GPU needed: bookkeeping only): none under the
 * threshold; a size seen for the first time not (a one-off call keeps ordinary memory), its
 * second request yes; sizes are compared in 1 MiB steps; 16 other requests later it is forgotten;
 * a threshold of 0 turns it off. */
static void test_result_wanted(void)
{
    cf_hostpipe_config c0, c;
    cf_hostpipe_get_config(&c0);
    c = c0;
    c.result_pinned_min = (size_t)1 << 20;
    CHECK_OK(cf_hostpipe_configure(&c));
    const size_t mib = (size_t)1 << 20;
    CHECK(cf_hostpipe_result_wanted(mib - 1) == 0);
    CHECK(cf_hostpipe_result_wanted(mib - 1) == 0); /* under the threshold: never */
    CHECK(cf_hostpipe_result_wanted(3 * mib + 5) == 0);
    CHECK(cf_hostpipe_result_wanted(3 * mib + 5) == 1);
    CHECK(cf_hostpipe_result_wanted(4 * mib) == 1); /* the same 4 MiB step */
    for (size_t k = 0; k < 16; k++)
        CHECK(cf_hostpipe_result_wanted((100 + k) * mib) == 0);
    CHECK(cf_hostpipe_result_wanted(3 * mib + 5) == 0); /* forgotten */
    c.result_pinned_min = 0;
    CHECK_OK(cf_hostpipe_configure(&c));
    CHECK(cf_hostpipe_result_wanted(3 * mib + 5) == 0);
    CHECK(cf_hostpipe_result_wanted(3 * mib + 5) == 0);
    CHECK_OK(cf_hostpipe_configure(&c0));
}

/* The host path's knobs through the environment, and copies capped at N threads. */
static void test_host_knobs(void)
{
    setenv("CUFUNC_HOST_THREADS", "4", 1);
    setenv("CUFUNC_HOST_REGISTER_MIN", "1048576", 1);
    CHECK_OK(cf_hostpipe_configure(NULL));
    cf_hostpipe_config c;
    cf_hostpipe_get_config(&c);
    CHECK(c.threads == 4 && c.register_min == (size_t)1 << 20);
    setenv("CUFUNC_HOST_RESULT_PINNED_MIN", "65536", 1);
    CHECK_OK(cf_hostpipe_configure(NULL));
    cf_hostpipe_get_config(&c);
    CHECK(c.result_pinned_min == 65536);
    unsetenv("CUFUNC_HOST_RESULT_PINNED_MIN");
    setenv("CUFUNC_HOST_THREADS", "66", 1); /* out of range: the default */
    setenv("CUFUNC_HOST_REGISTER_MIN", "-1", 1);
    CHECK_OK(cf_hostpipe_configure(NULL));
    cf_hostpipe_get_config(&c);
    CHECK(c.threads == 0 && c.register_min == 0 && c.result_pinned_min == (size_t)1 << 20);
    cf_hostpipe_config bad = c;
    bad.threads = 66;
    CHECK_STATUS(cf_hostpipe_configure(&bad), CF_ERR_INVALID);
    unsetenv("CUFUNC_HOST_THREADS");
    unsetenv("CUFUNC_HOST_REGISTER_MIN");
    CHECK_OK(cf_hostpipe_configure(NULL));
    /* a copy split among at most N threads is still every byte */
    size_t len = (size_t)3 << 20;
    unsigned char *src = malloc(len), *dst = malloc(len);
    if (!src || !dst) {
        free(src);
        free(dst);
        return;
    }
    for (size_t k = 0; k < len; k++)
        src[k] = (unsigned char)(k * 131u + 7u);
    static const int caps[] = {1, 2, 3, 5, 0, 17};
    for (size_t t = 0; t < sizeof caps / sizeof caps[0]; t++) {
        memset(dst, 0, len);
        cf_threadpool_memcpy_n(dst + 1, src + 3, len - 5, caps[t]);
        CHECK(dst[0] == 0 && memcmp(dst + 1, src + 3, len - 5) == 0 && dst[len - 4] == 0);
    }
    /* the pool grows to what a copy asks for, unless its size was fixed */
    const char *env = getenv("CUFUNC_COPY_THREADS");
    char *saved = env ? strdup(env) : NULL;
    unsetenv("CUFUNC_COPY_THREADS");
    CHECK_OK(cf_threadpool_configure(-1));
    int base = cf_threadpool_workers();
    cf_threadpool_memcpy_n(dst, src, len, base + 3);
    CHECK(cf_threadpool_workers() == base + 2);
    CHECK_OK(cf_threadpool_configure(2));
    cf_threadpool_memcpy_n(dst, src, len, 9);
    CHECK(cf_threadpool_workers() == 2);
    setenv("CUFUNC_COPY_THREADS", "1", 1);
    CHECK_OK(cf_threadpool_configure(-1));
    cf_threadpool_memcpy_n(dst, src, len, 9);
    CHECK(cf_threadpool_workers() == 1);
    CHECK(memcmp(dst, src, len) == 0);
    if (saved)
        setenv("CUFUNC_COPY_THREADS", saved, 1);
    else
        unsetenv("CUFUNC_COPY_THREADS");
    free(saved);
    CHECK_OK(cf_threadpool_configure(-1));
    free(src);
    free(dst);
}

/* ---- the chunks' kernels compile ------------------------------------------------------------- */

static const char *ADD2 =
    "#include \"cufunc/runtime.cuh\"\n"
    "__device__ cf_float32 add2(cf_float32 a, cf_float32 b) { return 2 * a + b; }\n";

static void test_chunk_kernels_compile(void)
{
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("add2", 2, 1, &u));
    cf_dtype f4[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    CHECK_OK(cf_ufunc_add_loop(u, f4, ADD2, "add2", NULL, 0, NULL));
    if (!u)
        return;
    cf_hostpipe_plan *p = cf_malloc(sizeof *p);
    cf_operand *cops = calloc(3, sizeof *cops);
    cf_array *cw = calloc(1, sizeof *cw);
    const size_t cases[] = {0, 5, 6, 9, 10}; /* 1-d; F input (rows, inner split); broadcast */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const ecase *ec = &ECASES[cases[c]];
        harr h[3];
        const cf_array *arrays[3];
        for (int i = 0; i < 3; i++) {
            h[i] = make(ec->op[i].t, ec->op[i].ndim, ec->op[i].shape, ec->op[i].est, 1);
            arrays[i] = &h[i].v;
        }
        CHECK_OK(cf_hostpipe_plan_make(p, 2, 1, arrays, 0, ec->ndim, ec->shape, ec->chunk, 3));
        uint64_t resident[3] = {0x7000000, 0x7100000, 0x7200000};
        cf_hostpipe_layout L;
        int64_t cshape[CF_MAX_DIMS];
        /* the first chunk and the last (a shorter range) */
        for (int64_t k = 0; k < 2; k++) {
            cf_hostpipe_lay_out(p, k ? p->nchunks - 1 : 0, 0, &L);
            cf_hostpipe_views(p, &L, arrays, 0x10000000, resident, 0, cops, cw, cshape);
            char *src = NULL;
            CHECK_OK(cf_ufunc_kernel_source(u, 0, cops, NULL, p->ndim - p->split, cshape, &src));
            if (!src)
                continue;
            void *image = NULL;
            size_t size = 0;
            int is_ptx = 0;
            cf_status st = cf_compile_source(src, NULL, 0, 9, 0, &image, &size, &is_ptx);
            if (st != CF_OK)
                fprintf(stderr, "  case '%s': %s\n", ec->name, cf_last_error());
            CHECK(st == CF_OK && size > 0);
            cf_free_buffer(image);
            cf_free_buffer(src);
        }
        for (int i = 0; i < 3; i++)
            drop(&h[i]);
    }
    cf_free(p);
    free(cops);
    free(cw);
    cf_ufunc_free(u);
}

/* ---- configuration --------------------------------------------------------------------------- */

static void test_config(void)
{
    cf_hostpipe_config c, bad;
    setenv("CUFUNC_HOSTPIPE_CHUNK_KB", "64", 1);
    setenv("CUFUNC_HOSTPIPE_STREAMS", "5", 1);
    setenv("CUFUNC_HOSTPIPE_MIN_KB", "1", 1);
    CHECK_OK(cf_hostpipe_configure(NULL));
    cf_hostpipe_get_config(&c);
    CHECK(c.chunk_bytes == 64 << 10 && c.streams == 5 && c.min_bytes == 1024);
    CHECK(!cf_hostpipe_wanted(1023) && cf_hostpipe_wanted(1024) && cf_hostpipe_wanted(1 << 30));
    setenv("CUFUNC_HOSTPIPE_STREAMS", "1", 1); /* out of range: the default */
    setenv("CUFUNC_HOSTPIPE_CHUNK_KB", "x", 1);
    unsetenv("CUFUNC_HOSTPIPE_MIN_KB");
    CHECK_OK(cf_hostpipe_configure(NULL));
    cf_hostpipe_get_config(&c);
    /* every host call takes the pipeline by default (small ones in one chunk) */
    CHECK(c.chunk_bytes == 0 && c.streams == 3 && c.min_bytes == 0);
    CHECK(!cf_hostpipe_wanted(0) && cf_hostpipe_wanted(1) && cf_hostpipe_wanted(4 << 20));
    CHECK(c.threads == 0 && c.register_min == 0);
    bad = c;
    bad.streams = 1;
    CHECK_STATUS(cf_hostpipe_configure(&bad), CF_ERR_INVALID);
    bad = c;
    bad.chunk_bytes = 100;
    CHECK_STATUS(cf_hostpipe_configure(&bad), CF_ERR_INVALID);
    cf_hostpipe_config got;
    cf_hostpipe_get_config(&got);
    CHECK(got.streams == 3 && got.chunk_bytes == 0); /* refused settings change nothing */
    unsetenv("CUFUNC_HOSTPIPE_STREAMS");
    unsetenv("CUFUNC_HOSTPIPE_CHUNK_KB");
    CHECK_OK(cf_hostpipe_configure(NULL));
    cf_hostpipe_info info;
    cf_hostpipe_last(&info);
    CHECK(info.calls >= 0);
    cf_hostpipe_last(NULL);
    cf_hostpipe_get_config(NULL);
    /* misuse is reported */
    CHECK_STATUS(cf_ufunc_launch_host(NULL, 0, NULL, NULL, NULL, 0, NULL, NULL), CF_ERR_INVALID);
}

/* ---- on a GPU -------------------------------------------------------------------------------- */

static cf_ufunc *make_add2(void)
{
    cf_ufunc *u = NULL;
    CHECK_OK(cf_ufunc_create("add2", 2, 1, &u));
    cf_dtype f4[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    CHECK_OK(cf_ufunc_add_loop(u, f4, ADD2, "add2", NULL, 0, NULL));
    return u;
}

/* Launch case ECASES[ci] for real (device operands are copied to the device first); compare with
 * the loop computed on the host. */
static void gpu_case(cf_ufunc *u, cf_stream *s, const ecase *ec, int64_t *chunks)
{
    harr h[3], want;
    cf_operand *ops = calloc(3, sizeof *ops);
    uint64_t dev = 0;
    for (int i = 0; i < 3; i++) {
        h[i] = make(CF_FLOAT32, ec->op[i].ndim, ec->op[i].shape, ec->op[i].est, (unsigned)i + 3);
        ops[i].array = h[i].v;
    }
    if (ec->op[1].device) { /* the whole buffer moves; the view keeps its offset into it */
        CHECK_OK(cf_mem_alloc(s, h[1].bytes, &dev));
        CHECK_OK(cf_memcpy_htod(s, dev, h[1].mem, h[1].bytes, 1));
        ops[1].array.data = dev + (h[1].v.data - (uint64_t)(uintptr_t)h[1].mem);
        ops[1].array.device = 0;
    }
    /* in place: input 0 is the output's view (of the same layout in these cases) */
    harr a0 = copy_of(ec->in_place ? &h[2] : &h[0]);
    if (ec->in_place)
        ops[0].array = h[2].v;
    want = copy_of(&h[2]);
    run_loop(1, &a0.v, &h[1].v, &want.v, NULL, NULL, ec->ndim, ec->shape);
    drop(&a0);
    cf_hostpipe_info info;
    memset(&info, 0, sizeof info);
    CHECK_OK(cf_ufunc_launch_host(u, 0, s, ops, NULL, ec->ndim, ec->shape, &info));
    int same = memcmp(h[2].mem, want.mem, want.bytes) == 0;
    if (!same)
        fprintf(stderr, "  case '%s' differs on the GPU\n", ec->name);
    CHECK(same);
    *chunks = info.chunks;
    CHECK_OK(cf_mem_free(s, dev));
    for (int i = 0; i < 3; i++)
        drop(&h[i]);
    drop(&want);
    free(ops);
}

static void test_on_gpu(void)
{
    NEED_GPU();
    cf_stream *s = NULL;
    CHECK_OK(cf_stream_create(0, &s));
    cf_ufunc *u = make_add2();
    int64_t base = cf_mem_outstanding();
    cf_hostpipe_config cfg = {1024, 3, 0};
    CHECK_OK(cf_hostpipe_configure(&cfg));
    const size_t cases[] = {0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t chunks = 0;
        gpu_case(u, s, &ECASES[cases[c]], &chunks);
        CHECK(chunks >= 1);
    }
    CHECK(cf_mem_outstanding() == base);

    /* 1-d, several MiB in 64 KiB chunks: many chunks on 3 streams */
    int64_t n[1] = {(int64_t)3 << 20};
    harr a = make_c(CF_FLOAT32, 1, n, 1), b = make_c(CF_FLOAT32, 1, n, 2);
    harr o = make_c(CF_FLOAT32, 1, n, 3);
    harr want = copy_of(&o);
    run_loop(1, &a.v, &b.v, &want.v, NULL, NULL, 1, n);
    cf_operand ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].array = a.v;
    ops[1].array = b.v;
    ops[2].array = o.v;
    cfg.chunk_bytes = 64 << 10;
    CHECK_OK(cf_hostpipe_configure(&cfg));
    cf_hostpipe_info info, last;
    CHECK_OK(cf_ufunc_launch_host(u, 0, s, ops, NULL, 1, n, &info));
    CHECK(memcmp(o.mem, want.mem, o.bytes) == 0);
    CHECK(info.chunks == (3 << 20) * 4 / (64 << 10) && info.streams == 3 && info.split_axis == 0);
    cf_hostpipe_last(&last);
    CHECK(last.calls == info.calls && last.chunks == info.chunks);

    /* a failure with chunks in flight: reported, buffers back in the pool, the next call works */
    memset(o.mem, 0, o.bytes);
    cf_hostpipe_test_fail_at(5);
    CHECK_STATUS(cf_ufunc_launch_host(u, 0, s, ops, NULL, 1, n, &info), CF_ERR_CUDA);
    CHECK_CONTAINS(cf_last_error(), "injected failure before chunk 5");
    cf_hostpipe_test_fail_at(-1);
    CHECK(cf_mem_outstanding() == base);
    CHECK_OK(cf_ufunc_launch_host(u, 0, s, ops, NULL, 1, n, &info));
    CHECK(memcmp(o.mem, want.mem, o.bytes) == 0);

    /* a kernel that does not compile: the first chunk's launch fails, nothing leaks */
    cf_ufunc *bad = NULL;
    CHECK_OK(cf_ufunc_create("bad", 2, 1, &bad));
    cf_dtype f4[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    CHECK_OK(cf_ufunc_add_loop(bad, f4, "__device__ float nope(float a, float b) { return a +; }\n",
                               "nope", NULL, 0, NULL));
    CHECK_STATUS(cf_ufunc_launch_host(bad, 0, s, ops, NULL, 1, n, &info), CF_ERR_COMPILE);
    CHECK(cf_mem_outstanding() == base);
    CHECK_OK(cf_ufunc_launch_host(u, 0, s, ops, NULL, 1, n, &info));
    CHECK(memcmp(o.mem, want.mem, o.bytes) == 0);
    cf_ufunc_free(bad);

    CHECK_OK(cf_stream_synchronize(s));
    CHECK_OK(cf_hostpipe_configure(NULL));
    drop(&a);
    drop(&b);
    drop(&o);
    drop(&want);
    cf_ufunc_free(u);
    cf_stream_free(s);
}

/* Page-locked result blocks: reused from the cache when they fit (at most twice the size),
 * counted while out, page-locked, and the bad argument refused. */
static void test_result_blocks(void)
{
    NEED_GPU();
    size_t out0, cached0, out, cached;
    cf_hostpipe_result_stats(&out0, &cached0);
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(cf_hostpipe_result_alloc((size_t)3 << 20, &a));
    CHECK(a != NULL && ((uintptr_t)a & 4095) == 0);
    CHECK(cf_host_is_pinned(a) && cf_host_is_pinned((char *)a + ((size_t)3 << 20) - 1));
    memset(a, 1, (size_t)3 << 20);
    cf_hostpipe_result_stats(&out, &cached);
    CHECK(out == out0 + ((size_t)3 << 20));
    cf_hostpipe_result_free(a);
    cf_hostpipe_result_stats(&out, &cached);
    CHECK(out == out0 && cached == cached0 + ((size_t)3 << 20));
    CHECK_OK(cf_hostpipe_result_alloc((size_t)2 << 20, &b)); /* fits: the same block */
    CHECK(b == a);
    CHECK_OK(cf_hostpipe_result_alloc((size_t)1 << 10, &c)); /* too small for it: a new one */
    CHECK(c != NULL && c != b);
    cf_hostpipe_result_free(b);
    /* A block smaller than the 1 MiB allocation step, given back and asked for again, is the
     * same block (once, a 120 KiB result never fitted the 1 MiB block made for it, so
     * every call paid cuMemHostAlloc, ~1.6 ms) */
    void *d = NULL;
    cf_hostpipe_result_free(c);
    CHECK_OK(cf_hostpipe_result_alloc((size_t)1 << 10, &d));
    CHECK(d == c);
    c = d;
    cf_hostpipe_result_free(c);
    CHECK_OK(cf_hostpipe_result_alloc((size_t)120 << 10, &d));
    CHECK(d == c);
    c = d;
    cf_hostpipe_result_free(c);
    cf_hostpipe_result_free(NULL);
    cf_hostpipe_result_stats(&out, NULL);
    CHECK(out == out0);
    CHECK_STATUS(cf_hostpipe_result_alloc(16, NULL), CF_ERR_INVALID);
}

int main(void)
{
    RUN(test_copy);
    RUN(test_plan);
    RUN(test_plan_refusals);
    RUN(test_emulated);
    RUN(test_chunk_kernels_compile);
    RUN(test_config);
    RUN(test_policy);
    RUN(test_host_knobs);
    RUN(test_result_wanted);
    RUN(test_on_gpu);
    RUN(test_result_blocks);
    return SUMMARY();
}
