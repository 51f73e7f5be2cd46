/* driver.h: the CUDA driver API, loaded with dlopen (libcuda.so.1), never linked.
 *
 * Every entry point cufunc uses is named once, in CF_DRIVER_FUNCS. The table is filled once under
 * pthread_once by cf_driver_load(), through cuGetProcAddress asking for the ABI of the cuda.h we
 * compile against (CUDA_VERSION), so that each pointer has exactly the prototype declared there
 * (the fields are typed with __typeof__ of that prototype). Drivers without cuGetProcAddress_v2 fall
 * back to dlsym of the versioned names (cuMemAlloc_v2, ...).
 *
 * Call sites use the table as `cf_drv.cuMemAlloc(...)`: cuda.h's macros rename cuMemAlloc to
 * cuMemAlloc_v2 on both the field and the call, consistently.
 */
#ifndef CF_DRIVER_H
#define CF_DRIVER_H

#include <cuda.h>

#include "cufunc/status.h"

/* X(name): every driver entry point cufunc calls. Add a line here to use a new one. */
#define CF_DRIVER_FUNCS(X)                                                                         \
    X(cuInit)                                                                                      \
    X(cuDriverGetVersion)                                                                          \
    X(cuGetErrorName)                                                                              \
    X(cuGetErrorString)                                                                            \
    X(cuDeviceGet)                                                                                 \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGetName)                                                                             \
    X(cuDeviceGetAttribute)                                                                        \
    X(cuDeviceTotalMem)                                                                            \
    X(cuDeviceGetUuid)                                                                             \
    X(cuDeviceGetDefaultMemPool)                                                                   \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuCtxSetCurrent)                                                                             \
    X(cuCtxGetCurrent)                                                                             \
    X(cuCtxGetDevice)                                                                              \
    X(cuCtxSynchronize)                                                                            \
    X(cuStreamCreate)                                                                              \
    X(cuStreamDestroy)                                                                             \
    X(cuStreamSynchronize)                                                                         \
    X(cuStreamQuery)                                                                               \
    X(cuStreamWaitEvent)                                                                           \
    X(cuStreamGetCtx)                                                                              \
    X(cuEventCreate)                                                                               \
    X(cuEventDestroy)                                                                              \
    X(cuEventRecord)                                                                               \
    X(cuEventSynchronize)                                                                          \
    X(cuEventQuery)                                                                                \
    X(cuEventElapsedTime)                                                                          \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemPoolSetAttribute)                                                                       \
    X(cuMemPoolTrimTo)                                                                             \
    X(cuMemAlloc)                                                                                  \
    X(cuMemFree)                                                                                   \
    X(cuMemGetInfo)                                                                                \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemFreeHost)                                                                               \
    X(cuMemHostRegister)                                                                           \
    X(cuMemHostUnregister)                                                                         \
    X(cuMemcpyHtoDAsync)                                                                           \
    X(cuMemcpyDtoHAsync)                                                                           \
    X(cuMemcpyDtoDAsync)                                                                           \
    X(cuMemsetD8Async)                                                                             \
    X(cuPointerGetAttribute)                                                                       \
    X(cuModuleLoadDataEx)                                                                          \
    X(cuModuleUnload)                                                                              \
    X(cuModuleGetFunction)                                                                         \
    X(cuFuncGetAttribute)                                                                          \
    X(cuFuncSetAttribute)                                                                          \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                 \
    X(cuLaunchKernel)

#define CF_DRIVER_FIELD(name) __typeof__(&name) name;
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

#endif
