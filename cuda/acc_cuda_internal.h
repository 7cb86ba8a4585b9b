/* acc_cuda_internal.h -- helpers shared by the .cu files (not public). */
#ifndef ACC_CUDA_INTERNAL_H
#define ACC_CUDA_INTERNAL_H

#include <cuda_runtime.h>

#include "accspmm_cuda.h"

extern "C" int acc_cuda_status(cudaError_t err, const char *what);

/* The library's stream-ordered device memory pool (device.cu): memory on `s`'s order, from the
 * current device's pool; free in stream order too (no wait for other streams). */
extern "C" int acc_pool_alloc(void **p, size_t bytes, cudaStream_t s);
extern "C" void acc_pool_free(void *p, cudaStream_t s);

/* dst[r * ldd + c] = c < ncopy ? src[r * lds + c] : 0 for r < rows, c < ncols, elements of elem_bytes
 * (2 or 4) bytes, on `s`: B into a zero-padded operand, or a padded result into C (ncopy = ncols). */
extern "C" int acc_copy_rows(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows,
                             int64_t ncols, int64_t ncopy, int elem_bytes, cudaStream_t s);

/* Returns the mapped status of a CUDA call from the enclosing function. */
#define ACC_CUDA_TRY(call)                                                                                   \
    do {                                                                                                     \
        int acc_st_ = acc_cuda_status((call), #call);                                                        \
        if (acc_st_ != ACC_SUCCESS) return acc_st_;                                                          \
    } while (0)

#endif
