/* cufunc/status.h: status codes and the thread-local error message. No GPU needed.
 *
 * Every cufunc function that can fail returns a cf_status: 0 (CF_OK) on success, a negative code
 * on failure. On failure it also leaves a message, readable with cf_last_error() on the same
 * thread until the next failing call replaces it. Success does not clear the message.
 */
#ifndef CUFUNC_STATUS_H
#define CUFUNC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CF_API __declspec(dllexport)
#elif defined(__GNUC__)
#define CF_API __attribute__((visibility("default")))
#else
#define CF_API
#endif

typedef int cf_status;

/* The codes are grouped by the Python exception numpy_ext raises for them (in brackets). */
enum {
    CF_OK = 0,
    CF_ERR_INVALID = -1,        /* a bad argument or misuse of the API [ValueError] */
    CF_ERR_TYPE = -2,           /* an argument of the wrong kind or dtype [TypeError] */
    CF_ERR_NOMEM = -3,          /* host memory exhausted [MemoryError] */
    CF_ERR_DEVICE_NOMEM = -4,   /* device memory exhausted [MemoryError] */
    CF_ERR_NO_DRIVER = -5,      /* libcuda missing, failed to load, or cuInit failed [CudaSupportError] */
    CF_ERR_NO_DEVICE = -6,      /* no such device / no GPU [CudaSupportError] */
    CF_ERR_NO_NVRTC = -7,       /* libnvrtc missing or failed to load [CudaSupportError] */
    CF_ERR_COMPILE = -8,        /* NVRTC rejected a program; message holds log, source, options [CompileError] */
    CF_ERR_CUDA = -9,           /* a driver call failed; message names the call and CUresult [CudaAPIError] */
    CF_ERR_FORK = -10,          /* CUDA used in a child of a process that had initialised it [CudaSupportError] */
    CF_ERR_IO = -11,            /* a file-system operation failed (cache) [OSError] */
    CF_ERR_UNSUPPORTED = -12,   /* valid request that cufunc does not support [NotImplementedError] */
    CF_ERR_RANGE = -13,         /* an index or size out of range [IndexError / OverflowError] */
    CF_ERR_ASSERT = -14,        /* a device-side assert failed (CUDA_ERROR_ASSERT): the CUDA context
                                   is unusable from then on [AssertionError: DeviceAssertionError] */
};

/* The message of the last failure on this thread ("" if none). The pointer stays valid until the
 * next cufunc call on this thread. */
CF_API const char *cf_last_error(void);

/* The status code of the last failure on this thread (CF_OK if none). */
CF_API cf_status cf_last_status(void);

/* Forget the last failure on this thread. */
CF_API void cf_clear_error(void);

/* A short constant name for a status code ("CF_ERR_INVALID"); never NULL. */
CF_API const char *cf_status_name(cf_status status);

#ifdef __cplusplus
}
#endif
#endif
