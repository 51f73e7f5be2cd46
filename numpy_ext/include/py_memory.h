/* py_memory.h: CfPyMemory, the one owner of the device memory behind DeviceArrays
 * (py_memory.c): memory cufunc allocated, DLPack imports, memory opened from a CUDA IPC handle;
 * each keeps the stream of the last write to it */
#ifndef CF_PY_MEMORY_H
#define CF_PY_MEMORY_H

#include "py_stream.h"

enum {
    CF_PY_MEM_ALLOC = 0,  /* cufunc's: the stream-ordered pool, or cuMemAlloc for IPC export */
    CF_PY_MEM_DLPACK = 1, /* a producer's tensor imported through DLPack (its deleter at the end) */
    CF_PY_MEM_IPC = 2,    /* another process's, opened from a CUDA IPC handle (closed at the end) */
};

typedef struct {
    PyObject_HEAD
    uint64_t ptr;     /* the address (a DLPack import: its data's); 0 once released or moved */
    size_t nbytes;    /* bytes allocated (CF_PY_MEM_ALLOC; 0 for the others: not known) */
    int device;
    int kind;         /* CF_PY_MEM_* */
    PyObject *stream; /* the Stream it was allocated on, or NULL (default stream) */
    /* The stream of the last work queued that writes this memory (at first the stream it was
     * allocated on, or the one a DLPack producer was asked to order its work before), or NULL for
     * the legacy default stream. Work on another stream waits for it first (cf_py_order_operand),
     * so no call or copy reads the memory before the work that produced it, whichever streams the
     * two were queued on. */
    PyObject *pending;
    /* Its address was handed out where cufunc cannot follow it (__cuda_array_interface__, DLPack,
     * .ptr, a kernel's captured global): get_ipc_handle must not move it then. */
    int exposed;
    /* The Stream it was allocated on while that stream captured a CUDA graph (an allocation node),
     * else NULL: freed on it while the capture lasts (a free node), since no other stream may
     * touch the capture. */
    PyObject *capture;
    void *managed;    /* CF_PY_MEM_DLPACK: the managed tensor (set once the capsule is consumed) */
    int versioned;    /* ... DLManagedTensorVersioned (1) or DLManagedTensor (0) */
} CfPyMemory;

extern PyTypeObject CfPyMemory_Type;
#define CfPyMemory_Check(o) (Py_TYPE(o) == &CfPyMemory_Type)

/* nbytes on `device`, ordered on `stream` (a resolved stream: a Stream or None); ipc: cuMemAlloc
 * memory that cuIpcGetMemHandle can export (pool memory cannot be). MemoryError naming the size
 * when the device is full. */
CfPyMemory *cf_py_memory_alloc(size_t nbytes, int device, PyObject *stream, const char *what,
                               int ipc);
/* The owner of a DLPack import (managed: NULL until the caller sets it), pending on `pending`. */
CfPyMemory *cf_py_memory_dlpack(int versioned, uint64_t ptr, int device, PyObject *pending);
/* The owner of memory opened from an IPC handle (its close() is IpcArrayHandle.close). */
CfPyMemory *cf_py_memory_ipc(uint64_t ptr, int device);

/* Order s (of the resolved stream `resolved`) after the memory's last write; record `resolved` as
 * its last writer. */
int cf_py_memory_order(PyObject *memory, cf_stream *s, PyObject *resolved);
void cf_py_memory_written(PyObject *memory, PyObject *resolved);

/* defer_cleanup_enter / _exit / _count */
extern PyMethodDef cf_py_memory_methods[];
int cf_py_memory_init_module(PyObject *m);

#endif
