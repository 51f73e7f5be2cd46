/* staging.h: host<->device copies of pageable host memory through pinned staging buffers.
 *
 * A DMA engine can only read or write page-locked memory, so the driver copies pageable memory
 * through its own small staging buffers, on one thread, one chunk at a time: about 10-20 GB/s where
 * pinned memory moves 55 GB/s. Here a process-wide set of larger pinned buffers is used as a ring:
 * the host-side copy of one chunk (spread over the thread pool, threadpool.h) overlaps the DMA of
 * the others, on a private stream per device, ordered after the caller's stream with events.
 *
 * Tuning, read from the environment at first use (and again by cf_staging_configure(NULL)):
 *   CUFUNC_STAGING_CHUNK_MB   size of one buffer, the chunk of each DMA, in MiB (default 8; 1..1024)
 *   CUFUNC_STAGING_BUFFERS    number of buffers in the ring (default 4; 2..16)
 *   CUFUNC_STAGING_MIN_KB     pageable copies smaller than this go straight to the driver's own
 *                             cuMemcpy*Async (default 1024; 0 stages everything)
 *   CUFUNC_COPY_THREADS       worker threads of the host-side copy (threadpool.h)
 * A value that does not parse or is out of range is ignored (the default is used).
 */
#ifndef CF_STAGING_H
#define CF_STAGING_H

#include <cuda.h>
#include <stddef.h>

#include "cufunc/status.h"

#define CF_STAGING_MAX_BUFFERS 16

typedef struct cf_staging_config {
    size_t chunk_bytes; /* size of each staging buffer */
    int nbuffers;       /* buffers in the ring, 2..CF_STAGING_MAX_BUFFERS */
    size_t min_bytes;   /* smallest pageable copy that is staged */
} cf_staging_config;

/* The configuration in use (read from the environment on first call). */
void cf_staging_get_config(cf_staging_config *out);

/* Use `cfg` from now on (NULL: re-read the environment). Waits for copies in flight through the
 * current buffers, then frees them; the new ones are allocated at the next staged copy.
 * CF_ERR_INVALID for a chunk under 64 KiB or over 1 GiB, or a buffer count outside 2..16. */
cf_status cf_staging_configure(const cf_staging_config *cfg);

/* Whether a pageable copy of nbytes should be staged under the current configuration. */
int cf_staging_wanted(size_t nbytes);

/* The chunk arithmetic, pure: the number of chunks of at most `chunk` bytes that cover nbytes
 * (0 for nbytes 0; chunk must be > 0), and the offset and length of chunk k (k < that number). */
size_t cf_staging_nchunks(size_t nbytes, size_t chunk);
void cf_staging_chunk(size_t nbytes, size_t chunk, size_t k, size_t *offset, size_t *len);

/* Copy nbytes of pageable host memory at src to device memory at dst, ordered after the work
 * already queued on `user` (a stream of `device`), and make `user` wait for the copy. Returns once
 * src may be reused (the last chunks may still be in flight); with `sync`, once the copy is done.
 * The device's primary context must be current (cf_context_enter). If the pinned buffers cannot be
 * allocated (page-locked memory limit), copies nothing, sets *staged = 0 and returns CF_OK, so the
 * caller can use the driver's own path; otherwise *staged = 1. */
cf_status cf_staging_htod(int device, CUstream user, CUdeviceptr dst, const void *src,
                          size_t nbytes, int sync, int *staged);

/* The mirror image: device memory at src to pageable host memory at dst, ordered after the work
 * queued on `user`. Returns when the data has arrived in dst. *staged as above. */
cf_status cf_staging_dtoh(int device, CUstream user, void *dst, CUdeviceptr src, size_t nbytes,
                          int *staged);

#endif
