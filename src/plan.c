/* plan.c: broadcasting and axis coalescing for element-wise loops (include/cufunc/plan.h; the
 * launch path's stack plan in plan.h). The one planner: ufunc.c, gufunc.c, reduce.c and hostpipe.c
 * all plan here. */
#include <stdio.h>
#include <string.h>

#include "plan.h"

#include "alloc.h"
#include "error.h"
#include "util.h"
#include "strbuf.h"


cf_status cf_broadcast_shapes(int n, const int *ndims, const int64_t *const *shapes, int *out_ndim,
                              int64_t out_shape[CF_MAX_DIMS])
{
    if (n < 0 || (n > 0 && (!ndims || !shapes)) || !out_ndim || !out_shape)
        return cf_error_set(CF_ERR_INVALID, "cf_broadcast_shapes: bad arguments");
    int nd = 0;
    for (int i = 0; i < n; i++) {
        if (ndims[i] < 0 || ndims[i] > CF_MAX_DIMS)
            return cf_error_set(CF_ERR_INVALID, "operand %d has %d dimensions (at most %d)", i,
                                ndims[i], CF_MAX_DIMS);
        if (ndims[i] > nd)
            nd = ndims[i];
    }
    for (int k = 0; k < nd; k++)
        out_shape[k] = 1;
    for (int i = 0; i < n; i++) {
        int off = nd - ndims[i];
        for (int k = 0; k < ndims[i]; k++) {
            int64_t e = shapes[i][k], *o = &out_shape[off + k];
            if (e == *o || e == 1)
                continue;
            if (*o == 1) {
                *o = e;
                continue;
            }
            /* NumPy's wording, shapes separated (and ended) by a space. */
            char msg[2048], one[256];
            size_t len = (size_t)snprintf(msg, sizeof msg,
                                          "operands could not be broadcast together with shapes ");
            for (int j = 0; j < n && len < sizeof msg; j++) {
                cf_format_shape(one, sizeof one, ndims[j], shapes[j]);
                len += (size_t)snprintf(msg + len, sizeof msg - len, "%s ", one);
            }
            return cf_error_set(CF_ERR_INVALID, "%s", msg);
        }
    }
    *out_ndim = nd;
    return CF_OK;
}

/* ---- the planner ------------------------------------------------------------------------------
 *
 * One algorithm (plan_core) behind both entry points: cf_plan_elementwise (the public cf_plan, room
 * for CF_MAX_OPERANDS x CF_MAX_DIMS strides: 35 KiB) and cf_plan_small_make (plan.h: the launch
 * path of ufunc.c, about 4 KiB on the caller's stack, over pointers to the operands, so a small
 * call copies no views and touches no heap). The output arrays are passed in with their row pitch;
 * plan_core is inlined into each entry point, where the pitch is a constant. */

/* Where plan_core writes: strides of operand i over axis k at strides[i * pitch + k]; perm may be
 * NULL. */
typedef struct plan_out {
    int *ndim;
    int64_t *size;
    int *index32;
    int64_t *shape;
    int64_t *strides;
    int pitch;
    int *perm;
    unsigned char *contiguous;
} plan_out;

/* Inlined into each entry point, where pitch and max_axes become constants (a function pointer
 * or an out-of-line call with a run-time pitch made the small plan about 30% slower). */
#define PLAN_INLINE __attribute__((always_inline)) static inline

#define STRIDE(o, i, k) ((o)->strides[(size_t)(i) * (size_t)(o)->pitch + (size_t)(k)])

/* Whether axis a should iterate outside axis b: the first operand with a non-zero stride on both
 * decides (larger stride = outer); ties and all-zero leave the original order. */
PLAN_INLINE int outer_before(const plan_out *o, int nops, int a, int b)
{
    for (int i = 0; i < nops; i++) {
        int64_t sa = cf_abs64(STRIDE(o, i, a)), sb = cf_abs64(STRIDE(o, i, b));
        if (sa && sb && sa != sb)
            return sa > sb;
    }
    return a < b;
}

/* Returns CF_OK, an error, or PLAN_TOO_MANY_AXES (nothing written but *ndim, *size) when more
 * than `max_axes` axes have an extent above 1. Arguments are checked by the caller. */
#define PLAN_TOO_MANY_AXES 1
PLAN_INLINE cf_status plan_core(const plan_out *o, int max_axes, int nops,
                                const cf_array *const *ops, int ndim, const int64_t *shape)
{
    /* Only the entries used are written (strides[i][k] for i < nops, k < ndim), never the whole:
     * plans are made on every call. */
    int64_t size = 1;
    *o->ndim = 0;
    *o->index32 = 1;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] < 0)
            return cf_error_set(CF_ERR_INVALID, "negative loop extent %lld", (long long)shape[k]);
        size *= shape[k];
    }
    *o->size = size;

    /* 1. Broadcast every operand onto the loop shape; drop extent-1 axes as we go. */
    int axes[CF_MAX_DIMS], nax = 0;
    for (int k = 0; k < ndim; k++)
        if (shape[k] != 1)
            axes[nax++] = k;
    if (nax > max_axes) {
        *o->ndim = nax;
        return PLAN_TOO_MANY_AXES;
    }
    for (int i = 0; i < nops; i++) {
        const cf_array *a = ops[i];
        if (a->ndim > ndim)
            return cf_error_set(CF_ERR_INVALID, "operand %d has %d dimensions, more than the "
                                "loop's %d", i, a->ndim, ndim);
        int off = ndim - a->ndim;
        for (int j = 0; j < nax; j++) {
            int k = axes[j];
            int64_t st = 0;
            if (k >= off) {
                int64_t e = a->shape[k - off];
                if (e == shape[k])
                    st = a->strides[k - off];
                else if (e != 1)
                    return cf_error_set(CF_ERR_INVALID, "operand %d (extent %lld in axis %d) does "
                                        "not broadcast to the loop extent %lld", i, (long long)e,
                                        k - off, (long long)shape[k]);
            }
            STRIDE(o, i, j) = st;
        }
    }
    for (int j = 0; j < nax; j++) {
        o->shape[j] = shape[axes[j]];
        if (o->perm)
            o->perm[j] = axes[j];
    }
    int nd = nax;

    /* An empty loop or a single element needs no axes at all. */
    if (size <= 1) {
        nd = 0;
        goto finish;
    }

    /* 2. Order axes outer-to-inner by memory order (insertion sort: ndim is small and the sort
     * must be stable so equal axes keep the caller's order). */
    for (int j = 1; j < nd; j++) {
        for (int m = j; m > 0 && outer_before(o, nops, m, m - 1); m--) {
            int64_t t = o->shape[m];
            o->shape[m] = o->shape[m - 1];
            o->shape[m - 1] = t;
            if (o->perm) {
                int tp = o->perm[m];
                o->perm[m] = o->perm[m - 1];
                o->perm[m - 1] = tp;
            }
            for (int i = 0; i < nops; i++) {
                int64_t ts = STRIDE(o, i, m);
                STRIDE(o, i, m) = STRIDE(o, i, m - 1);
                STRIDE(o, i, m - 1) = ts;
            }
        }
    }

    /* 3. Merge an outer axis into the inner one whenever every operand steps through the pair as
     * through one axis (outer stride == inner stride * inner extent). */
    int w = nd - 1; /* the current innermost kept axis */
    for (int j = nd - 2; j >= 0; j--) {
        int mergeable = 1;
        for (int i = 0; i < nops && mergeable; i++)
            mergeable = STRIDE(o, i, j) == STRIDE(o, i, w) * o->shape[w];
        if (mergeable) {
            o->shape[w] *= o->shape[j];
        } else {
            w--;
            o->shape[w] = o->shape[j];
            if (o->perm)
                o->perm[w] = o->perm[j];
            for (int i = 0; i < nops; i++)
                STRIDE(o, i, w) = STRIDE(o, i, j);
        }
    }
    /* Kept axes now sit at positions w..nd-1; shift them to the front. */
    int kept = nd - w;
    if (w > 0) {
        memmove(o->shape, o->shape + w, (size_t)kept * sizeof o->shape[0]);
        if (o->perm)
            memmove(o->perm, o->perm + w, (size_t)kept * sizeof o->perm[0]);
        for (int i = 0; i < nops; i++)
            memmove(&STRIDE(o, i, 0), &STRIDE(o, i, w), (size_t)kept * sizeof(int64_t));
    }
    nd = kept;

finish:
    /* 4. Contiguity and index width. */
    *o->ndim = nd;
    int index32 = size < ((int64_t)1 << 31);
    for (int i = 0; i < nops; i++) {
        int64_t item = (int64_t)cf_dtype_size(ops[i]->dtype);
        o->contiguous[i] = (unsigned char)(nd == 0 || (nd == 1 && STRIDE(o, i, 0) == item));
        int64_t reach = item;
        for (int k = 0; k < nd; k++)
            reach += (o->shape[k] - 1) * cf_abs64(STRIDE(o, i, k));
        if (reach >= ((int64_t)1 << 31))
            index32 = 0;
    }
    *o->index32 = index32;
    return CF_OK;
}

cf_status cf_plan_elementwise(cf_plan *p, int nops, const cf_array *ops, int ndim,
                              const int64_t *shape)
{
    if (!p || nops < 0 || nops > CF_MAX_OPERANDS || (nops > 0 && !ops) || ndim < 0 ||
        ndim > CF_MAX_DIMS || (ndim > 0 && !shape))
        return cf_error_set(CF_ERR_INVALID, "cf_plan_elementwise: bad arguments (nops %d, ndim %d)",
                            nops, ndim);
    const cf_array *ptrs[CF_MAX_OPERANDS];
    for (int i = 0; i < nops; i++)
        ptrs[i] = &ops[i];
    p->nops = nops;
    p->all_contiguous = 1;
    plan_out o = {&p->ndim, &p->size, &p->index32, p->shape, &p->strides[0][0], CF_MAX_DIMS,
                  p->perm, p->contiguous};
    cf_status st = plan_core(&o, CF_MAX_DIMS, nops, ptrs, ndim, shape);
    if (st)
        return st; /* PLAN_TOO_MANY_AXES cannot happen: there is room for every axis */
    for (int i = 0; i < nops; i++)
        p->all_contiguous &= p->contiguous[i];
    return CF_OK;
}

/* More than CF_PLAN_SMALL_AXES axes to plan: cf_plan_elementwise on the heap, its result copied
 * when it fits (rare: a launch over more than 16 axes of extent above 1). */
static cf_status plan_small_on_heap(cf_plan_small *p, int nops, const cf_array *const *ops,
                                    int ndim, const int64_t *shape)
{
    cf_plan *pl = cf_malloc(sizeof *pl);
    cf_array *arrays = cf_malloc((size_t)(nops > 0 ? nops : 1) * sizeof *arrays);
    cf_status st = CF_ERR_NOMEM;
    if (!pl || !arrays)
        goto done;
    for (int i = 0; i < nops; i++)
        arrays[i] = *ops[i];
    st = cf_plan_elementwise(pl, nops, arrays, ndim, shape);
    if (st)
        goto done;
    p->ndim = pl->ndim;
    p->size = pl->size;
    p->index32 = pl->index32;
    if (pl->ndim > CF_PLAN_SMALL_AXES) {
        st = cf_error_set(CF_ERR_UNSUPPORTED, "the operands' layouts leave %d axes that cannot be "
                          "merged (at most %d)", pl->ndim, CF_PLAN_SMALL_AXES);
        goto done;
    }
    for (int k = 0; k < pl->ndim; k++)
        p->shape[k] = pl->shape[k];
    for (int i = 0; i < nops; i++) {
        for (int k = 0; k < pl->ndim; k++)
            p->strides[i][k] = pl->strides[i][k];
        p->contiguous[i] = pl->contiguous[i];
    }
done:
    cf_free(arrays);
    cf_free(pl);
    return st;
}

cf_status cf_plan_small_make(cf_plan_small *p, int nops, const cf_array *const *ops, int ndim,
                             const int64_t *shape)
{
    if (!p || nops < 0 || nops > CF_PLAN_SMALL_OPS || (nops > 0 && !ops) || ndim < 0 ||
        ndim > CF_MAX_DIMS || (ndim > 0 && !shape))
        return cf_error_set(CF_ERR_INVALID, "cf_plan_small_make: bad arguments (nops %d, ndim %d)",
                            nops, ndim);
    p->nops = nops;
    plan_out o = {&p->ndim, &p->size, &p->index32, p->shape, &p->strides[0][0],
                  CF_PLAN_SMALL_AXES, NULL, p->contiguous};
    cf_status st = plan_core(&o, CF_PLAN_SMALL_AXES, nops, ops, ndim, shape);
    if (st == PLAN_TOO_MANY_AXES)
        return plan_small_on_heap(p, nops, ops, ndim, shape);
    return st;
}

unsigned cf_plan_grid(int64_t n, int64_t per_block, int64_t max_resident)
{
    if (n <= 0 || per_block <= 0)
        return 1;
    int64_t blocks = (n + per_block - 1) / per_block;
    if (max_resident > 0 && blocks > max_resident)
        blocks = max_resident;
    if (blocks > 0x7fffffff)
        blocks = 0x7fffffff;
    return blocks < 1 ? 1u : (unsigned)blocks;
}
