/* check.h: the C unit tests' harness. A test file defines test functions, lists them in main with
 * RUN(name), and returns SUMMARY(). A test needing a GPU calls NEED_GPU() first: without one it
 * is skipped, visibly, unless CUFUNC_REQUIRE_GPU=1, which makes it fail. Exit code 77 (all skipped)
 * is reported by ctest as skipped. */
#ifndef CF_TEST_CHECK_H
#define CF_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cufunc/cufunc.h"

static int cf_t_failures, cf_t_ran, cf_t_skipped, cf_t_current_failed, cf_t_current_skipped;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                      \
            cf_t_current_failed = 1;                                                               \
        }                                                                                          \
    } while (0)

/* Check a cf_status is CF_OK; print the library's message if not. */
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        cf_status cf_t_s_ = (expr);                                                                \
        if (cf_t_s_ != CF_OK) {                                                                    \
            fprintf(stderr, "  FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,             \
                    cf_status_name(cf_t_s_), cf_last_error());                                     \
            cf_t_current_failed = 1;                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STATUS(expr, want)                                                                   \
    do {                                                                                           \
        cf_status cf_t_s_ = (expr);                                                                \
        if (cf_t_s_ != (want)) {                                                                   \
            fprintf(stderr, "  FAIL %s:%d: %s -> %s, wanted %s (%s)\n", __FILE__, __LINE__, #expr, \
                    cf_status_name(cf_t_s_), cf_status_name(want), cf_last_error());               \
            cf_t_current_failed = 1;                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_CONTAINS(haystack, needle)                                                           \
    do {                                                                                           \
        const char *cf_t_h_ = (haystack);                                                          \
        if (!cf_t_h_ || !strstr(cf_t_h_, (needle))) {                                              \
            fprintf(stderr, "  FAIL %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,  \
                    cf_t_h_ ? cf_t_h_ : "(null)", (needle));                                       \
            cf_t_current_failed = 1;                                                               \
        }                                                                                          \
    } while (0)

/* Skip the current test when there is no GPU, unless CUFUNC_REQUIRE_GPU=1. */
#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!cf_is_available()) {                                                                  \
            const char *req_ = getenv("CUFUNC_REQUIRE_GPU");                                       \
            if (req_ && strcmp(req_, "1") == 0) {                                                  \
                fprintf(stderr, "  FAIL: no usable GPU and CUFUNC_REQUIRE_GPU=1 (%s)\n",          \
                        cf_last_error());                                                          \
                cf_t_current_failed = 1;                                                           \
            } else {                                                                               \
                fprintf(stderr, "  SKIP: no usable GPU\n");                                        \
                cf_t_current_skipped = 1;                                                          \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        cf_t_current_failed = cf_t_current_skipped = 0;                                            \
        fprintf(stderr, "%s\n", #fn);                                                              \
        fn();                                                                                      \
        cf_t_ran++;                                                                                \
        if (cf_t_current_failed)                                                                   \
            cf_t_failures++;                                                                       \
        else if (cf_t_current_skipped)                                                             \
            cf_t_skipped++;                                                                        \
    } while (0)

#define SUMMARY()                                                                                  \
    (fprintf(stderr, "%d tests, %d failed, %d skipped\n", cf_t_ran, cf_t_failures, cf_t_skipped), \
     cf_t_failures ? 1 : (cf_t_ran && cf_t_skipped == cf_t_ran) ? 77 : 0)

#endif
