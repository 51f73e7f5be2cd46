/* streams.c: ordering work across streams.
 *
 * A producer stream runs a long chain of kernels (x = x + 1, 200 times over 2^24 floats); a
 * consumer stream is made to wait for it on the device (cf_stream_wait_stream: no host
 * synchronisation) before it computes y = 2 * x. Every launch returns at once; the host waits only
 * when it copies the result back. Without the wait, the consumer could read x half-way through
 * the chain. */
#include <cufunc/cufunc.h>

#include <stdio.h>
#include <stdlib.h>

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
    const cf_dtype f4[2] = {CF_FLOAT32, CF_FLOAT32};
    cf_ufunc *inc = NULL, *twice = NULL;
    cf_status st = cf_ufunc_from_expr("inc", "x + 1.0f", 1, f4, 1, &inc);
    if (!st)
        st = cf_ufunc_from_expr("twice", "2.0f * x", 1, f4, 1, &twice);
    if (st) {
        fprintf(stderr, "cf_ufunc_from_expr: %s: %s\n", cf_status_name(st), cf_last_error());
        return st == CF_ERR_NO_NVRTC ? 77 : 1;
    }
    if (!cf_is_available()) {
        printf("streams needs a GPU: %s\n", cf_last_error());
        return 77;
    }
    enum { N = 1 << 24, STEPS = 200 };
    cf_stream *producer = NULL, *consumer = NULL;
    uint64_t x = 0, y = 0;
    TRY(cf_stream_create(0, &producer));
    TRY(cf_stream_create(0, &consumer));
    TRY(cf_mem_alloc(producer, N * sizeof(float), &x));
    TRY(cf_mem_alloc(consumer, N * sizeof(float), &y));
    TRY(cf_memset8(producer, x, 0, N * sizeof(float)));
    const uint64_t in_place[2] = {x, x}; /* an output may be the very same memory as its input */
    for (int k = 0; k < STEPS; k++)
        TRY(cf_ufunc_call(inc, producer, N, f4, in_place));

    TRY(cf_stream_wait_stream(consumer, producer)); /* the consumer waits on the device */
    const uint64_t args[2] = {x, y};
    TRY(cf_ufunc_call(twice, consumer, N, f4, args));
    int done = 0;
    TRY(cf_stream_query(consumer, &done));
    printf("all launches queued; consumer %s\n", done ? "already done" : "still running");

    float *h = malloc(N * sizeof *h);
    if (!h)
        return 1;
    TRY(cf_memcpy_dtoh(consumer, h, y, N * sizeof(float), 1));
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += h[i] != 2.0f * STEPS;
    /* x was last used by the consumer: free it in that stream's order */
    TRY(cf_mem_free(consumer, x));
    TRY(cf_mem_free(consumer, y));
    TRY(cf_stream_synchronize(consumer));
    cf_stream_free(producer);
    cf_stream_free(consumer);
    cf_ufunc_free(inc);
    cf_ufunc_free(twice);
    free(h);
    if (bad) {
        printf("streams: %d wrong values (read before the producer finished?)\n", bad);
        return 1;
    }
    printf("%d kernels on one stream, then one on another after a device-side wait\n", STEPS + 1);
    printf("streams: ok\n");
    return 0;
}
