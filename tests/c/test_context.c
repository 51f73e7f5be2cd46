/* test_context.c: the calling thread's current CUDA context around cufunc's work (context.c):
 * cf_context_restore puts back the context that was current before cufunc switched to the
 * device it worked on (the CUDA runtime, so CuPy and PyTorch, read it as the current device).
 *
 * Without a driver: cf_context_restore is a no-op that does not fail. One GPU: no switch on the
 * current device, a user's own (non-primary) context restored, a thread with no context keeps
 * its own device's primary one. Two GPUs: work on device 1 from a thread on device 0 (restored;
 * cf_device_synchronize and cf_device_mem_info restore by themselves), cf_device_set is kept. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "context.h"
#include "driver.h"

static CUcontext current(void)
{
    CUcontext c = NULL;
    CHECK(cf_drv.cuCtxGetCurrent(&c) == CUDA_SUCCESS);
    return c;
}

static int current_device(void)
{
    CUdevice d = -1;
    if (cf_drv.cuCtxGetDevice(&d) != CUDA_SUCCESS)
        return -1;
    return (int)d;
}

/* Some device work on `device`: an allocation and a free on its legacy default stream. */
static void work_on(int device)
{
    cf_stream *s = NULL;
    uint64_t p = 0;
    CHECK_OK(cf_stream_default(device, &s));
    CHECK_OK(cf_mem_alloc(s, 4096, &p));
    CHECK_OK(cf_memset8(s, p, 0, 4096));
    CHECK_OK(cf_mem_free(s, p));
    CHECK_OK(cf_stream_synchronize(s));
    cf_stream_free(s);
}

static void test_restore_without_a_driver_is_a_no_op(void)
{
    cf_context_restore(); /* before anything loaded; after, on a machine with no GPU */
    cf_is_available();
    cf_context_restore();
}

static void test_no_switch_on_the_current_device(void)
{
    NEED_GPU();
    CHECK_OK(cf_device_set(0));
    CUcontext before = current();
    work_on(0);
    CHECK(current() == before);
    cf_context_restore();
    CHECK(current() == before);
}

typedef CUresult (*ctx_create_fn)(CUcontext *, unsigned int, CUdevice);
typedef CUresult (*ctx_destroy_fn)(CUcontext);

static void test_a_users_own_context_comes_back(void)
{
    NEED_GPU();
    void *lib = dlopen(cf_driver_path(), RTLD_NOW | RTLD_LOCAL);
    ctx_create_fn create = lib ? (ctx_create_fn)dlsym(lib, "cuCtxCreate_v2") : NULL;
    ctx_destroy_fn destroy = lib ? (ctx_destroy_fn)dlsym(lib, "cuCtxDestroy_v2") : NULL;
    if (!create || !destroy)
        SKIP("the driver exports no cuCtxCreate_v2/cuCtxDestroy_v2");
    CUcontext mine = NULL;
    CHECK(create(&mine, 0, 0) == CUDA_SUCCESS); /* current on this thread now */
    CHECK(current() == mine);
    work_on(0); /* in device 0's primary context, which is not `mine` */
    CHECK(current() != mine);
    cf_context_restore();
    CHECK(current() == mine);
    cf_context_restore(); /* nothing left to restore */
    CHECK(current() == mine);
    destroy(mine);
    CHECK_OK(cf_device_set(0));
}

static void test_device_enter_is_undone_by_restore(void)
{
    NEED_GPU();
    void *lib = dlopen(cf_driver_path(), RTLD_NOW | RTLD_LOCAL);
    ctx_create_fn create = lib ? (ctx_create_fn)dlsym(lib, "cuCtxCreate_v2") : NULL;
    ctx_destroy_fn destroy = lib ? (ctx_destroy_fn)dlsym(lib, "cuCtxDestroy_v2") : NULL;
    if (!create || !destroy)
        SKIP("the driver exports no cuCtxCreate_v2/cuCtxDestroy_v2");
    CUcontext mine = NULL;
    CHECK(create(&mine, 0, 0) == CUDA_SUCCESS);
    int before = -1, after = -1;
    CHECK_OK(cf_device_get(&before));
    CHECK_OK(cf_device_enter(0)); /* device 0's primary context, not `mine` */
    CHECK(current() != mine && current_device() == 0);
    CHECK_OK(cf_device_get(&after));
    CHECK(after == before); /* the thread's current device is not changed */
    cf_context_restore();
    CHECK(current() == mine);
    destroy(mine);
    CHECK(cf_device_enter(1 << 20) == CF_ERR_NO_DEVICE);
    CHECK_OK(cf_device_set(0));
}

typedef struct thread_result {
    int device;
    int had_none, after_ok;
} thread_result;

/* A new thread has no current context: work on r->device, then restore. */
static void *fresh_thread(void *arg)
{
    thread_result *r = arg;
    CUcontext c = (CUcontext)1;
    r->had_none = cf_drv.cuCtxGetCurrent(&c) == CUDA_SUCCESS && c == NULL;
    work_on(r->device);
    cf_context_restore();
    CUcontext after = (CUcontext)1;
    cf_drv.cuCtxGetCurrent(&after);
    /* device 0 is the thread's device: its primary context may stay (the runtime would make it
     * current anyway); another device's is undone */
    r->after_ok = r->device == 0 ? after != NULL && current_device() == 0 : after == NULL;
    return NULL;
}

static void run_fresh_thread(int device)
{
    thread_result r = {device, 0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fresh_thread, &r) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(r.had_none);
    CHECK(r.after_ok);
}

static void test_a_thread_without_context_keeps_its_devices(void)
{
    NEED_GPU();
    run_fresh_thread(0);
}

static int two_gpus(void)
{
    int n = 0;
    return cf_device_count(&n) == CF_OK && n >= 2;
}

#define NEED_TWO_GPUS()                                                                            \
    do {                                                                                           \
        NEED_GPU();                                                                                \
        if (!two_gpus())                                                                           \
            SKIP("needs 2 GPUs");                                                                  \
    } while (0)

static void test_work_on_device_1_is_undone(void)
{
    NEED_TWO_GPUS();
    CHECK_OK(cf_device_set(0));
    CUcontext ctx0 = current();
    work_on(1);
    CHECK(current_device() == 1); /* the driver needed device 1's context */
    cf_context_restore();
    CHECK(current() == ctx0);
    CHECK(current_device() == 0);
    size_t free_b = 0, total_b = 0;
    CHECK_OK(cf_device_synchronize(1));
    CHECK_OK(cf_device_mem_info(1, &free_b, &total_b));
    CHECK(total_b > 0);
    CHECK(current() == ctx0); /* both restore by themselves */
    run_fresh_thread(1);
}

static void test_stream_handle_device(void)
{
    int d = 7;
    CHECK_STATUS(cf_stream_handle_device(0, NULL), CF_ERR_INVALID);
    NEED_GPU();
    for (uintptr_t h = 0; h <= 2; h++) {
        CHECK_OK(cf_stream_handle_device(h, &d));
        CHECK(d == -1);
    }
    int n = 0;
    CHECK_OK(cf_device_count(&n));
    CHECK_OK(cf_device_set(0));
    CUcontext ctx0 = current();
    for (int k = 0; k < n && k < 4; k++) {
        cf_stream *s = NULL;
        CHECK_OK(cf_stream_create(k, &s));
        cf_context_restore();
        CHECK_OK(cf_stream_handle_device(cf_stream_handle(s), &d));
        CHECK(d == k);
        CHECK(current() == ctx0); /* read without moving the thread's context */
        cf_stream_free(s);
        cf_context_restore();
    }
}

static void test_device_set_is_kept(void)
{
    NEED_TWO_GPUS();
    CHECK_OK(cf_device_set(0));
    work_on(1);           /* a pending switch ... */
    CHECK_OK(cf_device_set(1)); /* ... replaced by a choice */
    cf_context_restore();
    CHECK(current_device() == 1);
    int d = -1;
    CHECK_OK(cf_device_get(&d));
    CHECK(d == 1);
    CHECK_OK(cf_device_set(0));
    CHECK(current_device() == 0);
}

int main(void)
{
    RUN(test_restore_without_a_driver_is_a_no_op);
    RUN(test_no_switch_on_the_current_device);
    RUN(test_a_users_own_context_comes_back);
    RUN(test_device_enter_is_undone_by_restore);
    RUN(test_a_thread_without_context_keeps_its_devices);
    RUN(test_work_on_device_1_is_undone);
    RUN(test_device_set_is_kept);
    RUN(test_stream_handle_device);
    return SUMMARY();
}
