/*
 * dlpack_abi.h -- the parts of the DLPack ABI (v1.x, dmlc/dlpack) that accspmm._cuda's fast call
 * reads: DLTensor, DLManagedTensorVersioned and the C exchange API a framework publishes as the
 * PyCapsule "dlpack_exchange_api" in its tensor type's __dlpack_c_exchange_api__ (PyTorch >= 2.10).
 * Layouts as the DLPack specification defines them; only major version 1 is accepted.
 */
#ifndef ACC_DLPACK_ABI_H
#define ACC_DLPACK_ABI_H

#include <stdint.h>

enum { ACC_DL_CPU = 1, ACC_DL_CUDA = 2 }; /* DLDeviceType values */
enum { ACC_DL_FLOAT = 2, ACC_DL_BFLOAT = 4 }; /* DLDataTypeCode kDLFloat, kDLBfloat */

typedef struct acc_dl_version {
    uint32_t major, minor;
} acc_dl_version;

typedef struct acc_dl_device {
    int32_t device_type;
    int32_t device_id;
} acc_dl_device;

typedef struct acc_dl_dtype {
    uint8_t code, bits;
    uint16_t lanes;
} acc_dl_dtype;

typedef struct acc_dl_tensor {
    void *data;
    acc_dl_device device;
    int32_t ndim;
    acc_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL = compact row-major */
    uint64_t byte_offset;
} acc_dl_tensor;

typedef struct acc_dl_managed {
    acc_dl_version version;
    void *manager_ctx;
    void (*deleter)(struct acc_dl_managed *self);
    uint64_t flags;
    acc_dl_tensor dl_tensor;
} acc_dl_managed;

/* The exchange API: every function returns 0 on success. */
typedef struct acc_dl_exchange_api {
    acc_dl_version version; /* header: version, then the previous API in the chain */
    void *prev_api;
    int (*managed_tensor_allocator)(acc_dl_tensor *prototype, acc_dl_managed **out, void *error_ctx,
                                    void (*set_error)(void *error_ctx, const char *kind,
                                                      const char *message));
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, acc_dl_managed **out);
    int (*managed_tensor_to_py_object_no_sync)(acc_dl_managed *tensor, void **out_py_object);
    int (*dltensor_from_py_object_no_sync)(void *py_object, acc_dl_tensor *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_current_stream);
} acc_dl_exchange_api;

#endif
