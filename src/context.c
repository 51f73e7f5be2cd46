/* context.c: devices and their primary contexts.
 *
 * cufunc uses each device's primary context, the one the CUDA runtime (and so CuPy, PyTorch and
 * Numba) uses, so device pointers pass freely between them and us. A primary context is retained
 * once per process, the first time the device is used, and never released: releasing it while
 * another library still uses it would tear it down under them.
 *
 * The "current device" is per thread, as in the CUDA runtime; it starts at 0.
 *
 * Working on a device means making its primary context current on the calling thread (the driver
 * needs it), which is also what the CUDA runtime reads as the thread's current device. So that a
 * cufunc call on device 1 does not move CuPy's, PyTorch's or Numba's current device under them
 * (other libraries set and restore it around each operation), cf_context_enter remembers the
 * context that was current before it first switched, and cf_context_restore puts it back: the
 * Python layer calls it when a call ends; a C program calls it when it wants its own current
 * context back. Both are thread-local bookkeeping: nothing to do, and no driver call, when no
 * switch happened (one GPU, or work on the current device).
 */
#include "context.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "env.h"
#include "error.h"

/* More than any machine has; keeps the tables static (no allocation, nothing to free). */
#define CF_MAX_DEVICES 64

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static int device_count = -1;
static CUcontext primary[CF_MAX_DEVICES];
static int props_loaded[CF_MAX_DEVICES];
static cf_device_props props[CF_MAX_DEVICES];
static _Thread_local int tls_device;
static _Thread_local int tls_switched;      /* cf_context_enter changed the current context */
static _Thread_local CUcontext tls_outer;   /* the one current before that first change */

/* The one message for "the driver works and sees no GPU". Callers of the Python layer prefix it
 * with the user's call ("hypot: no CUDA device: ..."). */
static cf_status no_device(void)
{
    const char *vis = cf_env_text("CUDA_VISIBLE_DEVICES");
    return cf_error_set(CF_ERR_NO_DEVICE,
                        "no CUDA device: the CUDA driver at %s reports none (cuDeviceGetCount: "
                        "0)%s%.200s%s",
                        cf_driver_path(), vis ? "; CUDA_VISIBLE_DEVICES is '" : "", vis ? vis : "",
                        vis ? "'" : "");
}

cf_status cf_init(void)
{
    cf_status st = cf_driver_load();
    if (st)
        return st;
    if (device_count >= 0)
        return CF_OK;
    int n = 0;
    CF_CU_TRY(cf_drv.cuDeviceGetCount(&n));
    if (n > CF_MAX_DEVICES)
        n = CF_MAX_DEVICES;
    pthread_mutex_lock(&ctx_lock);
    device_count = n;
    pthread_mutex_unlock(&ctx_lock);
    return CF_OK;
}

int cf_is_available(void)
{
    if (cf_init() != CF_OK)
        return 0;
    if (device_count == 0) {
        no_device();
        return 0;
    }
    return 1;
}

cf_status cf_device_count(int *count)
{
    if (!count)
        return cf_error_set(CF_ERR_INVALID, "cf_device_count: count is NULL");
    cf_status st = cf_init();
    if (st)
        return st;
    *count = device_count;
    return CF_OK;
}

static cf_status check_ordinal(int device)
{
    cf_status st = cf_init();
    if (st)
        return st;
    if (device < 0 || device >= device_count) {
        if (device_count == 0)
            return no_device();
        return cf_error_set(CF_ERR_NO_DEVICE, "no CUDA device %d: there %s %d (0..%d)", device,
                            device_count == 1 ? "is" : "are", device_count, device_count - 1);
    }
    return CF_OK;
}

cf_status cf_context_enter(int device)
{
    cf_status st = check_ordinal(device);
    if (st)
        return st;
    CUcontext ctx = primary[device];
    if (!ctx) {
        pthread_mutex_lock(&ctx_lock);
        if (!primary[device]) {
            CUdevice dev;
            CUresult r = cf_drv.cuDeviceGet(&dev, device);
            if (r == CUDA_SUCCESS)
                r = cf_drv.cuDevicePrimaryCtxRetain(&primary[device], dev);
            if (r != CUDA_SUCCESS) {
                pthread_mutex_unlock(&ctx_lock);
                return cf_cu_check(r, "retaining the device's primary context");
            }
        }
        ctx = primary[device];
        pthread_mutex_unlock(&ctx_lock);
    }
    /* Another library on this thread may have made its own context current: check every time
     * (cuCtxGetCurrent is a thread-local read inside the driver). */
    CUcontext cur = NULL;
    CF_CU_TRY(cf_drv.cuCtxGetCurrent(&cur));
    if (cur != ctx) {
        CF_CU_TRY(cf_drv.cuCtxSetCurrent(ctx));
        if (!tls_switched) {
            tls_outer = cur;
            tls_switched = 1;
        }
    }
    return CF_OK;
}

void cf_context_restore(void)
{
    if (!tls_switched)
        return;
    tls_switched = 0;
    CUcontext cur = NULL;
    if (cf_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur == tls_outer)
        return;
    /* No context was current: the CUDA runtime would make the primary context of the thread's
     * device current at its first call, so that one may stay (and cufunc's next call on this
     * thread then costs no switch); another device's is undone. */
    if (!tls_outer && tls_device >= 0 && tls_device < CF_MAX_DEVICES && cur == primary[tls_device])
        return;
    cf_drv.cuCtxSetCurrent(tls_outer);
}

cf_status cf_device_enter(int device) { return cf_context_enter(device); }

static cf_status load_props(int device)
{
    cf_device_props p;
    memset(&p, 0, sizeof p);
    CUdevice dev;
    CF_CU_TRY(cf_drv.cuDeviceGet(&dev, device));
    p.ordinal = device;
    CF_CU_TRY(cf_drv.cuDeviceGetName(p.name, (int)sizeof p.name, dev));
    static const struct {
        CUdevice_attribute attr;
        size_t offset;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(cf_device_props, cc_major)},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(cf_device_props, cc_minor)},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(cf_device_props, multiprocessor_count)},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(cf_device_props, max_threads_per_block)},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
         offsetof(cf_device_props, max_threads_per_multiprocessor)},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, offsetof(cf_device_props, warp_size)},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, offsetof(cf_device_props, l2_cache_bytes)},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
         offsetof(cf_device_props, max_shared_per_block)},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
         offsetof(cf_device_props, max_shared_per_block_optin)},
        {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, offsetof(cf_device_props, pci_bus_id)},
        {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, offsetof(cf_device_props, pci_device_id)},
        {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, offsetof(cf_device_props, pci_domain_id)},
        {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
         offsetof(cf_device_props, memory_pools_supported)},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        CF_CU_TRY(cf_drv.cuDeviceGetAttribute((int *)((char *)&p + attrs[i].offset), attrs[i].attr,
                                              dev));
    CF_CU_TRY(cf_drv.cuDeviceTotalMem(&p.total_memory, dev));
    CUuuid u;
    CF_CU_TRY(cf_drv.cuDeviceGetUuid(&u, dev));
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(p.uuid, sizeof p.uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    pthread_mutex_lock(&ctx_lock);
    props[device] = p;
    props_loaded[device] = 1;
    pthread_mutex_unlock(&ctx_lock);
    return CF_OK;
}

cf_status cf_device_props_get(int device, cf_device_props *out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_device_props_get: out is NULL");
    cf_status st = check_ordinal(device);
    if (st)
        return st;
    if (!props_loaded[device] && (st = load_props(device)) != CF_OK)
        return st;
    *out = props[device];
    return CF_OK;
}

cf_status cf_device_get(int *device)
{
    if (!device)
        return cf_error_set(CF_ERR_INVALID, "cf_device_get: device is NULL");
    *device = tls_device;
    /* With no device at all, say so here: the caller knows what the user called and names it
     * ("hypot: no CUDA device: ..."), where the first internal step that needs the device (the
     * default stream) would name only itself. */
    if (device_count == 0)
        return no_device();
    return CF_OK;
}

cf_status cf_device_set(int device)
{
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    tls_device = device;
    tls_switched = 0; /* a chosen context: cf_context_restore keeps it */
    return CF_OK;
}

/* Asking about another device leaves the thread's current context as it was. */
static cf_status leave(int had_switched, cf_status st)
{
    if (!had_switched)
        cf_context_restore();
    return st;
}

cf_status cf_device_synchronize(int device)
{
    int had = tls_switched;
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    return leave(had, cf_cu_check(cf_drv.cuCtxSynchronize(), "cuCtxSynchronize"));
}

cf_status cf_device_mem_info(int device, size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return cf_error_set(CF_ERR_INVALID, "cf_device_mem_info: NULL output");
    int had = tls_switched;
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    return leave(had, cf_cu_check(cf_drv.cuMemGetInfo(free_bytes, total_bytes), "cuMemGetInfo"));
}

cf_status cf_pointer_device(uint64_t ptr, int *device)
{
    if (!device)
        return cf_error_set(CF_ERR_INVALID, "cf_pointer_device: device is NULL");
    cf_status st = cf_init();
    if (st)
        return st;
    int ordinal = -1;
    unsigned int mem_type = 0;
    CUresult r = cf_drv.cuPointerGetAttribute(&mem_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              (CUdeviceptr)ptr);
    if (r != CUDA_SUCCESS || (mem_type != CU_MEMORYTYPE_DEVICE && mem_type != CU_MEMORYTYPE_UNIFIED))
        return cf_error_set(CF_ERR_INVALID,
                            "pointer 0x%llx is not device memory known to the CUDA driver",
                            (unsigned long long)ptr);
    r = cf_drv.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     (CUdeviceptr)ptr);
    if (r != CUDA_SUCCESS)
        return cf_cu_check(r, "cuPointerGetAttribute(DEVICE_ORDINAL)");
    *device = ordinal;
    return CF_OK;
}
