/* test_compile.c: NVRTC compilation without a GPU (CUBIN for sm_90 and an old arch, PTX for an arch
 * newer than NVRTC knows, none for one older than it supports), compile errors carrying log,
 * numbered source and options, the embedded template bundle, the error/status functions, and
 * allocation-failure injection through cf_compile_source. */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include "check.h"
#include "testing.h"
#include "hash.h"

static const char *KERNEL =
    "extern \"C\" __global__ void fill(int *out, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        out[i] = i * 3 + 1;\n"
    "}\n";

static int have_nvrtc(void)
{
    if (cf_nvrtc_init() == CF_OK)
        return 1;
    CHECK_OK(cf_nvrtc_init()); /* CI has NVRTC: its absence is a failure, not a skip */
    return 0;
}

static int is_elf(const void *p, size_t n)
{
    const unsigned char *b = p;
    return n > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void test_cubin_sm90(void)
{
    if (!have_nvrtc())
        return;
    void *img = NULL;
    size_t n = 0;
    int ptx = -1;
    double t0 = now_s();
    CHECK_OK(cf_compile_source(KERNEL, NULL, 0, 9, 0, &img, &n, &ptx));
    double t1 = now_s();
    CHECK(ptx == 0);
    CHECK(is_elf(img, n));
    fprintf(stderr, "  sm_90 CUBIN: %zu bytes in %.1f ms (cold, first compile of the process)\n", n,
            (t1 - t0) * 1e3);
    cf_free_buffer(img);
    t0 = now_s();
    CHECK_OK(cf_compile_source(KERNEL, NULL, 0, 9, 0, &img, &n, &ptx));
    fprintf(stderr, "  again: %.1f ms\n", (now_s() - t0) * 1e3);
    cf_free_buffer(img);
    cf_free_buffer(NULL);
}

static void test_old_and_future_archs(void)
{
    if (!have_nvrtc())
        return;
    void *img = NULL;
    size_t n = 0;
    int ptx = -1;
    /* sm_75 is the oldest arch of CUDA 13 and still in 11 and 12. */
    CHECK_OK(cf_compile_source(KERNEL, NULL, 0, 7, 5, &img, &n, &ptx));
    CHECK(ptx == 0 && is_elf(img, n));
    cf_free_buffer(img);

    /* A GPU newer than NVRTC: PTX of the newest arch it knows, NUL-terminated for the JIT. */
    int best = 0;
    CHECK_OK(cf_nvrtc_supports_arch(99, 9, &best));
    img = NULL;
    CHECK_OK(cf_compile_source(KERNEL, NULL, 0, 99, 9, &img, &n, &ptx));
    CHECK(ptx == 1);
    if (img && n) {
        CHECK(((char *)img)[n - 1] == '\0');
        char target[32];
        snprintf(target, sizeof target, ".target sm_%d", best);
        CHECK_CONTAINS((char *)img, target);
        CHECK_CONTAINS((char *)img, ".entry fill");
    }
    cf_free_buffer(img);

    /* Older than anything NVRTC supports. */
    img = (void *)1;
    CHECK_STATUS(cf_compile_source(KERNEL, NULL, 0, 1, 0, &img, &n, &ptx), CF_ERR_UNSUPPORTED);
    CHECK(img == NULL);
    CHECK_CONTAINS(cf_last_error(), "1.0");
}

static void test_user_options_reach_nvrtc(void)
{
    if (!have_nvrtc())
        return;
    const char *src = "#ifndef MAGIC\n#error MAGIC not defined\n#endif\n"
                      "extern \"C\" __global__ void k(int *p) { *p = MAGIC; }\n";
    const char *opts[] = {"-DMAGIC=42", "--use_fast_math"};
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(cf_compile_source(src, opts, 2, 9, 0, &img, &n, NULL));
    cf_free_buffer(img);
    CHECK_STATUS(cf_compile_source(src, NULL, 0, 9, 0, &img, &n, NULL), CF_ERR_COMPILE);
    CHECK_CONTAINS(cf_last_error(), "MAGIC not defined");
}

static void test_compile_error_report(void)
{
    if (!have_nvrtc())
        return;
    const char *bad = "extern \"C\" __global__ void k(float *x)\n"
                      "{\n"
                      "    x[0] = undefined_thing + 1;\n"
                      "}\n";
    const char *opts[] = {"-DFOO=1"};
    void *img = (void *)1;
    size_t n = 7;
    CHECK_STATUS(cf_compile_source(bad, opts, 1, 9, 0, &img, &n, NULL), CF_ERR_COMPILE);
    CHECK(img == NULL && n == 0);
    const char *msg = cf_last_error();
    CHECK_CONTAINS(msg, "undefined_thing");             /* the log */
    CHECK_CONTAINS(msg, "(3)");                          /* the log's line reference */
    CHECK_CONTAINS(msg, "    3 |     x[0] = undefined_thing + 1;"); /* numbered source */
    CHECK_CONTAINS(msg, "    1 | extern \"C\"");
    CHECK_CONTAINS(msg, "-std=c++17");                   /* every option */
    CHECK_CONTAINS(msg, "--gpu-architecture=sm_90");
    CHECK_CONTAINS(msg, "-DFOO=1");
    CHECK(cf_last_status() == CF_ERR_COMPILE);
}

static void test_bad_arguments(void)
{
    void *img;
    size_t n;
    const char *opts[] = {"-DX", NULL};
    CHECK_STATUS(cf_compile_source(NULL, NULL, 0, 9, 0, &img, &n, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_compile_source(KERNEL, NULL, 0, 9, 0, NULL, &n, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_compile_source(KERNEL, NULL, 0, 9, 0, &img, NULL, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_compile_source(KERNEL, NULL, 2, 9, 0, &img, &n, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_compile_source(KERNEL, opts, 2, 9, 0, &img, &n, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_compile_source(KERNEL, opts, -1, 9, 0, &img, &n, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_compile_source(KERNEL, NULL, 0, 0, 0, &img, &n, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_compile_source(KERNEL, NULL, 0, 9, 12, &img, &n, NULL), CF_ERR_INVALID);
}

/* ---- templates ------------------------------------------------------------------------------ */

typedef struct tfile {
    char *name;
    char *data;
    size_t len;
} tfile;

static int has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Collect templates/ as embed_templates.py does: files ending .cuh .cu .h, relative names. */
static void collect(const char *root, const char *rel, tfile *files, int *n, int cap)
{
    char dir[2048];
    snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        char sub[1024], full[4096];
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            collect(root, sub, files, n, cap);
        } else if (*n < cap && (has_suffix(e->d_name, ".cuh") || has_suffix(e->d_name, ".cu") ||
                                has_suffix(e->d_name, ".h"))) {
            FILE *f = fopen(full, "rb");
            if (!f)
                continue;
            char *buf = malloc((size_t)st.st_size + 1);
            size_t got = fread(buf, 1, (size_t)st.st_size, f);
            fclose(f);
            files[*n].name = strdup(sub);
            files[*n].data = buf;
            files[*n].len = got;
            (*n)++;
        }
    }
    closedir(d);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tfile *)a)->name, ((const tfile *)b)->name);
}

static void test_templates_embedded(void)
{
    const char *src_dir = getenv("CUFUNC_SOURCE_DIR");
    if (!src_dir) {
        fprintf(stderr, "  SKIP: CUFUNC_SOURCE_DIR not set\n");
        cf_t_current_skipped = 1;
        return;
    }
    char root[2048];
    snprintf(root, sizeof root, "%s/templates", src_dir);
    tfile files[256];
    int n = 0;
    collect(root, "", files, &n, 256);
    qsort(files, (size_t)n, sizeof files[0], by_name);

    CHECK(cf_templates_count() == n);
    cf_sha256 h;
    unsigned char d[32];
    char hex[65];
    cf_sha256_init(&h);
    for (int i = 0; i < n; i++) {
        cf_sha256_field(&h, files[i].name, strlen(files[i].name));
        cf_sha256_field(&h, files[i].data, files[i].len);
        size_t len = 0;
        const char *emb = cf_templates_find(files[i].name, &len);
        CHECK(emb != NULL && len == files[i].len);
        if (emb && len == files[i].len)
            CHECK(memcmp(emb, files[i].data, len) == 0 && emb[len] == '\0');
        if (i < cf_templates_count())
            CHECK(strcmp(cf_templates_name(i), files[i].name) == 0);
    }
    cf_sha256_final(&h, d);
    cf_hex_encode(d, 32, hex);
    CHECK(strcmp(cf_templates_hash(), hex) == 0);
    CHECK(strlen(cf_templates_hash()) == 64);
    CHECK(cf_templates_find("cufunc/no_such_file.cuh", NULL) == NULL);
    CHECK(cf_templates_find(NULL, NULL) == NULL);
    CHECK(cf_templates_name(-1) == NULL && cf_templates_name(n) == NULL);
    size_t len = 99;
    CHECK(cf_templates_source(n, &len) == NULL && len == 0);
    fprintf(stderr, "  %d template file(s), bundle hash %.16s...\n", n, cf_templates_hash());
    for (int i = 0; i < n; i++) {
        free(files[i].name);
        free(files[i].data);
    }
}

/* The bundle is visible to NVRTC by include name, with no include path on disk. */
static void test_templates_include_without_files(void)
{
    if (!have_nvrtc())
        return;
    if (!cf_templates_find("cufunc/runtime.cuh", NULL)) {
        fprintf(stderr, "  SKIP: templates/cufunc/runtime.cuh not written yet\n");
        cf_t_current_skipped = 1;
        return;
    }
    const char *src = "#include \"cufunc/runtime.cuh\"\n"
                      "extern \"C\" __global__ void k(int *p) { *p = 1; }\n";
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(cf_compile_source(src, NULL, 0, 9, 0, &img, &n, NULL));
    cf_free_buffer(img);
    /* A name that is not in the bundle fails as a missing include. */
    CHECK_STATUS(cf_compile_source("#include \"cufunc/no_such_file.cuh\"\n", NULL, 0, 9, 0, &img,
                                   &n, NULL),
                 CF_ERR_COMPILE);
    CHECK_CONTAINS(cf_last_error(), "no_such_file.cuh");
}

/* ---- the error and status functions (src/error.c) ------------------------------------------ */

static void test_error_functions(void)
{
    cf_clear_error();
    CHECK(cf_last_status() == CF_OK);
    CHECK(strcmp(cf_last_error(), "") == 0);
    void *img;
    size_t n;
    CHECK_STATUS(cf_compile_source(NULL, NULL, 0, 9, 0, &img, &n, NULL), CF_ERR_INVALID);
    CHECK(cf_last_status() == CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "cf_compile_source");
    /* Success does not clear the message. */
    CHECK(cf_templates_count() >= 0);
    cf_free_buffer(NULL);
    CHECK(cf_last_status() == CF_ERR_INVALID);
    cf_clear_error();
    CHECK(cf_last_status() == CF_OK && cf_last_error()[0] == '\0');

    const cf_status codes[] = {CF_OK, CF_ERR_INVALID, CF_ERR_TYPE, CF_ERR_NOMEM,
                               CF_ERR_DEVICE_NOMEM, CF_ERR_NO_DRIVER, CF_ERR_NO_DEVICE,
                               CF_ERR_NO_NVRTC, CF_ERR_COMPILE, CF_ERR_CUDA, CF_ERR_FORK,
                               CF_ERR_IO, CF_ERR_UNSUPPORTED, CF_ERR_RANGE};
    const char *names[] = {"CF_OK", "CF_ERR_INVALID", "CF_ERR_TYPE", "CF_ERR_NOMEM",
                           "CF_ERR_DEVICE_NOMEM", "CF_ERR_NO_DRIVER", "CF_ERR_NO_DEVICE",
                           "CF_ERR_NO_NVRTC", "CF_ERR_COMPILE", "CF_ERR_CUDA", "CF_ERR_FORK",
                           "CF_ERR_IO", "CF_ERR_UNSUPPORTED", "CF_ERR_RANGE"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        CHECK(strcmp(cf_status_name(codes[i]), names[i]) == 0);
    CHECK(cf_status_name(-999) != NULL);
    CHECK(cf_status_name(12345) != NULL);
}

/* A compile error of a long source gives a long message, kept whole. */
static void test_long_error_message(void)
{
    if (!have_nvrtc())
        return;
    size_t lines = 3000;
    char *src = malloc(lines * 64 + 200);
    size_t len = 0;
    for (size_t i = 0; i < lines; i++)
        len += (size_t)sprintf(src + len, "__device__ int f%zu(int x) { return x; }\n", i);
    len += (size_t)sprintf(src + len, "this line is the error;\n");
    void *img;
    size_t n;
    CHECK_STATUS(cf_compile_source(src, NULL, 0, 9, 0, &img, &n, NULL), CF_ERR_COMPILE);
    const char *msg = cf_last_error();
    CHECK(strlen(msg) > len);
    CHECK_CONTAINS(msg, " 3001 | this line is the error;");
    CHECK_CONTAINS(msg, "    1 | __device__ int f0(int x)");
    CHECK_CONTAINS(msg, "--- options ---");
    free(src);
}

/* Sources that use no 2-byte float get -DCF_NO_HALF (runtime.cuh's float16/bfloat16 parts left out
 * of the parse, for NVRTC time); sources that name one of them, or a half helper, do not, and
 * compile with the types available. */
static void test_half_parts_only_when_named(void)
{
    if (!have_nvrtc())
        return;
    void *img;
    size_t n;
    const char *plain = "#include \"cufunc/runtime.cuh\"\n"
                        "extern \"C\" __global__ void k(float *x) { x[0] = cf_sqrt(x[0]); }\n"
                        "this line is the error;\n";
    CHECK_STATUS(cf_compile_source(plain, NULL, 0, 9, 0, &img, &n, NULL), CF_ERR_COMPILE);
    CHECK_CONTAINS(cf_last_error(), "-DCF_NO_HALF");
    const char *names[] = {"cf_float16 h = cf_float16(x[0]); x[0] = (float)cf_sqrt(h);",
                           "cf_bfloat16 h = cf_bfloat16(x[0]); x[0] = (float)cf_abs(h);",
                           "x[0] = cf_f16_to_f32(cf_f32_to_f16(x[0]));"};
    for (int i = 0; i < 3; i++) {
        char src[512];
        snprintf(src, sizeof src, "#include \"cufunc/runtime.cuh\"\n"
                 "extern \"C\" __global__ void k(float *x) { %s }\n", names[i]);
        CHECK_OK(cf_compile_source(src, NULL, 0, 9, 0, &img, &n, NULL));
        cf_free_buffer(img);
        strcat(src, "this line is the error;\n");
        CHECK_STATUS(cf_compile_source(src, NULL, 0, 9, 0, &img, &n, NULL), CF_ERR_COMPILE);
        CHECK(strstr(cf_last_error(), "-DCF_NO_HALF") == NULL);
    }
    /* with CF_NO_HALF the types really are absent (the guard works) */
    const char *forced = "#define CF_NO_HALF\n#include \"cufunc/runtime.cuh\"\n"
                         "extern \"C\" __global__ void k(float *x) { cf_float16 h; }\n";
    CHECK_STATUS(cf_compile_source(forced, NULL, 0, 9, 0, &img, &n, NULL), CF_ERR_COMPILE);
}

/* ---- allocation failures -------------------------------------------------------------------- */

static void test_alloc_failures_compile(void)
{
    if (!have_nvrtc())
        return;
    const char *bad = "extern \"C\" __global__ void k() { nope; }\n";
    const char *sources[2] = {KERNEL, bad};
    for (int s = 0; s < 2; s++) {
        int64_t before = cf_test_alloc_outstanding();
        int done = 0;
        for (int64_t k = 1; k < 50 && !done; k++) {
            void *img = NULL;
            size_t n = 0;
            cf_test_fail_alloc_after(k, 0);
            cf_status st = cf_compile_source(sources[s], NULL, 0, 9, 0, &img, &n, NULL);
            cf_test_fail_alloc_after(0, 0);
            if (st == CF_ERR_NOMEM) {
                CHECK(img == NULL);
                CHECK(cf_test_alloc_outstanding() == before);
                continue;
            }
            /* Past the last allocation: the real outcome. */
            CHECK_STATUS(st, s == 0 ? CF_OK : CF_ERR_COMPILE);
            cf_free_buffer(img);
            CHECK(cf_test_alloc_outstanding() == before);
            CHECK(k > 1); /* at least one allocation was failed */
            done = 1;
        }
        CHECK(done);
    }
}

int main(void)
{
    RUN(test_cubin_sm90);
    RUN(test_old_and_future_archs);
    RUN(test_user_options_reach_nvrtc);
    RUN(test_compile_error_report);
    RUN(test_bad_arguments);
    RUN(test_templates_embedded);
    RUN(test_templates_include_without_files);
    RUN(test_error_functions);
    RUN(test_long_error_message);
    RUN(test_half_parts_only_when_named);
    RUN(test_alloc_failures_compile);
    return SUMMARY();
}
