/* dlpack.h: the DLPack structures cufunc exchanges, written from the public DLPack specification
 * (https://dmlc.github.io/dlpack/latest/c_api.html), ABI version 1.x. Both the legacy
 * DLManagedTensor (capsule name "dltensor") and the versioned DLManagedTensorVersioned (capsule name
 * "dltensor_versioned", DLPack >= 1.0) are defined; a consumer renames a capsule it took ownership
 * of to "used_dltensor" / "used_dltensor_versioned". Only the parts cufunc uses are named. */
#ifndef CF_DLPACK_ABI_H
#define CF_DLPACK_ABI_H

#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

/* Only the values cufunc produces or reports by name; the type is an int-sized enum in the ABI. */
typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLOpaqueHandle = 3,
    kDLBfloat = 4,
    kDLComplex = 5,
    kDLBool = 6,
} DLDataTypeCode;

typedef struct {
    uint8_t code;   /* a DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

/* strides are in elements (not bytes); NULL strides mean C-contiguous (legacy producers). */
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << 2)

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* The C exchange API (DLPack 1.3, https://dmlc.github.io/dlpack/latest/python_spec.html): a
 * table of C functions a library publishes on its array type as the capsule
 * `type.__dlpack_c_exchange_api__` (name "dlpack_exchange_api"), so that a consumer reads and makes
 * its arrays without Python calls. Only the major version must match; later minors append fields.
 * The functions do no stream synchronisation: the consumer asks current_work_stream. */
typedef struct DLPackExchangeAPIHeader {
    DLPackVersion version;
    struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;

typedef struct DLPackExchangeAPI {
    DLPackExchangeAPIHeader header;
    int (*managed_tensor_allocator)(DLTensor *prototype, DLManagedTensorVersioned **out,
                                    void *error_ctx,
                                    void (*set_error)(void *error_ctx, const char *kind,
                                                      const char *message));
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, DLManagedTensorVersioned **out);
    /* takes ownership of `tensor`; 0, or -1 with a Python exception */
    int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned *tensor, void **out);
    /* a non-owning view, valid while the object lives unchanged; may be NULL */
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out);
    int (*current_work_stream)(DLDeviceType device_type, int32_t device_id, void **out_stream);
} DLPackExchangeAPI;

#endif
