/* aot_compile.c: compiling without a GPU, and how loop errors are reported.
 *
 * Needs NVRTC only (no GPU, no driver): this is what CI runs. It
 *   - adds a loop and checks it at once (cf_ufunc_check): the source is compiled with NVRTC;
 *   - compiles the kernels a program will need, for the GPUs it will run on, into the disk cache
 *     (cf_ufunc_compile_contiguous, cf_ufunc_compile): a later process on such a GPU launches
 *     them without compiling (ahead-of-time cache filling);
 *   - shows the errors: a misspelt function name when the loop is added, a syntax error at the
 *     check, with NVRTC's log and the numbered source. */
#include <cufunc/cufunc.h>

#include <stdio.h>
#include <string.h>

static const char *SRC =
    "__device__ cf_float32 lerp(cf_float32 a, cf_float32 b, cf_float32 t) {\n"
    "    return a + t * (b - a);\n"
    "}\n";
static const char *BROKEN =
    "__device__ cf_float32 lerp(cf_float32 a, cf_float32 b, cf_float32 t) {\n"
    "    return a + t * (b - a)   /* a missing semicolon */\n"
    "}\n";

#define TRY(call)                                                                                  \
    do {                                                                                           \
        cf_status st_ = (call);                                                                    \
        if (st_ != CF_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s: %s\n", #call, cf_status_name(st_), cf_last_error());   \
            return st_ == CF_ERR_NO_NVRTC ? 77 : 1;                                                \
        }                                                                                          \
    } while (0)

int main(void)
{
    const cf_dtype f4[4] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};
    cf_ufunc *u = NULL;
    TRY(cf_ufunc_create("lerp", 3, 1, &u));
    TRY(cf_ufunc_add_loop(u, f4, SRC, "lerp", NULL, 0, NULL));
    TRY(cf_ufunc_check(u, 0));
    int nvmaj = 0, nvmin = 0;
    TRY(cf_nvrtc_version(&nvmaj, &nvmin));
    printf("NVRTC %d.%d; disk cache: %s\n", nvmaj, nvmin, cf_cache_dir()[0] ? cf_cache_dir() : "off");

    /* The commonest key (contiguous operands) for three GPU generations. */
    static const int archs[][2] = {{8, 0}, {8, 9}, {9, 0}};
    static const char *const from_text[] = {"compiled", "found in memory", "found on disk"};
    for (int i = 0; i < 3; i++) {
        int from = -1;
        TRY(cf_ufunc_compile_contiguous(u, 0, NULL, 1 << 20, archs[i][0], archs[i][1], &from));
        printf("contiguous float32, compute capability %d.%d: %s\n", archs[i][0], archs[i][1],
               from >= 0 && from <= 2 ? from_text[from] : "?");
    }
    /* Another key: a strided 2-D view, float64 operands (converted in the kernel). Only the
     * description matters: these addresses are never read. */
    cf_operand ops[4];
    memset(ops, 0, sizeof ops);
    const int64_t shape[2] = {1000, 1000};
    for (int k = 0; k < 4; k++)
        TRY(cf_array_init_contiguous(&ops[k].array, (uint64_t)(k + 1) << 32, CF_FLOAT64, 2, shape,
                                     'C', 0));
    ops[0].array.strides[1] = 16; /* every other column of a 1000x2000 array */
    ops[0].array.strides[0] = 16000;
    int from = -1;
    TRY(cf_ufunc_compile(u, 0, ops, NULL, 2, shape, 9, 0, &from));
    printf("strided float64 operands, compute capability 9.0: %s\n",
           from >= 0 && from <= 2 ? from_text[from] : "?");

    /* Errors. A function name that the source does not define: at once, no NVRTC needed. */
    cf_ufunc *bad = NULL;
    TRY(cf_ufunc_create("bad", 3, 1, &bad));
    cf_status st = cf_ufunc_add_loop(bad, f4, SRC, "lerp_f4", NULL, 0, NULL);
    printf("misspelt name -> %s: %s\n", cf_status_name(st), cf_last_error());
    if (st != CF_ERR_INVALID)
        return 1;
    /* A syntax error: found by the check, with NVRTC's log and the numbered source. */
    TRY(cf_ufunc_add_loop(bad, f4, BROKEN, "lerp", NULL, 0, NULL));
    st = cf_ufunc_check(bad, 0);
    const char *msg = cf_last_error();
    printf("syntax error -> %s; the message begins:\n%.400s\n...\n", cf_status_name(st), msg);
    if (st != CF_ERR_COMPILE || !strstr(msg, "ufunc 'bad' loop 0") || !strstr(msg, "error") ||
        !strstr(msg, "a missing semicolon"))
        return 1;
    cf_ufunc_free(bad);
    cf_ufunc_free(u);
    printf("aot_compile: ok\n");
    return 0;
}
