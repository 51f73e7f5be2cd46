/* compile.c: CUDA C source -> CUBIN (or PTX) with NVRTC. No GPU needed.
 *
 * Every program gets the embedded template bundle as in-memory headers (include names such as
 * "cufunc/runtime.cuh"), so generated sources include templates without any file-system path, and
 * a build's templates cannot be mixed with another install's. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "error.h"
#include "nvrtc_loader.h"
#include "templates.h"

/* The arch option for a device of compute capability cc_major.cc_minor, and whether the result
 * will be PTX. */
static cf_status compile_target(int cc_major, int cc_minor, char *arch_opt, size_t cap, int *is_ptx)
{
    /* The loaded library's facts (the caller loaded it): compile.c reads nothing of the cache
     * folder, where the stamp's facts live (cache.c calls compile.c, never the other way). */
    cf_nvrtc_facts facts;
    cf_status st = cf_nvrtc_loaded_facts(&facts);
    if (st)
        return st;
    int want = cc_major * 10 + cc_minor;
    int best = cf_nvrtc_best_arch(&facts, want);
    if (best == 0) {
        int maj = 0, min = 0;
        cf_nvrtc_version(&maj, &min);
        return cf_error_set(CF_ERR_UNSUPPORTED,
                            "NVRTC %d.%d (%s) cannot compile for compute capability %d.%d: it "
                            "supports no architecture at or below sm_%d. Use an NVRTC from an "
                            "older CUDA toolkit for this GPU",
                            maj, min, cf_nvrtc_path(), cc_major, cc_minor, want);
    }
    /* SASS when NVRTC knows the device's own arch; otherwise PTX of the newest arch below it, which
     * the driver JIT-compiles for the device (forward compatible by design). */
    int cubin = (best == want) && cf_nvrtc.nvrtcGetCUBIN && cf_nvrtc.nvrtcGetCUBINSize;
    snprintf(arch_opt, cap, "--gpu-architecture=%s_%d", cubin ? "sm" : "compute", cubin ? want : best);
    *is_ptx = !cubin;
    return CF_OK;
}

/* Append to a growing cf_malloc'd string; returns 0 when out of memory (the buffer stays valid). */
typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

static int sb_reserve(strbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *g = cf_realloc(b->p, cap);
    if (!g)
        return 0;
    b->p = g;
    b->cap = cap;
    return 1;
}

static int sb_add(strbuf *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n))
        return 0;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 1;
}

static int sb_str(strbuf *b, const char *s) { return sb_add(b, s, strlen(s)); }

/* The failure report: what NVRTC said, the source with line numbers (the log's "(N): error" refers
 * to them), and the exact options, so a bug report holds everything needed to reproduce it. */
static cf_status compile_error(nvrtcResult r, const char *log, const char *source,
                               const char *const *opts, int nopts)
{
    strbuf b = {0};
    int ok = sb_str(&b, "NVRTC failed to compile the program (") &&
             sb_str(&b, cf_nvrtc.nvrtcGetErrorString(r)) && sb_str(&b, ")\n--- NVRTC log ---\n") &&
             sb_str(&b, log && *log ? log : "(empty)\n");
    if (ok && b.p[b.len - 1] != '\n')
        ok = sb_str(&b, "\n");
    ok = ok && sb_str(&b, "--- source ---\n");
    const char *line = source;
    for (int n = 1; ok && *line; n++) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char num[32];
        snprintf(num, sizeof num, "%5d | ", n);
        ok = sb_str(&b, num) && sb_add(&b, line, len) && sb_str(&b, "\n");
        line += len + (end ? 1 : 0);
    }
    ok = ok && sb_str(&b, "--- options ---\n");
    for (int i = 0; ok && i < nopts; i++)
        ok = sb_str(&b, opts[i]) && sb_str(&b, i + 1 < nopts ? " " : "\n");
    cf_status st;
    if (ok)
        st = cf_error_set(CF_ERR_COMPILE, "%s", b.p);
    else /* the report itself did not fit in memory: keep the log at least */
        st = cf_error_set(CF_ERR_COMPILE, "NVRTC failed to compile the program (%s); log:\n%s",
                          cf_nvrtc.nvrtcGetErrorString(r), log ? log : "");
    cf_free(b.p);
    return st;
}

static cf_status nvrtc_fail(nvrtcResult r, const char *what)
{
    return cf_error_set(r == NVRTC_ERROR_OUT_OF_MEMORY ? CF_ERR_NOMEM : CF_ERR_COMPILE,
                        "%s: %s", what, cf_nvrtc.nvrtcGetErrorString(r));
}

/* Whether a source may use runtime.cuh's 2-byte float types or their helpers (cf_float16,
 * cf_bfloat16, cf_f32_to_f16, cf_bf16, CF_HALF_*). Sources that cannot are compiled with
 * -DCF_NO_HALF, which leaves those ~150 lines of C++ (classes, operators, casters, math) out of
 * the parse: NVRTC took 54 -> 64 ms per element-wise kernel when they came in (2026-11-25,
 * tools/kernel_compare.py cubins), with identical CUBINs. The test is on the text, so the
 * decision, like the kernel cache's key, follows from the source alone. */
static int source_may_use_half(const char *source)
{
    return strstr(source, "float16") || strstr(source, "f16") || strstr(source, "bf16") ||
           strstr(source, "CF_HALF") || strstr(source, "cf_h16");
}

cf_status cf_compile_source(const char *source, const char *const *options, int noptions,
                            int cc_major, int cc_minor, void **image, size_t *size, int *is_ptx)
{
    if (!source || !image || !size)
        return cf_error_set(CF_ERR_INVALID, "cf_compile_source: source, image and size must not "
                                            "be NULL");
    if (noptions < 0 || (noptions > 0 && !options))
        return cf_error_set(CF_ERR_INVALID, "cf_compile_source: %d options but options is NULL "
                                            "or the count is negative", noptions);
    for (int i = 0; i < noptions; i++)
        if (!options[i])
            return cf_error_set(CF_ERR_INVALID, "cf_compile_source: option %d is NULL", i);
    if (noptions > 1000)
        return cf_error_set(CF_ERR_INVALID, "cf_compile_source: %d options is too many", noptions);
    if (cc_major <= 0 || cc_minor < 0 || cc_minor > 9)
        return cf_error_set(CF_ERR_INVALID, "cf_compile_source: bad compute capability %d.%d",
                            cc_major, cc_minor);
    *image = NULL;
    *size = 0;

    cf_status st = cf_nvrtc_load();
    if (st)
        return st;
    char arch_opt[64];
    int ptx = 0;
    st = compile_target(cc_major, cc_minor, arch_opt, sizeof arch_opt, &ptx);
    if (st)
        return st;

    nvrtcProgram prog = NULL;
    const char **opts = NULL;
    char *log = NULL;
    void *out = NULL;
    const int no_half = !source_may_use_half(source);
    int nopts = noptions + 2 + no_half;
    opts = cf_malloc(sizeof(char *) * (size_t)nopts);
    if (!opts) {
        st = CF_ERR_NOMEM;
        goto fail;
    }
    opts[0] = "-std=c++17";
    opts[1] = arch_opt;
    for (int i = 0; i < noptions; i++)
        opts[2 + i] = options[i];
    if (no_half)
        opts[2 + noptions] = "-DCF_NO_HALF";

    nvrtcResult r = cf_nvrtc.nvrtcCreateProgram(
        &prog, source, "cufunc_kernel.cu", cf_templates_n,
        cf_templates_n ? (const char *const *)cf_templates_sources : NULL,
        cf_templates_n ? (const char *const *)cf_templates_names : NULL);
    if (r != NVRTC_SUCCESS) {
        prog = NULL;
        st = nvrtc_fail(r, "nvrtcCreateProgram");
        goto fail;
    }
    nvrtcResult cr = cf_nvrtc_compile_locked(prog, nopts, opts);
    if (cr != NVRTC_SUCCESS) {
        size_t log_size = 0;
        if (cf_nvrtc.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0) {
            log = cf_malloc(log_size + 1);
            if (!log) {
                st = CF_ERR_NOMEM;
                goto fail;
            }
            if (cf_nvrtc.nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
                log[0] = '\0';
            log[log_size] = '\0';
        }
        st = cr == NVRTC_ERROR_OUT_OF_MEMORY ? nvrtc_fail(cr, "nvrtcCompileProgram")
                                             : compile_error(cr, log, source, opts, nopts);
        goto fail;
    }
    size_t n = 0;
    r = ptx ? cf_nvrtc.nvrtcGetPTXSize(prog, &n) : cf_nvrtc.nvrtcGetCUBINSize(prog, &n);
    if (r != NVRTC_SUCCESS) {
        st = nvrtc_fail(r, ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize");
        goto fail;
    }
    out = cf_malloc(n ? n : 1);
    if (!out) {
        st = CF_ERR_NOMEM;
        goto fail;
    }
    /* The PTX keeps its terminating NUL: cuModuleLoadDataEx needs it. */
    r = ptx ? cf_nvrtc.nvrtcGetPTX(prog, out) : cf_nvrtc.nvrtcGetCUBIN(prog, out);
    if (r != NVRTC_SUCCESS) {
        st = nvrtc_fail(r, ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN");
        goto fail;
    }
    cf_nvrtc.nvrtcDestroyProgram(&prog);
    cf_free(opts);
    *image = out;
    *size = n;
    if (is_ptx)
        *is_ptx = ptx;
    return CF_OK;

fail:
    if (prog)
        cf_nvrtc.nvrtcDestroyProgram(&prog);
    cf_free(opts);
    cf_free(log);
    cf_free(out);
    return st;
}

void cf_free_buffer(void *buf) { cf_free(buf); }
