/* diagnostics.h: what the core says about itself and the switches for A/B timings, defined by
 * the core (src/), for the binding (numpy_ext/: the Python layer's statistics and benchmark
 * helpers), the C tests and the benchmarks. Not installed, not part of the public API
 * (include/cufunc/); hidden in libcufunc.so (CF_INTERNAL). Test hooks proper are in testing.h. */
#ifndef CF_DIAGNOSTICS_H
#define CF_DIAGNOSTICS_H

#include <stddef.h>
#include <stdint.h>
#include "cufunc/gufunc.h"
#include "cufunc/reduce.h"
#include "cufunc/ufunc.h"
#include "visibility.h"

/* ---- switches ------------------------------------------------------------------------------- */

/* The gufunc engine's staging of small compact cores (flat tiles, cf_gufunc_plan's `flat`): on
 * by default; off ($CUFUNC_GU_SMALL=0 at the first plan, or this call) plans as before it existed,
 * for A/B timings and tests. Returns the previous setting. */
CF_INTERNAL int cf_gufunc_set_small_staging(int on);

/* ---- counters --------------------------------------------------------------------------------- */

/* Kernels compiled so far by this ufunc, gufunc or reducer, over all devices (for tests of the
 * specialisation). */
CF_INTERNAL int cf_ufunc_kernel_count(const cf_ufunc *u);
CF_INTERNAL int cf_gufunc_kernel_count(const cf_gufunc *g);
CF_INTERNAL int cf_reducer_kernel_count(const cf_reducer *r);

/* The kernel cache's counters since start (compile.h's cache), for tests and the demo. */
typedef struct cf_cache_stats {
    int64_t compiles, memory_hits, disk_hits, disk_writes, corrupt_entries;
} cf_cache_stats;
CF_INTERNAL void cf_cache_get_stats(cf_cache_stats *out);

/* Bytes currently allocated through cf_mem_alloc and not freed, over all devices (for leak
 * tests). Needs no GPU (a counter). */
CF_INTERNAL int64_t cf_mem_outstanding(void);

/* ---- the host pipeline (ufunc.h: cf_ufunc_launch_host) -------------------------------------- */

/* The info of the last successful pipelined launch in this process (all zero before the first). */
CF_INTERNAL void cf_hostpipe_last(cf_hostpipe_info *out);
/* The page-locked blocks of host results (cf_hostpipe_result_alloc): bytes handed out now, and
 * bytes cached (either may be NULL). */
CF_INTERNAL void cf_hostpipe_result_stats(size_t *outstanding, size_t *cached);

#endif
