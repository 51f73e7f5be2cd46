/* bench_c_call.c: the C call path's own cost, over the bare cuLaunchKernel floor, in one run
 * (a C benchmark beside the Python one, bench/bench_call_overhead.py).
 *
 *   bench_c_call [--calls N]
 *
 * For each case, microseconds per call (median of 7 batches of N back-to-back calls on one
 * created stream, each batch ending with a stream synchronisation, after a warm-up batch):
 *   - floor: cuLaunchKernel of an empty kernel;
 *   - for the one-element float32 add and for float32 hypot on device memory (2^10, 2^20 and
 *     2^24 elements): cuLaunchKernel of the very kernel cufunc launches with the very parameter
 *     bytes (taken from a cf_ufunc_record: what the call costs with all of cufunc's work done
 *     beforehand), then cf_ufunc_replay of that record, cf_ufunc_launch (planning, kernel lookup,
 *     packing every call) and cf_ufunc_call (the 1-D convenience: loop resolution, operand
 *     set-up, then cf_ufunc_launch). "own cost" is a figure minus the bare launch of the same
 *     kernel: what cufunc's C path adds;
 *   - the CPU time alone of 256 calls started on an idle stream (no queue back-pressure), bare
 *     launch and cf_ufunc_call, one element.
 * Prints a Markdown table. Needs a GPU (exit 77 without one).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cufunc/cufunc.h"
#include "context.h" /* cf_function_cu, cf_stream_cu: the bare driver handles */
#include "driver.h"  /* cf_drv: the driver's entry points */

#include "bench_util.h"

#define TRY(call)                                                                                  \
    do {                                                                                           \
        if ((call) != CF_OK) {                                                                     \
            fprintf(stderr, "bench_c_call: %s: %s\n", #call, cf_last_error());                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const char *EMPTY = "extern \"C\" __global__ void empty(float *p) {}\n";

/* What one timed call does. */
enum how { BARE_EMPTY, BARE, REPLAY, LAUNCH, CALL };
typedef struct bench_case {
    cf_ufunc *u;
    cf_stream *s;
    int64_t n;
    cf_operand ops[3];
    uint64_t args[3];
    cf_dtype types[3];
    cf_ufunc_record rec;
    CUfunction empty;
    void *empty_args[1];
} bench_case;

static void one_call(bench_case *c, enum how how)
{
    CUstream cs = cf_stream_cu(c->s);
    switch (how) {
    case BARE_EMPTY:
        if (cf_drv.cuLaunchKernel(c->empty, 1, 1, 1, 32, 1, 1, 0, cs, c->empty_args, NULL)) {
            fprintf(stderr, "bench_c_call: cuLaunchKernel failed\n");
            exit(1);
        }
        break;
    case BARE: {
        /* the kernel takes one parameter: the packed struct the record holds */
        void *params[1] = {c->rec.params.bytes};
        if (cf_drv.cuLaunchKernel(cf_function_cu(c->rec.fn), c->rec.grid[0], c->rec.grid[1],
                                  c->rec.grid[2], c->rec.block[0], c->rec.block[1],
                                  c->rec.block[2], 0, cs, params, NULL)) {
            fprintf(stderr, "bench_c_call: cuLaunchKernel failed\n");
            exit(1);
        }
        break;
    }
    case REPLAY: TRY(cf_ufunc_replay(&c->rec, c->s)); break;
    case LAUNCH: TRY(cf_ufunc_launch(c->u, 0, c->s, c->ops, NULL, 1, &c->n)); break;
    case CALL: TRY(cf_ufunc_call(c->u, c->s, c->n, c->types, c->args)); break;
    }
}

/* Median microseconds per call over 7 batches of `calls` (after one warm-up batch). */
static double time_calls(bench_case *c, enum how how, int calls)
{
    double batch[7];
    for (int r = 0; r < 8; r++) {
        double t0 = now();
        for (int i = 0; i < calls; i++)
            one_call(c, how);
        TRY(cf_stream_synchronize(c->s));
        if (r > 0)
            batch[r - 1] = (now() - t0) / calls * 1e6;
    }
    qsort(batch, 7, sizeof batch[0], cmp_double);
    return batch[3];
}

/* The CPU time of 256 calls started on an idle stream. */
static double time_cpu(bench_case *c, enum how how)
{
    enum { SHORT = 256 };
    double batch[7];
    for (int r = 0; r < 8; r++) {
        TRY(cf_stream_synchronize(c->s));
        double t0 = now();
        for (int i = 0; i < SHORT; i++)
            one_call(c, how);
        double t1 = now();
        if (r > 0)
            batch[r - 1] = (t1 - t0) / SHORT * 1e6;
    }
    TRY(cf_stream_synchronize(c->s));
    qsort(batch, 7, sizeof batch[0], cmp_double);
    return batch[3];
}

/* Operands of n elements, and the record of one launch (the bare launch's kernel and bytes). */
static void set_up(bench_case *c, cf_ufunc *u, int64_t n)
{
    c->u = u;
    c->n = n;
    memset(c->ops, 0, sizeof c->ops);
    for (int k = 0; k < 3; k++) {
        c->types[k] = CF_FLOAT32;
        TRY(cf_mem_alloc(c->s, (size_t)n * 4, &c->args[k]));
        TRY(cf_memset8(c->s, c->args[k], 0, (size_t)n * 4));
        TRY(cf_array_init_contiguous(&c->ops[k].array, c->args[k], CF_FLOAT32, 1, &n, 'C', 0));
    }
    TRY(cf_ufunc_launch(u, 0, c->s, c->ops, NULL, 1, &n)); /* compiles */
    int launched = 0;
    TRY(cf_ufunc_launch_if_ready(u, 0, c->s, c->ops, NULL, 1, &n, &launched, &c->rec));
    if (!launched || !c->rec.fn) {
        fprintf(stderr, "bench_c_call: no launch record for n = %lld\n", (long long)n);
        exit(1);
    }
    TRY(cf_stream_synchronize(c->s));
}

static void tear_down(bench_case *c)
{
    for (int k = 0; k < 3; k++)
        TRY(cf_mem_free(c->s, c->args[k]));
    TRY(cf_stream_synchronize(c->s));
}

int main(int argc, char **argv)
{
    int calls = 20000;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            calls = atoi(argv[++i]);
    if (!cf_is_available()) {
        printf("bench_c_call needs a GPU: %s\n", cf_last_error());
        return 77;
    }
    cf_device_props props;
    TRY(cf_device_props_get(0, &props));
    bench_case c;
    memset(&c, 0, sizeof c);
    TRY(cf_stream_create(0, &c.s));
    cf_module *m;
    cf_function *f;
    TRY(cf_module_load(0, EMPTY, NULL, 0, &m));
    TRY(cf_module_function(m, "empty", &f));
    c.empty = cf_function_cu(f);
    uint64_t buf;
    TRY(cf_mem_alloc(c.s, 4, &buf));
    c.empty_args[0] = &buf;

    const cf_dtype f4[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    cf_ufunc *add = NULL, *hyp = NULL;
    TRY(cf_ufunc_from_expr("add", "x + y", 2, f4, 1, &add));
    TRY(cf_ufunc_from_expr("hypot", "sqrtf(x * x + y * y)", 2, f4, 1, &hyp));

    printf("the C call path on %s (%d calls per batch, median of 7 batches, created stream)\n",
           props.name, calls);
    double floor = time_calls(&c, BARE_EMPTY, calls);
    printf("| case | bare cuLaunchKernel, same kernel | cf_ufunc_replay | cf_ufunc_launch | "
           "cf_ufunc_call | own cost of cf_ufunc_call |\n|---|---|---|---|---|---|\n");
    printf("| floor: empty kernel | %.2f | | | | |\n", floor);
    struct { const char *name; cf_ufunc *u; int64_t n; } cases[] = {
        {"float32 add, 1 element", add, 1},
        {"float32 hypot, 1 element", hyp, 1},
        {"float32 hypot, 2^10", hyp, 1 << 10},
        {"float32 hypot, 2^20", hyp, 1 << 20},
        {"float32 hypot, 2^24", hyp, 1 << 24},
    };
    double cpu_bare = 0, cpu_call = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        set_up(&c, cases[k].u, cases[k].n);
        int reps = cases[k].n >= (1 << 20) ? (calls / 50 > 20 ? calls / 50 : 20) : calls;
        double bare = time_calls(&c, BARE, reps), replay = time_calls(&c, REPLAY, reps),
               launch = time_calls(&c, LAUNCH, reps), call = time_calls(&c, CALL, reps);
        printf("| %s | %.2f | %.2f | %.2f | %.2f | %+.2f |\n", cases[k].name, bare, replay, launch,
               call, call - bare);
        if (k == 0) {
            cpu_bare = time_cpu(&c, BARE);
            cpu_call = time_cpu(&c, CALL);
        }
        tear_down(&c);
    }
    printf("| CPU time alone, 1-element add, 256 calls on an idle stream | %.2f | | | %.2f | %+.2f |\n",
           cpu_bare, cpu_call, cpu_call - cpu_bare);
    cf_ufunc_free(add);
    cf_ufunc_free(hyp);
    TRY(cf_mem_free(c.s, buf));
    TRY(cf_stream_synchronize(c.s));
    cf_stream_free(c.s);
    return 0;
}
