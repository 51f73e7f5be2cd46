/* ew_device.c: an element-wise ufunc on device memory.
 *
 * hypot(x, y) = sqrt(x*x + y*y) on 2^20 float32 elements: a loop written in CUDA C, checked when
 * it is added, called on contiguous device arrays (cf_ufunc_call), then called again through the
 * general entry point (cf_ufunc_launch) with a strided view and a scalar operand. */
#include <cufunc/cufunc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A loop is a __device__ function. The runtime header (cf_float32, cf_cast, ...) is included
 * for it; CUDA's math functions are available. */
static const char *HYPOT_SRC =
    "__device__ cf_float32 hypot_f4(cf_float32 x, cf_float32 y) {\n"
    "    return sqrtf(x * x + y * y);\n"
    "}\n";

#define TRY(call)                                                                                  \
    do {                                                                                           \
        cf_status st_ = (call);                                                                    \
        if (st_ != CF_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s: %s\n", #call, cf_status_name(st_), cf_last_error());   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int close_to(float got, float want) { return fabsf(got - want) <= 1e-6f * fabsf(want) + 1e-30f; }

int main(void)
{
    if (!cf_is_available()) {
        printf("ew_device needs a GPU: %s\n", cf_last_error());
        return 77;
    }
    enum { N = 1 << 20 };
    cf_ufunc *hyp = NULL;
    const cf_dtype types[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    TRY(cf_ufunc_create("hypot", 2, 1, &hyp));
    TRY(cf_ufunc_add_loop(hyp, types, HYPOT_SRC, "hypot_f4", NULL, 0, NULL));
    TRY(cf_ufunc_check(hyp, 0)); /* compile now: a mistake in the source is reported here */

    float *hx = malloc(N * sizeof *hx), *hy = malloc(N * sizeof *hy), *hr = malloc(N * sizeof *hr);
    if (!hx || !hy || !hr)
        return 1;
    for (int i = 0; i < N; i++) {
        hx[i] = (float)(i % 1000) * 0.5f;
        hy[i] = (float)(i % 777) * 0.25f;
    }
    cf_stream *s = NULL;
    uint64_t dx = 0, dy = 0, dr = 0;
    TRY(cf_stream_create(0, &s));
    TRY(cf_mem_alloc(s, N * sizeof(float), &dx));
    TRY(cf_mem_alloc(s, N * sizeof(float), &dy));
    TRY(cf_mem_alloc(s, N * sizeof(float), &dr));
    TRY(cf_memcpy_htod(s, dx, hx, N * sizeof(float), 0));
    TRY(cf_memcpy_htod(s, dy, hy, N * sizeof(float), 0));

    /* 1. contiguous device arrays: inputs then outputs */
    const uint64_t args[3] = {dx, dy, dr};
    TRY(cf_ufunc_call(hyp, s, N, types, args));
    TRY(cf_memcpy_dtoh(s, hr, dr, N * sizeof(float), 1));
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += !close_to(hr[i], sqrtf(hx[i] * hx[i] + hy[i] * hy[i]));

    /* 2. the general entry point: every other element of x (a strided view) and the scalar 2.0
     * as y, into the first N/2 elements of r */
    int64_t half = N / 2;
    cf_operand ops[3] = {0};
    TRY(cf_array_init_contiguous(&ops[0].array, dx, CF_FLOAT32, 1, &half, 'C', 0));
    ops[0].array.strides[0] = 2 * sizeof(float);
    ops[1].is_scalar = 1;
    ops[1].scalar_dtype = CF_FLOAT32;
    float two = 2.0f;
    memcpy(ops[1].scalar, &two, sizeof two);
    TRY(cf_array_init_contiguous(&ops[2].array, dr, CF_FLOAT32, 1, &half, 'C', 0));
    TRY(cf_ufunc_launch(hyp, 0, s, ops, NULL, 1, &half));
    TRY(cf_memcpy_dtoh(s, hr, dr, half * sizeof(float), 1));
    for (int i = 0; i < half; i++)
        bad += !close_to(hr[i], sqrtf(hx[2 * i] * hx[2 * i] + 4.0f));

    TRY(cf_mem_free(s, dx));
    TRY(cf_mem_free(s, dy));
    TRY(cf_mem_free(s, dr));
    TRY(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_ufunc_free(hyp);
    free(hx);
    free(hy);
    free(hr);
    if (bad) {
        printf("ew_device: %d wrong values\n", bad);
        return 1;
    }
    printf("hypot of %d float32 pairs on device memory, and of a strided view with a scalar\n", N);
    printf("ew_device: ok\n");
    return 0;
}
