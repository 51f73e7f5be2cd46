/* util.h: tiny helpers every file of the core may use (no state, inline). */
#ifndef CF_UTIL_H
#define CF_UTIL_H

#include <stdint.h>

/* |x| for strides and byte offsets (never INT64_MIN: strides are bounded by the address space). */
static inline int64_t cf_abs64(int64_t x) { return x < 0 ? -x : x; }

#endif
