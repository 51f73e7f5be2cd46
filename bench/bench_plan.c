/* bench_plan.c: ns per plan of the element-wise planner (no GPU). The launch path of every
 * ufunc call plans its operands (cf_plan_small_make, src/plan.h); the one-element call's budget
 * is about 0.1 us of CPU in all, so a plan must stay in the tens of ns. Prints, for 1-3 operands
 * of 1-4 dimensions (C-contiguous float32, extent 8 per axis; and the same with the last operand
 * transposed, which keeps two axes), the small plan and the public cf_plan_elementwise.
 *
 * Built with -DBENCH_PLAN_OLD=1 and a copy of the old mirror (old_plan_make, from ufunc.c before
 * a restructuring), it prints that too: how the figures in bench/RESULTS.md were taken. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>

#include "plan.h"

#ifdef BENCH_PLAN_OLD
typedef struct uf_plan uf_plan;
cf_status old_plan_make(uf_plan *p, int nops, const cf_array *const *ops, int ndim,
                        const int64_t *shape);
static _Alignas(64) unsigned char old_buf[8192];
#endif

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

enum { ITERS = 200000, REPS = 5 };
static volatile int sink;

/* Best of REPS runs of ITERS plans, ns per plan. which: 0 small, 1 cf_plan, 2 old mirror. */
static double time_plan(int which, int nops, const cf_array *ops, const cf_array *const *ptrs,
                        int ndim, const int64_t *shape)
{
    static cf_plan_small small;
    static cf_plan big;
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < ITERS; i++) {
            cf_status st;
            if (which == 0)
                st = cf_plan_small_make(&small, nops, ptrs, ndim, shape);
            else if (which == 1)
                st = cf_plan_elementwise(&big, nops, ops, ndim, shape);
            else
#ifdef BENCH_PLAN_OLD
                st = old_plan_make((uf_plan *)old_buf, nops, ptrs, ndim, shape);
#else
                st = CF_OK;
#endif
            sink += st + small.ndim + big.ndim;
            __asm__ __volatile__("" ::: "memory");
        }
        double dt = (now_ns() - t0) / ITERS;
        if (dt < best)
            best = dt;
    }
    return best;
}

int main(void)
{
    int nmodes = 2;
#ifdef BENCH_PLAN_OLD
    nmodes = 3;
#endif
    printf("%-10s %5s %5s %12s %12s%s\n", "layout", "nops", "ndim", "small ns", "cf_plan ns",
           nmodes == 3 ? "   old mirror ns" : "");
    for (int transposed = 0; transposed < 2; transposed++)
        for (int nops = 1; nops <= 3; nops++)
            for (int ndim = 1; ndim <= 4; ndim++) {
                if (transposed && ndim < 2)
                    continue;
                int64_t shape[4] = {8, 8, 8, 8};
                cf_array ops[3];
                const cf_array *ptrs[3];
                for (int i = 0; i < nops; i++) {
                    cf_array_init_contiguous(&ops[i], 0x10000 * (uint64_t)(i + 1), CF_FLOAT32,
                                             ndim, shape, 'C', 0);
                    ptrs[i] = &ops[i];
                }
                if (transposed) { /* the last operand's last two axes swapped */
                    cf_array *a = &ops[nops - 1];
                    int64_t t = a->strides[ndim - 1];
                    a->strides[ndim - 1] = a->strides[ndim - 2];
                    a->strides[ndim - 2] = t;
                }
                printf("%-10s %5d %5d", transposed ? "transpose" : "contig", nops, ndim);
                for (int m = 0; m < nmodes; m++)
                    printf(" %12.1f", time_plan(m, nops, ops, ptrs, ndim, shape));
                printf("\n");
            }
    return sink == 42 ? 1 : 0;
}
