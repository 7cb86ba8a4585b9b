/* acc_csr_check.c -- validation of a CSR view, so no malformed array can
 * make a later kernel read or write out of bounds. */
#include "acc_internal.h"

acc_status acc_csr_check(const acc_csr *A, int *canonical) {
    if (canonical) *canonical = 0;
    if (!A || A->m < 0 || A->k < 0 || A->k > INT32_MAX || !A->row_offsets) return ACC_ERR_INVALID_ARGUMENT;
    const int64_t m = A->m, k = A->k;
    const int64_t *rp = A->row_offsets;
    if (rp[0] != 0) return ACC_ERR_ROW_OFFSETS;
    const int64_t nnz = rp[m];
    if (nnz < 0) return ACC_ERR_ROW_OFFSETS;
    if (nnz > 0 && !A->column_indices) return ACC_ERR_INVALID_ARGUMENT;

    /* Offsets first: only once they are monotone is indexing by them safe. */
    int bad_offsets = 0;
#pragma omp parallel for reduction(| : bad_offsets) schedule(static) num_threads(acc_threads_for(m))
    for (int64_t i = 0; i < m; i++)
        bad_offsets |= rp[i + 1] < rp[i];
    if (bad_offsets) return ACC_ERR_ROW_OFFSETS;

    const int32_t *ci = A->column_indices;
    int bad_index = 0, unsorted = 0;
#pragma omp parallel for reduction(|                                                                         \
                                   : bad_index, unsorted) schedule(dynamic, 1024)                            \
    num_threads(acc_threads_for(m + nnz))
    for (int64_t i = 0; i < m; i++) {
        int32_t prev = -1;
        for (int64_t p = rp[i]; p < rp[i + 1]; p++) {
            int32_t c = ci[p];
            bad_index |= (c < 0) | ((int64_t)c >= k);
            unsorted |= c <= prev;
            prev = c;
        }
    }
    if (bad_index) return ACC_ERR_COLUMN_INDEX;
    if (canonical) *canonical = !unsorted;
    return ACC_SUCCESS;
}
