/* casting_loops.c: one ufunc with several loops, and NumPy's casting.
 *
 * mul(x, y) = x * y with loops for int32, float32 and float64. A call picks a loop from its input
 * dtypes as NumPy does: an exact match first, else the first loop (in the order they were added)
 * that every input reaches by safe casting. Operands whose dtypes differ from the loop's are
 * converted inside the kernel as they are loaded and stored: no temporary arrays. */
#include <cufunc/cufunc.h>

#include <stdio.h>
#include <string.h>

#define TRY(call)                                                                                  \
    do {                                                                                           \
        cf_status st_ = (call);                                                                    \
        if (st_ != CF_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s: %s\n", #call, cf_status_name(st_), cf_last_error());   \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

enum { N = 100000 };

/* One call: inputs of dtypes tx, ty filled with x = i % 100 and y = 3 (or 1.5), output of dtype
 * tr; checks r == x * y and that the expected loop was picked. */
static int run(cf_ufunc *mul, cf_stream *s, cf_dtype tx, cf_dtype ty, cf_dtype tr, int want_loop)
{
    static unsigned char hx[N * 8], hy[N * 8], hr[N * 8];
    double yv = cf_dtype_kind(ty) == 'f' ? 1.5 : 3;
    for (int i = 0; i < N; i++) {
        double xv = i % 100;
        switch (tx) {
        case CF_INT16: ((int16_t *)hx)[i] = (int16_t)xv; break;
        case CF_INT32: ((int32_t *)hx)[i] = (int32_t)xv; break;
        default: ((uint8_t *)hx)[i] = (uint8_t)xv; break;
        }
        if (ty == CF_FLOAT32)
            ((float *)hy)[i] = (float)yv;
        else
            ((int16_t *)hy)[i] = (int16_t)yv;
    }
    const cf_dtype in[2] = {tx, ty}, types[3] = {tx, ty, tr};
    int loop = -1;
    TRY(cf_ufunc_resolve(mul, in, NULL, &loop));
    cf_dtype lt[3];
    TRY(cf_ufunc_loop_types(mul, loop, lt));
    printf("(%s, %s) -> %s: loop %d (%s, %s) -> %s\n", cf_dtype_name(tx), cf_dtype_name(ty),
           cf_dtype_name(tr), loop, cf_dtype_name(lt[0]), cf_dtype_name(lt[1]), cf_dtype_name(lt[2]));
    if (loop != want_loop) {
        printf("  wanted loop %d\n", want_loop);
        return 1;
    }
    uint64_t d[3] = {0};
    const cf_dtype *t = types;
    for (int k = 0; k < 3; k++)
        TRY(cf_mem_alloc(s, N * cf_dtype_size(t[k]), &d[k]));
    TRY(cf_memcpy_htod(s, d[0], hx, N * cf_dtype_size(tx), 0));
    TRY(cf_memcpy_htod(s, d[1], hy, N * cf_dtype_size(ty), 0));
    TRY(cf_ufunc_call(mul, s, N, types, d));
    TRY(cf_memcpy_dtoh(s, hr, d[2], N * cf_dtype_size(tr), 1));
    for (int k = 0; k < 3; k++)
        TRY(cf_mem_free(s, d[k]));
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double want = (i % 100) * yv;
        double got = tr == CF_INT32 ? ((int32_t *)hr)[i] : ((double *)hr)[i];
        bad += got != want;
    }
    if (bad)
        printf("  %d wrong values\n", bad);
    return bad != 0;
}

int main(void)
{
    const cf_dtype loops[3][3] = {{CF_INT32, CF_INT32, CF_INT32},
                                  {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32},
                                  {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64}};
    cf_ufunc *mul = NULL;
    cf_status st = cf_ufunc_from_expr("mul", "x * y", 2, &loops[0][0], 3, &mul);
    if (st) {
        fprintf(stderr, "cf_ufunc_from_expr: %s: %s\n", cf_status_name(st), cf_last_error());
        return st == CF_ERR_NO_NVRTC ? 77 : 1;
    }
    if (!cf_is_available()) {
        printf("casting_loops needs a GPU: %s\n", cf_last_error());
        cf_ufunc_free(mul);
        return 77;
    }
    cf_stream *s = NULL;
    TRY(cf_stream_create(0, &s));
    int bad = 0;
    bad |= run(mul, s, CF_INT16, CF_INT16, CF_INT32, 0);   /* int16 -> int32 is safe */
    bad |= run(mul, s, CF_UINT8, CF_FLOAT32, CF_FLOAT64, 1); /* uint8 -> float32 is safe; output converted */
    bad |= run(mul, s, CF_INT32, CF_FLOAT32, CF_FLOAT64, 2); /* int32 -> float32 is not: float64 */
    TRY(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_ufunc_free(mul);
    if (bad)
        return 1;
    printf("casting_loops: ok\n");
    return 0;
}
