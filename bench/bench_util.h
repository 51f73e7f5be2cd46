/* bench_util.h: what the C benchmarks share: a monotonic clock and the comparison for sorting a
 * run's timings to take their median. Header-only (each benchmark is one .c file). */
#ifndef CF_BENCH_UTIL_H
#define CF_BENCH_UTIL_H

#include <time.h>

/* Seconds on the monotonic clock. */
static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* qsort's comparison for doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
