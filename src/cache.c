/* cache.c: the kernel image cache (see cache.h for the key and the entry layout).
 *
 * Disk entries are written to a unique temporary file in the entry's own folder (mkstemp) and
 * renamed into place: rename is atomic within a folder, so a reader, in this process or another,
 * sees either no entry or a complete one, and several processes filling one cache at once at worst
 * write the same entry twice. A reader checks the header and the payload's SHA-256; a corrupt or
 * truncated entry (a crash of an older writer, a disk error, a user's editing) is deleted and
 * rebuilt. An entry is read with one readv() into the header and the caller's buffer, so a warm
 * disk hit costs open, fstat, one read and a hash of the image.
 *
 * If the folder cannot be created or written, the disk level turns itself off for the rest of the
 * configuration with one warning on stderr; the memory level keeps working.
 */
#define _GNU_SOURCE 1 /* mkostemp */
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "error.h"
#include "hash.h"
#include "nvrtc_loader.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static const unsigned char MAGIC[8] = {'C', 'U', 'F', 'U', 'N', 'C', 'K', 0};

/* ---- state (all under cache_lock) ------------------------------------------------------------ */

typedef struct mem_entry {
    struct mem_entry *next;
    unsigned char key[32];
    size_t size;
    int is_ptx;
    unsigned char data[];
} mem_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static int configured;
static int disk_on;
static int debug_on;
static int warned;
static char dir_buf[PATH_MAX]; /* the folder in use; "" when the disk level is off */
static mem_entry **buckets;
static size_t n_buckets, n_entries;
static cf_cache_stats stats;

/* ---- configuration ------------------------------------------------------------------------- */

/* Called with cache_lock held. Prints the one warning of this configuration. */
static void disable_disk(const char *dir, const char *what, int err)
{
    if (!warned) {
        fprintf(stderr,
                "cufunc: warning: the kernel cache folder %s is not usable (%s: %s); compiled "
                "kernels are cached in memory only. Set CUFUNC_CACHE_DIR to a writable folder, or "
                "CUFUNC_CACHE=0 to turn the disk cache off.\n",
                dir, what, strerror(err));
        warned = 1;
    }
    disk_on = 0;
    dir_buf[0] = '\0';
}

/* mkdir -p; returns 0 or an errno value. */
static int make_dirs(const char *path)
{
    char p[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof p)
        return ENAMETOOLONG;
    memcpy(p, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0')
            continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return errno;
        p[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    return 0;
}

static void configure_locked(void)
{
    configured = 1;
    disk_on = 0;
    warned = 0;
    dir_buf[0] = '\0';
    const char *dbg = getenv("CUFUNC_DEBUG");
    debug_on = dbg && *dbg && strcmp(dbg, "0") != 0;
    const char *onoff = getenv("CUFUNC_CACHE");
    if (onoff && strcmp(onoff, "0") == 0)
        return;

    char dir[PATH_MAX];
    const char *explicit_dir = getenv("CUFUNC_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (explicit_dir && *explicit_dir)
        n = snprintf(dir, sizeof dir, "%s", explicit_dir);
    else if (xdg && *xdg)
        n = snprintf(dir, sizeof dir, "%s/cufunc", xdg);
    else if (home && *home)
        n = snprintf(dir, sizeof dir, "%s/.cache/cufunc", home);
    else {
        disable_disk("~/.cache/cufunc", "HOME is not set", ENOENT);
        return;
    }
    if (n < 0 || (size_t)n >= sizeof dir - 80) { /* room for "/ab/<64 hex>.bin" */
        disable_disk(dir, "path too long", ENAMETOOLONG);
        return;
    }
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = '\0';
    int err = make_dirs(dir);
    if (!err && access(dir, W_OK | X_OK) != 0)
        err = errno;
    if (err) {
        disable_disk(dir, "cannot create or write it", err);
        return;
    }
    memcpy(dir_buf, dir, (size_t)n + 1);
    disk_on = 1;
}

/* Held across fork() so a child never inherits it locked by a thread that does not exist there. */
static void cache_lock_acquire(void) { pthread_mutex_lock(&cache_lock); }
static void cache_lock_release(void) { pthread_mutex_unlock(&cache_lock); }
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void)
{
    pthread_atfork(cache_lock_acquire, cache_lock_release, cache_lock_release);
}

static void lock_cache(void)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&cache_lock);
}

static void ensure_configured_locked(void)
{
    if (!configured)
        configure_locked();
}

static void clear_memory_locked(void)
{
    for (size_t i = 0; i < n_buckets; i++) {
        mem_entry *e = buckets[i];
        while (e) {
            mem_entry *next = e->next;
            cf_free(e);
            e = next;
        }
    }
    cf_free(buckets);
    buckets = NULL;
    n_buckets = n_entries = 0;
}

const char *cf_cache_dir(void)
{
    lock_cache();
    ensure_configured_locked();
    pthread_mutex_unlock(&cache_lock);
    return dir_buf;
}

cf_status cf_cache_reconfigure(void)
{
    lock_cache();
    clear_memory_locked();
    configure_locked();
    pthread_mutex_unlock(&cache_lock);
    /* Outside cache_lock: the NVRTC facts lock is taken before it, never after. */
    cf_nvrtc_facts_forget();
    return CF_OK;
}

void cf_cache_get_stats(cf_cache_stats *out)
{
    if (!out)
        return;
    lock_cache();
    *out = stats;
    pthread_mutex_unlock(&cache_lock);
}

/* ---- the key --------------------------------------------------------------------------------- */

static cf_status check_args(const char *fn, const char *source, const char *const *options,
                            int noptions, int cc_major, int cc_minor)
{
    if (!source)
        return cf_error_set(CF_ERR_INVALID, "%s: source is NULL", fn);
    if (noptions < 0 || (noptions > 0 && !options))
        return cf_error_set(CF_ERR_INVALID, "%s: %d options but options is NULL or the count is "
                                            "negative", fn, noptions);
    for (int i = 0; i < noptions; i++)
        if (!options[i])
            return cf_error_set(CF_ERR_INVALID, "%s: option %d is NULL", fn, i);
    if (cc_major <= 0 || cc_major > 99 || cc_minor < 0 || cc_minor > 9)
        return cf_error_set(CF_ERR_INVALID, "%s: bad compute capability %d.%d", fn, cc_major,
                            cc_minor);
    return CF_OK;
}

static void field_str(cf_sha256 *h, const char *s) { cf_sha256_field(h, s, strlen(s)); }

cf_status cf_cache_key_digest(const char *source, const char *const *options, int noptions,
                              int cc_major, int cc_minor, unsigned char key[32])
{
    cf_status st = check_args("cf_cache_key", source, options, noptions, cc_major, cc_minor);
    if (st)
        return st;
    /* From the stamp when it is valid: a warm process then never loads libnvrtc. */
    cf_nvrtc_facts facts;
    st = cf_nvrtc_facts_get(&facts, NULL);
    if (st)
        return st;
    int vmaj = facts.major, vmin = facts.minor;
    char buf[64];
    cf_sha256 h;
    cf_sha256_init(&h);
    snprintf(buf, sizeof buf, "cufunc-kernel-cache-%d", CF_CACHE_FORMAT_VERSION);
    field_str(&h, buf);
    field_str(&h, source);
    snprintf(buf, sizeof buf, "%d", noptions);
    field_str(&h, buf);
    for (int i = 0; i < noptions; i++)
        field_str(&h, options[i]);
    snprintf(buf, sizeof buf, "cc %d.%d", cc_major, cc_minor);
    field_str(&h, buf);
    snprintf(buf, sizeof buf, "nvrtc %d.%d", vmaj, vmin);
    field_str(&h, buf);
    field_str(&h, cf_templates_hash());
    cf_sha256_final(&h, key);
    return CF_OK;
}

cf_status cf_cache_key(const char *source, const char *const *options, int noptions, int cc_major,
                       int cc_minor, char key[65])
{
    if (!key)
        return cf_error_set(CF_ERR_INVALID, "cf_cache_key: key is NULL");
    unsigned char d[32];
    cf_status st = cf_cache_key_digest(source, options, noptions, cc_major, cc_minor, d);
    if (st)
        return st;
    cf_hex_encode(d, 32, key);
    return CF_OK;
}

/* ---- the memory level (cache_lock held) ----------------------------------------------------- */

static size_t bucket_of(const unsigned char key[32], size_t n)
{
    uint64_t v;
    memcpy(&v, key, sizeof v); /* the key is a hash: any 8 bytes are uniform */
    return (size_t)(v & (n - 1));
}

static mem_entry *mem_find(const unsigned char key[32])
{
    if (!n_buckets)
        return NULL;
    for (mem_entry *e = buckets[bucket_of(key, n_buckets)]; e; e = e->next)
        if (memcmp(e->key, key, 32) == 0)
            return e;
    return NULL;
}

/* Copy `image` into the map (no-op if the key is there already). CF_ERR_NOMEM leaves the map as
 * it was. */
static cf_status mem_insert(const unsigned char key[32], const void *image, size_t size, int is_ptx)
{
    if (mem_find(key))
        return CF_OK;
    if (n_entries + 1 > n_buckets) {
        size_t nb = n_buckets ? 2 * n_buckets : 64;
        mem_entry **grown = cf_calloc(nb, sizeof *grown);
        if (!grown)
            return CF_ERR_NOMEM;
        for (size_t i = 0; i < n_buckets; i++) {
            mem_entry *e = buckets[i];
            while (e) {
                mem_entry *next = e->next;
                size_t b = bucket_of(e->key, nb);
                e->next = grown[b];
                grown[b] = e;
                e = next;
            }
        }
        cf_free(buckets);
        buckets = grown;
        n_buckets = nb;
    }
    if (size > SIZE_MAX - sizeof(mem_entry))
        return cf_error_set(CF_ERR_NOMEM, "kernel image of %zu bytes is too large", size);
    mem_entry *e = cf_malloc(sizeof *e + size);
    if (!e)
        return CF_ERR_NOMEM;
    memcpy(e->key, key, 32);
    e->size = size;
    e->is_ptx = is_ptx;
    memcpy(e->data, image, size);
    size_t b = bucket_of(key, n_buckets);
    e->next = buckets[b];
    buckets[b] = e;
    n_entries++;
    return CF_OK;
}

/* ---- disk entries ---------------------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Header: magic[8] version u32 flags u32 (bit 0: PTX) payload_size u64 key[32] sha256[32]. */
static void header_build(unsigned char hdr[CF_CACHE_HEADER_SIZE], const unsigned char key[32],
                         const void *payload, size_t size, int is_ptx)
{
    memcpy(hdr, MAGIC, 8);
    put_u32(hdr + 8, CF_CACHE_FORMAT_VERSION);
    put_u32(hdr + 12, is_ptx ? 1u : 0u);
    put_u64(hdr + 16, size);
    memcpy(hdr + 24, key, 32);
    cf_sha256 h;
    cf_sha256_init(&h);
    cf_sha256_update(&h, payload, size);
    cf_sha256_final(&h, hdr + 56);
}

typedef enum { ENTRY_OK, ENTRY_MISSING, ENTRY_CORRUPT, ENTRY_NOMEM, ENTRY_IOERR } entry_result;

/* On ENTRY_CORRUPT / ENTRY_IOERR, `why` says what was wrong. */
static entry_result read_entry(const char *path, const unsigned char *key, void **payload,
                               size_t *size, int *is_ptx, char *why, size_t why_cap)
{
    *payload = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_cap, "%s", strerror(errno));
        return errno == ENOENT ? ENTRY_MISSING : ENTRY_IOERR;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_cap, "fstat: %s", strerror(errno));
        close(fd);
        return ENTRY_IOERR;
    }
    if (st.st_size < CF_CACHE_HEADER_SIZE) {
        snprintf(why, why_cap, "truncated: %lld bytes, shorter than the header",
                 (long long)st.st_size);
        close(fd);
        return ENTRY_CORRUPT;
    }
    size_t n = (size_t)st.st_size - CF_CACHE_HEADER_SIZE;
    unsigned char hdr[CF_CACHE_HEADER_SIZE];
    void *buf = cf_malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return ENTRY_NOMEM;
    }
    struct iovec iov[2] = {{hdr, sizeof hdr}, {buf, n}};
    ssize_t got = readv(fd, iov, 2);
    size_t total = sizeof hdr + n;
    /* Regular files give everything in one readv; loop only for the unusual short read. */
    while (got >= 0 && (size_t)got < total) {
        size_t done = (size_t)got;
        ssize_t more = done < sizeof hdr ? read(fd, hdr + done, sizeof hdr - done)
                                         : read(fd, (char *)buf + (done - sizeof hdr), total - done);
        if (more <= 0)
            break;
        got += more;
    }
    int read_errno = errno;
    close(fd);
    entry_result res = ENTRY_CORRUPT;
    if (got < 0) {
        snprintf(why, why_cap, "read: %s", strerror(read_errno));
        res = ENTRY_IOERR;
        goto fail;
    }
    if ((size_t)got < total) {
        snprintf(why, why_cap, "truncated while reading");
        goto fail;
    }
    if (memcmp(hdr, MAGIC, 8) != 0) {
        snprintf(why, why_cap, "not a cufunc cache entry (bad magic)");
        goto fail;
    }
    if (get_u32(hdr + 8) != CF_CACHE_FORMAT_VERSION) {
        snprintf(why, why_cap, "format version %u, expected %d", get_u32(hdr + 8),
                 CF_CACHE_FORMAT_VERSION);
        goto fail;
    }
    if (get_u64(hdr + 16) != n) {
        snprintf(why, why_cap, "truncated or extended: header says %llu payload bytes, file has %zu",
                 (unsigned long long)get_u64(hdr + 16), n);
        goto fail;
    }
    if (key && memcmp(hdr + 24, key, 32) != 0) {
        snprintf(why, why_cap, "holds another key");
        goto fail;
    }
    unsigned char digest[32];
    cf_sha256 h;
    cf_sha256_init(&h);
    cf_sha256_update(&h, buf, n);
    cf_sha256_final(&h, digest);
    if (memcmp(digest, hdr + 56, 32) != 0) {
        snprintf(why, why_cap, "checksum mismatch");
        goto fail;
    }
    *payload = buf;
    *size = n;
    *is_ptx = (int)(get_u32(hdr + 12) & 1u);
    return ENTRY_OK;
fail:
    cf_free(buf);
    return res;
}

cf_status cf_cache_entry_read(const char *path, const unsigned char *key, void **payload,
                              size_t *size, int *is_ptx)
{
    if (!path || !payload || !size || !is_ptx)
        return cf_error_set(CF_ERR_INVALID, "cf_cache_entry_read: NULL argument");
    char why[256] = "";
    switch (read_entry(path, key, payload, size, is_ptx, why, sizeof why)) {
    case ENTRY_OK: return CF_OK;
    case ENTRY_MISSING: return cf_error_set(CF_ERR_IO, "cache entry %s: not found", path);
    case ENTRY_NOMEM: return CF_ERR_NOMEM;
    case ENTRY_IOERR: return cf_error_set(CF_ERR_IO, "cache entry %s: %s", path, why);
    default: return cf_error_set(CF_ERR_INVALID, "cache entry %s is corrupt: %s", path, why);
    }
}

static void entry_path(char *out, size_t cap, const char *dir, const char *hex, const char *suffix)
{
    snprintf(out, cap, "%s/%.2s/%s%s", dir, hex, hex, suffix);
}

/* Write `iov` to `final`, a file in `folder`, through a temporary file there and rename.
 * Returns 0 or an errno value; leaves no temporary file behind. */
static int write_atomic_in(const char *folder, const char *tag, const char *final,
                           struct iovec *iov, int iovcnt)
{
    char tmp[PATH_MAX];
    int len = snprintf(tmp, sizeof tmp, "%s/.tmp-%.16s-XXXXXX", folder, tag);
    if (len < 0 || (size_t)len >= sizeof tmp)
        return ENAMETOOLONG;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return errno;
    int err = 0;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    size_t done = 0;
    while (done < total) {
        /* Skip what is written already: rebuild the iovec for the remaining bytes. */
        struct iovec rest[4];
        int nrest = 0;
        size_t skip = done;
        for (int i = 0; i < iovcnt && nrest < 4; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            rest[nrest].iov_base = (char *)iov[i].iov_base + skip;
            rest[nrest].iov_len = iov[i].iov_len - skip;
            skip = 0;
            nrest++;
        }
        ssize_t w = writev(fd, rest, nrest);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            err = errno;
            break;
        }
        done += (size_t)w;
    }
    /* mkstemp makes 0600; entries are not secret, and a shared cache folder wants them readable. */
    if (!err)
        fchmod(fd, 0644);
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, final) != 0)
        err = errno;
    if (err)
        unlink(tmp);
    return err;
}

/* An entry's file: into its shard folder <dir>/<first two hex chars>, made on first use. */
static int write_atomic(const char *dir, const char *hex, const char *final, struct iovec *iov,
                        int iovcnt)
{
    char shard[PATH_MAX];
    int len = snprintf(shard, sizeof shard, "%s/%.2s", dir, hex);
    if (len < 0 || (size_t)len >= sizeof shard)
        return ENAMETOOLONG;
    if (mkdir(shard, 0755) != 0 && errno != EEXIST)
        return errno;
    return write_atomic_in(shard, hex, final, iov, iovcnt);
}

int cf_cache_write_file(const char *dir, const char *name, const void *data, size_t len)
{
    if (!dir || !*dir || !name || !*name || (!data && len))
        return EINVAL;
    char final[PATH_MAX];
    int n = snprintf(final, sizeof final, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof final)
        return ENAMETOOLONG;
    struct iovec iov[1] = {{(void *)data, len}};
    return write_atomic_in(dir, name, final, iov, 1);
}

static void write_debug_source(const char *dir, const char *hex, const char *source,
                               const char *const *options, int noptions, int cc_major,
                               int cc_minor)
{
    char path[PATH_MAX];
    entry_path(path, sizeof path, dir, hex, ".cu");
    if (access(path, F_OK) == 0)
        return;
    char head[2048];
    size_t len = (size_t)snprintf(head, sizeof head, "// cufunc kernel cache entry %s\n// cc %d.%d\n"
                                                     "// options:",
                                  hex, cc_major, cc_minor);
    for (int i = 0; i < noptions && len < sizeof head; i++)
        len += (size_t)snprintf(head + len, sizeof head - len, " %s", options[i]);
    if (len >= sizeof head - 2)
        len = sizeof head - 2;
    head[len++] = '\n';
    head[len] = '\0';
    struct iovec iov[2] = {{head, len}, {(void *)source, strlen(source)}};
    write_atomic(dir, hex, path, iov, 2); /* best effort: a debugging aid only */
}

/* ---- lookup ---------------------------------------------------------------------------------- */

/* Hand the caller its own copy of a memory entry. */
static cf_status copy_out(const void *data, size_t size, void **image)
{
    void *p = cf_malloc(size ? size : 1);
    if (!p)
        return CF_ERR_NOMEM;
    memcpy(p, data, size);
    *image = p;
    return CF_OK;
}

cf_status cf_cache_lookup(const unsigned char key_in[32], const char *source,
                          const char *const *options, int noptions, int cc_major, int cc_minor,
                          void **image, size_t *size, int *is_ptx, int *from)
{
    if (!key_in || !image || !size)
        return cf_error_set(CF_ERR_INVALID, "cf_cache_get_image: key, image and size must not be "
                                            "NULL");
    cf_status st = check_args("cf_cache_get_image", source, options, noptions, cc_major, cc_minor);
    if (st)
        return st;
    unsigned char key[32];
    memcpy(key, key_in, 32);
    *image = NULL;
    *size = 0;
    int ptx = 0, where = 0;
    void *img = NULL;
    size_t n = 0;

    lock_cache();
    ensure_configured_locked();
    mem_entry *e = mem_find(key);
    if (e) {
        st = copy_out(e->data, e->size, &img);
        if (!st) {
            n = e->size;
            ptx = e->is_ptx;
            stats.memory_hits++;
        }
        pthread_mutex_unlock(&cache_lock);
        if (st)
            return st;
        where = 1;
        goto done;
    }
    int disk = disk_on, debug = debug_on;
    char dir[PATH_MAX];
    memcpy(dir, dir_buf, strlen(dir_buf) + 1);
    pthread_mutex_unlock(&cache_lock);

    char hex[65], path[PATH_MAX];
    cf_hex_encode(key, 32, hex);
    if (disk) {
        entry_path(path, sizeof path, dir, hex, CF_CACHE_ENTRY_SUFFIX);
        char why[256];
        entry_result r = read_entry(path, key, &img, &n, &ptx, why, sizeof why);
        if (r == ENTRY_NOMEM)
            return CF_ERR_NOMEM;
        if (r == ENTRY_OK) {
            where = 2;
        } else if (r == ENTRY_CORRUPT) {
            /* Thrown away and rebuilt below. Another process may have replaced it with a good
             * entry meanwhile; deleting that one costs a recompile, never a wrong result. */
            unlink(path);
            lock_cache();
            stats.corrupt_entries++;
            pthread_mutex_unlock(&cache_lock);
        }
        /* ENTRY_MISSING, ENTRY_IOERR: compile; the write below reports an unusable folder. */
    }

    if (where == 0) {
        st = cf_compile_source(source, options, noptions, cc_major, cc_minor, &img, &n, &ptx);
        if (st)
            return st;
        /* The key may have been computed from the stamp's facts, before NVRTC was loaded. The
         * image comes from the NVRTC loaded now, so it is stored under the key of that one's
         * version: were the two ever to differ (the library changed in between), an entry would
         * otherwise claim the wrong compiler. */
        unsigned char now_key[32];
        st = cf_cache_key_digest(source, options, noptions, cc_major, cc_minor, now_key);
        if (st) {
            cf_free(img);
            return st;
        }
        if (memcmp(now_key, key, 32) != 0) {
            memcpy(key, now_key, 32);
            cf_hex_encode(key, 32, hex);
            if (disk)
                entry_path(path, sizeof path, dir, hex, CF_CACHE_ENTRY_SUFFIX);
        }
    }

    lock_cache();
    st = mem_insert(key, img, n, ptx);
    if (!st) {
        if (where == 2)
            stats.disk_hits++;
        else
            stats.compiles++;
    }
    pthread_mutex_unlock(&cache_lock);
    if (st) {
        cf_free(img);
        return cf_error_set(CF_ERR_NOMEM, "out of host memory caching a kernel image of %zu bytes",
                            n);
    }

    if (disk && where == 0) {
        unsigned char hdr[CF_CACHE_HEADER_SIZE];
        header_build(hdr, key, img, n, ptx);
        struct iovec iov[2] = {{hdr, sizeof hdr}, {img, n}};
        int err = write_atomic(dir, hex, path, iov, 2);
        lock_cache();
        if (err) {
            /* Only if the configuration this write belonged to is still the current one. */
            if (disk_on && strcmp(dir_buf, dir) == 0)
                disable_disk(dir, "cannot write an entry", err);
        } else {
            stats.disk_writes++;
        }
        pthread_mutex_unlock(&cache_lock);
    }
    if (disk && debug)
        write_debug_source(dir, hex, source, options, noptions, cc_major, cc_minor);

done:
    *image = img;
    *size = n;
    if (is_ptx)
        *is_ptx = ptx;
    if (from)
        *from = where;
    return CF_OK;
}

cf_status cf_cache_get_image(const char *source, const char *const *options, int noptions,
                             int cc_major, int cc_minor, void **image, size_t *size, int *is_ptx,
                             int *from)
{
    unsigned char key[32];
    cf_status st = cf_cache_key_digest(source, options, noptions, cc_major, cc_minor, key);
    if (st)
        return st;
    return cf_cache_lookup(key, source, options, noptions, cc_major, cc_minor, image, size, is_ptx,
                           from);
}
