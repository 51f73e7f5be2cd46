/* plan.h: the internal half of plan.c (the public half is include/cufunc/plan.h): a plan sized
 * for one launch of an element-wise kernel, made on the caller's stack over pointers to the
 * operands. The launch path of small calls plans on every call: cf_plan (35 KiB, views copied
 * into an array) would cost more than the rest of the call. Same steps, results and messages as
 * cf_plan_elementwise (one algorithm behind both). */
#ifndef CF_PLAN_INTERNAL_H
#define CF_PLAN_INTERNAL_H

#include "cufunc/plan.h"

/* Axes of extent above 1 a small plan holds (more: planned on the heap, copied back when the
 * coalesced result fits); operands it holds (a ufunc's 32 arguments and its where= mask). */
#define CF_PLAN_SMALL_AXES 16
#define CF_PLAN_SMALL_OPS 33

/* cf_plan's fields that a launch uses (no perm, no all_contiguous). About 4 KiB. */
typedef struct cf_plan_small {
    int nops;
    int ndim;
    int index32;
    int64_t size;
    int64_t shape[CF_PLAN_SMALL_AXES];
    int64_t strides[CF_PLAN_SMALL_OPS][CF_PLAN_SMALL_AXES];
    unsigned char contiguous[CF_PLAN_SMALL_OPS];
} cf_plan_small;

/* cf_plan_elementwise over `nops` (at most CF_PLAN_SMALL_OPS) pointers to operands. When the
 * coalesced plan keeps more than CF_PLAN_SMALL_AXES axes: CF_ERR_UNSUPPORTED, with p->ndim set to
 * their number (the strides are not written). */
cf_status cf_plan_small_make(cf_plan_small *p, int nops, const cf_array *const *ops, int ndim,
                             const int64_t *shape);

#endif
