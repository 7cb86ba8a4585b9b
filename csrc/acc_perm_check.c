/* acc_perm_check.c -- is perm a permutation of [0, m)? */
#include "acc_internal.h"

acc_status acc_perm_check(const int64_t *perm, int64_t m) {
    acc_status status = ACC_SUCCESS;
    unsigned char *seen = NULL;
    if (m < 0 || (m > 0 && !perm)) return ACC_ERR_INVALID_ARGUMENT;
    seen = acc_mem_alloc((size_t)m, 1);
    if (!seen) return ACC_ERR_OUT_OF_MEMORY;
    memset(seen, 0, (size_t)m);
    for (int64_t i = 0; i < m; i++) {
        int64_t r = perm[i];
        if (r < 0 || r >= m || seen[r]) {
            status = ACC_ERR_PERMUTATION;
            goto done;
        }
        seen[r] = 1;
    }
done:
    acc_mem_free(seen);
    return status;
}
