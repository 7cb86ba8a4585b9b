/*
 * accspmm_cuda.h -- C ABI of the CUDA layer (kernels, launchers, device
 * memory, cuSPARSE baseline).  Compiled by nvcc into the accspmm._cuda
 * extension; callable from C.  Every function returns an acc_status
 * (accspmm.h); CUDA and cuSPARSE errors are mapped into it.  Streams are the
 * caller's (cudaStream_t passed as void*, NULL = legacy default stream).
 * Pointers named d_* are device pointers, h_* host pointers.
 */
#ifndef ACCSPMM_CUDA_H
#define ACCSPMM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "../csrc/accspmm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct acc_cuda_device_info {
    char name[256];
    int major, minor; /* compute capability */
    int multiprocessors;
    int l2_bytes;
    int max_shared_per_block; /* opt-in maximum, bytes */
    size_t total_memory, free_memory;
} acc_cuda_device_info;

/* Driver and runtime versions (e.g. 13000) and number of devices.
 * ACC_ERR_NO_DEVICE when there is no driver or no device (count = 0). */
int acc_cuda_probe(int *driver_version, int *runtime_version, int *device_count);
int acc_cuda_get_device_info(int device, acc_cuda_device_info *info);
int acc_cuda_set_device(int device);
int acc_cuda_get_device(int *device);
/* Message of the last CUDA error this layer mapped (static storage). */
const char *acc_cuda_last_error(void);

/* Device memory from the library's pool (device.cu): usable on any stream when malloc returns;
 * free waits for the device's work first, as cudaFree.  Only memory of acc_cuda_malloc (or of a
 * function here that says it allocates from the pool) may go to acc_cuda_free. */
int acc_cuda_malloc(void **d_ptr, size_t bytes); /* ACC_ERR_DEVICE_MEMORY when out of memory */
int acc_cuda_free(void *d_ptr);
/* Pool memory in the order of `stream` (NULL: the legacy default stream), without a host
 * synchronisation: work on `stream` may use it at once, other streams and the host once `stream`
 * has reached this point (synchronise it, or wait for work queued on it later).  acc_cuda_free
 * takes it as acc_cuda_malloc's memory. */
int acc_cuda_malloc_ordered(void **d_ptr, size_t bytes, void *stream);
/* acc_cuda_malloc_ordered, then the host bytes copied in on `stream` through the staging chunks
 * (acc_h2d_staged): no synchronisation, and the host array may go on return. */
int acc_cuda_upload(void **d_ptr, const void *h_src, size_t bytes, void *stream);
/* The library's side stream of the current device (non-blocking, created at first use): uploads
 * that must not wait for the caller's queued work go there. */
int acc_cuda_side_stream(void **stream);
/* Gives the current device pool's unused memory (kept up to ACCSPMM_POOL_KEEP_BYTES) back. */
int acc_cuda_trim_pool(void);
int acc_cuda_memcpy_htod(void *d_dst, const void *h_src, size_t bytes, void *stream);
int acc_cuda_memcpy_dtoh(void *h_dst, const void *d_src, size_t bytes, void *stream);
int acc_cuda_memcpy_dtod(void *d_dst, const void *d_src, size_t bytes, void *stream);
int acc_cuda_memset(void *d_ptr, int byte, size_t bytes, void *stream);
int acc_cuda_stream_synchronize(void *stream);
/* *capturing = 1 while a CUDA-graph capture of `stream` is under way (then no allocation or
 * synchronisation may be issued on it). */
int acc_cuda_stream_capturing(void *stream, int *capturing);

/* ---- cuSPARSE baseline (loaded with dlopen on first use) --------------- */

/* Loads libcusparse from `path` (a file name or soname); idempotent once it
 * succeeded. */
int acc_cusparse_load(const char *path);
/* Message of the last cuSPARSE or dlopen failure (static storage). */
const char *acc_cusparse_last_error(void);

typedef struct acc_cusparse_spmm acc_cusparse_spmm;

/* Prepares C = A @ B with cusparseSpMM: CSR A (m x k, nnz), row-major
 * B (k x n) and C (m x n), all of `dtype`, with index_bits 32 or 64 for both
 * d_row_offsets[m+1] and d_column_indices[nnz] (device).  `alg` is the
 * cusparseSpMMAlg_t value.  Workspace allocation and cusparseSpMM_preprocess
 * happen here, outside any timed run.  d_B/d_C are only used for the
 * descriptor shapes; run() rebinds them. ACC_ERR_UNSUPPORTED when cuSPARSE
 * rejects the algorithm for this layout. */
int acc_cusparse_spmm_create(acc_cusparse_spmm **plan, int64_t m, int64_t k, int64_t nnz,
                             const void *d_row_offsets, const void *d_column_indices, const void *d_values,
                             int index_bits, acc_dtype dtype, int64_t n, int alg, const void *d_B, void *d_C,
                             void *stream);
int acc_cusparse_spmm_run(acc_cusparse_spmm *plan, const void *d_B, void *d_C, void *stream);
void acc_cusparse_spmm_destroy(acc_cusparse_spmm *plan);

/* ---- BitTCF built on the device (bittcf_build.cu) ---------------------- */

/* A canonical CSR (no duplicate (row, column); rows may be unsorted) and a row permutation
 * (new -> old, a valid permutation: the caller checks it; NULL = identity).  The CSR is on the
 * device, or, where the three d_ pointers are NULL, on the host (h_ pointers): the build then
 * uploads it into temporaries of the pool, in one stream-ordered pass, and frees them. */
typedef struct acc_bittcf_gpu_input {
    int64_t m, k, nnz;
    const int64_t *d_row_offsets;    /* [m+1], device */
    const int32_t *d_column_indices; /* [nnz], device */
    const float *d_values;           /* [nnz], device */
    const int64_t *d_perm;           /* [m], device, or NULL */
    const int64_t *h_row_offsets;    /* [m+1], host (used when the d_ CSR pointers are NULL) */
    const int32_t *h_column_indices; /* [nnz], host */
    const float *h_values;           /* [nnz], host */
    int method; /* ACC_BITTCF_GPU_AUTO (0): ranks up to ACC_BITTCF_GPU_RANKS_MAX nonzeros, else the sort */
    int validate; /* the host CSR was not checked (acc_csr_check): the device checks it before any step
                   * reads through it and returns ACC_ERR_ROW_OFFSETS or ACC_ERR_COLUMN_INDEX as that
                   * check would; any order of columns is taken (duplicates: ACC_ERR_NOT_CANONICAL).
                   * The caller must pass the h_ pointers, with nnz = h_row_offsets[m] and nnz
                   * entries of h_column_indices and h_values readable (only those are read). */
} acc_bittcf_gpu_input;

/* acc_bittcf_gpu_input.method (bittcf_build.cu's header): the same arrays either way. */
enum { ACC_BITTCF_GPU_AUTO = 0, ACC_BITTCF_GPU_SORT = 1, ACC_BITTCF_GPU_RANKS = 2 };
/* AUTO takes the ranks up to this many nonzeros: there the sort's fixed host cost dominates. */
#define ACC_BITTCF_GPU_RANKS_MAX ((int64_t)1 << 20)

/* The caller provides d_window_offsets (device) and h_window_offsets (host), both [W+1] with
 * W = ceil(m / 8), and keep_blocks; the build cudaMalloc's the rest (the caller frees them):
 * d_block_meta [12 * num_blocks] int32 and d_values_tf32 [nnz] (the TF32 kernel's inputs), and
 * with keep_blocks the BitTCF arrays themselves, as the C builder makes them:
 * d_block_cols [8 * num_blocks], d_block_mask [num_blocks], d_block_value_offsets
 * [num_blocks + 1], d_values [nnz].  Every allocation is at least one element.
 * defer_sync: instead of synchronising at the end, record `ready` (a cudaEvent_t) on the stream
 * after the last step; the caller must acc_cuda_event_wait (or acc_cuda_event_destroy) it, and
 * wait before it uses the outputs on another stream or frees them without a device sync. */
typedef struct acc_bittcf_gpu_output {
    int64_t *d_window_offsets;
    int64_t *h_window_offsets;
    int keep_blocks;
    int defer_sync;
    void *ready;
    int32_t *d_block_cols;
    uint64_t *d_block_mask;
    int64_t *d_block_value_offsets;
    float *d_values;
    int32_t *d_block_meta;
    float *d_values_tf32;
    int64_t num_blocks;
    int method_used; /* set by the build: ACC_BITTCF_GPU_SORT or ACC_BITTCF_GPU_RANKS */
    int canonical;   /* set by a build that succeeded: with validate, 1 where every row's columns
                      * ascend strictly (the CSR is canonical), else 0; without validate, 1 */
    int64_t *d_identity_perm; /* [m], device, or NULL: the caller's; the build writes 0..m-1 into it (a plan
                               * without reordering: the TF32 kernel's perm, with no launch of its own) */
    int keep_csr; /* set by the caller: a build that uploads the host CSR itself keeps that upload in d_csr */
    void *d_csr;  /* set by the build (keep_csr, a host CSR, nnz > 0; else NULL): one pool allocation, the
                   * caller's  to free, holding int64 row offsets [m+1], int32 columns [nnz] and float32 values
                   * [nnz] back to  back, as given (the values not rounded), in the build's stream order */
} acc_bittcf_gpu_output;

/* Builds BitTCF on `stream`, bit-identical to acc_bittcf_count + acc_bittcf_fill, and the TF32
 * kernel's packed metadata and TF32-rounded values; returns after the device finished (it
 * synchronises the stream), or with defer_sync once the window offsets are on the host and the
 * rest is queued (an error of the queued steps then shows at the event's wait).  O(nnz log m) work: one radix
 * sort, about 40 bytes of device temporaries per nonzero; or (in->method, small matrices) ranks from binary
 * searches in the rows, about 17 bytes per nonzero, no sort (bittcf_build.cu's header).  ACC_ERR_NOT_CANONICAL for a duplicate entry,
 * ACC_ERR_TOO_LARGE when (window, column, row) do not fit 64 bits, ACC_ERR_DEVICE_MEMORY when out of memory
 * (nothing is left allocated on any error). */
int acc_bittcf_gpu_build(const acc_bittcf_gpu_input *in, acc_bittcf_gpu_output *out, void *stream);
/* BSR16's blocks per 16-row block row (windows 2r and 2r + 1) of a BitTCF built on the device, from its
 * packed metadata (12 int32 a block) and window offsets (W + 1): counts[r], ceil(W / 2) of them, equal to
 * acc_bsr16_count's under the same permutation (half plans' format model).  On `stream`, no wait. */
int acc_bittcf_bsr16_count(const int32_t *d_block_meta, const int64_t *d_window_offsets, int64_t W,
                           int64_t num_blocks, int64_t *d_counts, void *stream);
/* A host-to-device copy of acc_h2d_staged. */
typedef struct acc_h2d_segment {
    void *dst;       /* device */
    const void *src; /* host, pageable */
    size_t bytes;
} acc_h2d_segment;

/* Copies every segment on `stream` through the library's pinned staging chunks (cuda/staging.cu):
 * the host's threads fill a chunk while the previous one's DMA runs.  The host arrays may be
 * freed on return; the copies are in stream order before later work on `stream`. */
int acc_h2d_staged(const acc_h2d_segment *segs, int nseg, void *stream);
/* A device-to-host copy of acc_d2h_staged. */
typedef struct acc_d2h_segment {
    void *dst;       /* host, pageable */
    const void *src; /* device */
    size_t bytes;
} acc_d2h_segment;

/* Copies every segment to the host through the library's pinned staging chunks: the DMAs of a
 * chunk's segments on `stream`, one synchronisation of `stream` per chunk, then the host copies;
 * returns when every byte is in place (two pageable copies and a synchronisation cost three waits). */
int acc_d2h_staged(const acc_d2h_segment *segs, int nseg, void *stream);

/* A 1 KiB slot of mapped pinned host memory (the same address on every device: unified addressing),
 * 64-byte aligned, that kernels may write to directly; ACC_ERR_UNSUPPORTED without unified addressing.
 * Slots come from 64 KiB slabs kept for the process.  Free a slot only when no kernel writes it. */
int acc_cuda_host_slot(void **slot);
void acc_cuda_host_slot_free(void *slot);
/* Waits for an event of acc_bittcf_gpu_build's defer_sync and destroys it (NULL: nothing);
 * returns the status of the work it marks. */
int acc_cuda_event_wait(void *event);
/* Destroys such an event without waiting (its resources go when the work is done). */
void acc_cuda_event_destroy(void *event);
/* d_perm[i] = i for i < n (the identity permutation), on `stream`. */
int acc_cuda_fill_identity(int64_t *d_perm, int64_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* ACCSPMM_CUDA_H */
