/* cufunc/runtime.h: the CUDA driver, devices, streams and memory.
 *
 * libcuda is loaded with dlopen on first use (cf_init, or any function below that needs it), never
 * linked, so a program that includes this header runs on a machine with no GPU and no driver; it
 * gets CF_ERR_NO_DRIVER from the first call that needs the GPU. Each device is used through its
 * primary context, so pointers from CuPy or PyTorch are valid in ours and ours in theirs.
 *
 * Device numbers are ordinals 0..count-1. Functions that take a device make that device's primary
 * context current on the calling thread.
 *
 * GPU: every function here needs the driver and a device, except cf_is_available and
 * cf_driver_path (never fail), cf_stream_handle and cf_stream_device (read the handle) and
 * cf_host_is_pinned (0 without a driver).
 */
#ifndef CUFUNC_RUNTIME_H
#define CUFUNC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include "cufunc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- initialisation ------------------------------------------------------------------------ */

/* Load libcuda, resolve the entry points and call cuInit. Once per process; the outcome of the first
 * call is sticky (a failed init keeps failing with the same message). After fork() in a child of a
 * process that had initialised CUDA, this and every GPU function return CF_ERR_FORK. */
CF_API cf_status cf_init(void);
/* Whether the driver loaded and at least one device exists. Never fails; when it answers 0 the
 * reason is readable with cf_last_error(). */
CF_API int cf_is_available(void);
/* The driver's CUDA version as an integer (13000 for 13.0). */
CF_API cf_status cf_driver_version(int *version);
/* Where libcuda was loaded from ("" if not loaded). */
CF_API const char *cf_driver_path(void);

/* ---- devices ------------------------------------------------------------------------------- */

typedef struct cf_device_props {
    char name[256];
    int ordinal;
    int cc_major, cc_minor;
    int multiprocessor_count;
    int max_threads_per_block;
    int max_threads_per_multiprocessor;
    int warp_size;
    int l2_cache_bytes;
    int max_shared_per_block;           /* default limit, bytes */
    int max_shared_per_block_optin;     /* with the opt-in attribute, bytes */
    int pci_bus_id, pci_device_id, pci_domain_id;
    int memory_pools_supported;
    size_t total_memory;
    char uuid[48];                      /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
} cf_device_props;

CF_API cf_status cf_device_count(int *count);
/* Properties of one device, read once and cached. CF_ERR_NO_DEVICE for a bad ordinal. */
CF_API cf_status cf_device_props_get(int device, cf_device_props *out);
/* The calling thread's current device (0 until cf_device_set is called on this thread). */
CF_API cf_status cf_device_get(int *device);
/* Retain the device's primary context (once per process) and make it current on this thread. */
CF_API cf_status cf_device_set(int device);
/* Several GPUs. A function that works on device k (its `device` argument, the device of its stream
 * or of its arrays, never the current device) makes k's primary context current on the calling
 * thread, which the CUDA runtime (CuPy, PyTorch) reads as the thread's current device. This puts
 * back the context that was current before the first such switch since the last cf_device_set or
 * cf_context_restore on this thread (a thread-local flag: no driver call when nothing switched).
 * Call it after work on another device than the current one when the thread also uses the CUDA
 * runtime; the Python package calls it at the end of every call. Never fails. */
CF_API void cf_context_restore(void);
/* Make device's primary context current on the calling thread for the work that follows, without
 * changing the thread's current device (cf_device_get): what a function working on device k does
 * first (above), for a caller that hands work on k to the CUDA runtime (CuPy allocating a result
 * on k reads the runtime's current device). cf_context_restore undoes it. */
CF_API cf_status cf_device_enter(int device);
/* Wait for all work on the device (cuCtxSynchronize in its primary context). */
CF_API cf_status cf_device_synchronize(int device);
/* Free and total memory of the device, bytes. */
CF_API cf_status cf_device_mem_info(int device, size_t *free_bytes, size_t *total_bytes);
/* The device that owns a device pointer (cuPointerGetAttribute). CF_ERR_INVALID if the pointer is
 * not device memory known to the driver. */
CF_API cf_status cf_pointer_device(uint64_t ptr, int *device);

/* ---- streams ------------------------------------------------------------------------------- */

/* An opaque stream handle. A stream made by cf_stream_create is owned and destroyed by
 * cf_stream_free; one made by cf_stream_wrap (an external CUstream, e.g. from PyTorch) or
 * cf_stream_default is not: cf_stream_free then frees only the wrapper. */
typedef struct cf_stream cf_stream;

/* Flags of cf_stream_create_ex. A blocking stream is ordered with the legacy default stream both
 * ways (work on either waits for the work queued before it on the other), as a stream from
 * cudaStreamCreate or Numba's cuda.stream() is; a non-blocking one is not. */
#define CF_STREAM_BLOCKING 0u
#define CF_STREAM_NON_BLOCKING 1u

/* A new non-blocking stream on `device`. */
CF_API cf_status cf_stream_create(int device, cf_stream **out);
/* A new stream on `device` with CF_STREAM_* flags. */
CF_API cf_status cf_stream_create_ex(int device, unsigned flags, cf_stream **out);
/* The stream's CF_STREAM_* flags (the legacy and per-thread default streams are blocking). */
CF_API cf_status cf_stream_flags(cf_stream *s, unsigned *flags);
/* The legacy default stream (handle 0) of `device`, as a wrapper the caller frees. */
CF_API cf_status cf_stream_default(int device, cf_stream **out);
/* Wrap a CUstream made elsewhere (handle as an integer; 0 = legacy default, 1 = legacy, 2 = per
 * thread). The stream must belong to `device`'s primary context. */
CF_API cf_status cf_stream_wrap(int device, uintptr_t handle, cf_stream **out);
/* The device a CUstream handle belongs to (its context's), read without changing the thread's
 * current context; -1 for the handles 0, 1 and 2 (the default streams of whichever context is
 * current). For wrapping another library's stream with cf_stream_wrap when it may be another
 * device's than the data's (CuPy's array interface names its current device's stream). */
CF_API cf_status cf_stream_handle_device(uintptr_t handle, int *device);
/* No-op on NULL. */
CF_API void cf_stream_free(cf_stream *s);
CF_API uintptr_t cf_stream_handle(const cf_stream *s);
CF_API int cf_stream_device(const cf_stream *s);
CF_API cf_status cf_stream_synchronize(cf_stream *s);
/* 1 if all work on the stream is done, 0 if not. */
CF_API cf_status cf_stream_query(cf_stream *s, int *done);
/* Make `waiter` wait (on the device) for all work queued so far on `s`. Nothing to do when both
 * name the same stream (the legacy default stream as handle 0 or 1 included). */
CF_API cf_status cf_stream_wait_stream(cf_stream *waiter, cf_stream *s);
/* Wait on the host for the work queued so far on `s`, through an event recorded on it. On the
 * legacy default stream this also waits for the work queued before it on every blocking stream of
 * the device (which cuStreamSynchronize of the legacy stream is not documented to do). */
CF_API cf_status cf_stream_synchronize_queued(cf_stream *s);

/* ---- CUDA graphs: stream capture ----------------------------------------------------------
 *
 * Every launch function of the engines (cf_ufunc_launch, cf_gufunc_launch, cf_reduce_*,
 * cf_scan_launch, cf_at_launch) may be called on a stream that is capturing a CUDA graph
 * (cuStreamBeginCapture, or cf_stream_begin_capture below; a CUstream capturing for PyTorch or
 * CuPy wrapped with cf_stream_wrap): the launch is recorded into the graph, memory the engine needs
 * comes from allocation nodes on that stream (cuMemAllocAsync), and the counters a kernel expects
 * zeroed are zeroed by memset nodes inside the graph, so every replay is right. On a capturing
 * stream, call nothing that synchronises (cf_stream_synchronize, cf_memcpy_* with sync != 0,
 * pageable copies) and order other streams' work only with events recorded inside the capture.
 * A kernel compiled for the first time during a capture is loaded with the thread's capture mode
 * relaxed (cuThreadExchangeStreamCaptureMode); call once before capturing to keep compiles out. */

/* Capture status of `s`: CF_CAPTURE_NONE, _ACTIVE, _INVALIDATED, or _IMPLICIT (s is the legacy
 * default stream while a blocking stream of its device captures: any use of it would break that
 * capture). */
enum { CF_CAPTURE_NONE = 0, CF_CAPTURE_ACTIVE = 1, CF_CAPTURE_INVALIDATED = 2,
       CF_CAPTURE_IMPLICIT = 3 };
CF_API cf_status cf_stream_capture_status(cf_stream *s, int *status);

/* Modes of cf_stream_begin_capture (CUstreamCaptureMode's values). */
enum { CF_CAPTURE_GLOBAL = 0, CF_CAPTURE_THREAD_LOCAL = 1, CF_CAPTURE_RELAXED = 2 };

/* An instantiated graph (CUgraphExec and its CUgraph). */
typedef struct cf_graph cf_graph;
/* Begin capturing `s` (not the legacy default stream) in `mode`. */
CF_API cf_status cf_stream_begin_capture(cf_stream *s, int mode);
/* End the capture begun on `s` and instantiate it (allocations not freed in the graph are freed
 * when it is launched again: CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH). Ownership: the
 * caller frees *out with cf_graph_free. */
CF_API cf_status cf_stream_end_capture(cf_stream *s, cf_graph **out);
/* Launch (replay) the graph on `s`, ordered after the work queued on it before. */
CF_API cf_status cf_graph_launch(cf_graph *g, cf_stream *s);
/* Upload the graph's work to the device ahead of its first launch (optional). */
CF_API cf_status cf_graph_upload(cf_graph *g, cf_stream *s);
/* Number of nodes of the captured graph (kernels, memsets, allocation and free nodes). */
CF_API cf_status cf_graph_node_count(cf_graph *g, size_t *count);
/* No-op on NULL. A launch still queued completes. */
CF_API void cf_graph_free(cf_graph *g);

/* ---- events (Numba's cuda.event) ----------------------------------------------------------- */

typedef struct cf_event cf_event;
/* A new event on `device`; timing 0 makes a lighter event that elapsed times refuse. */
CF_API cf_status cf_event_create(int device, int timing, cf_event **out);
/* No-op on NULL. */
CF_API void cf_event_free(cf_event *e);
/* Record the event at the current end of stream `s` (same device). */
CF_API cf_status cf_event_record(cf_event *e, cf_stream *s);
/* Wait on the host until the work recorded before the event is done. */
CF_API cf_status cf_event_synchronize(cf_event *e);
/* *done: 1 if the recorded work is done (or the event was never recorded), 0 if not. */
CF_API cf_status cf_event_query(cf_event *e, int *done);
/* Make stream `s` wait (on the device) for the event. */
CF_API cf_status cf_event_wait(cf_event *e, cf_stream *s);
/* Milliseconds between two recorded timing events (both complete, else an error). */
CF_API cf_status cf_event_elapsed_ms(cf_event *start, cf_event *end, float *ms);

/* ---- device memory ------------------------------------------------------------------------- */

/* Allocate from the device's stream-ordered pool (cuMemAllocAsync on `s`); the pool has a release
 * threshold, so freed memory is reused without synchronisation. nbytes 0 gives *ptr = 0. Out of
 * memory is CF_ERR_DEVICE_NOMEM with a message naming the size; the pool stays usable. */
CF_API cf_status cf_mem_alloc(cf_stream *s, size_t nbytes, uint64_t *ptr);
/* Return memory to the pool, ordered on `s`. ptr 0 is a no-op. */
CF_API cf_status cf_mem_free(cf_stream *s, uint64_t ptr);
/* Hand the memory the device's pool keeps for reuse (freed, not yet returned: the pool never
 * releases it by itself) back to the driver, after the device's work has finished, so that other
 * processes can have it. Live allocations are untouched. An allocation that runs out does this by
 * itself before it fails. */
CF_API cf_status cf_mem_trim(int device);

/* Page-locked host memory (cuMemHostAlloc, portable). */
CF_API cf_status cf_host_alloc_pinned(size_t nbytes, void **ptr);
CF_API void cf_host_free_pinned(void *ptr);
/* Whether host memory at ptr is page-locked (registered with or allocated by the driver). */
CF_API int cf_host_is_pinned(const void *ptr);

/* Page-lock existing host memory for cuMemHostRegister's lifetime (portable; mapped into the
 * device too when `mapped`). *registered is 0 when the range was page-locked already (by the
 * caller, another library, or an enclosing registration): then nothing is done and nothing must
 * be unregistered. */
CF_API cf_status cf_host_register(void *ptr, size_t nbytes, int mapped, int *registered);
CF_API cf_status cf_host_unregister(void *ptr);
/* The device address of mapped page-locked host memory (cuMemHostGetDevicePointer). */
CF_API cf_status cf_host_device_pointer(void *ptr, uint64_t *dptr);
/* Page-locked host memory mapped into every device's address space (DEVICEMAP | PORTABLE); free
 * with cf_host_free_pinned. */
CF_API cf_status cf_host_alloc_mapped(size_t nbytes, void **ptr, uint64_t *dptr);
/* Unified (managed) memory usable from the host and every kernel, freed with cf_mem_free (any
 * stream of the device; the free synchronises). Never asks the driver for more than the device
 * has free (cuMemGetInfo): an oversized managed allocation can hang a GPU, so that is
 * CF_ERR_DEVICE_NOMEM up front. attach_global 0 attaches to the host (CU_MEM_ATTACH_HOST). */
CF_API cf_status cf_mem_alloc_managed(int device, size_t nbytes, int attach_global, uint64_t *ptr);
/* Device memory that can be exported with cf_ipc_get_handle (cuMemAlloc, not the pool: pool
 * memory cannot be exported by cuIpcGetMemHandle); freed with cf_mem_free. */
CF_API cf_status cf_mem_alloc_ipc(cf_stream *s, size_t nbytes, uint64_t *ptr);
/* Whether ptr is the start of a live cf_mem_alloc* block: 1 (then *pooled and *nbytes are set) or
 * 0. */
CF_API int cf_mem_lookup(uint64_t ptr, int *pooled, size_t *nbytes);
/* CUDA IPC: the 64-byte handle of a block from cf_mem_alloc_ipc (CF_ERR_INVALID for pool
 * memory), open one made by another process (on `device`), close what was opened. */
#define CF_IPC_HANDLE_BYTES 64
CF_API cf_status cf_ipc_get_handle(uint64_t ptr, unsigned char handle[CF_IPC_HANDLE_BYTES]);
CF_API cf_status cf_ipc_open(int device, const unsigned char handle[CF_IPC_HANDLE_BYTES],
                             uint64_t *ptr);
CF_API cf_status cf_ipc_close(int device, uint64_t ptr);

/* ---- copies ---------------------------------------------------------------------------------
 * Contiguous byte copies ordered on `s`. Host-to-device and device-to-host copies of pageable host
 * memory go through pinned staging buffers, chunked, with the host-side copy into staging spread
 * over threads and overlapped with the DMA; they return when the host buffer may be reused (for
 * d2h: when the data has arrived). Copies to or from pinned host memory are asynchronous unless
 * `sync` is set. */
CF_API cf_status cf_memcpy_htod(cf_stream *s, uint64_t dst, const void *src, size_t nbytes, int sync);
CF_API cf_status cf_memcpy_dtoh(cf_stream *s, void *dst, uint64_t src, size_t nbytes, int sync);
CF_API cf_status cf_memcpy_dtod(cf_stream *s, uint64_t dst, uint64_t src, size_t nbytes);
/* Fill nbytes with a byte value. */
CF_API cf_status cf_memset8(cf_stream *s, uint64_t dst, unsigned char value, size_t nbytes);

/* ---- the environment ---------------------------------------------------------------------
 * Every CUFUNC_* environment variable the library reads, in one table (what `python -m cufunc`
 * prints): integer tuning knobs with their default and bounds (a value outside them, or not a
 * number, keeps the default), and text settings (the cache folder, the loader paths). */
typedef struct cf_knob_desc {
    const char *name;    /* "CUFUNC_..." */
    int is_text;         /* 1: a text setting (value, bounds unused) */
    long value;          /* an integer knob's value in effect now */
    long default_value;  /* out of [lowest, highest]: "automatic" (the engine chooses) */
    long lowest, highest;
    int rule;            /* 0: any integer in the bounds; 1: a power of two; 2: a multiple of 32 */
    const char *text;    /* the variable's text as set, or NULL when unset */
    const char *doc;     /* one line: what it changes */
} cf_knob_desc;
/* How many rows the table has. */
CF_API int cf_knob_count(void);
/* Row `index` (0 .. cf_knob_count() - 1); CF_ERR_INVALID for another index. */
CF_API cf_status cf_knob_info(int index, cf_knob_desc *out);

#ifdef __cplusplus
}
#endif
#endif
