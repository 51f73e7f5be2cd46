/* cufunc/testing.h: hooks for tests. Not for production use. */
#ifndef CUFUNC_TESTING_H
#define CUFUNC_TESTING_H

#include <stdint.h>
#include "cufunc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make the n-th host allocation from now fail (n >= 1), and every one after it while `sticky`;
 * n = 0 turns failures off. All host allocation in cufunc goes through one place, so this reaches
 * every allocation the library makes. */
CF_API void cf_test_fail_alloc_after(int64_t n, int sticky);
/* Host allocations made so far, and those not yet freed (for leak checks). */
CF_API int64_t cf_test_alloc_count(void);
CF_API int64_t cf_test_alloc_outstanding(void);

#ifdef __cplusplus
}
#endif
#endif
