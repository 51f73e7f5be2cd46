/* error.h: setting the thread-local error (the reading side is in include/cufunc/status.h). */
#ifndef CF_ERROR_H
#define CF_ERROR_H

#include "cufunc/status.h"

/* Record a failure with a printf-style message and return `status`, so callers write
 * `return cf_error_set(CF_ERR_INVALID, "ndim %d is over %d", ndim, CF_MAX_DIMS);`.
 * Messages of any length are kept (the NVRTC log of a failed compile can be long). */
cf_status cf_error_set(cf_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefix the current message with "context: " keeping its status; returns the status. Used to add
 * what the caller was doing ("to_device: ") to a lower layer's message. */
cf_status cf_error_prefix(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#endif
