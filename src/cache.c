/* cache.c: the kernel image cache (see cache.h for the key and the entry layout).
 *
 * Disk entries are written to a unique temporary file in the entry's own folder (mkstemp, the
 * writer's pid in its name) and renamed into place: rename is atomic within a folder, so a reader,
 * in this process or another, sees either no entry or a complete one, and several processes
 * filling one cache at once at worst write the same entry twice. A writer killed in between leaves
 * its temporary file; the next process that writes deletes those that are stale (cache.h).
 *
 * Whatever is on disk, a reader neither hangs, nor allocates without bound, nor loads what it
 * should not: an entry is opened with O_NOFOLLOW | O_NONBLOCK (a FIFO or a device never blocks, a
 * link is never followed), must be a regular file of at most the largest size an entry can have,
 * and its header and payload must match their SHA-256. Anything else is one bad entry: deleted
 * where it can be, rebuilt, and stored again where it can be; the cache stays on for the others.
 *
 * Trust: an entry is code that will run on the GPU, so, as ssh treats its keys, entries are loaded
 * only from a folder (and shard folder) owned by this user or by root and not writable by group or
 * others, and only from files with the same owners and no such write bits. The folder is created
 * 0700. An untrusted folder gets one warning and the memory level only: another user cannot plant
 * a kernel through a shared path such as /tmp. A trusted folder this process cannot write (a
 * site-wide cache prepared by an administrator) is read, and nothing is written to it.
 *
 * An entry is read with one readv() into the header and the caller's buffer, so a warm disk hit
 * costs three opens (folder, shard, entry), fstat, one read and a hash of the image.
 *
 * If the folder cannot be created or opened, the disk level turns itself off for the rest of the
 * configuration with one warning on stderr; the memory level keeps working.
 */
#define _GNU_SOURCE 1 /* mkostemp */
#include "cache.h"
#include "testing.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "cufunc/compile.h"
#include "diagnostics.h"
#include "env.h"
#include "error.h"
#include "hash.h"
#include "htab.h"
#include "nvrtc_loader.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

static const unsigned char MAGIC[8] = {'C', 'U', 'F', 'U', 'N', 'C', 'K', 0};

/* ---- state (all under cache_lock) ------------------------------------------------------------ */

typedef struct mem_entry {
    unsigned char key[32];
    size_t size;
    int is_ptx;
    unsigned char data[];
} mem_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static int configured;
static int disk_on;    /* entries are read from dir_buf */
static int disk_write; /* and written there (0: a read-only folder, read only) */
static int debug_on;
static int warned;       /* the one warning of this configuration was printed */
static int swept;        /* stale temporary files were swept in this configuration */
static char dir_buf[PATH_MAX]; /* the folder in use; "" when the disk level is off */
/* Test hook (cf_cache_test_pause_writes, internal/testing.h): a writer of an entry stops halfway
 * through, creates this file and sleeps until killed, so a test can kill -9 it then. Kept across
 * reconfigurations. */
static char pause_marker[PATH_MAX];
static cf_htab images; /* the memory level: mem_entry items by key */
static cf_cache_stats stats;

/* ---- configuration ------------------------------------------------------------------------- */

/* Called with cache_lock held. Prints the one warning of this configuration. */
static void warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_once(const char *fmt, ...)
{
    if (warned)
        return;
    warned = 1;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static void disable_disk(const char *dir, const char *what, int err)
{
    warn_once("cufunc: warning: the kernel cache folder %s is not usable (%s: %s); compiled "
              "kernels are cached in memory only. Set CUFUNC_CACHE_DIR to a writable folder, or "
              "CUFUNC_CACHE=0 to turn the disk cache off.\n",
              dir, what, strerror(err));
    disk_on = disk_write = 0;
    dir_buf[0] = '\0';
}

/* Why a folder or file described by `st` is not to be trusted with code that runs on the GPU, in
 * `why`; NULL when it may be: owned by this user or root, not writable by group or others. */
static const char *untrusted(const struct stat *st, char *why, size_t cap)
{
    uid_t me = geteuid();
    if (st->st_uid != me && st->st_uid != 0) {
        snprintf(why, cap, "owned by uid %u, neither you (uid %u) nor root", (unsigned)st->st_uid,
                 (unsigned)me);
        return why;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, cap, "writable by %s (mode %04o)",
                 (st->st_mode & S_IWGRP) && (st->st_mode & S_IWOTH) ? "group and others"
                 : (st->st_mode & S_IWGRP)                          ? "group"
                                                                    : "others",
                 (unsigned)(st->st_mode & 07777));
        return why;
    }
    return NULL;
}

/* mkdir -p, each folder it makes 0700; returns 0 or an errno value. */
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
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return errno;
        p[i] = c;
    }
    return 0;
}

/* Open `path` as a folder (following links in the path: ~/.cache may be one) and check that it
 * may be trusted. Returns the fd, or -1 with `why` set (and errno when it could not be opened). */
static int open_trusted_dir(int at, const char *path, int follow, char *why, size_t cap)
{
    int fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        snprintf(why, cap, "%s", strerror(e));
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    if (untrusted(&st, why, cap)) {
        close(fd);
        errno = 0;
        return -1;
    }
    return fd;
}

static void configure_locked(void)
{
    configured = 1;
    disk_on = disk_write = 0;
    warned = swept = 0;
    dir_buf[0] = '\0';
    const char *dbg = cf_knob_text(CF_KNOB_DEBUG);
    debug_on = dbg && *dbg && strcmp(dbg, "0") != 0;
    const char *onoff = cf_knob_text(CF_KNOB_CACHE);
    if (onoff && strcmp(onoff, "0") == 0)
        return;

    char dir[PATH_MAX];
    const char *explicit_dir = cf_knob_text(CF_KNOB_CACHE_DIR);
    const char *xdg = cf_env_text("XDG_CACHE_HOME");
    const char *home = cf_env_text("HOME");
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
    if (err) {
        disable_disk(dir, "cannot create it", err);
        return;
    }
    char why[160];
    int fd = open_trusted_dir(AT_FDCWD, dir, 1, why, sizeof why);
    if (fd < 0 && errno) {
        disable_disk(dir, "cannot open it", errno);
        return;
    }
    if (fd < 0) {
        warn_once("cufunc: warning: the kernel cache folder %s is not trusted (%s): a cache entry "
                  "is code that runs on the GPU, so entries are loaded only from a folder owned "
                  "by you or root that no one else can write to. Compiled kernels are cached in "
                  "memory only. Make the folder yours and chmod go-w it, or set CUFUNC_CACHE_DIR "
                  "to a folder of your own.\n",
                  dir, why);
        return;
    }
    close(fd);
    memcpy(dir_buf, dir, (size_t)n + 1);
    disk_on = 1;
    /* Not writable (a site-wide cache, a read-only mount): read it, write nothing, say nothing. */
    disk_write = access(dir, W_OK | X_OK) == 0;
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

void cf_cache_test_pause_writes(const char *marker)
{
    lock_cache();
    snprintf(pause_marker, sizeof pause_marker, "%s", marker ? marker : "");
    pthread_mutex_unlock(&cache_lock);
}

static void ensure_configured_locked(void)
{
    if (!configured)
        configure_locked();
}

static void facts_forget(void);

static void clear_memory_locked(void)
{
    for (size_t i = 0; i < images.cap; i++)
        cf_free(images.slots[i].item);
    cf_htab_clear(&images);
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
    facts_forget();
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
    st = cf_cache_nvrtc_facts(&facts, NULL);
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

/* The key is a SHA-256 digest: any 8 of its bytes are a uniform hash. */
static uint64_t key_hash(const unsigned char key[32])
{
    uint64_t v;
    memcpy(&v, key, sizeof v);
    return v;
}

static int same_key(const void *item, const void *key)
{
    return memcmp(((const mem_entry *)item)->key, key, 32) == 0;
}

static mem_entry *mem_find(const unsigned char key[32])
{
    return cf_htab_find(&images, key_hash(key), same_key, key);
}

/* Copy `image` into the map (no-op if the key is there already). CF_ERR_NOMEM leaves the map as
 * it was. */
static cf_status mem_insert(const unsigned char key[32], const void *image, size_t size, int is_ptx)
{
    if (mem_find(key))
        return CF_OK;
    if (size > SIZE_MAX - sizeof(mem_entry))
        return cf_error_set(CF_ERR_NOMEM, "kernel image of %zu bytes is too large", size);
    mem_entry *e = cf_malloc(sizeof *e + size);
    if (!e)
        return CF_ERR_NOMEM;
    memcpy(e->key, key, 32);
    e->size = size;
    e->is_ptx = is_ptx;
    memcpy(e->data, image, size);
    cf_status st = cf_htab_insert(&images, key_hash(key), e);
    if (st)
        cf_free(e);
    return st;
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

/* Header: magic[8] version u32 flags u32 (bit 0: PTX) payload_size u64 key[32] sha256[32], the
 * SHA-256 taken over the 56 header bytes before it and then the payload: no byte of an entry is
 * outside it. */
#define HDR_SUM_AT 56
#define FLAG_PTX 1u

static void entry_digest(const unsigned char *hdr, const void *payload, size_t size,
                         unsigned char out[32])
{
    cf_sha256 h;
    cf_sha256_init(&h);
    cf_sha256_update(&h, hdr, HDR_SUM_AT);
    cf_sha256_update(&h, payload, size);
    cf_sha256_final(&h, out);
}

static void header_build(unsigned char hdr[CF_CACHE_HEADER_SIZE], const unsigned char key[32],
                         const void *payload, size_t size, int is_ptx)
{
    memcpy(hdr, MAGIC, 8);
    put_u32(hdr + 8, CF_CACHE_FORMAT_VERSION);
    put_u32(hdr + 12, is_ptx ? FLAG_PTX : 0u);
    put_u64(hdr + 16, size);
    memcpy(hdr + 24, key, 32);
    entry_digest(hdr, payload, size, hdr + HDR_SUM_AT);
}

typedef enum {
    ENTRY_OK,
    ENTRY_MISSING,
    ENTRY_CORRUPT,   /* a bad entry: delete it, rebuild, store again */
    ENTRY_NOMEM,
    ENTRY_IOERR,     /* could not be read (EACCES, EIO): rebuild, store again */
    ENTRY_UNTRUSTED, /* its folder may not be trusted: rebuild, store nothing there */
} entry_result;

/* Why the header does not describe this file's payload for `key` (NULL: it does). */
static const char *header_problem(const unsigned char *hdr, size_t n, const unsigned char *key,
                                  char *why, size_t cap)
{
    if (memcmp(hdr, MAGIC, 8) != 0)
        return "not a cufunc cache entry (bad magic)";
    if (get_u32(hdr + 8) != CF_CACHE_FORMAT_VERSION) {
        snprintf(why, cap, "format version %u, expected %d", get_u32(hdr + 8),
                 CF_CACHE_FORMAT_VERSION);
        return why;
    }
    if (get_u32(hdr + 12) & ~FLAG_PTX)
        return "unknown flags";
    if (get_u64(hdr + 16) != n) {
        snprintf(why, cap, "truncated or extended: header says %llu payload bytes, file has %zu",
                 (unsigned long long)get_u64(hdr + 16), n);
        return why;
    }
    if (key && memcmp(hdr + 24, key, 32) != 0)
        return "holds another key";
    return NULL;
}

/* Read and verify the entry `name` in the folder `dfd`. On ENTRY_CORRUPT / ENTRY_IOERR, `why`
 * says what was wrong. */
static entry_result read_entry_at(int dfd, const char *name, const unsigned char *key,
                                  void **payload, size_t *size, int *is_ptx, char *why,
                                  size_t why_cap)
{
    *payload = NULL;
    /* O_NONBLOCK: a FIFO (or a device) opens at once instead of waiting for a writer; it is then
     * refused by its type. O_NOFOLLOW: a link is refused, whatever it points to. */
    int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return ENTRY_MISSING;
        if (e == ELOOP || e == ENXIO || e == ENODEV || e == EISDIR || e == ETXTBSY) {
            snprintf(why, why_cap, "not a regular file (%s)", strerror(e));
            return ENTRY_CORRUPT;
        }
        snprintf(why, why_cap, "%s", strerror(e));
        return ENTRY_IOERR;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_cap, "fstat: %s", strerror(errno));
        close(fd);
        return ENTRY_IOERR;
    }
    entry_result res = ENTRY_CORRUPT;
    void *buf = NULL;
    char tw[160];
    const char *bad = NULL;
    if (!S_ISREG(st.st_mode))
        bad = "not a regular file";
    else if (untrusted(&st, tw, sizeof tw))
        bad = tw;
    else if (st.st_size < CF_CACHE_HEADER_SIZE)
        bad = "truncated: shorter than the header";
    else if ((uint64_t)st.st_size - CF_CACHE_HEADER_SIZE > CF_CACHE_MAX_PAYLOAD)
        bad = "larger than any entry can be";
    if (bad) {
        snprintf(why, why_cap, "%s (%lld bytes)", bad, (long long)st.st_size);
        close(fd);
        return ENTRY_CORRUPT;
    }
    size_t n = (size_t)st.st_size - CF_CACHE_HEADER_SIZE;
    unsigned char hdr[CF_CACHE_HEADER_SIZE];
    buf = cf_malloc(n ? n : 1);
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
    if (got < 0) {
        snprintf(why, why_cap, "read: %s", strerror(read_errno));
        res = ENTRY_IOERR;
        goto fail;
    }
    if ((size_t)got < total) {
        snprintf(why, why_cap, "truncated while reading");
        goto fail;
    }
    if ((bad = header_problem(hdr, n, key, why, why_cap))) {
        if (bad != why)
            snprintf(why, why_cap, "%s", bad);
        goto fail;
    }
    unsigned char digest[32];
    entry_digest(hdr, buf, n, digest);
    if (memcmp(digest, hdr + HDR_SUM_AT, 32) != 0) {
        snprintf(why, why_cap, "checksum mismatch");
        goto fail;
    }
    *payload = buf;
    *size = n;
    *is_ptx = (int)(get_u32(hdr + 12) & FLAG_PTX);
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
    *payload = NULL;
    char folder[PATH_MAX], why[256] = "";
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    size_t len = slash ? (size_t)(slash - path) : 1;
    if (len >= sizeof folder)
        return cf_error_set(CF_ERR_INVALID, "cache entry %s: path too long", path);
    if (slash)
        memcpy(folder, slash == path ? "/" : path, slash == path ? 1 : len);
    else
        folder[0] = '.';
    folder[slash == path ? 1 : len] = '\0';
    int dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return cf_error_set(CF_ERR_IO, "cache entry %s: %s", path,
                            errno == ENOENT ? "not found" : strerror(errno));
    entry_result r = read_entry_at(dfd, name, key, payload, size, is_ptx, why, sizeof why);
    close(dfd);
    switch (r) {
    case ENTRY_OK: return CF_OK;
    case ENTRY_MISSING: return cf_error_set(CF_ERR_IO, "cache entry %s: not found", path);
    case ENTRY_NOMEM: return CF_ERR_NOMEM;
    case ENTRY_IOERR: return cf_error_set(CF_ERR_IO, "cache entry %s: %s", path, why);
    default: return cf_error_set(CF_ERR_INVALID, "cache entry %s is corrupt: %s", path, why);
    }
}

/* Look up the entry of `hex` in `dir`: the folder and the entry's shard folder are opened and
 * checked (see untrusted) on every read, so a folder changed since the configuration, or a path
 * swapped under it, is seen. A bad entry is deleted here (through the checked shard folder). */
static entry_result disk_read(const char *dir, const char *hex, const unsigned char *key,
                              void **payload, size_t *size, int *is_ptx, char *why, size_t cap)
{
    char shard[3] = {hex[0], hex[1], '\0'}, name[80];
    snprintf(name, sizeof name, "%s%s", hex, CF_CACHE_ENTRY_SUFFIX);
    int dfd = open_trusted_dir(AT_FDCWD, dir, 1, why, cap);
    if (dfd < 0)
        return ENTRY_UNTRUSTED;
    int sfd = open_trusted_dir(dfd, shard, 0, why, cap);
    int serr = errno;
    close(dfd);
    if (sfd < 0)
        return serr == ENOENT ? ENTRY_MISSING : ENTRY_UNTRUSTED;
    entry_result r = read_entry_at(sfd, name, key, payload, size, is_ptx, why, cap);
    if (r == ENTRY_CORRUPT) {
        /* Another process may have replaced it with a good entry meanwhile; deleting that one
         * costs a recompile, never a wrong result. A folder in the way is left (unlinkat fails). */
        unlinkat(sfd, name, 0);
    }
    close(sfd);
    return r;
}

static void entry_path(char *out, size_t cap, const char *dir, const char *hex, const char *suffix)
{
    snprintf(out, cap, "%s/%.2s/%s%s", dir, hex, hex, suffix);
}

/* The test hook: stop here (half of an entry written) until killed. */
static void pause_for_test(const char *marker)
{
    int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    for (;;)
        pause();
}

/* Write all of `iov` to fd; returns 0 or an errno value. With `marker`, stops halfway. */
static int write_all(int fd, const struct iovec *iov, int iovcnt, const char *marker)
{
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    size_t done = 0, stop = marker ? total / 2 : total;
    while (done < total) {
        if (done >= stop)
            pause_for_test(marker);
        /* Skip what is written already: rebuild the iovec for the remaining bytes. */
        struct iovec rest[4];
        int nrest = 0;
        size_t skip = done, left = stop - done;
        for (int i = 0; i < iovcnt && nrest < 4 && left; i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            size_t len = iov[i].iov_len - skip;
            rest[nrest].iov_base = (char *)iov[i].iov_base + skip;
            rest[nrest].iov_len = len < left ? len : left;
            left -= rest[nrest].iov_len;
            skip = 0;
            nrest++;
        }
        ssize_t w = writev(fd, rest, nrest);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        done += (size_t)w;
    }
    return 0;
}

/* Write `iov` to `final`, a file in `folder`, through a temporary file there and rename.
 * Returns 0 or an errno value; leaves no temporary file behind. The temporary file's name holds
 * the writer's pid, so that one left by a killed writer can be told from one being written. */
static int write_atomic_in(const char *folder, const char *tag, const char *final,
                           struct iovec *iov, int iovcnt, const char *marker)
{
    char tmp[PATH_MAX];
    int len = snprintf(tmp, sizeof tmp, "%s/.tmp-%.16s-%ld-XXXXXX", folder, tag, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp)
        return ENAMETOOLONG;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return errno;
    int err = write_all(fd, iov, iovcnt, marker);
    /* mkstemp makes 0600; entries are not secret, and a folder an administrator opens to others
     * (chmod 0755, a site-wide cache) wants them readable without touching each file. */
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

/* An entry's file: into its shard folder <dir>/<first two hex chars>, made (0700) on first use. */
static int write_atomic(const char *dir, const char *hex, const char *final, struct iovec *iov,
                        int iovcnt, const char *marker)
{
    char shard[PATH_MAX];
    int len = snprintf(shard, sizeof shard, "%s/%.2s", dir, hex);
    if (len < 0 || (size_t)len >= sizeof shard)
        return ENAMETOOLONG;
    if (mkdir(shard, 0700) != 0 && errno != EEXIST)
        return errno;
    return write_atomic_in(shard, hex, final, iov, iovcnt, marker);
}

/* ---- stale temporary files ------------------------------------------------------------------ */

/* 1 when `name` in `dfd` is a temporary file of ours (".tmp-<tag>-<pid>-XXXXXX") that no writer
 * will finish: older than CF_CACHE_TEMP_STALE_S and its pid gone, or older than
 * CF_CACHE_TEMP_ANCIENT_S. */
static int stale_temp(int dfd, const char *name, time_t now)
{
    size_t len = strlen(name);
    if (strncmp(name, ".tmp-", 5) != 0 || len < 5 + 2 + 1 + 1 + 6 || name[len - 7] != '-')
        return 0;
    size_t end = len - 7, start = end;
    while (start > 5 && name[start - 1] >= '0' && name[start - 1] <= '9')
        start--;
    if (start == end || end - start > 9 || name[start - 1] != '-')
        return 0;
    long pid = strtol(name + start, NULL, 10);
    struct stat st;
    if (pid <= 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return 0;
    double age = difftime(now, st.st_mtime);
    if (age < CF_CACHE_TEMP_STALE_S)
        return 0;
    if (age >= CF_CACHE_TEMP_ANCIENT_S)
        return 1;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Delete the stale temporary files in `dfd`; with `shards`, in its shard folders too. */
static void sweep_folder(int dfd, int shards, time_t now)
{
    int own = dup(dfd);
    DIR *d = own >= 0 ? fdopendir(own) : NULL;
    if (!d) {
        if (own >= 0)
            close(own);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] == '.' && stale_temp(dfd, n, now)) {
            unlinkat(dfd, n, 0);
        } else if (shards && strlen(n) == 2 && strspn(n, "0123456789abcdef") == 2) {
            int sfd = openat(dfd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sfd >= 0) {
                sweep_folder(sfd, 0, now);
                close(sfd);
            }
        }
    }
    closedir(d);
}

/* Once per configuration, by the first process-local write: a process that only reads (every warm
 * run) never pays for listing the folder, and leftovers come only from writers, the next of which
 * cleans up after them. */
static void sweep_stale_temps(const char *dir)
{
    lock_cache();
    int first = !swept;
    swept = 1;
    pthread_mutex_unlock(&cache_lock);
    if (!first)
        return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    sweep_folder(dfd, 1, time(NULL));
    close(dfd);
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
    write_atomic(dir, hex, path, iov, 2, NULL); /* best effort: a debugging aid only */
}

/* ---- the NVRTC stamp's file (its text: nvrtc.c) --------------------------------------------- */

enum { STAMP_OK, STAMP_MISSING, STAMP_INVALID };

static pthread_mutex_t facts_lock = PTHREAD_MUTEX_INITIALIZER;
static int stamp_facts_ok;         /* under facts_lock: stamp_facts came from a valid stamp */
static cf_nvrtc_facts stamp_facts; /* under facts_lock */
static int stamp_synced;           /* under facts_lock: the stamp was checked against the load */
/* The stamp's bytes, under facts_lock: static, as an 8 KB buffer does not belong on a caller's
 * (perhaps small) thread stack, and a best-effort shortcut should spend no allocation. */
static char stamp_text[CF_NVRTC_STAMP_MAX + 2];

/* facts_lock is held only briefly (a stamp read or write), never while loading; a fork() during
 * that time would leave the child's copy locked by a thread it does not have. */
static pthread_once_t facts_atfork_once = PTHREAD_ONCE_INIT;
static void facts_lock_reinit(void) { pthread_mutex_init(&facts_lock, NULL); }
static void facts_register_atfork(void) { pthread_atfork(NULL, NULL, facts_lock_reinit); }

static void lock_facts(void)
{
    pthread_once(&facts_atfork_once, facts_register_atfork);
    pthread_mutex_lock(&facts_lock);
}

/* Read <dir>/nvrtc-stamp-v1 into stamp_text (facts_lock held) and check it against this process.
 * The file is opened as an entry is (no link followed, no FIFO waited on, a regular file of at
 * most CF_NVRTC_STAMP_MAX bytes, trusted owner and mode, in a trusted folder): a planted stamp
 * could make keys name another compiler. On STAMP_OK, *out holds the recorded facts. */
static int stamp_check(const char *dir, cf_nvrtc_facts *out, char *why, size_t why_cap)
{
    int dfd = open_trusted_dir(AT_FDCWD, dir, 1, why, why_cap);
    if (dfd < 0)
        return errno ? STAMP_MISSING : STAMP_INVALID;
    int fd = openat(dfd, CF_NVRTC_STAMP_NAME, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY |
                                                  O_CLOEXEC);
    int e = errno;
    close(dfd);
    if (fd < 0) {
        int not_file = e == ELOOP || e == ENXIO || e == ENODEV || e == EISDIR;
        snprintf(why, why_cap, "%s%s", not_file ? "not a regular file: " : "", strerror(e));
        return not_file ? STAMP_INVALID : STAMP_MISSING;
    }
    struct stat st;
    char tw[160];
    int res = STAMP_INVALID;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_cap, "fstat: %s", strerror(errno));
        res = STAMP_MISSING;
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_cap, "not a regular file");
    } else if (untrusted(&st, tw, sizeof tw)) {
        snprintf(why, why_cap, "not trusted: %s", tw);
    } else if (st.st_size > CF_NVRTC_STAMP_MAX) {
        snprintf(why, why_cap, "larger than %d bytes", CF_NVRTC_STAMP_MAX);
    } else {
        size_t n = 0;
        for (;;) { /* one read for a regular file; the loop only for an unusual short read */
            ssize_t got = read(fd, stamp_text + n, CF_NVRTC_STAMP_MAX + 1 - n);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                break;
            n += (size_t)got;
            if (n > CF_NVRTC_STAMP_MAX)
                break;
        }
        res = cf_nvrtc_stamp_verify(stamp_text, n, out, why, why_cap) == 0 ? STAMP_OK
                                                                            : STAMP_INVALID;
    }
    close(fd);
    return res;
}

/* Record the loaded library's facts in <dir> (facts_lock held). Best effort: any doubt, or a
 * failed write, leaves the stamp as it was (a later process tries again). */
static void stamp_write(const char *dir)
{
    size_t n = cf_nvrtc_stamp_text(stamp_text, sizeof stamp_text);
    char final[PATH_MAX];
    int len = snprintf(final, sizeof final, "%s/%s", dir, CF_NVRTC_STAMP_NAME);
    if (n == 0 || len < 0 || (size_t)len >= sizeof final)
        return;
    struct iovec iov[1] = {{stamp_text, n}};
    write_atomic_in(dir, CF_NVRTC_STAMP_NAME, final, iov, 1, NULL);
}

/* The folder in use ("" when off), and whether it is written to. */
static void current_dir(char *out, size_t cap, int *writable)
{
    lock_cache();
    ensure_configured_locked();
    snprintf(out, cap, "%s", dir_buf);
    *writable = disk_on && disk_write;
    pthread_mutex_unlock(&cache_lock);
}

static int facts_equal(const cf_nvrtc_facts *a, const cf_nvrtc_facts *b)
{
    return a->major == b->major && a->minor == b->minor && a->has_cubin == b->has_cubin &&
           a->n_archs == b->n_archs &&
           memcmp(a->archs, b->archs, sizeof a->archs[0] * (size_t)a->n_archs) == 0;
}

cf_status cf_cache_nvrtc_facts(cf_nvrtc_facts *out, int *from_stamp)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_cache_nvrtc_facts: out is NULL");
    if (from_stamp)
        *from_stamp = 0;
    char dir[PATH_MAX], why[8];
    int writable = 0;
    lock_facts();
    if (!cf_nvrtc_is_loaded()) {
        if (!stamp_facts_ok) {
            current_dir(dir, sizeof dir, &writable);
            cf_nvrtc_facts f;
            if (dir[0] && stamp_check(dir, &f, why, sizeof why) == STAMP_OK) {
                stamp_facts = f;
                stamp_facts_ok = 1;
            }
        }
        if (stamp_facts_ok) {
            *out = stamp_facts;
            pthread_mutex_unlock(&facts_lock);
            if (from_stamp)
                *from_stamp = 1;
            return CF_OK;
        }
    }
    pthread_mutex_unlock(&facts_lock);

    cf_status st = cf_nvrtc_loaded_facts(out);
    if (st)
        return st;
    lock_facts();
    if (!stamp_synced) {
        /* Once per process and folder: a missing, stale or foreign stamp is rewritten. */
        stamp_synced = 1;
        stamp_facts_ok = 0;
        current_dir(dir, sizeof dir, &writable);
        cf_nvrtc_facts f;
        if (dir[0] && writable &&
            (stamp_check(dir, &f, why, sizeof why) != STAMP_OK || !facts_equal(&f, out)))
            stamp_write(dir);
    }
    pthread_mutex_unlock(&facts_lock);
    return CF_OK;
}

/* Forget facts taken from a stamp (the folder or the environment may have changed); the next
 * lookup checks again. A loaded library's facts stay. */
static void facts_forget(void)
{
    lock_facts();
    stamp_facts_ok = 0;
    stamp_synced = 0;
    pthread_mutex_unlock(&facts_lock);
}

cf_status cf_cache_stamp_check(const char *dir, cf_nvrtc_facts *out)
{
    if (!dir || !*dir)
        return cf_error_set(CF_ERR_INVALID, "cf_cache_stamp_check: dir is NULL or empty");
    char why[PATH_MAX + 128];
    cf_nvrtc_facts f;
    lock_facts();
    int r = stamp_check(dir, &f, why, sizeof why);
    pthread_mutex_unlock(&facts_lock);
    switch (r) {
    case STAMP_OK:
        if (out)
            *out = f;
        return CF_OK;
    case STAMP_MISSING:
        return cf_error_set(CF_ERR_IO, "NVRTC stamp %s/%s: %s", dir, CF_NVRTC_STAMP_NAME, why);
    default: return cf_error_set(CF_ERR_INVALID, "NVRTC stamp in %s not used: %s", dir, why);
    }
}

/* Public (compile.h), and here rather than in nvrtc.c: its answer may come from the stamp, a file
 * of the cache folder, so that choosing CUBIN or PTX needs no loaded NVRTC either. */
cf_status cf_nvrtc_supports_arch(int cc_major, int cc_minor, int *supported)
{
    if (!supported)
        return cf_error_set(CF_ERR_INVALID, "cf_nvrtc_supports_arch: supported is NULL");
    if (cc_major <= 0 || cc_minor < 0 || cc_minor > 9)
        return cf_error_set(CF_ERR_INVALID, "cf_nvrtc_supports_arch: bad compute capability %d.%d",
                            cc_major, cc_minor);
    cf_nvrtc_facts f;
    cf_status st = cf_cache_nvrtc_facts(&f, NULL);
    if (st)
        return st;
    *supported = cf_nvrtc_best_arch(&f, cc_major * 10 + cc_minor);
    return CF_OK;
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
    int disk = disk_on, writable = disk_write, debug = debug_on;
    char dir[PATH_MAX], marker[PATH_MAX];
    memcpy(dir, dir_buf, strlen(dir_buf) + 1);
    memcpy(marker, pause_marker, strlen(pause_marker) + 1);
    pthread_mutex_unlock(&cache_lock);

    char hex[65], path[PATH_MAX];
    cf_hex_encode(key, 32, hex);
    if (disk) {
        entry_path(path, sizeof path, dir, hex, CF_CACHE_ENTRY_SUFFIX);
        char why[256];
        entry_result r = disk_read(dir, hex, key, &img, &n, &ptx, why, sizeof why);
        if (r == ENTRY_NOMEM)
            return CF_ERR_NOMEM;
        if (r == ENTRY_OK) {
            where = 2;
        } else if (r == ENTRY_CORRUPT) {
            lock_cache(); /* deleted by disk_read; rebuilt and stored below */
            stats.corrupt_entries++;
            pthread_mutex_unlock(&cache_lock);
        } else if (r == ENTRY_UNTRUSTED) {
            writable = 0; /* rebuilt, and kept in memory only */
        }
        /* ENTRY_MISSING, ENTRY_IOERR: compile and store. */
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

    if (disk && writable && where == 0 && n <= CF_CACHE_MAX_PAYLOAD) {
        sweep_stale_temps(dir);
        unsigned char hdr[CF_CACHE_HEADER_SIZE];
        header_build(hdr, key, img, n, ptx);
        struct iovec iov[2] = {{hdr, sizeof hdr}, {img, n}};
        int err = write_atomic(dir, hex, path, iov, 2, marker[0] ? marker : NULL);
        lock_cache();
        if (!err)
            stats.disk_writes++;
        else if (err != EISDIR && err != ENOTEMPTY && err != EEXIST && err != ENOTDIR &&
                 disk_on && strcmp(dir_buf, dir) == 0)
            /* Not this one entry's trouble (something is in its place) but the folder's: the
             * disk full, a quota, a folder made read-only since. Said once; reading goes on, and
             * every later compile tries to store again. */
            warn_once("cufunc: warning: cannot store a compiled kernel in the cache folder %s "
                      "(%s); kernels compiled now are cached in memory only.\n",
                      dir, strerror(err));
        pthread_mutex_unlock(&cache_lock);
    }
    if (disk && writable && debug)
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
