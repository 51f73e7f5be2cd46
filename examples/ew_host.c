/* ew_host.c: the same kind of ufunc on HOST buffers.
 *
 * A ufunc made from one C expression (cf_ufunc_from_expr), called on ordinary malloc'd arrays
 * (cf_ufunc_call_host): cufunc copies them in, runs the kernel and copies the result out, in
 * chunks overlapped on several streams, and returns when the output is filled. */
#include <cufunc/cufunc.h>

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    /* Made and checked (compiled with NVRTC) before any GPU is touched. Two loops, float32 and
     * float64, from one expression: 2.5f * x is float for a float x and double for a double. */
    const cf_dtype types[2][3] = {{CF_FLOAT32, CF_FLOAT32, CF_FLOAT32},
                                  {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64}};
    cf_ufunc *axpy = NULL;
    cf_status st = cf_ufunc_from_expr("axpy2", "2.5f * x + y", 2, &types[0][0], 2, &axpy);
    if (st) {
        fprintf(stderr, "cf_ufunc_from_expr: %s: %s\n", cf_status_name(st), cf_last_error());
        return st == CF_ERR_NO_NVRTC ? 77 : 1;
    }
    if (!cf_is_available()) {
        printf("ew_host needs a GPU: %s\n", cf_last_error());
        cf_ufunc_free(axpy);
        return 77;
    }
    enum { N = 3000001 }; /* not a multiple of anything */
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *r = malloc(N * sizeof *r);
    if (!x || !y || !r)
        return 1;
    for (int i = 0; i < N; i++) {
        x[i] = i;
        y[i] = 0.25 * i;
        r[i] = -1;
    }
    void *args[3] = {x, y, r};
    st = cf_ufunc_call_host(axpy, NULL, N, types[1], args); /* the float64 loop */
    if (st) {
        fprintf(stderr, "cf_ufunc_call_host: %s: %s\n", cf_status_name(st), cf_last_error());
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += r[i] != 2.75 * i; /* exact: small integers and quarters */
    free(x);
    free(y);
    free(r);
    cf_ufunc_free(axpy);
    if (bad) {
        printf("ew_host: %d wrong values\n", bad);
        return 1;
    }
    printf("2.5 * x + y over %d float64 elements in host memory\n", N);
    printf("ew_host: ok\n");
    return 0;
}
