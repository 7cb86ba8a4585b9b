/*
 * tf32_spmm.h -- launcher of the TF32 Tensor-Core BitTCF SpMM (tf32_spmm.cu).
 * All pointers are device pointers; lengths in brackets.
 */
#ifndef ACC_TF32_SPMM_H
#define ACC_TF32_SPMM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct acc_tf32_args {
    int64_t m, k, n;                     /* A is m x k, B k x n, C m x n (row-major) */
    int64_t num_windows;                 /* ceil(m / 8) */
    const int64_t *perm;                 /* [m] new -> old row */
    const int64_t *window_offsets;       /* [num_windows + 1] */
    const int32_t *block_cols;           /* [8 * blocks], -1 = padding */
    const uint64_t *block_mask;          /* [blocks] */
    const int64_t *block_value_offsets;  /* [blocks + 1] */
    const float *values;                 /* [nnz], TF32-rounded */
    /* Load-balanced schedule (all NULL / 0 = one work item per whole window):
     * segments[4 * s] = {window, first block, end block, slot (-1: write C directly)},
     * work item i = segments item_offsets[i] .. item_offsets[i+1]-1 (one warp each),
     * split_windows[3 * j] = {window, first slot, end slot} summed by the reduce kernel,
     * workspace [slots * 8 * n] holds the partials of split windows. */
    const int64_t *segments;
    const int64_t *item_offsets;
    int64_t num_items;
    const int64_t *split_windows;
    int64_t num_split_windows;
    float *workspace;
    const float *B;                      /* [k * n], 16-byte aligned for the vector path */
    float *C;                            /* [m * n] */
} acc_tf32_args;

/* Launches C = A @ B on `stream` (cudaStream_t, NULL = default); asynchronous. */
int acc_tf32_spmm(const acc_tf32_args *args, void *stream);

#ifdef __cplusplus
}
#endif

#endif
