/* env.h: the tuning knobs of the environment (internal): cf_env_long reads one; the element-wise
 * engine's ten (CUFUNC_EW_*) are listed, checked and read here, once per process. The other
 * engines' knobs are read with cf_env_long where they are used: CUFUNC_REDUCE_* and
 * CUFUNC_SCAN_* (reduce.c, read_knobs), CUFUNC_HOSTPIPE_* (hostpipe.c), CUFUNC_STAGING_*
 * (staging.c), CUFUNC_COPY_THREADS (threadpool.c); the host path's CUFUNC_HOST_* are listed and
 * read here (cf_host_knobs_read) and used by hostpipe.c. */
#ifndef CUFUNC_ENV_H
#define CUFUNC_ENV_H

#include <stdint.h>

/* The integer value of environment variable `name` when it is set to a whole decimal number in
 * [lo, hi]; else `def` (unset, empty, not a number, out of range: a bad knob never breaks a run). */
long cf_env_long(const char *name, long def, long lo, long hi);

/* The side of the element-wise tile kernel's square tiles (ufunc.c). */
#define CF_EW_TILE 32

/* Defaults of the tuning knobs (see cf_ew_knobs). 4 blocks of 256 threads per multiprocessor with
 * 16-byte accesses is what reached the copy bandwidth on an H200 in a hand-written kernel. */
/* Defaults from the sweeps of bench/bench_ew_variants.py on an H200 (2026-11-21): the flat kernel
 * with no grid cap (one pass, 4314 GB/s on the 2^26 hypot, PyTorch 4291), the row-vector kernel
 * capped at 8 blocks of 256 per SM (3408 GB/s on the (4096,1) x (1,4096) broadcast), one vector
 * per thread per iteration for both; for the transposed case the pipelined tile kernel with 8-row
 * blocks (256 threads) and as many resident blocks as fit (3800 GB/s = 91% of copy; one tile per
 * block without pipelining: 3171 with 4-row blocks, 2489 before the loads moved before the
 * barrier). */
#define CF_EW_DEFAULT_BLOCK 256
#define CF_EW_DEFAULT_UNROLL 1
#define CF_EW_DEFAULT_BLOCKS_PER_SM 0
#define CF_EW_DEFAULT_ROW_BLOCKS_PER_SM 8
#define CF_EW_DEFAULT_TILE_ROWS 8
#define CF_EW_DEFAULT_TILE_BLOCKS_PER_SM 0
#define CF_EW_DEFAULT_TILE_PRELOAD 1
#define CF_EW_DEFAULT_TILE_PIPELINE 1
#define CF_EW_DEFAULT_PDL 1
#define CF_EW_DEFAULT_PDL_MIN 65536

/* The element-wise engine's knobs (ufunc.c), read once per process from the environment (invalid
 * values are ignored, the default kept):
 *   CUFUNC_EW_BLOCK          threads per block of the flat, row-vector and strided kernels
 *                            (a multiple of 32, 32..1024; default CF_EW_DEFAULT_BLOCK)
 *   CUFUNC_EW_UNROLL         vectors per thread per iteration, flat and row-vector (1..16)
 *   CUFUNC_EW_PDL            1 (default): launches of at least CUFUNC_EW_PDL_MIN elements are
 *                            programmatic dependent launches (cf_launch_ex): on compute
 *                            capability 9.0 and up the kernel is scheduled while the previous
 *                            one in the stream drains, and waits for it before touching memory;
 *                            0: plain launches
 *   CUFUNC_EW_BLOCKS_PER_SM  grid cap per multiprocessor (within what occupancy allows);
 *                            0: no cap, one pass over the data (0..64)
 *   CUFUNC_EW_ROW_BLOCKS_PER_SM  the same for the row-vector kernel (default
 *                            CF_EW_DEFAULT_ROW_BLOCKS_PER_SM)
 *   CUFUNC_EW_TILE_ROWS      tile kernel: threads along a tile's rows, 32 / it rows each
 *                            (1, 2, 4, 8, 16 or 32)
 *   CUFUNC_EW_TILE_BLOCKS_PER_SM  the tile kernel's grid cap per multiprocessor; 0: none, one
 *                            tile per block, so blocks waiting at a barrier leave room for
 *                            others (0..64)
 *   CUFUNC_EW_TILE_PIPELINE  tile kernel: 1: a grid of resident blocks (the tile grid cap, or
 *                            the occupancy) loops over tiles and issues the loads of its next
 *                            tile before it computes the current one (software pipelining
 *                            across tiles: loads stay in flight while a block computes and
 *                            stores); 0: one tile per block
 *   CUFUNC_EW_TILE_PRELOAD   tile kernel: 1 (default) loads the inputs read in place into
 *                            registers together with the staged ones, before the barrier, so a
 *                            tile waits for one memory latency instead of two; 0: after it
 * Block size, unroll and tile rows are part of the generated source and of the specialisation. */
typedef struct cf_ew_knobs {
    int block;              /* CUFUNC_EW_BLOCK */
    int unroll;             /* CUFUNC_EW_UNROLL */
    int blocks_per_sm;      /* CUFUNC_EW_BLOCKS_PER_SM */
    int row_blocks_per_sm;  /* CUFUNC_EW_ROW_BLOCKS_PER_SM */
    int tile_rows;          /* CUFUNC_EW_TILE_ROWS */
    int tile_blocks_per_sm; /* CUFUNC_EW_TILE_BLOCKS_PER_SM */
    int tile_preload;       /* CUFUNC_EW_TILE_PRELOAD */
    int tile_pipeline;      /* CUFUNC_EW_TILE_PIPELINE */
    int pdl;                /* CUFUNC_EW_PDL */
    int64_t pdl_min;        /* CUFUNC_EW_PDL_MIN */
} cf_ew_knobs;

/* The knobs, read from the environment on the first call (thread-safe); never NULL. */
const cf_ew_knobs *cf_ew_knobs_get(void);

/* The host path's knobs (host arrays through the pipeline, hostpipe.c; bench/HOSTPIPE_NOTES.md
 * has the measurements the defaults come from):
 *   CUFUNC_HOST_THREADS       threads that split each pack/unpack copy between the user's pageable
 *                             memory and the pinned slots, the calling thread included (1: the
 *                             calling thread alone; 0, the default: min(online CPUs,
 *                             CF_HOST_AUTO_THREADS); at most 65). The copy pool (threadpool.h)
 *                             grows to that many workers unless CUFUNC_COPY_THREADS or
 *                             cf_threadpool_configure fixed its size.
 *   CUFUNC_HOST_REGISTER_MIN  bytes: a streamed host operand spanning at least this many bytes is
 *                             page-locked for the call (cuMemHostRegister, pages rounded out,
 *                             operands sharing pages merged into one registration, unregistered
 *                             when the call ends) and DMA'd in place, with no staging copy; memory
 *                             already page-locked (cuda.pinned, pinned_array, mapped) is used in
 *                             place whatever this says; a registration that fails falls back to
 *                             staging. 0 (default): never register.
 *   CUFUNC_HOST_RESULT_PINNED_MIN  bytes: a new NumPy result of a host call (the Python ufunc's
 *                             host strategy) of at least this size is allocated in page-locked
 *                             memory from a cache of such blocks (cf_hostpipe_result_alloc), so
 *                             the device-to-host copies land in it directly: no unpacking, no
 *                             first touch of fresh pages. Freed results go back to the cache (at
 *                             most CF_HOST_RESULT_CACHE_BYTES kept); at most
 *                             CF_HOST_RESULT_OUTSTANDING_BYTES are handed out at once (beyond it,
 *                             ordinary NumPy memory). 0: never. Default 1 MiB: measured (H100,
 *                             bench_hostpath.py, 2026-11-25) hypot on 2 x 2^26 float32 took 36.3 ms
 *                             with ordinary results (3.4x the pinned floor: unpacking into fresh
 *                             pages runs at 4-29 GB/s) and 13.7 ms (1.29x) with pinned ones.
 * cf_hostpipe_configure(NULL) reads them again (the Python tests use that). */
#define CF_HOST_AUTO_THREADS 12
#define CF_HOST_DEFAULT_THREADS 0
#define CF_HOST_DEFAULT_REGISTER_MIN 0
#define CF_HOST_DEFAULT_RESULT_PINNED_MIN ((int64_t)1 << 20)
#define CF_HOST_RESULT_CACHE_BYTES ((size_t)1 << 30)
#define CF_HOST_RESULT_OUTSTANDING_BYTES ((size_t)8 << 30)
typedef struct cf_host_knobs {
    int threads;               /* CUFUNC_HOST_THREADS (0: automatic) */
    int64_t register_min;      /* CUFUNC_HOST_REGISTER_MIN (0: off) */
    int64_t result_pinned_min; /* CUFUNC_HOST_RESULT_PINNED_MIN (0: off) */
} cf_host_knobs;

/* Read the host path's knobs from the environment now (not cached: the caller keeps them). */
void cf_host_knobs_read(cf_host_knobs *k);

#endif
