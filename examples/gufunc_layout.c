/* gufunc_layout.c: a generalized ufunc with a layout.
 *
 * matvec with the layout "(m,n),(n)->(m)": a batch of B matrices (B, m, n) times one vector (n)
 * broadcast over the batch, giving (B, m). The loop receives each operand's core dimensions as a
 * cf_array_ref<T, k> (data pointer, extents, byte strides) for one iteration of the batch. */
#include <cufunc/cufunc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *MATVEC_SRC =
    "__device__ void matvec(cf_array_ref<cf_float64, 2> a, cf_array_ref<cf_float64, 1> x,\n"
    "                       cf_array_ref<cf_float64, 1> out) {\n"
    "    for (long long i = 0; i < a.shape[0]; i++) {\n"
    "        cf_float64 acc = 0;\n"
    "        for (long long j = 0; j < a.shape[1]; j++)\n"
    "            acc += *(cf_float64 *)(a.data + i * a.strides[0] + j * a.strides[1]) *\n"
    "                   *(cf_float64 *)(x.data + j * x.strides[0]);\n"
    "        *(cf_float64 *)(out.data + i * out.strides[0]) = acc;\n"
    "    }\n"
    "}\n";

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
    cf_gufunc *mv = NULL;
    const cf_dtype types[3] = {CF_FLOAT64, CF_FLOAT64, CF_FLOAT64};
    const int arg_ndim[3] = {2, 1, 1}; /* how the function takes each operand */
    TRY(cf_gufunc_create("matvec", "(m,n),(n)->(m)", &mv));
    TRY(cf_gufunc_add_loop(mv, types, arg_ndim, MATVEC_SRC, "matvec", NULL, 0, NULL));
    cf_status st = cf_gufunc_check(mv, 0);
    if (st == CF_ERR_NO_NVRTC) {
        printf("gufunc_layout needs NVRTC: %s\n", cf_last_error());
        return 77;
    }
    TRY(st);
    if (!cf_is_available()) {
        printf("gufunc_layout needs a GPU: %s\n", cf_last_error());
        cf_gufunc_free(mv);
        return 77;
    }
    enum { B = 1000, M = 3, N = 5 };
    double *a = malloc(sizeof(double) * B * M * N), x[N], *r = malloc(sizeof(double) * B * M);
    if (!a || !r)
        return 1;
    for (int k = 0; k < B * M * N; k++)
        a[k] = (double)(k % 17) - 8;
    for (int j = 0; j < N; j++)
        x[j] = j + 1;

    cf_stream *s = NULL;
    uint64_t da = 0, dx = 0, dr = 0;
    TRY(cf_stream_create(0, &s));
    TRY(cf_mem_alloc(s, sizeof(double) * B * M * N, &da));
    TRY(cf_mem_alloc(s, sizeof x, &dx));
    TRY(cf_mem_alloc(s, sizeof(double) * B * M, &dr));
    TRY(cf_memcpy_htod(s, da, a, sizeof(double) * B * M * N, 0));
    TRY(cf_memcpy_htod(s, dx, x, sizeof x, 0));

    /* operands: full shapes, loop dimensions first and core dimensions last */
    cf_operand ops[3];
    memset(ops, 0, sizeof ops);
    const int64_t sa[3] = {B, M, N}, sx[1] = {N}, sr[2] = {B, M};
    TRY(cf_array_init_contiguous(&ops[0].array, da, CF_FLOAT64, 3, sa, 'C', 0));
    TRY(cf_array_init_contiguous(&ops[1].array, dx, CF_FLOAT64, 1, sx, 'C', 0));
    TRY(cf_array_init_contiguous(&ops[2].array, dr, CF_FLOAT64, 2, sr, 'C', 0));
    /* bind the core dimensions (m = 3, n = 5) and the loop shape (B), NumPy's rules */
    cf_gufunc_shapes sh;
    const unsigned char has_out[1] = {1};
    TRY(cf_gufunc_bind(mv, ops, has_out, &sh));
    int loop = -1;
    const cf_dtype in_types[2] = {CF_FLOAT64, CF_FLOAT64};
    TRY(cf_gufunc_resolve(mv, in_types, NULL, &loop));
    /* fresh_outputs bit 0: the output's old contents need not be read */
    TRY(cf_gufunc_launch(mv, loop, s, ops, &sh, 1u));
    TRY(cf_memcpy_dtoh(s, r, dr, sizeof(double) * B * M, 1));

    int bad = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < M; i++) {
            double want = 0;
            for (int j = 0; j < N; j++)
                want += a[(b * M + i) * N + j] * x[j];
            bad += r[b * M + i] != want; /* exact: small integers */
        }
    TRY(cf_mem_free(s, da));
    TRY(cf_mem_free(s, dx));
    TRY(cf_mem_free(s, dr));
    TRY(cf_stream_synchronize(s));
    cf_stream_free(s);
    cf_gufunc_free(mv);
    free(a);
    free(r);
    if (bad) {
        printf("gufunc_layout: %d wrong values\n", bad);
        return 1;
    }
    printf("matvec %s over a batch of %d (%dx%d) matrices\n", "(m,n),(n)->(m)", B, M, N);
    printf("gufunc_layout: ok\n");
    return 0;
}
