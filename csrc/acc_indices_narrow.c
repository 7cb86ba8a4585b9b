/* acc_indices_narrow.c -- int64 column indices to int32, range-checked. */
#include "acc_internal.h"

acc_status acc_indices_narrow(const int64_t *in, int64_t n, int64_t k, int32_t *out) {
    if (n < 0 || k < 0 || k > INT32_MAX || (n > 0 && (!in || !out))) return ACC_ERR_INVALID_ARGUMENT;
    int bad = 0;
#pragma omp parallel for num_threads(acc_threads_for(n)) reduction(| : bad) schedule(static)
    for (int64_t p = 0; p < n; p++) {
        int64_t c = in[p];
        bad |= (c < 0) | (c >= k);
        out[p] = (int32_t)c; /* garbage when bad; the status says so */
    }
    return bad ? ACC_ERR_COLUMN_INDEX : ACC_SUCCESS;
}
