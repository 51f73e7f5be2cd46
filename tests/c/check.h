/* check.h: the C unit tests' harness. A test file defines test functions, lists them in main with
 * RUN(name), and returns SUMMARY(). A test needing a GPU calls NEED_GPU() first: without one it
 * is skipped, visibly (with the reason), unless CUFUNC_REQUIRE_GPU=1, which makes it fail. A test
 * that cannot run for another reason calls SKIP("why").
 *
 * Exit status (SUMMARY): 1 when any test failed; else 77 when any test was skipped, which ctest
 * reports as "Skipped" (SKIP_RETURN_CODE 77 in CMakeLists.txt); else 0. Every test of the file
 * still runs first: a file whose host-only tests pass and whose GPU tests could not run is
 * "Skipped", not "Passed" (it did not check everything it exists to check), and a failure among
 * the tests that did run is still a failure. The last line says how many ran, passed, failed and
 * skipped, and every SKIP line says why. */
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

/* Skip the current test, saying why (a printf format and its arguments). */
#define SKIP(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "  SKIP: ");                                                               \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        cf_t_current_skipped = 1;                                                                  \
        return;                                                                                    \
    } while (0)

/* Skip the current test when there is no GPU (saying why: cf_is_available's reason), unless
 * CUFUNC_REQUIRE_GPU=1, which makes it a failure. */
#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!cf_is_available()) {                                                                  \
            const char *req_ = getenv("CUFUNC_REQUIRE_GPU");                                       \
            if (req_ && strcmp(req_, "1") == 0) {                                                  \
                fprintf(stderr, "  FAIL: no usable GPU and CUFUNC_REQUIRE_GPU=1 (%s)\n",          \
                        cf_last_error());                                                          \
                cf_t_current_failed = 1;                                                           \
                return;                                                                            \
            }                                                                                      \
            SKIP("no usable GPU (%s)", cf_last_error());                                           \
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
    (fprintf(stderr, "%d tests, %d passed, %d failed, %d skipped%s\n", cf_t_ran,                   \
             cf_t_ran - cf_t_failures - cf_t_skipped, cf_t_failures, cf_t_skipped,                 \
             !cf_t_failures && cf_t_skipped ? " (exit 77: reported as skipped)" : ""),             \
     cf_t_failures ? 1 : cf_t_skipped ? 77 : 0)

#endif
