/* driver.c: libcuda loaded with dlopen, its entry points filled from the X-macro list in driver.h.
 *
 * Why dlopen: `import cufunc` must work on machines with no driver, and the same binary must run
 * against whichever driver the machine has. Why cuGetProcAddress: it returns the entry point with
 * the ABI version we ask for (per entry point, in driver.h), which is what the __typeof__-typed
 * fields of the table expect; plain dlsym of a base name can return an older ABI.
 *
 * Fork: CUDA cannot be used in the child of a process that had initialised it (the driver's state
 * does not survive fork). A pthread_atfork child handler marks the child, and every later call
 * returns CF_ERR_FORK with an explanation instead of crashing or hanging inside the driver.
 */
#define _GNU_SOURCE 1 /* dladdr */
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"

cf_driver_table cf_drv;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cf_status load_status = CF_OK;
static char load_message[2048];
static char loaded_path[1024];
static pid_t loaded_pid;
static volatile int forked_child;

static void on_fork_child(void) { forked_child = 1; }

#define CF_XSTR_(x) #x
#define CF_XSTR(x) CF_XSTR_(x)

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t,
                                CUdriverProcAddressQueryResult *);

/* Resolve one entry point: cuGetProcAddress with our ABI version first, then dlsym of the
 * versioned symbol name that cuda.h's macros map the base name to. */
static int resolve(void *lib, get_proc_fn get_proc, const char *base, const char *versioned,
                   int abi, void **out)
{
    *out = NULL;
    if (get_proc) {
        CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;
        if (get_proc(base, out, abi, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS &&
            q == CU_GET_PROC_ADDRESS_SUCCESS && *out)
            return 1;
        *out = NULL;
    }
    *out = dlsym(lib, versioned);
    return *out != NULL;
}

static void fail_load(cf_status st, const char *fmt, const char *a, const char *b)
{
    load_status = st;
    snprintf(load_message, sizeof load_message, fmt, a, b);
}

static void load_driver(void)
{
    const char *override = getenv("CUFUNC_DRIVER_PATH");
    const char *name = (override && *override) ? override : "libcuda.so.1";
    dlerror();
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        if (override && *override)
            fail_load(CF_ERR_NO_DRIVER,
                      "CUDA driver not usable: CUFUNC_DRIVER_PATH=%s could not be loaded (%s)",
                      name, why ? why : "unknown error");
        else
            fail_load(CF_ERR_NO_DRIVER,
                      "CUDA driver not found: libcuda.so.1 could not be loaded (%s%s); install the "
                      "NVIDIA driver, or set CUFUNC_DRIVER_PATH to libcuda.so.1",
                      why ? why : "unknown error", "");
        return;
    }
    Dl_info info;
    void *probe = dlsym(lib, "cuInit");
    if (probe && dladdr(probe, &info) && info.dli_fname)
        snprintf(loaded_path, sizeof loaded_path, "%s", info.dli_fname);
    else
        snprintf(loaded_path, sizeof loaded_path, "%s", name);

    get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
    /* A library with neither entry point is not a CUDA driver at all (CUFUNC_DRIVER_PATH naming
     * the wrong file): say so, rather than call it a driver that is too old. */
    if (!probe && !get_proc && !dlsym(lib, "cuGetProcAddress")) {
        fail_load(CF_ERR_NO_DRIVER,
                  "CUDA driver not usable: %s is not a CUDA driver (it has no cuInit or "
                  "cuGetProcAddress)%s",
                  loaded_path, override && *override ? "; check CUFUNC_DRIVER_PATH" : "");
        return;
    }

#define CF_DRIVER_RESOLVE(name, abi)                                                               \
    if (!resolve(lib, get_proc, #name, CF_XSTR(name), abi, (void **)&cf_drv.name)) {               \
        fail_load(CF_ERR_NO_DRIVER,                                                                \
                  "CUDA driver at %s is too old: it lacks %s (cufunc needs a driver for CUDA "     \
                  "12.0 or newer)",                                                                \
                  loaded_path, #name);                                                             \
        return;                                                                                    \
    }
    CF_DRIVER_FUNCS(CF_DRIVER_RESOLVE)
#undef CF_DRIVER_RESOLVE

    CUresult r = cf_drv.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *ename = NULL, *estr = NULL;
        cf_drv.cuGetErrorName(r, &ename);
        cf_drv.cuGetErrorString(r, &estr);
        char what[512];
        snprintf(what, sizeof what, "%s (%s)", ename ? ename : "?", estr ? estr : "?");
        if (r == CUDA_ERROR_NO_DEVICE) {
            /* the driver works but sees no GPU: no device, not a broken driver */
            const char *vis = getenv("CUDA_VISIBLE_DEVICES");
            char hint[256] = "";
            if (vis)
                snprintf(hint, sizeof hint, "; CUDA_VISIBLE_DEVICES is '%.200s'", vis);
            snprintf(load_message, sizeof load_message,
                     "no CUDA device: the CUDA driver at %s reports none (cuInit: %s)%s",
                     loaded_path, what, hint);
            load_status = CF_ERR_NO_DEVICE;
            return;
        }
        fail_load(CF_ERR_NO_DRIVER, "CUDA driver at %s failed to initialise: cuInit: %s",
                  loaded_path, what);
        return;
    }
    loaded_pid = getpid();
    pthread_atfork(NULL, NULL, on_fork_child);
}

cf_status cf_driver_load(void)
{
    if (forked_child)
        return cf_error_set(CF_ERR_FORK,
                            "CUDA was initialised in process %ld before fork(); a forked child "
                            "cannot use it. Use multiprocessing's 'spawn' or 'forkserver' start "
                            "method, or use CUDA only in the child processes",
                            (long)loaded_pid);
    pthread_once(&load_once, load_driver);
    if (load_status != CF_OK)
        return cf_error_set(load_status, "%s", load_message);
    return CF_OK;
}

const char *cf_driver_path(void) { return loaded_path; }

cf_status cf_driver_version(int *version)
{
    if (!version)
        return cf_error_set(CF_ERR_INVALID, "cf_driver_version: version is NULL");
    cf_status st = cf_driver_load();
    if (st)
        return st;
    CF_CU_TRY(cf_drv.cuDriverGetVersion(version));
    return CF_OK;
}

cf_status cf_cu_check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return CF_OK;
    const char *ename = NULL, *estr = NULL;
    if (cf_drv.cuGetErrorName)
        cf_drv.cuGetErrorName(r, &ename);
    if (cf_drv.cuGetErrorString)
        cf_drv.cuGetErrorString(r, &estr);
    if (r == CUDA_ERROR_ASSERT)
        /* a kernel translated with debug=True failed an assert (lang/checks.py); the device
         * printed the assertion, its line and the thread to standard output */
        return cf_error_set(CF_ERR_ASSERT, "%s failed: a device-side assertion failed "
                            "(CUDA_ERROR_ASSERT, CUresult %d; the device printed the assertion, "
                            "its source line and the thread to standard output). CUDA leaves "
                            "this process's context unusable: every later CUDA call fails, "
                            "restart the process", what, (int)r);
    cf_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? CF_ERR_DEVICE_NOMEM : CF_ERR_CUDA;
    return cf_error_set(st, "%s failed: %s (%s, CUresult %d)", what, ename ? ename : "unknown",
                        estr ? estr : "no description", (int)r);
}
