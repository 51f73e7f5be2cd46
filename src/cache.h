/* cache.h: the kernel image cache, internal side (public side: the cache section of compile.h).
 *
 * Two levels: a process-wide map key -> image in memory, and a folder of entries on disk shared by
 * every process of the user. The key is SHA-256 over length-prefixed fields: a format tag, the
 * source, the options, the target compute capability, the NVRTC version and the template bundle
 * hash. A disk entry is <dir>/<first two hex chars>/<64 hex chars>.bin, holding a fixed header
 * (magic, format version, flags, payload size, key, SHA-256 of the payload) and the payload. */
#ifndef CF_CACHE_H
#define CF_CACHE_H

#include <stddef.h>

#include "cufunc/status.h"

/* Bumped whenever the entry layout or the key's fields change; part of both. */
#define CF_CACHE_FORMAT_VERSION 1
#define CF_CACHE_HEADER_SIZE 88
#define CF_CACHE_ENTRY_SUFFIX ".bin"

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

/* Read and verify one disk entry file (header, size, checksum; the key too when `key` is not
 * NULL). On success *payload is a cf_malloc'd buffer the caller frees. CF_ERR_IO when the file
 * cannot be read (errno-style message; a missing file says "not found"), CF_ERR_INVALID when it
 * is corrupt or truncated (the message says how). Deletes nothing. */
cf_status cf_cache_entry_read(const char *path, const unsigned char *key, void **payload,
                              size_t *size, int *is_ptx);

/* Write `len` bytes to <dir>/<name> through a temporary file in `dir` and a rename, so readers
 * see the old file or the new one, never a part. Returns 0 or an errno value; leaves no temporary
 * file behind. (The NVRTC stamp uses it.) */
int cf_cache_write_file(const char *dir, const char *name, const void *data, size_t len);

#endif
