/* util.h: tiny helpers every file of the core may use (no state, inline). */
#ifndef CF_UTIL_H
#define CF_UTIL_H

#include <stdint.h>
#include <time.h>

/* |x| for strides and byte offsets (never INT64_MIN: strides are bounded by the address space). */
static inline int64_t cf_abs64(int64_t x) { return x < 0 ? -x : x; }

/* The monotonic clock in nanoseconds (phase timings, spin deadlines). */
static inline int64_t cf_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

#endif
