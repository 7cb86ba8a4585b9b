/* acc_reorder_degree.c -- rows by nnz, descending (the "degree" baseline). */
#include "acc_internal.h"

acc_status acc_reorder_degree(const acc_csr *A, int64_t *perm) {
    if (!A || !perm || A->m < 0 || !A->row_offsets) return ACC_ERR_INVALID_ARGUMENT;
    return acc_order_by_length(A->row_offsets, A->m, 0, 0, perm);
}
