/* error.c: the thread-local last error. The message buffer grows as needed, allocated with plain
 * malloc (not cf_malloc) so that reporting an allocation failure can never itself fail through the
 * test allocator; if even malloc fails, a fixed fallback message is kept. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char *tls_message;
static _Thread_local size_t tls_capacity;
static _Thread_local cf_status tls_status;

static const char OOM_FALLBACK[] = "out of host memory while formatting an error message";

static void store_message(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        n = 0;
    size_t need = (size_t)n + 1;
    if (need > tls_capacity) {
        char *grown = realloc(tls_message, need);
        if (!grown) {
            free(tls_message);
            tls_message = NULL;
            tls_capacity = 0;
            return;
        }
        tls_message = grown;
        tls_capacity = need;
    }
    vsnprintf(tls_message, need, fmt, ap);
}

cf_status cf_error_set(cf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    store_message(fmt, ap);
    va_end(ap);
    tls_status = status;
    return status;
}

cf_status cf_error_prefix(const char *fmt, ...)
{
    const char *old = tls_message ? tls_message : "";
    size_t oldlen = strlen(old);
    char *saved = malloc(oldlen + 1);
    if (!saved)
        return tls_status;
    memcpy(saved, old, oldlen + 1);

    va_list ap;
    va_start(ap, fmt);
    char prefix[512];
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    cf_status st = tls_status;
    cf_error_set(st, "%s: %s", prefix, saved);
    free(saved);
    return st;
}

const char *cf_last_error(void)
{
    if (tls_status != CF_OK && !tls_message)
        return OOM_FALLBACK;
    return tls_message ? tls_message : "";
}

cf_status cf_last_status(void) { return tls_status; }

void cf_clear_error(void)
{
    tls_status = CF_OK;
    if (tls_message)
        tls_message[0] = '\0';
}

const char *cf_status_name(cf_status status)
{
    switch (status) {
    case CF_OK: return "CF_OK";
    case CF_ERR_INVALID: return "CF_ERR_INVALID";
    case CF_ERR_TYPE: return "CF_ERR_TYPE";
    case CF_ERR_NOMEM: return "CF_ERR_NOMEM";
    case CF_ERR_DEVICE_NOMEM: return "CF_ERR_DEVICE_NOMEM";
    case CF_ERR_NO_DRIVER: return "CF_ERR_NO_DRIVER";
    case CF_ERR_NO_DEVICE: return "CF_ERR_NO_DEVICE";
    case CF_ERR_NO_NVRTC: return "CF_ERR_NO_NVRTC";
    case CF_ERR_COMPILE: return "CF_ERR_COMPILE";
    case CF_ERR_CUDA: return "CF_ERR_CUDA";
    case CF_ERR_FORK: return "CF_ERR_FORK";
    case CF_ERR_IO: return "CF_ERR_IO";
    case CF_ERR_UNSUPPORTED: return "CF_ERR_UNSUPPORTED";
    case CF_ERR_RANGE: return "CF_ERR_RANGE";
    case CF_ERR_ASSERT: return "CF_ERR_ASSERT";
    default: return "CF_ERR_UNKNOWN";
    }
}
