/* consumer.c: a program outside cufunc's tree, built against an INSTALLED libcufunc by
 * tests/install_consumer/run.cmake (with find_package and with pkg-config). It uses only the public
 * headers and needs no GPU: it compiles a ufunc's kernel with NVRTC for two architectures and
 * checks that a broken loop is reported with NVRTC's log. With a GPU it also runs the ufunc.
 * Prints "consumer: ok" when everything it could check held; exits 1 otherwise. */
#include <cufunc/cufunc.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what, cf_status st)
{
    fprintf(stderr, "consumer: %s: %s: %s\n", what, cf_status_name(st), cf_last_error());
    return 1;
}

int main(void)
{
    printf("cufunc %s (templates %.12s)\n", CUFUNC_VERSION_STRING, cf_templates_hash());
    const cf_dtype types[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    cf_ufunc *hyp = NULL;
    cf_status st = cf_ufunc_from_expr("hypot", "sqrtf(x * x + y * y)", 2, types, 1, &hyp);
    if (st)
        return fail("cf_ufunc_from_expr", st);
    static const int archs[][2] = {{8, 0}, {9, 0}};
    for (int i = 0; i < 2; i++) {
        int from = -1;
        st = cf_ufunc_compile_contiguous(hyp, 0, NULL, 1 << 20, archs[i][0], archs[i][1], &from);
        if (st)
            return fail("cf_ufunc_compile_contiguous", st);
        printf("hypot compiled for compute capability %d.%d\n", archs[i][0], archs[i][1]);
    }

    cf_ufunc *bad = NULL;
    st = cf_ufunc_from_expr("broken", "sqrtf(x * x + )", 1, (const cf_dtype[]){CF_FLOAT32, CF_FLOAT32},
                            1, &bad);
    if (st != CF_ERR_COMPILE || bad || !strstr(cf_last_error(), "error") ||
        !strstr(cf_last_error(), "sqrtf(x * x + )")) {
        fprintf(stderr, "consumer: a broken expression gave %s: %s\n", cf_status_name(st),
                cf_last_error());
        return 1;
    }
    printf("a broken expression is CF_ERR_COMPILE with NVRTC's log\n");

    if (cf_is_available()) {
        float x[4] = {3, 5, 8, 7}, y[4] = {4, 12, 15, 24}, r[4] = {0};
        void *args[3] = {x, y, r};
        if ((st = cf_ufunc_call_host(hyp, NULL, 4, types, args)))
            return fail("cf_ufunc_call_host", st);
        if (r[0] != 5 || r[1] != 13 || r[2] != 17 || r[3] != 25) {
            fprintf(stderr, "consumer: hypot gave %g %g %g %g\n", r[0], r[1], r[2], r[3]);
            return 1;
        }
        printf("hypot ran on the GPU: 5 13 17 25\n");
    } else {
        printf("no GPU (%s): nothing launched\n", cf_last_error());
    }
    cf_ufunc_free(hyp);
    printf("consumer: ok\n");
    return 0;
}
