/* array.c: strided views. Pure arithmetic, no GPU; NumPy's definitions of contiguity. */
#include <string.h>

#include "cufunc/array.h"
#include "error.h"

cf_status cf_array_init_contiguous(cf_array *out, uint64_t data, cf_dtype dtype, int ndim,
                                   const int64_t *shape, char order, int device)
{
    if (!out || (ndim > 0 && !shape))
        return cf_error_set(CF_ERR_INVALID, "cf_array_init_contiguous: NULL argument");
    if (ndim < 0 || ndim > CF_MAX_DIMS)
        return cf_error_set(CF_ERR_INVALID, "ndim %d is out of range 0..%d", ndim, CF_MAX_DIMS);
    if (order != 'C' && order != 'F')
        return cf_error_set(CF_ERR_INVALID, "order must be 'C' or 'F', not '%c'", order);
    size_t item = cf_dtype_size(dtype);
    if (!item)
        return cf_error_set(CF_ERR_TYPE, "invalid dtype %d", (int)dtype);
    /* Check every extent before multiplying; any zero extent makes the array empty but the other
     * extents must still be valid and their product must not overflow. */
    int64_t nbytes = (int64_t)item;
    int empty = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return cf_error_set(CF_ERR_INVALID, "negative dimension %lld in axis %d",
                                (long long)shape[i], i);
        if (shape[i] == 0) {
            empty = 1;
            continue;
        }
        if (nbytes > INT64_MAX / shape[i])
            return cf_error_set(CF_ERR_RANGE, "array is too big: the shape overflows 63 bits of "
                                "bytes");
        nbytes *= shape[i];
    }
    (void)empty;
    memset(out, 0, sizeof *out);
    out->data = data;
    out->dtype = dtype;
    out->ndim = ndim;
    out->device = device;
    int64_t stride = (int64_t)item;
    for (int k = 0; k < ndim; k++) {
        int i = order == 'C' ? ndim - 1 - k : k;
        out->shape[i] = shape[i];
        out->strides[i] = stride;
        stride *= shape[i] > 0 ? shape[i] : 1;
    }
    return CF_OK;
}

int64_t cf_array_size(const cf_array *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n *= a->shape[i];
    return n;
}

int64_t cf_array_nbytes(const cf_array *a)
{
    return cf_array_size(a) * (int64_t)cf_dtype_size(a->dtype);
}

static int is_contiguous(const cf_array *a, int c_order)
{
    if (cf_array_size(a) == 0)
        return 1;
    int64_t expect = (int64_t)cf_dtype_size(a->dtype);
    for (int k = 0; k < a->ndim; k++) {
        int i = c_order ? a->ndim - 1 - k : k;
        if (a->shape[i] == 1)
            continue;
        if (a->strides[i] != expect)
            return 0;
        expect *= a->shape[i];
    }
    return 1;
}

int cf_array_is_c_contiguous(const cf_array *a) { return is_contiguous(a, 1); }
int cf_array_is_f_contiguous(const cf_array *a) { return is_contiguous(a, 0); }

void cf_array_byte_bounds(const cf_array *a, int64_t *lo, int64_t *hi)
{
    int64_t l = 0, h = 0;
    if (cf_array_size(a) == 0) {
        *lo = *hi = 0;
        return;
    }
    for (int i = 0; i < a->ndim; i++) {
        int64_t span = (a->shape[i] - 1) * a->strides[i];
        if (span < 0)
            l += span;
        else
            h += span;
    }
    *lo = l;
    *hi = h + (int64_t)cf_dtype_size(a->dtype);
}

int cf_array_has_shape(const cf_array *a, int ndim, const int64_t *shape)
{
    if (a->ndim != ndim)
        return 0;
    for (int k = 0; k < ndim; k++)
        if (a->shape[k] != shape[k])
            return 0;
    return 1;
}

int cf_array_may_overlap(const cf_array *a, const cf_array *b)
{
    if (a->device != b->device)
        return 0;
    int64_t alo, ahi, blo, bhi;
    cf_array_byte_bounds(a, &alo, &ahi);
    cf_array_byte_bounds(b, &blo, &bhi);
    if (alo == ahi || blo == bhi)
        return 0;
    /* Compare absolute addresses in unsigned arithmetic wide enough for the offsets. */
    __int128 a0 = (__int128)a->data + alo, a1 = (__int128)a->data + ahi;
    __int128 b0 = (__int128)b->data + blo, b1 = (__int128)b->data + bhi;
    return a0 < b1 && b0 < a1;
}

int cf_array_same_view(const cf_array *a, const cf_array *b)
{
    if (a->data != b->data || a->device != b->device || a->ndim != b->ndim ||
        a->dtype != b->dtype)
        return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] != b->shape[k] || (a->shape[k] > 1 && a->strides[k] != b->strides[k]))
            return 0;
    return 1;
}

/* Whether some element of the view is at the same address as another (a zero stride on an axis
 * with more than one element; other self-overlapping layouts are not looked for). */
static int repeats_elements(const cf_array *a)
{
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] > 1 && a->strides[k] == 0)
            return 1;
    return 0;
}

int cf_array_needs_copy(const cf_array *in, const cf_array *out, int in_place_ok)
{
    if (!cf_array_may_overlap(in, out))
        return 0;
    /* in place: each element is read, then written by its own thread, and no other reads it */
    if (in_place_ok && cf_array_same_view(in, out) && !repeats_elements(out))
        return 0;
    return 1;
}
