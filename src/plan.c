/* plan.c: broadcasting and axis coalescing for element-wise loops (see include/cufunc/plan.h). */
#include <stdio.h>
#include <string.h>

#include "cufunc/plan.h"
#include "error.h"
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

static int64_t abs64(int64_t x) { return x < 0 ? -x : x; }

/* Whether axis a should iterate outside axis b: the first operand with a non-zero stride on both
 * decides (larger stride = outer); ties and all-zero leave the original order. */
static int outer_before(const cf_plan *p, int a, int b)
{
    for (int i = 0; i < p->nops; i++) {
        int64_t sa = abs64(p->strides[i][a]), sb = abs64(p->strides[i][b]);
        if (sa && sb && sa != sb)
            return sa > sb;
    }
    return a < b;
}

cf_status cf_plan_elementwise(cf_plan *p, int nops, const cf_array *ops, int ndim,
                              const int64_t *shape)
{
    if (!p || nops < 0 || nops > CF_MAX_OPERANDS || (nops > 0 && !ops) || ndim < 0 ||
        ndim > CF_MAX_DIMS || (ndim > 0 && !shape))
        return cf_error_set(CF_ERR_INVALID, "cf_plan_elementwise: bad arguments (nops %d, ndim %d)",
                            nops, ndim);
    /* The struct is large (CF_MAX_OPERANDS x CF_MAX_DIMS strides) and planned on every call:
     * write only the entries used (strides[i][k] for i < nops, k < ndim), never the whole. */
    p->nops = nops;
    p->ndim = 0;
    p->size = 1;
    p->all_contiguous = 1;
    p->index32 = 1;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] < 0)
            return cf_error_set(CF_ERR_INVALID, "negative loop extent %lld", (long long)shape[k]);
        p->size *= shape[k];
    }

    /* 1. Broadcast every operand onto the loop shape; drop extent-1 axes as we go. */
    int axes[CF_MAX_DIMS], nax = 0;
    for (int k = 0; k < ndim; k++)
        if (shape[k] != 1)
            axes[nax++] = k;
    for (int i = 0; i < nops; i++) {
        const cf_array *a = &ops[i];
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
            p->strides[i][j] = st;
        }
    }
    for (int j = 0; j < nax; j++) {
        p->shape[j] = shape[axes[j]];
        p->perm[j] = axes[j];
    }
    p->ndim = nax;

    /* An empty loop or a single element needs no axes at all. */
    if (p->size <= 1) {
        p->ndim = 0;
        goto finish;
    }

    /* 2. Order axes outer-to-inner by memory order (insertion sort: ndim is small and the sort
     * must be stable so equal axes keep the caller's order). */
    for (int j = 1; j < p->ndim; j++) {
        for (int m = j; m > 0 && outer_before(p, m, m - 1); m--) {
            int64_t t = p->shape[m];
            p->shape[m] = p->shape[m - 1];
            p->shape[m - 1] = t;
            int tp = p->perm[m];
            p->perm[m] = p->perm[m - 1];
            p->perm[m - 1] = tp;
            for (int i = 0; i < nops; i++) {
                int64_t ts = p->strides[i][m];
                p->strides[i][m] = p->strides[i][m - 1];
                p->strides[i][m - 1] = ts;
            }
        }
    }

    /* 3. Merge an outer axis into the inner one whenever every operand steps through the pair as
     * through one axis (outer stride == inner stride * inner extent). */
    int w = p->ndim - 1; /* the current innermost kept axis */
    for (int j = p->ndim - 2; j >= 0; j--) {
        int mergeable = 1;
        for (int i = 0; i < nops && mergeable; i++)
            mergeable = p->strides[i][j] == p->strides[i][w] * p->shape[w];
        if (mergeable) {
            p->shape[w] *= p->shape[j];
        } else {
            w--;
            p->shape[w] = p->shape[j];
            p->perm[w] = p->perm[j];
            for (int i = 0; i < nops; i++)
                p->strides[i][w] = p->strides[i][j];
        }
    }
    /* Kept axes now sit at positions w..ndim-1; shift them to the front. */
    int kept = p->ndim - w;
    if (w > 0) {
        memmove(p->shape, p->shape + w, (size_t)kept * sizeof p->shape[0]);
        memmove(p->perm, p->perm + w, (size_t)kept * sizeof p->perm[0]);
        for (int i = 0; i < nops; i++)
            memmove(p->strides[i], p->strides[i] + w, (size_t)kept * sizeof p->strides[i][0]);
    }
    p->ndim = kept;

finish:
    /* 4. Contiguity and index width. */
    p->all_contiguous = 1;
    p->index32 = p->size < ((int64_t)1 << 31);
    for (int i = 0; i < nops; i++) {
        int64_t item = (int64_t)cf_dtype_size(ops[i].dtype);
        int c = p->ndim == 0 || (p->ndim == 1 && p->strides[i][0] == item);
        p->contiguous[i] = (unsigned char)c;
        p->all_contiguous &= c;
        int64_t reach = item;
        for (int k = 0; k < p->ndim; k++)
            reach += (p->shape[k] - 1) * abs64(p->strides[i][k]);
        if (reach >= ((int64_t)1 << 31))
            p->index32 = 0;
    }
    return CF_OK;
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
