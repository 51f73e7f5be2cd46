/* driver.h: the CUDA driver API, loaded with dlopen (libcuda.so.1), never linked.
 *
 * Every entry point cufunc uses is named once, in CF_DRIVER_FUNCS. The table is filled once under
 * pthread_once by cf_driver_load(), through cuGetProcAddress asking, per entry point, for the ABI
 * version that cuda.h's prototype of it has, so that each pointer has exactly that prototype (the
 * fields are typed with __typeof__ of it). Drivers without cuGetProcAddress_v2 fall
 * back to dlsym of the versioned names (cuMemAlloc_v2, ...).
 *
 * Call sites use the table as `cf_drv.cuMemAlloc(...)`: cuda.h's macros rename cuMemAlloc to
 * cuMemAlloc_v2 on both the field and the call, consistently.
 */
#ifndef CF_DRIVER_H
#define CF_DRIVER_H

#include <cuda.h>

#include "cufunc/status.h"

/* X(name, abi): every driver entry point cufunc calls, with the CUDA version that introduced the
 * ABI cuda.h declares for `name` (the PFN_<name>_v<abi> typedef in cudaTypedefs.h). The version
 * matters: asked for CUDA_VERSION, cuGetProcAddress returns the NEWEST ABI, and for some entry
 * points that differs from the prototype cuda.h gives the plain name (CUDA 13's cuCtxSynchronize
 * takes a context; cuStreamGetCtx since 12.5 takes a green-context pointer). Add a line here to use
 * a new entry point, with its version from cudaTypedefs.h. */
#define CF_DRIVER_FUNCS(X)                                                                         \
    X(cuInit, 2000)                                                                                \
    X(cuDriverGetVersion, 2020)                                                                    \
    X(cuGetErrorName, 6000)                                                                        \
    X(cuGetErrorString, 6000)                                                                      \
    X(cuDeviceGet, 2000)                                                                           \
    X(cuDeviceGetCount, 2000)                                                                      \
    X(cuDeviceGetName, 2000)                                                                       \
    X(cuDeviceGetAttribute, 2000)                                                                  \
    X(cuDeviceTotalMem, 3020)                                                                      \
    X(cuDeviceGetUuid, 11040)                                                                      \
    X(cuDeviceGetDefaultMemPool, 11020)                                                            \
    X(cuDevicePrimaryCtxRetain, 7000)                                                              \
    X(cuDevicePrimaryCtxRelease, 11000)                                                            \
    X(cuCtxSetCurrent, 4000)                                                                       \
    X(cuCtxGetCurrent, 4000)                                                                       \
    X(cuCtxGetDevice, 2000)                                                                        \
    X(cuCtxSynchronize, 2000)                                                                      \
    X(cuStreamCreate, 2000)                                                                        \
    X(cuStreamDestroy, 4000)                                                                       \
    X(cuStreamSynchronize, 2000)                                                                   \
    X(cuStreamQuery, 2000)                                                                         \
    X(cuStreamWaitEvent, 3020)                                                                     \
    X(cuStreamGetCtx, 9020)                                                                        \
    X(cuStreamGetFlags, 5050)                                                                      \
    X(cuEventCreate, 2000)                                                                         \
    X(cuEventDestroy, 4000)                                                                        \
    X(cuEventRecord, 2000)                                                                         \
    X(cuEventSynchronize, 2000)                                                                    \
    X(cuEventQuery, 2000)                                                                          \
    X(cuEventElapsedTime, 12080)                                                                   \
    X(cuMemAllocAsync, 11020)                                                                      \
    X(cuMemFreeAsync, 11020)                                                                       \
    X(cuMemPoolSetAttribute, 11020)                                                                \
    X(cuMemPoolTrimTo, 11020)                                                                      \
    X(cuMemAlloc, 3020)                                                                            \
    X(cuMemFree, 3020)                                                                             \
    X(cuMemGetInfo, 3020)                                                                          \
    X(cuMemHostAlloc, 2020)                                                                        \
    X(cuMemFreeHost, 2000)                                                                         \
    X(cuMemHostRegister, 6050)                                                                     \
    X(cuMemHostUnregister, 4000)                                                                   \
    X(cuMemHostGetDevicePointer, 3020)                                                             \
    X(cuMemAllocManaged, 6000)                                                                     \
    X(cuIpcGetMemHandle, 4010)                                                                     \
    X(cuIpcOpenMemHandle, 11000)                                                                   \
    X(cuIpcCloseMemHandle, 4010)                                                                   \
    X(cuMemcpyHtoDAsync, 3020)                                                                     \
    X(cuMemcpyDtoHAsync, 3020)                                                                     \
    X(cuMemcpyDtoDAsync, 3020)                                                                     \
    X(cuMemsetD8Async, 3020)                                                                       \
    X(cuPointerGetAttribute, 4000)                                                                 \
    X(cuPointerGetAttributes, 7000)                                                                \
    X(cuModuleLoadDataEx, 2010)                                                                    \
    X(cuModuleUnload, 2000)                                                                        \
    X(cuModuleGetFunction, 2000)                                                                   \
    X(cuModuleGetGlobal, 3020)                                                                     \
    X(cuFuncGetAttribute, 2020)                                                                    \
    X(cuFuncSetAttribute, 9000)                                                                    \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)                                           \
    X(cuLaunchKernel, 4000)                                                                        \
    X(cuLaunchKernelEx, 11060)                                                                     \
    X(cuMemsetD32Async, 3020)                                                                      \
    X(cuStreamIsCapturing, 10000)                                                                  \
    X(cuThreadExchangeStreamCaptureMode, 10010)                                                    \
    X(cuStreamBeginCapture, 10010)                                                                 \
    X(cuStreamEndCapture, 10000)                                                                   \
    X(cuGraphInstantiateWithFlags, 11040)                                                          \
    X(cuGraphUpload, 11010)                                                                        \
    X(cuGraphLaunch, 10000)                                                                        \
    X(cuGraphGetNodes, 10000)                                                                      \
    X(cuGraphExecDestroy, 10000)                                                                   \
    X(cuGraphDestroy, 10000)

#define CF_DRIVER_FIELD(name, abi) __typeof__(&name) name;
typedef struct cf_driver_table {
    CF_DRIVER_FUNCS(CF_DRIVER_FIELD)
} cf_driver_table;
#undef CF_DRIVER_FIELD

/* Filled by cf_driver_load(); read-only afterwards. */
extern cf_driver_table cf_drv;

/* Load libcuda and call cuInit(0), once per process. The first outcome is sticky. In a child of a
 * forked process whose parent had loaded the driver, returns CF_ERR_FORK. */
cf_status cf_driver_load(void);

/* Turn a CUresult into a cf_status with a message "<what>: CUDA_ERROR_X (description)".
 * CUDA_SUCCESS gives CF_OK; CUDA_ERROR_OUT_OF_MEMORY gives CF_ERR_DEVICE_NOMEM. */
cf_status cf_cu_check(CUresult r, const char *what);

/* Evaluate a driver call and return its cf_status from the enclosing function on failure. */
#define CF_CU_TRY(call)                                                                            \
    do {                                                                                           \
        CUresult cf_cu_r_ = (call);                                                                \
        if (cf_cu_r_ != CUDA_SUCCESS)                                                              \
            return cf_cu_check(cf_cu_r_, #call);                                                   \
    } while (0)

/* Calls CUDA calls "potentially unsafe" during a stream capture (module loads, memory-pool
 * settings made lazily on first use) invalidate a capture under way in the global and thread-local
 * modes (PyTorch captures in the global mode). Such a call is made with this thread's mode relaxed
 * for its duration, as the CUDA documentation advises libraries that initialise lazily; it queues
 * nothing on any stream. relax returns the mode to give back to restore. */
static inline CUstreamCaptureMode cf_capture_mode_relax(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (cf_drv.cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
        m = CU_STREAM_CAPTURE_MODE_RELAXED; /* nothing changed: nothing to put back */
    return m;
}

static inline void cf_capture_mode_restore(CUstreamCaptureMode m)
{
    if (m != CU_STREAM_CAPTURE_MODE_RELAXED)
        cf_drv.cuThreadExchangeStreamCaptureMode(&m);
}

#endif
