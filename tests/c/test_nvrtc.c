/* test_nvrtc.c: the libnvrtc search (paths that do not exist, a folder without the library, a file
 * that is not a library, CUDA_HOME pointing nowhere), loading, version and arch queries, and the
 * locale protection around compilation. Needs no GPU; the load tests need NVRTC, as CI has. */
#define _GNU_SOURCE 1
#include <locale.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "check.h"
#include "nvrtc_loader.h"

static char tmpdir[1024];

/* Run the probe in a clean environment holding only the given variables (NULL values unset). */
static cf_status probe_with(const char *nvrtc_path, const char *cuda_home, const char *cuda_path,
                            char *path, size_t path_cap, char *tried, size_t tried_cap)
{
    const char *names[3] = {"CUFUNC_NVRTC_PATH", "CUDA_HOME", "CUDA_PATH"};
    const char *values[3] = {nvrtc_path, cuda_home, cuda_path};
    char *saved[3];
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(names[i]);
        saved[i] = v ? strdup(v) : NULL;
        if (values[i])
            setenv(names[i], values[i], 1);
        else
            unsetenv(names[i]);
    }
    cf_status st = cf_nvrtc_probe(path, path_cap, tried, tried_cap);
    for (int i = 0; i < 3; i++) {
        if (saved[i])
            setenv(names[i], saved[i], 1);
        else
            unsetenv(names[i]);
        free(saved[i]);
    }
    return st;
}

static void test_env_path_missing_file(void)
{
    char path[4096], tried[8192];
    char missing[1200];
    snprintf(missing, sizeof missing, "%s/does/not/exist/libnvrtc.so.13", tmpdir);
    cf_status st = probe_with(missing, NULL, NULL, path, sizeof path, tried, sizeof tried);
    CHECK_STATUS(st, CF_ERR_NO_NVRTC);
    CHECK(path[0] == '\0');
    CHECK_CONTAINS(tried, missing);
    const char *msg = cf_last_error();
    CHECK_CONTAINS(msg, "not found");
    CHECK_CONTAINS(msg, missing);
    CHECK_CONTAINS(msg, "CUFUNC_NVRTC_PATH");
    CHECK(strstr(msg, "failed to load") == NULL);
}

static void test_env_path_folder_without_library(void)
{
    char dir[1200], path[4096], tried[8192], want[1300];
    snprintf(dir, sizeof dir, "%s/empty_nvrtc_dir", tmpdir);
    mkdir(dir, 0755);
    cf_status st = probe_with(dir, NULL, NULL, path, sizeof path, tried, sizeof tried);
    CHECK_STATUS(st, CF_ERR_NO_NVRTC);
    const char *msg = cf_last_error();
    CHECK_CONTAINS(msg, "not found");
    const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11", "libnvrtc.so"};
    for (int i = 0; i < 4; i++) {
        snprintf(want, sizeof want, "%s/%s", dir, names[i]);
        CHECK_CONTAINS(msg, want);
        CHECK_CONTAINS(tried, want);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_env_path_not_a_library(void)
{
    char file[1200], path[4096], tried[8192];
    snprintf(file, sizeof file, "%s/libnvrtc.so.13", tmpdir);
    write_file(file, "this is not an ELF shared object\n");
    cf_status st = probe_with(file, NULL, NULL, path, sizeof path, tried, sizeof tried);
    CHECK_STATUS(st, CF_ERR_NO_NVRTC);
    const char *msg = cf_last_error();
    CHECK_CONTAINS(msg, "found but failed to load");
    CHECK_CONTAINS(msg, file);
    CHECK(strstr(msg, "NVRTC (libnvrtc) not found") == NULL);
}

static void test_cuda_home_nowhere_lists_places(void)
{
    char path[4096], tried[16384];
    cf_status st = probe_with(NULL, "/nonexistent/cuda_home", "/nonexistent/cuda_path", path,
                              sizeof path, tried, sizeof tried);
    /* In this order: CUDA_HOME's lib64 and lib, CUDA_PATH's, then the system loader's names. */
    const char *order[] = {"/nonexistent/cuda_home/lib64/libnvrtc.so.13",
                           "/nonexistent/cuda_home/lib64/libnvrtc.so\n",
                           "/nonexistent/cuda_home/lib/libnvrtc.so.12",
                           "/nonexistent/cuda_path/lib64/libnvrtc.so.11",
                           "/nonexistent/cuda_path/lib/libnvrtc.so.13",
                           "\nlibnvrtc.so.13\n"};
    const char *at = tried;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *p = strstr(at, order[i]);
        CHECK_CONTAINS(at, order[i]);
        if (p)
            at = p;
    }
    if (st == CF_OK) {
        /* The system loader found it (a machine with the toolkit registered, like CI). */
        CHECK_CONTAINS(path, "libnvrtc");
    } else {
        CHECK_STATUS(st, CF_ERR_NO_NVRTC);
        const char *msg = cf_last_error();
        CHECK_CONTAINS(msg, "/nonexistent/cuda_home/lib64/libnvrtc.so.13 (not found)");
        CHECK_CONTAINS(msg, "pip install nvidia-cuda-nvrtc");
        CHECK_CONTAINS(msg, "CUFUNC_NVRTC_PATH");
    }
}

/* A broken candidate early in the order must not stop the search: later ones still load. */
static void test_broken_candidate_does_not_stop_search(void)
{
    char root[1200], lib[1300], bad[1400], path[4096], tried[16384];
    snprintf(root, sizeof root, "%s/broken_cuda", tmpdir);
    snprintf(lib, sizeof lib, "%s/lib64", root);
    mkdir(root, 0755);
    mkdir(lib, 0755);
    snprintf(bad, sizeof bad, "%s/libnvrtc.so.13", lib);
    write_file(bad, "garbage");
    cf_status st = probe_with(NULL, root, NULL, path, sizeof path, tried, sizeof tried);
    CHECK_CONTAINS(tried, bad);
    if (st == CF_OK) {
        CHECK(strcmp(path, bad) != 0);
    } else {
        CHECK_CONTAINS(cf_last_error(), "found but failed to load");
        CHECK_CONTAINS(cf_last_error(), bad);
    }
}

static void test_cuda_home_real_toolkit(void)
{
    const char *home = "/usr/local/cuda";
    char probe_file[256];
    snprintf(probe_file, sizeof probe_file, "%s/lib64/libnvrtc.so", home);
    if (access(probe_file, F_OK) != 0) {
        fprintf(stderr, "  SKIP: no toolkit at %s\n", home);
        cf_t_current_skipped = 1;
        return;
    }
    char path[4096], tried[16384];
    CHECK_OK(probe_with(NULL, home, NULL, path, sizeof path, tried, sizeof tried));
    CHECK_CONTAINS(path, "/usr/local/cuda");
    CHECK_CONTAINS(path, "libnvrtc.so");
    /* A folder given as CUFUNC_NVRTC_PATH works too. */
    snprintf(probe_file, sizeof probe_file, "%s/lib64", home);
    CHECK_OK(probe_with(probe_file, NULL, NULL, path, sizeof path, tried, sizeof tried));
    CHECK_CONTAINS(path, "libnvrtc.so");
}

static void test_load_version_archs(void)
{
    CHECK(!cf_nvrtc_is_loaded()); /* the probes before this test load nothing for the process */
    cf_status st = cf_nvrtc_init();
    CHECK_OK(st);
    if (st)
        return;
    CHECK_OK(cf_nvrtc_init()); /* sticky: a second call is the same outcome */
    CHECK(cf_nvrtc_is_loaded());
    int maj = 0, min = -1;
    CHECK_OK(cf_nvrtc_version(&maj, &min));
    CHECK(maj >= 11 && min >= 0);
    CHECK(cf_nvrtc_path()[0] == '/');
    CHECK_STATUS(cf_nvrtc_version(NULL, &min), CF_ERR_INVALID);

    int sup = -1;
    CHECK_OK(cf_nvrtc_supports_arch(9, 0, &sup));
    CHECK(sup == 90);
    CHECK_OK(cf_nvrtc_supports_arch(8, 0, &sup));
    if (maj >= 11)
        CHECK(sup == 80);
    CHECK_OK(cf_nvrtc_supports_arch(99, 9, &sup)); /* a future GPU: the newest NVRTC knows */
    CHECK(sup >= 90 && sup < 999);
    CHECK_OK(cf_nvrtc_supports_arch(1, 0, &sup)); /* older than anything: none */
    CHECK(sup == 0);
    CHECK_STATUS(cf_nvrtc_supports_arch(9, 0, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_nvrtc_supports_arch(0, 0, &sup), CF_ERR_INVALID);
    CHECK_STATUS(cf_nvrtc_supports_arch(9, 10, &sup), CF_ERR_INVALID);
    fprintf(stderr, "  NVRTC %d.%d at %s\n", maj, min, cf_nvrtc_path());
}

/* The facts the cache uses are the loaded library's once it is loaded, and agree with the public
 * queries; the stamp check rejects bad arguments and reports a missing or foreign stamp. */
static void test_facts_and_stamp_check(void)
{
    if (cf_nvrtc_init() != CF_OK) {
        CHECK_OK(cf_nvrtc_init());
        return;
    }
    cf_nvrtc_facts f;
    int from_stamp = -1;
    CHECK_OK(cf_cache_nvrtc_facts(&f, &from_stamp));
    CHECK(from_stamp == 0);
    int maj = 0, min = 0;
    CHECK_OK(cf_nvrtc_version(&maj, &min));
    CHECK(f.major == maj && f.minor == min);
    CHECK(f.has_cubin == (cf_nvrtc.nvrtcGetCUBIN != NULL));
    for (int i = 1; i < f.n_archs; i++)
        CHECK(f.archs[i] > f.archs[i - 1]);
    int cc[][2] = {{7, 5}, {8, 6}, {9, 0}, {12, 1}, {99, 9}, {1, 0}};
    for (size_t i = 0; i < sizeof cc / sizeof cc[0]; i++) {
        int sup = -1;
        CHECK_OK(cf_nvrtc_supports_arch(cc[i][0], cc[i][1], &sup));
        CHECK(sup == cf_nvrtc_best_arch(&f, cc[i][0] * 10 + cc[i][1]));
    }
    cf_nvrtc_facts none = {0};
    CHECK(cf_nvrtc_best_arch(&none, 90) == 90); /* an NVRTC that cannot list: let it judge */
    CHECK_STATUS(cf_cache_nvrtc_facts(NULL, NULL), CF_ERR_INVALID);

    CHECK_STATUS(cf_cache_stamp_check(NULL, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_cache_stamp_check("", NULL), CF_ERR_INVALID);
    char dir[1200], path[1400];
    snprintf(dir, sizeof dir, "%s/stamp", tmpdir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/%s", dir, CF_NVRTC_STAMP_NAME);
    unlink(path);
    CHECK_STATUS(cf_cache_stamp_check(dir, NULL), CF_ERR_IO);
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    if (fp) {
        fputs("cufunc-nvrtc-stamp 1\nsearch 00\n", fp);
        fclose(fp);
    }
    CHECK_STATUS(cf_cache_stamp_check(dir, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "truncated");
}

static void test_add_search_dir(void)
{
    CHECK_STATUS(cf_nvrtc_add_search_dir(NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_nvrtc_add_search_dir(""), CF_ERR_INVALID);
    /* After the first load it is documented to have no effect, and it is not an error. */
    CHECK_OK(cf_nvrtc_add_search_dir("/nonexistent/wheel/lib"));
}

static void test_compile_keeps_locale(void)
{
    if (cf_nvrtc_init() != CF_OK) {
        CHECK_OK(cf_nvrtc_init());
        return;
    }
    const char *want = setlocale(LC_ALL, "C.UTF-8") ? "C.UTF-8" : setlocale(LC_ALL, "C");
    char saved[256];
    snprintf(saved, sizeof saved, "%s", setlocale(LC_ALL, NULL));
    nvrtcProgram prog;
    CHECK(cf_nvrtc.nvrtcCreateProgram(&prog, "extern \"C\" __global__ void k(float *x) { *x = 1.5f; }",
                                      "k.cu", 0, NULL, NULL) == NVRTC_SUCCESS);
    const char *opts[] = {"--gpu-architecture=compute_90"};
    CHECK(cf_nvrtc_compile_locked(prog, 1, opts) == NVRTC_SUCCESS);
    cf_nvrtc.nvrtcDestroyProgram(&prog);
    CHECK(strcmp(setlocale(LC_ALL, NULL), saved) == 0);
    CHECK(want != NULL);
    setlocale(LC_ALL, "C");
}

int main(void)
{
    const char *t = getenv("CUFUNC_TEST_TMP");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_nvrtc", t && *t ? t : "/tmp/cufunc_test_tmp");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", tmpdir);
    if (system(cmd) != 0)
        return 1;
    RUN(test_env_path_missing_file);
    RUN(test_env_path_folder_without_library);
    RUN(test_env_path_not_a_library);
    RUN(test_cuda_home_nowhere_lists_places);
    RUN(test_broken_candidate_does_not_stop_search);
    RUN(test_cuda_home_real_toolkit);
    RUN(test_load_version_archs);
    RUN(test_facts_and_stamp_check);
    RUN(test_add_search_dir);
    RUN(test_compile_keeps_locale);
    return SUMMARY();
}
