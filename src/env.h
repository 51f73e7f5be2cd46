/* env.h: the environment (internal). Every CUFUNC_* variable the library reads is a row of one
 * table, CF_KNOBS below (name, default, bounds, what it does), and is read through env.c: nothing
 * else in src/ calls getenv, except the driver and NVRTC loaders (driver.c, nvrtc.c), which read
 * their own paths before anything else can run. `python -m cufunc` and cf_knob_info (public,
 * include/cufunc/runtime.h) print the table with the values in effect. The element-wise engine's
 * ten knobs are also gathered, checked and cached once per process in cf_ew_knobs; the host
 * path's three in cf_host_knobs. */
#ifndef CUFUNC_ENV_H
#define CUFUNC_ENV_H

#include <stdint.h>

/* The integer value of environment variable `name` when it is set to a whole decimal number in
 * [lo, hi]; else `def` (unset, empty, not a number, out of range: a bad knob never breaks a run). */
long cf_env_long(const char *name, long def, long lo, long hi);

/* The text of environment variable `name`, or NULL when it is unset. The one getenv of the core
 * outside the loaders: for the string settings of CF_KNOBS (cf_knob_text) and the variables of
 * other programs the core reports or follows (HOME, XDG_CACHE_HOME, CUDA_VISIBLE_DEVICES). */
const char *cf_env_text(const char *name);

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

/* Defaults of the other engines' integer knobs. */
#define CF_HOSTPIPE_DEFAULT_STREAMS 3
#define CF_HOSTPIPE_MAX_STREAMS 16
/* Every host call is streamed: small ones in one chunk (one pinned DMA each way, one wait) beat
 * the whole-array path's separate pageable copies (bench/HOSTPIPE_NOTES.md). */
#define CF_HOSTPIPE_DEFAULT_MIN_KB 0
#define CF_STAGING_DEFAULT_CHUNK_MB 8
#define CF_STAGING_DEFAULT_BUFFERS 4
#define CF_STAGING_DEFAULT_MIN_KB 1024
/* (CF_STAGING_MAX_BUFFERS and CF_THREADPOOL_MAX_WORKERS, bounds below, are staging.h's and
 * threadpool.h's: the table is expanded in env.c, which includes both.) */

/* The table of every CUFUNC_* variable: X(id, name, kind, default, lowest, highest, doc).
 * kind 'i': an integer knob, read with cf_knob (out of [lowest, highest] or not a number: the
 * default; a default outside the bounds means "automatic"); 'p': the same, and a power of two;
 * 'w': the same, and a multiple of 32 (a warp); 's': a text setting, read with cf_knob_text
 * (default, bounds unused). Where a knob is read (once per process, or at each
 * configuration) is said in its doc. */
#define CF_KNOBS(X)                                                                                \
    X(EW_BLOCK, "CUFUNC_EW_BLOCK", 'w', CF_EW_DEFAULT_BLOCK, 32, 1024,                             \
      "element-wise: threads per block of the flat, row-vector and strided kernels (a multiple "  \
      "of 32; once per process)")                                                                  \
    X(EW_UNROLL, "CUFUNC_EW_UNROLL", 'i', CF_EW_DEFAULT_UNROLL, 1, 16,                             \
      "element-wise: vectors per thread per iteration, flat and row-vector kernels")               \
    X(EW_BLOCKS_PER_SM, "CUFUNC_EW_BLOCKS_PER_SM", 'i', CF_EW_DEFAULT_BLOCKS_PER_SM, 0, 64,        \
      "element-wise: grid cap per multiprocessor; 0: none, one pass over the data")                \
    X(EW_ROW_BLOCKS_PER_SM, "CUFUNC_EW_ROW_BLOCKS_PER_SM", 'i', CF_EW_DEFAULT_ROW_BLOCKS_PER_SM,   \
      0, 64, "element-wise: the row-vector kernel's grid cap per multiprocessor")                  \
    X(EW_TILE_ROWS, "CUFUNC_EW_TILE_ROWS", 'p', CF_EW_DEFAULT_TILE_ROWS, 1, CF_EW_TILE,            \
      "element-wise tile kernel: threads along a tile's rows (1, 2, 4, 8, 16 or 32)")              \
    X(EW_TILE_BLOCKS_PER_SM, "CUFUNC_EW_TILE_BLOCKS_PER_SM", 'i',                                  \
      CF_EW_DEFAULT_TILE_BLOCKS_PER_SM, 0, 64,                                                     \
      "element-wise tile kernel: grid cap per multiprocessor; 0: one tile per block")              \
    X(EW_TILE_PRELOAD, "CUFUNC_EW_TILE_PRELOAD", 'i', CF_EW_DEFAULT_TILE_PRELOAD, 0, 1,            \
      "element-wise tile kernel: 1: in-place inputs loaded with the staged ones, before the "      \
      "barrier")                                                                                   \
    X(EW_TILE_PIPELINE, "CUFUNC_EW_TILE_PIPELINE", 'i', CF_EW_DEFAULT_TILE_PIPELINE, 0, 1,         \
      "element-wise tile kernel: 1: resident blocks loop over tiles, loads of the next tile in "   \
      "flight")                                                                                    \
    X(EW_PDL, "CUFUNC_EW_PDL", 'i', CF_EW_DEFAULT_PDL, 0, 1,                                       \
      "element-wise: 1: large launches are programmatic dependent launches (sm_90+)")              \
    X(EW_PDL_MIN, "CUFUNC_EW_PDL_MIN", 'i', CF_EW_DEFAULT_PDL_MIN, 0, (long)1 << 40,               \
      "element-wise: fewest elements of a programmatic dependent launch")                          \
    X(REDUCE_BLOCKS_PER_SM, "CUFUNC_REDUCE_BLOCKS_PER_SM", 'i', 0, 1, 64,                          \
      "reductions: blocks of 512 per multiprocessor of full reductions (unset: automatic; once "   \
      "per process)")                                                                              \
    X(REDUCE_UNROLL, "CUFUNC_REDUCE_UNROLL", 'p', 0, 1, 8,                                         \
      "reductions: independent vector loads in flight per thread (1, 2, 4 or 8)")                  \
    X(REDUCE_COLS_THREADS_PER_SM, "CUFUNC_REDUCE_COLS_THREADS_PER_SM", 'i', 0, 64, 65536,          \
      "reductions: threads per multiprocessor a split column reduction aims at")                   \
    X(REDUCE_GATHER, "CUFUNC_REDUCE_GATHER", 'i', 0, 1, 32,                                        \
      "reductions: partials the last block of a split loads at once")                              \
    X(SCAN_BLOCK, "CUFUNC_SCAN_BLOCK", 'p', 0, 64, 1024,                                           \
      "scans: threads per tile (64, 128, 256, 512 or 1024)")                                       \
    X(SCAN_ITEMS, "CUFUNC_SCAN_ITEMS", 'i', 0, 1, 64, "scans: elements per thread of a tile")      \
    X(SCAN_SLEEP, "CUFUNC_SCAN_SLEEP", 'i', 0, 0, 10000,                                           \
      "scans: nanoseconds a look-back waits between polls of a tile state not ready")              \
    X(SCAN_MIN_BLOCKS, "CUFUNC_SCAN_MIN_BLOCKS", 'i', 0, 1, 32,                                    \
      "scans: tiles resident per multiprocessor asked of the compiler (__launch_bounds__)")        \
    X(SCAN_LOOKBACK, "CUFUNC_SCAN_LOOKBACK", 'p', 0, 1, 8,                                         \
      "scans: 32-tile groups a look-back step reads per L2 round trip (1, 2, 4 or 8)")             \
    X(SCAN_SMEM_ITEMS, "CUFUNC_SCAN_SMEM_ITEMS", 'i', -1, 0, 48,                                   \
      "scans: elements per thread of a tile held in shared memory beside the register ones")       \
    X(SCAN_ORDER, "CUFUNC_SCAN_ORDER", 's', 0, 0, 0,                                               \
      "scans: 'block': tile blockIdx.x, as CUB; 'atomic': tiles drawn from a counter")             \
    X(GU_SMALL, "CUFUNC_GU_SMALL", 'i', 1, 0, 1,                                                   \
      "gufuncs: 0: plan without flat shared-memory tiles (read at the first plan)")                \
    X(HOSTPIPE_CHUNK_KB, "CUFUNC_HOSTPIPE_CHUNK_KB", 'i', 0, 0, (long)1 << 20,                     \
      "host arrays: KiB per pipelined chunk (0: automatic; read at each configuration)")           \
    X(HOSTPIPE_STREAMS, "CUFUNC_HOSTPIPE_STREAMS", 'i', CF_HOSTPIPE_DEFAULT_STREAMS, 2,            \
      CF_HOSTPIPE_MAX_STREAMS, "host arrays: streams the chunks rotate over")                      \
    X(HOSTPIPE_MIN_KB, "CUFUNC_HOSTPIPE_MIN_KB", 'i', CF_HOSTPIPE_DEFAULT_MIN_KB, 0, (long)1 << 30,                         \
      "host arrays: smallest call (KiB) streamed in chunks")                                       \
    X(HOST_THREADS, "CUFUNC_HOST_THREADS", 'i', CF_HOST_DEFAULT_THREADS, 0, 65,                    \
      "host arrays: threads per pack/unpack copy (0: min(CPUs, 12))")                              \
    X(HOST_REGISTER_MIN, "CUFUNC_HOST_REGISTER_MIN", 'i', CF_HOST_DEFAULT_REGISTER_MIN, 0,         \
      (long)1 << 50, "host arrays: bytes from which an operand is page-locked for the call "       \
      "(0: never)")                                                                                \
    X(HOST_RESULT_PINNED_MIN, "CUFUNC_HOST_RESULT_PINNED_MIN", 'i',                                \
      CF_HOST_DEFAULT_RESULT_PINNED_MIN, 0, (long)1 << 50,                                         \
      "host arrays: bytes from which a new NumPy result lives in a cached page-locked block "      \
      "(0: never)")                                                                                \
    X(STAGING_CHUNK_MB, "CUFUNC_STAGING_CHUNK_MB", 'i', CF_STAGING_DEFAULT_CHUNK_MB, 1, 1024,      \
      "pageable copies: MiB per pinned staging buffer (read at each configuration)")               \
    X(STAGING_BUFFERS, "CUFUNC_STAGING_BUFFERS", 'i', CF_STAGING_DEFAULT_BUFFERS, 2,               \
      CF_STAGING_MAX_BUFFERS, "pageable copies: pinned staging buffers in the ring")               \
    X(STAGING_MIN_KB, "CUFUNC_STAGING_MIN_KB", 'i', CF_STAGING_DEFAULT_MIN_KB, 0, (long)1 << 30,   \
      "pageable copies: smallest copy (KiB) staged through the ring")                              \
    X(COPY_THREADS, "CUFUNC_COPY_THREADS", 'i', -1, 0, CF_THREADPOOL_MAX_WORKERS,                  \
      "host copies: worker threads of the copy pool (unset: CPUs - 1, at most 8)")                 \
    X(CACHE, "CUFUNC_CACHE", 's', 0, 0, 0, "the disk cache of kernels: '0' turns it off")          \
    X(CACHE_DIR, "CUFUNC_CACHE_DIR", 's', 0, 0, 0,                                                 \
      "the disk cache's folder (default $XDG_CACHE_HOME/cufunc or ~/.cache/cufunc)")               \
    X(DEBUG, "CUFUNC_DEBUG", 's', 0, 0, 0,                                                         \
      "set (not '0'): the disk cache says on stderr why it skips an entry")                        \
    X(DRIVER_PATH, "CUFUNC_DRIVER_PATH", 's', 0, 0, 0,                                             \
      "libcuda to load instead of the system's (read by the driver loader)")                       \
    X(NVRTC_PATH, "CUFUNC_NVRTC_PATH", 's', 0, 0, 0,                                               \
      "libnvrtc to load before searching CUDA_HOME, CUDA_PATH, the nvidia wheels and the "         \
      "system (read by the NVRTC loader)")

typedef enum cf_knob_id {
#define CF_KNOB_ENUM(id, name, kind, def, lo, hi, doc) CF_KNOB_##id,
    CF_KNOBS(CF_KNOB_ENUM)
#undef CF_KNOB_ENUM
    CF_KNOB_COUNT
} cf_knob_id;

/* An integer knob's value in effect, read from the environment now (callers that want it once
 * per process cache it). */
long cf_knob(cf_knob_id id);

/* A text setting's value, or NULL when unset. */
const char *cf_knob_text(cf_knob_id id);

#endif
