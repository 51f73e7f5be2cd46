/* memory.c: device memory from the stream-ordered pool, pinned host memory, and copies.
 *
 * Device memory comes from each device's default memory pool (cuMemAllocAsync / cuMemFreeAsync on
 * the caller's stream). The pool's release threshold is raised to "never release" once per device:
 * by default a pool returns its memory to the OS at every synchronisation, so the next allocation
 * pays for mapping it again; kept, a freed block is reused by the next allocation in stream order
 * with no synchronisation at all. Devices without pools use cuMemAlloc / cuMemFree.
 *
 * Every live allocation is recorded in a pointer -> size table, so cf_mem_outstanding is exact and
 * freeing a pointer we did not hand out is an error, not a corrupted pool.
 *
 * Copies check their arguments and that device pointers are device memory of the stream's device
 * (first and last byte), so a bad pointer is an error message, not an asynchronous fault that
 * would poison the context. Pinned host memory is copied by the driver directly; pageable memory
 * through the staging ring (staging.c) when large, by the driver's own path when small.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "context.h"
#include "diagnostics.h"
#include "driver.h"
#include "error.h"
#include "staging.h"

#define MAX_DEVICES 64

/* ---- small helpers ----------------------------------------------------------------------- */

/* "1.50 GiB"; exact bytes below 1 KiB. */
static const char *human_bytes(uint64_t n, char buf[32])
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%" PRIu64 " B", n);
    else
        snprintf(buf, 32, "%.2f %s", v, units[u]);
    return buf;
}

/* Check a stream argument and return its device in *device. */
static cf_status stream_arg(const cf_stream *s, const char *fn, int *device)
{
    if (!s)
        return cf_error_set(CF_ERR_INVALID, "%s: stream s is NULL", fn);
    *device = cf_stream_device(s);
    if (*device < 0)
        return cf_error_set(CF_ERR_INVALID,
                            "%s: stream s is not a live cf_stream (freed already, or not a stream)",
                            fn);
    return CF_OK;
}

/* ---- the allocation table ---------------------------------------------------------------- */

typedef struct mem_entry {
    uint64_t ptr; /* 0: empty slot */
    size_t size;
    int device;
    int pooled; /* from cuMemAllocAsync (else cuMemAlloc) */
} mem_entry;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_entry *table; /* open addressing, linear probing; NULL when empty */
static size_t table_bits, table_count;
static int64_t outstanding_bytes;

static size_t home_slot(uint64_t ptr, size_t bits)
{
    return (size_t)((ptr * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits));
}

/* The slot holding ptr, or SIZE_MAX. table_lock held. */
static size_t table_find(uint64_t ptr)
{
    if (!table)
        return SIZE_MAX;
    size_t mask = ((size_t)1 << table_bits) - 1;
    for (size_t i = home_slot(ptr, table_bits);; i = (i + 1) & mask) {
        if (table[i].ptr == ptr)
            return i;
        if (table[i].ptr == 0)
            return SIZE_MAX;
    }
}

static void table_place(mem_entry *t, size_t bits, mem_entry e)
{
    size_t mask = ((size_t)1 << bits) - 1;
    size_t i = home_slot(e.ptr, bits);
    while (t[i].ptr)
        i = (i + 1) & mask;
    t[i] = e;
}

/* Add an entry, growing the table at half full. CF_ERR_NOMEM if it cannot grow. table_lock held. */
static cf_status table_insert(mem_entry e)
{
    if (!table || (table_count + 1) * 2 > ((size_t)1 << table_bits)) {
        size_t bits = table ? table_bits + 1 : 6;
        mem_entry *t = cf_calloc((size_t)1 << bits, sizeof *t);
        if (!t)
            return cf_error_prefix("recording a device allocation");
        if (table)
            for (size_t i = 0; i < ((size_t)1 << table_bits); i++)
                if (table[i].ptr)
                    table_place(t, bits, table[i]);
        cf_free(table);
        table = t;
        table_bits = bits;
    }
    table_place(table, table_bits, e);
    table_count++;
    outstanding_bytes += (int64_t)e.size;
    return CF_OK;
}

/* Remove the entry in slot `pos` (backward-shift deletion: no tombstones). The table is freed when
 * it empties, so a program that frees everything holds no host memory for it. table_lock held. */
static void table_remove(size_t pos)
{
    size_t mask = ((size_t)1 << table_bits) - 1;
    outstanding_bytes -= (int64_t)table[pos].size;
    table_count--;
    size_t i = pos, j = pos;
    for (;;) {
        j = (j + 1) & mask;
        if (table[j].ptr == 0)
            break;
        size_t k = home_slot(table[j].ptr, table_bits);
        /* An entry whose home lies cyclically in (i, j] is still reachable: leave it. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            table[i] = table[j];
            i = j;
        }
    }
    table[i].ptr = 0;
    if (table_count == 0) {
        cf_free(table);
        table = NULL;
        table_bits = 0;
    }
}

int64_t cf_mem_outstanding(void)
{
    pthread_mutex_lock(&table_lock);
    int64_t n = outstanding_bytes;
    pthread_mutex_unlock(&table_lock);
    return n;
}

/* ---- pools ------------------------------------------------------------------------------- */

typedef struct pool_state {
    int ready;
    int pooled;
    CUmemoryPool pool;
} pool_state;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_state pools[MAX_DEVICES];

/* Find the device's default pool and set its release threshold, once. Context current. */
static cf_status device_pool(int device, pool_state *out)
{
    cf_status st = CF_OK;
    pthread_mutex_lock(&pool_lock);
    pool_state *p = &pools[device];
    if (!p->ready) {
        cf_device_props props;
        if ((st = cf_device_props_get(device, &props)) != CF_OK)
            goto out;
        if (props.memory_pools_supported) {
            CUdevice dev;
            CUresult r = cf_drv.cuDeviceGet(&dev, device);
            if (r == CUDA_SUCCESS)
                r = cf_drv.cuDeviceGetDefaultMemPool(&p->pool, dev);
            if (r != CUDA_SUCCESS) {
                st = cf_cu_check(r, "cuDeviceGetDefaultMemPool");
                goto out;
            }
            cuuint64_t threshold = UINT64_MAX;
            /* the first allocation may come inside a capture (a cold call under
             * torch.cuda.graph): a pool setting is not allowed there in the global mode */
            CUstreamCaptureMode mode = cf_capture_mode_relax();
            r = cf_drv.cuMemPoolSetAttribute(p->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
            cf_capture_mode_restore(mode);
            if (r != CUDA_SUCCESS) {
                st = cf_cu_check(r, "cuMemPoolSetAttribute(RELEASE_THRESHOLD)");
                goto out;
            }
            p->pooled = 1;
        }
        p->ready = 1;
    }
    *out = *p;
out:
    pthread_mutex_unlock(&pool_lock);
    return st;
}

cf_status cf_mem_trim(int device)
{
    cf_status st = cf_context_enter(device);
    pool_state pool = {0, 0, NULL};
    if (st == CF_OK)
        st = device_pool(device, &pool);
    if (st != CF_OK || !pool.pooled)
        return st;
    /* frees queued on streams return to the pool only when they have run */
    CF_CU_TRY(cf_drv.cuCtxSynchronize());
    CF_CU_TRY(cf_drv.cuMemPoolTrimTo(pool.pool, 0));
    return CF_OK;
}

static CUresult raw_alloc(const pool_state *p, CUstream h, size_t nbytes, CUdeviceptr *ptr)
{
    return p->pooled ? cf_drv.cuMemAllocAsync(ptr, nbytes, h) : cf_drv.cuMemAlloc(ptr, nbytes);
}

/* Whether a failed allocation means "not enough memory". Asking for more than the device has can
 * be refused as an invalid value rather than out of memory; to the user both are the same. */
static int is_nomem(CUresult r, int device, size_t nbytes)
{
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return 1;
    cf_device_props props;
    return r != CUDA_SUCCESS && cf_device_props_get(device, &props) == CF_OK &&
           nbytes > props.total_memory;
}

static cf_status nomem_error(int device, size_t nbytes)
{
    char want[32], freeb[32], totalb[32];
    cf_device_props props;
    const char *name = cf_device_props_get(device, &props) == CF_OK ? props.name : "?";
    size_t free_bytes = 0, total_bytes = 0;
    if (cf_drv.cuMemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS)
        return cf_error_set(CF_ERR_DEVICE_NOMEM,
                            "out of device memory: cannot allocate %zu bytes (%s) on device %d (%s); "
                            "%s free of %s",
                            nbytes, human_bytes(nbytes, want), device, name,
                            human_bytes(free_bytes, freeb), human_bytes(total_bytes, totalb));
    return cf_error_set(CF_ERR_DEVICE_NOMEM,
                        "out of device memory: cannot allocate %zu bytes (%s) on device %d (%s)",
                        nbytes, human_bytes(nbytes, want), device, name);
}

/* Ownership: *ptr belongs to the caller until cf_mem_free. */
cf_status cf_mem_alloc(cf_stream *s, size_t nbytes, uint64_t *ptr)
{
    int device = -1;
    if (!ptr)
        return cf_error_set(CF_ERR_INVALID, "cf_mem_alloc: ptr is NULL");
    *ptr = 0;
    cf_status st = stream_arg(s, "cf_mem_alloc", &device);
    if (st || nbytes == 0)
        return st;
    if ((st = cf_context_enter(device)) != CF_OK)
        return st;
    pool_state pool = {0, 0, NULL};
    if ((st = device_pool(device, &pool)) != CF_OK)
        return st;
    CUstream h = cf_stream_cu(s);
    CUdeviceptr p = 0;
    CUresult r = raw_alloc(&pool, h, nbytes, &p);
    if (is_nomem(r, device, nbytes)) {
        /* Memory freed on other streams returns to the pool only when those frees have run, and
         * the pool keeps what it has: wait for all work, hand unused memory back, try once more. */
        cf_drv.cuCtxSynchronize();
        if (pool.pooled)
            cf_drv.cuMemPoolTrimTo(pool.pool, 0);
        r = raw_alloc(&pool, h, nbytes, &p);
        if (is_nomem(r, device, nbytes))
            return nomem_error(device, nbytes);
    }
    if (r != CUDA_SUCCESS)
        return cf_cu_check(r, pool.pooled ? "cuMemAllocAsync" : "cuMemAlloc");
    mem_entry e = {p, nbytes, device, pool.pooled};
    pthread_mutex_lock(&table_lock);
    st = table_insert(e);
    pthread_mutex_unlock(&table_lock);
    if (st) {
        if (pool.pooled)
            cf_drv.cuMemFreeAsync(p, h);
        else
            cf_drv.cuMemFree(p);
        return st;
    }
    *ptr = p;
    return CF_OK;
}

cf_status cf_mem_free(cf_stream *s, uint64_t ptr)
{
    int device = -1;
    cf_status st = stream_arg(s, "cf_mem_free", &device);
    if (st || ptr == 0)
        return st;
    pthread_mutex_lock(&table_lock);
    size_t pos = table_find(ptr);
    if (pos == SIZE_MAX) {
        pthread_mutex_unlock(&table_lock);
        return cf_error_set(CF_ERR_INVALID,
                            "cf_mem_free: 0x%" PRIx64 " was not allocated by cf_mem_alloc, or was "
                            "freed already",
                            ptr);
    }
    mem_entry e = table[pos];
    if (e.device != device) {
        pthread_mutex_unlock(&table_lock);
        return cf_error_set(CF_ERR_INVALID,
                            "cf_mem_free: 0x%" PRIx64 " is memory of device %d, but the stream is "
                            "on device %d",
                            ptr, e.device, device);
    }
    /* Taken out before the driver call, so two threads freeing the same pointer cannot both
     * reach the driver. */
    table_remove(pos);
    pthread_mutex_unlock(&table_lock);

    CUresult r = CUDA_ERROR_UNKNOWN;
    st = cf_context_enter(device);
    if (st == CF_OK)
        r = e.pooled ? cf_drv.cuMemFreeAsync(e.ptr, cf_stream_cu(s)) : cf_drv.cuMemFree(e.ptr);
    if (r != CUDA_SUCCESS) {
        /* Still allocated as far as we know: keep it counted (best effort; the table has room for
         * it unless it was freed on emptying and cannot be allocated again). */
        pthread_mutex_lock(&table_lock);
        table_insert(e);
        pthread_mutex_unlock(&table_lock);
        if (st == CF_OK)
            st = cf_cu_check(r, e.pooled ? "cuMemFreeAsync" : "cuMemFree");
        else
            cf_error_set(st, "cf_mem_free: cannot reach device %d to free 0x%" PRIx64, device,
                         ptr);
    }
    return st;
}

/* ---- pinned host memory ------------------------------------------------------------------ */

/* Make the calling thread's current device's context current (for driver calls that need a
 * context but concern no device in particular). */
static cf_status enter_current(void)
{
    int device = 0;
    cf_device_get(&device);
    return cf_context_enter(device);
}

/* Ownership: *ptr belongs to the caller until cf_host_free_pinned. */
cf_status cf_host_alloc_pinned(size_t nbytes, void **ptr)
{
    if (!ptr)
        return cf_error_set(CF_ERR_INVALID, "cf_host_alloc_pinned: ptr is NULL");
    *ptr = NULL;
    cf_status st = enter_current();
    if (st || nbytes == 0)
        return st;
    void *p = NULL;
    CUresult r = cf_drv.cuMemHostAlloc(&p, nbytes, CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        char h[32];
        return cf_error_set(CF_ERR_NOMEM,
                            "out of page-locked host memory: cannot allocate %zu bytes (%s)", nbytes,
                            human_bytes(nbytes, h));
    }
    CF_CU_TRY(r);
    *ptr = p;
    return CF_OK;
}

void cf_host_free_pinned(void *ptr)
{
    if (!ptr || enter_current() != CF_OK)
        return;
    cf_drv.cuMemFreeHost(ptr);
}

/* Whether the byte at p is page-locked host memory. A context must be current.
 *
 * cuPointerGetAttributes, not cuPointerGetAttribute: most host arrays are ordinary pageable
 * memory the driver does not know, for which cuPointerGetAttribute fails with
 * CUDA_ERROR_INVALID_VALUE, and compute-sanitizer reports every such failure as an error of the
 * user's program. cuPointerGetAttributes succeeds on any pointer and leaves the memory type 0
 * for memory it does not know. */
int cf_mem_byte_is_pinned(const void *p)
{
    unsigned int type = 0;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data = &type;
    CUresult r = cf_drv.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)(uintptr_t)p);
    return r == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST;
}

static int byte_is_pinned(const void *p) { return cf_mem_byte_is_pinned(p); }

/* Both ends pinned: a range that starts in a pinned block and runs past it is treated as
 * pageable (the staging path copies any memory). */
static int range_is_pinned(const void *p, size_t n)
{
    return byte_is_pinned(p) && (n <= 1 || byte_is_pinned((const char *)p + n - 1));
}

int cf_host_is_pinned(const void *ptr)
{
    if (!ptr || cf_driver_load() != CF_OK)
        return 0;
    CUcontext cur = NULL;
    if (cf_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || (!cur && enter_current() != CF_OK))
        return 0;
    return byte_is_pinned(ptr);
}

/* ---- copies ------------------------------------------------------------------------------ */

/* Check that [ptr, ptr + n) is device memory usable on `device`: known to the driver at both ends,
 * and, unless managed or host memory mapped into the device, on that device. n > 0. The device's
 * context is current. */
static cf_status check_device_range(int device, uint64_t ptr, size_t n, const char *fn,
                                    const char *arg)
{
    if (ptr == 0)
        return cf_error_set(CF_ERR_INVALID, "%s: %s is a null device pointer", fn, arg);
    if (n - 1 > UINT64_MAX - ptr)
        return cf_error_set(CF_ERR_INVALID,
                            "%s: %s 0x%" PRIx64 " plus %zu bytes overflows the address space", fn,
                            arg, ptr, n);
    unsigned int type = 0;
    if (cf_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)ptr) !=
        CUDA_SUCCESS)
        return cf_error_set(CF_ERR_INVALID,
                            "%s: %s 0x%" PRIx64 " is not memory known to the CUDA driver", fn, arg,
                            ptr);
    unsigned int last_type = 0;
    if (n > 1 && cf_drv.cuPointerGetAttribute(&last_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                              (CUdeviceptr)(ptr + n - 1)) != CUDA_SUCCESS)
        return cf_error_set(CF_ERR_INVALID,
                            "%s: %s 0x%" PRIx64 " + %zu bytes runs past the end of its allocation",
                            fn, arg, ptr, n);
    if (type != CU_MEMORYTYPE_DEVICE)
        return CF_OK;
    int managed = 0, ordinal = -1;
    if (cf_drv.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)ptr) ==
            CUDA_SUCCESS &&
        managed)
        return CF_OK;
    if (cf_drv.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     (CUdeviceptr)ptr) == CUDA_SUCCESS &&
        ordinal != device)
        return cf_error_set(CF_ERR_INVALID,
                            "%s: %s 0x%" PRIx64 " is memory of device %d, but the stream is on "
                            "device %d",
                            fn, arg, ptr, ordinal, device);
    return CF_OK;
}

static cf_status check_host_range(const void *p, size_t n, const char *fn, const char *arg)
{
    if (!p)
        return cf_error_set(CF_ERR_INVALID, "%s: %s is NULL (with %zu bytes to copy)", fn, arg, n);
    if (n - 1 > UINTPTR_MAX - (uintptr_t)p)
        return cf_error_set(CF_ERR_INVALID, "%s: %s %p plus %zu bytes overflows the address space",
                            fn, arg, p, n);
    return CF_OK;
}

cf_status cf_memcpy_htod(cf_stream *s, uint64_t dst, const void *src, size_t nbytes, int sync)
{
    static const char fn[] = "cf_memcpy_htod";
    int device = -1;
    cf_status st = stream_arg(s, fn, &device);
    if (st || nbytes == 0)
        return st;
    if ((st = check_host_range(src, nbytes, fn, "src")) != CF_OK)
        return st;
    if ((st = cf_context_enter(device)) != CF_OK ||
        (st = check_device_range(device, dst, nbytes, fn, "dst")) != CF_OK)
        return st;
    CUstream h = cf_stream_cu(s);
    if (!range_is_pinned(src, nbytes) && cf_staging_wanted(nbytes)) {
        int staged = 0;
        st = cf_staging_htod(device, h, (CUdeviceptr)dst, src, nbytes, sync, &staged);
        if (st || staged)
            return st;
    }
    /* Pinned memory: a true asynchronous DMA. Small pageable copies: the driver's own staging,
     * which returns once src may be reused. */
    CF_CU_TRY(cf_drv.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, nbytes, h));
    if (sync)
        CF_CU_TRY(cf_drv.cuStreamSynchronize(h));
    return CF_OK;
}

cf_status cf_memcpy_dtoh(cf_stream *s, void *dst, uint64_t src, size_t nbytes, int sync)
{
    static const char fn[] = "cf_memcpy_dtoh";
    int device = -1;
    cf_status st = stream_arg(s, fn, &device);
    if (st || nbytes == 0)
        return st;
    if ((st = check_host_range(dst, nbytes, fn, "dst")) != CF_OK)
        return st;
    if ((st = cf_context_enter(device)) != CF_OK ||
        (st = check_device_range(device, src, nbytes, fn, "src")) != CF_OK)
        return st;
    CUstream h = cf_stream_cu(s);
    int pinned = range_is_pinned(dst, nbytes);
    if (!pinned && cf_staging_wanted(nbytes)) {
        int staged = 0;
        st = cf_staging_dtoh(device, h, dst, (CUdeviceptr)src, nbytes, &staged);
        if (st || staged)
            return st;
    }
    /* Into pageable memory the driver returns only once the data has arrived. */
    CF_CU_TRY(cf_drv.cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, nbytes, h));
    if (sync && pinned)
        CF_CU_TRY(cf_drv.cuStreamSynchronize(h));
    return CF_OK;
}

cf_status cf_memcpy_dtod(cf_stream *s, uint64_t dst, uint64_t src, size_t nbytes)
{
    static const char fn[] = "cf_memcpy_dtod";
    int device = -1;
    cf_status st = stream_arg(s, fn, &device);
    if (st || nbytes == 0)
        return st;
    if ((st = cf_context_enter(device)) != CF_OK ||
        (st = check_device_range(device, dst, nbytes, fn, "dst")) != CF_OK ||
        (st = check_device_range(device, src, nbytes, fn, "src")) != CF_OK)
        return st;
    if (dst == src)
        return CF_OK;
    if (dst < src + nbytes && src < dst + nbytes)
        return cf_error_set(CF_ERR_INVALID,
                            "%s: the ranges overlap (dst 0x%" PRIx64 ", src 0x%" PRIx64
                            ", %zu bytes); copy through a temporary",
                            fn, dst, src, nbytes);
    CF_CU_TRY(cf_drv.cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, nbytes,
                                       cf_stream_cu(s)));
    return CF_OK;
}

cf_status cf_memset8(cf_stream *s, uint64_t dst, unsigned char value, size_t nbytes)
{
    static const char fn[] = "cf_memset8";
    int device = -1;
    cf_status st = stream_arg(s, fn, &device);
    if (st || nbytes == 0)
        return st;
    if ((st = cf_context_enter(device)) != CF_OK ||
        (st = check_device_range(device, dst, nbytes, fn, "dst")) != CF_OK)
        return st;
    CF_CU_TRY(cf_drv.cuMemsetD8Async((CUdeviceptr)dst, value, nbytes, cf_stream_cu(s)));
    return CF_OK;
}

/* ---- registered, mapped and managed host memory; IPC -------------------------------------- */

/* Whether every page of [p, p + n) is page-locked: the first and last byte and one byte per page
 * between (a range may span two registrations, or a registered and an unregistered part). */
static int range_fully_pinned(const void *p, size_t n)
{
    const size_t page = 4096;
    for (size_t off = 0; off < n; off += page)
        if (!byte_is_pinned((const char *)p + off))
            return 0;
    return byte_is_pinned((const char *)p + n - 1);
}

cf_status cf_host_register(void *ptr, size_t nbytes, int mapped, int *registered)
{
    if (!ptr || !registered)
        return cf_error_set(CF_ERR_INVALID, "cf_host_register: ptr or registered is NULL");
    *registered = 0;
    cf_status st = enter_current();
    if (st || nbytes == 0)
        return st;
    if (range_fully_pinned(ptr, nbytes))
        return CF_OK;
    unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | (mapped ? CU_MEMHOSTREGISTER_DEVICEMAP : 0);
    CUresult r = cf_drv.cuMemHostRegister(ptr, nbytes, flags);
    if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        return cf_error_set(CF_ERR_INVALID,
                            "cannot page-lock %zu bytes at %p: part of the range is page-locked "
                            "already (an overlapping array registered by another pinned() or "
                            "library); pin the larger array",
                            nbytes, ptr);
    CF_CU_TRY(r);
    *registered = 1;
    return CF_OK;
}

cf_status cf_host_unregister(void *ptr)
{
    if (!ptr)
        return cf_error_set(CF_ERR_INVALID, "cf_host_unregister: ptr is NULL");
    cf_status st = enter_current();
    if (st)
        return st;
    CF_CU_TRY(cf_drv.cuMemHostUnregister(ptr));
    return CF_OK;
}

cf_status cf_host_device_pointer(void *ptr, uint64_t *dptr)
{
    if (!ptr || !dptr)
        return cf_error_set(CF_ERR_INVALID, "cf_host_device_pointer: ptr or dptr is NULL");
    cf_status st = enter_current();
    if (st)
        return st;
    CUdeviceptr d = 0;
    CUresult r = cf_drv.cuMemHostGetDevicePointer(&d, ptr, 0);
    if (r == CUDA_ERROR_INVALID_VALUE)
        return cf_error_set(CF_ERR_INVALID,
                            "host memory at %p is not mapped into the device (page-lock it with "
                            "cuda.mapped() or allocate it with cuda.mapped_array())",
                            ptr);
    CF_CU_TRY(r);
    *dptr = (uint64_t)d;
    return CF_OK;
}

/* Ownership: *ptr belongs to the caller until cf_host_free_pinned. */
cf_status cf_host_alloc_mapped(size_t nbytes, void **ptr, uint64_t *dptr)
{
    if (!ptr || !dptr)
        return cf_error_set(CF_ERR_INVALID, "cf_host_alloc_mapped: ptr or dptr is NULL");
    *ptr = NULL;
    *dptr = 0;
    cf_status st = enter_current();
    if (st)
        return st;
    void *p = NULL;
    CUresult r = cf_drv.cuMemHostAlloc(&p, nbytes ? nbytes : 1,
                                       CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        char h[32];
        return cf_error_set(CF_ERR_NOMEM,
                            "out of page-locked host memory: cannot allocate %zu bytes (%s) of "
                            "mapped memory",
                            nbytes, human_bytes(nbytes, h));
    }
    CF_CU_TRY(r);
    CUdeviceptr d = 0;
    r = cf_drv.cuMemHostGetDevicePointer(&d, p, 0);
    if (r != CUDA_SUCCESS) {
        cf_drv.cuMemFreeHost(p);
        return cf_cu_check(r, "cuMemHostGetDevicePointer");
    }
    *ptr = p;
    *dptr = (uint64_t)d;
    return CF_OK;
}

/* Record a block from cuMemAlloc / cuMemAllocManaged (freed by cf_mem_free with cuMemFree). */
static cf_status record_unpooled(int device, CUdeviceptr p, size_t nbytes, uint64_t *ptr)
{
    mem_entry e = {p, nbytes, device, 0};
    pthread_mutex_lock(&table_lock);
    cf_status st = table_insert(e);
    pthread_mutex_unlock(&table_lock);
    if (st) {
        cf_drv.cuMemFree(p);
        return st;
    }
    *ptr = p;
    return CF_OK;
}

/* Ownership: *ptr belongs to the caller until cf_mem_free. */
cf_status cf_mem_alloc_managed(int device, size_t nbytes, int attach_global, uint64_t *ptr)
{
    if (!ptr)
        return cf_error_set(CF_ERR_INVALID, "cf_mem_alloc_managed: ptr is NULL");
    *ptr = 0;
    cf_status st = cf_context_enter(device);
    if (st || nbytes == 0)
        return st;
    /* Checked before asking: the driver may accept an oversubscribed managed allocation and
     * then thrash or hang the GPU when kernels touch it. */
    size_t free_bytes = 0, total_bytes = 0;
    CF_CU_TRY(cf_drv.cuMemGetInfo(&free_bytes, &total_bytes));
    if (nbytes > free_bytes)
        return nomem_error(device, nbytes);
    CUdeviceptr p = 0;
    CUresult r = cf_drv.cuMemAllocManaged(&p, nbytes,
                                          attach_global ? CU_MEM_ATTACH_GLOBAL : CU_MEM_ATTACH_HOST);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return nomem_error(device, nbytes);
    CF_CU_TRY(r);
    return record_unpooled(device, p, nbytes, ptr);
}

/* Ownership: *ptr belongs to the caller until cf_mem_free. */
cf_status cf_mem_alloc_ipc(cf_stream *s, size_t nbytes, uint64_t *ptr)
{
    int device = -1;
    if (!ptr)
        return cf_error_set(CF_ERR_INVALID, "cf_mem_alloc_ipc: ptr is NULL");
    *ptr = 0;
    cf_status st = stream_arg(s, "cf_mem_alloc_ipc", &device);
    if (st || nbytes == 0)
        return st;
    if ((st = cf_context_enter(device)) != CF_OK)
        return st;
    CUdeviceptr p = 0;
    CUresult r = cf_drv.cuMemAlloc(&p, nbytes);
    if (is_nomem(r, device, nbytes)) {
        cf_drv.cuCtxSynchronize();
        pool_state pool = {0, 0, NULL};
        if (device_pool(device, &pool) == CF_OK && pool.pooled)
            cf_drv.cuMemPoolTrimTo(pool.pool, 0);
        r = cf_drv.cuMemAlloc(&p, nbytes);
        if (is_nomem(r, device, nbytes))
            return nomem_error(device, nbytes);
    }
    CF_CU_TRY(r);
    return record_unpooled(device, p, nbytes, ptr);
}

int cf_mem_lookup(uint64_t ptr, int *pooled, size_t *nbytes)
{
    pthread_mutex_lock(&table_lock);
    size_t pos = ptr ? table_find(ptr) : SIZE_MAX;
    int found = pos != SIZE_MAX;
    if (found) {
        if (pooled)
            *pooled = table[pos].pooled;
        if (nbytes)
            *nbytes = table[pos].size;
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

cf_status cf_ipc_get_handle(uint64_t ptr, unsigned char handle[CF_IPC_HANDLE_BYTES])
{
    int pooled = 0;
    if (!handle)
        return cf_error_set(CF_ERR_INVALID, "cf_ipc_get_handle: handle is NULL");
    if (cf_mem_lookup(ptr, &pooled, NULL) && pooled)
        return cf_error_set(CF_ERR_INVALID,
                            "cf_ipc_get_handle: 0x%" PRIx64 " is stream-ordered pool memory, which "
                            "cuIpcGetMemHandle cannot export; allocate it with cf_mem_alloc_ipc",
                            ptr);
    cf_status st = enter_current();
    if (st)
        return st;
    CUipcMemHandle h;
    CF_CU_TRY(cf_drv.cuIpcGetMemHandle(&h, (CUdeviceptr)ptr));
    memcpy(handle, h.reserved, CF_IPC_HANDLE_BYTES);
    return CF_OK;
}

/* Ownership: *ptr stays mapped until cf_ipc_close. */
cf_status cf_ipc_open(int device, const unsigned char handle[CF_IPC_HANDLE_BYTES], uint64_t *ptr)
{
    if (!handle || !ptr)
        return cf_error_set(CF_ERR_INVALID, "cf_ipc_open: handle or ptr is NULL");
    *ptr = 0;
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    CUipcMemHandle h;
    memcpy(h.reserved, handle, CF_IPC_HANDLE_BYTES);
    CUdeviceptr p = 0;
    CUresult r = cf_drv.cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    if (r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_INVALID_VALUE)
        return cf_error_set(CF_ERR_INVALID,
                            "cannot open the IPC handle (%s): a handle opens in another process "
                            "than the one that exported it, while the exporter keeps the memory",
                            r == CUDA_ERROR_INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT"
                                                            : "CUDA_ERROR_INVALID_VALUE");
    CF_CU_TRY(r);
    *ptr = (uint64_t)p;
    return CF_OK;
}

cf_status cf_ipc_close(int device, uint64_t ptr)
{
    cf_status st = cf_context_enter(device);
    if (st)
        return st;
    CF_CU_TRY(cf_drv.cuIpcCloseMemHandle((CUdeviceptr)ptr));
    return CF_OK;
}
