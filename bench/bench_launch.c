/* bench_launch.c: the launch floor every call path is held against (the first benchmark).
 *
 *   bench_launch [--calls N]
 *
 * Prints, in microseconds per launch (median of 7 batches of N back-to-back launches on one stream,
 * each batch ending with a stream synchronisation):
 *   - the floor: a C loop of the bare driver call cuLaunchKernel on an empty kernel, on a created
 *     stream and on the legacy default stream (where cufunc's calls launch unless given stream=);
 *     the lower of the two is the floor the one-element call is held against;
 *   - a C loop of cf_launch (the same with cufunc's checks and context check around it);
 *   - the same with a stream-ordered allocation and free around each launch;
 *   - a C loop of cf_ufunc_launch of a one-element float32 add with the output given (the
 *     engine's own cost above the floor: planning, kernel lookup, parameter packing);
 *   - the CPU time alone of the empty-kernel and cf_ufunc_launch loops: 256 launches timed right
 *     after the stream went idle, before any synchronisation, so the launch queue never fills.
 *     Where this is well below the first figures, the floor is set by how fast the GPU takes
 *     launches from the queue, not by the CPU.
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
            fprintf(stderr, "bench_launch: %s: %s\n", #call, cf_last_error());                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static const char *EMPTY = "extern \"C\" __global__ void empty(float *p) {}\n";
static const char *ADD = "#include \"cufunc/runtime.cuh\"\n"
                         "__device__ cf_float32 add(cf_float32 a, cf_float32 b) { return a + b; }\n";

int main(int argc, char **argv)
{
    int calls = 20000;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--calls") == 0 && i + 1 < argc)
            calls = atoi(argv[++i]);
    TRY(cf_init());
    cf_device_props props;
    TRY(cf_device_props_get(0, &props));
    cf_stream *s;
    TRY(cf_stream_create(0, &s));
    cf_module *m;
    cf_function *f;
    TRY(cf_module_load(0, EMPTY, NULL, 0, &m));
    TRY(cf_module_function(m, "empty", &f));
    uint64_t buf;
    TRY(cf_mem_alloc(s, 4, &buf));
    void *args[] = {&buf};
    unsigned g[3] = {1, 1, 1}, b[3] = {32, 1, 1};

    cf_ufunc *u;
    TRY(cf_ufunc_create("add", 2, 1, &u));
    cf_dtype t[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    TRY(cf_ufunc_add_loop(u, t, ADD, "add", NULL, 0, NULL));
    uint64_t x, y, z;
    TRY(cf_mem_alloc(s, 4, &x));
    TRY(cf_mem_alloc(s, 4, &y));
    TRY(cf_mem_alloc(s, 4, &z));
    int64_t one[1] = {1};
    cf_operand ops[3];
    memset(ops, 0, sizeof ops);
    cf_array_init_contiguous(&ops[0].array, x, CF_FLOAT32, 1, one, 'C', 0);
    cf_array_init_contiguous(&ops[1].array, y, CF_FLOAT32, 1, one, 'C', 0);
    cf_array_init_contiguous(&ops[2].array, z, CF_FLOAT32, 1, one, 'C', 0);

    CUfunction raw = cf_function_cu(f);
    CUstream streams[2] = {cf_stream_cu(s), NULL}; /* created; legacy default */
    if (!raw) {
        fprintf(stderr, "bench_launch: no CUfunction behind the empty kernel\n");
        return 1;
    }

    enum { RAW_CREATED, RAW_LEGACY, CF_LAUNCH, ALLOC_FREE, UFUNC, NWHICH };
    double res[NWHICH];
    for (int which = 0; which < NWHICH; which++) {
        double batch[7];
        for (int r = 0; r < 8; r++) {
            double t0 = now();
            for (int i = 0; i < calls; i++) {
                if (which == RAW_CREATED || which == RAW_LEGACY) {
                    if (cf_drv.cuLaunchKernel(raw, 1, 1, 1, 32, 1, 1, 0, streams[which], args,
                                              NULL) != CUDA_SUCCESS) {
                        fprintf(stderr, "bench_launch: cuLaunchKernel failed\n");
                        return 1;
                    }
                } else if (which == CF_LAUNCH) {
                    TRY(cf_launch(f, g, b, 0, s, args));
                } else if (which == ALLOC_FREE) {
                    uint64_t p;
                    TRY(cf_mem_alloc(s, 256, &p));
                    void *a2[] = {&p};
                    TRY(cf_launch(f, g, b, 0, s, a2));
                    TRY(cf_mem_free(s, p));
                } else {
                    TRY(cf_ufunc_launch(u, 0, s, ops, NULL, 1, one));
                }
            }
            TRY(cf_device_synchronize(0));
            if (r > 0) /* the first batch warms up */
                batch[r - 1] = (now() - t0) / calls * 1e6;
        }
        qsort(batch, 7, sizeof batch[0], cmp_double);
        res[which] = batch[3];
    }

    /* The CPU time alone: launches timed right after the device went idle, never waiting. */
    double cpu[2];
    for (int which = 0; which < 2; which++) {
        enum { SHORT = 256 };
        double batch[7];
        for (int r = 0; r < 8; r++) {
            TRY(cf_device_synchronize(0));
            double t0 = now();
            for (int i = 0; i < SHORT; i++) {
                if (which == 0)
                    TRY(cf_launch(f, g, b, 0, s, args));
                else
                    TRY(cf_ufunc_launch(u, 0, s, ops, NULL, 1, one));
            }
            double t1 = now();
            if (r > 0)
                batch[r - 1] = (t1 - t0) / SHORT * 1e6;
        }
        TRY(cf_device_synchronize(0));
        qsort(batch, 7, sizeof batch[0], cmp_double);
        cpu[which] = batch[3];
    }

    printf("launch floor on %s (%d launches per batch, median of 7 batches)\n", props.name, calls);
    printf("| figure | us per launch |\n|---|---|\n");
    double floor = res[RAW_CREATED] < res[RAW_LEGACY] ? res[RAW_CREATED] : res[RAW_LEGACY];
    printf("| floor: cuLaunchKernel, empty kernel (C loop), the lower of the two below | %.2f |\n", floor);
    printf("| cuLaunchKernel, empty kernel, created stream | %.2f |\n", res[RAW_CREATED]);
    printf("| cuLaunchKernel, empty kernel, legacy default stream | %.2f |\n", res[RAW_LEGACY]);
    printf("| cf_launch, empty kernel, created stream | %.2f |\n", res[CF_LAUNCH]);
    printf("| cf_launch with cuMemAllocAsync + cuMemFreeAsync around it | %.2f |\n", res[ALLOC_FREE]);
    printf("| cf_ufunc_launch, 1-element float32 add, out given (C loop) | %.2f |\n", res[UFUNC]);
    printf("| CPU time alone, cuLaunchKernel, empty kernel (256 launches, no wait) | %.2f |\n", cpu[0]);
    printf("| CPU time alone, cf_ufunc_launch (256 launches, no wait) | %.2f |\n", cpu[1]);
    cf_ufunc_free(u);
    return 0;
}
