/* acc_pattern_transpose.c -- the pattern of A^T (rows of each column). */
#include "acc_internal.h"

acc_status acc_pattern_transpose(const acc_csr *A, int64_t *col_offsets, int32_t *rows) {
    if (!A || !col_offsets || !rows || A->m < 0 || A->k < 0) return ACC_ERR_INVALID_ARGUMENT;
    if (A->m > INT32_MAX) return ACC_ERR_TOO_LARGE;
    const int64_t m = A->m, k = A->k, *rp = A->row_offsets;
    const int32_t *ci = A->column_indices;
    memset(col_offsets, 0, (size_t)(k + 1) * sizeof(int64_t));
    for (int64_t p = 0; p < rp[m]; p++)
        col_offsets[ci[p] + 1]++;
    for (int64_t j = 0; j < k; j++)
        col_offsets[j + 1] += col_offsets[j];
    /* fill in row order so each column's rows come out ascending; the
     * offsets are shifted by one slot while filling and restored after */
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = rp[i]; p < rp[i + 1]; p++)
            rows[col_offsets[ci[p]]++] = (int32_t)i;
    for (int64_t j = k; j > 0; j--)
        col_offsets[j] = col_offsets[j - 1];
    col_offsets[0] = 0;
    return ACC_SUCCESS;
}
