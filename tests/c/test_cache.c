/* test_cache.c: the kernel cache. Key stability (equal inputs give equal keys, in two processes;
 * every field changes the key), memory and disk levels, the entry layout and atomic writes, corrupt
 * and truncated entries rebuilt, an unusable folder, CUFUNC_CACHE=0, CUFUNC_DEBUG=1, several
 * processes filling one folder at once, allocation failures, and the NVRTC stamp: a new process
 * with a warm cache and an unchanged environment does not load NVRTC, and any change of the
 * search's inputs, of the library, or a damaged stamp makes it load NVRTC and rewrite the stamp.
 * Needs NVRTC, no GPU. */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "check.h"
#include "diagnostics.h"
#include "testing.h"
#include "hash.h"
#include "nvrtc_loader.h"

static char tmpdir[1024];
static char self_exe[1024]; /* this test binary, run again as a new process */

static const char *SRC_A = "extern \"C\" __global__ void a(int *p) { p[threadIdx.x] = 1; }\n";
static const char *SRC_B = "extern \"C\" __global__ void b(int *p) { p[threadIdx.x] = 2; }\n";

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int have_nvrtc(void)
{
    if (cf_nvrtc_init() == CF_OK)
        return 1;
    CHECK_OK(cf_nvrtc_init());
    return 0;
}

/* Point the cache at a fresh folder under the test's scratch space (removing what was there). */
static void use_dir(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", tmpdir, name);
    char cmd[2300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    CHECK(system(cmd) == 0);
    setenv("CUFUNC_CACHE_DIR", out, 1);
    unsetenv("CUFUNC_CACHE");
    unsetenv("CUFUNC_DEBUG");
    CHECK_OK(cf_cache_reconfigure());
}

static void entry_file(const char *dir, const char *key, const char *suffix, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%.2s/%s%s", dir, key, key, suffix);
}

static int file_exists(const char *p) { return access(p, F_OK) == 0; }

static int64_t file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (int64_t)st.st_size : -1;
}

/* Count files in dir/<shard>/ whose name starts with `prefix` (".tmp-" for leftovers). */
static int count_files(const char *dir, const char *prefix, const char *suffix)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || e->d_name[1] == '.'))
            continue;
        char sub[2048];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *s = opendir(sub);
        if (!s)
            continue;
        struct dirent *f;
        while ((f = readdir(s))) {
            size_t l = strlen(f->d_name), sl = strlen(suffix);
            if (strncmp(f->d_name, prefix, strlen(prefix)) == 0 && l >= sl &&
                strcmp(f->d_name + l - sl, suffix) == 0)
                n++;
        }
        closedir(s);
    }
    closedir(d);
    return n;
}

/* ---- keys ------------------------------------------------------------------------------------ */

static void key_of(const char *src, const char *const *opts, int n, int maj, int min, char k[65])
{
    k[0] = '\0';
    CHECK_OK(cf_cache_key(src, opts, n, maj, min, k));
}

static void test_key_fields(void)
{
    if (!have_nvrtc())
        return;
    const char *o1[] = {"-DA=1", "-DB=2"};
    const char *o2[] = {"-DB=2", "-DA=1"};
    const char *o3[] = {"-DA=1-DB=2"};
    const char *o4[] = {"-DA=1", "-DB=3"};
    char base[65], k[65];
    key_of(SRC_A, o1, 2, 9, 0, base);
    CHECK(strlen(base) == 64 && strspn(base, "0123456789abcdef") == 64);
    key_of(SRC_A, o1, 2, 9, 0, k);
    CHECK(strcmp(base, k) == 0); /* equal inputs, equal keys */
    key_of(SRC_B, o1, 2, 9, 0, k);
    CHECK(strcmp(base, k) != 0); /* source */
    key_of(SRC_A, o2, 2, 9, 0, k);
    CHECK(strcmp(base, k) != 0); /* option order */
    key_of(SRC_A, o3, 1, 9, 0, k);
    CHECK(strcmp(base, k) != 0); /* option boundaries */
    key_of(SRC_A, o4, 2, 9, 0, k);
    CHECK(strcmp(base, k) != 0); /* option text */
    key_of(SRC_A, o1, 1, 9, 0, k);
    CHECK(strcmp(base, k) != 0); /* option count */
    key_of(SRC_A, o1, 2, 8, 0, k);
    CHECK(strcmp(base, k) != 0); /* cc major */
    key_of(SRC_A, o1, 2, 9, 1, k);
    CHECK(strcmp(base, k) != 0); /* cc minor */
    char nosrc[65];
    key_of("", NULL, 0, 9, 0, nosrc);
    key_of("", o1, 0, 9, 0, k); /* options beyond the count are not read */
    CHECK(strcmp(nosrc, k) == 0);

    CHECK_STATUS(cf_cache_key(SRC_A, NULL, 0, 9, 0, NULL), CF_ERR_INVALID);
    CHECK_STATUS(cf_cache_key(NULL, NULL, 0, 9, 0, k), CF_ERR_INVALID);
    CHECK_STATUS(cf_cache_key(SRC_A, NULL, 1, 9, 0, k), CF_ERR_INVALID);
    CHECK_STATUS(cf_cache_key(SRC_A, NULL, 0, 0, 0, k), CF_ERR_INVALID);
}

/* The same source with other NVRTC options is another kernel: another key, and a lookup that
 * compiles rather than hitting the entry of the first options. */
static void test_options_give_distinct_entries(void)
{
    if (!have_nvrtc())
        return;
    char dir[1200];
    use_dir("options", dir, sizeof dir);
    const char *none[1] = {NULL};
    const char *fast[] = {"--use_fast_math"};
    const char *def[] = {"-DCUFUNC_TEST_OPTION=1"};
    const char *const *sets[3] = {none, fast, def};
    int counts[3] = {0, 1, 1};
    char keys[3][65];
    for (int i = 0; i < 3; i++)
        key_of(SRC_A, sets[i], counts[i], 9, 0, keys[i]);
    CHECK(strcmp(keys[0], keys[1]) != 0);
    CHECK(strcmp(keys[0], keys[2]) != 0);
    CHECK(strcmp(keys[1], keys[2]) != 0);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3; i++) {
            void *img = NULL;
            size_t n = 0;
            int from = -1;
            CHECK_OK(cf_cache_get_image(SRC_A, sets[i], counts[i], 9, 0, &img, &n, NULL, &from));
            CHECK(from == (round == 0 ? 0 : 1)); /* first: compiled, never another's entry */
            cf_free_buffer(img);
            char path[2400];
            entry_file(dir, keys[i], CF_CACHE_ENTRY_SUFFIX, path, sizeof path);
            CHECK(file_exists(path));
        }
    }
    CHECK(count_files(dir, "", CF_CACHE_ENTRY_SUFFIX) == 3);
}

/* The key of the same inputs, computed by a new process (this binary, run with --key). */
static void test_key_same_in_another_process(void)
{
    if (!have_nvrtc())
        return;
    const char *o1[] = {"-DA=1", "-DB=2"};
    char mine[65];
    key_of(SRC_A, o1, 2, 9, 0, mine);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' --key", self_exe);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p)
        return;
    char theirs[128] = "";
    if (!fgets(theirs, sizeof theirs, p))
        theirs[0] = '\0';
    CHECK(pclose(p) == 0);
    theirs[strcspn(theirs, "\n")] = '\0';
    CHECK(strcmp(mine, theirs) == 0);
}

/* ---- the two levels -------------------------------------------------------------------------- */

static void test_levels_and_entry_layout(void)
{
    if (!have_nvrtc())
        return;
    char dir[1200], key[65], path[1500];
    use_dir("levels", dir, sizeof dir);
    CHECK(strcmp(cf_cache_dir(), dir) == 0);
    cf_cache_stats s0, s1;
    cf_cache_get_stats(&s0);

    void *img1 = NULL, *img2 = NULL, *img3 = NULL;
    size_t n1 = 0, n2 = 0, n3 = 0;
    int ptx = -1, from = -1;
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img1, &n1, &ptx, &from));
    CHECK(from == 0 && ptx == 0 && n1 > 4 && memcmp(img1, "\x7f" "ELF", 4) == 0);
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img2, &n2, &ptx, &from));
    CHECK(from == 1 && n2 == n1 && img2 != img1 && memcmp(img1, img2, n1) == 0);
    CHECK_OK(cf_cache_reconfigure()); /* drops the memory level */
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img3, &n3, &ptx, &from));
    CHECK(from == 2 && n3 == n1 && ptx == 0 && memcmp(img1, img3, n1) == 0);
    cf_cache_get_stats(&s1);
    CHECK(s1.compiles == s0.compiles + 1);
    CHECK(s1.memory_hits == s0.memory_hits + 1);
    CHECK(s1.disk_hits == s0.disk_hits + 1);
    CHECK(s1.disk_writes == s0.disk_writes + 1);

    CHECK_OK(cf_cache_key(SRC_A, NULL, 0, 9, 0, key));
    entry_file(dir, key, CF_CACHE_ENTRY_SUFFIX, path, sizeof path);
    CHECK(file_exists(path));
    CHECK(file_size(path) == (int64_t)(n1 + CF_CACHE_HEADER_SIZE));
    CHECK(count_files(dir, ".tmp-", "") == 0); /* the temporary file was renamed, none left */
    CHECK(count_files(dir, "", ".cu") == 0);   /* no debug source unless asked */
    void *payload = NULL;
    size_t pn = 0;
    int pptx = -1;
    unsigned char bkey[32];
    CHECK_OK(cf_cache_key_digest(SRC_A, NULL, 0, 9, 0, bkey));
    CHECK_OK(cf_cache_entry_read(path, bkey, &payload, &pn, &pptx));
    CHECK(pn == n1 && payload && memcmp(payload, img1, n1) == 0);
    cf_free_buffer(payload);
    /* The entry of another key is refused. */
    bkey[0] ^= 1;
    CHECK_STATUS(cf_cache_entry_read(path, bkey, &payload, &pn, &pptx), CF_ERR_INVALID);

    cf_free_buffer(img1);
    cf_free_buffer(img2);
    cf_free_buffer(img3);

    /* NULL is_ptx / from are allowed; NULL image is not. */
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img1, &n1, NULL, NULL));
    cf_free_buffer(img1);
    CHECK_STATUS(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, NULL, &n1, NULL, NULL), CF_ERR_INVALID);
}

/* Damage the entry of SRC_A in one of several ways; the next lookup must rebuild it. */
static void damage_and_rebuild(const char *how)
{
    char dir[1200], key[65], path[1500];
    use_dir("corrupt", dir, sizeof dir);
    void *img = NULL;
    size_t n = 0;
    int from = -1;
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, &from));
    CHECK(from == 0);
    cf_free_buffer(img);
    CHECK_OK(cf_cache_key(SRC_A, NULL, 0, 9, 0, key));
    entry_file(dir, key, CF_CACHE_ENTRY_SUFFIX, path, sizeof path);
    int64_t full = file_size(path);
    CHECK(full > CF_CACHE_HEADER_SIZE);

    if (strcmp(how, "truncate-header") == 0) {
        CHECK(truncate(path, 10) == 0);
    } else if (strcmp(how, "truncate-payload") == 0) {
        CHECK(truncate(path, CF_CACHE_HEADER_SIZE + (full - CF_CACHE_HEADER_SIZE) / 2) == 0);
    } else if (strcmp(how, "empty") == 0) {
        CHECK(truncate(path, 0) == 0);
    } else if (strcmp(how, "extend") == 0) {
        FILE *f = fopen(path, "ab");
        fputs("junk", f);
        fclose(f);
    } else if (strcmp(how, "fifo") == 0) { /* opening it once blocked forever */
        CHECK(unlink(path) == 0 && mkfifo(path, 0644) == 0);
    } else if (strcmp(how, "link-dev-zero") == 0) {
        CHECK(unlink(path) == 0 && symlink("/dev/zero", path) == 0);
    } else if (strcmp(how, "sparse-1TiB") == 0) { /* once allocated whole: out of memory */
        CHECK(truncate(path, (off_t)1 << 40) == 0);
    } else if (strcmp(how, "format-1") == 0) {
        /* A valid entry of format 1 (its checksum over the payload only): refused by its
         * version, never misread under the new layout. */
        FILE *f = fopen(path, "r+b");
        CHECK(f != NULL);
        unsigned char *buf = malloc((size_t)full);
        CHECK(buf && fread(buf, 1, (size_t)full, f) == (size_t)full);
        buf[8] = 1;
        cf_sha256 h;
        cf_sha256_init(&h);
        cf_sha256_update(&h, buf + CF_CACHE_HEADER_SIZE, (size_t)full - CF_CACHE_HEADER_SIZE);
        cf_sha256_final(&h, buf + 56);
        fseek(f, 0, SEEK_SET);
        CHECK(fwrite(buf, 1, (size_t)full, f) == (size_t)full);
        fclose(f);
        free(buf);
    } else {
        long at = strcmp(how, "flip-payload") == 0 ? (long)(full - 3)
                  : strcmp(how, "flip-magic") == 0 ? 1L
                  : strcmp(how, "flip-ptx-flag") == 0 ? 12L /* once outside the checksum */
                                                    : 60L; /* inside the stored checksum */
        FILE *f = fopen(path, "r+b");
        CHECK(f != NULL);
        fseek(f, at, SEEK_SET);
        int c = fgetc(f);
        fseek(f, at, SEEK_SET);
        fputc(c ^ (strcmp(how, "flip-ptx-flag") == 0 ? 0x01 : 0x40), f); /* 0x01: the PTX bit */
        fclose(f);
    }

    unsigned char bkey[32];
    CHECK_OK(cf_cache_key_digest(SRC_A, NULL, 0, 9, 0, bkey));
    void *payload = NULL;
    size_t pn = 0;
    int pptx = 0;
    CHECK_STATUS(cf_cache_entry_read(path, bkey, &payload, &pn, &pptx), CF_ERR_INVALID);
    CHECK(payload == NULL);

    cf_cache_stats s0, s1;
    cf_cache_get_stats(&s0);
    CHECK_OK(cf_cache_reconfigure());
    img = NULL;
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, &from));
    cf_cache_get_stats(&s1);
    if (from != 0 || s1.corrupt_entries != s0.corrupt_entries + 1)
        fprintf(stderr, "  (damage: %s)\n", how);
    CHECK(from == 0);
    CHECK(s1.corrupt_entries == s0.corrupt_entries + 1);
    CHECK(n > 4 && memcmp(img, "\x7f" "ELF", 4) == 0);
    cf_free_buffer(img);
    /* Rebuilt on disk: a new process (or a reconfigure) reads it back from there. */
    CHECK(file_size(path) == full);
    CHECK_OK(cf_cache_entry_read(path, bkey, &payload, &pn, &pptx));
    cf_free_buffer(payload);
    CHECK_OK(cf_cache_reconfigure());
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, &from));
    CHECK(from == 2);
    cf_free_buffer(img);
}

static void test_corrupt_entries_rebuilt(void)
{
    if (!have_nvrtc())
        return;
    const char *hows[] = {"truncate-header", "truncate-payload", "empty", "extend",
                          "flip-payload", "flip-magic", "flip-checksum", "flip-ptx-flag",
                          "fifo", "link-dev-zero", "sparse-1TiB", "format-1"};
    for (size_t i = 0; i < sizeof hows / sizeof hows[0]; i++)
        damage_and_rebuild(hows[i]);
}

/* Capture this process's stderr into a file while `fn` runs; returns the text (malloc'd). */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/stderr.txt", tmpdir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, 2);
    close(fd);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "rb");
    char *text = calloc(1, 65536);
    if (f) {
        size_t got = fread(text, 1, 65535, f);
        text[got] = '\0';
        fclose(f);
    }
    return text;
}

static void three_lookups(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        void *img = NULL;
        size_t n = 0;
        int from = -1;
        CHECK_OK(cf_cache_get_image(i == 2 ? SRC_B : SRC_A, NULL, 0, 9, 0, &img, &n, NULL, &from));
        CHECK(from == (i == 1 ? 1 : 0)); /* memory keeps working */
        cf_free_buffer(img);
    }
    CHECK(strcmp(cf_cache_dir(), "") == 0);
}

static int count_substr(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void reconfigure_quietly(void *arg)
{
    (void)arg;
    CHECK_OK(cf_cache_reconfigure());
}

static void test_unwritable_folder(void)
{
    if (!have_nvrtc())
        return;
    /* A path under a regular file can never be created, even by root (chmod would not stop root). */
    char file[1200], dir[1300];
    snprintf(file, sizeof file, "%s/a_regular_file", tmpdir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(dir, sizeof dir, "%s/cache", file);
    setenv("CUFUNC_CACHE_DIR", dir, 1);
    unsetenv("CUFUNC_CACHE");
    char *err = capture_stderr(reconfigure_quietly, NULL);
    char *err2 = capture_stderr(three_lookups, NULL);
    CHECK(count_substr(err, "warning") + count_substr(err2, "warning") == 1);
    CHECK_CONTAINS(err, dir);
    CHECK_CONTAINS(err, "CUFUNC_CACHE_DIR");
    CHECK(strcmp(cf_cache_dir(), "") == 0);
    free(err);
    free(err2);
    unsetenv("CUFUNC_CACHE_DIR");
}

static void test_cache_off(void)
{
    if (!have_nvrtc())
        return;
    char dir[1200];
    use_dir("off", dir, sizeof dir);
    setenv("CUFUNC_CACHE", "0", 1);
    char *err = capture_stderr(reconfigure_quietly, NULL);
    CHECK(err[0] == '\0'); /* turned off on purpose: no warning */
    free(err);
    CHECK(strcmp(cf_cache_dir(), "") == 0);
    void *img = NULL;
    size_t n = 0;
    int from = -1;
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, &from));
    CHECK(from == 0);
    cf_free_buffer(img);
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, &from));
    CHECK(from == 1);
    cf_free_buffer(img);
    CHECK(count_files(dir, "", "") == 0);
    unsetenv("CUFUNC_CACHE");
    CHECK_OK(cf_cache_reconfigure());
    CHECK(strcmp(cf_cache_dir(), dir) == 0);
}

static void test_debug_writes_source(void)
{
    if (!have_nvrtc())
        return;
    char dir[1200], key[65], path[1500];
    use_dir("debug", dir, sizeof dir);
    setenv("CUFUNC_DEBUG", "1", 1);
    CHECK_OK(cf_cache_reconfigure());
    const char *opts[] = {"-DDEBUG_OPTION=7"};
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(cf_cache_get_image(SRC_B, opts, 1, 9, 0, &img, &n, NULL, NULL));
    cf_free_buffer(img);
    CHECK_OK(cf_cache_key(SRC_B, opts, 1, 9, 0, key));
    entry_file(dir, key, ".cu", path, sizeof path);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        char text[4096] = "";
        size_t got = fread(text, 1, sizeof text - 1, f);
        text[got] = '\0';
        fclose(f);
        CHECK_CONTAINS(text, SRC_B);
        CHECK_CONTAINS(text, "-DDEBUG_OPTION=7");
    }
    unsetenv("CUFUNC_DEBUG");
    CHECK_OK(cf_cache_reconfigure());
}

/* ---- several processes --------------------------------------------------------------------- */

static int child_fill(int id, int rounds)
{
    /* A forked child shares nothing with the parent's memory level after this. */
    cf_cache_reconfigure();
    cf_cache_stats s0;
    cf_cache_get_stats(&s0); /* counters are inherited from the parent */
    char uniq[256];
    snprintf(uniq, sizeof uniq,
             "extern \"C\" __global__ void u%d(int *p) { p[threadIdx.x] = %d; }\n", id, id);
    const char *srcs[3] = {SRC_A, SRC_B, uniq};
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 3; i++) {
            void *img = NULL;
            size_t n = 0;
            if (cf_cache_get_image(srcs[(i + id) % 3], NULL, 0, 9, 0, &img, &n, NULL, NULL) != CF_OK)
                return 2;
            if (n < 4 || memcmp(img, "\x7f" "ELF", 4) != 0)
                return 3;
            cf_free_buffer(img);
        }
        cf_cache_reconfigure(); /* next round reads the disk again, racing with writers */
    }
    cf_cache_stats s;
    cf_cache_get_stats(&s);
    return s.corrupt_entries == s0.corrupt_entries ? 0 : 4; /* a reader never sees a half-written entry */
}

static void test_concurrent_fill(void)
{
    if (!have_nvrtc())
        return;
    char dir[1200];
    use_dir("concurrent", dir, sizeof dir);
    enum { NCHILD = 6 };
    pid_t pids[NCHILD];
    for (int i = 0; i < NCHILD; i++) {
        fflush(stderr);
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(child_fill(i, 3));
        CHECK(pids[i] > 0);
    }
    for (int i = 0; i < NCHILD; i++) {
        int status = 0;
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            fprintf(stderr, "  child %d: status %d\n", i, status);
    }
    /* Every entry is whole: 2 shared sources plus one per child; no temporary files left. */
    CHECK(count_files(dir, "", CF_CACHE_ENTRY_SUFFIX) == 2 + NCHILD);
    CHECK(count_files(dir, ".tmp-", "") == 0);
    DIR *d = opendir(dir);
    struct dirent *e;
    int verified = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char sub[1500];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *s = opendir(sub);
        struct dirent *g;
        while (s && (g = readdir(s))) {
            if (g->d_name[0] == '.')
                continue;
            char path[2200];
            snprintf(path, sizeof path, "%s/%s", sub, g->d_name);
            void *payload = NULL;
            size_t n = 0;
            int ptx = 0;
            CHECK_OK(cf_cache_entry_read(path, NULL, &payload, &n, &ptx));
            cf_free_buffer(payload);
            verified++;
        }
        if (s)
            closedir(s);
    }
    if (d)
        closedir(d);
    CHECK(verified == 2 + NCHILD);
    CHECK_OK(cf_cache_reconfigure());
    void *img = NULL;
    size_t n = 0;
    int from = -1;
    CHECK_OK(cf_cache_get_image(SRC_B, NULL, 0, 9, 0, &img, &n, NULL, &from));
    CHECK(from == 2);
    cf_free_buffer(img);
}

/* ---- allocation failures ------------------------------------------------------------------- */

/* Fail allocation 1, 2, ... of one lookup in turn; each must be a clean CF_ERR_NOMEM with nothing
 * leaked, until the lookup gets through and comes from `want_from`. `prepare` resets the state. */
static void fail_each_allocation(void (*prepare)(void), int want_from)
{
    for (int64_t k = 1; k < 60; k++) {
        prepare();
        int64_t before = cf_test_alloc_outstanding();
        void *img = NULL;
        size_t n = 0;
        int from = -1;
        cf_test_fail_alloc_after(k, 0);
        cf_status st = cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, &from);
        cf_test_fail_alloc_after(0, 0);
        if (st == CF_OK) {
            CHECK(from == want_from);
            CHECK(k > 1);
            cf_free_buffer(img);
            return;
        }
        CHECK_STATUS(st, CF_ERR_NOMEM);
        CHECK(img == NULL);
        CHECK_OK(cf_cache_reconfigure()); /* what the memory level holds is not a leak */
        CHECK(cf_test_alloc_outstanding() <= before);
        if (cf_test_alloc_outstanding() > before)
            return;
    }
    CHECK(!"the lookup never succeeded");
}

static char fault_dir[1200];

static void prepare_compile(void)
{
    setenv("CUFUNC_CACHE", "0", 1);
    CHECK_OK(cf_cache_reconfigure());
}

static void prepare_disk(void)
{
    unsetenv("CUFUNC_CACHE");
    setenv("CUFUNC_CACHE_DIR", fault_dir, 1);
    CHECK_OK(cf_cache_reconfigure());
}

static void prepare_memory(void)
{
    prepare_disk();
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, NULL));
    cf_free_buffer(img);
}

static void test_alloc_failures(void)
{
    if (!have_nvrtc())
        return;
    use_dir("faults", fault_dir, sizeof fault_dir);
    fail_each_allocation(prepare_compile, 0);
    /* Fill the disk entry once, then fail each allocation of a disk hit and of a memory hit. */
    prepare_disk();
    void *img = NULL;
    size_t n = 0;
    CHECK_OK(cf_cache_get_image(SRC_A, NULL, 0, 9, 0, &img, &n, NULL, NULL));
    cf_free_buffer(img);
    fail_each_allocation(prepare_disk, 2);
    fail_each_allocation(prepare_memory, 1);
    unsetenv("CUFUNC_CACHE");
}

/* ---- the NVRTC stamp: warm processes do not load NVRTC --------------------------------------- */

static char stamp_dir[1200];
static char stamp_path[1400];

/* Run this binary with --stamp-child in a new process (fork + exec: nothing of this process's
 * NVRTC state carries over), with `changes` applied to the environment first ("NAME=value" sets,
 * "NAME" unsets). It looks up SRC_A for cc 9.0 (or `cc_major`.0) and prints what it saw. */
typedef struct child_report {
    int ok, loaded, from;
    double us;
} child_report;

static child_report run_child(const char *const *changes, int nchanges, int cc_major)
{
    child_report r = {0, -1, -1, -1.0};
    int fds[2];
    if (pipe(fds) != 0)
        return r;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        for (int i = 0; i < nchanges; i++) {
            char name[256];
            const char *eq = strchr(changes[i], '=');
            size_t len = eq ? (size_t)(eq - changes[i]) : strlen(changes[i]);
            snprintf(name, sizeof name, "%.*s", (int)len, changes[i]);
            if (eq)
                setenv(name, eq + 1, 1);
            else
                unsetenv(name);
        }
        char cc[16];
        snprintf(cc, sizeof cc, "%d", cc_major);
        execl(self_exe, self_exe, "--stamp-child", cc, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[256] = "";
    size_t got = 0;
    ssize_t k;
    while (pid > 0 && got < sizeof line - 1 && (k = read(fds[0], line + got, sizeof line - 1 - got)) > 0)
        got += (size_t)k;
    line[got] = '\0';
    close(fds[0]);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
        sscanf(line, "loaded=%d from=%d us=%lf", &r.loaded, &r.from, &r.us) == 3)
        r.ok = 1;
    else
        fprintf(stderr, "  child failed (status %d): %s\n", status, line);
    return r;
}

static int stamp_child(int cc_major)
{
    double t0 = now_s();
    void *img = NULL;
    size_t n = 0;
    int from = -1;
    if (cf_cache_get_image(SRC_A, NULL, 0, cc_major, 0, &img, &n, NULL, &from) != CF_OK) {
        printf("error: %s\n", cf_last_error());
        return 1;
    }
    double t1 = now_s();
    cf_free_buffer(img);
    printf("loaded=%d from=%d us=%.1f\n", cf_nvrtc_is_loaded(), from, (t1 - t0) * 1e6);
    return 0;
}

/* The stamp's bytes ("" when there is none). */
static void read_stamp(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(stamp_path, "rb");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void write_stamp(const char *text, size_t len)
{
    FILE *f = fopen(stamp_path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(text, 1, len, f) == len);
    fclose(f);
}

/* The stamp must be valid for this process's environment (the children's baseline). */
static void check_stamp_valid(void)
{
    CHECK_OK(cf_cache_stamp_check(stamp_dir, NULL));
}

/* The child's environment is the baseline plus `changes`: it loads NVRTC and rewrites the stamp
 * (which then holds `expect_in_stamp` when not NULL), and a second child with the same changes
 * does not load it. */
static void expect_reload(const char *what, const char *const *changes, int n,
                          const char *expect_in_stamp)
{
    char before[8192], after[8192];
    read_stamp(before, sizeof before);
    child_report r = run_child(changes, n, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 2);
    read_stamp(after, sizeof after);
    CHECK(strcmp(before, after) != 0); /* rewritten */
    if (expect_in_stamp)
        CHECK_CONTAINS(after, expect_in_stamp);
    r = run_child(changes, n, 9);
    CHECK(r.ok && r.loaded == 0 && r.from == 2);
    fprintf(stderr, "  %s: NVRTC loaded, stamp rewritten; the next process skips it again\n",
            what);
}

/* The folder holding the library this process loaded. */
static void library_dir(char *out, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", cf_nvrtc_path());
    snprintf(out, cap, "%s", dirname(path));
}

/* Make `dir`/lib64 a link to the folder holding the library in use: a CUDA_HOME that finds it. */
static void make_cuda_home(const char *dir, const char *lib_dir)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && ln -s '%s' '%s/lib64'", dir, dir,
             lib_dir, dir);
    CHECK(system(cmd) == 0);
}

/* Copy the library (sendfile: 100 MB in well under a second) with an mtime an hour old. */
static int copy_library(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    int ok = in >= 0 && out >= 0;
    struct stat st;
    ok = ok && fstat(in, &st) == 0;
    off_t done = 0;
    while (ok && done < st.st_size) {
        ssize_t k = copy_file_range(in, NULL, out, NULL, (size_t)(st.st_size - done), 0);
        if (k <= 0)
            ok = 0;
        else
            done += k;
    }
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    return ok;
}

static void set_mtime(const char *path, double seconds_ago)
{
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= (time_t)seconds_ago;
    ts[1] = ts[0];
    CHECK(utimensat(AT_FDCWD, path, ts, 0) == 0);
}

/* A stamp is written only once the library has been left alone for a moment (its ctime is more
 * than 2 s before the load): wait that out after changing one. */
static void wait_quiet(void)
{
    struct timespec t = {2, 200000000};
    nanosleep(&t, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_stamp_warm_process(void)
{
    if (!have_nvrtc())
        return;
    char lib_dir[4096], home_a[1400];
    library_dir(lib_dir, sizeof lib_dir);
    use_dir("stamp", stamp_dir, sizeof stamp_dir);
    snprintf(stamp_path, sizeof stamp_path, "%s/%s", stamp_dir, CF_NVRTC_STAMP_NAME);
    /* The children's baseline: NVRTC found through CUDA_HOME, on any machine. */
    snprintf(home_a, sizeof home_a, "%s/home_a", tmpdir);
    make_cuda_home(home_a, lib_dir);
    unsetenv("CUFUNC_NVRTC_PATH");
    setenv("CUDA_HOME", home_a, 1);

    /* A cold cache: the child compiles (so loads NVRTC) and writes the entry and the stamp. */
    child_report r = run_child(NULL, 0, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 0);
    CHECK(file_exists(stamp_path));
    check_stamp_valid();
    char stamp[8192], again[8192];
    read_stamp(stamp, sizeof stamp);
    CHECK_CONTAINS(stamp, "cufunc-nvrtc-stamp 1\n");
    int maj = 0, min = 0;
    CHECK_OK(cf_nvrtc_version(&maj, &min));
    char want[64];
    snprintf(want, sizeof want, "\nnvrtc %d %d ", maj, min);
    CHECK_CONTAINS(stamp, want);

    /* Warm: every new process finds the entry without loading NVRTC. */
    double us[15];
    int n = 0;
    for (int i = 0; i < 15; i++) {
        r = run_child(NULL, 0, 9);
        CHECK(r.ok && r.loaded == 0 && r.from == 2);
        if (r.ok)
            us[n++] = r.us;
    }
    if (n) {
        qsort(us, (size_t)n, sizeof us[0], cmp_double);
        fprintf(stderr, "  warm cache, new process, first lookup (configure + stamp + key + entry "
                        "read): min %.1f us, median %.1f us, max %.1f us over %d processes\n",
                us[0], us[n / 2], us[n - 1], n);
        CHECK(us[n / 2] < 1000.0); /* the target, with room: a typical run is ~100 us */
    }
    read_stamp(again, sizeof again);
    CHECK(strcmp(stamp, again) == 0); /* a valid stamp is left alone */

    /* A kernel not on disk still compiles: NVRTC is loaded when it is needed, and the stamp (of
     * the same library) stays as it was. */
    r = run_child(NULL, 0, 8);
    CHECK(r.ok && r.loaded == 1 && r.from == 0);
    read_stamp(again, sizeof again);
    CHECK(strcmp(stamp, again) == 0);
}

static void test_stamp_invalidated_by_changes(void)
{
    if (!have_nvrtc() || !file_exists(stamp_path))
        return;
    char lib_dir[4096], home_b[1400], set_home[1500], set_path[4200];
    library_dir(lib_dir, sizeof lib_dir);

    /* Another CUDA_HOME (finding the very same library). */
    snprintf(home_b, sizeof home_b, "%s/home_b", tmpdir);
    make_cuda_home(home_b, lib_dir);
    snprintf(set_home, sizeof set_home, "CUDA_HOME=%s", home_b);
    const char *c1[] = {set_home};
    expect_reload("CUDA_HOME changed", c1, 1, home_b);
    /* Back to the baseline: its stamp was replaced, so the first child loads again. */
    expect_reload("CUDA_HOME changed back", NULL, 0, NULL);
    check_stamp_valid();

    /* CUFUNC_NVRTC_PATH naming the library the search found anyway. */
    snprintf(set_path, sizeof set_path, "CUFUNC_NVRTC_PATH=%s", cf_nvrtc_path());
    const char *c2[] = {set_path};
    expect_reload("CUFUNC_NVRTC_PATH set", c2, 1, "search ");
    /* Other variables of the search count too. */
    const char *c3[] = {"LD_LIBRARY_PATH=/nonexistent/cufunc-test-lib"};
    expect_reload("LD_LIBRARY_PATH changed", c3, 1, NULL);

    /* The library itself touched (mtime): a copy of it, used through CUFUNC_NVRTC_PATH. */
    char copy_dir[1400], copy[4400], set_copy[4500];
    snprintf(copy_dir, sizeof copy_dir, "%s/libcopy", tmpdir);
    mkdir(copy_dir, 0755);
    char base[4096];
    snprintf(base, sizeof base, "%s", cf_nvrtc_path());
    snprintf(copy, sizeof copy, "%s/%s", copy_dir, basename(base));
    CHECK(copy_library(cf_nvrtc_path(), copy));
    set_mtime(copy, 3600);
    snprintf(set_copy, sizeof set_copy, "CUFUNC_NVRTC_PATH=%s", copy);
    const char *c4[] = {set_copy};
    /* Changed just now: loaded, but no stamp recorded for it yet (in doubt), until it settles. */
    child_report r = run_child(c4, 1, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 2);
    r = run_child(c4, 1, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 2);
    wait_quiet();
    expect_reload("a copy of the library via CUFUNC_NVRTC_PATH", c4, 1, copy);
    set_mtime(copy, 1800); /* touch */
    wait_quiet();
    expect_reload("the library's mtime changed", c4, 1, copy);
    /* Replaced by another file with the same mtime: ctime and inode still tell. */
    char moved[4500];
    snprintf(moved, sizeof moved, "%s.moved", copy);
    CHECK(copy_library(copy, moved));
    struct stat st;
    CHECK(stat(copy, &st) == 0);
    struct timespec ts[2] = {st.st_mtim, st.st_mtim};
    CHECK(utimensat(AT_FDCWD, moved, ts, 0) == 0);
    CHECK(rename(moved, copy) == 0);
    r = run_child(c4, 1, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 2);
    unlink(copy);
    rmdir(copy_dir);
    expect_reload("baseline again", NULL, 0, NULL);
    check_stamp_valid();
}

static void test_stamp_damaged(void)
{
    if (!have_nvrtc() || !file_exists(stamp_path))
        return;
    char good[8192], text[8192];
    read_stamp(good, sizeof good);
    size_t len = strlen(good);
    CHECK(len > 100);

    write_stamp(good, len / 2); /* truncated */
    CHECK_STATUS(cf_cache_stamp_check(stamp_dir, NULL), CF_ERR_INVALID);
    CHECK_CONTAINS(cf_last_error(), "truncated");
    expect_reload("truncated stamp", NULL, 0, NULL);
    check_stamp_valid();

    memcpy(text, good, len + 1); /* one byte changed: the checksum no longer matches */
    char *v = strstr(text, "\nnvrtc ");
    CHECK(v != NULL);
    if (v) {
        v[7] = v[7] == '9' ? '8' : '9';
        write_stamp(text, len);
        CHECK_STATUS(cf_cache_stamp_check(stamp_dir, NULL), CF_ERR_INVALID);
        CHECK_CONTAINS(cf_last_error(), "checksum");
        expect_reload("corrupt stamp", NULL, 0, NULL);
    }

    write_stamp("not a stamp\n", 12);
    expect_reload("garbage stamp", NULL, 0, NULL);
    write_stamp("", 0);
    expect_reload("empty stamp", NULL, 0, NULL);
    CHECK(unlink(stamp_path) == 0);
    expect_reload("no stamp", NULL, 0, NULL);

    /* A well-formed stamp with a wrong version (as if the library had changed unseen): the child
     * looks for a key that is not there, compiles, and stores the entry under the key of the
     * NVRTC that really compiled it, never under the stamp's; then rewrites the stamp. */
    int entries = count_files(stamp_dir, "", CF_CACHE_ENTRY_SUFFIX);
    memcpy(text, good, len + 1);
    v = strstr(text, "\nnvrtc ");
    char *sum = strstr(text, "\nsum ");
    CHECK(v && sum);
    if (v && sum) {
        int maj = 0, min = 0, consumed = 0;
        CHECK(sscanf(v, "\nnvrtc %d %d%n", &maj, &min, &consumed) == 2);
        char forged[8192];
        int head = (int)(v - text);
        int body = (int)(sum - text) + 1;
        int n = snprintf(forged, sizeof forged, "%.*s\nnvrtc 99 %d%.*s", head, text, min,
                         body - head - consumed, v + consumed);
        char hex[65];
        cf_sha256_hex(forged, (size_t)n, hex);
        n += snprintf(forged + n, sizeof forged - (size_t)n, "sum %s\n", hex);
        write_stamp(forged, (size_t)n);
        cf_nvrtc_facts f;
        CHECK_OK(cf_cache_stamp_check(stamp_dir, &f));
        CHECK(f.major == 99);
        child_report r = run_child(NULL, 0, 9);
        CHECK(r.ok && r.loaded == 1 && r.from == 0);
        CHECK(count_files(stamp_dir, "", CF_CACHE_ENTRY_SUFFIX) == entries);
        CHECK_OK(cf_cache_stamp_check(stamp_dir, &f));
        CHECK(f.major == maj && f.minor == min);
        r = run_child(NULL, 0, 9);
        CHECK(r.ok && r.loaded == 0 && r.from == 2);
    }
}

/* LD_PRELOAD is not in the fingerprint (under valgrind, whose preloads change it, the
 * stamp was never used): a process that preloads libraries other than NVRTC uses the stamp; one
 * that has an NVRTC in it before cufunc looks (preloaded here) does not trust the stamp, loads
 * NVRTC, and leaves the stamp alone, since the library dlopen returned may not be the one the
 * search would find. */
static void test_stamp_and_ld_preload(void)
{
    if (!have_nvrtc() || !file_exists(stamp_path))
        return;
    char good[8192], after[8192], preload_nvrtc[4200];
    check_stamp_valid();
    read_stamp(good, sizeof good);
    const char *other[][1] = {{"LD_PRELOAD=libm.so.6"}, {"LD_PRELOAD=libm.so.6:libdl.so.2"}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        child_report r = run_child(other[i], 1, 9);
        CHECK(r.ok && r.loaded == 0 && r.from == 2);
        read_stamp(after, sizeof after);
        CHECK(strcmp(good, after) == 0);
    }
    snprintf(preload_nvrtc, sizeof preload_nvrtc, "LD_PRELOAD=%s", cf_nvrtc_path());
    const char *with_nvrtc[] = {preload_nvrtc};
    for (int i = 0; i < 2; i++) {
        child_report r = run_child(with_nvrtc, 1, 9);
        CHECK(r.ok && r.loaded == 1 && r.from == 2);
        read_stamp(after, sizeof after);
        CHECK(strcmp(good, after) == 0); /* not rewritten: in doubt */
    }
    child_report r = run_child(NULL, 0, 9); /* and the baseline still skips NVRTC */
    CHECK(r.ok && r.loaded == 0 && r.from == 2);
}

static void test_stamp_not_without_disk_cache(void)
{
    if (!have_nvrtc())
        return;
    char dir[1400], set_dir[1500], blocker[1400];
    snprintf(dir, sizeof dir, "%s/stamp_off", tmpdir);
    snprintf(set_dir, sizeof set_dir, "CUFUNC_CACHE_DIR=%s", dir);
    const char *off[] = {set_dir, "CUFUNC_CACHE=0"};
    child_report r = run_child(off, 2, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 0);
    CHECK(!file_exists(dir)); /* CUFUNC_CACHE=0: nothing on disk, no stamp */

    /* A folder that cannot be made (a file is in the way): memory only, no stamp, still works. */
    snprintf(blocker, sizeof blocker, "%s/blocker", tmpdir);
    FILE *f = fopen(blocker, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(set_dir, sizeof set_dir, "CUFUNC_CACHE_DIR=%s/sub", blocker);
    const char *bad[] = {set_dir};
    r = run_child(bad, 1, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 0);
    r = run_child(bad, 1, 9);
    CHECK(r.ok && r.loaded == 1 && r.from == 0);
}

/* ---- timing (printed, not asserted: a CI machine's disk is not ours to judge) ----------------- */

static void test_hit_times(void)
{
    if (!have_nvrtc())
        return;
    char dir[1200];
    use_dir("timing", dir, sizeof dir);
    void *img = NULL;
    size_t n = 0;
    int from = -1;
    double t0 = now_s();
    CHECK_OK(cf_cache_get_image(SRC_B, NULL, 0, 9, 0, &img, &n, NULL, &from));
    double t_compile = now_s() - t0;
    CHECK(from == 0);
    cf_free_buffer(img);
    t0 = now_s();
    CHECK_OK(cf_cache_get_image(SRC_B, NULL, 0, 9, 0, &img, &n, NULL, &from));
    double t_mem = now_s() - t0;
    CHECK(from == 1);
    cf_free_buffer(img);
    fprintf(stderr, "  compile+store %.2f ms, memory hit %.1f us (%zu-byte image)\n",
            t_compile * 1e3, t_mem * 1e6, n);
    /* A disk hit in a new process: this binary with --disk-hit prints its timings. */
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "'%s' --disk-hit '%s'", self_exe, dir);
    FILE *p = popen(cmd, "r");
    char line[512] = "";
    if (p && !fgets(line, sizeof line, p))
        line[0] = '\0';
    CHECK(p && pclose(p) == 0);
    CHECK_CONTAINS(line, "from=2");
    fprintf(stderr, "  new process: %s", line);
}

static int disk_hit_child(const char *dir)
{
    setenv("CUFUNC_CACHE_DIR", dir, 1);
    double t0 = now_s();
    if (cf_nvrtc_init() != CF_OK)
        return 1;
    double t1 = now_s();
    void *img = NULL;
    size_t n = 0;
    int from = -1;
    if (cf_cache_get_image(SRC_B, NULL, 0, 9, 0, &img, &n, NULL, &from) != CF_OK)
        return 1;
    double t2 = now_s();
    cf_free_buffer(img);
    printf("from=%d: loading NVRTC %.2f ms, then the first lookup (key, configure, read, verify) "
           "%.3f ms\n", from, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--key") == 0) {
        const char *o1[] = {"-DA=1", "-DB=2"};
        char k[65];
        if (cf_cache_key(SRC_A, o1, 2, 9, 0, k) != CF_OK)
            return 1;
        printf("%s\n", k);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--disk-hit") == 0)
        return disk_hit_child(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--stamp-child") == 0)
        return stamp_child(atoi(argv[2]));

    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0)
        return 1;
    self_exe[len] = '\0';
    const char *t = getenv("CUFUNC_TEST_TMP");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_cache", t && *t ? t : "/tmp/cufunc_test_tmp");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", tmpdir, tmpdir);
    if (system(cmd) != 0)
        return 1;
    RUN(test_key_fields);
    RUN(test_options_give_distinct_entries);
    RUN(test_key_same_in_another_process);
    RUN(test_levels_and_entry_layout);
    RUN(test_corrupt_entries_rebuilt);
    RUN(test_unwritable_folder);
    RUN(test_cache_off);
    RUN(test_debug_writes_source);
    RUN(test_concurrent_fill);
    RUN(test_alloc_failures);
    RUN(test_hit_times);
    RUN(test_stamp_warm_process);
    RUN(test_stamp_invalidated_by_changes);
    RUN(test_stamp_damaged);
    RUN(test_stamp_and_ld_preload);
    RUN(test_stamp_not_without_disk_cache);
    return SUMMARY();
}
