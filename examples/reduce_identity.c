/* reduce_identity.c: a custom reduction with an identity.
 *
 * A reducer's loop is a binary __device__ function acc f(acc, acc); it must be associative and
 * commutative (the GPU combines elements in no fixed order). The initial value (here the
 * identity) is folded in exactly once, and is the result of an empty reduction.
 *   - the largest absolute value of a float32 array on the device, identity 0;
 *   - the sum of an int64 array in host memory (copied in by cf_reduce_to_host), identity 0,
 *     and of an empty one. */
#include <cufunc/cufunc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *MAXABS_SRC =
    "__device__ cf_float32 maxabs(cf_float32 a, cf_float32 b) {\n"
    "    return fmaxf(fabsf(a), fabsf(b));\n"
    "}\n";
static const char *ADD_SRC = "__device__ cf_int64 add(cf_int64 a, cf_int64 b) { return a + b; }\n";

#define TRY(call)                                                                                  \
    do {                                                                                           \
        cf_status st_ = (call);                                                                    \
        if (st_ != CF_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s: %s\n", #call, cf_status_name(st_), cf_last_error());   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    cf_reducer *maxabs = NULL, *sum = NULL;
    TRY(cf_reducer_create("maxabs", &maxabs));
    TRY(cf_reducer_add_loop(maxabs, CF_FLOAT32, MAXABS_SRC, "maxabs", NULL, 0, NULL));
    TRY(cf_reducer_create("sum", &sum));
    TRY(cf_reducer_add_loop(sum, CF_INT64, ADD_SRC, "add", NULL, 0, NULL));
    cf_status st = cf_reducer_check(maxabs, -1);
    if (!st)
        st = cf_reducer_check(sum, -1);
    if (st == CF_ERR_NO_NVRTC) {
        printf("reduce_identity needs NVRTC: %s\n", cf_last_error());
        return 77;
    }
    TRY(st);
    if (!cf_is_available()) {
        printf("reduce_identity needs a GPU: %s\n", cf_last_error());
        return 77;
    }
    enum { N = 5000003 };
    float *h = malloc(N * sizeof *h);
    int64_t *v = malloc(N * sizeof *v);
    if (!h || !v)
        return 1;
    for (int i = 0; i < N; i++) {
        h[i] = (float)(((int64_t)i * 7919) % 100003) * ((i & 1) ? -1.0f : 1.0f);
        v[i] = (int64_t)i * 3 - 7;
    }
    h[N / 3] = -123456.0f; /* the largest magnitude, negative */

    cf_stream *s = NULL;
    uint64_t d = 0;
    TRY(cf_stream_create(0, &s));
    TRY(cf_mem_alloc(s, N * sizeof(float), &d));
    TRY(cf_memcpy_htod(s, d, h, N * sizeof(float), 0));
    cf_array a;
    int64_t n = N;
    TRY(cf_array_init_contiguous(&a, d, CF_FLOAT32, 1, &n, 'C', 0));
    float zero_f = 0.0f, got_f = -1.0f;
    TRY(cf_reduce_to_host(maxabs, s, &a, &zero_f, &got_f));

    cf_array hv;
    int64_t zero_i = 0, got_i = -1, got_empty = -1, none = 0;
    TRY(cf_array_init_contiguous(&hv, (uint64_t)(uintptr_t)v, CF_INT64, 1, &n, 'C', -1));
    TRY(cf_reduce_to_host(sum, s, &hv, &zero_i, &got_i));
    TRY(cf_array_init_contiguous(&hv, (uint64_t)(uintptr_t)v, CF_INT64, 1, &none, 'C', -1));
    TRY(cf_reduce_to_host(sum, s, &hv, &zero_i, &got_empty));

    int64_t want_i = 3 * ((int64_t)N * (N - 1) / 2) - 7 * (int64_t)N;
    int bad = got_f != 123456.0f || got_i != want_i || got_empty != 0;
    printf("max |x| = %g (want 123456), sum = %lld (want %lld), empty sum = %lld (want 0)\n",
           got_f, (long long)got_i, (long long)want_i, (long long)got_empty);
    TRY(cf_mem_free(s, d));
    TRY(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_reducer_free(maxabs);
    cf_reducer_free(sum);
    free(h);
    free(v);
    if (bad)
        return 1;
    printf("reduce_identity: ok\n");
    return 0;
}
