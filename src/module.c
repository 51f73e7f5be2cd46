/* module.c: loaded modules, their kernels, and launches.
 *
 * A module is loaded once per (device, cache key) and kept until the process exits: handles given
 * out (cf_module, cf_function) then never dangle, and the number of distinct kernels a program uses
 * is small. Unloading at exit is left to the driver's teardown, which also avoids calling into a
 * driver that may already be shutting down from an atexit handler.
 *
 * PTX images (for a GPU newer than NVRTC) are JIT-compiled by the driver here; a JIT failure is a
 * compile error like NVRTC's, with the driver's log.
 *
 * Module globals (cf_module_load_globals) are written once, right after the image is loaded and
 * before the module enters the map, so no kernel of a module ever runs with them unset and no
 * module's values ever change. Their values are part of the map's key (not of the image cache's
 * key): sources that differ only in their globals share one compiled image but get a module each.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cache.h"
#include "context.h"
#include "cufunc/compile.h"
#include "driver.h"
#include "error.h"
#include "hash.h"
#include "htab.h"

#define MODULE_MAGIC 0x6d6f64756c65cf01ull
#define FUNCTION_MAGIC 0x66756e6374cf0002ull

struct cf_function {
    uint64_t magic;
    cf_function *next;
    cf_module *module;
    CUfunction fn;
    int max_threads; /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: registers can make it < the device's */
    char name[];
};

struct cf_module {
    uint64_t magic;
    int device;
    unsigned char key[32];
    CUmodule mod;
    int is_ptx;
    int max_block[3], max_grid[3]; /* the device's limits, read once at load */
    int cc_major;                  /* the device's compute capability (major), read at load */
    pthread_mutex_t fn_lock;       /* guards `functions` */
    cf_function *functions;
};

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static cf_htab modules; /* the module map: cf_module items by (device, key) */

static uint64_t map_hash(int device, const unsigned char key[32])
{
    uint64_t v;
    memcpy(&v, key, sizeof v); /* the key is a SHA-256 digest */
    return v ^ (uint64_t)(unsigned)device * 0x9e3779b97f4a7c15ull;
}

typedef struct map_key_ref {
    int device;
    const unsigned char *key;
} map_key_ref;

static int same_module(const void *item, const void *key)
{
    const cf_module *m = item;
    const map_key_ref *k = key;
    return m->device == k->device && memcmp(m->key, k->key, 32) == 0;
}

/* map_lock held. */
static cf_module *map_find(int device, const unsigned char key[32])
{
    map_key_ref k = {device, key};
    return cf_htab_find(&modules, map_hash(device, key), same_module, &k);
}

/* map_lock held. A failure (CF_ERR_NOMEM) leaves the map as it was. */
static cf_status map_insert(cf_module *m)
{
    return cf_htab_insert(&modules, map_hash(m->device, m->key), m);
}

static int is_jit_failure(CUresult r)
{
    return r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
           r == CUDA_ERROR_JIT_COMPILER_NOT_FOUND || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
           r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
}

/* Module loading is one of the calls CUDA calls "potentially unsafe" during a stream capture: in
 * the global and thread-local modes it would invalidate a capture under way (PyTorch captures in
 * the global mode). A kernel compiled or fetched during a capture is loaded with this thread's
 * mode relaxed for the call (cf_capture_mode_relax, driver.h); the load queues nothing. */
#define capture_mode_relax cf_capture_mode_relax
#define capture_mode_restore cf_capture_mode_restore

/* Load an image into the current context (the device's primary one). */
static cf_status load_image(const void *image, int is_ptx, int cc_major, int cc_minor,
                            CUmodule *out)
{
    char log[8192];
    log[0] = '\0';
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CUstreamCaptureMode mode = capture_mode_relax();
    CUresult r = cf_drv.cuModuleLoadDataEx(out, image, 2, opts, vals);
    capture_mode_restore(mode);
    if (r == CUDA_SUCCESS)
        return CF_OK;
    log[sizeof log - 1] = '\0';
    if (is_ptx && is_jit_failure(r)) {
        const char *name = NULL;
        if (cf_drv.cuGetErrorName)
            cf_drv.cuGetErrorName(r, &name);
        return cf_error_set(CF_ERR_COMPILE,
                            "the CUDA driver could not JIT-compile the PTX for compute capability "
                            "%d.%d (%s); a driver older than the NVRTC that made the PTX cannot "
                            "read it: update the driver, or use an NVRTC no newer than the driver"
                            "\n--- JIT log ---\n%s",
                            cc_major, cc_minor, name ? name : "?", log[0] ? log : "(empty)");
    }
    cf_status st = cf_cu_check(r, "cuModuleLoadDataEx");
    if (log[0])
        cf_error_prefix("loading a kernel image (driver log: %.400s)", log);
    return st;
}

static cf_status device_limits(cf_module *m)
{
    CUdevice dev;
    CF_CU_TRY(cf_drv.cuDeviceGet(&dev, m->device));
    static const CUdevice_attribute block_attr[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                                     CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                                     CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
    static const CUdevice_attribute grid_attr[3] = {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                                                    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                                    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z};
    for (int i = 0; i < 3; i++) {
        CF_CU_TRY(cf_drv.cuDeviceGetAttribute(&m->max_block[i], block_attr[i], dev));
        CF_CU_TRY(cf_drv.cuDeviceGetAttribute(&m->max_grid[i], grid_attr[i], dev));
    }
    CF_CU_TRY(cf_drv.cuDeviceGetAttribute(&m->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                          dev));
    return CF_OK;
}

static const char *global_label(const cf_module_global *g)
{
    return g->label ? g->label : g->name;
}

/* Checks that need no GPU, so that they come first (and are testable without one). */
static cf_status check_globals(int device, const cf_module_global *globals, int nglobals)
{
    if (nglobals < 0 || (nglobals > 0 && !globals))
        return cf_error_set(CF_ERR_INVALID, "cf_module_load_globals: %d globals at %p",
                            nglobals, (const void *)globals);
    for (int i = 0; i < nglobals; i++) {
        const cf_module_global *g = &globals[i];
        if (!g->name || !*g->name)
            return cf_error_set(CF_ERR_INVALID, "cf_module_load_globals: global %d has no name",
                                i);
        if (!g->bytes || g->size == 0)
            return cf_error_set(CF_ERR_INVALID, "cf_module_load_globals: %s has no value",
                                global_label(g));
        if (g->device < -1)
            return cf_error_set(CF_ERR_INVALID, "cf_module_load_globals: %s has device %d",
                                global_label(g), g->device);
        if (g->device >= 0 && g->device != device)
            return cf_error_set(CF_ERR_INVALID,
                                "%s is on device %d, but the kernel runs on device %d (a kernel "
                                "reads its captured arrays on its own device: copy the array "
                                "there, or run the call on device %d)",
                                global_label(g), g->device, device, g->device);
    }
    return CF_OK;
}

/* The module map's key: the image's cache key, then each global's name and value. */
static void map_key(const unsigned char image_key[32], const cf_module_global *globals,
                    int nglobals, unsigned char key[32])
{
    if (nglobals == 0) {
        memcpy(key, image_key, 32);
        return;
    }
    cf_sha256 h;
    cf_sha256_init(&h);
    cf_sha256_field(&h, "cufunc module globals 1", 23);
    cf_sha256_field(&h, image_key, 32);
    for (int i = 0; i < nglobals; i++) {
        cf_sha256_field(&h, globals[i].name, strlen(globals[i].name));
        cf_sha256_field(&h, globals[i].bytes, globals[i].size);
    }
    cf_sha256_final(&h, key);
}

/* Write the globals into a freshly loaded module (its device's context current). The copies are
 * complete when this returns: the module's kernels may run on any stream, non-blocking ones
 * included, so ordering on the default stream alone would not do. */
static cf_status write_globals(CUmodule mod, const cf_module_global *globals, int nglobals)
{
    for (int i = 0; i < nglobals; i++) {
        const cf_module_global *g = &globals[i];
        CUdeviceptr ptr = 0;
        size_t size = 0;
        CUresult r = cf_drv.cuModuleGetGlobal(&ptr, &size, mod, g->name);
        if (r == CUDA_ERROR_NOT_FOUND)
            return cf_error_set(CF_ERR_INVALID,
                                "the kernel module has no variable named '%s' for %s (declare it "
                                "__device__ or __constant__ inside extern \"C\" { })",
                                g->name, global_label(g));
        CF_CU_TRY(r);
        if (size != g->size)
            return cf_error_set(CF_ERR_INVALID,
                                "the kernel module's variable '%s' has %zu bytes, but %s has %zu",
                                g->name, size, global_label(g), g->size);
        CF_CU_TRY(cf_drv.cuMemcpyHtoDAsync(ptr, g->bytes, g->size, NULL));
    }
    if (nglobals > 0)
        CF_CU_TRY(cf_drv.cuStreamSynchronize(NULL));
    return CF_OK;
}

cf_status cf_module_load(int device, const char *source, const char *const *options,
                         int noptions, cf_module **out)
{
    return cf_module_load_globals(device, source, options, noptions, NULL, 0, out);
}

cf_status cf_module_load_globals(int device, const char *source, const char *const *options,
                                 int noptions, const cf_module_global *globals, int nglobals,
                                 cf_module **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_module_load: out is NULL");
    *out = NULL;
    if (!source)
        return cf_error_set(CF_ERR_INVALID, "cf_module_load: source is NULL");
    cf_status st = check_globals(device, globals, nglobals);
    if (st)
        return st;
    st = cf_context_enter(device);
    if (st)
        return st;
    cf_device_props props;
    st = cf_device_props_get(device, &props);
    if (st)
        return st;
    unsigned char image_key[32], key[32];
    st = cf_cache_key_digest(source, options, noptions, props.cc_major, props.cc_minor,
                             image_key);
    if (st)
        return st;
    map_key(image_key, globals, nglobals, key);

    pthread_mutex_lock(&map_lock);
    cf_module *found = map_find(device, key);
    pthread_mutex_unlock(&map_lock);
    if (found) {
        *out = found;
        return CF_OK;
    }

    /* Compiled and loaded outside the lock: compilation takes tens of milliseconds, and other
     * threads' lookups of loaded modules must not wait for it. Two threads racing on the same
     * source both load; the loser unloads its copy below. */
    void *image = NULL;
    size_t size = 0;
    int is_ptx = 0;
    cf_module *m = NULL;
    CUmodule mod = NULL;
    st = cf_cache_lookup(image_key, source, options, noptions, props.cc_major, props.cc_minor,
                         &image, &size, &is_ptx, NULL);
    if (st)
        goto fail;
    st = load_image(image, is_ptx, props.cc_major, props.cc_minor, &mod);
    if (st)
        goto fail;
    st = write_globals(mod, globals, nglobals);
    if (st)
        goto fail;
    m = cf_calloc(1, sizeof *m);
    if (!m) {
        st = CF_ERR_NOMEM;
        goto fail;
    }
    m->magic = MODULE_MAGIC;
    m->device = device;
    memcpy(m->key, key, 32);
    m->mod = mod;
    m->is_ptx = is_ptx;
    st = device_limits(m);
    if (st)
        goto fail;
    if (pthread_mutex_init(&m->fn_lock, NULL) != 0) {
        st = cf_error_set(CF_ERR_NOMEM, "cf_module_load: cannot create a mutex");
        goto fail;
    }

    pthread_mutex_lock(&map_lock);
    found = map_find(device, key);
    if (!found)
        st = map_insert(m);
    pthread_mutex_unlock(&map_lock);
    if (found || st) {
        pthread_mutex_destroy(&m->fn_lock);
        goto fail; /* st is CF_OK when another thread won the race */
    }
    cf_free(image);
    *out = m;
    return CF_OK;

fail:
    if (mod)
        cf_drv.cuModuleUnload(mod);
    cf_free(m);
    cf_free(image);
    if (st == CF_OK && found) {
        *out = found;
        return CF_OK;
    }
    return st;
}

static cf_status check_module(const cf_module *m, const char *fn)
{
    if (!m || m->magic != MODULE_MAGIC)
        return cf_error_set(CF_ERR_INVALID, "%s: not a module from cf_module_load", fn);
    return CF_OK;
}

static cf_status check_function(const cf_function *f, const char *fn)
{
    if (!f || f->magic != FUNCTION_MAGIC)
        return cf_error_set(CF_ERR_INVALID, "%s: not a function from cf_module_function", fn);
    return CF_OK;
}

cf_status cf_module_function(cf_module *m, const char *name, cf_function **out)
{
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_module_function: out is NULL");
    *out = NULL;
    cf_status st = check_module(m, "cf_module_function");
    if (st)
        return st;
    if (!name || !*name)
        return cf_error_set(CF_ERR_INVALID, "cf_module_function: name is NULL or empty");

    pthread_mutex_lock(&m->fn_lock);
    cf_function *f;
    for (f = m->functions; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            break;
    if (f) {
        pthread_mutex_unlock(&m->fn_lock);
        *out = f;
        return CF_OK;
    }
    st = cf_context_enter(m->device);
    if (st)
        goto done;
    CUfunction fn = NULL;
    CUstreamCaptureMode mode = capture_mode_relax(); /* lazy loading loads it here */
    CUresult r = cf_drv.cuModuleGetFunction(&fn, m->mod, name);
    capture_mode_restore(mode);
    if (r == CUDA_ERROR_NOT_FOUND) {
        st = cf_error_set(CF_ERR_INVALID,
                          "cf_module_function: the module has no kernel named '%s' (a kernel must "
                          "be declared extern \"C\" __global__ to be found by its name)",
                          name);
        goto done;
    }
    if ((st = cf_cu_check(r, "cuModuleGetFunction")) != CF_OK)
        goto done;
    int max_threads = 0;
    r = cf_drv.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
    if ((st = cf_cu_check(r, "cuFuncGetAttribute")) != CF_OK)
        goto done;
    size_t len = strlen(name);
    f = cf_malloc(sizeof *f + len + 1);
    if (!f) {
        st = CF_ERR_NOMEM;
        goto done;
    }
    f->magic = FUNCTION_MAGIC;
    f->module = m;
    f->fn = fn;
    f->max_threads = max_threads;
    memcpy(f->name, name, len + 1);
    f->next = m->functions;
    m->functions = f;
    *out = f;
done:
    pthread_mutex_unlock(&m->fn_lock);
    return st;
}

cf_status cf_function_attrs_get(cf_function *f, cf_function_attrs *out)
{
    cf_status st = check_function(f, "cf_function_attrs_get");
    if (st)
        return st;
    if (!out)
        return cf_error_set(CF_ERR_INVALID, "cf_function_attrs_get: out is NULL");
    if ((st = cf_context_enter(f->module->device)) != CF_OK)
        return st;
    cf_function_attrs a;
    CF_CU_TRY(cf_drv.cuFuncGetAttribute(&a.max_threads_per_block,
                                        CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f->fn));
    CF_CU_TRY(cf_drv.cuFuncGetAttribute(&a.num_regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f->fn));
    CF_CU_TRY(cf_drv.cuFuncGetAttribute(&a.shared_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                        f->fn));
    CF_CU_TRY(cf_drv.cuFuncGetAttribute(&a.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f->fn));
    *out = a;
    return CF_OK;
}

cf_status cf_function_max_active_blocks(cf_function *f, int block_threads, size_t dynamic_shared,
                                        int *blocks)
{
    cf_status st = check_function(f, "cf_function_max_active_blocks");
    if (st)
        return st;
    if (!blocks)
        return cf_error_set(CF_ERR_INVALID, "cf_function_max_active_blocks: blocks is NULL");
    if (block_threads <= 0 || block_threads > f->max_threads)
        return cf_error_set(CF_ERR_INVALID,
                            "cf_function_max_active_blocks: block_threads %d is not in 1..%d (the "
                            "limit of kernel '%s')",
                            block_threads, f->max_threads, f->name);
    if ((st = cf_context_enter(f->module->device)) != CF_OK)
        return st;
    int n = 0;
    CF_CU_TRY(cf_drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f->fn, block_threads,
                                                                  dynamic_shared));
    *blocks = n;
    return CF_OK;
}

CUfunction cf_function_cu(const cf_function *f)
{
    return check_function(f, "cf_function_cu") == CF_OK ? f->fn : NULL;
}

cf_status cf_launch(cf_function *f, const unsigned grid[3], const unsigned block[3],
                    unsigned shared_bytes, cf_stream *s, void **args)
{
    return cf_launch_ex(f, grid, block, shared_bytes, s, args, 0);
}

cf_status cf_launch_ex(cf_function *f, const unsigned grid[3], const unsigned block[3],
                       unsigned shared_bytes, cf_stream *s, void **args, int overlap_previous)
{
    cf_status st = check_function(f, "cf_launch");
    if (st)
        return st;
    if (!grid || !block)
        return cf_error_set(CF_ERR_INVALID, "cf_launch: grid and block must not be NULL");
    const cf_module *m = f->module;
    static const char axis[3] = {'x', 'y', 'z'};
    uint64_t threads = 1;
    for (int i = 0; i < 3; i++) {
        if (grid[i] == 0 || block[i] == 0)
            return cf_error_set(CF_ERR_INVALID,
                                "cf_launch of '%s': grid (%u, %u, %u) and block (%u, %u, %u) "
                                "must be at least 1 on every axis",
                                f->name, grid[0], grid[1], grid[2], block[0], block[1], block[2]);
        if (grid[i] > (unsigned)m->max_grid[i])
            return cf_error_set(CF_ERR_INVALID,
                                "cf_launch of '%s': grid.%c = %u is over the device's limit %d",
                                f->name, axis[i], grid[i], m->max_grid[i]);
        if (block[i] > (unsigned)m->max_block[i])
            return cf_error_set(CF_ERR_INVALID,
                                "cf_launch of '%s': block.%c = %u is over the device's limit %d",
                                f->name, axis[i], block[i], m->max_block[i]);
        threads *= block[i];
    }
    if (threads > (uint64_t)f->max_threads)
        return cf_error_set(CF_ERR_INVALID,
                            "cf_launch of '%s': %llu threads per block is over the kernel's "
                            "limit %d",
                            f->name, (unsigned long long)threads, f->max_threads);
    CUstream h = NULL; /* NULL s: the legacy default stream of the function's device */
    if (s) {
        int sd = cf_stream_device(s);
        if (sd < 0)
            return cf_error_set(CF_ERR_INVALID, "cf_launch of '%s': s is not a live stream",
                                f->name);
        if (sd != m->device)
            return cf_error_set(CF_ERR_INVALID,
                                "cf_launch of '%s': the stream is on device %d, the kernel is "
                                "loaded on device %d",
                                f->name, sd, m->device);
        h = cf_stream_cu(s);
    }
    if ((st = cf_context_enter(m->device)) != CF_OK)
        return st;
    CUresult r;
    if (overlap_previous && m->cc_major >= 9) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = grid[0];
        cfg.gridDimY = grid[1];
        cfg.gridDimZ = grid[2];
        cfg.blockDimX = block[0];
        cfg.blockDimY = block[1];
        cfg.blockDimZ = block[2];
        cfg.sharedMemBytes = shared_bytes;
        cfg.hStream = h;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        r = cf_drv.cuLaunchKernelEx(&cfg, f->fn, args, NULL);
    } else {
        r = cf_drv.cuLaunchKernel(f->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                  shared_bytes, h, args, NULL);
    }
    if (r != CUDA_SUCCESS) {
        cf_cu_check(r, "cuLaunchKernel");
        return cf_error_prefix("cf_launch of '%s' (grid %u,%u,%u block %u,%u,%u, %u shared bytes)",
                               f->name, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                               shared_bytes);
    }
    return CF_OK;
}

cf_status cf_array_ref_pack(const cf_array *a, void *bytes, size_t cap, size_t *size)
{
    if (!a || !bytes || !size)
        return cf_error_set(CF_ERR_INVALID, "cf_array_ref_pack: NULL argument");
    *size = 0;
    if (a->ndim < 0 || a->ndim > CF_MAX_DIMS)
        return cf_error_set(CF_ERR_INVALID, "cf_array_ref_pack: ndim %d is not in 0..%d",
                            a->ndim, CF_MAX_DIMS);
    size_t need = 8 + 16 * (size_t)a->ndim;
    if (cap < need)
        return cf_error_set(CF_ERR_INVALID, "cf_array_ref_pack: a %d-d view needs %zu bytes, the "
                            "buffer has %zu", a->ndim, need, cap);
    /* the struct's fields are 64-bit values in a row (char *, long long[ND], long long[ND]) */
    unsigned char *p = bytes;
    memcpy(p, &a->data, 8);
    memcpy(p + 8, a->shape, 8 * (size_t)a->ndim);
    memcpy(p + 8 + 8 * (size_t)a->ndim, a->strides, 8 * (size_t)a->ndim);
    *size = need;
    return CF_OK;
}
