/* cache.h: the kernel image cache, internal side (public side: the cache section of compile.h).
 *
 * Two levels: a process-wide map key -> image in memory, and a folder of entries on disk shared by
 * every process of the user. The key is SHA-256 over length-prefixed fields: a format tag, the
 * source, the options, the target compute capability, the NVRTC version and the template bundle
 * hash. A disk entry is <dir>/<first two hex chars>/<64 hex chars>.bin, holding a fixed header
 * (magic, format version, flags, payload size, key, SHA-256 of the header before it and of the
 * payload) and the payload. cache.c owns every file in the cache folder: the entries, the NVRTC
 * stamp (whose text nvrtc.c makes and checks), the debugging sources and the temporary files. */
#ifndef CF_CACHE_H
#define CF_CACHE_H

#include <stddef.h>

#include "cufunc/status.h"
#include "nvrtc_loader.h"

/* Bumped whenever the entry layout or the key's fields change; part of both. 2: the checksum
 * covers the header too (version 1 left the flags, "is PTX", outside it). */
#define CF_CACHE_FORMAT_VERSION 2
#define CF_CACHE_HEADER_SIZE 88
#define CF_CACHE_ENTRY_SUFFIX ".bin"
/* The largest payload an entry may hold. A kernel image is kilobytes to a few megabytes; a file
 * larger than this is damage (a sparse 1 TiB file once made every run fail allocating it), so it
 * is treated as corrupt, and an image this large is not stored. */
#define CF_CACHE_MAX_PAYLOAD ((size_t)256 << 20)
/* A leftover temporary file of a writer is deleted by the next process that writes, once it is
 * older than this and its writer (the pid in its name) is gone, or older than a day whatever the
 * pid says (reused, or another host's on a shared file system). */
#define CF_CACHE_TEMP_STALE_S 300
#define CF_CACHE_TEMP_ANCIENT_S 86400

/* The binary cache key (see above). NVRTC's version comes from the loaded library, else from a
 * valid stamp in the cache folder (no load; see nvrtc_loader.h), else from loading it now:
 * CF_ERR_NO_NVRTC when it cannot load. */
cf_status cf_cache_key_digest(const char *source, const char *const *options, int noptions,
                              int cc_major, int cc_minor, unsigned char key[32]);

/* cf_cache_get_image with the key already computed (module.c computes it once for its own map).
 * `key` must be cf_cache_key_digest of the same arguments. A compiled image is stored under the
 * key recomputed once NVRTC is loaded, which differs from `key` only if the stamp's version was
 * not the loaded library's: an entry always names the NVRTC that compiled it. */
cf_status cf_cache_lookup(const unsigned char key[32], const char *source,
                          const char *const *options, int noptions, int cc_major, int cc_minor,
                          void **image, size_t *size, int *is_ptx, int *from);

/* Read and verify one disk entry file (a regular file, not a link, of a sane size, owned by this
 * user or root and not writable by group or others; header, size, checksum; the key too when `key`
 * is not NULL). On success *payload is a cf_malloc'd buffer the caller frees. CF_ERR_IO when the
 * file cannot be read (errno-style message; a missing file says "not found"), CF_ERR_INVALID when
 * it is corrupt, truncated, or not to be trusted (the message says how). Deletes nothing. */
cf_status cf_cache_entry_read(const char *path, const unsigned char *key, void **payload,
                              size_t *size, int *is_ptx);

/* The facts of the NVRTC this process uses (see nvrtc_loader.h): of the loaded library once it
 * is loaded; before that, from a valid stamp in the cache folder when there is one (*from_stamp =
 * 1, NVRTC stays unloaded), else by loading NVRTC now (and writing the stamp when the folder is
 * writable). `from_stamp` may be NULL. CF_ERR_NO_NVRTC when it has to load and cannot. */
cf_status cf_cache_nvrtc_facts(cf_nvrtc_facts *out, int *from_stamp);

/* Check the stamp in `dir` against this process's environment, without loading NVRTC: CF_OK and
 * the recorded facts when it is valid; CF_ERR_IO when it is missing or unreadable; CF_ERR_INVALID
 * with the reason (corrupt, not a regular file, not to be trusted, another search, the library
 * changed) otherwise. For tests and diagnostics; `out` may be NULL. */
cf_status cf_cache_stamp_check(const char *dir, cf_nvrtc_facts *out);

#endif
