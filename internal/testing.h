/* testing.h: hooks for tests (tests/c, numpy_ext's test helpers), defined by the core (src/).
 * internal/ holds what the core offers only the binding (numpy_ext/) and the tests: on their
 * include path and src/'s, not installed, not part of the public API (include/cufunc/), hidden in
 * libcufunc.so (CF_INTERNAL, visibility.h). diagnostics.h has the counters and A/B switches. */
#ifndef CF_TESTING_H
#define CF_TESTING_H

#include <stdint.h>
#include "cufunc/status.h"
#include "visibility.h"

/* Make the n-th host allocation from now fail (n >= 1), and every one after it while `sticky`;
 * n = 0 turns failures off. All host allocation in cufunc goes through one place, so this reaches
 * every allocation the library makes. */
CF_INTERNAL void cf_test_fail_alloc_after(int64_t n, int sticky);
/* Host allocations made so far, and those not yet freed (for leak checks). */
CF_INTERNAL int64_t cf_test_alloc_count(void);
CF_INTERNAL int64_t cf_test_alloc_outstanding(void);

/* The host pipeline (ufunc.h, cf_ufunc_launch_host): pipelined launches fail (CF_ERR_CUDA,
 * "injected") just before launching chunk `chunk`, with earlier chunks in flight; -1 turns it
 * off. */
CF_INTERNAL void cf_hostpipe_test_fail_at(int64_t chunk);

/* The host pipeline's registration of user memory (CUFUNC_HOST_REGISTER_MIN): 0 normal; 1 every
 * cuMemHostRegister is taken to fail as out of memory; 2 as CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
 * (the pipeline then checks whether the operand is page-locked and stages it when not); the
 * memory is not registered in either case. */
CF_INTERNAL void cf_hostpipe_test_register_fault(int mode);

/* Where the last completed pipelined launch spent its time, in nanoseconds (CLOCK_MONOTONIC):
 * [0] plan (arguments, the plan, the pipeline's lock), [1] setup (pinned and device buffers, the
 * wait for the caller's stream, resident uploads), [2] issue (packing, DMA calls, kernel
 * launches, events: host time, summed over chunks), [3] wait (event waits), [4] unpack,
 * [5] finish (buffers back to the pool), [6] the whole launch. For bench/bench_hostpath.py. */
#define CF_HOSTPIPE_PHASES 7
CF_INTERNAL void cf_hostpipe_test_phases(int64_t ns[CF_HOSTPIPE_PHASES]);

/* The disk cache: from now on a writer of an entry stops halfway through its temporary file,
 * creates the file `marker` and sleeps until killed (a test then kills it with SIGKILL and checks
 * that no damaged entry is ever read). NULL or "" turns it off. */
CF_INTERNAL void cf_cache_test_pause_writes(const char *marker);

#endif
